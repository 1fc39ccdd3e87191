//! Configuration parsing and validation: any text as `config.toml`. Must never panic (errors
//! name file, line and key).
#![no_main]

use std::path::Path;

use cert_agent::config::Config;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    if let Ok(text) = std::str::from_utf8(data) {
        let _ = Config::parse(text, Path::new("/etc/cert-agent/config.toml"));
    }
});
