//! The roots a certificate's chain must end at before it is installed (`chain_trust`): the
//! system's root store plus `api.ca_file` (the default), `api.ca_file` alone, or none (the
//! chain's links and signatures only). Each combination is read once per process.

use std::collections::{HashMap, HashSet};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use rustls_pki_types::CertificateDer;
use rustls_pki_types::pem::PemObject;
use sha2::{Digest, Sha256};
use x509_parser::prelude::{FromDer, X509Certificate};

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
    // Each root is read whole once here: the checks of each certificate's chain then look
    // at a root's subject only ([`subject_der`]) unless it names the chain's issuer.
    for (i, der) in certs.iter().enumerate() {
        if let Err(e) = X509Certificate::from_der(der.as_ref()) {
            return Err(fail(format!("certificate {} is unreadable: {e}", i + 1)));
        }
    }
    Ok(certs)
}

/// The subject of certificate `der` as it is encoded there (tag and length included), found
/// by walking the certificate's outer fields only: its bytes equal an issuer's encoding
/// (`X509Name::as_raw`) when the names are the same. `None` when `der` is not laid out as a
/// certificate.
pub(crate) fn subject_der(der: &[u8]) -> Option<&[u8]> {
    let (_, cert, _) = element(der, SEQUENCE)?;
    let (_, mut rest, _) = element(cert, SEQUENCE)?;
    if rest.first() == Some(&VERSION) {
        rest = element(rest, VERSION)?.2;
    }
    for tag in [INTEGER, SEQUENCE, SEQUENCE, SEQUENCE] {
        // The serial number, the signature algorithm, the issuer, the validity.
        rest = element(rest, tag)?.2;
    }
    element(rest, SEQUENCE).map(|(subject, _, _)| subject)
}

/// The (certificate, anchor) pairs whose signature this process verified, by the SHA-256
/// of both encodings: the certificates of one CA end at the same intermediate, whose
/// signature by the root is then verified once, not once per certificate.
static VERIFIED: Mutex<Option<HashSet<[u8; 32]>>> = Mutex::new(None);

/// The most pairs kept (a CA has a handful of intermediates); past it the set starts again.
const MAX_VERIFIED: usize = 1024;

/// Whether `anchor`'s key signed `top` (verified once per process for the same two
/// certificates; only a signature that verifies is remembered).
pub(crate) fn signed_by(top: &X509Certificate<'_>, anchor: &X509Certificate<'_>) -> bool {
    let mut h = Sha256::new();
    h.update((top.as_raw().len() as u64).to_be_bytes());
    h.update(top.as_raw());
    h.update(anchor.as_raw());
    let pair: [u8; 32] = h.finalize().into();
    let known = VERIFIED
        .lock()
        .ok()
        .is_some_and(|v| v.as_ref().is_some_and(|v| v.contains(&pair)));
    if known {
        return true;
    }
    let verified = top.verify_signature(Some(anchor.public_key())).is_ok();
    if verified && let Ok(mut v) = VERIFIED.lock() {
        let v = v.get_or_insert_with(HashSet::new);
        if v.len() >= MAX_VERIFIED {
            v.clear();
        }
        v.insert(pair);
    }
    verified
}

/// What [`subject_der`] finds in `der` beside the subject x509-parser reads there when that
/// subject is one whole DER element (the fuzz target compares them: where both find one, they
/// must be the same bytes). The parser reads some malformed names past their own length; such
/// a subject is no issuer's encoding, and the walk's bytes for it only ever cause a refusal.
pub fn subject_both_ways(der: &[u8]) -> (Option<&[u8]>, Option<Vec<u8>>) {
    let parsed = X509Certificate::from_der(der)
        .ok()
        .map(|(_, c)| c.subject().as_raw().to_vec())
        .filter(|raw| element(raw, SEQUENCE).is_some_and(|(_, _, rest)| rest.is_empty()));
    (subject_der(der), parsed)
}

const SEQUENCE: u8 = 0x30;
const INTEGER: u8 = 0x02;
/// `[0] EXPLICIT Version`.
const VERSION: u8 = 0xa0;

/// The DER element at the start of `der` with tag `tag`: the whole element (tag, length and
/// content), its content, and what follows it.
fn element(der: &[u8], tag: u8) -> Option<(&[u8], &[u8], &[u8])> {
    if *der.first()? != tag {
        return None;
    }
    let first = *der.get(1)?;
    let (len, header) = if first < 0x80 {
        (usize::from(first), 2)
    } else {
        let n = usize::from(first & 0x7f);
        if n == 0 || n > 4 {
            return None;
        }
        let bytes = der.get(2..2 + n)?;
        let len = bytes.iter().fold(0usize, |l, &b| (l << 8) | usize::from(b));
        (len, 2 + n)
    };
    let end = header.checked_add(len)?;
    Some((der.get(..end)?, der.get(header..end)?, der.get(end..)?))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_choice_names_its_roots_and_a_missing_or_garbage_file_is_an_error() {
        let dir = tempfile::tempdir().unwrap();
        let ca = dir.path().join("ca.pem");
        let root = self_signed("Root");
        let pem = crate::crypto::pem_encode("CERTIFICATE", &root);
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
        // PEM around bytes that are not a certificate: named with the file and its place.
        let bad = dir.path().join("bad.pem");
        let not_x509 = crate::crypto::pem_encode("CERTIFICATE", b"\x30\x03\x02\x01\x01");
        std::fs::write(&bad, format!("{pem}{not_x509}")).unwrap();
        let e = trust_anchors(ChainTrust::CaFile, Some(&bad)).unwrap_err();
        assert!(
            e.contains("bad.pem") && e.contains("certificate 2 is unreadable"),
            "{e}"
        );
        let gone = dir.path().join("gone.pem");
        let e = trust_anchors(ChainTrust::System, Some(&gone)).unwrap_err();
        assert!(e.contains("gone.pem"), "{e}");
    }

    /// The DER of a self-signed certificate named `cn`.
    fn self_signed(cn: &str) -> Vec<u8> {
        let mut params = rcgen::CertificateParams::default();
        params.distinguished_name = rcgen::DistinguishedName::new();
        params
            .distinguished_name
            .push(rcgen::DnType::CommonName, cn);
        let key = rcgen::KeyPair::generate().unwrap();
        params.self_signed(&key).unwrap().der().to_vec()
    }

    #[test]
    fn the_subject_is_found_as_the_parser_reads_it() {
        // Short names, and names long enough for one- and two-byte long-form lengths.
        for cn in ["R", &"r".repeat(100), &"x".repeat(300)] {
            let der = self_signed(cn);
            let (_, parsed) = X509Certificate::from_der(&der).unwrap();
            assert_eq!(subject_der(&der), Some(parsed.subject().as_raw()), "{cn}");
        }
        // A system's roots, where it has them.
        for path in SYSTEM_BUNDLES.iter().map(Path::new).filter(|p| p.is_file()) {
            for der in read_bundle(path).unwrap() {
                let (_, parsed) = X509Certificate::from_der(der.as_ref()).unwrap();
                assert_eq!(subject_der(der.as_ref()), Some(parsed.subject().as_raw()));
            }
        }
    }

    #[test]
    fn garbage_and_truncated_certificates_have_no_subject() {
        let der = self_signed("Truncated Root");
        // Cut anywhere: the certificate's own length no longer fits, so no subject is found
        // (never a panic, never a part of the subject).
        for n in 0..der.len() {
            assert_eq!(subject_der(&der[..n]), None, "cut at {n}");
        }
        for garbage in [
            &b""[..],
            b"\x30",
            b"\x30\x80",
            b"\x30\x85\x01\x01\x01\x01\x01",
            b"\x30\x84\xff\xff\xff\xff",
            b"\x31\x03\x02\x01\x01",
            b"\x30\x03\x02\x01\x01",
            b"not a certificate at all",
        ] {
            assert_eq!(subject_der(garbage), None, "{garbage:?}");
        }
        // Another outer tag: not a certificate.
        let mut flipped = der.clone();
        flipped[0] = 0x31;
        assert_eq!(subject_der(&flipped), None);
    }

    #[test]
    fn a_verified_signature_is_remembered_for_that_pair_only() {
        let root_key = rcgen::KeyPair::generate().unwrap();
        let mut params = rcgen::CertificateParams::default();
        params.distinguished_name = rcgen::DistinguishedName::new();
        params
            .distinguished_name
            .push(rcgen::DnType::CommonName, "Pair Root");
        params.is_ca = rcgen::IsCa::Ca(rcgen::BasicConstraints::Unconstrained);
        let issuer = rcgen::Issuer::new(params.clone(), &root_key);
        let root = params.self_signed(&root_key).unwrap().der().to_vec();
        // The same name under another key: a forged root.
        let forged = params
            .self_signed(&rcgen::KeyPair::generate().unwrap())
            .unwrap()
            .der()
            .to_vec();
        let mut int = rcgen::CertificateParams::default();
        int.distinguished_name = rcgen::DistinguishedName::new();
        int.distinguished_name
            .push(rcgen::DnType::CommonName, "Pair Intermediate");
        let int_key = rcgen::KeyPair::generate().unwrap();
        let int = int.signed_by(&int_key, &issuer).unwrap().der().to_vec();
        let (_, int) = X509Certificate::from_der(&int).unwrap();
        let (_, root) = X509Certificate::from_der(&root).unwrap();
        let (_, forged) = X509Certificate::from_der(&forged).unwrap();
        for _ in 0..2 {
            assert!(signed_by(&int, &root));
            assert!(!signed_by(&int, &forged));
        }
    }

    /// A certificate whose subject holds an attribute longer than the subject says (found by
    /// the fuzz target): the parser still reads it, and where it reads one whole element, the
    /// walk finds the same bytes.
    #[test]
    fn a_subject_the_parser_reads_past_its_length_is_not_compared() {
        let der = hex::decode(concat!(
            "308201a63082014ba0030201020214649245453046de4f9f0553cd2e44fe00ce7e0cdd300a06082a8648ce3d",
            "040302301a3118301606035504030c0f7777772e6578616d7064652e636f6d301e170d323631313230323333",
            "3433305a170d3236313232303233333433305a301a31183016064d494942706a434341557578616d706c652e",
            "636f6d3059301306072a8648ce3d020106082a8648ce3d03010703420004a2bfcf574717e3a75e581f3128e1",
            "aca822d32eeaa41ea33f6e3ee7e401711a39e9bcda30f356aa01a8fd0edda6acb33163c800fd797a4c79a377",
            "a67f26982ad4a36f306d301d0603551d0e04160414caf979807079516b5058d9aec6e8e35987408186301f06",
            "03551d23041830168014caf979807079516b5058d9aec6e8e35987408186300f0603551d130101ff04053003",
            "0101ff301a0603551d0e04133011820f7777772e6578616d706c652e636f6d300a06082a8648ce3d04030203",
            "49003046022100ee6a6bc733cc6e3a6d68fcd6b078fc5c998f98ffffffffffffff1d31052f25efaaf947b34f",
            "22f72c022100b535989d7a704137971adef10935d36330f6259e1fb64ff95d374ca725d0245a",
        ))
        .unwrap();
        let (walked, parsed) = subject_both_ways(&der);
        if let (Some(walked), Some(parsed)) = (walked, parsed) {
            assert_eq!(walked, parsed.as_slice());
        }
    }
}
