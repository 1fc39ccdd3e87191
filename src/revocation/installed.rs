//! The installed certificate as the CRL check needs it: the leaf (found by its recorded
//! serial among the installed files), its issuer (the certificate of the installed chain whose
//! subject is the leaf's issuer and whose key verifies the leaf's signature) and the leaf's
//! CRL distribution points.

use std::path::PathBuf;

use rustls_pki_types::CertificateDer;
use rustls_pki_types::pem::PemObject;
use x509_parser::extensions::{DistributionPointName, GeneralName, ParsedExtension};
use x509_parser::prelude::{FromDer, X509Certificate};

use crate::store::Installed;

/// Largest installed file read for its certificates.
const MAX_FILE_BYTES: u64 = 1024 * 1024;

/// What the CRL check needs of an installed certificate.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct InstalledCert {
    /// Upper-case hex serial.
    pub serial_hex: String,
    /// The serial's bytes as in the certificate.
    pub raw_serial: Vec<u8>,
    /// DER of the issuer's certificate.
    pub issuer_der: Vec<u8>,
    /// The `http://` and `https://` CRL distribution points, in the certificate's order.
    pub crl_urls: Vec<String>,
}

/// Reads the installed files of `inst`; an error says what is missing or unreadable.
pub(crate) fn read(inst: &Installed) -> Result<InstalledCert, String> {
    let mut files: Vec<PathBuf> = inst.leaf_file.iter().cloned().collect();
    files.extend(
        inst.files
            .iter()
            .filter(|f| Some(*f) != inst.leaf_file.as_ref())
            .cloned(),
    );
    let mut ders: Vec<Vec<u8>> = Vec::new();
    for path in &files {
        // Key files and unreadable files hold no certificate for us; the leaf's absence is
        // reported below.
        let Ok(bytes) = crate::fsutil::read_secret(path, MAX_FILE_BYTES, false) else {
            continue;
        };
        for der in CertificateDer::pem_slice_iter(&bytes).flatten() {
            if !ders.iter().any(|d| d.as_slice() == der.as_ref()) {
                ders.push(der.to_vec());
            }
        }
    }
    of_chain(&ders, &inst.serial)
}

/// The leaf with `serial_hex` and its issuer among `ders`.
pub fn of_chain(ders: &[Vec<u8>], serial_hex: &str) -> Result<InstalledCert, String> {
    let parsed: Vec<X509Certificate<'_>> = ders
        .iter()
        .filter_map(|d| X509Certificate::from_der(d).ok().map(|(_, c)| c))
        .collect();
    let leaf = parsed
        .iter()
        .find(|c| {
            crate::crypto::same_serial_hex(&crate::crypto::serial_hex(c.raw_serial()), serial_hex)
        })
        .ok_or_else(|| {
            format!("the installed files hold no certificate with serial {serial_hex}")
        })?;
    let issuer = parsed
        .iter()
        .find(|c| {
            c.subject().as_raw() == leaf.issuer().as_raw()
                && leaf.verify_signature(Some(c.public_key())).is_ok()
        })
        .ok_or_else(|| {
            format!(
                "the installed chain holds no certificate of the issuer '{}' whose key verifies \
                 serial {serial_hex}",
                leaf.issuer()
            )
        })?;
    Ok(InstalledCert {
        serial_hex: crate::crypto::serial_hex(leaf.raw_serial()),
        raw_serial: leaf.raw_serial().to_vec(),
        issuer_der: issuer.as_raw().to_vec(),
        crl_urls: crl_urls(leaf),
    })
}

fn crl_urls(cert: &X509Certificate<'_>) -> Vec<String> {
    let mut out = Vec::new();
    for ext in cert.extensions() {
        let ParsedExtension::CRLDistributionPoints(points) = ext.parsed_extension() else {
            continue;
        };
        for point in points.iter() {
            // A CRL issued by someone else than the certificate's issuer (cRLIssuer) would
            // need that issuer's certificate: not supported, not followed.
            if point.crl_issuer.is_some() {
                continue;
            }
            if let Some(DistributionPointName::FullName(names)) = &point.distribution_point {
                for name in names {
                    if let GeneralName::URI(uri) = name {
                        let lower = uri.to_ascii_lowercase();
                        if lower.starts_with("http://") || lower.starts_with("https://") {
                            out.push((*uri).to_owned());
                        }
                    }
                }
            }
        }
    }
    out
}
