//! Fleet mode with an ACME CA: a real three-member etcd cluster, hosts with real nginx, and
//! Pebble (External Account Binding required) validating `http-01` through a host that does
//! not lead. One account and one order for the fleet; every host serves the challenge before
//! it is answered, then the certificate (a TLS handshake per host, checked against Pebble's
//! root); a leader killed after the order was placed is followed by one that resumes the same
//! order; a forged account value in etcd is refused, naming its key.

use crate::support;

use std::fs;
use std::path::PathBuf;
use std::time::Duration;

use support::env::{files_under, wait_until};
use support::pebble::{self, Pebble};

use crate::fleet_e2e::{DOMAIN, Fleet, edit_config, ready};

/// A fleet of `n` hosts whose certificate `www` comes from Pebble, which validates through
/// host `validator`'s nginx.
struct AcmeFleet {
    f: Fleet,
    pebble: Pebble,
    /// Pebble's issuing root (what a TLS client checks the served certificates against).
    root: PathBuf,
}

fn acme_fleet(n: usize, prefix: &str, validator: usize) -> Option<AcmeFleet> {
    acme_fleet_for(n, prefix, validator, &[DOMAIN])
}

/// [`acme_fleet`] with the certificate's names `domains` (the first is [`DOMAIN`]).
fn acme_fleet_for(n: usize, prefix: &str, validator: usize, domains: &[&str]) -> Option<AcmeFleet> {
    if !ready() || !pebble::require() {
        return None;
    }
    let f = Fleet::start_under(
        prefix,
        &vec![support::webserver::Server::Nginx; n],
        &[("www", DOMAIN)],
    );
    let pebble = Pebble::start(f.hosts[validator].web.http_port());
    let table = pebble.config_table("pebble", &f.env.path("eab.key"));
    for i in 0..n {
        edit_config(
            &f,
            i,
            "product_id = 1101\n",
            "product_id = 1101\nissuer = \"pebble\"\n",
        );
        let names: Vec<String> = domains.iter().map(|d| format!("\"{d}\"")).collect();
        edit_config(
            &f,
            i,
            &format!("domains = [\"{DOMAIN}\"]"),
            &format!("domains = [{}]", names.join(", ")),
        );
        let now = fs::read_to_string(&f.hosts[i].config).unwrap();
        fs::write(&f.hosts[i].config, format!("{now}\n{table}")).unwrap();
    }
    let root = f.env.path("pebble-root.pem");
    pebble.write_root(&root);
    Some(AcmeFleet { f, pebble, root })
}

impl AcmeFleet {
    /// The serial host `i`'s nginx serves for [`DOMAIN`], checked against Pebble's root.
    fn served(&self, i: usize) -> Option<String> {
        support::env::served_leaf(&self.root, &self.f.hosts[i].web.https_addr(), DOMAIN)
            .ok()
            .map(|l| l.serial)
    }

    /// Waits until every host has installed and serves `serial`.
    fn wait_all_serve(&self, serial: &str) {
        let ok = wait_until(Duration::from_secs(30), || {
            (0..self.f.hosts.len()).all(|i| {
                self.f.installed(i).as_deref() == Some(serial)
                    && self.served(i).as_deref() == Some(serial)
            })
        });
        assert!(
            ok,
            "not every host serves {serial}: {:?}\n{}",
            (0..self.f.hosts.len())
                .map(|i| (self.f.installed(i), self.served(i)))
                .collect::<Vec<_>>(),
            self.f.logs()
        );
    }

    /// Waits until host `i` has synchronised with the fleet (its `seen` is in etcd).
    fn wait_seen(&self, i: usize) {
        let rel = format!("hosts/{}/seen", self.f.hosts[i].name);
        let mut etcd = self.f.etcd();
        assert!(
            wait_until(Duration::from_secs(30), || etcd.get(&rel).is_some()),
            "{} never synchronised\n{}",
            self.f.hosts[i].name,
            self.f.logs()
        );
    }

    fn challenge_files(&self, i: usize) -> Vec<PathBuf> {
        files_under(
            &self
                .f
                .env
                .path(&format!("{}/www-root", self.f.hosts[i].name)),
        )
    }

    fn audit(&self, i: usize) -> String {
        fs::read_to_string(self.f.hosts[i].state.join("audit.log")).unwrap_or_default()
    }
}

#[test]
fn one_acme_order_for_the_fleet_every_host_serves_the_challenge_then_the_certificate() {
    // Two names: two http-01 files, published together, each served by every host.
    let Some(mut a) = acme_fleet_for(3, "/acme-one/", 1, &[DOMAIN, "alt.fleet.test"]) else {
        return;
    };
    // The followers' daemons serve what the leader publishes as soon as it is published
    // (their own scheduled runs come later).
    for i in 1..3 {
        a.f.start_daemon_args(i, &["--first-run-delay", "3600"], &[]);
    }
    a.wait_seen(1);
    a.wait_seen(2);
    let out = a.f.agent(0, &["--json", "renew", "--wait", "60"]);
    out.expect_code(0);
    let serial = out.installed_serial("www");
    a.wait_all_serve(&serial);

    // One account and one order for the fleet; the CA validated through web2, which serves
    // the challenge only because the fleet published it there.
    assert_eq!(a.pebble.requests("/order-plz"), 1, "{}", a.pebble.log());
    assert_eq!(a.pebble.requests("/sign-me-up"), 1, "{}", a.pebble.log());
    let validated = a
        .pebble
        .log()
        .lines()
        .filter(|l| l.contains("set VALID by completed challenge"))
        .count();
    assert_eq!(
        validated,
        2,
        "both names validated through web2: {}",
        a.pebble.log()
    );
    let mut etcd = a.f.etcd();
    assert!(
        etcd.get("acme/pebble/account").is_some(),
        "the fleet's account"
    );
    for i in 1..3 {
        let log = a.audit(i);
        assert!(
            log.contains("/.well-known/acme-challenge/") && log.contains("\"for\":\"fleet\""),
            "web{} served the challenge: {log}",
            i + 1
        );
        assert!(
            !log.contains("\"event\":\"acme-order-placed\"") && !log.contains("order-plz"),
            "a follower orders nothing"
        );
        assert!(
            etcd.get(&format!("hosts/web{}/dcv/www", i + 1)).is_some(),
            "web{} said it served the challenge",
            i + 1
        );
    }
    // Every host holds the same key; nothing is left in a web root.
    let keys: Vec<Vec<u8>> = (1..=3)
        .map(|i| fs::read(a.f.env.path(&format!("web{i}/out/privkey.pem"))).unwrap())
        .collect();
    assert!(keys.windows(2).all(|w| w[0] == w[1]));
    for i in 0..3 {
        assert!(
            wait_until(Duration::from_secs(10), || a.challenge_files(i).is_empty()),
            "left on web{}: {:?}",
            i + 1,
            a.challenge_files(i)
        );
    }
    // The next run orders nothing; the account is the fleet's on every leader.
    a.f.kill_daemon(1);
    let out = a.f.agent(1, &["--json", "renew"]);
    out.expect_code(0);
    assert_eq!(a.pebble.requests("/order-plz"), 1, "{}", a.pebble.log());
    let account = |i: usize| {
        fs::read(a.f.hosts[i].state.join("acme/pebble/account.json")).unwrap_or_default()
    };
    assert!(!account(0).is_empty());
    assert_eq!(
        account(0),
        account(1),
        "web2 leads with the fleet's account"
    );
    assert_eq!(a.pebble.requests("/sign-me-up"), 1, "{}", a.pebble.log());

    // `fleet status` names the issuer of each certificate, the times to the minute.
    let st = a.f.agent(2, &["--json", "fleet", "status"]);
    let certs = st.json()["certificates"].clone();
    assert_eq!(certs[0]["issuer"], "acme:pebble", "{certs}");
    let table = a.f.agent(2, &["fleet", "status"]).stdout;
    assert!(
        table.contains("ISSUER") && table.contains("acme:pebble") && table.contains(" UTC by "),
        "{table}"
    );

    // `acme account` on a host that never led shows the fleet's account.
    let kept: serde_json::Value = serde_json::from_slice(&account(0)).unwrap();
    let url = kept["credentials"]["id"].as_str().unwrap().to_owned();
    let shown = a.f.agent(2, &["--json", "acme", "account", "pebble"]);
    shown.expect_code(0);
    let v = shown.json();
    assert_eq!(v["account"].as_str(), Some(url.as_str()), "{v}");
    assert_eq!(v["registered_by"], "web1", "{v}");
    assert_eq!(
        account(2),
        account(0),
        "web3 keeps a copy of the fleet's account"
    );
    // Revoking and deactivating go through the leader: refused with the reason.
    let out = a.f.agent(2, &["revoke", "www", "--yes"]);
    assert_eq!(out.code, Some(1), "{}", out.describe());
    assert!(
        out.text().contains("not available in fleet mode"),
        "{}",
        out.describe()
    );
    let out =
        a.f.agent(2, &["acme", "account", "pebble", "--deactivate", "--yes"]);
    assert_ne!(out.code, Some(0), "{}", out.describe());
    assert!(out.text().contains("is the fleet's"), "{}", out.describe());
    assert_eq!(a.pebble.requests("/sign-me-up"), 1, "{}", a.pebble.log());
}

#[test]
fn a_leader_killed_after_placing_the_acme_order_is_followed_by_one_that_resumes_it() {
    let Some(mut a) = acme_fleet(2, "/acme-kill/", 1) else {
        return;
    };
    let killed =
        a.f.env
            .agent_at(&a.f.hosts[0].config, ["--json", "renew", "--wait", "30"])
            .env("CERT_AGENT_FAILPOINT", "acme-order-placed")
            .run();
    assert!(
        killed
            .stderr
            .contains("failpoint 'acme-order-placed' reached"),
        "{}",
        killed.describe()
    );
    let rec = fs::read_to_string(a.f.hosts[0].state.join("certs/www.json")).unwrap();
    let rec: serde_json::Value = serde_json::from_str(&rec).unwrap();
    let url = rec["acme"]["order_url"]
        .as_str()
        .expect("the order journaled")
        .to_owned();
    let id = url.rsplit('/').next().unwrap().to_owned();
    assert_eq!(a.pebble.requests("/order-plz"), 1);
    // web1 comes back as a daemon (it follows, and serves what the fleet publishes); web2
    // takes over once the dead lead's lease ended and finishes the same order.
    a.f.start_daemon_args(0, &["--first-run-delay", "3600"], &[]);
    let done = wait_until(Duration::from_secs(120), || {
        a.f.agent(1, &["--json", "renew", "--wait", "30"]);
        a.f.installed(1).is_some()
    });
    assert!(
        done,
        "web2 did not finish\n{}\n{}",
        a.f.logs(),
        a.pebble.log()
    );
    let serial = a.f.installed(1).unwrap();
    a.wait_all_serve(&serial);
    assert_eq!(
        a.pebble.requests("/order-plz"),
        1,
        "one order: {}",
        a.pebble.log()
    );
    assert!(
        a.pebble.log().contains(&format!("for order {id}")),
        "the journaled order {url} was the one issued: {}",
        a.pebble.log()
    );
}

#[test]
fn a_forged_or_replayed_fleet_account_is_refused_naming_its_key() {
    let Some(a) = acme_fleet(2, "/acme-forged/", 0) else {
        return;
    };
    let mut etcd = a.f.etcd();
    // Garbage where the account belongs: refused, nothing ordered, the key named.
    etcd.put("acme/pebble/account", b"\x01garbage".to_vec());
    let out = a.f.agent(0, &["--json", "renew", "--wait", "30"]);
    assert_ne!(out.code, Some(0), "{}", out.describe());
    assert!(
        out.text().contains("/acme-forged/acme/pebble/account"),
        "{}",
        out.describe()
    );
    assert_eq!(a.pebble.requests("/order-plz"), 0);
    assert_eq!(a.pebble.requests("/sign-me-up"), 0);
    // A sealed value of the fleet moved to the account's key (a replay): refused too.
    etcd.delete("acme/pebble/account");
    let out = a.f.agent(0, &["--json", "renew", "--wait", "30"]);
    out.expect_code(0);
    let spec = etcd.get("certs/www/spec").expect("the spec");
    etcd.put("acme/pebble/account", spec);
    fs::remove_file(a.f.hosts[1].state.join("acme/pebble/account.json")).ok();
    let out =
        a.f.agent(1, &["--json", "renew", "--force", "--wait", "30"]);
    assert_ne!(out.code, Some(0), "{}", out.describe());
    assert!(
        out.text().contains("/acme-forged/acme/pebble/account") && out.text().contains("refused"),
        "{}",
        out.describe()
    );
    assert_eq!(a.pebble.requests("/order-plz"), 1, "{}", a.pebble.log());
}
