//! One run of the agent — `cert-agent renew`, `issue`, `reissue`, `install`, and each tick of
//! the daemon: the run lock, the certificates chosen, the engine alone or as a fleet's member,
//! then what monitoring is told.

use std::time::Duration;

pub(crate) mod express;

use anyhow::Result;

use crate::config::Config;
use crate::engine::{self, RunOptions, RunReport, RunStats};
use crate::store::{Records, Store, StoreError};

/// Runs once over the selected certificates. Takes the run lock for its whole duration (failing
/// at once with [`crate::store::StoreError::Locked`] when another process holds it). On a
/// fleet host ([`crate::fleet`]) the run installs what the fleet has and, when this host can
/// take the lead, does the fleet's work.
pub(crate) async fn once(config: &Config, opts: &RunOptions) -> Result<RunReport> {
    once_waiting(config, opts, Duration::ZERO).await
}

/// The state directory's lock for an operator's command, waiting up to `lock_wait` while
/// another process holds it and saying which (a warning on stderr, once).
pub(crate) async fn lock(
    store: &Store,
    lock_wait: Duration,
) -> Result<crate::store::RunLock, StoreError> {
    crate::store::lock_waiting(store, lock_wait, |e| {
        if let StoreError::Locked { pid, .. } = e {
            tracing::warn!(
                "the state directory {} is locked by {}; waiting up to {} s for it \
                 (--lock-wait)",
                store.dir().display(),
                holder(pid),
                lock_wait.as_secs()
            );
        }
    })
    .await
}

/// [`once`], waiting up to `lock_wait` for the run lock while another process holds it (an
/// operator's command beside the daemon's short synchronisations), saying which process holds
/// it (a warning on stderr). When the wait ends, the [`crate::store::StoreError::Locked`] names the
/// holder then.
pub(crate) async fn once_waiting(
    config: &Config,
    opts: &RunOptions,
    lock_wait: Duration,
) -> Result<RunReport> {
    let store = Store::open(&config.agent.state_dir)?;
    let _lock = lock(&store, lock_wait).await?;
    let started_at = opts.clock.now();
    let started = tokio::time::Instant::now();
    let certs = config.select(&opts.names)?;
    let (mut report, requests, records) = if config.fleet.is_some() && !opts.dry_run {
        let ran = crate::fleet::run(config, opts, &store, &certs).await?;
        (ran.report, ran.requests, ran.records)
    } else {
        let done = engine::run(config, &store, opts, &certs, None).await;
        (done.report, done.requests, Records::new())
    };
    report.stats = Some(RunStats {
        started_at,
        duration: started.elapsed(),
        requests,
    });
    store.debug_check_held(&records, "after the fleet run");
    if !opts.dry_run {
        crate::monitor::after_run(config, &store, (&report, &records), opts.clock.now()).await;
    }
    Ok(report)
}

/// The process holding the lock: its PID and, when `/proc` tells, its command line (a
/// cert-agent command line holds no secret), shortened.
fn holder(pid: &str) -> String {
    let cmdline = pid
        .parse::<u32>()
        .ok()
        .and_then(|p| std::fs::read(format!("/proc/{p}/cmdline")).ok())
        .map(|b| {
            let args: Vec<String> = b
                .split(|&c| c == 0)
                .filter(|a| !a.is_empty())
                .map(|a| String::from_utf8_lossy(a).into_owned())
                .collect();
            args.join(" ")
        })
        .filter(|c| !c.is_empty());
    match cmdline {
        Some(c) => {
            let c: String = c.chars().filter(|ch| !ch.is_control()).take(120).collect();
            format!("PID {pid} ({c})")
        }
        None => format!("PID {pid}"),
    }
}
