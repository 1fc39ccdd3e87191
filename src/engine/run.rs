//! The engine's run over the selected certificates, phase by phase:
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

use futures_util::StreamExt;

use crate::config::{CertificateConfig, Config};
use crate::store::Store;

use super::context::{Ctx, RunOptions, stop_requested};
use super::deploy;
use super::due::Due;
use super::job::{Job, Next, Work};
use super::lead::{Installable, Lead};
use super::placeholder;
use super::poll;
use super::report::{Outcome, RunReport};
use super::start::start;

/// What the engine did in one run.
pub struct EngineRun {
    pub report: RunReport,
    /// Partner API requests by method, endpoint and status.
    pub requests: Vec<crate::api::RequestCount>,
    /// What it installed, for a fleet's leader to publish.
    pub installed: Vec<(String, Installable)>,
    /// The certificates reported unchanged from the due summary: this run neither read nor
    /// wrote their records (each is as the run found it).
    pub untouched: HashSet<String>,
}

/// Before the installs of a run that may order: every configured certificate for a web server
/// that has nothing installed and none of its files gets a self-signed placeholder, so that
/// the web server's configuration test (which reads every site's files) passes. A
/// certificate whose files are partly there is left alone and reported.
fn placeholders_for_missing_files(config: &Config, store: &Store, now: time::OffsetDateTime) {
    for cert in &config.certificates {
        if cert.install.server == crate::config::ServerKind::None {
            continue;
        }
        match store.load(&cert.name) {
            Ok(rec) if rec.installed.is_none() => {}
            _ => continue,
        }
        match placeholder::ensure(store, cert, now) {
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

/// The engine over `certs`: start, poll, install. With `lead`, as a fleet's leader (its
/// records shared and its validation files published through it, and what it installed
/// returned for publishing). The caller holds the state directory's lock.
pub async fn run(
    config: &Config,
    store: &Store,
    opts: &RunOptions,
    certs: &[&CertificateConfig],
    lead: Option<&dyn Lead>,
) -> EngineRun {
    let mut ctx = Ctx::new(config, store, opts);
    ctx.lead = lead;
    let mut report = RunReport::not_started(certs);
    let mut work = Work::default();
    let mut due = Due::open(config, store, opts, lead.is_some());
    let untouched = start_all(&ctx, certs, &mut work, &mut report, due.as_mut()).await;
    if let Some(due) = due {
        tracing::debug!(
            "due summary: {} of {} certificate(s) quiet, their records not read",
            due.used(),
            certs.len()
        );
        let crls = ctx
            .revocation
            .as_ref()
            .map(crate::revocation::Checker::fresh_crls)
            .unwrap_or_default();
        due.finish(store, config, crls);
    }
    poll::rounds(&ctx, &mut work, &mut report).await;
    let ready = std::mem::take(&mut work.ready);
    // Before the first install's configuration test (never in a run with nothing to install:
    // a no-op run reads no record twice).
    if opts.allow_orders && !opts.dry_run && !ready.is_empty() {
        placeholders_for_missing_files(config, store, ctx.now());
    }
    let mut installable: std::collections::HashMap<String, Installable> = if lead.is_some() {
        ready
            .iter()
            .map(|(job, r)| (job.cert.name.clone(), Installable::of(r)))
            .collect()
    } else {
        std::collections::HashMap::new()
    };
    let ready = match lead {
        Some(l) => keep_refused(l, ready, &mut work, opts.dry_run, &mut report).await,
        None => ready,
    };
    let mut installed = Vec::new();
    let (done, rolled_back) = match lead.filter(|l| l.holds_installs()) {
        Some(l) => install_proved(l, ready, ctx.now()).await,
        None => (deploy::install_ready(ready).await, HashSet::new()),
    };
    for (job, outcome, warning) in done {
        let idx = job.idx;
        if warning.is_some() {
            report.certificates[idx].warning = warning;
        }
        // A certificate the leader rolled back is published all the same: the fleet's
        // rollout decides who installs it, and the leader's failed proof halts the waves
        // after its own.
        if (matches!(outcome, Outcome::Installed { .. }) || rolled_back.contains(&job.cert.name))
            && let Some(i) = installable.remove(&job.cert.name)
        {
            installed.push((job.cert.name.clone(), i));
        }
        work.finish(opts.dry_run, job, outcome, &mut report);
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
        untouched,
    }
}

/// Of `ready`, those the leader installs: each one whose serial this host refuses
/// ([`Lead::refuses`]: it rolled it back here) is done for this run, unchanged, with why.
async fn keep_refused<'a>(
    lead: &dyn Lead,
    ready: Vec<(Job<'a>, super::Ready)>,
    work: &mut Work<'a>,
    dry_run: bool,
    report: &mut RunReport,
) -> Vec<(Job<'a>, super::Ready)> {
    let mut go = Vec::with_capacity(ready.len());
    for (job, r) in ready {
        match lead.refuses(&job.rec, &r.bundle.serial_hex).await {
            Some(refusal) => {
                let reason = refusal.reason;
                let mut job = job;
                let outcome = if refusal.waiting {
                    tracing::info!(certificate = %job.cert.name, serial = %r.bundle.serial_hex, "{reason}");
                    Outcome::Pending { reason }
                } else {
                    tracing::warn!(certificate = %job.cert.name, serial = %r.bundle.serial_hex, "{reason}; not installed");
                    Outcome::Unchanged { reason }
                };
                if refusal.aborted && !dry_run {
                    close_refused(&mut job);
                }
                work.finish(dry_run, job, outcome, report);
            }
            None => go.push((job, r)),
        }
    }
    go
}

/// Closes the order or reissue of `job`'s certificate whose certificate a person refused for
/// good ([`crate::store::CertRecord::close_in_flight`]): journalled, the record saved, its
/// pending key discarded.
fn close_refused(job: &mut Job<'_>) {
    let key = job.rec.close_in_flight();
    if let Err(e) = job.journal("rollout-refused", serde_json::json!({})) {
        tracing::warn!(certificate = %job.cert.name, "could not journal the refusal: {e:#}");
    }
    match job.save() {
        Ok(()) => {
            if let Some(key) = key {
                super::keys::discard_key_file(&key.key_file);
            }
        }
        Err(e) => {
            tracing::warn!(certificate = %job.cert.name, "could not record the refusal: {e:#}")
        }
    }
}

/// Installs `ready` as a leader that proves before it commits ([`Lead::holds_installs`]):
/// up to the verification, then the leader's proofs name the installs to roll back; each
/// rolled back is recorded (`rolled_back`: that serial is refused here while its rollout is
/// halted), the others committed and recorded as usual. Also returns the names rolled back.
async fn install_proved<'a>(
    lead: &dyn Lead,
    ready: Vec<(Job<'a>, super::Ready)>,
    now: time::OffsetDateTime,
) -> (Vec<(Job<'a>, Outcome, Option<String>)>, HashSet<String>) {
    if ready.is_empty() {
        return (Vec::new(), HashSet::new());
    }
    let held = deploy::hold_ready(ready).await;
    let live = held.live();
    let back = lead.prove_held(&live).await;
    let mut done = held.settle(&back).await;
    for (job, _, _) in &mut done {
        let Some(why) = back.get(&job.cert.name) else {
            continue;
        };
        let Some(l) = live.iter().find(|l| l.name == job.cert.name) else {
            continue;
        };
        // Not a failure to retry on a backoff: the serial is refused here until a person
        // decides, which each run reports (unchanged, with why).
        job.rec.clear_failures();
        job.rec.rolled_back = Some(Box::new(crate::store::RolledBack {
            serial: l.serial.clone(),
            reason: why.clone(),
            at: now,
        }));
        if let Err(e) = job.save() {
            tracing::warn!(certificate = %job.cert.name, "could not record the rollback: {e:#}");
        }
    }
    lead.settled().await;
    (done, back.into_keys().collect())
}

/// How a certificate's start ended. Unboxed, as the tuple it replaced: the job moves on into
/// the run's work, and boxing it would allocate once per certificate.
#[allow(clippy::large_enum_variant)]
enum Started<'a> {
    /// The run was stopped first.
    Stopped,
    /// Its record could not be read.
    NotLoaded(anyhow::Error),
    /// Quiet by the due summary: its record was not read (with what its CRL said when it is
    /// unknown).
    Stood(
        crate::store::due::Entry,
        Option<super::report::RevocationNote>,
    ),
    /// Planned and started.
    Done(Job<'a>, anyhow::Result<Next>, Option<String>),
}

/// Starts every certificate, up to `agent.concurrency` at once (their API calls and
/// validation waits overlap). With `due`, a certificate whose summary entry stands is reported
/// unchanged without reading its record, and the quiet ones are kept for the next run.
/// Returns the certificates reported from the summary.
async fn start_all<'a>(
    ctx: &Ctx<'a>,
    certs: &[&'a CertificateConfig],
    work: &mut Work<'a>,
    report: &mut RunReport,
    due: Option<&mut Due>,
) -> HashSet<String> {
    let now = ctx.now();
    let kept = due.as_deref();
    let kept_any = kept.is_some();
    let mut starting = futures_util::stream::iter(certs.iter().copied().enumerate())
        .map(|(idx, cert)| async move {
            if stop_requested(ctx.opts) {
                return (idx, Started::Stopped);
            }
            if let Some(due) = kept
                && let Some(entry) = due.standing(ctx.store, cert, now)
                && let Some(note) = due.crl_stands(ctx, entry, now).await
            {
                return (idx, Started::Stood(entry.clone(), note));
            }
            // The record the leader's run already holds, or read.
            let loaded = match ctx.lead.and_then(|l| l.take_record(&cert.name)) {
                Some(rec) => Job::of(ctx.store, cert, idx, ctx.opts.clock, rec),
                None => Job::load(ctx.store, cert, idx, ctx.opts.clock),
            };
            let mut job = match loaded {
                Ok(job) => job,
                Err(e) => return (idx, Started::NotLoaded(e)),
            };
            let mut warning = None;
            // A certificate of an ACME CA goes its own way through the same phases.
            let cert = job.cert;
            let next = match cert.order.issuer.acme() {
                Some(ca) => Box::pin(super::acme::start(ctx, &mut job, ca)).await,
                None => match start(ctx, &mut job, &mut warning).await {
                    // A new order's first check (what to publish) follows at once, so that
                    // the CA validates it while the run places the next ones.
                    Ok(Next::Wait(w)) if poll::first_check_now(&w) => {
                        poll::first_check(ctx, &mut job, w).await
                    }
                    next => next,
                },
            };
            (idx, Started::Done(job, next, warning))
        })
        .buffer_unordered(ctx.concurrency());
    let mut found = Vec::new();
    let mut untouched = HashSet::new();
    while let Some((idx, started)) = starting.next().await {
        let line = &mut report.certificates[idx];
        match started {
            Started::Stopped => {
                line.outcome = Outcome::Pending {
                    reason: "not started: the run was stopped".into(),
                };
            }
            Started::NotLoaded(e) => {
                line.outcome = Outcome::Failed {
                    error: format!("{e:#}"),
                };
            }
            Started::Stood(entry, note) => {
                line.outcome = Outcome::Unchanged {
                    reason: entry.reason.clone(),
                };
                line.revocation = note;
                untouched.insert(entry.name.clone());
                found.push(Ok(entry));
            }
            Started::Done(job, next, warning) => {
                if warning.is_some() {
                    line.warning = warning;
                }
                line.revocation = job.revocation.clone();
                line.ordered = job.ordered.clone();
                let quiet = match &next {
                    Ok(Next::Done(Outcome::Unchanged { reason })) if kept_any => {
                        Due::quiet_entry(&job, reason)
                    }
                    _ => None,
                };
                work.settle(ctx.opts.dry_run, job, next, report);
                found.extend(quiet.map(Err));
            }
        }
    }
    drop(starting);
    // Before the summary stamps the records it keeps: a record written now is not kept.
    ctx.record_crl_seen();
    if let Some(checker) = &ctx.revocation {
        checker.finish();
    }
    let Some(due) = due else {
        return untouched;
    };
    for f in found {
        match f {
            Ok(entry) => due.stood(entry),
            Err(quiet) => due.found_quiet(ctx.store, quiet),
        }
    }
    untouched
}
