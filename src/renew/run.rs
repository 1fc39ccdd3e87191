//! One run of `cert-agent renew` / `issue` / `reissue` / `install`, phase by phase:
//!
//! 1. *Start* ([`super::start`]): for each selected certificate the planner picks one action
//!    from the stored record and the installed files (no API call when nothing is due); the
//!    action is started (order placed, reissue sent, renewal prepared) and the certificate
//!    either finishes or joins the waiting set. Up to `agent.concurrency` at once.
//! 2. *Poll* ([`super::poll`]): waiting certificates are checked until issued, or until the
//!    run's wait is over.
//! 3. *Install* ([`super::deploy`]): everything ready is installed in one transaction per web
//!    server (config test and reload once each), verified, and recorded.
//!
//! Each certificate is a [`Job`]: its record is read once and carried through the phases.
//! One certificate's failure never stops the others. Failures are recorded with a backoff
//! (1 h doubling to 24 h) so that a broken certificate does not call the API on every tick.

use std::collections::HashSet;

use anyhow::{Result, anyhow};
use futures_util::StreamExt;

use crate::config::{CertificateConfig, Config};
use crate::store::Store;

use super::context::{Ctx, RunOptions, stop_requested};
use super::deploy::{self, Ready};
use super::job::Job;
use super::poll::{self, Next, Waiting};
use super::report::{self, Outcome, RunReport, RunStats};
use super::start::start;
use super::{announce, metrics};

/// The certificates of a run that are neither done nor failed.
#[derive(Default)]
pub(super) struct Work<'a> {
    pub waiting: Vec<(Job<'a>, Waiting)>,
    pub ready: Vec<(Job<'a>, Ready)>,
}

impl<'a> Work<'a> {
    /// Files a certificate where a phase left it.
    pub(super) fn settle(
        &mut self,
        ctx: &Ctx<'_>,
        mut job: Job<'a>,
        next: Result<Next>,
        report: &mut RunReport,
    ) {
        match next {
            Ok(Next::Done(outcome)) => self.finish(ctx, job, outcome, report),
            Ok(Next::Wait(w)) => self.waiting.push((job, w)),
            Ok(Next::Ready(r)) => self.ready.push((job, *r)),
            Err(err) => report.certificates[job.idx].outcome = job.fail(&err),
        }
    }

    /// A certificate is done for this run with `outcome`.
    pub(super) fn finish(
        &mut self,
        ctx: &Ctx<'_>,
        mut job: Job<'a>,
        outcome: Outcome,
        report: &mut RunReport,
    ) {
        if !ctx.opts.dry_run {
            job.clear_backoff_after(&outcome);
        }
        report.certificates[job.idx].outcome = outcome;
    }
}

/// Runs once over the selected certificates. Takes the run lock for its whole duration. On a
/// fleet host ([`super::fleet`]) the run installs what the fleet has and, when this host can
/// take the lead, does the fleet's work.
pub async fn run(config: &Config, opts: &RunOptions) -> Result<RunReport> {
    let store = Store::open(&config.agent.state_dir)?;
    let _lock = store.lock()?;
    let started_at = super::context::now();
    let started = tokio::time::Instant::now();
    let certs = select(config, &opts.names)?;
    let (mut report, requests) = if config.fleet.is_some() && !opts.dry_run {
        super::fleet::run(config, opts, &store, &certs).await?
    } else {
        let done = engine(config, &store, opts, &certs, None).await;
        (done.report, done.requests)
    };
    report.stats = Some(RunStats {
        started_at,
        duration: started.elapsed(),
        requests,
    });
    if !opts.dry_run {
        report::notify(config, &report).await;
        announce::announce(config, &store, &report).await;
        metrics::write(config, &store, &report);
    }
    Ok(report)
}

/// What the engine did in one run.
pub(super) struct EngineRun {
    pub report: RunReport,
    /// Partner API requests by method, endpoint and status.
    pub requests: Vec<crate::api::RequestCount>,
    /// What it installed, for a fleet's leader to publish.
    pub installed: Vec<(String, super::fleet::Installable)>,
}

/// Before the installs of a run that may order: every configured certificate for a web server
/// that has nothing installed and none of its files gets a self-signed placeholder, so that
/// the web server's configuration test (which reads every site's files) passes. A
/// certificate whose files are partly there is left alone and reported.
fn placeholders_for_missing_files(config: &Config, store: &Store) {
    for cert in &config.certificates {
        if cert.install.server == crate::config::ServerKind::None {
            continue;
        }
        match store.load(&cert.name) {
            Ok(rec) if rec.installed.is_none() => {}
            _ => continue,
        }
        match super::placeholder::ensure(store, cert) {
            Ok(Some(p)) => tracing::info!(
                certificate = %cert.name,
                "self-signed placeholder written to {} (replaced by the first certificate)",
                p.files
                    .iter()
                    .map(|f| f.display().to_string())
                    .collect::<Vec<_>>()
                    .join(", ")
            ),
            Ok(None) => {}
            Err(e) => tracing::warn!(certificate = %cert.name, "no placeholder: {e:#}"),
        }
    }
}

/// The engine over `certs`: start, poll, install. With `fleet`, as the fleet's leader.
pub(super) async fn engine(
    config: &Config,
    store: &Store,
    opts: &RunOptions,
    certs: &[&CertificateConfig],
    fleet: Option<&super::fleet::FleetRun<'_>>,
) -> EngineRun {
    let mut ctx = Ctx::new(config, store, opts);
    ctx.fleet = fleet;
    let mut report = RunReport::not_started(certs);
    let mut work = Work::default();
    start_all(&ctx, certs, &mut work, &mut report).await;
    poll::rounds(&ctx, &mut work, &mut report).await;
    let ready = std::mem::take(&mut work.ready);
    // Before the first install's configuration test (never in a run with nothing to install:
    // a no-op run reads no record twice).
    if opts.allow_orders && !opts.dry_run && !ready.is_empty() {
        placeholders_for_missing_files(config, store);
    }
    let installable: Vec<(String, super::fleet::Installable)> = if fleet.is_some() {
        ready
            .iter()
            .map(|(job, r)| (job.cert.name.clone(), super::fleet::Installable::of(r)))
            .collect()
    } else {
        Vec::new()
    };
    let mut installed = Vec::new();
    for (job, outcome, warning) in deploy::install_ready(ready).await {
        let idx = job.idx;
        if warning.is_some() {
            report.certificates[idx].warning = warning;
        }
        if matches!(outcome, Outcome::Installed { .. })
            && let Some(i) = installable.iter().find(|(n, _)| *n == job.cert.name)
        {
            installed.push(i.clone());
        }
        work.finish(&ctx, job, outcome, &mut report);
    }
    ctx.finish().await;
    let requests = ctx
        .client_if_built()
        .map(|c| c.request_counts())
        .unwrap_or_default();
    EngineRun {
        report,
        requests,
        installed,
    }
}

/// Starts every certificate, up to `agent.concurrency` at once (their API calls and
/// validation waits overlap).
async fn start_all<'a>(
    ctx: &Ctx<'a>,
    certs: &[&'a CertificateConfig],
    work: &mut Work<'a>,
    report: &mut RunReport,
) {
    let mut starting = futures_util::stream::iter(certs.iter().copied().enumerate())
        .map(|(idx, cert)| async move {
            if stop_requested(ctx.opts) {
                return (idx, None);
            }
            let mut job = match Job::load(ctx.store, cert, idx) {
                Ok(job) => job,
                Err(e) => return (idx, Some(Err(e))),
            };
            let mut warning = None;
            let next = start(ctx, &mut job, &mut warning).await;
            (idx, Some(Ok((job, next, warning))))
        })
        .buffer_unordered(ctx.concurrency());
    while let Some((idx, started)) = starting.next().await {
        match started {
            None => {
                report.certificates[idx].outcome = Outcome::Pending {
                    reason: "not started: the run was stopped".into(),
                };
            }
            Some(Err(e)) => {
                report.certificates[idx].outcome = Outcome::Failed {
                    error: format!("{e:#}"),
                };
            }
            Some(Ok((job, next, warning))) => {
                if warning.is_some() {
                    report.certificates[idx].warning = warning;
                }
                work.settle(ctx, job, next, report);
            }
        }
    }
}

fn select<'a>(config: &'a Config, names: &[String]) -> Result<Vec<&'a CertificateConfig>> {
    if names.is_empty() {
        return Ok(config.certificates.iter().collect());
    }
    // A name given twice is worked on once: two concurrent starts of one certificate would
    // each see no order and place one.
    let mut seen = HashSet::new();
    names
        .iter()
        .filter(|n| seen.insert(n.as_str()))
        .map(|n| {
            config
                .certificate(n)
                .ok_or_else(|| anyhow!(super::UnknownCertificate::new(config, n)))
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn names(v: &[&str]) -> Vec<String> {
        v.iter().map(|s| (*s).to_owned()).collect()
    }

    #[test]
    fn a_name_given_twice_is_selected_once() {
        let mut config = Config::parse(
            "[api]\nbase_url = \"https://api.example.net\"\nlogin = \"a@example.net\"\n\
             password = \"x\"\n[defaults]\ncountry = \"DE\"\nregion = \"B\"\ncity = \"B\"\n\
             [[certificate]]\nname = \"www\"\ndomains = [\"a.example.com\"]\nproduct_id = 1\n\
             dcv = \"email\"\ndcv_email = \"admin@example.com\"\nserver = \"none\"\n\
             key_path = \"/k/privkey.pem\"\nfullchain_path = \"/k/f.pem\"\n",
            std::path::Path::new("t.toml"),
        )
        .unwrap();
        let mut other = config.certificates[0].clone();
        other.name = "api".into();
        config.certificates.push(other);
        let picked = select(&config, &names(&["www", "api", "www"])).unwrap();
        let picked: Vec<&str> = picked.iter().map(|c| c.name.as_str()).collect();
        assert_eq!(picked, ["www", "api"]);
    }
}
