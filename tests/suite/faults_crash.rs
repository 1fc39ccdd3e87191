//! Crash safety at every step: the agent aborts at a named failpoint (`CERT_AGENT_FAILPOINT`,
//! debug builds), as a crash or `kill -9` would; the next run without it must end with at most
//! one billed order, the installed certificate matching the installed key, no validation file
//! or temporary file left behind, every state file parsing, and exit 0 with the certificate
//! installed. The same for a free reissue interrupted at `reissue-sent`, `key-saved` and
//! `files-swapped`. Also: reconciliation that finds no order or two matching orders stops with
//! its own error instead of ordering, and a clock far from the API's blocks billed actions.
//! A batch of installs aborted while it is recorded (`installs-journalled`, `records-written`,
//! `record-renamed`) leaves each record old or installed, every live install journalled and
//! audited, and the next run completes it.

use crate::support;

use std::fs;

use partner_sandbox::{Fault, FaultKind};
use support::env::{ORDER_PATH, Publish, TestEnv};
use support::faults::{
    RawServer, assert_no_install_leftovers, assert_pair, assert_state_parses, entries, renew_with,
    run_env, serve_webroot,
};
use support::scenario::{REISSUE, certificate_id, matching};

const FAILPOINT: &str = "CERT_AGENT_FAILPOINT";

/// A world with one certificate `www` validated through a web root served by a tiny file
/// server, installed as files with `/bin/true` as config test and reload (so every install
/// step, including `config-tested` and `reloaded`, is met).
fn webroot_env(domain: &str) -> (TestEnv, RawServer) {
    let mut env = TestEnv::new();
    let webroot = env.path("www-root");
    fs::create_dir_all(&webroot).unwrap();
    let server = serve_webroot(&webroot);
    env.sandbox.set_dcv_ports(server.port, 0);
    let mut spec = env.cert_spec("www", &[domain], "none");
    spec.publish = Publish::Webroot(webroot);
    spec.configtest_command = Some(vec!["/bin/true".into()]);
    spec.reload_command = Some(vec!["/bin/true".into()]);
    env.write_placeholder(&spec);
    env.certs.push(spec);
    (env, server)
}

/// The checks every crash scenario ends with.
#[track_caller]
fn assert_consistent(env: &TestEnv, billed_at_most: u64) {
    assert!(
        env.billed() <= billed_at_most,
        "billed {} orders (at most {billed_at_most})",
        env.billed()
    );
    assert!(env.order_posts() as u64 <= billed_at_most, "order calls");
    assert_pair(env, "www");
    let webroot = env.path("www-root");
    let left: Vec<_> = entries(&webroot)
        .into_iter()
        .filter(|p| {
            let s = p.to_string_lossy();
            s.starts_with(".well-known/pki-validation/")
                || p.file_name().is_some_and(|n| {
                    let n = n.to_string_lossy();
                    n.starts_with('.') && n != ".well-known"
                })
        })
        .collect();
    assert!(left.is_empty(), "left in the web root: {left:?}");
    assert_no_install_leftovers(env, "www");
    assert_state_parses(env);
}

/// A run that aborts at the failpoint `point` (reached, no exit code).
fn crash_at(env: &TestEnv, point: &str) {
    let first = renew_with(env, &[(FAILPOINT, point)]);
    assert!(
        first
            .stderr
            .contains(&format!("failpoint '{point}' reached")),
        "the run reached '{point}'\n{}",
        first.describe()
    );
    assert_eq!(first.code, None, "aborted\n{}", first.describe());
}

/// Aborts the first issuance at `point`, then runs again without the failpoint.
fn crash_during_issuance(point: &str, domain: &str) {
    let (env, _server) = webroot_env(domain);
    crash_at(&env, point);
    assert!(env.billed() <= 1);

    let mut second = renew_with(&env, &[]);
    if second.code != Some(0) {
        // A failure recorded by the crashed run may back off; an explicit retry must finish.
        second = run_env(&env, &["--json", "renew", "--wait", "30", "--force"], &[]);
    }
    second.expect_code(0);
    second.installed_serial("www");
    assert_eq!(env.billed(), 1, "exactly one billed order after '{point}'");
    assert_consistent(&env, 1);

    // Converged: nothing more to do, no further call that bills.
    let third = renew_with(&env, &[]);
    third.expect_code(0);
    assert_eq!(env.billed(), 1);
}

macro_rules! issuance_crash {
    ($($test:ident => $point:literal,)*) => {$(
        #[test]
        fn $test() {
            crash_during_issuance($point, &format!("{}.faults-crash.test", $point));
        }
    )*};
}

issuance_crash! {
    crash_at_key_saved => "key-saved",
    crash_at_order_sent => "order-sent",
    crash_at_response_saved => "response-saved",
    crash_at_dcv_placed => "dcv-placed",
    crash_at_poll => "poll",
    crash_at_download => "download",
    crash_at_files_staged => "files-staged",
    crash_at_files_swapped => "files-swapped",
    crash_at_config_tested => "config-tested",
    crash_at_reloaded => "reloaded",
    crash_at_committed => "committed",
}

/// Issues `www`, then ages its certificate at the sandbox to 20 days left and installs the
/// aged leaf, so that the next `renew` reissues.
fn issued_and_due(domain: &str) -> (TestEnv, RawServer) {
    let (mut env, server) = webroot_env(domain);
    env.spec_mut("www").extra = "days = 730\nfamily = \"S\"\n".into();
    renew_with(&env, &[]).expect_code(0);
    let id = certificate_id(&env, "www");
    env.sandbox.age_certificate(id, 20).unwrap();
    run_env(&env, &["--json", "install", "www"], &[]).expect_code(0);
    (env, server)
}

fn crash_during_reissue(point: &str, domain: &str) {
    let (env, _server) = issued_and_due(domain);
    let aged = support::env::Leaf::from_pem_file(&env.spec("www").files.leaf_file()).serial;
    let before = env.calls().len();
    let first = renew_with(&env, &[(FAILPOINT, point)]);
    assert!(
        first
            .stderr
            .contains(&format!("failpoint '{point}' reached")),
        "the run reached '{point}'\n{}",
        first.describe()
    );
    // The crashed run leaves a working pair behind (old or new).
    assert_pair(&env, "www");

    let mut second = renew_with(&env, &[]);
    if second.code != Some(0) {
        second = run_env(&env, &["--json", "renew", "--wait", "30", "--force"], &[]);
    }
    second.expect_code(0);
    let leaf = support::env::Leaf::from_pem_file(&env.spec("www").files.leaf_file());
    assert_ne!(leaf.serial, aged, "the reissued certificate is installed");
    let calls = env.calls()[before..].to_vec();
    assert!(
        matching(&calls, "POST", REISSUE).len() <= 2,
        "reissue calls: {}",
        matching(&calls, "POST", REISSUE).len()
    );
    assert_eq!(env.billed(), 1, "a reissue bills nothing");
    assert_consistent(&env, 1);
}

#[test]
fn crash_at_reissue_sent() {
    crash_during_reissue("reissue-sent", "reissue-sent.faults-crash.test");
}

#[test]
fn crash_at_files_swapped_during_a_reissue() {
    crash_during_reissue("files-swapped", "reissue-swapped.faults-crash.test");
}

/// A crash after the intent was recorded and before the order was sent: reconciliation finds
/// no order with the CSR. The agent cannot tell this from an order whose answer was lost and
/// not listed yet, so it must stop with its own error naming the way out, never order by
/// itself; once the operator clears the intent, one order is placed and installed.
#[test]
fn crash_at_intent_saved_then_reconciliation_finds_no_order() {
    let (env, _server) = webroot_env("intent-saved.faults-crash.test");
    let first = renew_with(&env, &[(FAILPOINT, "intent-saved")]);
    assert!(
        first.stderr.contains("failpoint 'intent-saved' reached"),
        "{}",
        first.describe()
    );
    assert_eq!(env.billed(), 0);
    for _ in 0..2 {
        let out = run_env(&env, &["--json", "renew", "--wait", "5", "--force"], &[]);
        out.expect_code(1);
        assert_eq!(
            env.order_posts(),
            0,
            "no order while unresolved\n{}",
            out.describe()
        );
        let error = out.outcome("www")["error"]
            .as_str()
            .unwrap_or_default()
            .to_string();
        assert!(
            error.contains("no order with this certificate's CSR")
                && error.contains("--clear-intent"),
            "a distinct error naming the way out: {error}"
        );
    }
    assert_state_parses(&env);

    let cleared = run_env(
        &env,
        &["--json", "issue", "www", "--yes", "--clear-intent"],
        &[],
    );
    if cleared.code != Some(0) {
        renew_with(&env, &[]).expect_code(0);
    }
    assert_eq!(
        env.billed(),
        1,
        "one order after the operator cleared the intent"
    );
    let last = renew_with(&env, &[]);
    last.expect_code(0);
    assert_consistent(&env, 1);
}

/// Two orders with the agent's CSR exist (the lost one, and one placed through the API with
/// the same CSR by someone else): the agent must not pick one silently nor order again, but
/// stop with a distinct error asking the operator.
#[test]
fn reconciliation_finding_two_orders_stops_with_a_distinct_error() {
    let (env, _server) = webroot_env("two.faults-recon.test");
    env.sandbox.inject(
        Fault::new(FaultKind::DropAfterApply)
            .method("POST")
            .path(ORDER_PATH),
    );
    renew_with(&env, &[]).expect_failure();
    assert_eq!(env.billed(), 1);
    let rec = env.record("www").expect("record");
    let csr = find_csr(&rec).unwrap_or_else(|| panic!("the record keeps its CSR: {rec:#}"));
    place_order_with_csr(&env, &csr);
    assert_eq!(env.billed(), 2);

    let out = run_env(&env, &["--json", "renew", "--wait", "5", "--force"], &[]);
    out.expect_failure();
    assert_eq!(env.billed(), 2, "no third order\n{}", out.describe());
    let error = out.outcome("www")["error"]
        .as_str()
        .unwrap_or_default()
        .to_string();
    assert!(
        error.contains("2 orders carry this certificate's CSR") && error.contains("adopt"),
        "a distinct error naming both orders and the way out: {error}"
    );
    // Still nothing ordered on the next run.
    run_env(&env, &["--json", "renew", "--wait", "5", "--force"], &[]).expect_code(1);
    assert_eq!(env.billed(), 2);
}

/// The first string in `v` holding a PEM certificate request.
fn find_csr(v: &serde_json::Value) -> Option<String> {
    match v {
        serde_json::Value::String(s) if s.contains("BEGIN CERTIFICATE REQUEST") => Some(s.clone()),
        serde_json::Value::Array(a) => a.iter().find_map(find_csr),
        serde_json::Value::Object(o) => o.values().find_map(find_csr),
        _ => None,
    }
}

/// Places an order with `csr` through the partner API, as another client would.
fn place_order_with_csr(env: &TestEnv, csr: &str) {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    rt.block_on(async {
        let ca = fs::read(env.sandbox.api_ca_path()).unwrap();
        let client = reqwest::Client::builder()
            .add_root_certificate(reqwest::Certificate::from_pem(&ca).unwrap())
            .build()
            .unwrap();
        let base = env.sandbox.base_url().trim_end_matches('/').to_string();
        let signin: serde_json::Value = client
            .post(format!("{base}/api/v1/users/signin"))
            .json(&serde_json::json!({"login": support::env::LOGIN, "password": support::env::PASSWORD}))
            .send()
            .await
            .unwrap()
            .json()
            .await
            .unwrap();
        let token = signin["auth_token"].as_str().unwrap().to_string();
        let order = serde_json::json!({
            "order": {"items": [{
                "nomenclature_id": 1101,
                "days": 365,
                "csr": csr,
                "domain_name": "two.faults-recon.test",
                "dcv_type": "HTTP_CSR_HASH",
                "ssl_server_software_id": 0,
                "country_name": "DE", "region_name": "Berlin", "city_name": "Berlin",
            }]}
        });
        let resp = client
            .post(format!("{base}{ORDER_PATH}"))
            .header("X-AUTH-TOKEN", token)
            .json(&order)
            .send()
            .await
            .unwrap();
        let status = resp.status();
        let text = resp.text().await.unwrap();
        assert!(status.is_success(), "second order placed: {status} {text}");
    });
}

/// The agent's clock is three days ahead of the API's `Date`: billed actions must be blocked
/// with an error about the clock, before any order.
#[test]
fn clock_far_from_the_api_blocks_orders() {
    let (env, _server) = webroot_env("clock.faults-crash.test");
    let offset = (3 * 86_400).to_string();
    let out = renew_with(
        &env,
        &[(support::scenario::CLOCK_OFFSET_ENV, offset.as_str())],
    );
    out.expect_failure();
    assert_eq!(env.order_posts(), 0, "no order\n{}", out.describe());
    assert!(
        out.text().to_lowercase().contains("clock"),
        "the error is about the clock\n{}",
        out.describe()
    );
}

/// The certificates of [`batch_crash`]: installed in one batch by one run.
const BATCH: [&str; 4] = ["w0", "w1", "w2", "w3"];

/// `name`'s record as the state directory holds it (it must parse).
fn record(env: &TestEnv, name: &str) -> serde_json::Value {
    let path = env.state_dir().join(format!("certs/{name}.json"));
    let text = fs::read_to_string(&path).unwrap();
    serde_json::from_str(&text).unwrap_or_else(|e| panic!("{}: {e}: {text}", path.display()))
}

/// The serials of `name`'s `installed` journal lines, in order.
fn installed_lines(env: &TestEnv, name: &str) -> Vec<String> {
    env.journal()
        .lines()
        .map(|l| serde_json::from_str::<serde_json::Value>(l).unwrap())
        .filter(|l| l["certificate"] == name && l["event"] == "installed")
        .map(|l| {
            l["detail"]["serial"]
                .as_str()
                .unwrap_or_default()
                .to_owned()
        })
        .collect()
}

/// Four certificates issued by one run and installed in one batch, the run aborted at `point`
/// while the batch is recorded: each record is either as it was (not installed) or installed,
/// `renamed` of them installed; every install whose files went live is in the journal and
/// the audit log (written before the records), whose chain is intact. The next run installs
/// the rest without another order.
fn batch_crash(point: &str, renamed: usize) {
    let mut env = TestEnv::new();
    let webroot = env.path("www-root");
    fs::create_dir_all(&webroot).unwrap();
    let server = serve_webroot(&webroot);
    env.sandbox.set_dcv_ports(server.port, 0);
    for name in BATCH {
        let domain = format!("{name}.{point}.batch-crash.test");
        let mut spec = env.cert_spec(name, &[domain.as_str()], "none");
        spec.publish = Publish::Webroot(webroot.clone());
        spec.configtest_command = Some(vec!["/bin/true".into()]);
        spec.reload_command = Some(vec!["/bin/true".into()]);
        env.certs.push(spec);
    }
    crash_at(&env, point);
    assert_eq!(env.billed(), BATCH.len() as u64);
    assert_state_parses(&env);
    let mut installed = 0;
    for name in BATCH {
        let rec = record(&env, name);
        let lines = installed_lines(&env, name);
        assert_eq!(lines.len(), 1, "{name}: {}", env.journal());
        if let Some(serial) = rec["installed"]["serial"].as_str() {
            installed += 1;
            assert_eq!(lines, [serial.to_owned()], "{name}");
            assert_pair(&env, name);
        } else {
            assert!(rec["installed"].is_null(), "{name}: {rec}");
        }
    }
    assert_eq!(installed, renamed, "records installed at '{point}'");
    let verify = env.agent(["audit", "--verify"]).run();
    verify.expect_code(0);
    let audited = fs::read_to_string(env.state_dir().join("audit.log")).unwrap();
    assert_eq!(
        audited.matches("\"event\":\"installed\"").count(),
        BATCH.len(),
        "{audited}"
    );

    let mut second = renew_with(&env, &[]);
    if second.code != Some(0) {
        second = run_env(&env, &["--json", "renew", "--wait", "30", "--force"], &[]);
    }
    second.expect_code(0);
    assert_eq!(env.billed(), BATCH.len() as u64, "no further order");
    for name in BATCH {
        let rec = record(&env, name);
        let serial = rec["installed"]["serial"].as_str().unwrap_or_default();
        let lines = installed_lines(&env, name);
        assert!(
            !lines.is_empty() && lines.iter().all(|s| s == serial),
            "{name}: {serial} {lines:?}"
        );
        assert_pair(&env, name);
        assert_no_install_leftovers(&env, name);
    }
    env.agent(["audit", "--verify"]).run().expect_code(0);
}

#[test]
fn crash_after_a_batch_is_journalled() {
    batch_crash("installs-journalled", 0);
}

#[test]
fn crash_after_a_batch_of_records_is_written() {
    batch_crash("records-written", 0);
}

#[test]
fn crash_after_the_first_record_of_a_batch_is_renamed() {
    batch_crash("record-renamed", 1);
}

/// A state file edited (or damaged) into order bookkeeping no run writes: an intent beside the
/// known order is refused naming the file, and a reissue left without its order is followed
/// as that order's reissue. Neither leads to a second billed order.
#[test]
fn an_edited_record_never_orders_a_second_time() {
    let (env, _server) = webroot_env("edited.faults-crash.test");
    renew_with(&env, &[]).expect_code(0);
    assert_eq!(env.billed(), 1);
    let rec = record(&env, "www");
    let id = rec["order"]["certificate_id"].as_u64().unwrap();
    let serial = rec["installed"]["serial"].clone();

    env.edit_record("www", |r| {
        r["intent"] = serde_json::json!({"csr_sha256": "AB".repeat(32),
            "common_name": "edited.faults-crash.test", "created_at": "2026-01-01T00:00:00Z",
            "product_id": 1, "price": null});
    });
    let out = run_env(&env, &["--json", "renew", "--wait", "5", "--force"], &[]);
    let error = out.outcome("www")["error"]
        .as_str()
        .unwrap_or_default()
        .to_string();
    let path = env.state_dir().join("certs/www.json");
    assert!(
        error.contains(&path.display().to_string())
            && error.contains("contradictory order bookkeeping")
            && error.contains(&format!("certificate {id}"))
            && !error.contains("move it aside"),
        "{}",
        out.describe()
    );
    assert_ne!(out.code, Some(0));
    assert_eq!((env.billed(), env.order_posts()), (1, 1), "nothing ordered");

    // The order gone, a confirmed reissue of it left: read as that order's reissue.
    env.edit_record("www", |r| {
        r["intent"] = serde_json::Value::Null;
        r["order"] = serde_json::Value::Null;
        r["reissue"] = serde_json::json!({"certificate_id": id, "csr_sha256": "CD".repeat(32),
            "previous_serial": serial, "requested_at": "2026-01-01T00:00:00Z",
            "confirmed": true});
    });
    let out = run_env(&env, &["--json", "renew", "--wait", "5", "--force"], &[]);
    assert_eq!(
        (env.billed(), env.order_posts()),
        (1, 1),
        "no second order\n{}",
        out.describe()
    );
}
