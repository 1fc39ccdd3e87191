//! `ServerKind`: the web server a certificate is installed for (`server` in the
//! configuration); it decides which bundle files are read and how the server is reloaded.

use std::fmt;
use std::str::FromStr;

use serde::{Deserialize, Serialize};

/// The web server a certificate is installed for; it decides which bundle files are read.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum ServerKind {
    /// `nginx/fullchain.crt` (server certificate first, then the chain).
    Nginx,
    /// `apache/certificate.crt` (the server certificate) and `apache/ca_bundle.crt` (chain).
    Apache,
    /// `pem/fullchain.pem`, cross-checked with the other `pem/` files.
    None,
}

impl ServerKind {
    /// The configuration string: `nginx`, `apache` or `none`.
    pub fn as_str(self) -> &'static str {
        match self {
            ServerKind::Nginx => "nginx",
            ServerKind::Apache => "apache",
            ServerKind::None => "none",
        }
    }
}

impl fmt::Display for ServerKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl FromStr for ServerKind {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s {
            "nginx" => Ok(ServerKind::Nginx),
            "apache" => Ok(ServerKind::Apache),
            "none" => Ok(ServerKind::None),
            other => Err(format!(
                "unknown server {other:?} (expected nginx, apache or none)"
            )),
        }
    }
}
