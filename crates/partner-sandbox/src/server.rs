//! The transport: `Sandbox::start` runs an HTTPS server (rustls, HTTP/1.1) on its own tokio
//! runtime and hands back a [`SandboxHandle`]. Each partner-API request becomes an
//! [`ApiRequest`](crate::wire::ApiRequest) for `State::dispatch`; around that sit CORS, the
//! `Date` header, the call log and fault injection. `/_sandbox/` is the control API (loopback
//! only), an optional plain-HTTP listener redirects everything to HTTPS, another serves the
//! CRLs (`crate::crl`), and the validator fetches DCV files in the background.
//!
//! Layout: this file starts and stops the server; `config` (what it starts with), `handle`
//! (the running sandbox), `listen` (listeners, TLS, connections), `crl_listen` (the CRLs), `dispatch` (one request),
//! `request` (body and parameters), `answers` (HTTP answers), `fault_answers` (faults that
//! rewrite an answer).

use std::net::TcpListener as StdTcpListener;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use time::OffsetDateTime;
use tokio::net::TcpListener;
use tokio::sync::watch;

use crate::ca::{self, Authority};
use crate::clock::Clock;
use crate::faults::Faults;
use crate::state::State;
use crate::validator;
use crate::world::{Shared, World, guarded, load_saved};

mod answers;
mod config;
mod crl_listen;
mod dispatch;
mod fault_answers;
mod handle;
mod listen;
mod request;

pub use config::{SandboxConfig, SandboxError};
pub use handle::SandboxHandle;

use listen::{accept_https, accept_redirect, bind, tls_config, url_authority};

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
        let mut authority = Authority::load_or_generate(&data_dir)?;
        // The one CA file a client of the sandbox names: the API's TLS anchor, then the root
        // of the certificates it issues (what a client checks installed chains against).
        let ca_file = data_dir.join("api-ca.pem");
        std::fs::write(
            &ca_file,
            format!("{}{}", identity.ca_pem, authority.root_pem()),
        )
        .map_err(|source| SandboxError::DataDir {
            path: ca_file,
            source,
        })?;
        let tls = tls_config(identity)?;
        let crl_listener = bind(config.crl_listen)?;
        let crl_addr = crl_listener
            .local_addr()
            .map_err(|source| SandboxError::Listen {
                addr: config.crl_listen,
                source,
            })?;
        authority.set_crl_base(format!("http://{}", url_authority(crl_addr)));
        let shared = Arc::new(open_world(&config, &data_dir, authority)?);

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
        let thread = spawn_server(
            listener,
            [http_listener, Some(crl_listener)],
            tls,
            shared.clone(),
            base_url.clone(),
            shutdown_rx,
        )?;

        cleanup.path = None;
        Ok(SandboxHandle {
            shared,
            addr,
            http_addr,
            crl_addr,
            base_url,
            data_dir,
            owned_dir,
            shutdown: shutdown_tx,
            thread: Some(thread),
        })
    }
}

/// The world a sandbox starts with: the saved state when persisting and `state.json` exists
/// (its clock resumes at the later of the saved and the start time), else a new state.
fn open_world(
    config: &SandboxConfig,
    data_dir: &Path,
    authority: Authority,
) -> Result<Shared, SandboxError> {
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
        crls: crate::crl::Crls::default(),
        dcv: crate::balancer::DcvPorts::new(
            config.dcv_http_ports.clone(),
            config.dcv_https_ports.clone(),
            config.dcv_balance,
            config.seed.unwrap_or(config.state.seed),
        ),
    };
    if config.instant {
        let state = &mut world.state;
        guarded(|| state.set_instant(true))
            .map_err(|e| SandboxError::Start(format!("state: {e}")))?;
    }
    Ok(Shared::new(world, config.persist.then_some(state_path)))
}

/// Runs [`serve`] on a multi-thread runtime of its own, on a background thread; returns that
/// thread once the listeners are up.
fn spawn_server(
    listener: StdTcpListener,
    plain: [Option<StdTcpListener>; 2],
    tls: rustls::ServerConfig,
    shared: Arc<Shared>,
    base_url: String,
    shutdown: watch::Receiver<bool>,
) -> Result<std::thread::JoinHandle<()>, SandboxError> {
    let (ready_tx, ready_rx) = std::sync::mpsc::channel::<Result<(), SandboxError>>();
    let thread = std::thread::Builder::new()
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
                    let _ = ready_tx.send(Err(SandboxError::Start(format!("tokio runtime: {e}"))));
                    return;
                }
            };
            runtime.block_on(serve(
                listener, plain, tls, shared, base_url, shutdown, ready_tx,
            ));
            runtime.shutdown_timeout(Duration::from_secs(2));
        })
        .map_err(|e| SandboxError::Start(format!("thread: {e}")))?;
    match ready_rx.recv() {
        Ok(Ok(())) => Ok(thread),
        Ok(Err(e)) => {
            let _ = thread.join();
            Err(e)
        }
        Err(_) => {
            let _ = thread.join();
            Err(SandboxError::Start("the server thread died".into()))
        }
    }
}

/// Runs the listeners and the validator until shutdown; reports readiness once listening.
async fn serve(
    listener: StdTcpListener,
    plain: [Option<StdTcpListener>; 2],
    tls: rustls::ServerConfig,
    shared: Arc<Shared>,
    base_url: String,
    mut shutdown: watch::Receiver<bool>,
    ready: std::sync::mpsc::Sender<Result<(), SandboxError>>,
) {
    let [http_listener, crl_listener] = plain;
    let listeners = (|| {
        let l = TcpListener::from_std(listener)?;
        let h = http_listener.map(TcpListener::from_std).transpose()?;
        let c = crl_listener.map(TcpListener::from_std).transpose()?;
        Ok::<_, std::io::Error>((l, h, c))
    })();
    let (listener, http_listener, crl_listener) = match listeners {
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
    if let Some(l) = crl_listener {
        tasks.spawn(crl_listen::accept_crl(l, shared.clone(), shutdown.clone()));
    }
    tasks.spawn(validator::run(shared, shutdown.clone()));
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
