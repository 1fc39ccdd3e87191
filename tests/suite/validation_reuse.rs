//! Validation foresight across the dates of CA/Browser Forum ballot SC-081v3, with the
//! sandbox's virtual clock and the agent's clock following it: each issued certificate
//! records the validation of its names (method and time); `status` and `check` name the next
//! renewal that needs a fresh validation — after 2027-03-15 a validation counts for 100 days,
//! after 2029-03-15 for 10 — and `check` warns three weeks ahead only when that validation
//! needs a person (EMAIL), not when the agent does it (HTTP).

use crate::support;

use partner_sandbox::SandboxConfig;
use partner_sandbox::state::StateConfig;
use support::env::TestEnv;
use support::scenario::run_synced;
use time::format_description::well_known::Rfc3339;
use time::macros::datetime;
use time::{Duration, OffsetDateTime};

/// `web` validated over HTTP (standalone server), `mail` by EMAIL (approved at the sandbox),
/// both issued and installed at the sandbox's start time.
fn issued_env(start: OffsetDateTime, max_cert_days: i64) -> TestEnv {
    let state = StateConfig {
        max_cert_days,
        ..StateConfig::default()
    };
    let mut env = TestEnv::with_sandbox(
        SandboxConfig::default()
            .instant(true)
            .state(state)
            .start_time(start),
    );
    let web = env.standalone_spec("web", &["web.reuse.test"]);
    env.certs.push(web);
    let mut mail = env.cert_spec("mail", &["mail.reuse.test"], "none");
    mail.dcv = Some("email".into());
    mail.extra = "dcv_email = \"admin@mail.reuse.test\"\n".into();
    env.certs.push(mail);
    // The renewals after 2028-03-15 that these tests follow are placed by email all the same
    // (a CA outside the Forum's rules): they show the foresight, not the stop.
    env.preflight.push_str("email = false\n");
    run_synced(&env, &["renew", "--wait", "2"]).expect_code(75);
    let id = env.record("mail").unwrap()["order"]["certificate_id"]
        .as_u64()
        .unwrap();
    env.sandbox.approve_email(id, None).unwrap();
    run_synced(&env, &["renew"]).expect_code(0);
    env
}

fn when(v: &serde_json::Value) -> OffsetDateTime {
    OffsetDateTime::parse(v.as_str().unwrap(), &Rfc3339).unwrap()
}

fn row<'a>(rows: &'a serde_json::Value, name: &str) -> &'a serde_json::Value {
    rows.as_array()
        .unwrap()
        .iter()
        .find(|r| r["name"] == name)
        .unwrap()
}

/// Guards the 2027 step: validated on 2027-01-20, the first renewal (about 2027-06) falls
/// after 2027-03-15, when a validation counts for 100 days instead of 200: both need a fresh
/// one; `check` stays OK months ahead and warns about EMAIL (not HTTP) three weeks ahead.
#[test]
fn after_march_2027_a_validation_counts_for_100_days() {
    let start = datetime!(2027-01-20 00:00 UTC);
    let env = issued_env(start, 199);
    for name in ["web", "mail"] {
        let rec = env.record(name).unwrap();
        let mark = &rec["validations"][format!("{name}.reuse.test")];
        assert_eq!(
            mark["method"],
            if name == "web" { "HTTP" } else { "EMAIL" },
            "{rec:#}"
        );
        assert!(
            (when(&mark["at"]) - start).abs() < Duration::days(1),
            "{mark}"
        );
    }

    let status = run_synced(&env, &["--json", "status"]);
    status.expect_code(0);
    let rows = status.json();
    let mail = &row(&rows, "mail")["validation"];
    assert_eq!(mail["method"], "EMAIL", "{rows:#}");
    assert_eq!(mail["automatic"], false);
    assert_eq!(mail["reuse_days"], 100);
    assert_eq!(mail["domains"], serde_json::json!(["mail.reuse.test"]));
    let due = when(&mail["due"]);
    // A 199-day certificate renews with a third of its lifetime left (less a spread).
    assert!(
        due > datetime!(2027-05-20 00:00 UTC) && due < datetime!(2027-06-10 00:00 UTC),
        "{due}"
    );
    let web = &row(&rows, "web")["validation"];
    assert_eq!(
        (web["method"].as_str(), web["automatic"].as_bool()),
        (Some("HTTP"), Some(true))
    );
    let table = run_synced(&env, &["status"]);
    assert!(
        table.stdout.contains("mail: the renewal due ")
            && table.stdout.contains("needs a person to validate mail.reuse.test afresh by EMAIL (the earlier validation no longer counts); the new one counts for 100 days"),
        "{}",
        table.describe()
    );

    // Months ahead: nothing to say of the renewal yet; the end of email validation
    // (2028-03-15) is a WARNING for `mail` already.
    let calm = run_synced(&env, &["check"]);
    calm.expect_code(1);
    assert!(
        calm.stdout.contains("WARNING mail: validates by email")
            && !calm.stdout.contains("the renewal due"),
        "{}",
        calm.describe()
    );

    // Three weeks before the renewal: WARNING for the EMAIL one only.
    let ahead = (due - Duration::days(20)) - env.sandbox.now();
    env.sandbox.advance(ahead.unsigned_abs());
    let warn = run_synced(&env, &["check"]);
    warn.expect_code(1);
    assert!(
        warn.stdout.contains("WARNING mail: the renewal due")
            && warn.stdout.contains("needs a person"),
        "{}",
        warn.describe()
    );
    assert!(!warn.stdout.contains("WARNING web:"), "{}", warn.describe());
}

/// Guards the 2029 step: from 2029-03-15 a validation counts for 10 days, so every renewal of
/// a 47-day certificate needs a fresh one: `check` is CRITICAL at once for the EMAIL
/// certificate (email validation ended on 2028-03-15, no reuse either);
/// the renewal itself validates again (HTTP, by the agent) and records the new time.
#[test]
fn from_march_2029_every_renewal_validates_again() {
    let start = datetime!(2029-03-20 00:00 UTC);
    let env = issued_env(start, 47);
    let status = run_synced(&env, &["--json", "status"]);
    let rows = status.json();
    for name in ["web", "mail"] {
        let v = &row(&rows, name)["validation"];
        // Email validation ended on 2028-03-15, reuse of an earlier one included.
        let reuse = if name == "mail" { 0 } else { 10 };
        assert_eq!(v["reuse_days"], reuse, "{rows:#}");
        // Due with 30 days left (renew_before_days), less a spread of up to 47/12 days:
        // 13 to 17 days after issue.
        let due = when(&v["due"]);
        assert!(
            due > start + Duration::days(12) && due < start + Duration::days(18),
            "{name}: {due}"
        );
    }
    let check = run_synced(&env, &["check"]);
    check.expect_code(2);
    assert!(
        check.stdout.contains("CRITICAL mail: the renewal due")
            && check.stdout.contains("email validation ends on 2028-03-15"),
        "{}",
        check.describe()
    );
    assert!(
        !check.stdout.contains("WARNING web:"),
        "{}",
        check.describe()
    );

    // The renewal falls due: the HTTP certificate is reissued and validated again.
    let web_due = when(&row(&rows, "web")["validation"]["due"]);
    env.sandbox
        .advance((web_due + Duration::hours(1) - env.sandbox.now()).unsigned_abs());
    let before = when(&env.record("web").unwrap()["validations"]["web.reuse.test"]["at"]);
    // The EMAIL certificate, due too, waits for its approval (75).
    let renew = run_synced(&env, &["renew", "--wait", "2"]);
    assert!(matches!(renew.code, Some(0 | 75)), "{}", renew.describe());
    let after = when(&env.record("web").unwrap()["validations"]["web.reuse.test"]["at"]);
    assert!(after > before + Duration::days(12), "{before} -> {after}");
    assert_eq!(
        env.record("web").unwrap()["validations"]["web.reuse.test"]["method"],
        "HTTP"
    );
}

/// Guards the other surfaces of the foresight: with 10-day reuse the EMAIL certificate's next
/// renewal needs a person within `warning_days` — one `fresh_validation_needed` event over two
/// runs (due date, names, method), none for the HTTP one; the metrics carry each renewal's due
/// time and whether a person is needed.
#[test]
fn a_renewal_needing_a_person_is_announced_once_and_in_the_metrics() {
    let mut env = issued_env(datetime!(2029-03-20 00:00 UTC), 47);
    env.watch_surfaces();
    for _ in 0..2 {
        run_synced(&env, &["renew"]).expect_code(0);
    }
    let rows = run_synced(&env, &["--json", "status"]).json();
    let all = env.notified();
    let (events, sunset): (Vec<_>, Vec<_>) = all
        .into_iter()
        .partition(|e| e["event"] != "email_validation_ends");
    assert_eq!(events.len(), 1, "{events:#?}");
    // The end of email validation (2028-03-15, passed) is said once too.
    assert_eq!(sunset.len(), 1, "{sunset:#?}");
    let e = &events[0];
    assert_eq!(e["event"], "fresh_validation_needed", "{e:#}");
    assert_eq!(e["certificate"], "mail");
    assert_eq!(e["method"], "EMAIL");
    assert_eq!(e["domains"], serde_json::json!(["mail.reuse.test"]));
    let mail_due = when(&row(&rows, "mail")["validation"]["due"]);
    assert_eq!(when(&e["due"]), mail_due);

    let due = "cert_agent_certificate_fresh_validation_due_timestamp_seconds";
    let person = "cert_agent_certificate_fresh_validation_needs_person";
    assert_eq!(
        env.metric(due, "mail"),
        Some(mail_due.unix_timestamp() as f64)
    );
    assert_eq!(env.metric(person, "mail"), Some(1.0));
    let web_due = when(&row(&rows, "web")["validation"]["due"]);
    assert_eq!(
        env.metric(due, "web"),
        Some(web_due.unix_timestamp() as f64)
    );
    assert_eq!(env.metric(person, "web"), Some(0.0));
}

/// Guards the end of email validation (SC-090, 2028-03-15) 86 days ahead, inside the last 90
/// days: `check` is CRITICAL for the EMAIL certificate only, naming the date and the command
/// that moves it; `status` and the metrics carry it; the foresight knows the renewal after
/// the date cannot reuse the email validation.
#[test]
fn within_90_days_of_the_end_of_email_validation_check_is_critical() {
    let mut env = issued_env(datetime!(2027-12-20 00:00 UTC), 199);
    env.watch_surfaces();
    for _ in 0..2 {
        run_synced(&env, &["renew"]).expect_code(0);
    }
    // One notification over two runs, for the EMAIL certificate only.
    let events: Vec<_> = env
        .notified()
        .into_iter()
        .filter(|e| e["event"] == "email_validation_ends")
        .collect();
    assert_eq!(events.len(), 1, "{events:#?}");
    assert_eq!(events[0]["certificate"], "mail");
    assert!(
        events[0]["message"]
            .as_str()
            .is_some_and(|m| m.contains("ends on 2028-03-15")),
        "{events:#?}"
    );
    let check = run_synced(&env, &["check"]);
    check.expect_code(2);
    assert!(
        check.stdout.contains("CRITICAL mail: ")
            && check.stdout.contains(
                "validates by email (dcv = \"email\"), which ends on 2028-03-15 (86 days left"
            )
            && check
                .stdout
                .contains("cert-agent dcv migrate mail --to http` (or `--to dns`)"),
        "{}",
        check.describe()
    );
    assert!(!check.stdout.contains(" web:"), "{}", check.describe());

    let rows = run_synced(&env, &["--json", "status"]).json();
    let mail = row(&rows, "mail");
    assert_eq!(mail["email_sunset"]["stage"], "critical", "{rows:#}");
    assert_eq!(mail["email_sunset"]["days_left"], 86);
    assert!(row(&rows, "web")["email_sunset"].is_null());
    // The renewal (about 2028-05) falls after the date: no reuse of the email validation.
    assert_eq!(mail["validation"]["reuse_days"], 0, "{rows:#}");
    assert!(when(&mail["validation"]["due"]) > datetime!(2028-03-15 00:00 UTC));
    let table = run_synced(&env, &["status"]);
    assert!(
        table.stdout.contains("mail: validates by email")
            && table
                .stdout
                .contains("email validation ends on 2028-03-15 (no reuse either)"),
        "{}",
        table.describe()
    );
    // The forecast's renewal of `mail` after the date says it cannot go by email.
    let forecast = run_synced(&env, &["--json", "forecast", "--days", "200"]);
    forecast.expect_code(0);
    let items = forecast.json()["items"].clone();
    let mail_item = items
        .as_array()
        .unwrap()
        .iter()
        .find(|i| i["name"] == "mail")
        .unwrap_or_else(|| panic!("{}", forecast.describe()))
        .clone();
    assert!(
        mail_item["reason"]
            .as_str()
            .is_some_and(|r| r.contains("email validation ends on 2028-03-15")),
        "{mail_item:#}"
    );
    let metric = "cert_agent_certificate_email_validation_ends_days";
    assert_eq!(env.metric(metric, "mail"), Some(86.0));
    assert_eq!(env.metric(metric, "web"), None);
}

/// Guards the date itself: past 2028-03-15 an email-validated certificate is CRITICAL with
/// "ended", and its metric is negative.
#[test]
fn past_the_end_of_email_validation_check_says_it_ended() {
    // Issued before the date (no order is placed by email after it), then the clocks moved
    // past it.
    let env = issued_env(datetime!(2028-03-10 00:00 UTC), 90);
    env.sandbox
        .advance(std::time::Duration::from_secs(10 * 86_400));
    let check = run_synced(&env, &["check"]);
    check.expect_code(2);
    assert!(
        check.stdout.contains("CRITICAL mail: ")
            && check.stdout.contains("which ended on 2028-03-15")
            && check.stdout.contains("nor reuse an email validation"),
        "{}",
        check.describe()
    );
    let rows = run_synced(&env, &["--json", "status"]).json();
    assert_eq!(row(&rows, "mail")["email_sunset"]["stage"], "ended");
    assert_eq!(row(&rows, "mail")["email_sunset"]["days_left"], -5);
}

/// `dcv migrate` of an issued email certificate: no order in progress, so no change DCV call
/// (the next order or reissue follows the configuration); the configuration lines are printed.
#[test]
fn dcv_migrate_of_an_issued_certificate_changes_nothing_at_the_ca() {
    let env = issued_env(datetime!(2027-12-20 00:00 UTC), 199);
    let out = run_synced(&env, &["dcv", "migrate", "mail", "--to", "dns"]);
    out.expect_code(0);
    for n in [
        "no order in progress, nothing to change at the CA",
        "dcv = \"cname\"",
        "dns_hook = ",
        "remove dcv_email",
    ] {
        assert!(out.stdout.contains(n), "{n:?}\n{}", out.describe());
    }
    assert!(
        !env.calls().iter().any(|c| c.path.ends_with("/change_dcv")),
        "no change DCV call"
    );
}

/// After 2028-03-15 no order or reissue is placed for a certificate validated by email: the CA
/// could not validate it, so it would be billed and never issued. The run stops before the
/// request, naming the date and what to change, and nothing is billed.
#[test]
fn no_order_is_placed_by_email_after_the_end_of_email_validation() {
    let mut env = TestEnv::with_sandbox(
        SandboxConfig::default()
            .instant(true)
            .start_time(datetime!(2028-03-20 00:00 UTC)),
    );
    let mut mail = env.cert_spec("mail", &["mail.sunset.test"], "none");
    mail.dcv = Some("email".into());
    mail.extra = "dcv_email = \"admin@mail.sunset.test\"\n".into();
    env.certs.push(mail);
    let out = run_synced(&env, &["renew", "--wait", "2"]);
    assert_ne!(out.code, Some(0), "{}", out.describe());
    let text = out.text();
    for n in [
        "validation by email ended on 2028-03-15",
        "SC-090",
        "dcv = \"http\"",
    ] {
        assert!(text.contains(n), "{n:?}\n{}", out.describe());
    }
    assert_eq!(env.billed(), 0, "nothing ordered");
    assert!(
        !env.calls().iter().any(|c| c.path.contains("/order")),
        "no order request"
    );
    assert!(env.journal().contains("preflight-failed"));
}
