//! The CSR rules of orders and reissues: the PEM marker, a verifying request, an accepted key
//! (RSA 2048–4096 bits, ECDSA P-256 / P-384), no internal name and no private address.

use x509_parser::oid_registry::{
    OID_EC_P256, OID_KEY_TYPE_EC_PUBLIC_KEY, OID_NIST_EC_P384, OID_PKCS1_RSAENCRYPTION,
};
use x509_parser::prelude::FromDer;
use x509_parser::public_key::PublicKey;
use x509_parser::x509::SubjectPublicKeyInfo;

use crate::ca::{self, CaError, CsrInfo};
use crate::state::names;

const CSR_MARKERS: [&str; 2] = [
    "-----BEGIN CERTIFICATE REQUEST-----",
    "-----BEGIN NEW CERTIFICATE REQUEST-----",
];

/// Why a CSR's key is refused: RSA 2048–4096 bits and ECDSA P-256 / P-384 are accepted.
pub(in crate::state) fn key_problem(spki_der: &[u8]) -> Option<String> {
    let Ok((_, spki)) = SubjectPublicKeyInfo::from_der(spki_der) else {
        return Some("the public key cannot be read".to_string());
    };
    let alg = &spki.algorithm.algorithm;
    if *alg == OID_PKCS1_RSAENCRYPTION {
        return match spki.parsed() {
            Ok(PublicKey::RSA(rsa)) => {
                let bits = rsa.key_size();
                if bits < 2048 {
                    Some(format!(
                        "an RSA key of {bits} bits is too short (at least 2048)"
                    ))
                } else if bits > 4096 {
                    Some(format!(
                        "an RSA key of {bits} bits is too long (at most 4096)"
                    ))
                } else {
                    None
                }
            }
            _ => Some("the RSA key is malformed".to_string()),
        };
    }
    if *alg == OID_KEY_TYPE_EC_PUBLIC_KEY {
        let curve = spki
            .algorithm
            .parameters
            .as_ref()
            .and_then(|p| p.as_oid().ok());
        return match curve {
            Some(c) if c == OID_EC_P256 || c == OID_NIST_EC_P384 => None,
            Some(c) => Some(format!(
                "the elliptic curve {c} is not accepted (P-256 or P-384)"
            )),
            None => Some("the elliptic curve is not named".to_string()),
        };
    }
    Some(format!(
        "the key algorithm {alg} is not accepted (RSA 2048-4096 bits, ECDSA P-256 or P-384)"
    ))
}

/// Parses a PEM CSR for an order or reissue: it must begin with a certificate-request
/// marker, parse, verify, carry an acceptable key, and contain no internal name or private
/// address. Every problem is returned.
pub(in crate::state) fn check_csr(pem: &str, label: &str) -> Result<CsrInfo, Vec<String>> {
    let trimmed = pem.trim_start();
    if !CSR_MARKERS.iter().any(|m| trimmed.starts_with(m)) {
        return Err(vec![format!(
            "{label} must begin with -----BEGIN CERTIFICATE REQUEST----- (or the NEW variant)"
        )]);
    }
    let info = ca::parse_csr(pem).map_err(|e| match e {
        CaError::InvalidCsr(why) => vec![format!("{label} is invalid: {why}")],
        other => vec![format!("{label} is invalid: {other}")],
    })?;
    let mut errs = Vec::new();
    if let Some(why) = key_problem(&info.public_key_der) {
        errs.push(format!("{label} key is not acceptable: {why}"));
    }
    let mut seen = Vec::new();
    for name in info.common_name.iter().chain(info.dns_names.iter()) {
        let lower = name.trim().to_ascii_lowercase();
        if names::is_internal(&lower) && !seen.contains(&lower) {
            errs.push(format!("{label} contains the internal name {lower}"));
            seen.push(lower);
        }
    }
    for ip in &info.ip_addresses {
        if names::is_private_ip(ip) {
            errs.push(format!(
                "{label} contains the private IP address {ip} (internal)"
            ));
        }
    }
    if errs.is_empty() { Ok(info) } else { Err(errs) }
}
