//! The DCV fetcher: every ~200 ms (real time) it lets the state tick, takes the HTTP file checks
//! that are due and fetches each file from `127.0.0.1:<dcv port>` with the domain as `Host`
//! header, as a CA's validator would, then reports what it got back to the state. The port of
//! each fetch comes from the load balancer ([`crate::balancer`]); in its strictest mode a check
//! fetches from every port and passes only when all of them serve the same file.

use std::net::{Ipv4Addr, SocketAddr};
use std::sync::Arc;
use std::time::Duration;

use tokio::sync::watch;
use tokio::task::JoinSet;

use crate::wire::DcvCheck;
use crate::world::{Shared, guarded};

/// Real time between two rounds.
pub const ROUND: Duration = Duration::from_millis(200);
/// Per-fetch timeout.
pub const FETCH_TIMEOUT: Duration = Duration::from_secs(5);
/// Longest body read; the rest is ignored.
pub const MAX_BODY: usize = 64 * 1024;

/// Runs rounds until `shutdown` turns true. Also persists the state about once a second when
/// it changed (time-driven transitions happen without any call).
pub(crate) async fn run(shared: Arc<Shared>, mut shutdown: watch::Receiver<bool>) {
    let mut rounds: u64 = 0;
    loop {
        tokio::select! {
            _ = tokio::time::sleep(ROUND) => {}
            _ = shutdown.changed() => return,
        }
        if *shutdown.borrow() {
            return;
        }
        tokio::select! {
            _ = round(&shared) => {}
            _ = shutdown.changed() => return,
        }
        rounds += 1;
        if rounds.is_multiple_of(5) {
            let s = shared.clone();
            let _ = tokio::task::spawn_blocking(move || s.persist(false)).await;
        }
    }
}

/// One round: tick, take due checks, fetch them all (concurrently, outside the lock), record.
pub(crate) async fn round(shared: &Arc<Shared>) {
    let checks = {
        let mut w = shared.lock();
        let now = w.now();
        w.tick(now);
        let state = &mut w.state;
        let checks = guarded(|| state.due_dcv_checks(now)).unwrap_or_else(|e| {
            tracing::error!("due_dcv_checks failed: {e}");
            Vec::new()
        });
        let dcv = &mut w.dcv;
        checks
            .into_iter()
            .map(|check| {
                let ports = dcv.pick(check.https);
                (check, ports)
            })
            .collect::<Vec<_>>()
    };
    if checks.is_empty() {
        return;
    }
    let mut set = JoinSet::new();
    for (check, ports) in checks {
        set.spawn(async move {
            let result = fetch_from(&check, &ports).await;
            (check, ports, result)
        });
    }
    while let Some(joined) = set.join_next().await {
        let Ok((check, ports, result)) = joined else {
            continue;
        };
        match &result {
            Ok(body) => tracing::debug!(
                "DCV fetch {}://{}{} (ports {ports:?}): {} bytes",
                if check.https { "https" } else { "http" },
                check.domain,
                check.path,
                body.len()
            ),
            Err(e) => tracing::debug!("DCV fetch {}{}: {e}", check.domain, check.path),
        }
        let mut guard = shared.lock();
        let w = &mut *guard;
        let now = w.now();
        let (state, ca) = (&mut w.state, &w.ca);
        if let Err(e) = guarded(|| state.record_dcv_fetch(&check, result, now, ca)) {
            tracing::error!("record_dcv_fetch failed: {e}");
        }
    }
}

/// Fetches one check's file from the ports the balancer picked: one port, or every port (then
/// each must answer 200 with the same content; the first failure names its port).
pub async fn fetch_from(check: &DcvCheck, ports: &[u16]) -> Result<Vec<u8>, String> {
    let Some((&first, rest)) = ports.split_first() else {
        return Err("no DCV port is configured".to_string());
    };
    if rest.is_empty() {
        return fetch(check, first).await;
    }
    let mut set = JoinSet::new();
    for (i, &port) in ports.iter().enumerate() {
        let check = check.clone();
        set.spawn(async move { (i, port, fetch(&check, port).await) });
    }
    let mut results = Vec::with_capacity(ports.len());
    while let Some(joined) = set.join_next().await {
        match joined {
            Ok(r) => results.push(r),
            Err(e) => return Err(format!("a DCV fetch failed: {e}")),
        }
    }
    results.sort_by_key(|(i, _, _)| *i);
    let mut served: Option<(u16, Vec<u8>)> = None;
    for (_, port, result) in results {
        let body = result.map_err(|e| format!("not served by every host: port {port}: {e}"))?;
        match &served {
            Some((p, b)) if *b != body => {
                return Err(format!(
                    "not the same file on every host: ports {p} and {port} serve different content"
                ));
            }
            Some(_) => {}
            None => served = Some((port, body)),
        }
    }
    Ok(served.map(|(_, b)| b).unwrap_or_default())
}

/// Fetches one file: `http(s)://<domain>:<port><path>` resolved to 127.0.0.1, `Host: <domain>`
/// (SNI too for HTTPS), peer certificate not verified, no redirects, 5 s timeout, body capped
/// at [`MAX_BODY`]. Anything but a 200 is an error naming what happened.
pub async fn fetch(check: &DcvCheck, port: u16) -> Result<Vec<u8>, String> {
    let scheme = if check.https { "https" } else { "http" };
    let addr = SocketAddr::from((Ipv4Addr::LOCALHOST, port));
    let host = check.domain.trim_end_matches('.');
    let by_name = format!("{scheme}://{host}:{port}{}", check.path);
    let (url, resolve) = match reqwest::Url::parse(&by_name) {
        Ok(u) if u.host_str().is_some() => (u, true),
        _ => (
            reqwest::Url::parse(&format!("{scheme}://127.0.0.1:{port}{}", check.path))
                .map_err(|e| format!("bad check path '{}': {e}", check.path))?,
            false,
        ),
    };
    let mut builder = reqwest::Client::builder()
        .redirect(reqwest::redirect::Policy::none())
        .timeout(FETCH_TIMEOUT)
        .connect_timeout(FETCH_TIMEOUT)
        .danger_accept_invalid_certs(true)
        .no_proxy()
        .user_agent("partner-sandbox-dcv/1");
    if resolve {
        builder = builder.resolve(host, addr);
    }
    let client = builder
        .build()
        .map_err(|e| format!("could not build the DCV client: {e}"))?;
    let mut resp = client
        .get(url)
        .header(http::header::HOST, host)
        .send()
        .await
        .map_err(|e| format!("could not fetch {scheme}://{host}{}: {e:#}", check.path))?;
    let status = resp.status();
    if status.is_redirection() {
        let to = resp
            .headers()
            .get(http::header::LOCATION)
            .and_then(|v| v.to_str().ok())
            .unwrap_or("?");
        return Err(format!("HTTP {status}: redirect to '{to}' not followed"));
    }
    if status != reqwest::StatusCode::OK {
        return Err(format!("HTTP {status}"));
    }
    let mut body = Vec::new();
    while let Some(chunk) = resp
        .chunk()
        .await
        .map_err(|e| format!("reading {scheme}://{host}{}: {e}", check.path))?
    {
        let room = MAX_BODY - body.len();
        body.extend_from_slice(&chunk[..chunk.len().min(room)]);
        if body.len() >= MAX_BODY {
            break;
        }
    }
    Ok(body)
}
