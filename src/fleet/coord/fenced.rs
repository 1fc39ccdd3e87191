//! The leader's fenced writes: the answer of a transaction fenced by the lead (done, a
//! conflict, or the lead lost), and whole parts of the store deleted at once while a key that
//! tells whether they are still in use has not changed (`fleet forget-host`: a host's values,
//! while its `seen` record is the one judged).

use etcd_client::{Compare, CompareOp, DeleteOptions, Txn, TxnOp, TxnOpResponse};

use super::{FleetError, LEADER, Leadership, Written, lock};

impl Leadership {
    /// Deletes every key under each of `prefixes` and each of `keys` (relative to the
    /// prefix) in one transaction fenced like [`put`](Self::put), and only while `unchanged`
    /// (a key relative to the prefix, and its modification revision; 0: absent) still holds.
    /// [`Written::Conflict`] with that key's value now when it changed: nothing is deleted.
    pub async fn delete_parts_unless_changed(
        &self,
        prefixes: &[String],
        keys: &[String],
        unchanged: (&str, i64),
    ) -> Result<Written, FleetError> {
        self.ensure_held()?;
        let leader = self.fleet.key(LEADER);
        let watched = self.fleet.key(unchanged.0);
        let mut ops: Vec<TxnOp> = prefixes
            .iter()
            .map(|rel| {
                TxnOp::delete(
                    self.fleet.key(rel),
                    Some(DeleteOptions::new().with_prefix()),
                )
            })
            .collect();
        ops.extend(
            keys.iter()
                .map(|rel| TxnOp::delete(self.fleet.key(rel), None)),
        );
        let txn = Txn::new()
            .when([
                Compare::create_revision(leader.clone(), CompareOp::Equal, self.revision),
                Compare::mod_revision(watched.clone(), CompareOp::Equal, unchanged.1),
            ])
            .and_then(ops)
            .or_else([TxnOp::get(leader, None), TxnOp::get(watched, None)]);
        self.written(txn).await
    }

    /// Sends `txn` (whose `else` reads the leader key, then the key it expected something
    /// of): done, a conflict with that key's value now, or the lead lost.
    pub(super) async fn written(&self, txn: Txn) -> Result<Written, FleetError> {
        let resp = self
            .fleet
            .call(|mut c| {
                let txn = txn.clone();
                async move { c.txn(txn).await }
            })
            .await?;
        if resp.succeeded() {
            return Ok(Written::Done(
                resp.header().map(|h| h.revision()).unwrap_or_default(),
            ));
        }
        let ops = resp.op_responses();
        let get = |i: usize| match ops.get(i) {
            Some(TxnOpResponse::Get(g)) => g.kvs().first().cloned(),
            _ => None,
        };
        let leader_now = get(0);
        if leader_now
            .as_ref()
            .map(etcd_client::KeyValue::create_revision)
            != Some(self.revision)
        {
            *lock(&self.held) = None;
            return Err(FleetError::NotLeader {
                host: self.fleet.host.clone(),
                now: leader_now.map(|kv| String::from_utf8_lossy(kv.value()).into_owned()),
            });
        }
        Ok(Written::Conflict(get(1).map(|kv| kv.value().to_vec())))
    }
}
