//! One run of `cert-agent renew` / `issue`: drive each selected certificate towards "issued and
//! installed" (order, publish DCV, poll within the API's limit, download and check the
//! bundle), then install everything that is ready in one transaction per web server.

use std::collections::HashMap;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::time::Duration;

use anyhow::{Context, Result, anyhow, bail};
use time::OffsetDateTime;

use crate::api::{ApiError, CertificateState, Client};
use crate::bundle::{self, Expected, ValidatedBundle};
use crate::config::{CertificateConfig, Config, DcvMethod, Server, Webroot};
use crate::crypto::{CsrHashes, CsrInfo, PrivateKey};
use crate::dcv::{self, ValidationFile, hook, selfcheck::SelfCheck, standalone::StandaloneServer};
use crate::install::{
    self, CertInstall, CertMaterial, InstallPaths, Ownership, PathOverrides, Principal,
    ServerCommands, ServerKind, VerifyTarget,
};
use crate::store::{CertRecord, Installed, Store};

use super::{keys, order};

/// What the caller asked for.
#[derive(Debug, Clone)]
pub struct RunOptions {
    /// Certificates to work on; empty: every configured one.
    pub names: Vec<String>,
    /// Print what would be done; change nothing, call nothing that bills or changes state.
    pub dry_run: bool,
    /// Work on a certificate even when nothing is due.
    pub force: bool,
    /// How long this run waits for validation and issuance before leaving the rest to the
    /// next run (exit 75).
    pub wait: Duration,
    /// Billed orders allowed (`agent.allow_orders` or `--yes`).
    pub allow_orders: bool,
    /// Clear an unreconciled order intent on the operator's word.
    pub clear_intent: bool,
}

/// The outcome for one certificate.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
#[serde(tag = "outcome", rename_all = "snake_case")]
pub enum Outcome {
    /// Nothing to do.
    Unchanged { reason: String },
    /// A new certificate is installed and served.
    Installed {
        certificate_id: u64,
        serial: String,
        #[serde(with = "time::serde::rfc3339")]
        not_after: OffsetDateTime,
    },
    /// Waiting for the CA; the next run continues.
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
}

/// The whole run.
#[derive(Debug, Clone, Default, serde::Serialize)]
pub struct RunReport {
    pub certificates: Vec<CertReport>,
}

impl RunReport {
    /// Exit code of DESIGN.md: 0 done, 75 pending, 3 partial failure, 1 all failed.
    pub fn exit_code(&self) -> u8 {
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
            0 if pending => crate::cli::exit::PENDING,
            0 => crate::cli::exit::OK,
            n if n == self.certificates.len() => crate::cli::exit::ERROR,
            _ => crate::cli::exit::PARTIAL,
        }
    }
}

/// A certificate whose bundle is downloaded and checked, ready to install.
struct Ready {
    certificate_id: u64,
    bundle: ValidatedBundle,
    install: CertInstall,
}

enum Step {
    Done(Outcome),
    Ready(Box<Ready>),
}

/// Shared state of one run.
struct Ctx<'a> {
    config: &'a Config,
    client: &'a Client,
    store: &'a Store,
    opts: &'a RunOptions,
    started: tokio::time::Instant,
    /// Standalone DCV servers of this run, by listen address.
    standalone: HashMap<SocketAddr, StandaloneServer>,
}

/// Runs once over the selected certificates. Takes the run lock for its whole duration.
pub async fn run(config: &Config, client: &Client, opts: &RunOptions) -> Result<RunReport> {
    let store = Store::open(&config.agent.state_dir)?;
    let _lock = store.lock()?;
    let certs = select(config, &opts.names)?;
    let mut ctx = Ctx {
        config,
        client,
        store: &store,
        opts,
        started: tokio::time::Instant::now(),
        standalone: HashMap::new(),
    };

    let mut report = RunReport::default();
    let mut ready: Vec<(usize, Ready)> = Vec::new();
    for cert in &certs {
        let step = drive(&mut ctx, cert).await;
        let outcome = match step {
            Ok(Step::Done(outcome)) => outcome,
            Ok(Step::Ready(r)) => {
                ready.push((report.certificates.len(), *r));
                Outcome::Pending {
                    reason: "ready to install".into(),
                }
            }
            Err(err) => fail(&store, &cert.name, &err),
        };
        report.certificates.push(CertReport {
            name: cert.name.clone(),
            outcome,
        });
    }

    if !ready.is_empty() {
        let installs: Vec<CertInstall> = ready.iter().map(|(_, r)| r.install.clone()).collect();
        let outcomes = install::install_all(&installs).await;
        for ((idx, r), result) in ready.into_iter().zip(outcomes) {
            let name = report.certificates[idx].name.clone();
            let outcome = match (result.installed(), result.result) {
                (true, hook_result) => {
                    let installed = finish_install(&store, &name, &r)?;
                    if let Err(e) = hook_result {
                        tracing::warn!(certificate = %name, "deploy hook failed: {e}");
                    }
                    installed
                }
                (false, Err(e)) => fail(&store, &name, &anyhow!(e).context("install failed")),
                (false, Ok(())) => fail(&store, &name, &anyhow!("install did not complete")),
            };
            report.certificates[idx].outcome = outcome;
        }
    }

    for (_, server) in ctx.standalone.drain() {
        server.shutdown().await;
    }
    Ok(report)
}

fn select<'a>(config: &'a Config, names: &[String]) -> Result<Vec<&'a CertificateConfig>> {
    if names.is_empty() {
        return Ok(config.certificates.iter().collect());
    }
    names
        .iter()
        .map(|n| {
            config.certificate(n).ok_or_else(|| {
                anyhow!(crate::cli::UsageError(format!(
                    "no [[certificate]] named '{n}' in {} (configured: {})",
                    config.path.display(),
                    config
                        .certificates
                        .iter()
                        .map(|c| c.name.as_str())
                        .collect::<Vec<_>>()
                        .join(", ")
                )))
            })
        })
        .collect()
}

/// Records the failure in the certificate's state and turns it into an outcome.
fn fail(store: &Store, name: &str, err: &anyhow::Error) -> Outcome {
    let text = format!("{err:#}");
    if let Ok(mut rec) = store.load(name) {
        rec.last_error = Some(text.clone());
        if let Err(e) = store.save(&rec) {
            tracing::warn!(certificate = %name, "could not record the failure: {e}");
        }
    }
    Outcome::Failed { error: text }
}

fn now() -> OffsetDateTime {
    OffsetDateTime::now_utc()
}

/// Drives one certificate as far as this run can.
async fn drive(ctx: &mut Ctx<'_>, cert: &CertificateConfig) -> Result<Step> {
    let store = ctx.store;
    let mut rec = store.load(&cert.name)?;
    if ctx.opts.clear_intent && order::clear_intent(store, &mut rec)? {
        tracing::warn!(certificate = %cert.name, "unreconciled order intent cleared by the operator");
    }

    if rec.intent.is_none()
        && rec.pending_key.is_none()
        && let Some(installed) = &rec.installed
    {
        let days_left = (installed.not_after - now()).whole_days();
        if days_left > i64::from(ctx.config.agent.renew_before_days) {
            return Ok(Step::Done(Outcome::Unchanged {
                reason: format!("installed, valid for {days_left} more days"),
            }));
        }
        bail!(
            "the installed certificate ends in {days_left} days and needs a reissue; reissuing \
             is not available in this version"
        );
    }

    if ctx.opts.dry_run {
        return Ok(Step::Done(Outcome::Planned {
            action: plan_text(ctx, cert, &rec),
        }));
    }

    let ordered = order::ensure_order(
        ctx.config,
        cert,
        ctx.client,
        store,
        &mut rec,
        ctx.opts.allow_orders,
        now(),
    )
    .await?;
    let certificate_id = ordered.certificate_id();
    let Some(pending) = rec.pending_key.clone() else {
        bail!(
            "certificate {certificate_id} has no local key in the state directory; adopt it \
             with `cert-agent adopt {} --certificate-id {certificate_id}`",
            cert.name
        );
    };

    let mut published = false;
    loop {
        match poll_state(ctx, &mut rec, certificate_id).await? {
            Poll::State(CertificateState::Issued) => break,
            Poll::State(
                CertificateState::New
                | CertificateState::InProgress
                | CertificateState::WaitingForApproval,
            ) => {
                if !published {
                    match publish_dcv(ctx, cert, &mut rec, certificate_id).await? {
                        Published::Yes => published = true,
                        Published::Later => {}
                        Published::Operator(reason) => {
                            return Ok(Step::Done(Outcome::Pending { reason }));
                        }
                    }
                }
            }
            Poll::State(state) => {
                cleanup_dcv(ctx, cert, &mut rec).await;
                bail!(
                    "certificate {certificate_id} is {}; nothing more can be done with this \
                     order (no new order is placed automatically)",
                    state.as_str()
                );
            }
            Poll::NotYet(next) => {
                return Ok(Step::Done(Outcome::Pending {
                    reason: format!(
                        "certificate {certificate_id}: waiting for validation and issuance \
                         (state {}); next status check in {} s",
                        rec.last_state.as_deref().unwrap_or("unknown"),
                        next.as_secs()
                    ),
                }));
            }
        }
    }

    cleanup_dcv(ctx, cert, &mut rec).await;
    let key = keys::load_pending(&pending)?;
    let bundle = match download_checked(ctx, cert, certificate_id, &key).await? {
        Some(b) => b,
        None => {
            return Ok(Step::Done(Outcome::Pending {
                reason: format!(
                    "certificate {certificate_id} is issued but its files are not available yet"
                ),
            }));
        }
    };
    let install = cert_install(cert, &bundle, &key);
    Ok(Step::Ready(Box::new(Ready {
        certificate_id,
        bundle,
        install,
    })))
}

fn plan_text(ctx: &Ctx<'_>, cert: &CertificateConfig, rec: &CertRecord) -> String {
    if rec.intent.is_some() {
        return "reconcile an order whose answer was lost (certificate list search)".into();
    }
    match &rec.order {
        Some(o) => format!(
            "continue certificate {}: validation, issuance, download and install",
            o.certificate_id
        ),
        None if ctx.opts.allow_orders => format!(
            "place a billed order for product {} ({} days) for {}",
            cert.product_id,
            cert.days,
            cert.domains.join(", ")
        ),
        None => "no order yet; orders are not allowed (use `cert-agent issue NAME --yes`)".into(),
    }
}

enum Poll {
    State(CertificateState),
    /// The next status call is not allowed before this long, beyond this run's wait.
    NotYet(Duration),
}

/// One status call, at most once per `poll_interval_secs` per certificate across runs; sleeps
/// until the next call is allowed when that is within this run's wait.
async fn poll_state(ctx: &Ctx<'_>, rec: &mut CertRecord, certificate_id: u64) -> Result<Poll> {
    let interval = Duration::from_secs(ctx.config.agent.poll_interval_secs);
    if let Some(last) = rec.last_poll {
        let since = now() - last;
        let since = Duration::try_from(since).unwrap_or(Duration::ZERO);
        if since < interval {
            let wait = interval - since;
            let remaining = ctx.opts.wait.saturating_sub(ctx.started.elapsed());
            if wait > remaining {
                return Ok(Poll::NotYet(wait));
            }
            tracing::info!(
                certificate = %rec.name,
                "waiting {} s for the next status check",
                wait.as_secs()
            );
            tokio::time::sleep(wait).await;
        }
    }
    rec.last_poll = Some(now());
    ctx.store.save(rec)?;
    let status = ctx
        .client
        .status(certificate_id)
        .await
        .with_context(|| format!("could not read the state of certificate {certificate_id}"))?;
    let Some(code) = status.certificate else {
        bail!("the status call for certificate {certificate_id} reported no state");
    };
    rec.last_state = Some(code.as_str().to_owned());
    ctx.store.save(rec)?;
    match code.state() {
        Some(state) => Ok(Poll::State(state)),
        None => bail!(
            "certificate {certificate_id} is in state '{}', which cert-agent does not know",
            code.as_str()
        ),
    }
}

enum Published {
    /// Published (or nothing to publish); wait for the CA.
    Yes,
    /// The API does not say yet what to publish; try again after the next poll.
    Later,
    /// The operator must act (approve an email, create DNS records).
    Operator(String),
}

fn csr_hashes(rec: &CertRecord) -> Result<CsrHashes> {
    let p = rec
        .pending_key
        .as_ref()
        .ok_or_else(|| anyhow!("no pending key and CSR recorded"))?;
    Ok(CsrHashes {
        md5: p.csr_md5.clone(),
        sha256: p.csr_sha256.clone(),
    })
}

/// Publishes what domain control validation needs for the pending CSR.
async fn publish_dcv(
    ctx: &mut Ctx<'_>,
    cert: &CertificateConfig,
    rec: &mut CertRecord,
    certificate_id: u64,
) -> Result<Published> {
    let details = ctx
        .client
        .details(certificate_id)
        .await
        .with_context(|| format!("could not read certificate {certificate_id}"))?;
    let ours = csr_hashes(rec)?;
    // The order must carry our CSR: its key is the one kept on this host.
    let theirs = CsrInfo::from_pem(details.csr.as_bytes()).with_context(|| {
        format!("certificate {certificate_id}: the CSR the API reports cannot be read")
    })?;
    if !theirs.hashes.sha256.eq_ignore_ascii_case(&ours.sha256) {
        bail!(
            "certificate {certificate_id} was ordered with another CSR than the one whose key \
             this host keeps; refusing to validate it"
        );
    }

    match cert.dcv {
        DcvMethod::Http | DcvMethod::Https => {
            if !details.dcv_method.contains("CSR_HASH") || details.dcv_method.contains("CNAME") {
                bail!(
                    "certificate {certificate_id} validates by {}, but the configuration says \
                     `dcv = \"{}\"`; switch it with `cert-agent dcv change {certificate_id} {}`",
                    details.dcv_method,
                    if cert.dcv == DcvMethod::Https {
                        "https"
                    } else {
                        "http"
                    },
                    cert.dcv.dcv_type().as_str()
                );
            }
            let Some(content) = details.dcv_content.as_deref() else {
                return Ok(Published::Later);
            };
            let file = ValidationFile::for_csr(&ours, content).with_context(|| {
                format!("certificate {certificate_id}: the validation content from the API")
            })?;
            cross_check_hashes(ctx, certificate_id, &ours).await?;
            if cert.standalone {
                let server = standalone_server(ctx, cert.listen).await?;
                server.add_file(&file);
            } else {
                let webroots = webroots(cert)?;
                let published = dcv::webroot::publish(&webroots, &cert.domains, &file)
                    .context("could not publish the validation file")?;
                rec.dcv.files.extend(published.files);
                rec.dcv.dirs.extend(published.dirs);
                ctx.store.save(rec)?;
            }
            ctx.store.journal(
                &cert.name,
                "dcv-published",
                serde_json::json!({ "file": file.url_path() }),
            )?;
            self_check(cert, &file).await;
            Ok(Published::Yes)
        }
        DcvMethod::DnsTxt => {
            let value = match details.dcv_content.as_deref() {
                Some(v) if !v.trim().is_empty() => v.trim().to_owned(),
                _ => return Ok(Published::Later),
            };
            let records = cert
                .domains
                .iter()
                .map(|d| hook::txt_record(d, &value))
                .collect::<Result<Vec<_>, _>>()
                .context("the DNS TXT value from the API")?;
            publish_dns(ctx, cert, rec, records).await
        }
        DcvMethod::Cname => Ok(Published::Operator(format!(
            "certificate {certificate_id} validates by CNAME records: create `_<MD5 of the \
             CSR>.<domain>` as the CA's documentation and `cert-agent dcv status \
             {certificate_id}` describe (CSR MD5 {}, SHA-256 {})",
            ours.md5, ours.sha256
        ))),
        DcvMethod::Email => Ok(Published::Operator(format!(
            "certificate {certificate_id} validates by email to {}: approve the message the \
             CA sent (resend it with `cert-agent dcv resend {certificate_id}`)",
            if details.validation_email.is_empty() {
                "the validation address"
            } else {
                details.validation_email.as_str()
            }
        ))),
    }
}

/// Family S reports the CSR hashes in the DCV status; they must be ours.
async fn cross_check_hashes(ctx: &Ctx<'_>, certificate_id: u64, ours: &CsrHashes) -> Result<()> {
    let status = match ctx.client.dcv_status(certificate_id).await {
        Ok(s) => s,
        // Only available while in progress; the content check above already holds.
        Err(ApiError::Http { status: 422, .. }) => return Ok(()),
        Err(e) => return Err(anyhow!(e).context("could not read the DCV status")),
    };
    for (domain, entry) in &status.domains {
        if let Some(h) = &entry.hashes {
            crate::crypto::dcv::check_api_hashes(ours, h.md5.as_deref(), h.sha1.as_deref())
                .with_context(|| {
                    format!("certificate {certificate_id}, domain {domain}: DCV status hashes")
                })?;
        }
    }
    Ok(())
}

async fn publish_dns(
    ctx: &mut Ctx<'_>,
    cert: &CertificateConfig,
    rec: &mut CertRecord,
    records: Vec<hook::DnsRecord>,
) -> Result<Published> {
    let Some(command) = &cert.dns_hook else {
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
        argv: argv(command),
        timeout: Duration::from_secs(120),
    };
    let mut seen = std::collections::HashSet::new();
    for record in records {
        if !seen.insert((record.name.clone(), record.value.clone())) {
            continue;
        }
        hook::run(&hook, hook::HookAction::Add, &record, &cert.name)
            .await
            .with_context(|| format!("dns_hook could not add {record}"))?;
        rec.dcv.dns_records.push((
            record.name.clone(),
            record.record_type.as_str().to_owned(),
            record.value.clone(),
        ));
        rec.dcv.dns_domains.push(record.domain.clone());
        ctx.store.save(rec)?;
    }
    Ok(Published::Yes)
}

async fn self_check(cert: &CertificateConfig, file: &ValidationFile) {
    let check = SelfCheck {
        timeout: Duration::from_secs(5),
        address: None,
    };
    for domain in cert.domains.iter().filter(|d| !d.starts_with("*.")) {
        match check.check(domain, file).await {
            Ok(outcome) => {
                if let Some(w) = outcome.warning(&SelfCheck::url(domain, file)) {
                    tracing::warn!(certificate = %cert.name, "{w}");
                }
            }
            Err(e) => tracing::warn!(certificate = %cert.name, "self-check not possible: {e}"),
        }
    }
}

async fn standalone_server<'c>(
    ctx: &'c mut Ctx<'_>,
    listen: SocketAddr,
) -> Result<&'c StandaloneServer> {
    if !ctx.standalone.contains_key(&listen) {
        let server = StandaloneServer::start(listen)
            .await
            .with_context(|| format!("could not start the standalone DCV server on {listen}"))?;
        ctx.standalone.insert(listen, server);
    }
    ctx.standalone
        .get(&listen)
        .ok_or_else(|| anyhow!("standalone server on {listen} vanished"))
}

fn webroots(cert: &CertificateConfig) -> Result<dcv::webroot::Webroots> {
    match &cert.webroot {
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
async fn cleanup_dcv(ctx: &mut Ctx<'_>, cert: &CertificateConfig, rec: &mut CertRecord) {
    if let Some(p) = rec.pending_key.as_ref() {
        let name = format!("{}.txt", p.csr_md5);
        for server in ctx.standalone.values() {
            server.remove_file(&name);
        }
    }
    if rec.dcv.is_empty() {
        return;
    }
    let published = dcv::webroot::Published {
        files: std::mem::take(&mut rec.dcv.files),
        dirs: std::mem::take(&mut rec.dcv.dirs),
    };
    if let Err(e) = dcv::webroot::remove(&published) {
        tracing::warn!(certificate = %cert.name, "could not remove validation files: {e}");
    }
    if let Some(command) = &cert.dns_hook {
        let hook = hook::DnsHook {
            argv: argv(command),
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
    if let Err(e) = ctx.store.save(rec) {
        tracing::warn!(certificate = %cert.name, "{e}");
    }
}

/// Downloads the per-server bundle and checks it against our key, names and the clock.
/// `None` while the API still answers 422 (files not available yet).
async fn download_checked(
    ctx: &Ctx<'_>,
    cert: &CertificateConfig,
    certificate_id: u64,
    key: &PrivateKey,
) -> Result<Option<ValidatedBundle>> {
    let download = match ctx.client.download_bundle(certificate_id).await {
        Ok(d) => d,
        Err(ApiError::Http { status: 422, .. }) => return Ok(None),
        Err(e) => {
            return Err(anyhow!(e).context(format!(
                "could not download the bundle of certificate {certificate_id}"
            )));
        }
    };
    let public_key = key.public_key_der();
    let expected = Expected {
        public_key_der: &public_key,
        domains: &cert.domains,
        now: now(),
        trust_anchors: &[],
    };
    let bundle = bundle::read_bundle(&download.bytes, bundle_kind(cert.server), &expected)
        .with_context(|| {
            format!(
                "the bundle of certificate {certificate_id} was rejected; nothing was installed"
            )
        })?;
    Ok(Some(bundle))
}

fn bundle_kind(server: Server) -> bundle::ServerKind {
    match server {
        Server::Nginx => bundle::ServerKind::Nginx,
        Server::Apache => bundle::ServerKind::Apache,
        Server::None => bundle::ServerKind::None,
    }
}

fn install_kind(server: Server) -> ServerKind {
    match server {
        Server::Nginx => ServerKind::Nginx,
        Server::Apache => ServerKind::Apache,
        Server::None => ServerKind::None,
    }
}

/// A configured command as an argv vector (a string runs through `/bin/sh -c`).
pub fn argv(command: &crate::config::Command) -> Vec<String> {
    match command {
        crate::config::Command::Argv(v) => v.clone(),
        crate::config::Command::Shell(s) => vec!["/bin/sh".into(), "-c".into(), s.clone()],
    }
}

/// Where certificate `cert` is installed.
pub fn install_paths(cert: &CertificateConfig) -> InstallPaths {
    InstallPaths::resolve(
        install_kind(cert.server),
        Path::new(install::DEFAULT_BASE_DIR),
        &cert.name,
        &PathOverrides {
            cert: cert.cert_path.clone(),
            chain: cert.chain_path.clone(),
            fullchain: cert.fullchain_path.clone(),
            key: cert.key_path.clone(),
        },
    )
}

fn cert_install(
    cert: &CertificateConfig,
    bundle: &ValidatedBundle,
    key: &PrivateKey,
) -> CertInstall {
    let kind = install_kind(cert.server);
    CertInstall {
        name: cert.name.clone(),
        domains: cert.domains.clone(),
        paths: install_paths(cert),
        ownership: Ownership {
            owner: cert.owner.as_deref().map(Principal::parse),
            group: cert.group.as_deref().map(Principal::parse),
            cert_mode: None,
            key_mode: cert.mode,
        },
        material: CertMaterial::new(
            bundle.leaf_pem.clone().into_bytes(),
            bundle.chain_pem.clone().into_bytes(),
            key.secret_pem().as_bytes().to_vec(),
        ),
        commands: ServerCommands::configured(
            kind,
            cert.configtest_command.as_ref().map(argv),
            cert.reload_command.as_ref().map(argv),
            None,
        ),
        verify: cert
            .verify_address
            .as_ref()
            .filter(|a| !a.is_empty())
            .map(|a| VerifyTarget::new(a.clone(), cert.common_name())),
        deploy_hook: cert.deploy_hook.as_ref().map(argv),
    }
}

/// Records a successful install: the installed certificate, the pending key discarded (it now
/// lives at the key path).
fn finish_install(store: &Store, name: &str, r: &Ready) -> Result<Outcome> {
    let mut rec = store.load(name)?;
    let files: Vec<PathBuf> = r
        .install
        .paths
        .certificate_paths()
        .map(Path::to_path_buf)
        .chain(std::iter::once(r.install.paths.key.clone()))
        .collect();
    rec.installed = Some(Installed {
        serial: r.bundle.serial_hex.clone(),
        not_before: r.bundle.not_before,
        not_after: r.bundle.not_after,
        certificate_id: r.certificate_id,
        files,
        installed_at: now(),
        leaf_file: None,
        leaf_stamp: None,
    });
    if let Some(p) = rec.pending_key.take() {
        keys::discard_key_file(&p.key_file);
    }
    rec.last_error = None;
    store.save(&rec)?;
    store.journal(
        name,
        "installed",
        serde_json::json!({ "certificate_id": r.certificate_id, "serial": r.bundle.serial_hex }),
    )?;
    Ok(Outcome::Installed {
        certificate_id: r.certificate_id,
        serial: r.bundle.serial_hex.clone(),
        not_after: r.bundle.not_after,
    })
}
