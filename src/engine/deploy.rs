//! The install phase: downloading the issued certificate, checking it against our key, names
//! and the clock, describing its install (paths, ownership, commands, verification) for the
//! install layer, installing everything ready in one transaction per web server, and
//! recording what was installed.

use std::collections::HashMap;
use std::path::{Path, PathBuf};

use anyhow::{Context, Result, anyhow};

use crate::api::ApiError;
use crate::bundle::{self, Expected, ValidatedBundle};
use crate::clock::rfc3339;
use crate::config::{CertificateConfig, ServerKind};
use crate::crypto::PrivateKey;
use crate::install::{
    self, CertInstall, CertMaterial, InstallPaths, Ownership, PathOverrides, Principal,
    ServerCommands, VerifyTarget,
};
use crate::store::{FileStamp, Installed, Subscription};

use super::context::Ctx;
use super::job::{Job, Ready};
use super::keys;
use super::lead::Live;
use super::report::Outcome;

/// A host clock this much behind the CA's installs at once: a leaf issued a moment ago is not
/// "not yet valid".
pub(crate) const CLOCK_TOLERANCE: time::Duration = time::Duration::minutes(5);
/// A checked certificate that begins at most this far after this host's clock is held and
/// installed once it is valid; one that begins later is refused (a clock that far behind, or
/// a CA's error).
pub(crate) const HOLD_AT_MOST: time::Duration = time::Duration::days(1);
/// The largest bundle archive kept or read back while held.
pub(crate) const HELD_ARCHIVE_MAX: u64 = 16 * 1024 * 1024;

/// A bundle that passed every check.
#[derive(Debug)]
pub(crate) enum Checked {
    /// Valid now (or within [`CLOCK_TOLERANCE`]): install it.
    Valid(ValidatedBundle),
    /// Valid from `bundle.not_before`, less than [`HOLD_AT_MOST`] ahead: hold it until then.
    NotYet(ValidatedBundle),
}

/// Downloads the per-server bundle and checks it against our key, names and the clock; the
/// checked bundle and the archive it came from. `None` while the API still answers 422 (files
/// not available yet) or still serves the previous certificate.
pub(super) async fn download_checked(
    ctx: &Ctx<'_>,
    cert: &CertificateConfig,
    certificate_id: u64,
    key: &PrivateKey,
    previous_serial: Option<&str>,
) -> Result<Option<(Checked, Vec<u8>)>> {
    let download = match ctx.client()?.download_bundle(certificate_id).await {
        Ok(d) => d,
        Err(ApiError::Http { status: 422, .. }) => return Ok(None),
        Err(e) => {
            return Err(anyhow!(e).context(format!(
                "could not download the bundle of certificate {certificate_id}"
            )));
        }
    };
    if let Some(prev) = previous_serial
        && bundle_leaf_serial(&download.bytes, cert.install.server)
            .is_some_and(|s| crate::crypto::same_serial_hex(&s, prev))
    {
        // After a reissue the previous certificate is served until the new one is issued.
        return Ok(None);
    }
    let checked = check_archive(cert, &download.bytes, key, ctx.now()).with_context(|| {
        format!("the bundle of certificate {certificate_id} was rejected; nothing was installed")
    })?;
    Ok(Some((checked, download.bytes.to_vec())))
}

/// Checks a bundle archive against `key`, the names of `cert` and the clock, for the server
/// `cert` is installed into. A leaf that begins up to [`CLOCK_TOLERANCE`] after `now` is
/// valid; one that begins up to [`HOLD_AT_MOST`] after it is checked as of its beginning and
/// comes back as [`Checked::NotYet`]; later, the error says how far ahead it begins.
pub(crate) fn check_archive(
    cert: &CertificateConfig,
    archive: &[u8],
    key: &PrivateKey,
    now: time::OffsetDateTime,
) -> Result<Checked> {
    let anchors = anchors_of(cert)?;
    check_with(cert, key, now, &anchors, |expected| {
        bundle::read_bundle(archive, cert.install.server, expected)
    })
}

/// The roots `cert`'s chain must end at (`chain_trust`, `ca_file`).
fn anchors_of(
    cert: &CertificateConfig,
) -> Result<std::sync::Arc<Vec<rustls_pki_types::CertificateDer<'static>>>> {
    bundle::trust_anchors(cert.install.chain_trust, cert.install.ca_file.as_deref())
        .map_err(|e| anyhow!("certificate '{}': {e}", cert.name))
}

/// [`check_archive`] for a chain (PEM: the leaf, then the intermediates), as an ACME CA
/// sends it and a fleet shares it. Its links are checked, not its root: an ACME CA's root is
/// checked by no trust anchor yet, as on one host ([ACME CAs](../../docs/acme.md)).
pub(crate) fn check_chain(
    cert: &CertificateConfig,
    chain: &[u8],
    key: &PrivateKey,
    now: time::OffsetDateTime,
) -> Result<Checked> {
    check_with(cert, key, now, &[], |expected| {
        bundle::validate_chain(chain, cert.install.server, expected)
    })
}

/// [`check_archive`] for the chain (PEM: the leaf, then its issuers) a fleet shares in place
/// of the Partner API's archive: the same checks of the leaf, the links and the trust anchors
/// `chain_trust` names. What only concerns the archive (its files agreeing with each other)
/// was checked by the leader before it shared the chain.
pub(crate) fn check_chain_anchored(
    cert: &CertificateConfig,
    chain: &[u8],
    key: &PrivateKey,
    now: time::OffsetDateTime,
) -> Result<Checked> {
    let anchors = anchors_of(cert)?;
    check_with(cert, key, now, &anchors, |expected| {
        bundle::validate_chain(chain, cert.install.server, expected)
    })
}

/// The checks of [`check_archive`] with `read` reading the certificate, its chain ending at
/// one of `anchors` (none: linked only).
fn check_with(
    cert: &CertificateConfig,
    key: &PrivateKey,
    now: time::OffsetDateTime,
    anchors: &[rustls_pki_types::CertificateDer<'static>],
    read: impl Fn(&Expected<'_>) -> Result<ValidatedBundle, bundle::BundleError>,
) -> Result<Checked> {
    let at = |when: time::OffsetDateTime| {
        let public_key = key.public_key_der();
        let expected = Expected {
            public_key_der: &public_key,
            domains: &cert.domains,
            now: when,
            trust_anchors: anchors,
        };
        read(&expected)
    };
    match at(now) {
        Ok(b) => Ok(Checked::Valid(b)),
        Err(bundle::BundleError::NotYetValid { starts, .. }) if starts <= now + HOLD_AT_MOST => {
            // Every other check as of the moment it begins.
            let b = at(starts)?;
            Ok(if starts <= now + CLOCK_TOLERANCE {
                Checked::Valid(b)
            } else {
                Checked::NotYet(b)
            })
        }
        Err(e @ bundle::BundleError::NotYetValid { .. }) => Err(anyhow!(
            "{e}: it begins more than {} hours after this host's clock, more than is waited \
             for; check this host's clock (`timedatectl`) and the dates the CA issued",
            HOLD_AT_MOST.whole_hours()
        )),
        Err(e) => Err(e.into()),
    }
}

/// [`check_archive`] for a bundle that must be valid now (or within [`CLOCK_TOLERANCE`]).
pub(crate) fn check_archive_now(
    cert: &CertificateConfig,
    archive: &[u8],
    key: &PrivateKey,
    now: time::OffsetDateTime,
) -> Result<ValidatedBundle> {
    match check_archive(cert, archive, key, now)? {
        Checked::Valid(b) => Ok(b),
        Checked::NotYet(b) => Err(anyhow!(
            "the certificate in the bundle (serial {}) is not valid before {} (now {})",
            b.serial_hex,
            rfc3339(b.not_before),
            rfc3339(now)
        )),
    }
}

/// Where certificate `cert` is installed.
pub(crate) fn install_paths(cert: &CertificateConfig) -> InstallPaths {
    InstallPaths::resolve(
        cert.install.server,
        Path::new(install::DEFAULT_BASE_DIR),
        &cert.name,
        &PathOverrides {
            cert: cert.install.cert_path.clone(),
            chain: cert.install.chain_path.clone(),
            fullchain: cert.install.fullchain_path.clone(),
            key: cert.install.key_path.clone(),
            combined: cert.install.combined_path.clone(),
        },
    )
}

pub(crate) fn cert_install(
    cert: &CertificateConfig,
    bundle: &ValidatedBundle,
    key: &PrivateKey,
) -> CertInstall {
    let kind = cert.install.server;
    CertInstall {
        name: cert.name.clone(),
        domains: cert.domains.clone(),
        paths: install_paths(cert),
        ownership: Ownership {
            owner: cert.install.owner.as_deref().map(Principal::parse),
            group: cert.install.group.as_deref().map(Principal::parse),
            cert_mode: None,
            key_mode: cert.install.mode,
        },
        material: CertMaterial::new(
            bundle.leaf_pem.clone().into_bytes(),
            bundle.chain_pem.clone().into_bytes(),
            key.secret_pem().as_bytes().to_vec(),
        ),
        commands: ServerCommands::configured(
            kind,
            cert.install.configtest_command.as_ref().map(|c| c.argv()),
            cert.install.reload_command.as_ref().map(|c| c.argv()),
            None,
        ),
        verify: cert
            .install
            .verify_address
            .as_ref()
            .filter(|a| !a.is_empty())
            .map(|a| VerifyTarget::new(a.clone(), cert.common_name())),
        deploy_hook: cert.install.deploy_hook.as_ref().map(|c| c.argv()),
    }
}

/// Installs every ready certificate (one transaction per web server: config test and reload
/// once each) and records each result: its outcome, and a warning when only the deploy hook
/// failed. The journal and audit lines of the installed ones are written together, then
/// their records ([`record_installs`]). The results in the order of `ready`.
pub(crate) async fn install_ready<'a>(
    ready: Vec<(Job<'a>, Ready)>,
) -> Vec<(Job<'a>, Outcome, Option<String>)> {
    if ready.is_empty() {
        return Vec::new();
    }
    ReadyBatch::of(ready).finish().await
}

/// [`install_ready`] up to the verification of what is served, without committing or
/// recording anything ([`ReadyBatch::finish_held`]).
pub(crate) async fn hold_ready(ready: Vec<(Job<'_>, Ready)>) -> HeldBatch<'_> {
    ReadyBatch::of(ready).finish_held().await
}

/// [`install_ready`] with the certificates staged a slice at a time ([`ReadyBatch::stage`]):
/// of each, once its files are written beside their targets, only what recording its install
/// needs is kept (not its bundle's content, its archive, its key), so that installing
/// thousands at once holds one slice of them at a time; all of them are then switched,
/// tested, reloaded and recorded together ([`ReadyBatch::finish`]).
pub(crate) struct ReadyBatch<'a> {
    install: install::InstallBatch,
    ready: Vec<(Job<'a>, Ready)>,
}

impl<'a> ReadyBatch<'a> {
    /// An empty batch of about `files` files ([`install::InstallBatch::new`]).
    pub(crate) fn new(files: usize) -> Self {
        ReadyBatch {
            install: install::InstallBatch::new(files),
            ready: Vec::new(),
        }
    }

    /// A batch of `ready`, staged at once.
    fn of(ready: Vec<(Job<'a>, Ready)>) -> Self {
        let files = ready
            .iter()
            .map(|(_, r)| r.install.paths.all().count())
            .sum();
        let mut batch = ReadyBatch::new(files);
        batch.stage(ready);
        batch
    }

    /// Stages the files of `ready` (the next certificates of the batch, in order).
    pub(crate) fn stage(&mut self, ready: Vec<(Job<'a>, Ready)>) {
        let mut installs = Vec::with_capacity(ready.len());
        for (job, r) in ready {
            let (install, kept) = slim(r);
            installs.push(install);
            self.ready.push((job, kept));
        }
        self.install.stage(installs);
    }

    /// Installs everything staged and records each result ([`install_ready`]), in order.
    pub(crate) async fn finish(self) -> Vec<(Job<'a>, Outcome, Option<String>)> {
        self.finish_held().await.settle(&HashMap::new()).await
    }

    /// Installs everything staged up to the verification of what is served, without
    /// committing or recording anything ([`install::InstallBatch::finish_held`]): a check of
    /// the caller's own decides, with [`HeldBatch::settle`], which are kept.
    pub(crate) async fn finish_held(self) -> HeldBatch<'a> {
        let ReadyBatch { install, ready } = self;
        let (results, held) = install.finish_held().await;
        HeldBatch {
            ready,
            results,
            held,
        }
    }
}

/// A batch whose installs are live but neither committed nor recorded
/// ([`ReadyBatch::finish_held`]).
pub(crate) struct HeldBatch<'a> {
    ready: Vec<(Job<'a>, Ready)>,
    results: Vec<install::CertOutcome>,
    held: install::Held,
}

impl<'a> HeldBatch<'a> {
    /// The certificates whose new files are live, in order.
    pub(crate) fn live(&self) -> Vec<Live> {
        self.ready
            .iter()
            .zip(&self.results)
            .filter(|(_, r)| r.installed())
            .map(|((job, r), _)| Live {
                name: job.cert.name.clone(),
                serial: r.bundle.serial_hex.clone(),
                previous: job.rec.installed.as_ref().map(|i| i.serial.clone()),
                previous_dates: job
                    .rec
                    .installed
                    .as_ref()
                    .map(|i| (i.not_before, i.not_after)),
            })
            .collect()
    }

    /// Rolls back the certificates named in `back` (name → why; each fails with it), commits
    /// the others and records each result ([`install_ready`]), in order.
    pub(crate) async fn settle(
        self,
        back: &HashMap<String, String>,
    ) -> Vec<(Job<'a>, Outcome, Option<String>)> {
        let HeldBatch {
            ready,
            results,
            held,
        } = self;
        if ready.is_empty() {
            return Vec::new();
        }
        let results = held.settle(back, results).await;
        installed(ready, results)
    }
}

/// The install of `r` (its content, to stage) and what is kept of `r` to record it: its
/// certificate's id, serial and dates, the install's paths and commands — not the archive,
/// the bundle's PEM and DER nor the key.
fn slim(r: Ready) -> (CertInstall, Ready) {
    let Ready {
        certificate_id,
        bundle,
        mut install,
        archive: _,
    } = r;
    let empty = CertMaterial::new(Vec::new(), Vec::new(), Vec::new());
    let material = std::mem::replace(&mut install.material, empty);
    let without = install.clone();
    install.material = material;
    let kept = Ready {
        certificate_id,
        bundle: ValidatedBundle {
            leaf_pem: String::new(),
            chain_pem: String::new(),
            fullchain_pem: String::new(),
            root_pem: None,
            leaf_der: Vec::new(),
            chain_der: Vec::new(),
            ..bundle
        },
        install: without,
        archive: Vec::new(),
    };
    (install, kept)
}

/// The results of a batch's install (`results`, one per entry of `ready`, in order),
/// recorded ([`record_installs`]). Each job is recorded where it stands in `ready`, and the
/// list of results is made in that list's place: a batch of thousands (about 2.5 KB each)
/// is never held twice.
fn installed<'a>(
    mut ready: Vec<(Job<'a>, Ready)>,
    results: Vec<install::CertOutcome>,
) -> Vec<(Job<'a>, Outcome, Option<String>)> {
    let mut outcomes: Vec<Option<(Outcome, Option<String>)>> = Vec::with_capacity(ready.len());
    let mut live = Vec::new();
    let mut results = results.into_iter();
    for (idx, (job, r)) in ready.iter_mut().enumerate() {
        let result = results.next();
        if let Some(result) = result.as_ref().filter(|r| r.installed()) {
            let mut warning = None;
            if let Err(e) = &result.result {
                tracing::warn!(certificate = %job.cert.name, "deploy hook failed: {e}");
                warning = Some(format!("deploy hook failed: {e}"));
            }
            live.push((idx, warning));
            outcomes.push(None);
            continue;
        }
        let err = match result.map(|r| r.result) {
            Some(Err(e)) => anyhow!(e),
            Some(Ok(())) | None => anyhow!("the install did not complete"),
        };
        let err = err.context("install failed");
        if let Err(e) = job.journal(
            "install-failed",
            serde_json::json!({
                "certificate_id": r.certificate_id,
                "serial": r.bundle.serial_hex,
                "error": format!("{err:#}"),
            }),
        ) {
            tracing::warn!(certificate = %job.cert.name, "could not journal the failed install: {e:#}");
        }
        outcomes.push(Some((job.fail(&err), None)));
    }
    record_installs(&mut ready, live, &mut outcomes);
    // In place where the standard library can (a result is smaller than the job and install
    // it replaces).
    ready
        .into_iter()
        .enumerate()
        .map(|(idx, (mut job, _))| {
            let (outcome, warning) = outcomes
                .get_mut(idx)
                .and_then(Option::take)
                .unwrap_or_else(|| (job.fail(&anyhow!("the install was not recorded")), None));
            (job, outcome, warning)
        })
        .collect()
}

/// Records the installs of a batch whose files are live (`live`: their places in `batch`, and
/// the deploy hook's warning): the `installed` lines of all of them journalled and audited
/// together (one write and one sync each: the journal holds
/// every install whose files went live before any record says so, and a crash before the
/// records are written leaves a line the next run's install repeats, never an install
/// without its line); then each record marked installed ([`mark_installed`]) and all of them
/// written together ([`Store::save_all`](crate::store::Store::save_all): whatever the moment
/// of a crash, each record is either as it was or installed); then the used pending keys
/// and held archives removed. A journal or a record that could not be written fails its
/// certificates (their files stay live; the next run installs them again). Each one's
/// outcome and warning go to its place in `outcomes` (as long as `batch`).
fn record_installs(
    batch: &mut [(Job<'_>, Ready)],
    live: Vec<(usize, Option<String>)>,
    outcomes: &mut [Option<(Outcome, Option<String>)>],
) {
    let Some(store) = live.first().map(|(idx, _)| batch[*idx].0.store()) else {
        return;
    };
    let events: Vec<crate::store::JournalEvent<'_>> = live
        .iter()
        .map(|(idx, _)| {
            let (job, r) = &batch[*idx];
            (
                job.cert.name.as_str(),
                "installed",
                serde_json::json!({
                    "certificate_id": r.certificate_id,
                    "serial": r.bundle.serial_hex,
                }),
            )
        })
        .collect();
    let journalled = store.journal_all(&events);
    drop(events);
    if let Err(e) = journalled {
        let e = anyhow!(e).context("the installs could not be journalled");
        for (idx, warning) in live {
            outcomes[idx] = Some((batch[idx].0.fail(&e), warning));
        }
        return;
    }
    crate::failpoint::hit("installs-journalled");
    let keys: Vec<Option<PathBuf>> = live
        .iter()
        .map(|(idx, _)| {
            let (job, r) = &mut batch[*idx];
            mark_installed(job, r)
        })
        .collect();
    let records: Vec<&crate::store::CertRecord> =
        live.iter().map(|(idx, _)| &batch[*idx].0.rec).collect();
    let saved = store.save_all(&records);
    drop(records);
    // What the install's own verification saw served (it rolls back when it sees another).
    let mut seen = Vec::new();
    for (((idx, warning), saved), key) in live.into_iter().zip(saved).zip(keys) {
        let (job, r) = &mut batch[idx];
        let outcome = match saved {
            Err(e) => job.fail(&anyhow!(e)),
            Ok(()) => {
                if let (Some(_), Some(i)) = (&r.install.verify, &job.rec.installed) {
                    let served = crate::store::served::Served::Serial(i.serial.clone());
                    seen.extend(
                        crate::store::served::Observation::of(i.installed_at, &i.serial, &served)
                            .map(|o| (job.cert.name.clone(), o)),
                    );
                }
                if let Some(key) = key {
                    keys::discard_key_file(&key);
                }
                job.store().discard_held(&job.cert.name);
                Outcome::Installed {
                    certificate_id: r.certificate_id,
                    serial: r.bundle.serial_hex.clone(),
                    not_after: r.bundle.not_after,
                }
            }
        };
        outcomes[idx] = Some((outcome, warning));
    }
    crate::store::served::remember(store, seen);
}

/// Marks the record of a successful install (not written): the installed certificate and the
/// stamp of its file, a finished reissue cleared, the names validated when it was issued.
/// The pending key it used (now at the key path), whose state-directory copy goes once the
/// record is written.
pub(crate) fn mark_installed(job: &mut Job<'_>, r: &Ready) -> Option<PathBuf> {
    let paths = &r.install.paths;
    let files: Vec<PathBuf> = paths.all().map(Path::to_path_buf).collect();
    let leaf_file = leaf_file(paths);
    let leaf_stamp = leaf_file.as_deref().and_then(FileStamp::of);
    let installed = Installed {
        serial: r.bundle.serial_hex.clone(),
        not_before: r.bundle.not_before,
        not_after: r.bundle.not_after,
        certificate_id: r.certificate_id,
        files,
        installed_at: job.clock.now(),
        leaf_file,
        leaf_stamp,
    };
    // Without the API's subscription end: the order's days from the first issuance, or the
    // certificate's own end, whichever is later.
    // (A certificate starting within `days` of the largest date: its own end.)
    let by_days = r
        .bundle
        .not_before
        .checked_add(time::Duration::days(i64::from(job.cert.order.days)))
        .unwrap_or(r.bundle.not_after);
    let fallback = Subscription {
        ends: by_days.max(r.bundle.not_after),
        multi_year: false,
    };
    // A certificate not installed before was issued: its names passed validation.
    let issued = job
        .rec
        .installed
        .as_ref()
        .is_none_or(|i| i.serial != r.bundle.serial_hex);
    if issued {
        let mark = crate::store::ValidationMark {
            method: super::forecast::ValidationMethod::of(job.cert.dcv.method)
                .as_str()
                .to_owned(),
            at: job.clock.now(),
        };
        for d in &job.cert.domains {
            job.rec
                .validations
                .insert(d.to_ascii_lowercase(), mark.clone());
        }
    }
    job.rec
        .mark_installed(installed, fallback)
        .map(|p| p.key_file)
}

/// The installed file whose first certificate is the leaf (fullchain, else leaf, else the
/// combined file).
pub(crate) fn leaf_file(paths: &InstallPaths) -> Option<PathBuf> {
    paths.leaf_file().map(Path::to_path_buf)
}

/// Loads the key installed for `cert` (for a reinstall of the same certificate): from the key
/// file, or from the combined file when only that is configured.
pub(crate) fn installed_key(cert: &CertificateConfig) -> Result<PrivateKey> {
    let paths = install_paths(cert);
    let path = paths.key_file().ok_or_else(|| {
        anyhow!(
            "certificate '{}' has no key file or combined file configured",
            cert.name
        )
    })?;
    crate::crypto::read_key_file(path)
        .with_context(|| format!("could not read the installed key {}", path.display()))
}

/// The serial of the leaf in a bundle, without validating anything else (to tell the previous
/// certificate from a reissued one).
pub(crate) fn bundle_leaf_serial(zip: &[u8], server: ServerKind) -> Option<String> {
    let archive = bundle::Archive::unpack(zip).ok()?;
    let name = match server {
        ServerKind::Nginx => "nginx/fullchain.crt",
        ServerKind::Apache => "apache/certificate.crt",
        ServerKind::None => "pem/fullchain.pem",
    };
    let pem = archive.get(name)?;
    crate::crypto::CertificateInfo::from_pem(pem)
        .ok()
        .map(|c| c.serial_hex)
}
