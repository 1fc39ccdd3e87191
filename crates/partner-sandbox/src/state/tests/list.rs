//! Endpoint 7: the list without and with pagination, scopes, search, object fields.

use serde_json::{Value, json};

use super::*;

fn pagination(resp: &ApiResponse) -> Value {
    let (_, v) = resp
        .headers
        .iter()
        .find(|(k, _)| k == "X-Pagination")
        .expect("X-Pagination");
    serde_json::from_str(v).expect("JSON")
}

#[test]
fn list_objects_have_every_documented_field() {
    let mut env = Env::new();
    let (pem, _) = csr(&["www.example.com", "shop.example.com"]);
    let id = env.issued(PARTNER, item(p::S_UCC, "www.example.com", &pem), &pem);
    let resp = env.get(PARTNER, "/api/v1/ssl_certificates");
    assert!(
        resp.headers.iter().all(|(k, _)| k != "X-Pagination"),
        "no pagination without page"
    );
    let c = json_of(&resp)[0].clone();
    for field in [
        "internal_number",
        "external_number",
        "status",
        "name",
        "domain_name",
        "domain_names",
        "duration_in_years",
        "public_comment",
        "valid_from",
        "valid_to",
        "subscription_duration",
        "subscription_valid_from",
        "subscription_valid_to",
        "paid",
        "price",
        "currency",
        "token",
        "prolongation_token",
        "prolonged_id",
        "prolonged",
        "legacy_reissue",
        "dcv_method",
        "dcv_content",
        "all_validation_emails",
        "all_domains",
    ] {
        assert!(c.get(field).is_some(), "{field} missing");
    }
    assert_eq!(c["internal_number"], id);
    assert!(c["external_number"].is_u64());
    assert_eq!(
        c["status"],
        json!({ "code": "issued", "description": "issued" })
    );
    assert_eq!(c["name"], "Aurora DV UCC");
    assert_eq!(c["domain_name"], "www.example.com");
    assert_eq!(c["domain_names"], json!(["shop.example.com"]));
    assert_eq!(c["price"], "27.50", "a string in the list");
    assert_eq!(c["paid"], false);
    assert_eq!(c["legacy_reissue"], false);
    assert_eq!(c["dcv_method"], "HTTP_CSR_HASH");
    assert!(
        c["dcv_content"]
            .as_str()
            .unwrap()
            .contains("ca-s.sandbox.test")
    );
    assert_eq!(c["all_validation_emails"], Value::Null);
    assert_eq!(
        c["all_domains"],
        json!(["www.example.com", "shop.example.com"])
    );
    let date = c["valid_from"].as_str().unwrap();
    assert_eq!(date.len(), 10);
    assert_eq!(&date[4..5], "-");
    let d = env.details(PARTNER, id);
    assert!(d["external_number"].is_string(), "a string in details");
    assert!(d["price"].is_f64(), "a number in details");
    for field in [
        "id",
        "status",
        "external_number",
        "common_name",
        "additional_domains",
        "all_domains",
        "valid_from",
        "valid_to",
        "subscription_duration",
        "subscription_valid_from",
        "subscription_valid_to",
        "replacement_id",
        "prolonged_id",
        "dcv_method",
        "dcv_content",
        "validation_email",
        "additional_validation_emails",
        "csr",
        "nomenclature_id",
        "name",
        "price",
        "price_includes_vat",
        "currency",
        "payment_status",
        "unpaid",
    ] {
        assert!(d.get(field).is_some(), "details {field} missing");
    }
    assert_eq!(
        d["validation_email"], "HTTP_CSR_HASH",
        "family S alternative method: its name"
    );
}

#[test]
fn pages_of_50_newest_first_with_x_pagination() {
    let mut env = Env::new();
    let (pem, _) = csr(&["www.example.com"]);
    let mut ids = Vec::new();
    for _ in 0..120 {
        ids.push(env.place(PARTNER, item(p::S_DV, "www.example.com", &pem)));
    }
    let all = json_of(&env.get(PARTNER, "/api/v1/ssl_certificates"));
    assert_eq!(all.as_array().unwrap().len(), 120);
    assert_eq!(
        all[0]["internal_number"],
        *ids.last().unwrap(),
        "newest first"
    );
    let resp = env.get_q(PARTNER, "/api/v1/ssl_certificates", &[("page", "1")]);
    assert_eq!(json_of(&resp).as_array().unwrap().len(), 50);
    assert_eq!(
        pagination(&resp),
        json!({
            "total": 120, "total_pages": 3, "first_page": true, "last_page": false,
            "previous_page": null, "next_page": 2, "out_of_bounds": false, "offset": 0,
        })
    );
    let resp = env.get_q(PARTNER, "/api/v1/ssl_certificates", &[("page", "3")]);
    let page = json_of(&resp);
    assert_eq!(page.as_array().unwrap().len(), 20);
    assert_eq!(page[19]["internal_number"], ids[0]);
    assert_eq!(
        pagination(&resp),
        json!({
            "total": 120, "total_pages": 3, "first_page": false, "last_page": true,
            "previous_page": 2, "next_page": null, "out_of_bounds": false, "offset": 100,
        })
    );
    let resp = env.get_q(PARTNER, "/api/v1/ssl_certificates", &[("page", "4")]);
    assert_eq!(json_of(&resp), json!([]));
    assert_eq!(pagination(&resp)["out_of_bounds"], true);
    for bad in ["0", "-1", "x", ""] {
        assert_eq!(
            env.get_q(PARTNER, "/api/v1/ssl_certificates", &[("page", bad)])
                .status,
            400,
            "{bad}"
        );
    }
    // The alternate path takes the same parameters.
    let uid = env
        .state
        .accounts()
        .into_iter()
        .find(|a| a.login == PARTNER)
        .unwrap()
        .id;
    let resp = env.get_q(
        PARTNER,
        &format!("/api/v1/users/{uid}/our_ssl_certificates"),
        &[("page", "2")],
    );
    assert_eq!(pagination(&resp)["offset"], 50);
}

#[test]
fn scope_and_q_filter_only_with_page() {
    let mut env = Env::new();
    let (pem, _) = csr(&["www.example.com"]);
    let issued = env.issued(PARTNER, item(p::S_DV, "www.example.com", &pem), &pem);
    let (pem2, _) = csr(&["shop.example.org"]);
    let mut it = item(p::S_OV, "shop.example.org", &pem2);
    it["organization_name"] = json!("Acme Widgets Ltd");
    let progressing = env.place(PARTNER, it);
    env.advance(20);
    let fresh = env.place(PARTNER, item(p::S_DV, "www.example.com", &pem));
    let cancelled = env.place(PARTNER, item(p::S_DV, "www.example.com", &pem));
    env.state.force_status(cancelled, "annulled").unwrap();
    let ids = |resp: &ApiResponse| -> Vec<u64> {
        json_of(resp)
            .as_array()
            .unwrap()
            .iter()
            .map(|c| c["internal_number"].as_u64().unwrap())
            .collect()
    };
    let q = |env: &mut Env, params: &[(&str, &str)]| {
        env.get_q(PARTNER, "/api/v1/ssl_certificates", params)
    };
    assert_eq!(
        ids(&q(&mut env, &[("page", "1"), ("scope", "api_issued")])),
        [issued]
    );
    assert_eq!(
        ids(&q(&mut env, &[("page", "1"), ("scope", "api_in_progress")])),
        [progressing],
        "new is not in progress"
    );
    assert_eq!(
        ids(&q(&mut env, &[("page", "1"), ("scope", "api_annulled")])),
        [cancelled]
    );
    assert_eq!(
        q(&mut env, &[("page", "1"), ("scope", "issued")]).status,
        400
    );
    assert_eq!(
        ids(&q(&mut env, &[("page", "1"), ("q", "ACME")])),
        [progressing],
        "organisation name"
    );
    assert_eq!(
        ids(&q(&mut env, &[("page", "1"), ("q", "example.org")])),
        [progressing],
        "domain name"
    );
    assert_eq!(
        q(&mut env, &[("page", "1"), ("q", "www.example")])
            .headers
            .len(),
        1
    );
    assert_eq!(
        ids(&q(&mut env, &[("page", "1"), ("q", "www.example")])).len(),
        3
    );
    // Without page, scope and q are ignored.
    assert_eq!(
        ids(&q(&mut env, &[("scope", "api_issued"), ("q", "nothing")])).len(),
        4
    );
    let _ = fresh;
}
