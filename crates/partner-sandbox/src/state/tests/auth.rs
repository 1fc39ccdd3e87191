//! Routing, authentication, tokens, roles, the 404 bodies, balance, ancillary endpoints.

use bytes::Bytes;
use http::Method;
use serde_json::json;

use super::*;
use crate::state::AccountSpec;

fn signin_form(env: &mut Env, pairs: &[(&str, &str)]) -> ApiResponse {
    let body = serde_urlencoded::to_string(pairs).unwrap();
    env.call(&request(
        Method::POST,
        "/api/v1/users/signin",
        &[],
        &[("content-type", "application/x-www-form-urlencoded")],
        body,
    ))
}

fn get_with(
    env: &mut Env,
    path: &str,
    query: &[(&str, &str)],
    headers: &[(&str, &str)],
) -> ApiResponse {
    env.call(&request(Method::GET, path, query, headers, Bytes::new()))
}

#[test]
fn signin_accepts_form_fields_and_json() {
    let mut env = Env::new();
    let resp = signin_form(&mut env, &[("login", PARTNER), ("password", "sandbox")]);
    assert_eq!(resp.status, 200);
    let body = json_of(&resp);
    assert!(body["id"].as_u64().is_some());
    assert!(body["auth_token"].as_str().is_some_and(|t| t.len() >= 32));
    assert_eq!(resp.account.as_deref(), Some(PARTNER));
    let token = env.signin(PARTNER);
    assert_eq!(
        body["auth_token"],
        token.as_str(),
        "same token within 12 hours"
    );
}

#[test]
fn signin_reports_every_missing_parameter() {
    let mut env = Env::new();
    let resp = signin_form(&mut env, &[]);
    assert_eq!(resp.status, 400);
    assert_eq!(
        json_of(&resp),
        json!({ "error": "login is missing, password is missing" })
    );
    let resp = signin_form(&mut env, &[("login", PARTNER)]);
    assert_eq!(json_of(&resp), json!({ "error": "password is missing" }));
    let resp = signin_form(&mut env, &[("login", ""), ("password", "x")]);
    assert_eq!(json_of(&resp), json!({ "error": "login is missing" }));
    // JSON body, password of the wrong type counts as missing.
    let resp = env.call(&request(
        Method::POST,
        "/api/v1/users/signin",
        &[],
        &[("content-type", "application/json")],
        r#"{"login":"partner@sandbox.test","password":5}"#,
    ));
    assert_eq!(resp.status, 400);
}

#[test]
fn signin_refuses_wrong_credentials() {
    let mut env = Env::new();
    for (login, password) in [
        (PARTNER, "wrong"),
        ("nobody@sandbox.test", "sandbox"),
        ("PARTNER@sandbox.test", "sandbox"),
    ] {
        let resp = signin_form(&mut env, &[("login", login), ("password", password)]);
        assert_eq!(resp.status, 401);
        assert_eq!(
            json_of(&resp),
            json!({ "error": "Invalid login or password" })
        );
        assert_eq!(resp.account, None);
    }
}

#[test]
fn token_is_kept_for_12_hours_then_replaced_and_the_old_one_stops_working() {
    let mut env = Env::new();
    let first = env.signin(PARTNER);
    env.advance(11 * 3600);
    assert_eq!(env.signin(PARTNER), first);
    assert_eq!(env.get(PARTNER, "/api/v1/billing/balance").status, 200);
    env.advance(3600);
    let second = env.signin(PARTNER);
    assert_ne!(second, first);
    let old = get_with(
        &mut env,
        "/api/v1/billing/balance",
        &[],
        &[("x-auth-token", &first)],
    );
    assert_eq!(old.status, 401);
    assert_eq!(
        json_of(&old),
        json!({ "error": "Invalid X-AUTH-TOKEN or auth_token" })
    );
    // The new token counts as a change of the record: the next 12 hours keep it.
    env.advance(6 * 3600);
    assert_eq!(env.signin(PARTNER), second);
}

#[test]
fn missing_and_invalid_tokens_answer_401() {
    let mut env = Env::new();
    let resp = get_with(&mut env, "/api/v1/billing/balance", &[], &[]);
    assert_eq!(resp.status, 401);
    assert_eq!(
        json_of(&resp),
        json!({ "error": "Undefined X-AUTH-TOKEN or auth_token" })
    );
    let resp = get_with(
        &mut env,
        "/api/v1/ssl_certificates",
        &[],
        &[("x-auth-token", "nope")],
    );
    assert_eq!(
        json_of(&resp),
        json!({ "error": "Invalid X-AUTH-TOKEN or auth_token" })
    );
    // A header takes precedence over the query parameter.
    let token = env.signin(PARTNER);
    let resp = get_with(
        &mut env,
        "/api/v1/ssl_certificates",
        &[("auth_token", &token)],
        &[("x-auth-token", "nope")],
    );
    assert_eq!(resp.status, 401);
    // Every authenticated endpoint checks.
    for (method, path) in [
        (Method::POST, "/api/v1/order"),
        (Method::POST, "/api/v1/dcv_emails"),
        (Method::GET, "/api/v1/ssl_certificates/1/status"),
        (Method::POST, "/api/v1/ssl_certificates/1/cancel"),
        (Method::GET, "/api/v1/users/1/our_ssl_certificates"),
    ] {
        let resp = env.call(&request(method, path, &[], &[], Bytes::new()));
        assert_eq!(resp.status, 401, "{path}");
    }
}

#[test]
fn deprecated_auth_token_query_parameter_is_accepted() {
    let mut env = Env::new();
    let token = env.signin(PARTNER);
    let resp = get_with(
        &mut env,
        "/api/v1/billing/balance",
        &[("auth_token", &token)],
        &[],
    );
    assert_eq!(resp.status, 200);
    assert_eq!(resp.account.as_deref(), Some(PARTNER));
}

#[test]
fn rotated_token_is_refused_and_a_signin_returns_the_new_one() {
    let mut env = Env::new();
    let old = env.signin(PARTNER);
    env.state.rotate_token(PARTNER).unwrap();
    let resp = get_with(
        &mut env,
        "/api/v1/billing/balance",
        &[],
        &[("x-auth-token", &old)],
    );
    assert_eq!(resp.status, 401);
    let new = env.signin(PARTNER);
    assert_ne!(new, old);
    assert!(env.state.rotate_token("nobody").is_err());
}

#[test]
fn products_accept_public_token_and_name_it_when_no_token_is_sent() {
    let mut env = Env::new();
    let public = env
        .state
        .accounts()
        .into_iter()
        .find(|a| a.login == PARTNER)
        .unwrap()
        .public_token;
    let resp = get_with(
        &mut env,
        "/api/v1/products",
        &[],
        &[("x-public-token", &public)],
    );
    assert_eq!(resp.status, 200);
    let resp = get_with(
        &mut env,
        "/api/v1/products",
        &[("public_token", &public)],
        &[],
    );
    assert_eq!(resp.status, 200);
    let resp = get_with(&mut env, "/api/v1/products", &[], &[]);
    assert_eq!(resp.status, 401);
    let msg = json_of(&resp)["error"].as_str().unwrap().to_string();
    assert!(
        msg.contains("X-PUBLIC-TOKEN") && msg.contains("public_token"),
        "{msg}"
    );
    let resp = get_with(
        &mut env,
        "/api/v1/products",
        &[],
        &[("x-public-token", "bad")],
    );
    assert_eq!(resp.status, 401);
    // The public token is only for products.
    let resp = get_with(
        &mut env,
        "/api/v1/ssl_certificates",
        &[],
        &[("x-public-token", &public)],
    );
    assert_eq!(resp.status, 401);
    // And it is returned by signin.
    let resp = signin_form(&mut env, &[("login", PARTNER), ("password", "sandbox")]);
    assert_eq!(json_of(&resp)["public_token"], public.as_str());
}

#[test]
fn products_need_a_partner_account() {
    let mut env = Env::new();
    let resp = env.get(RETAIL, "/api/v1/products");
    assert_eq!(resp.status, 403);
    assert_eq!(
        json_of(&resp),
        json!({ "error": "Not authorized for partnership" })
    );
    for login in [PARTNER, BILLING, OTHER, NEW] {
        assert_eq!(env.get(login, "/api/v1/products").status, 200, "{login}");
    }
    // A retail account cannot order either.
    let (pem, _) = csr(&["www.example.com"]);
    let resp = env.order(RETAIL, &[item(p::S_DV, "www.example.com", &pem)]);
    assert_eq!(resp.status, 403);
    assert_eq!(json_of(&resp)["error"], "Not authorized for partnership");
}

#[test]
fn restricted_role_may_read_but_not_change() {
    let mut env = Env::new();
    let (pem, _) = csr(&["www.example.com"]);
    let resp = env.order(BILLING, &[item(p::S_DV, "www.example.com", &pem)]);
    assert_eq!(resp.status, 403);
    assert_eq!(
        json_of(&resp),
        json!({ "error": "You do not have permission for this action" })
    );
    assert_eq!(resp.account.as_deref(), Some(BILLING));
    for action in ["change_dcv", "resend_dcv", "reissue", "cancel", "prolong"] {
        let resp = env.post_form(
            BILLING,
            &Env::cert_path(123_456, action),
            &[("email", "HTTP_CSR_HASH")],
        );
        assert_eq!(resp.status, 403, "{action}");
        assert_eq!(
            json_of(&resp)["error"],
            "You do not have permission for this action"
        );
    }
    assert_eq!(env.get(BILLING, "/api/v1/billing/balance").status, 200);
    assert_eq!(env.get(BILLING, "/api/v1/ssl_certificates").status, 200);
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
fn unknown_paths_answer_404_text_and_wrong_methods_405() {
    let mut env = Env::new();
    let token = env.signin(PARTNER);
    for (method, path) in [
        (Method::GET, "/api/v1/nothing"),
        (Method::GET, "/api/v2/products"),
        (Method::GET, "/api/v1/products/"),
        (Method::GET, "/api/v1/ssl_certificates/1/unknown"),
        (Method::GET, "/"),
    ] {
        let resp = env.call(&request(
            method,
            path,
            &[],
            &[("x-auth-token", &token)],
            Bytes::new(),
        ));
        assert_eq!(resp.status, 404, "{path}");
        assert!(matches!(resp.body, ResponseBody::Text(_)), "{path}");
    }
    // Known paths with another method: 405 and the allowed methods.
    for (method, path, allow) in [
        (Method::POST, "/api/v1/products", "GET, OPTIONS"),
        (Method::GET, "/api/v1/order", "POST, OPTIONS"),
        (Method::GET, "/api/v1/users/signin", "POST, OPTIONS"),
        (Method::DELETE, "/api/v1/ssl_certificates/1", "GET, OPTIONS"),
        (
            Method::GET,
            "/api/v1/ssl_certificates/1/cancel",
            "POST, OPTIONS",
        ),
        (Method::TRACE, "/api/v1/billing/balance", "GET, OPTIONS"),
    ] {
        let resp = env.call(&request(
            method,
            path,
            &[],
            &[("x-auth-token", &token)],
            Bytes::new(),
        ));
        assert_eq!(resp.status, 405, "{path}");
        assert!(
            resp.headers.iter().any(|(k, v)| k == "Allow" && v == allow),
            "{path}: {:?}",
            resp.headers
        );
    }
}

#[test]
fn alternate_list_path_checks_the_user_id() {
    let mut env = Env::new();
    let resp = signin_form(&mut env, &[("login", PARTNER), ("password", "sandbox")]);
    let id = json_of(&resp)["id"].as_u64().unwrap();
    let resp = env.get(PARTNER, &format!("/api/v1/users/{id}/our_ssl_certificates"));
    assert_eq!(resp.status, 200);
    assert_eq!(json_of(&resp), json!([]));
    for other in [(id + 1).to_string(), "abc".to_string()] {
        let resp = env.get(
            PARTNER,
            &format!("/api/v1/users/{other}/our_ssl_certificates"),
        );
        assert_eq!(resp.status, 401);
        assert_eq!(json_of(&resp), json!({ "error": "Invalid user_id" }));
    }
}

#[test]
fn certificates_of_another_account_answer_404_with_each_endpoints_body() {
    let mut env = Env::new();
    let (pem, _) = csr(&["www.example.com"]);
    let id = env.place(PARTNER, item(p::S_DV, "www.example.com", &pem));
    for missing in [id, 1, 999_999_999] {
        let login = if missing == id { OTHER } else { PARTNER };
        let resp = env.get(login, &Env::cert_path(missing, "status"));
        assert_eq!(
            (resp.status, json_of(&resp)),
            (404, json!({ "error": "not found" }))
        );
        let resp = env.get(login, &Env::cert_path(missing, ""));
        assert_eq!(resp.status, 404);
        assert_eq!(json_of(&resp)["id"], Value::Null);
        assert!(
            json_of(&resp)["error"]
                .as_str()
                .unwrap()
                .contains("Invalid certificate ID")
        );
        let resp = env.get(login, &Env::cert_path(missing, "download_bundle"));
        assert_eq!(
            (resp.status, json_of(&resp)),
            (404, json!({ "errors": "Certificate not found" }))
        );
        for action in ["download", "dcv"] {
            let resp = env.get(login, &Env::cert_path(missing, action));
            assert_eq!(resp.status, 404);
            assert!(matches!(resp.body, ResponseBody::Text(_)));
        }
        for action in ["change_dcv", "resend_dcv", "reissue", "cancel", "prolong"] {
            let resp = env.post_form(
                login,
                &Env::cert_path(missing, action),
                &[("email", "HTTP_CSR_HASH")],
            );
            assert_eq!(resp.status, 404, "{action}");
            assert!(matches!(resp.body, ResponseBody::Text(_)));
        }
    }
    let resp = env.get(PARTNER, "/api/v1/ssl_certificates/abc/status");
    assert_eq!(resp.status, 404);
    // The other account's list does not show it.
    assert_eq!(
        json_of(&env.get(OTHER, "/api/v1/ssl_certificates")),
        json!([])
    );
}

#[test]
fn balance_has_five_members_and_is_zero_in_eur_without_agreement() {
    let mut env = Env::new();
    let body = json_of(&env.get(PARTNER, "/api/v1/billing/balance"));
    for member in ["balance", "reserved", "common", "prepayment", "available"] {
        assert!(body[member]["sum"].is_number(), "{member}");
        assert_eq!(body[member]["currency"], "USD", "{member}");
    }
    assert_eq!(body["balance"]["sum"], 5000.0);
    assert_eq!(body["reserved"]["sum"], 0.0);
    let body = json_of(&env.get(NEW, "/api/v1/billing/balance"));
    for member in ["balance", "reserved", "common", "prepayment", "available"] {
        assert_eq!(
            body[member],
            json!({ "sum": 0.0, "currency": "EUR" }),
            "{member}"
        );
    }
    let resp = get_with(&mut env, "/api/v1/billing/balance", &[], &[]);
    assert_eq!(resp.status, 401);
    assert!(json_of(&resp)["error"].is_string());
}

#[test]
fn ancillary_endpoints_need_no_token() {
    let mut env = Env::new();
    let resp = get_with(&mut env, "/api/v1/countries", &[], &[]);
    assert_eq!(resp.status, 200);
    let countries = json_of(&resp);
    assert!(
        countries
            .as_array()
            .unwrap()
            .iter()
            .any(|c| c["code"] == "DE" && c["id"].is_u64())
    );
    let user = env.state.accounts()[0].id;
    for (product, ids) in [
        (p::S_DV, vec![3, 37, 180, 181, 34]),
        (p::S2_UCC, vec![3, 37, 180, 181, 34]),
        (p::D_DV, vec![41, 56, 38, 182, 183, 39]),
        (p::C_DV, vec![186, 187, 188]),
    ] {
        let path = format!("/api/v1/users/{user}/nomenclatures/{product}/ssl_server_softwares");
        let resp = get_with(&mut env, &path, &[], &[]);
        assert_eq!(resp.status, 200);
        let list = json_of(&resp);
        let got: Vec<u64> = list
            .as_array()
            .unwrap()
            .iter()
            .map(|e| e["id"].as_u64().unwrap())
            .collect();
        assert_eq!(got, ids);
        for e in list.as_array().unwrap() {
            assert!(e["code"].is_string() && e["name"].is_string() && e["issuer"].is_string());
        }
    }
    let resp = get_with(
        &mut env,
        &format!("/api/v1/users/{user}/nomenclatures/9/ssl_server_softwares"),
        &[],
        &[],
    );
    assert_eq!(resp.status, 404);
    let resp = get_with(
        &mut env,
        &format!(
            "/api/v1/users/1/nomenclatures/{}/ssl_server_softwares",
            p::S_DV
        ),
        &[],
        &[],
    );
    assert_eq!(resp.status, 404);
}

#[test]
fn custom_accounts_replace_the_defaults() {
    let config = StateConfig {
        accounts: Some(vec![AccountSpec {
            login: "ops@example.com".into(),
            password: "s3cret".into(),
            role: "partner".into(),
        }]),
        ..Default::default()
    };
    let mut env = Env::with_config(config);
    let resp = signin_form(
        &mut env,
        &[("login", "ops@example.com"), ("password", "s3cret")],
    );
    assert_eq!(resp.status, 200);
    let resp = signin_form(&mut env, &[("login", PARTNER), ("password", "sandbox")]);
    assert_eq!(resp.status, 401);
    assert!(
        AccountSpec::validate(&[AccountSpec {
            login: "a".into(),
            password: "b".into(),
            role: "boss".into()
        }])
        .is_err()
    );
    assert!(AccountSpec::validate(&AccountSpec::defaults()).is_ok());
}

#[test]
fn ids_and_tokens_follow_the_seed() {
    let run = |seed| {
        let mut env = Env::with_config(StateConfig {
            seed,
            ..Default::default()
        });
        let token = env.signin(PARTNER);
        let (pem, _) = csr(&["www.example.com"]);
        let id = env.place(PARTNER, item(p::S_DV, "www.example.com", &pem));
        (token, id)
    };
    assert_eq!(run(5), run(5));
    assert_ne!(run(5), run(6));
}

#[test]
fn state_round_trips_through_json() {
    let mut env = Env::new();
    let (pem, _) = csr(&["www.example.com"]);
    let id = env.place(PARTNER, item(p::S_DV, "www.example.com", &pem));
    let saved = serde_json::to_string(&env.state).unwrap();
    let restored: State = serde_json::from_str(&saved).unwrap();
    assert_eq!(restored.inspect(id), env.state.inspect(id));
    assert_eq!(restored.billed_orders(), env.state.billed_orders());
    env.state = restored;
    assert_eq!(env.status(PARTNER, id), "new");
}

/// Odd input never panics and never answers 5xx.
#[test]
fn hostile_requests_get_client_errors() {
    let mut env = Env::new();
    let (pem, _) = csr(&["www.example.com"]);
    let id = env.place(PARTNER, item(p::S_UCC, "www.example.com", &pem));
    let token = env.signin(PARTNER);
    let weird = [
        json!(null),
        json!(true),
        json!(1.5),
        json!(-1),
        json!(u64::MAX),
        json!(i64::MIN),
        json!("x".repeat(5000)),
        json!([1, [2]]),
        json!({ "a": { "b": [] } }),
        json!(""),
    ];
    let fields = [
        "nomenclature_id",
        "days",
        "ssl_server_software_id",
        "dcv_type",
        "dcv_email",
        "domain_name",
        "csr",
        "country_name",
        "region_name",
        "city_name",
        "organization_name",
        "organizational_unit",
        "zip_code",
        "address_1",
        "address_2",
        "additional_domains",
        "additional_validation_emails",
        "unique_value",
    ];
    let base = item(p::S_UCC, "www.example.com", &pem);
    for field in fields {
        for w in &weird {
            let mut it = base.clone();
            it[field] = w.clone();
            let resp = env.order(PARTNER, &[it]);
            assert!(
                matches!(resp.status, 200 | 422),
                "{field}={w}: {}",
                resp.status
            );
        }
    }
    for w in &weird {
        let resp = env.post_json(
            PARTNER,
            "/api/v1/order",
            &json!({ "order": { "items": w, "country_id": w, "fax": w, "email": w } }),
        );
        assert!(matches!(resp.status, 400 | 422), "{w}");
    }
    let paths = [
        "/api/v1/users/signin".to_string(),
        "/api/v1/dcv_emails".to_string(),
        Env::cert_path(id, "change_dcv"),
        Env::cert_path(id, "reissue"),
        Env::cert_path(id, "resend_dcv"),
        Env::cert_path(id, "cancel"),
        Env::cert_path(id, "prolong"),
    ];
    let bodies: [(&str, &[u8]); 6] = [
        ("application/json", b"{"),
        ("application/json", b"[]"),
        (
            "application/json",
            br#"{"csr": 5, "email": [], "domain_name": {}, "validation_emails": [1]}"#,
        ),
        ("application/x-www-form-urlencoded", b"%%%&&&==="),
        (
            "application/x-www-form-urlencoded",
            b"validation_emails=x&validation_emails[=y&email=&csr=abc",
        ),
        ("multipart/form-data; boundary=x", b"--x--"),
    ];
    for path in &paths {
        for (ct, body) in bodies {
            let resp = env.call(&request(
                Method::POST,
                path,
                &[],
                &[("x-auth-token", &token), ("content-type", ct)],
                Bytes::from_static(body),
            ));
            assert!(resp.status < 500, "{path} {ct}: {}", resp.status);
        }
    }
    for (k, v) in [
        ("page", "18446744073709551615"),
        ("page", "99999999999999999999999"),
        ("scope", "x"),
        ("q", "%"),
    ] {
        let resp = get_with(
            &mut env,
            "/api/v1/ssl_certificates",
            &[("page", "1"), (k, v)],
            &[("x-auth-token", &token)],
        );
        assert!(resp.status < 500);
    }
    let resp = get_with(
        &mut env,
        "/api/v1/ssl_certificates",
        &[("page", "18446744073709551615")],
        &[("x-auth-token", &token)],
    );
    assert_eq!(resp.status, 200);
    assert_eq!(json_of(&resp), json!([]));
    let resp = get_with(
        &mut env,
        "/api/v1/ssl_certificates/18446744073709551616",
        &[],
        &[("x-auth-token", &token)],
    );
    assert_eq!(resp.status, 404);
}

/// A POST whose parameters all travel in the query string, with the token as the deprecated
/// `auth_token` parameter, as the reseller's PHP client sends them.
fn post_query(env: &mut Env, path: &str, query: &[(&str, &str)]) -> ApiResponse {
    env.call(&request(Method::POST, path, query, &[], Bytes::new()))
}

#[test]
fn parameters_in_the_query_string_are_read_on_post() {
    let mut env = Env::new();
    // Sign-in with login and password in the query string only.
    let resp = post_query(
        &mut env,
        "/api/v1/users/signin",
        &[("login", PARTNER), ("password", "sandbox")],
    );
    assert_eq!(resp.status, 200, "{:?}", json_of(&resp));
    let token = json_of(&resp)["auth_token"].as_str().unwrap().to_owned();
    // Missing parameters are still refused as documented.
    let resp = post_query(&mut env, "/api/v1/users/signin", &[("login", PARTNER)]);
    assert_eq!(
        (resp.status, json_of(&resp)),
        (400, json!({ "error": "password is missing" }))
    );
    // dcv_emails with domain_name and the token in the query string.
    let resp = post_query(
        &mut env,
        "/api/v1/dcv_emails",
        &[
            ("domain_name", "www.shop.example.com"),
            ("auth_token", &token),
        ],
    );
    assert_eq!(resp.status, 200, "{:?}", json_of(&resp));
    assert!(
        json_of(&resp)["level_3"]
            .as_array()
            .unwrap()
            .iter()
            .any(|e| e == "webmaster@www.shop.example.com")
    );
    let resp = post_query(&mut env, "/api/v1/dcv_emails", &[("auth_token", &token)]);
    assert_eq!(
        (resp.status, json_of(&resp)),
        (400, json!({ "error": "domain_name is missing" }))
    );
}

#[test]
fn the_body_wins_over_the_query_string() {
    let mut env = Env::new();
    let body = serde_urlencoded::to_string([("login", PARTNER), ("password", "sandbox")]).unwrap();
    let resp = env.call(&request(
        Method::POST,
        "/api/v1/users/signin",
        &[("password", "wrong")],
        &[("content-type", "application/x-www-form-urlencoded")],
        body,
    ));
    assert_eq!(
        resp.status,
        200,
        "form body over query: {:?}",
        json_of(&resp)
    );
    let resp = env.call(&request(
        Method::POST,
        "/api/v1/users/signin",
        &[("password", "sandbox")],
        &[("content-type", "application/json")],
        serde_json::to_vec(&json!({ "login": PARTNER, "password": "wrong" })).unwrap(),
    ));
    assert_eq!(
        resp.status,
        401,
        "JSON body over query: {:?}",
        json_of(&resp)
    );
}
