//! Billing safety end to end: every `POST /api/v1/order` is billed, so a lost answer, a crash
//! between intent and answer, a refused order, a missing permission, a price limit and two
//! overlapping runs must each end with exactly the orders the operator asked for.

use crate::support;

use std::time::Duration;

use nix::sys::signal::{Signal, kill};
use nix::unistd::Pid;
use partner_sandbox::{Fault, FaultKind};
use support::env::{ORDER_PATH, Publish, TestEnv, wait_until};

fn standalone_env(domain: &str) -> TestEnv {
    let mut env = TestEnv::new();
    let spec = env.standalone_spec("www", &[domain]);
    env.certs.push(spec);
    env
}

/// Makes the sandbox answer `POST /order` with `kind`.
fn fault_at_the_order(env: &TestEnv, kind: FaultKind) {
    env.sandbox
        .inject(Fault::new(kind).method("POST").path(ORDER_PATH));
}

/// The run after one that lost the order's answer: it adopts the order the sandbox billed
/// and installs it, ordering nothing more (one order billed, one `POST /order` in all).
fn next_run_adopts_the_order(env: &TestEnv) {
    let again = env.renew();
    again.expect_code(0);
    again.installed_serial("www");
    assert_eq!(env.billed(), 1, "no second order");
    assert_eq!(env.order_posts(), 1, "POST /order sent once in total");
    let rec = env.record("www").unwrap();
    assert_eq!(rec["order"]["adopted"], true, "{rec:#}");
    assert!(rec["intent"].is_null(), "{rec:#}");
}

/// Guards reconciliation of a lost answer: the sandbox bills the order and drops the
/// connection; the run fails and keeps the intent; the next run finds the order in the list
/// by its CSR, adopts it and installs it, without a second order.
#[test]
fn lost_order_answer_is_adopted_not_repeated() {
    let env = standalone_env("lost.e2e-billing.test");
    fault_at_the_order(&env, FaultKind::DropAfterApply);

    let first = env.renew();
    first.expect_failure();
    assert_eq!(env.billed(), 1, "the order was billed");
    let rec = env.record("www").expect("record");
    assert!(!rec["intent"].is_null(), "intent kept: {rec:#}");
    assert!(rec["order"].is_null(), "no order known yet: {rec:#}");

    next_run_adopts_the_order(&env);
}

/// Guards the crash window: the agent is killed after the order was applied but before its
/// answer arrived; the next run adopts that order and installs it.
#[test]
fn agent_killed_between_intent_and_answer_is_reconciled() {
    let env = standalone_env("killed.e2e-billing.test");
    fault_at_the_order(&env, FaultKind::Delay { ms: 10_000 });
    let mut child = env.agent(["renew", "--wait", "30"]).spawn();
    let intent_and_billed = wait_until(Duration::from_secs(20), || {
        env.record("www").is_some_and(|r| !r["intent"].is_null()) && env.billed() == 1
    });
    let running = child.try_wait().unwrap().is_none();
    kill(Pid::from_raw(child.id() as i32), Signal::SIGKILL).unwrap();
    child.wait().unwrap();
    assert!(
        intent_and_billed,
        "intent recorded and order applied: {:?}",
        env.record("www")
    );
    assert!(
        running,
        "the agent was still waiting for the answer when killed"
    );
    assert!(env.record("www").unwrap()["order"].is_null());

    next_run_adopts_the_order(&env);
}

/// Guards the other side of the crash window: an order that never reached the CA (503 before
/// it was applied) leaves an intent that the list cannot resolve; further runs refuse to order
/// until the operator clears it, and then exactly one order is placed.
#[test]
fn unresolved_intent_blocks_orders_until_cleared() {
    let env = standalone_env("unresolved.e2e-billing.test");
    fault_at_the_order(&env, FaultKind::Status { status: 503 });
    env.renew().expect_failure();
    assert_eq!(env.billed(), 0);
    assert!(!env.record("www").unwrap()["intent"].is_null());

    let blocked = env.renew();
    blocked.expect_failure();
    assert!(
        blocked.text().contains("--clear-intent"),
        "the refusal says how to resolve it\n{}",
        blocked.describe()
    );
    assert_eq!(env.order_posts(), 1, "no new order while unresolved");
    assert_eq!(env.billed(), 0);

    let cleared = env
        .agent([
            "--json",
            "issue",
            "www",
            "--yes",
            "--clear-intent",
            "--wait",
            "30",
        ])
        .run();
    cleared.expect_code(0);
    cleared.installed_serial("www");
    assert_eq!(env.billed(), 1);
    assert_eq!(env.order_posts(), 2);
}

/// Guards 422 handling: the API's errors are all shown, nothing is billed, the intent is
/// cleared, the next run does not repeat the order at once, and a forced run may try again
/// (and is refused again, still unbilled).
#[test]
fn refused_order_lists_api_errors_and_clears_intent() {
    // Syntactically fine for the configuration, internal for the API.
    let env = standalone_env("www.e2e-billing.local");
    let out = env.renew();
    out.expect_code(1);
    let text = out.text();
    assert!(
        text.contains("is an internal name") && text.contains("contains the internal name"),
        "every API error is shown\n{}",
        out.describe()
    );
    assert!(text.contains("nothing was billed"), "{}", out.describe());
    assert_eq!(env.billed(), 0);
    let rec = env.record("www").unwrap();
    assert!(rec["intent"].is_null(), "intent cleared: {rec:#}");
    assert!(rec["order"].is_null());

    // A failed certificate is left alone for a while: no repeated order.
    env.renew().expect_code(1);
    assert_eq!(env.order_posts(), 1, "no order while backing off");
    let again = env.renew_force();
    again.expect_code(1);
    assert_eq!(env.order_posts(), 2, "--force tried again");
    assert_eq!(env.billed(), 0);
    assert!(env.record("www").unwrap()["intent"].is_null());
}

/// Guards the explicit yes: without `allow_orders` and without `--yes` nothing is ordered and
/// the refusal names the way out; `issue NAME --yes` then orders once.
#[test]
fn orders_need_allow_orders_or_yes() {
    let mut env = standalone_env("consent.e2e-billing.test");
    env.allow_orders = false;
    let out = env.renew();
    out.expect_failure();
    assert!(
        out.text().contains("issue www --yes"),
        "the refusal names the command\n{}",
        out.describe()
    );
    assert_eq!(env.order_posts(), 0, "no POST /order");
    assert_eq!(env.billed(), 0);
    assert!(env.record("www").is_none_or(|r| r["intent"].is_null()));

    let issued = env
        .agent(["--json", "issue", "www", "--yes", "--wait", "30"])
        .run();
    issued.expect_code(0);
    issued.installed_serial("www");
    assert_eq!(env.billed(), 1);
}

/// Guards `max_order_price`: a product above the limit is refused before any order.
#[test]
fn max_order_price_refuses_expensive_products() {
    let mut env = standalone_env("price.e2e-billing.test");
    env.max_order_price = Some("0.01".into());
    let out = env.renew();
    out.expect_failure();
    assert!(
        out.text().contains("max_order_price"),
        "the refusal names the limit\n{}",
        out.describe()
    );
    assert_eq!(env.order_posts(), 0, "no POST /order");
    assert_eq!(env.billed(), 0);
    assert!(env.record("www").is_none_or(|r| r["intent"].is_null()));
}

/// Guards overlapping runs: while one run waits for its order's answer, a second run neither
/// orders nor touches the state: with `--lock-wait 0` it reports the busy lock with the
/// pending exit code; waiting for the lock (the default) it finds the order placed.
#[test]
fn overlapping_runs_do_not_order_twice() {
    let env = standalone_env("overlap.e2e-billing.test");
    fault_at_the_order(&env, FaultKind::Delay { ms: 3_000 });
    let mut first = env.agent(["renew", "--wait", "30"]).spawn();
    assert!(wait_until(Duration::from_secs(20), || env.billed() == 1));
    let second = env
        .agent(["--lock-wait", "0", "--json", "renew", "--wait", "30"])
        .run();
    assert_eq!(second.code, Some(75), "{}", second.describe());
    assert_eq!(env.order_posts(), 1);
    let waiting = env.renew();
    assert_eq!(waiting.code, Some(0), "{}", waiting.describe());
    assert_eq!(env.order_posts(), 1);
    let status = first.wait().unwrap();
    assert!(status.success(), "the first run completes: {status:?}");
    assert_eq!(env.billed(), 1);
    assert!(!env.record("www").unwrap()["installed"].is_null());
}

/// Guards an unreadable answer to a billed order (200 with truncated JSON): the order exists,
/// so the run keeps the intent, and the next run adopts the order instead of repeating it.
#[test]
fn malformed_order_answer_is_reconciled() {
    let env = standalone_env("malformed.e2e-billing.test");
    fault_at_the_order(&env, FaultKind::MalformedJson);
    env.renew().expect_failure();
    assert_eq!(env.billed(), 1);
    assert!(!env.record("www").unwrap()["intent"].is_null());
    next_run_adopts_the_order(&env);
}

/// Guards the request timeout on the order: the answer comes after `api.timeout_secs`, the
/// order is not sent again within the run, and the next run adopts it.
#[test]
fn order_timeout_is_not_retried_and_is_reconciled() {
    let mut env = standalone_env("timeout.e2e-billing.test");
    env.api_extra = "timeout_secs = 2\n".into();
    fault_at_the_order(&env, FaultKind::Delay { ms: 5_000 });
    let first = env.renew();
    first.expect_failure();
    assert_eq!(
        env.order_posts(),
        1,
        "POST /order is never retried automatically"
    );
    assert_eq!(env.billed(), 1);
    next_run_adopts_the_order(&env);
}

/// Guards a token replaced by another sign-in right at the order: the 401 proves nothing was
/// billed; whatever the agent does (sign in again, or fail and order next run), exactly one
/// order ends up billed and installed.
#[test]
fn token_rotated_at_order_time_bills_once() {
    let env = standalone_env("rotated.e2e-billing.test");
    // Sign in once (the token is cached), then rotate it at the order.
    env.agent(["products"]).run().expect_code(0);
    env.sandbox.inject(
        Fault::new(FaultKind::RotateToken {
            login: support::env::LOGIN.into(),
        })
        .method("POST")
        .path(ORDER_PATH),
    );
    let first = env.renew();
    if first.code != Some(0) {
        assert_eq!(env.billed(), 0, "{}", first.describe());
        assert!(env.record("www").unwrap()["intent"].is_null());
        env.renew().expect_code(0);
    }
    assert_eq!(env.billed(), 1);
    assert!(!env.record("www").unwrap()["installed"].is_null());
}

/// Guards against an accidental second order: `issue NAME --yes` for a certificate that is
/// already ordered and installed places no order.
#[test]
fn issue_after_install_places_no_second_order() {
    let env = standalone_env("twice.e2e-billing.test");
    env.renew().expect_code(0);
    assert_eq!(env.billed(), 1);
    let out = env
        .agent(["--json", "issue", "www", "--yes", "--wait", "30"])
        .run();
    out.expect_code(0);
    assert_eq!(env.billed(), 1);
    assert_eq!(env.order_posts(), 1);
}

/// Guards per-certificate outcomes: one certificate refused by the API, another issued in the
/// same run; exit 3, the good one installed, only it billed.
#[test]
fn one_refused_one_issued_exits_3() {
    let mut env = standalone_env("good.e2e-billing.test");
    let Publish::Standalone(port) = env.certs[0].publish.clone() else {
        unreachable!()
    };
    let mut bad = env.cert_spec("bad", &["bad.e2e-billing.internal"], "none");
    bad.publish = Publish::Standalone(port);
    env.certs.insert(0, bad);
    let out = env.renew();
    out.expect_code(3);
    assert_eq!(out.outcome("bad")["outcome"], "failed");
    out.installed_serial("www");
    assert_eq!(env.billed(), 1);
}

/// A decimal amount from the products JSON (string or number) in cents.
fn cents(v: &serde_json::Value) -> i64 {
    let s = match v {
        serde_json::Value::String(s) => s.clone(),
        other => other.to_string(),
    };
    let (whole, frac) = s.split_once('.').unwrap_or((&s, "0"));
    let frac = format!("{frac:0<2}");
    whole.parse::<i64>().unwrap() * 100 + frac[..2].parse::<i64>().unwrap()
}

fn one_year(prices: &serde_json::Value) -> i64 {
    cents(
        &prices
            .as_array()
            .unwrap()
            .iter()
            .find(|p| p["period"] == 1)
            .expect("a one-year price")["value"],
    )
}

/// Guards `max_order_price` for multi-name products: the price of a ucc order includes the
/// additional names beyond those in the base price, so an order whose total is above the limit
/// is refused even though the product's base price is below it.
#[test]
fn max_order_price_counts_additional_names() {
    let names = [
        "www.e2e-ucc-price.test",
        "a.e2e-ucc-price.test",
        "b.e2e-ucc-price.test",
        "c.e2e-ucc-price.test",
        "d.e2e-ucc-price.test",
    ];
    let mut env = TestEnv::new();
    let mut spec = env.standalone_spec("www", &names);
    spec.product_id = 1103;
    env.certs.push(spec);

    let products = env.agent(["--json", "products"]).run();
    products.expect_code(0);
    let json = products.json();
    let list = json
        .as_array()
        .or_else(|| json["products"].as_array())
        .unwrap_or_else(|| panic!("products JSON: {json:#}"));
    let ucc = list.iter().find(|p| p["id"] == 1103).expect("product 1103");
    let base = one_year(&ucc["prices"]);
    let option = &ucc["options"][0];
    let included = option["quantity_from"].as_i64().expect("quantity_from") - 1;
    let per_name = one_year(&option["prices"]);
    let total = base + (names.len() as i64 - included) * per_name;
    assert!(total > base, "this order costs more than the base price");
    // Between the base price and what the order really costs.
    let limit = base + (total - base) / 2;
    env.max_order_price = Some(format!("{}.{:02}", limit / 100, limit % 100));

    let out = env.renew();
    assert_eq!(
        env.billed(),
        0,
        "an order of {}.{:02} was placed with max_order_price {}.{:02}\n{}",
        total / 100,
        total % 100,
        limit / 100,
        limit % 100,
        out.describe()
    );
    out.expect_failure();
    assert!(out.text().contains("max_order_price"), "{}", out.describe());
    assert_eq!(env.order_posts(), 0);
}
