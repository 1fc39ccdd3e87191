//! The fleet's ACME account value (`acme/CA/account` in etcd), which anyone with write access
//! to the fleet's prefix may have written: must never panic; accepted only when it opens with
//! the fleet key at its own key and holds an account file of the configured directory.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    cert_agent::testing::fleet::fuzzing::acme_account(data);
});
