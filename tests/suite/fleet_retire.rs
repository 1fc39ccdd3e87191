//! `cert-agent retire` in fleet mode, on two hosts with real nginx, a real three-member etcd
//! and the sandbox: the host that retires takes the lead, asks for the cancellation once and
//! writes the sealed tombstone with the deletion of the certificate's shared values in one
//! fenced transaction; the other host archives the certificate on its next run and nothing
//! more is asked of the API for it; `status`, `check` and `fleet status` say it is retired
//! and `forecast` counts it as no billed order on either host;
//! the documented way back (the tombstone deleted with etcdctl, the archive moved aside) and
//! the old tombstone then refused as a replay. A tombstone that does not open (garbage, not
//! sealed, another certificate's, another purpose's) is refused with its key named and the
//! certificate goes on renewing. A certificate with values under more hosts than one etcd
//! transaction takes has them all deleted, and no other value. While another host leads,
//! `retire` exits 75 and writes nothing.

use crate::fleet_e2e::ready;
use crate::fleet_rotate::set_fleet_keys;
use crate::fleet_trust::{PREFIX, Trial};

use std::fs;
use std::os::unix::fs::PermissionsExt;
use std::time::Duration;

use support::env::{norm_serial, wait_until};
use support::scenario::show;

use crate::support;

const TOMBSTONE: &str = "certs/www/retired";

fn cancel_calls(t: &Trial) -> usize {
    t.f.env
        .calls()
        .iter()
        .filter(|c| c.method == "POST" && c.path.ends_with("/cancel"))
        .count()
}

/// Every key under the prefix, relative to it.
fn keys_of(t: &mut Trial) -> Vec<String> {
    t.etcd
        .revisions()
        .into_keys()
        .map(|k| k.trim_start_matches(PREFIX).to_owned())
        .collect()
}

/// Host `i`'s `www` files and whether they are there.
fn www_files_exist(t: &Trial, i: usize) -> bool {
    let out = t.f.hosts[i].state.parent().unwrap().join("out");
    out.join("fullchain.pem").exists() && out.join("privkey.pem").exists()
}

#[test]
fn retire_on_one_host_cancels_once_and_every_host_archives_it_and_it_can_come_back() {
    if !ready() {
        return;
    }
    let mut t = Trial::start();
    let id = t.installed(0, "www").unwrap()["certificate_id"]
        .as_u64()
        .unwrap();
    let billed = t.f.env.billed();

    // web1's daemon follows the fleet. web2 retires www for the fleet (web1 placed the
    // order): one cancel call, its answer. Exit code 75 while web1's daemon leads a run.
    t.f.start_daemon(0);
    let mut out = t.f.agent(1, &["retire", "www", "--cancel", "--yes"]);
    let until = std::time::Instant::now() + Duration::from_secs(60);
    while out.code == Some(75) && std::time::Instant::now() < until {
        std::thread::sleep(Duration::from_millis(500));
        out = t.f.agent(1, &["retire", "www", "--cancel", "--yes"]);
    }
    out.expect_code(0);
    assert_eq!(cancel_calls(&t), 1, "{}", show(&t.f.env.calls()));
    let text = out.text();
    assert!(
        text.contains(&format!("cancel certificate {id}"))
            && text.contains("The cancellation order has been sent")
            && text.contains("retired for the fleet"),
        "{text}"
    );
    // The tombstone, and none of the certificate's other shared values; shop's untouched.
    let keys = keys_of(&mut t);
    assert!(keys.iter().any(|k| k == TOMBSTONE), "{keys:?}");
    for gone in ["certs/www/state", "certs/www/current", "dcv/www"] {
        assert!(!keys.iter().any(|k| k == gone), "{gone}: {keys:?}");
    }
    assert!(
        !keys
            .iter()
            .any(|k| k.starts_with("hosts/") && k.ends_with("/www")),
        "{keys:?}"
    );
    assert!(keys.iter().any(|k| k == "certs/shop/current"), "{keys:?}");
    let state2 = &t.f.hosts[1].state;
    assert!(state2.join("retired/www.json").exists());
    assert!(!state2.join("certs/www.json").exists());

    // web1's daemon archives it at once (the tombstone's change reaches its watch), keeps
    // the files its nginx still names (no --remove-files), and asks nothing more of the API
    // for www.
    let calls = t.f.env.calls().len();
    let state1 = t.f.hosts[0].state.clone();
    assert!(
        wait_until(Duration::from_secs(30), || {
            state1.join("retired/www.json").exists()
                && fs::read_to_string(state1.join("journal.log"))
                    .is_ok_and(|j| j.contains("fleet-retired"))
        }),
        "{}",
        t.f.logs()
    );
    t.f.kill_daemon(0);
    assert!(
        t.f.logs().contains("retired for the fleet"),
        "{}",
        t.f.logs()
    );
    let archived: serde_json::Value =
        serde_json::from_slice(&fs::read(state1.join("retired/www.json")).unwrap()).unwrap();
    assert_eq!(archived["record"]["order"]["certificate_id"], id);
    assert!(!state1.join("certs/www.json").exists());
    assert!(www_files_exist(&t, 0) && www_files_exist(&t, 1));
    let journal = fs::read_to_string(state1.join("journal.log")).unwrap();
    assert!(
        journal.contains("fleet-retired") && journal.contains("\"by\":\"web2\""),
        "{journal}"
    );
    // Later runs on both hosts: www refused as retired, no order, nothing for its id.
    for i in [1, 0] {
        let again = t.f.agent(i, &["--json", "renew"]);
        assert_eq!(
            again.outcome("www")["outcome"],
            "failed",
            "{}",
            again.describe()
        );
        assert!(again.stdout.contains("was retired"), "{}", again.describe());
    }
    let after = t.f.env.calls();
    assert!(
        !after[calls..]
            .iter()
            .any(|c| c.path.contains(&id.to_string()) || c.method == "POST"),
        "{}",
        show(&after[calls..])
    );
    assert_eq!(t.f.env.billed(), billed);
    assert_eq!(cancel_calls(&t), 1);

    // status and check on the host that did not retire it: retired, with the WARNING.
    let status = t.f.agent(0, &["status"]);
    assert!(
        status.stdout.contains(" retired ")
            && status
                .stdout
                .contains("remove its [[certificate]] entry (record: "),
        "{}",
        status.describe()
    );
    let check = t.f.agent(0, &["check", "--no-balance"]);
    assert!(
        check.stdout.contains("WARNING www: retired ("),
        "{}",
        check.describe()
    );
    // The money: on neither host is www a billed order any more (its configuration entry
    // stays until the operator edits it).
    for i in [0, 1] {
        let f = t.f.agent(i, &["--json", "forecast"]);
        f.expect_code(0);
        let items = f.json()["items"].as_array().cloned().unwrap_or_default();
        assert!(
            !items.iter().any(|item| item["name"] == "www"),
            "host {i}: {}",
            f.describe()
        );
    }
    // fleet status: retired, by web2, with the cancellation's answer.
    let fs_out = t.f.agent(0, &["--json", "fleet", "status"]);
    let fleet = fs_out.json();
    let www = fleet["certificates"]
        .as_array()
        .and_then(|a| a.iter().find(|c| c["name"] == "www"))
        .cloned()
        .unwrap_or_default();
    assert_eq!(www["retired"]["by"], "web2", "{}", fs_out.describe());
    // No host row: no host installs it any more (not "never installed").
    assert_eq!(www["hosts"], serde_json::json!([]), "{}", fs_out.describe());
    assert!(
        www["retired"]["cancel"]
            .as_str()
            .unwrap_or_default()
            .contains("success=true"),
        "{}",
        fs_out.describe()
    );
    let table = t.f.agent(0, &["fleet", "status"]);
    assert!(
        table.stdout.contains("www: retired for the fleet by web2")
            && !table.stdout.contains("never installed")
            && table
                .stdout
                .lines()
                .any(|l| l.starts_with("www ") && l.trim_end().ends_with("retired")),
        "{}",
        table.describe()
    );

    // The way back, as docs/fleet.md says: the tombstone deleted with etcdctl, each host's
    // archive moved aside; then the fleet manages www again.
    let old = t.etcd.get(TOMBSTONE).unwrap();
    let endpoints = t.f.endpoints().join(",");
    let del = std::process::Command::new("etcdctl")
        .env("ETCDCTL_API", "3")
        .args([
            "--endpoints",
            &endpoints,
            "del",
            &format!("{PREFIX}{TOMBSTONE}"),
        ])
        .output()
        .expect("etcdctl runs");
    assert!(
        del.status.success() && String::from_utf8_lossy(&del.stdout).trim() == "1",
        "{del:?}"
    );
    for h in &t.f.hosts {
        fs::rename(
            h.state.join("retired/www.json"),
            h.state.join("retired/www.json.back"),
        )
        .unwrap();
    }
    let back = t.f.agent(0, &["--json", "renew", "--wait", "60"]);
    assert_ne!(
        back.outcome("www")["outcome"],
        "failed",
        "{}",
        back.describe()
    );
    let back2 = t.f.agent(1, &["--json", "renew"]);
    assert_ne!(
        back2.outcome("www")["outcome"],
        "failed",
        "{}",
        back2.describe()
    );
    let status = t.f.agent(1, &["status"]);
    assert!(
        !status
            .stdout
            .contains("remove its [[certificate]] entry (record: "),
        "{}",
        status.describe()
    );

    // The old tombstone put back: an older value than the record each host accepted since,
    // refused as a replay; www is not retired.
    t.etcd.put(TOMBSTONE, old);
    let replay = t.f.agent(1, &["--json", "renew"]);
    let o = replay.outcome("www");
    let error = o["error"].as_str().unwrap_or_default();
    assert!(
        error.contains(&format!("{PREFIX}{TOMBSTONE}")) && error.contains("replay"),
        "{}",
        replay.describe()
    );
    assert!(t.f.hosts[1].state.join("certs/www.json").exists());
    assert!(!t.f.hosts[1].state.join("retired/www.json").exists());
}

#[test]
fn a_tombstone_that_does_not_open_is_refused_and_the_certificate_keeps_renewing() {
    if !ready() {
        return;
    }
    let mut t = Trial::start();
    // Values of shop under 70 more hosts (as if written by hosts that served it): with the
    // tombstone, more deletions than etcd takes in one transaction (128 operations). Values
    // of other certificates, of a name that starts with shop's, and outside `hosts/` stay.
    for h in 0..70 {
        for kind in ["certs", "proof"] {
            t.etcd.put(&format!("hosts/gone{h:02}/{kind}/shop"), "x");
        }
    }
    let kept = [
        "hosts/gone00/certs/shopping",
        "hosts/gone00/certs/www",
        "hosts/gone00/seen",
        "hosts0/certs/shop",
    ];
    for k in kept {
        t.etcd.put(k, "x");
    }
    // A real tombstone of another certificate: shop retired for the fleet.
    t.f.agent(0, &["retire", "shop", "--yes"]).expect_code(0);
    let keys = keys_of(&mut t);
    let left: Vec<_> = keys
        .iter()
        .filter(|k| k.starts_with("hosts/") && k.ends_with("/shop"))
        .collect();
    assert!(left.is_empty(), "{left:?}");
    for k in kept {
        assert!(keys.iter().any(|x| x == k), "{k}: {keys:?}");
        t.etcd.delete(k);
    }
    let shop = t.etcd.get("certs/shop/retired").unwrap();
    let current = t.etcd.get("certs/www/current").unwrap();
    let unsealed = serde_json::to_vec(&serde_json::json!({
        "retired_at": "2026-01-01T00:00:00Z", "by": "writer", "remove_files": true
    }))
    .unwrap();
    let key = format!("{PREFIX}{TOMBSTONE}");
    for (case, value) in [
        ("garbage", b"\x00\x01 not a value \xff".to_vec()),
        ("not sealed", unsealed),
        ("another certificate's", shop),
        ("another purpose", current),
    ] {
        t.etcd.put(TOMBSTONE, value);
        let before = norm_serial(t.installed(0, "www").unwrap()["serial"].as_str().unwrap());
        // The leader refuses it, names the key, and reissues www all the same.
        let re = t.f.agent(0, &["--json", "reissue", "www", "--wait", "60"]);
        let serial = re.installed_serial("www");
        assert_ne!(serial, before, "{case}");
        assert!(re.stderr.contains(&key), "{case}: {}", re.describe());
        // The other host installs it, and its report names the refused key.
        let out = t.f.agent(1, &["--json", "renew"]);
        let o = out.outcome("www");
        assert_eq!(o["outcome"], "failed", "{case}: {}", out.describe());
        assert!(
            o["error"].as_str().unwrap_or_default().contains(&key),
            "{case}: {}",
            out.describe()
        );
        let installed = t.installed(1, "www").unwrap();
        assert_eq!(
            norm_serial(installed["serial"].as_str().unwrap()),
            serial,
            "{case}"
        );
        for i in 0..2 {
            assert!(
                !t.f.hosts[i].state.join("retired/www.json").exists(),
                "{case}"
            );
        }
        t.etcd.delete(TOMBSTONE);
    }

    // The fleet key rotated: shop's tombstone is sealed again, at a higher version, and still
    // opens on every host (no replay refused): shop stays retired, www goes on.
    let old_key = t.f.env.path("fleet.key");
    let new_key = t.f.env.path("fleet-new.key");
    fs::write(&new_key, [0xa7u8; 32]).unwrap();
    fs::set_permissions(&new_key, fs::Permissions::from_mode(0o600)).unwrap();
    for i in 0..2 {
        set_fleet_keys(&t.f, i, &new_key, Some(&old_key));
    }
    let before = t.etcd.get("certs/shop/retired").unwrap();
    // Exit 75: the other host has not run since (it has not moved to the new key yet).
    let rotated = t.f.agent(0, &["--json", "fleet", "rotate-key"]);
    rotated.expect_code(75);
    assert_ne!(t.etcd.get("certs/shop/retired").unwrap(), before);
    for i in [1, 0] {
        let out = t.f.agent(i, &["--json", "renew"]);
        let error = out.outcome("shop")["error"]
            .as_str()
            .unwrap_or_default()
            .to_owned();
        assert!(
            error.contains("was retired") && !error.contains("certs/shop/retired"),
            "host {i}: {}",
            out.describe()
        );
        assert_ne!(
            out.outcome("www")["outcome"],
            "failed",
            "{}",
            out.describe()
        );
        assert!(t.f.hosts[i].state.join("retired/shop.json").exists());
    }
}

#[test]
fn retire_while_another_host_leads_exits_75_and_writes_nothing() {
    if !ready() {
        return;
    }
    let mut t = Trial::start();
    t.hold_lead("web9");
    let keys = keys_of(&mut t);
    let state = t.etcd.get("certs/www/state");
    let calls = t.f.env.calls().len();
    let out = t.f.agent(0, &["retire", "www", "--cancel", "--yes"]);
    out.expect_code(75);
    assert!(
        out.stderr.contains("web9 leads the fleet") && out.stderr.contains("again"),
        "{}",
        out.describe()
    );
    assert_eq!(keys_of(&mut t), keys);
    assert_eq!(t.etcd.get("certs/www/state"), state);
    assert_eq!(t.f.env.calls().len(), calls, "no API call");
    assert!(t.f.hosts[0].state.join("certs/www.json").exists());
    assert!(!t.f.hosts[0].state.join("retired").join("www.json").exists());
}
