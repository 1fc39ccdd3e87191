//! `agent.notify_command`: the operator's program, given the run's JSON summary on stdin when
//! something failed or needs attention.

use std::time::Duration;

use crate::config::Config;
use crate::engine::{Outcome, RunReport};

/// Runs `agent.notify_command` with a JSON summary on stdin when something failed or needs the
/// operator's attention.
pub(crate) async fn notify(config: &Config, report: &RunReport) {
    let Some(command) = &config.agent.notify_command else {
        return;
    };
    let attention = report
        .certificates
        .iter()
        .any(|c| matches!(c.outcome, Outcome::Failed { .. }) || c.warning.is_some());
    if !attention {
        return;
    }
    let argv = crate::engine::argv(command);
    let Ok(summary) = serde_json::to_vec(report) else {
        return;
    };
    let cmd = crate::process::Command::new(&argv, Duration::from_secs(60)).stdin(&summary);
    match crate::process::run(cmd).await {
        Ok(done) if done.status.success() => {}
        Ok(done) => tracing::warn!("notify_command exited with {}", done.status_text()),
        Err(e) => tracing::warn!("notify_command {e}"),
    }
}
