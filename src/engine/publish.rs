//! Publishing what domain control validation needs — the file in web roots or the standalone
//! server, DNS records through the hook — as the issuer asks for it in neutral challenges
//! (the Partner issuer checks the API's values against our own CSR first), and removing it all
//! once validation is over.

use std::net::SocketAddr;
use std::time::Duration;

use anyhow::{Context, Result, anyhow, bail};

use crate::api::CertificateDetails;
use crate::config::{CertificateConfig, DcvMethod, Webroot};
use crate::crypto::CsrHashes;
use crate::dcv::{
    self, Challenge, HttpChallenge, ValidationFile, hook, selfcheck::SelfCheck,
    standalone::StandaloneServer,
};
use crate::issuer::{Validation, partner};
use crate::store::{CertRecord, PublishedDcv, Store};

use super::context::Ctx;

/// What [`publish_dcv`] did.
pub(super) enum Published {
    /// Published (or nothing to publish); wait for the CA.
    Yes,
    /// The API does not say yet what to publish; try again after the next poll.
    Later,
    /// The operator must act (approve an email, create DNS records).
    Operator(String),
}

pub(super) fn csr_hashes(rec: &CertRecord) -> Result<CsrHashes> {
    let p = rec
        .pending_key
        .as_ref()
        .ok_or_else(|| anyhow!("no pending key and CSR recorded"))?;
    Ok(CsrHashes {
        md5: p.csr_md5.clone(),
        sha256: p.csr_sha256.clone(),
    })
}

pub(super) async fn publish_dcv(
    ctx: &Ctx<'_>,
    cert: &CertificateConfig,
    rec: &mut CertRecord,
    certificate_id: u64,
    reissue: bool,
    details: Option<CertificateDetails>,
) -> Result<Published> {
    let details = match details {
        Some(d) => d,
        None => ctx
            .client()?
            .details(certificate_id)
            .await
            .with_context(|| format!("could not read certificate {certificate_id}"))?,
    };
    let ours = csr_hashes(rec)?;
    // The order must carry our CSR: its key is the one kept on this host.
    if !partner::carries_our_csr(certificate_id, &details, &ours, reissue)? {
        return Ok(Published::Later);
    }

    if let Some(s) = super::job::subscription_of(&details) {
        rec.partner.subscription = Some(s);
        ctx.store.save(rec)?;
    }

    let client = ctx.client()?;
    match partner::challenges(client, cert, certificate_id, &details, &ours).await? {
        Validation::Later => Ok(Published::Later),
        Validation::Publish(challenges) => publish_challenges(ctx, cert, rec, challenges).await,
    }
}

/// Publishes what an issuer asks for: HTTP files into the web roots or the standalone server
/// (and to the fleet), DNS records through the hook; steps for a person are handed back.
pub(super) async fn publish_challenges(
    ctx: &Ctx<'_>,
    cert: &CertificateConfig,
    rec: &mut CertRecord,
    challenges: Vec<Challenge>,
) -> Result<Published> {
    let mut files = Vec::new();
    let mut records = Vec::new();
    let mut steps = Vec::new();
    for challenge in challenges {
        match challenge {
            Challenge::Http(h) => files.push(h),
            Challenge::Dns(r) => records.push(r),
            Challenge::Person(step) => steps.push(step),
        }
    }
    if !steps.is_empty() {
        return Ok(Published::Operator(steps.join("; ")));
    }
    for http in &files {
        publish_http(ctx, cert, rec, http).await?;
    }
    if records.is_empty() {
        return Ok(Published::Yes);
    }
    publish_dns(ctx, cert, rec, records).await
}

/// An HTTP validation file, in the web roots of its names or the standalone server.
async fn publish_http(
    ctx: &Ctx<'_>,
    cert: &CertificateConfig,
    rec: &mut CertRecord,
    http: &HttpChallenge,
) -> Result<()> {
    let file = &http.file;
    if cert.dcv.standalone {
        // Recorded first: a run stopped half-way still removes the file next time.
        rec.dcv.standalone_file = Some((file.name().to_owned(), file.content().to_owned()));
        ctx.store.save(rec)?;
        publish_standalone(ctx, cert, file).await?;
    } else {
        publish_webroots(ctx, cert, rec, http)?;
    }
    if let Some(lead) = ctx.lead {
        lead.publish_dcv(cert, file).await?;
    }
    crate::failpoint::hit("dcv-placed");
    ctx.store.journal(
        &cert.name,
        "dcv-published",
        serde_json::json!({ "file": file.url_path() }),
    )?;
    self_check(ctx, cert, http);
    Ok(())
}

/// Writes the validation file into the web roots of the certificate's names; what is written
/// (and which directories are created) is recorded first, so that a run stopped half-way
/// still removes everything next time.
fn publish_webroots(
    ctx: &Ctx<'_>,
    cert: &CertificateConfig,
    rec: &mut CertRecord,
    http: &HttpChallenge,
) -> Result<()> {
    let file = &http.file;
    let webroots = webroots(cert)?;
    let roots = webroots
        .distinct_for(&http.domains)
        .context("could not publish the validation file")?;
    // Recorded before anything is written, so that a run stopped half-way still
    // removes everything next time.
    for root in &roots {
        let wk = root.join(".well-known");
        let pv = wk.join(file.well_known().dir_name());
        for dir in [wk, pv.clone()] {
            if !dir.exists() && !rec.dcv.dirs.contains(&dir) {
                rec.dcv.dirs.push(dir);
            }
        }
        let target = pv.join(file.name());
        if !rec.dcv.files.contains(&target) {
            rec.dcv.files.push(target);
        }
    }
    ctx.store.save(rec)?;
    let published = dcv::webroot::publish_into(&roots, file)
        .context("could not publish the validation file")?;
    // Written again only when the files or directories differ from those recorded first.
    let before = (rec.dcv.files.len(), rec.dcv.dirs.len());
    for f in published.files {
        if !rec.dcv.files.contains(&f) {
            rec.dcv.files.push(f);
        }
    }
    for d in published.dirs {
        if !rec.dcv.dirs.contains(&d) {
            rec.dcv.dirs.push(d);
        }
    }
    if (rec.dcv.files.len(), rec.dcv.dirs.len()) != before {
        ctx.store.save(rec)?;
    }
    Ok(())
}

/// DNS records through the hook (or, without one, a step for the operator).
async fn publish_dns(
    ctx: &Ctx<'_>,
    cert: &CertificateConfig,
    rec: &mut CertRecord,
    records: Vec<hook::DnsRecord>,
) -> Result<Published> {
    let Some(command) = &cert.dcv.dns_hook else {
        let list = records
            .iter()
            .map(ToString::to_string)
            .collect::<Vec<_>>()
            .join("; ");
        return Ok(Published::Operator(format!(
            "create these DNS records (no dns_hook is configured): {list}"
        )));
    };
    let hook = hook::DnsHook {
        argv: command.argv(),
        timeout: Duration::from_secs(120),
    };
    let mut seen = std::collections::HashSet::new();
    for record in records {
        if !seen.insert((record.name.clone(), record.value.clone())) {
            continue;
        }
        let stored = (
            record.name.clone(),
            record.record_type.as_str().to_owned(),
            record.value.clone(),
        );

        // Recorded first: a run stopped during the hook still removes the record later
        // (hooks are called to remove what may not exist; they must be idempotent).
        // Added again on a later run (an earlier add may have failed half-way), but recorded
        // once.
        if !rec.dcv.dns_records.contains(&stored) {
            rec.dcv.dns_records.push(stored);
            rec.dcv.dns_domains.push(record.domain.clone());
            ctx.store.save(rec)?;
        }
        hook::run(&hook, hook::HookAction::Add, &record, &cert.name)
            .await
            .with_context(|| format!("dns_hook could not add {record}"))?;
    }
    rec.dcv.dns_complete = true;
    ctx.store.save(rec)?;
    Ok(Published::Yes)
}

/// Serves again what an earlier run published for the pending CSR, without asking the API:
/// true when validation is in place (files still in the web roots, the standalone file
/// served again, every DNS record added).
pub(super) async fn republish(
    ctx: &Ctx<'_>,
    cert: &CertificateConfig,
    rec: &CertRecord,
) -> Result<bool> {
    let Some(pending) = rec.pending_key.as_ref() else {
        return Ok(false);
    };
    let name = partner::validation_file_name(pending);
    match cert.dcv.method {
        DcvMethod::Http | DcvMethod::Https if cert.dcv.standalone => {
            let Some((n, content)) = rec.dcv.standalone_file.as_ref().filter(|(n, _)| *n == name)
            else {
                return Ok(false);
            };
            let file = ValidationFile::from_parts(n, content)?;
            publish_standalone(ctx, cert, &file).await?;
            Ok(true)
        }
        DcvMethod::Http | DcvMethod::Https => Ok(!rec.dcv.files.is_empty()
            && rec
                .dcv
                .files
                .iter()
                .all(|f| f.ends_with(&name) && f.is_file())),
        DcvMethod::Cname | DcvMethod::DnsTxt => Ok(rec.dcv.dns_complete),
        DcvMethod::Email => Ok(false),
    }
}

/// Fetches the published file as the CA will, in the background: the certificate goes on
/// waiting for the CA meanwhile (a name that does not resolve can take the whole timeout), and
/// what the check finds is logged as a warning. With `[preflight] http` on, each name is
/// resolved through the pre-flight's resolver and the file fetched through each of its
/// addresses, the warning showing the resolution. Checks still running when the run ends are
/// dropped ([`Ctx::finish_self_checks`]).
fn self_check(ctx: &Ctx<'_>, cert: &CertificateConfig, http: &HttpChallenge) {
    let name = cert.name.clone();
    let domains: Vec<String> = http
        .domains
        .iter()
        .filter(|d| !d.starts_with("*."))
        .cloned()
        .collect();
    let file = http.file.clone();
    let settings = ctx
        .config
        .preflight
        .http
        .then(|| super::preflight::settings(ctx.config));
    ctx.spawn_self_check(async move {
        for domain in &domains {
            let warnings = match &settings {
                Some(s) => self_check_resolved(s, domain, &file).await,
                None => Vec::from_iter(self_check_at(domain, &file, None, String::new()).await),
            };
            for w in warnings {
                tracing::warn!(certificate = %name, "{w}");
            }
        }
    });
}

/// The self-check of `domain` through each address the pre-flight's resolver gives.
async fn self_check_resolved(
    settings: &crate::preflight::Settings,
    domain: &str,
    file: &ValidationFile,
) -> Vec<String> {
    let url = SelfCheck::url(domain, file);
    let addrs = match crate::preflight::addresses(settings, domain).await {
        Ok(addrs) if !addrs.is_empty() => addrs,
        Ok(_) => {
            return vec![format!(
                "self-check of {url}: {domain} has no address (A/AAAA) at the resolver {}; \
                 the CA cannot fetch the file either",
                settings.resolver
            )];
        }
        Err(e) => return vec![format!("self-check of {url}: {e}")],
    };
    let list: Vec<String> = addrs.iter().map(ToString::to_string).collect();
    let mut warnings = Vec::new();
    // A CA fetches from one of the addresses: each must serve the file.
    for ip in addrs.iter().take(4) {
        let at = SocketAddr::new(*ip, 80);
        let shown = format!(
            " through {at} ({domain} resolves to {} at the resolver {})",
            list.join(", "),
            settings.resolver
        );
        warnings.extend(self_check_at(domain, file, Some(at), shown).await);
    }
    warnings
}

/// One fetch of the file for `domain` (through `address`, else the system's resolution);
/// the warning, if any, with `shown` after the URL.
async fn self_check_at(
    domain: &str,
    file: &ValidationFile,
    address: Option<SocketAddr>,
    shown: String,
) -> Option<String> {
    let check = SelfCheck {
        timeout: Duration::from_secs(5),
        address,
    };
    match check.check(domain, file).await {
        Ok(outcome) => outcome.warning(&format!("{}{shown}", SelfCheck::url(domain, file))),
        Err(e) => Some(format!("self-check not possible: {e}")),
    }
}

/// Serves `file` for a standalone certificate: through the publish directory of a running
/// `cert-agent serve` that listens on the certificate's address, else with a server inside
/// this run.
async fn publish_standalone(
    ctx: &Ctx<'_>,
    cert: &CertificateConfig,
    file: &ValidationFile,
) -> Result<()> {
    let state_dir = ctx.store.dir().to_path_buf();
    match dcv::serve_dir::running(&state_dir) {
        Ok(Some(serve)) if serve.listen.contains(&cert.dcv.listen) => {
            let path = dcv::serve_dir::publish(&state_dir, file)
                .context("could not publish the validation file for cert-agent serve")?;
            tracing::info!(
                certificate = %cert.name,
                "published '{}' for cert-agent serve (pid {}) on {}",
                path.display(),
                serve.pid,
                cert.dcv.listen
            );
            return Ok(());
        }
        Ok(Some(serve)) => tracing::warn!(
            certificate = %cert.name,
            "cert-agent serve (pid {}) does not listen on {} (restart it after changing \
             `listen`); serving the file from this run",
            serve.pid,
            cert.dcv.listen
        ),
        Ok(None) => {}
        Err(e) => tracing::warn!(
            certificate = %cert.name,
            "could not tell whether cert-agent serve runs ({e}); serving the file from this run"
        ),
    }
    standalone_server(ctx, cert.dcv.listen)
        .await?
        .add_file(file);
    Ok(())
}

/// The run's standalone server on `listen`, started on first use. The guard keeps the run's
/// server map locked: use it for one call and let it go.
pub(super) async fn standalone_server<'c>(
    ctx: &'c Ctx<'_>,
    listen: SocketAddr,
) -> Result<tokio::sync::MappedMutexGuard<'c, StandaloneServer>> {
    let mut servers = ctx.standalone.lock().await;
    if let std::collections::hash_map::Entry::Vacant(slot) = servers.entry(listen) {
        let server = StandaloneServer::start(listen)
            .await
            .with_context(|| format!("could not start the standalone DCV server on {listen}"))?;
        slot.insert(server);
    }
    tokio::sync::MutexGuard::try_map(servers, |s| s.get_mut(&listen))
        .map_err(|_| anyhow!("standalone server on {listen} vanished"))
}

pub(crate) fn webroots(cert: &CertificateConfig) -> Result<dcv::webroot::Webroots> {
    match &cert.dcv.webroot {
        Some(Webroot::Single(p)) => Ok(dcv::webroot::Webroots::One(p.clone())),
        Some(Webroot::PerDomain(m)) => Ok(dcv::webroot::Webroots::PerDomain(m.clone())),
        None => bail!(
            "certificate '{}' uses HTTP validation but has neither `webroot` nor `standalone = \
             true`",
            cert.name
        ),
    }
}

/// Removes what was published for validation (files, directories, DNS records).
pub(super) async fn cleanup_dcv(ctx: &Ctx<'_>, cert: &CertificateConfig, rec: &mut CertRecord) {
    cleanup_dcv_then(ctx, cert, rec, Save::Now).await;
}

/// [`cleanup_dcv`] for a certificate about to be installed: the record without what was
/// published is written with the install's ([`super::deploy::install_ready`] writes every
/// record of a batch together), not on its own. Until then the record on disk still names
/// the removed files, which a later run's cleanup finds gone: never a file left that the
/// record does not name.
pub(super) async fn cleanup_dcv_before_install(
    ctx: &Ctx<'_>,
    cert: &CertificateConfig,
    rec: &mut CertRecord,
) {
    cleanup_dcv_then(ctx, cert, rec, Save::WithInstall).await;
}

/// When a cleanup's record is written.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Save {
    Now,
    WithInstall,
}

async fn cleanup_dcv_then(
    ctx: &Ctx<'_>,
    cert: &CertificateConfig,
    rec: &mut CertRecord,
    save: Save,
) {
    let names: Vec<String> = rec
        .pending_key
        .as_deref()
        .map(partner::validation_file_name)
        .into_iter()
        .collect();
    cleanup_challenges_then(ctx, cert, rec, &names, save).await;
}

/// Removes what was published for a validation: the files `names` from the run's standalone
/// servers, the fleet's publication, and what the record says was published on this host.
pub(super) async fn cleanup_challenges(
    ctx: &Ctx<'_>,
    cert: &CertificateConfig,
    rec: &mut CertRecord,
    names: &[String],
) {
    cleanup_challenges_then(ctx, cert, rec, names, Save::Now).await;
}

async fn cleanup_challenges_then(
    ctx: &Ctx<'_>,
    cert: &CertificateConfig,
    rec: &mut CertRecord,
    names: &[String],
    save: Save,
) {
    if let Some(lead) = ctx.lead {
        lead.remove_dcv(cert).await;
    }
    for server in ctx.standalone.lock().await.values() {
        for name in names {
            server.remove_file(name);
        }
    }
    if remove_unsaved(ctx.store, cert, rec).await
        && save == Save::Now
        && let Err(e) = ctx.store.save(rec)
    {
        tracing::warn!(certificate = %cert.name, "{e}");
    }
}

/// Removes what was published for validation on this host — the files in web roots and in
/// the publish directory of `cert-agent serve`, the DNS records through the hook — and
/// saves the record without them (what a run's servers in memory hold is the caller's).
pub(crate) async fn remove_published(
    store: &Store,
    cert: &CertificateConfig,
    rec: &mut CertRecord,
) {
    if remove_unsaved(store, cert, rec).await
        && let Err(e) = store.save(rec)
    {
        tracing::warn!(certificate = %cert.name, "{e}");
    }
}

/// [`remove_published`] without writing the record: whether it changed.
async fn remove_unsaved(store: &Store, cert: &CertificateConfig, rec: &mut CertRecord) -> bool {
    let mut files = std::mem::take(&mut rec.dcv.files);
    // The standalone file in the publish directory of `cert-agent serve`, whether or not one
    // runs now: the pending CSR's name and the recorded one.
    let served = rec
        .pending_key
        .as_deref()
        .map(partner::validation_file_name)
        .into_iter()
        .chain(rec.dcv.standalone_file.as_ref().map(|(n, _)| n.clone()));
    if cert.dcv.standalone || rec.dcv.standalone_file.is_some() {
        for name in served {
            if let Err(e) = dcv::serve_dir::remove(store.dir(), &name) {
                tracing::warn!(certificate = %cert.name, "could not remove a validation file: {e}");
            }
        }
    }
    if let Some(p) = rec.pending_key.as_ref() {
        let name = partner::validation_file_name(p);
        // The file for the pending CSR in each web root, recorded or not: the record is
        // written before the file, but a file that outlived its record must not stay.
        if cert.dcv.method.is_http()
            && !cert.dcv.standalone
            && let Ok(w) = webroots(cert)
            && let Ok(roots) = w.distinct_for(&cert.domains)
        {
            for root in roots {
                let path = root
                    .join(".well-known")
                    .join(partner::WELL_KNOWN.dir_name())
                    .join(&name);
                if !files.contains(&path) && path.exists() {
                    files.push(path);
                }
            }
        }
    }
    if files.is_empty() && rec.dcv.is_empty() {
        return false;
    }
    let published = dcv::webroot::Published {
        files,
        dirs: std::mem::take(&mut rec.dcv.dirs),
    };
    if let Err(e) = dcv::webroot::remove(&published) {
        tracing::warn!(certificate = %cert.name, "could not remove validation files: {e}");
    }
    if let Some(command) = &cert.dcv.dns_hook {
        let hook = hook::DnsHook {
            argv: command.argv(),
            timeout: Duration::from_secs(120),
        };
        let domains = std::mem::take(&mut rec.dcv.dns_domains);
        for (i, (name, rtype, value)) in std::mem::take(&mut rec.dcv.dns_records)
            .into_iter()
            .enumerate()
        {
            let record = hook::DnsRecord {
                domain: domains.get(i).cloned().unwrap_or_default(),
                name,
                record_type: if rtype == "CNAME" {
                    hook::RecordType::Cname
                } else {
                    hook::RecordType::Txt
                },
                value,
            };
            if let Err(e) = hook::run(&hook, hook::HookAction::Remove, &record, &cert.name).await {
                tracing::warn!(certificate = %cert.name, "dns_hook could not remove {record}: {e}");
            }
        }
    }
    rec.dcv = PublishedDcv::default();
    true
}
