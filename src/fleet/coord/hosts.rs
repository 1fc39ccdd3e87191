//! Reads of a part of every host's keys without the rest: the rollout gates need each host's
//! `seen` record, proofs and decisions, not its results (`hosts/H/certs/`), which are as many
//! as its proofs and larger. The hosts are found by skipping from one to the next (one read
//! of one key each: what is sent does not grow with what each holds, though etcd 3.4 walks
//! the keys after it in its index to answer), then each host's part is one range read, all at
//! the revision of the first answer (one consistent view, as one read of `hosts/` would give).

use etcd_client::GetOptions;

use super::{Fleet, FleetError, after, range_end};

impl Fleet {
    /// The names directly under `rel` (which ends in `/`), in key order, each once, and the
    /// revision they were read at. Each read asks for the first key after the keys of the
    /// name found before, keys only: one key is sent per name, whatever each holds.
    pub async fn children(&self, rel: &str) -> Result<(Vec<String>, i64), FleetError> {
        self.children_at(rel, 0).await
    }

    /// [`Fleet::children`] at `revision` (0: the revision of the first answer).
    async fn children_at(
        &self,
        rel: &str,
        mut revision: i64,
    ) -> Result<(Vec<String>, i64), FleetError> {
        let base = self.key(rel).into_bytes();
        let end = range_end(&base);
        let mut from = base.clone();
        let mut out: Vec<String> = Vec::new();
        loop {
            let opts = GetOptions::new()
                .with_range(end.clone())
                .with_limit(1)
                .with_keys_only();
            let resp = self.get_at(&from, opts, &mut revision).await?;
            let Some(kv) = resp.kvs().first() else {
                return Ok((out, revision));
            };
            let rest = kv.key().strip_prefix(base.as_slice()).unwrap_or_default();
            let (name, next) = child_and_next(&base, rest, kv.key());
            if out.last() != Some(&name) {
                out.push(name);
            }
            from = next;
        }
    }

    /// The values of every host's keys that start with `hosts/H/{under}`, relative to the
    /// prefix, in key order: with `seen`, each host's `seen` record; with `unplaced/NAME`, each
    /// host's note of NAME (and of the names that start with NAME: the caller tells them).
    pub async fn hosts_under(&self, under: &str) -> Result<Vec<(String, Vec<u8>)>, FleetError> {
        self.hosts_ranges(&[(under, under)]).await
    }

    /// The values of every host's keys from `hosts/H/{from}` through `hosts/H/{through}` (and
    /// the keys that start with it), relative to the prefix, in key order: with `proof/`
    /// through `seen`, each host's proofs, decisions and `seen` record, not its results.
    pub async fn hosts_between(
        &self,
        from: &str,
        through: &str,
    ) -> Result<Vec<(String, Vec<u8>)>, FleetError> {
        self.hosts_ranges(&[(from, through)]).await
    }

    /// [`Fleet::hosts_between`] of each range of `ranges` (from, through), host after host.
    pub async fn hosts_ranges(
        &self,
        ranges: &[(&str, &str)],
    ) -> Result<Vec<(String, Vec<u8>)>, FleetError> {
        let (hosts, revision) = self.children_at("hosts/", 0).await?;
        let mut out = Vec::new();
        for host in hosts {
            for (from, through) in ranges {
                let first = self.key(&format!("hosts/{host}/{from}")).into_bytes();
                let end = range_end(self.key(&format!("hosts/{host}/{through}")).as_bytes());
                self.list_pages(first, &end, revision, &mut out).await?;
            }
        }
        Ok(out)
    }
}

/// Of a key under `base` whose part after `base` is `rest`: the name it is under (what comes
/// before the first `/`, or all of `rest`) and the first key after every key of that name.
fn child_and_next(base: &[u8], rest: &[u8], key: &[u8]) -> (String, Vec<u8>) {
    match rest.iter().position(|b| *b == b'/') {
        Some(i) => {
            let mut next = base.to_vec();
            next.extend_from_slice(&rest[..i]);
            // The byte after `/`: past every key of the form `base name / …`.
            next.push(b'/' + 1);
            (String::from_utf8_lossy(&rest[..i]).into_owned(), next)
        }
        None => (String::from_utf8_lossy(rest).into_owned(), after(key)),
    }
}

#[cfg(test)]
mod tests {
    use super::child_and_next;

    #[test]
    fn the_next_key_skips_every_key_of_the_name_and_no_other() {
        let base = b"/p/hosts/";
        let (name, next) = child_and_next(base, b"web1/certs/www", b"/p/hosts/web1/certs/www");
        assert_eq!(name, "web1");
        assert_eq!(next, b"/p/hosts/web10".to_vec());
        // Every key of web1 sorts before it, and web1-x (before web1/) and web10 do not.
        assert!(b"/p/hosts/web1/unplaced/zzz".as_slice() < next.as_slice());
        assert!(b"/p/hosts/web1/\xff".as_slice() < next.as_slice());
        assert!(b"/p/hosts/web10/seen".as_slice() >= next.as_slice());
        assert!(b"/p/hosts/web1-x/seen".as_slice() < b"/p/hosts/web1/".as_slice());
        // A key directly under the base (no `/` after the name): the next key is just after it.
        let (name, next) = child_and_next(base, b"odd", b"/p/hosts/odd");
        assert_eq!(name, "odd");
        assert_eq!(next, b"/p/hosts/odd\0".to_vec());
        // Bytes that are not UTF-8 name something, never panic.
        let (name, _) = child_and_next(base, b"\xff\xfe/seen", b"/p/hosts/\xff\xfe/seen");
        assert_eq!(name, "\u{fffd}\u{fffd}");
    }
}
