//! DNS methods, EMAIL approval, DCV status shapes per family, DCV emails, change and resend.

use serde_json::{Value, json};

use super::*;
use crate::state::DnsRecord;
use crate::state::dcv::content_matches;

fn with_method(mut item: Value, method: &str) -> Value {
    item["dcv_type"] = json!(method);
    item
}

fn txt(name: &str, value: &str) -> DnsRecord {
    DnsRecord {
        name: name.to_string(),
        rtype: "TXT".to_string(),
        value: value.to_string(),
    }
}

fn dcv(env: &mut Env, id: u64) -> Value {
    let resp = env.get(PARTNER, &Env::cert_path(id, "dcv"));
    assert_eq!(resp.status, 200, "{:?}", resp.body);
    json_of(&resp)
}

#[test]
fn file_content_tolerates_crlf_and_trailing_whitespace_only() {
    let expected = "ABC\nca-s.sandbox.test\nuv1";
    for ok in [
        "ABC\nca-s.sandbox.test\nuv1",
        "ABC\r\nca-s.sandbox.test\r\nuv1\r\n",
        "ABC \nca-s.sandbox.test\t\nuv1\n\n\n",
    ] {
        assert!(content_matches(ok.as_bytes(), expected), "{ok:?}");
    }
    for bad in [
        "abc\nca-s.sandbox.test\nuv1",
        " ABC\nca-s.sandbox.test\nuv1",
        "\u{feff}ABC\nca-s.sandbox.test\nuv1",
        "ABC\nca-s.sandbox.test",
        "ABC\nca-s.sandbox.test\nuv1\nextra",
        "ABC\n\nca-s.sandbox.test\nuv1",
        "ABC ca-s.sandbox.test uv1",
        "",
    ] {
        assert!(!content_matches(bad.as_bytes(), expected), "{bad:?}");
    }
    assert!(!content_matches(&[0xff, 0xfe], expected));
}

#[test]
fn cname_csr_hash_records_per_family() {
    for (product, with_uv) in [(p::S_DV, true), (p::D_DV, false), (p::C_DV, false)] {
        let mut env = Env::new();
        let (pem, _) = csr(&["www.example.com"]);
        let id = env.place(
            PARTNER,
            with_method(item(product, "www.example.com", &pem), "CNAME_CSR_HASH"),
        );
        assert_eq!(env.details(PARTNER, id)["dcv_content"], Value::Null);
        let (md5, sha) = csr_hashes(&pem);
        let name = format!("_{}.www.example.com", md5.to_lowercase());
        let sha = sha.to_lowercase();
        let uv = env.unique_value(id).to_lowercase();
        let value = if with_uv {
            format!(
                "{}.{}.{uv}.{}",
                &sha[..32],
                &sha[32..],
                ca_domain_of(product)
            )
        } else {
            format!("{}.{}.{}", &sha[..32], &sha[32..], ca_domain_of(product))
        };
        // A wrong value does not validate.
        env.state.set_dns_record(DnsRecord {
            name: name.clone(),
            rtype: "CNAME".into(),
            value: "x.example.net".into(),
        });
        env.advance(700);
        assert_eq!(env.status(PARTNER, id), "in_progress", "{product}");
        // The right one (trailing dot and case do not matter in DNS) replaces it.
        env.state.set_dns_record(DnsRecord {
            name: name.to_uppercase(),
            rtype: "cname".into(),
            value: format!("{}.", value.to_uppercase()),
        });
        assert_eq!(env.state.dns_records().len(), 1);
        env.advance(300);
        env.advance(300);
        assert_eq!(
            env.status(PARTNER, id),
            "issued",
            "{product}: {}",
            env.inspect(id)
        );
    }
}

#[test]
fn family_s_dns_txt_token_covers_the_order_and_parent_domains() {
    let mut env = Env::new();
    let (pem, _) = csr(&["www.example.com", "shop.example.com"]);
    let id = env.place(
        PARTNER,
        with_method(item(p::S_UCC, "www.example.com", &pem), "DNS_TXT_TOKEN"),
    );
    env.advance(20);
    let status = dcv(&mut env, id);
    let value = status["dcv"]["www.example.com"]["emails"]["random_value"]
        .as_str()
        .unwrap()
        .to_string();
    assert_eq!(
        status["dcv"]["shop.example.com"]["emails"]["random_value"],
        value.as_str(),
        "one value for the order"
    );
    assert_eq!(env.details(PARTNER, id)["dcv_content"], value.as_str());
    assert_eq!(
        status["dcv"]["www.example.com"]["method"],
        "DNS TXT random value"
    );
    // Not due yet: the first check is 30 s after reaching the CA.
    env.state
        .set_dns_record(txt("_pki-validation.example.com", &value));
    env.advance(29);
    assert_eq!(env.status(PARTNER, id), "in_progress");
    env.advance(1);
    assert_eq!(
        env.status(PARTNER, id),
        "issued",
        "a parent-domain record validates both names"
    );
}

#[test]
fn families_d_and_c_dns_txt_values_are_per_domain_at_the_exact_name() {
    let mut env = Env::new();
    let (pem, _) = csr(&["www.example.com", "shop.example.com"]);
    let mut it = with_method(item(p::D_UCC, "www.example.com", &pem), "DNS_TXT_TOKEN");
    it["organization_name"] = json!("Example GmbH");
    let id = env.place(PARTNER, it);
    env.advance(20);
    let status = dcv(&mut env, id);
    let www = status["dcv"]["www.example.com"]["emails"]["random_value"]
        .as_str()
        .unwrap()
        .to_string();
    let shop = status["dcv"]["shop.example.com"]["emails"]["random_value"]
        .as_str()
        .unwrap()
        .to_string();
    assert_ne!(www, shop);
    env.state
        .set_dns_record(txt("_pki-validation.example.com", &www));
    env.state
        .set_dns_record(txt("_pki-validation.www.example.com", "other"));
    env.state
        .set_dns_record(txt("_pki-validation.www.example.com", &www));
    env.advance(120);
    let rec = env.inspect(id);
    assert_eq!(rec["domains"][0]["valid"], true);
    assert_eq!(
        rec["domains"][1]["valid"], false,
        "no parent-domain rule for family D"
    );
    env.state
        .set_dns_record(txt("_pki-validation.shop.example.com", &www));
    env.advance(120);
    assert_eq!(
        env.inspect(id)["domains"][1]["valid"],
        false,
        "the other domain's value"
    );
    env.state
        .remove_dns_record("_pki-validation.shop.example.com", "TXT");
    env.state
        .set_dns_record(txt("_pki-validation.shop.example.com", &shop));
    env.advance(120);
    assert_eq!(env.status(PARTNER, id), "issued");
}

#[test]
fn wildcard_dns_record_goes_without_the_star() {
    let mut env = Env::new();
    let (pem, _) = csr(&["*.example.com"]);
    let id = env.place(
        PARTNER,
        with_method(item(p::C_WILDCARD, "*.example.com", &pem), "DNS_TXT_TOKEN"),
    );
    env.advance(300);
    let value = dcv(&mut env, id)["dcv"]["*.example.com"]["emails"]["random_value"]
        .as_str()
        .unwrap()
        .to_string();
    env.state
        .set_dns_record(txt("_pki-validation.example.com", &value));
    env.advance(30);
    assert_eq!(env.inspect(id)["domains"][0]["valid"], true);
    assert_eq!(
        env.status(PARTNER, id),
        "in_progress",
        "family C: until the next pickup"
    );
    env.advance(270);
    assert_eq!(env.status(PARTNER, id), "issued");
    assert_eq!(env.leaf(id).names, ["*.example.com", "example.com"]);
}

#[test]
fn email_validation_passes_on_approval() {
    let mut env = Env::new();
    let (pem, _) = csr(&["www.example.com", "shop.example.com"]);
    let mut it = with_method(item(p::S_UCC, "www.example.com", &pem), "EMAIL");
    it["dcv_email"] = json!("admin@example.com");
    it["additional_validation_emails"] = json!({ "shop.example.com": "HTTP_CSR_HASH" });
    let id = env.place(PARTNER, it);
    assert!(
        env.state.approve_email(id, None).is_err(),
        "not sent before the order reaches the CA"
    );
    env.advance(90);
    let status = dcv(&mut env, id);
    let www = &status["dcv"]["www.example.com"];
    assert_eq!(www["method"], "admin@example.com");
    assert_eq!(www["dcv_method"], "EMAIL");
    assert!(www.get("hashes").is_none(), "no hashes for EMAIL");
    assert_eq!(
        status["dcv"]["shop.example.com"]["hashes"]["md5"],
        csr_hashes(&pem).0.as_str()
    );
    assert!(
        env.state
            .approve_email(id, Some("shop.example.com"))
            .is_err(),
        "not an EMAIL domain"
    );
    env.state
        .approve_email(id, Some("WWW.example.com"))
        .unwrap();
    assert_eq!(env.status(PARTNER, id), "in_progress");
    env.pass_http(id, &pem, p::S_UCC, 120);
    assert_eq!(env.status(PARTNER, id), "issued");
    assert!(env.state.approve_email(id, None).is_err());
    assert!(env.state.approve_email(1, None).is_err());
    let d = env.details(PARTNER, id);
    assert_eq!(d["validation_email"], "admin@example.com");
    assert_eq!(
        d["additional_validation_emails"],
        json!({ "shop.example.com": "HTTP_CSR_HASH" })
    );
    let list = json_of(&env.get(PARTNER, "/api/v1/ssl_certificates"));
    assert_eq!(
        list[0]["all_validation_emails"],
        json!(["admin@example.com"])
    );
}

#[test]
fn dcv_status_shape_per_family() {
    let mut env = Env::new();
    for (product, family) in [(p::S_DV, 'S'), (p::D_DV, 'D'), (p::C_DV, 'C')] {
        let (pem, _) = csr(&["www.example.com"]);
        let id = env.place(PARTNER, item(product, "www.example.com", &pem));
        env.advance(300);
        env.advance(60);
        let status = dcv(&mut env, id);
        let e = &status["dcv"]["www.example.com"];
        assert_eq!(e["valid"], false);
        assert_eq!(e["sent"], true);
        assert_eq!(e["api"], true);
        assert!(e["status"].is_string());
        assert_eq!(e["emails"]["level_2"][0], "admin@example.com");
        assert!(e["emails"].get("random_value").is_none(), "no DNS method");
        let (md5, sha) = csr_hashes(&pem);
        match family {
            'S' => {
                assert_eq!(e["method"], "HTTP CSR Hash");
                assert_eq!(e["dcv_method"], "HTTP_CSR_HASH");
                assert_eq!(
                    e["hashes"],
                    json!({ "md5": md5, "sha1": sha }),
                    "sha1 holds the SHA-256"
                );
                let uv = env.unique_value(id);
                assert_eq!(e["unique_value"], uv.as_str());
                assert_eq!(status["unique_value"], uv.as_str());
            }
            'D' => {
                assert_eq!(e["method"], "HTTP CSR Hash");
                assert!(
                    e.get("dcv_method").is_none()
                        && e.get("hashes").is_none()
                        && e.get("unique_value").is_none()
                );
                assert!(status.get("unique_value").is_none());
            }
            _ => assert_eq!(e["method"], Value::Null),
        }
        // details carry the file content with the hash.
        let content = env.details(PARTNER, id)["dcv_content"]
            .as_str()
            .unwrap()
            .to_string();
        assert_eq!(
            content,
            expected_file(&pem, product, &env.unique_value(id)).1
        );
    }
}

#[test]
fn given_unique_value_is_used_in_the_file() {
    let mut env = Env::new();
    let (pem, _) = csr(&["www.example.com"]);
    let mut it = item(p::S_DV, "www.example.com", &pem);
    it["unique_value"] = json!("MyValue2026");
    let id = env.place(PARTNER, it);
    assert_eq!(env.unique_value(id), "MyValue2026");
    let content = env.details(PARTNER, id)["dcv_content"]
        .as_str()
        .unwrap()
        .to_string();
    assert!(content.ends_with("\nMyValue2026"));
    // Generated otherwise: letters and digits, at most 20.
    let id = env.place(PARTNER, item(p::S_DV, "www.example.com", &pem));
    let uv = env.unique_value(id);
    assert!(uv.len() <= 20 && uv.bytes().all(|b| b.is_ascii_alphanumeric()));
}

#[test]
fn dcv_emails_call() {
    let mut env = Env::new();
    let resp = env.post_form(
        PARTNER,
        "/api/v1/dcv_emails",
        &[("domain_name", "www.shop.example.com")],
    );
    assert_eq!(resp.status, 200);
    let body = json_of(&resp);
    assert_eq!(body["whois"], json!([]));
    assert_eq!(body["level_2"].as_array().unwrap().len(), 5);
    assert!(
        body["level_3"]
            .as_array()
            .unwrap()
            .iter()
            .any(|e| e == "webmaster@www.shop.example.com")
    );
    let resp = env.post_form(
        PARTNER,
        "/api/v1/dcv_emails",
        &[
            ("domain_name", "example.com"),
            ("provider", crate::state::PROVIDER_D),
        ],
    );
    assert_eq!(resp.status, 200);
    let resp = env.post_json(
        PARTNER,
        "/api/v1/dcv_emails",
        &json!({ "domain_name": "*.example.com" }),
    );
    assert_eq!(json_of(&resp)["level_2"][0], "admin@example.com");
    let resp = env.post_form(
        PARTNER,
        "/api/v1/dcv_emails",
        &[("domain_name", "example.com"), ("provider", "other")],
    );
    assert_eq!(resp.status, 400);
    let resp = env.post_form(PARTNER, "/api/v1/dcv_emails", &[]);
    assert_eq!(
        (resp.status, json_of(&resp)),
        (400, json!({ "error": "domain_name is missing" }))
    );
    let resp = env.post_form(PARTNER, "/api/v1/dcv_emails", &[("domain_name", "server")]);
    assert_eq!(resp.status, 400);
    // Restricted logins may read.
    assert_eq!(
        env.post_form(
            BILLING,
            "/api/v1/dcv_emails",
            &[("domain_name", "example.com")]
        )
        .status,
        200
    );
}

fn change(env: &mut Env, id: u64, pairs: &[(&str, &str)]) -> Value {
    let resp = env.post_form(PARTNER, &Env::cert_path(id, "change_dcv"), pairs);
    assert_eq!(resp.status, 200, "{:?}", resp.body);
    json_of(&resp)
}

#[test]
fn change_dcv_results() {
    let mut env = Env::new();
    let (pem, _) = csr(&["www.example.com", "shop.example.com"]);
    let id = env.place(PARTNER, item(p::S_UCC, "www.example.com", &pem));
    // Not at the CA yet: stored for the order, success false.
    let r = change(
        &mut env,
        id,
        &[("email", "CNAME_CSR_HASH"), ("domain", "www.example.com")],
    );
    assert_eq!(
        r,
        json!({ "success": false, "result": "DCV email has been changed" })
    );
    assert_eq!(env.details(PARTNER, id)["dcv_method"], "CNAME_CSR_HASH");
    env.advance(20);
    let r = change(
        &mut env,
        id,
        &[
            ("email", "admin@example.com"),
            ("domain", "www.example.com"),
        ],
    );
    assert_eq!(
        r,
        json!({ "success": true, "result": "DCV email has been changed and resent" })
    );
    assert_eq!(
        env.details(PARTNER, id)["validation_email"],
        "admin@example.com"
    );
    let r = change(
        &mut env,
        id,
        &[
            ("email", "admin@example.com"),
            ("domain", "www.example.com"),
        ],
    );
    assert_eq!(
        r,
        json!({ "success": true, "result": "DCV email has been re-sent/ Alt DCV retried" })
    );
    let refused: Vec<(Vec<(&str, &str)>, &str)> = vec![
        (vec![("email", "HTTP_CSR_HASH")], "domain is required"),
        (
            vec![("email", "HTTP_CSR_HASH"), ("domain", "mail.example.com")],
            "not a domain of this certificate",
        ),
        (
            vec![("email", "DNS_TXT_TOKEN"), ("domain", "www.example.com")],
            "cannot be set by change DCV",
        ),
        (
            vec![("email", "DNSTXTRNDVAL"), ("domain", "www.example.com")],
            "cannot be set by change DCV",
        ),
        (
            vec![("email", "EMAIL"), ("domain", "www.example.com")],
            "cannot be set by change DCV",
        ),
        (
            vec![("email", "root@example.com"), ("domain", "www.example.com")],
            "not an accepted validation address",
        ),
    ];
    for (pairs, needle) in refused {
        let r = change(&mut env, id, &pairs);
        assert_eq!(r["success"], false, "{pairs:?}");
        let text = r["result"].as_str().unwrap();
        assert!(
            text.starts_with("Failed changing DCV email: ") && text.contains(needle),
            "{text}"
        );
    }
    let resp = env.post_form(PARTNER, &Env::cert_path(id, "change_dcv"), &[]);
    assert_eq!(resp.status, 400);
    // The change restarts validation of that domain.
    env.state
        .approve_email(id, Some("www.example.com"))
        .unwrap();
    change(
        &mut env,
        id,
        &[("email", "HTTP_CSR_HASH"), ("domain", "www.example.com")],
    );
    assert_eq!(env.inspect(id)["domains"][0]["valid"], false);
    env.pass_http(id, &pem, p::S_UCC, 120);
    assert_eq!(env.status(PARTNER, id), "issued");
    let r = change(
        &mut env,
        id,
        &[("email", "HTTP_CSR_HASH"), ("domain", "www.example.com")],
    );
    assert_eq!(r["success"], false);
    assert!(r["result"].as_str().unwrap().contains("not in progress"));
}

#[test]
fn change_dcv_family_rules() {
    let mut env = Env::new();
    let (pem, _) = csr(&["www.example.com"]);
    let id = env.place(PARTNER, item(p::D_DV, "www.example.com", &pem));
    env.advance(20);
    let r = change(&mut env, id, &[("email", "HTTPS_CSR_HASH")]);
    assert_eq!(r["success"], false);
    assert!(r["result"].as_str().unwrap().contains("family S only"));
    let r = change(&mut env, id, &[("email", "CNAME_CSR_HASH")]);
    assert_eq!(r["success"], true, "single domain: domain may be omitted");
    let (wpem, _) = csr(&["*.example.com"]);
    let id = env.place(
        PARTNER,
        with_method(
            item(p::S_WILDCARD, "*.example.com", &wpem),
            "CNAME_CSR_HASH",
        ),
    );
    env.advance(20);
    let r = change(&mut env, id, &[("email", "HTTP_CSR_HASH")]);
    assert!(r["result"].as_str().unwrap().contains("wildcard"), "{r}");
}

#[test]
fn resend_only_in_progress() {
    let mut env = Env::new();
    let (pem, _) = csr(&["www.example.com"]);
    let id = env.place(PARTNER, item(p::S_DV, "www.example.com", &pem));
    let resp = env.post_form(PARTNER, &Env::cert_path(id, "resend_dcv"), &[]);
    assert_eq!(resp.status, 200);
    let r = json_of(&resp);
    assert_eq!(r["success"], false);
    assert!(
        r["result"]
            .as_str()
            .unwrap()
            .starts_with("Failed resend DCV email: ")
    );
    env.advance(20);
    let r = json_of(&env.post_form(PARTNER, &Env::cert_path(id, "resend_dcv"), &[]));
    assert_eq!(r["success"], true);
    env.pass_http(id, &pem, p::S_DV, 120);
    let r = json_of(&env.post_form(PARTNER, &Env::cert_path(id, "resend_dcv"), &[]));
    assert_eq!(r["success"], false);
}

#[test]
fn change_dcv_reads_the_query_string() {
    let mut env = Env::new();
    let (pem, _) = csr(&["www.example.com", "shop.example.com"]);
    let id = env.place(PARTNER, item(p::S_UCC, "www.example.com", &pem));
    let token = env.token(PARTNER);
    let resp = env.call(&request(
        Method::POST,
        &Env::cert_path(id, "change_dcv"),
        &[
            ("email", "CNAME_CSR_HASH"),
            ("domain", "www.example.com"),
            ("auth_token", &token),
        ],
        &[],
        Bytes::new(),
    ));
    assert_eq!(resp.status, 200, "{:?}", resp.body);
    assert_eq!(env.details(PARTNER, id)["dcv_method"], "CNAME_CSR_HASH");
}

#[test]
fn an_approval_alone_issues_at_the_next_request() {
    let mut env = Env::new();
    let (pem, _) = csr(&["www.example.com"]);
    let mut it = with_method(item(p::S_DV, "www.example.com", &pem), "EMAIL");
    it["dcv_email"] = json!("admin@example.com");
    let id = env.place(PARTNER, it);
    env.advance(90);
    assert_eq!(env.status(PARTNER, id), "in_progress");
    env.state.approve_email(id, None).unwrap();
    assert_eq!(env.status(PARTNER, id), "issued");
}
