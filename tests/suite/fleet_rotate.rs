//! Rotating the fleet key while the fleet serves: two hosts with real nginx and a real
//! three-member etcd serve one certificate; each host in turn gets the new key as
//! `secret_file` and the old one as `previous_secret_file` while runs go on, `fleet
//! rotate-key` seals everything again on one host, then the old key goes everywhere.
//! Throughout, both hosts serve the same serial (TLS handshake), no run fails and no order is
//! placed; once the rotation is complete, a value sealed under the old key put back into etcd
//! is refused, naming its etcd key — by a host still holding the old key for reading too —,
//! and a host holding only the old key is refused by the key check.
//!
//! The party that still holds the old key (and etcd write) puts the old key check back right
//! after `fleet rotate-key`, with a shared record it sealed under the old key: the host that
//! ran `rotate-key` refuses it at once, a host that never saw the new key check refuses it
//! once its grace period has passed, `check` warns while `previous_secret_file` stays, and
//! `rotate-key` lists the host that has not moved and exits 75.

use crate::fleet_e2e::{DOMAIN, Fleet};
use crate::support;

use std::fs;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};

use aws_lc_rs::aead::{AES_256_GCM, Aad, LessSafeKey, Nonce, UnboundKey};
use aws_lc_rs::hmac;
use support::env::norm_serial;
use support::etcd::EtcdClient;
use support::scenario::{show, state_changing};

const PREFIX: &str = "/rotate/";

struct Rotation {
    f: Fleet,
    etcd: EtcdClient,
    old_key: PathBuf,
    new_key: PathBuf,
}

/// Host `i`'s `[fleet]` keys in its configuration: `secret_file` and, when given,
/// `previous_secret_file`.
pub(crate) fn set_fleet_keys(f: &Fleet, i: usize, current: &Path, previous: Option<&Path>) {
    let path = &f.hosts[i].config;
    let text = fs::read_to_string(path).unwrap();
    let mut lines: Vec<String> = text
        .lines()
        .filter(|l| !l.starts_with("previous_secret_file = "))
        .map(|l| {
            if l.starts_with("secret_file = ") {
                format!("secret_file = \"{}\"", current.display())
            } else {
                l.to_owned()
            }
        })
        .collect();
    if let Some(p) = previous {
        let at = lines
            .iter()
            .position(|l| l.starts_with("secret_file = "))
            .unwrap();
        lines.insert(
            at + 1,
            format!("previous_secret_file = \"{}\"", p.display()),
        );
    }
    fs::write(path, lines.join("\n") + "\n").unwrap();
}

impl Rotation {
    fn start() -> Self {
        let (f, _) = Fleet::pair_serving(PREFIX);
        let etcd = f.etcd();
        let old_key = f.env.path("fleet.key");
        let new_key = f.env.path("fleet-new.key");
        fs::write(&new_key, [0xa7u8; 32]).unwrap();
        fs::set_permissions(&new_key, fs::Permissions::from_mode(0o600)).unwrap();
        Self {
            f,
            etcd,
            old_key,
            new_key,
        }
    }

    /// The value at `rel` (relative to the prefix), read on a connection of its own.
    fn etcd_get(&self, rel: &str) -> Option<Vec<u8>> {
        self.f.etcd().get(rel)
    }

    /// Host `i`'s `[fleet]` keys: `secret_file` and, when given, `previous_secret_file`.
    fn keys(&self, i: usize, current: &Path, previous: Option<&Path>) {
        set_fleet_keys(&self.f, i, current, previous);
    }

    /// The serial host `i` serves (TLS handshake).
    fn served(&self, i: usize) -> String {
        let leaf = self
            .f
            .env
            .served_leaf(&self.f.hosts[i].web.https_addr(), DOMAIN)
            .unwrap_or_else(|e| panic!("host {i} serves nothing: {e}"));
        norm_serial(&leaf.serial)
    }

    /// When host `i` installed what it serves (unchanged: nothing installed or reloaded).
    fn installed_at(&self, i: usize) -> serde_json::Value {
        let path = self.f.hosts[i].state.join("certs/www.json");
        let v: serde_json::Value = serde_json::from_slice(&fs::read(path).unwrap()).unwrap();
        v["installed"]["installed_at"].clone()
    }

    /// A run on each host: none fails, both serve `serial`.
    fn runs_go_on(&self, serial: &str, when: &str) {
        for i in 0..2 {
            let out = self.f.agent(i, &["--json", "renew"]);
            out.expect_code(0);
            let o = out.outcome("www");
            assert_ne!(o["outcome"], "failed", "{when}: {}", out.describe());
        }
        for i in 0..2 {
            assert_eq!(self.served(i), serial, "{when}: host {i}");
        }
    }
}

#[test]
fn the_fleet_rotates_its_key_while_it_serves() {
    let mut r = Rotation::start();
    let serial = r.served(0);
    assert_eq!(r.served(1), serial);
    let installed: Vec<_> = (0..2).map(|i| r.installed_at(i)).collect();
    let calls = r.f.env.calls().len();
    let billed = r.f.env.billed();
    let sealed_under_old = r.etcd.get("certs/www/current").unwrap();
    let (old, new) = (r.old_key.clone(), r.new_key.clone());

    // Without the previous key there is nothing to re-seal from; --help teaches the steps.
    let out = r.f.agent(0, &["fleet", "rotate-key"]);
    out.expect_failure();
    assert!(
        out.stderr.contains("previous_secret_file"),
        "{}",
        out.describe()
    );
    let help = r.f.agent(0, &["fleet", "rotate-key", "--help"]);
    help.expect_code(0);
    assert!(
        help.stdout.contains("previous_secret_file") && help.stdout.contains("any order"),
        "{}",
        help.describe()
    );

    // Each host in turn: the new key, the old one kept for reading; runs go on.
    r.keys(1, &new, Some(&old));
    r.runs_go_on(&serial, "web2 switched");
    r.keys(0, &new, Some(&old));
    r.runs_go_on(&serial, "both switched");

    // While another host leads, rotate-key writes nothing: it needs the lead for its whole
    // re-seal (each write fenced by it).
    let keycheck = r.etcd.get("keycheck").unwrap();
    let lease = r.etcd.put_on_lease("leader", "web2", 60);
    let out = r.f.agent(0, &["--json", "fleet", "rotate-key"]);
    out.expect_failure();
    assert!(
        out.stderr
            .contains("web2 leads the fleet now; nothing was re-sealed"),
        "{}",
        out.describe()
    );
    assert_eq!(r.etcd.get("keycheck").unwrap(), keycheck);
    r.etcd.revoke(lease);

    // One host seals everything again, as the leader; web2 has not run since: the rotation
    // is not complete until it has moved (exit 75, web2 listed).
    let out = r.f.agent(0, &["--json", "fleet", "rotate-key"]);
    out.expect_code(75);
    let report = out.json();
    let resealed = report["resealed"].as_array().unwrap();
    let of = |rel: &str| {
        resealed
            .iter()
            .find(|v| v["key"] == format!("{PREFIX}{rel}"))
            .unwrap_or_else(|| panic!("{rel} not re-sealed: {}", out.describe()))
    };
    let current = of("certs/www/current");
    assert!(
        current["to"].as_u64() > current["from"].as_u64(),
        "{current}"
    );
    let state = of("certs/www/state");
    assert!(state["to"].as_u64() > state["from"].as_u64(), "{state}");
    for rel in ["keycheck", "certs/www/spec"] {
        of(rel);
    }
    assert_eq!(report["left"].as_array().unwrap().len(), 0, "{report}");
    assert_eq!(report["complete"], false, "{report}");
    assert_eq!(unmoved(&report), vec!["web2"], "{report}");
    r.runs_go_on(&serial, "re-sealed");
    // Again, after web2's run: nothing is left under the old key, every host has moved.
    let again = r.f.agent(0, &["--json", "fleet", "rotate-key"]);
    again.expect_code(0);
    let report = again.json();
    assert_eq!(report["resealed"].as_array().unwrap().len(), 0, "{report}");
    assert_eq!(report["complete"], true, "{report}");
    assert!(unmoved(&report).is_empty(), "{report}");

    // The rotation complete, the old key still configured for reading: a value sealed under
    // it put back is refused (the key check is under the new key), naming its etcd key.
    let resealed_current = r.etcd.get("certs/www/current").unwrap();
    r.etcd.put("certs/www/current", sealed_under_old.clone());
    // web2 follows (another name leads): as the leader holding its own copy it would write
    // that copy back (fleet_repair).
    r.etcd.put_on_lease("leader", "web9", 600);
    let out = r.f.agent(1, &["--json", "renew"]);
    r.etcd.delete("leader");
    let o = out.outcome("www");
    assert_eq!(o["outcome"], "failed", "{}", out.describe());
    let error = o["error"].as_str().unwrap_or_default();
    assert!(
        error.contains(&format!("{PREFIX}certs/www/current"))
            && error.contains("previous fleet key")
            && error.contains("rotation is complete"),
        "{error}"
    );
    // The leader of that run published its certificate again over the refused value; put
    // the fleet's value back otherwise.
    if r.etcd.get("certs/www/current").as_ref() == Some(&sealed_under_old) {
        r.etcd.put("certs/www/current", resealed_current);
    }
    r.runs_go_on(&serial, "the old value refused");

    // The old key goes, host by host.
    r.keys(1, &new, None);
    r.runs_go_on(&serial, "web2 without the old key");
    r.keys(0, &new, None);
    r.runs_go_on(&serial, "the old key gone");

    // Nothing installed again, nothing reloaded, no order, nothing billed.
    for (i, at) in installed.iter().enumerate() {
        assert_eq!(&r.installed_at(i), at, "host {i} installed again");
    }
    let all = r.f.env.calls();
    assert!(
        state_changing(&all[calls..]).is_empty(),
        "{}",
        show(&all[calls..])
    );
    assert_eq!(r.f.env.billed(), billed);

    // A host holding only the old key is not part of the fleet any more.
    r.keys(1, &old, None);
    let out = r.f.agent(1, &["--json", "renew"]);
    out.expect_failure();
    let text = format!("{}{}", out.stdout, out.stderr);
    assert!(
        text.contains(&format!("{PREFIX}keycheck")) && text.contains("not the fleet's"),
        "{}",
        out.describe()
    );
    assert_eq!(r.served(1), serial);
    r.keys(1, &new, None);

    // A value sealed under the old key, put back: refused, naming its etcd key (by web2
    // following; its lead would write its own copy back).
    r.etcd.put("certs/www/current", sealed_under_old);
    r.etcd.put_on_lease("leader", "web9", 600);
    let out = r.f.agent(1, &["--json", "renew"]);
    r.etcd.delete("leader");
    let o = out.outcome("www");
    assert_eq!(o["outcome"], "failed", "{}", out.describe());
    let error = o["error"].as_str().unwrap_or_default();
    assert!(
        error.contains(&format!("{PREFIX}certs/www/current")) && error.contains("key id"),
        "{error}"
    );
    for i in 0..2 {
        assert_eq!(r.served(i), serial, "host {i}");
    }
}

/// The hosts `fleet rotate-key` listed as not moved yet.
fn unmoved(report: &serde_json::Value) -> Vec<String> {
    report["unmoved"]
        .as_array()
        .unwrap()
        .iter()
        .map(|u| u["host"].as_str().unwrap().to_owned())
        .collect()
}

/// The fleet's envelope, as anyone holding a fleet key writes it (docs/fleet.md): key id,
/// version, nonce, AES-256-GCM under the key with the associated data of its place.
struct Sealer {
    key: LessSafeKey,
    id: u8,
}

impl Sealer {
    fn new(bytes: &[u8]) -> Self {
        let tag = hmac::sign(
            &hmac::Key::new(hmac::HMAC_SHA256, bytes),
            b"cert-agent fleet key id",
        );
        Self {
            key: LessSafeKey::new(UnboundKey::new(&AES_256_GCM, bytes).unwrap()),
            id: tag.as_ref()[0],
        }
    }

    fn aad(&self, label: &str, rel: &str, name: &str, version: u64) -> Vec<u8> {
        format!(
            "cert-agent fleet\0{label}\0{rel}\0{name}\0{version}\0{}",
            self.id
        )
        .into_bytes()
    }

    fn seal(&self, label: &str, rel: &str, name: &str, version: u64, plain: &[u8]) -> Vec<u8> {
        let mut nonce = [0u8; 12];
        aws_lc_rs::rand::fill(&mut nonce).unwrap();
        let mut data = plain.to_vec();
        self.key
            .seal_in_place_append_tag(
                Nonce::assume_unique_for_key(nonce),
                Aad::from(self.aad(label, rel, name, version)),
                &mut data,
            )
            .unwrap();
        let mut out = vec![self.id];
        out.extend_from_slice(&version.to_be_bytes());
        out.extend_from_slice(&nonce);
        out.extend_from_slice(&data);
        out
    }

    /// The version and plain text of a value it sealed; `None` under another key.
    fn open(&self, label: &str, rel: &str, name: &str, sealed: &[u8]) -> Option<(u64, Vec<u8>)> {
        if sealed.first() != Some(&self.id) || sealed.len() < 9 + 12 {
            return None;
        }
        let version = u64::from_be_bytes(sealed[1..9].try_into().unwrap());
        let nonce = Nonce::try_assume_unique_for_key(&sealed[9..21]).ok()?;
        let mut data = sealed[21..].to_vec();
        let plain = self
            .key
            .open_in_place(
                nonce,
                Aad::from(self.aad(label, rel, name, version)),
                &mut data,
            )
            .ok()?;
        Some((version, plain.to_vec()))
    }
}

/// Every `csr_sha256` in a document replaced by `hash`; how many there were.
fn replace_csr(doc: &mut serde_json::Value, hash: &str) -> usize {
    match doc {
        serde_json::Value::Object(map) => map
            .iter_mut()
            .map(|(k, v)| {
                if k == "csr_sha256" && v.is_string() {
                    *v = hash.into();
                    1
                } else {
                    replace_csr(v, hash)
                }
            })
            .sum(),
        serde_json::Value::Array(items) => items.iter_mut().map(|v| replace_csr(v, hash)).sum(),
        _ => 0,
    }
}

#[test]
fn an_old_key_check_put_back_after_rotate_key_brings_the_old_key_back_nowhere() {
    let mut r = Rotation::start();
    let serial = r.served(0);
    let (old, new) = (r.old_key.clone(), r.new_key.clone());
    let calls = r.f.env.calls().len();
    let old_key_check = r.etcd.get("keycheck").unwrap();
    let old_sealer = Sealer::new(&fs::read(&old).unwrap());
    let new_sealer = Sealer::new(&fs::read(&new).unwrap());
    r.keys(1, &new, Some(&old));
    r.keys(0, &new, Some(&old));
    r.runs_go_on(&serial, "both switched");

    // web1 seals everything again; web2 has not run since: listed, exit 75.
    let out = r.f.agent(0, &["--json", "fleet", "rotate-key"]);
    out.expect_code(75);
    let report = out.json();
    assert_eq!(unmoved(&report), vec!["web2"], "{report}");
    let why = report["unmoved"][0]["why"].as_str().unwrap();
    assert!(why.contains("previous fleet key"), "{why}");
    let text = r.f.agent(0, &["fleet", "rotate-key"]);
    text.expect_code(75);
    assert!(
        text.stdout.contains("not moved yet: web2")
            && text.stdout.contains("the rotation is not complete"),
        "{}",
        text.describe()
    );

    // The old key's holder: the old key check back, and a shared record of its own sealed
    // under the old key, at a version above any the fleet wrote, its CSR in it.
    let state = r.etcd.get("certs/www/state").unwrap();
    let (version, plain) = new_sealer
        .open("shared-record", "certs/www/state", "www", &state)
        .expect("the shared record is under the new key");
    let mut doc: serde_json::Value = serde_json::from_slice(&plain).unwrap();
    replace_csr(&mut doc, &"ee".repeat(32));
    doc["pending_key"] = serde_json::Value::Null;
    doc["written_by"] = "mallory".into();
    let forged = old_sealer.seal(
        "shared-record",
        "certs/www/state",
        "www",
        version + 10,
        &serde_json::to_vec(&doc).unwrap(),
    );
    assert!(
        old_sealer
            .open("shared-record", "certs/www/state", "www", &forged)
            .is_some()
    );
    // Met by a host that follows (another name leads): a leader holding its own copy would
    // write that copy back (fleet_repair). `done`: the run over, the lead ends.
    let attack = |r: &mut Rotation| {
        r.etcd.put("keycheck", old_key_check.clone());
        r.etcd.put("certs/www/state", forged.clone());
        r.etcd.put_on_lease("leader", "web9", 600);
    };
    let done = |r: &mut Rotation| r.etcd.delete("leader");
    let refused = |out: &support::env::AgentOutput, who: &str| {
        let o = out.outcome("www");
        assert_eq!(o["outcome"], "failed", "{who}: {}", out.describe());
        let error = o["error"].as_str().unwrap_or_default();
        assert!(
            error.contains(&format!("{PREFIX}certs/www/state"))
                && error.contains("previous fleet key"),
            "{who}: {error}"
        );
    };

    // web2 never saw the new key check; past its grace period (24 h since it first ran
    // holding both keys) the old key opens nothing there.
    attack(&mut r);
    let day = (25 * 3600).to_string();
    let out =
        r.f.env
            .agent_at(&r.f.hosts[1].config, ["--json", "renew"])
            .env("CERT_AGENT_TEST_CLOCK_OFFSET_SECS", &day)
            .run();
    done(&mut r);
    refused(&out, "web2 after its grace period");

    // web1 ran rotate-key: the rotation ended there for good.
    attack(&mut r);
    let out = r.f.agent(0, &["--json", "renew"]);
    done(&mut r);
    refused(&out, "web1");

    // Both still serve the fleet's certificate; nothing was ordered.
    for i in 0..2 {
        assert_eq!(r.served(i), serial, "host {i}");
    }
    let all = r.f.env.calls();
    assert!(
        state_changing(&all[calls..]).is_empty(),
        "{}",
        show(&all[calls..])
    );

    // `check` and `fleet status` warn while previous_secret_file stays.
    let check = r.f.agent(0, &["check"]);
    check.expect_code(1);
    assert!(
        check.stdout.contains("WARNING fleet key:")
            && check.stdout.contains("remove previous_secret_file"),
        "{}",
        check.describe()
    );
    let status = r.f.agent(0, &["--json", "fleet", "status"]);
    let warnings = status.json()["warnings"].clone();
    assert!(
        warnings.to_string().contains("remove previous_secret_file"),
        "{}",
        status.describe()
    );

    // The fleet's record back: every host has moved (web2 at the end of its grace), the
    // rotation is complete; without the old key, no warning.
    r.etcd.put("certs/www/state", state);
    let out = r.f.agent(0, &["--json", "fleet", "rotate-key"]);
    out.expect_code(0);
    assert_eq!(out.json()["complete"], true, "{}", out.describe());
    r.keys(0, &new, None);
    let check = r.f.agent(0, &["check"]);
    assert!(
        !check.stdout.contains("WARNING fleet key"),
        "{}",
        check.describe()
    );
}

#[test]
fn a_second_host_configured_with_a_live_hosts_name_refuses_its_fleet_work() {
    let r = Rotation::start();
    let serial = r.served(0);
    let calls = r.f.env.calls().len();
    let web1_seen = r.etcd_get("hosts/web1/seen");
    // web2 configured as web1 while web1 is live (it synchronised moments ago).
    let path = &r.f.hosts[1].config;
    let text = fs::read_to_string(path).unwrap();
    assert!(text.contains("host = \"web2\""), "{text}");
    fs::write(path, text.replace("host = \"web2\"", "host = \"web1\"")).unwrap();
    let out = r.f.agent(1, &["--json", "renew"]);
    out.expect_failure();
    let said = format!("{}{}", out.stdout, out.stderr);
    assert!(
        said.contains("another host announces this host's name 'web1' ([fleet] host)")
            && said.contains(&format!("{PREFIX}hosts/web1/seen"))
            && said.contains("give each host its own [fleet] host"),
        "{}",
        out.describe()
    );
    // It wrote nothing as web1: web1's record is web1's, and web1 goes on.
    assert_eq!(r.etcd_get("hosts/web1/seen"), web1_seen);
    let out = r.f.agent(0, &["--json", "renew"]);
    out.expect_code(0);
    assert_eq!(r.served(0), serial);
    let all = r.f.env.calls();
    assert!(
        state_changing(&all[calls..]).is_empty(),
        "{}",
        show(&all[calls..])
    );
    // The first host restarted keeps its instance (its state directory): not refused.
    let out = r.f.agent(0, &["--json", "renew"]);
    out.expect_code(0);
}
