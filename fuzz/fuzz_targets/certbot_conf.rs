//! `cert-agent import certbot` on arbitrary certbot files: any text as a renewal
//! configuration (`renewal/NAME.conf`), any bytes as an account key (`private_key.json`), any
//! server URL as the name of its `[acme.NAME]`. Must never panic: a malformed configuration
//! is an error naming a line of the text, every value read holds no control character, the
//! proposed `[acme.NAME]` table is valid TOML with a usable name.
#![no_main]

use cert_agent::testing::certbot::{account, conf::RenewalConf, propose};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let lines = data.split(|b| *b == b'\n').count().max(1);
    if let Ok(text) = std::str::from_utf8(data) {
        match RenewalConf::parse(text) {
            Ok(c) => {
                let mut values: Vec<&str> = [
                    &c.cert, &c.chain, &c.fullchain, &c.privkey, &c.server, &c.account,
                    &c.authenticator, &c.installer,
                ]
                .into_iter()
                .flatten()
                .map(|a| a.value.as_str())
                .collect();
                values.extend(c.webroot_path.iter().map(|a| a.value.as_str()));
                values.extend(c.webroot_map.iter().map(|(_, r)| r.value.as_str()));
                for v in values {
                    assert!(!v.chars().any(char::is_control), "{v:?}");
                }
            }
            Err(e) => {
                assert!(e.line >= 1 && e.line <= lines, "line {} of {lines}", e.line);
                let _ = e.to_string();
            }
        }
        let name = propose::ca_name(text);
        assert!(
            !name.is_empty()
                && name
                    .chars()
                    .all(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-')),
            "{name:?}"
        );
        propose::ca_table(&name, text, &[text.to_owned()])
            .parse::<toml::Table>()
            .expect("the proposed [acme.NAME] is valid TOML");
    }
    let _ = account::ec_p256_pkcs8(data);
});
