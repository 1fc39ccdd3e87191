//! The certificate a site serves today: read from the file its configuration names (a
//! regular file of a few kilobytes), with whether the key file the site names belongs to it
//! (and, when not, why).

use std::path::Path;

use super::Existing;
use crate::crypto::{CertificateInfo, CryptoError, read_key_file};

/// Certificate files are a few kilobytes; a configuration may name anything.
const MAX_CERT_FILE_BYTES: u64 = 1 << 20;

/// A regular file of at most [`MAX_CERT_FILE_BYTES`] (never a device or a pipe).
fn read_small(path: &Path) -> Result<Vec<u8>, String> {
    use std::io::Read as _;
    let fail = |e: std::io::Error| format!("{}: {}", path.display(), crate::fsutil::io_text(&e));
    let meta = std::fs::metadata(path).map_err(fail)?;
    if !meta.is_file() {
        return Err(format!("{}: not a regular file", path.display()));
    }
    let mut bytes = Vec::new();
    std::fs::File::open(path)
        .and_then(|f| f.take(MAX_CERT_FILE_BYTES + 1).read_to_end(&mut bytes))
        .map_err(fail)?;
    if bytes.len() as u64 > MAX_CERT_FILE_BYTES {
        return Err(format!(
            "{}: larger than {MAX_CERT_FILE_BYTES} bytes",
            path.display()
        ));
    }
    Ok(bytes)
}

/// The certificate in `cert` and whether `key` on this host belongs to it.
pub(super) fn read_existing(cert: &Path, key: Option<&Path>) -> Result<Existing, String> {
    let pem = read_small(cert)?;
    let info = CertificateInfo::from_pem(&pem).map_err(|e| format!("{}: {e}", cert.display()))?;
    let key_problem = key.and_then(|k| key_problem(&info, k));
    Ok(Existing {
        self_signed: info.subject == info.issuer,
        subject: info.subject,
        issuer: info.issuer,
        names: info.dns_names,
        not_after: info.not_after,
        key_on_host: key.is_some() && key_problem.is_none(),
        key_problem,
    })
}

/// Why the file `key` is not the private key of `info` (`None`: it is). The file's content
/// never appears in the answer: a configuration may name any file.
fn key_problem(info: &CertificateInfo, key: &Path) -> Option<String> {
    let at = key.display();
    match std::fs::metadata(key) {
        Err(e) => {
            return Some(format!(
                "{at} cannot be read: {}",
                crate::fsutil::io_text(&e)
            ));
        }
        Ok(m) if !m.is_file() => return Some(format!("{at} is not a regular file")),
        Ok(_) => {}
    }
    match read_key_file(key) {
        Ok(k) if info.matches_key(&k) => None,
        Ok(_) => Some(format!("{at} is not the key of the certificate")),
        Err(CryptoError::KeyFile { source, .. }) => Some(format!(
            "{at} cannot be read: {}",
            crate::fsutil::io_text(&source)
        )),
        Err(_) => Some(format!("{at} is not a private key")),
    }
}
