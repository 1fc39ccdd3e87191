//! Helpers for the fault-tolerance suite (`tests/faults_*.rs`): running the agent with extra
//! environment or a hand-written configuration, a raw HTTP(S) server on 127.0.0.1 that records
//! every byte it receives and answers with a closure (trickling, never-ending, mistyped or
//! redirecting answers the sandbox cannot produce), TLS identities made with rcgen (trusted,
//! wrong name, self-signed, expired), a tiny file server for a web root, and the consistency
//! checks every crash scenario ends with.
#![allow(dead_code)]

use std::collections::BTreeMap;
use std::fs;
use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicBool, AtomicU32, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use rcgen::{
    BasicConstraints, CertificateParams, DistinguishedName, DnType, IsCa, Issuer, KeyPair,
    KeyUsagePurpose,
};
use rustls::pki_types::{CertificateDer, PrivateKeyDer, PrivatePkcs8KeyDer};

use super::env::{AgentOutput, Leaf, TestEnv, key_spki};

static RUNS: AtomicU32 = AtomicU32::new(0);

/// Runs the agent with `config` (the text written to `DIR/config-faults.toml`), `args` and
/// extra environment; killed after `limit` (then `code` is `None`). Returns the output and
/// how long it ran.
pub(crate) fn run_raw(
    env: &TestEnv,
    config: &str,
    args: &[&str],
    vars: &[(&str, &str)],
    limit: Duration,
) -> (AgentOutput, Duration) {
    let path = env.path("config-faults.toml");
    fs::write(&path, config).unwrap();
    let n = RUNS.fetch_add(1, Ordering::Relaxed);
    let out = env.path(&format!("logs/faults-{n}.out"));
    let err = env.path(&format!("logs/faults-{n}.err"));
    // `("__UMASK__", "000")` runs the agent under that umask (through `sh`).
    let umask = vars
        .iter()
        .find(|(k, _)| *k == "__UMASK__")
        .map(|(_, v)| *v);
    let mut cmd = match umask {
        Some(m) => {
            let mut c = Command::new("/bin/sh");
            c.arg("-c")
                .arg(format!("umask {m} && exec \"$0\" \"$@\""))
                .arg(env!("CARGO_BIN_EXE_cert-agent"));
            c
        }
        None => Command::new(env!("CARGO_BIN_EXE_cert-agent")),
    };
    cmd.arg("--config")
        .arg(&path)
        .args(args)
        .current_dir(&env.cwd)
        .env_remove("CERT_AGENT_CONFIG")
        .env_remove("CERT_AGENT_FAILPOINT")
        .env_remove("CERT_AGENT_TEST_CLOCK_OFFSET_SECS")
        .env_remove("INVOCATION_ID")
        .env_remove("RUST_LOG")
        .stdin(Stdio::null())
        .stdout(fs::File::create(&out).unwrap())
        .stderr(fs::File::create(&err).unwrap());
    for (k, v) in vars.iter().filter(|(k, _)| *k != "__UMASK__") {
        cmd.env(k, v);
    }
    let started = Instant::now();
    let mut child = cmd.spawn().expect("cert-agent starts");
    let status = loop {
        if let Some(status) = child.try_wait().unwrap() {
            break Some(status);
        }
        if started.elapsed() > limit {
            let _ = child.kill();
            let _ = child.wait();
            break None;
        }
        std::thread::sleep(Duration::from_millis(10));
    };
    let elapsed = started.elapsed();
    let output = AgentOutput {
        code: status.and_then(|s| s.code()),
        stdout: fs::read_to_string(out).unwrap_or_default(),
        stderr: fs::read_to_string(err).unwrap_or_default(),
        args: args.iter().map(|s| s.to_string()).collect(),
    };
    (output, elapsed)
}

/// Runs the agent with the environment's own configuration and extra environment.
pub(crate) fn run_env(env: &TestEnv, args: &[&str], vars: &[(&str, &str)]) -> AgentOutput {
    run_raw(env, &env.config_text(), args, vars, super::env::RUN_TIMEOUT).0
}

/// `renew --json --wait 30` with extra environment.
pub(crate) fn renew_with(env: &TestEnv, vars: &[(&str, &str)]) -> AgentOutput {
    run_env(env, &["--json", "renew", "--wait", "30"], vars)
}

/// The environment's configuration with `[api] base_url` and `ca_file` replaced (`ca_file`
/// `None` drops the line).
pub(crate) fn config_for(env: &TestEnv, base_url: &str, ca_file: Option<&Path>) -> String {
    env.config_text()
        .lines()
        .filter_map(|l| {
            if l.starts_with("base_url = ") {
                Some(format!("base_url = \"{base_url}\""))
            } else if l.starts_with("ca_file = ") {
                ca_file.map(|p| format!("ca_file = \"{}\"", p.display()))
            } else {
                Some(l.to_string())
            }
        })
        .collect::<Vec<_>>()
        .join("\n")
        + "\n"
}

// ---------------------------------------------------------------------------------------------
// TLS identities

/// A private test CA and the server identities it (or nobody) vouches for.
pub(crate) struct TestPki {
    pub ca_params: CertificateParams,
    pub ca_key: KeyPair,
    pub ca_pem: String,
}

/// A server certificate chain and key for rustls.
pub(crate) struct Identity {
    pub chain: Vec<CertificateDer<'static>>,
    pub key: PrivateKeyDer<'static>,
}

impl TestPki {
    pub(crate) fn new() -> Self {
        let mut p = CertificateParams::default();
        p.distinguished_name = DistinguishedName::new();
        p.distinguished_name
            .push(DnType::CommonName, "faults test root");
        p.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
        p.key_usages = vec![KeyUsagePurpose::KeyCertSign, KeyUsagePurpose::CrlSign];
        let key = KeyPair::generate().unwrap();
        let cert = p.self_signed(&key).unwrap();
        TestPki {
            ca_params: p,
            ca_key: key,
            ca_pem: cert.pem(),
        }
    }

    /// Writes the CA certificate to `path` (for `ca_file`).
    pub(crate) fn write_ca(&self, path: &Path) -> PathBuf {
        fs::write(path, &self.ca_pem).unwrap();
        path.to_path_buf()
    }

    fn leaf_params(names: &[&str], expired: bool) -> CertificateParams {
        let mut p = CertificateParams::new(names.iter().map(|s| s.to_string()).collect::<Vec<_>>())
            .unwrap();
        p.distinguished_name = DistinguishedName::new();
        p.distinguished_name.push(DnType::CommonName, names[0]);
        let now = time::OffsetDateTime::now_utc();
        if expired {
            p.not_before = now - time::Duration::days(30);
            p.not_after = now - time::Duration::days(1);
        } else {
            p.not_before = now - time::Duration::days(1);
            p.not_after = now + time::Duration::days(30);
        }
        p
    }

    /// A leaf for `names` signed by this CA (`expired`: validity ended yesterday).
    pub(crate) fn identity(&self, names: &[&str], expired: bool) -> Identity {
        let key = KeyPair::generate().unwrap();
        let issuer = Issuer::from_params(&self.ca_params, &self.ca_key);
        let cert = Self::leaf_params(names, expired)
            .signed_by(&key, &issuer)
            .unwrap();
        Identity {
            chain: vec![cert.der().clone()],
            key: PrivateKeyDer::Pkcs8(PrivatePkcs8KeyDer::from(key.serialize_der())),
        }
    }

    /// A self-signed leaf for `names` (no CA vouches for it).
    pub(crate) fn self_signed(names: &[&str]) -> Identity {
        let key = KeyPair::generate().unwrap();
        let cert = Self::leaf_params(names, false).self_signed(&key).unwrap();
        Identity {
            chain: vec![cert.der().clone()],
            key: PrivateKeyDer::Pkcs8(PrivatePkcs8KeyDer::from(key.serialize_der())),
        }
    }
}

// ---------------------------------------------------------------------------------------------
// The raw server

/// One request as received.
#[derive(Debug, Clone)]
pub(crate) struct Request {
    pub method: String,
    /// Path with the query.
    pub target: String,
    pub head: String,
    pub body: Vec<u8>,
}

impl Request {
    pub(crate) fn path(&self) -> &str {
        self.target.split('?').next().unwrap_or("")
    }
}

/// What the handler sees: the request and the connection to answer on.
pub(crate) type Handler = Arc<dyn Fn(&Request, &mut dyn Write) + Send + Sync>;

/// A raw HTTP/1.1 server on 127.0.0.1 (plain or TLS) recording every byte it received.
pub(crate) struct RawServer {
    pub port: u16,
    pub received: Arc<Mutex<Vec<u8>>>,
    pub requests: Arc<Mutex<Vec<Request>>>,
    pub connections: Arc<AtomicU32>,
    stop: Arc<AtomicBool>,
}

impl RawServer {
    /// Plain HTTP.
    pub(crate) fn plain(handler: Handler) -> Self {
        Self::start(None, handler)
    }

    /// HTTPS with `identity`.
    pub(crate) fn tls(identity: Identity, handler: Handler) -> Self {
        let provider = Arc::new(rustls::crypto::aws_lc_rs::default_provider());
        let mut config = rustls::ServerConfig::builder_with_provider(provider)
            .with_safe_default_protocol_versions()
            .unwrap()
            .with_no_client_auth()
            .with_single_cert(identity.chain, identity.key)
            .unwrap();
        config.alpn_protocols = vec![b"http/1.1".to_vec()];
        Self::start(Some(Arc::new(config)), handler)
    }

    fn start(tls: Option<Arc<rustls::ServerConfig>>, handler: Handler) -> Self {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let port = listener.local_addr().unwrap().port();
        listener.set_nonblocking(true).unwrap();
        let received = Arc::new(Mutex::new(Vec::new()));
        let requests = Arc::new(Mutex::new(Vec::new()));
        let connections = Arc::new(AtomicU32::new(0));
        let stop = Arc::new(AtomicBool::new(false));
        let server = RawServer {
            port,
            received: received.clone(),
            requests: requests.clone(),
            connections: connections.clone(),
            stop: stop.clone(),
        };
        std::thread::spawn(move || {
            while !stop.load(Ordering::Relaxed) {
                match listener.accept() {
                    Ok((sock, _)) => {
                        sock.set_nonblocking(false).unwrap();
                        sock.set_read_timeout(Some(Duration::from_secs(30))).ok();
                        connections.fetch_add(1, Ordering::Relaxed);
                        let (tls, handler, received, requests, stop) = (
                            tls.clone(),
                            handler.clone(),
                            received.clone(),
                            requests.clone(),
                            stop.clone(),
                        );
                        std::thread::spawn(move || {
                            let _ = serve_conn(sock, tls, handler, received, requests, stop);
                        });
                    }
                    Err(_) => std::thread::sleep(Duration::from_millis(5)),
                }
            }
        });
        server
    }

    pub(crate) fn base_url(&self, scheme: &str, host: &str) -> String {
        format!("{scheme}://{host}:{}", self.port)
    }

    /// Everything received so far, lossily as text.
    pub(crate) fn received_text(&self) -> String {
        String::from_utf8_lossy(&self.received.lock().unwrap()).into_owned()
    }

    pub(crate) fn requests(&self) -> Vec<Request> {
        self.requests.lock().unwrap().clone()
    }
}

impl Drop for RawServer {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
    }
}

/// Reads and writes through a recording wrapper.
struct Recording<S> {
    inner: S,
    log: Arc<Mutex<Vec<u8>>>,
}

impl<S: Read> Read for Recording<S> {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        let n = self.inner.read(buf)?;
        self.log.lock().unwrap().extend_from_slice(&buf[..n]);
        Ok(n)
    }
}

impl<S: Write> Write for Recording<S> {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.inner.write(buf)
    }
    fn flush(&mut self) -> std::io::Result<()> {
        self.inner.flush()
    }
}

fn serve_conn(
    sock: TcpStream,
    tls: Option<Arc<rustls::ServerConfig>>,
    handler: Handler,
    received: Arc<Mutex<Vec<u8>>>,
    requests: Arc<Mutex<Vec<Request>>>,
    stop: Arc<AtomicBool>,
) -> std::io::Result<()> {
    match tls {
        Some(config) => {
            let conn = rustls::ServerConnection::new(config).map_err(std::io::Error::other)?;
            let mut s = rustls::StreamOwned::new(conn, sock);
            // Bytes recorded are the decrypted application data.
            let mut rec = Recording {
                inner: &mut s,
                log: received,
            };
            serve_requests(&mut rec, handler, requests, stop)
        }
        None => {
            let mut rec = Recording {
                inner: sock,
                log: received,
            };
            serve_requests(&mut rec, handler, requests, stop)
        }
    }
}

fn serve_requests<S: Read + Write>(
    s: &mut S,
    handler: Handler,
    requests: Arc<Mutex<Vec<Request>>>,
    stop: Arc<AtomicBool>,
) -> std::io::Result<()> {
    let mut buf = Vec::new();
    while !stop.load(Ordering::Relaxed) {
        // Head.
        let head_end = loop {
            if let Some(i) = find(&buf, b"\r\n\r\n") {
                break i + 4;
            }
            let mut chunk = [0u8; 4096];
            let n = s.read(&mut chunk)?;
            if n == 0 {
                return Ok(());
            }
            buf.extend_from_slice(&chunk[..n]);
        };
        let head = String::from_utf8_lossy(&buf[..head_end]).into_owned();
        let len = head
            .lines()
            .find_map(|l| {
                let (k, v) = l.split_once(':')?;
                k.trim()
                    .eq_ignore_ascii_case("content-length")
                    .then(|| v.trim().parse::<usize>().ok())
                    .flatten()
            })
            .unwrap_or(0);
        while buf.len() < head_end + len {
            let mut chunk = [0u8; 4096];
            let n = s.read(&mut chunk)?;
            if n == 0 {
                return Ok(());
            }
            buf.extend_from_slice(&chunk[..n]);
        }
        let body = buf[head_end..head_end + len].to_vec();
        buf.drain(..head_end + len);
        let mut first = head.lines().next().unwrap_or("").split(' ');
        let req = Request {
            method: first.next().unwrap_or("").to_string(),
            target: first.next().unwrap_or("").to_string(),
            head,
            body,
        };
        requests.lock().unwrap().push(req.clone());
        handler(&req, s);
        s.flush()?;
    }
    Ok(())
}

fn find(hay: &[u8], needle: &[u8]) -> Option<usize> {
    hay.windows(needle.len()).position(|w| w == needle)
}

/// Writes a complete JSON answer.
pub(crate) fn json(w: &mut dyn Write, status: u16, body: &str) {
    let _ = write!(
        w,
        "HTTP/1.1 {status} X\r\nContent-Type: application/json\r\nContent-Length: {}\r\n\r\n{body}",
        body.len()
    );
    let _ = w.flush();
}

/// A handler answering signin with a token and everything else with `other`.
pub(crate) fn with_signin(
    other: impl Fn(&Request, &mut dyn Write) + Send + Sync + 'static,
) -> Handler {
    Arc::new(move |req: &Request, w: &mut dyn Write| {
        if req.path() == "/api/v1/users/signin" {
            json(
                w,
                200,
                r#"{"id":7,"auth_token":"raw-server-token-0123456789"}"#,
            );
        } else {
            other(req, w)
        }
    })
}

// ---------------------------------------------------------------------------------------------
// Web root file server and consistency checks

/// Serves `root` over plain HTTP on 127.0.0.1 (GET only, no directory listing); returns the
/// server (stops on drop).
pub(crate) fn serve_webroot(root: &Path) -> RawServer {
    let root = root.to_path_buf();
    RawServer::plain(Arc::new(move |req: &Request, w: &mut dyn Write| {
        let rel = req.path().trim_start_matches('/');
        let ok = !rel.split('/').any(|c| c == ".." || c.is_empty());
        match fs::read(root.join(rel)) {
            Ok(data) if ok => {
                let _ = write!(
                    w,
                    "HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\nContent-Length: {}\r\n\r\n",
                    data.len()
                );
                let _ = w.write_all(&data);
            }
            _ => {
                let _ = write!(w, "HTTP/1.1 404 Not Found\r\nContent-Length: 0\r\n\r\n");
            }
        }
    }))
}

/// Every entry under `dir` (files, links, directories), relative, recursively.
pub(crate) fn entries(dir: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    fn walk(base: &Path, dir: &Path, out: &mut Vec<PathBuf>) {
        let Ok(rd) = fs::read_dir(dir) else { return };
        for e in rd.flatten() {
            let p = e.path();
            out.push(p.strip_prefix(base).unwrap().to_path_buf());
            if fs::symlink_metadata(&p)
                .map(|m| m.is_dir())
                .unwrap_or(false)
            {
                walk(base, &p, out);
            }
        }
    }
    walk(dir, dir, &mut out);
    out.sort();
    out
}

/// The files under `dir` with their bytes (symlinks as their target).
pub(crate) fn tree(dir: &Path) -> BTreeMap<PathBuf, Vec<u8>> {
    entries(dir)
        .into_iter()
        .filter_map(|rel| {
            let p = dir.join(&rel);
            let m = fs::symlink_metadata(&p).ok()?;
            if m.file_type().is_symlink() {
                Some((rel, format!("-> {:?}", fs::read_link(&p).ok()).into_bytes()))
            } else if m.is_file() {
                Some((rel, fs::read(&p).unwrap_or_default()))
            } else {
                None
            }
        })
        .collect()
}

/// The paths whose content differs between two trees (added, removed or changed).
pub(crate) fn changed(
    before: &BTreeMap<PathBuf, Vec<u8>>,
    after: &BTreeMap<PathBuf, Vec<u8>>,
) -> Vec<PathBuf> {
    let mut out: Vec<PathBuf> = after
        .iter()
        .filter(|(p, b)| before.get(*p) != Some(*b))
        .map(|(p, _)| p.clone())
        .collect();
    out.extend(before.keys().filter(|p| !after.contains_key(*p)).cloned());
    out
}

/// The installed leaf of `name` certifies the installed key.
#[track_caller]
pub(crate) fn assert_pair(env: &TestEnv, name: &str) {
    let files = &env.spec(name).files;
    let leaf = Leaf::from_pem_file(&files.leaf_file());
    assert_eq!(
        leaf.spki,
        key_spki(&files.key),
        "the installed certificate of '{name}' is for the installed key"
    );
    for p in [&files.cert, &files.fullchain].into_iter().flatten() {
        assert_eq!(
            Leaf::from_pem_file(p).serial,
            leaf.serial,
            "{} holds the same leaf",
            p.display()
        );
    }
}

/// Nothing but the configured files under the install directory of `name` (no
/// `.cert-agent-new` / `.cert-agent-prev` leftovers).
#[track_caller]
pub(crate) fn assert_no_install_leftovers(env: &TestEnv, name: &str) {
    let files = env.spec(name).files.clone();
    let dir = files.key.parent().unwrap().to_path_buf();
    let extra: Vec<_> = entries(&dir)
        .into_iter()
        .map(|r| dir.join(r))
        .filter(|p| !files.all().contains(p))
        .collect();
    assert!(extra.is_empty(), "left in the install directory: {extra:?}");
}

/// Every JSON file in the state directory parses.
#[track_caller]
pub(crate) fn assert_state_parses(env: &TestEnv) {
    for rel in entries(&env.state_dir()) {
        let p = env.state_dir().join(&rel);
        if p.extension().is_some_and(|e| e == "json") {
            let text = fs::read_to_string(&p).unwrap();
            let parsed: Result<serde_json::Value, _> = serde_json::from_str(&text);
            assert!(parsed.is_ok(), "{} does not parse: {text}", p.display());
        }
    }
}

/// True when this process may mount (root); otherwise prints a notice, and fails under CI.
pub(crate) fn require_root(what: &str) -> bool {
    if nix::unistd::geteuid().is_root() {
        return true;
    }
    assert!(
        std::env::var_os("CI").is_none(),
        "{what} needs root and CI is set"
    );
    eprintln!("skipped: {what} needs root");
    false
}

/// Polls `check` until true or `timeout`.
pub(crate) fn eventually(timeout: Duration, check: impl FnMut() -> bool) -> bool {
    super::env::wait_until(timeout, check)
}
