//! The due summary (`state_dir/due.json`) through the binary against the sandbox: a run with
//! nothing due reports the certificate from the summary without reading its record and calls
//! nothing; then each thing that must be noticed — an installed file removed, the
//! configuration changed, the record changed by another command, the clock passing the
//! renewal time, a CRL revoking the certificate once the kept one reaches its `nextUpdate`
//! (a new CRL read while the entry stands does not, unless it lists the serial),
//! a damaged summary — makes the next run take the full path and act.

use crate::support;

use std::fs;
use std::time::Duration;

use partner_sandbox::state::RevokeTarget;
use support::env::{AgentOutput, TestEnv};
use support::scenario::certificate_id;

const OFFSET: &str = "CERT_AGENT_TEST_CLOCK_OFFSET_SECS";

/// How many certificates the run reported from the summary (its debug line).
pub(crate) fn quiet_by_summary(out: &AgentOutput) -> usize {
    let line = out
        .stderr
        .lines()
        .find(|l| l.contains("due summary: "))
        .unwrap_or_else(|| panic!("no due summary line\n{}", out.describe()));
    let rest = &line[line.find("due summary: ").unwrap_or(0) + 13..];
    rest.split_whitespace()
        .next()
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("{line}"))
}

/// `renew -v --json` with the clock `offset` seconds ahead.
fn renew_at(env: &TestEnv, offset: i64) -> AgentOutput {
    env.agent(["-v", "--json", "renew", "--wait", "30"])
        .env(OFFSET, offset.to_string())
        .run()
}

/// Lets the record settle (the summary keeps no record changed within the last second; a run
/// that found a new CRL or serial writes the record) until a full run keeps the certificate in
/// the summary, then one run that uses it: unchanged, no API call, the record not read.
fn quiet(env: &TestEnv, offset: i64) {
    let due = env.state_dir().join("due.json");
    let kept = || fs::read_to_string(&due).is_ok_and(|t| t.contains("\"name\":\"www\""));
    for _ in 0..4 {
        std::thread::sleep(Duration::from_millis(1100));
        let full = renew_at(env, offset);
        full.expect_code(0);
        assert_eq!(
            full.outcome("www")["outcome"],
            "unchanged",
            "{}",
            full.describe()
        );
        if kept() {
            break;
        }
    }
    assert!(kept(), "the summary keeps www");
    let calls = env.calls().len();
    let fast = renew_at(env, offset);
    fast.expect_code(0);
    assert_eq!(
        fast.outcome("www")["outcome"],
        "unchanged",
        "{}",
        fast.describe()
    );
    assert_eq!(quiet_by_summary(&fast), 1, "{}", fast.describe());
    assert!(not_parsed(&fast), "{}", fast.describe());
    assert_eq!(env.calls().len(), calls, "a quiet run calls nothing");
}

/// Whether the run reported from the summary without parsing the configuration.
fn not_parsed(out: &AgentOutput) -> bool {
    out.stderr.contains("the configuration not parsed")
}

/// One standalone, files-only certificate `www` in a two-year subscription, issued.
fn issued(domain: &str) -> TestEnv {
    let mut env = TestEnv::new();
    let mut spec = env.standalone_spec("www", &[domain]);
    spec.extra = "days = 730\nfamily = \"S\"\n".into();
    env.certs.push(spec);
    env.renew().expect_code(0);
    env
}

/// The instant the summary keeps for `www` (Unix seconds).
fn kept_until(env: &TestEnv) -> i64 {
    let text = fs::read_to_string(env.state_dir().join("due.json")).unwrap();
    let v: serde_json::Value = serde_json::from_str(&text).unwrap();
    v["certificates"][0]["until"].as_i64().expect("until")
}

/// Guards every invalidation of the summary through the binary: each change after a quiet run
/// makes the next run act.
#[test]
fn each_change_after_a_quiet_run_is_acted_on() {
    let mut env = issued("www.due-summary.test");
    let serial = |env: &TestEnv| env.record("www").unwrap()["installed"]["serial"].to_string();
    quiet(&env, 0);

    // The clock passes the kept CRL's nextUpdate (a day ahead; the CA's clock with it): the
    // entry still stands (its instant is the renewal check), and the run reads the new CRL
    // once and checks the kept serial against it.
    let fetched = || env.sandbox.crl_fetches().values().sum::<u64>();
    let before_fetch = fetched();
    let off = partner_sandbox::crl::CRL_VALIDITY.whole_seconds() + 60;
    assert!(kept_until(&env) > time::OffsetDateTime::now_utc().unix_timestamp() + off);
    env.sandbox
        .advance(Duration::from_secs(u64::try_from(off).unwrap()));
    let out = renew_at(&env, off);
    out.expect_code(0);
    assert_eq!(quiet_by_summary(&out), 1, "{}", out.describe());
    assert_eq!(out.outcome("www")["outcome"], "unchanged");
    assert_eq!(fetched(), before_fetch + 1, "{}", out.describe());
    quiet(&env, off);
    // ... and past the renewal time (150 days on, this host's clock only): the certificate
    // is reissued.
    let before = serial(&env);
    let out = renew_at(&env, off + 150 * 86_400);
    out.expect_code(0);
    assert_eq!(quiet_by_summary(&out), 0, "{}", out.describe());
    out.installed_serial("www");
    assert_ne!(serial(&env), before, "reissued");
    quiet(&env, off);

    // The installed leaf removed: installed again.
    let leaf = env.record("www").unwrap()["installed"]["leaf_file"]
        .as_str()
        .expect("leaf file")
        .to_owned();
    fs::remove_file(leaf).unwrap();
    let out = renew_at(&env, off);
    out.expect_code(0);
    assert_eq!(quiet_by_summary(&out), 0, "{}", out.describe());
    out.installed_serial("www");
    quiet(&env, off);

    // The configuration changed: the full path is taken, and the new `renew_before_days`
    // brings the renewal check forward (the report says when).
    let reason = |out: &AgentOutput| out.outcome("www")["reason"].to_string();
    let was = reason(&renew_at(&env, off));
    env.agent_extra = "renew_before_days = 180\n".into();
    let out = renew_at(&env, off);
    out.expect_code(0);
    assert_eq!(quiet_by_summary(&out), 0, "{}", out.describe());
    assert_eq!(out.outcome("www")["outcome"], "unchanged");
    assert_ne!(reason(&out), was, "the new renewal time is reported");
    quiet(&env, off);
    env.agent_extra.clear();
    let out = renew_at(&env, off);
    assert_eq!(quiet_by_summary(&out), 0, "{}", out.describe());
    assert_eq!(reason(&out), was, "{}", out.describe());
    quiet(&env, off);

    // The record changed by another command: its certificate now ends in 10 days.
    let before = serial(&env);
    env.edit_record("www", |r| {
        let soon = time::OffsetDateTime::now_utc()
            + time::Duration::seconds(off)
            + time::Duration::days(10);
        r["installed"]["not_after"] = soon
            .format(&time::format_description::well_known::Rfc3339)
            .unwrap()
            .into();
    });
    let out = renew_at(&env, off);
    out.expect_code(0);
    assert_eq!(quiet_by_summary(&out), 0, "{}", out.describe());
    out.installed_serial("www");
    assert_ne!(serial(&env), before, "reissued");
    quiet(&env, off);

    // An option that needs the configuration (`--force` aside, which acts): a dry run and a
    // named certificate take the full path; the plain run after them still needs no parse.
    for args in [&["--dry-run"][..], &["--name", "www"][..]] {
        let out = env
            .agent(
                ["-v", "--json", "renew", "--wait", "30"]
                    .into_iter()
                    .chain(args.iter().copied()),
            )
            .env(OFFSET, off.to_string())
            .run();
        out.expect_code(0);
        assert!(!not_parsed(&out), "{args:?}: {}", out.describe());
    }
    let out = renew_at(&env, off);
    assert!(not_parsed(&out), "{}", out.describe());
    // The main file edited, if only by a comment: parsed again. A second first, so that its
    // modification time differs (the clock passing is the condition, not an event).
    std::thread::sleep(Duration::from_millis(1100));
    env.agent_extra = "# a comment\n".into();
    let out = renew_at(&env, off);
    assert!(!not_parsed(&out), "{}", out.describe());
    quiet(&env, off);

    // A damaged summary: ignored, the full path taken, nothing called, the summary rewritten.
    let calls = env.calls().len();
    for garbage in [&b"{\"format\":1,"[..], b"\0\xff", b"[]"] {
        fs::write(env.state_dir().join("due.json"), garbage).unwrap();
        let out = renew_at(&env, off);
        out.expect_code(0);
        assert_eq!(quiet_by_summary(&out), 0, "{}", out.describe());
        assert_eq!(out.outcome("www")["outcome"], "unchanged");
        let again = renew_at(&env, off);
        assert_eq!(quiet_by_summary(&again), 1, "{}", again.describe());
    }
    assert_eq!(env.calls().len(), calls, "nothing called");
}

/// Guards the CRL's part: a revocation published while a kept CRL is valid is seen by the
/// first run after that CRL's `nextUpdate` (the entry stands, its serial is found on the new
/// CRL: the full path), and the certificate is reissued.
#[test]
fn a_revocation_is_acted_on_once_the_kept_crl_reaches_its_next_update() {
    let env = issued("www.due-crl.test");
    quiet(&env, 0);
    assert!(
        env.state_dir().join("crl").is_dir(),
        "a CRL was read and kept"
    );
    let before = env.record("www").unwrap()["installed"]["serial"].to_string();
    env.sandbox
        .revoke(
            RevokeTarget::CertificateId(certificate_id(&env, "www")),
            "keyCompromise",
            true,
        )
        .unwrap();
    // The kept CRL is valid for a day: as without a summary, the run keeps to it.
    let out = renew_at(&env, 0);
    out.expect_code(0);
    assert_eq!(
        out.outcome("www")["outcome"],
        "unchanged",
        "{}",
        out.describe()
    );
    // A day and an hour later (the CA's clock too): the kept CRL is stale, the new one lists
    // the serial, and the certificate takes the full path.
    let offset = 25 * 3600;
    env.sandbox.advance(Duration::from_secs(offset as u64));
    let out = renew_at(&env, offset);
    out.expect_code(0);
    assert_eq!(quiet_by_summary(&out), 0, "{}", out.describe());
    out.installed_serial("www");
    assert_ne!(
        env.record("www").unwrap()["installed"]["serial"].to_string(),
        before,
        "reissued after the revocation"
    );
}
