//! Polling discipline with many pending certificates whose validation does not pass (the
//! sandbox's validator fetches from a port where nothing listens), judged from the sandbox's
//! call log: no certificate is polled more often than `poll_interval_secs`, across runs, and
//! certificates in progress are polled with the list call (`scope=api_in_progress`, 50 per
//! page) instead of one status call each.

use crate::support;

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use partner_sandbox::{CallRecord, SandboxConfig};
use support::env::{Publish, TestEnv};
use support::scenario::{self, DCV, LIST, STATUS, matching, path_matches};
use support::webserver::free_port;
use time::OffsetDateTime;

/// The list's page size (document, Limits).
const PAGE: usize = 50;

/// `count` standalone certificates `cNNN.polling.test` on one shared DCV listener, none of
/// which can validate.
fn pending_world(config: SandboxConfig, count: usize, interval: u64) -> TestEnv {
    let mut env = TestEnv::with_sandbox(config);
    let port = free_port();
    env.sandbox.set_dcv_ports(free_port(), 0);
    for i in 0..count {
        let name = format!("c{i:03}");
        let mut spec = env.cert_spec(&name, &[&format!("{name}.polling.test")], "none");
        spec.publish = Publish::Standalone(port);
        env.certs.push(spec);
    }
    env.poll_interval_secs = interval;
    env
}

/// What the call log shows about polling since `t0`.
struct Polling {
    /// Per certificate ID: times (virtual seconds since t0) of GET status / GET dcv.
    per_cert: BTreeMap<String, Vec<f64>>,
    /// Per certificate ID: times of its polling steps — a status-type call or the details
    /// call that follows a poll (to publish validation), calls within 10 s counting as one.
    steps: BTreeMap<String, Vec<f64>>,
    /// Pages of each list round (a round starts at page 1).
    rounds: Vec<Vec<String>>,
    lists: usize,
    status: usize,
}

impl Polling {
    fn read(calls: &[CallRecord], t0: OffsetDateTime) -> Self {
        let mut per_cert: BTreeMap<String, Vec<f64>> = BTreeMap::new();
        for c in calls.iter().filter(|c| {
            c.method == "GET" && (path_matches(STATUS, &c.path) || path_matches(DCV, &c.path))
        }) {
            let id = c.path.split('/').nth(4).unwrap().to_string();
            per_cert
                .entry(id)
                .or_default()
                .push((c.time - t0).as_seconds_f64());
        }
        let mut steps: BTreeMap<String, Vec<f64>> = BTreeMap::new();
        for c in calls.iter().filter(|c| {
            c.method == "GET"
                && (path_matches(STATUS, &c.path)
                    || path_matches(DCV, &c.path)
                    || path_matches("/api/v1/ssl_certificates/*", &c.path))
        }) {
            let id = c.path.split('/').nth(4).unwrap().to_string();
            let t = (c.time - t0).as_seconds_f64();
            let times = steps.entry(id).or_default();
            if times.last().is_none_or(|last| t - last > 10.0) {
                times.push(t);
            }
        }
        let lists = matching(calls, "GET", LIST);
        let mut rounds: Vec<Vec<String>> = Vec::new();
        for c in &lists {
            assert!(
                c.query.contains("scope=api_in_progress"),
                "list without the in-progress scope: {}",
                c.query
            );
            let page = c
                .query
                .split('&')
                .find_map(|kv| kv.strip_prefix("page="))
                .unwrap_or_else(|| panic!("list without page: {}", c.query))
                .to_string();
            if page == "1" || rounds.is_empty() {
                rounds.push(Vec::new());
            }
            rounds.last_mut().unwrap().push(page);
        }
        Polling {
            per_cert,
            steps,
            rounds,
            lists: lists.len(),
            status: matching(calls, "GET", STATUS).len(),
        }
    }

    /// Panics when a certificate had two status-type calls closer than `interval` virtual
    /// seconds; returns the closest gap.
    fn assert_spacing(&self, interval: f64) -> f64 {
        let mut closest = f64::INFINITY;
        for (id, times) in &self.per_cert {
            for w in times.windows(2) {
                let gap = w[1] - w[0];
                closest = closest.min(gap);
                assert!(
                    gap >= interval,
                    "certificate {id}: status-type calls {gap:.1} virtual s apart (interval \
                     {interval} s): {times:?}"
                );
            }
        }
        closest
    }

    /// Panics when a certificate was stepped (polled) twice within `interval` virtual
    /// seconds; returns the closest gap.
    fn assert_step_spacing(&self, interval: f64) -> f64 {
        let mut closest = f64::INFINITY;
        for (id, times) in &self.steps {
            for w in times.windows(2) {
                let gap = w[1] - w[0];
                closest = closest.min(gap);
                assert!(
                    gap >= interval,
                    "certificate {id}: polled {gap:.1} virtual s apart (interval {interval} \
                     s): {times:?}"
                );
            }
        }
        closest
    }

    fn assert_pages(&self, count: usize) {
        let max_pages = count.div_ceil(PAGE);
        for r in &self.rounds {
            assert!(r.len() <= max_pages, "a round of {} pages: {r:?}", r.len());
        }
    }
}

/// Guards the polling limit and bulk polling over a simulated hour of timer runs (every
/// 5 minutes, both clocks moved forward) with 200 pending certificates and a 15-minute
/// interval: status-type calls (GET status, GET dcv) per certificate never closer than the
/// interval, also across runs; every polling round is one `list` with `scope=api_in_progress`
/// of at most ceil(200/50) pages instead of 200 status calls, and validation published once is
/// not asked for again.
#[test]
fn two_hundred_pending_certificates_are_polled_in_bulk_within_the_limit() {
    const COUNT: usize = 200;
    const INTERVAL: u64 = 900;
    const TIMER: u64 = 300;
    let started = Instant::now();
    let env = pending_world(SandboxConfig::default(), COUNT, INTERVAL);

    // The first run orders all 200 and polls them once.
    let t0 = env.sandbox.now();
    let first = scenario::run_synced(&env, &["--json", "renew", "--wait", "0"]);
    first.expect_code(75);
    assert_eq!(env.billed(), COUNT as u64, "one order per certificate");
    let ordered_in = started.elapsed();

    // A timer run every 100 s for an hour; each run polls what is due and leaves.
    let mut runs = 1;
    while (env.sandbox.now() - t0).whole_seconds() < 3600 {
        env.sandbox.advance(Duration::from_secs(TIMER));
        let out = scenario::run_synced(&env, &["--json", "renew", "--wait", "0"]);
        out.expect_code(75);
        runs += 1;
    }
    assert_eq!(env.billed(), COUNT as u64, "no further order");

    let calls = env.calls();
    let p = Polling::read(&calls, t0);
    p.assert_spacing(INTERVAL as f64);
    let closest = p.assert_step_spacing(INTERVAL as f64);
    let polled = p.steps.values().map(Vec::len).min().unwrap_or(0);
    p.assert_pages(COUNT);
    let details = calls
        .iter()
        .filter(|c| c.method == "GET" && path_matches("/api/v1/ssl_certificates/*", &c.path))
        .count();
    eprintln!(
        "{COUNT} pending certificates, a simulated hour of {runs} timer runs ({:.1} s real, \
         orders {:.1} s): {} list rounds, {} list calls, {} status calls, {} status-type \
         calls, {details} details calls, each certificate polled at least {polled} times, \
         closest per-certificate gap {closest:.0} s",
        started.elapsed().as_secs_f64(),
        ordered_in.as_secs_f64(),
        p.rounds.len(),
        p.lists,
        p.status,
        p.per_cert.values().map(Vec::len).sum::<usize>(),
    );
    assert!(
        p.rounds.len() >= 3600 / INTERVAL as usize - 1,
        "every certificate polled about every {INTERVAL} s, by list: {} rounds",
        p.rounds.len()
    );
    assert!(
        p.status <= COUNT,
        "{} status calls although the list reports every pending certificate",
        p.status
    );
    // Every pending certificate was checked by the last round (the list stands in for its
    // status call): its recorded last check is recent.
    for i in 0..COUNT {
        let rec = env.record(&format!("c{i:03}")).expect("record");
        let last = rec["last_poll"].as_str().expect("last_poll recorded");
        let last = OffsetDateTime::parse(last, &time::format_description::well_known::Rfc3339)
            .expect("RFC 3339");
        let age = (env.sandbox.now() - last).whole_seconds();
        assert!(
            age <= (INTERVAL + TIMER) as i64,
            "certificate c{i:03} last checked {age} s ago"
        );
    }
}

/// Guards bulk polling inside one long run: 20 pending certificates, the sandbox at 300
/// virtual seconds per real second and a 1-second interval (= the documented 5 minutes), a
/// run that waits a simulated hour. Every round must be a list call; the status call is for
/// certificates the list cannot answer, not one per certificate per round.
#[test]
fn one_long_run_keeps_polling_in_bulk() {
    const COUNT: usize = 20;
    let scale = 300.0;
    let env = pending_world(SandboxConfig::default().time_scale(scale), COUNT, 1);
    let t0 = env.sandbox.now();
    let out = env.agent(["--json", "renew", "--wait", "12"]).run();
    out.expect_code(75);
    let calls = env.calls();
    let p = Polling::read(&calls, t0);
    // One real second between answers, less a little for the answer's own latency.
    p.assert_spacing(0.9 * scale);
    p.assert_pages(COUNT);
    eprintln!(
        "one run, {COUNT} certificates, {:.0} virtual s: {} list calls, {} status calls",
        (env.sandbox.now() - t0).as_seconds_f64(),
        p.lists,
        p.status
    );
    assert!(p.rounds.len() >= 8, "{} list rounds", p.rounds.len());
    assert!(
        p.status <= COUNT,
        "{} status calls for {COUNT} certificates in bulk rounds",
        p.status
    );
}

/// Guards `--wait`: a run whose certificates are due again before a round is over still
/// ends when its wait is over (exit 75), instead of polling until they are issued.
#[test]
fn a_run_ends_when_its_wait_is_over() {
    let env = pending_world(SandboxConfig::default().time_scale(300.0), 200, 1);
    let started = Instant::now();
    let out = env.agent(["--json", "renew", "--wait", "4"]).run();
    out.expect_code(75);
    assert!(
        started.elapsed() < Duration::from_secs(60),
        "the run took {:?} with --wait 4",
        started.elapsed()
    );
}

/// Guards the waiting line: `issue` waits between status checks (the polling rule) and says
/// for what and until when on standard error — which here is no terminal — before its first
/// wait; `--json` and `--quiet` print no such line.
#[test]
fn issue_says_what_it_waits_for_and_until_when_without_a_terminal() {
    let mut env = TestEnv::new();
    let spec = env.standalone_spec("www", &["www.waiting-line.test"]);
    env.certs.push(spec);
    env.allow_orders = false;
    let out = env.agent(["issue", "www", "--yes", "--wait", "30"]).run();
    out.expect_code(0);
    let line = out
        .stderr
        .lines()
        .find(|l| l.starts_with("www: waiting for the CA to validate and issue the order"))
        .unwrap_or_else(|| panic!("no waiting line\n{}", out.describe()));
    assert!(
        line.contains("(next status check at ")
            && line.contains(" UTC, polling every 1 s); Ctrl-C stops and a later run continues"),
        "{line}"
    );
    assert!(env.record("www").unwrap()["installed"]["serial"].is_string());

    // The same issue with `--json` or `--quiet`: the same waits, no line.
    for flag in ["--json", "--quiet"] {
        let mut env = TestEnv::new();
        let spec = env.standalone_spec("www", &["www.waiting-line.test"]);
        env.certs.push(spec);
        env.allow_orders = false;
        let out = env
            .agent([flag, "issue", "www", "--yes", "--wait", "30"])
            .run();
        out.expect_code(0);
        assert!(
            !out.stderr.contains("waiting for the CA"),
            "{flag}\n{}",
            out.describe()
        );
    }
}

/// Four certificates `{prefix}0` … `{prefix}3` for `{prefix}N.{domain}`, validated by the
/// agent's own standalone server, under the Partner API's 5-minute polling rule.
fn four_new_orders(env: &mut TestEnv, prefix: &str, domain: &str) {
    let port = free_port();
    env.sandbox.set_dcv_ports(port, 0);
    for i in 0..4 {
        let name = format!("{prefix}{i}");
        let mut spec = env.cert_spec(&name, &[&format!("{name}.{domain}")], "none");
        spec.publish = Publish::Standalone(port);
        env.certs.push(spec);
    }
    env.poll_interval_secs = 300;
}

/// Under the 5-minute polling rule, new orders whose validation passes are installed in the
/// same run within seconds, not after the next status check: the run watches the list of
/// certificates in progress (1 s, 2 s, 4 s … apart) and downloads each order that left it.
/// No order gets a status call after its first details call.
#[test]
fn orders_that_leave_the_in_progress_list_are_installed_before_the_next_status_check() {
    let mut env = TestEnv::new();
    four_new_orders(&mut env, "w", "watch.test");
    // A wait far shorter than the polling interval: only the list watch can finish the run.
    let out = env.agent(["--json", "renew", "--wait", "60"]).run();
    out.expect_code(0);
    for i in 0..4 {
        out.installed_serial(&format!("w{i}"));
    }
    let calls = env.calls();
    assert_eq!(matching(&calls, "GET", STATUS).len(), 0, "no status call");
    let details = matching(&calls, "GET", "/api/v1/ssl_certificates/*").len();
    assert_eq!(details, 4, "one details call per order");
    let lists = matching(&calls, "GET", LIST);
    assert!(!lists.is_empty(), "the list was watched");
    assert!(
        lists
            .iter()
            .all(|c| c.query.contains("scope=api_in_progress")),
        "{lists:?}"
    );
}

/// A new order's validation is published right after the order is placed, before the run
/// places the next one (one at a time: order, details, order, details …), so that the CA
/// validates the first orders while the run places the others; no round of list calls comes
/// between the orders and the list watch, and no order gets a status call.
#[test]
fn each_new_order_is_published_before_the_next_order_is_placed() {
    let mut env = TestEnv::new();
    env.agent_extra = "concurrency = 1\n".into();
    four_new_orders(&mut env, "p", "first-check.test");
    let out = env.agent(["--json", "renew", "--wait", "60"]).run();
    out.expect_code(0);
    for i in 0..4 {
        out.installed_serial(&format!("p{i}"));
    }
    let calls = env.calls();
    let kinds: Vec<&str> = calls
        .iter()
        .filter_map(|c| match c.method.as_str() {
            "POST" if c.path == "/api/v1/order" => Some("order"),
            "GET" if path_matches("/api/v1/ssl_certificates/*", &c.path) => Some("details"),
            "GET" if c.path == LIST => Some("list"),
            "GET" if path_matches(STATUS, &c.path) => Some("status"),
            _ => None,
        })
        .collect();
    let placed = ["order", "details"].repeat(4);
    assert_eq!(kinds[..8], placed[..], "{kinds:?}");
    assert!(
        kinds[8..].iter().all(|k| *k == "list"),
        "only list looks after the orders: {kinds:?}"
    );
    assert!(kinds.len() > 8, "the list was watched: {kinds:?}");
    assert_eq!(matching(&calls, "GET", STATUS).len(), 0, "no status call");
}
