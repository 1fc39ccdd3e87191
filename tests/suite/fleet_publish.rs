//! A leader publishes its run's certificates concurrently: more certificates than it writes at
//! once, each at its own fenced version, a value it cannot open replaced, and the follower
//! installs the burst with one reload. A leader that crashes between its first publication
//! and the write of its accepted versions recorded none of them; its next run publishes the
//! rest at the right versions. Real etcd (three members), real nginx on both hosts.

use crate::support;

use std::collections::BTreeMap;
use std::time::Duration;

use support::env::{TestEnv, wait_until};
use support::etcd::{EtcdClient, EtcdCluster};
use support::webserver::Server;

use crate::fleet_batch::{count_reloads, installed, led, reloads, until_watching};
use crate::fleet_e2e::{Fleet, numbered, ready};

/// More than the leader writes at once (32).
const CERTS: usize = 40;

fn names() -> Vec<(String, String)> {
    numbered(CERTS)
}

/// Two nginx hosts with [`CERTS`] certificates under `prefix`; web1 validates.
fn fleet(prefix: &str, cluster: &EtcdCluster, env: TestEnv) -> Fleet {
    let servers = [Server::Nginx, Server::Nginx];
    Fleet::numbered(env, &cluster.endpoints(), prefix, &servers, CERTS)
}

/// The version of each certificate's current value host `i` accepted, from its versions file.
fn current_versions(f: &Fleet, i: usize) -> BTreeMap<String, u64> {
    let path = f.hosts[i].state.join("fleet-versions.json");
    let text = std::fs::read_to_string(&path).unwrap_or_default();
    let v: serde_json::Value = serde_json::from_str(&text).unwrap_or_default();
    names()
        .into_iter()
        .filter_map(|(name, _)| {
            let version = v[&name]["current"]["version"].as_u64()?;
            Some((name, version))
        })
        .collect()
}

/// The reissue calls the sandbox answered, one a line.
fn reissue_calls(f: &Fleet) -> String {
    let calls = f.env.calls();
    support::scenario::matching(&calls, "POST", support::scenario::REISSUE)
        .iter()
        .map(|c| format!("{} {} -> {}\n", c.time, c.path, c.status))
        .collect()
}

fn all_at(f: &Fleet, i: usize, version: u64) -> bool {
    let seen = current_versions(f, i);
    seen.len() == CERTS && seen.values().all(|v| *v == version)
}

#[test]
fn a_leader_publishes_a_mass_reissue_at_once_each_certificate_fenced() {
    if !ready() {
        return;
    }
    let env = TestEnv::new();
    let cluster = EtcdCluster::start(env.dir.path(), 3);
    let mut f = fleet("/publish/", &cluster, env);
    let counted = count_reloads(&f, 1);
    let names = names();

    let first = f.agent(0, &["--json", "renew", "--wait", "120"]);
    first.expect_code(0);
    let serials: Vec<String> = names
        .iter()
        .map(|(n, _)| first.installed_serial(n))
        .collect();
    assert!(all_at(&f, 0, 1), "{:?}", current_versions(&f, 0));
    f.agent(1, &["--json", "renew"]).expect_code(0);
    for ((name, _), serial) in names.iter().zip(&serials) {
        assert_eq!(installed(&f, 1, name).as_ref(), Some(serial), "{name}");
    }

    // A value for c7 that is not the fleet's (no fleet key): the next publication replaces it.
    let mut etcd = EtcdClient::connect(cluster.endpoints(), "/publish/");
    etcd.put("certs/c7/current", b"forged".to_vec());

    // web2's daemon follows the fleet; none of its scheduled runs comes during the test (one
    // that led before web1's run would hand web2's certificate of c7 over in place of the
    // forged value, and web1's reissue would rightly be the version after that one).
    let watching = cluster.watches();
    crate::fleet_rounds::daemon_without_runs(&mut f, 1);
    until_watching(&f, &cluster, watching);
    let before = reloads(&counted);
    let again = led(&f, &["--json", "renew", "--force", "--wait", "120"]);
    let next: Vec<String> = names
        .iter()
        .map(|(n, _)| again.installed_serial(n))
        .collect();
    assert!(
        next.iter().zip(&serials).all(|(a, b)| a != b),
        "{}",
        again.describe()
    );
    // Each publication at the version after the one before (the forged value counted as none).
    assert!(
        all_at(&f, 0, 2),
        "{:?}\n{}\nreissues:\n{}",
        current_versions(&f, 0),
        f.logs(),
        reissue_calls(&f)
    );
    let all = wait_until(Duration::from_secs(90), || {
        names
            .iter()
            .zip(&next)
            .all(|((n, _), s)| installed(&f, 1, n).as_ref() == Some(s))
    });
    assert!(all, "web2 did not install every reissue\n{}", f.logs());
    // A window in which no second reload may come: the time passing is what is checked.
    std::thread::sleep(Duration::from_secs(3));
    assert_eq!(
        reloads(&counted) - before,
        1,
        "one reload for the leader's {CERTS} reissues\n{}",
        f.logs()
    );
    assert!(all_at(&f, 1, 2), "{:?}", current_versions(&f, 1));
}

#[test]
fn a_leader_that_crashes_after_its_first_publication_records_none_and_publishes_the_rest_next() {
    if !ready() {
        return;
    }
    let env = TestEnv::new();
    let cluster = EtcdCluster::start(env.dir.path(), 3);
    let f = fleet("/crash/", &cluster, env);
    let names = names();
    let first = f.agent(0, &["--json", "renew", "--wait", "120"]);
    first.expect_code(0);
    let old: Vec<String> = names
        .iter()
        .map(|(n, _)| first.installed_serial(n))
        .collect();
    assert!(all_at(&f, 0, 1), "{:?}", current_versions(&f, 0));

    // The reissue installs here, then the process dies right after its first publication
    // reached etcd, before it accepted it.
    let crashed = f
        .env
        .agent_at(
            &f.hosts[0].config,
            ["--json", "renew", "--force", "--wait", "120"],
        )
        .env("CERT_AGENT_FAILPOINT", "fleet-published")
        .run();
    assert_ne!(crashed.code, Some(0), "{}", crashed.describe());
    assert!(
        crashed
            .text()
            .contains("failpoint 'fleet-published' reached"),
        "{}",
        crashed.describe()
    );
    // None of the run's versions is recorded as accepted: the file holds what it held.
    assert!(all_at(&f, 0, 1), "{:?}", current_versions(&f, 0));

    // The next run reads the published one back (a higher version than it accepted) and hands
    // the others over; web2 installs every new certificate.
    f.agent(0, &["--json", "renew"]).expect_code(0);
    assert!(all_at(&f, 0, 2), "{:?}", current_versions(&f, 0));
    f.agent(1, &["--json", "renew"]).expect_code(0);
    for ((name, _), before) in names.iter().zip(&old) {
        let here = installed(&f, 0, name);
        assert_ne!(here.as_ref(), Some(before), "{name} was reissued");
        assert_eq!(installed(&f, 1, name), here, "{name}\n{}", f.logs());
    }
    assert!(all_at(&f, 1, 2), "{:?}", current_versions(&f, 1));
}
