//! Proving again what failed: the certificates whose last proof by this host failed are kept
//! in `state_dir/proofs-failed.json`, so that a synchronisation reads their proofs only, not
//! every proof this host wrote (10,000 values at 10,000 certificates). The file is a hint:
//! missing, unreadable or older than [`RELIST_AFTER`], this host's proofs are all listed
//! again and the file written from what they say.

use std::collections::{BTreeSet, HashSet};

use serde::{Deserialize, Serialize};

use super::{Proof, open, prove_installed};
use crate::crypto::same_serial_hex;
use crate::fleet::link::FleetLink;
use crate::fleet::schema::proof_key;
use crate::store::Store;

/// The file of the certificates whose last proof by this host failed.
const FILE: &str = "proofs-failed.json";

/// How long the file stands in for a listing of this host's proofs.
const RELIST_AFTER: i64 = 3600;

/// The largest file read.
const MAX_FILE: u64 = 16 * 1024 * 1024;

/// The certificates whose last proof by this host failed, and when this host's proofs were
/// last listed whole (Unix seconds; 0: never).
#[derive(Debug, Default, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct Failed {
    pub listed_at: i64,
    pub names: BTreeSet<String>,
}

impl Failed {
    /// The file in `store`; `None` when it is missing or unreadable.
    pub(crate) fn load(store: &Store) -> Option<Self> {
        let bytes = crate::fsutil::read_secret(&store.dir().join(FILE), MAX_FILE, false).ok()?;
        Self::parse(&bytes)
    }

    /// `bytes` as the file: accepted only whole, each name one a certificate can have.
    pub(crate) fn parse(bytes: &[u8]) -> Option<Self> {
        let failed: Self = serde_json::from_slice(bytes).ok()?;
        failed
            .names
            .iter()
            .all(|n| crate::store::check_name(n).is_ok())
            .then_some(failed)
    }

    /// Whether the file stands in for a listing at `now` (Unix seconds): listed less than
    /// [`RELIST_AFTER`] before, and not after `now`.
    pub(crate) fn fresh_at(&self, now: i64) -> bool {
        (0..RELIST_AFTER).contains(&now.saturating_sub(self.listed_at))
    }

    /// Writes the file (a state directory this host cannot write only loses the hint).
    fn save(&self, store: &Store) {
        if !store.dir().is_dir() {
            return;
        }
        let written = serde_json::to_vec(self)
            .map_err(|e| e.to_string())
            .and_then(|bytes| {
                crate::fsutil::write_atomic(&store.dir().join(FILE), &bytes, 0o600)
                    .map_err(|e| crate::fsutil::io_text(&e))
            });
        if let Err(e) = written {
            tracing::debug!("could not keep which proofs failed: {e}");
        }
    }

    /// Notes `proofs` (certificate name, proof) as this host's last: a failed one is added,
    /// one that passed taken out.
    pub(crate) fn note(&mut self, proofs: &[(String, Proof)]) {
        for (name, proof) in proofs {
            if proof.failure().is_some() {
                self.names.insert(name.clone());
            } else {
                self.names.remove(name);
            }
        }
    }
}

/// Notes `proofs` just published in the file of `store` (see [`Failed::note`]).
pub(super) fn note_published(store: &Store, proofs: &[(String, Proof)]) {
    let mut failed = Failed::load(store).unwrap_or_default();
    let before = failed.clone();
    failed.note(proofs);
    if failed != before || !store.dir().join(FILE).exists() {
        failed.save(store);
    }
}

/// Proves again each configured certificate whose last proof by this host failed while this
/// host still serves the serial it was about (a vhost fixed since, a health check that
/// recovered): at each synchronisation until it passes, so that a rollout it halted goes on.
/// `just`: the certificates proved by this synchronisation already.
pub(crate) async fn prove_again(
    link: &FleetLink,
    config: &crate::config::Config,
    records: &crate::store::Records,
    just: &[(String, String, u64)],
) {
    let store = Store::existing(&config.agent.state_dir);
    let now = link.clock.now().unix_timestamp();
    let loaded = Failed::load(&store);
    let Some(proofs) = (match loaded.as_ref().filter(|f| f.fresh_at(now)) {
        Some(kept) => read_failed(link, kept).await,
        None => list_all(link, now).await,
    }) else {
        return;
    };
    let failed = Failed {
        listed_at: proofs.0,
        names: proofs
            .1
            .iter()
            .filter(|(_, p)| p.failure().is_some())
            .map(|(n, _)| n.clone())
            .collect(),
    };
    if loaded.as_ref() != Some(&failed) {
        failed.save(&store);
    }
    let just: HashSet<&str> = just.iter().map(|(n, _, _)| n.as_str()).collect();
    let mut again = Vec::new();
    for (name, p) in proofs.1 {
        let serves = records
            .get(&name)
            .and_then(|r| r.installed.as_ref())
            .is_some_and(|i| same_serial_hex(&i.serial, &p.serial));
        if p.failure().is_some() && serves && !just.contains(name.as_str()) {
            again.push((name, p.serial.clone(), p.version));
        }
    }
    prove_installed(link, config, &again).await;
}

/// The proofs of `kept`'s certificates as this host wrote them (one read each; a proof gone
/// or that does not open is left out), with when the proofs were last listed whole.
async fn read_failed(link: &FleetLink, kept: &Failed) -> Option<(i64, Vec<(String, Proof)>)> {
    let host = link.fleet.host();
    let mut out = Vec::new();
    for name in &kept.names {
        let rel = proof_key(host, name);
        match link.fleet.get(&rel).await {
            Ok(Some((value, _))) => {
                if let Ok(p) = open(link, &rel, &value) {
                    out.push((name.clone(), p));
                }
            }
            Ok(None) => {}
            Err(e) => {
                tracing::warn!("could not read this host's proofs: {e}");
                return None;
            }
        }
    }
    Some((kept.listed_at, out))
}

/// Every proof this host wrote (one range read), listed at `now`.
async fn list_all(link: &FleetLink, now: i64) -> Option<(i64, Vec<(String, Proof)>)> {
    let own = format!("hosts/{}/proof/", link.fleet.host());
    let listed = match link.fleet.list(&own).await {
        Ok(l) => l,
        Err(e) => {
            tracing::warn!("could not read this host's proofs: {e}");
            return None;
        }
    };
    let mut out = Vec::new();
    for (rel, value) in listed {
        let Ok(p) = open(link, &rel, &value) else {
            continue;
        };
        let name = rel.rsplit('/').next().unwrap_or_default().to_owned();
        out.push((name, p));
    }
    Some((now, out))
}

/// `data` as `state_dir/proofs-failed.json`: never panics; what reads is written and read
/// back the same, and is judged fresh or not at any time.
pub(crate) fn fuzz(data: &[u8]) {
    let Some(failed) = Failed::parse(data) else {
        return;
    };
    let Ok(bytes) = serde_json::to_vec(&failed) else {
        panic!("what reads is written");
    };
    assert_eq!(
        Failed::parse(&bytes),
        Some(failed.clone()),
        "reads back the same"
    );
    for now in [i64::MIN, -1, 0, 1, RELIST_AFTER, i64::MAX] {
        let _ = failed.fresh_at(now);
    }
}
