//! Reading X.509 certificates (x509-parser): the facts the agent decides on (serial, dates,
//! names, key, CA flag) and whether a certificate is for one of our keys.

use rustls_pki_types::CertificateDer;
use rustls_pki_types::pem::PemObject;
use time::OffsetDateTime;
use x509_parser::extensions::GeneralName;
use x509_parser::oid_registry::OID_KEY_TYPE_EC_PUBLIC_KEY;
use x509_parser::prelude::{FromDer, X509Certificate};
use x509_parser::x509::SubjectPublicKeyInfo;

use super::{CryptoError, PrivateKey};

/// What the agent reads from a certificate.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CertificateInfo {
    /// DER of the certificate.
    pub der: Vec<u8>,
    /// Serial number, upper-case hex without leading zero bytes (as `openssl x509 -serial`).
    pub serial_hex: String,
    pub not_before: OffsetDateTime,
    pub not_after: OffsetDateTime,
    /// Subject common name, if any.
    pub subject_cn: Option<String>,
    /// Subject and issuer in RFC 4514 form, for messages.
    pub subject: String,
    pub issuer: String,
    /// subjectAltName DNS names, in certificate order.
    pub dns_names: Vec<String>,
    /// DER of the SubjectPublicKeyInfo.
    pub spki_der: Vec<u8>,
    /// basicConstraints CA:TRUE.
    pub is_ca: bool,
}

impl CertificateInfo {
    /// Reads a DER certificate; trailing bytes are an error.
    pub fn from_der(der: &[u8]) -> Result<Self, CryptoError> {
        let err = |message: String| CryptoError::CertificateParse { message };
        let (rest, cert) = X509Certificate::from_der(der).map_err(|e| err(e.to_string()))?;
        if !rest.is_empty() {
            return Err(err(format!("{} bytes after the certificate", rest.len())));
        }
        let subject_cn = cert
            .subject()
            .iter_common_name()
            .next()
            .map(|cn| cn.as_str().map(str::to_owned))
            .transpose()
            .map_err(|e| err(format!("subject common name: {e}")))?;
        let dns_names = san_dns_names(&cert).map_err(err)?;
        let is_ca = cert
            .basic_constraints()
            .map_err(|e| err(format!("basicConstraints: {e}")))?
            .is_some_and(|bc| bc.value.ca);
        Ok(Self {
            der: der.to_vec(),
            serial_hex: serial_hex(cert.raw_serial()),
            not_before: cert.validity().not_before.to_datetime(),
            not_after: cert.validity().not_after.to_datetime(),
            subject_cn,
            subject: cert.subject().to_string(),
            issuer: cert.issuer().to_string(),
            dns_names,
            spki_der: cert.public_key().raw.to_vec(),
            is_ca,
        })
    }

    /// Reads the first `CERTIFICATE` of a PEM text.
    pub fn from_pem(pem: &[u8]) -> Result<Self, CryptoError> {
        let der =
            CertificateDer::from_pem_slice(pem).map_err(|e| CryptoError::CertificateParse {
                message: format!("no PEM CERTIFICATE: {e}"),
            })?;
        Self::from_der(der.as_ref())
    }

    /// True when the certificate's public key is `key`'s.
    pub fn matches_key(&self, key: &PrivateKey) -> bool {
        same_public_key(&self.spki_der, &key.public_key_der())
    }

    /// True when `now` is within the validity period (both ends included).
    pub fn is_valid_at(&self, now: OffsetDateTime) -> bool {
        self.not_before <= now && now <= self.not_after
    }
}

/// True when two SubjectPublicKeyInfo DERs hold the same key: same algorithm, same curve for
/// EC keys, same key bits. (Encoders differ in details such as RSA's NULL parameters, so the
/// DER bytes themselves are not compared.)
pub(crate) fn same_public_key(a: &[u8], b: &[u8]) -> bool {
    let (Ok((_, a)), Ok((_, b))) = (
        SubjectPublicKeyInfo::from_der(a),
        SubjectPublicKeyInfo::from_der(b),
    ) else {
        return false;
    };
    if a.algorithm.algorithm != b.algorithm.algorithm
        || a.subject_public_key.data != b.subject_public_key.data
    {
        return false;
    }
    if a.algorithm.algorithm == OID_KEY_TYPE_EC_PUBLIC_KEY {
        let curve_a = a
            .algorithm
            .parameters
            .as_ref()
            .and_then(|p| p.as_oid().ok());
        let curve_b = b
            .algorithm
            .parameters
            .as_ref()
            .and_then(|p| p.as_oid().ok());
        return curve_a.is_some() && curve_a == curve_b;
    }
    true
}

/// The subjectAltName DNS names of `cert`, in certificate order (none without the extension).
/// The error names the unreadable extension.
pub(crate) fn san_dns_names(cert: &X509Certificate<'_>) -> Result<Vec<String>, String> {
    let san = cert
        .subject_alternative_name()
        .map_err(|e| format!("subjectAltName: {e}"))?;
    Ok(san
        .map(|ext| {
            ext.value
                .general_names
                .iter()
                .filter_map(|n| match n {
                    GeneralName::DNSName(d) => Some((*d).to_owned()),
                    _ => None,
                })
                .collect()
        })
        .unwrap_or_default())
}

/// A certificate serial number as a number: big-endian bytes without leading zero bytes, so
/// that every reading of one serial (DER, a handshake, hex in a record, with or without
/// leading zeros, either case) compares equal. Shown as upper-case hex, as `openssl x509
/// -serial` prints it.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Serial(Vec<u8>);

impl Serial {
    /// From the raw DER integer bytes (leading zero bytes, e.g. the sign byte, dropped).
    pub fn from_bytes(raw: &[u8]) -> Self {
        let start = raw.iter().position(|&b| b != 0).unwrap_or(raw.len());
        Self(raw[start..].to_vec())
    }

    /// From hex text (either case, `:` separators and leading zeros allowed); `None` when the
    /// text is not hex.
    pub fn parse_hex(text: &str) -> Option<Self> {
        let digits: String = text.trim().chars().filter(|c| *c != ':').collect();
        if digits.is_empty() || !digits.bytes().all(|b| b.is_ascii_hexdigit()) {
            return None;
        }
        let even = if digits.len() % 2 == 1 {
            format!("0{digits}")
        } else {
            digits
        };
        hex::decode(even).ok().map(|b| Self::from_bytes(&b))
    }

    /// The significant bytes, big-endian (empty for the serial zero).
    pub fn as_bytes(&self) -> &[u8] {
        &self.0
    }
}

impl std::fmt::Display for Serial {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        if self.0.is_empty() {
            return f.write_str("00");
        }
        f.write_str(&hex::encode_upper(&self.0))
    }
}

/// A serial number's bytes as upper-case hex without leading zero bytes (as `openssl x509
/// -serial` prints it).
pub(crate) fn serial_hex(raw: &[u8]) -> String {
    Serial::from_bytes(raw).to_string()
}

/// Whether two serials written in hex are the same number (case, `:` and leading zeros do not
/// matter); text that is not hex equals nothing.
pub(crate) fn same_serial_hex(a: &str, b: &str) -> bool {
    // The same text (the common case: a serial as this program wrote it, compared with
    // itself) is the same serial when it is one, told without parsing it.
    if a == b {
        let t = a.trim();
        return t.bytes().any(|c| c.is_ascii_hexdigit())
            && t.bytes().all(|c| c.is_ascii_hexdigit() || c == b':');
    }
    matches!((Serial::parse_hex(a), Serial::parse_hex(b)), (Some(x), Some(y)) if x == y)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::crypto::KeyType;
    use rcgen::{BasicConstraints, CertificateParams, IsCa, KeyPair, SerialNumber};

    fn cert_for(key: &PrivateKey, ca: bool) -> (rcgen::Certificate, KeyPair) {
        let kp = KeyPair::from_pem(key.secret_pem()).unwrap();
        let mut params =
            CertificateParams::new(vec!["www.example.com".to_owned(), "example.com".to_owned()])
                .unwrap();
        params
            .distinguished_name
            .push(rcgen::DnType::CommonName, "www.example.com");
        params.serial_number = Some(SerialNumber::from_slice(&[0x00, 0x8a, 0x01]));
        params.not_before = time::macros::datetime!(2026-01-01 0:00 UTC);
        params.not_after = time::macros::datetime!(2026-07-01 0:00 UTC);
        if ca {
            params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
        }
        (params.self_signed(&kp).unwrap(), kp)
    }

    #[test]
    fn reads_certificate_facts() {
        let key = PrivateKey::generate(KeyType::EcdsaP256).unwrap();
        let (cert, _) = cert_for(&key, false);
        let info = CertificateInfo::from_pem(cert.pem().as_bytes()).unwrap();
        assert_eq!(info.serial_hex, "8A01");
        assert_eq!(info.subject_cn.as_deref(), Some("www.example.com"));
        assert_eq!(info.subject, "CN=www.example.com");
        assert_eq!(info.dns_names, ["www.example.com", "example.com"]);
        assert_eq!(
            info.not_before,
            time::macros::datetime!(2026-01-01 0:00 UTC)
        );
        assert_eq!(info.not_after, time::macros::datetime!(2026-07-01 0:00 UTC));
        assert!(!info.is_ca);
        assert!(info.matches_key(&key));
        assert!(info.is_valid_at(time::macros::datetime!(2026-03-01 0:00 UTC)));
        assert!(!info.is_valid_at(time::macros::datetime!(2026-07-02 0:00 UTC)));

        let other = PrivateKey::generate(KeyType::EcdsaP256).unwrap();
        assert!(!info.matches_key(&other));
        let (ca, _) = cert_for(&key, true);
        assert!(CertificateInfo::from_der(ca.der()).unwrap().is_ca);
    }

    #[test]
    fn serial_matches_openssl() {
        let dir = tempfile::tempdir().unwrap();
        let key = PrivateKey::generate(KeyType::EcdsaP256).unwrap();
        let (cert, _) = cert_for(&key, false);
        let path = dir.path().join("c.pem");
        std::fs::write(&path, cert.pem()).unwrap();
        let out = std::process::Command::new("/usr/bin/openssl")
            .args(["x509", "-noout", "-serial", "-in"])
            .arg(&path)
            .output()
            .unwrap();
        assert!(out.status.success());
        let info = CertificateInfo::from_der(cert.der()).unwrap();
        assert_eq!(
            String::from_utf8(out.stdout).unwrap().trim(),
            format!("serial={}", info.serial_hex)
        );
    }

    #[test]
    fn rsa_keys_match_across_encoders() {
        let key = PrivateKey::generate(KeyType::Rsa2048).unwrap();
        let (cert, _) = cert_for(&key, false);
        let info = CertificateInfo::from_der(cert.der()).unwrap();
        assert!(info.matches_key(&key));
        assert!(!same_public_key(b"junk", &key.public_key_der()));
    }

    #[test]
    fn rejects_garbage() {
        assert!(CertificateInfo::from_pem(b"hello").is_err());
        assert!(CertificateInfo::from_der(b"\x30\x03\x02\x01\x01").is_err());
        let key = PrivateKey::generate(KeyType::EcdsaP256).unwrap();
        let (cert, _) = cert_for(&key, false);
        let mut der = cert.der().to_vec();
        der.push(0);
        assert!(CertificateInfo::from_der(&der).is_err());
    }

    #[test]
    fn serials_compare_as_numbers() {
        let one = Serial::from_bytes(&[0, 0x0a, 0x01]);
        assert_eq!(one, Serial::parse_hex("A01").unwrap());
        assert_eq!(one, Serial::parse_hex("0a:01").unwrap());
        assert_eq!(one, Serial::parse_hex("000A01").unwrap());
        assert_eq!(one.to_string(), "0A01");
        assert_ne!(one, Serial::parse_hex("A010").unwrap());
        assert_eq!(Serial::from_bytes(&[0]), Serial::parse_hex("0").unwrap());
        assert_eq!(Serial::from_bytes(&[]).to_string(), "00");
        assert!(Serial::parse_hex("").is_none());
        assert!(Serial::parse_hex("xyz").is_none());
        assert!(same_serial_hex("0a01", "A01"));
        assert!(!same_serial_hex("zz", "zz"));
        // The same text: the same serial exactly when parsing would say so.
        for text in [
            "", " ", ":", "::", "0A:01", " 0a01 ", "zz", "0x1", "1 2", "\u{e9}",
        ] {
            assert_eq!(
                same_serial_hex(text, text),
                Serial::parse_hex(text).is_some(),
                "{text:?}"
            );
        }
    }

    #[test]
    fn serial_hex_strips_leading_zero_bytes() {
        assert_eq!(serial_hex(&[0, 0, 0x12]), "12");
        assert_eq!(serial_hex(&[0]), "00");
        assert_eq!(serial_hex(&[0x7f, 0]), "7F00");
    }
}
