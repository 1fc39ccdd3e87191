//! An issuer certificate's value at `chains/SHA256` in etcd, which anyone with write access to
//! the fleet's prefix may have written: must never panic; accepted only when it opens with the
//! fleet key at its own key and holds the certificate of that hash.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    cert_agent::testing::fleet::fuzzing::chain_value(data);
});
