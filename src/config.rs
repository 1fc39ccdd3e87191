//! Configuration: the TOML contract of DESIGN.md (`[api]`, `[agent]`, `[defaults]`,
//! `[[certificate]]`), its defaults, and validation whose every message names the file, the
//! line and the key ("config.toml line 14: certificate 'www': unknown key `webrot` (did you
//! mean `webroot`?)").
//!
//! The file is read with `toml`'s spanned document (`DeTable`) rather than serde structs, so
//! that every problem, including unknown keys and type errors, is reported with its line, and
//! all problems are reported at once. `[defaults]` values are merged into each certificate;
//! [`Config::render`] prints the effective result with secrets masked (`config check`).
//!
//! Uses the API client's types (`Secret`, `Decimal`, `DcvType`, `ClientOptions`), nothing else
//! of ours.

use std::collections::{BTreeMap, HashMap};
use std::ffi::OsString;
use std::fmt;
use std::net::SocketAddr;
use std::ops::Range;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::time::Duration;

use serde::{Serialize, Serializer};
use toml::Spanned;
use toml::de::{DeTable, DeValue};

use crate::api::{self, DcvType, Decimal, Secret};

/// Default configuration file.
pub const DEFAULT_CONFIG_PATH: &str = "/etc/cert-agent/config.toml";
/// Environment variable naming the configuration file (below `--config`).
pub const CONFIG_ENV: &str = "CERT_AGENT_CONFIG";

/// Default `agent.state_dir`.
pub const DEFAULT_STATE_DIR: &str = "/var/lib/cert-agent";
/// Default `agent.renew_before_days`.
pub const DEFAULT_RENEW_BEFORE_DAYS: u32 = 30;
/// Default `agent.poll_interval_secs` ("at most once every 5 minutes per certificate").
pub const DEFAULT_POLL_INTERVAL_SECS: u64 = 300;
/// Default `agent.concurrency` (certificates worked on at once).
pub const DEFAULT_CONCURRENCY: u32 = 4;
/// Default `agent.serve_user`: the user `cert-agent serve` runs as after binding its ports.
pub const DEFAULT_SERVE_USER: &str = "nobody";
/// Default `days` of an order (one year).
pub const DEFAULT_DAYS: u32 = 365;
/// Default `listen` of the standalone DCV server.
pub const DEFAULT_LISTEN: &str = "0.0.0.0:80";
/// Default `verify_address` when a web server is configured.
pub const DEFAULT_VERIFY_ADDRESS: &str = "127.0.0.1:443";
/// Default `api.retries` (repeats of idempotent calls after the first attempt).
pub const DEFAULT_RETRIES: u32 = 3;

/// The configuration file to use: `--config PATH`, else `$CERT_AGENT_CONFIG`, else
/// [`DEFAULT_CONFIG_PATH`].
pub fn resolve_config_path(cli: Option<&Path>) -> PathBuf {
    resolve_config_path_from(cli, std::env::var_os(CONFIG_ENV))
}

/// [`resolve_config_path`] with the environment value given (for tests).
pub fn resolve_config_path_from(cli: Option<&Path>, env: Option<OsString>) -> PathBuf {
    match (cli, env) {
        (Some(p), _) => p.to_path_buf(),
        (None, Some(e)) if !e.is_empty() => PathBuf::from(e),
        _ => PathBuf::from(DEFAULT_CONFIG_PATH),
    }
}

// ---------------------------------------------------------------------------------------------
// The configuration
// ---------------------------------------------------------------------------------------------

/// A validated configuration, `[defaults]` merged into every certificate.
#[derive(Debug, Clone, Serialize)]
pub struct Config {
    /// The file it was read from.
    #[serde(skip)]
    pub path: PathBuf,
    pub api: ApiConfig,
    pub agent: AgentConfig,
    #[serde(rename = "certificate", skip_serializing_if = "Vec::is_empty")]
    pub certificates: Vec<CertificateConfig>,
    /// Things that work but should be changed (inline password, ...), each naming file and line.
    #[serde(skip)]
    pub warnings: Vec<String>,
}

/// `[api]`.
#[derive(Debug, Clone, Serialize)]
pub struct ApiConfig {
    /// Partner API base, `https://` only, without trailing slash.
    pub base_url: String,
    pub login: String,
    /// File holding the password (mode 0600).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub password_file: Option<PathBuf>,
    /// Inline password (accepted with a warning).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub password: Option<Secret>,
    /// Extra trust anchor (PEM), in addition to the system roots.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub ca_file: Option<PathBuf>,
    /// The partner order site, where prepared renewal orders are completed
    /// (`{order_site_url}/lead/continue_order/{token}`); https only.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub order_site_url: Option<String>,
    /// Default 10.
    pub connect_timeout_secs: u64,
    /// Total time of one request; default 60.
    pub timeout_secs: u64,
    /// Repeats of idempotent calls after a 5xx, timeout or connection error; default 3.
    pub retries: u32,
}

/// `[agent]`.
#[derive(Debug, Clone, Serialize)]
pub struct AgentConfig {
    /// Default `/var/lib/cert-agent`.
    pub state_dir: PathBuf,
    /// Reissue when the certificate has fewer days left; default 30.
    pub renew_before_days: u32,
    /// Seconds between status calls per certificate; default 300.
    pub poll_interval_secs: u64,
    /// Billed orders allowed without `--yes`; default false.
    pub allow_orders: bool,
    /// Refuse to order above this price (account currency); `None`: no limit.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub max_order_price: Option<Decimal>,
    /// Certificates worked on at once; default 4.
    pub concurrency: u32,
    /// Run after a renew run that changed or failed something.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub notify_command: Option<Command>,
    /// The user `cert-agent serve` switches to after binding its ports when started as root;
    /// default `nobody`.
    pub serve_user: String,
}

/// A command to run: a string is run by `/bin/sh -c`, an array is an argv run directly.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(untagged)]
pub enum Command {
    Shell(String),
    Argv(Vec<String>),
}

/// `key_type`: the key types the agent generates.
pub use crate::crypto::KeyType;

/// `dcv`: the domain control validation method.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum DcvMethod {
    /// HTTP_CSR_HASH: file under the web root over HTTP.
    Http,
    /// HTTPS_CSR_HASH: the same over HTTPS (family S; others treat it as HTTP).
    Https,
    /// CNAME_CSR_HASH via `dns_hook`.
    Cname,
    /// DNS_TXT_TOKEN via `dns_hook`.
    DnsTxt,
    /// EMAIL to `dcv_email`.
    Email,
}

impl DcvMethod {
    /// The API's `dcv_type`.
    pub fn dcv_type(self) -> DcvType {
        match self {
            Self::Http => DcvType::HttpCsrHash,
            Self::Https => DcvType::HttpsCsrHash,
            Self::Cname => DcvType::CnameCsrHash,
            Self::DnsTxt => DcvType::DnsTxtToken,
            Self::Email => DcvType::Email,
        }
    }

    /// Served from a web root or the standalone server.
    pub fn is_http(self) -> bool {
        matches!(self, Self::Http | Self::Https)
    }

    /// Needs a `dns_hook`.
    pub fn is_dns(self) -> bool {
        matches!(self, Self::Cname | Self::DnsTxt)
    }
}

/// `family`: the CA family of the document (S, D, C).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize)]
pub enum Family {
    S,
    D,
    C,
}

/// `server`: the web server whose layout the install follows (`nginx`, `apache`, `none`).
pub use crate::bundle::ServerKind as Server;

/// `webroot`: one document root for every domain, or one per domain.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(untagged)]
pub enum Webroot {
    Single(PathBuf),
    PerDomain(BTreeMap<String, PathBuf>),
}

impl Webroot {
    /// The document root serving `domain`.
    pub fn for_domain(&self, domain: &str) -> Option<&Path> {
        match self {
            Self::Single(p) => Some(p),
            Self::PerDomain(m) => m.get(domain).map(PathBuf::as_path),
        }
    }
}

/// One `[[certificate]]`, with `[defaults]` applied.
#[derive(Debug, Clone, Serialize)]
pub struct CertificateConfig {
    /// Identifier: state, file names, `--name`.
    pub name: String,
    /// Lower case; the first is the common name.
    pub domains: Vec<String>,
    /// `nomenclature_id` of the order.
    pub product_id: u64,
    /// Days of an order, 60..=2200; default 365.
    pub days: u32,
    /// Default ecdsa-p256.
    pub key_type: KeyType,
    /// Default http.
    pub dcv: DcvMethod,
    /// Document root(s) for http/https DCV (or `standalone`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub webroot: Option<Webroot>,
    /// Serve the DCV file from the built-in server on `listen`.
    pub standalone: bool,
    /// Address of the standalone server; default 0.0.0.0:80.
    pub listen: SocketAddr,
    /// Program adding/removing DNS records (cname, dns-txt).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub dns_hook: Option<Command>,
    /// Address for EMAIL validation.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub dcv_email: Option<String>,
    /// Default nginx.
    pub server: Server,
    /// Install paths; `None`: the install layout's default for `server`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cert_path: Option<PathBuf>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub chain_path: Option<PathBuf>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub fullchain_path: Option<PathBuf>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub key_path: Option<PathBuf>,
    /// One file holding the private key followed by the full chain, switched with a single
    /// rename (key and certificate always match for a reader). When set, only the configured
    /// paths are written: no default file for `server`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub combined_path: Option<PathBuf>,
    /// Owner and group of installed files.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub owner: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub group: Option<String>,
    /// Mode of the private key file (never accessible by others); `None`: 0600, or 0640 with
    /// `group`.
    #[serde(
        skip_serializing_if = "Option::is_none",
        serialize_with = "serialize_mode"
    )]
    pub mode: Option<u32>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub reload_command: Option<Command>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub configtest_command: Option<Command>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub deploy_hook: Option<Command>,
    /// After reload, TLS handshake here (SNI = common name) must show the new serial.
    /// Default 127.0.0.1:443 with a web server; `None` (`""` in the file): no check.
    #[serde(serialize_with = "serialize_verify_address")]
    pub verify_address: Option<String>,
    /// Reissue with the current key instead of a new one (never for family C).
    pub reuse_key: bool,
    /// The CA family of the product (`S`, `D` or `C`, from the issuer shown by `cert-agent
    /// products`); decides the reissue rules that differ (family C: always a new key).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub family: Option<Family>,
    /// ISO 3166-1 alpha-2 (`country_name` of the order item).
    pub country: String,
    pub region: String,
    pub city: String,
    /// Organisation fields (OV/EV products).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub organization_name: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub organizational_unit: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub address_1: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub address_2: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub zip_code: Option<String>,
    /// Family S request-token value (at most 20 letters and digits).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub unique_value: Option<String>,
    /// The CA's validation domain that CNAME_CSR_HASH targets end in (the CA publishes it;
    /// the API does not report it). Without it, `dcv = "cname"` prints the records to create.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cname_target_domain: Option<String>,
    /// 0 lets the service choose.
    pub ssl_server_software_id: u64,
}

impl CertificateConfig {
    /// The common name (first domain).
    pub fn common_name(&self) -> &str {
        &self.domains[0]
    }

    /// Domains after the common name.
    pub fn additional_domains(&self) -> &[String] {
        &self.domains[1..]
    }
}

fn serialize_verify_address<S: Serializer>(v: &Option<String>, s: S) -> Result<S::Ok, S::Error> {
    s.serialize_str(v.as_deref().unwrap_or(""))
}

fn serialize_mode<S: Serializer>(mode: &Option<u32>, s: S) -> Result<S::Ok, S::Error> {
    match mode {
        Some(m) => s.serialize_str(&format!("{m:04o}")),
        None => s.serialize_none(),
    }
}

impl Config {
    /// The certificate named `name`.
    pub fn certificate(&self, name: &str) -> Option<&CertificateConfig> {
        self.certificates.iter().find(|c| c.name == name)
    }

    /// Options for [`api::Client::new`]: base URL, login, password source (with the systemd
    /// credential when `$CREDENTIALS_DIRECTORY` is set), CA file, token cache in `state_dir`,
    /// timeouts and retries.
    pub fn client_options(&self) -> api::ClientOptions {
        let password = api::PasswordSource {
            file: self.api.password_file.clone(),
            inline: self.api.password.clone(),
            credentials_directory: None,
        }
        .with_systemd_credentials();
        let mut o = api::ClientOptions::new(&self.api.base_url, &self.api.login, password);
        o.ca_file = self.api.ca_file.clone();
        o.state_dir = Some(self.agent.state_dir.clone());
        o.connect_timeout = Duration::from_secs(self.api.connect_timeout_secs);
        o.timeout = Duration::from_secs(self.api.timeout_secs);
        o.retry.max_attempts = self.api.retries + 1;
        o
    }

    /// The effective configuration as TOML, defaults applied and secrets masked.
    pub fn render(&self) -> String {
        let body = toml::to_string(self)
            .unwrap_or_else(|e| format!("# the configuration cannot be shown as TOML: {e}\n"));
        format!(
            "# Effective configuration read from {}\n\
             # [defaults] are merged into each [[certificate]]; secrets are masked.\n\
             # Install paths not shown take the default of the certificate's `server`.\n\n{body}",
            self.path.display()
        )
    }

    /// Reads and validates the file.
    pub fn load(path: &Path) -> Result<Config, ConfigError> {
        let text = std::fs::read_to_string(path).map_err(|e| ConfigError::Read {
            path: path.to_path_buf(),
            message: io_text(&e),
        })?;
        // Read from a file on the host that runs it: the programs it names must be there.
        let mut config = Self::parse_checked(&text, path, true)?;
        if config.api.password.is_some()
            && let Ok(meta) = std::fs::metadata(path)
            && meta.mode() & 0o044 != 0
        {
            config.warnings.push(format!(
                "{}: holds api.password but is readable by group or others (mode {:04o}); \
                 use api.password_file or chmod 600 it",
                path.display(),
                meta.mode() & 0o7777
            ));
        }
        Ok(config)
    }

    /// Validates `text`; `path` is only used in messages. Does not look at the file system
    /// ([`Config::load`] also checks that the programs of command keys exist).
    pub fn parse(text: &str, path: &Path) -> Result<Config, ConfigError> {
        Self::parse_checked(text, path, false)
    }

    fn parse_checked(text: &str, path: &Path, programs: bool) -> Result<Config, ConfigError> {
        let mut c = Checker {
            text,
            problems: Vec::new(),
            warnings: Vec::new(),
            programs,
        };
        let result = c.document(path);
        if c.problems.is_empty()
            && let Some(mut config) = result
        {
            config.warnings = c.warnings.into_iter().map(|p| p.display(path)).collect();
            return Ok(config);
        }
        c.problems.sort_by_key(|p| p.line);
        Err(ConfigError::Invalid {
            path: path.to_path_buf(),
            problems: c.problems,
        })
    }
}

/// A program path exists and is executable, or a bare name is found in `PATH` or the sbin
/// directories; otherwise why not.
fn check_program(program: &str) -> Result<(), &'static str> {
    let executable =
        |p: &Path| std::fs::metadata(p).is_ok_and(|m| m.is_file() && m.mode() & 0o111 != 0);
    if program.contains('/') {
        let p = Path::new(program);
        if !p.is_absolute() {
            return Err("must be an absolute path or a bare program name");
        }
        return match std::fs::metadata(p) {
            Err(_) => Err("does not exist"),
            Ok(_) if executable(p) => Ok(()),
            Ok(_) => Err("is not an executable file"),
        };
    }
    crate::process::find_program(program)
        .map(|_| ())
        .ok_or("was not found in PATH or the sbin directories")
}

// ---------------------------------------------------------------------------------------------
// Errors
// ---------------------------------------------------------------------------------------------

/// One problem in the file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Problem {
    /// 1-based line.
    pub line: usize,
    /// `[api]`, `certificate 'www'`, ...
    pub context: String,
    /// Names the key, e.g. "unknown key `webrot` (did you mean `webroot`?)".
    pub message: String,
}

impl Problem {
    fn display(&self, path: &Path) -> String {
        format!(
            "{} line {}: {}: {}",
            path.display(),
            self.line,
            self.context,
            self.message
        )
    }
}

/// The configuration could not be read or is invalid.
#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    #[error("could not read configuration file {}: {message}", path.display())]
    Read { path: PathBuf, message: String },
    /// Every problem found, in file order, one per line of the message.
    #[error("{}", problems.iter().map(|p| p.display(path)).collect::<Vec<_>>().join("\n"))]
    Invalid {
        path: PathBuf,
        problems: Vec<Problem>,
    },
}

fn io_text(e: &std::io::Error) -> String {
    let s = e.to_string();
    let s = s.split(" (os error").next().unwrap_or(&s).to_owned();
    let mut c = s.chars();
    match c.next() {
        Some(f) => f.to_lowercase().chain(c).collect(),
        None => s,
    }
}

// ---------------------------------------------------------------------------------------------
// Keys
// ---------------------------------------------------------------------------------------------

const TOP_KEYS: &[&str] = &["api", "agent", "defaults", "certificate"];
const API_KEYS: &[&str] = &[
    "base_url",
    "login",
    "password_file",
    "password",
    "ca_file",
    "order_site_url",
    "connect_timeout_secs",
    "timeout_secs",
    "retries",
];
const AGENT_KEYS: &[&str] = &[
    "state_dir",
    "renew_before_days",
    "poll_interval_secs",
    "allow_orders",
    "max_order_price",
    "concurrency",
    "notify_command",
    "serve_user",
];
/// Keys of a certificate that cannot come from `[defaults]`.
const CERT_ONLY_KEYS: &[&str] = &[
    "name",
    "domains",
    "cert_path",
    "chain_path",
    "fullchain_path",
    "key_path",
    "combined_path",
];
/// Keys of a certificate that `[defaults]` may also set.
const SHARED_KEYS: &[&str] = &[
    "product_id",
    "days",
    "key_type",
    "dcv",
    "webroot",
    "standalone",
    "listen",
    "dns_hook",
    "dcv_email",
    "server",
    "owner",
    "group",
    "mode",
    "reload_command",
    "configtest_command",
    "deploy_hook",
    "verify_address",
    "reuse_key",
    "family",
    "country",
    "region",
    "city",
    "organization_name",
    "organizational_unit",
    "address_1",
    "address_2",
    "zip_code",
    "unique_value",
    "cname_target_domain",
    "ssl_server_software_id",
];

/// Edit distance of two short keys (optimal string alignment: insertions, deletions,
/// substitutions and transpositions of neighbours each cost 1).
fn distance(a: &str, b: &str) -> usize {
    let a: Vec<char> = a.chars().collect();
    let b: Vec<char> = b.chars().collect();
    let mut d = vec![vec![0usize; b.len() + 1]; a.len() + 1];
    for (i, row) in d.iter_mut().enumerate() {
        row[0] = i;
    }
    for (j, cell) in d[0].iter_mut().enumerate() {
        *cell = j;
    }
    for i in 1..=a.len() {
        for j in 1..=b.len() {
            let cost = usize::from(a[i - 1] != b[j - 1]);
            let mut v = (d[i - 1][j] + 1)
                .min(d[i][j - 1] + 1)
                .min(d[i - 1][j - 1] + cost);
            if i > 1 && j > 1 && a[i - 1] == b[j - 2] && a[i - 2] == b[j - 1] {
                v = v.min(d[i - 2][j - 2] + 1);
            }
            d[i][j] = v;
        }
    }
    d[a.len()][b.len()]
}

/// The closest known key, if close enough to be a typo.
fn suggest<'k>(key: &str, known: &[&'k str]) -> Option<&'k str> {
    let limit = (key.chars().count() / 3).clamp(1, 3);
    let close = known
        .iter()
        .map(|k| (distance(key, k), *k))
        .filter(|(d, _)| *d <= limit)
        .min_by_key(|(d, _)| *d)
        .map(|(_, k)| k);
    // A truncated value ("dns" for "dns-txt") is far in edits but clear in intent.
    close.or_else(|| {
        let mut prefixed = known
            .iter()
            .filter(|k| key.len() >= 3 && k.starts_with(key));
        match (prefixed.next(), prefixed.next()) {
            (Some(k), None) => Some(*k),
            _ => None,
        }
    })
}

// ---------------------------------------------------------------------------------------------
// Value rules (public: the CLI checks command-line arguments with them)
// ---------------------------------------------------------------------------------------------

/// Checks a domain name: lower-case letters, digits and hyphens in labels of 1..=63
/// characters, at least two labels, 253 characters at most, a wildcard only as the whole first
/// label (`*.example.com`), no IP address, no trailing dot.
pub fn validate_domain(name: &str) -> Result<(), String> {
    if name.is_empty() {
        return Err("empty domain name".into());
    }
    if name.len() > 253 {
        return Err(format!("{name:?} is longer than 253 characters"));
    }
    if name.ends_with('.') {
        return Err(format!("{name:?}: remove the trailing dot"));
    }
    let labels: Vec<&str> = name.split('.').collect();
    let rest = match labels.split_first() {
        Some((&"*", rest)) => rest,
        _ => &labels[..],
    };
    if rest.len() < 2 {
        return Err(format!(
            "{name:?} is not a fully qualified name (internal names are rejected by the API)"
        ));
    }
    for label in rest {
        if label.contains('*') {
            return Err(format!(
                "{name:?}: a wildcard is allowed only as the whole first label (*.example.com)"
            ));
        }
        if label.is_empty() || label.len() > 63 {
            return Err(format!("{name:?}: each label must have 1 to 63 characters"));
        }
        if !label
            .bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-')
        {
            return Err(format!(
                "{name:?}: only lower-case letters, digits and '-' are allowed \
                 (use the xn-- form for international names)"
            ));
        }
        if label.starts_with('-') || label.ends_with('-') {
            return Err(format!("{name:?}: a label cannot start or end with '-'"));
        }
    }
    if rest
        .last()
        .is_some_and(|tld| tld.bytes().all(|b| b.is_ascii_digit()))
    {
        return Err(format!("{name:?}: IP addresses are not accepted"));
    }
    Ok(())
}

/// Checks a certificate name: 1..=64 of letters, digits, `.`, `_`, `-`, starting with a letter
/// or digit (it becomes a file name).
pub fn validate_certificate_name(name: &str) -> Result<(), String> {
    let ok = !name.is_empty()
        && name.len() <= 64
        && name.as_bytes()[0].is_ascii_alphanumeric()
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'.' | b'_' | b'-'));
    if ok {
        Ok(())
    } else {
        Err(format!(
            "{name:?} is not a valid name: use 1 to 64 letters, digits, '.', '_' or '-', \
             starting with a letter or digit"
        ))
    }
}

/// Checks an email address (local part, `@`, a valid domain).
pub fn validate_email(email: &str) -> Result<(), String> {
    match email.rsplit_once('@') {
        Some((local, domain))
            if !local.is_empty()
                && !local.chars().any(|c| c.is_whitespace() || c.is_control())
                && validate_domain(domain).is_ok()
                && !domain.starts_with("*.") =>
        {
            Ok(())
        }
        _ => Err(format!("{email:?} is not an email address")),
    }
}

// ---------------------------------------------------------------------------------------------
// The checker
// ---------------------------------------------------------------------------------------------

type Val<'i> = Spanned<DeValue<'i>>;

/// A value found for a key, with where it was found.
struct Field<'t, 'i> {
    key: &'t str,
    key_span: Range<usize>,
    value: &'t Val<'i>,
    from_defaults: bool,
}

/// A table being read (a certificate is read through itself, then `[defaults]`).
struct Scope<'t, 'i> {
    context: String,
    header: Range<usize>,
    tables: Vec<(&'t DeTable<'i>, bool)>,
}

impl<'t, 'i> Scope<'t, 'i> {
    fn get(&self, key: &str) -> Option<Field<'t, 'i>> {
        self.tables.iter().find_map(|(table, from_defaults)| {
            table
                .iter()
                .find(|(k, _)| k.get_ref() == key)
                .map(|(k, v)| Field {
                    key: k.get_ref().as_ref(),
                    key_span: k.span(),
                    value: v,
                    from_defaults: *from_defaults,
                })
        })
    }
}

fn type_name(v: &DeValue<'_>) -> &'static str {
    match v {
        DeValue::String(_) => "a string",
        DeValue::Integer(_) => "an integer",
        DeValue::Float(_) => "a float",
        DeValue::Boolean(_) => "a boolean",
        DeValue::Datetime(_) => "a date-time",
        DeValue::Array(_) => "an array",
        DeValue::Table(_) => "a table",
    }
}

fn integer(v: &DeValue<'_>) -> Option<i128> {
    v.as_integer()
        .and_then(|i| i128::from_str_radix(i.as_str(), i.radix()).ok())
}

struct Checker<'a> {
    text: &'a str,
    problems: Vec<Problem>,
    warnings: Vec<Problem>,
    /// Check that the programs of command keys exist and are executable.
    programs: bool,
}

impl<'a> Checker<'a> {
    fn line(&self, span: &Range<usize>) -> usize {
        let end = span.start.min(self.text.len());
        self.text.as_bytes()[..end]
            .iter()
            .filter(|&&b| b == b'\n')
            .count()
            + 1
    }

    fn report(&mut self, span: &Range<usize>, context: &str, message: impl Into<String>) {
        let line = self.line(span);
        self.problems.push(Problem {
            line,
            context: context.to_owned(),
            message: message.into(),
        });
    }

    /// A problem with a field's value, reported at its key.
    fn bad(&mut self, scope: &Scope<'_, '_>, f: &Field<'_, '_>, message: impl fmt::Display) {
        let from = if f.from_defaults {
            " (from [defaults])"
        } else {
            ""
        };
        let msg = format!("`{}`{from}: {message}", f.key);
        self.report(&f.key_span, &scope.context, msg);
    }

    fn missing(&mut self, scope: &Scope<'_, '_>, key: &str) {
        let msg = format!("missing required key `{key}`");
        self.report(&scope.header, &scope.context, msg);
    }

    /// Reports unknown keys of `table` (allowed: `known`), with a suggestion.
    fn unknown_keys(&mut self, table: &DeTable<'_>, context: &str, known: &[&str], section: &str) {
        for (k, _) in table.iter() {
            let key: &str = k.get_ref();
            if known.contains(&key) {
                continue;
            }
            let mut msg = format!("unknown key `{key}`");
            if let Some(s) = suggest(key, known) {
                msg.push_str(&format!(" (did you mean `{s}`?)"));
            } else if let Some(home) = home_of(key).filter(|h| *h != section) {
                msg.push_str(&format!(" (it belongs in {home})"));
            }
            self.report(&k.span(), context, msg);
        }
    }

    // ---- typed getters: `None` when absent or wrong (wrong is reported) ----

    fn string(&mut self, s: &Scope<'_, '_>, key: &str) -> Option<String> {
        let f = s.get(key)?;
        match f.value.get_ref() {
            DeValue::String(v) => Some(v.to_string()),
            other => {
                self.bad(
                    s,
                    &f,
                    format!("expected a string, found {}", type_name(other)),
                );
                None
            }
        }
    }

    /// A non-empty string.
    fn text(&mut self, s: &Scope<'_, '_>, key: &str) -> Option<String> {
        let v = self.string(s, key)?;
        if v.trim().is_empty() {
            let f = s.get(key)?;
            self.bad(s, &f, "must not be empty");
            return None;
        }
        Some(v)
    }

    fn boolean(&mut self, s: &Scope<'_, '_>, key: &str) -> Option<bool> {
        let f = s.get(key)?;
        match f.value.get_ref() {
            DeValue::Boolean(b) => Some(*b),
            other => {
                self.bad(
                    s,
                    &f,
                    format!("expected true or false, found {}", type_name(other)),
                );
                None
            }
        }
    }

    fn int(&mut self, s: &Scope<'_, '_>, key: &str, min: i128, max: i128) -> Option<i128> {
        let f = s.get(key)?;
        match integer(f.value.get_ref()) {
            Some(v) if (min..=max).contains(&v) => Some(v),
            Some(v) => {
                self.bad(s, &f, format!("must be between {min} and {max} (got {v})"));
                None
            }
            None => {
                let found = type_name(f.value.get_ref());
                self.bad(s, &f, format!("expected an integer, found {found}"));
                None
            }
        }
    }

    fn uint<T: TryFrom<i128>>(
        &mut self,
        s: &Scope<'_, '_>,
        key: &str,
        min: i128,
        max: i128,
    ) -> Option<T> {
        self.int(s, key, min, max).and_then(|v| T::try_from(v).ok())
    }

    /// An absolute path.
    fn path(&mut self, s: &Scope<'_, '_>, key: &str) -> Option<PathBuf> {
        let v = self.text(s, key)?;
        let f = s.get(key)?;
        self.absolute(s, &f, &v)
    }

    fn absolute(&mut self, s: &Scope<'_, '_>, f: &Field<'_, '_>, v: &str) -> Option<PathBuf> {
        if !v.starts_with('/') {
            self.bad(s, f, format!("{v:?} must be an absolute path"));
            return None;
        }
        Some(PathBuf::from(v))
    }

    fn choice<T: Copy>(
        &mut self,
        s: &Scope<'_, '_>,
        key: &str,
        options: &[(&str, T)],
    ) -> Option<T> {
        let v = self.string(s, key)?;
        if let Some((_, t)) = options.iter().find(|(name, _)| *name == v) {
            return Some(*t);
        }
        let f = s.get(key)?;
        let names: Vec<&str> = options.iter().map(|(n, _)| *n).collect();
        let hint = suggest(&v, &names)
            .map(|n| format!(" (did you mean {n:?}?)"))
            .unwrap_or_default();
        self.bad(
            s,
            &f,
            format!("{v:?} is not one of {}{hint}", names.join(", ")),
        );
        None
    }

    fn command(&mut self, s: &Scope<'_, '_>, key: &str) -> Option<Command> {
        let f = s.get(key)?;
        match f.value.get_ref() {
            DeValue::String(v) if !v.trim().is_empty() => {
                // Run by /bin/sh -c: only a leading absolute program path can be checked.
                if self.programs
                    && let Some(program) =
                        v.split_whitespace().next().filter(|p| p.starts_with('/'))
                    && let Err(why) = check_program(program)
                {
                    self.bad(s, &f, format!("program {program:?} {why}"));
                }
                Some(Command::Shell(v.to_string()))
            }
            DeValue::Array(items) => {
                let argv: Option<Vec<String>> = items
                    .iter()
                    .map(|i| i.get_ref().as_str().map(str::to_owned))
                    .collect();
                match argv {
                    Some(a) if a.first().is_some_and(|p| !p.is_empty()) => {
                        if self.programs
                            && let Err(why) = check_program(&a[0])
                        {
                            self.bad(s, &f, format!("program {:?} {why}", a[0]));
                        }
                        Some(Command::Argv(a))
                    }
                    _ => {
                        self.bad(
                            s,
                            &f,
                            "expected a non-empty array of strings (program first)",
                        );
                        None
                    }
                }
            }
            other => {
                let found = match other {
                    DeValue::String(_) => "an empty string",
                    o => type_name(o),
                };
                self.bad(
                    s,
                    &f,
                    format!("expected a command string or an array of strings, found {found}"),
                );
                None
            }
        }
    }

    // ---- the document ----

    fn document(&mut self, path: &Path) -> Option<Config> {
        let root = match DeTable::parse(self.text) {
            Ok(root) => root,
            Err(e) => {
                let span = e.span().unwrap_or(0..0);
                let msg = format!("invalid TOML: {}", e.message().trim());
                self.report(&span, "syntax", msg);
                return None;
            }
        };
        let root = root.get_ref();
        self.unknown_keys(root, "top level", TOP_KEYS, "top level");

        let section = |name: &str| root.iter().find(|(k, _)| k.get_ref() == name);
        let table_of = |c: &mut Self, name: &str| -> Option<(&DeTable<'_>, Range<usize>)> {
            let (k, v) = section(name)?;
            match v.get_ref() {
                DeValue::Table(t) => Some((t, v.span())),
                other => {
                    let msg = format!(
                        "`{name}` must be a table ([{name}]), found {}",
                        type_name(other)
                    );
                    c.report(&k.span(), "top level", msg);
                    None
                }
            }
        };
        let api = table_of(self, "api");
        let agent = table_of(self, "agent");
        let defaults = table_of(self, "defaults");

        let api = match api {
            Some((t, header)) => self.api(t, header),
            None => {
                if section("api").is_none() {
                    self.report(&(0..0), "top level", "missing required section [api]");
                }
                None
            }
        };
        let empty = DeTable::default();
        let (agent_table, agent_header) = agent.unwrap_or((&empty, 0..0));
        let agent = self.agent(agent_table, agent_header);

        if let Some((t, _)) = defaults {
            for (k, _) in t.iter() {
                if CERT_ONLY_KEYS.contains(&k.get_ref().as_ref()) {
                    let msg = format!(
                        "`{}` cannot be set in [defaults]; set it in each [[certificate]]",
                        k.get_ref()
                    );
                    self.report(&k.span(), "[defaults]", msg);
                }
            }
            let mut allowed = SHARED_KEYS.to_vec();
            allowed.extend_from_slice(CERT_ONLY_KEYS);
            self.unknown_keys(t, "[defaults]", &allowed, "[defaults]");
        }
        let defaults_table = defaults.map(|(t, _)| t);

        let mut certificates = Vec::new();
        if let Some((k, v)) = section("certificate") {
            match v.get_ref() {
                DeValue::Array(items) if items.iter().all(|i| i.get_ref().is_table()) => {
                    for (i, item) in items.iter().enumerate() {
                        if let DeValue::Table(t) = item.get_ref()
                            && let Some(c) = self.certificate(i, t, item.span(), defaults_table)
                        {
                            certificates.push(c);
                        }
                    }
                }
                _ => {
                    self.report(
                        &k.span(),
                        "top level",
                        "`certificate` must be written as [[certificate]] tables",
                    );
                }
            }
        }
        self.across_certificates(&certificates, root);

        let agent = agent?;
        let api = api?;
        Some(Config {
            path: path.to_path_buf(),
            api,
            agent,
            certificates,
            warnings: Vec::new(),
        })
    }

    fn api(&mut self, t: &DeTable<'_>, header: Range<usize>) -> Option<ApiConfig> {
        self.unknown_keys(t, "[api]", API_KEYS, "[api]");
        let s = Scope {
            context: "[api]".into(),
            header,
            tables: vec![(t, false)],
        };
        let base_url = match self.text(&s, "base_url") {
            Some(url) => match api::normalize_base_url(&url) {
                Ok(u) => Some(u),
                Err(m) => {
                    let f = s.get("base_url")?;
                    self.bad(&s, &f, format!("{url:?} {m}"));
                    None
                }
            },
            None => {
                if s.get("base_url").is_none() {
                    self.missing(&s, "base_url");
                }
                None
            }
        };
        let login = self.text(&s, "login");
        if s.get("login").is_none() {
            self.missing(&s, "login");
        }
        let password_file = self.path(&s, "password_file");
        let password = self.string(&s, "password").map(Secret::new);
        if let (Some(f), Some(_)) = (s.get("password"), s.get("password_file")) {
            self.bad(&s, &f, "set either `password_file` or `password`, not both");
        } else if let Some(f) = s.get("password") {
            let line = self.line(&f.key_span);
            self.warnings.push(Problem {
                line,
                context: "[api]".into(),
                message: "`password` in the configuration file is accepted but discouraged; \
                          use `password_file` (mode 0600) or the systemd credential \
                          cert-agent-password"
                    .into(),
            });
            if password.as_ref().is_some_and(Secret::is_empty) {
                self.bad(&s, &f, "must not be empty");
            }
        }
        let ca_file = self.path(&s, "ca_file");
        let order_site_url = self.string(&s, "order_site_url");
        if let (Some(u), Some(f)) = (&order_site_url, s.get("order_site_url"))
            && let Err(e) = api::normalize_base_url(u)
        {
            self.bad(&s, &f, e);
        }
        let order_site_url = order_site_url.map(|u| u.trim_end_matches('/').to_owned());
        let connect_timeout_secs = self
            .uint(&s, "connect_timeout_secs", 1, 600)
            .unwrap_or(api::DEFAULT_CONNECT_TIMEOUT.as_secs());
        let timeout_secs = self
            .uint(&s, "timeout_secs", 1, 3600)
            .unwrap_or(api::DEFAULT_TIMEOUT.as_secs());
        let retries = self.uint(&s, "retries", 0, 10).unwrap_or(DEFAULT_RETRIES);
        Some(ApiConfig {
            base_url: base_url?,
            login: login?,
            password_file,
            password,
            ca_file,
            order_site_url,
            connect_timeout_secs,
            timeout_secs,
            retries,
        })
    }

    fn agent(&mut self, t: &DeTable<'_>, header: Range<usize>) -> Option<AgentConfig> {
        self.unknown_keys(t, "[agent]", AGENT_KEYS, "[agent]");
        let s = Scope {
            context: "[agent]".into(),
            header,
            tables: vec![(t, false)],
        };
        let state_dir = self
            .path(&s, "state_dir")
            .unwrap_or_else(|| PathBuf::from(DEFAULT_STATE_DIR));
        let renew_before_days = self
            .uint(&s, "renew_before_days", 1, 180)
            .unwrap_or(DEFAULT_RENEW_BEFORE_DAYS);
        let poll_interval_secs = self
            .uint(&s, "poll_interval_secs", 1, 86_400)
            .unwrap_or(DEFAULT_POLL_INTERVAL_SECS);
        if poll_interval_secs < DEFAULT_POLL_INTERVAL_SECS
            && let Some(f) = s.get("poll_interval_secs")
        {
            let line = self.line(&f.key_span);
            self.warnings.push(Problem {
                line,
                context: "[agent]".into(),
                message: format!(
                    "`poll_interval_secs` = {poll_interval_secs}: the API asks for at most one \
                     status call per certificate every 300 seconds"
                ),
            });
        }
        let allow_orders = self.boolean(&s, "allow_orders").unwrap_or(false);
        let max_order_price = match s.get("max_order_price") {
            None => None,
            Some(f) => {
                let text = match f.value.get_ref() {
                    DeValue::String(v) => Some(v.to_string()),
                    DeValue::Integer(_) => integer(f.value.get_ref()).map(|i| i.to_string()),
                    DeValue::Float(x) => Some(x.as_str().to_owned()),
                    _ => None,
                };
                match text.as_deref().map(Decimal::parse) {
                    Some(Ok(d)) if !d.as_str().starts_with('-') => Some(d),
                    Some(Ok(_)) => {
                        self.bad(&s, &f, "must not be negative");
                        None
                    }
                    _ => {
                        self.bad(&s, &f, "must be a decimal amount such as \"100.00\"");
                        None
                    }
                }
            }
        };
        let concurrency = self
            .uint(&s, "concurrency", 1, 64)
            .unwrap_or(DEFAULT_CONCURRENCY);
        let notify_command = self.command(&s, "notify_command");
        let serve_user = match self.text(&s, "serve_user") {
            Some(u) if u.bytes().all(|b| b.is_ascii_graphic() && b != b':') => u,
            Some(_) => {
                if let Some(f) = s.get("serve_user") {
                    self.bad(&s, &f, "must be a user name (printable, no spaces or `:`)");
                }
                DEFAULT_SERVE_USER.to_owned()
            }
            None => DEFAULT_SERVE_USER.to_owned(),
        };
        Some(AgentConfig {
            state_dir,
            renew_before_days,
            poll_interval_secs,
            allow_orders,
            max_order_price,
            concurrency,
            notify_command,
            serve_user,
        })
    }

    fn certificate(
        &mut self,
        index: usize,
        t: &DeTable<'_>,
        header: Range<usize>,
        defaults: Option<&DeTable<'_>>,
    ) -> Option<CertificateConfig> {
        let raw_name = t
            .iter()
            .find(|(k, _)| k.get_ref() == "name")
            .and_then(|(_, v)| v.get_ref().as_str())
            .filter(|n| validate_certificate_name(n).is_ok());
        let context = match raw_name {
            Some(n) => format!("certificate '{n}'"),
            None => format!("certificate #{}", index + 1),
        };
        let mut allowed: Vec<&str> = CERT_ONLY_KEYS.to_vec();
        allowed.extend_from_slice(SHARED_KEYS);
        self.unknown_keys(t, &context, &allowed, "[[certificate]]");
        let mut tables = vec![(t, false)];
        if let Some(d) = defaults {
            tables.push((d, true));
        }
        let s = Scope {
            context,
            header,
            tables,
        };

        let name = self.text(&s, "name");
        if let (Some(n), Some(f)) = (&name, s.get("name"))
            && let Err(m) = validate_certificate_name(n)
        {
            self.bad(&s, &f, m);
        }
        if s.get("name").is_none() {
            self.missing(&s, "name");
        }

        let domains = self.domains(&s);
        let product_id = self.uint::<u64>(&s, "product_id", 1, i128::from(i64::MAX));
        if s.get("product_id").is_none() {
            self.missing(&s, "product_id");
        }
        // Section "OrderItem": days "60 to 2200".
        let days = self.uint(&s, "days", 60, 2200).unwrap_or(DEFAULT_DAYS);
        let key_type = self
            .choice(
                &s,
                "key_type",
                &[
                    ("ecdsa-p256", KeyType::EcdsaP256),
                    ("ecdsa-p384", KeyType::EcdsaP384),
                    ("rsa-2048", KeyType::Rsa2048),
                    ("rsa-3072", KeyType::Rsa3072),
                    ("rsa-4096", KeyType::Rsa4096),
                ],
            )
            .unwrap_or(KeyType::EcdsaP256);
        let dcv = self
            .choice(
                &s,
                "dcv",
                &[
                    ("http", DcvMethod::Http),
                    ("https", DcvMethod::Https),
                    ("cname", DcvMethod::Cname),
                    ("dns-txt", DcvMethod::DnsTxt),
                    ("email", DcvMethod::Email),
                ],
            )
            .unwrap_or(DcvMethod::Http);
        let server = self
            .choice(
                &s,
                "server",
                &[
                    ("nginx", Server::Nginx),
                    ("apache", Server::Apache),
                    ("none", Server::None),
                ],
            )
            .unwrap_or(Server::Nginx);

        let webroot = self.webroot(&s);
        let standalone = self.boolean(&s, "standalone").unwrap_or(false);
        let listen = match self.text(&s, "listen") {
            Some(v) => match v.parse::<SocketAddr>() {
                Ok(a) => Some(a),
                Err(_) => {
                    let f = s.get("listen")?;
                    self.bad(
                        &s,
                        &f,
                        format!("{v:?} is not an address:port such as \"0.0.0.0:80\""),
                    );
                    None
                }
            },
            None => None,
        };
        let dns_hook = self.command(&s, "dns_hook");
        let dcv_email = self.text(&s, "dcv_email");
        if let (Some(e), Some(f)) = (&dcv_email, s.get("dcv_email"))
            && let Err(m) = validate_email(e)
        {
            self.bad(&s, &f, m);
        }

        // How DCV is carried out must be complete for the method.
        let dcv_field = s.get("dcv");
        let dcv_span = dcv_field
            .as_ref()
            .map(|f| f.key_span.clone())
            .unwrap_or_else(|| s.header.clone());
        let dcv_name = serde_plain(dcv);
        if dcv.is_http() {
            match (&webroot, standalone) {
                (Some(_), true) => {
                    if let Some(f) = s.get("standalone") {
                        self.bad(
                            &s,
                            &f,
                            "set either `webroot` or `standalone = true`, not both",
                        );
                    }
                }
                (None, false) if s.get("webroot").is_none() => self.report(
                    &dcv_span,
                    &s.context,
                    format!("`dcv` = {dcv_name:?} needs `webroot` or `standalone = true`"),
                ),
                _ => {}
            }
            // dcv_type rules: HTTP_CSR_HASH / HTTPS_CSR_HASH are "not for wildcard names".
            if let Some(d) = domains
                .as_ref()
                .and_then(|d| d.iter().find(|d| d.starts_with("*.")))
            {
                self.report(
                    &dcv_span,
                    &s.context,
                    format!(
                        "`dcv` = {dcv_name:?} cannot validate the wildcard {d:?}; use \"dns-txt\", \
                         \"cname\" or \"email\""
                    ),
                );
            }
            if let (Some(Webroot::PerDomain(map)), Some(domains), Some(f)) =
                (&webroot, &domains, s.get("webroot"))
            {
                for d in domains.iter().filter(|d| !map.contains_key(*d)) {
                    self.bad(&s, &f, format!("has no entry for the domain {d:?}"));
                }
                for d in map.keys().filter(|k| !domains.contains(k)) {
                    self.bad(
                        &s,
                        &f,
                        format!("{d:?} is not one of the certificate's domains"),
                    );
                }
            }
        }
        if dcv.is_dns() && dns_hook.is_none() && s.get("dns_hook").is_none() {
            self.report(
                &dcv_span,
                &s.context,
                format!(
                    "`dcv` = {dcv_name:?} needs `dns_hook` (the program that sets DNS records)"
                ),
            );
        }
        if dcv == DcvMethod::Email && dcv_email.is_none() && s.get("dcv_email").is_none() {
            self.report(
                &dcv_span,
                &s.context,
                "`dcv` = \"email\" needs `dcv_email` (an address from `cert-agent dcv emails`)",
            );
        }

        // Install.
        let cert_path = self.path(&s, "cert_path");
        let chain_path = self.path(&s, "chain_path");
        let fullchain_path = self.path(&s, "fullchain_path");
        let key_path = self.path(&s, "key_path");
        let combined_path = self.path(&s, "combined_path");
        if let (Some(k), Some(f)) = (&key_path, s.get("key_path")) {
            for (other, p) in [
                ("cert_path", &cert_path),
                ("chain_path", &chain_path),
                ("fullchain_path", &fullchain_path),
            ] {
                if p.as_ref() == Some(k) {
                    self.bad(
                        &s,
                        &f,
                        format!(
                            "must differ from `{other}` (the private key would be overwritten)"
                        ),
                    );
                }
            }
        }
        if let (Some(c), Some(f)) = (&combined_path, s.get("combined_path")) {
            for (other, p) in [
                ("cert_path", &cert_path),
                ("chain_path", &chain_path),
                ("fullchain_path", &fullchain_path),
                ("key_path", &key_path),
            ] {
                if p.as_ref() == Some(c) {
                    self.bad(
                        &s,
                        &f,
                        format!(
                            "must differ from `{other}` (the combined key and chain is a file \
                             of its own)"
                        ),
                    );
                }
            }
        }
        if server == Server::None
            && key_path.is_none()
            && s.get("key_path").is_none()
            && s.get("combined_path").is_none()
            && let Some(f) = s.get("server")
        {
            self.bad(
                &s,
                &f,
                "\"none\" has no default layout: set `key_path` and `fullchain_path` or \
                 `cert_path`, or `combined_path`",
            );
        }
        let owner = self.text(&s, "owner");
        let group = self.text(&s, "group");
        let mode = self.mode(&s);
        let reload_command = self.command(&s, "reload_command");
        let configtest_command = self.command(&s, "configtest_command");
        let deploy_hook = self.command(&s, "deploy_hook");
        let verify_address = match s.get("verify_address") {
            None => (server != Server::None).then(|| DEFAULT_VERIFY_ADDRESS.to_owned()),
            Some(_) => match self.string(&s, "verify_address") {
                Some(v) if v.is_empty() => None,
                Some(v) => {
                    if !valid_host_port(&v) {
                        let f = s.get("verify_address")?;
                        self.bad(
                            &s,
                            &f,
                            format!("{v:?} is not host:port (\"\" disables the check)"),
                        );
                    }
                    Some(v)
                }
                None => None,
            },
        };
        let reuse_key = self.boolean(&s, "reuse_key").unwrap_or(false);
        let family = self.choice(
            &s,
            "family",
            &[("S", Family::S), ("D", Family::D), ("C", Family::C)],
        );
        if reuse_key
            && family == Some(Family::C)
            && let Some(f) = s.get("reuse_key")
        {
            self.bad(
                &s,
                &f,
                "family C needs a new key for every reissue (document, Reissue rule 4); \
                 remove `reuse_key` or set it to false",
            );
        }

        // Order item data.
        let country = self.text(&s, "country");
        if let (Some(c), Some(f)) = (&country, s.get("country"))
            && !(c.len() == 2 && c.bytes().all(|b| b.is_ascii_uppercase()))
        {
            self.bad(
                &s,
                &f,
                format!("{c:?} is not an ISO 3166-1 alpha-2 code such as \"DE\""),
            );
        }
        let region = self.text(&s, "region");
        let city = self.text(&s, "city");
        for key in ["country", "region", "city"] {
            if s.get(key).is_none() {
                let msg = format!("missing required key `{key}` (set it here or in [defaults])");
                self.report(&s.header, &s.context, msg);
            }
        }
        let organization_name = self.text(&s, "organization_name");
        let organizational_unit = self.text(&s, "organizational_unit");
        let address_1 = self.text(&s, "address_1");
        let address_2 = self.text(&s, "address_2");
        let zip_code = self.text(&s, "zip_code");
        // Limits: unique_value "at most 20 characters, letters and digits".
        let unique_value = self.text(&s, "unique_value");
        if let (Some(u), Some(f)) = (&unique_value, s.get("unique_value"))
            && !(u.len() <= 20 && u.bytes().all(|b| b.is_ascii_alphanumeric()))
        {
            self.bad(&s, &f, "must be at most 20 letters and digits");
        }
        let ssl_server_software_id = self
            .uint(&s, "ssl_server_software_id", 0, i128::from(i64::MAX))
            .unwrap_or(0);
        let cname_target_domain = self.text(&s, "cname_target_domain");
        if let (Some(d), Some(f)) = (&cname_target_domain, s.get("cname_target_domain"))
            && let Err(e) = validate_domain(d)
        {
            self.bad(&s, &f, e);
        }

        Some(CertificateConfig {
            name: name?,
            domains: domains?,
            product_id: product_id?,
            days,
            key_type,
            dcv,
            webroot,
            standalone,
            listen: listen.unwrap_or_else(|| {
                DEFAULT_LISTEN
                    .parse()
                    .unwrap_or(SocketAddr::from(([0, 0, 0, 0], 80)))
            }),
            dns_hook,
            dcv_email,
            server,
            cert_path,
            chain_path,
            fullchain_path,
            key_path,
            combined_path,
            owner,
            group,
            mode,
            reload_command,
            configtest_command,
            deploy_hook,
            verify_address,
            reuse_key,
            family,
            country: country?,
            region: region?,
            city: city?,
            organization_name,
            organizational_unit,
            address_1,
            address_2,
            zip_code,
            unique_value,
            cname_target_domain,
            ssl_server_software_id,
        })
    }

    /// `domains`: non-empty array of valid, distinct names (lower-cased).
    fn domains(&mut self, s: &Scope<'_, '_>) -> Option<Vec<String>> {
        let Some(f) = s.get("domains") else {
            self.missing(s, "domains");
            return None;
        };
        let DeValue::Array(items) = f.value.get_ref() else {
            let found = type_name(f.value.get_ref());
            self.bad(
                s,
                &f,
                format!("expected an array of domain names, found {found}"),
            );
            return None;
        };
        if items.is_empty() {
            self.bad(
                s,
                &f,
                "must list at least one domain (the first is the common name)",
            );
            return None;
        }
        let mut out: Vec<String> = Vec::new();
        let mut ok = true;
        for item in items.iter() {
            let Some(d) = item.get_ref().as_str() else {
                self.bad(
                    s,
                    &f,
                    format!("expected strings, found {}", type_name(item.get_ref())),
                );
                ok = false;
                continue;
            };
            let d = d.to_ascii_lowercase();
            let at = Field {
                key: f.key,
                key_span: item.span(),
                value: item,
                from_defaults: false,
            };
            if let Err(m) = validate_domain(&d) {
                self.bad(s, &at, m);
                ok = false;
            } else if out.contains(&d) {
                self.bad(s, &at, format!("{d:?} is listed twice"));
                ok = false;
            } else {
                out.push(d);
            }
        }
        ok.then_some(out)
    }

    /// `webroot`: an absolute path, or a table domain → absolute path.
    fn webroot(&mut self, s: &Scope<'_, '_>) -> Option<Webroot> {
        let f = s.get("webroot")?;
        match f.value.get_ref() {
            DeValue::String(v) => self.absolute(s, &f, v).map(Webroot::Single),
            DeValue::Table(t) => {
                let mut map = BTreeMap::new();
                for (k, v) in t.iter() {
                    let at = Field {
                        key: f.key,
                        key_span: k.span(),
                        value: v,
                        from_defaults: f.from_defaults,
                    };
                    let domain = k.get_ref().to_ascii_lowercase();
                    match v.get_ref().as_str() {
                        Some(p) => {
                            if let Some(p) = self.absolute(s, &at, p) {
                                map.insert(domain, p);
                            }
                        }
                        None => {
                            let found = type_name(v.get_ref());
                            self.bad(
                                s,
                                &at,
                                format!("{domain:?}: expected a path, found {found}"),
                            );
                        }
                    }
                }
                Some(Webroot::PerDomain(map))
            }
            other => {
                let found = type_name(other);
                self.bad(
                    s,
                    &f,
                    format!("expected a path or a table of domain = path, found {found}"),
                );
                None
            }
        }
    }

    /// `mode` of the key file: "0640" or 0o640; never accessible by others.
    fn mode(&mut self, s: &Scope<'_, '_>) -> Option<u32> {
        let f = s.get("mode")?;
        let value = match f.value.get_ref() {
            DeValue::String(v) if !v.is_empty() && v.len() <= 5 => u32::from_str_radix(v, 8).ok(),
            DeValue::Integer(i) if i.radix() == 8 => u32::from_str_radix(i.as_str(), 8).ok(),
            DeValue::Integer(_) => {
                self.bad(s, &f, "write the mode in octal: \"0640\" or 0o640");
                return None;
            }
            _ => None,
        };
        match value {
            Some(m) if m <= 0o7777 && m & 0o007 == 0 => Some(m),
            Some(m) if m <= 0o7777 => {
                self.bad(
                    s,
                    &f,
                    format!("{m:04o} gives others access to the private key"),
                );
                None
            }
            _ => {
                self.bad(s, &f, "expected an octal file mode such as \"0640\"");
                None
            }
        }
    }

    /// Names unique; no two certificates install to the same file.
    fn across_certificates(&mut self, certs: &[CertificateConfig], root: &DeTable<'_>) {
        let spans = cert_name_spans(root);
        let mut seen: HashMap<&str, usize> = HashMap::new();
        for (i, c) in certs.iter().enumerate() {
            if seen.insert(c.name.as_str(), i).is_some() {
                let span = spans
                    .iter()
                    .filter(|(n, _)| n == &c.name)
                    .nth(1)
                    .map(|(_, s)| s.clone())
                    .unwrap_or(0..0);
                let msg = format!("`name`: {:?} is used by another certificate", c.name);
                self.report(&span, &format!("certificate '{}'", c.name), msg);
            }
        }
        let mut owners: HashMap<&Path, &str> = HashMap::new();
        for c in certs {
            for p in [
                &c.cert_path,
                &c.chain_path,
                &c.fullchain_path,
                &c.key_path,
                &c.combined_path,
            ]
            .into_iter()
            .flatten()
            {
                if let Some(other) = owners.insert(p, &c.name)
                    && other != c.name
                {
                    let span = spans
                        .iter()
                        .find(|(n, _)| n == &c.name)
                        .map(|(_, s)| s.clone())
                        .unwrap_or(0..0);
                    let msg = format!(
                        "install path {} is also used by certificate '{other}'",
                        p.display()
                    );
                    self.report(&span, &format!("certificate '{}'", c.name), msg);
                }
            }
        }
    }
}

/// `(name, span of its key)` of every certificate, in file order.
fn cert_name_spans(root: &DeTable<'_>) -> Vec<(String, Range<usize>)> {
    let Some((_, v)) = root.iter().find(|(k, _)| k.get_ref() == "certificate") else {
        return Vec::new();
    };
    let Some(items) = v.get_ref().as_array() else {
        return Vec::new();
    };
    items
        .iter()
        .filter_map(|i| i.get_ref().as_table())
        .filter_map(|t| t.iter().find(|(k, _)| k.get_ref() == "name"))
        .filter_map(|(k, v)| Some((v.get_ref().as_str()?.to_owned(), k.span())))
        .collect()
}

/// The section a key belongs to, for "it belongs in [agent]".
fn home_of(key: &str) -> Option<&'static str> {
    if API_KEYS.contains(&key) {
        Some("[api]")
    } else if AGENT_KEYS.contains(&key) {
        Some("[agent]")
    } else if SHARED_KEYS.contains(&key) || CERT_ONLY_KEYS.contains(&key) {
        Some("[[certificate]]")
    } else {
        None
    }
}

/// `host:port` with a non-empty host and a port 1..=65535 (`[::1]:443` accepted).
fn valid_host_port(v: &str) -> bool {
    if v.parse::<SocketAddr>().is_ok() {
        return true;
    }
    match v.rsplit_once(':') {
        Some((host, port)) => {
            !host.is_empty()
                && !host.contains(['/', ' ', '[', ']'])
                && port.parse::<u16>().is_ok_and(|p| p > 0)
        }
        None => false,
    }
}

/// The kebab-case name of a config enum value.
fn serde_plain<T: Serialize>(v: T) -> String {
    serde_json::to_value(v)
        .ok()
        .and_then(|v| v.as_str().map(str::to_owned))
        .unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;

    const MINIMAL: &str = r#"
[api]
base_url = "https://partner.example.net"
login = "ops@example.com"
password_file = "/etc/cert-agent/password"
"#;

    /// The DESIGN.md example, with every commented key set.
    const FULL: &str = r#"
[api]
base_url = "https://partner.example.net/"
login = "ops@example.com"
password_file = "/etc/cert-agent/password"
ca_file = "/path/extra-root.pem"
connect_timeout_secs = 5
timeout_secs = 30
retries = 2

[agent]
state_dir = "/var/lib/cert-agent"
renew_before_days = 30
poll_interval_secs = 300
allow_orders = false
max_order_price = "100.00"
concurrency = 2
notify_command = ["/usr/local/bin/notify", "--quiet"]

[defaults]
country = "DE"
region = "Berlin"
city = "Berlin"
key_type = "rsa-2048"

[[certificate]]
name = "www"
domains = ["www.example.com", "Example.com"]
product_id = 101
days = 365
key_type = "ecdsa-p256"
dcv = "http"
webroot = "/var/www/html"
server = "nginx"
cert_path = "/etc/ssl/www/cert.pem"
chain_path = "/etc/ssl/www/chain.pem"
fullchain_path = "/etc/ssl/www/fullchain.pem"
key_path = "/etc/ssl/www/privkey.pem"
owner = "root"
group = "ssl-cert"
mode = "0640"
reload_command = "systemctl reload nginx"
configtest_command = ["nginx", "-t"]
deploy_hook = "/usr/local/bin/deployed"
verify_address = "127.0.0.1:443"
reuse_key = false
organization_name = "Example GmbH"
organizational_unit = "IT"
address_1 = "Street 1"
address_2 = "Floor 2"
zip_code = "10115"
unique_value = "abc123"
ssl_server_software_id = 180

[[certificate]]
name = "wild"
domains = ["*.example.org"]
product_id = 102
dcv = "dns-txt"
dns_hook = "/usr/local/bin/dns-hook"
server = "apache"
verify_address = ""

[[certificate]]
name = "multi"
domains = ["a.example.net", "b.example.net"]
product_id = 103
dcv = "https"
webroot = { "a.example.net" = "/srv/a", "b.example.net" = "/srv/b" }

[[certificate]]
name = "solo"
domains = ["solo.example.net"]
product_id = 101
dcv = "http"
standalone = true
listen = "127.0.0.1:8080"
mode = 0o600

[[certificate]]
name = "mail"
domains = ["mail.example.net"]
product_id = 101
dcv = "email"
dcv_email = "admin@example.net"
"#;

    fn parse(text: &str) -> Result<Config, ConfigError> {
        Config::parse(text, Path::new("/etc/cert-agent/config.toml"))
    }

    /// The messages of an invalid file.
    fn errors(text: &str) -> Vec<String> {
        match parse(text) {
            Ok(_) => panic!("accepted:\n{text}"),
            Err(e) => e.to_string().lines().map(str::to_owned).collect(),
        }
    }

    /// Asserts exactly one problem, at `line`, whose message contains every part.
    fn assert_one(text: &str, line: usize, parts: &[&str]) {
        let errs = errors(text);
        assert_eq!(errs.len(), 1, "{errs:#?}");
        let prefix = format!("/etc/cert-agent/config.toml line {line}: ");
        assert!(errs[0].starts_with(&prefix), "{errs:#?}");
        for p in parts {
            assert!(errs[0].contains(p), "{p:?} not in {errs:#?}");
        }
    }

    fn with_cert(cert: &str) -> String {
        format!(
            "{MINIMAL}\n[defaults]\ncountry = \"DE\"\nregion = \"Berlin\"\ncity = \"Berlin\"\n\n\
             [[certificate]]\nname = \"www\"\ndomains = [\"www.example.com\"]\nproduct_id = 101\n\
             webroot = \"/var/www/html\"\n{cert}"
        )
    }

    /// Line of `with_cert`'s first added line.
    const CERT_LINE: usize = 17;

    #[test]
    fn minimal_file_gets_the_defaults_of_design_md() {
        let c = parse(MINIMAL).unwrap();
        assert_eq!(c.api.base_url, "https://partner.example.net");
        assert_eq!(c.api.connect_timeout_secs, 10);
        assert_eq!(c.api.timeout_secs, 60);
        assert_eq!(c.api.retries, 3);
        assert_eq!(c.agent.state_dir, Path::new("/var/lib/cert-agent"));
        assert_eq!(c.agent.renew_before_days, 30);
        assert_eq!(c.agent.poll_interval_secs, 300);
        assert!(!c.agent.allow_orders);
        assert_eq!(c.agent.max_order_price, None);
        assert_eq!(c.agent.concurrency, 4);
        assert!(c.certificates.is_empty());
        assert!(c.warnings.is_empty());
    }

    #[test]
    fn full_example_with_every_key() {
        let c = parse(FULL).unwrap();
        assert_eq!(c.api.base_url, "https://partner.example.net");
        assert_eq!(c.agent.max_order_price.as_ref().unwrap().as_str(), "100.00");
        assert_eq!(
            c.agent.notify_command,
            Some(Command::Argv(vec![
                "/usr/local/bin/notify".into(),
                "--quiet".into()
            ]))
        );
        let www = c.certificate("www").unwrap();
        assert_eq!(www.domains, ["www.example.com", "example.com"]);
        assert_eq!(www.common_name(), "www.example.com");
        assert_eq!(www.additional_domains(), ["example.com"]);
        assert_eq!(www.key_type, KeyType::EcdsaP256);
        assert_eq!(www.mode, Some(0o640));
        assert_eq!(www.country, "DE");
        assert_eq!(www.dcv.dcv_type(), DcvType::HttpCsrHash);
        assert_eq!(
            www.webroot.as_ref().unwrap().for_domain("example.com"),
            Some(Path::new("/var/www/html"))
        );
        assert_eq!(
            www.reload_command,
            Some(Command::Shell("systemctl reload nginx".into()))
        );
        assert_eq!(www.ssl_server_software_id, 180);
        let wild = c.certificate("wild").unwrap();
        // [defaults] key_type applies where the certificate sets none.
        assert_eq!(wild.key_type, KeyType::Rsa2048);
        assert_eq!(wild.verify_address, None);
        assert_eq!(wild.days, 365);
        let multi = c.certificate("multi").unwrap();
        assert_eq!(
            multi.webroot.as_ref().unwrap().for_domain("b.example.net"),
            Some(Path::new("/srv/b"))
        );
        assert_eq!(multi.verify_address.as_deref(), Some("127.0.0.1:443"));
        let solo = c.certificate("solo").unwrap();
        assert!(solo.standalone);
        assert_eq!(solo.listen.to_string(), "127.0.0.1:8080");
        assert_eq!(solo.mode, Some(0o600));
        assert_eq!(
            c.certificate("mail").unwrap().dcv_email.as_deref(),
            Some("admin@example.net")
        );
    }

    #[test]
    fn render_applies_defaults_masks_secrets_and_parses_back() {
        let text = MINIMAL.replace(
            "password_file = \"/etc/cert-agent/password\"",
            "password = \"hunter2\"",
        );
        let c = parse(&text).unwrap();
        let out = c.render();
        assert!(!out.contains("hunter2"), "{out}");
        assert!(out.contains("password = \"********\""), "{out}");
        assert!(out.contains("renew_before_days = 30"), "{out}");

        let full = parse(FULL).unwrap().render();
        assert!(full.contains("[[certificate]]"), "{full}");
        assert!(full.contains("mode = \"0640\""), "{full}");
        // The rendering is itself a valid configuration with the same meaning.
        let again = parse(&full).unwrap();
        assert_eq!(again.certificates.len(), 5);
        assert_eq!(
            again.certificate("wild").unwrap().key_type,
            KeyType::Rsa2048
        );
        assert_eq!(again.render(), full);
    }

    #[test]
    fn inline_password_is_accepted_with_a_warning() {
        let text = MINIMAL.replace(
            "password_file = \"/etc/cert-agent/password\"",
            "password = \"hunter2\"",
        );
        let c = parse(&text).unwrap();
        assert_eq!(c.api.password.as_ref().unwrap().expose(), "hunter2");
        assert_eq!(c.warnings.len(), 1);
        assert!(c.warnings[0].starts_with("/etc/cert-agent/config.toml line 5: [api]: "));
        assert!(!format!("{c:?}").contains("hunter2"));
        let both = format!("{MINIMAL}password = \"x\"\n");
        assert_one(&both, 6, &["[api]", "`password`", "not both"]);
    }

    #[test]
    fn client_options_follow_the_config() {
        let c = parse(FULL).unwrap();
        let o = c.client_options();
        assert_eq!(o.base_url, "https://partner.example.net");
        assert_eq!(
            o.state_dir.as_deref(),
            Some(Path::new("/var/lib/cert-agent"))
        );
        assert_eq!(o.timeout, Duration::from_secs(30));
        assert_eq!(o.connect_timeout, Duration::from_secs(5));
        assert_eq!(o.retry.max_attempts, 3);
        assert_eq!(
            o.password.file.as_deref(),
            Some(Path::new("/etc/cert-agent/password"))
        );
    }

    #[test]
    fn syntax_error_names_the_line() {
        assert_one("[api]\nbase_url = \n", 2, &["syntax", "invalid TOML"]);
    }

    #[test]
    fn unknown_keys_get_a_suggestion() {
        assert_one(
            &with_cert("webrot = \"/x\"\n"),
            CERT_LINE,
            &[
                "certificate 'www'",
                "unknown key `webrot` (did you mean `webroot`?)",
            ],
        );
        assert_one(
            &format!("{MINIMAL}base_ulr = \"x\"\n"),
            6,
            &["[api]", "`base_ulr`", "did you mean `base_url`"],
        );
        assert_one(
            &format!("{MINIMAL}state_dir = \"/x\"\n"),
            6,
            &["[api]", "unknown key `state_dir` (it belongs in [agent])"],
        );
        assert_one(
            &format!("{MINIMAL}[agnet]\nx = 1\n"),
            6,
            &["top level", "did you mean `agent`"],
        );
        assert_one(
            &format!("{MINIMAL}[agent]\nconcurency = 2\n"),
            7,
            &["[agent]", "did you mean `concurrency`"],
        );
        assert_one(
            &format!("{MINIMAL}[defaults]\nname = \"x\"\n"),
            7,
            &["[defaults]", "`name` cannot be set in [defaults]"],
        );
        assert_one(
            &format!("{MINIMAL}[defaults]\ncontry = \"DE\"\n"),
            7,
            &["[defaults]", "did you mean `country`"],
        );
        assert_one(
            &format!("{MINIMAL}[defaults]\ncountry = \"DE\"\nfoo = 1\n"),
            8,
            &["[defaults]", "unknown key `foo`"],
        );
    }

    #[test]
    fn api_rules() {
        assert_one(
            &MINIMAL.replace("https://", "http://"),
            3,
            &["[api]", "`base_url`", "https://"],
        );
        assert_one(
            &MINIMAL.replace("https://partner.example.net", "not a url"),
            3,
            &["`base_url`", "not a valid URL"],
        );
        assert_one(
            &MINIMAL.replace("login = \"ops@example.com\"\n", ""),
            2,
            &["[api]", "missing required key `login`"],
        );
        assert_one(
            &MINIMAL.replace("\"/etc/cert-agent/password\"", "\"password\""),
            5,
            &["`password_file`", "absolute path"],
        );
        assert_one(
            &format!("{MINIMAL}ca_file = \"ca.pem\"\n"),
            6,
            &["`ca_file`", "absolute path"],
        );
        assert_one(
            &format!("{MINIMAL}timeout_secs = 0\n"),
            6,
            &["`timeout_secs`", "between 1 and 3600 (got 0)"],
        );
        assert_one(
            &format!("{MINIMAL}retries = \"3\"\n"),
            6,
            &["`retries`", "expected an integer, found a string"],
        );
        assert_one("[agent]\n", 1, &["missing required section [api]"]);
        assert_one("api = 1\n", 1, &["`api` must be a table"]);
    }

    #[test]
    fn agent_rules() {
        let a = |body: &str| format!("{MINIMAL}[agent]\n{body}\n");
        assert_one(
            &a("state_dir = \"var/lib\""),
            7,
            &["[agent]", "`state_dir`", "absolute path"],
        );
        assert_one(
            &a("max_order_price = \"cheap\""),
            7,
            &["`max_order_price`", "decimal"],
        );
        assert_one(
            &a("max_order_price = \"-1\""),
            7,
            &["`max_order_price`", "negative"],
        );
        assert_one(
            &a("allow_orders = \"yes\""),
            7,
            &["`allow_orders`", "true or false"],
        );
        assert_one(
            &a("concurrency = 0"),
            7,
            &["`concurrency`", "between 1 and 64"],
        );
        assert_one(
            &a("renew_before_days = 365"),
            7,
            &["`renew_before_days`", "between 1 and 180"],
        );
        assert_one(
            &a("notify_command = []"),
            7,
            &["`notify_command`", "non-empty array"],
        );
        assert_one(
            &a("serve_user = \"no body\""),
            7,
            &["`serve_user`", "user name"],
        );
        assert_one(&a("serve_user = \"\""), 7, &["`serve_user`", "empty"]);
        let c = parse(&a("serve_user = \"_cert-agent\"")).unwrap();
        assert_eq!(c.agent.serve_user, "_cert-agent");
        let c = parse(&a("max_order_price = 100")).unwrap();
        assert_eq!(c.agent.max_order_price.unwrap().as_str(), "100");
        assert_eq!(c.agent.serve_user, DEFAULT_SERVE_USER);
        let c = parse(&a("poll_interval_secs = 10")).unwrap();
        assert!(
            c.warnings[0].contains("line 7: [agent]: `poll_interval_secs`"),
            "{:?}",
            c.warnings
        );
    }

    #[test]
    fn certificate_required_keys() {
        let text = format!("{MINIMAL}\n[[certificate]]\nname = \"www\"\n");
        let errs = errors(&text);
        for key in ["domains", "product_id", "country", "region", "city"] {
            assert!(
                errs.iter().any(
                    |e| e.contains("line 7: certificate 'www': missing required key")
                        && e.contains(&format!("`{key}`"))
                ),
                "{key}: {errs:#?}"
            );
        }
        let errs = errors(&format!(
            "{MINIMAL}\n[[certificate]]\ndomains = [\"a.example.com\"]\n"
        ));
        assert!(
            errs.iter()
                .any(|e| e.contains("line 7: certificate #1: missing required key `name`")),
            "{errs:#?}"
        );
        assert_one(
            &format!("{MINIMAL}\n[certificate]\nname = \"x\"\n"),
            7,
            &["[[certificate]]"],
        );
    }

    #[test]
    fn domain_rules() {
        let d = |list: &str| {
            with_cert(&format!("domains = {list}\n"))
                .replace("domains = [\"www.example.com\"]\n", "")
        };
        assert_one(&d("[\"*.example.com\"]"), 12, &["`dcv`", "wildcard"]);
        assert_one(
            &d("[\"www.*.example.com\"]"),
            CERT_LINE - 1,
            &["`domains`", "only as the whole first label"],
        );
        assert_one(
            &d("[\"server\"]"),
            CERT_LINE - 1,
            &["`domains`", "not a fully qualified name"],
        );
        assert_one(&d("[\"10.0.0.1\"]"), CERT_LINE - 1, &["IP addresses"]);
        assert_one(
            &d("[\"bad_name.example.com\"]"),
            CERT_LINE - 1,
            &["only lower-case letters"],
        );
        assert_one(
            &d("[\"-a.example.com\"]"),
            CERT_LINE - 1,
            &["start or end with '-'"],
        );
        assert_one(&d("[\"example.com.\"]"), CERT_LINE - 1, &["trailing dot"]);
        assert_one(
            &d("[\"a.example.com\", \"A.example.com\"]"),
            CERT_LINE - 1,
            &["listed twice"],
        );
        assert_one(&d("[]"), CERT_LINE - 1, &["at least one domain"]);
        assert_one(
            &d("\"a.example.com\""),
            CERT_LINE - 1,
            &["expected an array"],
        );
        // A problem in a multi-line array is reported at the element's line.
        assert_one(
            &d("[\n  \"a.example.com\",\n  \"b..example.com\",\n]"),
            CERT_LINE + 1,
            &["1 to 63"],
        );
        assert!(validate_domain(&format!("{}.com", "a".repeat(64))).is_err());
        assert!(validate_domain("xn--bcher-kva.example").is_ok());
    }

    #[test]
    fn certificate_name_rules() {
        let renamed = |n: &str| with_cert("").replace("name = \"www\"", &format!("name = {n}"));
        assert_one(
            &renamed("\"../etc\""),
            13,
            &["certificate #1", "`name`", "not a valid name"],
        );
        assert_one(&renamed("\"a b\""), 13, &["not a valid name"]);
        let twice = format!(
            "{}\n[[certificate]]\nname = \"www\"\ndomains = [\"b.example.com\"]\nproduct_id = 1\nwebroot = \"/w\"\n",
            with_cert("")
        );
        assert_one(
            &twice,
            19,
            &["certificate 'www'", "used by another certificate"],
        );
    }

    #[test]
    fn enum_rules() {
        assert_one(
            &with_cert("key_type = \"rsa-1024\"\n"),
            CERT_LINE,
            &["`key_type`", "\"rsa-1024\" is not one of ecdsa-p256"],
        );
        assert_one(
            &with_cert("dcv = \"dns\"\n"),
            CERT_LINE,
            &["`dcv`", "not one of", "(did you mean \"dns-txt\"?)"],
        );
        assert_one(
            &with_cert("server = \"nginx2\"\n"),
            CERT_LINE,
            &["`server`", "(did you mean \"nginx\"?)"],
        );
        assert_one(
            &with_cert("server = \"none\"\n"),
            CERT_LINE,
            &["`server`", "set `key_path`"],
        );
        assert!(
            parse(&with_cert(
                "server = \"none\"\nkey_path = \"/k.pem\"\nfullchain_path = \"/f.pem\"\n"
            ))
            .is_ok()
        );
    }

    #[test]
    fn days_and_numbers() {
        // Section "OrderItem": days 60 to 2200.
        assert_one(
            &with_cert("days = 59\n"),
            CERT_LINE,
            &["`days`", "between 60 and 2200 (got 59)"],
        );
        assert_one(
            &with_cert("days = 2201\n"),
            CERT_LINE,
            &["`days`", "(got 2201)"],
        );
        assert!(parse(&with_cert("days = 2200\n")).is_ok());
        assert_one(
            &with_cert("days = 365.0\n"),
            CERT_LINE,
            &["`days`", "found a float"],
        );
        assert_one(
            &with_cert("product_id = 0\n").replace("product_id = 101\n", ""),
            CERT_LINE - 1,
            &["`product_id`"],
        );
    }

    #[test]
    fn dcv_rules() {
        let no_webroot =
            |extra: &str| with_cert(extra).replace("webroot = \"/var/www/html\"\n", "");
        assert_one(
            &no_webroot(""),
            12,
            &[
                "certificate 'www'",
                "needs `webroot` or `standalone = true`",
            ],
        );
        assert_one(
            &with_cert("standalone = true\n"),
            CERT_LINE,
            &["`standalone`", "not both"],
        );
        assert_one(
            &no_webroot("standalone = true\nlisten = \"80\"\n"),
            CERT_LINE,
            &["`listen`", "address:port"],
        );
        assert_one(
            &no_webroot("dcv = \"cname\"\n"),
            CERT_LINE - 1,
            &["`dcv`", "needs `dns_hook`"],
        );
        assert!(parse(&no_webroot("dcv = \"cname\"\ndns_hook = [\"/bin/hook\"]\n")).is_ok());
        assert_one(
            &no_webroot("dcv = \"email\"\n"),
            CERT_LINE - 1,
            &["needs `dcv_email`"],
        );
        assert_one(
            &no_webroot("dcv = \"email\"\ndcv_email = \"nobody\"\n"),
            CERT_LINE,
            &["`dcv_email`", "not an email address"],
        );
        assert_one(
            &no_webroot("webroot = \"www\"\n"),
            CERT_LINE - 1,
            &["`webroot`", "absolute path"],
        );
        assert_one(
            &no_webroot("webroot = 5\n"),
            CERT_LINE - 1,
            &["`webroot`", "a path or a table"],
        );
        let errs = errors(&no_webroot(
            "webroot = { \"other.example.com\" = \"/w\" }\n",
        ));
        assert_eq!(errs.len(), 2, "{errs:#?}");
        assert!(
            errs[0].contains("has no entry for the domain \"www.example.com\""),
            "{errs:#?}"
        );
        assert!(
            errs[1].contains("\"other.example.com\" is not one of the certificate's domains"),
            "{errs:#?}"
        );
    }

    #[test]
    fn dcv_rules_from_defaults_name_defaults() {
        let text = with_cert("").replace("[defaults]\n", "[defaults]\ndays = 10\n");
        assert_one(
            &text,
            8,
            &["certificate 'www'", "`days` (from [defaults])", "(got 10)"],
        );
    }

    #[test]
    fn install_rules() {
        assert_one(
            &with_cert("cert_path = \"cert.pem\"\n"),
            CERT_LINE,
            &["`cert_path`", "absolute path"],
        );
        assert_one(
            &with_cert("cert_path = \"/etc/ssl/a.pem\"\nkey_path = \"/etc/ssl/a.pem\"\n"),
            CERT_LINE + 1,
            &["`key_path`", "must differ from `cert_path`"],
        );
        assert_one(
            &with_cert("mode = \"0644\"\n"),
            CERT_LINE,
            &["`mode`", "0644 gives others access"],
        );
        assert_one(&with_cert("mode = 640\n"), CERT_LINE, &["`mode`", "octal"]);
        assert_one(
            &with_cert("mode = \"rw\"\n"),
            CERT_LINE,
            &["`mode`", "octal file mode"],
        );
        assert_one(
            &with_cert("verify_address = \"localhost\"\n"),
            CERT_LINE,
            &["`verify_address`", "host:port"],
        );
        assert!(parse(&with_cert("verify_address = \"[::1]:8443\"\n")).is_ok());
        assert!(parse(&with_cert("verify_address = \"localhost:443\"\n")).is_ok());
        assert_one(
            &with_cert("reload_command = \"\"\n"),
            CERT_LINE,
            &["`reload_command`", "an empty string"],
        );
        assert_one(
            &with_cert("deploy_hook = [1]\n"),
            CERT_LINE,
            &["`deploy_hook`", "array of strings"],
        );
        let shared = format!(
            "{}\n[[certificate]]\nname = \"two\"\ndomains = [\"b.example.com\"]\nproduct_id = 1\nwebroot = \"/w\"\nkey_path = \"/k.pem\"\n",
            with_cert("key_path = \"/k.pem\"\n")
        );
        assert_one(
            &shared,
            20,
            &[
                "certificate 'two'",
                "/k.pem is also used by certificate 'www'",
            ],
        );
    }

    #[test]
    fn combined_path_rules() {
        // The only install path, even for server = "none".
        for server in ["nginx", "apache", "none"] {
            let c = parse(&with_cert(&format!(
                "server = \"{server}\"\ncombined_path = \"/etc/ssl/www/combined.pem\"\n"
            )))
            .unwrap();
            let cert = &c.certificates[0];
            assert_eq!(
                cert.combined_path.as_deref(),
                Some(Path::new("/etc/ssl/www/combined.pem"))
            );
            assert_eq!((&cert.key_path, &cert.fullchain_path), (&None, &None));
        }
        // In addition to separate files.
        assert!(
            parse(&with_cert(
                "combined_path = \"/c.pem\"\nkey_path = \"/k.pem\"\nfullchain_path = \"/f.pem\"\n"
            ))
            .is_ok()
        );
        assert_one(
            &with_cert("combined_path = \"combined.pem\"\n"),
            CERT_LINE,
            &["certificate 'www'", "`combined_path`", "absolute path"],
        );
        for other in ["cert_path", "chain_path", "fullchain_path", "key_path"] {
            assert_one(
                &with_cert(&format!(
                    "{other} = \"/etc/ssl/a.pem\"\ncombined_path = \"/etc/ssl/a.pem\"\n"
                )),
                CERT_LINE + 1,
                &["`combined_path`", &format!("must differ from `{other}`")],
            );
        }
        assert_one(
            &with_cert("combined_path = 5\n"),
            CERT_LINE,
            &["`combined_path`"],
        );
        let in_defaults =
            with_cert("").replace("[defaults]\n", "[defaults]\ncombined_path = \"/c.pem\"\n");
        assert_one(
            &in_defaults,
            8,
            &["[defaults]", "`combined_path` cannot be set in [defaults]"],
        );
        let shared = format!(
            "{}\n[[certificate]]\nname = \"two\"\ndomains = [\"b.example.com\"]\nproduct_id = 1\nwebroot = \"/w\"\nkey_path = \"/c.pem\"\n",
            with_cert("combined_path = \"/c.pem\"\n")
        );
        assert_one(
            &shared,
            20,
            &[
                "certificate 'two'",
                "/c.pem is also used by certificate 'www'",
            ],
        );
    }

    #[test]
    fn order_data_rules() {
        assert_one(
            &with_cert("country = \"Germany\"\n"),
            CERT_LINE,
            &["`country`", "ISO 3166-1"],
        );
        assert_one(
            &with_cert("unique_value = \"has space\"\n"),
            CERT_LINE,
            &["`unique_value`", "20 letters and digits"],
        );
        assert_one(
            &with_cert(&format!("unique_value = \"{}\"\n", "a".repeat(21))),
            CERT_LINE,
            &["`unique_value`"],
        );
        assert_one(
            &with_cert("organization_name = \"\"\n"),
            CERT_LINE,
            &["`organization_name`", "must not be empty"],
        );
        assert_one(
            &with_cert("ssl_server_software_id = -1\n"),
            CERT_LINE,
            &["`ssl_server_software_id`"],
        );
    }

    #[test]
    fn many_problems_are_reported_in_file_order() {
        let text = format!("{MINIMAL}timeout_secs = 0\n[agent]\nconcurrency = 0\nbogus = 1\n");
        let errs = errors(&text);
        assert_eq!(errs.len(), 3, "{errs:#?}");
        assert!(errs[0].contains("line 6"));
        assert!(errs[1].contains("line 8"));
        assert!(errs[2].contains("line 9"));
    }

    #[test]
    fn config_path_resolution() {
        let cli = Path::new("/cli.toml");
        assert_eq!(
            resolve_config_path_from(Some(cli), Some("/env.toml".into())),
            cli
        );
        assert_eq!(
            resolve_config_path_from(None, Some("/env.toml".into())),
            Path::new("/env.toml")
        );
        assert_eq!(
            resolve_config_path_from(None, Some("".into())),
            Path::new(DEFAULT_CONFIG_PATH)
        );
        assert_eq!(
            resolve_config_path_from(None, None),
            Path::new(DEFAULT_CONFIG_PATH)
        );
    }

    #[test]
    fn suggestions_use_edit_distance() {
        assert_eq!(distance("webrot", "webroot"), 1);
        assert_eq!(distance("kitten", "sitting"), 3);
        assert_eq!(suggest("webrot", SHARED_KEYS), Some("webroot"));
        assert_eq!(suggest("zzzzzz", SHARED_KEYS), None);
        assert_eq!(distance("agnet", "agent"), 1);
        assert_eq!(suggest("dns", &["http", "dns-txt"]), Some("dns-txt"));
    }
}
