//! Entry points for the fuzz target `fleet_values` (fuzz/fuzz_targets/fleet_values.rs): the
//! parsers of what a host reads from etcd (an envelope, and the documents inside one) and of
//! `state_dir/fleet-versions.json`, on any bytes; and, for the fuzz target `fleet_manifest`
//! (fuzz/fuzz_targets/fleet_manifest.rs), a host's entry of the fleet's manifest and the floor
//! taken from it; and, for the fuzz target `fleet_acme_account`
//! (fuzz/fuzz_targets/fleet_acme_account.rs), the fleet's ACME account value; and, for the fuzz
//! target `fleet_chain` (fuzz/fuzz_targets/fleet_chain.rs), an issuer certificate's value at
//! `chains/SHA256`. Each must refuse what it cannot read, never panic, and read back what it
//! writes (a document's lean JSON too, [`super::compact`]). Not an interface of the agent.

use std::path::PathBuf;

use super::envelope::{self, Place, Purpose};
use super::key::{FleetKey, FleetKeys, KEY_LEN};
use super::manifest::{ManifestEntry, floors};
use super::schema::{
    Current, DcvEntry, HostResult, HostSeen, Kind, SharedState, Spec, Tombstone, Unplaced,
};
use super::versions::Versions;

/// `data` read as a `T`; when it is one, its JSON as the fleet writes it ([`super::compact`])
/// reads back as the same document.
fn compact_reads_back<T: serde::Serialize + serde::de::DeserializeOwned>(data: &[u8]) {
    let Ok(doc) = serde_json::from_slice::<T>(data) else {
        return;
    };
    let Ok(compact) = super::compact::to_vec(&doc) else {
        panic!("a document read is written back");
    };
    let back = serde_json::from_slice::<T>(&compact)
        .unwrap_or_else(|e| panic!("the compact JSON does not read back: {e}"));
    assert_eq!(
        serde_json::to_value(&back).ok(),
        serde_json::to_value(&doc).ok(),
        "the compact JSON reads back as another document"
    );
}

/// `data` as a value read from etcd at every kind of key; and `data` sealed, opened back.
pub fn envelope(data: &[u8]) {
    let (Some(current), Some(previous)) = (
        FleetKey::from_bytes(&[0x5a; KEY_LEN]),
        FleetKey::from_bytes(&[0x11; KEY_LEN]),
    ) else {
        panic!("a key of {KEY_LEN} bytes is a key");
    };
    let keys = FleetKeys::new(current, Some(previous));
    for rel in [
        "keycheck",
        "certs/www/spec",
        "certs/www/state",
        "certs/www/current",
        "certs/www/retired",
        "dcv/www",
        "hosts/web1/certs/www",
        "hosts/web1/seen",
        "hosts/web1/unplaced/www",
        "manifest/web1",
        "acme/pebble/account",
        "hosts/web1/dcv/www",
        "hosts/web1/proof/www",
        "hosts/web1/rollout/www",
        "chains/0000000000000000000000000000000000000000000000000000000000000000",
    ] {
        let Some(kind) = Kind::of(rel) else {
            panic!("{rel} is a key of the fleet");
        };
        let _ = envelope::open_raw(&keys, &kind.place(rel), data);
    }
    let place = Place::new(Purpose::State, "certs/www/state", "www");
    let Ok(sealed) = envelope::seal(&keys, &place, 7, data) else {
        panic!("sealing does not fail");
    };
    match envelope::open_raw(&keys, &place, &sealed) {
        Ok((7, plain, _)) => assert_eq!(plain, data, "opens back as sealed"),
        other => panic!("a sealed value does not open back: {other:?}"),
    }
    compact_reads_back::<SharedState>(data);
    compact_reads_back::<Current>(data);
    compact_reads_back::<DcvEntry>(data);
    compact_reads_back::<HostResult>(data);
    compact_reads_back::<Spec>(data);
    compact_reads_back::<Unplaced>(data);
    host_seen(&keys, data);
    tombstone(&keys, data);
    proof(&keys, data);
    decision(&keys, data);
}

/// `data` as a rollout decision: opened at a decision's key (refused, never a panic); one
/// that reads is sealed for its host's key, opens back the same there (dated from 1970 on),
/// and is refused at another host's or another certificate's.
fn decision(keys: &FleetKeys, data: &[u8]) {
    use super::decision::{Decision, open_at, seal};
    let full = "/cert-agent/hosts/web1/rollout/www";
    let _ = open_at(keys, full, "hosts/web1/rollout/www", data);
    let Ok(mut d) = serde_json::from_slice::<Decision>(data) else {
        return;
    };
    d.host = "web1".into();
    let Ok((rel, sealed)) = seal(keys, "www", &d) else {
        panic!("a decision that reads is written");
    };
    match open_at(keys, full, &rel, &sealed) {
        Ok(again) => assert_eq!(
            (again.verdict, again.at),
            (d.verdict, d.at),
            "reads back the same"
        ),
        Err(e) => assert!(
            d.at.unix_timestamp() < 0,
            "a sealed decision does not open back: {e:#}"
        ),
    }
    for other in ["hosts/web2/rollout/www", "hosts/web1/rollout/shop"] {
        assert!(
            open_at(keys, other, other, &sealed).is_err(),
            "a decision opens at {other}"
        );
    }
}

/// `data` as a host's proof: opened at a proof's key (refused, never a panic); one that reads
/// is sealed for its host's key, opens back the same there, and is refused at another host's.
fn proof(keys: &FleetKeys, data: &[u8]) {
    let full = "/cert-agent/hosts/web1/proof/www";
    let _ = super::proof::open_at(keys, full, "hosts/web1/proof/www", data);
    let Ok(mut proof) = serde_json::from_slice::<super::proof::Proof>(data) else {
        return;
    };
    proof.host = "web1".into();
    let Ok((rel, sealed)) = super::proof::seal(keys, "www", &proof) else {
        panic!("a proof that reads is written");
    };
    match super::proof::open_at(keys, full, &rel, &sealed) {
        Ok(again) => assert_eq!(again, proof.clone().printable(), "reads back the same"),
        Err(e) => panic!("a sealed proof does not open back: {e:#}"),
    }
    let other = "hosts/web2/proof/www";
    assert!(
        super::proof::open_at(keys, other, other, &sealed).is_err(),
        "another host's proof opens"
    );
}

/// `data` as a host's `seen` record: one that reads is sealed for its place, opens back and
/// reads back the same; it never opens as another host's.
fn host_seen(keys: &FleetKeys, data: &[u8]) {
    let Ok(seen) = serde_json::from_slice::<HostSeen>(data) else {
        return;
    };
    let place = Place::new(Purpose::HostSeen, "hosts/web1/seen", "");
    let Ok(sealed) = envelope::seal_json(keys, &place, 9, &seen) else {
        panic!("a seen record that reads is written");
    };
    match envelope::open_raw(keys, &place, &sealed) {
        Ok((9, plain, _)) => match serde_json::from_slice::<HostSeen>(&plain) {
            Ok(again) => assert_eq!(again, seen, "reads back the same"),
            Err(e) => panic!("what is written does not read back: {e}"),
        },
        other => panic!("a sealed seen record does not open back: {other:?}"),
    }
    let other = Place::new(Purpose::HostSeen, "hosts/web2/seen", "");
    assert!(envelope::open_raw(keys, &other, &sealed).is_err());
}

/// `data` as a tombstone's document: one that reads is sealed for its place, opens back and
/// reads back the same; it never opens at another certificate's key or as another purpose.
fn tombstone(keys: &FleetKeys, data: &[u8]) {
    let Ok(t) = serde_json::from_slice::<Tombstone>(data) else {
        return;
    };
    let place = Place::new(Purpose::Retired, "certs/www/retired", "www");
    let Ok(sealed) = envelope::seal_json(keys, &place, 3, &t) else {
        panic!("a tombstone that reads is written");
    };
    match envelope::open_raw(keys, &place, &sealed) {
        Ok((3, plain, _)) => match serde_json::from_slice::<Tombstone>(&plain) {
            Ok(again) => assert_eq!(again, t, "reads back the same"),
            Err(e) => panic!("what is written does not read back: {e}"),
        },
        other => panic!("a sealed tombstone does not open back: {other:?}"),
    }
    for other in [
        Place::new(Purpose::Retired, "certs/shop/retired", "shop"),
        Place::new(Purpose::State, "certs/www/retired", "www"),
    ] {
        assert!(envelope::open_raw(keys, &other, &sealed).is_err());
    }
}

/// `data` as a host's manifest entry: as a sealed value at `manifest/web1` (opened with two
/// keys held), and as the entry's document. One that reads is sealed for its place, opens back
/// and reads back the same, never opens as another host's entry or as another purpose; the
/// floor taken from it and a second entry is at least what either vouches for, and names a
/// host that vouched for it.
pub fn manifest(data: &[u8]) {
    let (Some(current), Some(previous)) = (
        FleetKey::from_bytes(&[0x5a; KEY_LEN]),
        FleetKey::from_bytes(&[0x11; KEY_LEN]),
    ) else {
        panic!("a key of {KEY_LEN} bytes is a key");
    };
    let keys = FleetKeys::new(current, Some(previous));
    let place = Place::new(Purpose::Manifest, "manifest/web1", "");
    if let Ok((_, plain, _)) = envelope::open_raw(&keys, &place, data) {
        let _ = serde_json::from_slice::<ManifestEntry>(&plain);
    }
    let Ok(entry) = serde_json::from_slice::<ManifestEntry>(data) else {
        return;
    };
    let Ok(sealed) = envelope::seal_json(&keys, &place, 5, &entry) else {
        panic!("an entry that reads is written");
    };
    match envelope::open_raw(&keys, &place, &sealed) {
        Ok((5, plain, _)) => match serde_json::from_slice::<ManifestEntry>(&plain) {
            Ok(again) => assert_eq!(again, entry, "reads back the same"),
            Err(e) => panic!("what is written does not read back: {e}"),
        },
        other => panic!("a sealed entry does not open back: {other:?}"),
    }
    for other in [
        Place::new(Purpose::Manifest, "manifest/web2", ""),
        Place::new(Purpose::HostSeen, "manifest/web1", ""),
    ] {
        assert!(envelope::open_raw(&keys, &other, &sealed).is_err());
    }
    let mut second = entry.clone();
    for v in second.certs.values_mut() {
        v.current = v.current.saturating_add(1);
    }
    let names: Vec<String> = entry.certs.keys().take(8).cloned().collect();
    let entries = vec![("web1".to_owned(), entry), ("web2".to_owned(), second)];
    let taken = floors(&entries, &names);
    for name in &names {
        let Some(floor) = taken.get(name) else {
            panic!("'{name}' is vouched for but has no floor");
        };
        assert!(!floor.by.is_empty(), "a floor names who vouched for it");
        for (_, e) in &entries {
            let v = e.certs[name];
            assert_eq!(floor.versions.max(v), floor.versions, "the highest of each");
        }
    }
}

/// `data` as `fleet-versions.json`: what reads is written and read back the same.
pub fn versions(data: &[u8]) {
    let path = PathBuf::from("/var/lib/cert-agent/fleet-versions.json");
    match Versions::parse(path.clone(), data) {
        Ok(v) => {
            let Ok(bytes) = v.to_bytes() else {
                panic!("what reads is written");
            };
            match Versions::parse(path, &bytes) {
                Ok(again) => assert!(again.same_as(&v), "reads back the same"),
                Err(e) => panic!("what is written does not read back: {e:#}"),
            }
        }
        Err(e) => {
            let text = format!("{e:#}");
            assert!(text.contains("fleet-versions.json"), "{text}");
        }
    }
}

/// `data` as the state directory's own fleet files the checks read: the lead this host saw
/// (`fleet-lead.json`; the first byte 0 modulo 16), the hosts whose audit log went back
/// (`fleet-audit-rewound.json`; odd), this host's leads (`fleet-leads.json`; 2 modulo 4) or
/// the certificates whose last proof here failed (`proofs-failed.json`; 4 modulo 8) or the
/// listing of the last synchronisation (`fleet-listing.json`; 8 modulo 16).
/// Never panics; what reads is written and read back the same, a lead that reads is judged
/// against any limit, and the leads' CRL turn at any time, without a panic.
pub fn local(data: &[u8]) {
    let Some((&which, rest)) = data.split_first() else {
        return;
    };
    if which % 2 == 1 {
        super::audit_watch::fuzz(rest);
        return;
    }
    if which % 4 == 2 {
        leads(rest);
        return;
    }
    if which % 8 == 4 {
        super::proof::fuzz_failed(rest);
        return;
    }
    if which % 16 == 8 {
        super::follower::fuzz_listing(rest);
        return;
    }
    let Some(lead) = super::lead_age::parse(rest) else {
        return;
    };
    let Ok(bytes) = serde_json::to_vec(&lead) else {
        panic!("what reads is written");
    };
    assert_eq!(
        super::lead_age::parse(&bytes),
        Some(lead.clone()),
        "reads back the same"
    );
    for limit in [0, 10, u64::MAX] {
        let _ = super::lead_age::stuck(&lead, limit);
    }
}

/// `data` as `fleet-leads.json`: what reads is written and read back the same, and its CRL
/// turn is judged at any time and interval without a panic.
fn leads(data: &[u8]) {
    let Some(leads) = super::leads::parse(data) else {
        return;
    };
    let Ok(bytes) = serde_json::to_vec(&leads) else {
        panic!("what reads is written");
    };
    assert_eq!(
        super::leads::parse(&bytes),
        Some(leads.clone()),
        "reads back the same"
    );
    let t = time::OffsetDateTime::UNIX_EPOCH;
    for now in [t, t + time::Duration::days(20_000)] {
        for refresh in [None, Some(0), Some(1), Some(u64::MAX)] {
            let _ = super::leads::due(&leads, "web1", refresh, now);
        }
    }
}

/// `data` as the fleet's ACME account value at `acme/pebble/account`, and as the account file
/// sealed inside a well-formed value: accepted only when the bytes are an account file of the
/// configured directory naming the account the value names, and then as they were sealed.
pub fn acme_account(data: &[u8]) {
    use super::schema::{AcmeAccountDoc, DcvServed, b64};
    let Some(current) = FleetKey::from_bytes(&[0x5a; KEY_LEN]) else {
        panic!("a key of {KEY_LEN} bytes is a key");
    };
    let keys = FleetKeys::new(current, None);
    let (rel, full, dir) = (
        "acme/pebble/account",
        "/f/acme/pebble/account",
        "https://acme.test/dir",
    );
    let _ = super::acme::check_account_value(&keys, full, "pebble", dir, data);
    let _ = serde_json::from_slice::<AcmeAccountDoc>(data);
    let _ = serde_json::from_slice::<Vec<DcvServed>>(data);
    let checked = crate::issuer::acme::check_account_bytes(data, dir);
    let key_place = Place::new(Purpose::AcmeAccountKey, rel, "pebble");
    let Ok(sealed) = envelope::seal(&keys, &key_place, 1, data) else {
        panic!("sealing does not fail");
    };
    let doc = AcmeAccountDoc {
        directory: dir.to_owned(),
        account_url: checked
            .clone()
            .unwrap_or_else(|_| "https://acme.test/acct/1".into()),
        credentials: b64(&sealed),
        registered_by: "web1".into(),
        registered_at: time::OffsetDateTime::UNIX_EPOCH,
    };
    let place = Place::new(Purpose::AcmeAccount, rel, "pebble");
    let Ok(value) = envelope::seal_json(&keys, &place, 1, &doc) else {
        panic!("sealing does not fail");
    };
    match super::acme::check_account_value(&keys, full, "pebble", dir, &value) {
        Ok(bytes) => {
            assert!(checked.is_ok(), "accepted what is not an account file");
            assert_eq!(bytes, data, "opens back as sealed");
        }
        Err(e) => {
            assert!(checked.is_err(), "refused an account file: {e:#}");
            assert!(format!("{e:#}").contains(full), "names the key: {e:#}");
        }
    }
    // Moved to another CA's key: refused.
    assert!(super::acme::check_account_value(&keys, full, "other", dir, &value).is_err());
}

/// `data` as the value at `chains/SHA256` (for its own hash, another, and a key that is no
/// hash), and as a certificate's DER sealed there: it opens back only at its own hash, as
/// sealed, and the chain rebuilt with it is read without a panic.
pub fn chain_value(data: &[u8]) {
    use super::chains;
    let Some(current) = FleetKey::from_bytes(&[0x5a; KEY_LEN]) else {
        panic!("a key of {KEY_LEN} bytes is a key");
    };
    let keys = FleetKeys::new(current, None);
    let hash = chains::hash_of(data);
    let other = chains::hash_of(b"another certificate");
    let _ = chains::open_raw(&keys, &hash, data);
    let _ = chains::open_raw(&keys, &other, data);
    if let Ok(text) = std::str::from_utf8(data) {
        assert!(chains::open_raw(&keys, text, data).is_err() || chains::is_hash(text));
    }
    let Ok((rel, sealed)) = chains::seal(&keys, data, 2) else {
        panic!("sealing does not fail");
    };
    assert_eq!(rel, format!("chains/{hash}"));
    match chains::open_raw(&keys, &hash, &sealed) {
        Ok((2, der)) => assert_eq!(der, data, "opens back as sealed"),
        other => panic!("a sealed value does not open back: {other:?}"),
    }
    if hash != other {
        assert!(
            chains::open_raw(&keys, &other, &sealed).is_err(),
            "opens at another hash"
        );
    }
    let pem = chains::chain_pem("", &[data]);
    let expected = crate::bundle::Expected {
        public_key_der: &[],
        domains: &[],
        now: time::OffsetDateTime::UNIX_EPOCH,
        trust_anchors: &[],
    };
    let _ =
        crate::bundle::validate_chain(pem.as_bytes(), crate::bundle::ServerKind::Nginx, &expected);
}

#[cfg(test)]
mod tests {
    /// The issuer certificates' seeds, whole and cut: none panics.
    #[test]
    fn the_chain_fuzz_seeds_read_without_a_panic() {
        let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("fuzz/corpus/fleet_chain");
        let mut seeds = 0;
        for entry in std::fs::read_dir(dir).unwrap() {
            let data = std::fs::read(entry.unwrap().path()).unwrap();
            seeds += 1;
            for cut in [data.len(), data.len() / 2, 0] {
                super::chain_value(&data[..cut]);
            }
        }
        assert!(seeds >= 3);
    }

    /// The seeds of the fuzz target, and a few cut or altered: none panics.
    #[test]
    fn the_fuzz_seeds_read_without_a_panic() {
        let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("fuzz/corpus/fleet_values");
        let mut seeds = 0;
        for entry in std::fs::read_dir(dir).unwrap() {
            let data = std::fs::read(entry.unwrap().path()).unwrap();
            seeds += 1;
            for cut in [data.len(), data.len() / 2, 1] {
                let rest = &data[1..cut.max(1)];
                super::envelope(rest);
                super::versions(rest);
                super::manifest(rest);
                crate::monitor::fuzz_announced(rest);
            }
        }
        assert!(seeds >= 4);
    }

    /// The local files' seeds, whole and cut: none panics.
    #[test]
    fn the_local_fuzz_seeds_read_without_a_panic() {
        let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("fuzz/corpus/fleet_local");
        let mut seeds = 0;
        for entry in std::fs::read_dir(dir).unwrap() {
            let data = std::fs::read(entry.unwrap().path()).unwrap();
            seeds += 1;
            for cut in [data.len(), data.len() / 2, 0] {
                super::local(&data[..cut]);
            }
        }
        assert!(seeds >= 3);
    }

    /// The manifest's seeds, whole and cut: none panics.
    #[test]
    fn the_manifest_fuzz_seeds_read_without_a_panic() {
        let dir =
            std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("fuzz/corpus/fleet_manifest");
        let mut seeds = 0;
        for entry in std::fs::read_dir(dir).unwrap() {
            let data = std::fs::read(entry.unwrap().path()).unwrap();
            seeds += 1;
            for cut in [data.len(), data.len() / 2, 0] {
                super::manifest(&data[..cut]);
            }
        }
        assert!(seeds >= 2);
    }
}
