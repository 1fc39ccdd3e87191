//! The sandbox's certificate authorities: the root and per-issuer intermediates that sign the
//! certificates it issues, the separate CA behind the API's own TLS certificate, and CSR parsing.
//!
//! On disk (`load_or_generate`): `dir/ca/root.key`, `dir/ca/root.pem`, and for each issuer value
//! `dir/ca/{issuer}.key` + `dir/ca/{issuer}.pem`; `dir/root.pem` is the trust anchor clients
//! use. The API's TLS identity lives apart under `dir/api-tls/` with its anchor at
//! `dir/api-ca.pem`, so that trusting the API never means trusting issued certificates.

use std::fs;
use std::io::Write;
use std::net::IpAddr;
use std::os::unix::fs::{OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};

use md5::Md5;
use rcgen::string::Ia5String;
use rcgen::{
    BasicConstraints, CertificateParams, CertificateRevocationListParams, CrlDistributionPoint,
    DistinguishedName, DnType, ExtendedKeyUsagePurpose, IsCa, Issuer, KeyPair, KeyUsagePurpose,
    PublicKeyData, SanType, SerialNumber, SignatureAlgorithm, SubjectPublicKeyInfo,
};
use rustls_pki_types::{CertificateDer, PrivateKeyDer, PrivatePkcs8KeyDer};
use sha2::{Digest, Sha256};
use time::{Duration, OffsetDateTime, UtcOffset};
use x509_parser::certification_request::X509CertificationRequest;
use x509_parser::extensions::{GeneralName, ParsedExtension};
use x509_parser::prelude::FromDer;

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

const CSR_LABELS: [&str; 2] = ["CERTIFICATE REQUEST", "NEW CERTIFICATE REQUEST"];

/// Parse a PEM CSR (`CERTIFICATE REQUEST` or `NEW CERTIFICATE REQUEST` marker) and verify its
/// self-signature.
///
/// Text around the block is ignored; the first CSR block counts. Every failure is
/// [`CaError::InvalidCsr`] saying what is wrong.
pub fn parse_csr(pem: &str) -> Result<CsrInfo, CaError> {
    let invalid = |m: String| CaError::InvalidCsr(m);
    let mut der = None;
    for block in x509_parser::pem::Pem::iter_from_buffer(pem.as_bytes()) {
        let block = block.map_err(|e| invalid(format!("malformed PEM: {e}")))?;
        if CSR_LABELS.contains(&block.label.as_str()) {
            der = Some(block.contents);
            break;
        }
    }
    let der = der.ok_or_else(|| {
        invalid("no '-----BEGIN CERTIFICATE REQUEST-----' block found".to_string())
    })?;

    let (rest, csr) = X509CertificationRequest::from_der(&der)
        .map_err(|e| invalid(format!("not a PKCS#10 request: {e}")))?;
    if !rest.is_empty() {
        return Err(invalid(format!(
            "{} bytes of trailing data after the request",
            rest.len()
        )));
    }
    csr.verify_signature().map_err(|e| {
        invalid(format!(
            "self-signature does not verify with the request's own key: {e}"
        ))
    })?;

    let info = &csr.certification_request_info;
    let common_name = match info.subject.iter_common_name().next() {
        None => None,
        Some(cn) => Some(
            cn.as_str()
                .map_err(|e| invalid(format!("subject common name is not a string: {e}")))?
                .to_string(),
        ),
    };
    let mut dns_names = Vec::new();
    let mut ip_addresses = Vec::new();
    for ext in csr.requested_extensions().into_iter().flatten() {
        if let ParsedExtension::SubjectAlternativeName(san) = ext {
            for name in &san.general_names {
                match name {
                    GeneralName::DNSName(dns) => dns_names.push((*dns).to_string()),
                    GeneralName::IPAddress(bytes) => ip_addresses.push(ip_from_bytes(bytes)?),
                    _ => {}
                }
            }
        }
    }

    Ok(CsrInfo {
        common_name,
        dns_names,
        ip_addresses,
        public_key_der: info.subject_pki.raw.to_vec(),
        md5_hex: hex::encode_upper(Md5::digest(&der)),
        sha256_hex: hex::encode_upper(Sha256::digest(&der)),
        der,
    })
}

fn ip_from_bytes(bytes: &[u8]) -> Result<IpAddr, CaError> {
    if let Ok(v4) = <[u8; 4]>::try_from(bytes) {
        Ok(IpAddr::from(v4))
    } else if let Ok(v6) = <[u8; 16]>::try_from(bytes) {
        Ok(IpAddr::from(v6))
    } else {
        Err(CaError::InvalidCsr(format!(
            "subjectAltName IP address of {} bytes",
            bytes.len()
        )))
    }
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

/// Common name of the sandbox root.
pub const ROOT_CN: &str = "Partner Sandbox Root CA";
/// Common name of the CA behind the API's TLS certificate.
pub const API_TLS_CA_CN: &str = "Partner Sandbox API TLS CA";
const ORGANIZATION: &str = "Partner Sandbox";

/// Common name of the intermediate for an issuer value: `s-one` → "Partner Sandbox S-One CA".
pub fn intermediate_common_name(issuer: &str) -> String {
    let words: Vec<String> = issuer
        .split('-')
        .map(|w| {
            let mut chars = w.chars();
            chars.next().map_or_else(String::new, |first| {
                first.to_uppercase().chain(chars).collect()
            })
        })
        .collect();
    format!("Partner Sandbox {} CA", words.join("-"))
}

/// A CA certificate with its signing key.
struct CaCert {
    pem: String,
    der: Vec<u8>,
    issuer: Issuer<'static, KeyPair>,
}

impl CaCert {
    /// Generates a CA certificate: self-signed when `parent` is `None`.
    fn generate(
        common_name: &str,
        alg: &'static SignatureAlgorithm,
        is_ca: IsCa,
        lifetime: Duration,
        parent: Option<&CaCert>,
    ) -> Result<Self, CaError> {
        let key = KeyPair::generate_for(alg).map_err(issue_err)?;
        let now = OffsetDateTime::now_utc();
        let mut params = CertificateParams::default();
        params.distinguished_name = distinguished_name(common_name, true);
        params.serial_number = Some(random_serial().0);
        params.is_ca = is_ca;
        params.key_usages = vec![
            KeyUsagePurpose::KeyCertSign,
            KeyUsagePurpose::CrlSign,
            KeyUsagePurpose::DigitalSignature,
        ];
        // Back-dated so that certificates issued "in the past" by a shifted sandbox clock
        // still sit inside their issuer's validity.
        params.not_before = whole_seconds(now - Duration::days(3650));
        params.not_after = whole_seconds(now + lifetime);
        let cert = match parent {
            None => params.self_signed(&key),
            Some(parent) => {
                params.use_authority_key_identifier_extension = true;
                params.signed_by(&key, &parent.issuer)
            }
        }
        .map_err(issue_err)?;
        Ok(Self {
            pem: cert.pem(),
            der: cert.der().to_vec(),
            issuer: Issuer::new(params, key),
        })
    }

    fn load(key_path: &Path, cert_path: &Path) -> Result<Self, CaError> {
        let key_pem = read_file(key_path)?;
        let pem = read_file(cert_path)?;
        let key = KeyPair::from_pem(&key_pem).map_err(|e| storage(key_path, e))?;
        let der = single_cert_der(&pem).map_err(|m| storage(cert_path, m))?;
        let (_, x509) =
            x509_parser::parse_x509_certificate(&der).map_err(|e| storage(cert_path, e))?;
        if x509.public_key().raw != key.subject_public_key_info().as_slice() {
            return Err(storage(
                key_path,
                format!("key does not match certificate '{}'", cert_path.display()),
            ));
        }
        let issuer = Issuer::from_ca_cert_der(&CertificateDer::from(der.as_slice()), key)
            .map_err(|e| storage(cert_path, e))?;
        Ok(Self { pem, der, issuer })
    }

    fn store(&self, key_path: &Path, cert_path: &Path) -> Result<(), CaError> {
        write_file(
            key_path,
            self.issuer.key().serialize_pem().as_bytes(),
            0o600,
        )?;
        write_file(cert_path, self.pem.as_bytes(), 0o644)
    }
}

/// Root plus one intermediate per issuer value.
pub struct Authority {
    root: CaCert,
    /// One per entry of [`ISSUERS`], same order.
    intermediates: Vec<(&'static str, CaCert)>,
    /// `http://HOST:PORT` of the CRL listener: certificates issued carry
    /// `{crl_base}/crl/{issuer}.crl` as their CRL distribution point.
    crl_base: Option<String>,
}

/// The CRL distribution point of an issuer value under `base` (`http://HOST:PORT`).
pub fn crl_url(base: &str, issuer: &str) -> String {
    format!("{base}/crl/{issuer}.crl")
}

const ROOT_LIFETIME: Duration = Duration::days(365 * 30);
const INTERMEDIATE_LIFETIME: Duration = Duration::days(365 * 20);

fn generate_root() -> Result<CaCert, CaError> {
    CaCert::generate(
        ROOT_CN,
        &rcgen::PKCS_ECDSA_P384_SHA384,
        IsCa::Ca(BasicConstraints::Constrained(1)),
        ROOT_LIFETIME,
        None,
    )
}

fn generate_intermediate(issuer: &str, root: &CaCert) -> Result<CaCert, CaError> {
    CaCert::generate(
        &intermediate_common_name(issuer),
        &rcgen::PKCS_ECDSA_P256_SHA256,
        IsCa::Ca(BasicConstraints::Constrained(0)),
        INTERMEDIATE_LIFETIME,
        Some(root),
    )
}

impl Authority {
    /// A fresh, in-memory authority.
    pub fn generate() -> Result<Self, CaError> {
        let root = generate_root()?;
        let intermediates = ISSUERS
            .iter()
            .map(|&issuer| Ok((issuer, generate_intermediate(issuer, &root)?)))
            .collect::<Result<_, CaError>>()?;
        Ok(Self {
            root,
            intermediates,
            crl_base: None,
        })
    }

    /// Loads the authority kept under `dir` (keys 0600), or generates and stores one;
    /// always (re)writes `dir/root.pem`.
    ///
    /// A stored root is never replaced: if its files are unreadable this fails, naming the
    /// file. An intermediate that is missing (e.g. a new issuer value) is generated under the
    /// stored root.
    pub fn load_or_generate(dir: &Path) -> Result<Self, CaError> {
        let ca_dir = dir.join("ca");
        create_private_dir(&ca_dir)?;
        let paths = |name: &str| {
            (
                ca_dir.join(format!("{name}.key")),
                ca_dir.join(format!("{name}.pem")),
            )
        };

        let (root_key, root_cert) = paths("root");
        let root = if root_key.exists() {
            CaCert::load(&root_key, &root_cert)?
        } else {
            let root = generate_root()?;
            root.store(&root_key, &root_cert)?;
            root
        };

        let mut intermediates = Vec::with_capacity(ISSUERS.len());
        for issuer in ISSUERS {
            let (key, cert) = paths(issuer);
            let ca = if key.exists() {
                CaCert::load(&key, &cert)?
            } else {
                let ca = generate_intermediate(issuer, &root)?;
                ca.store(&key, &cert)?;
                ca
            };
            intermediates.push((issuer, ca));
        }

        write_file(&dir.join("root.pem"), root.pem.as_bytes(), 0o644)?;
        Ok(Self {
            root,
            intermediates,
            crl_base: None,
        })
    }

    /// Certificates issued from now on carry a CRL distribution point under `base`.
    pub fn set_crl_base(&mut self, base: String) {
        self.crl_base = Some(base);
    }

    /// `http://HOST:PORT` of the CRL listener, once set.
    pub fn crl_base(&self) -> Option<&str> {
        self.crl_base.as_deref()
    }

    /// DER of the CA certificate of an issuer value (the intermediate).
    pub fn intermediate_der(&self, issuer: &str) -> Result<&[u8], CaError> {
        Ok(&self.intermediate(issuer)?.der)
    }

    /// Signs `params` as a CRL of the issuer value's intermediate.
    pub fn sign_crl(
        &self,
        issuer: &str,
        params: &CertificateRevocationListParams,
    ) -> Result<Vec<u8>, CaError> {
        let ca = self.intermediate(issuer)?;
        Ok(params
            .signed_by(&ca.issuer)
            .map_err(issue_err)?
            .der()
            .to_vec())
    }

    pub fn root_pem(&self) -> &str {
        &self.root.pem
    }

    /// DER of the root certificate.
    pub fn root_der(&self) -> &[u8] {
        &self.root.der
    }

    /// The intermediate chain (PEM, nearest first, root excluded) for an issuer value.
    pub fn chain_pem(&self, issuer: &str) -> Result<Vec<String>, CaError> {
        Ok(vec![self.intermediate(issuer)?.pem.clone()])
    }

    fn intermediate(&self, issuer: &str) -> Result<&CaCert, CaError> {
        self.intermediates
            .iter()
            .find(|(name, _)| *name == issuer)
            .map(|(_, ca)| ca)
            .ok_or_else(|| CaError::UnknownIssuer(issuer.to_string()))
    }

    /// Issues a server certificate for `req.public_key_der` under the issuer's intermediate.
    ///
    /// Validity is `not_before..not_after` cut to whole seconds (what X.509 can hold; the
    /// returned times are those in the certificate). A `dns_names` entry that is an IP
    /// address literal goes into subjectAltName as an IP address.
    pub fn issue(&self, req: &IssueRequest<'_>) -> Result<IssuedCert, CaError> {
        let ca = self.intermediate(req.issuer)?;
        let not_before = whole_seconds(req.not_before);
        let not_after = whole_seconds(req.not_after);
        if not_after <= not_before {
            return Err(CaError::Issue(format!(
                "not_after {not_after} is not after not_before {not_before}"
            )));
        }
        let public_key = SubjectPublicKeyInfo::from_der(req.public_key_der)
            .map_err(|e| CaError::Issue(format!("unsupported public key: {e}")))?;
        let is_rsa = is_rsa_key(req.public_key_der)?;

        let mut params = CertificateParams::default();
        params.distinguished_name = distinguished_name(req.common_name, false);
        params.subject_alt_names = san_list(req.dns_names)?;
        let (serial, serial_hex) = random_serial();
        params.serial_number = Some(serial);
        params.not_before = not_before;
        params.not_after = not_after;
        params.is_ca = IsCa::ExplicitNoCa;
        params.key_usages = vec![KeyUsagePurpose::DigitalSignature];
        if is_rsa {
            params.key_usages.push(KeyUsagePurpose::KeyEncipherment);
        }
        params.extended_key_usages = vec![ExtendedKeyUsagePurpose::ServerAuth];
        params.use_authority_key_identifier_extension = true;
        if let Some(base) = &self.crl_base {
            params.crl_distribution_points = vec![CrlDistributionPoint {
                uris: vec![crl_url(base, req.issuer)],
            }];
        }

        let cert = params
            .signed_by(&public_key, &ca.issuer)
            .map_err(issue_err)?;
        Ok(IssuedCert {
            der: cert.der().to_vec(),
            pem: cert.pem(),
            serial_hex,
            not_before,
            not_after,
        })
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
///
/// Under `dir/api-tls/`: `ca.key`, `ca.pem`, `server.key`, `server.pem`. A stored server
/// certificate that is unreadable or expires within a day is replaced from the stored CA.
pub fn api_tls_identity(dir: Option<&Path>) -> Result<ApiTlsIdentity, CaError> {
    let Some(dir) = dir else {
        let ca = generate_api_ca()?;
        let (_, server_der, key) = issue_api_server_cert(&ca)?;
        return Ok(api_identity(&ca, server_der, &key));
    };

    let tls_dir = dir.join("api-tls");
    create_private_dir(&tls_dir)?;
    let (ca_key, ca_cert) = (tls_dir.join("ca.key"), tls_dir.join("ca.pem"));
    let (srv_key, srv_cert) = (tls_dir.join("server.key"), tls_dir.join("server.pem"));

    let ca = if ca_key.exists() {
        CaCert::load(&ca_key, &ca_cert)?
    } else {
        let ca = generate_api_ca()?;
        ca.store(&ca_key, &ca_cert)?;
        ca
    };
    let stored = if srv_key.exists() && srv_cert.exists() {
        load_api_server_cert(&srv_key, &srv_cert, &ca)
    } else {
        None
    };
    let (server_der, key) = match stored {
        Some(found) => found,
        None => {
            let (pem, der, key) = issue_api_server_cert(&ca)?;
            write_file(&srv_key, key.serialize_pem().as_bytes(), 0o600)?;
            write_file(&srv_cert, pem.as_bytes(), 0o644)?;
            (der, key)
        }
    };
    write_file(&dir.join("api-ca.pem"), ca.pem.as_bytes(), 0o644)?;
    Ok(api_identity(&ca, server_der, &key))
}

fn api_identity(ca: &CaCert, server_der: Vec<u8>, key: &KeyPair) -> ApiTlsIdentity {
    ApiTlsIdentity {
        ca_pem: ca.pem.clone(),
        cert_chain: vec![CertificateDer::from(server_der)],
        key: PrivateKeyDer::Pkcs8(PrivatePkcs8KeyDer::from(key.serialize_der())),
    }
}

fn generate_api_ca() -> Result<CaCert, CaError> {
    CaCert::generate(
        API_TLS_CA_CN,
        &rcgen::PKCS_ECDSA_P256_SHA256,
        IsCa::Ca(BasicConstraints::Constrained(0)),
        Duration::days(365 * 20),
        None,
    )
}

/// A stored API server certificate, if it still fits: readable, issued by `ca`, valid for at
/// least another day.
fn load_api_server_cert(
    key_path: &Path,
    cert_path: &Path,
    ca: &CaCert,
) -> Option<(Vec<u8>, KeyPair)> {
    let key = KeyPair::from_pem(&fs::read_to_string(key_path).ok()?).ok()?;
    let der = single_cert_der(&fs::read_to_string(cert_path).ok()?).ok()?;
    let (_, cert) = x509_parser::parse_x509_certificate(&der).ok()?;
    let (_, ca_cert) = x509_parser::parse_x509_certificate(&ca.der).ok()?;
    let fresh = cert.validity().not_after.to_datetime() > OffsetDateTime::now_utc() + Duration::DAY;
    let ours = cert.verify_signature(Some(ca_cert.public_key())).is_ok();
    let matches = cert.public_key().raw == key.subject_public_key_info().as_slice();
    (fresh && ours && matches).then_some((der, key))
}

fn issue_api_server_cert(ca: &CaCert) -> Result<(String, Vec<u8>, KeyPair), CaError> {
    let key = KeyPair::generate_for(&rcgen::PKCS_ECDSA_P256_SHA256).map_err(issue_err)?;
    let now = OffsetDateTime::now_utc();
    let mut params = CertificateParams::default();
    params.distinguished_name = distinguished_name("localhost", false);
    params.subject_alt_names = vec![
        SanType::DnsName(Ia5String::try_from("localhost").map_err(issue_err)?),
        SanType::IpAddress(IpAddr::from([127, 0, 0, 1])),
        SanType::IpAddress(IpAddr::from(std::net::Ipv6Addr::LOCALHOST)),
    ];
    params.serial_number = Some(random_serial().0);
    params.not_before = whole_seconds(now - Duration::HOUR);
    params.not_after = whole_seconds(now + Duration::days(365));
    params.is_ca = IsCa::ExplicitNoCa;
    params.key_usages = vec![KeyUsagePurpose::DigitalSignature];
    params.extended_key_usages = vec![ExtendedKeyUsagePurpose::ServerAuth];
    params.use_authority_key_identifier_extension = true;
    let cert = params.signed_by(&key, &ca.issuer).map_err(issue_err)?;
    Ok((cert.pem(), cert.der().to_vec(), key))
}

fn distinguished_name(common_name: &str, with_org: bool) -> DistinguishedName {
    let mut dn = DistinguishedName::new();
    if with_org {
        dn.push(DnType::OrganizationName, ORGANIZATION);
    }
    if !common_name.is_empty() {
        dn.push(DnType::CommonName, common_name);
    }
    dn
}

fn san_list(names: &[String]) -> Result<Vec<SanType>, CaError> {
    names
        .iter()
        .map(|name| match name.parse::<IpAddr>() {
            Ok(ip) => Ok(SanType::IpAddress(ip)),
            Err(_) => Ia5String::try_from(name.as_str())
                .map(SanType::DnsName)
                .map_err(|e| CaError::Issue(format!("subjectAltName '{name}': {e}"))),
        })
        .collect()
}

fn is_rsa_key(spki_der: &[u8]) -> Result<bool, CaError> {
    let (_, spki) = x509_parser::x509::SubjectPublicKeyInfo::from_der(spki_der)
        .map_err(|e| CaError::Issue(format!("malformed public key: {e}")))?;
    Ok(spki.algorithm.algorithm == x509_parser::oid_registry::OID_PKCS1_RSAENCRYPTION)
}

/// A fresh random serial: 16 bytes, positive, top byte never zero so the DER is always 16
/// bytes; with its upper-case hex.
fn random_serial() -> (SerialNumber, String) {
    let mut bytes = [0u8; 16];
    rand::fill(&mut bytes);
    bytes[0] = (bytes[0] & 0x7f) | 0x10;
    (SerialNumber::from_slice(&bytes), hex::encode_upper(bytes))
}

fn whole_seconds(t: OffsetDateTime) -> OffsetDateTime {
    t.to_offset(UtcOffset::UTC)
        .replace_nanosecond(0)
        .unwrap_or(t)
}

/// The DER of every `CERTIFICATE` block in `pem`, in order; text around blocks is ignored.
pub fn certs_from_pem(pem: &str) -> Result<Vec<Vec<u8>>, String> {
    let mut certs = Vec::new();
    for block in x509_parser::pem::Pem::iter_from_buffer(pem.as_bytes()) {
        let block = block.map_err(|e| format!("malformed PEM: {e}"))?;
        if block.label == "CERTIFICATE" {
            certs.push(block.contents);
        }
    }
    Ok(certs)
}

/// The DER of the first `CERTIFICATE` block in `pem`.
fn single_cert_der(pem: &str) -> Result<Vec<u8>, String> {
    certs_from_pem(pem)?
        .into_iter()
        .next()
        .ok_or_else(|| "no CERTIFICATE block".to_string())
}

/// PEM text of `der` under `label`: base64 in 64-column lines, LF line ends.
pub fn pem_encode(label: &str, der: &[u8]) -> String {
    const B64: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    let mut b64 = Vec::with_capacity(der.len().div_ceil(3) * 4);
    for chunk in der.chunks(3) {
        let n = chunk
            .iter()
            .enumerate()
            .fold(0u32, |n, (i, b)| n | u32::from(*b) << (16 - 8 * i));
        for i in 0..4 {
            b64.push(if i <= chunk.len() {
                B64[(n >> (18 - 6 * i) & 63) as usize]
            } else {
                b'='
            });
        }
    }
    let mut out = format!("-----BEGIN {label}-----\n");
    for line in b64.chunks(64) {
        out.extend(line.iter().map(|&b| char::from(b)));
        out.push('\n');
    }
    out.push_str(&format!("-----END {label}-----\n"));
    out
}

fn issue_err(e: impl std::fmt::Display) -> CaError {
    CaError::Issue(e.to_string())
}

fn storage(path: &Path, e: impl std::fmt::Display) -> CaError {
    CaError::Storage {
        path: path.display().to_string(),
        message: e.to_string(),
    }
}

fn read_file(path: &Path) -> Result<String, CaError> {
    fs::read_to_string(path).map_err(|e| storage(path, e))
}

fn create_private_dir(path: &Path) -> Result<(), CaError> {
    fs::create_dir_all(path).map_err(|e| storage(path, e))?;
    fs::set_permissions(path, fs::Permissions::from_mode(0o700)).map_err(|e| storage(path, e))
}

/// Writes `contents` to `path` through a temporary file in the same directory that is created
/// with `mode` before any byte is written, then renamed into place.
fn write_file(path: &Path, contents: &[u8], mode: u32) -> Result<(), CaError> {
    let mut tmp_name = path.file_name().unwrap_or_default().to_os_string();
    tmp_name.push(".tmp");
    let tmp: PathBuf = path.with_file_name(tmp_name);
    let _ = fs::remove_file(&tmp);
    let result = (|| {
        let mut file = fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .mode(mode)
            .open(&tmp)?;
        // The umask may have narrowed the mode; a key must be exactly 0600 either way.
        file.set_permissions(fs::Permissions::from_mode(mode))?;
        file.write_all(contents)?;
        file.sync_all()?;
        fs::rename(&tmp, path)
    })();
    result.map_err(|e| {
        let _ = fs::remove_file(&tmp);
        storage(path, e)
    })
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use std::process::Command;
    use x509_parser::certificate::X509Certificate;
    use x509_parser::extensions::ParsedExtension;

    /// A temporary directory removed on drop (the sandbox crate has no `tempfile`).
    pub(crate) struct TempDir(pub PathBuf);

    impl TempDir {
        pub(crate) fn new(tag: &str) -> Self {
            let mut suffix = [0u8; 8];
            rand::fill(&mut suffix);
            let path =
                std::env::temp_dir().join(format!("partner-sandbox-{tag}-{}", hex::encode(suffix)));
            fs::create_dir_all(&path).expect("create temp dir");
            Self(path)
        }
        pub(crate) fn path(&self) -> &Path {
            &self.0
        }
    }

    impl Drop for TempDir {
        fn drop(&mut self) {
            let _ = fs::remove_dir_all(&self.0);
        }
    }

    pub(crate) fn openssl(args: &[&str], dir: &Path) -> (bool, String) {
        let out = Command::new("/usr/bin/openssl")
            .args(args)
            .current_dir(dir)
            .output()
            .expect("run openssl");
        let text = format!(
            "{}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
        (out.status.success(), text)
    }

    /// An openssl-made CSR: `newkey` like `ec` / `rsa:2048`, with `pkeyopt` options.
    fn openssl_csr(dir: &Path, newkey: &str, pkeyopt: &[&str], san: Option<&str>) -> String {
        let mut args = vec!["req", "-new", "-newkey", newkey];
        for opt in pkeyopt {
            args.extend(["-pkeyopt", opt]);
        }
        args.extend([
            "-nodes",
            "-keyout",
            "key.pem",
            "-subj",
            "/CN=www.example.com",
        ]);
        let ext;
        if let Some(san) = san {
            ext = format!("subjectAltName={san}");
            args.extend(["-addext", &ext]);
        }
        args.extend(["-out", "csr.pem"]);
        let (ok, text) = openssl(&args, dir);
        assert!(ok, "openssl req failed: {text}");
        fs::read_to_string(dir.join("csr.pem")).expect("read csr")
    }

    fn spki_of_key(dir: &Path) -> Vec<u8> {
        let (ok, text) = openssl(
            &[
                "pkey", "-in", "key.pem", "-pubout", "-outform", "DER", "-out", "pub.der",
            ],
            dir,
        );
        assert!(ok, "{text}");
        fs::read(dir.join("pub.der")).expect("read pub.der")
    }

    fn parse_cert(der: &[u8]) -> X509Certificate<'_> {
        let (rest, cert) = x509_parser::parse_x509_certificate(der).expect("parse certificate");
        assert!(rest.is_empty());
        cert
    }

    fn ext(cert: &X509Certificate<'_>, pick: fn(&ParsedExtension) -> bool) -> bool {
        cert.extensions().iter().any(|e| pick(e.parsed_extension()))
    }

    fn at(unix: i64) -> OffsetDateTime {
        OffsetDateTime::from_unix_timestamp(unix).expect("timestamp")
    }

    #[test]
    fn pem_encode_matches_rcgen() {
        let key = KeyPair::generate().expect("key");
        let cert = CertificateParams::default()
            .self_signed(&key)
            .expect("self-signed");
        assert_eq!(pem_encode("CERTIFICATE", cert.der()), cert.pem());
        assert_eq!(
            certs_from_pem(&[cert.pem(), cert.pem()].concat()).expect("parse"),
            [cert.der().to_vec(), cert.der().to_vec()]
        );
        for len in 0..5 {
            let der = vec![0xA5u8; len];
            let pem = pem_encode("X", &der);
            let block = x509_parser::pem::parse_x509_pem(pem.as_bytes())
                .expect("pem")
                .1;
            assert_eq!(block.contents, der);
        }
    }

    #[test]
    fn intermediate_names_follow_issuer_values() {
        assert_eq!(
            intermediate_common_name("s-one"),
            "Partner Sandbox S-One CA"
        );
        assert_eq!(
            intermediate_common_name("c-one"),
            "Partner Sandbox C-One CA"
        );
    }

    #[test]
    fn chain_is_a_proper_ca_hierarchy() {
        let ca = Authority::generate().expect("generate");
        let root_der = single_cert_der(ca.root_pem()).expect("root pem");
        let root = parse_cert(&root_der);
        assert_eq!(
            root.subject()
                .iter_common_name()
                .next()
                .and_then(|c| c.as_str().ok()),
            Some(ROOT_CN)
        );
        let root_ski = root
            .extensions()
            .iter()
            .find_map(|e| match e.parsed_extension() {
                ParsedExtension::SubjectKeyIdentifier(k) => Some(k.0.to_vec()),
                _ => None,
            })
            .expect("root SKI");
        for issuer in ISSUERS {
            let chain = ca.chain_pem(issuer).expect("chain");
            assert_eq!(chain.len(), 1);
            let der = single_cert_der(&chain[0]).expect("intermediate pem");
            let int = parse_cert(&der);
            assert_eq!(
                int.subject()
                    .iter_common_name()
                    .next()
                    .and_then(|c| c.as_str().ok()),
                Some(intermediate_common_name(issuer).as_str())
            );
            assert_eq!(int.issuer(), root.subject());
            int.verify_signature(Some(root.public_key()))
                .expect("signed by root");
            let bc = int.basic_constraints().expect("bc").expect("present").value;
            assert!(bc.ca);
            assert_eq!(bc.path_len_constraint, Some(0));
            let ku = int.key_usage().expect("ku").expect("present").value;
            assert!(ku.key_cert_sign());
            let aki = int
                .extensions()
                .iter()
                .find_map(|e| match e.parsed_extension() {
                    ParsedExtension::AuthorityKeyIdentifier(a) => {
                        a.key_identifier.as_ref().map(|k| k.0.to_vec())
                    }
                    _ => None,
                })
                .expect("AKI");
            assert_eq!(aki, root_ski);
        }
        assert!(matches!(
            ca.chain_pem("x-nine"),
            Err(CaError::UnknownIssuer(_))
        ));
    }

    #[test]
    fn issues_for_every_key_type_and_openssl_verifies() {
        let ca = Authority::generate().expect("generate");
        let tmp = TempDir::new("issue");
        let dir = tmp.path();
        fs::write(dir.join("root.pem"), ca.root_pem()).expect("write root");
        let now = OffsetDateTime::now_utc();
        let not_before = now - Duration::hours(1) + Duration::milliseconds(250);
        let not_after = now + Duration::days(90);
        let keys: [(&str, &[&str], bool); 5] = [
            ("ec", &["ec_paramgen_curve:P-256"], false),
            ("ec", &["ec_paramgen_curve:P-384"], false),
            ("rsa:2048", &[], true),
            ("rsa:3072", &[], true),
            ("rsa:4096", &[], true),
        ];
        for (i, (newkey, opts, rsa)) in keys.into_iter().enumerate() {
            openssl_csr(dir, newkey, opts, None);
            let spki = spki_of_key(dir);
            let issuer = ISSUERS[i % ISSUERS.len()];
            let names = vec!["www.example.com".to_string(), "example.com".to_string()];
            let issued = ca
                .issue(&IssueRequest {
                    issuer,
                    public_key_der: &spki,
                    common_name: "www.example.com",
                    dns_names: &names,
                    not_before,
                    not_after,
                })
                .expect("issue");
            let cert = parse_cert(&issued.der);
            assert_eq!(cert.public_key().raw, spki.as_slice(), "{newkey}");
            assert_eq!(
                cert.subject()
                    .iter_common_name()
                    .next()
                    .and_then(|c| c.as_str().ok()),
                Some("www.example.com")
            );
            let san = cert
                .subject_alternative_name()
                .expect("san")
                .expect("present");
            let dns: Vec<String> = san
                .value
                .general_names
                .iter()
                .filter_map(|n| match n {
                    GeneralName::DNSName(d) => Some((*d).to_string()),
                    _ => None,
                })
                .collect();
            assert_eq!(dns, names);
            assert_eq!(hex::encode_upper(cert.raw_serial()), issued.serial_hex);
            assert_eq!(issued.serial_hex.len(), 32);
            assert_eq!(cert.validity().not_before.to_datetime(), issued.not_before);
            assert_eq!(cert.validity().not_after.to_datetime(), issued.not_after);
            assert_eq!(
                issued.not_before,
                not_before.replace_nanosecond(0).expect("ns")
            );
            assert_eq!(
                issued.not_after,
                not_after.replace_nanosecond(0).expect("ns")
            );
            let bc = cert
                .basic_constraints()
                .expect("bc")
                .expect("present")
                .value;
            assert!(!bc.ca);
            let eku = cert
                .extended_key_usage()
                .expect("eku")
                .expect("present")
                .value;
            assert!(eku.server_auth);
            let ku = cert.key_usage().expect("ku").expect("present").value;
            assert!(ku.digital_signature());
            assert_eq!(ku.key_encipherment(), rsa, "{newkey}");
            assert!(ext(&cert, |e| matches!(
                e,
                ParsedExtension::AuthorityKeyIdentifier(_)
            )));

            fs::write(
                dir.join("chain.pem"),
                ca.chain_pem(issuer).expect("chain").concat(),
            )
            .expect("write chain");
            fs::write(dir.join("leaf.pem"), &issued.pem).expect("write leaf");
            let (ok, text) = openssl(
                &[
                    "verify",
                    "-purpose",
                    "sslserver",
                    "-CAfile",
                    "root.pem",
                    "-untrusted",
                    "chain.pem",
                    "leaf.pem",
                ],
                dir,
            );
            assert!(ok, "openssl verify for {newkey}: {text}");
        }
    }

    #[test]
    fn serials_are_fresh() {
        let ca = Authority::generate().expect("generate");
        let key = KeyPair::generate().expect("key");
        let spki = key.subject_public_key_info();
        let req = IssueRequest {
            issuer: "d-one",
            public_key_der: &spki,
            common_name: "a.example",
            dns_names: &[],
            not_before: at(1_700_000_000),
            not_after: at(1_710_000_000),
        };
        let a = ca.issue(&req).expect("issue a");
        let b = ca.issue(&req).expect("issue b");
        assert_ne!(a.serial_hex, b.serial_hex);
    }

    #[test]
    fn issue_refuses_bad_input() {
        let ca = Authority::generate().expect("generate");
        let key = KeyPair::generate().expect("key");
        let spki = key.subject_public_key_info();
        let good = IssueRequest {
            issuer: "s-one",
            public_key_der: &spki,
            common_name: "a.example",
            dns_names: &[],
            not_before: at(1_700_000_000),
            not_after: at(1_710_000_000),
        };
        let unknown = IssueRequest {
            issuer: "nope",
            ..good.clone()
        };
        assert!(matches!(ca.issue(&unknown), Err(CaError::UnknownIssuer(_))));
        let garbage = IssueRequest {
            public_key_der: b"not a key",
            ..good.clone()
        };
        assert!(matches!(ca.issue(&garbage), Err(CaError::Issue(_))));
        let backwards = IssueRequest {
            not_after: at(1_600_000_000),
            ..good.clone()
        };
        assert!(matches!(ca.issue(&backwards), Err(CaError::Issue(_))));
        let names = vec!["bücher.example".to_string()];
        let non_ascii = IssueRequest {
            dns_names: &names,
            ..good
        };
        assert!(matches!(ca.issue(&non_ascii), Err(CaError::Issue(_))));
    }

    #[test]
    fn parses_openssl_csrs() {
        let tmp = TempDir::new("csr");
        let dir = tmp.path();
        let pem = openssl_csr(
            dir,
            "ec",
            &["ec_paramgen_curve:P-256"],
            Some("DNS:www.example.com,DNS:example.com,IP:192.0.2.7,IP:2001:db8::1"),
        );
        let info = parse_csr(&pem).expect("parse EC CSR");
        assert_eq!(info.common_name.as_deref(), Some("www.example.com"));
        assert_eq!(info.dns_names, ["www.example.com", "example.com"]);
        assert_eq!(
            info.ip_addresses,
            [
                "192.0.2.7".parse::<IpAddr>().expect("ip"),
                "2001:db8::1".parse::<IpAddr>().expect("ip")
            ]
        );
        assert_eq!(info.public_key_der, spki_of_key(dir));
        let (ok, der_text) = openssl(
            &[
                "req", "-in", "csr.pem", "-outform", "DER", "-out", "csr.der",
            ],
            dir,
        );
        assert!(ok, "{der_text}");
        let der = fs::read(dir.join("csr.der")).expect("csr.der");
        assert_eq!(info.der, der);
        assert_eq!(info.md5_hex, hex::encode_upper(Md5::digest(&der)));
        assert_eq!(info.sha256_hex, hex::encode_upper(Sha256::digest(&der)));
        assert_eq!(info.md5_hex.len(), 32);
        assert!(info.md5_hex.chars().all(|c| !c.is_ascii_lowercase()));

        let pem = openssl_csr(dir, "rsa:2048", &[], None);
        let info = parse_csr(&pem).expect("parse RSA CSR");
        assert_eq!(info.common_name.as_deref(), Some("www.example.com"));
        assert!(info.dns_names.is_empty());
        assert_eq!(info.public_key_der, spki_of_key(dir));

        let crlf = parse_csr(&pem.replace('\n', "\r\n")).expect("parse CRLF");
        assert_eq!(crlf.der, info.der);

        let new_marker = pem.replace("CERTIFICATE REQUEST", "NEW CERTIFICATE REQUEST");
        let info_new = parse_csr(&format!("text before\n{new_marker}\ntext after\n"))
            .expect("parse NEW marker");
        assert_eq!(info_new.der, info.der);
    }

    #[test]
    fn rejects_broken_signature_and_garbage() {
        let tmp = TempDir::new("badcsr");
        let dir = tmp.path();
        let pem = openssl_csr(
            dir,
            "ec",
            &["ec_paramgen_curve:P-256"],
            Some("DNS:www.example.com"),
        );
        let mut der = parse_csr(&pem).expect("good").der;
        // Flip a bit in the last byte: inside the signature value.
        let last = der.len() - 1;
        der[last] ^= 0x01;
        let broken = pem_encode("CERTIFICATE REQUEST", &der);
        let err = parse_csr(&broken).expect_err("broken signature accepted");
        assert!(err.to_string().contains("signature"), "{err}");

        // Change a byte of the subject: the signature no longer covers the content.
        let mut der = parse_csr(&pem).expect("good").der;
        let pos = der.windows(3).position(|w| w == b"www").expect("CN in DER");
        der[pos] = b'x';
        let err = parse_csr(&pem_encode("CERTIFICATE REQUEST", &der)).expect_err("tampered");
        assert!(err.to_string().contains("signature"), "{err}");

        for garbage in [
            "",
            "hello",
            "-----BEGIN CERTIFICATE REQUEST-----\n!!!\n-----END CERTIFICATE REQUEST-----\n",
            "-----BEGIN CERTIFICATE REQUEST-----\nAAAA\n-----END CERTIFICATE REQUEST-----\n",
            "-----BEGIN CERTIFICATE REQUEST-----\nMIIB\n",
            "-----BEGIN CERTIFICATE-----\nAAAA\n-----END CERTIFICATE-----\n",
        ] {
            let err = parse_csr(garbage).expect_err(garbage);
            assert!(matches!(err, CaError::InvalidCsr(_)), "{err}");
        }
    }

    #[test]
    fn load_or_generate_round_trips_with_private_keys() {
        let tmp = TempDir::new("store");
        let dir = tmp.path();
        let first = Authority::load_or_generate(dir).expect("generate");
        assert_eq!(
            fs::read_to_string(dir.join("root.pem")).expect("root.pem"),
            first.root_pem()
        );
        for name in std::iter::once("root").chain(ISSUERS) {
            let key = dir.join("ca").join(format!("{name}.key"));
            let mode = fs::metadata(&key).expect("key").permissions().mode() & 0o777;
            assert_eq!(mode, 0o600, "{}", key.display());
            assert!(dir.join("ca").join(format!("{name}.pem")).exists());
        }
        fs::remove_file(dir.join("root.pem")).expect("remove root.pem");
        let second = Authority::load_or_generate(dir).expect("load");
        assert_eq!(second.root_pem(), first.root_pem());
        assert!(dir.join("root.pem").exists());
        for issuer in ISSUERS {
            assert_eq!(
                second.chain_pem(issuer).expect("chain"),
                first.chain_pem(issuer).expect("chain")
            );
        }

        // A certificate issued by the loaded authority verifies against the stored root.
        let key = KeyPair::generate().expect("key");
        let spki = key.subject_public_key_info();
        let issued = second
            .issue(&IssueRequest {
                issuer: "c-one",
                public_key_der: &spki,
                common_name: "www.example.com",
                dns_names: &["www.example.com".to_string()],
                not_before: OffsetDateTime::now_utc() - Duration::HOUR,
                not_after: OffsetDateTime::now_utc() + Duration::days(30),
            })
            .expect("issue");
        fs::write(
            dir.join("chain.pem"),
            second.chain_pem("c-one").expect("c").concat(),
        )
        .expect("chain");
        fs::write(dir.join("leaf.pem"), issued.pem).expect("leaf");
        let (ok, text) = openssl(
            &[
                "verify",
                "-CAfile",
                "root.pem",
                "-untrusted",
                "chain.pem",
                "leaf.pem",
            ],
            dir,
        );
        assert!(ok, "{text}");

        // A missing intermediate is regenerated under the same root; a broken root is an error.
        fs::remove_file(dir.join("ca/d-one.key")).expect("rm");
        let third = Authority::load_or_generate(dir).expect("regenerate intermediate");
        assert_eq!(third.root_pem(), first.root_pem());
        assert_ne!(
            third.chain_pem("d-one").expect("d"),
            first.chain_pem("d-one").expect("d")
        );
        fs::write(dir.join("ca/root.key"), "garbage").expect("corrupt");
        let err = Authority::load_or_generate(dir)
            .err()
            .expect("corrupt root accepted");
        assert!(err.to_string().contains("root.key"), "{err}");
    }

    #[test]
    fn api_tls_identity_is_separate_and_persisted() {
        let tmp = TempDir::new("apitls");
        let dir = tmp.path();
        let ca = Authority::load_or_generate(dir).expect("authority");
        let id = api_tls_identity(Some(dir)).expect("identity");
        assert_ne!(id.ca_pem, ca.root_pem());
        assert_eq!(
            fs::read_to_string(dir.join("api-ca.pem")).expect("api-ca.pem"),
            id.ca_pem
        );
        for key in ["ca.key", "server.key"] {
            let mode = fs::metadata(dir.join("api-tls").join(key))
                .expect("key")
                .permissions()
                .mode()
                & 0o777;
            assert_eq!(mode, 0o600);
        }
        let cert = parse_cert(&id.cert_chain[0]);
        let san = cert
            .subject_alternative_name()
            .expect("san")
            .expect("present");
        let names: Vec<String> = san
            .value
            .general_names
            .iter()
            .map(|n| match n {
                GeneralName::DNSName(d) => (*d).to_string(),
                GeneralName::IPAddress(b) => ip_from_bytes(b).expect("ip").to_string(),
                other => format!("{other:?}"),
            })
            .collect();
        assert_eq!(names, ["localhost", "127.0.0.1", "::1"]);
        assert!(
            cert.extended_key_usage()
                .expect("eku")
                .expect("present")
                .value
                .server_auth
        );
        let ca_der = single_cert_der(&id.ca_pem).expect("ca");
        let ca_cert = parse_cert(&ca_der);
        assert_eq!(
            ca_cert
                .subject()
                .iter_common_name()
                .next()
                .and_then(|c| c.as_str().ok()),
            Some(API_TLS_CA_CN)
        );
        cert.verify_signature(Some(ca_cert.public_key()))
            .expect("signed by API CA");
        let PrivateKeyDer::Pkcs8(key) = &id.key else {
            panic!("expected PKCS#8 key");
        };
        let key = KeyPair::try_from(key.secret_pkcs8_der()).expect("key");
        assert_eq!(key.subject_public_key_info(), cert.public_key().raw);

        let again = api_tls_identity(Some(dir)).expect("reload");
        assert_eq!(again.ca_pem, id.ca_pem);
        assert_eq!(again.cert_chain, id.cert_chain);

        // A damaged server certificate is replaced under the same CA.
        fs::write(dir.join("api-tls/server.pem"), "x").expect("damage");
        let replaced = api_tls_identity(Some(dir)).expect("replace");
        assert_eq!(replaced.ca_pem, id.ca_pem);
        assert_ne!(replaced.cert_chain, id.cert_chain);
        let cert = parse_cert(&replaced.cert_chain[0]);
        cert.verify_signature(Some(ca_cert.public_key()))
            .expect("replacement signed by API CA");

        let ephemeral = api_tls_identity(None).expect("in memory");
        assert_ne!(ephemeral.ca_pem, id.ca_pem);
    }

    #[test]
    fn authority_can_be_shared_between_threads() {
        fn assert_send_sync<T: Send + Sync>() {}
        assert_send_sync::<Authority>();
        assert_send_sync::<ApiTlsIdentity>();
    }
}
