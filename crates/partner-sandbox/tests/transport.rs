//! The sandbox's transport over real HTTPS: TLS with the sandbox's own API CA, CORS and
//! preflight, the plain-HTTP 301 listener, the CRL listener, the call log, the control API over HTTP, the clock,
//! persistence across a restart, and use from a plain `#[test]`.

mod common;

use std::time::Duration;

use common::*;
use partner_sandbox::{Fault, FaultKind, Sandbox, SandboxConfig};
use serde_json::{Value, json};

#[tokio::test]
async fn tls_handshake_succeeds_with_the_api_ca_and_fails_without_it() {
    let env = Env::instant();
    let a = env.get("/api/v1/countries", None).await;
    assert_eq!(a.status, 200, "{}", a.text());

    let pem = std::fs::read_to_string(env.sandbox.api_ca_path()).expect("api-ca.pem");
    assert!(pem.contains("BEGIN CERTIFICATE"));
    let root = std::fs::read_to_string(env.sandbox.root_path()).expect("root.pem");
    assert_ne!(pem, root, "the API's TLS CA is not the issuing root");

    // Trusting the issuing root instead of the API CA must fail.
    let wrong = reqwest::Client::builder()
        .tls_certs_only([reqwest::Certificate::from_pem(root.as_bytes()).expect("root parses")])
        .no_proxy()
        .build()
        .expect("client");
    let err = wrong
        .get(env.url("/api/v1/countries"))
        .send()
        .await
        .expect_err("an untrusted server certificate is refused");
    assert!(err.is_connect() || err.is_request(), "{err:?}");

    // So must a client with only the platform's roots.
    let platform = reqwest::Client::builder()
        .no_proxy()
        .build()
        .expect("client");
    assert!(
        platform
            .get(env.url("/api/v1/countries"))
            .send()
            .await
            .is_err()
    );

    // The certificate also names localhost.
    let by_name = env
        .send(env.client.get(format!(
            "https://localhost:{}/api/v1/countries",
            env.sandbox.addr().port()
        )))
        .await;
    assert_eq!(by_name.status, 200);
}

#[tokio::test]
async fn every_partner_api_answer_allows_any_origin() {
    let env = Env::instant();
    let ok = env.get("/api/v1/countries", None).await;
    assert_eq!(ok.header("access-control-allow-origin"), Some("*"));
    let unauthorised = env.get("/api/v1/billing/balance", None).await;
    assert_eq!(unauthorised.status, 401);
    assert_eq!(
        unauthorised.header("access-control-allow-origin"),
        Some("*")
    );
    let missing = env
        .get("/api/v1/ssl_certificates/1/status", Some("nope"))
        .await;
    assert_eq!(missing.header("access-control-allow-origin"), Some("*"));
    let token = env.signin(PARTNER).await;
    let products = env.get("/api/v1/products", Some(&token)).await;
    assert_eq!(products.status, 200);
    assert_eq!(products.header("access-control-allow-origin"), Some("*"));
}

#[tokio::test]
async fn options_preflight_answers_204_with_methods_and_headers() {
    let env = Env::instant();
    for path in [
        "/api/v1/order",
        "/api/v1/ssl_certificates/12/download_bundle",
        "/api/v1/users/signin",
    ] {
        let a = env
            .send(
                env.client
                    .request(reqwest::Method::OPTIONS, env.url(path))
                    .header("Origin", "https://portal.example")
                    .header("Access-Control-Request-Method", "POST")
                    .header(
                        "Access-Control-Request-Headers",
                        "x-auth-token, content-type",
                    ),
            )
            .await;
        assert_eq!(a.status, 204, "{path}");
        assert!(a.body.is_empty());
        assert_eq!(a.header("access-control-allow-origin"), Some("*"));
        let methods = a.header("access-control-allow-methods").unwrap_or_default();
        for m in ["GET", "POST", "OPTIONS"] {
            assert!(methods.contains(m), "{methods}");
        }
        let headers = a
            .header("access-control-allow-headers")
            .unwrap_or_default()
            .to_ascii_lowercase();
        for h in ["x-auth-token", "x-public-token", "content-type"] {
            assert!(headers.contains(h), "{headers}");
        }
    }
}

#[tokio::test]
async fn plain_http_listener_redirects_everything_with_301() {
    let env = Env::start(
        SandboxConfig::default()
            .instant(true)
            .http_listen("127.0.0.1:0".parse().expect("addr")),
    );
    let http = env.sandbox.http_addr().expect("http listener");
    let plain = reqwest::Client::builder()
        .redirect(reqwest::redirect::Policy::none())
        .no_proxy()
        .build()
        .expect("client");
    for (method, path) in [
        (
            reqwest::Method::GET,
            "/api/v1/products?recommended_prices=EU",
        ),
        (reqwest::Method::POST, "/api/v1/order"),
        (reqwest::Method::GET, "/"),
        (reqwest::Method::GET, "/_sandbox/clock"),
    ] {
        let resp = plain
            .request(method.clone(), format!("http://{http}{path}"))
            .body("{}")
            .send()
            .await
            .expect("plain HTTP answers");
        assert_eq!(resp.status().as_u16(), 301, "{method} {path}");
        assert_eq!(
            resp.headers().get("location").and_then(|v| v.to_str().ok()),
            Some(format!("{}{path}", env.sandbox.base_url()).as_str())
        );
    }
    // Nothing reached the partner API.
    assert!(env.sandbox.calls().is_empty());
}

#[tokio::test]
async fn call_log_keeps_the_raw_query_and_the_account() {
    let env = Env::instant();
    let token = env.signin(PARTNER).await;
    env.sandbox.clear_calls();

    let raw = "page=1&q=a%20b+c&scope=api_issued";
    let a = env
        .get(&format!("/api/v1/ssl_certificates?{raw}"), Some(&token))
        .await;
    assert_eq!(a.status, 200, "{}", a.text());
    // The deprecated query token: the log shows it, so tests can catch clients that use it.
    let b = env
        .get(&format!("/api/v1/billing/balance?auth_token={token}"), None)
        .await;
    assert_eq!(b.status, 200, "{}", b.text());
    let _ = env.get("/api/v1/billing/balance", Some("wrong")).await;

    let calls = env.sandbox.calls();
    assert_eq!(calls.len(), 3, "{calls:#?}");
    assert_eq!(calls[0].method, "GET");
    assert_eq!(calls[0].path, "/api/v1/ssl_certificates");
    assert_eq!(calls[0].query, raw);
    assert_eq!(calls[0].status, 200);
    assert_eq!(calls[0].account.as_deref(), Some(PARTNER));
    assert!(!calls[0].billed);
    assert!(calls[0].delivered);
    assert!(calls[1].query.contains(&token));
    assert_eq!(calls[2].status, 401);
    assert_eq!(calls[2].account, None);
    assert!(calls.windows(2).all(|w| w[0].time <= w[1].time));

    env.sandbox.clear_calls();
    assert!(env.sandbox.calls().is_empty());
}

#[tokio::test]
async fn responses_carry_the_virtual_date() {
    let env = Env::instant();
    env.sandbox.advance(Duration::from_secs(400 * 86_400));
    let a = env.get("/api/v1/countries", None).await;
    let date = a.header("date").expect("Date header").to_owned();
    let year = env.sandbox.now().year();
    assert!(date.ends_with(" GMT"), "{date}");
    assert!(date.contains(&format!(" {year} ")), "{date} is in {year}");
}

#[tokio::test]
async fn clock_advances_on_request_and_runs_at_the_time_scale() {
    let fast = Sandbox::start(SandboxConfig::default().time_scale(3_600.0)).expect("starts");
    let t0 = fast.now();
    std::thread::sleep(Duration::from_millis(300));
    let elapsed = fast.now() - t0;
    // 0.3 s real × 3600 = 18 virtual minutes (allow for scheduling slack).
    assert!(elapsed >= time::Duration::minutes(15), "{elapsed}");
    assert!(elapsed < time::Duration::hours(3), "{elapsed}");

    let normal = Sandbox::start(SandboxConfig::default()).expect("starts");
    let t0 = normal.now();
    let t1 = normal.advance(Duration::from_secs(30 * 86_400));
    assert!(t1 - t0 >= time::Duration::days(30));
    assert!(t1 - t0 < time::Duration::days(30) + time::Duration::minutes(1));
    assert!(normal.now() >= t1);
}

#[tokio::test]
async fn control_api_answers_over_http_from_loopback() {
    let env = Env::instant();
    let c = |path: &str| env.url(&format!("/_sandbox{path}"));

    let index = env.get("/_sandbox/", None).await;
    assert_eq!(index.status, 200);
    assert!(
        index.json()["routes"]
            .as_array()
            .is_some_and(|r| !r.is_empty())
    );

    // Clock.
    let before = env.get("/_sandbox/clock", None).await.json();
    let unix0 = before["unix"].as_i64().expect("unix");
    let after = env
        .send(
            env.client
                .post(c("/clock/advance"))
                .body(r#"{"days":2,"hours":1}"#),
        )
        .await;
    assert_eq!(after.status, 200, "{}", after.text());
    let unix1 = after.json()["unix"].as_i64().expect("unix");
    assert!(unix1 - unix0 >= 2 * 86_400 + 3_600, "{unix0} -> {unix1}");
    let back = env
        .send(env.client.post(c("/clock/advance")).body(r#"{"days":-1}"#))
        .await;
    assert_eq!(back.status, 400);

    // Instant, DNS.
    let a = env
        .send(env.client.post(c("/instant")).body(r#"{"instant":false}"#))
        .await;
    assert_eq!(a.status, 200, "{}", a.text());
    let a = env
        .send(
            env.client
                .post(c("/dns"))
                .body(r#"{"name":"_pki-validation.example.com","rtype":"TXT","value":"abc"}"#),
        )
        .await;
    assert_eq!(a.status, 200, "{}", a.text());
    let a = env
        .send(
            env.client
                .post(c("/dns/remove"))
                .body(r#"{"name":"_pki-validation.example.com","rtype":"TXT"}"#),
        )
        .await;
    assert_eq!(a.status, 200, "{}", a.text());

    // Faults: add, list, take effect, clear.
    let a = env
        .send(env.client.post(c("/faults")).body(
            r#"[{"kind":"status","status":502,"method":"GET","path":"/api/v1/countries","times":3},
                {"kind":"delay","ms":10,"path":"/api/v1/products"}]"#,
        ))
        .await;
    assert_eq!(a.status, 200, "{}", a.text());
    assert_eq!(a.json()["added"], 2);
    let listed = env.get("/_sandbox/faults", None).await.json();
    assert_eq!(listed.as_array().map(Vec::len), Some(2), "{listed}");
    assert_eq!(env.get("/api/v1/countries", None).await.status, 502);
    let listed = env.get("/_sandbox/faults", None).await.json();
    assert_eq!(listed[0]["times"], 2);
    let a = env.send(env.client.post(c("/faults/clear"))).await;
    assert_eq!(a.status, 200);
    assert_eq!(env.get("/api/v1/countries", None).await.status, 200);
    let bad = env
        .send(
            env.client
                .post(c("/faults"))
                .body(r#"{"kind":"status","status":200}"#),
        )
        .await;
    assert_eq!(bad.status, 400, "{}", bad.text());
    let bad = env
        .send(env.client.post(c("/faults")).body(r#"{"kind":"explode"}"#))
        .await;
    assert_eq!(bad.status, 400, "{}", bad.text());

    // Calls: the control API itself is not logged.
    let calls = env.get("/_sandbox/calls", None).await.json();
    let calls = calls.as_array().expect("array");
    assert!(
        calls.iter().all(|c| c["path"] == "/api/v1/countries"),
        "{calls:?}"
    );
    assert_eq!(calls[0]["status"], 502);
    assert_eq!(calls[0]["fault"], "status");
    assert!(calls[0]["time"].as_str().is_some_and(|t| t.ends_with('Z')));
    env.send(env.client.post(c("/calls/clear"))).await;
    assert_eq!(env.get("/_sandbox/calls", None).await.json(), json!([]));

    // Rotate a token: the old one stops working.
    let token = env.signin(PARTNER).await;
    let a = env
        .send(
            env.client
                .post(c("/rotate_token"))
                .body(json!({ "login": PARTNER }).to_string()),
        )
        .await;
    assert_eq!(a.status, 200, "{}", a.text());
    assert_eq!(
        env.get("/api/v1/billing/balance", Some(&token))
            .await
            .status,
        401
    );

    // Payments: the balance's `available` follows; garbage and unknown logins are refused.
    let token = env.signin(PARTNER).await;
    let a = env
        .send(
            env.client
                .post(c("/accounts/payments"))
                .body(json!({ "login": PARTNER, "sum": "12.3" }).to_string()),
        )
        .await;
    assert_eq!(a.status, 200, "{}", a.text());
    let balance = env
        .get("/api/v1/billing/balance", Some(&token))
        .await
        .json();
    assert_eq!(balance["available"]["sum"], 12.3, "{balance}");
    for (body, status) in [
        (json!({ "login": PARTNER, "sum": "-1" }), 400),
        (json!({ "login": PARTNER, "sum": "1.234" }), 400),
        (json!({ "login": PARTNER, "sum": "1e9" }), 400),
        (json!({ "login": PARTNER, "sum": "9999999999999" }), 400),
        (json!({ "login": PARTNER, "sum": 5 }), 400),
        (
            json!({ "login": "nobody@sandbox.test", "sum": "1.00" }),
            422,
        ),
    ] {
        let a = env
            .send(
                env.client
                    .post(c("/accounts/payments"))
                    .body(body.to_string()),
            )
            .await;
        assert_eq!(a.status, status, "{body}: {}", a.text());
    }

    // Billed counters, certificates, DCV ports.
    let billed = env.get("/_sandbox/billed", None).await;
    assert_eq!(billed.status, 200);
    assert!(billed.json().is_object());
    assert_eq!(
        env.get("/_sandbox/certificates/999999", None).await.status,
        404
    );
    let a = env
        .send(
            env.client
                .post(c("/certificates/999999/status"))
                .body(r#"{"status":"annulled"}"#),
        )
        .await;
    assert_eq!(a.status, 422, "{}", a.text());
    let a = env
        .send(env.client.post(c("/dcv_ports")).body(r#"{"http":8081}"#))
        .await;
    assert_eq!(a.json(), json!({ "http": 8081, "https": 443 }));

    // Unknown routes and bad bodies.
    assert_eq!(env.get("/_sandbox/nothing", None).await.status, 404);
    let a = env
        .send(env.client.post(c("/instant")).body("not json"))
        .await;
    assert_eq!(a.status, 400);
}

#[tokio::test]
async fn control_api_refuses_peers_that_are_not_loopback() {
    // Needs an address of this host that is not loopback; skip quietly where there is none.
    let Some(ip) = non_loopback_ipv4() else {
        eprintln!("no non-loopback IPv4 address: skipped");
        return;
    };
    let env = Env::start(
        SandboxConfig::default()
            .instant(true)
            .listen("0.0.0.0:0".parse().expect("addr")),
    );
    let port = env.sandbox.addr().port();
    // The certificate names only localhost and loopback addresses: skip name checks here.
    let client = reqwest::Client::builder()
        .danger_accept_invalid_certs(true)
        .no_proxy()
        .build()
        .expect("client");
    let Ok(resp) = client
        .get(format!("https://{ip}:{port}/_sandbox/clock"))
        .send()
        .await
    else {
        eprintln!("{ip} not reachable: skipped");
        return;
    };
    assert_eq!(resp.status().as_u16(), 403);
    let partner = client
        .get(format!("https://{ip}:{port}/api/v1/countries"))
        .send()
        .await
        .expect("partner API answers");
    assert_eq!(partner.status().as_u16(), 200);
}

fn non_loopback_ipv4() -> Option<std::net::IpAddr> {
    let s = std::net::UdpSocket::bind("0.0.0.0:0").ok()?;
    s.connect("192.0.2.1:9").ok()?;
    let ip = s.local_addr().ok()?.ip();
    (!ip.is_loopback() && !ip.is_unspecified()).then_some(ip)
}

#[tokio::test]
async fn a_restarted_sandbox_keeps_its_orders_when_persisting() {
    let dir = TempDir::new("persist");
    let config = SandboxConfig::default()
        .data_dir(dir.path())
        .persist(true)
        .instant(true);
    let csr = Csr::new(&["www.persisted.com"]);
    let (id, token, api_ca, later) = {
        let env = Env::start(config.clone());
        let token = env.signin(PARTNER).await;
        let product = env.product(&token, 'd').await;
        let id = env.order(&token, product, &csr, "HTTP_CSR_HASH").await;
        let later = env.sandbox.advance(Duration::from_secs(3 * 86_400));
        let api_ca = std::fs::read(env.sandbox.api_ca_path()).expect("api-ca.pem");
        assert!(dir.path().join("state.json").exists());
        (id, token, api_ca, later)
    };
    let env = Env::start(config);
    assert_eq!(
        std::fs::read(env.sandbox.api_ca_path()).expect("api-ca.pem"),
        api_ca,
        "same API CA after restart"
    );
    assert!(
        env.sandbox.now() >= later,
        "the virtual clock does not go back"
    );
    assert!(env.sandbox.inspect(id).is_some());
    assert_eq!(env.sandbox.billed_orders(PARTNER), 1);
    // The token survives too; the order is listed and answers.
    let list = env.get("/api/v1/ssl_certificates", Some(&token)).await;
    assert_eq!(list.status, 200, "{}", list.text());
    assert!(
        list.json()
            .as_array()
            .expect("array")
            .iter()
            .any(|c| c["internal_number"] == json!(id))
    );
    let status = env.status(&token, id).await;
    assert!(!status.is_empty());

    // Without persistence nothing is read back.
    drop(env);
    let fresh = Env::start(SandboxConfig::default().data_dir(dir.path()).instant(true));
    assert!(fresh.sandbox.inspect(id).is_none());
    assert_eq!(fresh.sandbox.billed_orders(PARTNER), 0);
}

#[test]
fn works_from_a_plain_test_and_cleans_up_its_temp_dir() {
    let sandbox = Sandbox::start(SandboxConfig::default()).expect("starts");
    let dir = sandbox.data_dir().to_path_buf();
    assert!(sandbox.api_ca_path().exists());
    assert!(sandbox.root_path().exists());
    assert!(sandbox.base_url().starts_with("https://127.0.0.1:"));
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("runtime");
    let client = client_for(&sandbox);
    let status = rt.block_on(async {
        client
            .get(format!("{}/api/v1/countries", sandbox.base_url()))
            .send()
            .await
            .expect("answers")
            .status()
    });
    assert_eq!(status.as_u16(), 200);
    let addr = sandbox.addr();
    drop(sandbox);
    assert!(!dir.exists(), "temp dir removed");
    assert!(
        std::net::TcpStream::connect_timeout(&addr, Duration::from_millis(500)).is_err(),
        "listener closed"
    );
}

#[tokio::test]
async fn faults_injected_through_the_handle_are_listed_and_cleared() {
    let env = Env::instant();
    env.sandbox.inject(
        Fault::new(FaultKind::Status { status: 500 })
            .method("GET")
            .path("/api/v1/countries")
            .times(2),
    );
    assert_eq!(env.sandbox.faults().len(), 1);
    env.sandbox.clear_faults();
    assert!(env.sandbox.faults().is_empty());
    assert_eq!(env.get("/api/v1/countries", None).await.status, 200);
    let _: Value = env.get("/_sandbox/faults", None).await.json();
}

#[test]
fn binary_help_explains_every_flag() {
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_partner-sandbox"))
        .args(["serve", "--help"])
        .output()
        .expect("runs");
    assert!(out.status.success());
    let help = String::from_utf8_lossy(&out.stdout);
    for flag in [
        "--listen",
        "--data",
        "--http-listen",
        "--crl-listen",
        "--dcv-http-port",
        "--dcv-https-port",
        "--seed",
        "--time-scale",
        "--accounts",
        "--instant",
        "--persist",
    ] {
        assert!(help.contains(flag), "{flag} in:\n{help}");
    }
}

#[test]
fn binary_serves_until_sigterm() {
    use std::io::BufRead;
    let dir = TempDir::new("bin");
    let mut child = std::process::Command::new(env!("CARGO_BIN_EXE_partner-sandbox"))
        .arg("serve")
        .args(["--listen", "127.0.0.1:0", "--http-listen", "127.0.0.1:0"])
        .arg("--data")
        .arg(dir.path())
        .args(["--instant", "--persist", "--seed", "7", "--time-scale", "2"])
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::null())
        .spawn()
        .expect("starts");
    let stdout = child.stdout.take().expect("stdout");
    let mut banner = Vec::new();
    for line in std::io::BufReader::new(stdout).lines() {
        let line = line.expect("line");
        let done = line.contains("Ctrl-C");
        banner.push(line);
        if done {
            break;
        }
    }
    let banner = banner.join("\n");
    let url = banner
        .split_whitespace()
        .find(|w| w.starts_with("https://127.0.0.1:"))
        .unwrap_or_else(|| panic!("base URL in:\n{banner}"))
        .trim_end_matches('/')
        .to_owned();
    assert!(banner.contains("api-ca.pem"), "{banner}");
    assert!(banner.contains("root.pem"), "{banner}");
    for login in [
        "partner@sandbox.test",
        "billing@sandbox.test",
        "retail@sandbox.test",
        "other@sandbox.test",
        "new@sandbox.test",
    ] {
        let line = banner
            .lines()
            .find(|l| l.contains(login))
            .unwrap_or_else(|| panic!("{login} in:\n{banner}"));
        assert!(line.contains("sandbox"), "password shown: {line}");
    }

    let pem = std::fs::read(dir.path().join("api-ca.pem")).expect("api-ca.pem");
    let client = reqwest::Client::builder()
        .tls_certs_only([reqwest::Certificate::from_pem(&pem).expect("pem")])
        .no_proxy()
        .build()
        .expect("client");
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("runtime");
    rt.block_on(async {
        let countries = client
            .get(format!("{url}/api/v1/countries"))
            .send()
            .await
            .expect("answers");
        assert_eq!(countries.status().as_u16(), 200);
        let clock: Value = serde_json::from_slice(
            &client
                .get(format!("{url}/_sandbox/clock"))
                .send()
                .await
                .expect("answers")
                .bytes()
                .await
                .expect("body"),
        )
        .expect("JSON");
        assert_eq!(clock["time_scale"], json!(2.0));
    });

    let killed = std::process::Command::new("kill")
        .args(["-TERM", &child.id().to_string()])
        .status()
        .expect("kill runs");
    assert!(killed.success());
    let start = std::time::Instant::now();
    loop {
        if let Some(status) = child.try_wait().expect("wait") {
            assert!(status.success(), "{status}");
            break;
        }
        assert!(
            start.elapsed() < Duration::from_secs(15),
            "still running after SIGTERM"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    assert!(
        dir.path().join("state.json").exists(),
        "state saved on exit"
    );
}

#[tokio::test]
async fn crls_are_served_over_plain_http_and_controlled_over_the_control_api() {
    let env = Env::instant();
    let c = |path: &str| env.url(&format!("/_sandbox{path}"));
    let plain = reqwest::Client::new();
    let url = env.sandbox.crl_url("s-one");
    assert!(url.starts_with("http://127.0.0.1:"), "{url}");

    let crl = plain.get(&url).send().await.expect("fetch");
    assert_eq!(crl.status(), 200);
    assert_eq!(
        crl.headers()
            .get("content-type")
            .and_then(|v| v.to_str().ok()),
        Some("application/pkix-crl")
    );
    let der = crl.bytes().await.expect("body");
    let (_, parsed) = x509_parser::parse_x509_crl(&der).expect("a DER CRL");
    assert!(
        parsed.issuer().to_string().contains("S-One"),
        "{}",
        parsed.issuer()
    );
    let wrong = plain.post(&url).send().await.expect("post");
    assert_eq!(wrong.status(), 405);
    let missing = plain
        .get(url.replace("s-one", "nope"))
        .send()
        .await
        .expect("404");
    assert_eq!(missing.status(), 404);

    // A fault through the control API: garbage until cleared.
    let set = env
        .send(
            env.client
                .post(c("/crl/fault"))
                .body(r#"{"fault":"garbage"}"#),
        )
        .await;
    assert_eq!(set.status, 200, "{}", set.text());
    let body = plain
        .get(&url)
        .send()
        .await
        .expect("fetch")
        .bytes()
        .await
        .expect("body");
    assert!(body.starts_with(b"this is not"), "{body:?}");
    let bad = env
        .send(
            env.client
                .post(c("/crl/fault"))
                .body(r#"{"fault":"melted"}"#),
        )
        .await;
    assert_eq!(bad.status, 400, "{}", bad.text());
    env.send(env.client.post(c("/crl/fault")).body(r#"{"fault":null}"#))
        .await;
    let state = env.get("/_sandbox/crl", None).await.json();
    assert_eq!(state["fault"], Value::Null);
    // The two GETs; the refused POST is no fetch.
    assert_eq!(state["fetches"]["/crl/s-one.crl"], 2, "{state}");
    assert_eq!(state["fetches"]["/crl/nope.crl"], 1, "{state}");

    // Revocation refusals: what to revoke, which reason.
    for (body, status) in [
        (r#"{}"#, 400),
        (r#"{"certificate_id":1,"serial":"0A"}"#, 400),
        (r#"{"certificate_id":999999}"#, 422),
        (r#"{"serial":"zz"}"#, 422),
        (r#"{"serial":"0A1B"}"#, 422),
        (r#"{"serial":"0A1B","reason":"bored"}"#, 422),
    ] {
        let a = env.send(env.client.post(c("/revoke")).body(body)).await;
        assert_eq!(a.status, status, "{body}: {}", a.text());
        assert!(a.json()["error"].is_string(), "{body}: {}", a.text());
    }
}

/// Under a time scale the CRLs are dated on the clock the certificates begin on (the real one):
/// a client on the real clock finds them current, not "not yet valid" hours ahead.
#[tokio::test]
async fn crls_under_a_time_scale_are_dated_on_the_certificates_clock() {
    let fast = Sandbox::start(SandboxConfig::default().time_scale(3_600.0)).expect("starts");
    std::thread::sleep(Duration::from_millis(500));
    assert!(
        fast.now() - time::OffsetDateTime::now_utc() >= time::Duration::minutes(20),
        "the virtual clock runs ahead"
    );
    let der = reqwest::Client::new()
        .get(fast.crl_url("s-one"))
        .send()
        .await
        .expect("fetch")
        .bytes()
        .await
        .expect("body");
    let (_, crl) = x509_parser::parse_x509_crl(&der).expect("a DER CRL");
    let this_update = crl.last_update().to_datetime();
    let real = time::OffsetDateTime::now_utc();
    assert!(
        (this_update - real).abs() < time::Duration::minutes(2),
        "thisUpdate {this_update} is on the real clock ({real})"
    );
    assert!(crl.next_update().is_some_and(|n| n.to_datetime() > real));
}
