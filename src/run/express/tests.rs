//! Each cause that must send a `renew` down the full path, against a real configuration (a
//! main file including `conf.d/*.toml`), its state directory and a summary written as a run
//! writes it.

use std::fs;
use std::path::{Path, PathBuf};

use super::*;
use crate::config::{Config, testing};
use crate::store::FileStamp;
use crate::store::due::{Basis, CrlParts, CrlRef, Entry, save_with};

/// A certificate `name` for `NAME.example.com`.
fn site(name: &str) -> String {
    testing::site(name, &format!("{name}.example.com"))
}

fn settle() {
    std::thread::sleep(Duration::from_millis(1100));
}

const HOUR: i64 = 3600;

/// A configuration of `a` (in the main file) and `b`, `c` (included), their records, `b`'s
/// installed leaf, and the summary a run that found them quiet writes.
struct Host {
    dir: tempfile::TempDir,
    main: PathBuf,
    store: Store,
    leaf: PathBuf,
    /// What the entries keep for the CRL check.
    crl_ref: CrlRef,
    /// The CRLs the summary says its run read.
    crls: Vec<crate::store::due::KeptCrl>,
}

impl Host {
    fn new() -> Self {
        let (dir, main) = testing::with_conf_d(
            &format!("\n{}", site("a")),
            &[("b.toml", site("b")), ("c.toml", site("c"))],
        );
        let state = dir.path().join("state");
        let leaf = dir.path().join("leaf.pem");
        fs::write(&leaf, "leaf").unwrap();
        let store = Store::open(&state).unwrap();
        let host = Self {
            dir,
            main,
            store,
            leaf,
            crl_ref: no_crl(),
            crls: Vec::new(),
        };
        host.summarise();
        host
    }

    /// Writes the summary for the configuration and records as they are now.
    fn summarise(&self) {
        settle();
        let config = Config::load(&self.main).unwrap();
        let names: Vec<&str> = config
            .certificates
            .iter()
            .map(|c| c.name.as_str())
            .collect();
        assert_eq!(names, ["a", "b", "c"]);
        let now = time::OffsetDateTime::now_utc().unix_timestamp();
        let mut entries = Vec::new();
        for name in names {
            if self.store.record_stamp(name).is_none() {
                let rec = self.store.load(name).unwrap();
                self.store.save(&rec).unwrap();
            }
        }
        settle();
        for c in &config.certificates {
            let leaf =
                (c.name == "b").then(|| (self.leaf.clone(), FileStamp::of(&self.leaf).unwrap()));
            entries.push(Entry {
                name: c.name.clone(),
                until: now + HOUR,
                record: self.store.record_stamp(&c.name).unwrap(),
                leaf,
                reason: format!("{} quiet", c.name),
                crl: Some(self.crl_ref.clone()),
            });
        }
        let basis = Basis {
            version: env!("CARGO_PKG_VERSION").into(),
            config: config.source_digest.clone().expect("a source digest"),
            options: format!("allow_orders={}", config.agent.allow_orders),
        };
        let express = crate::engine::express_of(&config).expect("an express part");
        save_with(
            &self.store,
            &basis,
            &entries,
            Some(&express),
            &CrlParts {
                issuers: Default::default(),
                crls: self.crls.clone(),
            },
        );
    }

    fn conf_d(&self, name: &str) -> PathBuf {
        self.dir.path().join("conf.d").join(name)
    }

    fn run_at(&self, clock: Clock) -> Option<Vec<String>> {
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        match rt
            .block_on(renew(&self.main, clock, Duration::ZERO))
            .unwrap()
        {
            Express::Done(report, _) => {
                Some(report.certificates.iter().map(|c| c.line()).collect())
            }
            Express::Full(_) => None,
        }
    }

    fn run(&self) -> Option<Vec<String>> {
        self.run_at(Clock::SYSTEM)
    }
}

fn rewrite(path: &Path) {
    let text = fs::read(path).unwrap();
    std::thread::sleep(Duration::from_millis(20));
    fs::write(path, text).unwrap();
}

#[test]
fn an_unchanged_host_is_reported_in_the_configurations_order_without_parsing_it() {
    let host = Host::new();
    let lines = host.run().expect("the express run");
    assert_eq!(
        lines,
        [
            "a: nothing to do (a quiet)",
            "b: nothing to do (b quiet)",
            "c: nothing to do (c quiet)"
        ]
    );
    // A file the pattern does not match (an editor's leftover) changes nothing.
    fs::write(host.conf_d(".b.toml.swp"), "x").unwrap();
    fs::write(host.conf_d("b.toml~"), "x").unwrap();
    assert!(host.run().is_some());
}

#[test]
fn the_main_file_changed_means_the_full_run() {
    let host = Host::new();
    let text = fs::read_to_string(&host.main).unwrap();
    fs::write(&host.main, format!("{text}# a comment\n")).unwrap();
    settle();
    assert_eq!(host.run(), None);
    // Its bytes back as they were: the same configuration.
    fs::write(&host.main, &text).unwrap();
    assert!(host.run().is_some());
    // Its permissions changed (a warning depends on them).
    use std::os::unix::fs::PermissionsExt as _;
    fs::set_permissions(&host.main, fs::Permissions::from_mode(0o600)).unwrap();
    fs::set_permissions(&host.main, fs::Permissions::from_mode(0o640)).unwrap();
    assert_eq!(host.run(), None);
}

#[test]
fn an_included_file_changed_means_the_full_run() {
    let host = Host::new();
    rewrite(&host.conf_d("b.toml"));
    // Within the last second, and after.
    assert_eq!(host.run(), None);
    settle();
    assert_eq!(host.run(), None);
}

#[test]
fn an_included_file_added_or_removed_means_the_full_run() {
    let host = Host::new();
    fs::write(host.conf_d("d.toml"), site("d")).unwrap();
    settle();
    assert_eq!(host.run(), None, "a new file the pattern matches");
    fs::remove_file(host.conf_d("d.toml")).unwrap();
    assert!(host.run().is_some(), "back as it was");
    fs::remove_file(host.conf_d("c.toml")).unwrap();
    assert_eq!(host.run(), None, "a file removed");
    // The include directory removed altogether.
    fs::remove_dir_all(host.dir.path().join("conf.d")).unwrap();
    assert_eq!(host.run(), None);
}

#[test]
fn a_record_or_an_installed_leaf_changed_means_the_full_run() {
    let host = Host::new();
    rewrite(&host.store.dir().join("certs/c.json"));
    assert_eq!(host.run(), None, "a record");
    host.summarise();
    assert!(host.run().is_some());
    rewrite(&host.leaf);
    assert_eq!(host.run(), None, "a leaf");
    host.summarise();
    fs::remove_file(host.store.dir().join("certs/a.json")).unwrap();
    assert_eq!(host.run(), None, "a record removed");
}

#[test]
fn the_clock_reaching_an_entrys_instant_means_the_full_run() {
    let host = Host::new();
    assert!(
        host.run_at(Clock::shifted(time::Duration::minutes(50)))
            .is_some()
    );
    assert_eq!(host.run_at(Clock::shifted(time::Duration::hours(1))), None);
}

/// A certificate without a CRL distribution point.
fn no_crl() -> CrlRef {
    CrlRef {
        serial: "0A1B".into(),
        issuer: "00".repeat(32),
        urls: Vec::new(),
        state: "no_crl".into(),
    }
}

/// With `[revocation] check`, an entry stands only with its CRL reference, and one naming a
/// CRL only while that CRL is kept, fresh and signed by the issuer the summary holds; the CRL
/// store's other changes do not matter.
#[test]
fn an_entry_without_its_crl_or_whose_crl_is_not_kept_means_the_full_run() {
    let mut host = Host::new();
    fs::create_dir(host.store.dir().join("crl")).unwrap();
    assert!(host.run().is_some(), "a CRL store made since");
    host.crl_ref = CrlRef {
        urls: vec!["http://crl.example.net/ca.crl".into()],
        state: "good".into(),
        ..no_crl()
    };
    host.summarise();
    assert_eq!(host.run(), None, "no CRL kept, no issuer");
    host.crl_ref.state = "unknown".into();
    host.summarise();
    assert_eq!(host.run(), None, "revocation unknown");
    let text = fs::read_to_string(host.store.dir().join(DUE_FILE)).unwrap();
    let mut v: serde_json::Value = serde_json::from_str(&text).unwrap();
    for e in v["certificates"].as_array_mut().unwrap() {
        e.as_object_mut().unwrap().remove("crl");
    }
    fs::write(host.store.dir().join(DUE_FILE), v.to_string()).unwrap();
    assert_eq!(host.run(), None, "a summary of an older version");
}

/// A CRL the summary's run read is trusted without being read again only while its kept file
/// has the stamp that run left (here garbage that would never pass the checks), is younger
/// than `refresh_secs` and before its `nextUpdate`.
#[test]
fn a_crl_read_by_the_summarys_run_is_trusted_while_its_file_is_unchanged() {
    let mut host = Host::new();
    let url = "http://crl.example.net/ca.crl";
    host.crl_ref = CrlRef {
        urls: vec![url.into()],
        state: "good".into(),
        ..no_crl()
    };
    let file = crate::revocation::cache_file(host.store.dir(), url);
    fs::create_dir_all(file.parent().unwrap()).unwrap();
    fs::write(&file, b"not read").unwrap();
    let kept = |next_update: i64| crate::store::due::KeptCrl {
        url: url.into(),
        issuer: host.crl_ref.issuer.clone(),
        file: Stamp::of_path(&file).unwrap(),
        next_update,
    };
    let now = time::OffsetDateTime::now_utc().unix_timestamp();
    host.crls = vec![kept(now + HOUR)];
    host.summarise();
    assert!(host.run().is_some(), "the run's verdict stands");
    host.crls = vec![kept(now - 1)];
    host.summarise();
    assert_eq!(host.run(), None, "its nextUpdate passed");
    host.crls = vec![kept(now + HOUR)];
    host.summarise();
    rewrite(&file);
    assert_eq!(host.run(), None, "the file changed");
}

#[test]
fn a_summary_replayed_from_another_configuration_is_not_used() {
    let one = Host::new();
    let other = Host::new();
    // The other host's summary in this one's state directory: another configuration file,
    // another state directory, another digest.
    let due = |h: &Host| h.store.dir().join(DUE_FILE);
    fs::copy(due(&other), due(&one)).unwrap();
    assert_eq!(one.run(), None);
    // With its paths forged to this host's, the digest still differs.
    let text = fs::read_to_string(due(&other)).unwrap();
    let forged = text
        .replace(
            &other.main.display().to_string(),
            &one.main.display().to_string(),
        )
        .replace(
            &other.store.dir().display().to_string(),
            &one.store.dir().display().to_string(),
        );
    fs::write(due(&one), forged).unwrap();
    assert_eq!(one.run(), None);
}

#[test]
fn a_damaged_or_foreign_summary_is_not_used() {
    let host = Host::new();
    let path = host.store.dir().join(DUE_FILE);
    let good = fs::read(&path).unwrap();
    for cut in [0, 1, good.len() / 2, good.len() - 1] {
        fs::write(&path, &good[..cut]).unwrap();
        assert_eq!(host.run(), None, "cut at {cut}");
    }
    fs::write(&path, &good).unwrap();
    assert!(host.run().is_some());
    use std::os::unix::fs::PermissionsExt as _;
    fs::set_permissions(&path, fs::Permissions::from_mode(0o666)).unwrap();
    assert_eq!(host.run(), None, "writable by others");
}
