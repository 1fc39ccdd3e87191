//! Configuration parsing and validation: any text as `config.toml`. Must never panic (errors
//! name file, line and key), neither when the error is formatted nor when an accepted
//! configuration is rendered (the output of `config check`'s effective configuration, secrets
//! masked). The rendering must itself be accepted, and render the same again. Read in parts
//! (as a large file is: its `[[certificate]]` tables apart from the rest) it must read as it
//! reads whole: the same configuration, or the same problems at the same lines.
#![no_main]

use std::path::Path;

use cert_agent::testing::config::Config;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    if let Ok(text) = std::str::from_utf8(data) {
        let path = Path::new("/etc/cert-agent/config.toml");
        let show = |r: Result<Config, _>| match r {
            Ok(c) => Config::render(&c),
            Err(e) => format!("{e:#}"),
        };
        assert_eq!(
            show(Config::parse_in_parts(text, path, true)),
            show(Config::parse_in_parts(text, path, false)),
            "read in parts, the document reads otherwise than whole"
        );
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
