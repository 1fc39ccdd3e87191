//! A fleet run that waits for the CA holds the lead only for its rounds of work: while one
//! host's run waits for a person to approve a validation email, another host's run takes the
//! lead, orders and installs; a round that finds the lead taken calls nothing. Real etcd
//! (three members), real nginx on every host, the sandbox's call log.

use crate::support;

use std::fs;
use std::time::{Duration, Instant};

use cert_agent::testing::fleet::{Fleet as Coord, FleetOptions, Leadership};
use support::env::{AgentOutput, wait_until};
use support::etcd::EtcdClient;
use support::scenario;
use support::webserver::Server;

use crate::fleet_e2e::{DOMAIN, Fleet, ready};

const SHOP: &str = "shop.fleet.test";

/// Certificate `www` validates by email on every host (one spec for the fleet).
fn www_by_email(f: &Fleet) {
    for host in &f.hosts {
        let text = fs::read_to_string(&host.config).unwrap();
        let edited = text.replacen(
            "name = \"www\"\n",
            &format!("name = \"www\"\ndcv = \"email\"\ndcv_email = \"admin@{DOMAIN}\"\n"),
            1,
        );
        assert_ne!(text, edited, "no certificate www in\n{text}");
        fs::write(&host.config, edited).unwrap();
    }
}

/// The certificate ID of host `i`'s order for `name`, once its record holds one.
fn ordered(f: &Fleet, i: usize, name: &str) -> Option<u64> {
    let text = fs::read_to_string(f.hosts[i].state.join(format!("certs/{name}.json"))).ok()?;
    let v: serde_json::Value = serde_json::from_str(&text).ok()?;
    v["order"]["certificate_id"].as_u64()
}

/// Waits (up to a minute) for host `i`'s record of `name` to hold an order; its ID.
fn wait_ordered(f: &Fleet, i: usize, name: &str) -> u64 {
    let mut id = None;
    let found = wait_until(Duration::from_secs(60), || {
        id = ordered(f, i, name);
        id.is_some()
    });
    assert!(found, "host {i} ordered no '{name}'\n{}", f.logs());
    id.unwrap_or_default()
}

/// `renew ARGS` on host `i`, tried again while a round of another host's run holds the lead
/// (for at most `limit`); the output of the run that led.
fn led(f: &Fleet, i: usize, args: &[&str], limit: Duration) -> AgentOutput {
    let until = Instant::now() + limit;
    loop {
        let out = f.agent(i, args);
        if !out.text().contains("leads the fleet and renews it") || Instant::now() > until {
            return out;
        }
        std::thread::sleep(Duration::from_millis(300));
    }
}

fn audit_count(f: &Fleet, i: usize, event: &str) -> usize {
    fs::read_to_string(f.hosts[i].state.join("audit.log"))
        .unwrap_or_default()
        .lines()
        .filter(|l| l.contains(event))
        .count()
}

#[test]
fn a_leader_waiting_for_an_email_leaves_the_lead_to_another_hosts_run() {
    if !ready() {
        return;
    }
    let f = Fleet::start_under(
        "/rounds/",
        &[Server::Nginx, Server::Nginx],
        &[("www", DOMAIN), ("shop", SHOP)],
    );
    www_by_email(&f);
    // Host web2 serves the validation files the sandbox fetches (web1's run is busy waiting).
    f.env.sandbox.set_dcv_ports(f.hosts[1].web.http_port(), 0);
    std::thread::scope(|s| {
        let a = s.spawn(|| f.agent(0, &["--json", "renew", "--name", "www", "--wait", "100"]));
        let www = wait_ordered(&f, 0, "www");

        // While web1's run waits for the email, web2's run leads, orders and installs.
        let b = led(
            &f,
            1,
            &["--json", "renew", "--name", "shop", "--wait", "60"],
            Duration::from_secs(60),
        );
        b.expect_code(0);
        b.installed_serial("shop");
        assert!(
            !a.is_finished(),
            "web1's run still waits for the email while web2's run installs\n{}",
            f.logs()
        );
        let shop = ordered(&f, 1, "shop").expect("web2's order of shop");
        assert_ne!(www, shop);
        assert!(
            audit_count(&f, 0, "fleet-lead-given") >= 2,
            "web1 gave the lead up between its rounds"
        );

        // The person approves; web1's next round installs the certificate and its run ends.
        f.env.sandbox.approve_email(www, None).unwrap();
        let a = a.join().expect("web1's run");
        a.expect_code(0);
        a.installed_serial("www");
    });
    assert_eq!(f.env.order_posts(), 2, "one order for each certificate");
    assert_eq!(f.env.billed(), 2);
}

/// Holds the fleet's lead under `prefix` as host `name` (up to 60 s of tries while another
/// run's round holds it).
fn take_lead(
    rt: &tokio::runtime::Runtime,
    f: &Fleet,
    prefix: &str,
    name: &str,
) -> (Coord, Leadership) {
    let mut o = FleetOptions::new(f.endpoints(), name);
    o.prefix = prefix.into();
    o.lease_ttl = Duration::from_secs(5);
    let coord = rt.block_on(Coord::connect(&o)).unwrap();
    let until = Instant::now() + Duration::from_secs(60);
    loop {
        if let Some(lead) = rt.block_on(coord.try_lead()).unwrap() {
            return (coord, lead);
        }
        assert!(Instant::now() < until, "the lead was never free");
        std::thread::sleep(Duration::from_millis(50));
    }
}

#[test]
fn a_round_that_finds_the_lead_taken_calls_nothing() {
    if !ready() {
        return;
    }
    let f = Fleet::start_under("/rounds-taken/", &[Server::Nginx], &[("www", DOMAIN)]);
    www_by_email(&f);
    let rt = runtime();
    std::thread::scope(|s| {
        let a = s.spawn(|| {
            f.agent(
                0,
                &["-v", "--json", "renew", "--name", "www", "--wait", "100"],
            )
        });
        let www = wait_ordered(&f, 0, "www");

        // Another host takes the lead between two rounds of web1's run: web1's rounds
        // meanwhile only synchronise (at least three of them, one a second).
        let (_coord, lead) = take_lead(&rt, &f, "/rounds-taken/", "web9");
        let calls = f.env.calls().len();
        let led_before = audit_count(&f, 0, "fleet-lead-taken");
        std::thread::sleep(Duration::from_secs(6));
        assert_eq!(
            f.env.calls().len(),
            calls,
            "no Partner API call while another host leads: {:?}",
            &f.env.calls()[calls..]
        );
        assert_eq!(audit_count(&f, 0, "fleet-lead-taken"), led_before);
        assert!(!a.is_finished(), "web1's run waits on");

        // The lead is free again and the email approved: web1's next round installs.
        rt.block_on(lead.resign());
        f.env.sandbox.approve_email(www, None).unwrap();
        let a = a.join().expect("web1's run");
        a.expect_code(0);
        a.installed_serial("www");
        let found_taken = a
            .text()
            .matches("another host holds the fleet's lead")
            .count();
        assert!(found_taken >= 3, "{}", a.describe());
    });
    assert_eq!(f.env.order_posts(), 1);
}

/// A runtime for the test's own fleet client.
fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .enable_all()
        .build()
        .unwrap()
}

/// `www` issued on host 0 by a run whose email is approved while it waits; the run's output
/// and the order's certificate ID.
fn issue_www_by_email(f: &Fleet) -> (AgentOutput, u64) {
    let first = std::thread::scope(|s| {
        let a = s.spawn(|| f.agent(0, &["--json", "renew", "--wait", "100"]));
        let id = wait_ordered(f, 0, "www");
        f.env.sandbox.approve_email(id, None).unwrap();
        a.join().expect("web1's first run")
    });
    first.expect_code(0);
    let id = ordered(f, 0, "www").expect("the order");
    (first, id)
}

fn reissue_posts(f: &Fleet) -> usize {
    scenario::matching(&f.env.calls(), "POST", scenario::REISSUE).len()
}

#[test]
fn a_run_follows_a_certificate_whose_fleet_value_fails_here_while_another_host_leads() {
    if !ready() {
        return;
    }
    let f = Fleet::start_under("/forged-follow/", &[Server::Nginx], &[("www", DOMAIN)]);
    www_by_email(&f);
    let (first, id) = issue_www_by_email(&f);
    let old = first.installed_serial("www");
    // A current value that is not the fleet's (no fleet key): this host cannot install it.
    let mut etcd = f.etcd();
    etcd.put("certs/www/current", b"forged".to_vec());
    let rt = runtime();
    std::thread::scope(|s| {
        let a = s.spawn(|| {
            f.agent(
                0,
                &[
                    "--json", "renew", "--force", "--name", "www", "--wait", "100",
                ],
            )
        });
        assert!(
            wait_until(Duration::from_secs(60), || reissue_posts(&f) == 1),
            "web1 sent no reissue\n{}",
            f.logs()
        );
        // Another host leads between web1's rounds: each of web1's rounds meanwhile only
        // synchronises, and the fleet's value of www fails there every time.
        let (_coord, lead) = take_lead(&rt, &f, "/forged-follow/", "web9");
        std::thread::sleep(Duration::from_secs(5));
        assert!(
            !a.is_finished(),
            "web1's run follows www on while another host leads\n{}",
            f.logs()
        );
        // The lead is free again and the email approved: web1's next round completes the
        // reissue and replaces the forged value.
        rt.block_on(lead.resign());
        f.env.sandbox.approve_email(id, None).unwrap();
        let a = a.join().expect("web1's run");
        a.expect_code(0);
        assert_ne!(a.installed_serial("www"), old);
    });
    assert_eq!(reissue_posts(&f), 1, "{}", scenario::show(&f.env.calls()));
    // The forged value counted as none: the version after the one web1 accepted.
    assert_eq!(current_version(&f, 0), Some(2));
    assert_eq!(f.env.order_posts(), 1);
}

/// Whether host `i` has a validation file in its web root.
fn publishes(f: &Fleet, i: usize) -> bool {
    let pv = f.hosts[i]
        .config
        .parent()
        .map(|d| d.join("www-root/.well-known/pki-validation"));
    pv.and_then(|p| fs::read_dir(p).ok())
        .is_some_and(|mut d| d.next().is_some())
}

#[test]
fn a_run_stopped_while_it_waits_withdraws_its_validation_files() {
    if !ready() {
        return;
    }
    let f = Fleet::start_under("/rounds-stop/", &[Server::Nginx], &[("www", DOMAIN)]);
    // The CA fetches from a closed port: the validation stays pending.
    crate::fleet_takeover::hold_validation(&f);
    let mut a = f
        .env
        .agent_at(&f.hosts[0].config, ["--json", "renew", "--wait", "100"])
        .spawn();
    assert!(
        wait_until(Duration::from_secs(60), || publishes(&f, 0)),
        "web1 published no validation file\n{}",
        f.logs()
    );
    let mut etcd = f.etcd();
    assert!(
        wait_until(Duration::from_secs(30), || etcd.get("dcv/www").is_some()),
        "published for the fleet"
    );
    // Between two rounds (a round is short; the run sleeps a second between them).
    std::thread::sleep(Duration::from_millis(1500));
    let pid = nix::unistd::Pid::from_raw(i32::try_from(a.id()).expect("a pid"));
    nix::sys::signal::kill(pid, nix::sys::signal::Signal::SIGTERM).expect("SIGTERM sent");
    let status = support::env::wait_exit(&mut a, Duration::from_secs(60));
    assert_eq!(status.and_then(|s| s.code()), Some(75), "{}", f.logs());
    assert!(!publishes(&f, 0), "the validation file was removed");
    assert!(
        etcd.get("dcv/www").is_none(),
        "and withdrawn from the fleet"
    );
    assert_eq!(f.env.order_posts(), 1);
}

/// Host `i`'s daemon, started with its first scheduled run at least ten minutes away (it
/// follows the fleet at once): started again until the random delay it drew is that long.
pub(crate) fn daemon_without_runs(f: &mut Fleet, i: usize) {
    for _ in 0..20 {
        f.start_daemon_args(i, &["--first-run-delay", "3600"], &[]);
        if crate::fleet_takeover::first_run_delay(f, i) >= Duration::from_secs(600) {
            return;
        }
        f.kill_daemon(i);
        // The next daemon's log is found by its start line: the old one's goes.
        for entry in fs::read_dir(f.env.path("logs"))
            .into_iter()
            .flatten()
            .flatten()
        {
            let started = format!("daemon started with {}", f.hosts[i].config.display());
            if fs::read_to_string(entry.path()).is_ok_and(|t| t.contains(&started)) {
                let _ = fs::remove_file(entry.path());
            }
        }
    }
    panic!("no daemon drew a first run ten minutes away in 20 tries");
}

/// Every host's status checks (and so a waiting run's rounds) 10 s apart.
fn poll_every_10s(f: &Fleet) {
    for host in &f.hosts {
        let text = fs::read_to_string(&host.config).unwrap();
        let edited = text.replacen("poll_interval_secs = 1\n", "poll_interval_secs = 10\n", 1);
        assert_ne!(text, edited, "no poll_interval_secs in\n{text}");
        fs::write(&host.config, edited).unwrap();
    }
}

/// Waits (up to a minute) until a run waits between its rounds: the fleet's
/// `waiting` key is there and nobody leads.
fn wait_between_rounds(f: &Fleet, prefix: &str, etcd: &mut EtcdClient) {
    let waiting = format!("{prefix}waiting");
    let leader = format!("{prefix}leader");
    let between = wait_until(Duration::from_secs(60), || {
        let keys = etcd.revisions();
        keys.contains_key(&waiting) && !keys.contains_key(&leader)
    });
    assert!(
        between,
        "the run does not wait between its rounds\n{}",
        f.logs()
    );
}

/// The version of `www`'s current value that host `i` accepted last (its versions file).
fn current_version(f: &Fleet, i: usize) -> Option<u64> {
    let text = fs::read_to_string(f.hosts[i].state.join("fleet-versions.json")).ok()?;
    let v: serde_json::Value = serde_json::from_str(&text).ok()?;
    v["www"]["current"]["version"].as_u64()
}

#[test]
fn a_forced_run_reissues_once_when_another_host_completes_the_reissue_between_its_rounds() {
    if !ready() {
        return;
    }
    let mut f = Fleet::pair("/force-once/");
    www_by_email(&f);
    poll_every_10s(&f);
    // The first certificate, approved while web1's run waits; version 1 in the fleet.
    let (first, id) = issue_www_by_email(&f);
    let old = first.installed_serial("www");
    assert_eq!(current_version(&f, 0), Some(1));
    // web2's daemon follows the fleet; none of its scheduled runs comes during the test.
    daemon_without_runs(&mut f, 1);

    // web1 forces a reissue; its first round sends it and leaves it waiting for the email.
    let runs = fs::read_dir(f.env.path("logs"))
        .into_iter()
        .flatten()
        .flatten()
        .filter(|e| e.file_name().to_string_lossy().starts_with("run-"))
        .filter(|e| e.file_name().to_string_lossy().ends_with(".out"))
        .count();
    let mut a = f
        .env
        .agent_at(
            &f.hosts[0].config,
            [
                "--json", "renew", "--force", "--name", "www", "--wait", "150",
            ],
        )
        .spawn();
    let reissues = || reissue_posts(&f);
    assert!(
        wait_until(Duration::from_secs(60), || reissues() == 1),
        "web1 sent no reissue\n{}",
        f.logs()
    );
    let mut etcd = f.etcd();
    wait_between_rounds(&f, "/force-once/", &mut etcd);
    // Paused between its rounds: web2's daemon sees no round follow and takes the work
    // over; the person approves, web2 completes the reissue and publishes version 2.
    crate::fleet_pause::signal(&a, nix::sys::signal::Signal::SIGSTOP);
    f.env.sandbox.approve_email(id, None).unwrap();
    let completed = wait_until(Duration::from_secs(90), || {
        f.installed(1).is_some_and(|s| s != old) && etcd.get("waiting").is_none()
    });
    if !completed {
        let _ = a.kill();
        let _ = a.wait();
    }
    assert!(
        completed,
        "web2's daemon did not complete the reissue\n{}",
        f.logs()
    );
    let new = f.installed(1).expect("web2's reissued certificate");
    assert_eq!(current_version(&f, 1), Some(2));

    // web1 goes on: its next round follows what its first started and finds it done. The
    // run's `--force` asked for one reissue, and one was made.
    crate::fleet_pause::signal(&a, nix::sys::signal::Signal::SIGCONT);
    let status = support::env::wait_exit(&mut a, Duration::from_secs(120));
    let out = fs::read_to_string(f.env.path(&format!("logs/run-{runs}.out"))).unwrap_or_default();
    assert_eq!(
        reissues(),
        1,
        "one reissue for one --force\n{}",
        scenario::show(&f.env.calls())
    );
    assert_eq!(
        status.and_then(|s| s.code()),
        Some(0),
        "{out}\n{}",
        f.logs()
    );
    assert_eq!(f.installed(0).as_deref(), Some(new.as_str()), "{out}");
    assert_eq!(current_version(&f, 0), Some(2), "{out}");
    // Nothing more reaches web2 either (a second publication would within a second).
    std::thread::sleep(Duration::from_secs(3));
    assert_eq!(current_version(&f, 1), Some(2), "{}", f.logs());
    assert_eq!(f.installed(1).as_deref(), Some(new.as_str()));
    assert_eq!(f.env.order_posts(), 1);
    assert_eq!(f.env.billed(), 1);
}

#[test]
fn a_run_killed_between_its_rounds_is_taken_over_by_a_daemon() {
    if !ready() {
        return;
    }
    let mut f = Fleet::pair("/between/");
    www_by_email(&f);
    // Rounds 10 s apart, so that the kill lands between two of them.
    poll_every_10s(&f);
    // web2's daemon follows the fleet; none of its scheduled runs comes during the test.
    daemon_without_runs(&mut f, 1);
    let mut a = f
        .env
        .agent_at(&f.hosts[0].config, ["--json", "renew", "--wait", "300"])
        .spawn();
    let www = wait_ordered(&f, 0, "www");
    let mut etcd = f.etcd();
    wait_between_rounds(&f, "/between/", &mut etcd);
    assert_eq!(
        etcd.get("waiting").as_deref(),
        Some(b"web1".as_slice()),
        "the waiting run is named"
    );
    crate::fleet_pause::signal(&a, nix::sys::signal::Signal::SIGKILL);
    let _ = support::env::wait_exit(&mut a, Duration::from_secs(10));
    // The key is not sealed: garbage in it (as anyone with write access to the prefix could
    // put there) is only shown, cut and escaped.
    etcd.put("waiting", b"web1\x1b[2J\n\xff".repeat(500));

    // The person approves; web2's daemon sees that no round followed (10 s and a tenth, a
    // 5 s lease, 5 s) and takes the work over: one status check, the certificate installed.
    f.env.sandbox.approve_email(www, None).unwrap();
    let installed = wait_until(Duration::from_secs(90), || f.installed(1).is_some());
    assert!(
        installed,
        "web2's daemon did not take the waiting certificate over\n{}",
        f.logs()
    );
    let logs = f.logs();
    assert!(
        logs.contains("the fleet's lead ended with work open ('www':"),
        "{logs}"
    );
    assert!(
        wait_until(Duration::from_secs(30), || f
            .logs()
            .contains("this run took over the fleet's work")),
        "{logs}"
    );
    assert!(!f.logs().contains('\x1b'), "{logs}");
    // The run that took over left nothing waiting.
    assert!(
        wait_until(Duration::from_secs(30), || etcd.get("waiting").is_none()),
        "the waiting key stays\n{logs}"
    );
    assert_eq!(f.env.order_posts(), 1, "one POST /order");
    assert_eq!(f.env.billed(), 1);
}
