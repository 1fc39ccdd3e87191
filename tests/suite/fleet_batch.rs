//! A follower installs what the fleet published in batches: one config test and one reload of
//! its web server for every certificate it catches up on, and one for a leader's run that
//! reissued several (its daemon waits for the rest of the burst). Real etcd (three members),
//! real nginx on every host; the reloads are counted by a wrapper around nginx's reload. A
//! leader whose thread is busy for longer than its lease (installing thousands of certificates)
//! keeps the lead: its lease is renewed on a thread of its own.

use crate::support;

use std::fs;
use std::os::unix::fs::PermissionsExt;
use std::time::Duration;

use support::env::{AgentOutput, TestEnv, norm_serial, wait_until};
use support::etcd::EtcdCluster;
use support::webserver::Server;

use crate::fleet_e2e::{DOMAIN, Fleet, ready};

const CERTS: &[(&str, &str)] = &[
    ("www", DOMAIN),
    ("shop", "shop.fleet.test"),
    ("mail", "mail.fleet.test"),
    ("api", "api.fleet.test"),
    ("blog", "blog.fleet.test"),
];

/// The serial host `i` has installed for certificate `name`, from its record.
pub(crate) fn installed(f: &Fleet, i: usize, name: &str) -> Option<String> {
    let text = fs::read_to_string(f.hosts[i].state.join(format!("certs/{name}.json"))).ok()?;
    let v: serde_json::Value = serde_json::from_str(&text).ok()?;
    v["installed"]["serial"].as_str().map(norm_serial)
}

/// Host `i`'s reloads go through a wrapper that appends one line to `reloads` each time;
/// returns that file.
pub(crate) fn count_reloads(f: &Fleet, i: usize) -> std::path::PathBuf {
    let dir = f.hosts[i].config.parent().unwrap().to_path_buf();
    let count = dir.join("reloads");
    let wrapper = dir.join("reload-counted");
    fs::write(
        &wrapper,
        format!(
            "#!/bin/sh\necho reload >> '{}'\nexec \"$@\"\n",
            count.display()
        ),
    )
    .unwrap();
    fs::set_permissions(&wrapper, fs::Permissions::from_mode(0o755)).unwrap();
    let text = fs::read_to_string(&f.hosts[i].config).unwrap();
    let wrapped = text.replace(
        "reload_command = [",
        &format!("reload_command = [\"{}\", ", wrapper.display()),
    );
    assert_ne!(text, wrapped, "no reload_command in\n{text}");
    fs::write(&f.hosts[i].config, wrapped).unwrap();
    count
}

pub(crate) fn reloads(file: &std::path::Path) -> usize {
    fs::read_to_string(file).map_or(0, |t| t.lines().count())
}

/// `renew ARGS` on host 0, tried again while another host's run leads the fleet (a daemon's
/// first run); the output of the run that led.
pub(crate) fn led(f: &Fleet, args: &[&str]) -> AgentOutput {
    let until = std::time::Instant::now() + Duration::from_secs(90);
    loop {
        let out = f.agent(0, args);
        out.expect_code(0);
        if !out.text().contains("leads the fleet and renews it")
            || std::time::Instant::now() > until
        {
            return out;
        }
        std::thread::sleep(Duration::from_secs(1));
    }
}

/// Waits until a daemon started after the cluster had `watching` watch streams watches the
/// fleet (its first synchronisation done).
pub(crate) fn until_watching(f: &Fleet, cluster: &EtcdCluster, watching: u64) {
    support::wait::until_with(
        Duration::from_secs(30),
        "the new daemon to watch the fleet",
        || cluster.watches() > watching,
        || f.logs(),
    );
}

#[test]
fn a_follower_installs_what_it_catches_up_on_and_a_leaders_burst_with_one_reload_each() {
    if !ready() {
        return;
    }
    let env = TestEnv::new();
    let cluster = EtcdCluster::start(env.dir.path(), 3);
    let mut f = Fleet::build(
        env,
        &cluster.endpoints(),
        "/batch/",
        &[Server::Nginx, Server::Nginx],
        CERTS,
    );
    f.env.sandbox.set_dcv_ports(f.hosts[0].web.http_port(), 0);
    let counted = count_reloads(&f, 1);

    // web1 orders the five certificates; web2, offline meanwhile, catches up in one run.
    let first = f.agent(0, &["--json", "renew", "--wait", "60"]);
    first.expect_code(0);
    let serials: Vec<String> = CERTS
        .iter()
        .map(|(name, _)| first.installed_serial(name))
        .collect();
    f.agent(1, &["--json", "renew"]).expect_code(0);
    for ((name, _), serial) in CERTS.iter().zip(&serials) {
        assert_eq!(installed(&f, 1, name).as_ref(), Some(serial), "{name}");
    }
    assert_eq!(reloads(&counted), 1, "one reload for five certificates");
    f.wait_all_serve(&serials[0], Duration::from_secs(20));

    // web2's daemon follows; web1 reissues all five in one run: web2 installs the burst at once.
    // web1's own reloads count its batches: the CA may issue the five in more than one of its
    // rounds (a loaded machine), and each round is a batch of its own on every host.
    let watching = cluster.watches();
    f.start_daemon(1);
    until_watching(&f, &cluster, watching);
    let leader_counted = count_reloads(&f, 0);
    let before = reloads(&counted);
    let again = led(&f, &["--json", "renew", "--force", "--wait", "60"]);
    let next: Vec<String> = CERTS
        .iter()
        .map(|(name, _)| again.installed_serial(name))
        .collect();
    assert!(
        next.iter().zip(&serials).all(|(a, b)| a != b),
        "{}",
        again.describe()
    );
    let all = wait_until(Duration::from_secs(60), || {
        CERTS
            .iter()
            .zip(&next)
            .all(|((name, _), s)| installed(&f, 1, name).as_ref() == Some(s))
    });
    assert!(
        all,
        "web2 did not install the reissued certificates\n{}",
        f.logs()
    );
    // The daemon's synchronisations after the burst find nothing new to install.
    std::thread::sleep(Duration::from_secs(3));
    let batches = reloads(&leader_counted);
    let followed = reloads(&counted) - before;
    assert!(
        batches >= 1 && (1..=batches).contains(&followed),
        "web2 reloaded {followed} times for the leader's five reissues installed in {batches} \
         batch(es): at most one reload per batch\n{}\n{}",
        again.describe(),
        f.logs()
    );
    f.wait_all_serve(&next[0], Duration::from_secs(20));
}

#[test]
fn a_leader_busy_installing_for_longer_than_its_lease_keeps_the_lead_and_publishes() {
    if !ready() {
        return;
    }
    let env = TestEnv::new();
    let cluster = EtcdCluster::start(env.dir.path(), 3);
    let f = Fleet::build(
        env,
        &cluster.endpoints(),
        "/busy/",
        &[Server::Nginx, Server::Nginx],
        &CERTS[..2],
    );
    f.env.sandbox.set_dcv_ports(f.hosts[0].web.http_port(), 0);
    // lease_ttl_secs = 5: the leader's thread stays busy for 12 s once the files are staged
    // (as installing thousands of certificates on a slow disk does); its lease is renewed
    // meanwhile, so the run publishes what it installed.
    let busy = f
        .env
        .agent_at(&f.hosts[0].config, ["--json", "renew", "--wait", "60"])
        .env("CERT_AGENT_FAILPOINT", "files-staged:block=12")
        .run();
    busy.expect_code(0);
    assert!(
        !busy.text().contains("no longer leads"),
        "{}",
        busy.describe()
    );
    let serials: Vec<String> = CERTS[..2]
        .iter()
        .map(|(name, _)| busy.installed_serial(name))
        .collect();
    // Published: web2 installs both.
    f.agent(1, &["--json", "renew"]).expect_code(0);
    for ((name, _), serial) in CERTS[..2].iter().zip(&serials) {
        assert_eq!(installed(&f, 1, name).as_ref(), Some(serial), "{name}");
    }
    assert_eq!(f.env.billed(), 2);
}
