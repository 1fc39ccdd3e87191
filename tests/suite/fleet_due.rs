//! The due summary in a fleet leader's run: once a full run found a certificate with nothing
//! to do, the next leader runs report it from the summary (its record, installed files and
//! CRL not read again, nothing shared or called), and each change between two leader runs
//! is still seen — a certificate the fleet's leader reissued elsewhere, a record changed on
//! disk, the configuration edited, a damaged summary. Two hosts with nginx, `www` and `shop`
//! (the trial of `fleet_trust`); web2 is the leader whose runs are watched. After each of its
//! runs, the metrics it wrote (from the records the run holds, not read again) show each
//! certificate as its record on disk says.

use crate::fleet_e2e::{edit_config, ready};
use crate::fleet_trust::Trial;
use crate::renew_due::quiet_by_summary;
use crate::support;

use std::fs;
use std::time::Duration;

use support::env::{AgentOutput, norm_serial};

/// web2's metrics file (beside its state directory).
fn metrics_file(t: &Trial) -> std::path::PathBuf {
    t.f.hosts[1].state.parent().unwrap().join("metrics.prom")
}

/// web2 writes its metrics file and runs a notification command (which reads the records
/// too: a certificate that needs a person).
fn with_metrics(t: &Trial) {
    let extra = format!(
        "metrics_file = \"{}\"\nnotify_command = [\"/bin/true\"]\n",
        metrics_file(t).display()
    );
    edit_config(&t.f, 1, "\nstate_dir = ", &format!("\n{extra}state_dir = "));
}

/// The value of `family` for certificate `name` in the metrics `text`.
fn metric(text: &str, family: &str, name: &str) -> Option<f64> {
    let start = format!("{family}{{name=\"{name}\",");
    text.lines()
        .find(|l| l.starts_with(&start))
        .and_then(|l| l.rsplit(' ').next())
        .and_then(|v| v.parse().ok())
}

/// The metrics web2's last run wrote show each certificate's installed certificate as its
/// record on disk holds it.
fn metrics_match_records(t: &Trial, out: &AgentOutput) {
    let text = fs::read_to_string(metrics_file(t)).expect("web2's metrics file");
    for name in ["www", "shop"] {
        let record = t.f.hosts[1].state.join(format!("certs/{name}.json"));
        let rec: serde_json::Value = serde_json::from_slice(&fs::read(&record).unwrap()).unwrap();
        let at = |field: &str| {
            let text = rec["installed"][field].as_str().expect(field);
            time::OffsetDateTime::parse(text, &time::format_description::well_known::Rfc3339)
                .unwrap()
                .unix_timestamp() as f64
        };
        for (family, field) in [
            (
                "cert_agent_certificate_not_after_timestamp_seconds",
                "not_after",
            ),
            (
                "cert_agent_certificate_installed_timestamp_seconds",
                "installed_at",
            ),
        ] {
            assert_eq!(
                metric(&text, family, name),
                Some(at(field)),
                "{name}: {family} against its record\n{}",
                out.describe()
            );
        }
    }
}

/// web2's `renew -v --json`: led by web2 (no other host runs), each certificate unchanged
/// unless `acting` names it; its metrics as its records say.
fn led(t: &Trial, acting: &[&str]) -> AgentOutput {
    // A run with nothing due leads only for the CRL checks that fall to it: this one leads
    // whatever the fleet has for it (debug builds).
    let out =
        t.f.env
            .agent_at(
                &t.f.hosts[1].config,
                ["-v", "--json", "renew", "--wait", "60"],
            )
            .env("CERT_AGENT_TEST_LEAD_NO_OP", "1")
            .run();
    out.expect_code(0);
    assert!(
        out.text().contains("leading the fleet for this run"),
        "{}",
        out.describe()
    );
    metrics_match_records(t, &out);
    for name in ["www", "shop"].iter().filter(|n| !acting.contains(n)) {
        assert_eq!(
            out.outcome(name)["outcome"],
            "unchanged",
            "{name}: {}",
            out.describe()
        );
    }
    out
}

/// Leader runs (a second apart: the summary keeps no record changed within the last second)
/// until web2's summary keeps both certificates, then one that reports both from it without
/// calling the Partner API or writing to the fleet.
fn quiet(t: &mut Trial) {
    let due = t.f.hosts[1].state.join("due.json");
    let kept = || {
        fs::read_to_string(&due).is_ok_and(|s| {
            s.contains("fleet-leader")
                && s.contains("\"name\":\"www\"")
                && s.contains("\"name\":\"shop\"")
        })
    };
    for _ in 0..5 {
        // The summary keeps no record written within the last second: a clock second passes.
        std::thread::sleep(Duration::from_millis(1100));
        led(t, &[]);
        if kept() {
            break;
        }
    }
    assert!(kept(), "web2's summary keeps both certificates");
    let calls = t.f.env.calls().len();
    let revisions = t.etcd.revisions();
    let out = led(t, &[]);
    assert_eq!(quiet_by_summary(&out), 2, "{}", out.describe());
    assert_eq!(
        t.f.env.calls().len(),
        calls,
        "a quiet leader run calls nothing"
    );
    let shared = |r: &std::collections::BTreeMap<String, i64>| {
        r.iter()
            .filter(|(k, _)| k.contains("/certs/"))
            .map(|(k, v)| (k.clone(), *v))
            .collect::<Vec<_>>()
    };
    assert_eq!(
        shared(&t.etcd.revisions()),
        shared(&revisions),
        "a quiet leader run writes nothing under certs/"
    );
}

fn serial(t: &Trial, i: usize, name: &str) -> String {
    norm_serial(
        t.installed(i, name).expect("installed")["serial"]
            .as_str()
            .expect("serial"),
    )
}

/// Guards the fleet's use of the summary: every change between two leader runs is acted on.
#[test]
fn a_leaders_quiet_runs_use_the_due_summary_and_still_see_each_change() {
    if !ready() {
        return;
    }
    let mut t = Trial::start();
    with_metrics(&t);
    quiet(&mut t);

    // Another host leads and reissues `shop`: web2's next run installs it (the sync and the
    // import write its record, so its entry no longer stands); `www` stays quiet.
    let re = t.f.agent(0, &["--json", "reissue", "shop", "--wait", "60"]);
    re.expect_code(0);
    let shop = re.installed_serial("shop");
    let out = led(&t, &["shop"]);
    assert!(quiet_by_summary(&out) <= 1, "{}", out.describe());
    assert_eq!(serial(&t, 1, "shop"), shop, "{}", out.describe());
    quiet(&mut t);

    // web2's record of `www` changed on disk between two leader runs (its certificate now
    // ends in 10 days): the next run reads it, reissues `www` for the fleet (validated
    // through web2) and publishes it; web1 installs it.
    t.f.env
        .sandbox
        .set_dcv_ports(t.f.hosts[1].web.http_port(), 0);
    let before = serial(&t, 1, "www");
    let record = t.f.hosts[1].state.join("certs/www.json");
    let mut v: serde_json::Value = serde_json::from_slice(&fs::read(&record).unwrap()).unwrap();
    let soon = time::OffsetDateTime::now_utc() + time::Duration::days(10);
    v["installed"]["not_after"] = soon
        .format(&time::format_description::well_known::Rfc3339)
        .unwrap()
        .into();
    fs::write(&record, serde_json::to_vec_pretty(&v).unwrap()).unwrap();
    let out = led(&t, &["www"]);
    assert_eq!(quiet_by_summary(&out), 1, "{}", out.describe());
    let www = out.installed_serial("www");
    assert_ne!(www, before, "reissued");
    // The fleet's record says the reissue is done (the export shared the record as the
    // engine left it, not as the import read it): web1, leading next, installs what web2
    // published and has nothing else to do.
    let calls = t.f.env.calls().len();
    let out = t.f.agent(0, &["--json", "renew", "--wait", "20"]);
    out.expect_code(0);
    assert_eq!(serial(&t, 0, "www"), www, "{}", out.describe());
    assert_eq!(
        out.outcome("www")["outcome"],
        "installed",
        "{}",
        out.describe()
    );
    assert_eq!(
        out.outcome("shop")["outcome"],
        "unchanged",
        "{}",
        out.describe()
    );
    assert_eq!(t.f.env.calls().len(), calls, "{}", out.describe());
    quiet(&mut t);

    // The configuration edited: the full path for both, then quiet again.
    edit_config(&t.f, 1, "[fleet]", "# edited\n[fleet]");
    let out = led(&t, &[]);
    assert_eq!(quiet_by_summary(&out), 0, "{}", out.describe());
    quiet(&mut t);

    // A damaged summary: ignored, the full path taken, nothing called, then kept again.
    let due = t.f.hosts[1].state.join("due.json");
    let calls = t.f.env.calls().len();
    for garbage in [&b"{\"format\":2,"[..], b"\0\xff", b"[]"] {
        fs::write(&due, garbage).unwrap();
        let out = led(&t, &[]);
        assert_eq!(quiet_by_summary(&out), 0, "{}", out.describe());
    }
    assert_eq!(t.f.env.calls().len(), calls, "nothing called");
    quiet(&mut t);
}
