//! Fleet mode in the engine: the hosts of `[fleet]` share each `[[certificate]]` of the same
//! name through etcd. What lives under the prefix:
//!
//! | key | what | written by |
//! |---|---|---|
//! | `leader` | the leading host's name, on its lease | the leader |
//! | `certs/NAME/spec` | names, product and key type every host must agree on | the first host |
//! | `certs/NAME/state` | the certificate's record (intent, order, reissue, subscription, backoff) and its pending key, sealed | the leader, fenced |
//! | `certs/NAME/current` | the certificate to serve: version, serial, the API's archive and the key, sealed | the leader, fenced |
//! | `dcv/NAME` | the validation file to serve while the CA checks | the leader, fenced |
//! | `hosts/HOST/certs/NAME` | what HOST installed (serial, version, time) or why it could not | HOST |
//! | `hosts/HOST/seen` | when HOST last synchronised | HOST |
//!
//! A run on a fleet host first installs what the fleet has ([`sync`]), then tries to take the
//! lead. Only the leader imports the shared records into its state directory, runs the
//! engine (the only host that talks to the Partner API), shares every record change that
//! precedes a billed call before making it ([`FleetRun::share`], fenced), publishes the
//! validation files and, after installing, the new certificate. The others install it, each
//! through its own web server's config test, reload, verification and rollback.

use std::collections::BTreeMap;
use std::path::PathBuf;

use anyhow::{Context, Result, anyhow, bail};
use base64::Engine as _;
use serde::{Deserialize, Serialize};
use time::OffsetDateTime;

use crate::config::{CertificateConfig, Config, FleetConfig};
use crate::crypto::{self, PrivateKey};
use crate::dcv::ValidationFile;
use crate::fleet::{Expect, Fleet, FleetKey, FleetOptions, Leadership, Written};
use crate::store::{CertRecord, PendingKey, Store};
use crate::values::Secret;

use super::context::now;
use super::deploy::{self, Ready};
use super::job::Job;
use super::report::Outcome;

/// The systemd credential holding the fleet key when `secret_file` is not set.
pub const FLEET_KEY_CREDENTIAL: &str = "cert-agent-fleet-key";

/// A host's connection to its fleet: etcd and the fleet key.
pub struct FleetLink {
    pub fleet: Fleet,
    key: FleetKey,
    pub config: FleetConfig,
}

impl std::fmt::Debug for FleetLink {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("FleetLink")
            .field("fleet", &self.fleet)
            .finish_non_exhaustive()
    }
}

/// Connects to the fleet of `config`; `None` without `[fleet]`.
pub async fn connect(config: &Config) -> Result<Option<FleetLink>> {
    let Some(fc) = &config.fleet else {
        return Ok(None);
    };
    let key_path = match &fc.secret_file {
        Some(p) => p.clone(),
        None => match std::env::var_os("CREDENTIALS_DIRECTORY") {
            Some(dir) => PathBuf::from(dir).join(FLEET_KEY_CREDENTIAL),
            None => bail!(
                "[fleet] has no `secret_file`, and no systemd credential {FLEET_KEY_CREDENTIAL} \
                 is passed (LoadCredential=); the fleet key is needed to share private keys"
            ),
        },
    };
    let key = FleetKey::read(&key_path)?;
    let password = match &fc.password_file {
        Some(p) => Some(Secret::new(
            std::fs::read_to_string(p)
                .map_err(|e| {
                    anyhow!(
                        "[fleet] password_file {}: {}",
                        p.display(),
                        crate::fsutil::io_text(&e)
                    )
                })?
                .trim_end_matches(['\n', '\r'])
                .to_owned(),
        )),
        None => None,
    };
    let mut opts = FleetOptions::new(fc.endpoints.clone(), fc.host.clone());
    opts.ca_file.clone_from(&fc.ca_file);
    opts.cert_file.clone_from(&fc.cert_file);
    opts.key_file.clone_from(&fc.key_file);
    opts.user.clone_from(&fc.user);
    opts.password = password;
    opts.prefix.clone_from(&fc.prefix);
    opts.lease_ttl = std::time::Duration::from_secs(fc.lease_ttl_secs);
    let fleet = Fleet::connect(&opts).await?;
    Ok(Some(FleetLink {
        fleet,
        key,
        config: fc.clone(),
    }))
}

// ---- the documents in etcd ----

fn spec_key(name: &str) -> String {
    format!("certs/{name}/spec")
}
fn state_key(name: &str) -> String {
    format!("certs/{name}/state")
}
fn current_key(name: &str) -> String {
    format!("certs/{name}/current")
}
fn dcv_key(name: &str) -> String {
    format!("dcv/{name}")
}
fn host_key(host: &str, name: &str) -> String {
    format!("hosts/{host}/certs/{name}")
}

/// What every host of the fleet must agree on for one certificate.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
struct Spec {
    domains: Vec<String>,
    product_id: u64,
    key_type: String,
    /// The host that wrote it first.
    #[serde(default)]
    host: String,
}

impl Spec {
    fn of(cert: &CertificateConfig, host: &str) -> Self {
        Self {
            domains: cert.domains.clone(),
            product_id: cert.order.product_id,
            key_type: cert.order.key_type.to_string(),
            host: host.to_owned(),
        }
    }

    /// What differs from `fleet`, in words.
    fn differences(&self, fleet: &Self) -> Vec<String> {
        let mut out = Vec::new();
        if self.domains != fleet.domains {
            out.push(format!(
                "domains {:?} here, {:?} in the fleet",
                self.domains, fleet.domains
            ));
        }
        if self.product_id != fleet.product_id {
            out.push(format!(
                "product_id {} here, {} in the fleet",
                self.product_id, fleet.product_id
            ));
        }
        if self.key_type != fleet.key_type {
            out.push(format!(
                "key_type {} here, {} in the fleet",
                self.key_type, fleet.key_type
            ));
        }
        out
    }
}

/// The shared record of one certificate.
#[derive(Debug, Clone, Serialize, Deserialize)]
struct SharedState {
    /// The record without what belongs to one host (installed files, published validation
    /// files, the path of the pending key).
    record: CertRecord,
    /// The pending key's PEM, sealed with the fleet key (base64).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pending_key: Option<String>,
    written_by: String,
    #[serde(with = "time::serde::rfc3339")]
    written_at: OffsetDateTime,
}

/// The certificate every host of the fleet serves.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Current {
    /// 1 for the first certificate, one more for each after it.
    pub version: u64,
    pub certificate_id: u64,
    pub serial: String,
    #[serde(with = "time::serde::rfc3339")]
    pub not_before: OffsetDateTime,
    #[serde(with = "time::serde::rfc3339")]
    pub not_after: OffsetDateTime,
    pub published_by: String,
    #[serde(with = "time::serde::rfc3339")]
    pub published_at: OffsetDateTime,
    /// The archive the API sent (base64).
    archive: String,
    /// The private key's PEM, sealed with the fleet key for this name and version (base64).
    key: String,
}

/// A validation file the hosts serve.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
struct DcvEntry {
    file_name: String,
    content: String,
}

/// What one host did with a certificate.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct HostResult {
    /// The serial installed on the host (the last good one when `error` is set).
    pub serial: Option<String>,
    /// The version of the fleet's certificate this result is about.
    pub version: u64,
    #[serde(with = "time::serde::rfc3339")]
    pub at: OffsetDateTime,
    /// Since when the host serves `serial`.
    #[serde(default, with = "time::serde::rfc3339::option")]
    pub since: Option<OffsetDateTime>,
    /// Why the version could not be installed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
}

fn b64(bytes: &[u8]) -> String {
    base64::engine::general_purpose::STANDARD.encode(bytes)
}

fn unb64(what: &str, text: &str) -> Result<Vec<u8>> {
    base64::engine::general_purpose::STANDARD
        .decode(text)
        .map_err(|e| anyhow!("the fleet's {what} is not base64: {e}"))
}

fn parse<T: serde::de::DeserializeOwned>(link: &FleetLink, rel: &str, bytes: &[u8]) -> Result<T> {
    serde_json::from_slice(bytes).map_err(|e| {
        anyhow!(crate::fleet::FleetError::Corrupt {
            key: link.fleet.key(rel),
            detail: e.to_string(),
        })
    })
}

/// The version a pending key is sealed with: its creation time.
fn pending_version(p: &PendingKey) -> u64 {
    u64::try_from(p.created_at.unix_timestamp()).unwrap_or(0)
}

/// The record as the fleet shares it: without this host's installed files, validation files
/// and key path.
fn shared_view(rec: &CertRecord) -> CertRecord {
    let mut r = rec.clone();
    r.installed = None;
    r.dcv = Default::default();
    if let Some(p) = &mut r.pending_key {
        p.key_file = PathBuf::new();
    }
    r
}

// ---- every host ----

/// Registers the certificates of this host with the fleet, or compares them with what the
/// fleet has: a certificate whose names, product or key type differ is refused (the error
/// names the difference).
pub async fn check_specs(link: &FleetLink, config: &Config) -> Result<BTreeMap<String, String>> {
    check_key(link).await?;
    let mut refused = BTreeMap::new();
    for cert in &config.certificates {
        let mine = Spec::of(cert, link.fleet.host());
        let key = spec_key(&cert.name);
        let Some(existing) = link.fleet.create(&key, serde_json::to_vec(&mine)?).await? else {
            continue;
        };
        let theirs: Spec = parse(link, &key, &existing)?;
        let diff = mine.differences(&theirs);
        if !diff.is_empty() {
            refused.insert(
                cert.name.clone(),
                format!(
                    "certificate '{}' differs from the fleet's record (first written by {}): \
                     {}; this host does nothing for it until its [[certificate]] matches \
                     (to change it for the whole fleet, see docs/fleet.md)",
                    cert.name,
                    theirs.host,
                    diff.join("; ")
                ),
            );
        }
    }
    Ok(refused)
}

/// The fleet key check: a known text sealed by the first host. A host whose key does not open
/// it is not part of the fleet: it installs nothing, leads nothing and seals nothing.
async fn check_key(link: &FleetLink) -> Result<()> {
    const NAME: &str = "fleet key check";
    const TEXT: &[u8] = b"cert-agent fleet key";
    let sealed = b64(&link.key.seal(NAME, 0, TEXT)?);
    let existing = link.fleet.create(KEY_CHECK, sealed.into_bytes()).await?;
    let Some(existing) = existing else {
        return Ok(());
    };
    let opened = std::str::from_utf8(&existing)
        .ok()
        .and_then(|t| unb64("key check", t).ok())
        .and_then(|b| link.key.open(NAME, 0, &b).ok());
    if opened.as_deref() == Some(TEXT) {
        return Ok(());
    }
    bail!(
        "this host's fleet key ({}) is not the fleet's: it does not open the fleet's key \
         check ({}); this host installs nothing and does not lead until its secret_file \
         holds the fleet's key",
        link.config.secret_file.as_ref().map_or_else(
            || FLEET_KEY_CREDENTIAL.to_owned(),
            |p| p.display().to_string()
        ),
        link.fleet.key(KEY_CHECK)
    )
}

/// Where the fleet key check lives, relative to the prefix.
const KEY_CHECK: &str = "keycheck";

/// What [`sync`] did for one certificate.
#[derive(Debug)]
pub struct Synced {
    pub name: String,
    pub outcome: Outcome,
}

/// What [`sync`] did, and the fleet's current certificates as it read them (serial and
/// `not_before` by name), for the leader's hand-over to use without reading them again.
#[derive(Debug, Default)]
pub struct SyncReport {
    pub synced: Vec<Synced>,
    fleet_has: BTreeMap<String, (String, OffsetDateTime)>,
}

/// Installs, for every certificate of `config` that the fleet has a newer certificate of,
/// that certificate — decrypted with the fleet key and checked again against this host's key,
/// names, chain and clock — through this host's own config test, reload, verification and
/// rollback; records the result under `hosts/HOST/`. Also serves the validation files the
/// leader published and removes those it withdrew.
pub async fn sync(
    link: &FleetLink,
    config: &Config,
    store: &Store,
    refused: &BTreeMap<String, String>,
) -> Result<SyncReport> {
    let host = link.fleet.host().to_owned();
    let validating = sync_dcv(link, config, store, refused).await?;
    let mut out = Vec::new();
    let mut fleet_has = BTreeMap::new();
    let mut ready: Vec<(Job<'_>, Ready)> = Vec::new();
    let mut versions = BTreeMap::new();
    for (idx, cert) in config.certificates.iter().enumerate() {
        if let Some(why) = refused.get(&cert.name) {
            out.push(Synced {
                name: cert.name.clone(),
                outcome: Outcome::Failed { error: why.clone() },
            });
            continue;
        }
        let mut job = match Job::load(store, cert, idx) {
            Ok(job) => job,
            Err(e) => {
                out.push(Synced {
                    name: cert.name.clone(),
                    outcome: Outcome::Failed {
                        error: format!("{e:#}"),
                    },
                });
                continue;
            }
        };
        if !validating.contains(&cert.name) {
            remove_own_leftovers(&mut job);
        }
        let rel = current_key(&cert.name);
        let Some((bytes, _)) = link.fleet.get(&rel).await? else {
            continue;
        };
        let current: Current = parse(link, &rel, &bytes)?;
        fleet_has.insert(
            cert.name.clone(),
            (current.serial.clone(), current.not_before),
        );
        let installed = job.rec.installed.as_ref().map(|i| i.serial.clone());
        if let Some(i) = &job.rec.installed
            && (crypto::same_serial_hex(&i.serial, &current.serial)
                || i.not_before > current.not_before)
        {
            // Current, or newer than the fleet's (installed here while this host led, not
            // published yet; its next lead hands it over): never downgraded.
            continue;
        }
        versions.insert(cert.name.clone(), current.version);
        match prepare(link, cert, &current) {
            Ok(r) => ready.push((job, r)),
            Err(e) => {
                let error = format!("{e:#}");
                tracing::warn!(certificate = %cert.name, "{error}");
                let result = HostResult {
                    serial: installed,
                    version: current.version,
                    at: now(),
                    since: None,
                    error: Some(error.clone()),
                };
                report_host(link, &host, &cert.name, &result).await;
                out.push(Synced {
                    name: cert.name.clone(),
                    outcome: Outcome::Failed { error },
                });
            }
        }
    }
    for (job, outcome, _warning) in deploy::install_ready(ready).await {
        let version = versions.get(&job.cert.name).copied().unwrap_or(0);
        let rec = store.load(&job.cert.name).ok();
        let installed = rec.as_ref().and_then(|r| r.installed.as_ref());
        let result = HostResult {
            serial: installed.map(|i| i.serial.clone()),
            version,
            at: now(),
            since: installed.map(|i| i.installed_at),
            error: match &outcome {
                Outcome::Failed { error } => Some(error.clone()),
                _ => None,
            },
        };
        report_host(link, &host, &job.cert.name, &result).await;
        out.push(Synced {
            name: job.cert.name.clone(),
            outcome,
        });
    }
    let _ = link
        .fleet
        .put_own(
            &format!("hosts/{host}/seen"),
            now()
                .format(&time::format_description::well_known::Rfc3339)
                .unwrap_or_default()
                .into_bytes(),
        )
        .await;
    Ok(SyncReport {
        synced: out,
        fleet_has,
    })
}

/// One synchronisation outside a run (the daemon follows the fleet's changes with it): the
/// certificates checked against the fleet's record, then [`sync`]. `None` when a run holds
/// the state directory's lock (that run synchronises itself).
pub async fn follow(config: &Config, link: &FleetLink) -> Result<Option<Vec<Synced>>> {
    let store = Store::open(&config.agent.state_dir)?;
    let _lock = match store.lock() {
        Ok(l) => l,
        Err(crate::store::StoreError::Locked { .. }) => return Ok(None),
        Err(e) => return Err(e.into()),
    };
    let refused = check_specs(link, config).await?;
    Ok(Some(sync(link, config, &store, &refused).await?.synced))
}

/// Whether a change of `key` (relative to the prefix) concerns what [`sync`] does: a
/// certificate published or a validation file published or withdrawn.
pub fn concerns_hosts(key: &str) -> bool {
    key.starts_with("dcv/") || (key.starts_with("certs/") && key.ends_with("/current"))
}

/// Opens and checks the fleet's certificate for this host.
fn prepare(link: &FleetLink, cert: &CertificateConfig, current: &Current) -> Result<Ready> {
    let sealed = unb64("key", &current.key)?;
    let pem = link.key.open(&cert.name, current.version, &sealed)?;
    let key = PrivateKey::from_pem(&pem, "the fleet's record")
        .with_context(|| format!("the fleet's key of certificate '{}'", cert.name))?;
    let archive = unb64("archive", &current.archive)?;
    let bundle = deploy::check_archive(cert, &archive, &key).with_context(|| {
        format!(
            "the fleet's certificate {} (version {}) was rejected on this host; nothing was \
             installed",
            current.serial, current.version
        )
    })?;
    let install = deploy::cert_install(cert, &bundle, &key);
    Ok(Ready {
        certificate_id: current.certificate_id,
        bundle,
        install,
        archive,
    })
}

async fn report_host(link: &FleetLink, host: &str, name: &str, result: &HostResult) {
    match serde_json::to_vec(result) {
        Ok(bytes) => {
            if let Err(e) = link.fleet.put_own(&host_key(host, name), bytes).await {
                tracing::warn!(certificate = %name, "could not report to the fleet: {e}");
            }
        }
        Err(e) => tracing::warn!(certificate = %name, "{e}"),
    }
}

/// The validation files this host serves for the fleet, by certificate: kept in
/// `state_dir/fleet-dcv.json` so that withdrawn ones are removed, after a restart too.
type Served = BTreeMap<String, (DcvEntry, Vec<PathBuf>, Vec<PathBuf>)>;

const SERVED_FILE: &str = "fleet-dcv.json";

/// Serves the published validation files, removes withdrawn ones; the names of the
/// certificates with a published file.
async fn sync_dcv(
    link: &FleetLink,
    config: &Config,
    store: &Store,
    refused: &BTreeMap<String, String>,
) -> Result<std::collections::BTreeSet<String>> {
    let path = store.dir().join(SERVED_FILE);
    let mut served: Served = std::fs::read(&path)
        .ok()
        .and_then(|b| serde_json::from_slice(&b).ok())
        .unwrap_or_default();
    let before = served.clone();
    let published: BTreeMap<String, DcvEntry> = link
        .fleet
        .list("dcv/")
        .await?
        .into_iter()
        .filter_map(|(k, v)| {
            let name = k.strip_prefix("dcv/")?.to_owned();
            Some((name, serde_json::from_slice(&v).ok()?))
        })
        .collect();
    // Withdrawn or replaced: removed.
    served.retain(|name, (entry, files, dirs)| {
        if published.get(name) == Some(entry) {
            return true;
        }
        let gone = crate::dcv::webroot::Published {
            files: std::mem::take(files),
            dirs: std::mem::take(dirs),
        };
        if let Err(e) = crate::dcv::webroot::remove(&gone) {
            tracing::warn!(certificate = %name, "could not remove a validation file: {e}");
        }
        if let Err(e) = crate::dcv::serve_dir::remove(store.dir(), &entry.file_name) {
            tracing::debug!(certificate = %name, "{e}");
        }
        false
    });
    for (name, entry) in &published {
        if served.contains_key(name) || refused.contains_key(name) {
            continue;
        }
        let Some(cert) = config.certificate(name) else {
            continue;
        };
        if !cert.dcv.method.is_http() {
            continue;
        }
        let file = ValidationFile::from_parts(&entry.file_name, &entry.content)?;
        if cert.dcv.standalone {
            crate::dcv::serve_dir::publish(store.dir(), &file).with_context(|| {
                format!("could not serve the fleet's validation file of '{name}'")
            })?;
            served.insert(name.clone(), (entry.clone(), Vec::new(), Vec::new()));
        } else {
            let roots = super::publish::webroots(cert)?
                .distinct_for(&cert.domains)
                .context("could not publish the fleet's validation file")?;
            let done = crate::dcv::webroot::publish_into(&roots, &file)
                .context("could not publish the fleet's validation file")?;
            served.insert(name.clone(), (entry.clone(), done.files, done.dirs));
        }
        tracing::info!(certificate = %name, "serving the fleet's validation file {}", entry.file_name);
    }
    if served != before {
        crate::fsutil::write_atomic(&path, &serde_json::to_vec(&served)?, 0o600)
            .map_err(|e| anyhow!("{}: {}", path.display(), crate::fsutil::io_text(&e)))?;
    }
    Ok(published.into_keys().collect())
}

/// Validation files this host published itself while it led, for a validation the fleet no
/// longer waits for (it stopped leading half-way, killed or cut off): removed.
fn remove_own_leftovers(job: &mut Job<'_>) {
    if job.rec.dcv.files.is_empty() && job.rec.dcv.dirs.is_empty() {
        return;
    }
    let gone = crate::dcv::webroot::Published {
        files: std::mem::take(&mut job.rec.dcv.files),
        dirs: std::mem::take(&mut job.rec.dcv.dirs),
    };
    if let Err(e) = crate::dcv::webroot::remove(&gone) {
        tracing::warn!(certificate = %job.cert.name, "could not remove a validation file: {e}");
    }
    if let Err(e) = job.save() {
        tracing::warn!(certificate = %job.cert.name, "{e:#}");
    }
}

// ---- the leader ----

/// The leader's side of a run: its lead and the fleet.
pub struct FleetRun<'a> {
    link: &'a FleetLink,
    lead: &'a Leadership,
    config: &'a Config,
    client: std::cell::OnceCell<crate::api::Client>,
}

/// What a leader publishes of a certificate it installed.
#[derive(Clone)]
pub(super) struct Installable {
    certificate_id: u64,
    serial: String,
    not_before: OffsetDateTime,
    not_after: OffsetDateTime,
    key_pem: Vec<u8>,
    archive: Vec<u8>,
}

impl Installable {
    pub(super) fn of(r: &Ready) -> Self {
        Self {
            certificate_id: r.certificate_id,
            serial: r.bundle.serial_hex.clone(),
            not_before: r.bundle.not_before,
            not_after: r.bundle.not_after,
            key_pem: r.install.material.key_pem.clone(),
            archive: r.archive.clone(),
        }
    }
}

impl FleetRun<'_> {
    /// A Partner API client for the leader's own calls outside the engine.
    fn client(&self) -> Result<&crate::api::Client> {
        if let Some(c) = self.client.get() {
            return Ok(c);
        }
        let c = super::context::client(self.config)?;
        Ok(self.client.get_or_init(|| c))
    }

    /// Shares `rec` (and its pending key, sealed) with the fleet, fenced by the lead: called
    /// before every billed or state-changing call to the Partner API, which is not made when
    /// this fails.
    pub(super) async fn share(&self, cert: &CertificateConfig, rec: &CertRecord) -> Result<()> {
        let pending_key = match &rec.pending_key {
            Some(p) if p.key_file.is_file() => {
                let key = super::keys::load_pending(p)?;
                let sealed = self.link.key.seal(
                    &cert.name,
                    pending_version(p),
                    key.secret_pem().as_bytes(),
                )?;
                Some(b64(&sealed))
            }
            _ => None,
        };
        let doc = SharedState {
            record: shared_view(rec),
            pending_key,
            written_by: self.link.fleet.host().to_owned(),
            written_at: now(),
        };
        self.lead
            .put(
                &state_key(&cert.name),
                serde_json::to_vec(&doc)?,
                Expect::Any,
            )
            .await
            .with_context(|| {
                format!(
                    "could not share the state of certificate '{}' with the fleet",
                    cert.name
                )
            })?;
        Ok(())
    }

    /// Publishes the validation file for every host.
    pub(super) async fn publish_dcv(
        &self,
        cert: &CertificateConfig,
        file: &ValidationFile,
    ) -> Result<()> {
        let entry = DcvEntry {
            file_name: file.name().to_owned(),
            content: file.content().to_owned(),
        };
        self.lead
            .put(
                &dcv_key(&cert.name),
                serde_json::to_vec(&entry)?,
                Expect::Any,
            )
            .await?;
        Ok(())
    }

    /// Withdraws the validation file from every host.
    pub(super) async fn remove_dcv(&self, cert: &CertificateConfig) {
        if let Err(e) = self.lead.delete(&dcv_key(&cert.name), Expect::Any).await {
            tracing::warn!(certificate = %cert.name, "could not withdraw the fleet's validation file: {e}");
        }
    }

    /// Publishes an installed certificate as the fleet's current one.
    async fn publish_current(&self, cert: &CertificateConfig, r: &Installable) -> Result<()> {
        let rel = current_key(&cert.name);
        let (version, expect) = match self.link.fleet.get(&rel).await? {
            Some((bytes, rev)) => {
                let before: Current = parse(self.link, &rel, &bytes)?;
                if crypto::same_serial_hex(&before.serial, &r.serial) {
                    return Ok(());
                }
                (before.version + 1, Expect::Revision(rev))
            }
            None => (1, Expect::Absent),
        };
        let sealed = self.link.key.seal(&cert.name, version, &r.key_pem)?;
        let doc = Current {
            version,
            certificate_id: r.certificate_id,
            serial: r.serial.clone(),
            not_before: r.not_before,
            not_after: r.not_after,
            published_by: self.link.fleet.host().to_owned(),
            published_at: now(),
            archive: b64(&r.archive),
            key: b64(&sealed),
        };
        match self
            .lead
            .put(&rel, serde_json::to_vec(&doc)?, expect)
            .await?
        {
            Written::Done(_) => {
                tracing::info!(certificate = %cert.name, version, serial = %doc.serial, "published to the fleet");
                let result = HostResult {
                    serial: Some(doc.serial.clone()),
                    version,
                    at: now(),
                    since: Some(now()),
                    error: None,
                };
                report_host(self.link, self.link.fleet.host(), &cert.name, &result).await;
                Ok(())
            }
            Written::Conflict(_) => bail!(
                "the fleet's current certificate of '{}' changed while this host published; \
                 the next run publishes again",
                cert.name
            ),
        }
    }
}

/// Before the leader's engine runs: the shared record of each certificate replaces what this
/// host's state directory holds of it (the installed files and published validation files
/// stay this host's); a pending key that is not here yet is opened and written to the key
/// directory. Returns the record as the fleet holds it (`None`: the fleet has none yet).
pub(super) async fn import(
    link: &FleetLink,
    store: &Store,
    cert: &CertificateConfig,
) -> Result<Option<CertRecord>> {
    let rel = state_key(&cert.name);
    let Some((bytes, _)) = link.fleet.get(&rel).await? else {
        return Ok(None);
    };
    let shared: SharedState = parse(link, &rel, &bytes)?;
    let local = store.load(&cert.name)?;
    if shared_view(&local) == shared.record {
        return Ok(Some(shared.record));
    }
    let mut next = shared.record.clone();
    next.installed.clone_from(&local.installed);
    next.dcv = local.dcv.clone();
    if let Some(sp) = &mut next.pending_key {
        match &local.pending_key {
            Some(lp) if lp.csr_sha256 == sp.csr_sha256 && lp.key_file.is_file() => {
                sp.key_file.clone_from(&lp.key_file);
            }
            _ => {
                let sealed = shared.pending_key.as_deref().ok_or_else(|| {
                    anyhow!(
                        "the fleet's record of '{}' has a pending key but not the key itself",
                        cert.name
                    )
                })?;
                let pem = link.key.open(
                    &cert.name,
                    pending_version(sp),
                    &unb64("pending key", sealed)?,
                )?;
                let key = PrivateKey::from_pem(&pem, "the fleet's record")?;
                let dir = store.key_dir(&cert.name)?;
                let file = dir.join(format!(
                    "{}-{}.key",
                    sp.created_at.unix_timestamp(),
                    sp.csr_sha256.get(..16).unwrap_or("fleet")
                ));
                crypto::write_key_file(&file, &key, None)?;
                sp.key_file = file;
            }
        }
    }
    store.save(&next)?;
    store.journal(
        &cert.name,
        "fleet-imported",
        serde_json::json!({ "written_by": shared.written_by }),
    )?;
    Ok(Some(shared.record))
}

/// After the leader's engine ran: every record that changed since `imported` (the records as
/// the fleet held them) shared, every certificate it installed published, and what this host
/// has installed but the fleet lacks handed over (`fleet_has`: the fleet's certificates as
/// the run's synchronisation read them).
pub(super) async fn export(
    fr: &FleetRun<'_>,
    store: &Store,
    certs: &[&CertificateConfig],
    imported: &BTreeMap<String, Option<CertRecord>>,
    fleet_has: &BTreeMap<String, (String, OffsetDateTime)>,
    installed: &[(String, Installable)],
) -> Vec<(String, String)> {
    let mut errors = Vec::new();
    let mut records = BTreeMap::new();
    for cert in certs {
        let rec = match store.load(&cert.name) {
            Ok(rec) => rec,
            Err(e) => {
                errors.push((cert.name.clone(), format!("{e:#}")));
                continue;
            }
        };
        let unchanged = imported
            .get(&cert.name)
            .and_then(Option::as_ref)
            .is_some_and(|r| *r == shared_view(&rec));
        if !unchanged && let Err(e) = fr.share(cert, &rec).await {
            errors.push((cert.name.clone(), format!("{e:#}")));
        }
        records.insert(cert.name.clone(), rec);
    }
    for (name, r) in installed {
        let Some(cert) = certs.iter().find(|c| &c.name == name) else {
            continue;
        };
        if let Err(e) = fr.publish_current(cert, r).await {
            errors.push((name.clone(), format!("{e:#}")));
        }
    }
    // A certificate installed on this host before it joined the fleet (or adopted here, or
    // installed while it led and not published) that the fleet lacks: handed over, without a
    // new order.
    for cert in certs {
        if installed.iter().any(|(n, _)| *n == cert.name) {
            continue;
        }
        let Some(inst) = records.get(&cert.name).and_then(|r| r.installed.as_ref()) else {
            continue;
        };
        let lacking = match fleet_has.get(&cert.name) {
            None => true,
            Some((serial, not_before)) => {
                !crypto::same_serial_hex(serial, &inst.serial) && inst.not_before > *not_before
            }
        };
        if lacking && let Err(e) = hand_over_installed(fr, cert, inst).await {
            errors.push((cert.name.clone(), format!("{e:#}")));
        }
    }
    errors
}

/// Publishes `installed`, this host's certificate of `cert` that the fleet lacks: the bundle
/// is downloaded again (the archive is what the other hosts check) and the installed key is
/// sealed beside it.
async fn hand_over_installed(
    fr: &FleetRun<'_>,
    cert: &CertificateConfig,
    installed: &crate::store::Installed,
) -> Result<()> {
    let key = deploy::installed_key(cert)?;
    let client = fr.client()?;
    let download = client
        .download_bundle(installed.certificate_id)
        .await
        .with_context(|| {
            format!(
                "could not download certificate {} to hand it to the fleet",
                installed.certificate_id
            )
        })?;
    let bundle = deploy::check_archive(cert, &download.bytes, &key).with_context(|| {
        format!(
            "the bundle of certificate {} does not match what is installed here; not handed \
             to the fleet",
            installed.certificate_id
        )
    })?;
    if !crypto::same_serial_hex(&bundle.serial_hex, &installed.serial) {
        bail!(
            "certificate {} now downloads as serial {}, not the installed {}; not handed to the \
             fleet",
            installed.certificate_id,
            bundle.serial_hex,
            installed.serial
        );
    }
    let item = Installable {
        certificate_id: installed.certificate_id,
        serial: bundle.serial_hex.clone(),
        not_before: bundle.not_before,
        not_after: bundle.not_after,
        key_pem: key.secret_pem().as_bytes().to_vec(),
        archive: download.bytes.to_vec(),
    };
    fr.publish_current(cert, &item).await?;
    tracing::info!(certificate = %cert.name, serial = %item.serial, "the installed certificate was handed to the fleet");
    Ok(())
}

/// The fleet as `cert-agent fleet status` shows it.
#[derive(Debug, Serialize)]
pub struct FleetStatus {
    /// The host leading now (none between runs).
    pub leader: Option<String>,
    pub certificates: Vec<CertStatus>,
    /// Hosts that have not installed a current certificate `lag_alert_secs` after it was
    /// published.
    pub lagging: Vec<String>,
}

/// One certificate of the fleet.
#[derive(Debug, Serialize)]
pub struct CertStatus {
    pub name: String,
    /// The current certificate: its version, serial and when and by whom it was published.
    pub version: Option<u64>,
    pub serial: Option<String>,
    #[serde(with = "time::serde::rfc3339::option")]
    pub published_at: Option<OffsetDateTime>,
    pub published_by: Option<String>,
    pub hosts: Vec<HostStatus>,
}

/// What one host reported for a certificate.
#[derive(Debug, Serialize)]
pub struct HostStatus {
    pub host: String,
    /// The serial it installed, since when.
    pub serial: Option<String>,
    #[serde(with = "time::serde::rfc3339::option")]
    pub since: Option<OffsetDateTime>,
    /// Its last error, when its last attempt failed.
    pub error: Option<String>,
    /// It does not serve the current serial, longer than `lag_alert_secs` after it was
    /// published.
    pub lagging: bool,
}

/// Reads the fleet's state: the leader, every certificate's current serial, every host's
/// result. Certificates of the fleet that this host's configuration does not list are shown
/// too.
pub async fn status(link: &FleetLink) -> Result<FleetStatus> {
    let leader = link.fleet.leader().await?;
    let now = now();
    let lag = time::Duration::seconds(i64::try_from(link.config.lag_alert_secs).unwrap_or(900));
    let mut currents: BTreeMap<String, Option<Current>> = BTreeMap::new();
    for (key, value) in link.fleet.list("certs/").await? {
        let mut parts = key.splitn(3, '/');
        let (Some(_), Some(name), Some(what)) = (parts.next(), parts.next(), parts.next()) else {
            continue;
        };
        let entry = currents.entry(name.to_owned()).or_default();
        if what == "current" {
            *entry = Some(parse(link, &key, &value)?);
        }
    }
    let mut results: BTreeMap<String, BTreeMap<String, HostResult>> = BTreeMap::new();
    let mut hosts = std::collections::BTreeSet::new();
    for (key, value) in link.fleet.list("hosts/").await? {
        let parts: Vec<&str> = key.split('/').collect();
        match parts.as_slice() {
            ["hosts", host, "seen"] => {
                hosts.insert((*host).to_owned());
            }
            ["hosts", host, "certs", name] => {
                hosts.insert((*host).to_owned());
                if let Ok(r) = serde_json::from_slice::<HostResult>(&value) {
                    results
                        .entry((*name).to_owned())
                        .or_default()
                        .insert((*host).to_owned(), r);
                }
            }
            _ => {}
        }
    }
    let mut lagging = std::collections::BTreeSet::new();
    let mut certificates = Vec::new();
    for (name, current) in currents {
        let of_cert = results.get(&name);
        let mut host_rows = Vec::new();
        for host in &hosts {
            let r = of_cert.and_then(|m| m.get(host));
            let serves_current = match (&current, r.and_then(|r| r.serial.as_deref())) {
                (Some(c), Some(s)) => crypto::same_serial_hex(&c.serial, s),
                (None, _) => true,
                (Some(_), None) => false,
            };
            let late = current
                .as_ref()
                .is_some_and(|c| !serves_current && now - c.published_at > lag);
            if late {
                lagging.insert(host.clone());
            }
            host_rows.push(HostStatus {
                host: host.clone(),
                serial: r.and_then(|r| r.serial.clone()),
                since: r.and_then(|r| r.since),
                error: r.and_then(|r| r.error.clone()),
                lagging: late,
            });
        }
        certificates.push(CertStatus {
            name,
            version: current.as_ref().map(|c| c.version),
            serial: current.as_ref().map(|c| c.serial.clone()),
            published_at: current.as_ref().map(|c| c.published_at),
            published_by: current.as_ref().map(|c| c.published_by.clone()),
            hosts: host_rows,
        });
    }
    Ok(FleetStatus {
        leader,
        certificates,
        lagging: lagging.into_iter().collect(),
    })
}

/// A run on a fleet host: installs what the fleet has, then — when this host can take the
/// lead — imports the shared records, runs the engine as the leader, shares and publishes
/// what changed, and gives the lead up. Without etcd (or its quorum) nothing is ordered and
/// the run fails; what is installed stays.
pub(super) async fn run(
    config: &Config,
    opts: &super::RunOptions,
    store: &Store,
    certs: &[&CertificateConfig],
) -> Result<(super::RunReport, Vec<crate::api::RequestCount>)> {
    let link = connect(config)
        .await?
        .ok_or_else(|| anyhow!("no [fleet] in {}", config.path.display()))?;
    let refused = check_specs(&link, config).await?;
    let synced = sync(&link, config, store, &refused).await?;
    let fleet_has = synced.fleet_has;
    let mut report = super::RunReport::not_started(certs);
    let set = |report: &mut super::RunReport, name: &str, outcome: Outcome| {
        if let Some(c) = report.certificates.iter_mut().find(|c| c.name == name) {
            c.outcome = outcome;
        }
    };
    for s in synced.synced {
        set(&mut report, &s.name, s.outcome);
    }
    let Some(lead) = link.fleet.try_lead_exclusive().await? else {
        let leader = link
            .fleet
            .leader()
            .await?
            .unwrap_or_else(|| "another host".into());
        for c in &mut report.certificates {
            if matches!(c.outcome, Outcome::Pending { .. }) {
                c.outcome = Outcome::Unchanged {
                    reason: format!(
                        "{leader} leads the fleet and renews it; this host installs what it \
                         publishes"
                    ),
                };
            }
        }
        return Ok((report, Vec::new()));
    };
    tracing::info!(host = %link.fleet.host(), "leading the fleet for this run");
    let mut eligible = Vec::new();
    let mut imported = BTreeMap::new();
    for cert in certs {
        if refused.contains_key(&cert.name) {
            continue;
        }
        match import(&link, store, cert).await {
            Ok(view) => {
                imported.insert(cert.name.clone(), view);
                eligible.push(*cert);
            }
            Err(e) => set(
                &mut report,
                &cert.name,
                Outcome::Failed {
                    error: format!("{e:#}"),
                },
            ),
        }
    }
    let fr = FleetRun {
        link: &link,
        lead: &lead,
        config,
        client: std::cell::OnceCell::new(),
    };
    let done = super::run::engine(config, store, opts, &eligible, Some(&fr)).await;
    for c in done.report.certificates {
        // What this host's install of the fleet's certificate did (installed, or failed and
        // rolled back) stays the outcome when the leader's work changed nothing.
        let keep_sync = matches!(c.outcome, Outcome::Unchanged { .. })
            && report.certificates.iter().any(|r| {
                r.name == c.name
                    && matches!(
                        r.outcome,
                        Outcome::Installed { .. } | Outcome::Failed { .. }
                    )
            });
        if let Some(r) = report.certificates.iter_mut().find(|r| r.name == c.name) {
            if !keep_sync {
                r.outcome = c.outcome;
            }
            r.warning = c.warning;
        }
    }
    for (name, error) in export(
        &fr,
        store,
        &eligible,
        &imported,
        &fleet_has,
        &done.installed,
    )
    .await
    {
        tracing::warn!(certificate = %name, "{error}");
        set(&mut report, &name, Outcome::Failed { error });
    }
    lead.resign().await;
    Ok((report, done.requests))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_spec_names_each_difference() {
        let spec = |d: &[&str], p: u64, k: &str| Spec {
            domains: d.iter().map(|s| (*s).to_owned()).collect(),
            product_id: p,
            key_type: k.into(),
            host: "web1".into(),
        };
        let fleet = spec(&["a.test", "b.test"], 101, "rsa2048");
        assert!(
            spec(&["a.test", "b.test"], 101, "rsa2048")
                .differences(&fleet)
                .is_empty()
        );
        let d = spec(&["a.test"], 102, "p256").differences(&fleet);
        assert_eq!(d.len(), 3, "{d:?}");
        assert!(d[0].contains("domains [\"a.test\"] here"), "{d:?}");
        assert!(
            d[1].contains("product_id 102 here, 101 in the fleet"),
            "{d:?}"
        );
        assert!(
            d[2].contains("key_type p256 here, rsa2048 in the fleet"),
            "{d:?}"
        );
    }

    #[test]
    fn the_shared_view_leaves_out_what_belongs_to_one_host() {
        let mut rec = CertRecord {
            name: "www".into(),
            failures: 2,
            ..CertRecord::default()
        };
        rec.dcv.files.push(PathBuf::from("/var/www/x.txt"));
        rec.pending_key = Some(PendingKey {
            key_file: PathBuf::from("/var/lib/cert-agent/keys/www/1.key"),
            csr_pem: "csr".into(),
            csr_md5: "M".into(),
            csr_sha256: "S".into(),
            created_at: OffsetDateTime::UNIX_EPOCH,
        });
        let v = shared_view(&rec);
        assert!(v.dcv.files.is_empty());
        assert_eq!(v.pending_key.unwrap().key_file, PathBuf::new());
        assert_eq!(v.failures, 2);
    }
}
