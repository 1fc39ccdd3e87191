//! `cert-agent serve`, the standalone DCV server as a process of its own, through the binary:
//! - `renew` finds it (its lock in the state directory) and publishes the validation file into
//!   the publish directory instead of binding the port; the file stays served between runs
//!   while the CA has not validated; the CA fetches it from `serve`; once issued the directory
//!   is empty again;
//! - it serves nothing but validation files that are regular files of the publish directory
//!   (404 for a symbolic link, a malformed name, other paths and methods);
//! - SIGTERM of a waiting `renew` removes the file it published for `serve`;
//! - slow clients holding connections do not keep it from answering;
//! - a certificate whose `listen` it does not serve is served by the run itself;
//! - configuration errors: an unknown `serve_user`, no standalone certificate, a second
//!   `serve` on the same state directory.
//!
//! Run as root (as CI does), `serve` also switches to `nobody` here, so the tests prove that the
//! dropped server reads the files through the directory it opened before the switch (the state
//! directory above it is 0700).

use crate::support;

use std::fs;
use std::io::{Read, Write};
use std::net::TcpStream;
use std::os::unix::fs::PermissionsExt;
use std::path::PathBuf;
use std::process::Child;
use std::time::{Duration, Instant};

use nix::sys::signal::{Signal, kill};
use nix::unistd::Pid;
use partner_sandbox::SandboxConfig;
use support::env::{Publish, TestEnv, wait_exit, wait_until};

const VALID_NAME: &str = "0123456789ABCDEF0123456789ABCDEF.txt";

/// A running `cert-agent serve`, stopped with SIGTERM when dropped.
struct Serve {
    child: Child,
    port: u16,
}

impl Serve {
    /// Starts `serve` and waits until it answers (after any privilege switch).
    fn start(env: &TestEnv, port: u16) -> Self {
        let child = env.agent(["-v", "serve"]).spawn();
        let mut serve = Serve { child, port };
        let up = wait_until(Duration::from_secs(20), || {
            serve
                .get("/")
                .is_some_and(|a| a.starts_with("HTTP/1.1 404"))
        });
        if !up {
            let status = serve.child.try_wait().unwrap();
            panic!(
                "serve did not answer on port {port} (exit {status:?}); logs: {}",
                logs(env)
            );
        }
        serve
    }

    /// The raw answer to `GET target`, if any.
    fn get(&self, target: &str) -> Option<String> {
        request(self.port, &format!("GET {target}"))
    }

    /// SIGTERM; the exit code.
    fn stop(mut self) -> Option<i32> {
        kill(Pid::from_raw(self.child.id() as i32), Signal::SIGTERM).unwrap();
        wait_exit(&mut self.child, Duration::from_secs(20)).and_then(|s| s.code())
    }
}

impl Drop for Serve {
    fn drop(&mut self) {
        let _ = kill(Pid::from_raw(self.child.id() as i32), Signal::SIGTERM);
        let _ = wait_exit(&mut self.child, Duration::from_secs(10));
    }
}

fn request(port: u16, line: &str) -> Option<String> {
    let mut s = TcpStream::connect(("127.0.0.1", port)).ok()?;
    s.set_read_timeout(Some(Duration::from_secs(10))).ok()?;
    s.write_all(format!("{line} HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n").as_bytes())
        .ok()?;
    let mut answer = String::new();
    s.read_to_string(&mut answer).ok()?;
    Some(answer)
}

/// [`request`] from the local address `from` (a CA's validator is another address).
fn request_from(from: [u8; 4], port: u16, line: &str) -> String {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    runtime.block_on(async {
        use tokio::io::{AsyncReadExt, AsyncWriteExt};
        let socket = tokio::net::TcpSocket::new_v4().unwrap();
        socket.bind(std::net::SocketAddr::from((from, 0))).unwrap();
        let mut s = socket
            .connect(std::net::SocketAddr::from(([127, 0, 0, 1], port)))
            .await
            .unwrap();
        let ask = format!("{line} HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n");
        s.write_all(ask.as_bytes()).await.unwrap();
        let mut answer = Vec::new();
        let _ = tokio::time::timeout(Duration::from_secs(10), s.read_to_end(&mut answer)).await;
        String::from_utf8_lossy(&answer).into_owned()
    })
}

fn body(answer: &str) -> &str {
    answer.split_once("\r\n\r\n").map_or("", |(_, b)| b)
}

fn logs(env: &TestEnv) -> String {
    let mut all = String::new();
    for n in 0..8 {
        if let Ok(t) = fs::read_to_string(env.path(&format!("logs/run-{n}.err"))) {
            all.push_str(&format!("\n--- run {n}:\n{t}"));
        }
    }
    all
}

fn publish_dir(env: &TestEnv) -> PathBuf {
    env.state_dir().join("standalone")
}

/// The validation files in the publish directory.
fn published(env: &TestEnv) -> Vec<String> {
    let mut names: Vec<String> = fs::read_dir(publish_dir(env))
        .map(|d| {
            d.filter_map(|e| e.ok())
                .map(|e| e.file_name().to_string_lossy().into_owned())
                .collect()
        })
        .unwrap_or_default();
    names.sort();
    names
}

/// A world with a standalone certificate and a sandbox that validates only when told to.
fn standalone_env(domain: &str) -> (TestEnv, u16) {
    let mut env = TestEnv::with_sandbox(SandboxConfig::default());
    let spec = env.standalone_spec("www", &[domain]);
    let Publish::Standalone(port) = spec.publish else {
        unreachable!()
    };
    env.certs.push(spec);
    (env, port)
}

/// Guards the point of `serve`: a `renew` that ends with work pending at the CA leaves the
/// file published in the directory and `serve` keeps answering with it between runs; the CA
/// fetches it from `serve`; the next run installs the certificate and empties the directory.
#[test]
fn renew_publishes_through_serve_and_the_file_is_served_between_runs() {
    let (env, port) = standalone_env("www.serve.test");
    let serve = Serve::start(&env, port);

    let out = env.agent(["--json", "-v", "renew", "--wait", "0"]).run();
    out.expect_code(75);
    assert!(
        out.stderr.contains("for cert-agent serve"),
        "renew used serve: {}",
        out.describe()
    );
    let names = published(&env);
    assert_eq!(names.len(), 1, "one file published: {names:?}");
    let name = &names[0];
    let path = publish_dir(&env).join(name);
    assert_eq!(
        fs::metadata(&path).unwrap().permissions().mode() & 0o7777,
        0o644
    );
    assert_eq!(
        fs::metadata(publish_dir(&env))
            .unwrap()
            .permissions()
            .mode()
            & 0o7777,
        0o755
    );
    assert_eq!(
        fs::metadata(env.state_dir()).unwrap().permissions().mode() & 0o7777,
        0o700,
        "the state directory stays private"
    );
    let record = env.record("www").unwrap();
    assert_eq!(record["dcv"]["standalone_file"][0], name.as_str());

    // No renew runs now: serve answers alone.
    let answer = serve
        .get(&format!("/.well-known/pki-validation/{name}"))
        .unwrap();
    assert!(answer.starts_with("HTTP/1.1 200"), "{answer}");
    assert_eq!(body(&answer), fs::read_to_string(&path).unwrap());
    assert!(
        request(port, &format!("HEAD /.well-known/pki-validation/{name}"))
            .unwrap()
            .starts_with("HTTP/1.1 200")
    );

    // The CA fetches from serve.
    env.sandbox.set_instant(true);
    env.sandbox.validate_now();
    let out = env.renew();
    out.expect_code(0);
    out.installed_serial("www");
    assert_eq!(env.billed(), 1);
    assert_eq!(published(&env), Vec::<String>::new(), "directory emptied");
    assert!(
        serve
            .get(&format!("/.well-known/pki-validation/{name}"))
            .unwrap()
            .starts_with("HTTP/1.1 404"),
        "no longer served"
    );
    assert_eq!(serve.stop(), Some(0), "SIGTERM stops serve with status 0");
}

/// Guards the exact-file rule of the directory source: a planted symbolic link (to a file
/// with valid content), a lower-case or otherwise malformed name, a directory, a file with
/// invalid or non-UTF-8 content, other paths and methods are all 404; a planted valid regular file is
/// served (the control), and traversal attempts never leave the directory.
#[test]
fn serve_answers_only_regular_validation_files_of_its_directory() {
    let (env, port) = standalone_env("only.serve.test");
    let serve = Serve::start(&env, port);
    let dir = publish_dir(&env);
    let outside = env.path("outside.txt");
    fs::write(&outside, "secret-looking but valid\n").unwrap();
    fs::set_permissions(&outside, fs::Permissions::from_mode(0o644)).unwrap();

    let good = "ABCDEF0123456789ABCDEF0123456789.txt";
    fs::write(dir.join(good), "abc\nsectigo.com\n").unwrap();
    fs::set_permissions(dir.join(good), fs::Permissions::from_mode(0o644)).unwrap();
    std::os::unix::fs::symlink(&outside, dir.join(VALID_NAME)).unwrap();
    let lower = VALID_NAME.to_ascii_lowercase();
    fs::write(dir.join(&lower), "abc\n").unwrap();
    let bad_content = "11111111111111111111111111111111.txt";
    fs::write(dir.join(bad_content), "a\u{1b}[2J\n").unwrap();
    fs::create_dir(dir.join("22222222222222222222222222222222.txt")).unwrap();
    let not_utf8 = "33333333333333333333333333333333.txt";
    fs::write(dir.join(not_utf8), b"abc\xff\n").unwrap();

    let answer = serve
        .get(&format!("/.well-known/pki-validation/{good}"))
        .unwrap();
    assert!(answer.starts_with("HTTP/1.1 200"), "control: {answer}");
    assert_eq!(body(&answer), "abc\nsectigo.com\n");
    for target in [
        format!("/.well-known/pki-validation/{VALID_NAME}"),
        format!("/.well-known/pki-validation/{lower}"),
        format!("/.well-known/pki-validation/{bad_content}"),
        "/.well-known/pki-validation/22222222222222222222222222222222.txt".to_owned(),
        format!("/.well-known/pki-validation/{not_utf8}"),
        "/.well-known/pki-validation/".to_owned(),
        "/.well-known/pki-validation/../../certs/www.json".to_owned(),
        "/.well-known/pki-validation/%2e%2e/serve.lock".to_owned(),
        format!("/.well-known/pki-validation//{good}"),
        format!("/{good}"),
        "/serve.lock".to_owned(),
        "/".to_owned(),
    ] {
        let answer = serve.get(&target).unwrap();
        assert!(answer.starts_with("HTTP/1.1 404"), "{target}: {answer}");
        assert!(!answer.contains("secret-looking"), "{target}: {answer}");
    }
    let post = request(port, &format!("POST /.well-known/pki-validation/{good}")).unwrap();
    assert!(post.starts_with("HTTP/1.1 404"), "{post}");
    assert_eq!(serve.stop(), Some(0));
}

/// Guards cleanup with serve: SIGTERM of a renew waiting for validation removes the file it
/// published into the directory (as with web roots); serve itself keeps running.
#[test]
fn sigterm_of_a_waiting_renew_removes_its_file_from_the_directory() {
    let (env, port) = standalone_env("term.serve.test");
    let serve = Serve::start(&env, port);
    let mut renew = env.agent(["--json", "renew", "--wait", "60"]).spawn();
    assert!(
        wait_until(Duration::from_secs(30), || !published(&env).is_empty()),
        "published: {}",
        logs(&env)
    );
    kill(Pid::from_raw(renew.id() as i32), Signal::SIGTERM).unwrap();
    assert!(wait_exit(&mut renew, Duration::from_secs(20)).is_some());
    assert_eq!(published(&env), Vec::<String>::new());
    assert!(serve.get("/").unwrap().starts_with("HTTP/1.1 404"));
    assert_eq!(env.billed(), 1);
}

/// Guards the configuration errors of `serve`: each exits 2 with a message naming what to fix.
#[test]
fn serve_configuration_errors_are_clear() {
    let (mut env, port) = standalone_env("config.serve.test");
    env.agent_extra = "serve_user = \"no-such-user-cert-agent\"\n".into();
    let out = env.agent(["serve"]).run();
    out.expect_code(2);
    assert!(
        out.stderr
            .contains("`[agent] serve_user` = \"no-such-user-cert-agent\"")
            && out.stderr.contains("no such user"),
        "{}",
        out.describe()
    );
    assert!(
        TcpStream::connect(("127.0.0.1", port)).is_err(),
        "nothing bound"
    );

    env.agent_extra = "serve_user = \"root\"\n".into();
    let out = env.agent(["serve"]).run();
    out.expect_code(2);
    assert!(
        out.stderr.contains("must not be root"),
        "{}",
        out.describe()
    );

    env.agent_extra.clear();
    let serve = Serve::start(&env, port);
    let out = env.agent(["serve"]).run();
    out.expect_code(1);
    assert!(
        out.stderr.contains(&format!(
            "another cert-agent serve (pid {}) is running",
            serve.child.id()
        )),
        "{}",
        out.describe()
    );
    assert_eq!(serve.stop(), Some(0));

    let mut nothing = TestEnv::new();
    let mut spec = nothing.cert_spec("www", &["webroot.serve.test"], "none");
    spec.publish = Publish::Webroot(nothing.path("www-root"));
    nothing.certs.push(spec);
    let out = nothing.agent(["serve"]).run();
    out.expect_code(2);
    assert!(
        out.stderr
            .contains("no [[certificate]] has `standalone = true`"),
        "{}",
        out.describe()
    );
}

/// Guards `serve` against slowloris: 60 connections that send a partial request head and hold
/// do not keep it from answering the validation file at once; each held connection is cut
/// off after the header timeout.
#[test]
fn serve_answers_while_slow_clients_hold_connections() {
    let (env, port) = standalone_env("slowloris.serve.test");
    let serve = Serve::start(&env, port);
    let dir = publish_dir(&env);
    fs::write(dir.join(VALID_NAME), "abc\nsectigo.com\n").unwrap();
    fs::set_permissions(dir.join(VALID_NAME), fs::Permissions::from_mode(0o644)).unwrap();

    // One client (127.0.0.1) holds 60 connections: beyond its share (8) they are closed at
    // once, and a validator from another address (127.0.0.2) is answered at once.
    let mut holds = Vec::new();
    for _ in 0..60 {
        let mut s = TcpStream::connect(("127.0.0.1", port)).unwrap();
        let _ = s.write_all(b"GET /.well-known/pki-validation/");
        holds.push(s);
    }
    let started = Instant::now();
    let answer = request_from(
        [127, 0, 0, 2],
        port,
        &format!("GET /.well-known/pki-validation/{VALID_NAME}"),
    );
    let took = started.elapsed();
    assert!(answer.starts_with("HTTP/1.1 200"), "{answer}");
    assert!(took < Duration::from_secs(2), "answered in {took:?}");
    eprintln!("answered in {took:?} with 60 held connections");

    // The held connections are closed by the server (header timeout, 3 s).
    let mut held = holds.pop().unwrap();
    held.set_read_timeout(Some(Duration::from_secs(30)))
        .unwrap();
    let started = Instant::now();
    let mut rest = Vec::new();
    let _ = held.read_to_end(&mut rest);
    let cut = started.elapsed();
    assert!(
        cut < Duration::from_secs(15),
        "a held connection was cut off after {cut:?}"
    );
    assert_eq!(serve.stop(), Some(0));
}

/// Guards the fallback: a certificate whose `listen` the running `serve` does not listen on
/// (changed after it started) is served by the run itself, with a warning to restart `serve`,
/// and nothing is written into the directory.
#[test]
fn a_listen_address_serve_does_not_serve_is_served_by_the_run() {
    let (mut env, port) = standalone_env("moved.serve.test");
    let serve = Serve::start(&env, port);
    let moved = support::webserver::free_port();
    env.sandbox.set_dcv_ports(moved, 0);
    env.spec_mut("www").publish = Publish::Standalone(moved);
    env.sandbox.set_instant(true);

    let out = env.renew();
    out.expect_code(0);
    out.installed_serial("www");
    assert!(
        out.stderr.contains(&format!(
            "cert-agent serve (pid {}) does not listen on 127.0.0.1:{moved}",
            serve.child.id()
        )),
        "{}",
        out.describe()
    );
    assert_eq!(published(&env), Vec::<String>::new());
    assert_eq!(env.billed(), 1);
    assert_eq!(serve.stop(), Some(0));
}
