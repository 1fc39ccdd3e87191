//! Whether a file is still this certificate's, read from its content and not judged by its
//! path: it holds the recorded serial, only the chain that followed it, or (a key file
//! without certificates) the key of the certificate with that serial. `retire` deletes
//! nothing else, and reads each file again right before deleting it.

use std::path::{Path, PathBuf};

use rustls_pki_types::CertificateDer;
use rustls_pki_types::pem::PemObject;

use crate::crypto::{CertificateInfo, PrivateKey, same_public_key, same_serial_hex};

/// A certificate or key file is read up to this size (a bundle is a few KB).
const READ_LIMIT: u64 = 1 << 20;

/// What makes a file this certificate's: the serial it was installed (or written as a
/// placeholder) with, the public key of the certificate with that serial and the
/// certificates that followed it in its file (its chain).
#[derive(Debug, Clone, Default)]
pub struct Own {
    serial: Option<String>,
    spki: Option<Vec<u8>>,
    chain: Vec<Vec<u8>>,
}

fn read(path: &Path) -> std::io::Result<Vec<u8>> {
    use std::io::Read as _;
    let mut bytes = Vec::new();
    std::fs::File::open(path)?
        .take(READ_LIMIT)
        .read_to_end(&mut bytes)?;
    Ok(bytes)
}

/// The certificates (DER) of a PEM text.
fn certificates(bytes: &[u8]) -> Vec<Vec<u8>> {
    CertificateDer::pem_slice_iter(bytes)
        .filter_map(Result::ok)
        .map(|c| c.as_ref().to_vec())
        .collect()
}

impl Own {
    /// What `files` show of the certificate with serial `serial` (hex).
    pub fn of<'a>(serial: Option<&str>, files: impl IntoIterator<Item = &'a PathBuf>) -> Self {
        let mut own = Self::with_serial(serial);
        for f in files {
            if let Ok(bytes) = read(f) {
                own.learn(&bytes);
            }
        }
        own
    }

    /// Knowing only the serial (hex), if any.
    pub fn with_serial(serial: Option<&str>) -> Self {
        Own {
            serial: serial.map(str::to_owned),
            ..Own::default()
        }
    }

    /// Learns from a file's content (PEM) the key and the chain of the certificate with the
    /// serial, when the content holds it.
    pub fn learn(&mut self, bytes: &[u8]) {
        let Some(serial) = &self.serial else {
            return;
        };
        let certs = certificates(bytes);
        let leaf = certs.iter().enumerate().find_map(|(i, der)| {
            CertificateInfo::from_der(der)
                .ok()
                .filter(|c| same_serial_hex(&c.serial_hex, serial))
                .map(|c| (i, c))
        });
        let Some((i, leaf)) = leaf else {
            return;
        };
        self.spki.get_or_insert(leaf.spki_der);
        for der in &certs[i + 1..] {
            if !self.chain.contains(der) {
                self.chain.push(der.clone());
            }
        }
    }

    /// Why `path` is not this certificate's ([`Self::judge`]), or why it cannot be told;
    /// `None` when it is, or is gone already.
    pub fn foreign(&self, path: &Path) -> Option<String> {
        match read(path) {
            Ok(bytes) => self.judge(&bytes),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => None,
            Err(e) => Some(format!(
                "could not be read to compare: {}",
                crate::fsutil::io_text(&e)
            )),
        }
    }

    /// Why a file holding `bytes` is not this certificate's; `None` when it holds this
    /// certificate's serial, only its chain, or (a file without certificates) its key. A
    /// file with certificates is judged by them, so a key kept by a later certificate does
    /// not make that one's files ours.
    pub fn judge(&self, bytes: &[u8]) -> Option<String> {
        let Some(serial) = &self.serial else {
            return Some("no serial of this certificate is recorded to compare with".into());
        };
        let certs = certificates(bytes);
        if !certs.is_empty() {
            let serials: Vec<String> = certs
                .iter()
                .filter_map(|d| CertificateInfo::from_der(d).ok())
                .map(|c| c.serial_hex)
                .collect();
            if serials.iter().any(|s| same_serial_hex(s, serial))
                || certs.iter().all(|d| self.chain.contains(d))
            {
                return None;
            }
            return Some(format!(
                "holds serial {}, not this certificate's {serial}",
                serials.first().map_or("(unreadable)", String::as_str)
            ));
        }
        match (PrivateKey::from_pem(bytes, "an installed file"), &self.spki) {
            (Ok(key), Some(spki)) => (!same_public_key(&key.public_key_der(), spki))
                .then(|| format!("holds another key than the certificate with serial {serial}")),
            (Ok(_), None) => Some(format!(
                "holds a key, and no file holding serial {serial} is left to tell whether it is \
                 this certificate's"
            )),
            (Err(_), _) => Some(format!(
                "holds neither this certificate's serial {serial} nor its key"
            )),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn issued(serial: u8) -> (rcgen::KeyPair, String) {
        let key = rcgen::KeyPair::generate().unwrap();
        let mut params = rcgen::CertificateParams::new(vec!["www.example.com".into()]).unwrap();
        params.serial_number = Some(rcgen::SerialNumber::from(vec![serial]));
        let cert = params.self_signed(&key).unwrap();
        (key, cert.pem())
    }

    /// The content decides, not the path: this certificate's leaf, chain, combined file and
    /// key are its own; another serial, another key, a key with nothing left to match it
    /// against, garbage and a record without serial are not.
    #[test]
    fn only_this_certificates_serial_chain_or_key_is_its_own() {
        let (key, leaf) = issued(0x0A);
        let (other_key, other) = issued(0x0B);
        let (_, ca) = issued(0x01);
        let fullchain = format!("{leaf}{ca}");
        let mut own = Own::with_serial(Some("0a"));
        own.learn(fullchain.as_bytes());
        assert_eq!(own.judge(fullchain.as_bytes()), None);
        assert_eq!(own.judge(ca.as_bytes()), None, "its chain");
        assert_eq!(own.judge(key.serialize_pem().as_bytes()), None, "its key");
        let combined = format!("{}{fullchain}", key.serialize_pem());
        assert_eq!(own.judge(combined.as_bytes()), None);

        let why = own.judge(other.as_bytes()).unwrap();
        assert!(
            why.contains("holds serial 0B, not this certificate's 0a"),
            "{why}"
        );
        // A key with another certificate in the file: judged by the certificate.
        let reused = format!("{}{other}", key.serialize_pem());
        assert!(own.judge(reused.as_bytes()).is_some());
        let why = own.judge(other_key.serialize_pem().as_bytes()).unwrap();
        assert!(why.contains("another key"), "{why}");
        let why = own
            .judge(b"\x00garbage-----BEGIN CERTIFICATE-----")
            .unwrap();
        assert!(why.contains("neither"), "{why}");
        // A chain certificate alone, with another certificate beside it: not the chain.
        assert!(own.judge(format!("{ca}{other}").as_bytes()).is_some());

        // Nothing of this certificate read: its key cannot be told.
        let blind = Own::with_serial(Some("0A"));
        let why = blind.judge(key.serialize_pem().as_bytes()).unwrap();
        assert!(why.contains("no file holding serial 0A"), "{why}");
        assert!(Own::default().judge(leaf.as_bytes()).is_some());
    }
}
