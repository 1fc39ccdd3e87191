//! The due summary's reader (`state_dir/due.json`, read by every unattended run): any bytes,
//! under the basis a run would hold. Must never panic. A summary that is accepted holds each
//! certificate once, under a name that can be a certificate's, and an entry whose record has
//! no stamp never stands. The same bytes through the reader of a `renew` that has not parsed
//! its configuration (the summary's express part): accepted only whole, with an entry for
//! each of the configuration's certificates, each name valid and once, none standing without
//! its record; every issuer kept is what its key (SHA-256) says. The same bytes as the CRL
//! retry book (`state_dir/crl-retry.json`): accepted only as a whole book whose entries count
//! a failure.
#![no_main]

use cert_agent::testing::store::due::{Basis, DueSummary, ExpressSummary};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    if let Some(x) = ExpressSummary::parse(data) {
        assert!(std::str::from_utf8(data).is_ok(), "accepted only as UTF-8");
        assert_eq!(x.certificates.len(), x.express.certificates);
        let mut seen = std::collections::HashSet::new();
        for e in &x.certificates {
            assert!(cert_agent::testing::store::check_name(&e.name).is_ok());
            assert!(seen.insert(e.name.as_str()), "each name once");
            assert!(!e.stands(i64::MIN, None));
        }
        for (key, der) in &x.issuers {
            assert_eq!(&cert_agent::testing::store::due::issuer_key(der), key);
        }
    }
    if let Some(book) = cert_agent::testing::revocation::retry::Book::parse(data) {
        let now = time::OffsetDateTime::UNIX_EPOCH;
        let _ = book.waiting("http://crl.example.net/ca.crl", now);
    }
    let basis = Basis {
        version: "1.0.0".into(),
        config: "ab".repeat(32),
        options: "allow_orders=false".into(),
    };
    if let Some(summary) = DueSummary::parse(data, &basis) {
        assert!(std::str::from_utf8(data).is_ok(), "accepted only as UTF-8");
        // What the summary ignores (an unknown field) serde_json's `Value` may still refuse
        // (a lone surrogate escape): the entries are checked against what `Value` reads.
        let Ok(stored) = serde_json::from_slice::<serde_json::Value>(data) else {
            return;
        };
        let listed = stored["certificates"].as_array().map_or(0, Vec::len);
        assert_eq!(summary.len(), listed);
        for e in stored["certificates"].as_array().into_iter().flatten() {
            let name = e["name"].as_str().expect("a name");
            assert!(cert_agent::testing::store::check_name(name).is_ok());
            let entry = summary.get(name).expect("kept");
            assert!(!entry.stands(i64::MIN, None));
        }
    }
});
