//! One run of `cert-agent renew` / `issue` / `reissue` / `install`.
//!
//! 1. *Start*: for each selected certificate the planner picks one action from the stored
//!    record and the installed files (no API call when nothing is due); the action is started
//!    (order placed, reissue sent, renewal prepared) and the certificate either finishes or
//!    joins the waiting set.
//! 2. *Rounds*: waiting certificates are polled at most once per `poll_interval_secs` each
//!    (across runs: the last call is recorded). When several are due in one round, one
//!    `list` call per page of in-progress certificates stands in for their status calls.
//!    Validation is published when the API says what to publish; issued certificates are
//!    downloaded and checked.
//! 3. *Install*: everything ready is installed in one transaction per web server (config
//!    test and reload once each), verified, and recorded.
//!
//! One certificate's failure never stops the others. Failures are recorded with a backoff
//! (1 h doubling to 24 h) so that a broken certificate does not call the API on every tick.

use std::collections::{HashMap, HashSet};
use std::net::SocketAddr;
use std::time::Duration;

use anyhow::{Context, Result, anyhow, bail};
use futures_util::StreamExt;
use time::OffsetDateTime;

use crate::api::{CertificateDetails, CertificateState, Client, ListScope, PendingAction};
use crate::config::{CertificateConfig, Config};
use crate::dcv::standalone::StandaloneServer;
use crate::install::{self, CertInstall};
use crate::store::{CertRecord, FileStamp, Store};

use super::deploy::{self, Ready};
use super::plan::{self, Action, Disk, Inputs};
use super::validate::{self, Published};
use super::{keys, order, reissue};

/// At least this many certificates due in one round are polled with the list call.
const BULK_POLL_MIN: usize = 3;

/// What the caller asked for.
#[derive(Debug, Clone)]
pub struct RunOptions {
    /// Certificates to work on; empty: every configured one.
    pub names: Vec<String>,
    /// Print what would be done; change nothing, call nothing.
    pub dry_run: bool,
    /// Reissue the selected certificates now (within what the rules allow).
    pub force: bool,
    /// How long this run waits for validation and issuance before leaving the rest to the
    /// next run (exit 75).
    pub wait: Duration,
    /// Billed orders allowed (`agent.allow_orders` or `--yes`).
    pub allow_orders: bool,
    /// Clear an unreconciled order intent on the operator's word.
    pub clear_intent: bool,
    /// Keep the current key on a reissue (`reissue --reuse-key`).
    pub reuse_key: bool,
    /// Download and install the issued certificate again (`install NAME`).
    pub reinstall: bool,
    /// Try now even after recent failures (explicit commands; the timer's `renew` waits).
    pub ignore_backoff: bool,
    /// `issue --yes`: replace an ended (annulled, expired) order by a new one.
    pub replace_ended: bool,
    /// Turns `true` when the run must stop (SIGTERM, SIGINT, the daemon stopping): no new
    /// certificate is started, waiting ends, what was published for validation is removed
    /// (the next run publishes again), and the rest is reported as pending.
    pub stop: Option<tokio::sync::watch::Receiver<bool>>,
}

impl Default for RunOptions {
    fn default() -> Self {
        Self {
            names: Vec::new(),
            dry_run: false,
            force: false,
            wait: Duration::from_secs(600),
            allow_orders: false,
            clear_intent: false,
            reuse_key: false,
            reinstall: false,
            ignore_backoff: false,
            replace_ended: false,
            stop: None,
        }
    }
}

/// The outcome for one certificate.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
#[serde(tag = "outcome", rename_all = "snake_case")]
pub enum Outcome {
    /// Nothing to do.
    Unchanged { reason: String },
    /// A new certificate is installed (and served, where checked).
    Installed {
        certificate_id: u64,
        serial: String,
        #[serde(with = "time::serde::rfc3339")]
        not_after: OffsetDateTime,
    },
    /// Waiting for the CA or the operator; the next run continues.
    Pending { reason: String },
    /// What a real run would do (`--dry-run`).
    Planned { action: String },
    /// This certificate failed; others may have succeeded.
    Failed { error: String },
}

/// One certificate's line of the report.
#[derive(Debug, Clone, serde::Serialize)]
pub struct CertReport {
    pub name: String,
    #[serde(flatten)]
    pub outcome: Outcome,
    /// A warning for the operator (subscription ending, renewal order prepared).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub warning: Option<String>,
}

/// The whole run.
#[derive(Debug, Clone, Default, serde::Serialize)]
pub struct RunReport {
    pub certificates: Vec<CertReport>,
}

/// How a run ended as a whole; `cli` turns it into the documented exit code.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum RunStatus {
    /// Every selected certificate is done; nothing is left to do.
    Done,
    /// Nothing failed, and work is pending at the CA or the operator.
    Pending,
    /// Some certificates failed, others did not.
    Partial,
    /// Every selected certificate failed.
    Failed,
}

impl RunReport {
    /// The run as a whole: failed when every certificate failed, partial when some did,
    /// pending when none failed and some wait, done otherwise.
    pub fn status(&self) -> RunStatus {
        let failed = self
            .certificates
            .iter()
            .filter(|c| matches!(c.outcome, Outcome::Failed { .. }))
            .count();
        let pending = self
            .certificates
            .iter()
            .any(|c| matches!(c.outcome, Outcome::Pending { .. }));
        match failed {
            0 if pending => RunStatus::Pending,
            0 => RunStatus::Done,
            n if n == self.certificates.len() => RunStatus::Failed,
            _ => RunStatus::Partial,
        }
    }
}

/// Shared state of one run.
pub(super) struct Ctx<'a> {
    pub config: &'a Config,
    /// Built on first use: a run with nothing to do sets up no HTTPS client at all.
    client: std::cell::OnceCell<Client>,
    pub store: &'a Store,
    pub opts: &'a RunOptions,
    started: tokio::time::Instant,
    /// Standalone DCV servers of this run, by listen address.
    pub standalone: tokio::sync::Mutex<HashMap<SocketAddr, StandaloneServer>>,
    /// The product list, read once per run when orders are placed.
    pub products: order::ProductCache,
    /// Certificates whose record carried a failure backoff when the run started: the only
    /// ones whose record is read again at the end to clear it.
    backed_off: std::cell::RefCell<HashSet<String>>,
    /// Self-checks of published validation files, running beside the run.
    self_checks: std::cell::RefCell<tokio::task::JoinSet<()>>,
}

/// What is being waited for.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Mode {
    /// The first certificate of an order.
    Issue,
    /// A reissued certificate: ready when the served serial differs from this one.
    Reissue { previous_serial: Option<String> },
}

#[derive(Debug)]
struct Waiting {
    idx: usize,
    certificate_id: u64,
    mode: Mode,
    published: bool,
    /// Details read just before waiting began (after a reissue): the first check uses them
    /// instead of calling the API again.
    prefetched: Option<Box<CertificateDetails>>,
    /// When it was last checked, as this run counts it (a round's end once it was in one);
    /// written to the record when the run leaves it pending.
    last_poll: Option<OffsetDateTime>,
}

enum Next {
    Done(Outcome),
    Wait(Waiting),
    Ready(Box<Ready>),
}

fn stop_requested(opts: &RunOptions) -> bool {
    opts.stop.as_ref().is_some_and(|s| *s.borrow())
}

/// Resolves when the run is asked to stop (never without a stop channel).
async fn stopped(opts: &RunOptions) {
    match opts.stop.clone() {
        Some(mut rx) => {
            if rx.wait_for(|v| *v).await.is_err() {
                // The sender is gone: nobody can ask for a stop any more.
                std::future::pending::<()>().await;
            }
        }
        None => std::future::pending::<()>().await,
    }
}

/// Environment variable that shifts the agent's clock by a number of seconds, so tests can
/// follow the sandbox's virtual clock through years of renewals. Honoured only in debug
/// builds; release builds always use the system clock.
pub const TEST_CLOCK_OFFSET_ENV: &str = "CERT_AGENT_TEST_CLOCK_OFFSET_SECS";

impl Ctx<'_> {
    /// Runs a self-check beside the run.
    pub fn spawn_self_check(&self, check: impl std::future::Future<Output = ()> + Send + 'static) {
        self.self_checks.borrow_mut().spawn(check);
    }

    /// Lets self-checks that are still running finish for a moment, then drops them: by the
    /// end of a run the CA has either validated (the check is moot) or the run has waited
    /// long enough for the checks to have reported.
    async fn finish_self_checks(&self) {
        let mut checks = std::mem::take(&mut *self.self_checks.borrow_mut());
        let grace = tokio::time::sleep(Duration::from_millis(500));
        tokio::pin!(grace);
        loop {
            tokio::select! {
                next = checks.join_next() => if next.is_none() { break },
                () = &mut grace => {
                    if !checks.is_empty() {
                        tracing::debug!("{} self-check(s) still running at the end of the run were dropped", checks.len());
                    }
                    checks.abort_all();
                    break;
                }
            }
        }
    }

    /// Certificates worked on at once (`agent.concurrency`, at least one).
    fn concurrency(&self) -> usize {
        usize::try_from(self.config.agent.concurrency)
            .unwrap_or(1)
            .max(1)
    }

    /// The API client, built on first use.
    pub fn client(&self) -> Result<&Client> {
        if let Some(c) = self.client.get() {
            return Ok(c);
        }
        let c = Client::new(self.config.client_options())
            .context("could not set up the Partner API client")?;
        Ok(self.client.get_or_init(|| c))
    }
}

/// The time every decision of a run uses.
pub fn now() -> OffsetDateTime {
    let real = OffsetDateTime::now_utc();
    if cfg!(debug_assertions)
        && let Some(secs) = std::env::var(TEST_CLOCK_OFFSET_ENV)
            .ok()
            .and_then(|v| v.trim().parse::<i64>().ok())
    {
        return real + time::Duration::seconds(secs);
    }
    real
}

/// Runs once over the selected certificates. Takes the run lock for its whole duration.
pub async fn run(config: &Config, opts: &RunOptions) -> Result<RunReport> {
    let store = Store::open(&config.agent.state_dir)?;
    let _lock = store.lock()?;
    let certs = select(config, &opts.names)?;
    let ctx = Ctx {
        config,
        client: std::cell::OnceCell::new(),
        store: &store,
        opts,
        started: tokio::time::Instant::now(),
        standalone: tokio::sync::Mutex::new(HashMap::new()),
        products: order::ProductCache::default(),
        backed_off: std::cell::RefCell::new(HashSet::new()),
        self_checks: std::cell::RefCell::new(tokio::task::JoinSet::new()),
    };
    let mut report = RunReport {
        certificates: certs
            .iter()
            .map(|c| CertReport {
                name: c.name.clone(),
                outcome: Outcome::Pending {
                    reason: "not started".into(),
                },
                warning: None,
            })
            .collect(),
    };

    let mut waiting = Vec::new();
    let mut ready: Vec<(usize, Ready)> = Vec::new();
    // Up to `agent.concurrency` certificates are started at once (their API calls and
    // validation waits overlap); the records stay one per certificate.
    let mut starting = futures_util::stream::iter(certs.iter().copied().enumerate())
        .map(|(idx, cert)| {
            let ctx = &ctx;
            async move {
                if stop_requested(ctx.opts) {
                    return (idx, None);
                }
                let mut warning = None;
                let next = start(ctx, cert, idx, &mut warning).await;
                (idx, Some((next, warning)))
            }
        })
        .buffer_unordered(ctx.concurrency());
    while let Some((idx, started)) = starting.next().await {
        let Some((next, warning)) = started else {
            report.certificates[idx].outcome = Outcome::Pending {
                reason: "not started: the run was stopped".into(),
            };
            continue;
        };
        if warning.is_some() {
            report.certificates[idx].warning = warning;
        }
        settle(
            &ctx,
            certs[idx],
            idx,
            next,
            &mut report,
            &mut waiting,
            &mut ready,
        );
    }
    drop(starting);

    rounds(&ctx, &certs, &mut waiting, &mut ready, &mut report).await;

    if !ready.is_empty() {
        let installs: Vec<CertInstall> = ready.iter().map(|(_, r)| r.install.clone()).collect();
        let outcomes = install::install_all(&installs).await;
        for ((idx, r), result) in ready.into_iter().zip(outcomes) {
            let cert = certs[idx];
            let outcome = if result.installed() {
                if let Err(e) = &result.result {
                    tracing::warn!(certificate = %cert.name, "deploy hook failed: {e}");
                    report.certificates[idx].warning = Some(format!("deploy hook failed: {e}"));
                }
                deploy::finish_install(&store, cert, &r)
                    .unwrap_or_else(|e| record_failure(&store, &cert.name, &e))
            } else {
                let err = match result.result {
                    Err(e) => anyhow!(e),
                    Ok(()) => anyhow!("the install did not complete"),
                };
                record_failure(&store, &cert.name, &err.context("install failed"))
            };
            report.certificates[idx].outcome = outcome;
        }
    }

    ctx.finish_self_checks().await;
    let servers = std::mem::take(&mut *ctx.standalone.lock().await);
    for (_, server) in servers {
        server.shutdown().await;
    }
    if !opts.dry_run {
        clear_backoff(&store, &report, &ctx.backed_off.borrow());
        notify(config, &report).await;
    }
    Ok(report)
}

fn settle(
    ctx: &Ctx<'_>,
    cert: &CertificateConfig,
    idx: usize,
    next: Result<Next>,
    report: &mut RunReport,
    waiting: &mut Vec<Waiting>,
    ready: &mut Vec<(usize, Ready)>,
) {
    match next {
        Ok(Next::Done(outcome)) => report.certificates[idx].outcome = outcome,
        Ok(Next::Wait(w)) => waiting.push(w),
        Ok(Next::Ready(r)) => ready.push((idx, *r)),
        Err(err) => {
            report.certificates[idx].outcome = record_failure(ctx.store, &cert.name, &err);
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

/// Records a failure (with its backoff) and turns it into an outcome.
fn record_failure(store: &Store, name: &str, err: &anyhow::Error) -> Outcome {
    let text = format!("{err:#}");
    if let Ok(mut rec) = store.load(name) {
        rec.last_error = Some(text.clone());
        rec.failures = rec.failures.saturating_add(1);
        rec.retry_after = Some(now() + plan::backoff(rec.failures));
        if let Err(e) = store.save(&rec) {
            tracing::warn!(certificate = %name, "could not record the failure: {e}");
        }
    }
    Outcome::Failed { error: text }
}

/// A certificate that did not fail this run starts afresh: no backoff.
fn clear_backoff(store: &Store, report: &RunReport, backed_off: &HashSet<String>) {
    for c in &report.certificates {
        if matches!(c.outcome, Outcome::Failed { .. } | Outcome::Planned { .. })
            || !backed_off.contains(&c.name)
        {
            continue;
        }
        if let Ok(mut rec) = store.load(&c.name)
            && (rec.failures > 0 || rec.retry_after.is_some())
            && !matches!(c.outcome, Outcome::Unchanged { .. } if rec.retry_after.is_some_and(|t| t > now()))
        {
            rec.failures = 0;
            rec.retry_after = None;
            rec.last_error = None;
            let _ = store.save(&rec);
        }
    }
}

/// The installed leaf as found on disk: its stamp first, the certificate only when the file
/// changed.
pub(super) fn disk_state(rec: &CertRecord) -> (Disk, Option<FileStamp>) {
    let Some(inst) = &rec.installed else {
        return (Disk::Missing, None);
    };
    let Some(path) = &inst.leaf_file else {
        return (Disk::AsInstalled, None);
    };
    let stamp = FileStamp::of(path);
    if stamp.is_none() {
        return (Disk::Missing, None);
    }
    if stamp == inst.leaf_stamp {
        return (Disk::AsInstalled, None);
    }
    let serial = std::fs::read(path)
        .ok()
        .and_then(|pem| crate::crypto::CertificateInfo::from_pem(&pem).ok())
        .map(|c| c.serial_hex);
    match serial {
        Some(s) if crate::crypto::same_serial_hex(&s, &inst.serial) => (Disk::AsInstalled, stamp),
        other => (Disk::Differs(other), None),
    }
}

/// Plans and starts the action of one certificate.
async fn start(
    ctx: &Ctx<'_>,
    cert: &CertificateConfig,
    idx: usize,
    warning_out: &mut Option<String>,
) -> Result<Next> {
    let store = ctx.store;
    let mut rec = store.load(&cert.name)?;
    if rec.failures > 0 || rec.retry_after.is_some() {
        ctx.backed_off.borrow_mut().insert(cert.name.clone());
    }
    if ctx.opts.clear_intent && order::clear_intent(store, &mut rec)? {
        tracing::warn!(certificate = %cert.name, "unreconciled order intent cleared by the operator");
    }
    let (disk, refreshed_stamp) = disk_state(&rec);
    if let (Some(stamp), Some(inst)) = (refreshed_stamp, rec.installed.as_mut()) {
        // Rewritten with the same certificate (e.g. touched): remember the new stamp.
        inst.leaf_stamp = Some(stamp);
        if !ctx.opts.dry_run {
            store.save(&rec)?;
        }
    }
    let disk = if ctx.opts.reinstall && rec.installed.is_some() {
        Disk::Differs(None)
    } else {
        disk
    };
    let decide = |rec: &CertRecord| {
        plan::decide(&Inputs {
            now: now(),
            record: rec,
            disk: disk.clone(),
            renew_before_days: ctx.config.agent.renew_before_days,
            allow_orders: ctx.opts.allow_orders,
            force: ctx.opts.force,
            ignore_backoff: ctx.opts.ignore_backoff,
            replace_ended: ctx.opts.replace_ended,
            reuse_key: ctx.opts.reuse_key || cert.reuse_key,
            family: cert.family,
        })
    };
    let mut action = decide(&rec);
    if matches!(action, Action::Reissue { .. })
        && !ctx.opts.dry_run
        && let Some(id) = rec.order.as_ref().map(|o| o.certificate_id)
    {
        // Whether a reissue is still possible depends on the subscription's end: read it
        // fresh (one call) and decide again with it.
        let details = ctx
            .client()?
            .details(id)
            .await
            .with_context(|| format!("could not read certificate {id} before reissuing it"))?;
        if let Some(s) = super::subscription_of(&details) {
            rec.subscription = Some(s);
            store.save(&rec)?;
            action = decide(&rec);
        }
        if matches!(action, Action::Reissue { .. })
            && let Some(reason) = names_cannot_change(cert, &details.all_domains)
        {
            action = Action::CannotReissue { reason };
        }
    }
    if ctx.opts.dry_run {
        return Ok(Next::Done(Outcome::Planned {
            action: describe(&action, cert),
        }));
    }
    tracing::debug!(certificate = %cert.name, "plan: {action:?}");

    match action {
        Action::Idle { next, warning } => {
            if let Some(w) = warning {
                tracing::warn!(certificate = %cert.name, "{w}");
                *warning_out = Some(w);
            }
            let reason = match (&rec.installed, next) {
                (Some(i), Some(at)) => format!(
                    "serial {} valid until {}; next renewal check after {}",
                    i.serial,
                    i.not_after.date(),
                    at.date()
                ),
                _ => "up to date".to_owned(),
            };
            Ok(Next::Done(Outcome::Unchanged { reason }))
        }
        Action::NeedsOrder => {
            // A state for the operator to resolve, not a failure to back off from: it makes no
            // API call.
            let error = order::OrderRefusal::NotAllowed {
                name: cert.name.clone(),
            }
            .to_string();
            rec.last_error = Some(error.clone());
            store.save(&rec)?;
            Ok(Next::Done(Outcome::Failed { error }))
        }
        Action::Backoff { until } => Ok(Next::Done(Outcome::Failed {
            error: format!(
                "not retried before {} after {} failed attempt(s) (`cert-agent renew --name {}` \
                 retries now); last error: {}",
                short_time(until),
                rec.failures,
                cert.name,
                rec.last_error.as_deref().unwrap_or("unknown")
            ),
        })),
        Action::Ended { state } => {
            let id = rec.order.as_ref().map(|o| o.certificate_id).unwrap_or(0);
            Ok(Next::Done(Outcome::Failed {
                error: format!(
                    "certificate {id} is {state}; nothing more can be done with this order and \
                     no new order is placed automatically: `cert-agent issue {} --yes` places one",
                    cert.name
                ),
            }))
        }
        Action::CannotReissue { reason } => Ok(Next::Done(Outcome::Failed { error: reason })),
        Action::Order | Action::Reconcile => {
            if let Some(state) = rec.ended.take() {
                // `issue --yes` replaces the ended order: keep its ID as the one renewed.
                rec.renews = rec.order.take().map(|o| o.certificate_id);
                rec.subscription = None;
                rec.reissue = None;
                rec.prolong_prepared_at = None;
                if let Some(p) = rec.pending_key.take() {
                    keys::discard_key_file(&p.key_file);
                }
                store.save(&rec)?;
                store.journal(
                    &cert.name,
                    "ended-order-replaced",
                    serde_json::json!({ "previous": rec.renews, "state": state }),
                )?;
            }
            let id = order::ensure_order(
                ctx.config,
                cert,
                ctx.client()?,
                &ctx.products,
                store,
                &mut rec,
                ctx.opts.allow_orders,
                now(),
            )
            .await?
            .certificate_id();
            Ok(wait(idx, &rec, id, Mode::Issue))
        }
        Action::Continue => {
            if rec.reissue.is_some() {
                let previous = rec.reissue.as_ref().and_then(|r| r.previous_serial.clone());
                let reissued = reissue::resume(ctx, cert, &mut rec).await?;
                Ok(wait_reissued(idx, &rec, reissued, previous))
            } else {
                let id = order::ensure_order(
                    ctx.config,
                    cert,
                    ctx.client()?,
                    &ctx.products,
                    store,
                    &mut rec,
                    false,
                    now(),
                )
                .await?
                .certificate_id();
                Ok(wait(idx, &rec, id, Mode::Issue))
            }
        }
        Action::Reinstall => {
            let id = rec
                .order
                .as_ref()
                .map(|o| o.certificate_id)
                .ok_or_else(|| anyhow!("no order recorded"))?;
            let key = deploy::installed_key(cert)?;
            match deploy::download_checked(ctx, cert, id, &key, None).await? {
                Some(bundle) => {
                    let install = deploy::cert_install(cert, &bundle, &key);
                    Ok(Next::Ready(Box::new(Ready {
                        certificate_id: id,
                        bundle,
                        install,
                    })))
                }
                None => Ok(Next::Done(Outcome::Pending {
                    reason: format!("certificate {id}: its files are not available yet"),
                })),
            }
        }
        Action::Reissue { new_key, reason } => {
            tracing::info!(certificate = %cert.name, "reissuing: {reason}");
            let previous = rec.installed.as_ref().map(|i| i.serial.clone());
            let reissued = reissue::start(ctx, cert, &mut rec, new_key, now()).await?;
            Ok(wait_reissued(idx, &rec, reissued, previous))
        }
        Action::RenewSubscription {
            order: true,
            reason,
        } => {
            let old = rec.order.as_ref().map(|o| o.certificate_id);
            store.journal(
                &cert.name,
                "subscription-renewal-order",
                serde_json::json!({ "renews": old, "reason": reason }),
            )?;
            rec.renews = old;
            rec.order = None;
            rec.subscription = None;
            rec.prolong_prepared_at = None;
            store.save(&rec)?;
            tracing::warn!(certificate = %cert.name, "placing a new order: {reason}");
            let id = order::ensure_order(
                ctx.config,
                cert,
                ctx.client()?,
                &ctx.products,
                store,
                &mut rec,
                true,
                now(),
            )
            .await?
            .certificate_id();
            Ok(wait(idx, &rec, id, Mode::Issue))
        }
        Action::RenewSubscription {
            order: false,
            reason,
        } => {
            let id = rec
                .order
                .as_ref()
                .map(|o| o.certificate_id)
                .ok_or_else(|| anyhow!("no order recorded"))?;
            let message = prepare_renewal(ctx, cert, &mut rec, id, &reason).await?;
            tracing::warn!(certificate = %cert.name, "{message}");
            *warning_out = Some(message.clone());
            Ok(Next::Done(Outcome::Unchanged { reason: message }))
        }
    }
}

fn wait_reissued(
    idx: usize,
    rec: &CertRecord,
    reissued: reissue::Reissued,
    previous_serial: Option<String>,
) -> Next {
    Next::Wait(Waiting {
        idx,
        certificate_id: reissued.certificate_id,
        mode: Mode::Reissue { previous_serial },
        published: false,
        prefetched: reissued.details,
        last_poll: rec.last_poll,
    })
}

fn wait(idx: usize, rec: &CertRecord, certificate_id: u64, mode: Mode) -> Next {
    Next::Wait(Waiting {
        idx,
        certificate_id,
        mode,
        published: false,
        prefetched: None,
        last_poll: rec.last_poll,
    })
}

pub(super) fn describe(action: &Action, cert: &CertificateConfig) -> String {
    match action {
        Action::Idle { next: Some(at), .. } => format!("do nothing before {}", at.date()),
        Action::Idle { next: None, .. } => "do nothing".into(),
        Action::NeedsOrder => {
            "do nothing: no order yet and orders are not allowed (`issue NAME --yes`)".into()
        }
        Action::Order => format!(
            "place a billed order for product {} ({} days) for {}",
            cert.product_id,
            cert.days,
            cert.domains.join(", ")
        ),
        Action::Reconcile => {
            "search the certificate list for an order whose answer was lost".into()
        }
        Action::Continue => "continue validation, issuance and install".into(),
        Action::Reinstall => "download and install the issued certificate again".into(),
        Action::Reissue { new_key, reason } => format!(
            "reissue ({}) because {reason}",
            if *new_key { "new key" } else { "same key" }
        ),
        Action::RenewSubscription {
            order: true,
            reason,
        } => {
            format!("place a new billed order because {reason}")
        }
        Action::RenewSubscription {
            order: false,
            reason,
        } => {
            format!("prepare a renewal order because {reason}")
        }
        Action::Backoff { until } => format!("wait until {} after failures", short_time(*until)),
        Action::Ended { state } => {
            format!("report the {state} order (`issue NAME --yes` orders anew)")
        }
        Action::CannotReissue { reason } => format!("refuse the reissue: {reason}"),
    }
}

/// `2026-11-21 00:13 UTC`.
pub(super) fn short_time(t: OffsetDateTime) -> String {
    let t = t.to_offset(time::UtcOffset::UTC);
    format!("{} {:02}:{:02} UTC", t.date(), t.hour(), t.minute())
}

/// Prepares the renewal order (`prolong`), stores its token (0600) and says where it is.
async fn prepare_renewal(
    ctx: &Ctx<'_>,
    cert: &CertificateConfig,
    rec: &mut CertRecord,
    certificate_id: u64,
    reason: &str,
) -> Result<String> {
    let p = ctx
        .client()?
        .prolong(certificate_id)
        .await
        .with_context(|| {
            format!("could not prepare the renewal of certificate {certificate_id}")
        })?;
    rec.prolong_prepared_at = Some(now());
    ctx.store.save(rec)?;
    let Some(token) = p.prolongation_token else {
        return Ok(format!(
            "{reason}; the API prepares no renewal order for certificate {certificate_id} yet \
             (it does for a multi-year subscription within 3 months of its end); place a new \
             order with `cert-agent issue {}` once it has ended, or set allow_orders",
            cert.name
        ));
    };
    let path = ctx
        .store
        .save_prolongation_token(certificate_id, token.expose())
        .context("could not store the renewal token")?;
    ctx.store.journal(
        &cert.name,
        "renewal-prepared",
        serde_json::json!({ "certificate_id": certificate_id, "token_file": path }),
    )?;
    Ok(format!(
        "{reason}: a renewal order is prepared (nothing is billed until it is completed on the \
         order site); its token is in {} (0600); `cert-agent prolong {certificate_id} \
         --show-token` prints the link",
        path.display()
    ))
}

/// Polls the waiting certificates until none is left or the run's wait is over.
async fn rounds(
    ctx: &Ctx<'_>,
    certs: &[&CertificateConfig],
    waiting: &mut Vec<Waiting>,
    ready: &mut Vec<(usize, Ready)>,
    report: &mut RunReport,
) {
    let interval = Duration::from_secs(ctx.config.agent.poll_interval_secs);
    let mut rounds_done = 0u32;
    while !waiting.is_empty() {
        // One clock reading for the whole set, so that certificates checked together stay
        // together.
        let t = now();
        let mut delays = Vec::with_capacity(waiting.len());
        for w in waiting.iter() {
            delays.push(until_allowed(w.last_poll, interval, t));
        }
        let soonest = delays.iter().copied().min().unwrap_or(Duration::ZERO);
        let remaining = ctx.opts.wait.saturating_sub(ctx.started.elapsed());
        if stop_requested(ctx.opts) {
            stop_waiting(ctx, certs, waiting, report).await;
            return;
        }
        // The wait is over (at least one round was made), or the next check comes after it.
        if soonest > remaining || (remaining.is_zero() && rounds_done > 0) {
            for (w, d) in waiting.drain(..).zip(delays) {
                let rec = save_stamp(ctx, certs[w.idx], &w);
                report.certificates[w.idx].outcome = Outcome::Pending {
                    reason: format!(
                        "certificate {}: waiting for {} (state {}); next check in {} s",
                        w.certificate_id,
                        match w.mode {
                            Mode::Issue => "validation and issuance",
                            Mode::Reissue { .. } => "the reissued certificate",
                        },
                        rec.and_then(|r| r.last_state)
                            .as_deref()
                            .unwrap_or("unknown"),
                        d.as_secs().max(1)
                    ),
                };
            }
            return;
        }
        if !soonest.is_zero() {
            progress(&format!(
                "waiting {} s for the next status check of {} certificate(s)",
                soonest.as_secs().max(1),
                waiting.len()
            ));
            let stop = ctx.opts.clone();
            tokio::select! {
                () = tokio::time::sleep(soonest) => {}
                () = stopped(&stop) => {
                    stop_waiting(ctx, certs, waiting, report).await;
                    return;
                }
            }
        }
        let mut due = Vec::new();
        let mut later = Vec::new();
        for (w, d) in waiting.drain(..).zip(delays) {
            if d <= soonest {
                due.push(w);
            } else {
                later.push(w);
            }
        }
        *waiting = later;
        let in_progress = if due.len() >= BULK_POLL_MIN {
            let listed = match ctx.client() {
                Ok(client) => client
                    .list_all(Some(ListScope::ApiInProgress), None)
                    .await
                    .map_err(anyhow::Error::from),
                Err(e) => Err(e),
            };
            match listed {
                Ok(list) => Some(
                    list.iter()
                        .map(|c| c.internal_number)
                        .collect::<HashSet<u64>>(),
                ),
                Err(e) => {
                    tracing::warn!("list of certificates in progress failed ({e}); polling each");
                    None
                }
            }
        } else {
            None
        };
        let in_round: HashSet<usize> = due.iter().map(|w| w.idx).collect();
        let in_progress = in_progress.as_ref();
        let mut stepping = futures_util::stream::iter(due)
            .map(|w| async move {
                let idx = w.idx;
                (idx, step(ctx, certs[idx], w, in_progress).await)
            })
            .buffer_unordered(ctx.concurrency());
        while let Some((idx, next)) = stepping.next().await {
            settle(ctx, certs[idx], idx, next, report, waiting, ready);
        }
        drop(stepping);
        rounds_done += 1;
        // Every certificate of the round that still waits counts as checked at the round's
        // end (never earlier than its own call), so that they stay in one round — and one
        // list call — for as long as they wait. Kept in memory while the run waits and
        // written to the records when the run leaves them pending.
        let round_end = now();
        for w in waiting.iter_mut().filter(|w| in_round.contains(&w.idx)) {
            w.last_poll = Some(round_end);
        }
    }
}

/// Writes a waiting certificate's round-end stamp into its record (the next run keeps the
/// polling interval from it); returns the record.
fn save_stamp(ctx: &Ctx<'_>, cert: &CertificateConfig, w: &Waiting) -> Option<CertRecord> {
    let mut rec = ctx.store.load(&cert.name).ok()?;
    if let Some(stamp) = w.last_poll
        && rec.last_poll.is_none_or(|p| p < stamp)
    {
        rec.last_poll = Some(stamp);
        if let Err(e) = ctx.store.save(&rec) {
            tracing::warn!(certificate = %cert.name, "{e}");
        }
    }
    Some(rec)
}

/// The run was asked to stop: remove what each waiting certificate published for validation
/// (the next run publishes again) and report it as pending.
async fn stop_waiting(
    ctx: &Ctx<'_>,
    certs: &[&CertificateConfig],
    waiting: &mut Vec<Waiting>,
    report: &mut RunReport,
) {
    for w in waiting.drain(..) {
        let cert = certs[w.idx];
        if let Some(mut rec) = save_stamp(ctx, cert, &w) {
            validate::cleanup_dcv(ctx, cert, &mut rec).await;
        }
        report.certificates[w.idx].outcome = Outcome::Pending {
            reason: format!(
                "certificate {}: the run was stopped while waiting; validation files were \
                 removed and the next run publishes them again",
                w.certificate_id
            ),
        };
    }
}

fn until_allowed(last: Option<OffsetDateTime>, interval: Duration, t: OffsetDateTime) -> Duration {
    let Some(last) = last else {
        return Duration::ZERO;
    };
    let since = Duration::try_from(t - last).unwrap_or(Duration::ZERO);
    interval.saturating_sub(since)
}

fn progress(message: &str) {
    if std::io::IsTerminal::is_terminal(&std::io::stderr()) {
        eprintln!("{message}");
    }
    tracing::info!("{message}");
}

/// One status-type check of a waiting certificate, and what follows from it.
async fn step(
    ctx: &Ctx<'_>,
    cert: &CertificateConfig,
    mut w: Waiting,
    in_progress: Option<&HashSet<u64>>,
) -> Result<Next> {
    let mut rec = ctx.store.load(&cert.name)?;
    let id = w.certificate_id;
    rec.last_poll = Some(now());
    w.last_poll = rec.last_poll;
    // Until validation is published, the details call stands in for the status call: it
    // carries the state (with a pending reissue marked) and what to publish, one call for
    // both.
    let mut details = w.prefetched.take().map(|d| *d);
    let listed = in_progress.is_some_and(|s| s.contains(&id));
    let mut reissue_pending = false;
    let state = if listed {
        rec.last_state = Some("in_progress".into());
        ctx.store.save(&rec)?;
        CertificateState::InProgress
    } else {
        let polled: Result<_> = async {
            if details.is_none() && !w.published {
                let d = ctx.client()?.details(id).await;
                details = Some(d.with_context(|| format!("could not read certificate {id}"))?);
            }
            Ok(match &details {
                Some(d) => d.status.certificate.clone(),
                None => {
                    let s = ctx.client()?.status(id).await;
                    s.with_context(|| format!("could not read the state of certificate {id}"))?
                        .certificate
                }
            })
        }
        .await;
        let code = match polled {
            Ok(code) => code,
            Err(e) => {
                // The call counts against the polling limit even when it failed.
                ctx.store.save(&rec)?;
                return Err(e);
            }
        };
        let Some(code) = code else {
            bail!("the API reported no state for certificate {id}");
        };
        reissue_pending = code.pending() == Some(PendingAction::Reissuing);
        rec.last_state = Some(code.as_str().to_owned());
        ctx.store.save(&rec)?;
        crate::failpoint::hit("poll");
        code.state().ok_or_else(|| {
            anyhow!(
                "certificate {id} is in state '{}', which cert-agent does not know",
                code.as_str()
            )
        })?
    };
    let reissuing = matches!(w.mode, Mode::Reissue { .. });
    match state {
        CertificateState::New
        | CertificateState::InProgress
        | CertificateState::WaitingForApproval => {
            if let Some(reason) =
                ensure_published(ctx, cert, &mut rec, &mut w, reissuing, details).await?
            {
                return Ok(Next::Done(Outcome::Pending { reason }));
            }
            Ok(Next::Wait(w))
        }
        CertificateState::Issued if reissuing && reissue_pending => {
            // The previous certificate, while the reissue runs: nothing new to download yet.
            if let Some(reason) =
                ensure_published(ctx, cert, &mut rec, &mut w, true, details).await?
            {
                return Ok(Next::Done(Outcome::Pending { reason }));
            }
            Ok(Next::Wait(w))
        }
        CertificateState::Issued => {
            let previous = match &w.mode {
                Mode::Reissue { previous_serial } => previous_serial.clone(),
                Mode::Issue => None,
            };
            let Some(pending) = rec.pending_key.clone() else {
                bail!(
                    "certificate {id} has no local key in the state directory; adopt it with \
                     `cert-agent adopt {} --certificate-id {id}`",
                    cert.name
                );
            };
            let key = keys::load_pending(&pending)?;
            match deploy::download_checked(ctx, cert, id, &key, previous.as_deref()).await? {
                Some(bundle) => {
                    crate::failpoint::hit("download");
                    validate::cleanup_dcv(ctx, cert, &mut rec).await;
                    let install = deploy::cert_install(cert, &bundle, &key);
                    Ok(Next::Ready(Box::new(Ready {
                        certificate_id: id,
                        bundle,
                        install,
                    })))
                }
                None => {
                    // Some CAs keep reporting "issued" for the previous certificate while a
                    // reissue is validated: publish for the new CSR meanwhile.
                    if reissuing
                        && let Some(reason) =
                            ensure_published(ctx, cert, &mut rec, &mut w, true, details).await?
                    {
                        return Ok(Next::Done(Outcome::Pending { reason }));
                    }
                    Ok(Next::Wait(w))
                }
            }
        }
        other => {
            validate::cleanup_dcv(ctx, cert, &mut rec).await;
            if matches!(
                other,
                CertificateState::Annulled | CertificateState::Expired
            ) {
                rec.ended = Some(other.as_str().to_owned());
                ctx.store.save(&rec)?;
                ctx.store.journal(
                    &cert.name,
                    "order-ended",
                    serde_json::json!({ "certificate_id": id, "state": other.as_str() }),
                )?;
            }
            bail!(
                "certificate {id} is {}; nothing more can be done with this order and no new \
                 order is placed automatically: `cert-agent issue {} --yes` places one",
                other.as_str(),
                cert.name
            )
        }
    }
}

/// Reissue rule 2: "the number of domains cannot grow", except that multi-domain family S
/// certificates may change domains up to the current number or 3, whichever is larger. Why the
/// configured names cannot be reissued into the order, if they cannot.
fn names_cannot_change(cert: &CertificateConfig, ordered: &[String]) -> Option<String> {
    let ordered: std::collections::BTreeSet<String> =
        ordered.iter().map(|d| d.to_ascii_lowercase()).collect();
    if ordered.is_empty() {
        return None;
    }
    let wanted: std::collections::BTreeSet<String> = cert
        .domains
        .iter()
        .map(|d| d.to_ascii_lowercase())
        .collect();
    let limit = if cert.family == Some(crate::config::Family::S) {
        ordered.len().max(3)
    } else {
        ordered.len()
    };
    let bare_of_wildcard = |d: &String| {
        ordered
            .iter()
            .any(|o| o.strip_prefix("*.").is_some_and(|b| b == d))
    };
    let extra = wanted
        .iter()
        .filter(|d| !ordered.contains(*d) && !bare_of_wildcard(d))
        .count();
    let count = wanted.iter().filter(|d| !bare_of_wildcard(d)).count();
    let cn = cert.common_name().to_ascii_lowercase();
    let cn_known = ordered.contains(&cn) || bare_of_wildcard(&cn);
    if !cn_known || count > limit || (extra > 0 && cert.family != Some(crate::config::Family::S)) {
        return Some(format!(
            "the configured names ({}) differ from the order's ({}) in a way a reissue cannot \
             make (document, Reissue rule 2: the number of domains cannot grow{}); place a new \
             order with `cert-agent issue {} --yes`",
            cert.domains.join(", "),
            ordered.iter().cloned().collect::<Vec<_>>().join(", "),
            if cert.family == Some(crate::config::Family::S) {
                "; family S multi-domain: up to the current number or 3"
            } else {
                ""
            },
            cert.name
        ));
    }
    None
}

/// Makes sure validation is published for the waiting certificate: again from the record when
/// an earlier run published it, otherwise as the API says. `Some(reason)` when the operator
/// must act.
async fn ensure_published(
    ctx: &Ctx<'_>,
    cert: &CertificateConfig,
    rec: &mut CertRecord,
    w: &mut Waiting,
    reissuing: bool,
    details: Option<CertificateDetails>,
) -> Result<Option<String>> {
    if w.published {
        return Ok(None);
    }
    if validate::republish(ctx, cert, rec).await? {
        w.published = true;
        return Ok(None);
    }
    match validate::publish_dcv(ctx, cert, rec, w.certificate_id, reissuing, details).await? {
        Published::Yes => w.published = true,
        Published::Later => {}
        Published::Operator(reason) => return Ok(Some(reason)),
    }
    Ok(None)
}

/// Runs `agent.notify_command` with a JSON summary on stdin when something failed or needs the
/// operator's attention.
async fn notify(config: &Config, report: &RunReport) {
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
    let argv = deploy::argv(command);
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::Family;

    fn cert(domains: &[&str], family: Option<Family>) -> CertificateConfig {
        let text = format!(
            "[api]\nbase_url = \"https://api.example.net\"\nlogin = \"a@example.net\"\n\
             password = \"x\"\n[defaults]\ncountry = \"DE\"\nregion = \"B\"\ncity = \"B\"\n\
             [[certificate]]\nname = \"www\"\ndomains = {:?}\nproduct_id = 1\ndcv = \"email\"\ndcv_email = \"admin@example.com\"\n\
             server = \"none\"\nkey_path = \"/k/privkey.pem\"\nfullchain_path = \"/k/f.pem\"\n{}",
            domains,
            family.map_or(String::new(), |f| format!("family = \"{f:?}\"\n"))
        );
        let c = Config::parse(&text, std::path::Path::new("t.toml")).unwrap();
        c.certificates[0].clone()
    }

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

    #[test]
    fn reissue_rule_2_on_the_configured_names() {
        let two = names(&["a.example.com", "b.example.com"]);
        // Same names, fewer names: fine.
        assert!(
            names_cannot_change(&cert(&["a.example.com", "b.example.com"], None), &two).is_none()
        );
        assert!(names_cannot_change(&cert(&["a.example.com"], None), &two).is_none());
        // Growth: refused.
        let grown = cert(&["a.example.com", "b.example.com", "c.example.com"], None);
        assert!(names_cannot_change(&grown, &two).is_some());
        // Family S multi-domain may change up to max(current, 3).
        let s3 = cert(
            &["a.example.com", "b.example.com", "c.example.com"],
            Some(Family::S),
        );
        assert!(names_cannot_change(&s3, &two).is_none());
        let s4 = cert(
            &[
                "a.example.com",
                "b.example.com",
                "c.example.com",
                "d.example.com",
            ],
            Some(Family::S),
        );
        assert!(names_cannot_change(&s4, &two).is_some());
        // Other families may not swap a name.
        let swapped = cert(&["a.example.com", "c.example.com"], Some(Family::D));
        assert!(names_cannot_change(&swapped, &two).is_some());
        // The common name must be one of the certificate's domains.
        let new_cn = cert(&["c.example.com", "a.example.com"], Some(Family::S));
        assert!(names_cannot_change(&new_cn, &two).is_some());
        // A wildcard's bare domain is not counted as extra.
        let wild = names(&["*.example.com"]);
        assert!(
            names_cannot_change(&cert(&["*.example.com", "example.com"], None), &wild).is_none()
        );
    }
}
