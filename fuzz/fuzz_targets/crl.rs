//! The CRL check (what the agent reads from a CRL distribution point or its `state_dir/crl/`
//! copy) against a fixed issuer at a fixed time, and the installed-chain reader fed the same
//! bytes as a certificate. Must never panic; a CRL that passes lists what it lists, its
//! `nextUpdate` is after the time of the check.
#![no_main]

use cert_agent::testing::revocation::{check_crl, of_chain};
use libfuzzer_sys::fuzz_target;
use time::OffsetDateTime;

/// A CA certificate ("Fuzz CA", P-256, keyCertSign and cRLSign); `corpus/crl/seed-crl.der`
/// is a CRL it signed, valid at `NOW`, listing serial 0A1B.
const ISSUER: &[u8] = include_bytes!("crl_issuer.der");
const NOW: i64 = 1_800_000_000;

fuzz_target!(|data: &[u8]| {
    let Ok(now) = OffsetDateTime::from_unix_timestamp(NOW) else {
        return;
    };
    if let Ok(crl) = check_crl(data, ISSUER, now) {
        assert!(crl.next_update > now);
        let _ = crl.entry(&[0x0A, 0x1B]);
        let _ = crl.entry(data.get(..data.len().min(20)).unwrap_or_default());
        assert_eq!(crl.is_empty(), crl.len() == 0);
    }
    let _ = of_chain(&[data.to_vec(), ISSUER.to_vec()], "0A1B");
});
