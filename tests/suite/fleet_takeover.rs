//! Takeover within the lease: three hosts with real nginx, a real three-member etcd, the
//! daemons only. The leader's daemon is killed (SIGKILL) while the CA holds the validation of
//! its reissue pending; another daemon takes the work over once the lease ends — not at its
//! next scheduled run, an hour away — and every host serves the new certificate. One billed
//! order, one reissue.

use crate::support;

use std::fs;
use std::path::PathBuf;
use std::time::{Duration, Instant};

use partner_sandbox::DcvBalance;
use support::env::{norm_serial, wait_until};
use support::scenario::{CLOCK_OFFSET_ENV, clock_offset};

use support::webserver::served_serial;

use crate::fleet_e2e::{DOMAIN, Fleet, edit_config, ready};

/// The fleet's `lease_ttl_secs` (the configuration's minimum).
const LEASE: Duration = Duration::from_secs(5);

/// The leader the fleet names now (`fleet status` on host `i`).
fn leader(f: &Fleet, i: usize) -> Option<String> {
    let out = f.agent(i, &["--json", "fleet", "status"]);
    let v: serde_json::Value = serde_json::from_str(&out.stdout).ok()?;
    v["leader"].as_str().map(str::to_owned)
}

/// How many times hosts `hosts` took the lead, from their audit logs (`fleet-lead-taken`).
fn leads_taken(f: &Fleet, hosts: std::ops::Range<usize>) -> usize {
    hosts
        .map(|i| {
            fs::read_to_string(f.hosts[i].state.join("audit.log"))
                .unwrap_or_default()
                .matches("\"fleet-lead-taken\"")
                .count()
        })
        .sum()
}

/// The standard output of host `i`'s daemon (the run that printed "daemon started with" its
/// configuration).
fn daemon_log(f: &Fleet, i: usize) -> Option<PathBuf> {
    let mark = format!("daemon started with {}", f.hosts[i].config.display());
    fs::read_dir(f.env.path("logs"))
        .ok()?
        .flatten()
        .map(|e| e.path())
        .filter(|p| p.extension().is_some_and(|x| x == "out"))
        .find(|p| fs::read_to_string(p).is_ok_and(|t| t.contains(&mark)))
}

/// Waits until host `i`'s daemon has printed when its first run starts; returns that delay.
pub(crate) fn first_run_delay(f: &Fleet, i: usize) -> Duration {
    let mut delay = None;
    let found = wait_until(Duration::from_secs(30), || {
        delay = daemon_log(f, i)
            .and_then(|p| fs::read_to_string(p).ok())
            .and_then(|t| {
                let rest = t.split("first run in ").nth(1)?;
                rest.split(' ').next()?.parse::<u64>().ok()
            });
        delay.is_some()
    });
    assert!(
        found,
        "{}: the daemon did not start\n{}",
        f.hosts[i].name,
        f.logs()
    );
    Duration::from_secs(delay.unwrap_or_default())
}

/// The serial host `i`'s nginx serves for the domain, by TLS handshake (the validity is not
/// checked: the reissued certificate starts at the sandbox's time, 150 days ahead).
fn served(f: &Fleet, i: usize) -> Option<String> {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .ok()?;
    rt.block_on(served_serial(&f.hosts[i].web.https_addr(), DOMAIN))
        .ok()
        .map(|s| norm_serial(&s.to_string()))
}

/// Whether every host in `hosts` has installed `serial` (or, `None`, a serial other than
/// `not`) and serves it.
fn serving(f: &Fleet, hosts: std::ops::Range<usize>, serial: Option<&str>, not: &str) -> bool {
    hosts.into_iter().all(|i| {
        let s = f.installed(i);
        let wanted = match serial {
            Some(w) => s.as_deref() == Some(w),
            None => s.as_deref().is_some_and(|s| s != not),
        };
        wanted && served(f, i) == s
    })
}

/// The CA fetches validation files from a port where nothing listens: every validation stays
/// pending until the ports are set again.
pub(crate) fn hold_validation(f: &Fleet) {
    let closed = std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .expect("a free port");
    f.env.sandbox.set_dcv_http_ports(&[closed], DcvBalance::All);
}

#[test]
fn a_killed_leader_daemon_is_taken_over_within_the_lease_without_a_second_order() {
    if !ready() {
        return;
    }
    let mut f = Fleet::start(3);
    let ports: Vec<u16> = f.hosts.iter().map(|h| h.web.http_port()).collect();

    // Before the daemons: the fleet's first certificate (validated on web1), installed on
    // every host.
    f.env.sandbox.set_dcv_ports(ports[0], 0);
    let first = f.agent(0, &["--json", "renew", "--wait", "60"]);
    first.expect_code(0);
    let serial = first.installed_serial("www");
    for i in 1..3 {
        f.agent(i, &["--json", "renew"]).expect_code(0);
    }
    f.wait_all_serve(&serial, Duration::from_secs(30));

    // 150 days on, the certificate (199 days) is due for its reissue. Every validation stays
    // pending.
    f.env.sandbox.advance(Duration::from_secs(150 * 86_400));
    let offset = clock_offset(&f.env).to_string();
    let clock = [(CLOCK_OFFSET_ENV, offset.as_str())];
    hold_validation(&f);

    // web1's daemon leads: it sends the reissue and publishes the validation file, and its
    // run is then busy in the middle of that round (its lead held, renewed on a thread of its
    // own), as a leader installing thousands of certificates is.
    let busy = [
        clock[0],
        (cert_agent::testing::failpoint::ENV, "dcv-placed:block=600"),
    ];
    f.start_daemon_with(0, &busy);
    let led = wait_until(Duration::from_secs(120), || {
        leader(&f, 1).as_deref() == Some("web1")
            && f.env
                .calls()
                .iter()
                .any(|c| c.method == "POST" && c.path.ends_with("/reissue"))
    });
    assert!(led, "web1's daemon did not lead a reissue\n{}", f.logs());

    // The other daemons start; their first runs (within a minute) find web1 leading, and
    // their next ones are an hour away.
    f.start_daemon_with(1, &clock);
    f.start_daemon_with(2, &clock);
    let started = Instant::now();
    let first_runs = first_run_delay(&f, 1).max(first_run_delay(&f, 2));
    std::thread::sleep(
        (started + first_runs + Duration::from_secs(10)).saturating_duration_since(Instant::now()),
    );
    assert_eq!(leader(&f, 1).as_deref(), Some("web1"), "{}", f.logs());
    assert_eq!(f.installed(1).as_deref(), Some(serial.as_str()));
    let pv = f.env.path("web2/www-root/.well-known/pki-validation");
    assert!(
        fs::read_dir(&pv).is_ok_and(|mut d| d.next().is_some()),
        "the validation is pending: web2 serves the validation file\n{}",
        f.logs()
    );

    // web1's daemon is killed in the middle of the reissue. A run that takes the lead over
    // writes `fleet-lead-taken` in its host's audit log: a lead held only for one round (the
    // validation still pending) is seen there even when no `fleet status` fell inside it.
    let taken_before = leads_taken(&f, 1..3);
    f.kill_daemon(0);
    let killed = Instant::now();
    let took = wait_until(LEASE + Duration::from_secs(30), || {
        leads_taken(&f, 1..3) > taken_before
            || matches!(leader(&f, 1).as_deref(), Some("web2" | "web3"))
    });
    assert!(took, "no daemon took the lead over\n{}", f.logs());
    // The new leader continues the same reissue; the CA now reaches every host.
    support::balancer::validate_on_every_host(&f.env.sandbox, &ports);
    let limit = LEASE + Duration::from_secs(45);
    let finished = wait_until(limit.saturating_sub(killed.elapsed()), || {
        serving(&f, 1..3, None, &serial)
    });
    assert!(
        finished,
        "web2 and web3 did not serve a new certificate within {limit:?} of the kill: {:?}\n{}",
        (1..3)
            .map(|i| (f.installed(i), served(&f, i)))
            .collect::<Vec<_>>(),
        f.logs()
    );
    let second = f.installed(1).unwrap_or_default();
    assert_ne!(second, serial);

    let logs = f.logs();
    assert!(
        logs.contains("the fleet's lead ended with work open ('www': a reissue"),
        "{logs}"
    );
    assert!(logs.contains("; taking over"), "{logs}");
    assert!(
        logs.contains("this run took over the fleet's work"),
        "{logs}"
    );
    let journals: String = (1..3)
        .map(|i| fs::read_to_string(f.hosts[i].state.join("journal.log")).unwrap_or_default())
        .collect();
    assert!(journals.contains("\"fleet-takeover\""), "{journals}");

    // web1 comes back and installs what the fleet has.
    f.start_daemon_with(0, &clock);
    let all = wait_until(Duration::from_secs(30), || {
        serving(&f, 0..3, Some(&second), &serial)
    });
    assert!(all, "not every host serves {second}\n{}", f.logs());
    assert_eq!(f.env.billed(), 1, "one billed order");
    let reissues = f
        .env
        .calls()
        .iter()
        .filter(|c| c.method == "POST" && c.path.ends_with("/reissue"))
        .count();
    assert_eq!(reissues, 1, "one reissue\n{}", f.logs());
}

/// What the daemons read when a lead ends: the sealed shared records. Nothing there (and
/// orders allowed) is a first order to place; a record that does not open — garbage, or a
/// genuine record replayed under another certificate's key — is no open work (a warning),
/// never a reason to act.
#[test]
fn open_work_is_read_from_the_sealed_records_and_garbage_is_none() {
    if !ready() {
        return;
    }
    let mut f = Fleet::start(1);
    let config = cert_agent::testing::config::Config::load(&f.hosts[0].config).expect("the config");
    let endpoints = f.cluster().endpoints();
    let rt = tokio::runtime::Runtime::new().expect("a runtime");
    rt.block_on(async {
        let clock = cert_agent::testing::clock::Clock::SYSTEM;
        let link = cert_agent::testing::fleet::connect(&config, clock)
            .await
            .expect("connects")
            .expect("a fleet");
        let open = cert_agent::testing::fleet::open_work(&config, &link).await;
        assert_eq!(open.len(), 1, "{open:?}");
        assert!(open[0].starts_with("'www': no certificate yet"), "{open:?}");

        let mut raw = etcd_client::Client::connect(endpoints, None)
            .await
            .expect("etcd");
        for garbage in [&[0u8, 1, 2, 3][..], b"{\"record\": {}}", &[0xff; 64][..]] {
            raw.put("/cert-agent/certs/www/state", garbage, None)
                .await
                .expect("put");
            let open = cert_agent::testing::fleet::open_work(&config, &link).await;
            assert!(open.is_empty(), "{garbage:?}: {open:?}");
        }
        raw.delete("/cert-agent/certs/www/state", None)
            .await
            .expect("delete");
    });

    // A genuine record of another certificate, moved under this one's key, does not open.
    // (The CA fetches from a closed port: the order stays pending.)
    hold_validation(&f);
    f.agent(0, &["--json", "renew", "--wait", "1"]);
    rt.block_on(async {
        let mut raw = etcd_client::Client::connect(f.cluster().endpoints(), None)
            .await
            .expect("etcd");
        let genuine = raw
            .get("/cert-agent/certs/www/state", None)
            .await
            .expect("get")
            .kvs()
            .first()
            .map(|kv| kv.value().to_vec())
            .expect("the leader shared its record");
        let link =
            cert_agent::testing::fleet::connect(&config, cert_agent::testing::clock::Clock::SYSTEM)
                .await
                .expect("connects")
                .expect("a fleet");
        let open = cert_agent::testing::fleet::open_work(&config, &link).await;
        assert!(
            open.iter().any(|o| o.starts_with("'www': order")),
            "the order waits for its validation: {open:?}"
        );
        raw.put("/cert-agent/certs/www/state", genuine.clone(), None)
            .await
            .expect("put");
        let mut other = config.clone();
        if let Some(c) = other.certificates.first_mut() {
            c.name = "api".into();
        }
        raw.put("/cert-agent/certs/api/state", genuine, None)
            .await
            .expect("put");
        assert!(
            cert_agent::testing::fleet::open_work(&other, &link)
                .await
                .is_empty()
        );
    });
}

/// The look at the open work does not read again a current certificate this host holds (etcd
/// lists it at the revision this host accepted it at, and this host installed that very
/// certificate): it goes by this host's own install. A value put under the key again — the
/// same bytes replayed, or garbage — has a new revision, and is read and opened as before.
#[test]
fn open_work_reads_a_current_certificate_only_when_etcd_changed_it() {
    if !ready() {
        return;
    }
    let f = Fleet::start(1);
    let out = f.agent(0, &["--json", "renew", "--wait", "60"]);
    assert!(
        f.installed(0).is_some(),
        "{}\n{}\n{}",
        out.stdout,
        out.stderr,
        f.logs()
    );
    let config = cert_agent::testing::config::Config::load(&f.hosts[0].config).expect("the config");
    // This host's own record says its certificate ends tomorrow (the same serial): going by
    // it, the look finds a reissue due, which the fleet's value would not say.
    let store = cert_agent::testing::store::Store::open(&f.hosts[0].state).expect("the state");
    let mut rec = store.load("www").expect("the record");
    let installed = rec.installed.as_mut().expect("installed");
    installed.not_after = time::OffsetDateTime::now_utc() + time::Duration::days(1);
    store.save(&rec).expect("saved");
    let rt = tokio::runtime::Runtime::new().expect("a runtime");
    rt.block_on(async {
        let link =
            cert_agent::testing::fleet::connect(&config, cert_agent::testing::clock::Clock::SYSTEM)
                .await
                .expect("connects")
                .expect("a fleet");
        let open = cert_agent::testing::fleet::open_work(&config, &link).await;
        assert!(
            open.len() == 1 && open[0].starts_with("'www': a reissue is due"),
            "the look went by this host's install: {open:?}"
        );
        let mut raw = etcd_client::Client::connect(f.endpoints(), None)
            .await
            .expect("etcd");
        let key = "/cert-agent/certs/www/current";
        let genuine = raw
            .get(key, None)
            .await
            .expect("get")
            .kvs()
            .first()
            .map(|kv| kv.value().to_vec())
            .expect("the leader published its certificate");
        // The same bytes put back: a new revision, so read and opened; the fleet's
        // certificate is far from its end.
        raw.put(key, genuine, None).await.expect("put");
        let open = cert_agent::testing::fleet::open_work(&config, &link).await;
        assert!(open.is_empty(), "the value was read: {open:?}");
        // Garbage under the key: read, refused, left out.
        raw.put(key, b"garbage".to_vec(), None).await.expect("put");
        let open = cert_agent::testing::fleet::open_work(&config, &link).await;
        assert!(open.is_empty(), "{open:?}");
    });
}

/// `fleet status` on host `i` with the agent's clock `offset` (seconds) ahead.
fn status_at(f: &Fleet, i: usize, offset: i64) -> support::env::AgentOutput {
    let offset = offset.to_string();
    f.env
        .agent_at(&f.hosts[i].config, ["fleet", "status"])
        .env(CLOCK_OFFSET_ENV, offset)
        .run()
}

/// A fleet of `n` hosts whose leader, web1, was killed (SIGKILL) while the CA held the
/// validation of its reissue, its lease ended and no daemon runs; the first serial, and the
/// agent's clock offset (seconds) the daemon ran with.
fn killed_mid_reissue(n: usize) -> (Fleet, String, i64) {
    let mut f = Fleet::start(n);
    let ports: Vec<u16> = f.hosts.iter().map(|h| h.web.http_port()).collect();
    f.env.sandbox.set_dcv_ports(ports[0], 0);
    let first = f.agent(0, &["--json", "renew", "--wait", "60"]);
    first.expect_code(0);
    let serial = first.installed_serial("www");
    for i in 1..n {
        f.agent(i, &["--json", "renew"]).expect_code(0);
    }
    f.wait_all_serve(&serial, Duration::from_secs(30));

    // 150 days on the reissue is due; web1's daemon sends it and is killed while the CA
    // holds its validation.
    f.env.sandbox.advance(Duration::from_secs(150 * 86_400));
    let daemon_clock = clock_offset(&f.env);
    let offset = daemon_clock.to_string();
    hold_validation(&f);
    let busy = [
        (CLOCK_OFFSET_ENV, offset.as_str()),
        (cert_agent::testing::failpoint::ENV, "dcv-placed:block=600"),
    ];
    f.start_daemon_with(0, &busy);
    let led = wait_until(Duration::from_secs(120), || {
        leader(&f, 1).as_deref() == Some("web1")
            && f.env
                .calls()
                .iter()
                .any(|c| c.method == "POST" && c.path.ends_with("/reissue"))
    });
    assert!(led, "web1's daemon did not lead a reissue\n{}", f.logs());
    // Killed once it published the validation (it blocks right after).
    let pv = f.env.path("web1/www-root/.well-known/pki-validation");
    let placed = wait_until(Duration::from_secs(30), || {
        fs::read_dir(&pv).is_ok_and(|mut d| d.next().is_some())
    });
    assert!(placed, "web1 did not publish the validation\n{}", f.logs());
    f.kill_daemon(0);
    let ended = wait_until(LEASE + Duration::from_secs(15), || leader(&f, 1).is_none());
    assert!(ended, "the killed leader's lease did not end\n{}", f.logs());
    (f, serial, daemon_clock)
}

/// Guards the leaderless gap: the leader is killed (SIGKILL) in the middle of a reissue and
/// no daemon runs. `fleet status` does not say a bare `none (between runs)` with every host
/// current: it names the reissue pending since it was sent and that no run leads it, and
/// exits 1 once no run has worked on it for longer than `lag_alert_secs` (900 s).
#[test]
fn a_leader_killed_mid_reissue_leaves_a_gap_that_fleet_status_names() {
    if !ready() {
        return;
    }
    let (f, _, daemon_clock) = killed_mid_reissue(2);
    edit_config(&f, 1, "lag_alert_secs = 60", "lag_alert_secs = 900");
    let now = status_at(&f, 1, daemon_clock);
    now.expect_code(0);
    assert!(
        now.stdout
            .contains("leader: none — reissue of www pending since ")
            && now.stdout.contains(
                ", no run leads it; the next daemon run or `cert-agent renew` on any host \
                 takes it over"
            ),
        "{}",
        now.describe()
    );
    let late = status_at(&f, 1, daemon_clock + 1000);
    late.expect_code(1);
    assert!(
        late.stdout
            .contains("www: UNLED: no run has worked on its reissue for ")
            && late.stdout.contains("(more than 900 s; last by web1 at "),
        "{}",
        late.describe()
    );
}

/// Runs `args` on host `i` with the agent's clock `offset` (seconds) ahead.
fn agent_at_clock(f: &Fleet, i: usize, args: &[&str], offset: i64) -> support::env::AgentOutput {
    f.env
        .agent_at(&f.hosts[i].config, args)
        .env(CLOCK_OFFSET_ENV, offset.to_string())
        .run()
}

/// Guards a killed daemon's host: web1 led a reissue and was killed; web2 took the work over
/// and installed the new certificate. web1, with no daemon, still has the old one installed
/// and its own record says "reissuing": `check` there says WARNING (exit 1), naming both
/// serials and what to do, once the fleet's certificate is older than `lag_alert_secs`, and
/// `status` says the same; within the bound the check does not.
#[test]
fn a_killed_daemons_host_behind_the_fleet_is_not_reported_ok() {
    if !ready() {
        return;
    }
    let (f, serial, daemon_clock) = killed_mid_reissue(2);
    let mut etcd = f.etcd();
    let replay = etcd
        .get("certs/www/current")
        .expect("the first current certificate");
    let ports: Vec<u16> = f.hosts.iter().map(|h| h.web.http_port()).collect();
    support::balancer::validate_on_every_host(&f.env.sandbox, &ports);
    let took = agent_at_clock(&f, 1, &["--json", "renew", "--wait", "120"], daemon_clock);
    took.expect_code(0);
    let second = took.installed_serial("www");
    assert_ne!(second, serial);
    assert_eq!(
        f.installed(0).as_deref(),
        Some(serial.as_str()),
        "web1 kept the old one"
    );
    edit_config(&f, 0, "lag_alert_secs = 60", "lag_alert_secs = 900");

    let within = agent_at_clock(&f, 0, &["check"], daemon_clock);
    assert!(
        !within.stdout.contains("behind the fleet"),
        "{}",
        within.describe()
    );
    let late = agent_at_clock(&f, 0, &["check"], daemon_clock + 1000);
    late.expect_code(1);
    let expected = format!(
        "WARNING www: behind the fleet: this host installed serial {serial} but the fleet's \
         current certificate is serial {second}"
    );
    assert!(late.stdout.contains(&expected), "{}", late.describe());
    assert!(
        late.stdout.contains("run `cert-agent renew` here"),
        "{}",
        late.describe()
    );
    let status = agent_at_clock(&f, 0, &["status"], daemon_clock + 1000);
    status.expect_code(0);
    assert!(
        status
            .stdout
            .contains("www: behind the fleet: this host installed serial"),
        "{}",
        status.describe()
    );

    // What etcd shows is read sealed: the first current certificate replayed (the one web1
    // has) or garbage is no reason to warn; garbage is named on standard error.
    etcd.put("certs/www/current", replay);
    let replayed = agent_at_clock(&f, 0, &["check"], daemon_clock + 1000);
    assert!(
        !replayed.stdout.contains("behind the fleet"),
        "{}",
        replayed.describe()
    );
    etcd.put("certs/www/current", "garbage");
    let garbage = agent_at_clock(&f, 0, &["check"], daemon_clock + 1000);
    assert!(
        !garbage.stdout.contains("behind the fleet"),
        "{}",
        garbage.describe()
    );
    assert_ne!(garbage.code, Some(3), "{}", garbage.describe());
    assert!(
        garbage.stderr.contains("certs/www/current"),
        "{}",
        garbage.describe()
    );
}
