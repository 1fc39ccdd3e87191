//! Validation files as the agent reads them back (its state, `cert-agent serve`'s publish
//! directory, the fleet's values): a name and a content, either directory's shape. Must never
//! panic. What is accepted must stay inside its `.well-known` directory (no `/`, `..` or
//! `%` in the name, one path segment), be of exactly one directory's shape, and read back the
//! same through its stored form.
#![no_main]

use cert_agent::testing::dcv::{ValidationFile, WellKnown};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    let (name, content) = text.split_once('\n').unwrap_or((text, ""));
    for file in [
        ValidationFile::from_parts(name, content),
        ValidationFile::acme_http01(name, content),
    ]
    .into_iter()
    .flatten()
    {
        let wk = file.well_known();
        assert!(wk.accepts_name(file.name()));
        let others = WellKnown::ALL.iter().filter(|w| w.accepts_name(name)).count();
        assert_eq!(others, 1, "{name:?} fits more than one directory");
        assert!(!name.contains('/') && !name.contains("..") && !name.contains('%'));
        let path = file.url_path();
        assert_eq!(path, format!("{}/{name}", wk.url_dir()));
        let stored = serde_json::to_string(&file).expect("serialises");
        let again: ValidationFile = serde_json::from_str(&stored).expect("reads back");
        assert_eq!(again, file);
    }
});
