//! The fleet's `current` value holds the checked chain: the leaf, and the SHA-256 of each
//! issuer certificate, stored once per fleet at `chains/SHA256`. Three hosts install and serve
//! what a leader publishes that way; a value in the archive format of an earlier version is
//! still installed, and rewritten in place by the next leader at a new version that no host
//! installs again; a missing, forged, moved or older `chains/` value refuses only the
//! certificates that name it, naming its key. Real etcd (three members), real nginx.

use crate::support;

use std::collections::BTreeSet;
use std::fs;

use cert_agent::testing::fleet::{open_value, seal_value};
use support::webserver::Server;

use crate::fleet_batch::{count_reloads, installed, reloads};
use crate::fleet_e2e::{DOMAIN, Fleet, ready};

/// The fleet key of [`Fleet::build`].
const SECRET: [u8; 32] = [0x5a; 32];

/// The second certificate, of another issuer (product 1201: the sandbox's `s-two`).
const OTHER: &str = "other.fleet.test";

/// `n` nginx hosts with `www` (product 1101) and `other` (product 1201) under `prefix`; the
/// sandbox validates through the first host.
fn fleet(prefix: &str, n: usize) -> Fleet {
    let f = Fleet::start_under(
        prefix,
        &vec![Server::Nginx; n],
        &[("www", DOMAIN), ("other", OTHER)],
    );
    for h in &f.hosts {
        let text = fs::read_to_string(&h.config).unwrap();
        let at = text
            .find("name = \"other\"")
            .expect("the certificate other");
        let (head, tail) = text.split_at(at);
        assert!(tail.contains("product_id = 1101"), "{tail}");
        let tail = tail.replacen("product_id = 1101", "product_id = 1201", 1);
        fs::write(&h.config, format!("{head}{tail}")).unwrap();
    }
    f.env.sandbox.set_dcv_ports(f.hosts[0].web.http_port(), 0);
    f
}

/// The value at `rel`, opened with the fleet key: its version and JSON.
fn opened(f: &Fleet, rel: &str) -> (u64, serde_json::Value) {
    let sealed = f
        .etcd()
        .get(rel)
        .unwrap_or_else(|| panic!("{rel} is in etcd"));
    let (version, plain) = open_value(&SECRET, rel, &sealed).expect("it opens");
    (version, serde_json::from_slice(&plain).unwrap())
}

/// The keys under `chains/` (relative to the prefix).
fn chain_keys(f: &Fleet, prefix: &str) -> BTreeSet<String> {
    f.etcd()
        .revisions()
        .into_keys()
        .filter_map(|k| k.strip_prefix(prefix).map(str::to_owned))
        .filter(|k| k.starts_with("chains/"))
        .collect()
}

/// The `chains/` keys a current value names.
fn named(current: &serde_json::Value) -> Vec<String> {
    current["intermediates"]
        .as_array()
        .map(|a| {
            a.iter()
                .map(|h| format!("chains/{}", h.as_str().unwrap()))
                .collect()
        })
        .unwrap_or_default()
}

/// The serial host `i`'s nginx serves for `domain` once it serves `expected` (up to 10 s:
/// right after a reload, nginx's old workers may still take a connection), or the last one
/// it served.
fn served(f: &Fleet, i: usize, domain: &str, expected: &str) -> Option<String> {
    f.env
        .served_leaf_with_serial(&f.hosts[i].web.https_addr(), domain, expected)
        .ok()
        .map(|l| l.serial)
}

/// When host `i` installed `name`, from its record.
fn installed_at(f: &Fleet, i: usize, name: &str) -> String {
    let path = f.hosts[i].state.join(format!("certs/{name}.json"));
    let v: serde_json::Value = serde_json::from_str(&fs::read_to_string(path).unwrap()).unwrap();
    v["installed"]["installed_at"].to_string()
}

#[test]
fn three_hosts_serve_what_the_leader_publishes_as_a_leaf_and_intermediates_stored_once() {
    if !ready() {
        return;
    }
    let prefix = "/chain/";
    let f = fleet(prefix, 3);
    let first = f.agent(0, &["--json", "renew", "--wait", "60"]);
    first.expect_code(0);
    let (www, other) = (
        first.installed_serial("www"),
        first.installed_serial("other"),
    );
    for i in 1..3 {
        f.agent(i, &["--json", "renew"]).expect_code(0);
        assert_eq!(installed(&f, i, "www").as_ref(), Some(&www), "{}", f.logs());
        assert_eq!(installed(&f, i, "other").as_ref(), Some(&other));
        assert_eq!(served(&f, i, DOMAIN, &www).as_ref(), Some(&www));
        assert_eq!(served(&f, i, OTHER, &other).as_ref(), Some(&other));
    }
    let mut all = BTreeSet::new();
    for name in ["www", "other"] {
        let rel = format!("certs/{name}/current");
        let (_, current) = opened(&f, &rel);
        assert_eq!(current["archive"], "", "{current}");
        let leaf = current["chain"].as_str().unwrap();
        assert_eq!(leaf.matches("BEGIN CERTIFICATE").count(), 1, "{leaf}");
        let keys = named(&current);
        assert!(!keys.is_empty(), "{current}");
        let size = f.etcd().get(&rel).unwrap().len();
        eprintln!("{rel}: {size} bytes, names {keys:?}");
        all.extend(keys);
    }
    // One value per distinct intermediate, each its certificate's DER at its own hash.
    assert_eq!(chain_keys(&f, prefix), all);
    assert_eq!(all.len(), 2, "two issuers, one intermediate each: {all:?}");
    for rel in &all {
        let sealed = f.etcd().get(rel).unwrap();
        let (version, der) = open_value(&SECRET, rel, &sealed).unwrap();
        assert_eq!(version, 1);
        eprintln!("{rel}: {} bytes ({} bytes of DER)", sealed.len(), der.len());
    }
}

#[test]
fn an_archive_value_is_still_installed_and_rewritten_in_place_without_a_reinstall() {
    if !ready() {
        return;
    }
    let f = fleet("/chain-migrate/", 2);
    // `www` with the default EC P-256 key, `other` with an RSA 2048 key.
    for h in &f.hosts {
        let text = fs::read_to_string(&h.config).unwrap();
        let rsa = text.replacen(
            "product_id = 1201",
            "product_id = 1201\nkey_type = \"rsa-2048\"",
            1,
        );
        assert_ne!(text, rsa);
        fs::write(&h.config, rsa).unwrap();
    }
    let counted = count_reloads(&f, 1);
    // A leader of the earlier version: the API's archive.
    let before = |i: usize, args: &[&str]| {
        f.env
            .agent_at(&f.hosts[i].config, args)
            .env("CERT_AGENT_TEST_FLEET_ARCHIVE", "1")
            .run()
    };
    let first = before(0, &["--json", "renew", "--wait", "60"]);
    first.expect_code(0);
    let serial = first.installed_serial("www");
    let (v1, current) = opened(&f, "certs/www/current");
    assert_ne!(current["archive"], "", "{current}");
    assert!(named(&current).is_empty(), "{current}");
    let size = |rel: &str| f.etcd().get(rel).unwrap().len();
    let old_sizes = [size("certs/www/current"), size("certs/other/current")];
    // This version's follower reads the archive (and, as that version's leader would, leaves
    // it as it is).
    before(1, &["--json", "renew"]).expect_code(0);
    assert_eq!(
        installed(&f, 1, "www").as_ref(),
        Some(&serial),
        "{}",
        f.logs()
    );
    assert_eq!(served(&f, 1, DOMAIN, &serial).as_ref(), Some(&serial));
    assert_eq!(reloads(&counted), 1);
    let since = installed_at(&f, 1, "www");

    // The next run of this version that leads rewrites it: same serial, a new version, no
    // archive. (Nothing is due: a run leads for a command that names a certificate, as after an
    // upgrade — fleet.md, "Upgrading from the archive format".)
    f.agent(0, &["--json", "renew", "--name", "www"])
        .expect_code(0);
    let (v2, current) = opened(&f, "certs/www/current");
    assert_eq!(v2, v1 + 1, "{current}");
    assert_eq!(current["archive"], "", "{current}");
    assert!(!named(&current).is_empty(), "{current}");
    assert_eq!(
        support::env::norm_serial(current["serial"].as_str().unwrap()),
        serial
    );
    let new_sizes = [size("certs/www/current"), size("certs/other/current")];
    for (i, what) in ["www (EC P-256)", "other (RSA 2048)"].iter().enumerate() {
        let (old, new) = (old_sizes[i], new_sizes[i]);
        eprintln!("current of {what}: {old} bytes as an archive, {new} bytes as a chain");
        assert!(new * 2 < old, "{what}: {old} -> {new}");
    }
    let (_, other) = opened(&f, "certs/other/current");
    assert!(!named(&other).is_empty(), "{other}");
    for rel in named(&current).iter().chain(&named(&other)) {
        eprintln!("{rel}: {} bytes", size(rel));
    }

    // The follower accepts the new version and installs nothing.
    f.agent(1, &["--json", "renew"]).expect_code(0);
    let versions: serde_json::Value = serde_json::from_str(
        &fs::read_to_string(f.hosts[1].state.join("fleet-versions.json")).unwrap(),
    )
    .unwrap();
    assert_eq!(versions["www"]["current"]["version"], v2, "{versions}");
    assert_eq!(reloads(&counted), 1, "{}", f.logs());
    assert_eq!(installed_at(&f, 1, "www"), since);
    assert_eq!(served(&f, 1, DOMAIN, &serial).as_ref(), Some(&serial));
}

/// Host 1's run while another host holds the lead (it only follows): its output.
fn follow(f: &Fleet) -> support::env::AgentOutput {
    let mut etcd = f.etcd();
    let lease = etcd.put_on_lease("leader", "web9", 60);
    let out = f.agent(1, &["--json", "renew"]);
    etcd.revoke(lease);
    out
}

/// Host 1's run: `www` refused naming `key`, `other` installed at `serial`.
#[track_caller]
fn www_refused_other_installed(f: &Fleet, key: &str, why: &str, other: &str) {
    let out = follow(f);
    let o = out.outcome("www");
    assert_eq!(o["outcome"], "failed", "{}", out.describe());
    let error = o["error"].as_str().unwrap_or_default();
    assert!(error.contains(key) && error.contains(why), "{error}");
    assert_eq!(
        installed(f, 1, "other").as_deref(),
        Some(other),
        "{}",
        out.describe()
    );
    assert_eq!(served(f, 1, OTHER, other).as_deref(), Some(other));
}

#[test]
fn a_missing_forged_moved_or_older_intermediate_refuses_only_the_certificates_naming_it() {
    if !ready() {
        return;
    }
    let prefix = "/chain-forged/";
    let f = fleet(prefix, 2);
    let first = f.agent(0, &["--json", "renew", "--wait", "60"]);
    first.expect_code(0);
    let other = first.installed_serial("other");
    let www_rel = named(&opened(&f, "certs/www/current").1)[0].clone();
    let other_rel = named(&opened(&f, "certs/other/current").1)[0].clone();
    assert_ne!(www_rel, other_rel);
    let key = format!("{prefix}{www_rel}");
    let original = f.etcd().get(&www_rel).unwrap();

    f.etcd().put(&www_rel, b"garbage".to_vec());
    www_refused_other_installed(&f, &key, "is not a sealed value", &other);
    assert_eq!(installed(&f, 1, "www"), None);

    f.etcd().delete(&www_rel);
    www_refused_other_installed(&f, &key, "is missing", &other);

    // Sealed for another intermediate's key, moved here.
    let moved = f.etcd().get(&other_rel).unwrap();
    f.etcd().put(&www_rel, moved);
    www_refused_other_installed(&f, &key, "does not open", &other);

    // Its own bytes, sealed for its key at a later version: installed.
    let (_, der) = open_value(&SECRET, &www_rel, &original).unwrap();
    f.etcd()
        .put(&www_rel, seal_value(&SECRET, &www_rel, 5, &der).unwrap());
    follow(&f).expect_code(0);
    let www = first.installed_serial("www");
    assert_eq!(installed(&f, 1, "www").as_ref(), Some(&www), "{}", f.logs());
    assert_eq!(served(&f, 1, DOMAIN, &www).as_ref(), Some(&www));

    // The older value put back, and a new certificate of each: the one naming it refused.
    f.etcd().put(&www_rel, original);
    let second = f.agent(0, &["--json", "renew", "--force", "--wait", "60"]);
    second.expect_code(0);
    let other = second.installed_serial("other");
    assert_ne!(second.installed_serial("www"), www);
    www_refused_other_installed(&f, &key, "older than version 5", &other);
    assert_eq!(installed(&f, 1, "www").as_ref(), Some(&www), "kept");
}
