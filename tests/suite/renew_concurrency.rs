//! `agent.concurrency`: how many certificates one run works on at once. Observed from the
//! sandbox, which counts the partner-API requests it is answering at the same time; every
//! order answer is held back for a while so that overlapping certificates are seen overlapping.

use crate::support;

use partner_sandbox::{Fault, FaultKind};
use support::env::{ORDER_PATH, TestEnv};

/// Six certificates ordered in one run, every order answer delayed by 400 ms; returns the most
/// partner-API requests the sandbox answered at once, and the number of orders placed.
fn peak_with(concurrency: u32) -> (usize, u64) {
    let mut env = TestEnv::new();
    env.agent_extra = format!("concurrency = {concurrency}\n");
    // One standalone server (the sandbox fetches from one port) shared by all six.
    let first = env.standalone_spec("c0", &["c0.renew-concurrency.test"]);
    for i in 1..6 {
        let name = format!("c{i}");
        let domain = format!("c{i}.renew-concurrency.test");
        let mut spec = env.cert_spec(&name, &[&domain], "none");
        spec.publish = first.publish.clone();
        env.certs.push(spec);
    }
    env.certs.push(first);
    env.sandbox.inject(
        Fault::new(FaultKind::Delay { ms: 400 })
            .method("POST")
            .path(ORDER_PATH)
            .times(6),
    );
    env.sandbox.take_peak_concurrent_calls();
    let out = env.renew();
    out.expect_code(0);
    for i in 0..6 {
        out.installed_serial(&format!("c{i}"));
    }
    (env.sandbox.take_peak_concurrent_calls(), env.billed())
}

/// Guards the bound: with `concurrency = 3`, orders overlap (more than one request in
/// flight) but never more than three certificates call at once; each is ordered once.
#[test]
fn certificates_are_worked_on_up_to_the_configured_concurrency() {
    let (peak, billed) = peak_with(3);
    assert_eq!(billed, 6, "one order per certificate");
    assert!(
        peak >= 2,
        "orders overlapped: at most {peak} request(s) at once"
    );
    assert!(peak <= 3, "{peak} requests at once for concurrency = 3");
}

/// Guards the serial case: `concurrency = 1` keeps one request in flight at a time.
#[test]
fn concurrency_one_works_on_one_certificate_at_a_time() {
    let (peak, billed) = peak_with(1);
    assert_eq!(billed, 6, "one order per certificate");
    assert_eq!(peak, 1, "requests at once for concurrency = 1");
}
