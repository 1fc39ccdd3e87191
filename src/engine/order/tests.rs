//! Tests of the order checks: names against the product, price limits, the clock, the
//! order request's fields.

use super::*;

#[test]
fn period_follows_the_documents_day_counts() {
    assert_eq!(period_years(60), 1);
    assert_eq!(period_years(365), 1);
    assert_eq!(period_years(366), 2);
    assert_eq!(period_years(730), 2);
    assert_eq!(period_years(1825), 5);
}

#[test]
fn only_4xx_and_unsent_requests_prove_nothing_was_billed() {
    let call = api::Call {
        method: "POST",
        path: "/api/v1/order".into(),
        idempotent: false,
    };
    let http = |status| ApiError::Http {
        call: call.clone(),
        status,
        body: Box::new(api::ErrorBody::Empty),
        excerpt: String::new(),
    };
    assert!(definitely_not_placed(&http(422)));
    assert!(definitely_not_placed(&http(403)));
    assert!(!definitely_not_placed(&ApiError::OutcomeUnknown {
        call: call.clone(),
        reason: "connection reset".into()
    }));
    assert!(!definitely_not_placed(&ApiError::Transport {
        call: call.clone(),
        kind: api::TransportKind::Other,
        message: "reset".into()
    }));
    assert!(definitely_not_placed(&ApiError::NotSent {
        call: call.clone(),
        reason: "this host's lead of the fleet expired".into()
    }));
    assert!(definitely_not_placed(&ApiError::Transport {
        call,
        kind: api::TransportKind::Connect,
        message: "refused".into()
    }));
}
