//! Money ahead, against the sandbox over HTTPS: `cert-agent forecast` prices the billed
//! renewals from the catalogue and sets them against the account's available balance (exact
//! figures: the partner account is in USD, product 1101 costs 8.80 a year and 16.72 for two);
//! `check` is WARNING when the balance does not cover the orders of the next 30 days,
//! CRITICAL for 7, WARNING when the balance cannot be read, and asks nothing with
//! `--no-balance`.

use crate::support;

use partner_sandbox::{Fault, FaultKind};
use support::env::TestEnv;
use time::format_description::well_known::Rfc3339;
use time::{Duration, OffsetDateTime};

const PARTNER: &str = "partner@sandbox.test";

/// `www` installed through the sandbox (product 1101, one year).
fn installed_env() -> TestEnv {
    let mut env = TestEnv::new();
    env.allow_orders = true;
    let spec = env.standalone_spec("www", &["www.forecast.test"]);
    env.certs.push(spec);
    env.renew().expect_code(0);
    env.allow_orders = false;
    env
}

/// The state renewals leave near the end of a subscription: a 90-day certificate (due with 30
/// days left, less up to 7 days of spread) runs to the end of the subscription `days_left`
/// from now, so only a new, billed order extends it.
fn subscription_ends_in(env: &TestEnv, days_left: i64) {
    let now = OffsetDateTime::now_utc();
    let at = |d: i64| (now + Duration::days(d)).format(&Rfc3339).unwrap();
    env.edit_record("www", |v| {
        v["installed"]["not_before"] = at(days_left - 90).into();
        v["installed"]["not_after"] = at(days_left).into();
        v["subscription"]["ends"] = at(days_left).into();
    });
}

fn price_of(item: &serde_json::Value) -> &str {
    item["price"].as_str().unwrap_or("null")
}

/// Guards the forecast's figures: a certificate without an order (billed now, two years at
/// 16.72) and one whose subscription ends in 50 days (billed in 13 to 20 days at 8.80); the
/// total, the available balance and whether it covers the total, in JSON and in the table.
#[test]
fn forecast_prices_billed_renewals_against_the_balance() {
    let mut env = installed_env();
    subscription_ends_in(&env, 50);
    let mut shop = env.cert_spec("shop", &["shop.forecast.test"], "none");
    shop.publish = support::env::Publish::Webroot(env.path("shop-root"));
    shop.extra = "days = 730\n".into();
    env.certs.push(shop);

    let out = env.agent(["--json", "forecast", "--days", "30"]).run();
    out.expect_code(0);
    let f = out.json();
    let items = f["items"].as_array().unwrap();
    assert_eq!(items.len(), 2, "{f:#}");
    assert_eq!(
        (items[0]["name"].as_str(), items[0]["kind"].as_str()),
        (Some("shop"), Some("order"))
    );
    assert_eq!(
        (price_of(&items[0]), items[0]["years"].as_u64()),
        ("16.72", Some(2))
    );
    assert_eq!(
        (items[1]["name"].as_str(), items[1]["kind"].as_str()),
        (Some("www"), Some("order"))
    );
    assert_eq!(price_of(&items[1]), "8.80");
    let due = OffsetDateTime::parse(items[1]["due"].as_str().unwrap(), &Rfc3339).unwrap();
    let in_days = (due - OffsetDateTime::now_utc()).whole_days();
    assert!((12..=20).contains(&in_days), "{in_days}: {f:#}");
    assert_eq!(f["total"], "25.52");
    assert_eq!(f["currency"], "USD");
    assert_eq!(f["available"]["currency"], "USD");
    assert_eq!(
        f["available"]["sum"]
            .as_str()
            .map(|s| s.trim_end_matches(".0")),
        Some("5000")
    );
    assert_eq!(f["covered"], true);

    // Ten days: only the order due now.
    let ten = env.agent(["--json", "forecast", "--days", "10"]).run();
    ten.expect_code(0);
    assert_eq!(ten.json()["total"], "16.72");

    // The table, with a balance one cent short.
    env.sandbox.set_payments(PARTNER, 2551).unwrap();
    let table = env.agent(["forecast"]).run();
    table.expect_code(0);
    for want in [
        "DUE",
        "shop",
        "order (2 y)",
        "16.72 USD",
        "8.80 USD",
        "Billed orders in the next 30 days: 2, total 25.52 USD",
        "Available balance: 25.51 USD (does NOT cover the total)",
    ] {
        assert!(
            table.stdout.contains(want),
            "{want:?}\n{}",
            table.describe()
        );
    }
}

/// Guards the forecast's reissues: free, inside the subscription, and no products call when
/// nothing billed falls due.
#[test]
fn a_reissue_inside_the_subscription_is_free() {
    let env = installed_env();
    env.sandbox.clear_calls();
    let out = env.agent(["--json", "forecast", "--days", "365"]).run();
    out.expect_code(0);
    let f = out.json();
    let items = f["items"].as_array().unwrap();
    assert_eq!(items[0]["kind"], "reissue", "{f:#}");
    assert_eq!(price_of(&items[0]), "0.00");
    // A year ahead reaches the end of the one-year subscription: a billed order.
    assert!(
        items
            .iter()
            .any(|i| i["kind"] == "order" && price_of(i) == "8.80"),
        "{f:#}"
    );

    let near = env.agent(["--json", "forecast", "--days", "7"]).run();
    near.expect_code(0);
    assert_eq!(near.json()["items"], serde_json::json!([]));
    assert_eq!(near.json()["total"], "0.00");
    env.sandbox.clear_calls();
    env.agent(["forecast", "--days", "7"]).run().expect_code(0);
    let paths: Vec<String> = env.calls().iter().map(|c| c.path.clone()).collect();
    assert!(
        !paths.iter().any(|p| p == "/api/v1/products"),
        "no products call without a billed order: {paths:?}"
    );
    assert_eq!(
        paths
            .iter()
            .filter(|p| *p == "/api/v1/billing/balance")
            .count(),
        1,
        "{paths:?}"
    );
}

fn balance_line(out: &support::env::AgentOutput) -> String {
    out.stdout
        .lines()
        .skip(1)
        .find(|l| l.contains(" balance: "))
        .unwrap_or_default()
        .to_owned()
}

/// Guards the check's balance levels: covered (OK), short of the 30 days' orders (WARNING),
/// short of the 7 days' (CRITICAL), not readable (WARNING saying so), and `--no-balance`
/// (no API call).
#[test]
fn check_warns_before_the_balance_runs_short() {
    let env = installed_env();
    // A billed order in 18 to 25 days.
    subscription_ends_in(&env, 55);
    env.sandbox.set_payments(PARTNER, 880).unwrap();
    let ok = env.agent(["check"]).run();
    ok.expect_code(0);
    assert!(
        ok.stdout.contains("'balance_available'=8.8") && ok.stdout.contains("'spend_30d'=8.80"),
        "{}",
        ok.describe()
    );

    env.sandbox.set_payments(PARTNER, 879).unwrap();
    let warning = env.agent(["check"]).run();
    warning.expect_code(1);
    assert!(
        warning.stdout.starts_with(
            "CERT-AGENT WARNING - balance: available 8.79 USD does not cover the 8.80 USD of \
             orders due within 30 days"
        ),
        "{}",
        warning.describe()
    );
    assert!(
        balance_line(&warning).starts_with("WARNING balance: "),
        "{}",
        warning.describe()
    );
    let json = env.agent(["--json", "check"]).run();
    json.expect_code(1);
    let money = &json.json()["money"];
    assert_eq!(money["level"], "WARNING");
    assert_eq!(money["spend_30d"], "8.80");
    assert_eq!(money["spend_7d"], "0.00");

    // Due now: the next 7 days are not covered.
    subscription_ends_in(&env, 31);
    let critical = env.agent(["check"]).run();
    critical.expect_code(2);
    assert!(
        critical.stdout.starts_with(
            "CERT-AGENT CRITICAL - balance: available 8.79 USD does not cover the 8.80 USD of \
             orders due within 7 days"
        ),
        "{}",
        critical.describe()
    );

    // Nothing asked with --no-balance.
    env.sandbox.clear_calls();
    env.agent(["check", "--no-balance"]).run().expect_code(0);
    assert!(env.calls().is_empty(), "{:?}", env.calls());

    // The balance call fails: a WARNING that says so, never OK.
    env.sandbox.set_payments(PARTNER, 500_000).unwrap();
    env.sandbox.inject(
        Fault::new(FaultKind::Status { status: 503 })
            .path("/api/v1/billing/balance")
            .times(20),
    );
    let unknown = env.agent(["check"]).run();
    unknown.expect_code(1);
    assert!(
        balance_line(&unknown).contains("the balance could not be read"),
        "{}",
        unknown.describe()
    );
}

/// Guards status's money line: none before `money.json` exists; after `forecast` read the
/// balance, the available 8.79 USD against the 8.80 USD order due within 30 days, not covered
/// and status itself calls nothing.
#[test]
fn status_shows_a_balance_short_of_the_next_30_days() {
    let env = installed_env();
    subscription_ends_in(&env, 55);
    env.sandbox.set_payments(PARTNER, 879).unwrap();
    let table = env.agent(["status"]).run();
    table.expect_code(0);
    assert!(!table.stdout.contains("balance:"), "{}", table.describe());

    env.agent(["forecast"]).run().expect_code(0);
    env.sandbox.clear_calls();
    let json = env.agent(["--json", "status"]).run();
    json.expect_code(0);
    assert!(json.json().is_array(), "{}", json.describe());
    let table = env.agent(["status"]).run();
    table.expect_code(0);
    let line = table
        .stdout
        .lines()
        .find(|l| l.starts_with("balance: "))
        .unwrap_or_else(|| panic!("no money line\n{}", table.describe()));
    assert!(
        line.starts_with("balance: 8.79 USD available (read ")
            && line.ends_with(
                "billed renewals of the next 30 days: 8.80 USD, NOT covered: add funds before \
                 they fall due (cert-agent forecast)"
            ),
        "{line}"
    );
    assert!(env.calls().is_empty(), "status reads local state only");

    env.sandbox.set_payments(PARTNER, 880).unwrap();
    env.agent(["forecast"]).run().expect_code(0);
    let covered = env.agent(["status"]).run();
    assert!(
        covered
            .stdout
            .lines()
            .any(|l| l.starts_with("balance: 8.8 USD available") && l.ends_with(", covered")),
        "{}",
        covered.describe()
    );

    // A damaged money.json is no money line, never a failed status.
    std::fs::write(
        env.state_dir().join("money.json"),
        "{\"at\": 12, \"spend_30d\": [",
    )
    .unwrap();
    let damaged = env.agent(["status"]).run();
    damaged.expect_code(0);
    assert!(
        !damaged.stdout.contains("balance:"),
        "{}",
        damaged.describe()
    );
}

/// Guards the money after a retirement while the configuration still lists the certificate:
/// its order due now (8.80 USD) counted before; after `retire`, `forecast` has no billed
/// order, `status`'s money line no 8.80 USD and `check` no 8.80 in its perfdata.
#[test]
fn a_retired_certificate_is_no_billed_order() {
    let env = installed_env();
    subscription_ends_in(&env, 31);
    env.sandbox.set_payments(PARTNER, 879).unwrap();
    let before = env.agent(["forecast"]).run();
    before.expect_code(0);
    assert!(
        before
            .stdout
            .contains("Billed orders in the next 30 days: 1, total 8.80 USD"),
        "{}",
        before.describe()
    );

    env.agent(["retire", "www", "--yes"]).run().expect_code(0);
    let status = env.agent(["status"]).run();
    let money = status
        .stdout
        .lines()
        .find(|l| l.starts_with("balance: "))
        .unwrap_or_else(|| panic!("no money line\n{}", status.describe()));
    assert!(
        !money.contains("8.80") && !money.contains("NOT covered"),
        "{money}"
    );
    let check = env.agent(["check"]).run();
    assert!(
        !check.stdout.contains("'spend_30d'=8.80") && !check.stdout.contains("does not cover"),
        "{}",
        check.describe()
    );
    let after = env.agent(["--json", "forecast"]).run();
    after.expect_code(0);
    let f = after.json();
    assert_eq!(f["items"].as_array().map(Vec::len), Some(0), "{f:#}");
    assert_eq!(f["total"], "0.00");
    let text = env.agent(["forecast"]).run();
    assert!(
        text.stdout
            .contains("Billed orders in the next 30 days: 0, total 0.00 USD"),
        "{}",
        text.describe()
    );
}
