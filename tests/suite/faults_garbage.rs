//! Garbage under status 200, as proxies and load balancers in front of the real service send
//! now and then — an HTML maintenance page, a truncated body, the right JSON with values of the
//! wrong types — through the binary against the sandbox: on the agent's reads it is retried
//! within the run like a 5xx and the certificate converges with exactly one order; on the
//! billed order it is an unknown outcome, reconciled, never a second order.

use crate::support;

use partner_sandbox::{Fault, FaultKind};
use support::env::{ORDER_PATH, TestEnv};

/// The kinds of garbage the sandbox can send.
fn garbage() -> [FaultKind; 3] {
    [
        FaultKind::HtmlPage,
        FaultKind::MalformedJson,
        FaultKind::WrongTypes,
    ]
}

/// Guards the reads of a first issuance: the product list, the certificate's details and its
/// status each answered twice with garbage, the bundle download twice with an HTML page (then
/// properly) —
/// the same run orders once, validates, installs; every injected answer was consumed.
#[test]
fn garbage_on_reads_is_retried_and_the_run_converges_with_one_order() {
    for kind in garbage() {
        let mut env = TestEnv::new();
        let spec = env.standalone_spec("www", &["www.garbage-reads.test"]);
        env.certs.push(spec);
        for path in [
            "/api/v1/products",
            "/api/v1/ssl_certificates/*",
            "/api/v1/ssl_certificates/*/status",
        ] {
            env.sandbox
                .inject(Fault::new(kind.clone()).method("GET").path(path).times(2));
        }
        if kind == FaultKind::HtmlPage {
            // A proxy's page in place of the archive is read again as well.
            env.sandbox.inject(
                Fault::new(kind.clone())
                    .method("GET")
                    .path("/api/v1/ssl_certificates/*/download_bundle")
                    .times(2),
            );
        }
        let out = env.renew();
        out.expect_code(0);
        out.installed_serial("www");
        assert_eq!(env.order_posts(), 1, "{kind:?}: one order");
        assert_eq!(env.billed(), 1, "{kind:?}");
        let left = env.sandbox.faults();
        assert!(
            left.is_empty(),
            "{kind:?}: every garbage answer was read: {left:?}"
        );
        let record = env.record("www").unwrap();
        assert_eq!(record["failures"], 0, "{kind:?}: {record:#}");
    }
}

/// Guards the end of the retries: a read that keeps answering garbage fails the command with a
/// message naming what was received (status, content type, the beginning of the body).
#[test]
fn garbage_until_the_retries_are_used_up_names_what_was_received() {
    let env = TestEnv::new();
    env.sandbox.inject(
        Fault::new(FaultKind::HtmlPage)
            .method("GET")
            .path("/api/v1/billing/balance")
            .times(20),
    );
    let out = env.agent(["balance"]).run();
    out.expect_code(1);
    let text = out.text();
    assert!(
        text.contains("HTTP 200") && text.contains("text/html") && text.contains("DOCTYPE"),
        "{}",
        out.describe()
    );
    let balance_calls = env
        .calls()
        .iter()
        .filter(|c| c.path == "/api/v1/billing/balance")
        .count();
    assert_eq!(
        balance_calls, 4,
        "the read was tried as often as a 5xx is (4 attempts)"
    );
}

/// Guards the billed order: its 200 answer is garbage (the order exists) — the run ends with
/// the outcome unknown and the intent kept, the next run adopts the order; exactly one order.
#[test]
fn garbage_answer_to_the_order_is_reconciled_not_repeated() {
    for kind in [FaultKind::HtmlPage, FaultKind::WrongTypes] {
        let mut env = TestEnv::new();
        let spec = env.standalone_spec("www", &["www.garbage-order.test"]);
        env.certs.push(spec);
        env.sandbox
            .inject(Fault::new(kind.clone()).method("POST").path(ORDER_PATH));
        env.renew().expect_failure();
        assert_eq!(env.order_posts(), 1, "{kind:?}");
        assert!(
            !env.record("www").unwrap()["intent"].is_null(),
            "{kind:?}: the intent is kept for reconciliation"
        );
        let again = env.renew();
        again.expect_code(0);
        again.installed_serial("www");
        assert_eq!(env.order_posts(), 1, "{kind:?}: never a second order");
        assert_eq!(env.billed(), 1, "{kind:?}");
    }
}
