//! One run of the agent — `cert-agent renew`, `issue`, `reissue`, `install`, and each tick of
//! the daemon: the run lock, the certificates chosen, the engine alone or as a fleet's member,
//! then what monitoring is told.

use anyhow::Result;

use crate::config::Config;
use crate::engine::{self, RunOptions, RunReport, RunStats};
use crate::store::Store;

/// Runs once over the selected certificates. Takes the run lock for its whole duration. On a
/// fleet host ([`crate::fleet`]) the run installs what the fleet has and, when this host can
/// take the lead, does the fleet's work.
pub async fn once(config: &Config, opts: &RunOptions) -> Result<RunReport> {
    let store = Store::open(&config.agent.state_dir)?;
    let _lock = store.lock()?;
    let started_at = opts.clock.now();
    let started = tokio::time::Instant::now();
    let certs = config.select(&opts.names)?;
    let (mut report, requests) = if config.fleet.is_some() && !opts.dry_run {
        crate::fleet::run(config, opts, &store, &certs).await?
    } else {
        let done = engine::run(config, &store, opts, &certs, None).await;
        (done.report, done.requests)
    };
    report.stats = Some(RunStats {
        started_at,
        duration: started.elapsed(),
        requests,
    });
    if !opts.dry_run {
        crate::monitor::after_run(config, &store, &report, opts.clock.now()).await;
    }
    Ok(report)
}
