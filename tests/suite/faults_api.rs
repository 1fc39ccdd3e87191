//! API faults against the `cert-agent` binary: 5xx bursts on reads recovered; a server that
//! never answers, trickles bytes or never ends a body ends in bounded time with a clear error;
//! malformed and mistyped JSON; a 200 whose `success` is missing or not a boolean on
//! change_dcv / resend_dcv / cancel; a token rotated mid-run (one new signin); two agents on one
//! account; TLS with the wrong name, self-signed or expired; a redirect to plain HTTP, refused
//! before any secret is sent there.

use crate::support;

use std::io::Write;
use std::sync::Arc;
use std::time::Duration;

use partner_sandbox::{Fault, FaultKind};
use support::env::{LOGIN, TestEnv};
use support::faults::{
    Identity, RawServer, Request, TestPki, config_for, json, renew_with, run_env, run_raw,
    with_signin,
};

const SIGNIN: &str = "/api/v1/users/signin";
const CANARY_PASSWORD: &str = "canary-password-5f2d8a1c";

fn signins(env: &TestEnv) -> usize {
    env.calls().iter().filter(|c| c.path == SIGNIN).count()
}

/// An environment whose `[api]` times out quickly, for servers that misbehave.
fn quick_env() -> TestEnv {
    let mut env = TestEnv::new();
    env.api_extra = "connect_timeout_secs = 2\ntimeout_secs = 3\nretries = 1\n".into();
    std::fs::write(env.path("password"), CANARY_PASSWORD).unwrap();
    env
}

/// `balance` against a raw TLS server trusted through `ca`; returns the output and run time.
/// `balance` against a TLS server on localhost (trusted through its own CA) that answers
/// with `handler`: the agent's output and how long it took.
fn balance_from_raw_server(
    handler: support::faults::Handler,
) -> (support::env::AgentOutput, Duration) {
    let env = quick_env();
    let pki = TestPki::new();
    let ca = pki.write_ca(&env.path("raw-ca.pem"));
    let server = RawServer::tls(pki.identity(&["127.0.0.1", "localhost"], false), handler);
    balance_against(&env, &server, "localhost", &ca)
}

fn balance_against(
    env: &TestEnv,
    server: &RawServer,
    host: &str,
    ca: &std::path::Path,
) -> (support::env::AgentOutput, Duration) {
    let config = config_for(env, &server.base_url("https", host), Some(ca));
    run_raw(env, &config, &["balance"], &[], Duration::from_secs(60))
}

// ---- 5xx bursts, malformed JSON, rotated tokens (sandbox) ----

/// Guards recovery from a burst of 5xx on reads: two 503s then 502 on the balance call, and
/// 502 bursts on status and bundle calls during a renewal, are retried and the run succeeds.
#[test]
fn bursts_of_5xx_on_reads_are_recovered() {
    let mut env = TestEnv::new();
    env.sandbox.inject(
        Fault::new(FaultKind::Status { status: 503 })
            .method("GET")
            .path("/api/v1/billing/balance")
            .times(2),
    );
    run_env(&env, &["balance"], &[]).expect_code(0);

    let spec = env.standalone_spec("www", &["burst.faults-api.test"]);
    env.certs.push(spec);
    env.sandbox.inject(
        Fault::new(FaultKind::Status { status: 502 })
            .method("GET")
            .path("/api/v1/ssl_certificates/*/download_bundle")
            .times(2),
    );
    env.sandbox.inject(
        Fault::new(FaultKind::Status { status: 500 })
            .method("GET")
            .path("/api/v1/ssl_certificates/*")
            .times(2),
    );
    let out = renew_with(&env, &[]);
    out.expect_code(0);
    out.installed_serial("www");
    assert_eq!(env.billed(), 1);
}

/// Guards decoding: half a JSON answer (200) on a read is a clear decode error, exit 1.
#[test]
fn malformed_json_is_a_clear_error() {
    let env = TestEnv::new();
    env.sandbox.inject(
        Fault::new(FaultKind::MalformedJson)
            .method("GET")
            .path("/api/v1/billing/balance")
            .times(5),
    );
    let out = run_env(&env, &["balance"], &[]);
    out.expect_code(1);
    let text = out.text().to_lowercase();
    assert!(
        text.contains("json") || text.contains("decode") || text.contains("unreadable"),
        "{}",
        out.describe()
    );
}

/// Guards the token cache: the token is rotated in the middle of a renewal; the agent signs
/// in again once and finishes.
#[test]
fn a_token_rotated_mid_run_costs_one_signin() {
    let mut env = TestEnv::new();
    let spec = env.standalone_spec("www", &["rotate.faults-api.test"]);
    env.certs.push(spec);
    env.sandbox.inject(
        Fault::new(FaultKind::RotateToken {
            login: LOGIN.into(),
        })
        .method("GET")
        .path("/api/v1/ssl_certificates/*/download_bundle"),
    );
    let out = renew_with(&env, &[]);
    out.expect_code(0);
    assert!(
        signins(&env) <= 2,
        "one signin plus one after the rotation, got {}",
        signins(&env)
    );
}

/// Guards two agents on one account (two state directories): each run signs in at most
/// twice even when the other one's signin rotated the token, and every run succeeds.
#[test]
fn two_agents_on_one_account_have_bounded_signins() {
    let env = TestEnv::new();
    let other_state = env.path("state-b");
    let config_b = env.config_text().replace(
        &format!("state_dir = \"{}\"", env.state_dir().display()),
        &format!("state_dir = \"{}\"", other_state.display()),
    );
    assert!(config_b.contains("state-b"));
    for round in 0..3 {
        for (i, config) in [env.config_text(), config_b.clone()].iter().enumerate() {
            // The other agent signed in meanwhile and got a new token.
            env.sandbox.rotate_token(LOGIN).unwrap();
            let before = signins(&env);
            let (out, took) = run_raw(&env, config, &["balance"], &[], Duration::from_secs(60));
            out.expect_code(0);
            let n = signins(&env) - before;
            assert!(
                n <= 2,
                "round {round}, agent {i}: {n} signins in one run\n{}",
                out.describe()
            );
            assert!(took < Duration::from_secs(30));
        }
    }
}

// ---- misbehaving servers (raw) ----

/// Guards the read timeout: a server that accepts the request and never answers.
#[test]
fn a_server_that_never_answers_times_out() {
    let (out, took) = balance_from_raw_server(Arc::new(|_: &Request, _: &mut dyn Write| {
        std::thread::sleep(Duration::from_secs(120));
    }));
    out.expect_code(1);
    assert!(took < Duration::from_secs(40), "took {took:?}");
    let text = out.text().to_lowercase();
    assert!(
        text.contains("time") && text.contains("out"),
        "the error says the server timed out\n{}",
        out.describe()
    );
}

/// Guards the total deadline: a server that sends a long body one byte every 200 ms (each
/// read makes progress, so only a whole-request deadline ends it).
#[test]
fn a_server_that_trickles_bytes_is_cut_off() {
    let (out, took) = balance_from_raw_server(with_signin(|_, w| {
        let _ = write!(
            w,
            "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: 100000\r\n\r\n"
        );
        for _ in 0..600 {
            if w.write_all(b" ").and_then(|_| w.flush()).is_err() {
                return;
            }
            std::thread::sleep(Duration::from_millis(200));
        }
    }));
    assert!(
        out.code.is_some(),
        "the agent ended by itself\n{}",
        out.describe()
    );
    out.expect_code(1);
    assert!(took < Duration::from_secs(40), "took {took:?}");
}

/// Guards the body cap: a chunked body that never ends, as fast as the agent reads it.
#[test]
fn a_body_that_never_ends_is_capped() {
    let (out, took) = balance_from_raw_server(with_signin(|_, w| {
        let _ = write!(
            w,
            "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\n"
        );
        let chunk = vec![b'['; 65536];
        for _ in 0..20_000 {
            let ok = write!(w, "{:x}\r\n", chunk.len())
                .and_then(|_| w.write_all(&chunk))
                .and_then(|_| w.write_all(b"\r\n"));
            if ok.is_err() {
                return;
            }
        }
    }));
    out.expect_code(1);
    assert!(took < Duration::from_secs(40), "took {took:?}");
    let text = out.text().to_lowercase();
    assert!(
        text.contains("limit") || text.contains("large") || text.contains("size"),
        "the error names the size limit\n{}",
        out.describe()
    );
}

/// Guards typed decoding: well-formed JSON of the wrong shape is an error, not a zero.
#[test]
fn mistyped_json_is_a_decode_error() {
    let (out, _) = balance_from_raw_server(with_signin(|_, w| {
        json(
            w,
            200,
            r#"{"balance":"plenty","reserved":[],"common":null,"prepayment":1,"available":{"sum":"x"}}"#,
        )
    }));
    out.expect_code(1);
    assert!(
        !out.stdout.contains("plenty"),
        "nothing of the mistyped answer is printed as data\n{}",
        out.describe()
    );
}

/// Guards ActionResult decoding: `success` missing, a string, a number or null on
/// change_dcv, resend_dcv and cancel is an error (exit 1), never reported as done.
#[test]
fn action_results_without_a_boolean_success_are_errors() {
    let env = quick_env();
    let pki = TestPki::new();
    let ca = pki.write_ca(&env.path("raw-ca.pem"));
    for body in [
        r#"{"result":"ok"}"#,
        r#"{"success":"true","result":"ok"}"#,
        r#"{"success":1,"result":"ok"}"#,
        r#"{"success":null}"#,
    ] {
        let server = RawServer::tls(
            pki.identity(&["localhost"], false),
            with_signin(move |_, w| json(w, 200, body)),
        );
        let config = config_for(&env, &server.base_url("https", "localhost"), Some(&ca));
        for args in [
            &["dcv", "resend", "42"][..],
            &["cancel", "42", "--yes"][..],
            &["dcv", "change", "42", "HTTP_CSR_HASH"][..],
        ] {
            let (out, _) = run_raw(&env, &config, args, &[], Duration::from_secs(60));
            assert_eq!(
                out.code,
                Some(1),
                "{body} on {args:?} is an error\n{}",
                out.describe()
            );
            assert!(
                out.text().contains("success"),
                "the error names the `success` field\n{}",
                out.describe()
            );
        }
        assert!(
            server
                .requests()
                .iter()
                .any(|r| r.path().ends_with("/resend_dcv")),
            "the calls reached the server"
        );
    }
}

// ---- TLS ----

fn refused_tls(identity: Identity, host: &str, trust: Option<&TestPki>) {
    let env = quick_env();
    let ca = trust.map(|p| p.write_ca(&env.path("raw-ca.pem")));
    let server = RawServer::tls(identity, with_signin(|_, w| json(w, 200, "{}")));
    let config = config_for(&env, &server.base_url("https", host), ca.as_deref());
    let (out, took) = run_raw(&env, &config, &["balance"], &[], Duration::from_secs(60));
    out.expect_code(1);
    assert!(took < Duration::from_secs(30), "took {took:?}");
    assert!(
        server.requests().is_empty() && server.received_text().is_empty(),
        "no request crossed the refused connection: {:?}",
        server.received_text()
    );
    let text = out.text().to_lowercase();
    assert!(
        text.contains("certificate") || text.contains("tls"),
        "the error is about the server's certificate\n{}",
        out.describe()
    );
    assert!(!out.text().contains(CANARY_PASSWORD));
}

#[test]
fn tls_with_the_wrong_name_is_refused() {
    let pki = TestPki::new();
    refused_tls(
        pki.identity(&["elsewhere.example"], false),
        "localhost",
        Some(&pki),
    );
}

#[test]
fn tls_self_signed_is_refused() {
    refused_tls(TestPki::self_signed(&["localhost"]), "localhost", None);
}

#[test]
fn tls_expired_is_refused() {
    let pki = TestPki::new();
    refused_tls(pki.identity(&["localhost"], true), "localhost", Some(&pki));
}

/// Guards redirects: the API answers the signin (307, which keeps the body) and a token-bearing
/// read (302) with a redirect to plain HTTP; the plain-HTTP listener must receive nothing at
/// all — no password, no token.
#[test]
fn a_redirect_to_plain_http_is_refused_before_any_secret_is_sent() {
    let env = quick_env();
    let pki = TestPki::new();
    let ca = pki.write_ca(&env.path("raw-ca.pem"));
    let plain = RawServer::plain(Arc::new(|_: &Request, w: &mut dyn Write| {
        json(w, 200, r#"{"id":7,"auth_token":"plain-token"}"#)
    }));
    let plain_port = plain.port;
    for redirect_signin in [true, false] {
        let server = RawServer::tls(
            pki.identity(&["localhost"], false),
            Arc::new(move |req: &Request, w: &mut dyn Write| {
                if req.path() == SIGNIN && !redirect_signin {
                    json(
                        w,
                        200,
                        r#"{"id":7,"auth_token":"raw-server-token-0123456789"}"#,
                    );
                    return;
                }
                let code = if req.method == "POST" { 307 } else { 302 };
                let _ = write!(
                    w,
                    "HTTP/1.1 {code} Moved\r\nLocation: http://127.0.0.1:{plain_port}{}\r\nContent-Length: 0\r\n\r\n",
                    req.target
                );
            }),
        );
        let (out, took) = balance_against(&env, &server, "localhost", &ca);
        out.expect_code(1);
        assert!(took < Duration::from_secs(30));
        assert_eq!(
            plain.connections.load(std::sync::atomic::Ordering::Relaxed),
            0,
            "nothing connected to the plain-HTTP listener; it received {:?}",
            plain.received_text()
        );
        assert!(
            out.text().contains("redirect"),
            "the error names the redirect\n{}",
            out.describe()
        );
    }
    let got = plain.received_text();
    assert!(!got.contains(CANARY_PASSWORD) && !got.contains("raw-server-token"));
}

/// Guards the scheme check: an `http://` base URL is a configuration error; nothing is sent.
#[test]
fn a_plain_http_base_url_is_refused_before_connecting() {
    let env = quick_env();
    let plain = RawServer::plain(Arc::new(|_: &Request, w: &mut dyn Write| {
        json(w, 200, "{}")
    }));
    let config = config_for(&env, &plain.base_url("http", "127.0.0.1"), None);
    let (out, _) = run_raw(&env, &config, &["balance"], &[], Duration::from_secs(30));
    out.expect_failure();
    assert_eq!(
        plain.connections.load(std::sync::atomic::Ordering::Relaxed),
        0,
        "received {:?}",
        plain.received_text()
    );
}
