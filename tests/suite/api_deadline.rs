//! The Partner API client with a guard that gives each request a time limit, as a fleet
//! leader's lease does, against the real sandbox over HTTPS: a request handed to the
//! connection in time is sent whole and its answer awaited even past the limit; one the guard
//! refuses at the last moment (when the connection asks for its body) never reaches the API
//! and is a plain refusal, not an unknown outcome.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::time::Duration;

use cert_agent::testing::api::{ApiError, Client, SendGuard};
use partner_sandbox::{Fault, FaultKind};

use crate::support;
use support::api::*;

const LEAD_TEXT: &str = "this host's lead of the fleet expired (paused or cut off from etcd)";

/// A client whose guard gives every request `limit`, or, once `closing` is set, lets one
/// more request go and refuses every later ask.
fn guarded(env: &Env, limit: Duration, closing: Arc<AtomicBool>) -> (Client, Arc<AtomicUsize>) {
    let asked = Arc::new(AtomicUsize::new(0));
    let seen = asked.clone();
    let lets_go = Arc::new(AtomicUsize::new(0));
    let mut o = env.options(PARTNER, PASSWORD);
    o.guard = Some(SendGuard::with_deadline(move || {
        seen.fetch_add(1, Ordering::SeqCst);
        if closing.load(Ordering::SeqCst) && lets_go.fetch_add(1, Ordering::SeqCst) > 0 {
            return Err(LEAD_TEXT.to_owned());
        }
        Ok(limit)
    }));
    (Client::new(o).expect("client builds"), asked)
}

#[tokio::test]
async fn a_guarded_order_handed_over_in_time_is_sent_whole_and_its_late_answer_awaited() {
    let env = Env::start();
    let (client, _) = guarded(&env, Duration::from_millis(800), Arc::default());
    let product = dv_product(&client).await;
    // The sandbox places the order at once and answers 2 s later, past the limit.
    env.sandbox.inject(
        Fault::new(FaultKind::Delay { ms: 2000 })
            .method("POST")
            .path("/api/v1/order"),
    );
    let placed = client
        .order(&order_request(product, "deadline.example.com", None))
        .await
        .expect("the order, sent in time, is answered");
    assert!(placed.certificate > 0, "{placed:?}");
    let orders = env.calls_to("/api/v1/order");
    assert_eq!(orders, vec![("POST".to_owned(), 200)], "sent once, whole");
    assert_eq!(env.sandbox.billed_orders(PARTNER), 1);
}

#[tokio::test]
async fn an_order_the_guard_refuses_when_its_body_is_taken_never_reaches_the_api() {
    let env = Env::start();
    let closing = Arc::new(AtomicBool::new(false));
    let (client, asked) = guarded(&env, Duration::from_secs(10), closing.clone());
    let product = dv_product(&client).await;
    let before = asked.load(Ordering::SeqCst);
    // The guard lets the order go before the attempt, then refuses when the connection takes
    // the body: as after a suspend the request's own timer did not count.
    closing.store(true, Ordering::SeqCst);
    let e = client
        .order(&order_request(product, "withheld.example.com", None))
        .await
        .expect_err("withheld");
    assert!(matches!(e, ApiError::NotSent { .. }), "{e:?}");
    assert!(!e.is_outcome_unknown() && !e.is_retryable(), "{e:?}");
    assert_eq!(
        e.to_string(),
        format!("POST /api/v1/order: {LEAD_TEXT}; no request was sent")
    );
    assert_eq!(
        asked.load(Ordering::SeqCst),
        before + 2,
        "asked twice, never again"
    );
    assert!(
        env.calls_to("/api/v1/order").is_empty(),
        "nothing reached the API"
    );
    assert_eq!(env.sandbox.billed_orders(PARTNER), 0);
}
