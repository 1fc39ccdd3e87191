//! Watching what the engine did and what the web servers serve: `cert-agent check` (the
//! monitoring plugin), `cert-agent status` from local state, what the verify addresses were
//! last seen serving, the Prometheus metrics, and the operator's notifications
//! (`notify_command`, `notify_url`) after each run.
//!
//! Bottom up: `served` (handshakes and what they saw), `check`, `status`, `metrics`,
//! `notify`, `announce`. The room reads the engine's outcomes and its start-phase view of
//! the disk; the engine never calls it.

mod announce;
pub mod check;
mod metrics;
mod notify;
mod served;
pub mod status;

pub use check::{CheckOptions, CheckReport, Level, check};
pub use metrics::text as metrics_text;
pub use status::{StatusRow, add_served, collect as status_rows};

use crate::config::Config;
use crate::engine::RunReport;
use crate::store::Store;

/// After a run that changed or could have changed something: the operator's program, the
/// events for `notify_url`, and the metrics file.
pub async fn after_run(config: &Config, store: &Store, report: &RunReport) {
    notify::notify(config, report).await;
    announce::announce(config, store, report).await;
    metrics::write(config, store, report);
}
