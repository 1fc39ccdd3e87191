//! Domain control validation over the network: the standalone server (exact paths only,
//! timeouts, connection cap), the self-check against it, and DNS hook programs.

use std::net::SocketAddr;
use std::os::unix::fs::PermissionsExt;
use std::path::Path;
use std::time::{Duration, Instant};

use cert_agent::testing::dcv::hook::{self, DnsHook, HookAction};
use cert_agent::testing::dcv::selfcheck::{SelfCheck, SelfCheckOutcome};
use cert_agent::testing::dcv::standalone::{ServerOptions, StandaloneServer};
use cert_agent::testing::dcv::{DcvError, ValidationFile};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};

const NAME: &str = "0123456789ABCDEF0123456789ABCDEF.txt";
const CONTENT: &str =
    "5D41402ABC4B2A76B9719D911017C5925D41402ABC4B2A76B9719D911017C592\nsectigo.com\nUv1";

fn file() -> ValidationFile {
    ValidationFile::from_parts(NAME, CONTENT).unwrap()
}

fn path() -> String {
    format!("/.well-known/pki-validation/{NAME}")
}

fn localhost() -> SocketAddr {
    SocketAddr::from(([127, 0, 0, 1], 0))
}

async fn server(options: ServerOptions) -> StandaloneServer {
    let server = StandaloneServer::start_with(localhost(), options)
        .await
        .unwrap();
    server.set_files([&file()]);
    server
}

/// Sends `raw` and reads the whole answer (the server closes after one response).
async fn exchange(addr: SocketAddr, raw: &str) -> String {
    let mut s = TcpStream::connect(addr).await.unwrap();
    s.write_all(raw.as_bytes()).await.unwrap();
    let mut out = Vec::new();
    tokio::time::timeout(Duration::from_secs(5), s.read_to_end(&mut out))
        .await
        .expect("answer within 5 s")
        .unwrap();
    String::from_utf8(out).unwrap()
}

async fn request(addr: SocketAddr, method: &str, target: &str) -> String {
    exchange(
        addr,
        &format!("{method} {target} HTTP/1.1\r\nHost: www.example.test\r\n\r\n"),
    )
    .await
}

fn status(response: &str) -> u16 {
    response
        .split(' ')
        .nth(1)
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(|| panic!("no status in {response:?}"))
}

fn header<'a>(response: &'a str, name: &str) -> Option<&'a str> {
    let head = response.split("\r\n\r\n").next()?;
    head.split("\r\n").skip(1).find_map(|line| {
        let (k, v) = line.split_once(':')?;
        k.eq_ignore_ascii_case(name).then_some(v.trim())
    })
}

fn body(response: &str) -> &str {
    response.split_once("\r\n\r\n").map_or("", |(_, b)| b)
}

#[tokio::test]
async fn serves_exactly_the_published_file_with_get_and_head() {
    let server = server(ServerOptions::default()).await;
    let addr = server.local_addr();
    assert_ne!(addr.port(), 0);

    let get = request(addr, "GET", &path()).await;
    assert_eq!(status(&get), 200, "{get}");
    assert_eq!(body(&get), CONTENT);
    assert_eq!(header(&get, "content-type"), Some("text/plain"));
    assert_eq!(
        header(&get, "content-length"),
        Some(CONTENT.len().to_string().as_str())
    );

    let head = request(addr, "HEAD", &path()).await;
    assert_eq!(status(&head), 200, "{head}");
    assert_eq!(body(&head), "");
    assert_eq!(
        header(&head, "content-length"),
        Some(CONTENT.len().to_string().as_str())
    );
    assert_eq!(header(&head, "content-type"), Some("text/plain"));

    // A query string on the published path is ignored, as by a static file server.
    let q = request(addr, "GET", &format!("{}?x=1", path())).await;
    assert_eq!(status(&q), 200, "{q}");
    // HTTP/1.0 clients are served too.
    let old = exchange(addr, &format!("GET {} HTTP/1.0\r\n\r\n", path())).await;
    assert_eq!(body(&old), CONTENT, "{old}");
    server.shutdown().await;
}

#[tokio::test]
async fn everything_else_is_404() {
    let server = server(ServerOptions::default()).await;
    let addr = server.local_addr();
    let lower = NAME.to_lowercase();
    let encoded_first = format!("%30{}", &NAME[1..]);
    let targets = [
        "/".to_owned(),
        "/index.html".to_owned(),
        "/.well-known".to_owned(),
        "/.well-known/".to_owned(),
        "/.well-known/pki-validation".to_owned(),
        "/.well-known/pki-validation/".to_owned(),
        format!("/.well-known/pki-validation/../pki-validation/{NAME}"),
        "/.well-known/pki-validation/../x".to_owned(),
        "/.well-known/pki-validation/../../etc/passwd".to_owned(),
        format!("/.well-known/pki-validation/%2e%2e/pki-validation/{NAME}"),
        format!("/.well-known/pki-validation/./{NAME}"),
        format!("/.well-known/%70ki-validation/{NAME}"),
        format!("/.well-known/pki-validation/{encoded_first}"),
        format!("//.well-known/pki-validation/{NAME}"),
        format!("/.well-known//pki-validation/{NAME}"),
        format!("/.well-known/pki-validation//{NAME}"),
        format!("/.well-known/pki-validation/{NAME}/"),
        format!("/.well-known/pki-validation/{NAME}%00"),
        format!("/.well-known/pki-validation/{lower}"),
        format!("/.WELL-KNOWN/pki-validation/{NAME}"),
        "/.well-known/pki-validation/FEDCBA9876543210FEDCBA9876543210.txt".to_owned(),
        "/.well-known/pki-validation/FEDCBA9876543210FEDCBA9876543210.txt?a=b".to_owned(),
        "/?file=x".to_owned(),
        "*".to_owned(),
    ];
    for target in &targets {
        let r = request(addr, "GET", target).await;
        assert_eq!(status(&r), 404, "{target}: {r}");
        assert!(!r.contains(CONTENT), "{target}: {r}");
    }
    // An oversized request head is refused, not served.
    let big = format!(
        "GET {} HTTP/1.1\r\nHost: x\r\nX-Big: {}\r\n\r\n",
        path(),
        "a".repeat(20_000)
    );
    // The server may close before reading everything: a reset is an acceptable answer.
    let mut s = TcpStream::connect(addr).await.unwrap();
    let _ = s.write_all(big.as_bytes()).await;
    let mut out = Vec::new();
    let _ = tokio::time::timeout(Duration::from_secs(5), s.read_to_end(&mut out)).await;
    let r = String::from_utf8_lossy(&out);
    assert!(!r.contains(CONTENT), "{r}");
    for method in ["POST", "PUT", "DELETE", "OPTIONS", "PROPFIND"] {
        let r = request(addr, method, &path()).await;
        assert_eq!(status(&r), 404, "{method}: {r}");
    }
    server.shutdown().await;
}

#[tokio::test]
async fn files_can_change_while_running() {
    let server = server(ServerOptions::default()).await;
    let addr = server.local_addr();
    let other =
        ValidationFile::from_parts("FEDCBA9876543210FEDCBA9876543210.txt", "other").unwrap();
    server.add_file(&other);
    assert_eq!(server.paths().len(), 2);
    let r = request(addr, "GET", &other.url_path()).await;
    assert_eq!(body(&r), "other");
    server.remove_file(NAME);
    assert_eq!(status(&request(addr, "GET", &path()).await), 404);
    server.set_files([]);
    assert_eq!(status(&request(addr, "GET", &other.url_path()).await), 404);
    server.set_files([&file()]);
    assert_eq!(status(&request(addr, "GET", &path()).await), 200);
    server.shutdown().await;
    assert!(
        TcpStream::connect(addr).await.is_err(),
        "closed after shutdown"
    );
}

/// Reads until EOF or error; returns what was read and how long it took.
async fn wait_closed(s: &mut TcpStream, limit: Duration) -> (Vec<u8>, Duration) {
    let start = Instant::now();
    let mut out = Vec::new();
    let _ = tokio::time::timeout(limit, s.read_to_end(&mut out))
        .await
        .expect("the server closes the connection");
    (out, start.elapsed())
}

#[tokio::test]
async fn a_slow_client_is_cut_off_while_others_are_served() {
    let server = server(ServerOptions {
        header_read_timeout: Duration::from_millis(400),
        connection_timeout: Duration::from_secs(3),
        max_connections: 8,
        ..ServerOptions::default()
    })
    .await;
    let addr = server.local_addr();
    // Slowloris: a request head that never ends.
    let mut slow = TcpStream::connect(addr).await.unwrap();
    slow.write_all(b"GET / HTTP/1.1\r\nHost: www.example.test\r\nX-A: ")
        .await
        .unwrap();
    // A client that says nothing at all.
    let mut silent = TcpStream::connect(addr).await.unwrap();

    let r = request(addr, "GET", &path()).await;
    assert_eq!(body(&r), CONTENT);

    for s in [&mut slow, &mut silent] {
        let (answer, took) = wait_closed(s, Duration::from_secs(2)).await;
        assert!(!String::from_utf8_lossy(&answer).contains(CONTENT));
        assert!(took < Duration::from_millis(1500), "took {took:?}");
    }
    let r = request(addr, "GET", &path()).await;
    assert_eq!(body(&r), CONTENT);
    server.shutdown().await;
}

#[tokio::test]
async fn a_connection_that_keeps_trickling_is_cut_off_by_the_total_timeout() {
    let server = server(ServerOptions {
        header_read_timeout: Duration::from_secs(30),
        connection_timeout: Duration::from_millis(500),
        max_connections: 8,
        ..ServerOptions::default()
    })
    .await;
    let mut s = TcpStream::connect(server.local_addr()).await.unwrap();
    let start = Instant::now();
    s.write_all(b"GET / HTTP/1.1\r\n").await.unwrap();
    let mut closed = false;
    for _ in 0..30 {
        tokio::time::sleep(Duration::from_millis(100)).await;
        if s.write_all(b"X-A: b\r\n").await.is_err() {
            closed = true;
            break;
        }
        let mut buf = [0u8; 64];
        if let Ok(Ok(0)) = tokio::time::timeout(Duration::from_millis(1), s.read(&mut buf)).await {
            closed = true;
            break;
        }
    }
    assert!(closed, "still open after {:?}", start.elapsed());
    assert!(start.elapsed() < Duration::from_secs(2));
    server.shutdown().await;
}

/// Behaviour at the cap: connections beyond it are queued (not accepted until a slot frees),
/// then served.
#[tokio::test]
async fn connections_beyond_the_cap_wait_until_a_slot_frees() {
    let server = server(ServerOptions {
        header_read_timeout: Duration::from_secs(10),
        connection_timeout: Duration::from_secs(10),
        max_connections: 2,
        ..ServerOptions::default()
    })
    .await;
    let addr = server.local_addr();
    let mut hogs = Vec::new();
    for _ in 0..2 {
        let mut s = TcpStream::connect(addr).await.unwrap();
        s.write_all(b"GET / HTTP/1.1\r\n").await.unwrap();
        hogs.push(s);
    }
    // The server shows no count of the connections it took: a pause lets it accept both.
    tokio::time::sleep(Duration::from_millis(100)).await;

    let queued = tokio::spawn(async move { request(addr, "GET", &path()).await });
    // A window in which the third may not be served: the time passing is what is checked.
    tokio::time::sleep(Duration::from_millis(400)).await;
    assert!(!queued.is_finished(), "served while both slots were taken");

    drop(hogs.pop());
    let r = tokio::time::timeout(Duration::from_secs(3), queued)
        .await
        .expect("served once a slot freed")
        .unwrap();
    assert_eq!(body(&r), CONTENT);
    server.shutdown().await;
}

/// One client holding idle connections (as many as the whole cap) cannot keep the CA's
/// validator out: beyond `max_per_peer` its connections are closed at once, and the
/// validator, from another address, is served at once.
#[tokio::test]
async fn one_client_holding_idle_connections_does_not_keep_the_validator_out() {
    let options = ServerOptions::default();
    let (cap, per_peer) = (options.max_connections, options.max_per_peer);
    assert!(per_peer > 0 && per_peer < cap, "{per_peer} of {cap}");
    let server = server(options).await;
    let addr = server.local_addr();
    let mut held = Vec::new();
    for _ in 0..cap {
        let mut s = TcpStream::connect(addr).await.unwrap();
        s.write_all(b"GET / HTTP/1.1\r\n").await.unwrap();
        held.push(s);
    }
    tokio::time::sleep(Duration::from_millis(200)).await;
    // The validator, from 127.0.0.2.
    let start = Instant::now();
    let socket = tokio::net::TcpSocket::new_v4().unwrap();
    socket.bind(SocketAddr::from(([127, 0, 0, 2], 0))).unwrap();
    let mut v = socket.connect(addr).await.unwrap();
    let ask = format!("GET {} HTTP/1.1\r\nHost: www.example.test\r\n\r\n", path());
    v.write_all(ask.as_bytes()).await.unwrap();
    let mut out = Vec::new();
    tokio::time::timeout(Duration::from_secs(2), v.read_to_end(&mut out))
        .await
        .expect("the validator is answered within 2 s")
        .unwrap();
    assert_eq!(body(&String::from_utf8_lossy(&out)), CONTENT);
    assert!(
        start.elapsed() < Duration::from_secs(1),
        "{:?}",
        start.elapsed()
    );
    // The client's connections beyond its share were closed at once.
    let mut closed = 0;
    for s in &mut held {
        let mut buf = [0u8; 16];
        if let Ok(Ok(0) | Err(_)) =
            tokio::time::timeout(Duration::from_millis(20), s.read(&mut buf)).await
        {
            closed += 1;
        }
    }
    assert_eq!(closed, cap - per_peer);
    server.shutdown().await;
}

#[tokio::test]
async fn server_from_a_listener_bound_elsewhere() {
    let listener = std::net::TcpListener::bind(localhost()).unwrap();
    let addr = listener.local_addr().unwrap();
    let server = StandaloneServer::from_listener(listener, ServerOptions::default()).unwrap();
    assert_eq!(server.local_addr(), addr);
    server.set_files([&file()]);
    assert_eq!(body(&request(addr, "GET", &path()).await), CONTENT);
    server.shutdown().await;
}

/// Guards the directory source of `cert-agent serve`: what the directory holds at the time
/// of a request is served (added and removed files show at once), a FIFO with a validation
/// file name does not hang the server, a file larger than the content limit and a file
/// added to the in-memory set are not served.
#[tokio::test]
async fn server_of_a_directory_serves_its_current_validation_files() {
    let dir = tempfile::tempdir().unwrap();
    let fd = nix::fcntl::open(
        dir.path(),
        nix::fcntl::OFlag::O_RDONLY | nix::fcntl::OFlag::O_DIRECTORY,
        nix::sys::stat::Mode::empty(),
    )
    .unwrap();
    let listener = std::net::TcpListener::bind(localhost()).unwrap();
    let addr = listener.local_addr().unwrap();
    let server = StandaloneServer::from_listener_dir(
        listener,
        ServerOptions::default(),
        std::sync::Arc::new(fd),
    )
    .unwrap();
    assert_eq!(status(&request(addr, "GET", &path()).await), 404);
    std::fs::write(dir.path().join(NAME), CONTENT).unwrap();
    let r = request(addr, "GET", &path()).await;
    assert_eq!(status(&r), 200);
    assert_eq!(body(&r), CONTENT);
    assert_eq!(header(&r, "content-type"), Some("text/plain"));
    std::fs::remove_file(dir.path().join(NAME)).unwrap();
    assert_eq!(status(&request(addr, "GET", &path()).await), 404);

    server.add_file(&file());
    assert_eq!(
        status(&request(addr, "GET", &path()).await),
        404,
        "the in-memory set is not a source of a directory server"
    );

    let fifo = "FFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFF.txt";
    nix::unistd::mkfifo(
        &dir.path().join(fifo),
        nix::sys::stat::Mode::from_bits_truncate(0o644),
    )
    .unwrap();
    let r = request(addr, "GET", &format!("/.well-known/pki-validation/{fifo}")).await;
    assert_eq!(status(&r), 404, "a FIFO is not served and does not block");

    let big = "BBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBB.txt";
    let line = "x".repeat(60) + "\n";
    std::fs::write(
        dir.path().join(big),
        line.repeat(cert_agent::testing::dcv::MAX_CONTENT_BYTES / line.len() + 1),
    )
    .unwrap();
    let r = request(addr, "GET", &format!("/.well-known/pki-validation/{big}")).await;
    assert_eq!(status(&r), 404, "larger than the content limit");
    server.shutdown().await;
}

const TOKEN: &str = "evaGxfADs6pSRb2LAv9IZf17Dt3juxGJ-PCt92wr-oA";
const THUMBPRINT: &str = "9jg46WB3rR_AHD-EBXdN7cBkH1WOu0tA3M9fm21mqTI";

/// Guards ACME's `http-01` file in the standalone server, from memory (`renew`) and from a
/// directory (`cert-agent serve`): served at `/.well-known/acme-challenge/<token>` only, never
/// under the CSR-hash directory, and a CSR-hash file never under the ACME one; a token-like
/// file whose content is no key authorization for it is not served.
#[tokio::test]
async fn an_acme_file_is_served_at_its_own_path_only() {
    let key_authorization = format!("{TOKEN}.{THUMBPRINT}");
    let acme = ValidationFile::acme_http01(TOKEN, &key_authorization).unwrap();
    let acme_path = format!("/.well-known/acme-challenge/{TOKEN}");
    let wrong = [
        format!("/.well-known/pki-validation/{TOKEN}"),
        format!("/.well-known/acme-challenge/{NAME}"),
        format!("/.well-known/acme-challenge/{TOKEN}/"),
        format!("/.well-known/acme-challenge/../acme-challenge/{TOKEN}"),
        format!("/.well-known/acme-challenge//{TOKEN}"),
        format!("/.well-known/acme-challenge/{}", &TOKEN[1..]),
    ];

    let memory = server(ServerOptions::default()).await;
    memory.add_file(&acme);
    let addr = memory.local_addr();
    let r = request(addr, "GET", &acme_path).await;
    assert_eq!(status(&r), 200);
    assert_eq!(body(&r), key_authorization);
    assert_eq!(status(&request(addr, "GET", &path()).await), 200);
    for target in &wrong {
        assert_eq!(status(&request(addr, "GET", target).await), 404, "{target}");
    }
    memory.remove_file(TOKEN);
    assert_eq!(status(&request(addr, "GET", &acme_path).await), 404);
    assert_eq!(status(&request(addr, "GET", &path()).await), 200);
    memory.shutdown().await;

    let dir = tempfile::tempdir().unwrap();
    let fd = nix::fcntl::open(
        dir.path(),
        nix::fcntl::OFlag::O_RDONLY | nix::fcntl::OFlag::O_DIRECTORY,
        nix::sys::stat::Mode::empty(),
    )
    .unwrap();
    let listener = std::net::TcpListener::bind(localhost()).unwrap();
    let addr = listener.local_addr().unwrap();
    let from_dir = StandaloneServer::from_listener_dir(
        listener,
        ServerOptions::default(),
        std::sync::Arc::new(fd),
    )
    .unwrap();
    std::fs::write(dir.path().join(TOKEN), &key_authorization).unwrap();
    std::fs::write(dir.path().join(NAME), CONTENT).unwrap();
    let r = request(addr, "GET", &acme_path).await;
    assert_eq!(status(&r), 200);
    assert_eq!(body(&r), key_authorization);
    for target in &wrong {
        assert_eq!(status(&request(addr, "GET", target).await), 404, "{target}");
    }
    // A file under a token's name that does not hold its key authorization.
    std::fs::write(dir.path().join(TOKEN), CONTENT).unwrap();
    assert_eq!(status(&request(addr, "GET", &acme_path).await), 404);
    from_dir.shutdown().await;
}

#[test]
fn a_listener_outside_a_runtime_is_an_error_not_a_panic() {
    let listener = std::net::TcpListener::bind(localhost()).unwrap();
    let err = StandaloneServer::from_listener(listener, ServerOptions::default()).unwrap_err();
    assert!(matches!(err, DcvError::Listen { .. }), "{err}");
}

#[tokio::test]
async fn binding_a_busy_port_names_the_address() {
    let taken = std::net::TcpListener::bind(localhost()).unwrap();
    let addr = taken.local_addr().unwrap();
    let err = StandaloneServer::start(addr).await.unwrap_err();
    assert!(matches!(err, DcvError::Listen { .. }));
    assert!(err.to_string().contains(&addr.to_string()), "{err}");
}

fn check_at(addr: SocketAddr) -> SelfCheck {
    SelfCheck {
        timeout: Duration::from_secs(3),
        address: Some(addr),
    }
}

#[tokio::test]
async fn self_check_against_the_standalone_server() {
    let server = server(ServerOptions::default()).await;
    let check = check_at(server.local_addr());
    let outcome = check.check("www.example.test", &file()).await.unwrap();
    assert_eq!(outcome, SelfCheckOutcome::Ok);
    let outcome = check.check("WWW.Example.TEST", &file()).await.unwrap();
    assert_eq!(outcome, SelfCheckOutcome::Ok);

    let stale = ValidationFile::from_parts(NAME, "stale content").unwrap();
    server.set_files([&stale]);
    let outcome = check.check("www.example.test", &file()).await.unwrap();
    match &outcome {
        SelfCheckOutcome::WrongContent(excerpt) => assert!(excerpt.contains("stale"), "{excerpt}"),
        other => panic!("{other:?}"),
    }
    let warning = outcome
        .warning(&SelfCheck::url("www.example.test", &file()))
        .unwrap();
    assert!(warning.contains("vhost"), "{warning}");

    server.set_files([]);
    let outcome = check.check("www.example.test", &file()).await.unwrap();
    assert_eq!(outcome, SelfCheckOutcome::Status(404));
    server.shutdown().await;

    let outcome = check.check("www.example.test", &file()).await.unwrap();
    assert!(
        matches!(outcome, SelfCheckOutcome::Unreachable(_)),
        "{outcome:?}"
    );
    assert!(check.check("*.example.test", &file()).await.is_err());
}

#[tokio::test]
async fn self_check_sends_the_domain_as_host_and_does_not_follow_redirects() {
    let listener = TcpListener::bind(localhost()).await.unwrap();
    let addr = listener.local_addr().unwrap();
    let seen = tokio::spawn(async move {
        let (mut s, _) = listener.accept().await.unwrap();
        let mut buf = vec![0u8; 4096];
        let mut head = Vec::new();
        while !head.ends_with(b"\r\n\r\n") {
            let n = s.read(&mut buf).await.unwrap();
            assert_ne!(n, 0);
            head.extend_from_slice(&buf[..n]);
        }
        s.write_all(
            b"HTTP/1.1 301 Moved Permanently\r\nLocation: https://www.example.test/x\r\n\
              Content-Length: 0\r\nConnection: close\r\n\r\n",
        )
        .await
        .unwrap();
        String::from_utf8(head).unwrap()
    });
    let outcome = check_at(addr)
        .check("www.example.test", &file())
        .await
        .unwrap();
    let head = seen.await.unwrap();
    assert!(
        head.starts_with(&format!("GET {} HTTP/1.1\r\n", path())),
        "{head}"
    );
    assert_eq!(header(&head, "host"), Some("www.example.test"), "{head}");
    match &outcome {
        SelfCheckOutcome::Redirect(301, location) => {
            assert!(
                location.contains("https://www.example.test/x"),
                "{location}"
            )
        }
        other => panic!("{other:?}"),
    }
    // Named as a redirect with its status, not as a DNS or reachability problem.
    let said = outcome.to_string();
    assert!(
        said.starts_with("port 80 answers 301 to \"https://www.example.test/x"),
        "{said}"
    );
    assert!(outcome.likely_cause().unwrap().contains("HTTPS"));
}

/// Writes an executable script. A fork in a concurrent test can briefly hold the new file
/// open for writing, so executing it may fail with ETXTBSY; [`run_hook`] retries then.
fn script(dir: &Path, name: &str, body: &str) -> String {
    let path = dir.join(name);
    std::fs::write(&path, format!("#!/bin/sh\n{body}")).unwrap();
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755)).unwrap();
    path.to_str().unwrap().to_owned()
}

async fn run_hook(
    hook: &DnsHook,
    action: HookAction,
    record: &hook::DnsRecord,
) -> Result<hook::HookOutput, DcvError> {
    for _ in 0..50 {
        match hook::run(hook, action, record, "www").await {
            Err(DcvError::HookSpawn { source, .. })
                if source.raw_os_error() == Some(nix::errno::Errno::ETXTBSY as i32) =>
            {
                tokio::time::sleep(Duration::from_millis(20)).await;
            }
            other => return other,
        }
    }
    panic!("script stayed busy");
}

#[tokio::test]
async fn hook_gets_the_record_in_its_environment_and_arguments_verbatim() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("env.out");
    let program = script(
        dir.path(),
        "hook.sh",
        "env | grep -E '^CERT_AGENT_(DCV_|NAME=)' | sort > \"$1\"\nprintf '%s\\n' \"$2\" >> \"$1\"\necho added\n",
    );
    let hook = DnsHook {
        argv: vec![
            program,
            out.to_str().unwrap().to_owned(),
            "$(touch pwned); `id`".to_owned(),
        ],
        timeout: Duration::from_secs(5),
    };
    let record = hook::txt_record("*.example.test", "Rnd-Value_123").unwrap();
    let output = run_hook(&hook, HookAction::Add, &record).await.unwrap();
    assert_eq!(output.stdout.trim(), "added");
    let seen = std::fs::read_to_string(&out).unwrap();
    let expected = "CERT_AGENT_DCV_ACTION=add\n\
                    CERT_AGENT_DCV_DOMAIN=*.example.test\n\
                    CERT_AGENT_DCV_RECORD_NAME=_pki-validation.example.test\n\
                    CERT_AGENT_DCV_RECORD_TYPE=TXT\n\
                    CERT_AGENT_DCV_RECORD_VALUE=Rnd-Value_123\n\
                    CERT_AGENT_NAME=www\n\
                    $(touch pwned); `id`\n";
    assert_eq!(seen, expected);
    assert!(!dir.path().join("pwned").exists());
    assert!(!Path::new("pwned").exists());

    run_hook(&hook, HookAction::Remove, &record).await.unwrap();
    let seen = std::fs::read_to_string(&out).unwrap();
    assert!(seen.starts_with("CERT_AGENT_DCV_ACTION=remove\n"), "{seen}");
}

#[tokio::test]
async fn hook_failure_is_reported_with_its_stderr() {
    let dir = tempfile::tempdir().unwrap();
    let program = script(
        dir.path(),
        "fail.sh",
        "echo 'zone example.test: permission denied' >&2\nprintf '\\033[2J' >&2\nexit 3\n",
    );
    let hook = DnsHook {
        argv: vec![program.clone()],
        timeout: Duration::from_secs(5),
    };
    let record = hook::txt_record("example.test", "abc").unwrap();
    let err = run_hook(&hook, HookAction::Add, &record).await.unwrap_err();
    let msg = err.to_string();
    assert!(matches!(err, DcvError::HookFailed { .. }), "{msg}");
    assert!(
        msg.contains("zone example.test: permission denied"),
        "{msg}"
    );
    assert!(msg.contains(&program), "{msg}");
    assert!(msg.contains('3'), "{msg}");
    assert!(msg.contains("_pki-validation.example.test"), "{msg}");
    assert!(!msg.chars().any(|c| c.is_control()), "{msg:?}");
}

#[tokio::test]
async fn hook_that_hangs_is_killed_after_the_timeout() {
    let dir = tempfile::tempdir().unwrap();
    let program = script(dir.path(), "hang.sh", "sleep 30 &\nsleep 30\n");
    let hook = DnsHook {
        argv: vec![program],
        timeout: Duration::from_millis(300),
    };
    let record = hook::txt_record("example.test", "abc").unwrap();
    let start = Instant::now();
    let err = run_hook(&hook, HookAction::Add, &record).await.unwrap_err();
    assert!(matches!(err, DcvError::HookTimeout { .. }), "{err}");
    assert!(
        start.elapsed() < Duration::from_secs(3),
        "{:?}",
        start.elapsed()
    );
}

#[tokio::test]
async fn missing_hook_program_is_a_spawn_error() {
    let hook = DnsHook {
        argv: vec!["/nonexistent/dns-hook".into()],
        timeout: Duration::from_secs(1),
    };
    let record = hook::txt_record("example.test", "abc").unwrap();
    let err = hook::run(&hook, HookAction::Add, &record, "www")
        .await
        .unwrap_err();
    assert!(err.to_string().contains("/nonexistent/dns-hook"), "{err}");
    let empty = DnsHook {
        argv: vec![],
        timeout: Duration::from_secs(1),
    };
    assert!(
        hook::run(&empty, HookAction::Add, &record, "www")
            .await
            .is_err()
    );
}
