//! Endpoints 13 and 16: cancellation (28-day window, staff delay) and renewal tokens.

use serde_json::{Value, json};

use super::*;

fn cancel(env: &mut Env, id: u64) -> Value {
    let resp = env.post_form(PARTNER, &Env::cert_path(id, "cancel"), &[]);
    assert_eq!(resp.status, 200, "{:?}", resp.body);
    json_of(&resp)
}

fn prolong(env: &mut Env, id: u64) -> Value {
    let resp = env.post_form(PARTNER, &Env::cert_path(id, "prolong"), &[]);
    assert_eq!(resp.status, 200, "{:?}", resp.body);
    json_of(&resp)["prolongation_token"].clone()
}

#[test]
fn cancellation_is_queued_for_staff_then_annulled() {
    let mut env = Env::new();
    let (pem, _) = csr(&["www.example.com"]);
    let id = env.place(PARTNER, item(p::S_DV, "www.example.com", &pem));
    assert_eq!(
        cancel(&mut env, id),
        json!({ "success": true, "result": "The cancellation order has been sent" })
    );
    assert_eq!(env.status(PARTNER, id), "new", "not instant");
    assert_eq!(
        env.details(PARTNER, id)["status"]["certificate"],
        "new_pending_cancel"
    );
    let list = json_of(&env.get(PARTNER, "/api/v1/ssl_certificates"));
    assert_eq!(list[0]["status"]["code"], "new_pending_cancel");
    assert_eq!(
        cancel(&mut env, id),
        json!({ "success": false, "result": "The certificate is already cancelled" })
    );
    env.advance(3599);
    assert_ne!(env.status(PARTNER, id), "annulled");
    env.advance(1);
    assert_eq!(env.status(PARTNER, id), "annulled");
    assert_eq!(
        cancel(&mut env, id),
        json!({ "success": false, "result": "The certificate is already cancelled" })
    );
    let d = env.details(PARTNER, id);
    assert_eq!(d["payment_status"], "not_payable");
    assert_eq!(d["unpaid"], false);
    let balance = json_of(&env.get(PARTNER, "/api/v1/billing/balance"));
    assert_eq!(balance["reserved"]["sum"], 0.0, "the bill is voided");
    assert_eq!(
        env.get(PARTNER, &Env::cert_path(id, "download")).status,
        422
    );
}

#[test]
fn issued_certificates_can_be_cancelled_for_28_days() {
    let mut env = Env::new();
    let (pem, _) = csr(&["www.example.com"]);
    let late = env.issued(PARTNER, item(p::S_DV, "www.example.com", &pem), &pem);
    env.advance(3600);
    let id = env.issued(PARTNER, item(p::S_DV, "www.example.com", &pem), &pem);
    let issued_at = env.inspect(id)["first_issued_at"].as_i64().unwrap();
    env.advance(issued_at + 28 * 86_400 - env.now.unix_timestamp());
    assert_eq!(
        cancel(&mut env, id)["success"],
        true,
        "day 28 is inside the window"
    );
    assert_eq!(
        env.details(PARTNER, id)["status"]["certificate"],
        "issued_pending_cancel"
    );
    assert_eq!(
        cancel(&mut env, late),
        json!({ "success": false, "result": "Cannot cancel a certificate that was issued more than 28 days ago" })
    );
    // Expired certificates cannot be cancelled.
    env.state.force_status(late, "expired").unwrap();
    assert_eq!(
        cancel(&mut env, late)["result"],
        "Cannot cancel a certificate that was issued more than 28 days ago"
    );
    env.advance(3600);
    assert_eq!(env.status(PARTNER, id), "annulled");
    // A reissue does not restart the window.
    let reissued = env.issued(PARTNER, item(p::S_DV, "www.example.com", &pem), &pem);
    env.advance_days(29);
    let resp = env.post_form(PARTNER, &Env::cert_path(reissued, "reissue"), &[]);
    assert_eq!(resp.status, 200);
    env.pass_http(reissued, &pem, p::S_DV, 600);
    assert_eq!(env.status(PARTNER, reissued), "issued");
    assert_eq!(
        cancel(&mut env, reissued)["result"],
        "Cannot cancel a certificate that was issued more than 28 days ago"
    );
    // in_progress is cancellable at any time.
    let pending = env.place(PARTNER, item(p::S_DV, "www.example.com", &pem));
    env.advance_days(60);
    assert_eq!(cancel(&mut env, pending)["success"], true);
}

#[test]
fn prolong_prepares_one_token_and_repeats_it() {
    let mut env = Env::new();
    let (pem, _) = csr(&["www.example.com"]);
    let pending = env.place(PARTNER, item(p::D_DV, "www.example.com", &pem));
    assert_eq!(
        prolong(&mut env, pending),
        Value::Null,
        "no order to renew yet"
    );
    let id = env.issued(PARTNER, item(p::D_DV, "www.example.com", &pem), &pem);
    let token = prolong(&mut env, id);
    assert!(token.as_str().is_some_and(|t| t.len() >= 20));
    assert_eq!(prolong(&mut env, id), token);
    let list = json_of(&env.get(PARTNER, "/api/v1/ssl_certificates"));
    let entry = list
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["internal_number"] == id)
        .unwrap();
    assert_eq!(entry["prolongation_token"], token);
    // A token prepared earlier is returned in any case, even once annulled.
    env.state.force_status(id, "annulled").unwrap();
    assert_eq!(prolong(&mut env, id), token);
    // Annulled without a token: null.
    let other = env.issued(PARTNER, item(p::D_DV, "www.example.com", &pem), &pem);
    env.state.force_status(other, "annulled").unwrap();
    assert_eq!(prolong(&mut env, other), Value::Null);
    // Expired certificates can still be renewed.
    let expired = env.issued(PARTNER, item(p::D_DV, "www.example.com", &pem), &pem);
    env.state.force_status(expired, "expired").unwrap();
    assert!(prolong(&mut env, expired).is_string());
}

#[test]
fn family_s_multi_year_gets_no_token_more_than_3_months_before_the_end() {
    let mut env = Env::new();
    let (pem, _) = csr(&["www.example.com"]);
    let mut it = item(p::S_DV, "www.example.com", &pem);
    it["days"] = json!(730);
    let id = env.issued(PARTNER, it, &pem);
    assert_eq!(prolong(&mut env, id), Value::Null);
    env.state.shorten_subscription(id, 91, env.now).unwrap();
    assert_eq!(prolong(&mut env, id), Value::Null);
    env.state.shorten_subscription(id, 90, env.now).unwrap();
    assert!(prolong(&mut env, id).is_string());
    // Family D multi-year: a token at any time.
    let mut it = item(p::D_DV, "www.example.com", &pem);
    it["days"] = json!(730);
    let id = env.issued(PARTNER, it, &pem);
    assert!(prolong(&mut env, id).is_string());
}

#[test]
fn the_service_prepares_the_token_30_days_before_the_subscription_ends() {
    let mut env = Env::new();
    let (pem, _) = csr(&["www.example.com"]);
    let mut it = item(p::S_DV, "www.example.com", &pem);
    it["days"] = json!(90);
    let id = env.issued(PARTNER, it, &pem);
    let end = env.inspect(id)["subscription_end"].as_i64().unwrap();
    let until = end - 30 * 86_400 - env.now.unix_timestamp();
    env.advance(until - 1);
    assert_eq!(env.inspect(id)["prolongation_token"], Value::Null);
    env.advance(1);
    let token = env.inspect(id)["prolongation_token"].clone();
    assert!(token.is_string());
    let list = json_of(&env.get(PARTNER, "/api/v1/ssl_certificates"));
    assert_eq!(list[0]["prolongation_token"], token);
    assert_eq!(prolong(&mut env, id), token);
}

#[test]
fn completing_a_renewal_creates_a_billed_order_that_points_back() {
    let mut env = Env::new();
    let (pem, _) = csr(&["www.example.com"]);
    let id = env.issued(PARTNER, item(p::D_DV, "www.example.com", &pem), &pem);
    let token = prolong(&mut env, id).as_str().unwrap().to_string();
    let renewal = env.state.complete_renewal(&token, env.now).unwrap();
    assert!(env.state.complete_renewal(&token, env.now).is_err(), "once");
    assert!(env.state.complete_renewal("nope", env.now).is_err());
    assert!(
        env.state
            .billed_orders()
            .contains(&(PARTNER.to_string(), 2))
    );
    let list = json_of(&env.get(PARTNER, "/api/v1/ssl_certificates"));
    assert_eq!(list[0]["internal_number"], renewal);
    assert_eq!(list[0]["prolonged_id"], id);
    assert_eq!(list[0]["prolonged"], true);
    assert_eq!(list[1]["prolonged"], false);
    assert_eq!(env.status(PARTNER, renewal), "new");
    assert_eq!(env.details(PARTNER, renewal)["prolonged_id"], id);
    // The renewed certificate keeps answering with its token.
    assert_eq!(prolong(&mut env, id), token.as_str());
}

#[test]
fn balance_moves_with_orders_issuance_and_cancellation() {
    let mut env = Env::new();
    let sums = |env: &mut Env| {
        let b = json_of(&env.get(PARTNER, "/api/v1/billing/balance"));
        ["balance", "reserved", "common", "prepayment", "available"]
            .map(|m| b[m]["sum"].as_f64().unwrap())
    };
    assert_eq!(sums(&mut env), [5000.0, 0.0, 5000.0, 0.0, 5000.0]);
    let (pem, _) = csr(&["www.example.com"]);
    let id = env.place(PARTNER, item(p::S_DV, "www.example.com", &pem));
    assert_eq!(
        sums(&mut env),
        [5000.0, 8.8, 4991.2, 0.0, 5000.0],
        "reserved on order"
    );
    env.pass_http(id, &pem, p::S_DV, 600);
    assert_eq!(env.status(PARTNER, id), "issued");
    assert_eq!(
        sums(&mut env),
        [4991.2, 8.8, 4982.4, 0.0, 5000.0],
        "delivered, still reserved until paid"
    );
    cancel(&mut env, id);
    env.advance(3600);
    assert_eq!(sums(&mut env), [5000.0, 0.0, 5000.0, 0.0, 5000.0], "voided");
    // Another account's balance is its own.
    let other = json_of(&env.get(OTHER, "/api/v1/billing/balance"));
    assert_eq!(other["reserved"]["sum"], 0.0);
}

#[test]
fn control_methods_refuse_absurd_shifts() {
    let mut env = Env::new();
    let (pem, _) = csr(&["www.example.com"]);
    let id = env.issued(PARTNER, item(p::S_DV, "www.example.com", &pem), &pem);
    assert!(
        env.state
            .age_certificate(id, i64::MAX, env.now, ca())
            .is_err()
    );
    assert!(
        env.state
            .shorten_subscription(id, i64::MIN, env.now)
            .is_err()
    );
}
