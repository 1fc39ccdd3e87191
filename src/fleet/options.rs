//! How a host reaches its fleet's etcd cluster: endpoints, TLS (the members' CA, the client
//! certificate and its private key), the etcd user, the prefix, the lease.

use std::path::PathBuf;
use std::time::Duration;

use etcd_client::{Certificate, Identity, TlsOptions};

use crate::values::Secret;

/// How a host reaches the fleet's etcd cluster.
#[derive(Debug, Clone)]
pub struct FleetOptions {
    /// Client URLs of the members (`https://10.0.0.1:2379`, …).
    pub endpoints: Vec<String>,
    /// CA of the members' server certificates (with `https://` endpoints).
    pub ca_file: Option<PathBuf>,
    /// Client certificate and key (etcd's `--client-cert-auth`).
    pub cert_file: Option<PathBuf>,
    pub key_file: Option<PathBuf>,
    /// etcd user and password (etcd's authentication).
    pub user: Option<String>,
    pub password: Option<Secret>,
    /// Key prefix of this fleet, ending in `/`.
    pub prefix: String,
    /// This host's name in the fleet.
    pub host: String,
    /// Lease of the leader.
    pub lease_ttl: Duration,
    /// Limit of one request to etcd.
    pub request_timeout: Duration,
}

impl FleetOptions {
    /// Options with the defaults: prefix `/cert-agent/`, lease 15 s, requests 5 s.
    pub fn new(endpoints: Vec<String>, host: impl Into<String>) -> Self {
        Self {
            endpoints,
            ca_file: None,
            cert_file: None,
            key_file: None,
            user: None,
            password: None,
            prefix: DEFAULT_PREFIX.to_owned(),
            host: host.into(),
            lease_ttl: Duration::from_secs(15),
            request_timeout: Duration::from_secs(5),
        }
    }
}

/// The default key prefix.
pub(crate) const DEFAULT_PREFIX: &str = "/cert-agent/";

/// The TLS settings of `opts`; the client key (at most 64 KiB) must be private to its owner.
/// The error names the key and the file.
pub(super) fn tls(opts: &FleetOptions) -> Result<TlsOptions, String> {
    let read = |what: &str, p: &PathBuf| {
        std::fs::read(p).map_err(|e| {
            format!(
                "[fleet] {what} {}: {}",
                p.display(),
                crate::fsutil::io_text(&e)
            )
        })
    };
    let mut tls = TlsOptions::new();
    if let Some(ca) = &opts.ca_file {
        tls = tls.ca_certificate(Certificate::from_pem(read("ca_file", ca)?));
    }
    match (&opts.cert_file, &opts.key_file) {
        (Some(c), Some(k)) => {
            tls = tls.identity(Identity::from_pem(
                read("cert_file", c)?,
                crate::fsutil::read_private(k, 64 * 1024)
                    .map_err(|m| format!("[fleet] key_file '{}': {m}", k.display()))?,
            ));
        }
        (None, None) => {}
        _ => {
            return Err("[fleet] cert_file and key_file go together".into());
        }
    }
    Ok(tls)
}
