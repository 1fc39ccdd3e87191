//! One read of everything a synchronisation needs: the values under `certs/` and `dcv/` and
//! the key check, in one transaction, at one revision of the store — one request for a fleet
//! of up to [`LIST_PAGE`] keys under each, then further pages at the same revision (no answer
//! may outgrow the 4 MiB the client accepts).

use std::collections::BTreeMap;

use etcd_client::{GetOptions, Txn, TxnOp, TxnOpResponse};

use super::{Fleet, FleetError, LIST_PAGE, after};

/// The values a synchronisation reads, as one revision of the store holds them.
#[derive(Debug, Default)]
pub struct Snapshot {
    /// The store's revision the values were read at: every change after it is delivered by a
    /// watch started at `revision + 1`.
    pub revision: i64,
    /// Every key under `certs/` (relative to the prefix) with its value.
    pub certs: BTreeMap<String, Vec<u8>>,
    /// Every key under `dcv/` (relative to the prefix) with its value.
    pub dcv: BTreeMap<String, Vec<u8>>,
    /// The key check's value and modification revision, if there is one.
    pub key_check: Option<(Vec<u8>, i64)>,
}

impl Fleet {
    /// Reads `certs/`, `dcv/` and `key_check` (relative to the prefix) in one linearizable
    /// read-only transaction (and, for a fleet larger than a page, the rest of `certs/` and
    /// `dcv/` at the same revision).
    pub async fn snapshot(&self, key_check: &str) -> Result<Snapshot, FleetError> {
        let txn = Txn::new().and_then([
            TxnOp::get(
                self.key("certs/"),
                Some(GetOptions::new().with_prefix().with_limit(LIST_PAGE)),
            ),
            TxnOp::get(
                self.key("dcv/"),
                Some(GetOptions::new().with_prefix().with_limit(LIST_PAGE)),
            ),
            TxnOp::get(self.key(key_check), None),
        ]);
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
        let ops = resp.op_responses();
        let get = |i: usize| match ops.get(i) {
            Some(TxnOpResponse::Get(g)) => Some(g),
            _ => None,
        };
        let mut parts = Vec::new();
        for (i, rel) in [(0, "certs/"), (1, "dcv/")] {
            let mut kvs = Vec::new();
            if let Some(g) = get(i) {
                self.append_relative(g.kvs(), &mut kvs);
                if let Some(last) = g.kvs().last().filter(|_| g.more()) {
                    self.list_pages(rel, after(last.key()), revision, &mut kvs)
                        .await?;
                }
            }
            parts.push(kvs.into_iter().collect::<BTreeMap<_, _>>());
        }
        let key_check = get(2)
            .and_then(|g| g.kvs().first())
            .map(|kv| (kv.value().to_vec(), kv.mod_revision()));
        let dcv = parts.pop().unwrap_or_default();
        let certs = parts.pop().unwrap_or_default();
        Ok(Snapshot {
            revision,
            certs,
            dcv,
            key_check,
        })
    }
}
