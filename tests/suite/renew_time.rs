//! Time between the CA and this host, end to end with a real nginx: a certificate that begins
//! after this host's clock is held and installed once valid (no failure, no backoff); one that
//! begins more than a day ahead is refused, naming this host's time as it is; the sandbox's
//! fast clock (`--time-scale`) issues what the agent installs at once; and a certificate in its
//! failure backoff makes `renew` exit non-zero, saying when it is tried again and how to try
//! now.

use crate::support;

use std::fs;
use std::os::unix::fs::PermissionsExt;
use std::path::PathBuf;
use std::time::Duration;

use partner_sandbox::SandboxConfig;
use support::env::{Publish, TestEnv, Web};
use support::webserver::{Server, require};

const OFFSET: &str = "CERT_AGENT_TEST_CLOCK_OFFSET_SECS";

/// nginx serving a placeholder for `domain` from `DIR/www-root`, the certificate configured
/// for it (webroot mode), the sandbox fetching validation files from it.
fn nginx_world(sandbox: SandboxConfig, domain: &str) -> Option<(TestEnv, Web)> {
    if !require(Server::Nginx) {
        return None;
    }
    let mut env = TestEnv::with_sandbox(sandbox);
    let webroot = env.path("www-root");
    let mut spec = env.cert_spec("www", &[domain], "nginx");
    spec.publish = Publish::Webroot(webroot.clone());
    env.write_placeholder(&spec);
    let web = Web::start(Server::Nginx, env.dir.path(), &[env.site(&spec, &webroot)]);
    env.sandbox.set_dcv_ports(web.http_port(), 0);
    env.certs.push(web.configure(spec));
    Some((env, web))
}

fn held_archive(env: &TestEnv) -> PathBuf {
    env.state_dir().join("held/www.zip")
}

/// An RFC 3339 time printed as `(now T)` in `text`.
fn printed_now(text: &str) -> time::OffsetDateTime {
    let at = text
        .find("(now ")
        .unwrap_or_else(|| panic!("no `(now …)` in {text}"));
    let rest = &text[at + 5..];
    let end = rest.find(')').expect("closing parenthesis");
    time::OffsetDateTime::parse(&rest[..end], &time::format_description::well_known::Rfc3339)
        .unwrap_or_else(|e| panic!("{}: {e}", &rest[..end]))
}

/// Installs the first certificate (clock in order), then reissues it with this host's clock
/// `behind` seconds behind the CA's; the reissue's output.
fn reissue_behind(
    env: &TestEnv,
    web: &Web,
    domain: &str,
    behind: i64,
) -> support::env::AgentOutput {
    let first = env.renew();
    first.expect_code(0);
    let serial = first.installed_serial("www");
    env.served_leaf_with_serial(&web.https_addr(), domain, &serial)
        .unwrap_or_else(|e| panic!("served: {e}"));
    env.agent(["--json", "renew", "--force", "--wait", "30"])
        .env(OFFSET, format!("-{behind}"))
        .run()
}

/// Guards the hold: with this host's clock 50 minutes behind the CA's, the reissued
/// certificate is checked, kept in the state directory and reported pending (exit 75) with
/// its start — no failure, no backoff, the previous certificate still served, `status` saying
/// so; a run before its start calls nothing; the first run once it is valid installs it
/// without an API call, and nginx serves it.
#[test]
fn a_certificate_that_begins_after_this_hosts_clock_is_held_and_installed_once_valid() {
    let domain = "www.held-e2e.test";
    let Some((env, web)) = nginx_world(SandboxConfig::default().instant(true), domain) else {
        return;
    };
    let behind = reissue_behind(&env, &web, domain, 3000);
    behind.expect_code(75);
    let before = env.record("www").expect("record")["installed"]["serial"]
        .as_str()
        .expect("installed serial")
        .to_owned();
    let o = behind.outcome("www");
    assert_eq!(o["outcome"], "pending", "{}", behind.describe());
    let reason = o["reason"].as_str().unwrap_or_default();
    assert!(
        reason.contains("valid from") && reason.contains("installs then"),
        "{}",
        behind.describe()
    );
    assert!(!behind.stdout.contains("error"), "{}", behind.describe());
    let rec = env.record("www").expect("record");
    assert_eq!(rec["failures"], 0, "no failure: {rec:#}");
    assert!(rec["retry_after"].is_null(), "no backoff: {rec:#}");
    let serial = rec["held"]["serial"]
        .as_str()
        .expect("held serial")
        .to_owned();
    assert_ne!(serial, before);
    let mode = fs::metadata(held_archive(&env))
        .expect("held archive")
        .permissions()
        .mode();
    assert_eq!(mode & 0o777, 0o600, "the held archive is private");
    let served = env.served_leaf(&web.https_addr(), domain).expect("served");
    assert_eq!(
        served.serial,
        support::env::norm_serial(&before),
        "the previous one is served"
    );

    let status = env.agent(["status"]).env(OFFSET, "-3000").run();
    status.expect_code(0);
    assert!(
        status.stdout.contains("issued, valid from"),
        "{}",
        status.describe()
    );

    let calls = env.calls().len();
    let again = env
        .agent(["--json", "renew", "--wait", "30"])
        .env(OFFSET, "-3000")
        .run();
    again.expect_code(75);
    assert_eq!(env.calls().len(), calls, "a held certificate calls nothing");

    let valid = env.renew();
    valid.expect_code(0);
    let installed = valid.installed_serial("www");
    assert_eq!(installed, support::env::norm_serial(&serial));
    assert_eq!(
        env.calls().len(),
        calls,
        "installed from the held archive, no API call"
    );
    let leaf = env
        .served_leaf_with_serial(&web.https_addr(), domain, &installed)
        .unwrap_or_else(|e| panic!("served: {e}\n{}", web.logs()));
    assert_eq!(leaf.serial, installed);
    assert!(
        !held_archive(&env).exists(),
        "the held archive is removed once installed"
    );
    assert!(env.record("www").expect("record")["held"].is_null());
    assert_eq!(env.billed(), 1);
}

/// Guards the bound of the hold and the message: a certificate that begins more than a day
/// after this host's clock is an error that prints this host's time as it is (not plus a
/// tolerance) and says what to check; nothing new is installed or held.
#[test]
fn a_certificate_that_begins_more_than_a_day_ahead_is_refused_naming_this_hosts_time() {
    let domain = "www.far-ahead.test";
    let Some((env, web)) = nginx_world(SandboxConfig::default().instant(true), domain) else {
        return;
    };
    let days = 2 * 86_400;
    let out = reissue_behind(&env, &web, domain, days);
    out.expect_code(1);
    let text = out.text();
    assert!(text.contains("is not valid before"), "{}", out.describe());
    assert!(text.contains("more than 24 hours"), "{}", out.describe());
    let host_now = time::OffsetDateTime::now_utc() - time::Duration::seconds(days);
    let printed = printed_now(&text);
    assert!(
        (printed - host_now).abs() < time::Duration::seconds(60),
        "the message prints this host's time ({printed}), not more: {}",
        out.describe()
    );
    let rec = env.record("www").expect("record");
    assert!(rec["held"].is_null(), "{rec:#}");
    assert!(!held_archive(&env).exists());
}

/// Guards the sandbox's fast clock with the agent: at `--time-scale 60` (validation and
/// issuance on the sandbox's schedules, sped up), a sandbox whose virtual clock already runs
/// minutes ahead issues a certificate that `cert-agent renew` installs at once: ordered,
/// validated through nginx, installed, reloaded and served (the TLS handshake's serial).
#[test]
fn the_sandbox_at_time_scale_60_issues_what_renew_installs_and_serves() {
    let Some((env, web)) = nginx_world(
        SandboxConfig::default().time_scale(60.0),
        "www.time-scale.test",
    ) else {
        return;
    };
    // Six real seconds put the virtual clock six minutes ahead: more than the tolerance.
    std::thread::sleep(Duration::from_secs(6));
    let out = env.agent(["--json", "renew", "--wait", "50"]).run();
    out.expect_code(0);
    let serial = out.installed_serial("www");
    let leaf = env
        .served_leaf_with_serial(&web.https_addr(), "www.time-scale.test", &serial)
        .unwrap_or_else(|e| panic!("served: {e}\n{}\n{}", out.describe(), web.logs()));
    assert_eq!(leaf.serial, serial);
    let rec = env.record("www").expect("record");
    assert_eq!(rec["failures"], 0, "{rec:#}");
    assert_eq!(env.billed(), 1);
}

/// Guards the exit code and message of the failure backoff: after a failed install (nginx's
/// config test fails) a plain `renew` tries nothing, exits 1 and says when the next attempt is
/// and how to try now; once the certificate is in order again a plain run exits 0.
#[test]
fn a_certificate_in_its_backoff_makes_renew_exit_1_saying_when_and_how_to_retry() {
    let Some((mut env, web)) = nginx_world(
        SandboxConfig::default().instant(true),
        "www.backoff-exit.test",
    ) else {
        return;
    };
    let good_test = env.spec("www").configtest_command.clone();
    env.spec_mut("www").configtest_command = Some(vec!["/bin/false".into()]);
    let first = env.renew();
    first.expect_code(1);
    let rec = env.record("www").expect("record");
    assert!(!rec["retry_after"].is_null(), "backoff: {rec:#}");

    let calls = env.calls().len();
    let second = env.agent(["renew"]).run();
    second.expect_code(1);
    let text = second.text();
    assert!(
        text.contains("www: error: not retried before")
            && text.contains("(in ")
            && text.contains("`cert-agent renew --name www` tries now")
            && text.contains("last error:"),
        "{}",
        second.describe()
    );
    assert_eq!(env.calls().len(), calls, "nothing tried during the backoff");

    env.spec_mut("www").configtest_command = good_test;
    let named = env
        .agent(["--json", "renew", "--name", "www", "--wait", "30"])
        .run();
    named.expect_code(0);
    let serial = named.installed_serial("www");
    env.served_leaf_with_serial(&web.https_addr(), "www.backoff-exit.test", &serial)
        .unwrap_or_else(|e| panic!("served: {e}"));
    env.agent(["renew"]).run().expect_code(0);
    assert_eq!(env.billed(), 1);
}

/// Guards the hold in a fleet: a follower whose clock is 50 minutes behind the leader's holds
/// the fleet's certificate (pending, exit 75, nothing installed, no failure) and, leading its
/// own run meanwhile, leaves that certificate alone — no reissue, no order; once valid its
/// next run installs the fleet's certificate, and both hosts serve the same serial.
#[test]
fn a_follower_behind_the_leaders_clock_holds_the_fleets_certificate_until_valid() {
    if !crate::fleet_e2e::ready() {
        return;
    }
    let f = crate::fleet_e2e::Fleet::start(2);
    f.env.sandbox.set_dcv_ports(f.hosts[0].web.http_port(), 0);
    f.agent(0, &["--json", "renew", "--wait", "60"])
        .expect_code(0);
    let serial = f.installed(0).expect("the leader installed");
    let calls = f.env.calls().len();

    let behind = f
        .env
        .agent_at(&f.hosts[1].config, ["--json", "renew", "--wait", "10"])
        .env(OFFSET, "-3000")
        .run();
    behind.expect_code(75);
    let reason = behind.outcome("www")["reason"]
        .as_str()
        .unwrap_or_default()
        .to_owned();
    assert!(
        reason.contains("the fleet's certificate") && reason.contains("installs then"),
        "{}",
        behind.describe()
    );
    assert_eq!(f.installed(1), None, "nothing installed before it is valid");
    assert_ne!(f.served(1).as_deref(), Some(serial.as_str()));
    assert_eq!(
        f.env.calls().len(),
        calls,
        "the holding host's lead calls nothing: {:?}",
        &f.env.calls()[calls..]
    );

    f.agent(1, &["--json", "renew"]).expect_code(0);
    f.wait_all_serve(&serial, Duration::from_secs(30));
    assert_eq!(f.env.billed(), 1);
}

/// Guards the held archive as input: garbage in its place, a copy readable by others, or a
/// record naming another serial (a forgery) is never installed — the held copy is dropped with
/// a warning naming the problem, the certificate is downloaded and checked again, and the
/// CA's certificate is installed and served.
#[test]
fn a_damaged_or_forged_held_certificate_is_dropped_and_downloaded_again() {
    let domain = "www.held-garbage.test";
    let Some((env, web)) = nginx_world(SandboxConfig::default().instant(true), domain) else {
        return;
    };
    type Spoil = fn(&TestEnv);
    let spoils: [(&str, Spoil); 3] = [
        ("rejected", |env| {
            fs::write(held_archive(env), b"PK\x03\x04 not a zip at all").unwrap();
        }),
        ("could not be read", |env| {
            fs::set_permissions(held_archive(env), fs::Permissions::from_mode(0o644)).unwrap();
        }),
        ("not the recorded", |env| {
            env.edit_record("www", |r| r["held"]["serial"] = "0BADC0DE".into());
        }),
    ];
    let first = env.renew();
    first.expect_code(0);
    for (expected, spoil) in spoils {
        let held = env
            .agent(["--json", "renew", "--force", "--wait", "30"])
            .env(OFFSET, "-3000")
            .run();
        held.expect_code(75);
        let serial = env.record("www").expect("record")["held"]["serial"]
            .as_str()
            .expect("held")
            .to_owned();
        spoil(&env);
        let calls = env.calls().len();
        let out = env.renew();
        out.expect_code(0);
        assert!(
            out.text().contains(expected),
            "{expected}: {}",
            out.describe()
        );
        let installed = out.installed_serial("www");
        assert_eq!(installed, support::env::norm_serial(&serial), "{expected}");
        assert!(env.calls().len() > calls, "{expected}: downloaded again");
        env.served_leaf_with_serial(&web.https_addr(), domain, &installed)
            .unwrap_or_else(|e| panic!("{expected}: served: {e}"));
        assert!(!held_archive(&env).exists());
    }
    assert_eq!(env.billed(), 1);
}
