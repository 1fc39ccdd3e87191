//! The install flow run once per agent run: stage every certificate, switch the files, test
//! and reload each web server once, verify what is served, roll back what failed, commit the
//! rest, and run the deploy hooks.

use std::collections::{HashMap, HashSet};
use std::ffi::OsString;
use std::io;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use super::error::InstallError;
use super::files::{CertMaterial, InstallTx, Ownership};
use super::paths::{InstallPaths, ServerKind};
use super::server::{ServerCommands, run_command};
use super::staging::CheckedDirs;
use super::verify::{VerifyTarget, serial_of_pem, verify_served};
use crate::crypto::Serial;
use crate::fsutil::SyncGroup;

/// Everything needed to install one certificate.
#[derive(Debug, Clone)]
pub struct CertInstall {
    /// The certificate's configured name (`CERT_AGENT_NAME` for the hook, messages).
    pub name: String,
    /// Its domains, common name first (`CERT_AGENT_DOMAINS`).
    pub domains: Vec<String>,
    /// Where its files go.
    pub paths: InstallPaths,
    /// Owner, group and modes of its files.
    pub ownership: Ownership,
    /// The PEM content.
    pub material: CertMaterial,
    /// The web server's config test and reload; certificates with equal commands share one
    /// test and one reload.
    pub commands: ServerCommands,
    /// Where to check the served certificate after the reload; `None` skips the check.
    pub verify: Option<VerifyTarget>,
    /// Program run after a successful install (argv, no shell).
    pub deploy_hook: Option<Vec<String>>,
}

impl CertInstall {
    /// A request with the defaults for `server`: default paths under
    /// [`DEFAULT_BASE_DIR`](super::DEFAULT_BASE_DIR), ownership kept or defaulted, the
    /// server's default commands, verification at
    /// [`DEFAULT_VERIFY_ADDRESS`](super::DEFAULT_VERIFY_ADDRESS) with SNI = the first domain
    /// (none for [`ServerKind::None`]), no deploy hook. Adjust the public fields from the
    /// configuration afterwards.
    pub fn new(
        name: &str,
        domains: Vec<String>,
        server: ServerKind,
        material: CertMaterial,
    ) -> Self {
        let verify = match (server, domains.first()) {
            (ServerKind::None, _) | (_, None) => None,
            (_, Some(cn)) => Some(VerifyTarget::new(super::DEFAULT_VERIFY_ADDRESS, cn.clone())),
        };
        CertInstall {
            name: name.to_string(),
            paths: InstallPaths::defaults(server, name),
            domains,
            ownership: Ownership::default(),
            material,
            commands: ServerCommands::defaults(server),
            verify,
            deploy_hook: None,
        }
    }
}

/// The result of installing one certificate.
#[derive(Debug)]
pub struct CertOutcome {
    /// The certificate's configured name.
    pub name: String,
    /// The new certificate's serial (hex) when its files are now live.
    pub installed_serial: Option<String>,
    /// `Ok` when installed (and its hook succeeded). An error other than
    /// [`InstallError::DeployHook`] means the previous files are in place.
    pub result: Result<(), InstallError>,
}

impl CertOutcome {
    /// Whether the new files are live (true also when only the deploy hook failed).
    pub fn installed(&self) -> bool {
        self.installed_serial.is_some()
    }
}

struct Pending {
    idx: usize,
    tx: InstallTx,
    serial: Serial,
}

/// Installs every certificate of this run:
/// 1. stage all files (new versions written beside the targets; nothing live changes), made
///    durable together;
/// 2. switch them into place, keeping the previous versions, the renames made durable
///    together;
/// 3. per web server (certificates with equal [`ServerCommands`]): config test once — on
///    failure restore that server's files and report; reload once — on failure restore and
///    reload again;
/// 4. verify each certificate's served serial — on mismatch restore its files, test and reload
///    the server again, and fail it;
/// 5. commit the rest and run their deploy hooks.
///
/// One certificate's failure does not stop the others; one outcome per input, in order.
/// [`InstallBatch`] does the same with the certificates staged a slice at a time.
pub async fn install_all(certs: &[CertInstall]) -> Vec<CertOutcome> {
    let files: usize = certs.iter().map(|c| c.paths.all().count()).sum();
    let mut batch = InstallBatch::new(files);
    batch.stage(certs.to_vec());
    batch.finish().await
}

/// One install transaction ([`install_all`]) whose certificates are staged a slice at a time
/// ([`InstallBatch::stage`]: each slice's files written beside their targets, then its PEM
/// content dropped), and then all switched, tested, reloaded and verified together
/// ([`InstallBatch::finish`]): a host installing thousands of certificates holds one slice's
/// content at a time, and still switches once and reloads each web server once. Nothing live
/// changes before `finish`; a batch dropped before it removes what it staged.
pub(crate) struct InstallBatch {
    /// Each certificate staged or refused so far, in order, without its content once staged.
    certs: Vec<CertInstall>,
    outcomes: Vec<CertOutcome>,
    staged: Vec<Pending>,
    /// Every staged file is durable once it syncs, before the first one is switched.
    staging: SyncGroup,
    checked: Arc<CheckedDirs>,
    /// Every path staged so far: a later certificate naming one is refused for it (the first
    /// one staged keeps it, as within a slice).
    paths: HashSet<PathBuf>,
}

impl InstallBatch {
    /// An empty batch of about `files` files (how its staged files are made durable: one
    /// `syncfs`, or an `fsync` of each for a few; see [`SyncGroup`]).
    pub(crate) fn new(files: usize) -> Self {
        InstallBatch {
            certs: Vec::new(),
            outcomes: Vec::new(),
            staged: Vec::new(),
            staging: SyncGroup::for_files(files),
            checked: Arc::default(),
            paths: HashSet::new(),
        }
    }

    /// Stages the files of `certs` (the next ones of the batch, in order): a certificate that
    /// cannot be staged fails alone. Only what switching, testing, verifying and the deploy
    /// hooks need is kept of each (its content is written, and dropped).
    pub(crate) fn stage(&mut self, certs: Vec<CertInstall>) {
        let base = self.certs.len();
        self.outcomes.extend(certs.iter().map(|c| CertOutcome {
            name: c.name.clone(),
            installed_serial: None,
            result: Ok(()),
        }));
        let staged = stage_all(
            &certs,
            base,
            &mut self.outcomes[base..],
            (&self.staging, &self.checked),
            &mut self.paths,
        );
        self.staged.extend(staged);
        self.certs.extend(certs.into_iter().map(|mut c| {
            c.material = CertMaterial::new(Vec::new(), Vec::new(), Vec::new());
            c
        }));
    }

    /// Switches, tests, reloads, verifies and commits everything staged (see
    /// [`install_all`]); one outcome per certificate staged, in order.
    pub(crate) async fn finish(self) -> Vec<CertOutcome> {
        let (outcomes, held) = self.finish_held().await;
        held.settle(&HashMap::new(), outcomes).await
    }

    /// [`finish`](Self::finish) up to the verification, without committing: the certificates
    /// whose files are live keep their previous versions ([`Held`]), so that a check of the
    /// caller's own can still roll each back. Their outcomes say installed (their deploy hooks
    /// not run yet): [`Held::settle`] commits or rolls back each, and runs the hooks.
    pub(crate) async fn finish_held(self) -> (Vec<CertOutcome>, Held) {
        let InstallBatch {
            certs,
            mut outcomes,
            staged,
            staging,
            ..
        } = self;
        if certs.is_empty() {
            return (outcomes, Held::default());
        }
        let files: usize = staged
            .iter()
            .map(|p| certs[p.idx].paths.all().count())
            .sum();
        // Every staged file of the batch is durable before the first one is switched: one
        // sync for the batch (see `SyncGroup`), not one per file.
        let staged = match staging.sync() {
            Ok(()) => staged,
            Err((dir, e)) => {
                // Dropped unapplied: their staged files are removed, nothing live changed.
                for p in staged {
                    outcomes[p.idx].result = Err(InstallError::Write {
                        path: dir.clone(),
                        cause: Arc::new(io::Error::new(e.kind(), e.to_string())),
                    });
                }
                Vec::new()
            }
        };
        switch_and_reload(certs, staged, files, outcomes).await
    }
}

/// The certificates of a batch whose new files are live, served and verified, but not
/// committed: each one's previous versions are still kept beside its files, so that it can
/// be rolled back — the previous files renamed back, the web server's config test and reload
/// run again, as for a failed verification.
#[derive(Default)]
pub(crate) struct Held {
    certs: Vec<CertInstall>,
    groups: Vec<(ServerCommands, Vec<Pending>)>,
}

impl Held {
    /// Rolls back every held certificate named in `back` (name → why: its outcome becomes
    /// [`InstallError::Refused`] with that reason), commits the others and runs their deploy
    /// hooks; `outcomes` as [`InstallBatch::finish_held`] returned them.
    pub(crate) async fn settle(
        self,
        back: &HashMap<String, String>,
        mut outcomes: Vec<CertOutcome>,
    ) -> Vec<CertOutcome> {
        let Held { certs, groups } = self;
        for (commands, members) in groups {
            let (undo, keep): (Vec<Pending>, Vec<Pending>) = members
                .into_iter()
                .partition(|p| back.contains_key(&certs[p.idx].name));
            if !undo.is_empty() {
                let undo = undo
                    .into_iter()
                    .map(|p| {
                        let reason = back.get(&certs[p.idx].name).cloned().unwrap_or_default();
                        tracing::warn!(certificate = %certs[p.idx].name, "rolling back: {reason}");
                        outcomes[p.idx].installed_serial = None;
                        (p, InstallError::Refused { reason })
                    })
                    .collect();
                restore(&commands, undo, &mut outcomes).await;
            }
            let committed = commit(keep, &certs);
            if !committed.is_empty() {
                crate::failpoint::hit("committed");
            }
            for p in committed {
                let cert = &certs[p.idx];
                if let Some(hook) = &cert.deploy_hook
                    && let Err(e) = run_deploy_hook(cert, hook, &commands).await
                {
                    outcomes[p.idx].result = Err(InstallError::DeployHook { cause: Box::new(e) });
                }
            }
        }
        outcomes
    }
}

/// After the staged files are durable: steps 2 to 5 of [`install_all`].
async fn switch_and_reload(
    certs: Vec<CertInstall>,
    staged: Vec<Pending>,
    files: usize,
    mut outcomes: Vec<CertOutcome>,
) -> (Vec<CertOutcome>, Held) {
    crate::failpoint::hit("files-staged");
    // Each transaction switches files of its own (no path is in two of them), on a few
    // threads at once; the renames of all of them are made durable together before any
    // counts as switched (before the config test and the reload).
    let switching = SyncGroup::for_files(files);
    let applied = crate::parallel::map(staged, |mut p| {
        let result = p.tx.apply_in(&switching);
        (p, result)
    });
    let switched = switching.sync();
    let mut groups: Vec<(&ServerCommands, Vec<Pending>)> = Vec::new();
    for (mut p, applied) in applied {
        if let Err(e) = applied {
            outcomes[p.idx].result = Err(e);
            continue;
        }
        if let Err((dir, e)) = &switched {
            let e = io::Error::new(e.kind(), e.to_string());
            outcomes[p.idx].result = Err(p.tx.undo_unsynced(dir.clone(), e));
            continue;
        }
        let commands = &certs[p.idx].commands;
        match groups.iter_mut().find(|(c, _)| *c == commands) {
            Some((_, members)) => members.push(p),
            None => groups.push((commands, vec![p])),
        }
    }

    crate::failpoint::hit("files-swapped");
    let mut held = Vec::with_capacity(groups.len());
    for (commands, members) in groups {
        let good = run_server(commands, members, &certs, &mut outcomes).await;
        for p in &good {
            outcomes[p.idx].installed_serial = Some(p.serial.to_string().to_ascii_lowercase());
        }
        if !good.is_empty() {
            held.push((commands.clone(), good));
        }
    }
    (
        outcomes,
        Held {
            certs,
            groups: held,
        },
    )
}

/// Stages every certificate's files (each written beside its target, durable once the
/// batch's group syncs). Those whose paths no other certificate of the batch names (nor the
/// certificate itself twice, nor one staged before: `paths`) are staged on a few threads at
/// once; the others one after the other, in order, the first one staged keeping a path and
/// the later ones refused for it. The staged ones in input order, numbered from `base`;
/// `paths` gains their paths.
fn stage_all(
    certs: &[CertInstall],
    base: usize,
    outcomes: &mut [CertOutcome],
    (group, checked): (&SyncGroup, &Arc<CheckedDirs>),
    paths: &mut HashSet<PathBuf>,
) -> Vec<Pending> {
    let mut named: HashMap<&Path, usize> = HashMap::new();
    for cert in certs {
        for p in cert.paths.all() {
            *named.entry(p).or_default() += 1;
        }
    }
    let (alone, contested): (Vec<usize>, Vec<usize>) = (0..certs.len()).partition(|&idx| {
        certs[idx]
            .paths
            .all()
            .all(|p| named.get(p).copied().unwrap_or(0) <= 1 && !paths.contains(p))
    });
    let batch = (group, checked);
    let mut results = crate::parallel::map(alone, |idx| {
        (idx, stage(&certs[idx], &mut HashSet::new(), batch))
    });
    for (idx, result) in &results {
        if result.is_ok() {
            paths.extend(certs[*idx].paths.all().map(PathBuf::from));
        }
    }
    for idx in contested {
        results.push((idx, stage(&certs[idx], paths, batch)));
    }
    results.sort_by_key(|(idx, _)| *idx);
    let mut staged = Vec::with_capacity(results.len());
    for (idx, result) in results {
        match result {
            Ok((tx, serial)) => staged.push(Pending {
                idx: base + idx,
                tx,
                serial,
            }),
            Err(e) => outcomes[idx].result = Err(e),
        }
    }
    staged
}

fn stage(
    cert: &CertInstall,
    seen: &mut HashSet<PathBuf>,
    (group, checked): (&SyncGroup, &Arc<CheckedDirs>),
) -> Result<(InstallTx, Serial), InstallError> {
    let serial =
        serial_of_pem(&cert.material.leaf_pem).map_err(|reason| InstallError::BadCertificate {
            name: cert.name.clone(),
            reason,
        })?;
    let paths: Vec<PathBuf> = cert.paths.all().map(PathBuf::from).collect();
    for (i, p) in paths.iter().enumerate() {
        if seen.contains(p) || paths[..i].contains(p) {
            return Err(InstallError::DuplicatePath { path: p.clone() });
        }
    }
    let mut tx = InstallTx::in_batch(checked.clone());
    tx.stage_certificate_in(&cert.paths, &cert.material, &cert.ownership, group)?;
    seen.extend(paths);
    Ok((tx, serial))
}

/// Config test, reload and verification for the certificates of one server; returns the
/// verified ones (not committed: [`Held`]) and records failures in `outcomes`.
async fn run_server(
    commands: &ServerCommands,
    members: Vec<Pending>,
    certs: &[CertInstall],
    outcomes: &mut [CertOutcome],
) -> Vec<Pending> {
    let names = || {
        members
            .iter()
            .map(|p| certs[p.idx].name.as_str())
            .collect::<Vec<_>>()
            .join(", ")
    };
    if let Err(e) = commands.config_test().await {
        tracing::warn!(certificates = %names(), "config test failed, restoring: {e}");
        for p in members {
            let restore = p.tx.rollback().err();
            outcomes[p.idx].result = Err(failure(
                InstallError::ConfigTest {
                    cause: Box::new(e.clone()),
                },
                restore,
            ));
        }
        return Vec::new();
    }
    crate::failpoint::hit("config-tested");

    if let Err(e) = commands.reload().await {
        tracing::warn!(certificates = %names(), "reload failed, restoring: {e}");
        let mut restore = None;
        let mut failed = Vec::new();
        for p in members {
            if let Err(r) = p.tx.rollback() {
                restore.get_or_insert(r);
            }
            failed.push(p.idx);
        }
        // A reload that ran may have been half applied: make the server load the restored
        // files. One that never started (missing program) changed nothing.
        let ran = matches!(
            e,
            InstallError::CommandFailed { .. } | InstallError::CommandTimeout { .. }
        );
        if restore.is_none() && ran {
            restore = commands.reload().await.err();
        }
        for idx in failed {
            outcomes[idx].result = Err(failure(
                InstallError::Reload {
                    cause: Box::new(e.clone()),
                },
                restore.clone(),
            ));
        }
        return Vec::new();
    }

    let mut good = Vec::new();
    let mut bad = Vec::new();
    for p in members {
        match &certs[p.idx].verify {
            Some(target) => match verify_served(target, &p.serial).await {
                Ok(()) => {
                    tracing::info!(
                        certificate = %certs[p.idx].name,
                        address = %target.address,
                        "the new certificate is served"
                    );
                    good.push(p)
                }
                Err(e) => {
                    tracing::warn!(certificate = %certs[p.idx].name, "verification failed, restoring: {e}");
                    bad.push((p, e))
                }
            },
            None => good.push(p),
        }
    }
    if !bad.is_empty() {
        let bad = bad
            .into_iter()
            .map(|(p, e)| (p, InstallError::Verify { cause: Box::new(e) }))
            .collect();
        restore(commands, bad, outcomes).await;
    }
    crate::failpoint::hit("reloaded");
    good
}

/// Rolls back the certificates of one server in `bad`, each with the error that fails it:
/// their previous files renamed back, then the server's config test and reload run again so
/// that it serves them. A failure to restore is added to each error.
async fn restore(
    commands: &ServerCommands,
    bad: Vec<(Pending, InstallError)>,
    outcomes: &mut [CertOutcome],
) {
    let mut restore = None;
    let mut failed = Vec::new();
    for (p, e) in bad {
        if let Err(r) = p.tx.rollback() {
            restore.get_or_insert(r);
        }
        failed.push((p.idx, e));
    }
    let reloaded = async {
        commands.config_test().await?;
        commands.reload().await
    }
    .await;
    let restore = restore.or(reloaded.err());
    for (idx, e) in failed {
        outcomes[idx].result = Err(failure(e, restore.clone()));
    }
}

/// Commits the verified certificates of one server: their kept previous versions removed.
fn commit(mut good: Vec<Pending>, certs: &[CertInstall]) -> Vec<Pending> {
    let mut committed = Vec::new();
    // Each on its own files: committed on a few threads at once, the removals of the kept
    // previous versions synced once (nothing depends on them).
    let files = good.iter().map(|p| certs[p.idx].paths.all().count()).sum();
    let txs: Vec<InstallTx> = good.iter_mut().map(|p| std::mem::take(&mut p.tx)).collect();
    let cleaning = SyncGroup::for_files(files);
    let results = crate::parallel::map(txs, |tx| tx.commit_in(&cleaning));
    let _ = cleaning.sync();
    for (p, result) in good.into_iter().zip(results) {
        if let Err(e) = result {
            // The new files are live; only a kept previous version is left behind.
            tracing::warn!(certificate = %certs[p.idx].name, "{e}");
        }
        tracing::info!(
            certificate = %certs[p.idx].name,
            serial = %p.serial,
            "installed"
        );
        committed.push(p);
    }
    committed
}

fn failure(err: InstallError, restore: Option<InstallError>) -> InstallError {
    match restore {
        None => err,
        Some(restore) => InstallError::RestoreFailed {
            first: Box::new(err),
            restore: Box::new(restore),
        },
    }
}

async fn run_deploy_hook(
    cert: &CertInstall,
    hook: &[String],
    commands: &ServerCommands,
) -> Result<(), InstallError> {
    let path = |p: Option<&Path>| p.map(OsString::from).unwrap_or_default();
    let env = [
        ("CERT_AGENT_NAME", OsString::from(&cert.name)),
        ("CERT_AGENT_DOMAINS", OsString::from(cert.domains.join(" "))),
        ("CERT_AGENT_CERT_PATH", path(cert.paths.cert.as_deref())),
        ("CERT_AGENT_KEY_PATH", path(cert.paths.key.as_deref())),
        ("CERT_AGENT_CHAIN_PATH", path(cert.paths.chain.as_deref())),
        (
            "CERT_AGENT_FULLCHAIN_PATH",
            path(cert.paths.fullchain.as_deref()),
        ),
        (
            "CERT_AGENT_COMBINED_PATH",
            path(cert.paths.combined.as_deref()),
        ),
    ];
    run_command("deploy hook", hook, &env, commands.timeout).await
}
