//! The validated configuration: what every section and certificate says, defaults applied.

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Deserializer, Serialize, Serializer};

use super::defs;
use crate::values::{DcvType, Decimal, Secret};

/// A validated configuration, `[defaults]` merged into every certificate.
#[derive(Debug, Clone, Serialize)]
pub struct Config {
    /// The file it was read from.
    #[serde(skip)]
    pub path: PathBuf,
    pub api: ApiConfig,
    pub agent: AgentConfig,
    /// `[fleet]`: the hosts sharing these certificates, coordinated through etcd.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub fleet: Option<FleetConfig>,
    /// `[validation]`: domain validation reuse and its warning.
    pub validation: ValidationConfig,
    /// `[revocation]`: reading the CRLs of the installed certificates.
    pub revocation: RevocationConfig,
    /// `[preflight]`: the DNS checks before a billed order.
    pub preflight: PreflightConfig,
    /// `[acme.NAME]`: the ACME CAs certificates may choose with `issuer = "NAME"`.
    #[serde(skip_serializing_if = "BTreeMap::is_empty")]
    pub acme: BTreeMap<String, AcmeCa>,
    #[serde(rename = "certificate", skip_serializing_if = "Vec::is_empty")]
    pub certificates: Vec<CertificateConfig>,
    /// The files `[agent] include` named when the configuration was read, in order.
    #[serde(skip)]
    pub fragments: Vec<PathBuf>,
    /// What the configuration was read from, as one digest: the main file's path and bytes and
    /// each included file's path and `stat` (device, inode, size, mode, modification and change
    /// times). `None` when it was not read from files ([`Config::parse`]), or when an included
    /// file changed within the last second (a change within the same tick of the file
    /// system's clock could leave its `stat` as it was). Equal digests mean the same
    /// configuration: the due summary (`state_dir/due.json`) is only used under the digest
    /// it was made for.
    #[serde(skip)]
    pub source_digest: Option<String>,
    /// Things that work but should be changed (inline password, ...), each naming file and line.
    #[serde(skip)]
    pub warnings: Vec<String>,
}

/// `[acme.NAME]`: an ACME CA (RFC 8555), declared once and chosen by certificates with
/// `issuer = "NAME"`.
#[derive(Debug, Clone, Serialize)]
pub struct AcmeCa {
    /// The NAME of the table (a certificate's `issuer`).
    pub name: String,
    /// The directory URL (`https://`; `http://` only on loopback).
    pub directory: String,
    /// Contact addresses for the account (`mailto:` URLs).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub contact: Vec<String>,
    /// External Account Binding: the key id the CA gave.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub eab_kid: Option<String>,
    /// External Account Binding: the file holding the HMAC key (base64url, as CAs hand it
    /// out), `0600` or a systemd credential.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub eab_hmac_file: Option<PathBuf>,
    /// The profile every certificate of this CA asks for unless it names its own.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub profile: Option<String>,
    /// The chain to install when the CA offers several (RFC 8555 §7.4.2): the Common Name of
    /// the issuer of the chain's topmost certificate (`ISRG Root X1`); none, or no chain
    /// matching, keeps the CA's default chain.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub preferred_chain: Option<String>,
    /// An extra trust anchor for the directory's TLS (a private CA's directory).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub ca_file: Option<PathBuf>,
}

/// `issuer`: which CA a certificate comes from.
#[derive(Debug, Clone, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Issuer {
    /// The reseller's Partner API (`[api]`): the default.
    #[default]
    Partner,
    /// The ACME CA of `[acme.NAME]`.
    Acme(String),
}

impl Issuer {
    /// The ACME CA's name, for a certificate of an ACME CA.
    pub fn acme(&self) -> Option<&str> {
        match self {
            Self::Acme(name) => Some(name),
            Self::Partner => None,
        }
    }

    /// As the configuration and every surface spell it: `partner` or `acme:NAME`.
    pub fn label(&self) -> String {
        match self {
            Self::Partner => "partner".to_owned(),
            Self::Acme(name) => format!("acme:{name}"),
        }
    }

    pub fn is_partner(&self) -> bool {
        matches!(self, Self::Partner)
    }
}

/// `[fleet]`: how this host reaches the fleet's etcd cluster, and who it is in the fleet.
#[derive(Debug, Clone, Serialize)]
pub struct FleetConfig {
    /// Client URLs of the etcd members.
    pub endpoints: Vec<String>,
    /// CA of the members' certificates.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub ca_file: Option<PathBuf>,
    /// Client certificate and key for etcd.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cert_file: Option<PathBuf>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub key_file: Option<PathBuf>,
    /// etcd user, with its password in `password_file`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub user: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub password_file: Option<PathBuf>,
    /// `http://` endpoints allowed (etcd traffic in clear, on a trusted network); never
    /// together with `user`/`password_file`.
    pub insecure_plaintext: bool,
    /// Key prefix of the fleet in etcd; default `/cert-agent/`.
    pub prefix: String,
    /// This host's name in the fleet; default the host name.
    pub host: String,
    /// The fleet key (32 random bytes, mode 0600); none: the systemd credential
    /// `cert-agent-fleet-key`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub secret_file: Option<PathBuf>,
    /// The previous fleet key, kept for reading while the fleet rotates its key (mode 0600);
    /// none: the systemd credential `cert-agent-fleet-key-previous` when passed.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub previous_secret_file: Option<PathBuf>,
    /// Lease of the leader, in seconds; default 15.
    pub lease_ttl_secs: u64,
    /// `fleet status` exits 1 when a host has not installed the current certificate this
    /// long after it was published, in seconds; default 900.
    pub lag_alert_secs: u64,
    /// A synchronisation proves again what this host serves of each certificate it installed
    /// from the fleet whose last proof is older than this, in seconds (0: at each one);
    /// default 1800. What finds drift.
    pub proof_interval_secs: u64,
    /// `fleet status` and `check` alert a lead this host saw held longer than this, in
    /// seconds (twice the longest run); default 3600.
    pub lead_alert_secs: u64,
    /// Run after each fleet install's handshakes, as part of the host's proof of what it
    /// serves (exit 0: healthy); none: the proof is the handshakes alone.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub health_command: Option<CommandLine>,
    /// Canaries first, then waves (`rollout_*`); none: every host installs at once.
    #[serde(flatten, skip_serializing_if = "Option::is_none")]
    pub rollout: Option<super::RolloutConfig>,
}

/// `[validation]`.
#[derive(Debug, Clone, Default, Serialize)]
pub struct ValidationConfig {
    /// Days a domain validation may be reused, for a CA stricter than CA/Browser Forum ballot
    /// SC-081v3 (the shorter of the two applies); none: the ballot's period on each date.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub reuse_days: Option<u32>,
    /// `check` warns this many days before a renewal whose fresh validation needs a person;
    /// default 21.
    pub warning_days: u32,
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

impl ApiConfig {
    /// What stands for `[api]` in a configuration without one (every certificate comes from
    /// an ACME CA): no client is built from it ([`ApiConfig::is_unused`]).
    pub fn unused() -> Self {
        Self {
            base_url: String::new(),
            login: String::new(),
            password_file: None,
            password: None,
            ca_file: None,
            order_site_url: None,
            connect_timeout_secs: defs::API_CONNECT_TIMEOUT_SECS.number_default(),
            timeout_secs: defs::API_TIMEOUT_SECS.number_default(),
            retries: 0,
        }
    }

    /// Whether this stands for a missing `[api]` ([`ApiConfig::unused`]).
    pub fn is_unused(&self) -> bool {
        self.base_url.is_empty()
    }
}

/// `[revocation]`: whether and how the CRLs of installed certificates are read.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct RevocationConfig {
    /// Read the CRL of every installed certificate; default true.
    pub check: bool,
    /// Largest CRL accepted, in bytes; default 10 MiB.
    pub max_crl_bytes: u64,
    /// Time limit of one CRL download, in seconds; default 30.
    pub timeout_secs: u64,
    /// Age after which a kept CRL is fetched again even before its `nextUpdate`, in
    /// seconds; default 6 hours.
    pub refresh_secs: u64,
}

impl Default for RevocationConfig {
    fn default() -> Self {
        Self {
            check: defs::REVOCATION_CHECK.flag_default(),
            max_crl_bytes: defs::REVOCATION_MAX_CRL_BYTES.number_default(),
            timeout_secs: defs::REVOCATION_TIMEOUT_SECS.number_default(),
            refresh_secs: defs::REVOCATION_REFRESH_SECS.number_default(),
        }
    }
}

/// `[preflight]`: the DNS checks made before a billed order (docs/preflight.md).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct PreflightConfig {
    /// Check that CAA lets the product's CA issue; default true.
    pub caa: bool,
    /// Ask with DNSSEC and stop an order for a name whose zone does not validate; default
    /// true.
    pub dnssec: bool,
    /// Stop an order validated over HTTP for a name without an address, and fetch the
    /// self-check through the addresses this resolver gives; default true.
    pub http: bool,
    /// Stop an order or reissue validated by email once email validation has ended
    /// (2028-03-15, CA/Browser Forum ballot SC-090); default true.
    pub email: bool,
    /// The resolver asked; default the first nameserver of /etc/resolv.conf.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub resolver: Option<SocketAddr>,
    /// Time limit of one DNS question, in seconds (each is tried twice); default 3.
    pub timeout_secs: u64,
    /// CAA identities by issuer value (a Partner product's `issuer` or brand, an ACME CA's
    /// name), replacing the built-in ones.
    #[serde(skip_serializing_if = "BTreeMap::is_empty")]
    pub caa_identities: BTreeMap<String, Vec<String>>,
}

impl Default for PreflightConfig {
    fn default() -> Self {
        Self {
            caa: defs::PREFLIGHT_CAA.flag_default(),
            dnssec: defs::PREFLIGHT_DNSSEC.flag_default(),
            http: defs::PREFLIGHT_HTTP.flag_default(),
            email: defs::PREFLIGHT_EMAIL.flag_default(),
            resolver: None,
            timeout_secs: defs::PREFLIGHT_TIMEOUT_SECS.number_default(),
            caa_identities: BTreeMap::new(),
        }
    }
}

/// `[agent]`.
#[derive(Debug, Clone, Serialize)]
pub struct AgentConfig {
    /// Fragment files holding further `[[certificate]]` tables (`*` and `?` in file names;
    /// relative to the main file's directory), read in sorted order.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub include: Vec<String>,
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
    pub notify_command: Option<CommandLine>,
    /// The user `cert-agent serve` switches to after binding its ports when started as root;
    /// default `cert-agent-serve` (created by the packages).
    pub serve_user: String,
    /// Where the run's events are posted as JSON (`http://` or `https://`), each once per
    /// change of state.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub notify_url: Option<String>,
    /// Time limit of one `notify_url` attempt, in seconds; default 10.
    pub notify_timeout_secs: u64,
    /// Prometheus text file written (atomically) at the end of every run, for
    /// node_exporter's textfile collector.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub metrics_file: Option<PathBuf>,
    /// Where `cert-agent run` serves `/metrics` for Prometheus to scrape (e.g.
    /// `127.0.0.1:9793`); none by default.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub metrics_listen: Option<SocketAddr>,
}

/// A command to run: a string is run by `/bin/sh -c`, an array is an argv run directly.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(untagged)]
pub enum CommandLine {
    Shell(String),
    Argv(Vec<String>),
}

impl CommandLine {
    /// The argv vector that runs the command: an array as it is, a string through
    /// `/bin/sh -c`.
    pub fn argv(&self) -> Vec<String> {
        match self {
            Self::Argv(v) => v.clone(),
            Self::Shell(s) => vec!["/bin/sh".into(), "-c".into(), s.clone()],
        }
    }
}

/// `key_type`: the key types the agent generates.
pub(crate) use crate::crypto::KeyType;

/// `dcv`: the domain control validation method.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
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
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum Family {
    S,
    D,
    C,
}

/// `server`: the web server whose layout the install follows (`nginx`, `apache`, `none`).
pub(crate) use crate::values::ServerKind;

/// `webroot`: one document root for every domain, or one per domain.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
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

/// One `[[certificate]]`, with `[defaults]` applied. The file keeps every key flat in the
/// section; here they are grouped by what uses them: the order, the validation, the install.
#[derive(Debug, Clone, Serialize)]
pub struct CertificateConfig {
    /// Identifier: state, file names, `--name`.
    pub name: String,
    /// Lower case; the first is the common name.
    pub domains: Vec<String>,
    /// What is ordered (and reissued): product, lifetime, key, order-item data.
    #[serde(flatten)]
    pub order: OrderSpec,
    /// How domain control is validated.
    #[serde(flatten)]
    pub dcv: DcvSpec,
    /// Where and how the certificate is installed.
    #[serde(flatten)]
    pub install: InstallSpec,
}

/// What is ordered and reissued for a certificate.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct OrderSpec {
    /// The CA the certificate comes from (`issuer`; default the Partner API).
    #[serde(default, skip_serializing_if = "Issuer::is_partner")]
    pub issuer: Issuer,
    /// The ACME profile to ask for (`profile`; the CA's `profile` when unset).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub profile: Option<String>,
    /// An order the account already has (placed elsewhere, or found by `discover --account`):
    /// the first run adopts it instead of placing an order. Only read while the certificate
    /// has no order of its own.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub certificate_id: Option<u64>,
    /// `nomenclature_id` of the order.
    pub product_id: u64,
    /// Days of an order, 60..=2200; default 365.
    pub days: u32,
    /// Default ecdsa-p256.
    pub key_type: KeyType,
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
    /// 0 lets the service choose.
    pub ssl_server_software_id: u64,
}

/// How domain control is validated for a certificate.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct DcvSpec {
    /// Default http.
    #[serde(rename = "dcv")]
    pub method: DcvMethod,
    /// Document root(s) for http/https DCV (or `standalone`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub webroot: Option<Webroot>,
    /// Serve the DCV file from the built-in server on `listen`.
    pub standalone: bool,
    /// Address of the standalone server; default 0.0.0.0:80.
    pub listen: SocketAddr,
    /// Program adding/removing DNS records (cname, dns-txt).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub dns_hook: Option<CommandLine>,
    /// Address for EMAIL validation.
    #[serde(skip_serializing_if = "Option::is_none")]
    #[serde(rename = "dcv_email")]
    pub email: Option<String>,
    /// The CA's validation domain that CNAME_CSR_HASH targets end in (the CA publishes it;
    /// the API does not report it). Without it, `dcv = "cname"` prints the records to create.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cname_target_domain: Option<String>,
}

/// Where and how a certificate is installed.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct InstallSpec {
    /// Default nginx.
    pub server: ServerKind,
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
        default,
        skip_serializing_if = "Option::is_none",
        serialize_with = "serialize_mode",
        deserialize_with = "deserialize_mode"
    )]
    pub mode: Option<u32>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub reload_command: Option<CommandLine>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub configtest_command: Option<CommandLine>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub deploy_hook: Option<CommandLine>,
    /// After reload, TLS handshake here (SNI = common name) must show the new serial.
    /// Default 127.0.0.1:443 with a web server; `None` (`""` in the file): no check.
    #[serde(
        serialize_with = "serialize_verify_address",
        deserialize_with = "deserialize_verify_address"
    )]
    pub verify_address: Option<String>,
    /// What a Partner API certificate's chain must end at before it is installed.
    #[serde(default)]
    pub chain_trust: ChainTrust,
    /// `api.ca_file`, the configured CA file `chain_trust` names (set from `[api]`).
    #[serde(skip)]
    pub ca_file: Option<PathBuf>,
}

/// `chain_trust`: the roots a certificate's chain must end at before it is installed.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ChainTrust {
    /// The system's root store plus `api.ca_file` (when set): the default.
    #[default]
    System,
    /// `api.ca_file` alone (a private CA).
    CaFile,
    /// Any root: the chain is checked for its links and signatures only.
    None,
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

fn deserialize_verify_address<'de, D: Deserializer<'de>>(d: D) -> Result<Option<String>, D::Error> {
    let v = String::deserialize(d)?;
    Ok(Some(v).filter(|v| !v.is_empty()))
}

fn deserialize_mode<'de, D: Deserializer<'de>>(d: D) -> Result<Option<u32>, D::Error> {
    match Option::<String>::deserialize(d)? {
        Some(m) => u32::from_str_radix(&m, 8)
            .map(Some)
            .map_err(|_| serde::de::Error::custom(format!("mode {m:?} is not octal"))),
        None => Ok(None),
    }
}
