//! The due summary's reader (`state_dir/due.json`, read by every unattended run): any bytes,
//! under the basis a run would hold. Must never panic. A summary that is accepted holds each
//! certificate once, under a name that can be a certificate's, and an entry whose record has
//! no stamp never stands.
#![no_main]

use cert_agent::store::due::{Basis, DueSummary};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let basis = Basis {
        version: "1.0.0".into(),
        config: "ab".repeat(32),
        options: "allow_orders=false".into(),
        crl: None,
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
            assert!(cert_agent::store::check_name(name).is_ok());
            let entry = summary.get(name).expect("kept");
            assert!(!entry.stands(i64::MIN, None));
        }
    }
});
