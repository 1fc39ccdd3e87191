//! One read of everything a synchronisation needs, at one revision of the store: the keys under
//! `certs/` with their modification revisions only (etcd's `keys_only`: a few requests for a
//! fleet of thousands of certificates), the values under `dcv/` and the key check, in one
//! transaction; then, in read-only transactions of at most [`VALUES_PER_TXN`] gets at that
//! same revision, the values of only those keys whose revision is not one this host already
//! opened and accepted (`known`, from its own versions file: never from etcd). A value is
//! never modified in etcd without its key's revision changing, so a key at a known revision
//! holds the very bytes this host accepted; everything else (a forgery, a replay, under a new
//! revision) is read and checked as before.
//!
//! A synchronisation may also leave some values to be read later, in slices
//! ([`Fleet::snapshot_deferring`]): their keys come back in [`Snapshot::deferred`] with their
//! listed revisions, and [`Fleet::values_listed`] reads them at the snapshot's revision (the
//! same one-revision view), checking each against the listing.

use std::collections::BTreeMap;

use etcd_client::{GetOptions, Txn, TxnOp, TxnOpResponse};

use super::{Fleet, FleetError, LIST_PAGE, after, range_end};

/// Keys read per request by a keys-only page: an answer of 5,000 keys of up to 300 bytes
/// each (with their revisions) stays well under the 4 MiB the client accepts.
const KEYS_PAGE: i64 = 5_000;

/// Gets per read-only transaction when values are read by key (etcd allows 128 operations
/// to a transaction; 100 values of about 17 KiB are under 2 MiB).
pub(super) const VALUES_PER_TXN: usize = 100;

/// The values a synchronisation reads, as one revision of the store holds them.
#[derive(Debug, Default)]
pub struct Snapshot {
    /// The store's revision the values were read at: every change after it is delivered by a
    /// watch started at `revision + 1`.
    pub revision: i64,
    /// The keys under `certs/` (relative to the prefix) whose values were read, with them.
    pub certs: BTreeMap<String, Vec<u8>>,
    /// The keys under `certs/` whose values were not read: each at a revision this host
    /// accepted its value at (`known`), with that revision.
    pub unread: BTreeMap<String, i64>,
    /// The keys under `certs/` whose values were to be read but were left for later (see
    /// [`Fleet::snapshot_deferring`]), with their listed revisions.
    pub deferred: BTreeMap<String, i64>,
    /// The modification revision of every key under `certs/`.
    pub revisions: BTreeMap<String, i64>,
    /// Every key under `dcv/` (relative to the prefix) with its value.
    pub dcv: BTreeMap<String, Vec<u8>>,
    /// The key check's value and modification revision, if there is one.
    pub key_check: Option<(Vec<u8>, i64)>,
    /// The id of the etcd cluster that answered (0 when its answer carried none).
    pub cluster: u64,
}

/// The keys under `certs/` (relative to the prefix) as a read of the fleet listed them at
/// `revision` of the etcd cluster `cluster`, each with its modification revision: from it a
/// later read lists only the keys changed since ([`Fleet::snapshot_deferring`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Listed {
    pub cluster: u64,
    pub revision: i64,
    pub keys: BTreeMap<String, i64>,
}

/// The keys whose value a snapshot reads: every key of `listed` (key, modification revision)
/// whose revision is not the one `known` holds for it. A revision that is not a revision
/// (zero or below) is never taken for a known one.
pub(super) fn to_read<'a>(
    listed: &'a BTreeMap<String, i64>,
    known: &BTreeMap<String, i64>,
) -> Vec<&'a str> {
    listed
        .iter()
        .filter(|(k, rev)| !(**rev > 0 && known.get(*k) == Some(*rev)))
        .map(|(k, _)| k.as_str())
        .collect()
}

impl Fleet {
    /// Reads the keys under `certs/` with their revisions, the values under `dcv/` and
    /// `key_check` (relative to the prefix) in one linearizable read-only transaction (and,
    /// for a larger fleet, further pages at the same revision), then the values under
    /// `certs/` whose key is not at the revision `known` gives for it (relative key →
    /// revision this host accepted the value at; empty: every value is read).
    pub async fn snapshot(
        &self,
        key_check: &str,
        known: &BTreeMap<String, i64>,
    ) -> Result<Snapshot, FleetError> {
        self.snapshot_deferring(key_check, known, None, |_| false)
            .await
    }

    /// [`Fleet::snapshot`], leaving the values of the keys `defer` names (relative to the
    /// prefix) unread: in [`Snapshot::deferred`], to be read by [`Fleet::values_listed`] at
    /// the snapshot's revision, a slice at a time (a fresh host's ten thousand bundles are
    /// never all held at once).
    ///
    /// With `prior` (the keys under `certs/` as an earlier read of this prefix listed them),
    /// the same transaction lists only the keys modified after `prior`'s revision and counts
    /// the keys under `certs/`: when the changed keys fit in one page, the cluster is the
    /// same and the count is that of `prior`'s keys with the changed ones, no key was deleted
    /// and the listing is `prior`'s with the changes; otherwise every key is listed, as
    /// without `prior`.
    pub async fn snapshot_deferring(
        &self,
        key_check: &str,
        known: &BTreeMap<String, i64>,
        prior: Option<Listed>,
        defer: impl Fn(&str) -> bool,
    ) -> Result<Snapshot, FleetError> {
        let mut listing = GetOptions::new()
            .with_prefix()
            .with_keys_only()
            .with_limit(KEYS_PAGE);
        if let Some(p) = &prior {
            listing = listing.with_min_mod_revision(p.revision.saturating_add(1));
        }
        let mut ops = vec![
            TxnOp::get(self.key("certs/"), Some(listing)),
            TxnOp::get(
                self.key("dcv/"),
                Some(GetOptions::new().with_prefix().with_limit(LIST_PAGE)),
            ),
            TxnOp::get(self.key(key_check), None),
        ];
        if prior.is_some() {
            ops.push(TxnOp::get(
                self.key("certs/"),
                Some(GetOptions::new().with_prefix().with_count_only()),
            ));
        }
        let txn = Txn::new().and_then(ops);
        let resp = self
            .call(|mut c| {
                let txn = txn.clone();
                async move { c.txn(txn).await }
            })
            .await?;
        let revision = resp
            .header()
            .map(etcd_client::ResponseHeader::revision)
            .filter(|r| *r > 0)
            .ok_or_else(|| FleetError::Corrupt {
                key: self.key(""),
                detail: "the answer to a read carries no revision".into(),
            })?;
        let cluster = resp
            .header()
            .map_or(0, etcd_client::ResponseHeader::cluster_id);
        let ops = resp.op_responses();
        let get = |i: usize| match ops.get(i) {
            Some(TxnOpResponse::Get(g)) => Some(g),
            _ => None,
        };
        let count = get(3).map(etcd_client::GetResponse::count);
        let revisions = self
            .listing(prior, get(0), count, (cluster, revision))
            .await?;
        let mut dcv = Vec::new();
        if let Some(g) = get(1) {
            self.append_relative(g.kvs(), &mut dcv);
            if let Some(last) = g.kvs().last().filter(|_| g.more()) {
                let end = range_end(self.key("dcv/").as_bytes());
                self.list_pages(after(last.key()), &end, revision, &mut dcv)
                    .await?;
            }
        }
        let key_check = get(2)
            .and_then(|g| g.kvs().first())
            .map(|kv| (kv.value().to_vec(), kv.mod_revision()));
        let (deferred, wanted): (Vec<String>, Vec<String>) = to_read(&revisions, known)
            .into_iter()
            .map(str::to_owned)
            .partition(|k| defer(k));
        let certs = self.values_listed(&wanted, revision, &revisions).await?;
        let deferred: BTreeMap<String, i64> = deferred
            .into_iter()
            .filter_map(|k| revisions.get(&k).map(|r| (k, *r)))
            .collect();
        let unread: BTreeMap<String, i64> = revisions
            .iter()
            .filter(|(k, _)| !certs.contains_key(*k) && !deferred.contains_key(*k))
            .map(|(k, r)| (k.clone(), *r))
            .collect();
        tracing::debug!(
            "fleet: read at revision {revision}: {} key(s) under certs/, {} value(s) read{}, {} \
             unchanged since this host accepted them (not read), {} left to read in slices",
            revisions.len(),
            certs.len(),
            named(certs.keys()),
            unread.len(),
            deferred.len()
        );
        Ok(Snapshot {
            revision,
            certs,
            unread,
            deferred,
            revisions,
            dcv: dcv.into_iter().collect(),
            key_check,
            cluster,
        })
    }

    /// The keys under `certs/` at `revision` of `cluster`, each with its modification
    /// revision: from `first` (the first page of every key, or with `prior` the first page of
    /// the keys changed since it, and `count` the keys under `certs/`), and the further pages
    /// when they are needed ([`Fleet::snapshot_deferring`]).
    async fn listing(
        &self,
        prior: Option<Listed>,
        first: Option<&etcd_client::GetResponse>,
        count: Option<i64>,
        (cluster, revision): (u64, i64),
    ) -> Result<BTreeMap<String, i64>, FleetError> {
        let mut revisions = BTreeMap::new();
        if let Some(prior) = prior {
            let changed = first.map(|g| (g.kvs(), g.more()));
            if let Some(listed) = self.listed_since(prior, (cluster, revision), changed, count) {
                return Ok(listed);
            }
            let from = self.key("certs/").into_bytes();
            self.key_pages("certs/", from, revision, &mut revisions)
                .await?;
            return Ok(revisions);
        }
        if let Some(g) = first {
            self.append_revisions(g.kvs(), &mut revisions);
            if let Some(last) = g.kvs().last().filter(|_| g.more()) {
                self.key_pages("certs/", after(last.key()), revision, &mut revisions)
                    .await?;
            }
        }
        Ok(revisions)
    }

    /// The keys under `certs/` at `revision` of `cluster`, made up from `prior` and the keys
    /// `changed` since it (one page, and whether more were left): `None` when `prior` is of
    /// another cluster or of a later revision, when more keys changed than a page holds, or
    /// when the keys under `certs/` (`count`) are not `prior`'s with the changed ones (a key
    /// was deleted).
    fn listed_since(
        &self,
        prior: Listed,
        (cluster, revision): (u64, i64),
        changed: Option<(&[etcd_client::KeyValue], bool)>,
        count: Option<i64>,
    ) -> Option<BTreeMap<String, i64>> {
        let (kvs, more) = changed?;
        let why = if prior.cluster != cluster || cluster == 0 {
            Some("another etcd cluster".to_owned())
        } else if prior.revision > revision {
            Some(format!("a revision ahead of the store's ({})", revision))
        } else if more {
            Some(format!("more than {KEYS_PAGE} keys changed since"))
        } else {
            None
        };
        if let Some(why) = why {
            tracing::debug!(
                "fleet: the listing of revision {} is not used: {why}; every key is listed",
                prior.revision
            );
            return None;
        }
        let mut keys = prior.keys;
        self.append_revisions(kvs, &mut keys);
        if count != Some(keys.len() as i64) {
            tracing::debug!(
                "fleet: the listing of revision {} with the {} key(s) changed since makes {} \
                 where etcd counts {}: every key is listed",
                prior.revision,
                kvs.len(),
                keys.len(),
                count.unwrap_or(-1),
            );
            return None;
        }
        tracing::debug!(
            "fleet: the keys under certs/ as listed at revision {}, {} changed since",
            prior.revision,
            kvs.len()
        );
        Some(keys)
    }

    /// The values of `keys` (relative to the prefix) at `revision`, where the listing of that
    /// revision (`listed`: key → modification revision) says each is: a value at another
    /// revision, or none, is refused (the store does not answer as its own listing said).
    pub async fn values_listed(
        &self,
        keys: &[String],
        revision: i64,
        listed: &BTreeMap<String, i64>,
    ) -> Result<BTreeMap<String, Vec<u8>>, FleetError> {
        let mut certs = BTreeMap::new();
        for (key, (value, at)) in self.values_at(keys, revision).await? {
            if listed.get(&key) != Some(&at) {
                return Err(FleetError::Corrupt {
                    key: self.key(&key),
                    detail: format!(
                        "read at revision {at} where the same read listed it at another \
                         revision"
                    ),
                });
            }
            certs.insert(key, value);
        }
        if let Some(missing) = keys.iter().find(|k| !certs.contains_key(*k)) {
            return Err(FleetError::Corrupt {
                key: self.key(missing),
                detail: format!("listed at revision {revision} but has no value there"),
            });
        }
        Ok(certs)
    }

    /// The values of `keys` (relative to the prefix) at `revision` (0: as etcd holds them
    /// now), with their modification revisions, read in read-only transactions of at most
    /// [`VALUES_PER_TXN`] gets; a key that has no value there is left out.
    pub async fn values_at(
        &self,
        keys: &[String],
        revision: i64,
    ) -> Result<BTreeMap<String, (Vec<u8>, i64)>, FleetError> {
        self.read_at(keys, revision, |_| false).await
    }

    /// The values of `keys` as etcd holds them now; of a key whose value this host holds at a
    /// revision (`held`), only that revision first, and the value only when etcd holds it at
    /// another: what a look that may already hold the values needs.
    pub(crate) async fn read_fresh(
        &self,
        keys: &[String],
        held: impl Fn(&str) -> Option<i64>,
    ) -> Result<BTreeMap<String, (Vec<u8>, i64)>, FleetError> {
        let mut values = self.read_at(keys, 0, |k| held(k).is_some()).await?;
        let changed: Vec<String> = values
            .iter()
            .filter(|(k, (_, rev))| held(k).is_some_and(|h| h != *rev))
            .map(|(k, _)| k.clone())
            .collect();
        if !changed.is_empty() {
            for k in &changed {
                values.remove(k);
            }
            values.extend(self.values_at(&changed, 0).await?);
        }
        Ok(values)
    }

    /// [`Fleet::values_at`], reading only the modification revision (an empty value) of the
    /// keys `revision_only` names: what a look that may already hold their values needs.
    pub async fn read_at(
        &self,
        keys: &[String],
        revision: i64,
        revision_only: impl Fn(&str) -> bool,
    ) -> Result<BTreeMap<String, (Vec<u8>, i64)>, FleetError> {
        let mut out = BTreeMap::new();
        for chunk in keys.chunks(VALUES_PER_TXN) {
            let txn = Txn::new().and_then(
                chunk
                    .iter()
                    .map(|k| {
                        let opts = GetOptions::new().with_revision(revision);
                        let opts = if revision_only(k) {
                            opts.with_keys_only()
                        } else {
                            opts
                        };
                        TxnOp::get(self.key(k), Some(opts))
                    })
                    .collect::<Vec<_>>(),
            );
            let resp = self
                .call(|mut c| {
                    let txn = txn.clone();
                    async move { c.txn(txn).await }
                })
                .await?;
            for (rel, op) in chunk.iter().zip(resp.op_responses()) {
                let TxnOpResponse::Get(g) = op else {
                    continue;
                };
                if let Some(kv) = g.kvs().first() {
                    if kv.key() != self.key(rel).as_bytes() {
                        return Err(FleetError::Corrupt {
                            key: self.key(rel),
                            detail: "the answer to its read holds another key".into(),
                        });
                    }
                    out.insert(rel.clone(), (kv.value().to_vec(), kv.mod_revision()));
                }
            }
        }
        Ok(out)
    }

    /// The keys under `rel` from `from` on (a full key, inclusive), without their values, in
    /// pages of [`KEYS_PAGE`] at `revision`: each key (relative to the prefix) with its
    /// modification revision, into `out`.
    async fn key_pages(
        &self,
        rel: &str,
        mut from: Vec<u8>,
        revision: i64,
        out: &mut BTreeMap<String, i64>,
    ) -> Result<(), FleetError> {
        let end = range_end(self.key(rel).as_bytes());
        loop {
            let opts = GetOptions::new()
                .with_range(end.clone())
                .with_keys_only()
                .with_limit(KEYS_PAGE)
                .with_revision(revision);
            let resp = self
                .call(|mut c| {
                    let (from, opts) = (from.clone(), opts.clone());
                    async move { c.get(from, Some(opts)).await }
                })
                .await?;
            self.append_revisions(resp.kvs(), out);
            match resp.kvs().last() {
                Some(last) if resp.more() => from = after(last.key()),
                _ => return Ok(()),
            }
        }
    }

    /// `kvs` (keys only) into `out`: each key relative to the prefix, with its modification
    /// revision.
    fn append_revisions(&self, kvs: &[etcd_client::KeyValue], out: &mut BTreeMap<String, i64>) {
        for kv in kvs {
            let key = String::from_utf8_lossy(kv.key());
            let rel = key.strip_prefix(&self.prefix).unwrap_or(&key).to_owned();
            out.insert(rel, kv.mod_revision());
        }
    }
}

/// Up to ten keys, named: ` (a, b)`; none or more: nothing.
fn named<'a>(keys: impl ExactSizeIterator<Item = &'a String>) -> String {
    if keys.len() == 0 || keys.len() > 10 {
        return String::new();
    }
    format!(
        " ({})",
        keys.map(String::as_str).collect::<Vec<_>>().join(", ")
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn map(items: &[(&str, i64)]) -> BTreeMap<String, i64> {
        items.iter().map(|(k, r)| ((*k).to_owned(), *r)).collect()
    }

    #[test]
    fn only_keys_at_a_known_revision_are_left_unread() {
        let listed = map(&[
            ("certs/a/current", 10),
            ("certs/a/state", 11),
            ("certs/a/spec", 3),
            ("certs/b/current", 20),
        ]);
        // a/current as accepted; a/state rewritten since (a forgery or a replay under a new
        // revision is read and checked); b/current never accepted; a/spec not known.
        let known = map(&[
            ("certs/a/current", 10),
            ("certs/a/state", 9),
            ("certs/gone/current", 5),
        ]);
        assert_eq!(
            to_read(&listed, &known),
            vec!["certs/a/spec", "certs/a/state", "certs/b/current"]
        );
        // Nothing known: everything read (a missing or unreadable versions file).
        assert_eq!(to_read(&listed, &BTreeMap::new()).len(), 4);
        // A key that vanished is neither read nor left unread: it is not listed.
        assert!(!to_read(&listed, &known).contains(&"certs/gone/current"));
    }

    #[test]
    fn garbage_revisions_are_never_taken_for_known_ones() {
        let listed = map(&[("certs/a/current", 0), ("certs/b/current", -4)]);
        let known = map(&[("certs/a/current", 0), ("certs/b/current", -4)]);
        assert_eq!(to_read(&listed, &known).len(), 2);
        let listed = map(&[("certs/a/current", i64::MAX)]);
        let known = map(&[("certs/a/current", i64::MAX - 1)]);
        assert_eq!(to_read(&listed, &known), vec!["certs/a/current"]);
    }
}
