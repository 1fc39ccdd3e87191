//! Keys, CSRs, PEM/DER helpers and CSR hashes for domain control validation.
//!
//! - [`KeyType`] and [`PrivateKey`]: generation with rcgen, PKCS#8 PEM, loading of PKCS#8 / SEC1
//!   / PKCS#1 PEM, and [`write_key_file`] (mode set before the first byte, temp file, fsync,
//!   rename, fsync of the directory, no symlink at the target).
//! - [`Csr`] and [`CsrHashes`]: the request for the configured names and the MD5 / SHA-256 of its
//!   DER that name and fill the HTTP validation file.
//! - [`dcv`]: the validation file's name and a check of what the API says it must contain (the
//!   API is untrusted input).
//! - [`CertificateInfo`]: what the agent needs to know of an X.509 certificate.
//!
//! Depends only on `fsutil` (key files are written atomically).

mod cert;
mod csr;
mod key;
mod pem;

pub use cert::{CertificateInfo, Serial};
pub(crate) use cert::{same_public_key, same_serial_hex, san_dns_names, serial_hex};
pub(crate) use csr::self_signed_placeholder;
pub use csr::{Csr, CsrHashes, CsrInfo};
pub use key::{KeyType, PrivateKey};
pub(crate) use key::{read_key_file, write_key_file};
pub(crate) use pem::pem_encode;

use std::path::PathBuf;

/// Errors of key, CSR and certificate handling. Each variant names the operation and, where
/// there is one, the file.
#[derive(Debug, thiserror::Error)]
pub enum CryptoError {
    #[error("could not generate {key_type} key: {message}")]
    Generate { key_type: KeyType, message: String },

    #[error("could not read private key from {origin}: {message}")]
    KeyParse { origin: String, message: String },

    #[error("private key from {origin} is not supported: {what}")]
    UnsupportedKey { origin: String, what: String },

    #[error("could not {action} private key file '{}': {source}", path.display())]
    KeyFile {
        action: &'static str,
        path: PathBuf,
        source: std::io::Error,
    },

    #[error("refusing to write private key file '{}': it is a symbolic link", path.display())]
    KeyFileIsSymlink { path: PathBuf },

    #[error("refusing to write private key file '{}': it exists and is not a regular file", path.display())]
    KeyFileNotRegular { path: PathBuf },

    #[error("private key file '{}' is larger than {limit} bytes", path.display())]
    KeyFileTooLarge { path: PathBuf, limit: u64 },

    #[error("a CSR needs at least one domain")]
    NoDomains,

    #[error("invalid domain {domain:?} for a CSR: {reason}")]
    InvalidDomain {
        domain: String,
        reason: &'static str,
    },

    #[error("could not build CSR for '{common_name}': {message}")]
    CsrBuild {
        common_name: String,
        message: String,
    },

    #[error("could not parse CSR: {message}")]
    CsrParse { message: String },

    #[error("could not parse certificate: {message}")]
    CertificateParse { message: String },
}
