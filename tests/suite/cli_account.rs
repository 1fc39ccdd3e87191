//! The account and certificate commands through the real binary against the sandbox over
//! HTTPS: what each prints (tables and `--json`), exit codes, refusals that the API answers
//! with HTTP 200, role and account errors, and that no credential reaches the output.

use crate::support;

use std::fs;
use std::os::unix::fs::PermissionsExt;
use std::process::Command;

use support::env::{AgentOutput, TestEnv};

/// A world with one issued certificate (`www`, product 1101, one year); returns its ID.
fn issued_world() -> (TestEnv, u64) {
    let mut env = TestEnv::new();
    let spec = env.standalone_spec("www", &["www.cli-account.test"]);
    env.certs.push(spec);
    env.renew().expect_code(0);
    let id = env.record("www").unwrap()["order"]["certificate_id"]
        .as_u64()
        .unwrap();
    (env, id)
}

/// The binary with a configuration of its own (another login), `args` after `--config`.
fn as_login(env: &TestEnv, login: &str, args: &[&str]) -> AgentOutput {
    let text = env
        .config_text()
        .replace("partner@sandbox.test", login)
        .replace(
            &env.state_dir().display().to_string(),
            &env.path(&format!("state-{login}")).display().to_string(),
        );
    let config = env.path(&format!("config-{login}.toml"));
    fs::write(&config, text).unwrap();
    let out = Command::new(env!("CARGO_BIN_EXE_cert-agent"))
        .arg("--config")
        .arg(&config)
        .args(args)
        .output()
        .unwrap();
    AgentOutput {
        code: out.status.code(),
        stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
        args: args.iter().map(|s| (*s).to_owned()).collect(),
    }
}

/// Guards `products`: the catalogue as a table with prices per period and the account
/// currency, `--json` with the document's shapes (the `standart` spelling kept), and
/// `--eu-prices` in EUR.
#[test]
fn products_table_json_and_eu_prices() {
    let env = TestEnv::new();
    let out = env.agent(["products"]).run();
    out.expect_code(0);
    assert!(
        out.stdout.contains("1101") && out.stdout.contains("1y "),
        "{}",
        out.describe()
    );
    assert!(
        out.stdout.contains("USD"),
        "the account currency\n{}",
        out.describe()
    );
    let json = env.agent(["--json", "products"]).run();
    json.expect_code(0);
    let list = json.json();
    let p = list
        .as_array()
        .unwrap()
        .iter()
        .find(|p| p["id"] == 1101)
        .expect("product 1101");
    assert_eq!(p["type"], "standart");
    let eu = env.agent(["products", "--eu-prices"]).run();
    eu.expect_code(0);
    assert!(
        eu.stdout.contains("EUR") && !eu.stdout.contains("USD"),
        "{}",
        eu.describe()
    );
}

/// Guards `balance`: the five members with two decimals and their currency.
#[test]
fn balance_shows_five_members() {
    let env = TestEnv::new();
    let out = env.agent(["balance"]).run();
    out.expect_code(0);
    for member in ["balance", "reserved", "common", "prepayment", "available"] {
        let line = out
            .stdout
            .lines()
            .find(|l| l.starts_with(member))
            .unwrap_or_else(|| panic!("{member} missing\n{}", out.describe()));
        let amount = line.split_whitespace().nth(1).unwrap();
        let decimals = amount.split('.').nth(1).map_or(0, str::len);
        assert_eq!(decimals, 2, "{line}");
        assert!(line.ends_with("USD"), "{line}");
    }
}

/// Guards the certificate commands on an issued certificate: `list` (plain, paged with
/// scope), `show`, `status ID`, `software`, `countries`, `dcv emails`, and `--json` output
/// that parses.
#[test]
fn certificate_commands_show_an_issued_certificate() {
    let (env, id) = issued_world();
    let list = env.agent(["list"]).run();
    list.expect_code(0);
    assert!(
        list.stdout.contains(&id.to_string()) && list.stdout.contains("issued"),
        "{}",
        list.describe()
    );
    let paged = env
        .agent(["list", "--scope", "issued", "--page", "1"])
        .run();
    paged.expect_code(0);
    assert!(paged.stdout.contains("page 1 of 1"), "{}", paged.describe());
    let json = env.agent(["--json", "list", "--all"]).run();
    json.expect_code(0);
    assert_eq!(json.json()["certificates"][0]["internal_number"], id);

    let show = env.agent(["show", &id.to_string()]).run();
    show.expect_code(0);
    assert!(
        show.stdout.contains("www.cli-account.test"),
        "{}",
        show.describe()
    );
    let status = env.agent(["status", &id.to_string()]).run();
    status.expect_code(0);
    assert_eq!(status.stdout.trim(), format!("certificate {id}: issued"));
    let software = env.agent(["software", "1101"]).run();
    software.expect_code(0);
    assert!(software.stdout.contains("180"), "{}", software.describe());
    let countries = env.agent(["countries"]).run();
    countries.expect_code(0);
    assert!(countries.stdout.contains("DE"), "{}", countries.describe());
    let emails = env.agent(["dcv", "emails", "www.cli-account.test"]).run();
    emails.expect_code(0);
    assert!(emails.stdout.contains("admin@"), "{}", emails.describe());
}

/// Guards the 404 message: an unknown ID and another account's certificate are "not found",
/// with the API's own text, exit 1.
#[test]
fn unknown_and_foreign_certificates_are_not_found() {
    let (env, id) = issued_world();
    let out = env.agent(["show", "999999"]).run();
    out.expect_code(1);
    assert!(
        out.stderr.contains("certificate 999999 was not found"),
        "{}",
        out.describe()
    );
    let other = as_login(&env, "other@sandbox.test", &["status", &id.to_string()]);
    other.expect_code(1);
    assert!(
        other
            .stderr
            .contains(&format!("certificate {id} was not found")),
        "{}",
        other.describe()
    );
}

/// Guards refusals answered with HTTP 200 and `success: false` (resend on an issued
/// certificate, a second cancellation): shown as failures with the API's reason, exit 1;
/// `cancel` without `--yes` sends nothing and exits 2.
#[test]
fn refusals_and_cancel_confirmation() {
    let (env, id) = issued_world();
    let calls = env.calls().len();
    let no = env.agent(["cancel", &id.to_string()]).run();
    no.expect_code(2);
    assert!(no.stderr.contains("28 days"), "{}", no.describe());
    assert!(
        env.calls()[calls..]
            .iter()
            .all(|c| !c.path.ends_with("/cancel")),
        "nothing sent without --yes"
    );
    let resend = env.agent(["dcv", "resend", &id.to_string()]).run();
    resend.expect_code(1);
    assert!(resend.stderr.contains("refused"), "{}", resend.describe());
    let yes = env.agent(["cancel", &id.to_string(), "--yes"]).run();
    yes.expect_code(0);
    assert!(yes.stdout.contains("cancellation"), "{}", yes.describe());
    let again = env.agent(["cancel", &id.to_string(), "--yes"]).run();
    again.expect_code(1);
    assert!(
        again.stderr.contains("already cancelled"),
        "{}",
        again.describe()
    );
}

/// Guards roles: the billing-only login may not cancel (403 with the API's text), and a
/// retail account may not list products (403 "Not authorized for partnership").
#[test]
fn restricted_and_retail_accounts_get_the_apis_refusal() {
    let (env, id) = issued_world();
    let billing = as_login(
        &env,
        "billing@sandbox.test",
        &["cancel", &id.to_string(), "--yes"],
    );
    billing.expect_code(1);
    assert!(
        billing.stderr.contains("You do not have permission"),
        "{}",
        billing.describe()
    );
    let retail = as_login(&env, "retail@sandbox.test", &["products"]);
    retail.expect_code(1);
    assert!(
        retail.stderr.contains("Not authorized for partnership"),
        "{}",
        retail.describe()
    );
}

/// Guards the renewal token as a credential: `prolong` stores it (0600) and does not print
/// it; `--show-token` prints the one stored.
#[test]
fn prolong_stores_the_token_and_prints_it_only_when_asked() {
    let (env, id) = issued_world();
    let out = env.agent(["prolong", &id.to_string()]).run();
    out.expect_code(0);
    let file = env.state_dir().join(format!("prolongation/{id}.token"));
    let token = fs::read_to_string(&file).expect("token stored");
    assert!(!token.is_empty());
    assert_eq!(
        fs::metadata(&file).unwrap().permissions().mode() & 0o777,
        0o600
    );
    assert!(
        !out.text().contains(&token),
        "token printed\n{}",
        out.describe()
    );
    assert!(out.stdout.contains("--show-token"), "{}", out.describe());
    let shown = env
        .agent(["prolong", &id.to_string(), "--show-token"])
        .run();
    shown.expect_code(0);
    assert!(shown.stdout.contains(&token), "{}", shown.describe());
}

/// Guards `download`: the CA archive under the API's file name, the bundle to a chosen file,
/// and `-o -` to stdout (a ZIP).
#[test]
fn download_writes_the_archives() {
    let (env, id) = issued_world();
    let out = env.agent(["download", &id.to_string()]).run();
    out.expect_code(0);
    let zips: Vec<_> = fs::read_dir(&env.cwd)
        .unwrap()
        .filter_map(|e| e.ok())
        .filter(|e| e.file_name().to_string_lossy().ends_with(".zip"))
        .collect();
    assert_eq!(zips.len(), 1, "{}", out.describe());
    let bundle = env.path("bundle.zip");
    let out = env
        .agent([
            "download",
            &id.to_string(),
            "--bundle",
            "-o",
            bundle.to_str().unwrap(),
        ])
        .run();
    out.expect_code(0);
    assert!(fs::read(&bundle).unwrap().starts_with(b"PK"));
    let raw = Command::new(env!("CARGO_BIN_EXE_cert-agent"))
        .arg("--config")
        .arg(env.write_config())
        .args(["download", &id.to_string(), "--bundle", "-o", "-"])
        .output()
        .unwrap();
    assert!(raw.status.success());
    assert!(raw.stdout.starts_with(b"PK"));
}

/// Guards the auth token: at the most verbose level it appears in no output, and no request
/// URL ever carried it (sandbox call log).
#[test]
fn the_token_is_in_no_output_and_no_url() {
    let env = TestEnv::new();
    let out = env.agent(["-vv", "balance"]).run();
    out.expect_code(0);
    let cache = fs::read_to_string(env.state_dir().join("token")).expect("token cached");
    let token = serde_json::from_str::<serde_json::Value>(&cache)
        .ok()
        .and_then(|v| v["auth_token"].as_str().map(str::to_owned))
        .unwrap_or_else(|| cache.trim().to_owned());
    assert!(token.len() >= 16, "a token was cached");
    assert!(!out.text().contains(&token), "token in the output");
    assert!(env.calls().iter().all(|c| !c.query.contains(&token)));
}

/// Guards where configuration warnings are printed: once by a run that works on certificates
/// (`renew`), never by a command that only reads the account (`balance`), whose output would
/// otherwise repeat them on every call.
#[test]
fn configuration_warnings_belong_to_runs_not_to_account_commands() {
    let env = TestEnv::new();
    // The test configuration polls every second: below the API's 300 s, a warning.
    let warning = "at most one status call";
    let renew = env.agent(["renew"]).run();
    renew.expect_code(0);
    assert_eq!(renew.stderr.matches(warning).count(), 1, "{}", renew.stderr);
    let balance = env.agent(["balance"]).run();
    balance.expect_code(0);
    assert!(!balance.stderr.contains(warning), "{}", balance.stderr);
    let check = env.agent(["config", "check"]).run();
    check.expect_code(0);
    assert!(check.stderr.contains(warning), "{}", check.stderr);
}
