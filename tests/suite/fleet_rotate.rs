//! Rotating the fleet key while the fleet serves: two hosts with real nginx and a real
//! three-member etcd serve one certificate; each host in turn gets the new key as
//! `secret_file` and the old one as `previous_secret_file` while runs go on, `fleet
//! rotate-key` seals everything again on one host, then the old key goes everywhere.
//! Throughout, both hosts serve the same serial (TLS handshake), no run fails and no order is
//! placed; once the rotation is complete, a value sealed under the old key put back into etcd
//! is refused, naming its etcd key — by a host still holding the old key for reading too —,
//! and a host holding only the old key is refused by the key check.

use crate::fleet_e2e::{DOMAIN, Fleet};
use crate::support;

use std::fs;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::time::Duration;

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
        let f = Fleet::pair(PREFIX);
        f.env.sandbox.set_dcv_ports(f.hosts[0].web.http_port(), 0);
        f.agent(0, &["--json", "renew", "--wait", "60"])
            .expect_code(0);
        f.agent(1, &["--json", "renew"]).expect_code(0);
        // web2 just reloaded: every later handshake must meet the new certificate.
        let serial = f.installed(0).expect("web1 installed");
        f.wait_all_settled(&serial, Duration::from_secs(30));
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

    // One host seals everything again, as the leader.
    let out = r.f.agent(0, &["--json", "fleet", "rotate-key"]);
    out.expect_code(0);
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
    assert_eq!(report["complete"], true, "{report}");
    // Again: nothing is left under the old key.
    let again = r.f.agent(0, &["--json", "fleet", "rotate-key"]);
    again.expect_code(0);
    assert_eq!(again.json()["resealed"].as_array().unwrap().len(), 0);
    r.runs_go_on(&serial, "re-sealed");

    // The rotation complete, the old key still configured for reading: a value sealed under
    // it put back is refused (the key check is under the new key), naming its etcd key.
    let resealed_current = r.etcd.get("certs/www/current").unwrap();
    r.etcd.put("certs/www/current", sealed_under_old.clone());
    let out = r.f.agent(1, &["--json", "renew"]);
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

    // A value sealed under the old key, put back: refused, naming its etcd key.
    r.etcd.put("certs/www/current", sealed_under_old);
    let out = r.f.agent(1, &["--json", "renew"]);
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
