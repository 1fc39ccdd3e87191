//! The transport: `Sandbox::start` runs an HTTPS server (rustls, HTTP/1.1) on its own tokio
//! runtime and hands back a [`SandboxHandle`]. Each partner-API request becomes an
//! [`ApiRequest`] for `State::dispatch`; around that sit CORS, the `Date` header, the call log
//! and fault injection. `/_sandbox/` is the control API (loopback only), an optional plain-HTTP
//! listener redirects everything to HTTPS, and the validator fetches DCV files in the
//! background.

use std::convert::Infallible;
use std::net::{SocketAddr, TcpListener as StdTcpListener};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use bytes::Bytes;
use http::{HeaderValue, Method, Request, Response, StatusCode, header};
use http_body_util::{BodyExt, Full, Limited};
use hyper::body::Incoming;
use hyper::server::conn::http1;
use hyper::service::service_fn;
use hyper_util::rt::{TokioIo, TokioTimer};
use serde_json::{Value, json};
use time::OffsetDateTime;
use tokio::net::TcpListener;
use tokio::sync::{Notify, watch};

use crate::ca::{self, Authority};
use crate::clock::{self, Clock};
use crate::faults::{Fault, FaultKind, Faults};
use crate::state::{DnsRecord, State, StateConfig};
use crate::wire::{ApiRequest, ApiResponse, ResponseBody};
use crate::world::{CallRecord, Shared, World, guarded, load_saved};
use crate::{bundle, control};

/// Largest request body accepted (a CSR is a few KiB).
const MAX_REQUEST_BODY: usize = 1024 * 1024;
/// Time a client gets to finish the TLS handshake.
const HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(10);

/// What [`Sandbox::start`] needs. `SandboxConfig::default()` is a sandbox on `127.0.0.1:0`
/// with a temporary data directory, real-time clock, no persistence.
#[derive(Debug, Clone)]
pub struct SandboxConfig {
    /// Where `api-ca.pem`, `root.pem`, the CA keys and `state.json` live; a temporary
    /// directory owned (and removed) by the handle when `None`.
    pub data_dir: Option<PathBuf>,
    /// HTTPS listen address (default `127.0.0.1:0`: any free port).
    pub listen: SocketAddr,
    /// Seed of every random ID and token; overrides `state.seed` when set.
    pub seed: Option<u64>,
    /// Virtual seconds per real second (default 1).
    pub time_scale: f64,
    /// Virtual start time (default: the real time now).
    pub start_time: Option<OffsetDateTime>,
    /// Port on 127.0.0.1 where the validator fetches HTTP_CSR_HASH files (default 80).
    pub dcv_http_port: u16,
    /// Port on 127.0.0.1 where the validator fetches HTTPS_CSR_HASH files (default 443).
    pub dcv_https_port: u16,
    /// Optional plain-HTTP listener that answers every request with 301 to the HTTPS URL.
    pub http_listen: Option<SocketAddr>,
    /// The state's own knobs (accounts, certificate lifetime, seed).
    pub state: StateConfig,
    /// Validation and issuance without waiting (see `State::set_instant`).
    pub instant: bool,
    /// Keep `DIR/state.json` so that a restarted sandbox keeps its orders.
    pub persist: bool,
}

impl Default for SandboxConfig {
    fn default() -> Self {
        Self {
            data_dir: None,
            listen: SocketAddr::from(([127, 0, 0, 1], 0)),
            seed: None,
            time_scale: 1.0,
            start_time: None,
            dcv_http_port: 80,
            dcv_https_port: 443,
            http_listen: None,
            state: StateConfig::default(),
            instant: false,
            persist: false,
        }
    }
}

impl SandboxConfig {
    pub fn data_dir(mut self, dir: impl Into<PathBuf>) -> Self {
        self.data_dir = Some(dir.into());
        self
    }
    pub fn listen(mut self, addr: SocketAddr) -> Self {
        self.listen = addr;
        self
    }
    pub fn seed(mut self, seed: u64) -> Self {
        self.seed = Some(seed);
        self
    }
    pub fn time_scale(mut self, scale: f64) -> Self {
        self.time_scale = scale;
        self
    }
    pub fn start_time(mut self, t: OffsetDateTime) -> Self {
        self.start_time = Some(t);
        self
    }
    pub fn dcv_http_port(mut self, port: u16) -> Self {
        self.dcv_http_port = port;
        self
    }
    pub fn dcv_https_port(mut self, port: u16) -> Self {
        self.dcv_https_port = port;
        self
    }
    pub fn http_listen(mut self, addr: SocketAddr) -> Self {
        self.http_listen = Some(addr);
        self
    }
    pub fn state(mut self, state: StateConfig) -> Self {
        self.state = state;
        self
    }
    pub fn instant(mut self, instant: bool) -> Self {
        self.instant = instant;
        self
    }
    pub fn persist(mut self, persist: bool) -> Self {
        self.persist = persist;
        self
    }
}

/// Why a sandbox could not start.
#[derive(Debug, thiserror::Error)]
pub enum SandboxError {
    #[error("could not create data directory '{path}': {source}")]
    DataDir {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("could not listen on {addr}: {source}")]
    Listen {
        addr: SocketAddr,
        source: std::io::Error,
    },
    #[error("certificate authority: {0}")]
    Ca(#[from] ca::CaError),
    #[error("TLS configuration: {0}")]
    Tls(String),
    #[error("saved state '{path}': {message}")]
    SavedState { path: PathBuf, message: String },
    #[error("could not start the sandbox: {0}")]
    Start(String),
}

/// Entry point of the library.
pub struct Sandbox;

impl Sandbox {
    /// Starts a sandbox on its own multi-thread runtime (background thread) and returns once it
    /// listens. Synchronous: works from plain `#[test]`s and from inside a tokio runtime.
    pub fn start(config: SandboxConfig) -> Result<SandboxHandle, SandboxError> {
        let (data_dir, owned_dir) = match &config.data_dir {
            Some(d) => (d.clone(), false),
            None => (temp_dir_path(), true),
        };
        std::fs::create_dir_all(&data_dir).map_err(|source| SandboxError::DataDir {
            path: data_dir.clone(),
            source,
        })?;
        // From here on, a failure must not leave an owned temp dir behind.
        let mut cleanup = DirGuard {
            path: owned_dir.then(|| data_dir.clone()),
        };

        let identity = ca::api_tls_identity(Some(&data_dir))?;
        let authority = Authority::load_or_generate(&data_dir)?;
        let tls = tls_config(identity)?;

        let mut state_config = config.state.clone();
        if let Some(seed) = config.seed {
            state_config.seed = seed;
        }
        let real_now = config.start_time.unwrap_or_else(OffsetDateTime::now_utc);
        let state_path = data_dir.join("state.json");
        let (state, start) = if config.persist && state_path.exists() {
            let (state, saved_now) =
                load_saved(&state_path).map_err(|message| SandboxError::SavedState {
                    path: state_path.clone(),
                    message,
                })?;
            (state, real_now.max(saved_now))
        } else {
            let state = guarded(|| State::new(state_config, real_now))
                .map_err(|e| SandboxError::Start(format!("state: {e}")))?;
            (state, real_now)
        };

        let mut world = World {
            state,
            ca: authority,
            clock: Clock::new(start, config.time_scale),
            faults: Faults::default(),
            calls: Vec::new(),
            dcv_http_port: config.dcv_http_port,
            dcv_https_port: config.dcv_https_port,
        };
        if config.instant {
            let state = &mut world.state;
            guarded(|| state.set_instant(true))
                .map_err(|e| SandboxError::Start(format!("state: {e}")))?;
        }
        let shared = Arc::new(Shared::new(world, config.persist.then_some(state_path)));

        let listener = bind(config.listen)?;
        let addr = listener
            .local_addr()
            .map_err(|source| SandboxError::Listen {
                addr: config.listen,
                source,
            })?;
        let http_listener = config.http_listen.map(bind).transpose()?;
        let http_addr = http_listener
            .as_ref()
            .map(|l| l.local_addr())
            .transpose()
            .map_err(|source| SandboxError::Listen {
                addr: config.http_listen.unwrap_or(config.listen),
                source,
            })?;
        let base_url = format!("https://{}", url_authority(addr));

        let (shutdown_tx, shutdown_rx) = watch::channel(false);
        let (ready_tx, ready_rx) = std::sync::mpsc::channel::<Result<(), SandboxError>>();
        let thread = {
            let shared = shared.clone();
            let base_url = base_url.clone();
            std::thread::Builder::new()
                .name("partner-sandbox".into())
                .spawn(move || {
                    let runtime = match tokio::runtime::Builder::new_multi_thread()
                        .worker_threads(2)
                        .thread_name("partner-sandbox-worker")
                        .enable_all()
                        .build()
                    {
                        Ok(rt) => rt,
                        Err(e) => {
                            let _ = ready_tx
                                .send(Err(SandboxError::Start(format!("tokio runtime: {e}"))));
                            return;
                        }
                    };
                    runtime.block_on(serve(
                        listener,
                        http_listener,
                        tls,
                        shared,
                        base_url,
                        shutdown_rx,
                        ready_tx,
                    ));
                    runtime.shutdown_timeout(Duration::from_secs(2));
                })
                .map_err(|e| SandboxError::Start(format!("thread: {e}")))?
        };
        match ready_rx.recv() {
            Ok(Ok(())) => {}
            Ok(Err(e)) => {
                let _ = thread.join();
                return Err(e);
            }
            Err(_) => {
                let _ = thread.join();
                return Err(SandboxError::Start("the server thread died".into()));
            }
        }

        cleanup.path = None;
        Ok(SandboxHandle {
            shared,
            addr,
            http_addr,
            base_url,
            data_dir,
            owned_dir,
            shutdown: shutdown_tx,
            thread: Some(thread),
        })
    }
}

/// Runs the listeners and the validator until shutdown; reports readiness once listening.
async fn serve(
    listener: StdTcpListener,
    http_listener: Option<StdTcpListener>,
    tls: rustls::ServerConfig,
    shared: Arc<Shared>,
    base_url: String,
    mut shutdown: watch::Receiver<bool>,
    ready: std::sync::mpsc::Sender<Result<(), SandboxError>>,
) {
    let listeners = (|| {
        let l = TcpListener::from_std(listener)?;
        let h = http_listener.map(TcpListener::from_std).transpose()?;
        Ok::<_, std::io::Error>((l, h))
    })();
    let (listener, http_listener) = match listeners {
        Ok(l) => l,
        Err(e) => {
            let _ = ready.send(Err(SandboxError::Start(format!("listener: {e}"))));
            return;
        }
    };
    let acceptor = tokio_rustls::TlsAcceptor::from(Arc::new(tls));
    let mut tasks = tokio::task::JoinSet::new();
    tasks.spawn(accept_https(
        listener,
        acceptor,
        shared.clone(),
        shutdown.clone(),
    ));
    if let Some(l) = http_listener {
        tasks.spawn(accept_redirect(l, base_url, shutdown.clone()));
    }
    tasks.spawn(crate::validator::run(shared, shutdown.clone()));
    let _ = ready.send(Ok(()));
    while !*shutdown.borrow_and_update() {
        if shutdown.changed().await.is_err() {
            break;
        }
    }
    tasks.abort_all();
}

/// Removes a temp dir unless forgotten.
struct DirGuard {
    path: Option<PathBuf>,
}

impl Drop for DirGuard {
    fn drop(&mut self) {
        if let Some(p) = &self.path {
            let _ = std::fs::remove_dir_all(p);
        }
    }
}

/// A running sandbox; stops (and removes its temporary directory, if it made one) on drop.
pub struct SandboxHandle {
    shared: Arc<Shared>,
    addr: SocketAddr,
    http_addr: Option<SocketAddr>,
    base_url: String,
    data_dir: PathBuf,
    owned_dir: bool,
    shutdown: watch::Sender<bool>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl std::fmt::Debug for SandboxHandle {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SandboxHandle")
            .field("base_url", &self.base_url)
            .field("data_dir", &self.data_dir)
            .finish_non_exhaustive()
    }
}

impl SandboxHandle {
    /// `https://127.0.0.1:PORT` (no trailing slash).
    pub fn base_url(&self) -> &str {
        &self.base_url
    }

    /// The HTTPS listen address.
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// The plain-HTTP redirect listener's address, when configured.
    pub fn http_addr(&self) -> Option<SocketAddr> {
        self.http_addr
    }

    /// Trust anchor of the API's TLS certificate (`DIR/api-ca.pem`).
    pub fn api_ca_path(&self) -> PathBuf {
        self.data_dir.join("api-ca.pem")
    }

    /// Root of the certificates the sandbox issues (`DIR/root.pem`).
    pub fn root_path(&self) -> PathBuf {
        self.data_dir.join("root.pem")
    }

    pub fn data_dir(&self) -> &Path {
        &self.data_dir
    }

    /// The virtual time.
    pub fn now(&self) -> OffsetDateTime {
        control::now(&self.shared)
    }

    /// Moves virtual time forward (time-driven transitions run at once); returns the new now.
    pub fn advance(&self, by: Duration) -> OffsetDateTime {
        let by = time::Duration::try_from(by).unwrap_or(time::Duration::MAX);
        control::advance(&self.shared, by)
    }

    pub fn set_instant(&self, instant: bool) {
        expect_ok("set_instant", control::set_instant(&self.shared, instant));
    }

    pub fn set_dns_record(&self, name: &str, rtype: &str, value: &str) {
        let record = DnsRecord {
            name: name.trim_end_matches('.').to_ascii_lowercase(),
            rtype: rtype.to_ascii_uppercase(),
            value: value.to_owned(),
        };
        expect_ok(
            "set_dns_record",
            control::set_dns_record(&self.shared, record),
        );
    }

    pub fn remove_dns_record(&self, name: &str, rtype: &str) {
        let name = name.trim_end_matches('.').to_ascii_lowercase();
        expect_ok(
            "remove_dns_record",
            control::remove_dns_record(&self.shared, &name, &rtype.to_ascii_uppercase()),
        );
    }

    /// "Clicks" the EMAIL approval for `domain` (every domain when `None`).
    pub fn approve_email(&self, certificate_id: u64, domain: Option<&str>) -> Result<(), String> {
        control::approve_email(&self.shared, certificate_id, domain)
    }

    /// Re-issues the current leaf so that it expires `days_left` days from now.
    pub fn age_certificate(&self, certificate_id: u64, days_left: i64) -> Result<(), String> {
        control::age_certificate(&self.shared, certificate_id, days_left)
    }

    /// Makes the subscription end `days_left` days from now.
    pub fn shorten_subscription(&self, certificate_id: u64, days_left: i64) -> Result<(), String> {
        control::shorten_subscription(&self.shared, certificate_id, days_left)
    }

    pub fn force_status(&self, certificate_id: u64, status: &str) -> Result<(), String> {
        control::force_status(&self.shared, certificate_id, status)
    }

    /// Invalidates `login`'s token as if another signin had issued a new one.
    pub fn rotate_token(&self, login: &str) -> Result<(), String> {
        control::rotate_token(&self.shared, login)
    }

    /// Completes a prepared renewal order (`prolongation_token`) as the order site would: a new,
    /// billed order; returns its certificate ID.
    pub fn complete_renewal(&self, prolongation_token: &str) -> Result<u64, String> {
        control::complete_renewal(&self.shared, prolongation_token)
    }

    /// The accounts (ID, login, role, currency, public token).
    pub fn accounts(&self) -> Vec<crate::state::AccountInfo> {
        control::accounts(&self.shared)
    }

    /// Every DNS record set through the control surface.
    pub fn dns_records(&self) -> Vec<DnsRecord> {
        control::dns_records(&self.shared)
    }

    /// Billed orders placed by `login` so far.
    pub fn billed_orders(&self, login: &str) -> u64 {
        control::billed_orders(&self.shared)
            .into_iter()
            .find(|(l, _)| l == login)
            .map_or(0, |(_, n)| n)
    }

    /// The most partner-API requests that were being answered at the same time since the
    /// previous call of this method (or the start); the count restarts from the requests open
    /// now.
    pub fn take_peak_concurrent_calls(&self) -> usize {
        self.shared.take_peak_in_flight()
    }

    /// Every partner-API call so far (oldest first).
    pub fn calls(&self) -> Vec<CallRecord> {
        control::calls(&self.shared)
    }

    pub fn clear_calls(&self) {
        control::clear_calls(&self.shared);
    }

    /// Arms a fault. Panics on an invalid fault (a bug in the test).
    pub fn inject(&self, fault: Fault) {
        if let Err(e) = control::inject(&self.shared, fault) {
            panic!("invalid fault: {e}");
        }
    }

    /// The faults still armed.
    pub fn faults(&self) -> Vec<Fault> {
        control::faults(&self.shared)
    }

    pub fn clear_faults(&self) {
        control::clear_faults(&self.shared);
    }

    /// The state's internal record of a certificate.
    pub fn inspect(&self, certificate_id: u64) -> Option<Value> {
        control::inspect(&self.shared, certificate_id)
    }

    /// Where the validator fetches HTTP and HTTPS DCV files (ports on 127.0.0.1).
    pub fn set_dcv_ports(&self, http: u16, https: u16) {
        control::set_dcv_ports(&self.shared, http, https);
    }

    /// Runs one validator round now (tick, due checks, fetches) instead of waiting for the
    /// next one. Blocks until it is done; not for use on the sandbox's own runtime.
    pub fn validate_now(&self) {
        let shared = self.shared.clone();
        let run = move || {
            let rt = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build();
            if let Ok(rt) = rt {
                rt.block_on(crate::validator::round(&shared));
            }
        };
        // A fresh thread: safe from inside any runtime.
        let _ = std::thread::spawn(run).join();
    }
}

fn expect_ok(what: &str, r: Result<(), String>) {
    if let Err(e) = r {
        panic!("{what}: {e}");
    }
}

impl Drop for SandboxHandle {
    fn drop(&mut self) {
        let _ = self.shutdown.send(true);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
        self.shared.persist(true);
        if self.owned_dir {
            let _ = std::fs::remove_dir_all(&self.data_dir);
        }
    }
}

// ---- listeners ----

fn bind(addr: SocketAddr) -> Result<StdTcpListener, SandboxError> {
    let l = StdTcpListener::bind(addr).map_err(|source| SandboxError::Listen { addr, source })?;
    l.set_nonblocking(true)
        .map_err(|source| SandboxError::Listen { addr, source })?;
    Ok(l)
}

/// `127.0.0.1:PORT` or `[::1]:PORT`; an unspecified address is shown as loopback.
fn url_authority(addr: SocketAddr) -> String {
    let ip = if addr.ip().is_unspecified() {
        match addr {
            SocketAddr::V4(_) => std::net::IpAddr::from([127, 0, 0, 1]),
            SocketAddr::V6(_) => std::net::IpAddr::from(std::net::Ipv6Addr::LOCALHOST),
        }
    } else {
        addr.ip()
    };
    SocketAddr::new(ip, addr.port()).to_string()
}

fn temp_dir_path() -> PathBuf {
    static COUNTER: AtomicU64 = AtomicU64::new(0);
    let n = COUNTER.fetch_add(1, Ordering::Relaxed);
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.subsec_nanos());
    std::env::temp_dir().join(format!(
        "partner-sandbox-{}-{n}-{nanos:08x}",
        std::process::id()
    ))
}

fn tls_config(identity: ca::ApiTlsIdentity) -> Result<rustls::ServerConfig, SandboxError> {
    let provider = Arc::new(rustls::crypto::aws_lc_rs::default_provider());
    let mut config = rustls::ServerConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .map_err(|e| SandboxError::Tls(e.to_string()))?
        .with_no_client_auth()
        .with_single_cert(identity.cert_chain, identity.key)
        .map_err(|e| SandboxError::Tls(e.to_string()))?;
    config.alpn_protocols = vec![b"http/1.1".to_vec()];
    Ok(config)
}

async fn accept_https(
    listener: TcpListener,
    acceptor: tokio_rustls::TlsAcceptor,
    shared: Arc<Shared>,
    mut shutdown: watch::Receiver<bool>,
) {
    loop {
        let (stream, peer) = tokio::select! {
            r = listener.accept() => match r {
                Ok(x) => x,
                Err(e) => {
                    tracing::warn!("accept failed: {e}");
                    tokio::time::sleep(Duration::from_millis(50)).await;
                    continue;
                }
            },
            _ = shutdown.changed() => return,
        };
        let _ = stream.set_nodelay(true);
        let conn = Conn {
            shared: shared.clone(),
            peer,
            kill: Arc::new(Notify::new()),
        };
        let acceptor = acceptor.clone();
        let shutdown = shutdown.clone();
        tokio::spawn(serve_tls_connection(stream, acceptor, conn, shutdown));
    }
}

/// What a connection's requests share: the world, the peer, and the kill switch a
/// `drop_after_apply` fault pulls.
#[derive(Clone)]
struct Conn {
    shared: Arc<Shared>,
    peer: SocketAddr,
    kill: Arc<Notify>,
}

async fn serve_tls_connection(
    stream: tokio::net::TcpStream,
    acceptor: tokio_rustls::TlsAcceptor,
    conn: Conn,
    mut shutdown: watch::Receiver<bool>,
) {
    let tls = match tokio::time::timeout(HANDSHAKE_TIMEOUT, acceptor.accept(stream)).await {
        Ok(Ok(s)) => s,
        Ok(Err(e)) => {
            tracing::debug!("TLS handshake with {} failed: {e}", conn.peer);
            return;
        }
        Err(_) => {
            tracing::debug!("TLS handshake with {} timed out", conn.peer);
            return;
        }
    };
    let kill = conn.kill.clone();
    let service = service_fn(move |req| {
        let conn = conn.clone();
        async move { Ok::<_, Infallible>(handle(conn, req).await) }
    });
    let served = http1::Builder::new()
        .timer(TokioTimer::new())
        .header_read_timeout(Duration::from_secs(30))
        .serve_connection(TokioIo::new(tls), service);
    // Dropping `served` closes the socket without writing anything more.
    tokio::select! {
        r = served => {
            if let Err(e) = r {
                tracing::debug!("connection error: {e}");
            }
        }
        _ = kill.notified() => tracing::debug!("connection dropped after applying a request (fault)"),
        _ = shutdown.changed() => {}
    }
}

async fn accept_redirect(
    listener: TcpListener,
    base_url: String,
    mut shutdown: watch::Receiver<bool>,
) {
    loop {
        let (stream, _) = tokio::select! {
            r = listener.accept() => match r {
                Ok(x) => x,
                Err(e) => {
                    tracing::warn!("accept failed: {e}");
                    tokio::time::sleep(Duration::from_millis(50)).await;
                    continue;
                }
            },
            _ = shutdown.changed() => return,
        };
        let base_url = base_url.clone();
        let mut shutdown = shutdown.clone();
        tokio::spawn(async move {
            let service = service_fn(move |req: Request<Incoming>| {
                let location = format!(
                    "{base_url}{}",
                    req.uri().path_and_query().map_or("/", |p| p.as_str())
                );
                async move { Ok::<_, Infallible>(redirect_response(&location)) }
            });
            let served = http1::Builder::new()
                .timer(TokioTimer::new())
                .header_read_timeout(Duration::from_secs(30))
                .serve_connection(TokioIo::new(stream), service);
            tokio::select! {
                _ = served => {}
                _ = shutdown.changed() => {}
            }
        });
    }
}

fn redirect_response(location: &str) -> Response<Full<Bytes>> {
    let body = format!(
        "<html><head><title>301 Moved Permanently</title></head><body>\
         <h1>Moved Permanently</h1><a href=\"{location}\">{location}</a></body></html>\n"
    );
    let mut resp = Response::new(Full::new(Bytes::from(body)));
    *resp.status_mut() = StatusCode::MOVED_PERMANENTLY;
    let h = resp.headers_mut();
    if let Ok(v) = HeaderValue::from_str(location) {
        h.insert(header::LOCATION, v);
    }
    h.insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("text/html; charset=utf-8"),
    );
    resp
}

// ---- requests ----

/// One request on the HTTPS listener: control API, CORS preflight, or partner API.
async fn handle(conn: Conn, req: Request<Incoming>) -> Response<Full<Bytes>> {
    let (parts, body) = req.into_parts();
    let path = parts.uri.path().to_owned();
    let raw_query = parts.uri.query().unwrap_or("").to_owned();
    let method = parts.method.clone();

    if path == control::PREFIX || path.starts_with(&format!("{}/", control::PREFIX)) {
        if !conn.peer.ip().is_loopback() {
            return json_response(
                403,
                &json!({ "error": "the control API answers loopback peers only" }),
                None,
            );
        }
        let body = match read_body(body).await {
            Ok(b) => b,
            Err(status) => {
                return json_response(status, &json!({ "error": "body too large" }), None);
            }
        };
        let shared = conn.shared.clone();
        let m = method.as_str().to_owned();
        let answer =
            tokio::task::spawn_blocking(move || control::handle_http(&shared, &m, &path, &body))
                .await
                .unwrap_or_else(|e| (500, json!({ "error": format!("control call failed: {e}") })));
        return json_response(answer.0, &answer.1, None);
    }

    if method == Method::OPTIONS {
        let now = {
            let mut w = conn.shared.lock();
            let now = w.clock.now();
            w.log_call(CallRecord {
                time: now,
                method: method.to_string(),
                path,
                query: raw_query,
                status: 204,
                account: None,
                billed: false,
                fault: None,
                delivered: true,
            });
            now
        };
        return preflight_response(now);
    }

    let _in_flight = conn.shared.begin_call();
    let body = match read_body(body).await {
        Ok(b) => b,
        Err(status) => {
            let mut w = conn.shared.lock();
            let now = w.clock.now();
            w.log_call(CallRecord {
                time: now,
                method: method.to_string(),
                path,
                query: raw_query,
                status,
                account: None,
                billed: false,
                fault: None,
                delivered: true,
            });
            let resp = ApiResponse::json(status, json!({ "error": "Request body too large" }));
            return api_response(resp, now);
        }
    };
    let query = parse_query(&raw_query);
    let api_req = ApiRequest {
        method: method.clone(),
        path: path.clone(),
        query,
        headers: parts.headers,
        body,
    };

    let shared = conn.shared.clone();
    // The state does CPU work (key parsing, signing, ZIPs): keep it off the reactor threads.
    let outcome = tokio::task::spawn_blocking(move || apply(&shared, api_req, raw_query)).await;
    let Ok((response, fault, mutated)) = outcome else {
        return json_response(500, &json!({ "error": "sandbox internal error" }), None);
    };
    if mutated {
        let shared = conn.shared.clone();
        let _ = tokio::task::spawn_blocking(move || shared.persist(false)).await;
    }
    match fault {
        Some(FaultKind::DropAfterApply) => {
            conn.kill.notify_one();
            std::future::pending::<()>().await;
            unreachable!("the connection is dropped before this resolves")
        }
        Some(FaultKind::Delay { ms }) => {
            tokio::time::sleep(Duration::from_millis(ms)).await;
            response
        }
        _ => response,
    }
}

/// Under the lock: fault, tick, dispatch, post-processing, call log. Returns the HTTP answer,
/// the fault that applied, and whether the request may have changed the state.
fn apply(
    shared: &Shared,
    req: ApiRequest,
    raw_query: String,
) -> (Response<Full<Bytes>>, Option<FaultKind>, bool) {
    let mut w = shared.lock();
    let now = w.clock.now();
    let fault = w.faults.take(req.method.as_str(), &req.path);
    let mut record = CallRecord {
        time: now,
        method: req.method.to_string(),
        path: req.path.clone(),
        query: raw_query,
        status: 0,
        account: None,
        billed: false,
        fault: fault.as_ref().map(|f| f.name().to_owned()),
        delivered: !matches!(fault, Some(FaultKind::DropAfterApply)),
    };

    if let Some(FaultKind::Status { status }) = fault {
        record.status = status;
        w.log_call(record);
        return (status_fault_response(status, now), fault, false);
    }
    if let Some(FaultKind::RotateToken { login }) = &fault {
        let state = &mut w.state;
        match guarded(|| state.rotate_token(login)) {
            Ok(Ok(())) => {}
            Ok(Err(e)) => tracing::warn!("rotate_token fault for '{login}': {e}"),
            Err(e) => tracing::error!("rotate_token fault for '{login}' panicked: {e}"),
        }
    }

    w.tick(now);
    let w = &mut *w;
    let (state, ca) = (&mut w.state, &w.ca);
    let mut resp = match guarded(|| state.dispatch(&req, now, ca)) {
        Ok(r) => r,
        Err(e) => {
            tracing::error!("dispatch of {} {} panicked: {e}", req.method, req.path);
            ApiResponse::json(
                500,
                json!({ "error": format!("sandbox internal error: {e}") }),
            )
        }
    };

    match &fault {
        Some(FaultKind::MalformedJson) => {
            resp.status = 200;
            resp.body = ResponseBody::Text(malformed_json(&resp.body));
        }
        Some(FaultKind::HtmlPage) => {
            resp.status = 200;
            resp.body = ResponseBody::Bytes {
                content_type: "text/html; charset=utf-8".into(),
                filename: None,
                data: Bytes::from_static(MAINTENANCE_PAGE.as_bytes()),
            };
        }
        Some(FaultKind::WrongTypes) => {
            resp.status = 200;
            let real = match &resp.body {
                ResponseBody::Json(v) => v.clone(),
                _ => json!({ "success": true }),
            };
            resp.body = ResponseBody::Json(wrong_types(real));
        }
        Some(FaultKind::CaUnreachable) if resp.status == 200 => {
            resp.status = 422;
            resp.headers.clear();
            resp.body = ResponseBody::Json(json!({
                "success": false,
                "error": "Failed to retrieve DCV status: the certificate authority cannot be reached, try again later",
            }));
        }
        Some(FaultKind::BundleFailure { failure }) if resp.status == 200 => {
            resp.status = 422;
            resp.headers.clear();
            resp.body = ResponseBody::Json(json!({ "errors": failure.message() }));
        }
        Some(FaultKind::HostileBundle { hostile }) if resp.status == 200 => {
            match hostile_body(w, &req.path, *hostile, now) {
                Ok(data) => {
                    let filename = match &resp.body {
                        ResponseBody::Bytes { filename, .. } => filename.clone(),
                        _ => None,
                    };
                    resp.body = ResponseBody::Bytes {
                        content_type: "application/zip".into(),
                        filename,
                        data: Bytes::from(data),
                    };
                }
                Err(e) => tracing::error!("hostile bundle for {}: {e}", req.path),
            }
        }
        _ => {}
    }

    record.status = resp.status;
    record.account = resp.account.clone();
    record.billed = resp.billed;
    w.log_call(record);
    let mutated = req.method != Method::GET && req.method != Method::HEAD;
    let malformed = matches!(fault, Some(FaultKind::MalformedJson));
    let mut http = api_response(resp, now);
    if malformed {
        http.headers_mut().insert(
            header::CONTENT_TYPE,
            HeaderValue::from_static("application/json; charset=utf-8"),
        );
    }
    (http, fault, mutated)
}

fn hostile_body(
    w: &World,
    path: &str,
    kind: bundle::HostileKind,
    now: OffsetDateTime,
) -> Result<Vec<u8>, String> {
    let id = certificate_id_in(path).ok_or_else(|| "no certificate ID in the path".to_owned())?;
    let input = guarded(|| w.state.hostile_input(id, now, &w.ca))?
        .ok_or_else(|| format!("certificate {id} has no issued certificate"))?;
    guarded(|| bundle::hostile_bundle(kind, &input.borrow(), &w.ca))?.map_err(|e| e.to_string())
}

/// `12` in `/api/v1/ssl_certificates/12/...`.
fn certificate_id_in(path: &str) -> Option<u64> {
    path.strip_prefix("/api/v1/ssl_certificates/")?
        .split('/')
        .next()?
        .parse()
        .ok()
}

/// The first half of the JSON the call would have answered: never parses.
/// What a proxy in front of the service answers during maintenance.
const MAINTENANCE_PAGE: &str = "<!DOCTYPE html>\n<html><head><title>503 Service Temporarily \
Unavailable</title></head><body><h1>Maintenance</h1><p>We will be back shortly.</p></body>\
</html>\n";

/// `value` with every scalar of the wrong type: numbers become strings, strings numbers,
/// booleans strings, an empty array a string (null stays null; arrays and objects are walked).
fn wrong_types(value: Value) -> Value {
    match value {
        Value::Array(items) if items.is_empty() => Value::String("[]".into()),
        Value::Number(n) => Value::String(format!("{n}")),
        Value::String(_) => Value::from(7),
        Value::Bool(b) => Value::String(b.to_string()),
        Value::Array(items) => Value::Array(items.into_iter().map(wrong_types).collect()),
        Value::Object(map) => {
            Value::Object(map.into_iter().map(|(k, v)| (k, wrong_types(v))).collect())
        }
        Value::Null => Value::Null,
    }
}

fn malformed_json(body: &ResponseBody) -> String {
    let full = match body {
        ResponseBody::Json(v) => v.to_string(),
        _ => String::new(),
    };
    if full.len() < 4 || !(full.starts_with('{') || full.starts_with('[')) {
        return "{\"success\": tru".to_owned();
    }
    let mut cut = full.len() / 2;
    while !full.is_char_boundary(cut) {
        cut -= 1;
    }
    full[..cut.max(1)].to_owned()
}

async fn read_body(body: Incoming) -> Result<Bytes, u16> {
    match Limited::new(body, MAX_REQUEST_BODY).collect().await {
        Ok(c) => Ok(c.to_bytes()),
        Err(e) => {
            if e.downcast_ref::<http_body_util::LengthLimitError>()
                .is_some()
            {
                Err(413)
            } else {
                Err(400)
            }
        }
    }
}

/// Decoded query pairs (`+` as space, percent-decoding), repeated keys kept in order.
fn parse_query(raw: &str) -> Vec<(String, String)> {
    if raw.is_empty() {
        return Vec::new();
    }
    serde_urlencoded::from_str::<Vec<(String, String)>>(raw).unwrap_or_else(|_| {
        raw.split('&')
            .filter(|s| !s.is_empty())
            .map(|pair| {
                let (k, v) = pair.split_once('=').unwrap_or((pair, ""));
                (k.to_owned(), v.to_owned())
            })
            .collect()
    })
}

// ---- responses ----

fn with_cors(resp: &mut Response<Full<Bytes>>, now: OffsetDateTime) {
    let h = resp.headers_mut();
    h.insert(
        header::ACCESS_CONTROL_ALLOW_ORIGIN,
        HeaderValue::from_static("*"),
    );
    h.insert(
        header::ACCESS_CONTROL_EXPOSE_HEADERS,
        HeaderValue::from_static("X-Pagination, Content-Disposition"),
    );
    if let Ok(v) = HeaderValue::from_str(&clock::http_date(now)) {
        h.insert(header::DATE, v);
    }
}

fn preflight_response(now: OffsetDateTime) -> Response<Full<Bytes>> {
    let mut resp = Response::new(Full::new(Bytes::new()));
    *resp.status_mut() = StatusCode::NO_CONTENT;
    with_cors(&mut resp, now);
    let h = resp.headers_mut();
    h.insert(
        header::ACCESS_CONTROL_ALLOW_METHODS,
        HeaderValue::from_static("GET, POST, OPTIONS"),
    );
    h.insert(
        header::ACCESS_CONTROL_ALLOW_HEADERS,
        HeaderValue::from_static("X-AUTH-TOKEN, X-PUBLIC-TOKEN, Content-Type"),
    );
    h.insert(
        header::ACCESS_CONTROL_MAX_AGE,
        HeaderValue::from_static("86400"),
    );
    resp
}

fn status_fault_response(status: u16, now: OffsetDateTime) -> Response<Full<Bytes>> {
    let code = StatusCode::from_u16(status).unwrap_or(StatusCode::SERVICE_UNAVAILABLE);
    let reason = code.canonical_reason().unwrap_or("Error");
    let body = format!(
        "<html><head><title>{status} {reason}</title></head><body><h1>{status} {reason}</h1></body></html>\n"
    );
    let mut resp = Response::new(Full::new(Bytes::from(body)));
    *resp.status_mut() = code;
    resp.headers_mut().insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("text/html; charset=utf-8"),
    );
    with_cors(&mut resp, now);
    resp
}

/// An [`ApiResponse`] as HTTP, with CORS and the virtual `Date`.
fn api_response(resp: ApiResponse, now: OffsetDateTime) -> Response<Full<Bytes>> {
    let (content_type, disposition, data): (String, Option<String>, Bytes) = match resp.body {
        ResponseBody::Json(v) => (
            "application/json; charset=utf-8".into(),
            None,
            Bytes::from(v.to_string()),
        ),
        ResponseBody::Bytes {
            content_type,
            filename,
            data,
        } => (content_type, filename, data),
        ResponseBody::Empty => (String::new(), None, Bytes::new()),
        ResponseBody::Text(t) => ("text/plain; charset=utf-8".into(), None, Bytes::from(t)),
    };
    let mut http = Response::new(Full::new(data));
    *http.status_mut() = StatusCode::from_u16(resp.status).unwrap_or_else(|_| {
        tracing::error!("state answered an invalid status {}", resp.status);
        StatusCode::INTERNAL_SERVER_ERROR
    });
    let h = http.headers_mut();
    if !content_type.is_empty() {
        match HeaderValue::from_str(&content_type) {
            Ok(v) => {
                h.insert(header::CONTENT_TYPE, v);
            }
            Err(_) => tracing::error!("invalid content type '{content_type}'"),
        }
    }
    if let Some(name) = disposition {
        let value = format!(
            "attachment; filename=\"{}\"",
            name.replace(['"', '\\'], "_")
        );
        if let Ok(v) = HeaderValue::from_str(&value) {
            h.insert(header::CONTENT_DISPOSITION, v);
        }
    }
    for (name, value) in resp.headers {
        match (
            http::HeaderName::from_bytes(name.as_bytes()),
            HeaderValue::from_str(&value),
        ) {
            (Ok(n), Ok(v)) => {
                h.append(n, v);
            }
            _ => tracing::error!("state answered an invalid header '{name}: {value}'"),
        }
    }
    with_cors(&mut http, now);
    http
}

fn json_response(status: u16, value: &Value, now: Option<OffsetDateTime>) -> Response<Full<Bytes>> {
    let mut resp = Response::new(Full::new(Bytes::from(value.to_string())));
    *resp.status_mut() = StatusCode::from_u16(status).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
    resp.headers_mut().insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("application/json; charset=utf-8"),
    );
    if let Some(now) = now {
        with_cors(&mut resp, now);
    }
    resp
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn malformed_json_never_parses() {
        for v in [
            json!({ "order": 12, "certificate": 13, "token": "abc" }),
            json!([1, 2, 3]),
            json!({}),
            json!(null),
        ] {
            let s = malformed_json(&ResponseBody::Json(v));
            assert!(serde_json::from_str::<Value>(&s).is_err(), "{s}");
        }
    }

    #[test]
    fn wrong_types_changes_every_value() {
        let real =
            json!({ "certificate": 13, "status": "issued", "ok": true, "list": [], "n": null });
        assert_eq!(
            wrong_types(real),
            json!({ "certificate": "13", "status": 7, "ok": "true", "list": "[]", "n": null })
        );
        assert_eq!(wrong_types(json!([{ "id": 1 }])), json!([{ "id": "1" }]));
    }

    #[test]
    fn query_keeps_order_and_decodes() {
        assert_eq!(
            parse_query("a=1&b=x+y&a=%2F"),
            vec![
                ("a".to_owned(), "1".to_owned()),
                ("b".to_owned(), "x y".to_owned()),
                ("a".to_owned(), "/".to_owned())
            ]
        );
        assert!(parse_query("").is_empty());
    }

    #[test]
    fn certificate_id_from_path() {
        assert_eq!(
            certificate_id_in("/api/v1/ssl_certificates/42/download_bundle"),
            Some(42)
        );
        assert_eq!(certificate_id_in("/api/v1/products"), None);
    }

    #[test]
    fn unspecified_listen_shows_loopback() {
        assert_eq!(
            url_authority(SocketAddr::from(([0, 0, 0, 0], 8443))),
            "127.0.0.1:8443"
        );
    }
}
