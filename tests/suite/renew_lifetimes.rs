//! 47-day certificate lifetimes (CA/B Forum ballot SC-081, from March 2029) over a simulated
//! five-year subscription: the sandbox issues certificates of at most 47 days, both clocks
//! move forward day by day, and `cert-agent renew` runs like a timer. Every day the installed
//! file must cover that day; the only billed order besides the first is the one renewal order
//! the configuration allows at the end of the subscription.

use crate::support;

use std::time::{Duration, Instant};

use partner_sandbox::SandboxConfig;
use partner_sandbox::state::StateConfig;
use support::env::TestEnv;
use support::scenario::{self, PROLONG, REISSUE, matching, show};
use time::OffsetDateTime;

const DAY: Duration = Duration::from_secs(86_400);

/// Days between timer runs of the agent (47-day certificates fall due with 15 days left).
const TIMER_DAYS: u64 = 2;

/// Guards coverage with 47-day certificates across a five-year (1825-day) order: reissues
/// keep the installed certificate valid every day (due when a third of the lifetime is left,
/// moved before the reissue blackout), the last certificate ends with the subscription, a
/// renewal order is prepared (prolong, no billed order) while orders are not allowed, and once
/// they are, exactly one new billed order continues the coverage past the subscription's end.
#[test]
fn five_years_of_47_day_certificates_leave_no_gap_and_order_once() {
    let started = Instant::now();
    let state = StateConfig {
        max_cert_days: 47,
        ..StateConfig::default()
    };
    let mut env = TestEnv::with_sandbox(SandboxConfig::default().instant(true).state(state));
    let mut spec = env.standalone_spec("www", &["www.lifetimes.test"]);
    spec.extra = "days = 1825\nfamily = \"S\"\n".into();
    env.certs.push(spec);
    // Due when a third of the lifetime is left (15.7 days of 47), which comes before 10 days.
    env.agent_extra = "renew_before_days = 10\n".into();

    let first = scenario::renew_synced(&env);
    first.expect_code(0);
    first.installed_serial("www");
    assert_eq!(env.billed(), 1);
    let id = scenario::certificate_id(&env, "www");
    let details = env.sandbox.inspect(id).expect("the order");
    let sub_end = OffsetDateTime::from_unix_timestamp(
        details["subscription_valid_to"]
            .as_i64()
            .or_else(|| details["subscription_end"].as_i64())
            .unwrap_or_else(|| panic!("subscription end in {details:#}")),
    )
    .unwrap();
    let start = env.sandbox.now();
    let days_total = ((sub_end - start).whole_days()) as u64;
    assert!(
        (1820..=1826).contains(&days_total),
        "a five-year subscription: {days_total} days"
    );
    env.allow_orders = false;

    let mut gaps = Vec::new();
    let mut serials = vec![scenario::installed_leaf(&env, "www").serial];
    let mut failures = Vec::new();
    let mut prepared_on = None;
    let mut ordered_on = None;
    // Until 20 days past the subscription's end.
    for day in 1..=days_total + 20 {
        env.sandbox.advance(DAY);
        let now = env.sandbox.now();
        let days_left = (sub_end - now).whole_days();
        if prepared_on.is_some() && days_left < 10 {
            // The operator has not completed the prepared renewal: allow the agent to order.
            if !env.allow_orders {
                assert_eq!(env.billed(), 1, "nothing billed before orders are allowed");
            }
            env.allow_orders = true;
        }
        // The timer: every TIMER_DAYS days, daily in the last 60 days (the last reissue must
        // land in the day before the blackout).
        if day % TIMER_DAYS == 0 || days_left < 60 {
            let before = env.calls().len();
            let out = scenario::renew_synced(&env);
            if !matches!(out.code, Some(0)) {
                failures.push(format!("day {day}: {}", out.describe()));
            }
            let calls = env.calls()[before..].to_vec();
            if prepared_on.is_none() && !matching(&calls, "POST", PROLONG).is_empty() {
                prepared_on = Some(days_left);
            }
            if ordered_on.is_none() && calls.iter().any(|c| c.billed) {
                ordered_on = Some(days_left);
            }
        }
        let now = env.sandbox.now();
        let leaf = scenario::installed_leaf(&env, "www");
        let (from, to) = scenario::validity(&leaf.der);
        if !(from <= now && now < to) {
            gaps.push(format!("day {day} ({days_left} days left): {from} .. {to}"));
        }
        if serials.last() != Some(&leaf.serial) {
            serials.push(leaf.serial);
        }
    }
    let calls = env.calls();
    let reissues = matching(&calls, "POST", REISSUE).len();
    eprintln!(
        "47-day lifetimes over {days_total} days: {} certificates installed, {reissues} \
         reissues, {} gap days, renewal prepared {prepared_on:?} days before the end, new \
         order {ordered_on:?} days before the end, {:.1} s",
        serials.len(),
        gaps.len(),
        started.elapsed().as_secs_f64()
    );
    assert!(failures.is_empty(), "failed runs:\n{}", failures.join("\n"));
    assert!(
        gaps.is_empty(),
        "days without a valid installed certificate:\n{}",
        gaps.join("\n")
    );
    // Every ~30 days a reissue (47-day certificates, due with a third left).
    assert!(
        (50..=75).contains(&reissues),
        "{reissues} reissues for {days_total} days"
    );
    // No reissue was sent into the blackout (the sandbox would have refused it).
    assert!(
        calls
            .iter()
            .filter(|c| c.method == "POST" && scenario::path_matches(REISSUE, &c.path))
            .all(|c| c.status == 200),
        "{}",
        show(&calls)
    );
    // The end: a renewal order prepared inside the last 30 days, nothing billed for it; then
    // with orders allowed, exactly one new billed order before the subscription ends.
    let prepared = prepared_on.expect("a renewal order was prepared");
    assert!(
        (0..=30).contains(&prepared),
        "prepared {prepared} days before the end"
    );
    assert_eq!(env.billed(), 2, "the first order and one renewal order");
    let ordered = ordered_on.expect("one new order");
    assert!(
        (0..10).contains(&ordered),
        "ordered {ordered} days before the end"
    );
    let rec = env.record("www").unwrap();
    assert_eq!(rec["renews"], id, "{rec:#}");
}
