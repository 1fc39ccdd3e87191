//! `[agent] notify_url`: the run's events as one JSON `POST` — a certificate installed, a
//! certificate failing, recovering, its subscription ending or a renewal order prepared —
//! each announced once per change of state, not on every run. Delivery is retried (three
//! attempts, 10 s each); what was announced is remembered in `state_dir/announced.json` only
//! once delivered, so an undelivered change is announced again by the next run. The payload
//! carries no secret: names, IDs, serials, dates and the run's own messages.

use std::collections::BTreeMap;
use std::time::Duration;

use serde::{Deserialize, Serialize};
use time::OffsetDateTime;

use crate::config::Config;
use crate::store::Store;

use super::report::{Outcome, RunReport};

/// Attempts of one delivery.
const ATTEMPTS: u32 = 3;
/// Time limit of one attempt.
const ATTEMPT_TIMEOUT: Duration = Duration::from_secs(10);
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
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
struct Event {
    /// The configured certificate.
    certificate: String,
    /// `installed`, `failed`, `recovered`, `expiring` or `renewal_prepared`.
    event: &'static str,
    /// What happened, as the run reported it.
    message: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    certificate_id: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    serial: Option<String>,
    #[serde(
        skip_serializing_if = "Option::is_none",
        with = "time::serde::rfc3339::option"
    )]
    not_after: Option<OffsetDateTime>,
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

/// The events of `report` against the states last announced; the states after it.
fn events(
    report: &RunReport,
    announced: &BTreeMap<String, State>,
) -> (Vec<Event>, BTreeMap<String, State>) {
    let mut next = announced.clone();
    let mut out = Vec::new();
    for c in &report.certificates {
        let before = announced.get(&c.name).copied();
        let event = |event: &'static str, message: String| Event {
            certificate: c.name.clone(),
            event,
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

/// Posts the run's events to `notify_url`, when configured and when there is anything new.
pub(super) async fn announce(config: &Config, store: &Store, report: &RunReport) {
    let Some(url) = &config.agent.notify_url else {
        return;
    };
    let path = store.dir().join(STATE_FILE);
    let announced: BTreeMap<String, State> = std::fs::read(&path)
        .ok()
        .and_then(|b| serde_json::from_slice(&b).ok())
        .unwrap_or_default();
    let (events, next) = events(report, &announced);
    if events.is_empty() {
        return;
    }
    let payload = Payload {
        source: "cert-agent",
        host: std::fs::read_to_string("/proc/sys/kernel/hostname")
            .map(|h| h.trim().to_owned())
            .unwrap_or_default(),
        time: super::context::now(),
        events: &events,
    };
    if deliver(url, &payload).await {
        match serde_json::to_vec(&next) {
            Ok(bytes) => {
                if let Err(e) = crate::fsutil::write_atomic(&path, &bytes, 0o600) {
                    tracing::warn!("could not record the announced events: {e}");
                }
            }
            Err(e) => tracing::warn!("could not record the announced events: {e}"),
        }
    }
}

/// Posts `payload`; `true` once a 2xx answer came. 5xx and transport errors are retried, other
/// statuses are not.
async fn deliver(url: &str, payload: &Payload<'_>) -> bool {
    let client = match reqwest::Client::builder()
        .user_agent(crate::api::user_agent())
        .redirect(reqwest::redirect::Policy::none())
        .timeout(ATTEMPT_TIMEOUT)
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
    use crate::renew::report::CertReport;

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
            let (events, next) = events(&report(outcome, warning), &state);
            let got: Vec<&str> = events.iter().map(|e| e.event).collect();
            assert_eq!(got, want, "row {i}");
            state = next;
        }
    }
}
