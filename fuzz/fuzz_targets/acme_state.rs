//! What the issuers read back from their own state, which anyone with write access to the
//! state directory may have edited: the ACME account file (`state_dir/acme/NAME/account.json`),
//! a record's ACME part (the order in progress, the renewal window) and its Partner part (the
//! order's stage in its stored flat fields). Must never panic; an accepted account file names
//! an https:// (or loopback) directory; an accepted ACME part reads back the same through its
//! stored form; an accepted Partner part writes a stored form that reads back the same (the
//! combinations a run writes: byte for byte), a refused one is an intent or an ended state
//! beside what contradicts it.
#![no_main]

use cert_agent::testing::store::AcmeBook;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    if let Ok(directory) = cert_agent::testing::issuer::acme::account_file_directory(data) {
        assert!(cert_agent::testing::issuer::acme::http::allowed_url(&directory));
    }
    if let Ok(book) = serde_json::from_slice::<AcmeBook>(data) {
        let stored = serde_json::to_string(&book).expect("serialises");
        let again: AcmeBook = serde_json::from_str(&stored).expect("reads back");
        assert_eq!(again, book);
    }
    cert_agent::testing::store::fuzz_partner_book(data);
});
