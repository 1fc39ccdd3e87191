//! Many of this host's own keys written at once: a host's results after a synchronisation
//! (one per certificate, thousands when it catches up) in transactions of at most
//! [`PUTS_PER_TXN`] puts each, not one request per certificate.

use etcd_client::{Txn, TxnOp};

use super::{Fleet, FleetError};

/// The most puts one transaction carries: under etcd's default `--max-txn-ops` (128).
pub(crate) const PUTS_PER_TXN: usize = 100;
/// The most bytes (keys and values) one transaction carries: under etcd's default
/// `--max-request-bytes` (1.5 MiB).
pub(super) const BYTES_PER_TXN: usize = 1024 * 1024;

/// What [`Fleet::put_own_all`] could not write.
#[derive(Debug)]
pub struct Unwritten {
    /// How many of the puts, from the first, were written before it failed.
    pub written: usize,
    pub error: FleetError,
}

impl Unwritten {
    /// How many of `names` (one per put, in order) were left unwritten, and the first five of
    /// them as a list (`a, b, c, …`).
    pub fn left(&self, names: &[&str]) -> (usize, String) {
        let left = &names[self.written.min(names.len())..];
        let shown: Vec<&str> = left.iter().take(5).copied().collect();
        let more = if left.len() > shown.len() {
            ", …"
        } else {
            ""
        };
        (left.len(), format!("{}{more}", shown.join(", ")))
    }
}

impl Fleet {
    /// Refuses `rel` unless it is under this host's `hosts/HOST/` or is its manifest entry
    /// `manifest/HOST`.
    pub(super) fn check_own(&self, rel: &str) -> Result<(), FleetError> {
        let own = format!("hosts/{}/", self.host);
        if rel.starts_with(&own) || rel == format!("manifest/{}", self.host) {
            return Ok(());
        }
        Err(FleetError::Setup(format!(
            "{} is not under this host's {}; not written without the lead",
            self.key(rel),
            self.key(&own)
        )))
    }

    /// Writes `puts` (keys relative to the prefix, each under this host's `hosts/HOST/`)
    /// without fencing, like [`put_own`](Self::put_own), in transactions of at most
    /// [`PUTS_PER_TXN`] puts and [`BYTES_PER_TXN`] bytes, in order, one after the other. A
    /// key not this host's refuses the whole write before anything is written; a transaction
    /// that fails stops it (each is all or nothing: the error says how many were written).
    pub async fn put_own_all(&self, puts: Vec<(String, Vec<u8>)>) -> Result<(), Unwritten> {
        for (rel, _) in &puts {
            self.check_own(rel)
                .map_err(|error| Unwritten { written: 0, error })?;
        }
        let sizes: Vec<usize> = puts
            .iter()
            .map(|(k, v)| self.key(k).len() + v.len())
            .collect();
        let mut written = 0;
        let mut puts = puts.into_iter();
        for n in batch_lengths(&sizes, PUTS_PER_TXN, BYTES_PER_TXN) {
            let ops: Vec<TxnOp> = puts
                .by_ref()
                .take(n)
                .map(|(rel, value)| TxnOp::put(self.key(&rel), value, None))
                .collect();
            let txn = Txn::new().and_then(ops);
            self.call(|mut c| {
                let txn = txn.clone();
                async move { c.txn(txn).await }
            })
            .await
            .map_err(|error| Unwritten { written, error })?;
            written += n;
        }
        Ok(())
    }
}

/// The lengths of consecutive batches of items of `sizes`: each at most `max_items` items and
/// at most `max_bytes` bytes (an item larger than that alone in its batch); every item in one.
pub(super) fn batch_lengths(sizes: &[usize], max_items: usize, max_bytes: usize) -> Vec<usize> {
    let max_items = max_items.max(1);
    let mut out = Vec::new();
    let (mut n, mut bytes) = (0usize, 0usize);
    for &size in sizes {
        if n > 0 && (n == max_items || bytes.saturating_add(size) > max_bytes) {
            out.push(n);
            (n, bytes) = (0, 0);
        }
        n += 1;
        bytes = bytes.saturating_add(size);
    }
    if n > 0 {
        out.push(n);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn lengths(count: usize) -> Vec<usize> {
        batch_lengths(&vec![300; count], PUTS_PER_TXN, BYTES_PER_TXN)
    }

    #[test]
    fn batches_hold_at_most_one_transaction_of_puts() {
        assert_eq!(lengths(0), Vec::<usize>::new());
        assert_eq!(lengths(1), vec![1]);
        assert_eq!(lengths(100), vec![100]);
        assert_eq!(lengths(101), vec![100, 1]);
        assert_eq!(lengths(250), vec![100, 100, 50]);
        for count in [0, 1, 99, 100, 101, 199, 200, 201, 10_000] {
            let l = lengths(count);
            assert_eq!(l.iter().sum::<usize>(), count, "{count}");
            assert!(
                l.iter().all(|&n| (1..=PUTS_PER_TXN).contains(&n)),
                "{count}: {l:?}"
            );
        }
    }

    #[test]
    fn batches_stay_under_the_request_size() {
        // Four values of 400 KiB: two a transaction; one larger than the limit goes alone.
        assert_eq!(batch_lengths(&[400 << 10; 4], 100, 1 << 20), vec![2, 2]);
        assert_eq!(
            batch_lengths(&[10, 2 << 20, 10], 100, 1 << 20),
            vec![1, 1, 1]
        );
        assert_eq!(batch_lengths(&[10, 10, 10], 2, 1 << 20), vec![2, 1]);
    }

    #[test]
    fn the_names_left_unwritten_are_counted_and_the_first_five_shown() {
        let e = |written| Unwritten {
            written,
            error: FleetError::Setup("down".into()),
        };
        let names = ["a", "b", "c", "d", "e", "f", "g"];
        assert_eq!(e(0).left(&names), (7, "a, b, c, d, e, …".to_owned()));
        assert_eq!(e(5).left(&names), (2, "f, g".to_owned()));
        assert_eq!(e(9).left(&names), (0, String::new()));
    }
}
