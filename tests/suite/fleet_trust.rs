//! The etcd writer: a party that can write the fleet's prefix but does not hold the fleet key
//! (an etcd operator, a leaked etcd user). Two hosts with real nginx and two certificates,
//! `www` (attacked) and `shop`. For each key the fleet uses the writer puts garbage, a value
//! of the right shape but not sealed, a sealed value of another certificate or purpose, or
//! an older sealed value (a replay). Each time: no order and no reissue for `www`, no
//! validation file, no install, the error names the etcd key, and `shop` is reissued and
//! installed on both hosts in the same runs.

use crate::fleet_e2e::{DOMAIN, Fleet, ready};
use crate::support;

use std::collections::BTreeMap;
use std::fs;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use support::env::{norm_serial, wait_until};
use support::etcd::EtcdClient;
use support::scenario::{show, state_changing};
use support::webserver::Server;

pub(crate) const SHOP: &str = "shop.fleet.test";
pub(crate) const PREFIX: &str = "/trust/";

/// A fleet of two hosts that issued both certificates, and the writer's etcd client (the
/// failure tests of `fleet_failures` use it too).
pub(crate) struct Trial {
    pub(crate) f: Fleet,
    pub(crate) etcd: EtcdClient,
    /// web2's run of an attack follows (another name holds the lead meanwhile): it refuses,
    /// where as the leader holding its own copy it would write that copy back (fleet_repair).
    pub(crate) web2_follows: bool,
}

impl Trial {
    pub(crate) fn start() -> Self {
        let f = Fleet::start_under(
            PREFIX,
            &[Server::Nginx, Server::Nginx],
            &[("www", DOMAIN), ("shop", SHOP)],
        );
        f.env.sandbox.set_dcv_ports(f.hosts[0].web.http_port(), 0);
        f.agent(0, &["--json", "renew", "--wait", "60"])
            .expect_code(0);
        // web2 leads once (with nothing due a run does not lead, debug builds aside): it
        // holds its own copy of the shared records, as a host that led does.
        f.env
            .agent_at(&f.hosts[1].config, ["--json", "renew"])
            .env("CERT_AGENT_TEST_LEAD_NO_OP", "1")
            .run()
            .expect_code(0);
        let etcd = f.etcd();
        let t = Self {
            f,
            etcd,
            web2_follows: false,
        };
        for i in 0..2 {
            assert!(t.installed(i, "www").is_some(), "{}", t.f.logs());
        }
        t
    }

    /// Writes the leader key as another host's lead would: `host` on a lease (ten minutes) of
    /// its own, so that no host of the trial leads until the key is deleted.
    pub(crate) fn hold_lead(&mut self, host: &str) {
        self.etcd.put_on_lease("leader", host, 600);
    }

    /// Host `i` forgets which accepted shared record of `name` its state directory holds
    /// whole, and that it agreed with its spec (as a host of an earlier version, which did not
    /// note the first): it has no copy of its own to write back.
    pub(crate) fn forget_own_copy(&self, i: usize, name: &str) {
        let path = self.f.hosts[i].state.join("fleet-versions.json");
        let mut v: serde_json::Value = serde_json::from_slice(&fs::read(&path).unwrap()).unwrap();
        if let Some(c) = v.get_mut(name).and_then(|c| c.as_object_mut()) {
            c.remove("held");
            c.remove("spec");
        }
        fs::write(&path, serde_json::to_vec(&v).unwrap()).unwrap();
    }

    /// Every value written under `dcv/` from now on, by key (relative to the prefix), in order:
    /// the sealed validation files the leader publishes and withdraws within one run.
    fn capture_dcv(&self) -> Arc<Mutex<BTreeMap<String, Vec<Vec<u8>>>>> {
        let seen: Arc<Mutex<BTreeMap<String, Vec<Vec<u8>>>>> = Arc::default();
        let out = seen.clone();
        let endpoints = self.f.endpoints();
        let (ready_tx, ready_rx) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            let rt = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .unwrap();
            rt.block_on(async move {
                let Ok(mut etcd) = etcd_client::Client::connect(endpoints, None).await else {
                    return;
                };
                let watch = etcd
                    .watch(
                        format!("{PREFIX}dcv/"),
                        Some(etcd_client::WatchOptions::new().with_prefix()),
                    )
                    .await;
                let Ok(mut stream) = watch else {
                    return;
                };
                let _ = ready_tx.send(());
                while let Ok(Some(resp)) = stream.message().await {
                    for kv in resp.events().iter().filter_map(|e| e.kv()) {
                        if kv.value().is_empty() {
                            continue;
                        }
                        let key = String::from_utf8_lossy(kv.key());
                        let rel = key.strip_prefix(PREFIX).unwrap_or(&key).to_owned();
                        out.lock()
                            .unwrap()
                            .entry(rel)
                            .or_default()
                            .push(kv.value().to_vec());
                    }
                }
            });
        });
        ready_rx
            .recv_timeout(Duration::from_secs(30))
            .expect("the watch of dcv/ started");
        seen
    }

    /// Host `i`'s record of `name`: what is installed (serial and time).
    pub(crate) fn installed(&self, i: usize, name: &str) -> Option<serde_json::Value> {
        let path = self.f.hosts[i].state.join(format!("certs/{name}.json"));
        let v: serde_json::Value = serde_json::from_slice(&fs::read(path).ok()?).ok()?;
        Some(v["installed"].clone()).filter(|i| !i.is_null())
    }

    fn www_files(&self, i: usize) -> Vec<Vec<u8>> {
        let out = self.f.hosts[i].state.parent().unwrap().join("out");
        ["fullchain.pem", "privkey.pem"]
            .iter()
            .map(|f| fs::read(out.join(f)).unwrap())
            .collect()
    }

    fn validation_files(&self, i: usize) -> Vec<PathBuf> {
        let dir = self.f.hosts[i]
            .state
            .parent()
            .unwrap()
            .join("www-root/.well-known/pki-validation");
        fs::read_dir(dir)
            .map(|d| d.flatten().map(|e| e.path()).collect())
            .unwrap_or_default()
    }

    /// Reissues `www` (both hosts install it): what etcd held before becomes older values.
    pub(crate) fn move_www_on(&mut self) {
        let re = self
            .f
            .agent(0, &["--json", "reissue", "www", "--wait", "60"]);
        re.expect_code(0);
        // web2 installs it and leads (it takes the new shared record as its copy).
        self.f
            .env
            .agent_at(&self.f.hosts[1].config, ["--json", "renew"])
            .env("CERT_AGENT_TEST_LEAD_NO_OP", "1")
            .run()
            .expect_code(0);
    }

    /// The writer puts `value` at `rel`; web1 reissues `shop`, web2 renews (it installs
    /// `shop` and leads). Checks every refusal, then puts the fleet's value back (when no
    /// leader replaced it).
    pub(crate) fn attack(&mut self, case: &str, rel: &str, value: Vec<u8>) -> String {
        let original = self.etcd.get(rel);
        let www: Vec<_> = (0..2)
            .map(|i| (self.installed(i, "www"), self.www_files(i)))
            .collect();
        let calls = self.f.env.calls().len();
        let billed = self.f.env.billed();
        self.etcd.put(rel, value.clone());

        let re = self
            .f
            .agent(0, &["--json", "reissue", "shop", "--wait", "60"]);
        re.expect_code(0);
        let shop = re.installed_serial("shop");
        if self.web2_follows {
            self.hold_lead("web9");
        }
        let out = self.f.agent(1, &["--json", "renew"]);
        if self.web2_follows {
            self.etcd.delete("leader");
        }
        let key = format!("{PREFIX}{rel}");
        let o = out.outcome("www");
        assert_eq!(o["outcome"], "failed", "{case}: {}", out.describe());
        let error = o["error"].as_str().unwrap_or_default().to_owned();
        assert!(error.contains(&key), "{case}: {error}");
        // The other certificate of the same run: installed on web2 too.
        let installed = self.installed(1, "shop").unwrap();
        assert_eq!(
            norm_serial(installed["serial"].as_str().unwrap()),
            shop,
            "{case}: {}",
            out.describe()
        );
        // No order, no reissue but shop's, nothing billed.
        let all = self.f.env.calls();
        let changed = state_changing(&all[calls..]);
        let shop_id = self.installed(0, "shop").unwrap()["certificate_id"].clone();
        assert!(
            changed.len() == 1 && changed[0].path.contains(&shop_id.to_string()),
            "{case}: {}",
            show(&all[calls..])
        );
        assert_eq!(self.f.env.billed(), billed, "{case}");
        // No install of www anywhere, no validation file left.
        for (i, before) in www.iter().enumerate() {
            assert_eq!(self.installed(i, "www"), before.0, "{case}: host {i}");
            assert_eq!(self.www_files(i), before.1, "{case}: host {i}");
            assert!(
                wait_until(Duration::from_secs(10), || self
                    .validation_files(i)
                    .is_empty()),
                "{case}: host {i}: {:?}",
                self.validation_files(i)
            );
        }
        if self.etcd.get(rel) == Some(value) {
            match original {
                Some(v) => self.etcd.put(rel, v),
                None => self.etcd.delete(rel),
            }
        }
        error
    }
}

pub(crate) const GARBAGE: &[u8] = b"\x00\x01 not a value \xff";

/// A record of `www` as the writer would write it: no order, no intent, and a pending CSR of
/// the writer's own key with an unconfirmed reissue.
fn unsealed_state(certificate_id: u64) -> Vec<u8> {
    let csr = support::api::csr(DOMAIN);
    serde_json::to_vec(&serde_json::json!({
        "record": {
            "version": 1, "name": "www", "intent": null, "order": null,
            "pending_key": {
                "key_file": "", "csr_pem": csr,
                "csr_md5": "0123456789ABCDEF0123456789ABCDEF",
                "csr_sha256": "0123456789ABCDEF0123456789ABCDEF0123456789ABCDEF0123456789ABCDEF",
                "created_at": "1970-01-01T00:00:03Z"
            },
            "installed": null, "last_poll": null, "last_state": null, "last_error": null,
            "reissue": {
                "certificate_id": certificate_id,
                "csr_sha256": "0123456789ABCDEF0123456789ABCDEF0123456789ABCDEF0123456789ABCDEF",
                "previous_serial": null, "requested_at": "2026-01-01T00:00:00Z",
                "confirmed": false
            }
        },
        "written_by": "writer", "written_at": "2026-01-01T00:00:00Z"
    }))
    .unwrap()
}

#[test]
fn a_shared_record_with_the_writers_csr_or_without_its_order_is_refused() {
    if !ready() {
        return;
    }
    let mut t = Trial::start();
    let id = t.installed(0, "www").unwrap()["certificate_id"]
        .as_u64()
        .unwrap();
    let old = t.etcd.get("certs/www/state").unwrap();
    t.move_www_on();
    let rel = "certs/www/state";
    let shop = t.etcd.get("certs/shop/state").unwrap();
    let current = t.etcd.get("certs/www/current").unwrap();
    let cases: [(&str, Vec<u8>); 5] = [
        // The CSR swap and the null order/intent: a record of the right shape, not sealed.
        ("csr swap, null order", unsealed_state(id)),
        ("garbage", GARBAGE.to_vec()),
        ("another certificate's record", shop),
        ("another purpose", current),
        ("replay", old),
    ];
    for (case, value) in cases {
        // Hosts that hold no copy of the record they accepted (see fleet_repair for those
        // that do): the refusal stands.
        for i in 0..2 {
            t.forget_own_copy(i, "www");
        }
        let e = t.attack(case, rel, value);
        match case {
            "csr swap, null order" => assert!(e.contains("not a sealed value"), "{e}"),
            "replay" => assert!(e.contains("replay"), "{e}"),
            _ => {}
        }
    }
}

#[test]
fn a_forged_validation_file_is_never_served() {
    if !ready() {
        return;
    }
    let mut t = Trial::start();
    // Sealed validation files of the fleet, caught while the leader published them: www's
    // of the reissue below (older then), shop's of a reissue of shop.
    let dcv = t.capture_dcv();
    t.move_www_on();
    t.f.agent(0, &["--json", "reissue", "shop", "--wait", "60"])
        .expect_code(0);
    let caught = |rel: &str| {
        let seen = dcv.lock().unwrap();
        seen.get(rel)
            .and_then(|v| v.first().cloned())
            .unwrap_or_else(|| panic!("no sealed {rel} was published: {:?}", seen.keys()))
    };
    let (old_www, shop) = (caught("dcv/www"), caught("dcv/shop"));
    let rel = "dcv/www";
    let e = t.attack("an older sealed validation file", rel, old_www);
    assert!(e.contains("pending CSR"), "{e}");
    t.attack("another certificate's validation file", rel, shop);
    let forged = serde_json::to_vec(&serde_json::json!({
        "file_name": "0123456789ABCDEF0123456789ABCDEF.txt",
        "content": "0123456789ABCDEF0123456789ABCDEF0123456789ABCDEF0123456789ABCDEF\ncomodoca.com\nforged"
    }))
    .unwrap();
    t.attack("forged validation file", rel, forged);
    t.attack("garbage", rel, GARBAGE.to_vec());
    let state = t.etcd.get("certs/www/state").unwrap();
    t.attack("another purpose", rel, state);
}

#[test]
fn a_rolled_back_current_certificate_is_refused() {
    if !ready() {
        return;
    }
    let mut t = Trial::start();
    let old = t.etcd.get("certs/www/current").unwrap();
    t.move_www_on();
    t.web2_follows = true;
    let rel = "certs/www/current";
    // The old certificate put back: refused as a replay, nothing reinstalled.
    let e = t.attack("rollback", rel, old);
    assert!(e.contains("replay"), "{e}");
    let unsealed = serde_json::to_vec(&serde_json::json!({
        "version": 99, "certificate_id": 1, "serial": "01",
        "not_before": "2099-01-01T00:00:00Z", "not_after": "2099-12-31T00:00:00Z",
        "published_by": "writer", "published_at": "2026-01-01T00:00:00Z",
        "archive": "", "key": ""
    }))
    .unwrap();
    t.attack("unsealed", rel, unsealed);
    t.attack("garbage", rel, GARBAGE.to_vec());
    let shop = t.etcd.get("certs/shop/current").unwrap();
    t.attack("another certificate's current", rel, shop);
    let state = t.etcd.get("certs/www/state").unwrap();
    t.attack("another purpose", rel, state);
}

/// The leader key is the one value not sealed (a host's name on its lease; every write of a
/// leader is fenced by the key's creation): a value put there without a lease — garbage, a
/// host's name — would stop every lead for good. It is ended, and the run leads as usual.
#[test]
fn a_forged_leader_key_without_a_lease_does_not_stop_the_fleet() {
    if !ready() {
        return;
    }
    let mut t = Trial::start();
    let billed = t.f.env.billed();
    for (case, value) in [
        ("garbage", GARBAGE.to_vec()),
        ("another host", b"web2".to_vec()),
    ] {
        t.etcd.put("leader", value);
        let before = t.installed(0, "shop").unwrap()["serial"].clone();
        let out = t.f.agent(0, &["--json", "reissue", "shop", "--wait", "60"]);
        out.expect_code(0);
        let after = t.installed(0, "shop").unwrap()["serial"].clone();
        assert_ne!(
            before,
            after,
            "{case}: web1 led and reissued: {}",
            out.describe()
        );
        assert!(
            t.etcd.get("leader").is_none(),
            "{case}: the lead was given up"
        );
    }
    assert_eq!(t.f.env.billed(), billed);
}

/// (A spec is written once, at version 1, and never changes: an older sealed spec is the same
/// value.)
#[test]
fn a_forged_spec_is_refused_for_its_certificate_only() {
    if !ready() {
        return;
    }
    let mut t = Trial::start();
    let rel = "certs/www/spec";
    let unsealed = serde_json::to_vec(&serde_json::json!({
        "domains": [DOMAIN], "product_id": 1, "key_type": "rsa2048", "host": "writer"
    }))
    .unwrap();
    let shop = t.etcd.get("certs/shop/spec").unwrap();
    let check = t.etcd.get("keycheck").unwrap();
    let cases: [(&str, Vec<u8>); 4] = [
        ("unsealed spec", unsealed),
        ("garbage spec", GARBAGE.to_vec()),
        ("another certificate's spec", shop),
        ("another purpose", check),
    ];
    for (case, value) in cases {
        // Hosts that never agreed with the spec (see fleet_repair for those that did): the
        // refusal stands.
        for i in 0..2 {
            t.forget_own_copy(i, "www");
        }
        t.attack(case, rel, value);
    }
}

/// web2's row of `www` in `fleet status --json`.
fn web2_status(t: &Trial) -> serde_json::Value {
    let st = t.f.agent(0, &["--json", "fleet", "status"]);
    let v = st.json();
    let www = v["certificates"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["name"] == "www")
        .cloned()
        .unwrap_or_else(|| panic!("{v}"));
    www["hosts"]
        .as_array()
        .unwrap()
        .iter()
        .find(|h| h["host"] == "web2")
        .cloned()
        .unwrap_or_else(|| panic!("{v}"))
}

/// A host result that does not open — garbage, unsealed, another certificate's, another
/// purpose's — shows as an error naming its key in `fleet status`, never as current. An older
/// sealed result put back (a replay) shows the older serial: the host is seen as not serving
/// the current certificate, never the reverse.
#[test]
fn a_forged_or_replayed_host_result_never_shows_a_host_as_current() {
    if !ready() {
        return;
    }
    let mut t = Trial::start();
    let rel = "hosts/web2/certs/www";
    let old = t.etcd.get(rel).unwrap();
    t.move_www_on();
    let current = t.installed(1, "www").unwrap()["serial"]
        .as_str()
        .map(norm_serial)
        .unwrap();
    let unsealed = serde_json::to_vec(&serde_json::json!({
        "serial": current, "version": 99, "at": "2099-01-01T00:00:00Z"
    }))
    .unwrap();
    let shop = t.etcd.get("hosts/web2/certs/shop").unwrap();
    let seen = t.etcd.get("hosts/web2/seen").unwrap();
    let cases: [(&str, Vec<u8>); 4] = [
        ("garbage", GARBAGE.to_vec()),
        ("unsealed", unsealed),
        ("another certificate's", shop),
        ("another purpose", seen),
    ];
    let fresh = t.etcd.get(rel).unwrap();
    for (case, value) in cases {
        t.etcd.put(rel, value);
        let web2 = web2_status(&t);
        let error = web2["error"].as_str().unwrap_or_default();
        assert!(error.contains(&format!("{PREFIX}{rel}")), "{case}: {web2}");
        assert!(web2["serial"].is_null(), "{case}: {web2}");
    }
    t.etcd.put(rel, old);
    let web2 = web2_status(&t);
    let shown = web2["serial"].as_str().map(norm_serial);
    assert!(
        shown.is_some() && shown.as_deref() != Some(current.as_str()),
        "a replayed result shows the older serial: {web2}"
    );
    t.etcd.put(rel, fresh);
}

/// Host `i`'s `secret_file`.
fn set_secret_file(t: &Trial, i: usize, key: &std::path::Path) {
    let path = &t.f.hosts[i].config;
    let text = fs::read_to_string(path).unwrap();
    let text: Vec<String> = text
        .lines()
        .map(|l| {
            if l.starts_with("secret_file = ") {
                format!("secret_file = \"{}\"", key.display())
            } else {
                l.to_owned()
            }
        })
        .collect();
    fs::write(path, text.join("\n") + "\n").unwrap();
}

/// A key check that is not the fleet's (garbage, unsealed, a sealed value of another
/// purpose) does not stop the fleet: the hosts' key opens the fleet's other values, so the
/// key check is refused, the runs go on, and the leader seals it again. (A key check sealed
/// earlier by the fleet holds the same text at the same version: put back, it is the fleet's.)
/// A host whose key is not the fleet's still stops, saying so.
#[test]
fn a_forged_key_check_is_sealed_again_and_a_host_with_another_key_still_stops() {
    if !ready() {
        return;
    }
    let mut t = Trial::start();
    let spec = t.etcd.get("certs/www/spec").unwrap();
    let cases: [(&str, Vec<u8>); 3] = [
        ("garbage", GARBAGE.to_vec()),
        ("unsealed", b"cert-agent fleet key".to_vec()),
        ("another purpose", spec),
    ];
    let billed = t.f.env.billed();
    for (case, forged) in cases {
        t.etcd.put("keycheck", forged.clone());
        for i in [1, 0] {
            let out = t.f.agent(i, &["--json", "renew"]);
            out.expect_code(0);
            for name in ["www", "shop"] {
                assert_ne!(
                    out.outcome(name)["outcome"],
                    "failed",
                    "{case}: host {i}: {}",
                    out.describe()
                );
            }
        }
        let now = t.etcd.get("keycheck").unwrap();
        assert_ne!(now, forged, "{case}: the leader sealed the key check again");
        t.f.agent(1, &["--json", "renew"]).expect_code(0);
    }
    assert_eq!(t.f.env.billed(), billed);

    // A host with another key: nothing opens, it stops and says so.
    let other = t.f.env.path("other.key");
    fs::write(&other, [0x11u8; 32]).unwrap();
    use std::os::unix::fs::PermissionsExt;
    fs::set_permissions(&other, fs::Permissions::from_mode(0o600)).unwrap();
    set_secret_file(&t, 1, &other);
    let out = t.f.agent(1, &["--json", "renew"]);
    out.expect_failure();
    let text = format!("{}{}", out.stdout, out.stderr);
    assert!(
        text.contains("not the fleet's") && text.contains(&format!("{PREFIX}keycheck")),
        "{}",
        out.describe()
    );
    let key = t.f.env.path("fleet.key");
    set_secret_file(&t, 1, &key);
    t.f.agent(1, &["--json", "renew"]).expect_code(0);
}
