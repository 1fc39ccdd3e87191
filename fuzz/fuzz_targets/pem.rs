//! PEM and DER parsing of certificates, CSRs and private keys (what the agent reads from the
//! bundle, from its state directory and from installed files). Must never panic.
#![no_main]

use cert_agent::crypto::{CertificateInfo, CsrInfo, PrivateKey};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let _ = CertificateInfo::from_pem(data);
    let _ = CertificateInfo::from_der(data);
    let _ = CsrInfo::from_pem(data);
    let _ = CsrInfo::from_der(data);
    let _ = PrivateKey::from_pem(data, "fuzz");
});
