//! `[agent] metrics_file`: the Prometheus text file written at the end of every run, checked
//! with the real `promtool` (Debian package `prometheus`) and read back for its values.

use crate::support;

use std::fs;
use std::process::Command;

use support::env::TestEnv;

/// `promtool`, or `None` (a failure when `CI` is set: the suite must not skip it there).
fn promtool() -> Option<&'static str> {
    let found = Command::new("promtool")
        .arg("--version")
        .output()
        .is_ok_and(|o| o.status.success());
    if found {
        return Some("promtool");
    }
    assert!(
        std::env::var_os("CI").is_none(),
        "promtool is missing (apt-get install prometheus)"
    );
    eprintln!("skipped: promtool is missing");
    None
}

/// Guards the textfile: after an issuing run and after a no-op run the file passes
/// `promtool check metrics`, holds the certificate's expiry (the served leaf's), the run's
/// outcome counts and its Partner API calls (one billed order); the no-op run shows no call.
#[test]
fn the_metrics_file_passes_promtool_and_tells_the_truth() {
    let Some(promtool) = promtool() else {
        return;
    };
    let mut env = TestEnv::new();
    let path = env.path("metrics/cert_agent.prom");
    fs::create_dir_all(path.parent().unwrap()).unwrap();
    env.agent_extra = format!("metrics_file = \"{}\"\n", path.display());
    let spec = env.standalone_spec("www", &["www.metrics.test"]);
    env.certs.push(spec);
    env.renew().expect_code(0);

    let check = |text: &str| {
        let mut child = Command::new(promtool)
            .args(["check", "metrics"])
            .stdin(std::process::Stdio::piped())
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped())
            .spawn()
            .unwrap();
        use std::io::Write;
        child
            .stdin
            .take()
            .unwrap()
            .write_all(text.as_bytes())
            .unwrap();
        let out = child.wait_with_output().unwrap();
        assert!(
            out.status.success(),
            "promtool: {}{}\n{text}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
    };
    let text = fs::read_to_string(&path).unwrap();
    check(&text);
    let value = |text: &str, prefix: &str| -> f64 {
        text.lines()
            .find(|l| l.starts_with(prefix))
            .and_then(|l| l.rsplit(' ').next())
            .and_then(|v| v.parse().ok())
            .unwrap_or_else(|| panic!("no {prefix} in\n{text}"))
    };
    let labels = "{name=\"www\",common_name=\"www.metrics.test\",server=\"none\"}";
    let record = env.record("www").unwrap();
    let not_after = time::OffsetDateTime::parse(
        record["installed"]["not_after"].as_str().unwrap(),
        &time::format_description::well_known::Rfc3339,
    )
    .unwrap();
    assert_eq!(
        value(
            &text,
            &format!("cert_agent_certificate_not_after_timestamp_seconds{labels}")
        ),
        not_after.unix_timestamp() as f64
    );
    assert_eq!(
        value(
            &text,
            "cert_agent_last_run_certificates{outcome=\"installed\"}"
        ),
        1.0
    );
    assert_eq!(value(&text, "cert_agent_last_run_orders_placed"), 1.0);
    // The run talked to the API: the balance is read once more for the metrics; nothing
    // billed falls due in 30 days.
    assert_eq!(
        value(&text, "cert_agent_balance_available{currency=\"USD\"}"),
        5000.0
    );
    assert_eq!(
        value(&text, "cert_agent_projected_spend_30d{currency=\"USD\"}"),
        0.0
    );
    assert!(
        text.contains("cert_agent_balance_read_timestamp_seconds "),
        "{text}"
    );
    assert_eq!(
        value(
            &text,
            "cert_agent_last_run_api_requests{method=\"POST\",endpoint=\"/api/v1/order\",status=\"200\"}"
        ),
        1.0
    );
    assert!(
        text.contains("endpoint=\"/api/v1/ssl_certificates/{id}"),
        "IDs are not labels\n{text}"
    );
    assert_eq!(
        value(
            &text,
            &format!("cert_agent_certificate_consecutive_failures{labels}")
        ),
        0.0
    );

    // Nothing due: the file is rewritten, no API call is counted. A second later than the
    // install, so that the no-op run's success differs from the install time.
    std::thread::sleep(std::time::Duration::from_millis(1100));
    env.renew().expect_code(0);
    let again = fs::read_to_string(&path).unwrap();
    check(&again);
    assert!(
        !again.contains("cert_agent_last_run_api_requests{"),
        "no call in a no-op run\n{again}"
    );
    assert_eq!(
        value(
            &again,
            "cert_agent_last_run_certificates{outcome=\"unchanged\"}"
        ),
        1.0
    );
    assert_eq!(value(&again, "cert_agent_last_run_orders_placed"), 0.0);
    // The no-op run looked at the certificate and found it in order.
    let start = value(&again, "cert_agent_last_run_start_timestamp_seconds");
    let attempt = format!("cert_agent_certificate_last_attempt_timestamp_seconds{labels}");
    let success = format!("cert_agent_certificate_last_success_timestamp_seconds{labels}");
    assert_eq!(value(&again, &attempt), start);
    assert_eq!(value(&again, &success), start);
    // The no-op run read the certificate's CRL: usable, and it does not list the certificate.
    assert_eq!(
        value(
            &again,
            &format!("cert_agent_certificate_crl_usable{labels}")
        ),
        1.0
    );
    assert_eq!(
        value(&again, &format!("cert_agent_certificate_revoked{labels}")),
        0.0
    );

    // A failing run: the attempt moves on, the success stays.
    let leaf = env.certs[0].files.leaf_file();
    fs::remove_file(&leaf).unwrap();
    env.sandbox.inject(
        partner_sandbox::Fault::new(partner_sandbox::FaultKind::Status { status: 503 })
            .method("GET")
            .path("/api/v1/ssl_certificates/*/download_bundle")
            .times(100),
    );
    env.renew_force().expect_failure();
    let failed = fs::read_to_string(&path).unwrap();
    check(&failed);
    let failed_start = value(&failed, "cert_agent_last_run_start_timestamp_seconds");
    assert!(value(&failed, &attempt) >= failed_start, "{failed}");
    assert_eq!(value(&failed, &success), start, "{failed}");
    assert_eq!(
        value(
            &failed,
            &format!("cert_agent_certificate_consecutive_failures{labels}")
        ),
        1.0
    );
    let mode = fs::metadata(&path).unwrap();
    use std::os::unix::fs::PermissionsExt;
    assert_eq!(mode.permissions().mode() & 0o777, 0o644);
}

/// A certificate never installed has no last success, whatever a run found: a run that leaves
/// its order waiting for validation is no success (the sample was there, the run's start).
/// The file passes `promtool check metrics`.
#[test]
fn a_certificate_never_installed_has_no_last_success() {
    let Some(promtool) = promtool() else {
        return;
    };
    let mut env = TestEnv::new();
    let path = env.path("cert_agent.prom");
    env.agent_extra = format!("metrics_file = \"{}\"\n", path.display());
    let spec = env.standalone_spec("www", &["www.never.test"]);
    env.certs.push(spec);
    // The CA cannot reach the validation file: the order waits.
    env.sandbox.set_dcv_ports(1, 0);
    env.agent(["--json", "renew", "--wait", "0"])
        .run()
        .expect_code(75);
    let text = fs::read_to_string(&path).unwrap();
    let out = Command::new(promtool)
        .args(["check", "metrics"])
        .stdin(fs::File::open(&path).unwrap())
        .output()
        .unwrap();
    assert!(out.status.success(), "{out:?}\n{text}");
    let www = "{name=\"www\",common_name=\"www.never.test\",server=\"none\"}";
    assert!(
        text.contains(&format!("cert_agent_certificate_pending{www} 1")),
        "{text}"
    );
    assert!(
        text.contains(&format!(
            "cert_agent_certificate_last_attempt_timestamp_seconds{www} "
        )),
        "{text}"
    );
    assert!(
        !text.contains("cert_agent_certificate_last_success_timestamp_seconds"),
        "{text}"
    );
}

/// The alert rules of `docs/monitoring.md`, written to `dir/cert-agent.yml`.
fn documented_rules(dir: &std::path::Path) -> std::path::PathBuf {
    let doc =
        fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/docs/monitoring.md")).unwrap();
    let start = doc.find("```yaml\ngroups:").expect("the rules block") + "```yaml\n".len();
    let end = start + doc[start..].find("```").unwrap();
    let rules = dir.join("cert-agent.yml");
    fs::write(&rules, &doc[start..end]).unwrap();
    rules
}

/// Guards the alert rules of `docs/monitoring.md`: `promtool check rules` accepts them.
#[test]
fn the_documented_alert_rules_pass_promtool() {
    let Some(promtool) = promtool() else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let rules = documented_rules(dir.path());
    let out = Command::new(promtool)
        .args(["check", "rules"])
        .arg(&rules)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
}

/// Guards what the documented alert rules make of the families (`promtool test rules`): a
/// retired certificate the configuration still lists (only `cert_agent_certificate_retired`)
/// is neither "not installed" nor "expiring", only a reminder after a day; a configured one
/// with nothing installed and nothing under way is "not installed"; a revoked one is critical;
/// a fresh validation a person must do within 21 days warns, one the agent does does not; a
/// balance short of the next 30 days' renewals warns; a fleet host whose proof met another
/// serial (drift) is critical at once, one whose proof passed is not.
#[test]
fn the_documented_alert_rules_fire_for_what_they_name() {
    let Some(promtool) = promtool() else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    documented_rules(dir.path());
    // Unix seconds at the evaluation times are the minutes since 0.
    let series = |metric: &str, name: &str, value: &str| {
        format!(
            "      - series: '{metric}{{instance=\"web1\",name=\"{name}\"}}'\n        values: '{value}x1600'\n"
        )
    };
    let ten_days = "864000";
    let mut input = String::new();
    for (name, not_after, pending, retired, revoked) in [
        ("www", Some("8640000"), "0", "0", "0"),
        ("mail", Some("8640000"), "0", "0", "0"),
        ("shop", Some("8640000"), "1", "0", "1"),
        ("new", None, "0", "0", "0"),
    ] {
        if let Some(t) = not_after {
            input += &series(
                "cert_agent_certificate_not_after_timestamp_seconds",
                name,
                t,
            );
            input += &series("cert_agent_certificate_revoked", name, revoked);
            input += &series("cert_agent_certificate_crl_usable", name, "1");
        }
        input += &series("cert_agent_certificate_pending", name, pending);
        input += &series("cert_agent_certificate_consecutive_failures", name, "0");
        input += &series("cert_agent_certificate_retired", name, retired);
    }
    input += &series("cert_agent_certificate_retired", "old", "1");
    // Fleet proofs: www's met the installed serial everywhere, shop's another one somewhere.
    input += &series("cert_agent_fleet_served_serial_mismatch", "www", "0");
    input += &series("cert_agent_fleet_served_serial_mismatch", "shop", "1");
    for (name, person) in [("www", "1"), ("mail", "0")] {
        input += &series(
            "cert_agent_certificate_fresh_validation_due_timestamp_seconds",
            name,
            ten_days,
        );
        input += &series(
            "cert_agent_certificate_fresh_validation_needs_person",
            name,
            person,
        );
    }
    input += "      - series: 'cert_agent_balance_available{instance=\"web1\",currency=\"USD\"}'\n        values: '8.79x1600'\n";
    input += "      - series: 'cert_agent_projected_spend_30d{instance=\"web1\",currency=\"USD\"}'\n        values: '8.80x1600'\n";
    let alert = |at: &str, name: &str, fired: &[(&str, &str, &str)]| {
        let mut t =
            format!("      - eval_time: {at}\n        alertname: {name}\n        exp_alerts:\n");
        for (labels, severity, summary) in fired {
            t += &format!(
                "          - exp_labels: {{severity: {severity}, instance: web1, {labels}}}\n            exp_annotations:\n              summary: \"{summary}\"\n"
            );
        }
        if fired.is_empty() {
            t = t.replace("exp_alerts:\n", "exp_alerts: []\n");
        }
        t
    };
    let checks = [
        alert(
            "90m",
            "CertificateNotInstalled",
            &[(
                "name: new",
                "warning",
                "new: configured, nothing installed and nothing under way (cert-agent status)",
            )],
        ),
        alert(
            "25h",
            "CertificateNotInstalled",
            &[(
                "name: new",
                "warning",
                "new: configured, nothing installed and nothing under way (cert-agent status)",
            )],
        ),
        alert("90m", "CertificateExpiresSoon", &[]),
        alert("90m", "CertificateRetiredButConfigured", &[]),
        alert(
            "25h",
            "CertificateRetiredButConfigured",
            &[(
                "name: old",
                "info",
                "old was retired: remove its [[certificate]] entry from the configuration",
            )],
        ),
        alert(
            "90m",
            "CertificateRevoked",
            &[(
                "name: shop",
                "critical",
                "shop: the CA revoked the installed certificate (cert-agent status)",
            )],
        ),
        alert("90m", "CertificateRevocationUnknown", &[]),
        alert(
            "5m",
            "CertificateDriftInFleet",
            &[(
                "name: shop",
                "critical",
                "shop on web1: an address serves another serial than the fleet's installed one (cert-agent fleet status)",
            )],
        ),
        alert("90m", "CertificateRenewalFailing", &[]),
        // Due at 10 days; at 90 minutes 9 days 22.5 hours are left.
        alert(
            "90m",
            "FreshValidationNeedsPerson",
            &[(
                "name: www",
                "warning",
                "www: the renewal due in 9d 22h 30m 0s needs a fresh validation by a person (cert-agent status)",
            )],
        ),
        alert(
            "90m",
            "BalanceShortOfRenewals",
            &[(
                "currency: USD",
                "warning",
                "the Partner API balance does not cover the renewal orders of the next 30 days (cert-agent forecast)",
            )],
        ),
    ];
    let test = format!(
        "rule_files:\n  - cert-agent.yml\nevaluation_interval: 1m\ntests:\n  - interval: 1m\n    input_series:\n{input}    alert_rule_test:\n{}",
        checks.concat()
    );
    let file = dir.path().join("cert-agent.test.yml");
    fs::write(&file, &test).unwrap();
    let out = Command::new(promtool)
        .args(["test", "rules"])
        .arg(&file)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}{}\n{test}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
}

/// Guards `metrics_listen`: `cert-agent run` serves `/metrics` (from the state at start), a
/// real Prometheus on loopback scrapes it, and the series it stores holds the installed
/// certificate's expiry.
#[test]
fn prometheus_scrapes_the_daemon() {
    let Some(promtool) = promtool() else {
        return;
    };
    let prometheus = std::path::Path::new(promtool)
        .with_file_name("prometheus")
        .to_string_lossy()
        .into_owned();
    let prometheus = if Command::new(&prometheus).arg("--version").output().is_ok() {
        prometheus
    } else {
        "prometheus".to_owned()
    };
    let mut env = TestEnv::new();
    let port = support::webserver::free_port();
    env.agent_extra = format!("metrics_listen = \"127.0.0.1:{port}\"\n");
    let spec = env.standalone_spec("www", &["www.scrape.test"]);
    env.certs.push(spec);
    env.renew().expect_code(0);
    let record = env.record("www").unwrap();
    let not_after = time::OffsetDateTime::parse(
        record["installed"]["not_after"].as_str().unwrap(),
        &time::format_description::well_known::Rfc3339,
    )
    .unwrap()
    .unix_timestamp();

    let mut daemon = env.agent(["run", "--interval", "3600"]).spawn();
    let address = format!("127.0.0.1:{port}");
    let served = poll(std::time::Duration::from_secs(20), || {
        support::webserver::http_get(&address, "127.0.0.1", "/metrics")
            .ok()
            .filter(|(status, _)| *status == 200)
    });
    let Some((_, body)) = served else {
        let _ = daemon.kill();
        panic!("no /metrics on {address}");
    };
    let body = String::from_utf8(body).unwrap();
    assert!(
        body.contains(&format!(
            "cert_agent_certificate_not_after_timestamp_seconds{{name=\"www\",common_name=\"www.scrape.test\",server=\"none\"}} {not_after}"
        )),
        "{body}"
    );

    let dir = tempfile::tempdir().unwrap();
    let web_port = support::webserver::free_port();
    fs::write(
        dir.path().join("prometheus.yml"),
        format!(
            "global:\n  scrape_interval: 1s\nscrape_configs:\n  - job_name: cert-agent\n    \
             static_configs:\n      - targets: ['{address}']\n"
        ),
    )
    .unwrap();
    let mut server = Command::new(&prometheus)
        .arg(format!(
            "--config.file={}",
            dir.path().join("prometheus.yml").display()
        ))
        .arg(format!(
            "--storage.tsdb.path={}",
            dir.path().join("data").display()
        ))
        .arg(format!("--web.listen-address=127.0.0.1:{web_port}"))
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .expect("prometheus");
    let query = "/api/v1/query?query=cert_agent_certificate_not_after_timestamp_seconds";
    let api = format!("127.0.0.1:{web_port}");
    let stored = poll(std::time::Duration::from_secs(60), || {
        let (status, body) = support::webserver::http_get(&api, "127.0.0.1", query).ok()?;
        let v: serde_json::Value = serde_json::from_slice(&body).ok()?;
        let result = v["data"]["result"].as_array()?.first()?.clone();
        (status == 200).then_some(result)
    });
    let _ = server.kill();
    let _ = server.wait();
    let _ = daemon.kill();
    let _ = daemon.wait();
    let result = stored.expect("Prometheus stored the series");
    assert_eq!(result["metric"]["name"], "www", "{result}");
    assert_eq!(result["metric"]["job"], "cert-agent", "{result}");
    assert_eq!(
        result["value"][1].as_str().unwrap().parse::<f64>().unwrap(),
        not_after as f64,
        "{result}"
    );
}

/// The first `Some` of `f`, tried every 200 ms until `timeout`.
fn poll<T>(timeout: std::time::Duration, mut f: impl FnMut() -> Option<T>) -> Option<T> {
    let deadline = std::time::Instant::now() + timeout;
    loop {
        if let Some(v) = f() {
            return Some(v);
        }
        if std::time::Instant::now() > deadline {
            return None;
        }
        std::thread::sleep(std::time::Duration::from_millis(200));
    }
}
