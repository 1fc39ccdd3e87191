//! The leader's imports: each certificate's shared record, opened and checked, replaces what
//! this host's state directory holds of it before the engine runs ([`import`]), for every
//! certificate of a round at once ([`import_round`]). What is this host's own (its installs,
//! its failures, its published validation files) stays.

use std::collections::{BTreeMap, BTreeSet};

use anyhow::{Result, anyhow, bail};

use crate::config::CertificateConfig;
use crate::crypto::{self, PrivateKey};
use crate::engine::{Outcome, RunReport};
use crate::store::{CertRecord, Records, Store};

use super::bookkeeping::note_host_failure;
use super::outcomes::set_outcome;
use super::records_now::{self, Kept, Now};
use super::{Imports, repair};
use crate::fleet::link::FleetLink;
use crate::fleet::open_shared::{check_keeps, open_state};
use crate::fleet::schema::{shared_view, state_key};
use crate::fleet::versions::Versions;

/// What a round's synchronisation leaves for the imports of the lead that follows it: read
/// once, not again.
pub(super) struct ForImports {
    /// The shared records as the run's snapshot read them (before the lead was taken).
    pub(super) kept: Kept,
    /// The versions this host accepted, as the synchronisation wrote them.
    pub(super) versions: Versions,
    /// Each record as the synchronisation left it in the state directory.
    pub(super) records: Records,
}

/// What the imports of a round leave for the rest of the run.
pub(super) struct Imported<'c> {
    /// The certificates the engine works on.
    pub(super) eligible: Vec<&'c CertificateConfig>,
    /// Each one's record as the fleet holds it.
    pub(super) imported: BTreeMap<String, Option<CertRecord>>,
    /// The versions accepted (saved).
    pub(super) versions: Versions,
    /// Each one's record as this host's state directory holds it after the imports (read or
    /// written by them; a certificate whose record could not be read is not here): handed
    /// to the engine, and to the export for what the engine neither read nor wrote, instead
    /// of read again.
    pub(super) records: Records,
    /// The certificates whose refused shared record this host writes back ([`repair`]).
    pub(super) repaired: BTreeSet<String>,
}

/// Before the leader's engine runs: the shared record of `cert`, opened and checked (its
/// version, its name, its pending CSR against its pending key; it keeps every order and
/// intent this host knows), replaces what this host's state directory holds of it (the
/// installed files and published validation files stay this host's); a pending key that is
/// not here yet is written to the key directory. Returns the record as the fleet holds it
/// (`None`: the fleet has none yet). `now`: the shared records as etcd holds them once this
/// host leads ([`Kept::now`]); `local`: this host's record when the caller read it already
/// (otherwise it is read here). The record and its journal line are written with the run's
/// other imports, by [`Imports::write`], before anything reads them.
pub(in crate::fleet) async fn import(
    link: &FleetLink,
    store: &Store,
    versions: &mut Versions,
    cert: &CertificateConfig,
    now: &Now,
    local: Option<CertRecord>,
    imports: &mut Imports,
) -> Result<Option<CertRecord>> {
    let rel = state_key(&cert.name);
    let Some(bytes) = now.states.get(&rel) else {
        return not_read(link, store, versions, cert, now, local);
    };
    let opened =
        open_state(link, versions, cert, bytes).map_err(|e| anyhow!(repair::Refused(e)))?;
    let local = match local {
        Some(local) => local,
        None => store.load(&cert.name)?,
    };
    // Once this host's record is what the fleet's says, the import of this revision is done.
    let done = Done {
        version: opened.version,
        digest: repair::view_digest(&opened.shared.record),
        revision: now.revisions.get(&rel).copied(),
    };
    check_keeps(&link.fleet.key(&rel), &local, &opened.shared.record)?;
    let shared = opened.shared;
    let mut next = shared.record.clone();
    withdraw_unplaced_intent(link, store, &cert.name, &mut next).await?;
    if shared_view(&local) == next {
        let attempt = Some(shared.attempt());
        let mut local = local;
        let noted = local.fleet != attempt;
        local.fleet = attempt;
        done.note(versions, &cert.name, &local, &shared.record);
        if noted {
            imports.save(local);
        }
        return Ok(Some(shared.record));
    }
    next.fleet = Some(shared.attempt());
    keep_own(store, &cert.name, &local, &mut next);
    let key = opened.pending_key.as_ref();
    let record_key = link.fleet.key(&rel);
    place_pending_key(store, &cert.name, &record_key, &local, key, &mut next)?;
    // A pending key of this host's that the fleet's record no longer holds (its order or
    // reissue closed by another leader): nothing refers to it once the import is written.
    if let Some(lp) = &local.pending_key
        && next
            .pending_key
            .as_ref()
            .is_none_or(|n| n.key_file != lp.key_file)
    {
        imports.drop_key(&cert.name, lp.key_file.clone());
    }
    done.note(versions, &cert.name, &next, &shared.record);
    imports.import(
        next,
        serde_json::json!({ "written_by": shared.written_by, "version": opened.version }),
    );
    Ok(Some(shared.record))
}

/// The import of a shared record the leader did not read: at the revision this host imported
/// it, its record as that import left it; with none in etcd, a first order, unless the fleet
/// vouches for a record this host does not know.
fn not_read(
    link: &FleetLink,
    store: &Store,
    versions: &Versions,
    cert: &CertificateConfig,
    now: &Now,
    local: Option<CertRecord>,
) -> Result<Option<CertRecord>> {
    let rel = state_key(&cert.name);
    if now.unchanged.contains(&rel) {
        return Ok(local.map(|local| shared_view(&local)));
    }
    let local = match local {
        Some(local) => local,
        None => store.load(&cert.name)?,
    };
    crate::fleet::manifest::check_missing_state(
        &link.fleet.key(&rel),
        versions,
        &cert.name,
        &local,
    )?;
    Ok(None)
}

/// The shared record's version, its digest and its etcd revision: noted as imported once
/// this host's record is what the fleet's says.
struct Done {
    version: u64,
    digest: String,
    revision: Option<i64>,
}

impl Done {
    /// Notes in `versions` that `saved`, this host's record of `name`, holds `fleet`.
    fn note(&self, versions: &mut Versions, name: &str, saved: &CertRecord, fleet: &CertRecord) {
        if shared_view(saved) != *fleet {
            return;
        }
        versions.hold_state(name, self.version, self.digest.clone());
        if let Some(rev) = self.revision {
            versions.imported(name, rev, &records_now::record_digest(saved));
        }
    }
}

/// An order intent of `next` whose order a host noted as never placed
/// ([`crate::fleet::unplaced_intent`]): withdrawn, so that the certificate is ordered normally.
async fn withdraw_unplaced_intent(
    link: &FleetLink,
    store: &Store,
    name: &str,
    next: &mut CertRecord,
) -> Result<()> {
    let Some(intent) = next.partner.intent() else {
        return Ok(());
    };
    let Some(host) = crate::fleet::unplaced_intent::noted_by(link, name, intent).await? else {
        return Ok(());
    };
    tracing::info!(
        certificate = %name,
        "{host} noted that the fleet's order intent was never placed: withdrawn, the \
         certificate is ordered normally"
    );
    store.journal(
        name,
        "fleet-intent-withdrawn",
        serde_json::json!({ "noted_by": host, "csr_sha256": intent.csr_sha256 }),
    )?;
    next.partner.withdraw_intent();
    Ok(())
}

/// What of `local` is this host's own, kept in the imported record `next`: its failures,
/// its rollout's state, its installed certificate, its published validation files, its
/// revocation check. A certificate this host holds until it is valid stays held while the
/// fleet still waits for the same pending key (the archive is this host's); otherwise it is
/// discarded.
fn keep_own(store: &Store, name: &str, local: &CertRecord, next: &mut CertRecord) {
    next.host_failures = local.host_failures;
    next.host_error.clone_from(&local.host_error);
    next.rollout_halted.clone_from(&local.rollout_halted);
    next.rolled_back.clone_from(&local.rolled_back);
    next.rollout_overridden
        .clone_from(&local.rollout_overridden);
    next.installed.clone_from(&local.installed);
    next.dcv = local.dcv.clone();
    next.revocation.clone_from(&local.revocation);
    let same_pending = matches!(
        (&local.pending_key, &next.pending_key),
        (Some(l), Some(n)) if l.csr_sha256 == n.csr_sha256
    );
    if same_pending {
        next.held.clone_from(&local.held);
    } else if local.held.is_some() {
        store.discard_held(name);
    }
}

/// The key file of `next`'s pending key: this host's own when it holds the same pending CSR's
/// key, otherwise the fleet's (`key`, opened and checked) written to the key directory.
/// `name`: the certificate's; `record_key`: where the fleet holds its record, for the error.
fn place_pending_key(
    store: &Store,
    name: &str,
    record_key: &str,
    local: &CertRecord,
    key: Option<&PrivateKey>,
    next: &mut CertRecord,
) -> Result<()> {
    let Some(sp) = &mut next.pending_key else {
        return Ok(());
    };
    match (&local.pending_key, key) {
        (Some(lp), _) if lp.csr_sha256 == sp.csr_sha256 && lp.key_file.is_file() => {
            sp.key_file.clone_from(&lp.key_file);
        }
        (_, Some(key)) => {
            let dir = store.key_dir(name)?;
            let file = dir.join(format!(
                "{}-{}.key",
                sp.created_at.unix_timestamp(),
                sp.csr_sha256.get(..16).unwrap_or("fleet")
            ));
            crypto::write_key_file(&file, key, None)?;
            sp.key_file = file;
        }
        (_, None) => bail!("the fleet's record {record_key} has a pending CSR but not its key"),
    }
    Ok(())
}

/// The imports of a round this host leads: every certificate of `certs` but those `skip`
/// names, imported from the shared records as etcd holds them now (another leader may have
/// written since the synchronisation's read: what was written since, read in one request),
/// their records and journal lines written together. `from_sync`: this host's versions and
/// records as the round's synchronisation left them (not read again).
pub(super) async fn import_round<'c>(
    link: &FleetLink,
    store: &Store,
    from_sync: ForImports,
    certs: &[&'c CertificateConfig],
    skip: &dyn Fn(&str) -> bool,
    report: &mut RunReport,
) -> Result<Imported<'c>> {
    let ForImports {
        kept,
        mut versions,
        records: known,
    } = from_sync;
    let mut eligible: Vec<&CertificateConfig> = Vec::new();
    let mut imported = BTreeMap::new();
    let mut records = BTreeMap::new();
    let (unchanged, mut locals) =
        records_now::unchanged_imports(store, &versions, &kept, certs, known);
    let mut imports = Imports::default();
    let mut repaired = BTreeSet::new();
    let docs = kept.now(link, unchanged).await?;
    for cert in certs.iter().filter(|c| !skip(&c.name)) {
        let local = locals.remove(&cert.name);
        // As read: what the import writes replaces it below.
        if let Some(local) = &local {
            records.insert(cert.name.clone(), local.clone());
        }
        match import(link, store, &mut versions, cert, &docs, local, &mut imports).await {
            Ok(view) => {
                imported.insert(cert.name.clone(), view);
                eligible.push(*cert);
            }
            Err(e)
                if repair::state(
                    link,
                    store,
                    &versions,
                    records.get(&cert.name),
                    &cert.name,
                    &e,
                )
                .await =>
            {
                // The fleet holds none this host accepts: the export shares this host's.
                imported.insert(cert.name.clone(), None);
                eligible.push(*cert);
                repaired.insert(cert.name.clone());
            }
            Err(e) => {
                records.remove(&cert.name);
                let error = format!("{e:#}");
                note_host_failure(store, &cert.name, &error);
                set_outcome(report, &cert.name, Outcome::Failed { error });
            }
        }
    }
    let failed = imports.write_for_run(store, &mut eligible, &mut imported, &mut records);
    for (name, error) in failed {
        set_outcome(report, &name, Outcome::Failed { error });
    }
    versions.save()?;
    store.debug_check_held(&records, "after the imports");
    Ok(Imported {
        eligible,
        imported,
        versions,
        records,
        repaired,
    })
}
