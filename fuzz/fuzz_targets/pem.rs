//! PEM and DER parsing of certificates, CSRs and private keys (what the agent reads from the
//! bundle, from the API's CSR field, from its state directory and from installed files). Must
//! never panic. What parses must read back the same way: the DER of a certificate or CSR on
//! its own, a key from the PEM the agent would write for it (same public key). `retire`'s
//! judgement of an installed file's content (its serial, chain or key) never panics either.
//! The subject a trust anchor is matched by, found by walking its outer fields, is the one
//! the parser reads.
#![no_main]

use cert_agent::testing::crypto::{CertificateInfo, CsrHashes, CsrInfo, PrivateKey};
use libfuzzer_sys::fuzz_target;

fn certificate(info: Result<CertificateInfo, impl Sized>) {
    if let Ok(c) = info {
        let again = CertificateInfo::from_der(&c.der).expect("certificate DER reads back");
        assert_eq!(again, c);
        let _ = c.is_valid_at(c.not_before);
    }
}

fn csr(info: Result<CsrInfo, impl Sized>) {
    if let Ok(r) = info {
        assert_eq!(r.hashes, CsrHashes::of_der(&r.der));
        let again = CsrInfo::from_der(&r.der).expect("CSR DER reads back");
        assert_eq!(again, r);
    }
}

fuzz_target!(|data: &[u8]| {
    // A trust anchor's subject found without parsing it is the one the parser reads.
    if let (Some(walked), Some(parsed)) = cert_agent::testing::bundle::subject_both_ways(data) {
        assert_eq!(walked, parsed.as_slice());
    }
    let mut own = cert_agent::testing::engine::retire::Own::with_serial(Some("0A"));
    own.learn(data);
    let _ = own.judge(data);
    certificate(CertificateInfo::from_pem(data));
    certificate(CertificateInfo::from_der(data));
    csr(CsrInfo::from_pem(data));
    csr(CsrInfo::from_der(data));
    if let Ok(key) = PrivateKey::from_pem(data, "fuzz") {
        let again =
            PrivateKey::from_pem(key.secret_pem().as_bytes(), "again").expect("key PEM reads back");
        assert_eq!(again.key_type(), key.key_type());
        assert_eq!(again.public_key_der(), key.public_key_der());
    }
});
