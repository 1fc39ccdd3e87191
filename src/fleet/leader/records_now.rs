//! What the leader reads once it leads: the shared records as they are now, from the run's
//! snapshot (read before the lead was taken) and what was written under `certs/` since — one
//! small request when nothing changed, instead of reading every certificate's values again.

use std::collections::{BTreeMap, BTreeSet};

use anyhow::Result;

use crate::config::CertificateConfig;
use crate::fleet::coord::Snapshot;
use crate::fleet::link::FleetLink;
use crate::fleet::schema::{shared_view, state_key};
use crate::fleet::versions::Versions;
use crate::store::{CertRecord, Records, Store};

/// What the leader keeps of the run's snapshot: the shared records (`certs/<name>/state`),
/// every key under `certs/`, and the revision it was read at.
pub(super) struct Kept {
    revision: i64,
    keys: BTreeSet<String>,
    states: BTreeMap<String, Vec<u8>>,
    /// The modification revision of each shared record.
    revisions: BTreeMap<String, i64>,
    /// The shared records the snapshot left out (this host accepted them at that revision):
    /// read at the snapshot's revision once this host leads, unless importing them would
    /// change nothing.
    unread: Vec<String>,
}

/// The shared records as etcd holds them once this host leads.
#[derive(Debug, Default)]
pub(in crate::fleet) struct Now {
    /// The values read.
    pub(super) states: BTreeMap<String, Vec<u8>>,
    /// The modification revision of each value read at the snapshot's revision.
    pub(super) revisions: BTreeMap<String, i64>,
    /// The shared records not read, still at the revision this host imported them at.
    pub(super) unchanged: BTreeSet<String>,
}

/// The digest of what an import decides from in `rec`: what the fleet shares of it, and the
/// fleet's last attempt.
pub(super) fn record_digest(rec: &CertRecord) -> String {
    let text = serde_json::to_vec(&(shared_view(rec), &rec.fleet)).unwrap_or_default();
    crate::fleet::versions::digest(&text)
}

/// The shared records whose import would change nothing (keys), and this host's records of
/// `certs` (each read once, for the import, unless `known` holds it as the state directory
/// does): a record the snapshot left out, at the revision this host imported, with this
/// host's record as that import left it and no order intent waiting for its order (whose
/// import asks whether a host noted it unplaced).
pub(super) fn unchanged_imports(
    store: &Store,
    versions: &Versions,
    kept: &Kept,
    certs: &[&CertificateConfig],
    mut known: Records,
) -> (BTreeSet<String>, Records) {
    let mut unchanged = BTreeSet::new();
    let mut locals = Records::new();
    for cert in certs {
        let Ok(local) = store.take_or_load(&mut known, &cert.name) else {
            continue;
        };
        let rel = state_key(&cert.name);
        let waiting = local.partner.intent().is_some();
        if let Some(rev) = kept.unread_at(&rel)
            && !waiting
            && versions.import_changes_nothing(&cert.name, rev, &record_digest(&local))
        {
            unchanged.insert(rel);
        }
        locals.insert(cert.name.clone(), local);
    }
    (unchanged, locals)
}

impl Now {
    /// Every value of `states` read (none left out).
    pub(in crate::fleet) fn read(states: BTreeMap<String, Vec<u8>>) -> Self {
        Self {
            states,
            ..Self::default()
        }
    }
}

fn is_state(key: &str) -> bool {
    key.starts_with("certs/") && key.ends_with("/state")
}

impl Kept {
    /// What `snap` holds of the shared records (copied before the synchronisation takes it).
    pub(super) fn of(snap: &Snapshot) -> Self {
        Self {
            revision: snap.revision,
            keys: snap
                .certs
                .keys()
                .chain(snap.unread.keys())
                .chain(snap.deferred.keys())
                .cloned()
                .collect(),
            states: snap
                .certs
                .iter()
                .filter(|(k, _)| is_state(k))
                .map(|(k, v)| (k.clone(), v.clone()))
                .collect(),
            revisions: snap
                .revisions
                .iter()
                .filter(|(k, _)| is_state(k))
                .map(|(k, r)| (k.clone(), *r))
                .collect(),
            unread: snap
                .unread
                .keys()
                .filter(|k| is_state(k))
                .cloned()
                .collect(),
        }
    }

    /// The revision of the shared record at `rel` when the snapshot left it out.
    pub(super) fn unread_at(&self, rel: &str) -> Option<i64> {
        self.unread
            .binary_search_by(|k| k.as_str().cmp(rel))
            .ok()
            .and_then(|_| self.revisions.get(rel).copied())
    }

    /// The shared record at `rel` as the snapshot read it.
    pub(super) fn state(&self, rel: &str) -> Option<&[u8]> {
        self.states.get(rel).map(Vec::as_slice)
    }

    /// The shared records at `keys` that the snapshot left out, read at its revision (one
    /// that is gone since is not there).
    pub(super) async fn read_unread(
        &self,
        link: &FleetLink,
        keys: &[String],
    ) -> Result<BTreeMap<String, Vec<u8>>> {
        let values = link.fleet.values_at(keys, self.revision).await?;
        Ok(values.into_iter().map(|(k, (v, _))| (k, v)).collect())
    }

    /// The shared records as etcd holds them now (read after the lead was taken): the kept
    /// ones, those the snapshot left out read at its revision (but `unchanged`: records whose
    /// import would change nothing, not read), and every value written since put in, when no
    /// key under `certs/` was deleted since; otherwise (or when that read fails) `certs/` read
    /// again whole.
    pub(super) async fn now(
        mut self,
        link: &FleetLink,
        unchanged: BTreeSet<String>,
    ) -> Result<Now> {
        let wanted: Vec<String> = self
            .unread
            .iter()
            .filter(|k| !unchanged.contains(*k))
            .cloned()
            .collect();
        let filled = match link.fleet.values_at(&wanted, self.revision).await {
            Ok(values) if values.len() == wanted.len() => {
                self.states
                    .extend(values.into_iter().map(|(k, (v, _))| (k, v)));
                true
            }
            Ok(_) => {
                tracing::debug!("fleet: a shared record left out of the run's read is gone");
                false
            }
            Err(e) => {
                tracing::debug!("fleet: {e}; certs/ read again");
                false
            }
        };
        match link.fleet.written_since("certs/", self.revision).await {
            Ok(since) if filled => {
                let added = since
                    .written
                    .iter()
                    .filter(|(k, _)| !self.keys.contains(k))
                    .count();
                let expected = self.keys.len().saturating_add(added);
                if i64::try_from(expected).is_ok_and(|n| n == since.count) {
                    tracing::debug!(
                        "fleet: {} value(s) under certs/ written since the run's read, {} \
                         shared record(s) as this host imported them (not read)",
                        since.written.len(),
                        unchanged.len()
                    );
                    let mut now = Now {
                        states: self.states,
                        revisions: self.revisions,
                        unchanged,
                    };
                    for (k, v) in since.written.into_iter().filter(|(k, _)| is_state(k)) {
                        now.revisions.remove(&k);
                        now.unchanged.remove(&k);
                        now.states.insert(k, v);
                    }
                    return Ok(now);
                }
                tracing::debug!("fleet: keys under certs/ were removed since the run's read");
            }
            Ok(_) => {}
            Err(e) => tracing::debug!("fleet: {e}; certs/ read again"),
        }
        Ok(Now {
            states: link
                .fleet
                .list("certs/")
                .await?
                .into_iter()
                .filter(|(k, _)| is_state(k))
                .collect(),
            ..Now::default()
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_shared_records_are_kept() {
        let mut snap = Snapshot {
            revision: 7,
            ..Snapshot::default()
        };
        for (k, v) in [
            ("certs/www/state", "s"),
            ("certs/www/current", "c"),
            ("certs/www/spec", "p"),
            ("certs/state/retired", "r"),
        ] {
            snap.certs.insert(k.into(), v.into());
        }
        snap.unread.insert("certs/shop/state".into(), 5);
        snap.unread.insert("certs/shop/current".into(), 6);
        let kept = Kept::of(&snap);
        assert_eq!(kept.revision, 7);
        assert_eq!(kept.keys.len(), 6);
        assert_eq!(kept.unread, vec!["certs/shop/state".to_owned()]);
        snap.revisions.insert("certs/shop/state".into(), 5);
        snap.revisions.insert("certs/www/state".into(), 4);
        let kept = Kept::of(&snap);
        assert_eq!(kept.unread_at("certs/shop/state"), Some(5));
        assert_eq!(kept.unread_at("certs/www/state"), None, "read");
        assert_eq!(kept.unread_at("certs/none/state"), None);
        assert_eq!(
            kept.states.keys().collect::<Vec<_>>(),
            vec!["certs/www/state"]
        );
    }
}
