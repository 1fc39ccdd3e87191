//! Endpoint 12: reissue rules 1–7, DCV again with new hashes, a new serial.

use rcgen::KeyPair;
use serde_json::{Value, json};

use super::*;

fn reissue(env: &mut Env, id: u64, pairs: &[(&str, &str)]) -> ApiResponse {
    env.post_form(PARTNER, &Env::cert_path(id, "reissue"), pairs)
}

fn refused(resp: &ApiResponse, needle: &str) {
    assert_eq!(resp.status, 422, "{:?}", resp.body);
    let body = json_of(resp);
    assert_eq!(body["success"], false);
    let error = body["error"].as_str().unwrap();
    assert!(error.contains(needle), "expected '{needle}' in '{error}'");
}

fn accepted(resp: &ApiResponse) {
    assert_eq!(resp.status, 200, "{:?}", resp.body);
    assert_eq!(
        json_of(resp),
        json!({ "success": true, "result": "The certificate has been reissued" })
    );
}

#[test]
fn reissue_with_a_new_key_needs_dcv_for_the_new_csr_and_gives_a_new_serial() {
    let mut env = Env::new();
    let (pem, _) = csr(&["www.example.com"]);
    let id = env.issued(PARTNER, item(p::S_DV, "www.example.com", &pem), &pem);
    let first = env.leaf(id);
    let old_end = env.inspect(id)["subscription_end"].clone();
    let (new_pem, new_key) = csr(&["www.example.com"]);
    accepted(&reissue(&mut env, id, &[("csr", &new_pem)]));
    // Family S: the status call says in_progress; list and details carry the suffix.
    assert_eq!(env.status(PARTNER, id), "in_progress");
    assert_eq!(
        env.details(PARTNER, id)["status"]["certificate"],
        "issued_pending_reissuing"
    );
    let list = json_of(&env.get(PARTNER, "/api/v1/ssl_certificates"));
    assert_eq!(
        list[0]["status"],
        json!({ "code": "issued_pending_reissuing", "description": "issued_pending_reissuing" })
    );
    assert_eq!(env.details(PARTNER, id)["csr"], new_pem.as_str());
    // Both downloads wait while the reissue is processed.
    let resp = env.get(PARTNER, &Env::cert_path(id, "download"));
    assert_eq!(resp.status, 422);
    assert!(
        json_of(&resp)["errors"]
            .as_str()
            .unwrap()
            .contains("reissue")
    );
    assert_eq!(
        env.get(PARTNER, &Env::cert_path(id, "download_bundle"))
            .status,
        422
    );
    // DCV status shows the new hashes; the file is at the new path.
    env.advance(20);
    let status = json_of(&env.get(PARTNER, &Env::cert_path(id, "dcv")));
    assert_eq!(
        status["dcv"]["www.example.com"]["hashes"]["md5"],
        csr_hashes(&new_pem).0.as_str()
    );
    env.advance(30);
    let checks = env.due_for(id);
    assert_eq!(checks.len(), 1);
    let (path, content) = expected_file(&new_pem, p::S_DV, &env.unique_value(id));
    assert_eq!(checks[0].path, path);
    // The old file does not pass.
    let (_, old_content) = expected_file(&pem, p::S_DV, &env.unique_value(id));
    env.fetch(&checks[0], Ok(old_content.into_bytes()));
    assert_eq!(env.status(PARTNER, id), "in_progress");
    env.advance(60);
    let checks = env.due_for(id);
    env.fetch(&checks[0], Ok(content.into_bytes()));
    assert_eq!(env.status(PARTNER, id), "issued");
    let second = env.leaf(id);
    assert_ne!(second.serial, first.serial);
    assert_eq!(second.spki, spki(&new_key));
    assert_eq!(
        env.inspect(id)["subscription_end"],
        old_end,
        "a reissue does not extend the subscription"
    );
    assert_eq!(env.details(PARTNER, id)["status"]["certificate"], "issued");
    assert_eq!(
        env.get(PARTNER, &Env::cert_path(id, "download")).status,
        200
    );
}

#[test]
fn reissue_without_csr_keeps_the_key_but_needs_dcv_again_with_a_new_unique_value() {
    let mut env = Env::new();
    let (pem, key) = csr(&["www.example.com"]);
    let id = env.issued(PARTNER, item(p::D_DV, "www.example.com", &pem), &pem);
    let first = env.leaf(id);
    let uv = env.unique_value(id);
    accepted(&reissue(&mut env, id, &[]));
    assert_ne!(
        env.unique_value(id),
        uv,
        "new unique value, new file content"
    );
    env.pass_http(id, &pem, p::D_DV, 600);
    assert_eq!(env.status(PARTNER, id), "issued");
    let second = env.leaf(id);
    assert_ne!(second.serial, first.serial);
    assert_eq!(second.spki, spki(&key));
}

#[test]
fn rule_1_states() {
    let mut env = Env::new();
    let (pem, _) = csr(&["www.example.com"]);
    // new and in_progress may be reissued (the CSR of the pending order is replaced).
    let id = env.place(PARTNER, item(p::S_DV, "www.example.com", &pem));
    let (new_pem, _) = csr(&["www.example.com"]);
    accepted(&reissue(&mut env, id, &[("csr", &new_pem)]));
    assert_eq!(
        env.details(PARTNER, id)["status"]["certificate"],
        "new_pending_reissuing"
    );
    env.advance(20);
    assert_eq!(
        env.details(PARTNER, id)["status"]["certificate"],
        "in_progress_pending_reissuing"
    );
    env.pass_http(id, &new_pem, p::S_DV, 600);
    assert_eq!(env.details(PARTNER, id)["status"]["certificate"], "issued");
    // waiting_for_approval may be reissued; expired and annulled may not.
    let id = env.place(PARTNER, item(p::S_DV, "www.example.com", &pem));
    env.state.force_status(id, "waiting_for_approval").unwrap();
    accepted(&reissue(&mut env, id, &[]));
    for state in ["expired", "annulled", "other"] {
        let id = env.issued(PARTNER, item(p::S_DV, "www.example.com", &pem), &pem);
        env.state.force_status(id, state).unwrap();
        refused(
            &reissue(&mut env, id, &[]),
            &format!("state {state} cannot be reissued"),
        );
    }
}

#[test]
fn rule_2_names() {
    let mut env = Env::new();
    let k = KeyPair::generate().unwrap();
    // Single name: the CSR's common name must be the domain.
    let (pem, _) = csr(&["www.example.com"]);
    let id = env.issued(PARTNER, item(p::S_DV, "www.example.com", &pem), &pem);
    refused(
        &reissue(
            &mut env,
            id,
            &[("csr", &csr_with(&k, Some("other.example.com"), &[]))],
        ),
        "is not one of the certificate's domains",
    );
    refused(
        &reissue(
            &mut env,
            id,
            &[("csr", &csr_with(&k, None, &["www.example.com"]))],
        ),
        "no common name",
    );
    refused(
        &reissue(&mut env, id, &[("csr", "garbage")]),
        "csr must begin",
    );
    refused(
        &reissue(
            &mut env,
            id,
            &[(
                "csr",
                &csr_with(
                    &k,
                    Some("www.example.com"),
                    &["www.example.com", "intranet"],
                ),
            )],
        ),
        "internal name intranet",
    );

    // Wildcard: the bare domain is accepted as common name; the names stay.
    let (wpem, _) = csr(&["*.example.com"]);
    let mut wit = item(p::S_WILDCARD, "*.example.com", &wpem);
    wit["dcv_type"] = json!("CNAME_CSR_HASH");
    let wid = env.place(PARTNER, wit);
    env.state.set_instant(true);
    let (md5, sha) = csr_hashes(&wpem);
    let value = |sha: &str, uv: &str| {
        format!(
            "{}.{}.{}.ca-s.sandbox.test",
            &sha.to_lowercase()[..32],
            &sha.to_lowercase()[32..],
            uv.to_lowercase()
        )
    };
    env.state.set_dns_record(crate::state::DnsRecord {
        name: format!("_{}.example.com", md5.to_lowercase()),
        rtype: "CNAME".into(),
        value: value(&sha, &env.unique_value(wid)),
    });
    env.advance(1);
    assert_eq!(env.status(PARTNER, wid), "issued");
    let bare = csr_with(&k, Some("example.com"), &["example.com", "*.example.com"]);
    accepted(&reissue(&mut env, wid, &[("csr", &bare)]));
    assert_eq!(
        env.details(PARTNER, wid)["all_domains"],
        json!(["*.example.com", "example.com"])
    );
    env.state.set_instant(false);

    // Multi-domain of family D: names may not change or grow.
    let (dpem, _) = csr(&["www.example.com", "shop.example.com"]);
    let mut dit = item(p::D_UCC, "www.example.com", &dpem);
    dit["organization_name"] = json!("Example GmbH");
    let did = env.issued(PARTNER, dit, &dpem);
    refused(
        &reissue(
            &mut env,
            did,
            &[(
                "csr",
                &csr_with(
                    &k,
                    Some("www.example.com"),
                    &["www.example.com", "shop.example.com", "mail.example.com"],
                ),
            )],
        ),
        "mail.example.com is not one of the certificate's domains",
    );
    let fewer = csr_with(&k, Some("shop.example.com"), &["shop.example.com"]);
    accepted(&reissue(&mut env, did, &[("csr", &fewer)]));
    let d = env.details(PARTNER, did);
    assert_eq!(
        d["common_name"], "shop.example.com",
        "the common name can change"
    );
    assert_eq!(d["all_domains"], json!(["shop.example.com"]));

    // Multi-domain of family S: names may change, up to max(current, 3).
    let (spem, _) = csr(&["www.example.com", "shop.example.com"]);
    let sid = env.issued(PARTNER, item(p::S_UCC, "www.example.com", &spem), &spem);
    let changed = csr_with(
        &k,
        Some("www.example.com"),
        &["www.example.com", "blog.example.com", "api.example.com"],
    );
    let four = csr_with(
        &k,
        Some("www.example.com"),
        &[
            "www.example.com",
            "a.example.com",
            "b.example.com",
            "c.example.com",
        ],
    );
    refused(
        &reissue(&mut env, sid, &[("csr", &four)]),
        "cannot grow beyond 3",
    );
    refused(
        &reissue(
            &mut env,
            sid,
            &[(
                "csr",
                &csr_with(&k, Some("blog.example.com"), &["blog.example.com"]),
            )],
        ),
        "not one of the certificate's domains",
    );
    accepted(&reissue(&mut env, sid, &[("csr", &changed)]));
    assert_eq!(
        env.details(PARTNER, sid)["all_domains"],
        json!(["www.example.com", "blog.example.com", "api.example.com"])
    );
    env.pass_http(sid, &changed, p::S_UCC, 600);
    assert_eq!(env.status(PARTNER, sid), "issued");
    assert_eq!(
        env.leaf(sid).names,
        ["www.example.com", "blog.example.com", "api.example.com"]
    );
}

#[test]
fn rule_3_blackout_in_the_last_30_days_of_the_subscription() {
    let mut env = Env::new();
    let (pem, _) = csr(&["www.example.com"]);
    let id = env.issued(PARTNER, item(p::S_DV, "www.example.com", &pem), &pem);
    env.state.shorten_subscription(id, 29, env.now).unwrap();
    refused(
        &reissue(&mut env, id, &[]),
        "last 30 days of the subscription",
    );
    env.state.shorten_subscription(id, 31, env.now).unwrap();
    accepted(&reissue(&mut env, id, &[]));
    assert!(env.state.shorten_subscription(1, 5, env.now).is_err());
    let pending = env.place(PARTNER, item(p::S_DV, "www.example.com", &pem));
    assert!(env.state.shorten_subscription(pending, 5, env.now).is_err());
}

#[test]
fn rule_4_family_c_needs_a_new_key_every_time_and_keeps_showing_issued() {
    let mut env = Env::new();
    let (pem, key) = csr(&["www.example.com"]);
    let id = env.issued(PARTNER, item(p::C_DV, "www.example.com", &pem), &pem);
    refused(&reissue(&mut env, id, &[]), "new private key");
    let same_key = csr_with(&key, Some("www.example.com"), &["www.example.com"]);
    refused(
        &reissue(&mut env, id, &[("csr", &same_key)]),
        "current private key",
    );
    let (new_pem, new_key) = csr(&["www.example.com"]);
    let first = env.leaf(id).serial;
    accepted(&reissue(&mut env, id, &[("csr", &new_pem)]));
    assert_eq!(
        env.status(PARTNER, id),
        "issued",
        "family C keeps reporting issued"
    );
    assert_eq!(
        env.details(PARTNER, id)["status"]["certificate"],
        "issued_pending_reissuing"
    );
    assert_eq!(env.get(PARTNER, &Env::cert_path(id, "dcv")).status, 422);
    env.pass_http(id, &new_pem, p::C_DV, 900);
    env.advance(300);
    let leaf = env.leaf(id);
    assert_ne!(leaf.serial, first);
    assert_eq!(leaf.spki, spki(&new_key));
    // The next reissue may not go back to the previous key either.
    refused(
        &reissue(&mut env, id, &[("csr", &new_pem)]),
        "current private key",
    );
}

#[test]
fn rule_5_one_reissue_at_a_time() {
    let mut env = Env::new();
    let (pem, _) = csr(&["www.example.com"]);
    let id = env.issued(PARTNER, item(p::S_DV, "www.example.com", &pem), &pem);
    accepted(&reissue(&mut env, id, &[]));
    refused(&reissue(&mut env, id, &[]), "already in progress");
}

#[test]
fn rule_6_family_s_dns_txt_needs_another_method_for_every_domain() {
    let mut env = Env::instant();
    let (pem, _) = csr(&["www.example.com", "shop.example.com"]);
    let mut it = item(p::S_UCC, "www.example.com", &pem);
    it["dcv_type"] = json!("DNS_TXT_TOKEN");
    let id = env.place(PARTNER, it);
    let value = env.details(PARTNER, id)["dcv_content"]
        .as_str()
        .unwrap()
        .to_string();
    env.state.set_dns_record(crate::state::DnsRecord {
        name: "_pki-validation.example.com".into(),
        rtype: "TXT".into(),
        value,
    });
    env.advance(1);
    assert_eq!(env.status(PARTNER, id), "issued");
    refused(&reissue(&mut env, id, &[]), "DNS_TXT_TOKEN");
    refused(
        &reissue(&mut env, id, &[("validation_email", "HTTP_CSR_HASH")]),
        "missing for shop.example.com",
    );
    refused(
        &reissue(
            &mut env,
            id,
            &[
                ("validation_email", "DNS_TXT_TOKEN"),
                ("validation_emails[shop.example.com]", "HTTP_CSR_HASH"),
            ],
        ),
        "cannot be chosen on reissue",
    );
    refused(
        &reissue(
            &mut env,
            id,
            &[
                ("validation_email", "HTTP_CSR_HASH"),
                ("validation_emails[mail.example.com]", "HTTP_CSR_HASH"),
            ],
        ),
        "mail.example.com is not a domain",
    );
    refused(
        &reissue(
            &mut env,
            id,
            &[
                ("validation_email", "info@example.com"),
                ("validation_emails[shop.example.com]", "HTTP_CSR_HASH"),
            ],
        ),
        "not an accepted validation address",
    );
    accepted(&reissue(
        &mut env,
        id,
        &[
            ("validation_email", "admin@example.com"),
            ("validation_emails[shop.example.com]", "CNAME_CSR_HASH"),
        ],
    ));
    let rec = env.inspect(id);
    assert_eq!(rec["domains"][0]["method"], "Email");
    assert_eq!(rec["domains"][1]["method"], "Cname");
}

#[test]
fn reissue_can_change_methods_and_keeps_them_otherwise() {
    let mut env = Env::new();
    let (pem, _) = csr(&["www.example.com"]);
    let id = env.issued(PARTNER, item(p::D_DV, "www.example.com", &pem), &pem);
    accepted(&reissue(
        &mut env,
        id,
        &[("validation_email", "HTTPS_CSR_HASH")],
    ));
    assert_eq!(
        env.details(PARTNER, id)["dcv_method"],
        "HTTP_CSR_HASH",
        "family D: HTTPS is HTTP"
    );
    let body = serde_json::json!({ "validation_email": "admin@example.com" });
    env.pass_http(id, &pem, p::D_DV, 600);
    let resp = env.post_json(PARTNER, &Env::cert_path(id, "reissue"), &body);
    accepted(&resp);
    assert_eq!(
        env.details(PARTNER, id)["validation_email"],
        "admin@example.com",
        "JSON body works too"
    );
    let resp = env.post_json(
        PARTNER,
        &Env::cert_path(id, "reissue"),
        &json!({ "validation_emails": "x" }),
    );
    assert_eq!(resp.status, 422);
}

#[test]
fn rule_7_s_two_multi_domain_reissue_gets_a_new_id() {
    let mut env = Env::new();
    let (pem, _) = csr(&["www.example.com", "shop.example.com"]);
    let id = env.issued(PARTNER, item(p::S2_UCC, "www.example.com", &pem), &pem);
    let original_serial = env.leaf(id).serial;
    let (new_pem, new_key) = csr(&["www.example.com", "shop.example.com"]);
    accepted(&reissue(&mut env, id, &[("csr", &new_pem)]));
    let replacement = env.details(PARTNER, id)["replacement_id"]
        .as_u64()
        .expect("replacement_id");
    assert_ne!(replacement, id);
    // The original stays issued; it refuses reissue, DCV, cancel; both downloads wait.
    assert_eq!(env.status(PARTNER, id), "issued");
    refused(
        &reissue(&mut env, id, &[]),
        &format!("replaced by certificate {replacement}"),
    );
    let r = json_of(&env.post_form(PARTNER, &Env::cert_path(id, "cancel"), &[]));
    assert_eq!(r["success"], false);
    assert_eq!(
        json_of(&env.post_form(PARTNER, &Env::cert_path(id, "prolong"), &[])),
        json!({ "prolongation_token": null })
    );
    assert_eq!(
        env.get(PARTNER, &Env::cert_path(id, "download")).status,
        422
    );
    assert_eq!(
        env.get(PARTNER, &Env::cert_path(id, "download_bundle"))
            .status,
        422
    );
    // The replacement is a certificate of its own: new, then in progress, then issued.
    assert_eq!(env.status(PARTNER, replacement), "new");
    let list = json_of(&env.get(PARTNER, "/api/v1/ssl_certificates"));
    assert_eq!(list[0]["internal_number"], replacement);
    env.pass_http(replacement, &new_pem, p::S2_UCC, 600);
    assert_eq!(env.status(PARTNER, replacement), "issued");
    let leaf = env.leaf(replacement);
    assert_eq!(leaf.spki, spki(&new_key));
    assert_ne!(leaf.serial, original_serial);
    assert_eq!(
        env.inspect(replacement)["subscription_end"],
        env.inspect(id)["subscription_end"]
    );
    // Both download calls on the original serve the replacement.
    let resp = env.get(PARTNER, &Env::cert_path(id, "download_bundle"));
    assert_eq!(resp.status, 200);
    match &resp.body {
        ResponseBody::Bytes { filename, .. } => assert_eq!(
            filename.as_deref(),
            Some(format!("partner_OSC-{replacement}.zip").as_str())
        ),
        other => panic!("{other:?}"),
    }
    assert_eq!(
        env.get(PARTNER, &Env::cert_path(id, "download")).status,
        200
    );
    let input = env.state.hostile_input(id, env.now, ca()).unwrap();
    assert_eq!(input.public_key_der, spki(&new_key));
    // A reissue of the replacement gives yet another ID; the original points to the latest.
    let (third_pem, _) = csr(&["www.example.com", "shop.example.com"]);
    accepted(&reissue(&mut env, replacement, &[("csr", &third_pem)]));
    let latest = env.details(PARTNER, replacement)["replacement_id"]
        .as_u64()
        .unwrap();
    assert_eq!(env.details(PARTNER, id)["replacement_id"], latest);
    // Not billed: still one billed order.
    assert!(
        env.state
            .billed_orders()
            .contains(&(PARTNER.to_string(), 1))
    );
    // s-one multi-domain products keep their ID.
    let (spem, _) = csr(&["www.example.com", "shop.example.com"]);
    let sid = env.issued(PARTNER, item(p::S_UCC, "www.example.com", &spem), &spem);
    accepted(&reissue(&mut env, sid, &[]));
    assert_eq!(env.details(PARTNER, sid)["replacement_id"], Value::Null);
}

#[test]
fn reissue_refused_while_cancellation_is_pending() {
    let mut env = Env::new();
    let (pem, _) = csr(&["www.example.com"]);
    let id = env.issued(PARTNER, item(p::S_DV, "www.example.com", &pem), &pem);
    let r = json_of(&env.post_form(PARTNER, &Env::cert_path(id, "cancel"), &[]));
    assert_eq!(r["success"], true);
    refused(&reissue(&mut env, id, &[]), "cancellation is pending");
}

#[test]
fn expiry_ends_a_running_reissue() {
    let mut env = Env::new();
    let (pem, _) = csr(&["www.example.com"]);
    let id = env.issued(PARTNER, item(p::S_DV, "www.example.com", &pem), &pem);
    env.state.age_certificate(id, 1, env.now, ca()).unwrap();
    accepted(&reissue(&mut env, id, &[]));
    env.advance_days(1);
    assert_eq!(env.status(PARTNER, id), "expired");
    assert_eq!(env.details(PARTNER, id)["status"]["certificate"], "expired");
    assert!(env.due_for(id).is_empty());
}
