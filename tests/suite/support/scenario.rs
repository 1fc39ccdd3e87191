//! Helpers for the renewal-engine scenarios: running the agent on the sandbox's virtual clock
//! (`CERT_AGENT_TEST_CLOCK_OFFSET_SECS`), reading the recorded certificate ID and the installed
//! leaf, and counting calls in the sandbox's call log.
#![allow(dead_code)]

use std::fs;
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::{Duration, Instant};

use partner_sandbox::CallRecord;
use time::OffsetDateTime;

use super::env::{AgentOutput, Leaf, RUN_TIMEOUT, TestEnv};

/// The agent's clock-offset variable (honoured by debug builds only).
pub(crate) const CLOCK_OFFSET_ENV: &str = "CERT_AGENT_TEST_CLOCK_OFFSET_SECS";

static RUNS: AtomicU32 = AtomicU32::new(0);

/// Seconds between the real clock and the sandbox's virtual clock right now, rounded up so
/// that the agent is never behind the sandbox (by less than two seconds ahead of it).
pub(crate) fn clock_offset(env: &TestEnv) -> i64 {
    (env.sandbox.now() - OffsetDateTime::now_utc()).whole_seconds() + 1
}

/// Runs the agent with `args` (after `--config`), its clock following the sandbox's.
#[track_caller]
pub(crate) fn run_synced(env: &TestEnv, args: &[&str]) -> AgentOutput {
    let offset = clock_offset(env).to_string();
    run_with(env, args, &[(CLOCK_OFFSET_ENV, offset.as_str())])
}

/// Runs the agent with `args` and extra environment variables; killed and failed after
/// [`RUN_TIMEOUT`].
#[track_caller]
pub(crate) fn run_with(env: &TestEnv, args: &[&str], vars: &[(&str, &str)]) -> AgentOutput {
    let config = env.write_config();
    let n = RUNS.fetch_add(1, Ordering::Relaxed);
    let out = env.path(&format!("logs/scenario-{n}.out"));
    let err = env.path(&format!("logs/scenario-{n}.err"));
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_cert-agent"));
    cmd.arg("--config")
        .arg(&config)
        .args(args)
        .current_dir(&env.cwd)
        .env_remove("CERT_AGENT_CONFIG")
        .env_remove(CLOCK_OFFSET_ENV)
        .env_remove("INVOCATION_ID")
        .stdin(Stdio::null())
        .stdout(fs::File::create(&out).unwrap())
        .stderr(fs::File::create(&err).unwrap());
    for (k, v) in vars {
        cmd.env(k, v);
    }
    let mut child = cmd.spawn().expect("cert-agent starts");
    let deadline = Instant::now() + RUN_TIMEOUT;
    let status = loop {
        if let Some(status) = child.try_wait().unwrap() {
            break Some(status);
        }
        if Instant::now() > deadline {
            let _ = child.kill();
            let _ = child.wait();
            break None;
        }
        std::thread::sleep(Duration::from_millis(5));
    };
    let output = AgentOutput {
        code: status.and_then(|s| s.code()),
        stdout: fs::read_to_string(out).unwrap_or_default(),
        stderr: fs::read_to_string(err).unwrap_or_default(),
        args: args.iter().map(|s| s.to_string()).collect(),
    };
    assert!(
        status.is_some(),
        "cert-agent did not finish within {RUN_TIMEOUT:?}\n{}",
        output.describe()
    );
    output
}

/// `renew --json --wait 30` on the sandbox's clock.
#[track_caller]
pub(crate) fn renew_synced(env: &TestEnv) -> AgentOutput {
    run_synced(env, &["--json", "renew", "--wait", "30"])
}

/// The certificate ID recorded for `name` (`order.certificate_id`).
#[track_caller]
pub(crate) fn certificate_id(env: &TestEnv, name: &str) -> u64 {
    let rec = env
        .record(name)
        .unwrap_or_else(|| panic!("no record for '{name}'"));
    rec["order"]["certificate_id"]
        .as_u64()
        .unwrap_or_else(|| panic!("no order recorded for '{name}': {rec:#}"))
}

/// The leaf of the installed certificate file of `name`.
pub(crate) fn installed_leaf(env: &TestEnv, name: &str) -> Leaf {
    Leaf::from_pem_file(&env.spec(name).files.leaf_file())
}

/// Validity of the leaf in `der`.
pub(crate) fn validity(der: &[u8]) -> (OffsetDateTime, OffsetDateTime) {
    let (_, cert) = x509_parser::parse_x509_certificate(der).expect("a certificate");
    let v = cert.validity();
    (
        OffsetDateTime::from_unix_timestamp(v.not_before.timestamp()).unwrap(),
        OffsetDateTime::from_unix_timestamp(v.not_after.timestamp()).unwrap(),
    )
}

/// True when `pattern` (segments, `*` matching one) matches `path`.
pub(crate) fn path_matches(pattern: &str, path: &str) -> bool {
    let p: Vec<&str> = pattern.split('/').collect();
    let s: Vec<&str> = path.split('/').collect();
    p.len() == s.len() && p.iter().zip(&s).all(|(a, b)| *a == "*" || a == b)
}

/// Calls matching `method` and `pattern`.
pub(crate) fn matching<'a>(
    calls: &'a [CallRecord],
    method: &str,
    pattern: &str,
) -> Vec<&'a CallRecord> {
    calls
        .iter()
        .filter(|c| c.method == method && path_matches(pattern, &c.path))
        .collect()
}

/// `POST .../reissue` calls.
pub(crate) const REISSUE: &str = "/api/v1/ssl_certificates/*/reissue";
/// `POST .../prolong` calls.
pub(crate) const PROLONG: &str = "/api/v1/ssl_certificates/*/prolong";
/// `GET .../status` calls.
pub(crate) const STATUS: &str = "/api/v1/ssl_certificates/*/status";
/// `GET .../dcv` calls.
pub(crate) const DCV: &str = "/api/v1/ssl_certificates/*/dcv";
/// The list call.
pub(crate) const LIST: &str = "/api/v1/ssl_certificates";

/// Calls that change something at the API or bill: order, reissue, prolong, cancel, change
/// and resend DCV.
pub(crate) fn state_changing(calls: &[CallRecord]) -> Vec<&CallRecord> {
    calls
        .iter()
        .filter(|c| {
            c.billed
                || (c.method == "POST"
                    && (c.path == "/api/v1/order"
                        || [
                            REISSUE,
                            PROLONG,
                            "/api/v1/ssl_certificates/*/cancel",
                            "/api/v1/ssl_certificates/*/change_dcv",
                            "/api/v1/ssl_certificates/*/resend_dcv",
                        ]
                        .iter()
                        .any(|p| path_matches(p, &c.path))))
        })
        .collect()
}

/// A compact view of calls for assertion messages.
pub(crate) fn show(calls: &[CallRecord]) -> String {
    calls
        .iter()
        .map(|c| {
            format!(
                "{} {} {}{}{} -> {}\n",
                c.time,
                c.method,
                c.path,
                if c.query.is_empty() { "" } else { "?" },
                c.query,
                c.status
            )
        })
        .collect()
}

/// Serves the installed `fullchain` and `key` files over TLS on a free loopback port for one
/// handshake (a stand-in for a web server reading the files); returns the address.
pub(crate) fn serve_files_once(fullchain: &std::path::Path, key: &std::path::Path) -> String {
    use rustls::pki_types::pem::PemObject;
    use rustls::pki_types::{CertificateDer, PrivateKeyDer};
    let chain: Vec<CertificateDer<'static>> = CertificateDer::pem_file_iter(fullchain)
        .unwrap_or_else(|e| panic!("{}: {e}", fullchain.display()))
        .map(|c| c.unwrap())
        .collect();
    let key =
        PrivateKeyDer::from_pem_file(key).unwrap_or_else(|e| panic!("{}: {e}", key.display()));
    let provider = std::sync::Arc::new(rustls::crypto::aws_lc_rs::default_provider());
    let config = rustls::ServerConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .unwrap()
        .with_no_client_auth()
        .with_single_cert(chain, key)
        .expect("the installed certificate and key belong together");
    let config = std::sync::Arc::new(config);
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap().to_string();
    std::thread::spawn(move || {
        if let Ok((mut sock, _)) = listener.accept() {
            sock.set_read_timeout(Some(Duration::from_secs(5))).ok();
            let mut conn = rustls::ServerConnection::new(config).unwrap();
            while conn.is_handshaking() {
                if conn.complete_io(&mut sock).is_err() {
                    break;
                }
            }
            let _ = conn.complete_io(&mut sock);
        }
    });
    addr
}
