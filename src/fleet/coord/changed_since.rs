//! What changed under a part of the store since a revision a read already holds: one request
//! that returns only the keys written after it (etcd filters them; nothing else comes back),
//! and how many keys there are now, so that a caller keeping the earlier read can tell whether
//! any key was deleted meanwhile.

use etcd_client::{GetOptions, Txn, TxnOp, TxnOpResponse};

use super::{Fleet, FleetError};

/// The keys under a part of the store written after a revision, and how many keys it holds.
#[derive(Debug, Default)]
pub struct Since {
    /// Every key (relative to the prefix) written after the revision, with its value.
    pub written: Vec<(String, Vec<u8>)>,
    /// How many keys the part holds now.
    pub count: i64,
}

impl Fleet {
    /// The keys under `rel` written after `revision` and the number of keys under it, in one
    /// read-only transaction (one revision). An answer too large for the client (more than
    /// 4 MiB written since) is an error: the caller reads the part again instead.
    pub async fn written_since(&self, rel: &str, revision: i64) -> Result<Since, FleetError> {
        let key = self.key(rel);
        let after = revision.checked_add(1).ok_or_else(|| FleetError::Corrupt {
            key: key.clone(),
            detail: format!("revision {revision} has no next"),
        })?;
        let txn = Txn::new().and_then([
            TxnOp::get(
                key.clone(),
                Some(GetOptions::new().with_prefix().with_min_mod_revision(after)),
            ),
            TxnOp::get(
                key.clone(),
                Some(GetOptions::new().with_prefix().with_count_only()),
            ),
        ]);
        let resp = self
            .call(|mut c| {
                let txn = txn.clone();
                async move { c.txn(txn).await }
            })
            .await?;
        let mut since = Since::default();
        match resp.op_responses().as_slice() {
            [TxnOpResponse::Get(written), TxnOpResponse::Get(all)] => {
                self.append_relative(written.kvs(), &mut since.written);
                since.count = all.count();
            }
            _ => {
                return Err(FleetError::Corrupt {
                    key,
                    detail: "the answer to a read holds other parts than asked".into(),
                });
            }
        }
        Ok(since)
    }
}
