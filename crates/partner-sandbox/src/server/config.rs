//! What a sandbox is started with ([`SandboxConfig`] and its builder methods) and why it may
//! fail to start ([`SandboxError`]).

use std::net::SocketAddr;
use std::path::PathBuf;

use time::OffsetDateTime;

use crate::balancer::DcvBalance;
use crate::ca;
use crate::state::StateConfig;

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
    /// Ports on 127.0.0.1 where the validator fetches HTTP_CSR_HASH files (default 80).
    pub dcv_http_ports: Vec<u16>,
    /// Ports on 127.0.0.1 where the validator fetches HTTPS_CSR_HASH files (default 443).
    pub dcv_https_ports: Vec<u16>,
    /// How the validator picks among several ports (default round robin; random draws use
    /// `seed`).
    pub dcv_balance: DcvBalance,
    /// Optional plain-HTTP listener that answers every request with 301 to the HTTPS URL.
    pub http_listen: Option<SocketAddr>,
    /// Plain-HTTP listener serving the CRLs (default `127.0.0.1:0`); issued certificates name
    /// it as their CRL distribution point.
    pub crl_listen: SocketAddr,
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
            dcv_http_ports: vec![80],
            dcv_https_ports: vec![443],
            dcv_balance: DcvBalance::RoundRobin,
            http_listen: None,
            crl_listen: SocketAddr::from(([127, 0, 0, 1], 0)),
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
        self.dcv_http_ports = vec![port];
        self
    }
    pub fn dcv_https_port(mut self, port: u16) -> Self {
        self.dcv_https_ports = vec![port];
        self
    }
    /// Several HTTP ports behind the balancer (one per host of a fleet).
    pub fn dcv_http_ports(mut self, ports: impl Into<Vec<u16>>) -> Self {
        self.dcv_http_ports = ports.into();
        self
    }
    /// Several HTTPS ports behind the balancer.
    pub fn dcv_https_ports(mut self, ports: impl Into<Vec<u16>>) -> Self {
        self.dcv_https_ports = ports.into();
        self
    }
    pub fn dcv_balance(mut self, balance: DcvBalance) -> Self {
        self.dcv_balance = balance;
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
