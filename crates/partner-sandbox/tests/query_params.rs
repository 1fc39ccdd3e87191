//! Clients that send every parameter in the query string, as the service's public PHP client
//! does: Rails-style nested keys (`order[items][0][csr]=…`), the header `Content-Type: json`
//! and an empty body, on sign-in, order, list, status, DCV status, change DCV, resend DCV and
//! reissue. Each answer matches what the JSON (or form) client gets for the same call.

mod common;

use std::collections::BTreeSet;
use std::time::Duration;

use common::*;
use serde_json::Value;

/// POST `path?query` the way the PHP client does: `Content-Type: json`, empty body.
async fn post_query(env: &Env, path: &str, token: Option<&str>, query: &[(&str, &str)]) -> Answer {
    let q = serde_urlencoded::to_string(query).expect("query encodes");
    let mut req = env
        .client
        .post(env.url(&format!("{path}?{q}")))
        .header("Content-Type", "json")
        .body("");
    if let Some(t) = token {
        req = req.header("X-AUTH-TOKEN", t);
    }
    env.send(req).await
}

/// The order's parameters as nested query keys.
fn order_query(product: u64, csr: &Csr, dcv_type: &str) -> Vec<(String, String)> {
    let item = |k: &str| format!("order[items][0][{k}]");
    vec![
        (item("nomenclature_id"), product.to_string()),
        (item("days"), "365".to_string()),
        (item("ssl_server_software_id"), "0".to_string()),
        (item("dcv_type"), dcv_type.to_string()),
        (item("domain_name"), csr.names[0].clone()),
        (item("csr"), csr.pem.clone()),
        (item("country_name"), "DE".to_string()),
        (item("region_name"), "Berlin".to_string()),
        (item("city_name"), "Berlin".to_string()),
    ]
}

async fn order_by_query(env: &Env, token: &str, product: u64, csr: &Csr, dcv: &str) -> Answer {
    let pairs = order_query(product, csr, dcv);
    let borrowed: Vec<(&str, &str)> = pairs
        .iter()
        .map(|(k, v)| (k.as_str(), v.as_str()))
        .collect();
    post_query(env, "/api/v1/order", Some(token), &borrowed).await
}

fn keys(v: &Value) -> BTreeSet<String> {
    v.as_object()
        .map(|m| m.keys().cloned().collect())
        .unwrap_or_default()
}

#[tokio::test]
async fn the_order_walk_of_a_query_string_client_succeeds() {
    let (env, files) = env_with_files();

    // Sign-in with the credentials in the query string, `Content-Type: json`, no body.
    let a = post_query(
        &env,
        "/api/v1/users/signin",
        None,
        &[("login", PARTNER), ("password", PASSWORD)],
    )
    .await;
    assert_eq!(a.status, 200, "{}", a.text());
    let token = a.json()["auth_token"].as_str().expect("token").to_owned();
    let product = env.product(&token, 'd').await;

    // The order, every parameter nested in the query string; the same order as JSON.
    let csr = Csr::new(&["www.query-client.com"]);
    let by_query = order_by_query(&env, &token, product, &csr, "HTTP_CSR_HASH").await;
    assert_eq!(by_query.status, 200, "{}", by_query.text());
    let by_json = env
        .post_json(
            "/api/v1/order",
            Some(&token),
            &order_body(
                product,
                &Csr::new(&["www.json-client.com"]),
                "HTTP_CSR_HASH",
            ),
        )
        .await;
    assert_eq!(by_json.status, 200, "{}", by_json.text());
    assert_eq!(keys(&by_query.json()), keys(&by_json.json()));
    assert_eq!(env.sandbox.billed_orders(PARTNER), 2);
    let id = by_query.json()["certificate"]
        .as_u64()
        .expect("certificate");
    let json_id = by_json.json()["certificate"].as_u64().expect("certificate");

    // Validation errors read the same as for JSON: Rails' messages.
    let blank = post_query(&env, "/api/v1/order", Some(&token), &[("order[items]", "")]).await;
    assert_eq!(blank.status, 422, "{}", blank.text());
    let wrong = order_query(product, &csr, "FTP")
        .into_iter()
        .collect::<Vec<_>>();
    let borrowed: Vec<(&str, &str)> = wrong
        .iter()
        .map(|(k, v)| (k.as_str(), v.as_str()))
        .collect();
    let wrong = post_query(&env, "/api/v1/order", Some(&token), &borrowed).await;
    let wrong_json = env
        .post_json(
            "/api/v1/order",
            Some(&token),
            &order_body(product, &csr, "FTP"),
        )
        .await;
    assert_eq!(wrong.status, 422);
    assert_eq!(wrong.json(), wrong_json.json());

    // DCV status, status and details while in progress.
    let dcv = env
        .get(&format!("/api/v1/ssl_certificates/{id}/dcv"), Some(&token))
        .await;
    assert_eq!(dcv.status, 200, "{}", dcv.text());
    let dcv_json = env
        .get(
            &format!("/api/v1/ssl_certificates/{json_id}/dcv"),
            Some(&token),
        )
        .await;
    assert_eq!(keys(&dcv.json()), keys(&dcv_json.json()));

    // Change DCV (to the same method: resent) and resend DCV, parameters in the query.
    let changed = post_query(
        &env,
        &format!("/api/v1/ssl_certificates/{id}/change_dcv"),
        Some(&token),
        &[("email", "HTTP_CSR_HASH")],
    )
    .await;
    let changed_form = env
        .post_form(
            &format!("/api/v1/ssl_certificates/{json_id}/change_dcv"),
            Some(&token),
            &[("email", "HTTP_CSR_HASH")],
        )
        .await;
    assert_eq!(changed.status, 200, "{}", changed.text());
    assert_eq!(changed.json(), changed_form.json());
    assert_eq!(changed.json()["success"], true, "{}", changed.text());
    let resent = post_query(
        &env,
        &format!("/api/v1/ssl_certificates/{id}/resend_dcv"),
        Some(&token),
        &[],
    )
    .await;
    assert_eq!(resent.status, 200, "{}", resent.text());
    assert_eq!(resent.json()["success"], true, "{}", resent.text());

    // Issued once the file is served.
    let content = env.details(&token, id).await["dcv_content"]
        .as_str()
        .expect("dcv_content")
        .to_owned();
    files.serve(&csr.dcv_path(), content);
    env.wait_status(&token, id, "issued", Duration::from_secs(30))
        .await;

    // The list with `page` and `scope` in the query string.
    let page = env
        .get(
            "/api/v1/ssl_certificates?page=1&scope=api_issued",
            Some(&token),
        )
        .await;
    assert_eq!(page.status, 200, "{}", page.text());
    let listed = page.json();
    let items = listed.as_array().expect("a page is an array");
    assert_eq!(items.len(), 1, "{listed}");
    assert_eq!(items[0]["internal_number"].as_u64(), Some(id));
    assert!(page.header("x-pagination").is_some());

    // Reissue with a new CSR and method in the query string.
    let new_csr = Csr::new(&["www.query-client.com"]);
    let reissued = post_query(
        &env,
        &format!("/api/v1/ssl_certificates/{id}/reissue"),
        Some(&token),
        &[
            ("csr", new_csr.pem.as_str()),
            ("validation_email", "HTTP_CSR_HASH"),
        ],
    )
    .await;
    assert_eq!(reissued.status, 200, "{}", reissued.text());
    assert_eq!(reissued.json()["success"], true, "{}", reissued.text());
}

#[tokio::test]
async fn nested_parameters_that_cannot_be_read_are_a_clear_400() {
    let env = Env::instant();
    let token = env.signin(PARTNER).await;
    for (query, wanted) in [
        (
            vec![("order[items][99999999][csr]", "x")],
            "index 99999999 in parameter `order[items][99999999][csr]' is above the largest index accepted",
        ),
        (
            vec![("order", "x"), ("order[items][0][csr]", "x")],
            "expected Hash (got String) for param `order'",
        ),
    ] {
        let a = post_query(&env, "/api/v1/order", Some(&token), &query).await;
        assert_eq!(a.status, 400, "{}", a.text());
        let message = a.json()["error"].as_str().unwrap_or_default().to_owned();
        assert!(message.contains(wanted), "{message}");
    }
    let deep = format!("q{}", "[x]".repeat(40));
    let a = env
        .get(
            &format!(
                "/api/v1/ssl_certificates?{}",
                serde_urlencoded::to_string([(deep.as_str(), "1")]).expect("encodes")
            ),
            Some(&token),
        )
        .await;
    assert_eq!(a.status, 400, "{}", a.text());
    assert!(
        a.text().contains("nested deeper than 32 levels"),
        "{}",
        a.text()
    );
    assert_eq!(env.sandbox.billed_orders(PARTNER), 0);
}
