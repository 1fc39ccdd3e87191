//! Fault injection over real HTTPS: each kind applies to the next K matching calls, then the
//! sandbox recovers.

mod common;

use std::time::{Duration, Instant};

use common::*;
use partner_sandbox::bundle::{HostileKind, OTHER_DOMAIN, OVERSIZED_LEN};
use partner_sandbox::{BundleFailure, Fault, FaultKind, SandboxConfig};
use serde_json::json;

#[tokio::test]
async fn status_burst_then_recovery() {
    let env = Env::instant();
    let token = env.signin(PARTNER).await;
    env.sandbox.inject(
        Fault::new(FaultKind::Status { status: 503 })
            .method("GET")
            .path("/api/v1/products")
            .times(2),
    );
    env.sandbox.inject(
        Fault::new(FaultKind::Status { status: 502 })
            .method("GET")
            .path("/api/v1/ssl_certificates/*/status"),
    );
    // Other paths are unaffected.
    assert_eq!(
        env.get("/api/v1/billing/balance", Some(&token))
            .await
            .status,
        200
    );
    for _ in 0..2 {
        let a = env.get("/api/v1/products", Some(&token)).await;
        assert_eq!(a.status, 503);
        assert!(a.text().contains("503"), "{}", a.text());
        assert!(serde_json::from_slice::<serde_json::Value>(&a.body).is_err());
    }
    assert_eq!(env.get("/api/v1/products", Some(&token)).await.status, 200);
    // `*` matches one segment, whatever the certificate.
    let a = env
        .get("/api/v1/ssl_certificates/424242/status", Some(&token))
        .await;
    assert_eq!(a.status, 502);
    let a = env
        .get("/api/v1/ssl_certificates/424242/status", Some(&token))
        .await;
    assert_eq!(a.status, 404, "{}", a.text());

    let faulted: Vec<_> = env
        .sandbox
        .calls()
        .into_iter()
        .filter(|c| c.fault.is_some())
        .map(|c| c.status)
        .collect();
    assert_eq!(faulted, vec![503, 503, 502]);
}

#[tokio::test]
async fn status_fault_does_not_apply_the_request() {
    let env = Env::instant();
    let token = env.signin(PARTNER).await;
    let product = env.product(&token, 'd').await;
    env.sandbox.inject(
        Fault::new(FaultKind::Status { status: 500 })
            .method("POST")
            .path("/api/v1/order"),
    );
    let csr = Csr::new(&["www.status-fault.com"]);
    let a = env
        .post_json(
            "/api/v1/order",
            Some(&token),
            &order_body(product, &csr, "HTTP_CSR_HASH"),
        )
        .await;
    assert_eq!(a.status, 500);
    assert_eq!(env.sandbox.billed_orders(PARTNER), 0);
}

#[tokio::test]
async fn delay_holds_the_answer_back() {
    let env = Env::instant();
    let token = env.signin(PARTNER).await;
    env.sandbox.inject(
        Fault::new(FaultKind::Delay { ms: 800 })
            .method("GET")
            .path("/api/v1/billing/balance"),
    );
    let start = Instant::now();
    let a = env.get("/api/v1/billing/balance", Some(&token)).await;
    assert!(start.elapsed() >= Duration::from_millis(800));
    assert_eq!(a.status, 200);
    let start = Instant::now();
    env.get("/api/v1/billing/balance", Some(&token)).await;
    assert!(start.elapsed() < Duration::from_millis(800));

    // A client that gives up early still had its request applied.
    env.sandbox.inject(
        Fault::new(FaultKind::Delay { ms: 3_000 })
            .method("POST")
            .path("/api/v1/order"),
    );
    let product = env.product(&token, 'd').await;
    let csr = Csr::new(&["www.delayed.com"]);
    let err = env
        .client
        .post(env.url("/api/v1/order"))
        .header("X-AUTH-TOKEN", &token)
        .header("Content-Type", "application/json")
        .body(order_body(product, &csr, "HTTP_CSR_HASH").to_string())
        .timeout(Duration::from_millis(300))
        .send()
        .await
        .expect_err("times out");
    assert!(err.is_timeout(), "{err:?}");
    let start = Instant::now();
    while env.sandbox.billed_orders(PARTNER) == 0 {
        assert!(
            start.elapsed() < Duration::from_secs(10),
            "order never applied"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert_eq!(env.sandbox.billed_orders(PARTNER), 1);
}

#[tokio::test]
async fn drop_after_apply_bills_the_order_but_never_answers() {
    let env = Env::instant();
    let token = env.signin(PARTNER).await;
    let product = env.product(&token, 'd').await;
    env.sandbox.inject(
        Fault::new(FaultKind::DropAfterApply)
            .method("POST")
            .path("/api/v1/order"),
    );
    let csr = Csr::new(&["www.dropped.com"]);
    let err = env
        .client
        .post(env.url("/api/v1/order"))
        .header("X-AUTH-TOKEN", &token)
        .header("Content-Type", "application/json")
        .body(order_body(product, &csr, "HTTP_CSR_HASH").to_string())
        .send()
        .await
        .expect_err("the connection is closed without an answer");
    assert!(!err.is_timeout(), "closed, not timed out: {err:?}");
    assert!(err.status().is_none());

    // The order exists and was billed exactly once.
    assert_eq!(env.sandbox.billed_orders(PARTNER), 1);
    let list = env.get("/api/v1/ssl_certificates", Some(&token)).await;
    assert_eq!(list.status, 200);
    assert_eq!(list.json().as_array().map(Vec::len), Some(1));
    let call = env
        .sandbox
        .calls()
        .into_iter()
        .find(|c| c.path == "/api/v1/order")
        .expect("logged");
    assert_eq!(call.status, 200);
    assert!(call.billed);
    assert!(!call.delivered);
    assert_eq!(call.fault.as_deref(), Some("drop_after_apply"));

    // The next call is answered normally.
    let csr = Csr::new(&["www.dropped-again.com"]);
    env.order(&token, product, &csr, "HTTP_CSR_HASH").await;
    assert_eq!(env.sandbox.billed_orders(PARTNER), 2);
}

#[tokio::test]
async fn malformed_json_is_a_truncated_200() {
    let env = Env::instant();
    let token = env.signin(PARTNER).await;
    env.sandbox.inject(
        Fault::new(FaultKind::MalformedJson)
            .method("GET")
            .path("/api/v1/billing/balance"),
    );
    let a = env.get("/api/v1/billing/balance", Some(&token)).await;
    assert_eq!(a.status, 200);
    assert!(
        a.header("content-type")
            .is_some_and(|c| c.starts_with("application/json"))
    );
    assert!(!a.body.is_empty());
    assert!(serde_json::from_slice::<serde_json::Value>(&a.body).is_err());
    let b = env.get("/api/v1/billing/balance", Some(&token)).await;
    assert!(b.json().is_object());
    assert!(
        b.text().starts_with(&a.text()),
        "the first half of the real answer"
    );
}

#[tokio::test]
async fn rotated_token_answers_401_and_a_new_signin_works() {
    let env = Env::instant();
    let old = env.signin(PARTNER).await;
    env.sandbox.inject(
        Fault::new(FaultKind::RotateToken {
            login: PARTNER.to_owned(),
        })
        .path("/api/v1/billing/balance"),
    );
    let a = env.get("/api/v1/billing/balance", Some(&old)).await;
    assert_eq!(a.status, 401, "{}", a.text());
    assert!(a.json()["error"].is_string());
    let new = env.signin(PARTNER).await;
    assert_ne!(new, old);
    assert_eq!(
        env.get("/api/v1/billing/balance", Some(&new)).await.status,
        200
    );
    assert_eq!(
        env.get("/api/v1/billing/balance", Some(&old)).await.status,
        401
    );
    // Other accounts are untouched.
    let other = env.signin(OTHER).await;
    assert_eq!(
        env.get("/api/v1/billing/balance", Some(&other))
            .await
            .status,
        200
    );
}

#[tokio::test]
async fn ca_unreachable_on_dcv_status() {
    // DCV never passes here: the validator's port has nothing behind it.
    let closed = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
    let port = closed.local_addr().expect("addr").port();
    drop(closed);
    let env = Env::start(SandboxConfig::default().instant(true).dcv_http_port(port));
    let token = env.signin(PARTNER).await;
    let product = env.product(&token, 'd').await;
    let csr = Csr::new(&["www.ca-unreachable.com"]);
    let id = env.order(&token, product, &csr, "HTTP_CSR_HASH").await;
    env.wait_status(&token, id, "in_progress", Duration::from_secs(20))
        .await;
    let path = format!("/api/v1/ssl_certificates/{id}/dcv");
    assert_eq!(env.get(&path, Some(&token)).await.status, 200);

    env.sandbox
        .inject(Fault::new(FaultKind::CaUnreachable).times(2));
    for _ in 0..2 {
        let a = env.get(&path, Some(&token)).await;
        assert_eq!(a.status, 422, "{}", a.text());
        let body = a.json();
        assert_eq!(body["success"], json!(false));
        assert!(body["error"].as_str().is_some_and(|e| !e.is_empty()));
        assert!(body.get("dcv_available").is_none());
    }
    let a = env.get(&path, Some(&token)).await;
    assert_eq!(a.status, 200, "{}", a.text());
    assert!(a.json()["dcv"].is_object());

    // Only a call that would have succeeded is replaced: 404 stays 404.
    env.sandbox.inject(Fault::new(FaultKind::CaUnreachable));
    let a = env
        .get("/api/v1/ssl_certificates/987654321/dcv", Some(&token))
        .await;
    assert_eq!(a.status, 404);
}

#[tokio::test]
async fn bundle_failures_answer_the_documented_422s() {
    let (env, files) = env_with_files();
    let (token, id, _csr) = issue(&env, &files, 'd', "www.bundle-failures.com").await;
    let path = format!("/api/v1/ssl_certificates/{id}/download_bundle");
    for (failure, text) in [
        (
            BundleFailure::PemNotAvailable,
            "Certificate PEM data is not available",
        ),
        (
            BundleFailure::BuildFailed,
            "Failed to build certificate bundle",
        ),
        (
            BundleFailure::RetrieveFailed,
            "Failed to retrieve certificate PEM data",
        ),
    ] {
        env.sandbox
            .inject(Fault::new(FaultKind::BundleFailure { failure }));
        let a = env.get(&path, Some(&token)).await;
        assert_eq!(a.status, 422);
        assert_eq!(a.json(), json!({ "errors": text }));
        let ok = env.get(&path, Some(&token)).await;
        assert_eq!(ok.status, 200);
    }
    // Pointed at the CA archive instead.
    env.sandbox.inject(
        Fault::new(FaultKind::BundleFailure {
            failure: BundleFailure::RetrieveFailed,
        })
        .path("/api/v1/ssl_certificates/*/download"),
    );
    let a = env
        .get(
            &format!("/api/v1/ssl_certificates/{id}/download"),
            Some(&token),
        )
        .await;
    assert_eq!(a.status, 422);
}

#[tokio::test]
async fn hostile_bundles_are_broken_as_announced() {
    let (env, files) = env_with_files();
    let domain = "www.hostile.com";
    let (token, id, csr) = issue(&env, &files, 's', domain).await;
    let path = format!("/api/v1/ssl_certificates/{id}/download_bundle");
    let genuine = env.get(&path, Some(&token)).await;
    assert_eq!(genuine.status, 200);

    for kind in [
        HostileKind::DotDot,
        HostileKind::Absolute,
        HostileKind::Symlink,
        HostileKind::Oversized,
        HostileKind::Truncated,
        HostileKind::WrongKey,
        HostileKind::OtherDomain,
        HostileKind::Expired,
    ] {
        env.sandbox
            .inject(Fault::new(FaultKind::HostileBundle { hostile: kind }));
        let a = env.get(&path, Some(&token)).await;
        assert_eq!(a.status, 200, "{kind:?}");
        assert_eq!(a.header("content-type"), Some("application/zip"));
        assert_ne!(a.body, genuine.body, "{kind:?}");
        check_hostile(kind, &a.body, &csr, domain, env.sandbox.now());
        // The next download is genuine again.
        let b = env.get(&path, Some(&token)).await;
        assert!(zip::ZipArchive::new(std::io::Cursor::new(&b.body[..])).is_ok());
    }
}

fn check_hostile(
    kind: HostileKind,
    body: &[u8],
    csr: &Csr,
    domain: &str,
    now: time::OffsetDateTime,
) {
    if kind == HostileKind::Truncated {
        assert!(zip::ZipArchive::new(std::io::Cursor::new(body)).is_err());
        return;
    }
    let mut zip = zip::ZipArchive::new(std::io::Cursor::new(body)).expect("a ZIP");
    let names: Vec<String> = zip.file_names().map(str::to_owned).collect();
    match kind {
        HostileKind::DotDot => assert!(names.iter().any(|n| n.contains("../")), "{names:?}"),
        HostileKind::Absolute => assert!(names.iter().any(|n| n.starts_with('/')), "{names:?}"),
        HostileKind::Symlink => {
            let f = zip.by_name("nginx/fullchain.crt").expect("entry");
            assert!(f.is_symlink(), "nginx/fullchain.crt is a symlink entry");
        }
        HostileKind::Oversized => {
            let big = (0..zip.len())
                .map(|i| zip.by_index_raw(i).expect("entry").size())
                .max()
                .unwrap_or(0);
            assert!(big >= OVERSIZED_LEN, "{big}");
            assert!((body.len() as u64) < OVERSIZED_LEN / 10);
        }
        HostileKind::WrongKey | HostileKind::OtherDomain | HostileKind::Expired => {
            let entries = unzip(body);
            let leaf = &pem_certs(&entries[&format!("pem/{domain}.pem")])[0];
            let (spki, names, not_after) = leaf_facts(leaf);
            match kind {
                HostileKind::WrongKey => assert_ne!(spki, csr.spki()),
                HostileKind::OtherDomain => {
                    assert_eq!(spki, csr.spki());
                    assert!(!names.iter().any(|n| n == domain), "{names:?}");
                    assert!(names.iter().any(|n| n == OTHER_DOMAIN), "{names:?}");
                }
                _ => assert!(not_after < now, "expired: {not_after} < {now}"),
            }
        }
        HostileKind::ForeignCa => {
            let entries = unzip(body);
            let leaf = &pem_certs(&entries[&format!("pem/{domain}.pem")])[0];
            let (spki, names, not_after) = leaf_facts(leaf);
            assert_eq!(spki, csr.spki());
            assert!(names.iter().any(|n| n == domain), "{names:?}");
            assert!(not_after > now);
        }
        HostileKind::NoIntermediate => {
            let entries = unzip(body);
            let fullchain = pem_certs(&entries["nginx/fullchain.crt"]);
            assert_eq!(fullchain.len(), 1, "the leaf alone");
            let (spki, names, _) = leaf_facts(&fullchain[0]);
            assert_eq!(spki, csr.spki());
            assert!(names.iter().any(|n| n == domain), "{names:?}");
            assert!(pem_certs(&entries["apache/ca_bundle.crt"]).is_empty());
        }
        HostileKind::Truncated => unreachable!(),
    }
}
