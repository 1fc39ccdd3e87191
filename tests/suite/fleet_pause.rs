//! A leader that stops running without dying: paused (SIGSTOP) for longer than its lease
//! while it waits at the CA, resumed after another host led. Real parts: a three-member etcd
//! cluster, two hosts with real nginx, the sandbox. After it resumes the paused leader sends
//! no Partner API request (the sandbox's call log does not grow) and writes nothing under the
//! fleet's prefix (etcd's revisions do not move); one order is billed and both hosts end
//! serving the same serial. Also the engine with a lead lost between the shared order intent
//! and the order: the order is not sent, counts as not placed, and leaves no intent behind —
//! neither on the host nor, with real etcd, in the fleet: a leader paused right after sharing
//! its intent notes on resuming that it never sent the order, and the next leader withdraws
//! the intent and orders once, without `--clear-intent`. And a leader stopped inside its
//! order request — after its lead's guard let the order go, before anything of it was sent —
//! past its lease: on resuming the request is abandoned and never reaches the sandbox.

use crate::fleet_e2e::{Fleet, ready};
use crate::support;

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use futures_util::future::LocalBoxFuture;
use nix::sys::signal::{Signal, kill};
use nix::unistd::Pid;

use cert_agent::testing::api::SendGuard;
use cert_agent::testing::config::{CertificateConfig, Config};
use cert_agent::testing::dcv::ValidationFile;
use cert_agent::testing::engine::{self, Lead, Outcome, RunOptions};
use cert_agent::testing::store::{CertRecord, Store};
use support::env::{TestEnv, wait_exit, wait_until};

const PREFIX: &str = "/pause/";

/// Sends `sig` to `child` (an agent the test started).
pub(crate) fn signal(child: &std::process::Child, sig: Signal) {
    let pid = i32::try_from(child.id()).expect("a pid");
    kill(Pid::from_raw(pid), sig).expect("the signal is sent to the agent this test started");
}

#[test]
fn a_leader_paused_past_its_lease_calls_and_writes_nothing_after_it_resumes() {
    if !ready() {
        return;
    }
    let f = Fleet::pair(PREFIX);
    // web1 leads a round: it orders, publishes the validation file (in its web root and in
    // the fleet) and gives the lead up; in its next round it leads again and stops (as if
    // paused) right before the certificate's status check. The CA checks the file on both
    // hosts: web2 serves it once it leads (no daemon follows the fleet there).
    let mut a = f
        .env
        .agent_at(&f.hosts[0].config, ["--json", "renew", "--wait", "300"])
        .env("CERT_AGENT_FAILPOINT", "status-check@2:stop")
        .spawn();
    let polling = wait_until(Duration::from_secs(60), || stopped(&a));
    assert!(polling, "web1 did not order and poll\n{}", f.logs());
    let calls = f.env.calls();
    let ordered = calls.iter().position(|c| c.path == "/api/v1/order");
    assert!(
        ordered.is_some_and(|i| calls[i + 1..].iter().any(|c| c.method == "GET")),
        "web1 ordered and checked once before it stopped\n{}",
        f.logs()
    );
    let paused = std::time::Instant::now();
    assert!(
        f.etcd()
            .revisions()
            .contains_key(&format!("{PREFIX}leader")),
        "web1 stopped while it leads a round\n{}",
        f.logs()
    );

    // web2 takes the lead once web1's lease (5 s) has ended, validates (the file is in its
    // own web root now), installs and publishes.
    let took_over = wait_until(Duration::from_secs(90), || {
        f.agent(1, &["--json", "renew", "--name", "www", "--wait", "30"]);
        f.installed(1).is_some()
    });
    assert!(took_over, "web2 did not take over\n{}", f.logs());
    // web2 could lead only once web1's lease (counted from its last renewal, before the
    // pause) ended; web1 stays stopped for longer than a whole lease in any case (the time
    // passing is what is checked: a lease that ran out in etcd may end sooner).
    let lease = Duration::from_secs(5);
    if let Some(rest) = (lease + Duration::from_secs(1)).checked_sub(paused.elapsed()) {
        std::thread::sleep(rest);
    }
    let serial = f.installed(1).expect("web2 installed");
    assert_eq!(f.env.billed(), 1);

    let mut etcd = f.etcd();
    let before = etcd.revisions();
    assert!(
        !before.contains_key(&format!("{PREFIX}leader")),
        "nobody leads now: {before:?}"
    );
    let calls = f.env.calls().len();

    signal(&a, Signal::SIGCONT);
    let status = wait_exit(&mut a, Duration::from_secs(60));
    assert!(status.is_some(), "web1 did not end\n{}", f.logs());
    let logs = f.logs();
    // web1's own run (its first): the certificate failed because its next request was kept
    // back, and nothing was shared or published afterwards.
    let web1 = std::fs::read_to_string(f.env.path("logs/run-0.out")).unwrap_or_default()
        + &std::fs::read_to_string(f.env.path("logs/run-0.err")).unwrap_or_default();
    assert!(
        web1.contains(
            "this host's lead of the fleet expired (paused or cut off from etcd); no request \
             was sent"
        ),
        "web1 says why it stopped\n{web1}"
    );
    assert!(web1.contains("no longer leads the fleet"), "{web1}");
    assert_ne!(status.and_then(|s| s.code()), Some(0), "{web1}");
    // No Partner API call after resuming.
    let after = f.env.calls();
    assert_eq!(
        after.len(),
        calls,
        "web1 called the API after resuming: {:?}\n{logs}",
        &after[calls..]
    );
    // No write under the prefix: every key at the revision it had, none added or removed.
    // (web1's own host results, `hosts/web1/`, are the only keys it could write without the
    // lead; it did not write them either.)
    let now = etcd.revisions();
    assert_eq!(now, before, "web1 wrote to etcd after resuming\n{logs}");

    // One billed order; web1 installs what the fleet has and both serve it.
    f.agent(0, &["--json", "renew", "--name", "www", "--wait", "30"]);
    assert!(
        wait_until(Duration::from_secs(30), || f.installed(0).as_deref()
            == Some(serial.as_str())),
        "web1 did not install the fleet's certificate\n{}",
        f.logs()
    );
    f.wait_all_serve(&serial, Duration::from_secs(30));
    assert_eq!(f.env.billed(), 1, "one billed order");
    assert_eq!(f.env.order_posts(), 1, "one POST /order");
}

/// A lead that is lost as soon as the order intent is shared: the order request that
/// follows is refused by the guard.
struct LostAtIntent {
    lost: Arc<AtomicBool>,
}

impl Lead for LostAtIntent {
    fn share<'a>(
        &'a self,
        _cert: &'a CertificateConfig,
        rec: &'a CertRecord,
    ) -> LocalBoxFuture<'a, anyhow::Result<()>> {
        if rec.partner.intent().is_some() {
            self.lost.store(true, Ordering::SeqCst);
        }
        Box::pin(async { Ok(()) })
    }

    fn publish_dcv<'a>(
        &'a self,
        _cert: &'a CertificateConfig,
        _file: &'a ValidationFile,
    ) -> LocalBoxFuture<'a, anyhow::Result<()>> {
        Box::pin(async { Ok(()) })
    }

    fn remove_dcv<'a>(&'a self, _cert: &'a CertificateConfig) -> LocalBoxFuture<'a, ()> {
        Box::pin(async {})
    }

    fn send_guard(&self) -> Option<SendGuard> {
        let lost = self.lost.clone();
        Some(SendGuard::new(move || {
            if lost.load(Ordering::SeqCst) {
                Err("this host's lead of the fleet expired (paused or cut off from etcd)".into())
            } else {
                Ok(())
            }
        }))
    }
}

#[test]
fn an_order_kept_back_by_the_lead_guard_is_not_placed_and_leaves_no_intent() {
    let mut env = TestEnv::new();
    let spec = env.standalone_spec("www", &["guard.example.test"]);
    env.certs.push(spec);
    let path = env.write_config();
    let config = Config::load(&path).expect("valid configuration");
    let store = Store::open(&config.agent.state_dir).expect("state directory");
    let certs: Vec<&CertificateConfig> = config.certificates.iter().collect();
    let mut opts = RunOptions::unattended(&config);
    opts.wait = Duration::from_secs(30);
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();

    let lead = LostAtIntent {
        lost: Arc::new(AtomicBool::new(false)),
    };
    let done = rt.block_on(engine::run(&config, &store, &opts, &certs, Some(&lead)));
    let Outcome::Failed { error } = &done.report.certificates[0].outcome else {
        panic!("{:?}", done.report.certificates[0].outcome);
    };
    assert!(
        error.contains("POST /api/v1/order: this host's lead of the fleet expired")
            && error.contains("no request was sent")
            && error.contains("nothing was billed"),
        "{error}"
    );
    assert_eq!(env.order_posts(), 0, "the order never reached the API");
    assert_eq!(env.billed(), 0);
    let rec = env.record("www").expect("a record");
    assert!(rec["intent"].is_null(), "no intent left: {rec}");
    assert!(rec["order"].is_null(), "{rec}");
    assert!(
        env.journal().contains("order-rejected"),
        "{}",
        env.journal()
    );

    // Nothing is left to reconcile: the next run orders once and issues.
    let mut again = RunOptions::explicit(vec!["www".into()]);
    again.allow_orders = true;
    again.wait = Duration::from_secs(30);
    let done = rt.block_on(engine::run(&config, &store, &again, &certs, None));
    assert!(
        matches!(
            done.report.certificates[0].outcome,
            Outcome::Installed { .. }
        ),
        "{:?}",
        done.report.certificates[0].outcome
    );
    assert_eq!(env.order_posts(), 1);
    assert_eq!(env.billed(), 1);
}

/// Waits until the paused leader's lease ran out: etcd deleted the fleet's `leader` key.
fn lease_ran_out(f: &Fleet) {
    let mut etcd = f.etcd();
    support::wait::until_with(
        Duration::from_secs(30),
        "the paused leader's lease to run out (its `leader` key gone)",
        || etcd.get("leader").is_none(),
        || f.logs(),
    );
}

/// Whether the process `child` is stopped (SIGSTOP).
pub(crate) fn stopped(child: &std::process::Child) -> bool {
    std::fs::read_to_string(format!("/proc/{}/stat", child.id()))
        .ok()
        .and_then(|s| {
            s.rsplit_once(')')
                .map(|(_, rest)| rest.trim_start().starts_with('T'))
        })
        .unwrap_or(false)
}

#[test]
fn an_intent_whose_order_the_paused_leader_never_sent_is_withdrawn_by_the_next_leader() {
    if !ready() {
        return;
    }
    let f = Fleet::pair("/unsent/");
    f.env.sandbox.set_dcv_ports(f.hosts[1].web.http_port(), 0);
    // web1 shares its order intent, then stops (as if paused) before it sends the order.
    let mut a = f
        .env
        .agent_at(&f.hosts[0].config, ["--json", "renew", "--wait", "60"])
        .env("CERT_AGENT_FAILPOINT", "intent-saved:stop")
        .spawn();
    assert!(
        wait_until(Duration::from_secs(60), || stopped(&a)),
        "web1 did not stop after sharing its intent\n{}",
        f.logs()
    );
    // Past its lease (5 s), then resumed: its guard keeps the order back.
    lease_ran_out(&f);
    signal(&a, Signal::SIGCONT);
    let status = wait_exit(&mut a, Duration::from_secs(60));
    assert!(status.is_some(), "web1 did not end\n{}", f.logs());
    let web1 = std::fs::read_to_string(f.env.path("logs/run-0.out")).unwrap_or_default()
        + &std::fs::read_to_string(f.env.path("logs/run-0.err")).unwrap_or_default();
    assert!(web1.contains("no request was sent"), "{web1}");
    assert!(web1.contains("/unsent/hosts/web1/unplaced/www"), "{web1}");
    assert_eq!(f.env.order_posts(), 0, "{}", f.logs());

    // web2 leads next: it withdraws the intent and orders once; no --clear-intent.
    let out = f.agent(1, &["--json", "renew", "--wait", "60"]);
    out.expect_code(0);
    assert_eq!(
        out.outcome("www")["outcome"],
        "installed",
        "{}",
        out.describe()
    );
    let journal = std::fs::read_to_string(f.hosts[1].state.join("journal.log")).unwrap_or_default();
    assert!(journal.contains("fleet-intent-withdrawn"), "{journal}");
    assert_eq!(f.env.order_posts(), 1, "one POST /order");
    assert_eq!(f.env.billed(), 1, "one billed order");
    // web1 installs what the fleet has; both serve one serial.
    f.agent(0, &["--json", "renew"]).expect_code(0);
    let serial = f.installed(1).expect("web2 installed");
    f.wait_all_serve(&serial, Duration::from_secs(30));
    assert_eq!(f.env.billed(), 1);
}

#[test]
fn a_leader_stopped_inside_its_order_request_past_its_lease_never_sends_it() {
    if !ready() {
        return;
    }
    let f = Fleet::pair("/inside/");
    f.env.sandbox.set_dcv_ports(f.hosts[1].web.http_port(), 0);
    // web1's guard lets the order go and gives it its time limit (the lease's 4 s deadline
    // less a 0.5 s margin, at most); web1 stops right there, before the request is made.
    let mut a = f
        .env
        .agent_at(&f.hosts[0].config, ["--json", "renew", "--wait", "60"])
        .env("CERT_AGENT_FAILPOINT", "order-guarded:stop")
        .spawn();
    assert!(
        wait_until(Duration::from_secs(60), || stopped(&a)),
        "web1 did not stop inside its order request\n{}",
        f.logs()
    );
    let calls = f.env.calls().len();
    // Past its lease (5 s): its renewals stopped with it, and another host could lead.
    lease_ran_out(&f);
    signal(&a, Signal::SIGCONT);
    let status = wait_exit(&mut a, Duration::from_secs(60));
    assert!(status.is_some(), "web1 did not end\n{}", f.logs());
    let web1 = std::fs::read_to_string(f.env.path("logs/run-0.out")).unwrap_or_default()
        + &std::fs::read_to_string(f.env.path("logs/run-0.err")).unwrap_or_default();
    let after = f.env.calls();
    assert_eq!(
        after.len(),
        calls,
        "web1 called the API after resuming: {:?}\n{web1}",
        &after[calls..]
    );
    assert_eq!(
        f.env.order_posts(),
        0,
        "the order never reached the sandbox\n{web1}"
    );
    assert!(web1.contains("no request was sent"), "{web1}");
    assert!(!web1.contains("outcome unknown"), "{web1}");
    assert!(web1.contains("/inside/hosts/web1/unplaced/www"), "{web1}");

    // web2 leads next: it withdraws the intent and orders once; web1 installs the same.
    let out = f.agent(1, &["--json", "renew", "--wait", "60"]);
    out.expect_code(0);
    assert_eq!(f.env.order_posts(), 1, "one POST /order");
    assert_eq!(f.env.billed(), 1, "one billed order");
    f.agent(0, &["--json", "renew"]).expect_code(0);
    let serial = f.installed(1).expect("web2 installed");
    f.wait_all_serve(&serial, Duration::from_secs(30));
    assert_eq!(f.env.billed(), 1);
}
