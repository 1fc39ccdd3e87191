//! An idle follower: a real three-member etcd, two hosts with nginx and ten certificates. While
//! nothing under `certs/` or `dcv/` changes, the daemon's resynchronisations (every 2 s here)
//! read nothing from etcd — each is one progress request on its watch — and a change (a
//! reissue by the other host) is still installed at once; a leader's run with nothing to do
//! writes nothing the followers read.

use crate::support;

use std::collections::BTreeMap;
use std::fs;
use std::time::{Duration, Instant};

use support::env::{TestEnv, norm_serial, wait_until};
use support::etcd::{EtcdClient, EtcdCluster};
use support::webserver::Server;

use crate::fleet_e2e::{Fleet, edit_config, ready};
use crate::fleet_takeover::first_run_delay;

const CERTS: usize = 10;

/// The serial host `i` recorded as installed for certificate `name`.
fn installed(f: &Fleet, i: usize, name: &str) -> Option<String> {
    let text = fs::read_to_string(f.hosts[i].state.join(format!("certs/{name}.json"))).ok()?;
    let v: serde_json::Value = serde_json::from_str(&text).ok()?;
    v["installed"]["serial"].as_str().map(norm_serial)
}

/// The messages of `method` the cluster received between `before` and `after`.
fn delta(before: &BTreeMap<String, u64>, after: &BTreeMap<String, u64>, method: &str) -> u64 {
    after.get(method).copied().unwrap_or_default() - before.get(method).copied().unwrap_or_default()
}

#[test]
fn an_idle_follower_reads_nothing_per_certificate_until_the_fleet_changes() {
    if !ready() {
        return;
    }
    let env = TestEnv::new();
    let cluster = EtcdCluster::start(env.dir.path(), 3);
    let names: Vec<(String, String)> = (0..CERTS)
        .map(|i| (format!("site{i}"), format!("site{i}.idle.test")))
        .collect();
    let certs: Vec<(&str, &str)> = names
        .iter()
        .map(|(n, d)| (n.as_str(), d.as_str()))
        .collect();
    let mut f = Fleet::build(
        env,
        &cluster.endpoints(),
        "/idle/",
        &[Server::Nginx, Server::Nginx],
        &certs,
    );
    // web2 follows and never orders (its scheduled run, if it leads, finds nothing to do);
    // web1 orders.
    edit_config(&f, 1, "allow_orders = true", "allow_orders = false");
    let started = Instant::now();
    f.start_daemon_with(1, &[("CERT_AGENT_TEST_FLEET_RESYNC_SECS", "2")]);
    let first_run = first_run_delay(&f, 1);

    // web1 issues the ten certificates for the fleet (again if web2's scheduled run held the
    // lead meanwhile); web2's daemon serves their validation files and installs them.
    let issued = wait_until(Duration::from_secs(240), || {
        let _ = f.agent(0, &["renew", "--wait", "60"]);
        names.iter().all(|(n, _)| installed(&f, 0, n).is_some())
    });
    assert!(issued, "web1 did not issue every certificate\n{}", f.logs());
    let in_step = || {
        names.iter().all(|(n, _)| {
            installed(&f, 1, n).is_some() && installed(&f, 1, n) == installed(&f, 0, n)
        })
    };
    assert!(
        wait_until(Duration::from_secs(60), in_step),
        "web2 did not install the fleet's certificates\n{}",
        f.logs()
    );
    // Past web2's first scheduled run (the next is an hour away) and the resynchronisations
    // that read what it and web1 wrote.
    let settled = first_run + Duration::from_secs(15);
    if let Some(left) = settled.checked_sub(started.elapsed()) {
        std::thread::sleep(left);
    }
    std::thread::sleep(Duration::from_secs(8));

    // Idle: five resynchronisation periods, web2's daemon the only client.
    let before = cluster.messages_received();
    std::thread::sleep(Duration::from_secs(10));
    let after = cluster.messages_received();
    let reads = ["Range", "Txn", "Put", "DeleteRange"]
        .iter()
        .map(|m| delta(&before, &after, m))
        .sum::<u64>();
    assert_eq!(
        reads,
        0,
        "an idle follower of {CERTS} certificates read or wrote etcd while nothing changed: \
         {before:?} -> {after:?}\n{}",
        f.logs()
    );
    let progress = delta(&before, &after, "Watch");
    assert!(
        progress >= 2,
        "the daemon did not ask its watch whether anything changed ({progress} watch \
         messages in 10 s at a 2 s resynchronisation)\n{}",
        f.logs()
    );

    // A change: web1 reissues one certificate; web2 installs it without waiting for a
    // resynchronisation.
    let old = installed(&f, 0, "site3").expect("issued");
    let out = f.agent(0, &["reissue", "site3", "--wait", "60"]);
    let new = installed(&f, 0, "site3").expect("issued");
    assert_ne!(
        old, new,
        "the reissue did not install a new serial\n{out:?}"
    );
    assert!(
        wait_until(Duration::from_secs(30), || installed(&f, 1, "site3")
            .as_deref()
            == Some(new.as_str())),
        "web2 did not pick the reissued certificate up\n{}",
        f.logs()
    );
    assert!(
        in_step(),
        "the other certificates left their serials\n{}",
        f.logs()
    );

    // A leader's run with nothing to do writes nothing under `certs/` (what every follower's
    // resynchronisation reads), nor under `dcv/`.
    let mut etcd = EtcdClient::connect(cluster.endpoints(), "/idle/");
    let mut shared = || -> BTreeMap<String, i64> {
        etcd.revisions()
            .into_iter()
            .filter(|(k, _)| k.starts_with("/idle/certs/") || k.starts_with("/idle/dcv/"))
            .collect()
    };
    let before = shared();
    let led = crate::fleet_batch::led(&f, &["--json", "renew"]);
    assert!(
        !led.text().contains("leads the fleet"),
        "web1 did not lead\n{}",
        led.describe()
    );
    let after = shared();
    let changed: Vec<&String> = after
        .iter()
        .filter(|(k, r)| before.get(*k) != Some(*r))
        .map(|(k, _)| k)
        .chain(before.keys().filter(|k| !after.contains_key(*k)))
        .collect();
    assert!(
        changed.is_empty(),
        "a leader's no-op run wrote under certs/ or dcv/: {changed:?}\n{}",
        led.describe()
    );
}
