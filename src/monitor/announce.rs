//! `[agent] notify_url`: the run's events as one JSON `POST` — a certificate installed, a
//! certificate failing, recovering, its subscription ending or a renewal order prepared —
//! each announced once per change of state, not on every run. Delivery is retried (three
//! attempts, each limited to `notify_timeout_secs`); the states announced and the events not
//! yet delivered are kept in `state_dir/announced.json`, so an undelivered event is posted
//! again, first, by the next run (at most [`KEPT`] of them are kept). The payload carries no
//! secret: names, IDs, serials, dates and the run's own messages.

use std::collections::BTreeMap;
use std::time::Duration;

use serde::{Deserialize, Serialize};
use time::OffsetDateTime;

use crate::config::Config;
use crate::store::Store;

use crate::engine::{Outcome, RunReport};

/// Attempts of one delivery.
const ATTEMPTS: u32 = 3;
/// Undelivered events kept for the next run (the oldest are dropped beyond this).
const KEPT: usize = 1000;
/// File of the announced states.
const STATE_FILE: &str = "announced.json";

/// What a certificate's last announced state was.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
enum State {
    Ok,
    Failed,
    Expiring,
    RenewalPrepared,
}

/// One event of the payload (see `docs/monitoring.md` for the schema).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
struct Event {
    /// The configured certificate.
    certificate: String,
    /// `installed`, `failed`, `recovered`, `expiring` or `renewal_prepared`.
    event: String,
    /// When the run that saw it ran.
    #[serde(with = "time::serde::rfc3339")]
    time: OffsetDateTime,
    /// What happened, as the run reported it.
    message: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    certificate_id: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    serial: Option<String>,
    #[serde(
        skip_serializing_if = "Option::is_none",
        default,
        with = "time::serde::rfc3339::option"
    )]
    not_after: Option<OffsetDateTime>,
}

/// `announced.json`: the state last announced per certificate, and the events no delivery
/// has taken yet.
#[derive(Debug, Default, Serialize, Deserialize)]
struct Announced {
    #[serde(default)]
    states: BTreeMap<String, State>,
    #[serde(default)]
    undelivered: Vec<Event>,
}

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

/// The events of `report` (a run at `now`) against the states last announced; the states
/// after it.
fn events(
    report: &RunReport,
    announced: &BTreeMap<String, State>,
    now: OffsetDateTime,
) -> (Vec<Event>, BTreeMap<String, State>) {
    let mut next = announced.clone();
    let mut out = Vec::new();
    for c in &report.certificates {
        let before = announced.get(&c.name).copied();
        let event = |event: &str, message: String| Event {
            certificate: c.name.clone(),
            event: event.to_owned(),
            time: now,
            message,
            certificate_id: None,
            serial: None,
            not_after: None,
        };
        let warned = c.warning.as_ref().map(|w| {
            if w.contains("renewal order is prepared") {
                (State::RenewalPrepared, w)
            } else {
                (State::Expiring, w)
            }
        });
        let (state, ev) = match &c.outcome {
            Outcome::Installed {
                certificate_id,
                serial,
                not_after,
            } => (
                State::Ok,
                Some(Event {
                    certificate_id: Some(*certificate_id),
                    serial: Some(serial.clone()),
                    not_after: Some(*not_after),
                    ..event("installed", c.line())
                }),
            ),
            Outcome::Failed { error } => (
                State::Failed,
                (before != Some(State::Failed)).then(|| event("failed", error.clone())),
            ),
            Outcome::Unchanged { .. } | Outcome::Pending { .. } => match warned {
                Some((state, w)) => (
                    state,
                    (before != Some(state)).then(|| {
                        let name = match state {
                            State::RenewalPrepared => "renewal_prepared",
                            _ => "expiring",
                        };
                        event(name, w.clone())
                    }),
                ),
                None => (
                    State::Ok,
                    (before == Some(State::Failed)).then(|| event("recovered", c.line())),
                ),
            },
            Outcome::Planned { .. } => continue,
        };
        out.extend(ev);
        next.insert(c.name.clone(), state);
    }
    (out, next)
}

/// Posts the run's events to `notify_url`, when configured and when there is anything new
/// (this run's events after those earlier runs could not deliver).
pub(super) async fn announce(config: &Config, store: &Store, report: &RunReport) {
    let Some(url) = &config.agent.notify_url else {
        return;
    };
    let path = store.dir().join(STATE_FILE);
    let before: Announced = std::fs::read(&path)
        .ok()
        .and_then(|b| serde_json::from_slice(&b).ok())
        .unwrap_or_default();
    let now = crate::clock::now();
    let (new, states) = events(report, &before.states, now);
    if new.is_empty() && before.undelivered.is_empty() {
        return;
    }
    let mut pending = before.undelivered;
    pending.extend(new);
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
    let delivered = deliver(url, &payload, timeout).await;
    if !delivered {
        tracing::warn!(
            "notify_url: {} event(s) not delivered; the next run posts them again",
            pending.len()
        );
    }
    let after = Announced {
        states,
        undelivered: if delivered { Vec::new() } else { pending },
    };
    match serde_json::to_vec(&after) {
        Ok(bytes) => {
            if let Err(e) = crate::fsutil::write_atomic(&path, &bytes, 0o600) {
                tracing::warn!("could not record the announced events: {e}");
            }
        }
        Err(e) => tracing::warn!("could not record the announced events: {e}"),
    }
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
            tracing::warn!("notify_url: {e}");
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
            Err(e) => tracing::warn!("notify_url: {e} (attempt {attempt})"),
        }
        if attempt < ATTEMPTS {
            tokio::time::sleep(Duration::from_millis(500) * 2u32.pow(attempt - 1)).await;
        }
    }
    false
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::engine::CertReport;

    fn report(outcome: Outcome, warning: Option<&str>) -> RunReport {
        RunReport {
            certificates: vec![CertReport {
                name: "www".into(),
                outcome,
                warning: warning.map(str::to_owned),
            }],
            stats: None,
        }
    }

    #[test]
    fn each_change_is_announced_once() {
        let failed = || Outcome::Failed {
            error: "could not read certificate 7".into(),
        };
        let fine = || Outcome::Unchanged {
            reason: "up to date".into(),
        };
        let mut state = BTreeMap::new();
        // rows: (outcome, warning, events announced)
        let rows: Vec<(Outcome, Option<&str>, Vec<&str>)> = vec![
            (fine(), None, vec![]),
            (failed(), None, vec!["failed"]),
            (failed(), None, vec![]),
            (fine(), None, vec!["recovered"]),
            (
                fine(),
                Some("the subscription ends on 2027-01-01 (50 days); …"),
                vec!["expiring"],
            ),
            (
                fine(),
                Some("the subscription ends on 2027-01-01 (49 days); …"),
                vec![],
            ),
            (
                fine(),
                Some("x: a renewal order is prepared (nothing is billed …)"),
                vec!["renewal_prepared"],
            ),
            (
                Outcome::Installed {
                    certificate_id: 7,
                    serial: "0A".into(),
                    not_after: OffsetDateTime::UNIX_EPOCH,
                },
                None,
                vec!["installed"],
            ),
            (fine(), None, vec![]),
        ];
        for (i, (outcome, warning, want)) in rows.into_iter().enumerate() {
            let (events, next) = events(
                &report(outcome, warning),
                &state,
                OffsetDateTime::UNIX_EPOCH,
            );
            let got: Vec<&str> = events.iter().map(|e| e.event.as_str()).collect();
            assert_eq!(got, want, "row {i}");
            state = next;
        }
    }
}
