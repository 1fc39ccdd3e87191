//! Configuration parsing and validation: any text as `config.toml`. Must never panic (errors
//! name file, line and key), neither when the error is formatted nor when an accepted
//! configuration is rendered (the output of `config check`'s effective configuration, secrets
//! masked). The rendering must itself be accepted, and render the same again.
#![no_main]

use std::path::Path;

use cert_agent::testing::config::Config;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    if let Ok(text) = std::str::from_utf8(data) {
        match Config::parse(text, Path::new("/etc/cert-agent/config.toml")) {
            Ok(config) => {
                let shown = config.render();
                let again = Config::parse(&shown, Path::new("/etc/cert-agent/config.toml"))
                    .unwrap_or_else(|e| panic!("the rendering is refused: {e}\n{shown}"));
                assert_eq!(
                    again.render(),
                    shown,
                    "the rendering changes when read back"
                );
            }
            Err(e) => {
                let _ = e.to_string();
            }
        }
    }
});
