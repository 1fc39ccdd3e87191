//! Every host's side of the fleet: install what the fleet publishes (opened with the fleet
//! key and checked again on this host), serve and withdraw the validation files the leader
//! publishes, report what this host did under `hosts/HOST/`.

use std::collections::BTreeMap;
use std::path::PathBuf;

use anyhow::{Context, Result, anyhow};
use time::OffsetDateTime;

use super::link::now;
use crate::config::{CertificateConfig, Config};
use crate::crypto::{self, PrivateKey};
use crate::dcv::ValidationFile;
use crate::engine::{Job, Outcome, Ready, deploy};
use crate::store::Store;

use super::link::{FleetLink, check_specs};
use super::schema::{Current, DcvEntry, HostResult, current_key, host_key, parse, unb64};

/// What [`sync`] did for one certificate.
#[derive(Debug)]
pub struct Synced {
    pub name: String,
    pub outcome: Outcome,
}

/// What [`sync`] did, and the fleet's current certificates as it read them (serial and
/// `not_before` by name), for the leader's hand-over to use without reading them again.
#[derive(Debug, Default)]
pub(super) struct SyncReport {
    pub synced: Vec<Synced>,
    pub(super) fleet_has: BTreeMap<String, (String, OffsetDateTime)>,
}

/// Installs, for every certificate of `config` that the fleet has a newer certificate of,
/// that certificate — decrypted with the fleet key and checked again against this host's key,
/// names, chain and clock — through this host's own config test, reload, verification and
/// rollback; records the result under `hosts/HOST/`. Also serves the validation files the
/// leader published and removes those it withdrew.
pub(super) async fn sync(
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
        let mut job = match Job::load(store, cert, idx, crate::clock::Clock::from_env()) {
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
        let current: Current = parse(&link.fleet, &rel, &bytes)?;
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
pub(super) fn prepare(
    link: &FleetLink,
    cert: &CertificateConfig,
    current: &Current,
) -> Result<Ready> {
    let sealed = unb64("key", &current.key)?;
    let pem = link.key.open(&cert.name, current.version, &sealed)?;
    let key = PrivateKey::from_pem(&pem, "the fleet's record")
        .with_context(|| format!("the fleet's key of certificate '{}'", cert.name))?;
    let archive = unb64("archive", &current.archive)?;
    let bundle = deploy::check_archive(cert, &archive, &key, now()).with_context(|| {
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

pub(super) async fn report_host(link: &FleetLink, host: &str, name: &str, result: &HostResult) {
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
pub(super) type Served = BTreeMap<String, (DcvEntry, Vec<PathBuf>, Vec<PathBuf>)>;

pub(super) const SERVED_FILE: &str = "fleet-dcv.json";

/// Serves the published validation files, removes withdrawn ones; the names of the
/// certificates with a published file.
pub(super) async fn sync_dcv(
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
            let roots = crate::engine::webroots(cert)?
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
pub(super) fn remove_own_leftovers(job: &mut Job<'_>) {
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
