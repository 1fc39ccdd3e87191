use super::*;
use crate::store::CertRecord;

fn basis() -> Basis {
    Basis {
        version: "1.0.0".into(),
        config: "ab".repeat(32),
        options: "allow_orders=false".into(),
    }
}

/// A store with the record `www` and an installed leaf; the entry made from them.
fn setup() -> (tempfile::TempDir, Store, Entry) {
    let dir = tempfile::tempdir().unwrap();
    let store = Store::open(&dir.path().join("state")).unwrap();
    store.save(&CertRecord::new("www")).unwrap();
    let leaf = dir.path().join("fullchain.pem");
    std::fs::write(&leaf, "leaf").unwrap();
    let entry = Entry {
        name: "www".into(),
        until: 2_000_000_000,
        record: store.record_stamp("www").unwrap(),
        leaf: Some((leaf.clone(), FileStamp::of(&leaf).unwrap())),
        reason: "serial 01 valid until 2027-01-01".into(),
        crl: None,
    };
    (dir, store, entry)
}

const NOW: i64 = 1_900_000_000;

#[test]
fn an_entry_stands_while_its_record_and_leaf_are_unchanged_and_its_instant_is_ahead() {
    let (_d, store, entry) = setup();
    assert!(entry.stands(NOW, store.record_stamp("www")));
    save(&store, &basis(), vec![entry.clone()]);
    assert_eq!(
        super::super::mode_of(&store.dir().join(DUE_FILE)).unwrap(),
        0o600
    );
    let kept = DueSummary::load(&store, &basis());
    assert_eq!(kept.get("www"), Some(&entry));
}

#[test]
fn the_clock_passing_the_instant_ends_the_entry() {
    let (_d, store, entry) = setup();
    assert!(entry.stands(entry.until - 1, store.record_stamp("www")));
    assert!(!entry.stands(entry.until, store.record_stamp("www")));
    assert!(!entry.stands(entry.until + 86_400, store.record_stamp("www")));
}

#[test]
fn a_record_saved_again_ends_the_entry() {
    let (_d, store, entry) = setup();
    let mut rec = CertRecord::new("www");
    rec.failures = 1;
    store.save(&rec).unwrap();
    assert!(!entry.stands(NOW, store.record_stamp("www")));
}

#[test]
fn a_record_edited_in_place_ends_the_entry() {
    let (_d, store, entry) = setup();
    let path = store.dir().join("certs/www.json");
    let text = std::fs::read(&path).unwrap();
    // Same size, same inode: only the times tell.
    std::thread::sleep(std::time::Duration::from_millis(20));
    std::fs::write(&path, &text).unwrap();
    assert!(!entry.stands(NOW, store.record_stamp("www")));
}

#[test]
fn a_removed_record_ends_the_entry() {
    let (_d, store, entry) = setup();
    std::fs::remove_file(store.dir().join("certs/www.json")).unwrap();
    assert_eq!(store.record_stamp("www"), None);
    assert!(!entry.stands(NOW, store.record_stamp("www")));
}

#[test]
fn an_installed_leaf_edited_or_removed_ends_the_entry() {
    let (_d, store, entry) = setup();
    let (leaf, _) = entry.leaf.clone().unwrap();
    std::thread::sleep(std::time::Duration::from_millis(20));
    std::fs::write(&leaf, "other").unwrap();
    assert!(!entry.stands(NOW, store.record_stamp("www")));
    std::fs::remove_file(&leaf).unwrap();
    assert!(!entry.stands(NOW, store.record_stamp("www")));
}

#[test]
fn another_basis_means_no_summary() {
    let (_d, store, entry) = setup();
    save(&store, &basis(), vec![entry]);
    let changed = [
        Basis {
            version: "1.0.1".into(),
            ..basis()
        },
        Basis {
            config: "cd".repeat(32),
            ..basis()
        },
        Basis {
            options: "allow_orders=true".into(),
            ..basis()
        },
    ];
    for b in changed {
        assert!(DueSummary::load(&store, &b).is_empty(), "{b:?}");
    }
    assert_eq!(DueSummary::load(&store, &basis()).len(), 1);
}

#[test]
fn garbage_truncated_or_forged_summaries_are_ignored() {
    let (_d, store, entry) = setup();
    save(&store, &basis(), vec![entry.clone()]);
    let path = store.dir().join(DUE_FILE);
    let good = std::fs::read(&path).unwrap();
    let text = String::from_utf8(good.clone()).unwrap();
    let mut bad: Vec<Vec<u8>> = vec![
        Vec::new(),
        b"\x00\xff garbage".to_vec(),
        b"[]".to_vec(),
        b"{\"format\":2}".to_vec(),
        text.replace("\"format\":2", "\"format\":1").into_bytes(),
        text.replace("\"format\":2", "\"format\":3").into_bytes(),
        // A name that cannot be a certificate's (a path).
        text.replace("\"name\":\"www\"", "\"name\":\"../www\"")
            .into_bytes(),
        // The same certificate twice.
        text.replace(
            "\"certificates\":[",
            &format!(
                "\"certificates\":[{},",
                serde_json::to_string(&entry).unwrap()
            ),
        )
        .into_bytes(),
        // An instant beyond what the file format holds.
        text.replace("2000000000", "1e400").into_bytes(),
    ];
    for cut in [1, good.len() / 2, good.len() - 1] {
        bad.push(good[..cut].to_vec());
    }
    for bytes in &bad {
        std::fs::write(&path, bytes).unwrap();
        assert!(
            DueSummary::load(&store, &basis()).is_empty(),
            "{}",
            String::from_utf8_lossy(bytes)
        );
    }
    std::fs::write(&path, &good).unwrap();
    assert_eq!(DueSummary::load(&store, &basis()).len(), 1);
}

#[test]
fn a_forged_entry_for_a_changed_record_does_not_stand() {
    // A summary written by someone else, claiming a later instant for a record that is not
    // the one stamped: the record's stamp decides.
    let (_d, store, mut entry) = setup();
    entry.until = i64::MAX;
    entry.record.ino ^= 1;
    save(&store, &basis(), vec![entry]);
    let kept = DueSummary::load(&store, &basis());
    let e = kept.get("www").unwrap();
    assert!(!e.stands(NOW, store.record_stamp("www")));
}

#[test]
fn a_summary_others_may_write_or_a_link_is_ignored() {
    use std::os::unix::fs::PermissionsExt;
    let (d, store, entry) = setup();
    save(&store, &basis(), vec![entry]);
    let path = store.dir().join(DUE_FILE);
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o666)).unwrap();
    assert!(DueSummary::load(&store, &basis()).is_empty());
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o600)).unwrap();
    let elsewhere = d.path().join("elsewhere.json");
    std::fs::rename(&path, &elsewhere).unwrap();
    std::os::unix::fs::symlink(&elsewhere, &path).unwrap();
    assert!(DueSummary::load(&store, &basis()).is_empty());
}

#[test]
fn a_stamp_tells_a_recent_change() {
    let (_d, store, _) = setup();
    let s = store.record_stamp("www").unwrap();
    assert!(s.changed_since(0));
    assert!(!s.changed_since(i128::MAX));
}

/// A summary whose ignored field holds bytes that are not UTF-8 (found by the fuzz target) is
/// not used.
#[test]
fn a_summary_that_is_not_utf8_is_ignored() {
    let basis = Basis {
        version: "1.0.0".into(),
        config: "ab".repeat(32),
        options: "allow_orders=false".into(),
    };
    let good = format!(
        "{{\"format\":2,\"basis\":{},\"certificates\":[],\"extra\":\"x\"}}",
        serde_json::to_string(&basis).unwrap()
    );
    assert!(DueSummary::parse(good.as_bytes(), &basis).is_some());
    let mut bad = good.into_bytes();
    let at = bad.len() - 3;
    bad[at] = 0x97;
    assert!(DueSummary::parse(&bad, &basis).is_none());
}

fn express(certificates: usize) -> Express {
    Express {
        config: "/etc/cert-agent/config.toml".into(),
        config_mode: 0o600,
        state_dir: "/var/lib/cert-agent".into(),
        include: vec!["conf.d/*.toml".into()],
        allow_orders: false,
        revocation: true,
        crl_limits: (1 << 20, 3600),
        warnings: vec!["a warning".into()],
        programs: vec!["/usr/sbin/nginx".into()],
        certificates,
    }
}

/// The express part is read back as written, with the entries in the order given (the
/// configuration's), by a run that has not parsed the configuration and by one that has.
#[test]
fn the_express_part_is_read_back_with_the_entries_in_order() {
    let (_d, store, www) = setup();
    let mut api = www.clone();
    api.name = "api".into();
    save_with(
        &store,
        &basis(),
        &[www.clone(), api.clone()],
        Some(&express(2)),
        &CrlParts::default(),
    );
    let read = ExpressSummary::load(&store).unwrap();
    assert_eq!(read.basis, basis());
    assert_eq!(read.express, express(2));
    assert_eq!(read.certificates, [www.clone(), api.clone()]);
    let full = DueSummary::load(&store, &basis());
    assert_eq!(full.express(), Some(&express(2)));
    assert_eq!(full.get("api"), Some(&api));
    // Without an express part (a configuration with metrics, say): none for the express run.
    save(&store, &basis(), vec![www]);
    assert!(ExpressSummary::load(&store).is_none());
    assert_eq!(DueSummary::load(&store, &basis()).len(), 1);
}

/// A summary whose express part does not account for every certificate, names one twice or
/// one that cannot be a certificate's, or is damaged, is not used by the express run.
#[test]
fn an_express_part_that_does_not_add_up_is_ignored() {
    let (_d, store, www) = setup();
    let mut dup = vec![www.clone(), www.clone()];
    let mut bad_name = www.clone();
    bad_name.name = "../www".into();
    let cases: Vec<(Vec<Entry>, usize)> = vec![
        (vec![www.clone()], 2),
        (vec![www.clone()], 0),
        (std::mem::take(&mut dup), 2),
        (vec![bad_name], 1),
    ];
    for (entries, count) in cases {
        save_with(
            &store,
            &basis(),
            &entries,
            Some(&express(count)),
            &CrlParts::default(),
        );
        assert!(
            ExpressSummary::load(&store).is_none(),
            "{entries:?} {count}"
        );
    }
    save_with(
        &store,
        &basis(),
        &[www],
        Some(&express(1)),
        &CrlParts::default(),
    );
    let path = store.dir().join(DUE_FILE);
    let good = std::fs::read(&path).unwrap();
    assert!(ExpressSummary::parse(&good).is_some());
    for cut in [0, 1, good.len() / 2, good.len() - 1] {
        assert!(
            ExpressSummary::parse(&good[..cut]).is_none(),
            "cut at {cut}"
        );
    }
    let text = String::from_utf8(good).unwrap();
    for forged in [
        text.replace("\"format\":2", "\"format\":1"),
        text.replace("\"certificates\":1", "\"certificates\":-1"),
        text.replace("\"allow_orders\":false", "\"allow_orders\":0"),
    ] {
        assert!(
            ExpressSummary::parse(forged.as_bytes()).is_none(),
            "{forged}"
        );
    }
}

/// An entry's CRL reference and its issuer are read back as written; an issuer whose bytes
/// are not what its key says (damaged or forged) is left out, so the entries naming it take
/// the full path; a summary of the previous layout (no CRL reference, a CRL store stamp in
/// its basis) still loads, its entries without a reference.
#[test]
fn crl_references_and_their_issuers_read_back_and_a_forged_issuer_is_dropped() {
    let (_d, store, mut entry) = setup();
    let issuer = b"issuer certificate DER".to_vec();
    let key = issuer_key(&issuer);
    entry.crl = Some(CrlRef {
        serial: "0A1B".into(),
        issuer: key.clone(),
        urls: vec!["http://crl.example.net/ca.crl".into()],
        state: "good".into(),
    });
    let mut issuers = Issuers::new();
    issuers.insert(key.clone(), issuer.clone());
    issuers.insert(issuer_key(b"unused"), b"unused".to_vec());
    let parts = CrlParts {
        issuers,
        crls: Vec::new(),
    };
    save_with(&store, &basis(), &[entry.clone()], None, &parts);
    let kept = DueSummary::load(&store, &basis());
    assert_eq!(kept.get("www"), Some(&entry));
    assert_eq!(kept.issuer(&key), Some(issuer.as_slice()));
    let path = store.dir().join(DUE_FILE);
    let text = std::fs::read_to_string(&path).unwrap();
    assert!(
        !text.contains(&hex::encode(b"unused")),
        "only named issuers"
    );

    let forged = text.replace(&hex::encode(&issuer), &hex::encode(b"another issuer"));
    let read = DueSummary::parse(forged.as_bytes(), &basis()).unwrap();
    assert_eq!(read.issuer(&key), None);
    assert_eq!(read.get("www"), Some(&entry));

    let mut v: serde_json::Value = serde_json::from_str(&text).unwrap();
    v["basis"]["crl"] = serde_json::to_value(store.record_stamp("www")).unwrap();
    v.as_object_mut().unwrap().remove("issuers");
    v["certificates"][0].as_object_mut().unwrap().remove("crl");
    let old = DueSummary::parse(v.to_string().as_bytes(), &basis()).unwrap();
    assert_eq!(old.get("www").and_then(|e| e.crl.as_ref()), None);
}
