//! What the leader reads once it leads: the shared records as they are now, from the run's
//! snapshot (read before the lead was taken) and what was written under `certs/` since — one
//! small request when nothing changed, instead of reading every certificate's values again.

use std::collections::{BTreeMap, BTreeSet};

use anyhow::Result;

use crate::fleet::coord::Snapshot;
use crate::fleet::link::FleetLink;

/// What the leader keeps of the run's snapshot: the shared records (`certs/<name>/state`),
/// every key under `certs/`, and the revision it was read at.
pub(super) struct Kept {
    revision: i64,
    keys: BTreeSet<String>,
    states: BTreeMap<String, Vec<u8>>,
    /// The shared records the snapshot left out (this host accepted them at that revision):
    /// read at the snapshot's revision once this host leads.
    unread: Vec<String>,
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
                .cloned()
                .collect(),
            states: snap
                .certs
                .iter()
                .filter(|(k, _)| is_state(k))
                .map(|(k, v)| (k.clone(), v.clone()))
                .collect(),
            unread: snap
                .unread
                .keys()
                .filter(|k| is_state(k))
                .cloned()
                .collect(),
        }
    }

    /// The shared records as etcd holds them now (read after the lead was taken): the kept
    /// ones with every value written since put in, when no key under `certs/` was deleted
    /// since; otherwise (or when that read fails) `certs/` read again whole.
    pub(super) async fn now(mut self, link: &FleetLink) -> Result<BTreeMap<String, Vec<u8>>> {
        let filled = match link.fleet.values_at(&self.unread, self.revision).await {
            Ok(values) if values.len() == self.unread.len() => {
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
                        "fleet: {} value(s) under certs/ written since the run's read",
                        since.written.len()
                    );
                    let mut states = self.states;
                    states.extend(since.written.into_iter().filter(|(k, _)| is_state(k)));
                    return Ok(states);
                }
                tracing::debug!("fleet: keys under certs/ were removed since the run's read");
            }
            Ok(_) => {}
            Err(e) => tracing::debug!("fleet: {e}; certs/ read again"),
        }
        Ok(link
            .fleet
            .list("certs/")
            .await?
            .into_iter()
            .filter(|(k, _)| is_state(k))
            .collect())
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
        assert_eq!(
            kept.states.keys().collect::<Vec<_>>(),
            vec!["certs/www/state"]
        );
    }
}
