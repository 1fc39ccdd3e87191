//! `agent.notify_command`: the operator's program, run after a run with new events
//! ([`super::events`]: a certificate installed, failing, recovered, revoked, retired,
//! expiring, a renewal order prepared, a fresh validation a person must do, a rollout this
//! host's failed proof halted — each once per change of state, the rule `notify_url` follows
//! too). It gets the run's JSON report on stdin with the events beside the certificates (after
//! `retire`, no certificates, its event).

use std::time::Duration;

use serde::Serialize;

use crate::config::Config;
use crate::engine::RunReport;

use super::events::Event;

/// What the command reads on stdin.
#[derive(Serialize)]
struct Summary<'a> {
    #[serde(flatten)]
    report: &'a RunReport,
    events: &'a [Event],
}

/// Runs `agent.notify_command` when `events` is not empty, with the run's report and the
/// events on stdin; stopped after 60 s, its output discarded.
pub(super) async fn notify(config: &Config, report: &RunReport, events: &[Event]) {
    let Some(command) = &config.agent.notify_command else {
        return;
    };
    if events.is_empty() {
        return;
    }
    let argv = command.argv();
    let Ok(summary) = serde_json::to_vec(&Summary { report, events }) else {
        return;
    };
    let cmd = crate::process::Command::new(&argv, Duration::from_secs(60)).stdin(&summary);
    match crate::process::run(cmd).await {
        Ok(done) if done.status.success() => {}
        Ok(done) => tracing::warn!("notify_command exited with {}", done.status_text()),
        Err(e) => tracing::warn!("notify_command {e}"),
    }
}
