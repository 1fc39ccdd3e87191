//! Watching what the engine did and what the web servers serve: `cert-agent check` (the
//! monitoring plugin), `cert-agent status` from local state, what the verify addresses were
//! last seen serving, the Prometheus metrics, and the operator's notifications
//! (`notify_command`, `notify_url`) after each run.
//!
//! Bottom up: `served` (handshakes and what they saw), `check`, `status`, `metrics`,
//! `events` (the one source of notifications), `notify`, `announce`. The room reads the engine's outcomes and its start-phase view of
//! the disk; the engine never calls it.

mod announce;
pub mod check;
mod events;
mod metrics;
pub mod money;
mod notify;
mod served;
pub mod status;

pub use check::{CheckOptions, CheckReport, Level, check};
#[doc(hidden)]
pub use events::fuzz_announced;
pub use metrics::text as metrics_text;
pub use status::{StatusRow, add_served, collect as status_rows};

use crate::config::Config;
use crate::engine::RunReport;
use crate::store::Store;

/// Whether the run talked to the Partner API (a run that did not is not made to, for the
/// metrics' balance: they keep the figures last read).
fn report_made_calls(report: &RunReport) -> bool {
    report
        .stats
        .as_ref()
        .is_some_and(|s| s.requests.iter().any(|r| r.count > 0))
}

/// What the events need beyond the run's report, for its certificates: the retired ones the
/// configuration still lists, and the renewals whose fresh validation needs a person within
/// `[validation] warning_days`.
fn facts(
    config: &Config,
    store: &Store,
    report: &RunReport,
    now: time::OffsetDateTime,
) -> events::Facts {
    let mut facts = events::Facts::default();
    for cert in config
        .certificates
        .iter()
        .filter(|c| report.certificates.iter().any(|r| r.name == c.name))
    {
        let Ok(rec) = store.load(&cert.name) else {
            continue;
        };
        if let Some(archive) = store.retired_and_idle(&cert.name, &rec) {
            facts
                .retired
                .insert(cert.name.clone(), archive.display().to_string());
            continue;
        }
        if let Some(fresh) = crate::engine::forecast::next_fresh_validation(config, cert, &rec, now)
            .filter(|f| check::validation_level(f, now, config.validation.warning_days).is_some())
        {
            facts.person_needed.insert(cert.name.clone(), fresh);
        }
    }
    facts
}

/// After `cert-agent retire NAME`: its `retired` event (`message`: what was done) to
/// `notify_command` and `notify_url`, once — a run that finds NAME retired later says nothing
/// more.
pub async fn after_retire(
    config: &Config,
    store: &Store,
    name: &str,
    certificate_id: Option<u64>,
    archive: &std::path::Path,
    message: String,
    now: time::OffsetDateTime,
) {
    if config.agent.notify_command.is_none() && config.agent.notify_url.is_none() {
        return;
    }
    let mut log = events::Announced::load(store);
    let archive = archive.display().to_string();
    let new: Vec<_> = log
        .retire(name, &archive, certificate_id, message, now)
        .into_iter()
        .collect();
    let report = RunReport::default();
    notify::notify(config, &report, &new).await;
    announce::announce(config, &mut log, &new, now).await;
    log.save(store);
}

/// After a run: its events (each change of a certificate's state, once) to the operator's
/// `notify_command` and `notify_url`, then the metrics file.
pub async fn after_run(
    config: &Config,
    store: &Store,
    report: &RunReport,
    now: time::OffsetDateTime,
) {
    if config.agent.notify_command.is_some() || config.agent.notify_url.is_some() {
        let mut log = events::Announced::load(store);
        let new = log.advance(report, &facts(config, store, report, now), now);
        notify::notify(config, report, &new).await;
        announce::announce(config, &mut log, &new, now).await;
        log.save(store);
    }
    if (config.agent.metrics_file.is_some() || config.agent.metrics_listen.is_some())
        && report_made_calls(report)
    {
        money::refresh_after_run(config, now).await;
    }
    metrics::write(config, store, report);
}
