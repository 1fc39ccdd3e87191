//! Certificate signing requests: building one for the configured names, reading one back
//! (the API returns the CSR of an order), and the CSR hashes used by domain control validation.

use md5::Md5;
use rcgen::{CertificateParams, DistinguishedName, DnType};
use rustls_pki_types::CertificateSigningRequestDer;
use rustls_pki_types::pem::PemObject;
use sha2::{Digest, Sha256};

use super::CryptoError;
use super::PrivateKey;

/// MD5 and SHA-256 of a CSR's DER, upper-case hex. The MD5 names the HTTP validation file
/// (`/.well-known/pki-validation/<MD5>.txt`), the SHA-256 is the file's first line.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CsrHashes {
    /// 32 upper-case hex digits.
    pub md5: String,
    /// 64 upper-case hex digits.
    pub sha256: String,
}

impl CsrHashes {
    /// Hashes of `der` (the whole CSR, DER encoded).
    pub fn of_der(der: &[u8]) -> Self {
        Self {
            md5: hex::encode_upper(Md5::digest(der)),
            sha256: hex::encode_upper(Sha256::digest(der)),
        }
    }
}

/// A CSR built by the agent.
#[derive(Debug, Clone)]
pub struct Csr {
    /// PEM (`CERTIFICATE REQUEST`), as sent in orders and reissues.
    pub pem: String,
    /// DER of the whole request.
    pub der: Vec<u8>,
    /// Hashes of `der`.
    pub hashes: CsrHashes,
}

impl Csr {
    /// A CSR signed by `key` with the first domain as common name and every domain (the first
    /// included) in subjectAltName, in the given order; repeated names (compared without case)
    /// appear once.
    pub fn new(key: &PrivateKey, domains: &[String]) -> Result<Self, CryptoError> {
        let mut names: Vec<String> = Vec::with_capacity(domains.len());
        for d in domains {
            check_domain(d)?;
            if !names.iter().any(|n| n.eq_ignore_ascii_case(d)) {
                names.push(d.clone());
            }
        }
        let common_name = names.first().cloned().ok_or(CryptoError::NoDomains)?;
        let build_err = |e: rcgen::Error| CryptoError::CsrBuild {
            common_name: common_name.clone(),
            message: e.to_string(),
        };
        let mut params = CertificateParams::new(names).map_err(build_err)?;
        let mut dn = DistinguishedName::new();
        dn.push(DnType::CommonName, common_name.as_str());
        params.distinguished_name = dn;
        let csr = params
            .serialize_request(key.key_pair())
            .map_err(build_err)?;
        let der = csr.der().to_vec();
        let pem = csr.pem().map_err(build_err)?;
        let hashes = CsrHashes::of_der(&der);
        Ok(Self { pem, der, hashes })
    }
}

/// A self-signed placeholder certificate (PEM) for `domains` with `key`, valid from now for
/// `days`: lets a web server start its TLS site before the first real certificate. Its
/// subject names it as a placeholder (`O=cert-agent placeholder`).
pub(crate) fn self_signed_placeholder(
    key: &PrivateKey,
    domains: &[String],
    days: i64,
) -> Result<String, CryptoError> {
    let common_name = domains.first().cloned().ok_or(CryptoError::NoDomains)?;
    for d in domains {
        check_domain(d)?;
    }
    let build_err = |e: rcgen::Error| CryptoError::CsrBuild {
        common_name: common_name.clone(),
        message: e.to_string(),
    };
    let mut params = CertificateParams::new(domains.to_vec()).map_err(build_err)?;
    let mut dn = DistinguishedName::new();
    dn.push(DnType::CommonName, common_name.as_str());
    dn.push(DnType::OrganizationName, PLACEHOLDER_ORGANIZATION);
    params.distinguished_name = dn;
    let now = time::OffsetDateTime::now_utc();
    params.not_before = now - time::Duration::minutes(5);
    params.not_after = now + time::Duration::days(days);
    let cert = params.self_signed(key.key_pair()).map_err(build_err)?;
    Ok(cert.pem())
}

/// The organisation of a placeholder's subject.
pub(crate) const PLACEHOLDER_ORGANIZATION: &str = "cert-agent placeholder";

/// What the agent reads from a CSR (its own, or the one the API reports for an order).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CsrInfo {
    /// DER of the whole request.
    pub der: Vec<u8>,
    /// Subject common name, if any.
    pub common_name: Option<String>,
    /// subjectAltName DNS names, in request order.
    pub dns_names: Vec<String>,
    /// DER of the SubjectPublicKeyInfo.
    pub public_key_der: Vec<u8>,
    /// Hashes of `der`.
    pub hashes: CsrHashes,
}

impl CsrInfo {
    /// Reads the first `CERTIFICATE REQUEST` of a PEM text and checks its self-signature.
    pub fn from_pem(pem: &[u8]) -> Result<Self, CryptoError> {
        let der = CertificateSigningRequestDer::from_pem_slice(pem).map_err(|e| {
            CryptoError::CsrParse {
                message: format!("no PEM CERTIFICATE REQUEST: {e}"),
            }
        })?;
        Self::from_der(der.as_ref())
    }

    /// Reads a DER CSR and checks its self-signature.
    pub fn from_der(der: &[u8]) -> Result<Self, CryptoError> {
        use x509_parser::extensions::{GeneralName, ParsedExtension};
        use x509_parser::prelude::{FromDer, X509CertificationRequest};

        let err = |message: String| CryptoError::CsrParse { message };
        let (rest, req) =
            X509CertificationRequest::from_der(der).map_err(|e| err(e.to_string()))?;
        if !rest.is_empty() {
            return Err(err(format!("{} bytes after the request", rest.len())));
        }
        req.verify_signature()
            .map_err(|e| err(format!("bad self-signature: {e}")))?;
        let info = &req.certification_request_info;
        let common_name = info
            .subject
            .iter_common_name()
            .next()
            .map(|cn| cn.as_str().map(str::to_owned))
            .transpose()
            .map_err(|e| err(format!("common name: {e}")))?;
        let mut dns_names = Vec::new();
        for ext in req.requested_extensions().into_iter().flatten() {
            if let ParsedExtension::SubjectAlternativeName(san) = ext {
                for name in &san.general_names {
                    if let GeneralName::DNSName(d) = name {
                        dns_names.push((*d).to_owned());
                    }
                }
            }
        }
        Ok(Self {
            der: der.to_vec(),
            common_name,
            dns_names,
            public_key_der: info.subject_pki.raw.to_vec(),
            hashes: CsrHashes::of_der(der),
        })
    }
}

/// A syntactic check of a name before it goes into a CSR: LDH labels, optionally `*.` in
/// front. Configuration validates names too; this keeps odd input out of the request.
fn check_domain(domain: &str) -> Result<(), CryptoError> {
    let bad = |reason: &'static str| {
        Err(CryptoError::InvalidDomain {
            domain: domain.to_owned(),
            reason,
        })
    };
    if domain.is_empty() {
        return bad("empty name");
    }
    if domain.len() > 253 {
        return bad("longer than 253 characters");
    }
    if domain.parse::<std::net::IpAddr>().is_ok() {
        return bad("IP addresses are not supported");
    }
    let rest = domain.strip_prefix("*.").unwrap_or(domain);
    if rest.split('.').count() < 2 {
        return bad("needs at least two labels");
    }
    for label in rest.split('.') {
        if label.is_empty() {
            return bad("empty label");
        }
        if label.len() > 63 {
            return bad("label longer than 63 characters");
        }
        if !label
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'-')
        {
            return bad("only letters, digits and '-' are allowed in labels ('*.' only in front)");
        }
        if label.starts_with('-') || label.ends_with('-') {
            return bad("a label may not begin or end with '-'");
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::crypto::KeyType;

    fn domains(names: &[&str]) -> Vec<String> {
        names.iter().map(|s| (*s).to_owned()).collect()
    }

    #[test]
    fn csr_has_common_name_and_every_domain_in_san() {
        for t in [KeyType::EcdsaP256, KeyType::EcdsaP384, KeyType::Rsa2048] {
            let key = PrivateKey::generate(t).unwrap();
            let names = domains(&["www.example.com", "example.com", "*.shop.example.com"]);
            let csr = Csr::new(&key, &names).unwrap();
            assert!(csr.pem.starts_with("-----BEGIN CERTIFICATE REQUEST-----"));
            let info = CsrInfo::from_pem(csr.pem.as_bytes()).unwrap();
            assert_eq!(info.der, csr.der);
            assert_eq!(info.common_name.as_deref(), Some("www.example.com"));
            assert_eq!(info.dns_names, names);
            assert_eq!(info.public_key_der, key.public_key_der());
            assert_eq!(info.hashes, csr.hashes);
        }
    }

    #[test]
    fn csr_drops_repeated_names() {
        let key = PrivateKey::generate(KeyType::EcdsaP256).unwrap();
        let csr = Csr::new(
            &key,
            &domains(&["a.example.com", "A.example.com", "b.example.com"]),
        )
        .unwrap();
        let info = CsrInfo::from_der(&csr.der).unwrap();
        assert_eq!(info.dns_names, domains(&["a.example.com", "b.example.com"]));
    }

    #[test]
    fn csr_rejects_bad_names() {
        let key = PrivateKey::generate(KeyType::EcdsaP256).unwrap();
        assert!(matches!(Csr::new(&key, &[]), Err(CryptoError::NoDomains)));
        for bad in [
            "",
            "localhost",
            "a..example.com",
            "exa mple.com",
            "ex$(reboot).com",
            "../etc/passwd",
            "a.*.example.com",
            "192.168.1.1",
            "-a.example.com",
            "bücher.example",
        ] {
            let err = Csr::new(&key, &domains(&["ok.example.com", bad])).unwrap_err();
            assert!(
                matches!(err, CryptoError::InvalidDomain { .. }),
                "{bad}: {err}"
            );
        }
    }

    /// The hashes equal those openssl computes for the same CSR:
    /// `openssl req -outform DER | openssl dgst -md5 / -sha256`.
    #[test]
    fn csr_hashes_match_openssl() {
        use std::process::Command;
        let dir = tempfile::tempdir().unwrap();
        let key = PrivateKey::generate(KeyType::EcdsaP256).unwrap();
        let csr = Csr::new(&key, &domains(&["www.example.com", "example.com"])).unwrap();
        let pem_path = dir.path().join("req.pem");
        let der_path = dir.path().join("req.der");
        std::fs::write(&pem_path, &csr.pem).unwrap();
        let out = Command::new("/usr/bin/openssl")
            .args(["req", "-outform", "DER", "-in"])
            .arg(&pem_path)
            .arg("-out")
            .arg(&der_path)
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        assert_eq!(std::fs::read(&der_path).unwrap(), csr.der);
        for (alg, expected) in [("-md5", &csr.hashes.md5), ("-sha256", &csr.hashes.sha256)] {
            let out = Command::new("/usr/bin/openssl")
                .args(["dgst", alg, "-r"])
                .arg(&der_path)
                .output()
                .unwrap();
            assert!(out.status.success());
            let stdout = String::from_utf8(out.stdout).unwrap();
            let hex = stdout.split_whitespace().next().unwrap();
            assert_eq!(&hex.to_ascii_uppercase(), expected, "{alg}");
        }
        assert_eq!(csr.hashes.md5.len(), 32);
        assert_eq!(csr.hashes.sha256.len(), 64);
        assert!(
            csr.hashes
                .sha256
                .bytes()
                .all(|b| b.is_ascii_digit() || b.is_ascii_uppercase())
        );
    }

    #[test]
    fn known_hash_values() {
        let h = CsrHashes::of_der(b"abc");
        assert_eq!(h.md5, "900150983CD24FB0D6963F7D28E17F72");
        assert_eq!(
            h.sha256,
            "BA7816BF8F01CFEA414140DE5DAE2223B00361A396177A9CB410FF61F20015AD"
        );
    }

    #[test]
    fn csr_parse_rejects_garbage_and_tampering() {
        assert!(CsrInfo::from_pem(b"not a csr").is_err());
        let key = PrivateKey::generate(KeyType::EcdsaP256).unwrap();
        let csr = Csr::new(&key, &domains(&["www.example.com"])).unwrap();
        let mut der = csr.der.clone();
        // Flip a byte inside the common name: the self-signature no longer verifies.
        let pos = der.windows(3).position(|w| w == b"www").unwrap();
        der[pos] = b'v';
        let err = CsrInfo::from_der(&der).unwrap_err();
        assert!(err.to_string().contains("self-signature"), "{err}");
    }
}
