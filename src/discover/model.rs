//! What `discover` reads and proposes: the virtual hosts as the web server configures them,
//! the names left out, the proposed certificates. Imports nothing of `discover`.

use std::collections::BTreeMap;
use std::fmt;
use std::path::PathBuf;

use serde::Serialize;

/// The document root proposed for names whose port 80 does not serve the validation path
/// from a document root yet: the web server is to serve `/.well-known/pki-validation/` from
/// here (the proposal's note says how).
pub(crate) const VALIDATION_ROOT: &str = "/var/www/cert-agent";

/// A place in a web server's configuration.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct At {
    pub file: String,
    pub line: usize,
}

impl fmt::Display for At {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}:{}", self.file, self.line)
    }
}

/// A dump that cannot be read.
#[derive(Debug, thiserror::Error)]
pub enum DiscoverError {
    #[error("{} line {}: {message}", at.file, at.line)]
    Parse { at: At, message: String },
    #[error("{0}")]
    Other(String),
}

/// One `listen` (nginx) or `<VirtualHost>` address (Apache).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct Listen {
    /// The address part (`127.0.0.1`, `[::]`, `*`, a name); `None` when only a port is given.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub address: Option<String>,
    pub port: u16,
    pub ssl: bool,
    /// `default_server` / `_default_`.
    pub default: bool,
}

/// Whether `/.well-known/pki-validation/` of a virtual host is served from a document root.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Validation {
    /// From this document root.
    Served(PathBuf),
    /// Not, and why (a redirect, a `return`, a proxy, no root).
    Blocked(String),
    /// Cannot be told from the configuration, and why (a regular expression the `regex`
    /// crate cannot evaluate, a rewritten URI): to be checked by hand.
    Unknown(String),
}

impl Default for Validation {
    fn default() -> Self {
        Self::Blocked("not read".into())
    }
}

/// A virtual host as the web server configures it.
#[derive(Debug, Clone, Default, Serialize)]
pub struct Vhost {
    pub at: At,
    pub server: &'static str,
    pub names: Vec<String>,
    pub listens: Vec<Listen>,
    /// Serves TLS.
    pub tls: bool,
    pub cert_file: Option<PathBuf>,
    pub key_file: Option<PathBuf>,
    /// Apache `SSLCertificateChainFile`.
    pub chain_file: Option<PathBuf>,
    pub root: Option<PathBuf>,
    pub validation: Validation,
    /// What could not be read from the configuration and is to be checked by hand.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub notes: Vec<String>,
    /// Apache: the macro use that made it (mod_macro), with the values put in.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub from_macro: Option<String>,
}

/// The certificate a site serves today.
#[derive(Debug, Clone, Serialize)]
pub struct Existing {
    pub subject: String,
    pub issuer: String,
    pub names: Vec<String>,
    #[serde(with = "time::serde::rfc3339")]
    pub not_after: time::OffsetDateTime,
    pub self_signed: bool,
    /// The key file exists on this host and belongs to the certificate.
    pub key_on_host: bool,
    /// Why the key file the site names is not the certificate's key (unreadable, not a key,
    /// another key); its path is then not kept.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub key_problem: Option<String>,
}

/// A name that cannot be managed, and why.
#[derive(Debug, Clone, Serialize)]
pub struct Skipped {
    pub name: String,
    pub at: At,
    pub reason: String,
}

/// A proposed `[[certificate]]`.
#[derive(Debug, Clone, Serialize)]
pub struct Proposal {
    pub name: String,
    pub server: &'static str,
    pub domains: Vec<String>,
    /// Document root per domain (for HTTP validation).
    pub webroot: BTreeMap<String, PathBuf>,
    pub cert_file: Option<PathBuf>,
    pub key_file: Option<PathBuf>,
    pub chain_file: Option<PathBuf>,
    /// The site's certificate and key files are written in place by cert-agent. `false` when
    /// they are symbolic links (certbot's `live/` directory): cert-agent never writes through
    /// a link, so it installs into its own files and the site is pointed at them.
    pub keep_paths: bool,
    /// The certificate the site serves today, when its file could be read.
    pub existing: Option<Existing>,
    /// Why the existing certificate could not be read.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub existing_error: Option<String>,
    /// Where this host's TLS server answers for these names (`host:port`), when that is not
    /// the default `127.0.0.1:443`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub verify_address: Option<String>,
    /// The configuration test and reload of the server the report came from, when that is
    /// not the system's (an nginx started with `-c` another main file).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub configtest_command: Option<Vec<String>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub reload_command: Option<Vec<String>>,
    /// The virtual hosts it covers.
    pub vhosts: Vec<At>,
    /// Apache: the macro uses that made its virtual hosts (their paths are the ones each use
    /// makes; the macro needs no edit).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub from_macro: Vec<String>,
    /// What needs doing before it works (a redirect in the way, no TLS server yet, ...).
    pub notes: Vec<String>,
}

/// What `discover` found.
#[derive(Debug, Clone, Serialize)]
pub struct Discovery {
    pub vhosts: Vec<Vhost>,
    pub proposals: Vec<Proposal>,
    pub skipped: Vec<Skipped>,
}

/// A file the web server's configuration names for TLS (a certificate, key, chain, trusted
/// CA or CRL file), absolute; `*` where the configuration has a variable.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct NamedFile {
    pub path: PathBuf,
    pub at: At,
}

impl NamedFile {
    /// `arg` as the server reads it: relative to `base`, a variable (`$name`, `${name}`)
    /// standing for any name.
    pub fn new(base: &std::path::Path, arg: &str, at: At) -> Self {
        let mut text = String::new();
        let mut chars = arg.chars().peekable();
        while let Some(c) = chars.next() {
            if c != '$' {
                text.push(c);
                continue;
            }
            text.push('*');
            if chars.peek() == Some(&'{') {
                for c in chars.by_ref() {
                    if c == '}' {
                        break;
                    }
                }
            } else {
                while chars
                    .peek()
                    .is_some_and(|c| c.is_ascii_alphanumeric() || *c == '_')
                {
                    chars.next();
                }
            }
        }
        // A base that is not absolute (a dump naming its main file by a relative path: not
        // what a server prints) is taken from the root, so every named file is absolute.
        let path = std::path::Path::new("/").join(base).join(text);
        Self { path, at }
    }

    /// Whether this names `file` (the same path, a pattern matching it, or the same file
    /// reached through another path).
    pub fn names(&self, file: &std::path::Path) -> bool {
        let text = self.path.to_string_lossy();
        if text.contains('*') {
            return crate::fsutil::glob_matches(text.as_bytes(), file.to_string_lossy().as_bytes());
        }
        crate::fsutil::same_file(&self.path, file)
    }
}
