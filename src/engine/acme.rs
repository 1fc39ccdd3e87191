//! A certificate from an ACME CA through the engine: planned by [`plan`], ordered through
//! [`crate::issuer::acme`], validated by the same writers as every certificate (web roots,
//! the standalone server, `cert-agent serve`, the DNS hook), checked, and handed to the
//! run's install phase like any other ready certificate.
//!
//! The order is journaled before any challenge is published or answered: a run stopped at
//! any step (a crash, a timeout, SIGTERM) goes on with the same order, which is never placed
//! twice for the same key. What was published is removed whatever the order's outcome.

pub(crate) mod plan;

use std::path::PathBuf;

use anyhow::{Context, Result, anyhow};
use instant_acme::Account;

use crate::bundle::{self, Expected};
use crate::config::{AcmeCa, DcvMethod};
use crate::crypto::PrivateKey;
use crate::dcv::Challenge;
use crate::issuer::acme::{self, Method};
use crate::store::{AcmeBook, RenewalWindow};

use super::context::Ctx;
use super::deploy;
use super::job::{Job, Next, Ready};
use super::keys;
use super::plan::Disk;
use super::publish::{self, Published};
use super::report::Outcome;
use plan::Action;

/// Where the account of `ca` is kept: `state_dir/acme/NAME/`.
pub(crate) fn account_dir(state_dir: &std::path::Path, ca: &str) -> PathBuf {
    acme::account_dir(state_dir, ca)
}

/// The directory of `ca` as the ACME issuer needs it, the External Account Binding's HMAC key
/// read from its file (base64url, as CAs hand it out).
pub(crate) fn directory_of(ca: &AcmeCa) -> Result<acme::Directory> {
    let eab = match (&ca.eab_kid, &ca.eab_hmac_file) {
        (Some(kid), Some(file)) => {
            let credential = std::env::var_os("CREDENTIALS_DIRECTORY")
                .is_some_and(|d| file.starts_with(std::path::Path::new(&d)));
            let text = crate::fsutil::read_secret(file, 4096, !credential).map_err(|why| {
                anyhow!(
                    "[acme.{}] `eab_hmac_file` {}: {why}",
                    ca.name,
                    file.display()
                )
            })?;
            let text = String::from_utf8_lossy(&text);
            use base64::Engine;
            let key = base64::engine::general_purpose::URL_SAFE_NO_PAD
                .decode(text.trim().trim_end_matches('='))
                .map_err(|_| {
                    anyhow!(
                        "[acme.{}] `eab_hmac_file` {}: not a base64url HMAC key as the CA \
                         hands it out",
                        ca.name,
                        file.display()
                    )
                })?;
            if key.len() < 16 {
                return Err(anyhow!(
                    "[acme.{}] `eab_hmac_file` {}: an HMAC key of {} bytes is too short",
                    ca.name,
                    file.display(),
                    key.len()
                ));
            }
            Some((kid.clone(), key))
        }
        _ => None,
    };
    Ok(acme::Directory {
        url: ca.directory.clone(),
        contact: ca.contact.clone(),
        eab,
        ca_file: ca.ca_file.clone(),
    })
}

/// How the names of `method` are validated by an ACME CA.
pub(crate) fn method_of(method: DcvMethod) -> Method {
    match method {
        DcvMethod::DnsTxt | DcvMethod::Cname => Method::Dns,
        DcvMethod::Http | DcvMethod::Https | DcvMethod::Email => Method::Http,
    }
}

/// The account of the ACME CA `ca` kept under `state_dir` (registered first when there is
/// none).
pub(crate) async fn account_of(state_dir: &std::path::Path, ca: &AcmeCa) -> Result<Account> {
    let directory = directory_of(ca)?;
    acme::account(&directory, &account_dir(state_dir, &ca.name))
        .await
        .with_context(|| format!("could not use the account of the ACME CA '{}'", ca.name))
}

impl Ctx<'_> {
    /// The account of the ACME CA `ca`: registered on first use, read from its file after
    /// that; once per run.
    pub(super) async fn acme_account(&self, ca: &AcmeCa) -> Result<Account> {
        let mut accounts = self.acme_accounts.lock().await;
        if let Some(a) = accounts.get(&ca.name) {
            return Ok(a.clone());
        }
        // In a fleet: the fleet's one account for this CA, kept here before it is used.
        if let Some(lead) = self.lead {
            lead.acme_account(ca).await?;
        }
        let account = account_of(self.store.dir(), ca).await?;
        accounts.insert(ca.name.clone(), account.clone());
        Ok(account)
    }
}

/// Plans and starts the action of a certificate from the ACME CA `ca_name`.
pub(super) async fn start(ctx: &Ctx<'_>, job: &mut Job<'_>, ca_name: &str) -> Result<Next> {
    let ca = ctx.config.acme.get(ca_name).ok_or_else(|| {
        anyhow!(
            "the ACME CA '{ca_name}' of certificate '{}' is not configured",
            job.cert.name
        )
    })?;
    let disk = super::start::refresh_disk(ctx, job)?;
    if disk == Disk::AsInstalled {
        super::start::check_revocation(ctx, job).await?;
    }
    let mut action = plan::decide(&inputs(ctx, job, disk.clone()));
    if action == Action::AskWindow && !ctx.opts.dry_run {
        ask_window(ctx, job, ca).await?;
        action = plan::decide(&inputs(ctx, job, disk.clone()));
    }
    if matches!(action, Action::Idle { .. })
        && disk == Disk::AsInstalled
        && job.revocation.as_ref().is_none_or(|r| r.state != "revoked")
        && (ctx.revocation.is_none() || job.crl_ref.is_some())
    {
        job.quiet_until = plan::quiet_until(&inputs(ctx, job, disk));
    }
    if ctx.opts.dry_run {
        return Ok(Next::Done(Outcome::Planned {
            action: plan::describe(&action),
        }));
    }
    tracing::debug!(certificate = %job.cert.name, "plan: {action:?}");
    match action {
        Action::Idle { next } => Ok(Next::Done(super::start::unchanged(&job.rec, next))),
        Action::Backoff { until } => Ok(Next::Done(Outcome::Failed {
            error: super::start::backoff_message(job, until, ctx.now()),
        })),
        Action::AskWindow => Ok(Next::Done(Outcome::Unchanged {
            reason: "the renewal window is asked for on the next run".into(),
        })),
        Action::Resume => Box::pin(order(ctx, job, ca, None)).await,
        Action::Order { reason, replaces } => {
            tracing::info!(certificate = %job.cert.name, "ordering from the ACME CA '{}': {reason}", ca.name);
            Box::pin(order(ctx, job, ca, Some((replaces, reason)))).await
        }
    }
}

fn inputs<'a>(ctx: &Ctx<'_>, job: &'a Job<'_>, disk: Disk) -> plan::Inputs<'a> {
    plan::Inputs {
        now: ctx.now(),
        record: &job.rec,
        disk,
        renew_before_days: ctx.config.agent.renew_before_days,
        force: ctx.opts.force || ctx.opts.reinstall,
        ignore_backoff: ctx.opts.ignore_backoff,
    }
}

/// The installed leaf's DER, read from its file (for Renewal Information, `replaces` and
/// `cert-agent revoke`).
pub(crate) fn installed_leaf_der(rec: &crate::store::CertRecord) -> Option<Vec<u8>> {
    let inst = rec.installed.as_ref()?;
    let pem = std::fs::read(inst.leaf_file.as_ref()?).ok()?;
    use rustls_pki_types::pem::PemObject;
    rustls_pki_types::CertificateDer::from_pem_slice(&pem)
        .ok()
        .map(|d| d.to_vec())
}

/// Asks the directory for the installed certificate's renewal window and keeps it, with a
/// moment chosen inside it; a directory without Renewal Information is remembered as such.
async fn ask_window(ctx: &Ctx<'_>, job: &mut Job<'_>, ca: &AcmeCa) -> Result<()> {
    let account = ctx.acme_account(ca).await?;
    let Some(inst) = job.rec.installed.clone() else {
        return Ok(());
    };
    let Some(der) = installed_leaf_der(&job.rec) else {
        // The file is unreadable: the own rule decides until the next certificate.
        book(job, ca).renewal_info = Some(false);
        return job.save();
    };
    let now = ctx.now();
    let window = acme::renewal_window(&account, &der)
        .await
        .with_context(|| {
            format!(
                "could not read the renewal window of serial {}",
                inst.serial
            )
        })?;
    let b = book(job, ca);
    match window {
        None => {
            b.renewal_info = Some(false);
            b.window = None;
        }
        Some(w) => {
            let fraction: f64 = rand::random();
            let renew_at = acme::renew_at(&w, now, fraction);
            let retry = time::Duration::try_from(w.retry_after).unwrap_or(time::Duration::HOUR);
            b.renewal_info = Some(true);
            b.window = Some(RenewalWindow {
                serial: inst.serial.clone(),
                start: w.start,
                end: w.end,
                renew_at,
                next_check: now.checked_add(retry).unwrap_or(now),
                explanation: w.explanation,
            });
        }
    }
    job.save()
}

/// The record's ACME part for `ca` (made when missing; a certificate moved to another CA
/// starts afresh).
fn book<'r>(job: &'r mut Job<'_>, ca: &AcmeCa) -> &'r mut AcmeBook {
    let b = job.rec.acme.get_or_insert_with(|| {
        Box::new(AcmeBook {
            ca: ca.name.clone(),
            ..AcmeBook::default()
        })
    });
    if b.ca != ca.name {
        **b = AcmeBook {
            ca: ca.name.clone(),
            ..AcmeBook::default()
        };
    }
    b
}

/// Places an order (`new`: whether it renews the installed certificate, and why) or resumes
/// the journaled one (`None`), publishes what it asks for, answers, finalizes with the
/// pending key's CSR, and checks the chain: ready to install.
async fn order(
    ctx: &Ctx<'_>,
    job: &mut Job<'_>,
    ca: &AcmeCa,
    new: Option<(bool, String)>,
) -> Result<Next> {
    let account = ctx.acme_account(ca).await?;
    let cert = job.cert;
    let method = method_of(cert.dcv.method);
    let pending = keys::ensure_pending_key(ctx.store, cert, &mut job.rec, ctx.now())?;
    let key = keys::load_pending(&pending)?;
    let profile = cert.order.profile.clone().or_else(|| ca.profile.clone());
    let resume_url = journaled_order(job, ca)?;
    let placed = match (new, resume_url) {
        (None, Some(url)) => match acme::resume(&account, &url, &cert.domains, method).await {
            Ok(p) => p,
            Err(e) => {
                // The order cannot be used any more (gone, invalid): the next run places one.
                forget_order(job)?;
                return Err(anyhow!(e).context("the journaled ACME order cannot go on"));
            }
        },
        (new, _) => place(ctx, job, ca, &account, method, profile, new).await?,
    };
    let acme::Placed {
        mut order,
        challenges,
    } = placed;
    let files: Vec<crate::dcv::ValidationFile> = challenges
        .iter()
        .filter_map(|c| match c {
            Challenge::Http(h) => Some(h.file.clone()),
            _ => None,
        })
        .collect();
    let names: Vec<String> = files.iter().map(|f| f.name().to_owned()).collect();
    let finished = async {
        if !challenges.is_empty() {
            match publish::publish_challenges(ctx, cert, &mut job.rec, challenges).await? {
                Published::Yes => {}
                Published::Later | Published::Operator(_) => {
                    return Err(anyhow!(
                        "the ACME CA asked for a validation that cannot be published"
                    ));
                }
            }
            crate::failpoint::hit("acme-published");
        }
        // In a fleet the CA may ask any host: answered once every live host serves the files.
        if let Some(lead) = ctx.lead
            && !files.is_empty()
        {
            let missing = lead.hosts_not_serving(cert, &files).await?;
            if !missing.is_empty() {
                return Ok(Finished::Waiting(missing));
            }
        }
        let csr = crate::crypto::CsrInfo::from_pem(pending.csr_pem.as_bytes())?.der;
        acme::finish(&mut order, &csr, method)
            .await
            .map(Finished::Chain)
            .map_err(anyhow::Error::from)
    }
    .await;
    let finished = match finished {
        Ok(Finished::Chain(chain)) => Ok(chain),
        Err(e) => Err(e),
        // Left published: the next run resumes the order and asks the hosts again.
        Ok(Finished::Waiting(missing)) => {
            return Ok(Next::Done(Outcome::Pending {
                reason: format!(
                    "the ACME order {} waits for {} to serve its validation file (the challenge is \
                 answered once every live host of the fleet serves it)",
                    order.url(),
                    missing.join(", ")
                ),
            }));
        }
    };
    publish::cleanup_challenges(ctx, cert, &mut job.rec, &names).await;
    let chain = match finished {
        Ok(chain) => chain,
        Err(e) => {
            if order_is_dead(&e) {
                forget_order(job)?;
            }
            return Err(e.context(format!(
                "the ACME order of '{}' did not complete",
                cert.name
            )));
        }
    };
    let chain = match &ca.preferred_chain {
        Some(preferred) => {
            let directory = directory_of(ca)?;
            let dir = account_dir(ctx.store.dir(), &ca.name);
            acme::chain::to_install(&directory, &dir, &mut order, chain, preferred).await
        }
        None => chain,
    };
    crate::failpoint::hit("acme-chain-received");
    let checked = ready(ctx, job, &key, chain.as_bytes());
    if checked.is_err() {
        // The same order would give the same chain again (a CA's fault, or an order URL
        // replayed into the state): the next run places a new one.
        forget_order(job)?;
    }
    checked
}

/// The journaled order to go on with: none when there is none, when it was placed for other
/// names than the configured ones (the configuration changed since), or when its URL is not at
/// the CA (the state file edited); each of those is dropped.
fn journaled_order(job: &mut Job<'_>, ca: &AcmeCa) -> Result<Option<String>> {
    let cert = job.cert;
    let resume_url = job.rec.acme.as_ref().and_then(|b| b.order_url.clone());
    // An order placed for other names (the configuration changed since) is not resumed.
    let resume_url = match (resume_url, &job.rec.acme) {
        (Some(url), Some(b)) if !b.names.is_empty() && b.names != cert.domains => {
            tracing::info!(
                certificate = %cert.name,
                "the ACME order {url} was placed for {}, not the configured names: a new order is placed",
                b.names.join(", ")
            );
            forget_order(job)?;
            None
        }
        (url, _) => url,
    };
    // An order URL that is not at the CA (the state file edited) is never sent to.
    let resume_url = match resume_url {
        Some(url) if !acme::http::same_origin(&url, &ca.directory) => {
            tracing::warn!(
                certificate = %cert.name,
                "the journaled ACME order {} is not at the CA's directory {}: it is dropped and a new order placed",
                crate::values::text::quote_max(&url, 200),
                ca.directory
            );
            forget_order(job)?;
            None
        }
        other => other,
    };
    Ok(resume_url)
}

/// Places a new order (`new`: whether it renews the installed certificate, and why; `None`:
/// the journaled one is gone) and journals it (in a fleet: shared) before anything else.
async fn place(
    ctx: &Ctx<'_>,
    job: &mut Job<'_>,
    ca: &AcmeCa,
    account: &Account,
    method: Method,
    profile: Option<String>,
    new: Option<(bool, String)>,
) -> Result<acme::Placed> {
    let cert = job.cert;
    let (replaces, reason) = new.unwrap_or((false, "the journaled order is gone".into()));
    let options = acme::Options {
        profile,
        replaces: replaces.then(|| installed_leaf_der(&job.rec)).flatten(),
    };
    let ids = super::preflight::acme_identities(ctx.config, &ca.name);
    super::preflight::gate(ctx.config, job, &ids, Some(account.id()), "order").await?;
    // In a fleet the pending key is shared before the order exists: a leader that
    // takes over finalizes the same order with the same key.
    if let Some(lead) = ctx.lead {
        lead.share(cert, &job.rec).await?;
    }
    let placed = acme::place_with(account, &cert.domains, method, &options)
        .await
        .with_context(|| format!("could not order from the ACME CA '{}'", ca.name))?;
    let b = book(job, ca);
    b.order_url = Some(placed.order.url().to_owned());
    b.names = cert.domains.clone();
    b.placed_at = Some(ctx.now());
    // Asked again for the certificate this order brings.
    b.renewal_info = None;
    job.record(
        "acme-order-placed",
        serde_json::json!({
            "ca": ca.name,
            "order": placed.order.url(),
            "reason": reason,
            "replaces": options.replaces.is_some(),
        }),
    )?;
    // The order URL in the fleet's record: a leader that takes over resumes this
    // order, never a second one.
    if let Some(lead) = ctx.lead {
        lead.share(cert, &job.rec).await?;
    }
    crate::failpoint::hit("acme-order-placed");
    Ok(placed)
}

/// How an order's validation ended in this run.
enum Finished {
    /// The chain the CA issued.
    Chain(String),
    /// These hosts of the fleet do not serve the validation files yet: not answered.
    Waiting(Vec<String>),
}

/// Whether an order's error leaves it unusable (invalid): then the next run places a new one.
fn order_is_dead(e: &anyhow::Error) -> bool {
    e.chain().any(|c| {
        matches!(
            c.downcast_ref::<acme::AcmeError>(),
            Some(acme::AcmeError::Order { .. } | acme::AcmeError::Validation { .. })
        )
    })
}

/// Drops the journaled order (it cannot go on); the pending key stays for the next order.
fn forget_order(job: &mut Job<'_>) -> Result<()> {
    let Some(b) = job.rec.acme.as_mut() else {
        return Ok(());
    };
    let url = b.order_url.take();
    b.placed_at = None;
    b.names.clear();
    job.record("acme-order-dropped", serde_json::json!({ "order": url }))
}

/// Checks the chain against the key, the names and the clock: a ready certificate.
fn ready(ctx: &Ctx<'_>, job: &mut Job<'_>, key: &PrivateKey, chain: &[u8]) -> Result<Next> {
    let public_key = key.public_key_der();
    let now = ctx.now();
    let expected = Expected {
        public_key_der: &public_key,
        domains: &job.cert.domains,
        now: now + deploy::CLOCK_TOLERANCE,
        trust_anchors: &[],
    };
    let bundle = bundle::validate_chain(chain, job.cert.install.server, &expected)
        .map_err(anyhow::Error::from)
        .with_context(|| {
            format!(
                "the certificate chain the ACME CA '{}' sent for '{}' was rejected; nothing was \
                 installed",
                job.rec.acme.as_ref().map_or("?", |b| b.ca.as_str()),
                job.cert.name
            )
        })?;
    let install = deploy::cert_install(job.cert, &bundle, key);
    Ok(Next::Ready(Box::new(Ready {
        certificate_id: 0,
        bundle,
        install,
        archive: Vec::new(),
    })))
}
