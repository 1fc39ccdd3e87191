//! The keys under `certs/` as this host's last synchronisation listed them, kept between runs
//! (`state_dir/fleet-listing.json`), so that the next read of the fleet lists only the keys
//! changed since ([`Fleet::snapshot_deferring`]): a run with nothing to do sends a few
//! messages to etcd whatever the number of certificates, instead of a listing of three keys
//! per certificate (about 2.4 MB at 10,000 certificates).
//!
//! The file does not hold the listing itself but what it says beyond the versions this host
//! accepted: the keys listed at another revision than the one accepted (or never accepted),
//! and the keys accepted that were not listed, with the SHA-256 of the accepted revisions it
//! was made against. It is used only when the versions this host holds now are exactly
//! those (the same digest), for the same fleet (prefix and etcd cluster), and when etcd then
//! says that no key under `certs/` changed since but those it names, and counts as many keys
//! as the listing made up from it holds (so no key was deleted). Anything else — no file, a
//! damaged or foreign one, other versions, a deletion, more changes than a page — means a
//! full listing, as without the file. A listing that differs from the accepted versions in
//! more than [`MAX_APART`] keys is not kept.
//!
//! [`Fleet::snapshot_deferring`]: crate::fleet::coord::Fleet::snapshot_deferring

use std::collections::BTreeMap;
use std::io::Read;
use std::path::Path;

use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

use crate::fleet::coord::Listed;

/// The file under `state_dir`.
pub(crate) const LISTING_FILE: &str = "fleet-listing.json";
/// Version of the file's layout.
const FORMAT: u32 = 1;
/// The most keys the file names (listed apart from the accepted versions, or accepted and
/// not listed): a host that leaves more of the fleet's keys unaccepted lists them all.
pub(crate) const MAX_APART: usize = 10_000;
/// The largest file read (the keys it may name, and room).
const MAX_FILE: u64 = 4 * 1024 * 1024;

#[derive(Debug, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct File {
    format: u32,
    /// The fleet's prefix in etcd.
    prefix: String,
    /// The etcd cluster's id, as its answer to the listing gave it.
    cluster: u64,
    /// The store's revision the keys were listed at.
    revision: i64,
    /// The SHA-256 of the accepted versions ([`known_digest`]) the file was made against.
    known_sha256: String,
    /// Keys listed at another revision than the accepted one, or never accepted.
    apart: BTreeMap<String, i64>,
    /// Keys accepted that were not listed.
    unlisted: Vec<String>,
}

/// The SHA-256 of `known` (key → accepted revision), in the keys' order.
fn known_digest(known: &BTreeMap<String, i64>) -> String {
    let mut h = Sha256::new();
    for (k, rev) in known {
        h.update(k.as_bytes());
        h.update([0]);
        h.update(rev.to_le_bytes());
    }
    hex::encode(h.finalize())
}

/// The listing kept in `state_dir` for `prefix`, made up from `known` (the versions this host
/// accepted, as the run read them): `None` when there is none that holds for them (see the
/// module's documentation). A file that cannot be used is named in a debug line only: the
/// listing is made in full instead, and the file is written again after it.
pub(crate) fn prior(
    state_dir: &Path,
    prefix: &str,
    known: &BTreeMap<String, i64>,
) -> Option<Listed> {
    let path = state_dir.join(LISTING_FILE);
    let file = match read(&path) {
        Ok(Some(f)) => f,
        Ok(None) => return None,
        Err(why) => {
            tracing::debug!("fleet: {} is not used: {why}", path.display());
            return None;
        }
    };
    made_up(file, prefix, known)
}

fn read(path: &Path) -> Result<Option<File>, String> {
    let f = match std::fs::File::open(path) {
        Ok(f) => f,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(crate::fsutil::io_text(&e)),
    };
    let mut bytes = Vec::new();
    f.take(MAX_FILE + 1)
        .read_to_end(&mut bytes)
        .map_err(|e| crate::fsutil::io_text(&e))?;
    if bytes.len() as u64 > MAX_FILE {
        return Err(format!("larger than {MAX_FILE} bytes"));
    }
    serde_json::from_slice(&bytes)
        .map(Some)
        .map_err(|e| format!("does not read: {e}"))
}

/// The listing `file` stands for, when it was made for `prefix` and against `known`.
fn made_up(file: File, prefix: &str, known: &BTreeMap<String, i64>) -> Option<Listed> {
    if file.format != FORMAT
        || file.prefix != prefix
        || file.revision <= 0
        || file.apart.len() + file.unlisted.len() > MAX_APART
        || file.apart.values().any(|r| *r <= 0)
        || file.known_sha256 != known_digest(known)
    {
        return None;
    }
    let mut keys = known.clone();
    for k in &file.unlisted {
        keys.remove(k)?;
    }
    keys.extend(file.apart);
    Some(Listed {
        cluster: file.cluster,
        revision: file.revision,
        keys,
    })
}

/// Keeps `listing` (the keys under `certs/` of `prefix` as listed at `revision` of the etcd
/// cluster `cluster`) against `known` (the versions this host accepted once its
/// synchronisation saved them) for the next run; removes the file when the listing is too far
/// from them ([`MAX_APART`]). A file that cannot be written is logged: the next run lists in
/// full.
pub(crate) fn keep(
    state_dir: &Path,
    (prefix, cluster, revision): (&str, u64, i64),
    listing: &BTreeMap<String, i64>,
    known: &BTreeMap<String, i64>,
) {
    let path = state_dir.join(LISTING_FILE);
    let file = (revision > 0 && cluster != 0)
        .then(|| apart_of(listing, known))
        .flatten()
        .map(|(apart, unlisted)| File {
            format: FORMAT,
            prefix: prefix.to_owned(),
            cluster,
            revision,
            known_sha256: known_digest(known),
            apart,
            unlisted,
        });
    let result = match file {
        // The same listing kept at an earlier revision of the cluster still holds: no key
        // under `certs/` was written or deleted between the two listings (either would show),
        // so what changed since the one is what changed since the other. Not written again.
        Some(file)
            if read(&path)
                .ok()
                .flatten()
                .is_some_and(|kept| same_at_or_before(&kept, &file)) =>
        {
            Ok(())
        }
        Some(file) => serde_json::to_vec(&file)
            .map_err(std::io::Error::other)
            .and_then(|bytes| crate::fsutil::write_atomic(&path, &bytes, 0o600)),
        None => match std::fs::remove_file(&path) {
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(()),
            other => other,
        },
    };
    if let Err(e) = result {
        tracing::warn!(
            "could not keep the fleet's listing in {} (the next run lists every key): {}",
            path.display(),
            crate::fsutil::io_text(&e)
        );
    }
}

/// Is `kept` the listing `new` says, made at the same or an earlier revision of one cluster?
fn same_at_or_before(kept: &File, new: &File) -> bool {
    let File {
        format,
        prefix,
        cluster,
        revision,
        known_sha256,
        apart,
        unlisted,
    } = new;
    0 < kept.revision
        && kept.revision <= *revision
        && kept.format == *format
        && kept.prefix == *prefix
        && kept.cluster == *cluster
        && kept.known_sha256 == *known_sha256
        && kept.apart == *apart
        && kept.unlisted == *unlisted
}

/// What `listing` says beyond `known`: the keys at another revision or not accepted, and the
/// keys accepted but not listed; `None` when they are more than [`MAX_APART`].
fn apart_of(
    listing: &BTreeMap<String, i64>,
    known: &BTreeMap<String, i64>,
) -> Option<(BTreeMap<String, i64>, Vec<String>)> {
    let mut apart = BTreeMap::new();
    for (k, rev) in listing {
        if known.get(k) != Some(rev) {
            apart.insert(k.clone(), *rev);
            if apart.len() > MAX_APART {
                return None;
            }
        }
    }
    let unlisted: Vec<String> = known
        .keys()
        .filter(|k| !listing.contains_key(*k))
        .cloned()
        .collect();
    (apart.len() + unlisted.len() <= MAX_APART).then_some((apart, unlisted))
}

/// `data` as `fleet-listing.json` (fuzzing): never panics; a file that reads makes up a
/// listing only against the versions its digest names, and that listing holds every key the
/// file names apart, at its revision, and none it names unlisted.
pub(crate) fn fuzz(data: &[u8]) {
    let Ok(file) = serde_json::from_slice::<File>(data) else {
        return;
    };
    // The versions the file would be made against: its unlisted keys and a key of its own.
    let known: BTreeMap<String, i64> = file
        .unlisted
        .iter()
        .map(|k| (k.clone(), 1))
        .chain([("certs/x/state".to_owned(), 2)])
        .collect();
    let theirs = file.known_sha256 == known_digest(&known);
    let (apart, unlisted, prefix) = (
        file.apart.clone(),
        file.unlisted.clone(),
        file.prefix.clone(),
    );
    if let Some(listed) = made_up(file, &prefix, &known) {
        assert!(theirs, "made up against other versions");
        for (k, rev) in &apart {
            assert_eq!(listed.keys.get(k), Some(rev), "{k}");
        }
        for k in unlisted.iter().filter(|k| !apart.contains_key(*k)) {
            assert!(!listed.keys.contains_key(k), "{k}");
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn map(entries: &[(&str, i64)]) -> BTreeMap<String, i64> {
        entries.iter().map(|(k, r)| ((*k).to_owned(), *r)).collect()
    }

    fn kept(dir: &Path, listing: &BTreeMap<String, i64>, known: &BTreeMap<String, i64>) {
        keep(dir, ("/fleet/", 7, 40), listing, known);
    }

    #[test]
    fn a_kept_listing_is_made_up_again_from_the_same_versions() {
        let dir = tempfile::tempdir().unwrap();
        let known = map(&[
            ("certs/a/current", 10),
            ("certs/a/state", 11),
            ("certs/b/spec", 3),
        ]);
        // b's spec not listed any more; a's state at another revision; c never accepted.
        let listing = map(&[
            ("certs/a/current", 10),
            ("certs/a/state", 12),
            ("certs/c/retired", 30),
        ]);
        kept(dir.path(), &listing, &known);
        let prior = prior(dir.path(), "/fleet/", &known).expect("kept");
        assert_eq!(prior.keys, listing);
        assert_eq!((prior.cluster, prior.revision), (7, 40));
        let text = std::fs::read_to_string(dir.path().join(LISTING_FILE)).unwrap();
        assert!(
            !text.contains("certs/a/current"),
            "only what is apart: {text}"
        );
    }

    #[test]
    fn other_versions_another_prefix_or_a_damaged_file_are_not_used() {
        let dir = tempfile::tempdir().unwrap();
        let known = map(&[("certs/a/current", 10)]);
        kept(dir.path(), &known, &known);
        assert!(prior(dir.path(), "/fleet/", &known).is_some());
        // The versions changed since (a value accepted at a new revision).
        assert!(prior(dir.path(), "/fleet/", &map(&[("certs/a/current", 13)])).is_none());
        assert!(prior(dir.path(), "/other/", &known).is_none());
        let path = dir.path().join(LISTING_FILE);
        let text = std::fs::read_to_string(&path).unwrap();
        // A replayed file of another revision stands only for the versions it names; a
        // forged one naming a key accepted but claiming it unlisted for a key it never had
        // makes nothing up.
        for garbage in [
            "".to_owned(),
            "{".to_owned(),
            "\u{0}\u{ff}".to_owned(),
            text.replace("\"format\":1", "\"format\":2"),
            text.replace("\"revision\":40", "\"revision\":0"),
            text.replace("\"unlisted\":[]", "\"unlisted\":[\"certs/z/state\"]"),
            text.replace("\"apart\":{}", "\"apart\":{\"certs/z/state\":-1}"),
            format!("{},\"more\":1}}", &text[..text.len() - 1]),
        ] {
            std::fs::write(&path, &garbage).unwrap();
            assert!(prior(dir.path(), "/fleet/", &known).is_none(), "{garbage}");
        }
        std::fs::write(&path, vec![b' '; MAX_FILE as usize + 1]).unwrap();
        assert!(prior(dir.path(), "/fleet/", &known).is_none());
    }

    /// The fuzz target's seed (`fuzz/corpus/fleet_local/seed-listing-made-up`) reaches a listing.
    #[test]
    fn the_fuzz_seed_makes_up_a_listing() {
        let path = Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("fuzz/corpus/fleet_local/seed-listing-made-up");
        let seed = std::fs::read(path).unwrap();
        let file: File = serde_json::from_slice(&seed[1..]).unwrap();
        let known = map(&[("certs/b/spec", 1), ("certs/x/state", 2)]);
        let listed = made_up(file, "/fleet/", &known).expect("made up");
        let expected = map(&[
            ("certs/a/state", 12),
            ("certs/c/retired", 30),
            ("certs/x/state", 2),
        ]);
        assert_eq!(listed.keys, expected);
        fuzz(&seed[1..]);
    }

    #[test]
    fn the_same_listing_at_a_later_revision_leaves_the_file_as_it_is() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join(LISTING_FILE);
        let known = map(&[("certs/a/current", 10), ("certs/a/state", 11)]);
        let listing = map(&[("certs/a/current", 10), ("certs/a/state", 12)]);
        keep(dir.path(), ("/fleet/", 7, 40), &listing, &known);
        let first = std::fs::read(&path).unwrap();
        // Nothing under certs/ changed: the listing at 45 is the one at 40.
        keep(dir.path(), ("/fleet/", 7, 45), &listing, &known);
        assert_eq!(std::fs::read(&path).unwrap(), first, "not written again");
        assert_eq!(prior(dir.path(), "/fleet/", &known).unwrap().revision, 40);
        // A file found damaged, or forged (another prefix, other versions, a listing of
        // other keys, a revision ahead of this one), is written over, not trusted.
        let forged = |text: &str| {
            std::fs::write(&path, text).unwrap();
            keep(dir.path(), ("/fleet/", 7, 45), &listing, &known);
            let made = prior(dir.path(), "/fleet/", &known).expect(text);
            assert_eq!((made.revision, &made.keys), (45, &listing), "{text}");
        };
        let kept = String::from_utf8(first.clone()).unwrap();
        forged("{\"format\":1,");
        forged("\u{0}\u{ff} not JSON");
        forged(&kept.replace("\"/fleet/\"", "\"/other/\""));
        forged(&kept.replace("\"known_sha256\":\"", "\"known_sha256\":\"00"));
        forged(&kept.replace("certs/a/state", "certs/b/state"));
        forged(&kept.replace("\"revision\":40", "\"revision\":50"));
        // An earlier revision than the kept one, another cluster or another listing: written.
        for (cluster, revision, listing) in [
            (7, 39, listing.clone()),
            (8, 50, listing.clone()),
            (
                7,
                60,
                map(&[("certs/a/current", 10), ("certs/a/state", 55)]),
            ),
        ] {
            keep(dir.path(), ("/fleet/", cluster, revision), &listing, &known);
            let prior = prior(dir.path(), "/fleet/", &known).unwrap();
            assert_eq!((prior.cluster, prior.revision), (cluster, revision));
            assert_eq!(prior.keys, listing);
        }
    }

    #[test]
    fn a_listing_too_far_from_the_versions_is_not_kept() {
        let dir = tempfile::tempdir().unwrap();
        let known = BTreeMap::new();
        let small = map(&[("certs/a/current", 10)]);
        kept(dir.path(), &small, &known);
        assert!(dir.path().join(LISTING_FILE).exists());
        let listing: BTreeMap<String, i64> = (0..=MAX_APART)
            .map(|i| (format!("certs/c{i}/current"), 5))
            .collect();
        kept(dir.path(), &listing, &known);
        assert!(
            !dir.path().join(LISTING_FILE).exists(),
            "removed, not kept stale"
        );
    }
}
