//! One read of everything a synchronisation needs: the values under `certs/` and `dcv/` and
//! the key check, in one transaction, at one revision of the store — one request whatever the
//! number of certificates.

use std::collections::BTreeMap;

use etcd_client::{GetOptions, Txn, TxnOp, TxnOpResponse};

use super::{Fleet, FleetError};

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
    /// read-only transaction.
    pub async fn snapshot(&self, key_check: &str) -> Result<Snapshot, FleetError> {
        let txn = Txn::new().and_then([
            TxnOp::get(self.key("certs/"), Some(GetOptions::new().with_prefix())),
            TxnOp::get(self.key("dcv/"), Some(GetOptions::new().with_prefix())),
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
        let kvs = |i: usize| match ops.get(i) {
            Some(TxnOpResponse::Get(g)) => g.kvs().to_vec(),
            _ => Vec::new(),
        };
        let relative = |kvs: Vec<etcd_client::KeyValue>| {
            kvs.into_iter()
                .map(|kv| {
                    let key = String::from_utf8_lossy(kv.key());
                    let rel = key.strip_prefix(&self.prefix).unwrap_or(&key).to_owned();
                    (rel, kv.value().to_vec())
                })
                .collect::<BTreeMap<_, _>>()
        };
        Ok(Snapshot {
            revision,
            certs: relative(kvs(0)),
            dcv: relative(kvs(1)),
            key_check: kvs(2)
                .first()
                .map(|kv| (kv.value().to_vec(), kv.mod_revision())),
        })
    }
}
