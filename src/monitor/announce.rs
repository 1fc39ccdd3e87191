//! `[agent] notify_url`: the run's events ([`super::events`]) as one JSON `POST`. Delivery is
//! retried (three attempts, each limited to `notify_timeout_secs`); the events not yet
//! delivered are kept with the announced states, so an undelivered event is posted again,
//! first, by the next run (at most [`KEPT`] of them are kept). The payload carries no secret:
//! names, IDs, serials, dates and the run's own messages. The URL itself is never logged (a
//! webhook URL often holds a token): each error is shown without it.

use std::time::Duration;

use serde::Serialize;
use time::OffsetDateTime;

use crate::config::Config;

use super::events::{Announced, Event};

/// Attempts of one delivery.
const ATTEMPTS: u32 = 3;
/// Undelivered events kept for the next run (the oldest are dropped beyond this).
const KEPT: usize = 1000;

/// The JSON document posted.
#[derive(Debug, Serialize)]
struct Payload<'a> {
    /// Always `cert-agent`.
    source: &'static str,
    /// The host the agent runs on.
    host: String,
    #[serde(with = "time::serde::rfc3339")]
    time: OffsetDateTime,
    events: &'a [Event],
}

/// Posts `new` (this run's events, after those earlier runs could not deliver) to
/// `notify_url`, when configured and when there is anything to post; what is not delivered
/// stays in `log` for the next run.
pub(super) async fn announce(
    config: &Config,
    log: &mut Announced,
    new: &[Event],
    now: OffsetDateTime,
) {
    let Some(url) = &config.agent.notify_url else {
        return;
    };
    if new.is_empty() && log.undelivered.is_empty() {
        return;
    }
    let mut pending = std::mem::take(&mut log.undelivered);
    pending.extend_from_slice(new);
    if pending.len() > KEPT {
        let dropped = pending.len() - KEPT;
        tracing::warn!("notify_url: {dropped} undelivered events dropped (the oldest)");
        pending.drain(..dropped);
    }
    let payload = Payload {
        source: "cert-agent",
        host: std::fs::read_to_string("/proc/sys/kernel/hostname")
            .map(|h| h.trim().to_owned())
            .unwrap_or_default(),
        time: now,
        events: &pending,
    };
    let timeout = Duration::from_secs(config.agent.notify_timeout_secs);
    if !deliver(url, &payload, timeout).await {
        tracing::warn!(
            "notify_url: {} event(s) not delivered; the next run posts them again",
            pending.len()
        );
        log.undelivered = pending;
    }
}

/// A delivery error without the URL, with its causes (refused, reset) after it.
fn error_text(e: reqwest::Error) -> String {
    let e = e.without_url();
    let mut text = e.to_string();
    let mut source = std::error::Error::source(&e);
    while let Some(cause) = source {
        text.push_str(&format!(": {cause}"));
        source = cause.source();
    }
    text
}

/// Posts `payload`, each attempt limited to `timeout`; `true` once a 2xx answer came. 5xx
/// answers, transport errors and timeouts are retried, other statuses are not.
async fn deliver(url: &str, payload: &Payload<'_>, timeout: Duration) -> bool {
    let client = match reqwest::Client::builder()
        .user_agent(crate::api::user_agent())
        .redirect(reqwest::redirect::Policy::none())
        .timeout(timeout)
        .build()
    {
        Ok(c) => c,
        Err(e) => {
            tracing::warn!("notify_url: {}", e.without_url());
            return false;
        }
    };
    for attempt in 1..=ATTEMPTS {
        match client.post(url).json(payload).send().await {
            Ok(r) if r.status().is_success() => return true,
            Ok(r) if !r.status().is_server_error() => {
                tracing::warn!("notify_url answered {}; not retried", r.status());
                return false;
            }
            Ok(r) => tracing::warn!("notify_url answered {} (attempt {attempt})", r.status()),
            Err(e) if e.is_timeout() => tracing::warn!(
                "notify_url: no answer within {} s (attempt {attempt})",
                timeout.as_secs()
            ),
            Err(e) => tracing::warn!("notify_url: {} (attempt {attempt})", error_text(e)),
        }
        if attempt < ATTEMPTS {
            tokio::time::sleep(Duration::from_millis(500) * 2u32.pow(attempt - 1)).await;
        }
    }
    false
}
