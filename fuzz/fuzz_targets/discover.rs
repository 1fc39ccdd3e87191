//! `cert-agent discover` on arbitrary web server output: an `nginx -T` dump (tokens, blocks,
//! includes, server blocks), an Apache `<VirtualHost>` block, and Apache configuration text
//! read through an `apachectl -S` listing (a `<VirtualHost>` at a line, a mod_macro `Use` and
//! its `<Macro>` at lines, a use nested in another macro); every file a dump names for TLS
//! (what `retire` keeps) and whether a file `discover --write` wrote is unchanged. Must never
//! panic: a malformed dump is an error naming file and line, every proposed certificate's
//! configuration file is valid TOML, and every file named for TLS is an absolute path.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    // As a dump, and as the content of one file of a dump.
    let framed = format!("# configuration file /etc/nginx/nginx.conf:\n{text}");
    for dump in [text, framed.as_str()] {
        match cert_agent::testing::discover::nginx(dump) {
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
        if let Ok(named) =
            cert_agent::testing::discover::loaded_files(cert_agent::testing::discover::Server::Nginx, dump)
        {
            for n in &named {
                assert!(n.path.is_absolute(), "{}", n.path.display());
                let _ = n.names(std::path::Path::new("/etc/ssl/x.pem"));
            }
        }
    }
    let _ = cert_agent::testing::discover::fragment_unchanged(text);
    let line = data.first().map_or(1, |b| usize::from(*b % 8) + 1);
    let _ = cert_agent::testing::discover::apache_vhost(text, "/etc/apache2/sites-enabled/x.conf", line);
    let at = |i: usize| data.get(i).map_or(1, |b| usize::from(*b % 32) + 1);
    let f = "/etc/apache2/sites-enabled/x.conf";
    let used = format!(
        "macro 'vhost' (defined on line {} of \"{f}\") used on line {} of \"{f}\"",
        at(1),
        at(2)
    );
    let nested = format!(
        "macro 'vhost' (defined on line {} of \"{f}\") used on line {} of \"{used}\"",
        at(3),
        at(4)
    );
    let listing = format!(
        "VirtualHost configuration:\n\
         *:80                   is a NameVirtualHost\n\
         \x20        port 80 namevhost a.example ({f}:{line})\n\
         \x20                alias www.a.example\n\
         \x20        port 80 namevhost b.example ({used}:{})\n\
         \x20        port 443 namevhost c.example ({nested}:{})\n",
        at(5),
        at(6)
    );
    if let Ok(found) = cert_agent::testing::discover::apache_from(&listing, 80, |_| Ok(text.to_owned())) {
        for p in &found.proposals {
            p.fragment(None, None)
                .parse::<toml::Table>()
                .expect("a proposed configuration file is valid TOML");
        }
    }
});
