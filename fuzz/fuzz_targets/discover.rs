//! `cert-agent discover` on arbitrary web server output: an `nginx -T` dump (tokens, blocks,
//! includes, server blocks) and an Apache `<VirtualHost>` block. Must never panic: a malformed
//! dump is an error naming file and line, and every proposed certificate's configuration file
//! is valid TOML.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    // As a dump, and as the content of one file of a dump.
    let framed = format!("# configuration file /etc/nginx/nginx.conf:\n{text}");
    for dump in [text, framed.as_str()] {
        match cert_agent::discover::nginx(dump) {
            Ok(found) => {
                for p in &found.proposals {
                    let fragment = p.fragment(Some(1), Some(2));
                    fragment
                        .parse::<toml::Table>()
                        .expect("a proposed configuration file is valid TOML");
                }
            }
            Err(e) => {
                let _ = e.to_string();
            }
        }
    }
    let line = data.first().map_or(1, |b| usize::from(*b % 8) + 1);
    let _ = cert_agent::discover::apache_vhost(text, "/etc/apache2/sites-enabled/x.conf", line);
});
