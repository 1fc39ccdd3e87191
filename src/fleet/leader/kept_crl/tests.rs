use std::path::Path;

use super::*;
use crate::store::CertRecord;

const NOW: i64 = 1_900_000_000;

fn basis() -> Basis {
    Basis {
        version: env!("CARGO_PKG_VERSION").into(),
        config: "ab".repeat(32),
        options: OPTIONS.into(),
    }
}

fn installed(leaf: &Path, serial: &str) -> Installed {
    let at = OffsetDateTime::from_unix_timestamp(NOW).unwrap();
    Installed {
        serial: serial.into(),
        not_before: at,
        not_after: at + time::Duration::days(90),
        certificate_id: 1,
        files: vec![leaf.to_path_buf()],
        installed_at: at,
        leaf_file: Some(leaf.to_path_buf()),
        leaf_stamp: FileStamp::of(leaf),
    }
}

/// A store with the record `www`, its installed leaf, and the follower's file keeping its
/// reference (serial `0A01`, issuer `issuer-der`) written and read back.
fn setup() -> (tempfile::TempDir, Store, Installed) {
    let dir = tempfile::tempdir().unwrap();
    let store = Store::open(&dir.path().join("state")).unwrap();
    store.save(&CertRecord::new("www")).unwrap();
    let leaf = dir.path().join("fullchain.pem");
    std::fs::write(&leaf, "leaf").unwrap();
    let inst = installed(&leaf, "0A01");
    let crl = CrlRef {
        serial: "0A01".into(),
        issuer: due::issuer_key(b"issuer-der"),
        urls: vec!["http://crl.example/ca.crl".into()],
        state: "good".into(),
    };
    let entry = Entry {
        name: "www".into(),
        until: inst.not_after.unix_timestamp(),
        record: store.record_stamp("www").unwrap(),
        leaf: Some((leaf.clone(), inst.leaf_stamp.unwrap())),
        reason: String::new(),
        crl: Some(crl),
    };
    let mut issuers = Issuers::new();
    issuers.insert(due::issuer_key(b"issuer-der"), b"issuer-der".to_vec());
    let parts = CrlParts {
        issuers,
        crls: Vec::new(),
    };
    due::save_to(&store, FOLLOWER_FILE, &basis(), &[entry], None, &parts);
    (dir, store, inst)
}

fn at(t: i64) -> OffsetDateTime {
    OffsetDateTime::from_unix_timestamp(t).unwrap()
}

#[test]
fn a_kept_reference_stands_for_the_same_serial_and_leaf() {
    let (_d, store, inst) = setup();
    let file = DueSummary::load_file(&store, FOLLOWER_FILE, &basis());
    let (entry, crl, issuer) = kept(&file, "www", &inst, at(NOW)).expect("stands");
    assert_eq!(entry.name, "www");
    assert_eq!(crl.urls, ["http://crl.example/ca.crl"]);
    assert_eq!(issuer, b"issuer-der");
    // The same serial written otherwise (leading zero, case) is the same certificate.
    let mut other = inst.clone();
    other.serial = "00a01".into();
    assert!(kept(&file, "www", &other, at(NOW)).is_some());
}

#[test]
fn another_serial_leaf_or_time_means_the_files_are_read() {
    let (_d, store, inst) = setup();
    let file = DueSummary::load_file(&store, FOLLOWER_FILE, &basis());
    // Another certificate installed (the record names another serial).
    let mut other = inst.clone();
    other.serial = "0A02".into();
    assert!(kept(&file, "www", &other, at(NOW)).is_none());
    // The certificate's end passed.
    assert!(kept(&file, "www", &inst, inst.not_after).is_none());
    // Another name.
    assert!(kept(&file, "api", &inst, at(NOW)).is_none());
    // The leaf rewritten (a new stamp) or named otherwise by the record.
    let leaf = inst.leaf_file.clone().unwrap();
    let mut moved = inst.clone();
    moved.leaf_file = Some(leaf.with_file_name("cert.pem"));
    assert!(kept(&file, "www", &moved, at(NOW)).is_none());
    std::thread::sleep(std::time::Duration::from_millis(20));
    std::fs::write(&leaf, "another leaf").unwrap();
    assert!(kept(&file, "www", &inst, at(NOW)).is_none());
}

#[test]
fn a_foreign_replayed_or_damaged_file_is_not_used() {
    let (_d, store, inst) = setup();
    let path = store.dir().join(FOLLOWER_FILE);
    // Written for another configuration, or by another version: not used.
    for other in [
        Basis {
            config: "cd".repeat(32),
            ..basis()
        },
        Basis {
            version: "0.0.1".into(),
            ..basis()
        },
        Basis {
            options: "allow_orders=true,fleet-leader".into(),
            ..basis()
        },
    ] {
        assert!(DueSummary::load_file(&store, FOLLOWER_FILE, &other).is_empty());
    }
    // The leader's summary is not the follower's (and the other way round).
    assert!(DueSummary::load(&store, &basis()).is_empty());
    // Garbage, a truncated file, an issuer it does not hold.
    let good = std::fs::read(&path).unwrap();
    for bad in [
        b"garbage".to_vec(),
        good[..good.len() / 2].to_vec(),
        String::from_utf8(good.clone())
            .unwrap()
            .replace(&hex::encode(b"issuer-der"), &hex::encode(b"forged-der"))
            .into_bytes(),
    ] {
        crate::fsutil::write_atomic(&path, &bad, 0o600).unwrap();
        let file = DueSummary::load_file(&store, FOLLOWER_FILE, &basis());
        let found = kept(&file, "www", &inst, at(NOW));
        assert!(
            found.is_none_or(|(_, _, issuer)| issuer != b"forged-der"),
            "a forged issuer was taken"
        );
    }
}
