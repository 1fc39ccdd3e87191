//! Endpoint 5: every validation rule, every error shape, billing.

use bytes::Bytes;
use http::Method;
use rcgen::KeyPair;
use serde_json::{Value, json};

use super::*;

fn with(item: &Value, key: &str, value: Value) -> Value {
    let mut item = item.clone();
    item[key] = value;
    item
}

fn without(item: &Value, key: &str) -> Value {
    let mut item = item.clone();
    item.as_object_mut().unwrap().remove(key);
    item
}

fn base() -> Value {
    let (pem, _) = csr(&["www.example.com"]);
    item(p::S_DV, "www.example.com", &pem)
}

/// An openssl-made CSR (for keys rcgen cannot make).
fn openssl_csr(newkey: &str, cn: &str) -> String {
    static N: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
    let n = N.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
    let dir = std::env::temp_dir().join(format!("sbx-state-{}-{n}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let out = std::process::Command::new("/usr/bin/openssl")
        .args([
            "req",
            "-new",
            "-newkey",
            newkey,
            "-nodes",
            "-keyout",
            "k.pem",
            "-subj",
            &format!("/CN={cn}"),
            "-out",
            "c.pem",
        ])
        .current_dir(&dir)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let pem = std::fs::read_to_string(dir.join("c.pem")).unwrap();
    let _ = std::fs::remove_dir_all(&dir);
    pem
}

#[test]
fn key_problem_accepts_rsa_2048_to_4096_and_p256_p384_only() {
    use crate::state::orders::key_problem;
    let dir = std::env::temp_dir().join(format!("sbx-state-keys-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let spki = |args: &[&str]| {
        let mut cmd = vec!["genpkey"];
        cmd.extend_from_slice(args);
        cmd.extend(["-out", "k.pem"]);
        assert!(
            std::process::Command::new("/usr/bin/openssl")
                .args(&cmd)
                .current_dir(&dir)
                .output()
                .unwrap()
                .status
                .success()
        );
        let out = std::process::Command::new("/usr/bin/openssl")
            .args(["pkey", "-in", "k.pem", "-pubout", "-outform", "DER"])
            .current_dir(&dir)
            .output()
            .unwrap();
        out.stdout
    };
    let rsa1024 = spki(&["-algorithm", "RSA", "-pkeyopt", "rsa_keygen_bits:1024"]);
    assert!(
        key_problem(&rsa1024)
            .unwrap()
            .contains("1024 bits is too short")
    );
    let rsa2048 = spki(&["-algorithm", "RSA", "-pkeyopt", "rsa_keygen_bits:2048"]);
    assert_eq!(key_problem(&rsa2048), None);
    let secp256k1 = spki(&[
        "-algorithm",
        "EC",
        "-pkeyopt",
        "ec_paramgen_curve:secp256k1",
    ]);
    assert!(key_problem(&secp256k1).unwrap().contains("elliptic curve"));
    let p384 = spki(&["-algorithm", "EC", "-pkeyopt", "ec_paramgen_curve:P-384"]);
    assert_eq!(key_problem(&p384), None);
    let ed = spki(&["-algorithm", "ED25519"]);
    assert!(key_problem(&ed).unwrap().contains("key algorithm"));
    assert!(key_problem(b"junk").is_some());
    let _ = std::fs::remove_dir_all(&dir);
}

fn errors_for(env: &mut Env, item: Value) -> Vec<String> {
    errors_of(&env.order(PARTNER, &[item]))
}

#[test]
fn accepted_order_is_billed_and_starts_new() {
    let mut env = Env::new();
    let resp = env.order(PARTNER, &[base()]);
    assert_eq!(resp.status, 200, "{:?}", resp.body);
    assert!(resp.billed);
    assert_eq!(resp.account.as_deref(), Some(PARTNER));
    let body = json_of(&resp);
    assert!(body["order"].is_u64() && body["certificate"].is_u64());
    assert!(body["token"].as_str().is_some_and(|t| !t.is_empty()));
    let id = body["certificate"].as_u64().unwrap();
    assert_eq!(env.status(PARTNER, id), "new");
    let counts = env.state.billed_orders();
    assert!(counts.contains(&(PARTNER.to_string(), 1)));
    assert!(counts.contains(&(OTHER.to_string(), 0)));
    let balance = json_of(&env.get(PARTNER, "/api/v1/billing/balance"));
    assert_eq!(balance["reserved"]["sum"], 8.8);
    assert_eq!(balance["common"]["sum"], 4991.2);
    assert_eq!(balance["balance"]["sum"], 5000.0);
    let details = env.details(PARTNER, id);
    assert_eq!(details["price"], 8.8);
    assert_eq!(details["payment_status"], "unpaid");
    assert_eq!(details["unpaid"], true);
    assert_eq!(details["currency"], "USD");
    // A second identical POST is a second billed order.
    assert_eq!(env.order(PARTNER, &[base()]).status, 200);
    assert!(
        env.state
            .billed_orders()
            .contains(&(PARTNER.to_string(), 2))
    );
}

#[test]
fn missing_order_object_is_400() {
    let mut env = Env::new();
    let token = env.signin(PARTNER);
    let bodies: [(&str, &str); 5] = [
        ("application/json", "{}"),
        ("application/json", r#"{"order": "x"}"#),
        ("application/json", r#"{"items": []}"#),
        ("application/x-www-form-urlencoded", "order=1"),
        ("text/plain", r#"{"order":{"items":[]}}"#),
    ];
    for (ct, body) in bodies {
        let resp = env.call(&request(
            Method::POST,
            "/api/v1/order",
            &[],
            &[("x-auth-token", &token), ("content-type", ct)],
            body,
        ));
        assert_eq!(resp.status, 400, "{body}");
        assert_eq!(
            json_of(&resp),
            json!({ "error": "Required parameter is missing" })
        );
        assert!(!resp.billed);
    }
    let resp = env.call(&request(
        Method::POST,
        "/api/v1/order",
        &[],
        &[
            ("x-auth-token", &token),
            ("content-type", "application/json"),
        ],
        Bytes::from_static(b"{not json"),
    ));
    assert_eq!(resp.status, 400);
}

#[test]
fn order_without_items_is_items_cant_be_blank() {
    let mut env = Env::new();
    for order in [json!({}), json!({ "items": [] }), json!({ "items": null })] {
        let resp = env.post_json(PARTNER, "/api/v1/order", &json!({ "order": order }));
        assert_eq!(resp.status, 422);
        assert_eq!(
            json_of(&resp),
            json!({ "errors": ["Items can't be blank"] })
        );
    }
    assert_eq!(
        env.state
            .billed_orders()
            .iter()
            .map(|(_, n)| n)
            .sum::<u64>(),
        0
    );
}

#[test]
fn every_problem_is_listed_at_once() {
    let mut env = Env::new();
    let item = json!({
        "nomenclature_id": p::S_OV,
        "days": 10,
        "dcv_type": "FAX",
        "domain_name": "server",
        "csr": "garbage",
        "unique_value": "not-valid!",
    });
    let errs = errors_for(&mut env, item);
    for needle in [
        "Days must be greater than or equal to 60",
        "Ssl server software can't be blank",
        "Dcv type is not included in the list",
        "Domain name server is an internal name",
        "Csr must begin with -----BEGIN CERTIFICATE REQUEST-----",
        "Country name can't be blank",
        "Region name can't be blank",
        "City name can't be blank",
        "Organization name can't be blank",
        "Unique value is invalid",
    ] {
        assert!(has_error(&errs, needle), "{needle} missing from {errs:?}");
    }
}

#[test]
fn item_field_rules() {
    let b = base();
    let (pem_rsa, _) = {
        let key = KeyPair::generate_for(&rcgen::PKCS_RSA_SHA256).unwrap();
        (
            csr_with(&key, Some("www.example.com"), &["www.example.com"]),
            key,
        )
    };
    let ed = KeyPair::generate_for(&rcgen::PKCS_ED25519).unwrap();
    let p521 = KeyPair::generate_for(&rcgen::PKCS_ECDSA_P521_SHA512).unwrap();
    let p384 = KeyPair::generate_for(&rcgen::PKCS_ECDSA_P384_SHA384).unwrap();
    let k = KeyPair::generate().unwrap();
    let pem = |sans: &[&str]| csr_with(&k, Some("www.example.com"), sans);
    let cases: Vec<(&str, Value, Option<&str>)> = vec![
        (
            "no product",
            without(&b, "nomenclature_id"),
            Some("Nomenclature can't be blank"),
        ),
        (
            "product as string",
            with(&b, "nomenclature_id", json!("1101")),
            Some("Nomenclature is not a number"),
        ),
        (
            "unknown product",
            with(&b, "nomenclature_id", json!(9999)),
            Some("Nomenclature 9999 is not a product"),
        ),
        ("no days", without(&b, "days"), Some("Days can't be blank")),
        (
            "days as string",
            with(&b, "days", json!("365")),
            Some("Days is not a number"),
        ),
        (
            "59 days",
            with(&b, "days", json!(59)),
            Some("Days must be greater than or equal to 60"),
        ),
        (
            "2201 days",
            with(&b, "days", json!(2201)),
            Some("Days must be less than or equal to 2200"),
        ),
        ("60 days", with(&b, "days", json!(60)), None),
        ("2200 days", with(&b, "days", json!(2200)), None),
        (
            "no software",
            without(&b, "ssl_server_software_id"),
            Some("Ssl server software can't be blank"),
        ),
        (
            "software of family D",
            with(&b, "ssl_server_software_id", json!(41)),
            Some("Ssl server software is not included in the list"),
        ),
        (
            "software of family S",
            with(&b, "ssl_server_software_id", json!(180)),
            None,
        ),
        (
            "lower-case dcv_type",
            with(&b, "dcv_type", json!("http_csr_hash")),
            Some("Dcv type is not included in the list"),
        ),
        (
            "unknown dcv_type",
            with(&b, "dcv_type", json!("FILE")),
            Some("Dcv type is not included in the list"),
        ),
        (
            "numeric dcv_type",
            with(&b, "dcv_type", json!(1)),
            Some("Dcv type is not included in the list"),
        ),
        (
            "empty dcv_type",
            with(&b, "dcv_type", json!("")),
            Some("Dcv type is not included in the list"),
        ),
        (
            "no domain",
            without(&b, "domain_name"),
            Some("Domain name can't be blank"),
        ),
        (
            "internal domain",
            with(&b, "domain_name", json!("intranet")),
            Some("is an internal name"),
        ),
        (
            "internal tld",
            with(&b, "domain_name", json!("db.internal")),
            Some("is an internal name"),
        ),
        (
            "private ip",
            with(&b, "domain_name", json!("10.0.0.1")),
            Some("is a private IP address"),
        ),
        (
            "public ip",
            with(&b, "domain_name", json!("8.8.8.8")),
            Some("is an IP address"),
        ),
        (
            "blocked tld",
            with(&b, "domain_name", json!("shop.example.ir")),
            Some("blocked top-level domain .ir"),
        ),
        (
            "malformed name",
            with(&b, "domain_name", json!("bad_name.example.com")),
            Some("is not a valid host name"),
        ),
        (
            "trailing dot",
            with(&b, "domain_name", json!("www.example.com.")),
            Some("is not a valid host name"),
        ),
        (
            "upper-case name is normalised",
            with(&b, "domain_name", json!("WWW.Example.COM")),
            None,
        ),
        ("no csr", without(&b, "csr"), Some("Csr can't be blank")),
        (
            "csr garbage",
            with(
                &b,
                "csr",
                json!(
                    "-----BEGIN CERTIFICATE REQUEST-----\nAAAA\n-----END CERTIFICATE REQUEST-----\n"
                ),
            ),
            Some("Csr is invalid"),
        ),
        (
            "csr after text",
            with(
                &b,
                "csr",
                json!(format!("hello\n{}", pem(&["www.example.com"]))),
            ),
            Some("Csr must begin with"),
        ),
        (
            "csr new marker",
            with(
                &b,
                "csr",
                json!(
                    pem(&["www.example.com"])
                        .replace("CERTIFICATE REQUEST", "NEW CERTIFICATE REQUEST")
                ),
            ),
            None,
        ),
        ("rsa 2048", with(&b, "csr", json!(pem_rsa)), None),
        (
            "p-384",
            with(
                &b,
                "csr",
                json!(csr_with(&p384, Some("www.example.com"), &[])),
            ),
            None,
        ),
        (
            "ed25519",
            with(
                &b,
                "csr",
                json!(csr_with(&ed, Some("www.example.com"), &[])),
            ),
            Some("Csr key is not acceptable"),
        ),
        // (parse_csr cannot even verify a P-521 signature; refused either way)
        (
            "p-521",
            with(
                &b,
                "csr",
                json!(csr_with(&p521, Some("www.example.com"), &[])),
            ),
            Some("Csr"),
        ),
        // (the verifier refuses RSA-1024 signatures already; key_problem is tested below)
        (
            "rsa 1024",
            with(&b, "csr", json!(openssl_csr("rsa:1024", "www.example.com"))),
            Some("Csr"),
        ),
        (
            "unordered internal san",
            with(&b, "csr", json!(pem(&["www.example.com", "server"]))),
            Some("Csr contains the internal name server"),
        ),
        (
            "unordered private ip",
            with(&b, "csr", json!(pem(&["www.example.com", "192.168.1.10"]))),
            Some("Csr contains the private IP address 192.168.1.10"),
        ),
        (
            "unordered public ip",
            with(&b, "csr", json!(pem(&["www.example.com", "8.8.4.4"]))),
            None,
        ),
        (
            "csr common name internal",
            with(&b, "csr", json!(csr_with(&k, Some("localhost"), &[]))),
            Some("Csr contains the internal name localhost"),
        ),
        (
            "csr for another host",
            with(
                &b,
                "csr",
                json!(csr_with(&k, Some("other.example.net"), &[])),
            ),
            None,
        ),
        (
            "no country",
            without(&b, "country_name"),
            Some("Country name can't be blank"),
        ),
        (
            "unknown country",
            with(&b, "country_name", json!("XX")),
            Some("Country name XX is not"),
        ),
        (
            "lower-case country",
            with(&b, "country_name", json!("de")),
            Some("Country name de is not"),
        ),
        (
            "no region",
            without(&b, "region_name"),
            Some("Region name can't be blank"),
        ),
        (
            "blank city",
            with(&b, "city_name", json!("  ")),
            Some("City name can't be blank"),
        ),
        (
            "unique value 20",
            with(&b, "unique_value", json!("A".repeat(20))),
            None,
        ),
        (
            "unique value 21",
            with(&b, "unique_value", json!("A".repeat(21))),
            Some("Unique value is too long"),
        ),
        (
            "unique value dash",
            with(&b, "unique_value", json!("abc-1")),
            Some("Unique value is invalid"),
        ),
        (
            "unique value empty",
            with(&b, "unique_value", json!("")),
            Some("Unique value is invalid"),
        ),
        (
            "unique value number",
            with(&b, "unique_value", json!(12)),
            Some("Unique value must be a string"),
        ),
        (
            "additional on standart",
            with(&b, "additional_domains", json!("shop.example.com")),
            Some("only accepted for multi-domain (ucc) products"),
        ),
        (
            "additional equal to cn on standart",
            with(&b, "additional_domains", json!("www.example.com")),
            Some("only accepted for multi-domain (ucc) products"),
        ),
        (
            "validation emails on standart",
            with(
                &b,
                "additional_validation_emails",
                json!({"a.example.com": "admin@example.com"}),
            ),
            Some("only accepted for multi-domain (ucc) products"),
        ),
        (
            "organisation optional for dv",
            without(&b, "organization_name"),
            None,
        ),
        (
            "organisation needed for ov",
            without(
                &with(&b, "nomenclature_id", json!(p::S_OV)),
                "organization_name",
            ),
            Some("Organization name can't be blank"),
        ),
        (
            "organisation needed for ev",
            without(
                &with(&b, "nomenclature_id", json!(p::S_EV)),
                "organization_name",
            ),
            Some("Organization name can't be blank"),
        ),
        (
            "email without address",
            with(&b, "dcv_type", json!("EMAIL")),
            Some("Dcv email can't be blank"),
        ),
        (
            "dcv_type omitted means EMAIL",
            without(&b, "dcv_type"),
            Some("Dcv email can't be blank"),
        ),
        (
            "email with foreign address",
            with(
                &with(&b, "dcv_type", json!("EMAIL")),
                "dcv_email",
                json!("admin@other.com"),
            ),
            Some("is not an accepted validation address for www.example.com"),
        ),
        (
            "email with info@",
            with(
                &with(&b, "dcv_type", json!("EMAIL")),
                "dcv_email",
                json!("info@example.com"),
            ),
            Some("is not an accepted validation address"),
        ),
        (
            "email with parent address",
            with(
                &with(&b, "dcv_type", json!("EMAIL")),
                "dcv_email",
                json!("admin@example.com"),
            ),
            None,
        ),
        (
            "dns txt value in dcv_email",
            with(&b, "dcv_email", json!("DNS_TXT_TOKEN")),
            Some("is a DNS TXT value, accepted only with dcv_type DNS_TXT_TOKEN"),
        ),
        (
            "ca value name in dcv_email",
            with(&b, "dcv_email", json!("DNSTXTRNDVAL")),
            Some("is a DNS TXT value"),
        ),
        (
            "dns txt value with dns",
            with(
                &with(&b, "dcv_type", json!("DNS_TXT_TOKEN")),
                "dcv_email",
                json!("DNS_TXT_TOKEN"),
            ),
            None,
        ),
        (
            "wildcard on standart",
            with(&b, "domain_name", json!("*.example.com")),
            Some("wildcard names need a wildcard product"),
        ),
    ];
    let mut env = Env::new();
    for (name, item, expected) in cases {
        let resp = env.order(PARTNER, &[item]);
        match expected {
            None => assert_eq!(resp.status, 200, "{name}: {:?}", resp.body),
            Some(needle) => {
                let errs = errors_of(&resp);
                assert!(
                    has_error(&errs, needle),
                    "{name}: expected '{needle}' in {errs:?}"
                );
            }
        }
    }
}

#[test]
fn wildcard_rules() {
    let mut env = Env::new();
    for product in [p::S_WILDCARD, p::D_WILDCARD, p::C_WILDCARD] {
        let (pem, _) = csr(&["*.example.com"]);
        let b = item(product, "*.example.com", &pem);
        for method in ["HTTP_CSR_HASH", "HTTPS_CSR_HASH"] {
            let errs = errors_for(&mut env, with(&b, "dcv_type", json!(method)));
            assert!(
                has_error(&errs, "cannot be used for the wildcard name *.example.com"),
                "{product} {method}: {errs:?}"
            );
        }
        for method in ["CNAME_CSR_HASH", "DNS_TXT_TOKEN"] {
            let resp = env.order(PARTNER, &[with(&b, "dcv_type", json!(method))]);
            assert_eq!(resp.status, 200, "{product} {method}: {:?}", resp.body);
        }
        let resp = env.order(
            PARTNER,
            &[with(
                &with(&b, "dcv_type", json!("EMAIL")),
                "dcv_email",
                json!("admin@example.com"),
            )],
        );
        assert_eq!(resp.status, 200, "{:?}", resp.body);
        let errs = errors_for(
            &mut env,
            with(
                &with(&b, "domain_name", json!("www.example.com")),
                "dcv_type",
                json!("CNAME_CSR_HASH"),
            ),
        );
        assert!(has_error(&errs, "must be a wildcard name"), "{errs:?}");
    }
    // Bare domain coverage differs per product.
    let (pem, _) = csr(&["*.example.com"]);
    let id = env.place(
        PARTNER,
        with(
            &item(p::S_WILDCARD, "*.example.com", &pem),
            "dcv_type",
            json!("CNAME_CSR_HASH"),
        ),
    );
    assert_eq!(
        env.details(PARTNER, id)["all_domains"],
        json!(["*.example.com", "example.com"])
    );
    let id = env.place(
        PARTNER,
        with(
            &item(p::D_WILDCARD, "*.example.com", &pem),
            "dcv_type",
            json!("CNAME_CSR_HASH"),
        ),
    );
    assert_eq!(
        env.details(PARTNER, id)["all_domains"],
        json!(["*.example.com"])
    );
}

#[test]
fn https_is_http_for_families_d_and_c() {
    let mut env = Env::new();
    for (product, expected) in [
        (p::S_DV, "HTTPS_CSR_HASH"),
        (p::D_DV, "HTTP_CSR_HASH"),
        (p::C_DV, "HTTP_CSR_HASH"),
    ] {
        let (pem, _) = csr(&["www.example.com"]);
        let id = env.place(
            PARTNER,
            with(
                &item(product, "www.example.com", &pem),
                "dcv_type",
                json!("HTTPS_CSR_HASH"),
            ),
        );
        assert_eq!(
            env.details(PARTNER, id)["dcv_method"],
            expected,
            "{product}"
        );
    }
}

#[test]
fn software_zero_means_the_family_default() {
    let mut env = Env::new();
    for (product, default) in [(p::S_DV, 3), (p::D_DV, 41), (p::C_DV, 186)] {
        let (pem, _) = csr(&["www.example.com"]);
        let id = env.place(PARTNER, item(product, "www.example.com", &pem));
        assert_eq!(env.details(PARTNER, id)["ssl_server_software_id"], default);
    }
}

fn ucc_item(product: u64, cn: &str, pem: &str) -> Value {
    item(product, cn, pem)
}

#[test]
fn additional_domains_rules_1_to_6() {
    let mut env = Env::new();
    let names = ["www.example.com", "shop.example.com", "mail.example.com"];
    let (pem, _) = csr(&names);

    // Rule 2: omitted → the CSR's other names are ordered.
    let id = env.place(PARTNER, ucc_item(p::S_UCC, "www.example.com", &pem));
    let d = env.details(PARTNER, id);
    assert_eq!(d["all_domains"], json!(names));
    assert_eq!(d["additional_domains"], "shop.example.com,mail.example.com");
    // Empty string counts as omitted.
    let id = env.place(
        PARTNER,
        with(
            &ucc_item(p::S_UCC, "www.example.com", &pem),
            "additional_domains",
            json!(""),
        ),
    );
    assert_eq!(env.details(PARTNER, id)["all_domains"], json!(names));
    // CN listed only in the SAN also counts.
    let k = KeyPair::generate().unwrap();
    let san_only = csr_with(&k, None, &names);
    let id = env.place(PARTNER, ucc_item(p::S_UCC, "shop.example.com", &san_only));
    assert_eq!(
        env.details(PARTNER, id)["all_domains"],
        json!(["shop.example.com", "www.example.com", "mail.example.com"])
    );
    // A CSR for another host adds no names.
    let id = env.place(PARTNER, ucc_item(p::S_UCC, "other.example.org", &pem));
    assert_eq!(
        env.details(PARTNER, id)["all_domains"],
        json!(["other.example.org"])
    );

    // Rule 1: when sent, it alone lists the extra names (commas or line breaks).
    let id = env.place(
        PARTNER,
        with(
            &ucc_item(p::S_UCC, "www.example.com", &pem),
            "additional_domains",
            json!("api.example.com,\n cdn.example.com"),
        ),
    );
    let d = env.details(PARTNER, id);
    assert_eq!(
        d["all_domains"],
        json!(["www.example.com", "api.example.com", "cdn.example.com"])
    );
    assert_eq!(
        d["additional_domains"], "api.example.com,\n cdn.example.com",
        "as entered"
    );

    // Rule 4: additional_domains equal to domain_name orders only the common name.
    let id = env.place(
        PARTNER,
        with(
            &ucc_item(p::S_UCC, "www.example.com", &pem),
            "additional_domains",
            json!("www.example.com"),
        ),
    );
    assert_eq!(
        env.details(PARTNER, id)["all_domains"],
        json!(["www.example.com"])
    );

    // Rule 6: single-name and wildcard products never take names from the CSR.
    let id = env.place(PARTNER, item(p::S_DV, "www.example.com", &pem));
    assert_eq!(
        env.details(PARTNER, id)["all_domains"],
        json!(["www.example.com"])
    );
    let (wpem, _) = csr(&["*.example.com", "www.example.com", "shop.example.com"]);
    let id = env.place(
        PARTNER,
        with(
            &item(p::D_WILDCARD, "*.example.com", &wpem),
            "dcv_type",
            json!("CNAME_CSR_HASH"),
        ),
    );
    assert_eq!(
        env.details(PARTNER, id)["all_domains"],
        json!(["*.example.com"])
    );

    // Rule 3: names taken from the CSR are validated and billed, and need addresses with EMAIL.
    let (bad, _) = csr(&["www.example.com", "shop.example.cu"]);
    let errs = errors_for(&mut env, ucc_item(p::S_UCC, "www.example.com", &bad));
    assert!(
        has_error(
            &errs,
            "Additional domain shop.example.cu (from the CSR subjectAltName) is under the blocked top-level domain .cu"
        ),
        "{errs:?}"
    );
    let email = with(
        &with(
            &ucc_item(p::S_UCC, "www.example.com", &pem),
            "dcv_type",
            json!("EMAIL"),
        ),
        "dcv_email",
        json!("admin@example.com"),
    );
    let errs = errors_for(&mut env, email.clone());
    assert!(
        has_error(&errs, "an address is required for shop.example.com"),
        "{errs:?}"
    );
    assert!(
        has_error(&errs, "an address is required for mail.example.com"),
        "{errs:?}"
    );
    let id = env.place(
        PARTNER,
        with(
            &email,
            "additional_validation_emails",
            json!({
                "shop.example.com": "webmaster@shop.example.com",
                "mail.example.com": "admin@example.com",
            }),
        ),
    );
    let d = env.details(PARTNER, id);
    assert_eq!(d["validation_email"], "admin@example.com");
    assert_eq!(
        d["additional_validation_emails"]["shop.example.com"],
        "webmaster@shop.example.com"
    );
}

#[test]
fn extra_names_are_billed() {
    let mut env = Env::new();
    let (three, _) = csr(&["a.example.com", "b.example.com", "c.example.com"]);
    let (five, _) = csr(&[
        "a.example.com",
        "b.example.com",
        "c.example.com",
        "d.example.com",
        "e.example.com",
    ]);
    let a = env.place(PARTNER, ucc_item(p::S_UCC, "a.example.com", &three));
    let b = env.place(PARTNER, ucc_item(p::S_UCC, "a.example.com", &five));
    let price = |env: &mut Env, id| env.details(PARTNER, id)["price"].as_f64().unwrap();
    assert_eq!(price(&mut env, a), 27.5);
    assert_eq!(price(&mut env, b), 27.5 + 2.0 * 6.6);
}

#[test]
fn ucc_name_rules() {
    let mut env = Env::new();
    let (pem, _) = csr(&["www.example.com"]);
    let b = ucc_item(p::S_UCC, "www.example.com", &pem);
    let cases: Vec<(&str, Value, &str)> = vec![
        (
            "duplicate",
            with(
                &b,
                "additional_domains",
                json!("a.example.com,a.example.com"),
            ),
            "Additional domains list a.example.com more than once",
        ),
        (
            "internal additional",
            with(&b, "additional_domains", json!("a.example.com,intranet")),
            "Additional domain intranet is an internal name",
        ),
        (
            "private ip additional",
            with(&b, "additional_domains", json!("172.16.0.4")),
            "Additional domain 172.16.0.4 is a private IP address",
        ),
        (
            "blocked additional",
            with(&b, "additional_domains", json!("x.example.sy")),
            "blocked top-level domain .sy",
        ),
        (
            "wildcard not allowed",
            with(&b, "additional_domains", json!("*.example.com")),
            "this product accepts no wildcard names",
        ),
        (
            "wildcard cn not allowed",
            with(&b, "domain_name", json!("*.example.com")),
            "accepts no wildcard names",
        ),
        (
            "additional not a string",
            with(&b, "additional_domains", json!(["a.example.com"])),
            "Additional domains must be a string",
        ),
        (
            "validation emails not an object",
            with(&b, "additional_validation_emails", json!("x")),
            "must be an object",
        ),
        (
            "validation email for unknown domain",
            with(
                &with(&b, "additional_domains", json!("a.example.com")),
                "additional_validation_emails",
                json!({"b.example.com": "admin@example.com"}),
            ),
            "b.example.com is not an additional domain",
        ),
        (
            "validation email not accepted",
            with(
                &with(&b, "additional_domains", json!("a.example.com")),
                "additional_validation_emails",
                json!({"a.example.com": "root@example.com"}),
            ),
            "root@example.com is not an accepted validation address for a.example.com",
        ),
        (
            "dns txt value in validation emails",
            with(
                &with(&b, "additional_domains", json!("a.example.com")),
                "additional_validation_emails",
                json!({"a.example.com": "DNSTXTRNDVAL"}),
            ),
            "is a DNS TXT value",
        ),
        (
            "dns txt token with validation emails",
            with(
                &with(
                    &with(&b, "additional_domains", json!("a.example.com")),
                    "dcv_type",
                    json!("DNS_TXT_TOKEN"),
                ),
                "additional_validation_emails",
                json!({"a.example.com": "admin@example.com"}),
            ),
            "cannot be combined with dcv_type DNS_TXT_TOKEN",
        ),
    ];
    for (name, item, needle) in cases {
        let errs = errors_for(&mut env, item);
        assert!(
            has_error(&errs, needle),
            "{name}: expected '{needle}' in {errs:?}"
        );
    }
    // Family S: a method name per domain is accepted.
    let id = env.place(
        PARTNER,
        with(
            &with(&b, "additional_domains", json!("a.example.com")),
            "additional_validation_emails",
            json!({"a.example.com": "CNAME_CSR_HASH"}),
        ),
    );
    assert_eq!(env.inspect(id)["domains"][1]["method"], "Cname");
    // Families D and C: only with EMAIL, and only addresses.
    let (dpem, _) = csr(&["www.example.com"]);
    let d = with(
        &with(
            &item(p::D_UCC, "www.example.com", &dpem),
            "additional_domains",
            json!("a.example.com"),
        ),
        "additional_validation_emails",
        json!({"a.example.com": "admin@example.com"}),
    );
    let errs = errors_for(&mut env, d.clone());
    assert!(
        has_error(&errs, "only accepted with dcv_type EMAIL"),
        "{errs:?}"
    );
    let d = with(
        &with(&d, "dcv_type", json!("EMAIL")),
        "dcv_email",
        json!("admin@example.com"),
    );
    assert_eq!(env.order(PARTNER, std::slice::from_ref(&d)).status, 200);
    let errs = errors_for(
        &mut env,
        with(
            &d,
            "additional_validation_emails",
            json!({"a.example.com": "HTTP_CSR_HASH"}),
        ),
    );
    assert!(
        has_error(&errs, "HTTP_CSR_HASH is not an accepted validation address"),
        "{errs:?}"
    );
}

#[test]
fn domain_count_is_limited_per_product_and_wildcards_count_separately() {
    let mut env = Env::new();
    let (pem, _) = csr(&["www.example.com"]);
    // Aurora DV UCC: at most 100 names.
    let names: Vec<String> = (1..100).map(|i| format!("h{i}.example.com")).collect();
    let ok = with(
        &ucc_item(p::S_UCC, "www.example.com", &pem),
        "additional_domains",
        json!(names.join(",")),
    );
    assert_eq!(env.order(PARTNER, &[ok]).status, 200);
    let names: Vec<String> = (1..=100).map(|i| format!("h{i}.example.com")).collect();
    let too_many = with(
        &ucc_item(p::S_UCC, "www.example.com", &pem),
        "additional_domains",
        json!(names.join(",")),
    );
    let errs = errors_for(&mut env, too_many);
    assert!(has_error(&errs, "Too many domains: 101"), "{errs:?}");
    // Cirrus DV UCC: 5 wildcard names besides its 50 names.
    let wild: Vec<String> = (1..=5).map(|i| format!("*.w{i}.example.com")).collect();
    let ok = with(
        &with(
            &ucc_item(p::S2_UCC, "www.example.com", &pem),
            "additional_domains",
            json!(wild.join(",")),
        ),
        "dcv_type",
        json!("CNAME_CSR_HASH"),
    );
    assert_eq!(env.order(PARTNER, &[ok]).status, 200);
    let wild: Vec<String> = (1..=6).map(|i| format!("*.w{i}.example.com")).collect();
    let errs = errors_for(
        &mut env,
        with(
            &with(
                &ucc_item(p::S2_UCC, "www.example.com", &pem),
                "additional_domains",
                json!(wild.join(",")),
            ),
            "dcv_type",
            json!("CNAME_CSR_HASH"),
        ),
    );
    assert!(has_error(&errs, "Too many wildcard domains: 6"), "{errs:?}");
    // Wildcard names refuse the file methods also as additional domains.
    let errs = errors_for(
        &mut env,
        with(
            &ucc_item(p::S2_UCC, "www.example.com", &pem),
            "additional_domains",
            json!("*.w.example.com"),
        ),
    );
    assert!(
        has_error(
            &errs,
            "cannot be used for the wildcard name *.w.example.com"
        ),
        "{errs:?}"
    );
}

#[test]
fn multi_item_orders_prefix_errors_and_create_one_certificate_per_item() {
    let mut env = Env::new();
    let good = base();
    let bad = without(&base(), "days");
    let errs = errors_of(&env.order(PARTNER, &[good.clone(), bad, json!("x")]));
    assert!(has_error(&errs, "Item 2: Days can't be blank"), "{errs:?}");
    assert!(has_error(&errs, "Item 3: Item is invalid"), "{errs:?}");
    assert!(!errs.iter().any(|e| e.starts_with("Item 1")), "{errs:?}");
    let resp = env.order(PARTNER, &[good.clone(), base()]);
    assert_eq!(resp.status, 200);
    let list = json_of(&env.get(PARTNER, "/api/v1/ssl_certificates"));
    assert_eq!(list.as_array().unwrap().len(), 2);
    assert!(
        env.state
            .billed_orders()
            .contains(&(PARTNER.to_string(), 1)),
        "one billed order"
    );
    let balance = json_of(&env.get(PARTNER, "/api/v1/billing/balance"));
    assert_eq!(balance["reserved"]["sum"], 17.6, "each item is billed");
}

#[test]
fn contact_fields_are_checked() {
    let mut env = Env::new();
    let cases: Vec<(Value, Option<&str>)> = vec![
        (
            json!({ "email": "not-an-address" }),
            Some("Email not-an-address is not a valid e-mail address"),
        ),
        (
            json!({ "first_name": 5 }),
            Some("First name must be a string"),
        ),
        (json!({ "fax": 5 }), Some("Fax must be a string or null")),
        (json!({ "fax": null, "country_id": 57 }), None),
        (json!({ "country_id": "DE" }), None),
        (json!({ "country_id": "57" }), None),
        (json!({ "country_id": "XX" }), Some("Country is invalid")),
        (json!({ "country_id": 1 }), Some("Country is invalid")),
    ];
    for (order, expected) in cases {
        let mut order = order;
        order["items"] = json!([base()]);
        let resp = env.post_json(PARTNER, "/api/v1/order", &json!({ "order": order }));
        match expected {
            None => assert_eq!(resp.status, 200, "{order}: {:?}", resp.body),
            Some(needle) => assert!(has_error(&errors_of(&resp), needle), "{order}"),
        }
    }
}

#[test]
fn account_without_agreement_orders_in_eur_with_zero_balance() {
    let mut env = Env::new();
    let id = env.place(NEW, base());
    let d = env.details(NEW, id);
    assert_eq!(d["currency"], "EUR");
    assert_eq!(d["price"], 8.0);
    let balance = json_of(&env.get(NEW, "/api/v1/billing/balance"));
    assert_eq!(
        balance["reserved"],
        json!({ "sum": 0.0, "currency": "EUR" })
    );
}
