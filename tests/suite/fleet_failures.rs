//! One truth about failures in fleet mode: the fleet's failure of a certificate (the leader's
//! last attempt, from the sealed shared record) and each host's own failure (a value from
//! etcd that does not open) show in `status`, `check`, the metrics, the notifications (once
//! per change of state) and `fleet status` on every host; a follower that keeps a newer
//! certificate of its own says so; a host that installed nothing is `never installed`.
//! Two hosts with real nginx on a real three-member etcd, the sandbox refusing what a test
//! asks it to.

use crate::fleet_e2e::{Fleet, ready};
use crate::fleet_trust::{PREFIX, Trial};
use crate::support;

use std::fs;
use std::path::PathBuf;
use std::time::Duration;

use partner_sandbox::{Fault, FaultKind};
use support::env::{norm_serial, wait_until};

/// Each host of `f` writes its metrics file and logs every notification (one JSON document a
/// line) beside its state directory.
fn watch(f: &Fleet) {
    for h in &f.hosts {
        let dir = h.state.parent().unwrap().to_path_buf();
        let text = fs::read_to_string(&h.config).unwrap();
        let hook = format!(
            "cat >> '{log}'; echo >> '{log}'",
            log = dir.join("notify.log").display()
        );
        let extra = format!(
            "metrics_file = \"{}\"\nnotify_command = [\"/bin/sh\", \"-c\", {hook:?}]\n",
            dir.join("metrics.prom").display()
        );
        let text = text.replacen("\nstate_dir = ", &format!("\n{extra}state_dir = "), 1);
        fs::write(&h.config, text).unwrap();
    }
}

fn host_dir(f: &Fleet, i: usize) -> PathBuf {
    f.hosts[i].state.parent().unwrap().to_path_buf()
}

/// The value of metric `family` for certificate `name` on host `i`.
fn metric(f: &Fleet, i: usize, family: &str, name: &str) -> Option<f64> {
    let text = fs::read_to_string(host_dir(f, i).join("metrics.prom")).ok()?;
    let start = format!("{family}{{name=\"{name}\"");
    text.lines()
        .find(|l| l.starts_with(&start))
        .and_then(|l| l.rsplit(' ').next())
        .and_then(|v| v.parse().ok())
}

/// The events host `i` notified for certificate `name`, in order.
fn events(f: &Fleet, i: usize, name: &str) -> Vec<String> {
    let text = fs::read_to_string(host_dir(f, i).join("notify.log")).unwrap_or_default();
    let mut out = Vec::new();
    for line in text.lines().filter(|l| !l.trim().is_empty()) {
        let v: serde_json::Value = serde_json::from_str(line).unwrap();
        for e in v["events"].as_array().into_iter().flatten() {
            if e["certificate"] == name {
                out.push(e["event"].as_str().unwrap_or_default().to_owned());
            }
        }
    }
    out
}

/// `cert-agent check --name NAME` on host `i`: its exit code and output.
fn check(f: &Fleet, i: usize, name: &str) -> (Option<i32>, String) {
    let out = f.agent(i, &["check", "--name", name]);
    (out.code, out.stdout)
}

/// `cert-agent status --json` on host `i`: the row of `name`.
fn status_row(f: &Fleet, i: usize, name: &str) -> serde_json::Value {
    let v = f.agent(i, &["--json", "status"]).json();
    let rows = v.as_array().cloned().unwrap_or_default();
    rows.into_iter()
        .find(|r| r["name"] == name)
        .unwrap_or_else(|| panic!("no status row for {name}: {v}"))
}

/// `cert-agent fleet status --json` on host `i`: its exit code and document.
fn fleet_status(f: &Fleet, i: usize) -> (Option<i32>, serde_json::Value) {
    let out = f.agent(i, &["--json", "fleet", "status"]);
    (out.code, out.json())
}

fn fleet_cert(v: &serde_json::Value, name: &str) -> serde_json::Value {
    v["certificates"]
        .as_array()
        .and_then(|a| a.iter().find(|c| c["name"] == name))
        .cloned()
        .unwrap_or_else(|| panic!("no certificate {name} in {v}"))
}

fn host_state(v: &serde_json::Value, name: &str, host: &str) -> String {
    fleet_cert(v, name)["hosts"]
        .as_array()
        .and_then(|a| a.iter().find(|h| h["host"] == host))
        .and_then(|h| h["state"].as_str())
        .unwrap_or_else(|| panic!("no host {host} for {name} in {v}"))
        .to_owned()
}

#[test]
fn a_failing_reissue_fails_on_every_host_once_per_change_of_state() {
    if !ready() {
        return;
    }
    let mut t = Trial::start();
    watch(&t.f);
    t.f.env.sandbox.inject(
        Fault::new(FaultKind::Status { status: 400 })
            .method("POST")
            .path("/api/v1/ssl_certificates/*/reissue")
            .times(100),
    );
    for round in 1..=3u32 {
        // web1 leads and the sandbox refuses its reissue; web2 then leads in the fleet's
        // backoff (rounds 1 and 2), or only follows (round 3: another host holds the lead).
        let f = &t.f;
        let re = f.agent(0, &["--json", "reissue", "www", "--wait", "30"]);
        re.expect_code(1);
        assert_eq!(re.outcome("www")["outcome"], "failed", "{}", re.describe());
        if round == 3 {
            t.hold_lead("web9");
        }
        let f = &t.f;
        // Exit 3: one certificate failed, the other is in order.
        let other = f.agent(1, &["--json", "renew"]);
        other.expect_code(3);
        if round == 3 {
            assert!(
                other.outcome("www")["error"]
                    .as_str()
                    .unwrap_or_default()
                    .contains("the fleet's last 3 attempt(s) failed (led by web1"),
                "{}",
                other.describe()
            );
            let row = status_row(f, 1, "www");
            assert!(
                row["last_error"]
                    .as_str()
                    .unwrap_or_default()
                    .contains("led by web1"),
                "{row}"
            );
        }
        assert_eq!(
            other.outcome("www")["outcome"],
            "failed",
            "{}",
            other.describe()
        );
        assert_eq!(
            other.outcome("shop")["outcome"],
            "unchanged",
            "{}",
            other.describe()
        );
        let want = if round < 3 { 1 } else { 2 };
        for i in 0..2 {
            let (code, text) = check(f, i, "www");
            assert_eq!(code, Some(want), "round {round}, host {i}: {text}");
            assert!(
                text.contains("was refused"),
                "round {round}, host {i}: {text}"
            );
            assert_eq!(
                metric(f, i, "cert_agent_certificate_consecutive_failures", "www"),
                Some(f64::from(round)),
                "round {round}, host {i}"
            );
            assert_eq!(
                metric(f, i, "cert_agent_certificate_consecutive_failures", "shop"),
                Some(0.0),
                "round {round}, host {i}"
            );
            let row = status_row(f, i, "www");
            assert_eq!(row["failures"], round, "round {round}, host {i}: {row}");
            let error = row["last_error"].as_str().unwrap_or_default();
            assert!(
                error.contains("was refused"),
                "round {round}, host {i}: {row}"
            );
            assert_eq!(check(f, i, "shop").0, Some(0), "round {round}, host {i}");
        }
        let (code, v) = fleet_status(f, 1);
        assert_eq!(code, Some(1), "round {round}: {v}");
        assert_eq!(v["failing"], serde_json::json!(["www"]), "{v}");
        let www = fleet_cert(&v, "www");
        assert_eq!(www["failure"]["failures"], round, "{v}");
        assert_eq!(www["failure"]["by"], "web1", "{v}");
        for host in ["web1", "web2"] {
            assert_eq!(host_state(&v, "www", host), "current", "{v}");
        }
    }
    t.etcd.delete("leader");
    let f = &t.f;
    let text = f.agent(0, &["fleet", "status"]);
    text.expect_code(1);
    assert!(
        text.stdout
            .contains("www: FAILING: the fleet's last 3 attempt(s) failed")
    );
    for i in 0..2 {
        assert_eq!(events(f, i, "www"), ["failed"], "host {i}");
        assert!(events(f, i, "shop").is_empty(), "host {i}");
    }

    // The sandbox accepts reissues again: every surface recovers, with one notification.
    f.env.sandbox.clear_faults();
    let re = f.agent(0, &["--json", "reissue", "www", "--wait", "60"]);
    re.expect_code(0);
    let serial = re.installed_serial("www");
    let other = f.agent(1, &["--json", "renew"]);
    other.expect_code(0);
    assert_eq!(
        other.installed_serial("www"),
        serial,
        "{}",
        other.describe()
    );
    for i in 0..2 {
        let (code, text) = check(f, i, "www");
        assert_eq!(code, Some(0), "host {i}: {text}");
        assert_eq!(
            metric(f, i, "cert_agent_certificate_consecutive_failures", "www"),
            Some(0.0),
            "host {i}"
        );
        assert!(status_row(f, i, "www")["last_error"].is_null(), "host {i}");
        assert_eq!(events(f, i, "www"), ["failed", "installed"], "host {i}");
    }
    let (code, v) = fleet_status(f, 0);
    assert_eq!(code, Some(0), "{v}");
    assert!(fleet_cert(&v, "www")["failure"].is_null(), "{v}");
}

#[test]
fn a_value_that_does_not_open_fails_this_host_until_it_is_fixed() {
    if !ready() {
        return;
    }
    let mut t = Trial::start();
    watch(&t.f);
    let key = format!("{PREFIX}certs/www/current");
    t.etcd
        .put("certs/www/current", b"\x00\x01 not a value \xff".to_vec());

    // Blocked from leading (another host holds the lead): the garbage stays.
    t.hold_lead("web9");
    let out = t.f.agent(1, &["--json", "renew"]);
    out.expect_code(3);
    let error = out.outcome("www")["error"]
        .as_str()
        .unwrap_or_default()
        .to_owned();
    assert!(error.contains(&key), "{}", out.describe());
    assert_eq!(
        out.outcome("shop")["outcome"],
        "unchanged",
        "{}",
        out.describe()
    );
    let (code, text) = check(&t.f, 1, "www");
    assert_eq!(code, Some(1), "{text}");
    assert!(text.contains(&key), "{text}");
    assert_eq!(check(&t.f, 1, "shop").0, Some(0));
    let row = status_row(&t.f, 1, "www");
    assert!(
        row["last_error"]
            .as_str()
            .unwrap_or_default()
            .contains(&key),
        "{row}"
    );
    assert_eq!(
        metric(
            &t.f,
            1,
            "cert_agent_certificate_consecutive_failures",
            "www"
        ),
        Some(1.0)
    );
    assert_eq!(
        metric(
            &t.f,
            1,
            "cert_agent_certificate_consecutive_failures",
            "shop"
        ),
        Some(0.0)
    );
    let out = t.f.agent(1, &["--json", "renew"]);
    out.expect_code(3);
    assert_eq!(
        metric(
            &t.f,
            1,
            "cert_agent_certificate_consecutive_failures",
            "www"
        ),
        Some(2.0)
    );
    let (code, v) = fleet_status(&t.f, 0);
    assert_eq!(code, Some(1), "{v}");
    assert!(
        fleet_cert(&v, "www")["error"]
            .as_str()
            .unwrap_or_default()
            .contains(&key),
        "{v}"
    );
    assert!(host_state(&v, "www", "web2").starts_with("error: "), "{v}");
    assert_eq!(host_state(&v, "shop", "web2"), "current", "{v}");
    assert_eq!(events(&t.f, 1, "www"), ["failed"]);

    // The lead is free again: web2 leads and hands its certificate to the fleet (one download
    // from the Partner API, counted in its metrics), which replaces the value.
    t.etcd.delete("leader");
    let out = t.f.agent(1, &["--json", "renew"]);
    let metrics = fs::read_to_string(host_dir(&t.f, 1).join("metrics.prom")).unwrap();
    assert!(
        metrics
            .lines()
            .any(|l| l.starts_with("cert_agent_last_run_api_requests{")
                && l.contains("download_bundle")),
        "{}\n{metrics}",
        out.describe()
    );
    let out = t.f.agent(1, &["--json", "renew"]);
    out.expect_code(0);
    let (code, text) = check(&t.f, 1, "www");
    assert_eq!(code, Some(0), "{text}");
    assert_eq!(
        metric(
            &t.f,
            1,
            "cert_agent_certificate_consecutive_failures",
            "www"
        ),
        Some(0.0)
    );
    assert_eq!(events(&t.f, 1, "www"), ["failed", "recovered"]);
    let (code, v) = fleet_status(&t.f, 0);
    assert_eq!(code, Some(0), "{v}");
}

#[test]
fn a_follower_that_keeps_a_newer_certificate_says_why() {
    if !ready() {
        return;
    }
    let mut t = Trial::start();
    let fleet_serial = norm_serial(t.installed(0, "www").unwrap()["serial"].as_str().unwrap());
    // web2 gets a newer certificate outside the fleet (its configuration without [fleet]).
    let alone = host_dir(&t.f, 1).join("alone.toml");
    let text = fs::read_to_string(&t.f.hosts[1].config).unwrap();
    let cut = text.find("\n[fleet]").unwrap();
    fs::write(&alone, &text[..cut]).unwrap();
    t.f.env
        .sandbox
        .set_dcv_ports(t.f.hosts[1].web.http_port(), 0);
    let re =
        t.f.env
            .agent_at(&alone, ["--json", "reissue", "www", "--wait", "60"])
            .run();
    re.expect_code(0);
    let newer = re.installed_serial("www");
    assert_ne!(newer, fleet_serial);

    // Another host holds the lead: web2 only synchronises, and keeps its newer certificate.
    t.hold_lead("web9");
    let out = t.f.agent(1, &["--json", "renew"]);
    out.expect_code(0);
    let reason = out.outcome("www")["reason"]
        .as_str()
        .unwrap_or_default()
        .to_owned();
    assert!(
        reason.contains("not installing the fleet's certificate"),
        "{}",
        out.describe()
    );
    assert!(reason.contains("newer"), "{reason}");
    // Logged at the default verbosity.
    assert!(
        out.stderr
            .contains("not installing the fleet's certificate"),
        "{}",
        out.describe()
    );
    assert_eq!(
        norm_serial(t.installed(1, "www").unwrap()["serial"].as_str().unwrap()),
        newer
    );
    let (_, v) = fleet_status(&t.f, 0);
    let state = host_state(&v, "www", "web2");
    assert!(state.starts_with("skipped: not installing"), "{v}");
    assert_eq!(host_state(&v, "www", "web1"), "current", "{v}");

    // Its next lead hands it to the fleet; web1 installs it.
    t.etcd.delete("leader");
    t.f.agent(1, &["--json", "renew"]).expect_code(0);
    t.f.agent(0, &["--json", "renew"]).expect_code(0);
    let (code, v) = fleet_status(&t.f, 0);
    assert_eq!(code, Some(0), "{v}");
    assert_eq!(
        norm_serial(fleet_cert(&v, "www")["serial"].as_str().unwrap()),
        newer,
        "{v}"
    );
    for host in ["web1", "web2"] {
        assert_eq!(host_state(&v, "www", host), "current", "{v}");
    }
}

#[test]
fn a_host_that_installed_nothing_is_never_installed() {
    if !ready() {
        return;
    }
    let f = Fleet::pair("/never/");
    f.env.sandbox.set_dcv_ports(f.hosts[0].web.http_port(), 0);
    // web2 leads first and the sandbox refuses its order: nothing is installed anywhere.
    f.env.sandbox.inject(
        Fault::new(FaultKind::Status { status: 400 })
            .method("POST")
            .path("/api/v1/order"),
    );
    f.agent(1, &["--json", "renew"]).expect_code(1);
    let (code, v) = fleet_status(&f, 0);
    assert_eq!(code, Some(1), "{v}");
    assert_eq!(host_state(&v, "www", "web2"), "never installed", "{v}");
    // web1 orders and installs (naming the certificate retries it now, in the backoff); web2
    // has not synchronised since.
    f.agent(0, &["--json", "renew", "--name", "www", "--wait", "60"])
        .expect_code(0);
    let (code, v) = fleet_status(&f, 0);
    assert_eq!(code, Some(0), "{v}");
    assert_eq!(host_state(&v, "www", "web1"), "current", "{v}");
    assert_eq!(host_state(&v, "www", "web2"), "never installed", "{v}");
    let table = f.agent(0, &["fleet", "status"]);
    assert!(
        table.stdout.contains("never installed"),
        "{}",
        table.describe()
    );
}

#[test]
fn the_daemons_follow_loop_notifies_and_writes_metrics_as_a_run_does() {
    if !ready() {
        return;
    }
    let mut t = Trial::start();
    watch(&t.f);
    // No host can lead: web2's daemon only follows the fleet (its scheduled run, within a
    // minute, synchronises only, too).
    t.hold_lead("web9");
    t.f.start_daemon(1);
    let original = t.etcd.get("certs/www/current").unwrap();
    let failures = |t: &Trial| {
        metric(
            &t.f,
            1,
            "cert_agent_certificate_consecutive_failures",
            "www",
        )
    };
    // Followed once at start: the metrics are there.
    assert!(
        wait_until(Duration::from_secs(30), || failures(&t) == Some(0.0)),
        "{}",
        t.f.logs()
    );
    // A value that does not open: failed at once, not at the next scheduled run.
    t.etcd
        .put("certs/www/current", b"\x00 not a value".to_vec());
    assert!(
        wait_until(Duration::from_secs(20), || events(&t.f, 1, "www")
            == ["failed"]),
        "{:?}\n{}",
        events(&t.f, 1, "www"),
        t.f.logs()
    );
    assert!(
        wait_until(Duration::from_secs(10), || failures(&t)
            .is_some_and(|n| n >= 1.0)),
        "{:?}",
        failures(&t)
    );
    // The fleet's value back: recovered.
    t.etcd.put("certs/www/current", original);
    assert!(
        wait_until(Duration::from_secs(20), || events(&t.f, 1, "www")
            == ["failed", "recovered"]),
        "{:?}\n{}",
        events(&t.f, 1, "www"),
        t.f.logs()
    );
    // The metrics file follows (written before the notifications are delivered).
    assert!(
        wait_until(Duration::from_secs(10), || failures(&t) == Some(0.0)),
        "{:?}",
        failures(&t)
    );
    assert!(events(&t.f, 1, "shop").is_empty());
}
