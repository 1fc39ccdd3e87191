//! `cert-agent retire` and the audit log against the sandbox: the cancellation asked for only
//! inside the API's 28-day window (the sandbox's call log holds one cancel call or none),
//! validation files and placeholders removed, files the web server still names kept, later
//! runs leaving a retired certificate alone, `discover` naming a certificate no virtual host
//! serves; a renewal's actions in `audit.log`, and `audit --verify` on an untouched, an
//! edited, a shortened and a reordered log, a closed fragment with an edit after it, a dropped
//! tail checked against the hash the journal showed, and a deleted log.

use crate::support;

use std::fs;
use std::time::Duration;

use partner_sandbox::SandboxConfig;
use sha2::Digest;
use support::env::{Publish, TestEnv, wait_until};
use support::faults::{entries, serve_webroot};
use support::scenario;

const DAY: Duration = Duration::from_secs(86_400);

fn cancel_calls(env: &TestEnv) -> usize {
    env.calls()
        .iter()
        .filter(|c| c.method == "POST" && c.path.ends_with("/cancel"))
        .count()
}

/// A certificate issued at once (standalone validation, files only).
fn issued(name: &str, domain: &str) -> TestEnv {
    let mut env = TestEnv::new();
    let spec = env.standalone_spec(name, &[domain]);
    env.certs.push(spec);
    scenario::renew_synced(&env).expect_code(0);
    env
}

/// Guards the cancellation window: an order issued 10 days ago is cancelled with exactly one
/// call and the API's answer printed as it came; the record is archived and a later run
/// neither orders again nor touches the certificate.
#[test]
fn retire_inside_the_window_cancels_once_and_later_runs_leave_it_alone() {
    let env = issued("www", "www.retire-inside.test");
    let id = scenario::certificate_id(&env, "www");
    env.sandbox.advance(10 * DAY);
    let out = scenario::run_synced(&env, &["retire", "www", "--cancel", "--yes"]);
    out.expect_code(0);
    assert_eq!(cancel_calls(&env), 1, "{}", scenario::show(&env.calls()));
    let text = out.text();
    assert!(
        text.contains(&format!("cancel certificate {id}"))
            && text.contains("The cancellation order has been sent"),
        "{text}"
    );
    assert!(env.record("www").is_none(), "the live record is gone");
    let archive = env.state_dir().join("retired/www.json");
    let archived: serde_json::Value =
        serde_json::from_str(&fs::read_to_string(&archive).unwrap()).unwrap();
    assert_eq!(archived["record"]["order"]["certificate_id"], id);
    assert!(
        text.contains("remove the [[certificate]] entry 'www'"),
        "the operator is told what to remove: {text}"
    );
    // The configuration still lists it: the next run fails on it, orders nothing.
    let posts = env.order_posts();
    let again = scenario::run_synced(&env, &["--json", "renew", "--wait", "5"]);
    assert_ne!(again.code, Some(0), "{}", again.describe());
    assert!(again.stdout.contains("was retired"), "{}", again.describe());
    assert_eq!(env.order_posts(), posts, "no order after retirement");
    // `status` and `check` say it is retired and what to do (WARNING, not the CRITICAL of a
    // certificate that was never installed).
    let status = scenario::run_synced(&env, &["status"]);
    status.expect_code(0);
    assert!(
        status.stdout.contains(" retired ")
            && status
                .stdout
                .contains("remove its [[certificate]] entry (record: "),
        "{}",
        status.describe()
    );
    let check = scenario::run_synced(&env, &["check", "--no-balance"]);
    check.expect_code(1);
    assert!(
        check.stdout.contains("WARNING www: retired (")
            && check.stdout.contains("remove its [[certificate]] entry"),
        "{}",
        check.describe()
    );
    // The audit log holds the cancellation and the retirement.
    let audit = fs::read_to_string(env.state_dir().join("audit.log")).unwrap();
    assert!(audit.contains("\"action\":\"cancel\""), "{audit}");
    assert!(audit.contains("\"action\":\"retire\""), "{audit}");
}

/// Guards the surfaces of a retired certificate the configuration still lists: `retire`
/// announces it once (with the archive and the certificate ID), the runs after it announce
/// nothing (no `failed`); the metrics carry only `cert_agent_certificate_retired 1` for it (no
/// expiry, failures or outcome an alert would read as "never installed"); `status --json`
/// says retired, with no CRL or validation view.
#[test]
fn a_retired_certificate_is_announced_once_and_shows_only_as_retired() {
    let mut env = issued("www", "www.retire-surfaces.test");
    env.watch_surfaces();
    let id = scenario::certificate_id(&env, "www");
    scenario::run_synced(&env, &["retire", "www", "--yes"]).expect_code(0);
    for _ in 0..2 {
        let run = scenario::run_synced(&env, &["--json", "renew", "--wait", "5"]);
        assert_ne!(run.code, Some(0), "{}", run.describe());
    }
    let events = env.notified();
    assert_eq!(events.len(), 1, "{events:#?}");
    assert_eq!(events[0]["event"], "retired");
    assert_eq!(events[0]["certificate_id"], id);
    let archive = env.state_dir().join("retired/www.json");
    assert_eq!(events[0]["archive"], archive.display().to_string());

    let text = fs::read_to_string(env.path("metrics.prom")).unwrap();
    let www: Vec<&str> = text
        .lines()
        .filter(|l| l.contains("name=\"www\""))
        .collect();
    assert_eq!(www.len(), 1, "{text}");
    assert!(
        www[0].starts_with("cert_agent_certificate_retired{") && www[0].ends_with(" 1"),
        "{text}"
    );

    let status = scenario::run_synced(&env, &["--json", "status"]);
    status.expect_code(0);
    let row = &status.json()[0];
    assert!(
        row["state"] == "retired"
            && row["next_action"]
                .as_str()
                .is_some_and(|n| n.contains("retired/www.json")),
        "{row:#}"
    );
    assert!(
        row["revocation"].is_null() && row["validation"].is_null(),
        "{row:#}"
    );
}

/// Guards the other side of the window: 30 days after issuance the API would refuse, so no
/// cancel call is made and the operator is told why.
#[test]
fn retire_outside_the_window_makes_no_cancel_call() {
    let env = issued("old", "old.retire-outside.test");
    env.sandbox.advance(31 * DAY);
    let issued_on = env.sandbox.now().date() - time::Duration::days(31);
    let out = scenario::run_synced(&env, &["--json", "retire", "old", "--cancel", "--yes"]);
    out.expect_code(0);
    assert_eq!(cancel_calls(&env), 0, "{}", scenario::show(&env.calls()));
    let cancel = &out.json()["cancel"];
    assert_eq!(cancel["called"], false, "{}", out.describe());
    assert_eq!(cancel["decision"]["decision"], "too_late");
    assert_eq!(cancel["decision"]["issued"], issued_on.to_string());
    let text = scenario::run_synced(&env, &["audit", "--name", "old"]).text();
    assert!(
        text.contains("retired") && !text.contains("cancel-refused"),
        "{text}"
    );
    assert!(env.state_dir().join("retired/old.json").exists());
}

/// Guards what retire removes: a pending order's published validation file in the web root
/// and a placeholder at the install paths; without --cancel no call at all.
#[test]
fn retire_removes_validation_files_and_the_placeholder() {
    let mut env = TestEnv::with_sandbox(SandboxConfig::default());
    let webroot = env.path("www-root");
    fs::create_dir_all(&webroot).unwrap();
    let server = serve_webroot(&webroot);
    env.sandbox.set_dcv_ports(server.port, 0);
    let mut spec = env.cert_spec("site", &["site.retire-files.test"], "none");
    spec.publish = Publish::Webroot(webroot.clone());
    env.certs.push(spec);
    env.agent(["placeholder", "site"]).run().expect_code(0);
    let key = env.spec("site").files.key.clone();
    assert!(key.exists(), "placeholder key written");
    let validation = || {
        entries(&webroot)
            .into_iter()
            .filter(|p| p.starts_with(".well-known/pki-validation") && p.extension().is_some())
            .collect::<Vec<_>>()
    };
    let run = env.agent(["--json", "renew", "--wait", "2"]).run();
    assert!(
        wait_until(Duration::from_secs(20), || !validation().is_empty()),
        "the validation file was published: {}",
        run.describe()
    );
    let calls_before = env.calls().len();
    // Without a terminal, --yes is needed.
    let refused = env.agent(["retire", "site"]).run();
    refused.expect_code(2);
    assert!(refused.stderr.contains("--yes"), "{}", refused.describe());
    let out = env.agent(["retire", "site", "--yes"]).run();
    out.expect_code(0);
    assert!(validation().is_empty(), "validation file removed");
    assert!(!key.exists(), "placeholder removed: {}", out.describe());
    for f in env.spec("site").files.all() {
        assert!(!f.exists(), "{} removed", f.display());
    }
    assert_eq!(
        env.calls().len(),
        calls_before,
        "no API call without --cancel"
    );
    assert_eq!(cancel_calls(&env), 0);
}

/// An `nginx -T` report of one TLS server for `name` with `cert` and `key`.
fn nginx_dump(name: &str, cert: &std::path::Path, key: &std::path::Path) -> String {
    format!(
        "# configuration file /etc/nginx/nginx.conf:\nhttp {{\n  server {{\n    listen 443 ssl;\n    \
         server_name {name};\n    ssl_certificate {};\n    ssl_certificate_key {};\n  }}\n}}\n",
        cert.display(),
        key.display()
    )
}

/// Guards installed files a virtual host still names: --remove-files refuses (nothing
/// changed) until the site is gone from the server's report, then deletes them; `discover`
/// lists the certificate as served by no virtual host.
#[test]
fn files_the_web_server_still_names_are_kept_and_discover_lists_the_orphan() {
    let mut env = TestEnv::new();
    let port = support::webserver::free_port();
    env.sandbox.set_dcv_ports(port, 0);
    let mut spec = env.cert_spec("shop", &["shop.retire-inuse.test"], "nginx");
    spec.publish = Publish::Standalone(port);
    spec.reload_command = Some(vec!["true".into()]);
    spec.configtest_command = Some(vec!["true".into()]);
    env.certs.push(spec);
    scenario::renew_synced(&env).expect_code(0);
    let files = env.spec("shop").files.clone();
    let leaf = files.leaf_file();
    let dump = env.path("nginx-T.txt");
    fs::write(
        &dump,
        nginx_dump("shop.retire-inuse.test", &leaf, &files.key),
    )
    .unwrap();
    let dump_arg = dump.to_str().unwrap();
    let retire = || {
        env.agent([
            "retire",
            "shop",
            "--remove-files",
            "--yes",
            "--from",
            dump_arg,
        ])
        .run()
    };
    let out = retire();
    out.expect_failure();
    assert!(
        out.stderr.contains("still uses") && out.stderr.contains(&leaf.display().to_string()),
        "{}",
        out.describe()
    );
    assert!(
        leaf.exists() && env.record("shop").is_some(),
        "nothing changed"
    );

    // The site is removed from the web server: discover names the certificate.
    fs::write(
        &dump,
        nginx_dump(
            "other.retire-inuse.test",
            &env.path("o.pem"),
            &env.path("o.key"),
        ),
    )
    .unwrap();
    let found = env.agent(["discover", "--from", dump_arg]).run();
    found.expect_code(0);
    assert!(
        found.stdout.contains("served by no virtual host")
            && found.stdout.contains("shop (shop.retire-inuse.test)")
            && found.stdout.contains("cert-agent retire"),
        "{}",
        found.describe()
    );
    let json = env.agent(["--json", "discover", "--from", dump_arg]).run();
    assert_eq!(
        json.json()["orphaned"][0]["name"],
        "shop",
        "{}",
        json.describe()
    );

    let out = retire();
    out.expect_code(0);
    for f in files.all() {
        assert!(!f.exists(), "{} deleted: {}", f.display(), out.describe());
    }
}

/// Guards the audit trail of a renewal: the first order's steps are in `audit.log` as
/// chained lines (key, order intent and answer, validation, install), `audit` shows them and
/// `audit --verify` passes.
#[test]
fn a_renewal_writes_its_actions_to_the_audit_log_and_verify_passes() {
    let env = issued("www", "www.audit-renew.test");
    let log = fs::read_to_string(env.state_dir().join("audit.log")).unwrap();
    let events: Vec<(String, String)> = log
        .lines()
        .map(|l| {
            let v: serde_json::Value = serde_json::from_str(l).unwrap();
            assert_eq!(v["certificate"], "www", "{l}");
            (
                v["action"].as_str().unwrap().to_owned(),
                v["event"].as_str().unwrap().to_owned(),
            )
        })
        .collect();
    let want = [
        ("key", "key-generated"),
        ("order", "order-intent"),
        ("order", "ordered"),
        ("dcv", "dcv-published"),
        ("install", "installed"),
    ];
    let mut at = 0;
    for w in want {
        let found = events[at..]
            .iter()
            .position(|(a, e)| (a.as_str(), e.as_str()) == w);
        let Some(i) = found else {
            panic!("{w:?} not in order in {events:?}");
        };
        at += i + 1;
    }
    let meta = fs::metadata(env.state_dir().join("audit.log")).unwrap();
    assert_eq!(
        std::os::unix::fs::PermissionsExt::mode(&meta.permissions()) & 0o777,
        0o600
    );
    let verify = env.agent(["audit", "--verify"]).run();
    verify.expect_code(0);
    assert!(
        verify.stdout.contains("chain intact"),
        "{}",
        verify.describe()
    );
    let shown = env.agent(["--json", "audit", "--name", "www"]).run();
    shown.expect_code(0);
    let n = shown.json().as_array().map(Vec::len).unwrap_or(0);
    assert_eq!(n, events.len(), "{}", shown.describe());
    let none = env
        .agent(["--json", "audit", "--since", "2999-01-01"])
        .run();
    assert_eq!(none.json(), serde_json::json!([]));
    env.agent(["audit", "--since", "soon"]).run().expect_code(2);
}

/// Guards `audit --verify` against the three tamperings: an edited, a removed and two
/// reordered lines are each named by line number, and the untouched log passes again.
#[test]
fn audit_verify_names_an_edited_a_removed_and_a_reordered_line() {
    let env = issued("www", "www.audit-verify.test");
    let path = env.state_dir().join("audit.log");
    let original = fs::read_to_string(&path).unwrap();
    let lines: Vec<&str> = original.lines().collect();
    assert!(lines.len() >= 4, "{original}");
    let write = |ls: &[String]| fs::write(&path, ls.join("\n") + "\n").unwrap();
    let owned = || lines.iter().map(|s| s.to_string()).collect::<Vec<_>>();

    let mut edited = owned();
    edited[1] = edited[1].replacen("\"host\":\"", "\"host\":\"x", 1);
    write(&edited);
    let out = env.agent(["audit", "--verify"]).run();
    out.expect_code(1);
    assert!(out.stderr.contains("line 2:"), "{}", out.describe());

    let mut removed = owned();
    removed.remove(2);
    write(&removed);
    let out = env.agent(["audit", "--verify"]).run();
    out.expect_code(1);
    assert!(out.stderr.contains("line 3:"), "{}", out.describe());

    let mut reordered = owned();
    reordered.swap(1, 2);
    write(&reordered);
    let out = env.agent(["--json", "audit", "--verify"]).run();
    out.expect_code(1);
    assert_eq!(out.json()["broken"]["line"], 2, "{}", out.describe());

    // The last line cut short: an interrupted write would look so, but the anchor beside the
    // log names that line.
    let mut cut = original.clone().into_bytes();
    cut.truncate(cut.len() - 10);
    fs::write(&path, &cut).unwrap();
    let out = env.agent(["audit", "--verify"]).run();
    out.expect_code(1);
    assert!(
        out.stderr.contains(&format!("line {}: gap:", lines.len()))
            && out.stderr.contains("cut short"),
        "{}",
        out.describe()
    );

    fs::write(&path, &original).unwrap();
    env.agent(["audit", "--verify"]).run().expect_code(0);
}

/// The audit lines' `hash` fields as `-v` logs them (the journal's copy), in order.
fn logged_hashes(stderr: &str) -> Vec<String> {
    stderr
        .lines()
        .filter(|l| l.contains("audit"))
        .filter_map(|l| {
            let at = l.find(" hash=")? + 6;
            let h: String = l[at..]
                .chars()
                .take_while(char::is_ascii_hexdigit)
                .collect();
            (h.len() == 64).then_some(h)
        })
        .collect()
}

/// Guards the check past a gap: a write cut short (closed by the next write) is a tolerated
/// gap, the chain is checked after it, and an edit further on is found and named.
#[test]
fn audit_verify_reports_a_closed_fragment_and_an_edit_after_it() {
    let mut env = issued("www", "www.audit-gap.test");
    let path = env.state_dir().join("audit.log");
    let before = fs::read_to_string(&path).unwrap().lines().count();
    // A write interrupted by a crash, then a second certificate's run writes after it.
    let mut text = fs::read(&path).unwrap();
    text.extend_from_slice(b"{\"seq\":99,\"time\":\"2026-11-");
    fs::write(&path, &text).unwrap();
    let spec = env.standalone_spec("api", &["api.audit-gap.test"]);
    env.certs.push(spec);
    scenario::renew_synced(&env).expect_code(0);
    let out = env.agent(["audit", "--verify"]).run();
    out.expect_code(0);
    let gap = format!("line {}: gap:", before + 1);
    assert!(
        out.stdout.contains("1 gap(s)") && out.stdout.contains(&gap),
        "{}",
        out.describe()
    );

    let log = fs::read_to_string(&path).unwrap();
    let mut lines: Vec<String> = log.lines().map(str::to_owned).collect();
    let edited = lines.len() - 2;
    lines[edited] = lines[edited].replacen("\"host\":\"", "\"host\":\"x", 1);
    fs::write(&path, lines.join("\n") + "\n").unwrap();
    let out = env.agent(["--json", "audit", "--verify"]).run();
    out.expect_code(1);
    let v = out.json();
    let breaks: Vec<(u64, String)> = v["breaks"]
        .as_array()
        .unwrap()
        .iter()
        .map(|b| {
            (
                b["line"].as_u64().unwrap(),
                b["kind"].as_str().unwrap().to_owned(),
            )
        })
        .collect();
    let want = vec![
        (before as u64 + 1, "gap".to_owned()),
        (edited as u64 + 1, "edit".to_owned()),
    ];
    assert_eq!(breaks, want, "{}", out.describe());
    assert_eq!(v["broken"]["line"], edited as u64 + 1);
    let out = env.agent(["audit", "--verify"]).run();
    out.expect_code(1);
    assert!(
        out.stderr.contains(&gap) && out.stderr.contains(&format!("line {}: ", edited + 1)),
        "{}",
        out.describe()
    );
}

/// Guards the anchors off the host: the journal's copy of each audit line carries its `hash`
/// and `prev`; a log whose tail was dropped (and its anchor rewritten to match) verifies on
/// its own but not against `--expect-last-hash` (the hash the journal showed) or
/// `--expect-min-seq`.
#[test]
fn audit_verify_refuses_a_dropped_tail_against_the_expected_hash_and_seq() {
    let mut env = issued("www", "www.audit-tail.test");
    let spec = env.standalone_spec("api", &["api.audit-tail.test"]);
    env.certs.push(spec);
    let run = scenario::run_synced(&env, &["-v", "--json", "renew", "--wait", "30"]);
    run.expect_code(0);
    let hashes = logged_hashes(&run.stderr);
    assert!(hashes.len() >= 3, "{}", run.describe());
    assert!(run.stderr.contains(" prev="), "{}", run.describe());
    let path = env.state_dir().join("audit.log");
    let log = fs::read_to_string(&path).unwrap();
    let lines: Vec<&str> = log.lines().collect();
    let last = lines.len().to_string();
    let journal_hash = hashes.last().unwrap().clone();
    assert!(
        lines.last().unwrap().contains(&journal_hash),
        "{journal_hash} {log}"
    );
    let expect = |extra: &[&str]| {
        let mut args = vec!["audit", "--verify"];
        args.extend_from_slice(extra);
        env.agent(args).run()
    };
    expect(&[
        "--expect-last-hash",
        &journal_hash,
        "--expect-min-seq",
        &last,
    ])
    .expect_code(0);
    let written_anchor = fs::read(env.state_dir().join("audit.anchor")).unwrap();

    // The last two lines dropped and the anchor made to match what is left.
    let kept = &lines[..lines.len() - 2];
    fs::write(&path, kept.join("\n") + "\n").unwrap();
    let anchor = format!(
        "{:020} {}\n",
        kept.len(),
        hex::encode(sha2::Sha256::digest(kept.last().unwrap().as_bytes()))
    );
    fs::write(env.state_dir().join("audit.anchor"), anchor).unwrap();
    expect(&[]).expect_code(0);
    let out = expect(&["--expect-last-hash", &journal_hash]);
    out.expect_code(1);
    assert!(
        out.stderr.contains("no sound line has hash"),
        "{}",
        out.describe()
    );
    let out = expect(&["--expect-min-seq", &last]);
    out.expect_code(1);
    assert!(
        out.stderr.contains(&format!("at least {last} expected")),
        "{}",
        out.describe()
    );
    expect(&["--expect-last-hash", "nothex"]).expect_code(2);
    env.agent(["audit", "--expect-min-seq", "3"])
        .run()
        .expect_code(2);

    // The anchor as the writer left it catches the same drop by itself.
    fs::write(env.state_dir().join("audit.anchor"), &written_anchor).unwrap();
    let out = expect(&[]);
    out.expect_code(1);
    assert!(out.stderr.contains("cut short"), "{}", out.describe());
}

/// Guards a deleted log: with the anchor left it is named as cut short or deleted; with the
/// anchor deleted too, the records (an order, an install) show that actions were taken. A
/// state with no action verifies with no log.
#[test]
fn audit_verify_fails_on_a_deleted_log_while_the_state_shows_actions() {
    let env = issued("www", "www.audit-gone.test");
    let path = env.state_dir().join("audit.log");
    fs::remove_file(&path).unwrap();
    let out = env.agent(["audit", "--verify"]).run();
    out.expect_code(1);
    assert!(
        out.stderr.contains("cut short, or deleted"),
        "{}",
        out.describe()
    );
    fs::remove_file(env.state_dir().join("audit.anchor")).unwrap();
    let out = env.agent(["audit", "--verify"]).run();
    out.expect_code(1);
    assert!(
        out.stderr
            .contains("the state shows actions: certificate 'www'"),
        "{}",
        out.describe()
    );
    fs::write(&path, "").unwrap();
    env.agent(["audit", "--verify"]).run().expect_code(1);

    let fresh = TestEnv::new();
    let out = fresh.agent(["audit", "--verify"]).run();
    out.expect_code(0);
    assert!(out.stdout.contains("chain intact"), "{}", out.describe());
}

/// Guards the configuration: an include file `discover --write` wrote for the certificate is
/// cert-agent's own and is removed by retire; the operator's own file is only named.
#[test]
fn retire_removes_the_include_file_discover_wrote() {
    let mut env = TestEnv::new();
    let fragment = crate::retire_files::discovered_include(&mut env, "gone.retire-include.test");
    assert!(fragment.exists());
    let out = env
        .agent(["retire", "gone.retire-include.test", "--yes"])
        .run();
    out.expect_code(0);
    assert!(!fragment.exists(), "{}", out.describe());
    assert!(
        out.stdout
            .contains(&format!("removed {}", fragment.display())),
        "{}",
        out.describe()
    );
    assert!(env.calls().is_empty(), "no API call");
    // Gone from the configuration: nothing left to retire, and the archive says so.
    let again = env
        .agent(["retire", "gone.retire-include.test", "--yes"])
        .run();
    again.expect_failure();
    assert!(
        again.stderr.contains("already retired"),
        "{}",
        again.describe()
    );
}

/// Whether `c` would act on a terminal: a control character (line breaks aside) or a
/// bidirectional control.
fn acts_on_a_terminal(c: char) -> bool {
    (c.is_control() && c != '\n')
        || matches!(c, '\u{200e}' | '\u{200f}' | '\u{202a}'..='\u{202e}' | '\u{2066}'..='\u{2069}')
}

/// Guards the terminal against the API's text: a refusal whose message holds terminal
/// controls (clear screen, a window title, a C1 CSI, a bidi override) is printed escaped in
/// the error, in the `audit` table and in `--json` (there as the same string, the controls as
/// JSON escapes).
#[test]
fn terminal_controls_in_an_api_message_are_shown_escaped() {
    let env = issued("www", "www.audit-escape.test");
    let id = scenario::certificate_id(&env, "www").to_string();
    let message = "No\u{1b}[2J\u{1b}]0;owned\u{7} \u{9b}31mway \u{202e}exe.txt";
    env.sandbox.inject(
        partner_sandbox::Fault::new(partner_sandbox::FaultKind::Refusal {
            message: message.to_owned(),
        })
        .method("POST")
        .path("/api/v1/ssl_certificates/*/cancel"),
    );
    let out = env.agent(["cancel", &id, "--yes"]).run();
    out.expect_code(1);
    let escaped = "No\\x1b[2J\\x1b]0;owned\\x07 \\x9b31mway \\u{202e}exe.txt";
    assert!(out.stderr.contains("No\\x1b[2J"), "{}", out.describe());
    assert!(
        !out.stderr.chars().any(acts_on_a_terminal),
        "{}",
        out.describe()
    );
    // The refusal is audited as it came, and shown escaped.
    let table = env.agent(["audit"]).run();
    table.expect_code(0);
    assert!(
        table.stdout.contains("cancel-refused"),
        "{}",
        table.describe()
    );
    assert!(table.stdout.contains(escaped), "{}", table.describe());
    assert!(
        !table.stdout.chars().any(acts_on_a_terminal),
        "{}",
        table.describe()
    );
    let json = env.agent(["--json", "audit"]).run();
    json.expect_code(0);
    assert!(
        !json.stdout.chars().any(acts_on_a_terminal),
        "{}",
        json.describe()
    );
    let refused = json
        .json()
        .as_array()
        .unwrap()
        .iter()
        .find(|e| e["event"] == "cancel-refused")
        .cloned()
        .unwrap();
    let error = refused["details"]["error"].as_str().unwrap();
    assert!(error.contains(message), "{error:?}");
    env.agent(["audit", "--verify"]).run().expect_code(0);

    // A record's last error (an API message kept from a failed run) in `status`: its table
    // and the line under it.
    env.edit_record("www", |v| {
        v["last_error"] = message.into();
        v["failures"] = 1.into();
    });
    for args in [&["status"][..], &["--json", "status"], &["check"]] {
        let out = env.agent(args.iter().copied()).run();
        assert!(
            out.stdout.contains("No\\x1b[2J") || out.stdout.contains("No\\u001b[2J"),
            "{}",
            out.describe()
        );
        assert!(
            !out.stdout.chars().any(acts_on_a_terminal),
            "{}",
            out.describe()
        );
    }
}
