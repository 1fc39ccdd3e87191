//! A rollout in waves on five hosts (real etcd of three members, four hosts with an nginx of
//! their own and one with apache2, the sandbox): web2 is the canary, then two hosts per wave
//! with a pause of 2 s between waves — [web2], [web1, web3], [web4, web5]. Every host of a
//! wave installs only after every host of the waves before it wrote a proof of the serial that
//! passed, and the pause after the last of them passed; the order is read from each host's
//! record (installed at) and its sealed proof (proved at), and each host's reloads are
//! counted. Then the CA hands the leader a bundle without its intermediate (a chain clients
//! cannot build): the leader refuses it before it installs or publishes anything, so no host
//! installs it; once the CA's bundle is whole again, the same reissue (no second one) is
//! installed and rolled out in the same waves.

use std::fs;
use std::path::PathBuf;
use std::time::Duration;

use partner_sandbox::bundle::HostileKind;
use partner_sandbox::{Fault, FaultKind};
use time::OffsetDateTime;
use time::format_description::well_known::Rfc3339;

use crate::fleet_batch::{count_reloads, reloads};
use crate::fleet_e2e::{FOLLOW_ONLY, Fleet, ready};
use crate::fleet_proof::{NAMES, proved, row, status};
use crate::support::env::wait_until;
use crate::support::webserver::Server;

const HOSTS: [&str; 5] = ["web1", "web2", "web3", "web4", "web5"];
/// The waves the configuration below makes, by host index.
const WAVES: [&[usize]; 3] = [&[1], &[0, 2], &[3, 4]];
const PAUSE: i64 = 2;

fn at(v: &serde_json::Value) -> OffsetDateTime {
    OffsetDateTime::parse(v.as_str().unwrap_or_default(), &Rfc3339).expect("an RFC 3339 time")
}

/// When host `i` installed what it has installed, from its record.
fn installed_at(f: &Fleet, i: usize) -> OffsetDateTime {
    let text = fs::read_to_string(f.hosts[i].state.join("certs/www.json")).unwrap();
    let v: serde_json::Value = serde_json::from_str(&text).unwrap();
    at(&v["installed"]["installed_at"])
}

/// Waits until every host proved `serial`; the status then.
fn all_proved(f: &Fleet, serial: &str) -> serde_json::Value {
    let mut v = serde_json::Value::Null;
    let all = wait_until(Duration::from_secs(90), || {
        v = status(f, 0).1;
        HOSTS
            .iter()
            .all(|h| proved(&v, h).as_deref() == Some(serial))
    });
    assert!(all, "not every host proved {serial}: {v:#}\n{}", f.logs());
    v
}

/// Each wave installed after every proof of the waves before it, and the pause after them.
fn waves_in_order(f: &Fleet, v: &serde_json::Value) {
    let proof_at = |i: usize| at(&row(v, HOSTS[i])["proof"]["at"]);
    for (k, wave) in WAVES.iter().enumerate().skip(1) {
        let before = WAVES[..k]
            .iter()
            .flat_map(|w| w.iter())
            .map(|&i| proof_at(i))
            .max()
            .expect("an earlier wave");
        for &i in *wave {
            // The leader (web1) installs what it obtained before it publishes it.
            if i == 0 {
                continue;
            }
            let installed = installed_at(f, i);
            assert!(
                installed >= before + time::Duration::seconds(PAUSE),
                "{} (wave {k}) installed at {installed}, the waves before it proved by \
                 {before}\n{v:#}\n{}",
                HOSTS[i],
                f.logs()
            );
        }
    }
}

#[test]
fn five_hosts_one_of_them_apache_install_wave_after_wave_and_a_bundle_without_its_intermediate_stops_at_the_leader()
 {
    if !ready() {
        return;
    }
    let servers = [
        Server::Nginx,
        Server::Nginx,
        Server::Nginx,
        Server::Apache,
        Server::Nginx,
    ];
    let mut f = Fleet::start_under("/cert-agent/", &servers, &[("www", NAMES)]);
    for h in &f.hosts {
        let mut config = fs::read_to_string(&h.config).unwrap();
        config.push_str(&format!(
            "rollout_canaries = [\"web2\"]\nrollout_wave = 2\nrollout_pause_secs = {PAUSE}\n"
        ));
        fs::write(&h.config, config).unwrap();
    }
    let counted: Vec<PathBuf> = (0..5).map(|i| count_reloads(&f, i)).collect();
    let resync = [("CERT_AGENT_TEST_FLEET_RESYNC_SECS", "1")];
    for i in 1..5 {
        f.start_daemon_args(i, FOLLOW_ONLY, &resync);
    }

    // The fleet's first certificate, rolled out in its waves.
    let out = f.agent(0, &["--json", "renew", "--wait", "60"]);
    out.expect_code(0);
    let first = out.installed_serial("www");
    let v = all_proved(&f, &first);
    waves_in_order(&f, &v);
    f.wait_all_serve(&first, Duration::from_secs(30));
    assert_eq!(f.env.billed(), 1);

    // The reissue's bundle comes without its intermediate: the leader refuses it, installs
    // and publishes nothing, and no host reloads.
    let before: Vec<usize> = counted.iter().map(|c| reloads(c)).collect();
    f.env.sandbox.inject(
        Fault::new(FaultKind::HostileBundle {
            hostile: HostileKind::NoIntermediate,
        })
        .times(100),
    );
    // Tried again while a daemon's first scheduled run leads the fleet.
    let mut refused = f.agent(0, &["--json", "reissue", "www", "--wait", "60"]);
    let until = std::time::Instant::now() + Duration::from_secs(90);
    while refused.text().contains("leads the fleet and renews it")
        && std::time::Instant::now() < until
    {
        std::thread::sleep(Duration::from_secs(1));
        refused = f.agent(0, &["--json", "reissue", "www", "--wait", "60"]);
    }
    assert_ne!(refused.code, Some(0), "{}", refused.describe());
    let said = refused.text();
    assert!(
        said.contains("S-One") || said.to_lowercase().contains("chain"),
        "the refusal names the chain: {}",
        refused.describe()
    );
    std::thread::sleep(Duration::from_secs(3));
    for (i, host) in HOSTS.iter().enumerate() {
        assert_eq!(f.installed(i).as_deref(), Some(first.as_str()), "{host}");
        assert_eq!(f.served(i).as_deref(), Some(first.as_str()), "{host}");
    }
    let after: Vec<usize> = counted.iter().map(|c| reloads(c)).collect();
    assert_eq!(before, after, "no host reloaded for the refused bundle");
    let (_, v) = status(&f, 0);
    assert_eq!(
        v["certificates"][0]["serial"]
            .as_str()
            .map(crate::support::env::norm_serial)
            .as_deref(),
        Some(first.as_str()),
        "the fleet's current is still the first certificate: {v:#}"
    );

    // The CA's bundle whole again: the same reissue is installed (no second one), in waves.
    // web1's run continues it; a daemon's first scheduled run (within a minute of its start)
    // may lead it instead, and web1's run then reports the fleet's earlier failed attempt and
    // installs what that run published: web1 is tried again until it installed another serial.
    f.env.sandbox.clear_faults();
    let mut last = String::new();
    let moved = wait_until(Duration::from_secs(150), || {
        let out = f.agent(0, &["--json", "renew", "--force", "--wait", "60"]);
        last = out.describe();
        f.installed(0).is_some_and(|s| s != first)
    });
    assert!(
        moved,
        "web1 installed no reissued certificate: {last}\n{}",
        f.logs()
    );
    let second = f.installed(0).unwrap_or_default();
    let v = all_proved(&f, &second);
    waves_in_order(&f, &v);
    f.wait_all_serve(&second, Duration::from_secs(30));
    let reissues = f
        .env
        .calls()
        .iter()
        .filter(|c| c.method == "POST" && c.path.ends_with("/reissue"))
        .count();
    assert_eq!(reissues, 1, "one reissue\n{}", f.logs());
    assert_eq!(f.env.billed(), 1, "one billed order");
    for (i, file) in counted.iter().enumerate() {
        assert!(
            reloads(file) > after[i],
            "{} reloaded for the second certificate",
            HOSTS[i]
        );
    }
}
