//! A new certificate rolled out in waves (real etcd of three members, three hosts each with
//! its own nginx, the sandbox): web2 is the canary, then one host per wave with a pause of 2 s.
//! web1 leads and installs what it obtained; web3 (the last wave) installs only after web2's
//! and web1's proofs were written and the pause passed. Then web2's nginx keeps the old
//! certificate for one name: its proof of the next serial fails, it rolls its install back
//! and serves the previous serial again (handshakes), and neither web3 nor web2 itself
//! installs the new serial — `fleet status` names the halt, the wave, the host, the name and
//! both serials, and the rollback, and `check` is CRITICAL with them on every host; one
//! notification for the fleet. A forged decision is refused naming its key; `fleet rollout
//! abort` keeps the fleet on the old serial and ends the halt; `fleet rollout resume` after
//! the fix lets the canary install the serial again and the last wave follow.

use std::fs;
use std::time::Duration;

use time::OffsetDateTime;
use time::format_description::well_known::Rfc3339;

use crate::fleet_e2e::{FOLLOW_ONLY, Fleet, ready};
use crate::fleet_proof::{NAMES, fix_vhost, proved, row, stale_vhost, status};
use crate::support::env::{norm_serial, wait_until};
use crate::support::webserver::Server;

fn at(v: &serde_json::Value) -> OffsetDateTime {
    OffsetDateTime::parse(v.as_str().unwrap_or_default(), &Rfc3339).expect("an RFC 3339 time")
}

/// When host `i` installed what it serves, from its record.
fn installed_at(f: &Fleet, i: usize) -> OffsetDateTime {
    at(&record(f, i)["installed"]["installed_at"])
}

#[test]
fn the_canary_then_each_wave_after_the_proofs_and_a_failed_canary_rolls_back_and_halts_the_rest() {
    if !ready() {
        return;
    }
    let mut f = Fleet::start_under("/cert-agent/", &[Server::Nginx; 3], &[("www", NAMES)]);
    let notified: Vec<_> = f
        .hosts
        .iter()
        .map(|h| h.config.with_extension("events"))
        .collect();
    for (h, log) in f.hosts.iter().zip(&notified) {
        let log = log.display().to_string();
        let config = fs::read_to_string(&h.config).unwrap().replacen(
            "state_dir = ",
            &format!("notify_command = [\"/bin/sh\", \"-c\", \"cat >> '{log}'\"]\nstate_dir = "),
            1,
        );
        fs::write(&h.config, config).unwrap();
    }
    let (first, resync) = first_issuance(&mut f, 2);

    // Waves: [web2] (the canary), [web1], [web3]. web3 installed after both proofs, and
    // after the pause that followed the later one.
    let mut v = serde_json::Value::Null;
    let all = wait_until(Duration::from_secs(30), || {
        v = status(&f, 0).1;
        ["web1", "web2", "web3"]
            .iter()
            .all(|h| proved(&v, h).as_deref() == Some(first.as_str()))
    });
    assert!(all, "{v:#}\n{}", f.logs());
    let proof_at = |h: &str| at(&row(&v, h)["proof"]["at"]);
    let (web1, web2) = (proof_at("web1"), proof_at("web2"));
    let web3 = installed_at(&f, 2);
    assert!(
        web3 >= web1.max(web2) + time::Duration::seconds(2),
        "web3 installed at {web3}, web1 proved at {web1}, web2 at {web2}\n{}",
        f.logs()
    );
    assert!(installed_at(&f, 1) < web3, "the canary installed first");

    // web2 keeps the old certificate for shop.fleet.test: its proof of the next serial fails,
    // it rolls its install back, and the rollout stops there.
    stale_vhost(&f, 1, "shop.fleet.test");
    let re = f.agent(0, &["--json", "reissue", "www", "--wait", "60"]);
    re.expect_code(0);
    let second = re.installed_serial("www");
    assert_ne!(second, first);
    let failed = wait_until(Duration::from_secs(40), || {
        v = status(&f, 0).1;
        proved(&v, "web2").as_deref() == Some(second.as_str())
            && !row(&v, "web2")["proof"]["rolled_back"].is_null()
    });
    assert!(failed, "{v:#}\n{}", f.logs());
    assert!(!row(&v, "web2")["proof_failure"].is_null(), "{v:#}");
    let back = &row(&v, "web2")["proof"]["rolled_back"];
    assert_eq!(
        norm_serial(back["serial"].as_str().unwrap_or_default()),
        first,
        "{v:#}"
    );
    assert!(back["failure"].is_null(), "served again: {v:#}");
    // The canary serves the previous certificate again, for every name (handshakes), and its
    // record says so. Its rollback's reload settles asynchronously: nginx's old workers may
    // take a connection for a moment after the proof that the previous serial is served.
    let web2 = f.hosts[1].web.https_addr();
    for name in ["www.fleet.test", "shop.fleet.test"] {
        let leaf = f
            .env
            .served_leaf_with_serial(&web2, name, &first)
            .expect("a handshake");
        assert_eq!(leaf.serial, first, "web2 {name}\n{}", f.logs());
    }
    assert_eq!(f.installed(1).as_deref(), Some(first.as_str()));
    let rec = record(&f, 1);
    assert_eq!(
        norm_serial(rec["rolled_back"]["serial"].as_str().unwrap_or_default()),
        second,
        "{rec:#}"
    );
    // web3's daemon has seen the failed proof (and synchronises every second): it installs
    // nothing of the new serial; nor does the canary again (its daemon synchronises too).
    std::thread::sleep(Duration::from_secs(5));
    for i in [1, 2] {
        assert_eq!(f.installed(i).as_deref(), Some(first.as_str()), "host {i}");
        assert_eq!(f.served(i).as_deref(), Some(first.as_str()), "host {i}");
    }
    let (code, v) = status(&f, 0);
    assert_eq!(code, Some(1), "{v:#}");
    let halted = v["certificates"][0]["halted"].as_str().unwrap_or_default();
    assert!(
        halted.starts_with("rollout halted at wave 0: web2: "),
        "{v:#}"
    );
    let text = f.agent(2, &["fleet", "status"]);
    assert!(
        text.text()
            .contains("www: rollout halted at wave 0: web2: ")
            && text.text().contains("www: web2: ROLLED BACK to serial "),
        "{}",
        text.describe()
    );
    // `check` CRITICAL on each host that synchronised since, naming where it halted: the
    // canary and the host it keeps back (their daemons), and the leader after a run.
    f.agent(0, &["--json", "renew"]).expect_code(0);
    for i in [0, 1, 2] {
        let mut last = String::new();
        let critical = wait_until(Duration::from_secs(20), || {
            let c = f.agent(i, &["check"]);
            last = c.describe();
            c.code == Some(2) && c.text().contains("rollout halted at wave 0: web2: ")
        });
        assert!(critical, "host {i}: {last}\n{}", f.logs());
    }
    // One notification for the fleet: web2's, whose proof failed.
    let halts = |i: usize| {
        fs::read_to_string(&notified[i])
            .unwrap_or_default()
            .matches("\"event\":\"rollout_halted\"")
            .count()
    };
    assert!(
        wait_until(Duration::from_secs(10), || halts(1) == 1),
        "{}",
        f.logs()
    );
    let skipped = row(&v, "web3")["skipped"]
        .as_str()
        .unwrap_or_default()
        .to_owned();
    assert!(
        skipped.starts_with("rollout halted at wave 0: web2: ")
            && skipped.contains("(SNI shop.fleet.test) serves serial"),
        "{v:#}"
    );
    assert!(
        skipped
            .to_uppercase()
            .contains(&format!("{first}, NOT {second}")),
        "{skipped}"
    );
    // The canary's own next run does not install the serial it rolled back.
    f.kill_daemon(1);
    let again = f.agent(1, &["--json", "renew"]);
    assert_eq!(
        f.installed(1).as_deref(),
        Some(first.as_str()),
        "{}",
        again.describe()
    );
    let (_, v) = status(&f, 0);
    let own = row(&v, "web2")["skipped"].as_str().unwrap_or_default();
    assert!(own.starts_with("rolled back here at "), "{v:#}");

    // A forged decision — a plain "resume" at web1's key — is refused naming the key, and
    // web3 (its daemon woken by the key) still installs nothing.
    let mut etcd = f.etcd();
    let forged = format!(
        "{{\"verdict\":\"resume\",\"serial\":\"{second}\",\"host\":\"web1\",\
         \"at\":\"2026-01-01T00:00:00Z\"}}"
    );
    etcd.put("hosts/web1/rollout/www", forged.into_bytes());
    let named = wait_until(Duration::from_secs(20), || {
        f.logs()
            .contains("the fleet's rollout decision /cert-agent/hosts/web1/rollout/www ")
    });
    assert!(named, "{}", f.logs());
    std::thread::sleep(Duration::from_secs(2));
    assert_eq!(f.installed(2).as_deref(), Some(first.as_str()));

    // Abort: the fleet stays on the old serial (handshakes), web3 says why, and the halt is
    // over: `check` there is no longer CRITICAL.
    let abort = f.agent(0, &["fleet", "rollout", "abort", "www"]);
    abort.expect_code(0);
    assert!(
        abort.text().contains("www: rollout of serial ")
            && abort.text().contains("aborted by web1"),
        "{}",
        abort.describe()
    );
    let mut v = serde_json::Value::Null;
    let aborted = wait_until(Duration::from_secs(20), || {
        v = status(&f, 0).1;
        row(&v, "web3")["skipped"]
            .as_str()
            .is_some_and(|s| s.starts_with("rollout of serial ") && s.contains("aborted by web1"))
    });
    assert!(aborted, "{v:#}\n{}", f.logs());
    assert!(v["certificates"][0]["halted"].is_null(), "{v:#}");
    // Decided: web2's failed proof of the aborted serial is shown, not alerted.
    let (code, v) = status(&f, 0);
    assert_eq!(code, Some(0), "{v:#}");
    assert!(!row(&v, "web2")["proof_failure"].is_null(), "{v:#}");
    for i in [1, 2] {
        assert_eq!(f.served(i).as_deref(), Some(first.as_str()), "host {i}");
        let shop = f
            .env
            .served_leaf(&f.hosts[i].web.https_addr(), "shop.fleet.test");
        assert_eq!(shop.map(|l| l.serial).ok().as_deref(), Some(first.as_str()));
    }
    let calm = wait_until(Duration::from_secs(20), || {
        !f.agent(2, &["check"]).text().contains("rollout halted")
    });
    assert!(calm, "{}", f.agent(2, &["check"]).describe());

    // Resume after the fix: the canary installs the serial it rolled back, proves it, and
    // the last wave follows.
    fix_vhost(&f, 1);
    let resume = f.agent(0, &["fleet", "rollout", "resume", "www"]);
    resume.expect_code(0);
    f.agent(1, &["--json", "renew"]).expect_code(0);
    f.wait_all_serve(&second, Duration::from_secs(30));
    let (code, v) = status(&f, 0);
    assert_eq!(code, Some(0), "{v:#}");
    assert!(v["certificates"][0]["halted"].is_null(), "{v:#}");
    assert!(row(&v, "web2")["proof_failure"].is_null(), "{v:#}");
    assert_eq!([halts(0), halts(1), halts(2)], [0, 1, 0], "{}", f.logs());

    // The time rule: the canary fails again on the next serial and halts the rollout; web3,
    // its clock moved into the last half of the lifetime of the certificate it serves,
    // installs the new serial at once all the same, and says why (log, `rollout_overridden`).
    // (Every host serves the validation file: the sandbox checks all of them.)
    f.start_daemon_args(1, FOLLOW_ONLY, &resync);
    stale_vhost(&f, 1, "shop.fleet.test");
    let re = f.agent(0, &["--json", "reissue", "www", "--wait", "60"]);
    re.expect_code(0);
    let third = re.installed_serial("www");
    let halted_again = wait_until(Duration::from_secs(30), || {
        let v = status(&f, 0).1;
        proved(&v, "web2").as_deref() == Some(third.as_str())
            && !row(&v, "web2")["proof"]["rolled_back"].is_null()
    });
    assert!(halted_again, "{}", f.logs());
    f.kill_daemon(1);
    f.kill_daemon(2);
    f.agent(2, &["--json", "renew"]);
    assert_eq!(f.installed(2).as_deref(), Some(second.as_str()), "halted");
    let rec = record(&f, 2);
    let (from, to) = (
        at(&rec["installed"]["not_before"]),
        at(&rec["installed"]["not_after"]),
    );
    // Half its lifetime as the margin (a tenth is the default): the clock moved past it is
    // still before this certificate's renewal falls due (`renew_before_days`), so that the
    // run's lead orders nothing.
    let mut config = fs::read_to_string(&f.hosts[2].config).unwrap();
    config.push_str("rollout_deadline_fraction = 0.5\n");
    fs::write(&f.hosts[2].config, config).unwrap();
    let margin: time::Duration = (to - from) * 0.45;
    let near_end: time::Duration = (to - margin) - OffsetDateTime::now_utc();
    let offset = near_end.whole_seconds().to_string();
    let over = f
        .env
        .agent_at(&f.hosts[2].config, ["--json", "renew"])
        .env("CERT_AGENT_TEST_CLOCK_OFFSET_SECS", &offset)
        .run();
    assert_eq!(
        f.installed(2).as_deref(),
        Some(third.as_str()),
        "{}",
        over.describe()
    );
    assert_eq!(f.served_settled(2, &third).as_deref(), Some(third.as_str()));
    assert!(
        over.describe()
            .contains("rollout_overridden: installed serial "),
        "{}",
        over.describe()
    );
    let events = fs::read_to_string(&notified[2]).unwrap_or_default();
    assert_eq!(
        events.matches("\"event\":\"rollout_overridden\"").count(),
        1,
        "{events}"
    );
    // The canary, whose own rollback refused the serial: its clock is not near the end, it
    // keeps the previous serial.
    assert_eq!(f.installed(1).as_deref(), Some(second.as_str()));
}

/// The rollout of these tests on every host (web2 the canary, then one host per wave, a
/// pause of `pause` seconds), the daemons of web2 and web3 started (synchronising every
/// second: the environment returned), and the first certificate issued by web1 and served by
/// every host: its serial.
fn first_issuance(f: &mut Fleet, pause: u32) -> (String, [(&'static str, &'static str); 1]) {
    for h in &f.hosts {
        let mut config = fs::read_to_string(&h.config).unwrap();
        config.push_str(&format!(
            "rollout_canaries = [\"web2\"]\nrollout_wave = 1\nrollout_pause_secs = {pause}\n"
        ));
        fs::write(&h.config, config).unwrap();
    }
    let resync = [("CERT_AGENT_TEST_FLEET_RESYNC_SECS", "1")];
    f.start_daemon_args(1, FOLLOW_ONLY, &resync);
    f.start_daemon_args(2, FOLLOW_ONLY, &resync);
    let out = f.agent(0, &["--json", "renew", "--wait", "60"]);
    out.expect_code(0);
    let first = out.installed_serial("www");
    f.wait_all_serve(&first, Duration::from_secs(60));
    (first, resync)
}

/// Host `i`'s record of certificate `www`.
fn record(f: &Fleet, i: usize) -> serde_json::Value {
    let text = fs::read_to_string(f.hosts[i].state.join("certs/www.json")).unwrap();
    serde_json::from_str(&text).unwrap()
}

/// `POST …/reissue` and `POST /order` calls at the sandbox so far.
fn billed_or_reissued(f: &Fleet) -> usize {
    f.env
        .calls()
        .iter()
        .filter(|c| {
            c.method == "POST" && (c.path.ends_with("/reissue") || c.path == "/api/v1/order")
        })
        .count()
}

/// The leader is a host of its wave like the others: web1 leads and sits in wave 1 (web2 is
/// the canary, web3 the last wave). Its nginx keeps the old certificate for one name: its
/// proof of the reissued serial fails before its install is committed, and it rolls the
/// install back (handshakes: the old serial on every name). The serial is published all the
/// same: the canary installs it (its wave comes first), web3 is held back by web1's failed
/// proof, `fleet status` names the halt at wave 1. The leader's next run installs nothing and
/// orders nothing; after the fix, `fleet rollout resume` lets its next run install the serial
/// and web3 follows.
#[test]
fn a_leader_whose_proof_fails_rolls_its_own_install_back_and_halts_the_waves_after_it() {
    if !ready() {
        return;
    }
    let mut f = Fleet::start_under("/cert-agent/", &[Server::Nginx; 3], &[("www", NAMES)]);
    let (first, resync) = first_issuance(&mut f, 1);

    stale_vhost(&f, 0, "shop.fleet.test");
    let re = f.agent(0, &["--json", "reissue", "www", "--wait", "60"]);
    let o = re.outcome("www");
    assert_eq!(o["outcome"], "failed", "{}", re.describe());
    assert!(
        o["error"]
            .as_str()
            .is_some_and(|e| e.contains("this host's proof of serial ")),
        "{}",
        re.describe()
    );
    // The leader serves the previous certificate on every name (once the old workers of the
    // reload that installed the new one are gone), and its record says why.
    let web1 = f.hosts[0].web.https_addr();
    for name in ["www.fleet.test", "shop.fleet.test"] {
        let leaf = f.env.served_leaf_with_serial(&web1, name, &first);
        let leaf = leaf.expect("a handshake");
        assert_eq!(leaf.serial, first, "web1 {name}\n{}", f.logs());
    }
    assert_eq!(f.installed(0).as_deref(), Some(first.as_str()));
    let mut v = serde_json::Value::Null;
    let published = wait_until(Duration::from_secs(30), || {
        v = status(&f, 0).1;
        proved(&v, "web1").is_some_and(|s| s != first)
            && !row(&v, "web1")["proof"]["rolled_back"].is_null()
    });
    assert!(published, "{v:#}\n{}", f.logs());
    let second = proved(&v, "web1").unwrap();
    let rec = record(&f, 0);
    assert_eq!(
        norm_serial(rec["rolled_back"]["serial"].as_str().unwrap_or_default()),
        second,
        "{rec:#}"
    );
    // The canary's wave comes before the leader's: it installs the serial; web3 is held back.
    assert!(
        wait_until(Duration::from_secs(30), || f.installed(1).as_deref()
            == Some(second.as_str())),
        "{}",
        f.logs()
    );
    let held = wait_until(Duration::from_secs(30), || {
        v = status(&f, 0).1;
        row(&v, "web3")["skipped"]
            .as_str()
            .is_some_and(|s| s.starts_with("rollout halted at wave 1: web1: "))
    });
    assert!(held, "{v:#}\n{}", f.logs());
    assert_eq!(
        f.installed(2).as_deref(),
        Some(first.as_str()),
        "{}",
        f.logs()
    );
    // web3 leading does not carry the leader's reissue, still open, into an install of its
    // own: the rollout keeps the serial from a leader as from any host.
    f.kill_daemon(2);
    let mut out = None;
    let led = wait_until(Duration::from_secs(30), || {
        let o = f.agent(2, &["-v", "--json", "renew"]);
        let led = o.text().contains("leading the fleet for this run");
        out = Some(o);
        led
    });
    let out = out.expect("a run");
    assert!(led, "{}", out.describe());
    assert_eq!(
        f.installed(2).as_deref(),
        Some(first.as_str()),
        "{}",
        out.describe()
    );
    let reason = out.outcome("www")["reason"]
        .as_str()
        .unwrap_or_default()
        .to_owned();
    assert!(
        reason.starts_with("rollout halted at wave 1: web1: "),
        "{}",
        out.describe()
    );
    f.start_daemon_args(2, FOLLOW_ONLY, &resync);
    let (code, v) = status(&f, 0);
    assert_eq!(code, Some(1), "{v:#}");

    // The leader's next run installs nothing and asks the CA for nothing new.
    let calls = billed_or_reissued(&f);
    let again = f.agent(0, &["--json", "renew"]);
    let o = again.outcome("www");
    assert_eq!(o["outcome"], "unchanged", "{}", again.describe());
    assert!(
        o["reason"]
            .as_str()
            .is_some_and(|r| r.starts_with("rolled back here at ")),
        "{}",
        again.describe()
    );
    assert_eq!(f.installed(0).as_deref(), Some(first.as_str()));
    assert_eq!(billed_or_reissued(&f), calls, "{}", again.describe());

    // Fixed and resumed: the leader installs the serial and proves it; web3 follows.
    fix_vhost(&f, 0);
    f.agent(0, &["fleet", "rollout", "resume", "www"])
        .expect_code(0);
    // (A run while the pause after the canary's wave lasts leaves it pending: run again.)
    let mut resumed = String::new();
    let installed = wait_until(Duration::from_secs(30), || {
        resumed = f.agent(0, &["--json", "renew"]).describe();
        f.installed(0).as_deref() == Some(second.as_str())
    });
    assert!(installed, "{resumed}");
    f.wait_all_serve(&second, Duration::from_secs(30));
    assert_eq!(billed_or_reissued(&f), calls, "nothing ordered again");

    // Again, and aborted: the leader closes the reissue that brought the refused serial (its
    // pending key discarded); its next runs neither install it nor ask the CA for anything,
    // and the fleet stays on the serial it served.
    stale_vhost(&f, 0, "shop.fleet.test");
    let re = f.agent(0, &["--json", "reissue", "www", "--wait", "60"]);
    assert_eq!(re.outcome("www")["outcome"], "failed", "{}", re.describe());
    let mut w = serde_json::Value::Null;
    let third = wait_until(Duration::from_secs(30), || {
        w = status(&f, 0).1;
        proved(&w, "web1").is_some_and(|s| s != second)
    });
    assert!(third, "{w:#}\n{}", f.logs());
    let open = record(&f, 0);
    assert!(
        !open["reissue"].is_null() && !open["pending_key"].is_null(),
        "the reissue stays open while halted: {open:#}"
    );
    f.agent(0, &["fleet", "rollout", "abort", "www"])
        .expect_code(0);
    let calls = billed_or_reissued(&f);
    let aborted = f.agent(0, &["--json", "renew"]);
    let reason = aborted.outcome("www")["reason"]
        .as_str()
        .unwrap_or_default()
        .to_owned();
    assert!(
        reason.starts_with("rollout of serial ") && reason.contains("aborted by web1"),
        "{}",
        aborted.describe()
    );
    let rec = record(&f, 0);
    assert!(
        rec["reissue"].is_null() && rec["pending_key"].is_null(),
        "{rec:#}"
    );
    assert!(
        fs::read_dir(f.hosts[0].state.join("keys/www"))
            .map(|d| d.count())
            .unwrap_or(0)
            == 0,
        "the pending key is discarded"
    );
    let quiet = f.agent(0, &["--json", "renew"]);
    assert_eq!(
        quiet.outcome("www")["outcome"],
        "unchanged",
        "{}",
        quiet.describe()
    );
    assert_eq!(billed_or_reissued(&f), calls, "{}", quiet.describe());
    assert_eq!(f.installed(0).as_deref(), Some(second.as_str()));
    assert_eq!(f.installed(2).as_deref(), Some(second.as_str()));
}
