//! Domain control validation under attack or interruption, through the binary:
//! - the built-in standalone server keeps serving the validation file to the CA while dozens
//!   of slowloris connections hold it, and answers 404 for anything else;
//! - SIGTERM while waiting for validation removes the published files; after SIGKILL the next
//!   run removes what the killed one recorded;
//! - `cert-agent serve` drops root after binding its port.
//!
//! Exact-file serving and per-connection timeouts of the server itself are proven by
//! `dcv_standalone.rs`.

use crate::support;

use std::fs;
use std::io::{Read, Write};
use std::net::TcpStream;
use std::time::Duration;

use nix::sys::signal::{Signal, kill};
use nix::unistd::Pid;
use partner_sandbox::SandboxConfig;
use support::env::{Publish, TestEnv, wait_exit, wait_until};
use support::faults::{RawServer, entries, serve_webroot};

/// A world with a slow (non-instant) sandbox and a web root served by a file server.
fn pending_webroot(domain: &str) -> (TestEnv, RawServer) {
    let mut env = TestEnv::with_sandbox(SandboxConfig::default());
    let webroot = env.path("www-root");
    fs::create_dir_all(&webroot).unwrap();
    let server = serve_webroot(&webroot);
    env.sandbox.set_dcv_ports(server.port, 0);
    let mut spec = env.cert_spec("www", &[domain], "none");
    spec.publish = Publish::Webroot(webroot);
    env.certs.push(spec);
    (env, server)
}

fn validation_files(env: &TestEnv) -> Vec<std::path::PathBuf> {
    entries(&env.path("www-root"))
        .into_iter()
        .filter(|p| p.starts_with(".well-known/pki-validation") && p.extension().is_some())
        .collect()
}

/// Guards cleanup on SIGTERM: the agent is waiting for validation with its file published;
/// SIGTERM makes it remove the file before it exits.
#[test]
fn sigterm_during_validation_removes_published_files() {
    let (env, _server) = pending_webroot("term.faults-dcv.test");
    let mut child = env.agent(["--json", "renew", "--wait", "60"]).spawn();
    assert!(
        wait_until(Duration::from_secs(30), || !validation_files(&env)
            .is_empty()),
        "the validation file was published"
    );
    kill(Pid::from_raw(child.id() as i32), Signal::SIGTERM).unwrap();
    let status = wait_exit(&mut child, Duration::from_secs(20));
    assert!(status.is_some(), "the agent exits after SIGTERM");
    assert!(
        validation_files(&env).is_empty(),
        "files left after SIGTERM: {:?}",
        validation_files(&env)
    );
    assert_eq!(env.billed(), 1);
}

/// Guards recovery after SIGKILL: the killed run leaves its file; the next run (validation
/// now instant) completes and removes it, without a second order.
#[test]
fn after_sigkill_the_next_run_removes_recorded_files() {
    let (env, _server) = pending_webroot("kill.faults-dcv.test");
    let mut child = env.agent(["--json", "renew", "--wait", "60"]).spawn();
    assert!(wait_until(Duration::from_secs(30), || !validation_files(
        &env
    )
    .is_empty()));
    let left = validation_files(&env);
    child.kill().unwrap();
    child.wait().unwrap();
    assert_eq!(validation_files(&env), left, "SIGKILL leaves the file");

    env.sandbox.set_instant(true);
    env.sandbox.validate_now();
    let out = env.renew();
    out.expect_code(0);
    out.installed_serial("www");
    assert!(
        validation_files(&env).is_empty(),
        "left: {:?}",
        validation_files(&env)
    );
    assert_eq!(env.billed(), 1);
}

/// Guards the standalone server against slowloris while validating: 60 connections send a
/// partial request head and hold; the CA's fetch still succeeds and the run completes.
#[test]
fn standalone_server_survives_slowloris_during_validation() {
    let mut env = TestEnv::with_sandbox(SandboxConfig::default());
    let spec = env.standalone_spec("www", &["slowloris.faults-dcv.test"]);
    let Publish::Standalone(port) = spec.publish else {
        unreachable!()
    };
    env.certs.push(spec);
    let mut child = env.agent(["--json", "renew", "--wait", "60"]).spawn();
    assert!(
        wait_until(Duration::from_secs(30), || TcpStream::connect((
            "127.0.0.1",
            port
        ))
        .is_ok()),
        "the standalone server listens"
    );
    let mut holds = Vec::new();
    for _ in 0..60 {
        if let Ok(mut s) = TcpStream::connect(("127.0.0.1", port)) {
            let _ = s.write_all(b"GET /.well-known/pki-validation/");
            holds.push(s);
        }
    }
    // Anything but the exact file is 404 even now.
    let mut probe = TcpStream::connect(("127.0.0.1", port)).unwrap();
    probe
        .set_read_timeout(Some(Duration::from_secs(15)))
        .unwrap();
    probe
        .write_all(b"GET /etc/passwd HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
        .unwrap();
    let mut answer = String::new();
    let _ = probe.read_to_string(&mut answer);
    assert!(
        answer.is_empty()
            || answer.starts_with("HTTP/1.1 404")
            || answer.starts_with("HTTP/1.1 503"),
        "{answer}"
    );

    env.sandbox.set_instant(true);
    env.sandbox.validate_now();
    let status = wait_exit(&mut child, Duration::from_secs(60));
    drop(holds);
    assert_eq!(
        status.and_then(|s| s.code()),
        Some(0),
        "the run completed despite the held connections: {}",
        fs::read_to_string(env.path("logs/run-0.err")).unwrap_or_default()
    );
    assert_eq!(env.billed(), 1);
}

/// Guards privilege separation: run as root, `cert-agent serve` binds its port and then runs
/// as an unprivileged user (`serve_user`, nobody here), every user and group ID switched, with
/// no capability left and no_new_privs set, before it answers a request; SIGTERM stops it with status 0.
#[test]
fn standalone_server_drops_root_after_binding() {
    if !support::faults::require_root("dropping root after binding") {
        return;
    }
    let mut env = TestEnv::new();
    let spec = env.standalone_spec("www", &["drop.faults-dcv.test"]);
    let Publish::Standalone(port) = spec.publish else {
        unreachable!()
    };
    env.certs.push(spec);
    let mut child = env.agent(["serve"]).spawn();
    // An answer (not just a connection, which the kernel accepts once the port is bound)
    // comes after the switch.
    let answered = wait_until(Duration::from_secs(20), || {
        let Ok(mut s) = TcpStream::connect(("127.0.0.1", port)) else {
            return false;
        };
        let _ = s.set_read_timeout(Some(Duration::from_secs(5)));
        let _ = s.write_all(b"GET / HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n");
        let mut answer = String::new();
        let _ = s.read_to_string(&mut answer);
        answer.starts_with("HTTP/1.1 404")
    });
    let status = fs::read_to_string(format!("/proc/{}/status", child.id())).unwrap();
    if !answered {
        let _ = child.kill();
        let _ = child.wait();
        panic!(
            "serve did not answer: {}",
            fs::read_to_string(env.path("logs/run-0.err")).unwrap_or_default()
        );
    }
    let ids = |key: &str| -> Vec<String> {
        status
            .lines()
            .find(|l| l.starts_with(key))
            .unwrap_or_else(|| panic!("{key} in {status}"))
            .split_whitespace()
            .skip(1)
            .map(str::to_owned)
            .collect()
    };
    let nobody = nix::unistd::User::from_name("nobody").unwrap().unwrap();
    let (uid, gid) = (nobody.uid.to_string(), nobody.gid.to_string());
    assert_eq!(
        ids("Uid:"),
        [uid.as_str(); 4],
        "real, effective, saved, fs uid"
    );
    assert_eq!(
        ids("Gid:"),
        [gid.as_str(); 4],
        "real, effective, saved, fs gid"
    );
    assert!(
        ids("Groups:").iter().all(|g| *g == gid),
        "supplementary groups: {:?}",
        ids("Groups:")
    );
    // No capability left to use, and none to gain.
    for set in ["CapEff:", "CapPrm:", "CapAmb:"] {
        assert_eq!(ids(set), ["0000000000000000"], "{set} {status}");
    }
    assert_eq!(ids("NoNewPrivs:"), ["1"], "{status}");

    kill(Pid::from_raw(child.id() as i32), Signal::SIGTERM).unwrap();
    let status = wait_exit(&mut child, Duration::from_secs(20));
    assert_eq!(
        status.and_then(|s| s.code()),
        Some(0),
        "SIGTERM stops serve"
    );
}
