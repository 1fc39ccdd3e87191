//! The sandbox's certificate authorities: the root and per-issuer intermediates that sign the
//! certificates it issues, the separate CA behind the API's own TLS certificate, and CSR parsing.

use std::net::IpAddr;
use std::path::Path;

use rustls_pki_types::{CertificateDer, PrivateKeyDer};
use time::OffsetDateTime;

#[derive(Debug, thiserror::Error)]
pub enum CaError {
    #[error("invalid CSR: {0}")]
    InvalidCsr(String),
    #[error("unknown issuer '{0}'")]
    UnknownIssuer(String),
    #[error("could not issue certificate: {0}")]
    Issue(String),
    #[error("CA storage at '{path}': {message}")]
    Storage { path: String, message: String },
}

/// What the sandbox needs to know of a CSR.
#[derive(Debug, Clone)]
pub struct CsrInfo {
    /// DER of the whole CSR.
    pub der: Vec<u8>,
    pub common_name: Option<String>,
    /// subjectAltName DNS names in CSR order.
    pub dns_names: Vec<String>,
    /// subjectAltName IP addresses.
    pub ip_addresses: Vec<IpAddr>,
    /// DER of the SubjectPublicKeyInfo.
    pub public_key_der: Vec<u8>,
    /// Upper-case hex MD5 of `der`.
    pub md5_hex: String,
    /// Upper-case hex SHA-256 of `der`.
    pub sha256_hex: String,
}

/// Parse a PEM CSR (`CERTIFICATE REQUEST` or `NEW CERTIFICATE REQUEST` marker) and verify its
/// self-signature.
pub fn parse_csr(pem: &str) -> Result<CsrInfo, CaError> {
    let _ = pem;
    todo!("ca helper")
}

/// Input of [`Authority::issue`].
#[derive(Debug, Clone)]
pub struct IssueRequest<'a> {
    /// Issuer value of the product (one of [`ISSUERS`]); picks the intermediate.
    pub issuer: &'a str,
    /// SubjectPublicKeyInfo DER of the key to certify.
    pub public_key_der: &'a [u8],
    pub common_name: &'a str,
    /// Names for subjectAltName (the common name is included by the caller when wanted).
    pub dns_names: &'a [String],
    pub not_before: OffsetDateTime,
    pub not_after: OffsetDateTime,
}

/// An issued leaf certificate.
#[derive(Debug, Clone)]
pub struct IssuedCert {
    pub der: Vec<u8>,
    pub pem: String,
    /// Upper-case hex of the serial number.
    pub serial_hex: String,
    pub not_before: OffsetDateTime,
    pub not_after: OffsetDateTime,
}

/// The four issuer values of the catalogue: two denote family S, one D, one C.
pub const ISSUERS: [&str; 4] = ["s-one", "s-two", "d-one", "c-one"];

/// Root plus one intermediate per issuer value.
pub struct Authority {
    _private: (),
}

impl Authority {
    /// A fresh, in-memory authority.
    pub fn generate() -> Result<Self, CaError> {
        todo!("ca helper")
    }

    /// Loads the authority kept under `dir` (keys 0600), or generates and stores one;
    /// always (re)writes `dir/root.pem`.
    pub fn load_or_generate(dir: &Path) -> Result<Self, CaError> {
        let _ = dir;
        todo!("ca helper")
    }

    pub fn root_pem(&self) -> &str {
        todo!("ca helper")
    }

    /// The intermediate chain (PEM, nearest first, root excluded) for an issuer value.
    pub fn chain_pem(&self, issuer: &str) -> Result<Vec<String>, CaError> {
        let _ = issuer;
        todo!("ca helper")
    }

    pub fn issue(&self, req: &IssueRequest<'_>) -> Result<IssuedCert, CaError> {
        let _ = req;
        todo!("ca helper")
    }
}

/// The API's own TLS identity, signed by a CA distinct from [`Authority`]'s root.
pub struct ApiTlsIdentity {
    /// The trust anchor clients need (`api-ca.pem`).
    pub ca_pem: String,
    pub cert_chain: Vec<CertificateDer<'static>>,
    pub key: PrivateKeyDer<'static>,
}

/// A server identity for `localhost`, `127.0.0.1` and `::1`; kept under `dir` when given
/// (writes `dir/api-ca.pem`).
pub fn api_tls_identity(dir: Option<&Path>) -> Result<ApiTlsIdentity, CaError> {
    let _ = dir;
    todo!("ca helper")
}
