//! The roots a certificate's chain must end at before it is installed (`chain_trust`): the
//! system's root store plus `api.ca_file` (the default), `api.ca_file` alone, or none (the
//! chain's links and signatures only). Each combination is read once per process.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use rustls_pki_types::CertificateDer;
use rustls_pki_types::pem::PemObject;

use crate::config::ChainTrust;

/// The system's root store: `SSL_CERT_FILE` when set, else the first of these that exists
/// (Debian, Ubuntu, Alpine, Arch; Fedora, RHEL; openSUSE; the ca-trust extraction; BSDs and
/// others).
pub(crate) const SYSTEM_BUNDLES: &[&str] = &[
    "/etc/ssl/certs/ca-certificates.crt",
    "/etc/pki/tls/certs/ca-bundle.crt",
    "/etc/ssl/ca-bundle.pem",
    "/etc/pki/ca-trust/extracted/pem/tls-ca-bundle.pem",
    "/etc/ssl/cert.pem",
];

/// The largest root bundle read.
const MAX_BUNDLE: u64 = 16 * 1024 * 1024;

/// The roots read so far, per `chain_trust` and CA file.
type Cache = HashMap<(ChainTrust, Option<PathBuf>), Arc<Vec<CertificateDer<'static>>>>;

static CACHE: Mutex<Option<Cache>> = Mutex::new(None);

/// The roots `trust` names, `ca_file` being `api.ca_file`: empty for [`ChainTrust::None`]
/// (no root is checked). An error names the file and what is wrong with it.
pub(crate) fn trust_anchors(
    trust: ChainTrust,
    ca_file: Option<&Path>,
) -> Result<Arc<Vec<CertificateDer<'static>>>, String> {
    let key = (trust, ca_file.map(Path::to_path_buf));
    if let Some(found) = CACHE
        .lock()
        .ok()
        .and_then(|c| c.as_ref().and_then(|c| c.get(&key).cloned()))
    {
        return Ok(found);
    }
    let mut roots = Vec::new();
    match trust {
        ChainTrust::None => {}
        ChainTrust::System => {
            if let Some(path) = system_bundle() {
                roots.extend(read_bundle(&path)?);
            } else if ca_file.is_none() {
                return Err(format!(
                    "chain_trust = \"system\", but this host has no root store (SSL_CERT_FILE \
                     unset and none of {} exists): install the ca-certificates package, or set \
                     [api] ca_file with chain_trust = \"ca_file\"",
                    SYSTEM_BUNDLES.join(", ")
                ));
            }
        }
        ChainTrust::CaFile if ca_file.is_none() => {
            return Err(
                "chain_trust = \"ca_file\", but [api] sets no ca_file: name the CA's root \
                 there, or use chain_trust = \"system\""
                    .to_owned(),
            );
        }
        ChainTrust::CaFile => {}
    }
    if trust != ChainTrust::None
        && let Some(path) = ca_file
    {
        roots.extend(read_bundle(path)?);
    }
    let roots = Arc::new(roots);
    if let Ok(mut c) = CACHE.lock() {
        c.get_or_insert_with(HashMap::new)
            .insert(key, Arc::clone(&roots));
    }
    Ok(roots)
}

/// The system's root bundle: `SSL_CERT_FILE`, else the first of [`SYSTEM_BUNDLES`] there is.
fn system_bundle() -> Option<PathBuf> {
    if let Some(p) = std::env::var_os("SSL_CERT_FILE").filter(|p| !p.is_empty()) {
        return Some(PathBuf::from(p));
    }
    SYSTEM_BUNDLES
        .iter()
        .map(PathBuf::from)
        .find(|p| p.is_file())
}

/// Every certificate of the PEM file `path`; none is an error.
fn read_bundle(path: &Path) -> Result<Vec<CertificateDer<'static>>, String> {
    let fail = |m: String| format!("the roots in {}: {m}", path.display());
    let bytes = crate::fsutil::read_secret(path, MAX_BUNDLE, false).map_err(fail)?;
    let certs = CertificateDer::pem_slice_iter(&bytes)
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| fail(format!("not a PEM certificate bundle: {e}")))?;
    if certs.is_empty() {
        return Err(fail("it holds no PEM certificate".to_owned()));
    }
    Ok(certs)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_choice_names_its_roots_and_a_missing_or_garbage_file_is_an_error() {
        let dir = tempfile::tempdir().unwrap();
        let ca = dir.path().join("ca.pem");
        let pem = crate::crypto::pem_encode("CERTIFICATE", b"\x30\x03\x02\x01\x01");
        std::fs::write(&ca, &pem).unwrap();
        assert!(
            trust_anchors(ChainTrust::None, Some(&ca))
                .unwrap()
                .is_empty()
        );
        assert_eq!(
            trust_anchors(ChainTrust::CaFile, Some(&ca)).unwrap().len(),
            1
        );
        let e = trust_anchors(ChainTrust::CaFile, None).unwrap_err();
        assert!(e.contains("sets no ca_file"), "{e}");
        let garbage = dir.path().join("garbage.pem");
        std::fs::write(&garbage, b"not a certificate").unwrap();
        let e = trust_anchors(ChainTrust::CaFile, Some(&garbage)).unwrap_err();
        assert!(
            e.contains("garbage.pem") && e.contains("no PEM certificate"),
            "{e}"
        );
        let gone = dir.path().join("gone.pem");
        let e = trust_anchors(ChainTrust::System, Some(&gone)).unwrap_err();
        assert!(e.contains("gone.pem"), "{e}");
    }
}
