//! `[agent] notify_url`: the run's events posted as JSON to a local receiver — delivered after
//! a 5xx, each change of state announced once (installed, failed, recovered by the next
//! install), nothing on runs that change nothing, no credential in any payload, and a receiver
//! that never answers given up after the timeout, its events posted by the next run.

use crate::support;

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpListener;
use std::sync::{Arc, Mutex};

use partner_sandbox::{Fault, FaultKind};
use support::env::TestEnv;

/// A receiver on 127.0.0.1: answers each POST with the next status of `script` (then 200)
/// and keeps the bodies; a status of 0 reads the request and never answers.
struct Receiver {
    url: String,
    bodies: Arc<Mutex<Vec<String>>>,
}

impl Receiver {
    fn start(script: Vec<u16>) -> Self {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let url = format!("http://{}/hook", listener.local_addr().unwrap());
        let bodies = Arc::new(Mutex::new(Vec::new()));
        let kept = bodies.clone();
        std::thread::spawn(move || {
            let mut script = script.into_iter();
            for stream in listener.incoming() {
                let Ok(mut stream) = stream else { continue };
                let mut reader = BufReader::new(stream.try_clone().unwrap());
                let mut length = 0usize;
                loop {
                    let mut line = String::new();
                    if reader.read_line(&mut line).unwrap_or(0) == 0 {
                        break;
                    }
                    let lower = line.to_ascii_lowercase();
                    if let Some(v) = lower.strip_prefix("content-length:") {
                        length = v.trim().parse().unwrap_or(0);
                    }
                    if line == "\r\n" {
                        break;
                    }
                }
                let mut body = vec![0u8; length];
                let _ = reader.read_exact(&mut body);
                let status = script.next().unwrap_or(200);
                if status == 0 {
                    // The fault itself: a receiver that holds the connection and never answers.
                    std::thread::spawn(move || {
                        std::thread::sleep(std::time::Duration::from_secs(60));
                        drop(stream);
                    });
                    continue;
                }
                if status == 200 {
                    kept.lock()
                        .unwrap()
                        .push(String::from_utf8_lossy(&body).into_owned());
                }
                let _ = write!(
                    stream,
                    "HTTP/1.1 {status} X\r\nContent-Length: 0\r\nConnection: close\r\n\r\n"
                );
            }
        });
        Self { url, bodies }
    }

    /// The events of every delivered payload, in order.
    fn events(&self) -> Vec<Vec<String>> {
        self.bodies
            .lock()
            .unwrap()
            .iter()
            .map(|b| {
                let v: serde_json::Value = serde_json::from_str(b).unwrap();
                v["events"]
                    .as_array()
                    .unwrap()
                    .iter()
                    .map(|e| {
                        format!(
                            "{} {}",
                            e["certificate"].as_str().unwrap(),
                            e["event"].as_str().unwrap()
                        )
                    })
                    .collect()
            })
            .collect()
    }
}

#[test]
fn each_change_of_state_is_posted_once() {
    let receiver = Receiver::start(vec![503]);
    let mut env = TestEnv::new();
    env.agent_extra = format!("notify_url = \"{}\"\n", receiver.url);
    let spec = env.standalone_spec("www", &["www.announce.test"]);
    let leaf = spec.files.leaf_file();
    env.certs.push(spec);

    // Installed: delivered after one 503.
    env.renew().expect_code(0);
    assert_eq!(receiver.events(), vec![vec!["www installed"]]);
    let body = receiver.bodies.lock().unwrap()[0].clone();
    let v: serde_json::Value = serde_json::from_str(&body).unwrap();
    assert_eq!(v["source"], "cert-agent");
    assert!(v["events"][0]["serial"].as_str().is_some(), "{body}");
    for secret in ["sandbox\"", "password", "auth_token", "BEGIN"] {
        assert!(!body.contains(secret), "{secret} in {body}");
    }

    // Nothing changes: nothing posted.
    env.renew().expect_code(0);
    assert_eq!(receiver.events().len(), 1);

    // The file is gone and the download keeps failing: one `failed`, not one per run.
    std::fs::remove_file(&leaf).unwrap();
    env.sandbox.inject(
        Fault::new(FaultKind::Status { status: 503 })
            .method("GET")
            .path("/api/v1/ssl_certificates/*/download_bundle")
            .times(100),
    );
    env.renew_force().expect_failure();
    env.renew_force().expect_failure();
    assert_eq!(
        receiver.events(),
        vec![vec!["www installed"], vec!["www failed"]]
    );

    // Back: installed again.
    env.sandbox.clear_faults();
    env.renew_force().expect_code(0);
    assert_eq!(receiver.events().last().unwrap(), &vec!["www installed"]);
}

#[test]
fn a_receiver_that_never_answers_is_given_up_and_posted_to_again_by_the_next_run() {
    let receiver = Receiver::start(vec![0, 0, 0]);
    let mut env = TestEnv::new();
    env.agent_extra = format!(
        "notify_url = \"{}\"\nnotify_timeout_secs = 1\n",
        receiver.url
    );
    env.certs
        .push(env.standalone_spec("www", &["www.silent.test"]));

    // Three attempts without an answer: the run still succeeds, and says so.
    let out = env.renew();
    out.expect_code(0);
    assert!(
        out.stderr.contains("no answer within 1 s (attempt 3)"),
        "{}",
        out.stderr
    );
    assert!(
        out.stderr.contains("1 event(s) not delivered"),
        "{}",
        out.stderr
    );
    assert!(receiver.events().is_empty());

    // The next run, with nothing new, delivers the undelivered event, and only once.
    env.renew().expect_code(0);
    assert_eq!(receiver.events(), vec![vec!["www installed"]]);
    let body = receiver.bodies.lock().unwrap()[0].clone();
    let v: serde_json::Value = serde_json::from_str(&body).unwrap();
    assert!(v["events"][0]["time"].as_str().is_some(), "{body}");
    env.renew().expect_code(0);
    assert_eq!(receiver.events().len(), 1);
}

#[test]
fn a_failed_delivery_never_logs_the_url_or_its_token() {
    // A receiver that resets each connection: it closes without reading the request.
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap();
    std::thread::spawn(move || {
        for stream in listener.incoming() {
            drop(stream);
        }
    });
    let mut env = TestEnv::new();
    env.agent_extra = format!(
        "notify_url = \"http://{addr}/hook?token=SECRET-hook-token\"\nnotify_timeout_secs = 2\n"
    );
    env.certs
        .push(env.standalone_spec("www", &["www.reset.test"]));
    let out = env.renew();
    out.expect_code(0);
    assert!(out.stderr.contains("notify_url: "), "{}", out.stderr);
    assert!(out.stderr.contains("(attempt 3)"), "{}", out.stderr);
    assert!(
        out.stderr.contains("1 event(s) not delivered"),
        "{}",
        out.stderr
    );
    for secret in ["SECRET", "token=", "/hook"] {
        assert!(!out.stderr.contains(secret), "{secret} in {}", out.stderr);
        assert!(!out.stdout.contains(secret), "{secret} in {}", out.stdout);
    }

    // Nobody listening (connection refused): the same.
    let closed = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = closed.local_addr().unwrap().port();
    drop(closed);
    env.agent_extra = format!(
        "notify_url = \"http://127.0.0.1:{port}/hook?token=SECRET-hook-token\"\n\
         notify_timeout_secs = 2\n"
    );
    let out = env.renew();
    out.expect_code(0);
    assert!(out.stderr.contains("(attempt 3)"), "{}", out.stderr);
    assert!(!out.stderr.contains("SECRET"), "{}", out.stderr);
}
