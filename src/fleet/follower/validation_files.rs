//! The validation files the leader publishes, served on every host: each opened and checked
//! against the fleet's pending CSR before it is served (from the certificate's web roots or
//! the standalone directory), removed when withdrawn or replaced, and kept in
//! `state_dir/fleet-dcv.json` so that a restart still removes them; and the files a host
//! published itself while it led, removed once the fleet no longer waits for them.

use std::collections::{BTreeMap, BTreeSet};
use std::path::PathBuf;

use anyhow::{Context, Result, anyhow};

use crate::config::{CertificateConfig, Config};
use crate::crypto::CsrHashes;
use crate::dcv::{ValidationFile, WellKnown};
use crate::engine::Job;
use crate::fleet::envelope::{self, Place, Purpose};
use crate::fleet::link::FleetLink;
use crate::fleet::open_shared::check_dcv;
use crate::fleet::schema::{DcvEntry, dcv_key};
use crate::store::Store;

use super::View;

/// The validation files this host serves for the fleet, by certificate: kept in
/// `state_dir/fleet-dcv.json` so that withdrawn ones are removed, after a restart too.
pub(super) type Served = BTreeMap<String, (DcvEntry, Vec<PathBuf>, Vec<PathBuf>)>;

pub(super) const SERVED_FILE: &str = "fleet-dcv.json";

/// The ACME validation files this host serves, by certificate.
type AcmeServed = Vec<(String, DcvEntry)>;

/// Serves the published validation files, removes withdrawn ones; the names of the
/// certificates with a published file, and the ACME files this host serves (which it says
/// it serves, for the leader to answer the challenge). A file is served only when it opens and is the
/// fleet's pending CSR's (`pending`); one that is not is refused and treated as withdrawn,
/// failing its certificate only.
pub(super) fn sync_dcv(
    link: &FleetLink,
    config: &Config,
    store: &Store,
    refused: &BTreeMap<String, String>,
    pending: &BTreeMap<String, CsrHashes>,
    view: &mut View,
) -> Result<(BTreeSet<String>, AcmeServed)> {
    let path = store.dir().join(SERVED_FILE);
    let mut served: Served = std::fs::read(&path)
        .ok()
        .and_then(|b| serde_json::from_slice(&b).ok())
        .unwrap_or_default();
    let before = served.clone();
    let mut published: BTreeMap<String, DcvEntry> = BTreeMap::new();
    let raw = std::mem::take(&mut view.dcv);
    for (name, value) in &raw {
        let Some(cert) = config.certificate(name) else {
            continue;
        };
        if refused.contains_key(name) {
            continue;
        }
        match open_dcv(link, cert, pending.get(name), value) {
            Ok(entry) => {
                published.insert(name.clone(), entry);
            }
            Err(e) => view.problem(name, format!("{e:#}")),
        }
    }
    view.dcv = raw;
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
        for (file_name, _) in entry.files() {
            if let Err(e) = crate::dcv::serve_dir::remove(store.dir(), file_name) {
                tracing::debug!(certificate = %name, "{e}");
            }
        }
        false
    });
    for (name, entry) in &published {
        if served.contains_key(name) {
            continue;
        }
        let Some(cert) = config.certificate(name) else {
            continue;
        };
        if !cert.dcv.method.is_http() {
            continue;
        }
        match serve_dcv(store, cert, entry) {
            Ok(done) => {
                served.insert(name.clone(), done);
                tracing::info!(certificate = %name, "serving the fleet's validation file {}", entry.file_name);
                let well_known = if crate::fleet::acme::is_acme(entry) {
                    WellKnown::AcmeChallenge
                } else {
                    WellKnown::PkiValidation
                };
                let details = serde_json::json!({
                    "file": format!("{}/{}", well_known.url_dir(), entry.file_name),
                    "for": "fleet",
                });
                if let Err(e) = store.audit(Some(name), "dcv-published", &details) {
                    view.problem(name, format!("{e:#}"));
                }
            }
            Err(e) => view.problem(name, format!("{e:#}")),
        }
    }
    if served != before {
        crate::fsutil::write_atomic(&path, &serde_json::to_vec(&served)?, 0o600)
            .map_err(|e| anyhow!("{}: {}", path.display(), crate::fsutil::io_text(&e)))?;
    }
    let acme_served = served
        .iter()
        .filter(|(_, (entry, _, _))| crate::fleet::acme::is_acme(entry))
        .map(|(name, (entry, _, _))| (name.clone(), entry.clone()))
        .collect();
    Ok((published.into_keys().collect(), acme_served))
}

/// Opens the validation file `value` of `cert` and checks it against the fleet's pending CSR.
fn open_dcv(
    link: &FleetLink,
    cert: &CertificateConfig,
    pending: Option<&CsrHashes>,
    value: &[u8],
) -> Result<DcvEntry> {
    let rel = dcv_key(&cert.name);
    let place = Place::new(Purpose::Dcv, &rel, &cert.name);
    let (_, entry): (u64, DcvEntry) = envelope::open_json(&link.key, &link.fleet, &place, value)?;
    let hashes = pending.ok_or_else(|| {
        anyhow!(
            "the fleet's validation file {} is for no pending CSR of the fleet's record; \
             not served",
            link.fleet.key(&rel)
        )
    })?;
    let acme = crate::fleet::acme::check_files(&entry).with_context(|| {
        format!(
            "the fleet's validation file {}; not served",
            link.fleet.key(&rel)
        )
    })?;
    if acme {
        // ACME tokens and their key authorizations (their shapes checked: no path
        // characters), while the fleet's record holds a pending CSR for the order.
        return Ok(entry);
    }
    check_dcv(hashes, &entry).with_context(|| {
        format!(
            "the fleet's validation file {} is not the pending CSR's; not served",
            link.fleet.key(&rel)
        )
    })?;
    Ok(entry)
}

/// Serves `entry` for `cert`: in the standalone directory or the certificate's web roots.
fn serve_dcv(
    store: &Store,
    cert: &CertificateConfig,
    entry: &DcvEntry,
) -> Result<(DcvEntry, Vec<PathBuf>, Vec<PathBuf>)> {
    let name = &cert.name;
    let (mut files, mut dirs) = (Vec::new(), Vec::new());
    for (file_name, content) in entry.files() {
        let file = ValidationFile::from_parts(file_name, content)?;
        if cert.dcv.standalone {
            crate::dcv::serve_dir::publish(store.dir(), &file).with_context(|| {
                format!("could not serve the fleet's validation file of '{name}'")
            })?;
        } else {
            let roots = crate::engine::webroots(cert)?
                .distinct_for(&cert.domains)
                .context("could not publish the fleet's validation file")?;
            let done = crate::dcv::webroot::publish_into(&roots, &file)
                .context("could not publish the fleet's validation file")?;
            files.extend(done.files);
            dirs.extend(done.dirs);
        }
    }
    Ok((entry.clone(), files, dirs))
}

/// Validation files this host published itself while it led, for a validation the fleet no
/// longer waits for (it stopped leading half-way, killed or cut off): removed. Whether the
/// record on disk is `job`'s (false: its write failed).
pub(super) fn remove_own_leftovers(job: &mut Job<'_>) -> bool {
    if job.rec.dcv.files.is_empty() && job.rec.dcv.dirs.is_empty() {
        return true;
    }
    let gone = crate::dcv::webroot::Published {
        files: std::mem::take(&mut job.rec.dcv.files),
        dirs: std::mem::take(&mut job.rec.dcv.dirs),
    };
    if let Err(e) = crate::dcv::webroot::remove(&gone) {
        tracing::warn!(certificate = %job.cert.name, "could not remove a validation file: {e}");
    }
    match job.save() {
        Ok(()) => true,
        Err(e) => {
            tracing::warn!(certificate = %job.cert.name, "{e:#}");
            false
        }
    }
}
