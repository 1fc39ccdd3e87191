//! What `import certbot` proposes: an `[acme.NAME]` per distinct CA, and per lineage a
//! `[[certificate]]` whose install paths are the lineage's `live/NAME/` files, so that the web
//! server's configuration stays as it is.

use std::fmt::Write as _;

use super::lineage::{Authenticator, Lineage};

/// The name of the `[acme.NAME]` of the directory `server`: `letsencrypt`,
/// `letsencrypt-staging`, else a slug of its host.
pub fn ca_name(server: &str) -> String {
    let host = server
        .split("://")
        .nth(1)
        .unwrap_or(server)
        .split(['/', '?', '#'])
        .next()
        .unwrap_or("");
    let host = host.rsplit_once('@').map_or(host, |(_, h)| h);
    match host {
        "acme-v02.api.letsencrypt.org" => "letsencrypt".into(),
        "acme-staging-v02.api.letsencrypt.org" => "letsencrypt-staging".into(),
        _ => {
            let mut slug = String::new();
            for c in host.chars().take(60) {
                if c.is_ascii_alphanumeric() {
                    slug.push(c.to_ascii_lowercase());
                } else if !slug.ends_with('-') {
                    slug.push('-');
                }
            }
            let slug = slug.trim_matches('-').to_owned();
            if slug.is_empty() || slug == "partner" {
                "acme".into()
            } else {
                slug
            }
        }
    }
}

/// The web root proposed for a lineage certbot validated through its nginx or apache plugin.
pub(crate) const PLUGIN_WEBROOT: &str = "/var/www/cert-agent";

/// A TOML string.
fn s(text: &str) -> String {
    toml::Value::String(text.to_owned()).to_string()
}

fn p(path: &std::path::Path) -> String {
    s(&path.to_string_lossy())
}

/// The `[acme.NAME]` table of a CA (for the main configuration file).
pub fn ca_table(name: &str, server: &str, contact: &[String]) -> String {
    let mut t = format!("[acme.{name}]\ndirectory = {}\n", s(server));
    if !contact.is_empty() {
        let list: Vec<String> = contact.iter().map(|c| s(c)).collect();
        let _ = writeln!(t, "contact = [{}]", list.join(", "));
    }
    t
}

/// The `[[certificate]]` of `lineage`, issued by the CA `ca`, as an included file.
pub(crate) fn fragment(lineage: &Lineage, ca: &str) -> String {
    let mut t = String::new();
    let _ = writeln!(
        t,
        "# Taken over from certbot ({}): its files stay where the web server reads them.",
        lineage.conf_file.display()
    );
    let _ = writeln!(t, "[[certificate]]");
    let _ = writeln!(t, "name = {}", s(&lineage.name));
    let _ = writeln!(t, "issuer = {}", s(ca));
    let domains: Vec<String> = lineage.domains.iter().map(|d| s(d)).collect();
    let _ = writeln!(t, "domains = [{}]", domains.join(", "));
    let _ = writeln!(t, "key_type = {}", s(lineage.key_type.as_str()));
    match &lineage.authenticator {
        Authenticator::Webroot { default, map } => {
            let every_name_mapped = lineage
                .domains
                .iter()
                .all(|d| map.iter().any(|(n, _)| n == d));
            let roots: std::collections::BTreeSet<_> = map.iter().map(|(_, r)| r).collect();
            if map.is_empty() || (roots.len() == 1 && every_name_mapped) {
                if let Some(root) = default.as_ref().or_else(|| roots.iter().next().copied()) {
                    let _ = writeln!(t, "webroot = {}", p(root));
                }
            } else {
                let entries: Vec<String> = lineage
                    .domains
                    .iter()
                    .filter_map(|d| {
                        map.iter()
                            .find(|(n, _)| n == d)
                            .map(|(_, r)| r)
                            .or(default.as_ref())
                            .map(|r| format!("{} = {}", s(d), p(r)))
                    })
                    .collect();
                let _ = writeln!(t, "webroot = {{ {} }}", entries.join(", "));
            }
        }
        Authenticator::Standalone => {
            let _ = writeln!(t, "standalone = true");
        }
        Authenticator::ServerPlugin(plugin) => {
            let _ = writeln!(
                t,
                "# certbot validated through its {} plugin: serve /.well-known/acme-challenge/ \
                 on port 80 from this directory\n# (nginx: location ^~ /.well-known/acme-challenge/ \
                 {{ root {PLUGIN_WEBROOT}; }})",
                s(plugin)
            );
            let _ = writeln!(t, "webroot = {}", s(PLUGIN_WEBROOT));
        }
        Authenticator::Dns(plugin) => {
            let _ = writeln!(t, "dcv = \"dns-txt\"");
            let _ = writeln!(
                t,
                "# certbot validated by {}: name the program that adds the TXT records",
                s(plugin)
            );
            let _ = writeln!(t, "# dns_hook = [\"/usr/local/bin/dns-hook\"]");
        }
    }
    if let Some(chain) = &lineage.preferred_chain {
        let _ = writeln!(
            t,
            "# certbot preferred the chain {}; cert-agent installs the chain the CA sends first",
            s(chain)
        );
    }
    let _ = writeln!(t, "server = {}", s(lineage.installer));
    let live = &lineage.live;
    let _ = writeln!(t, "cert_path = {}", p(&live.cert));
    let _ = writeln!(t, "chain_path = {}", p(&live.chain));
    let _ = writeln!(t, "fullchain_path = {}", p(&live.fullchain));
    let _ = writeln!(t, "key_path = {}", p(&live.privkey));
    t
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::certbot::lineage::Files;
    use std::path::PathBuf;

    fn lineage(authenticator: Authenticator) -> Lineage {
        let key = rcgen::KeyPair::generate().unwrap();
        let params =
            rcgen::CertificateParams::new(vec!["a.example".into(), "b.example".into()]).unwrap();
        let cert = params.self_signed(&key).unwrap();
        let leaf = crate::crypto::CertificateInfo::from_pem(cert.pem().as_bytes()).unwrap();
        let files = |d: &str| Files {
            cert: PathBuf::from(format!("{d}/cert.pem")),
            chain: PathBuf::from(format!("{d}/chain.pem")),
            fullchain: PathBuf::from(format!("{d}/fullchain.pem")),
            privkey: PathBuf::from(format!("{d}/privkey.pem")),
        };
        Lineage {
            name: "a.example".into(),
            conf_file: "/etc/letsencrypt/renewal/a.example.conf".into(),
            server: "https://acme-v02.api.letsencrypt.org/directory".into(),
            account: None,
            authenticator,
            installer: "nginx",
            preferred_chain: Some("ISRG \"Root\" X1".into()),
            live: files("/etc/letsencrypt/live/a.example"),
            targets: files("/etc/letsencrypt/archive/a.example"),
            leaf,
            key_type: crate::crypto::KeyType::EcdsaP256,
            domains: vec!["a.example".into(), "b.example".into()],
        }
    }

    #[test]
    fn each_authenticator_becomes_its_validation_in_valid_toml() {
        let webroots = Authenticator::Webroot {
            default: Some("/var/www/a".into()),
            map: vec![
                ("a.example".into(), "/var/www/a".into()),
                ("b.example".into(), "/var/www/b \"x\"".into()),
            ],
        };
        let one = Authenticator::Webroot {
            default: Some("/var/www/a".into()),
            map: vec![],
        };
        for (auth, want) in [
            (webroots, "b.example"),
            (one, "/var/www/a"),
            (Authenticator::Standalone, "standalone"),
            (Authenticator::Dns("dns-cloudflare".into()), "dcv"),
            (Authenticator::ServerPlugin("nginx".into()), "webroot"),
        ] {
            let text = fragment(&lineage(auth), "letsencrypt");
            let t: toml::Table = text.parse().unwrap_or_else(|e| panic!("{e}\n{text}"));
            let c = &t["certificate"][0];
            assert_eq!(c["issuer"].as_str(), Some("letsencrypt"));
            assert_eq!(
                c["key_path"].as_str(),
                Some("/etc/letsencrypt/live/a.example/privkey.pem")
            );
            assert_eq!(c["domains"][0].as_str(), Some("a.example"));
            assert_eq!(c["server"].as_str(), Some("nginx"));
            let keys: Vec<&String> = c.as_table().unwrap().keys().collect();
            let found = keys.iter().any(|k| k.as_str() == want)
                || c["webroot"]
                    .as_table()
                    .is_some_and(|m| m.contains_key(want))
                || c["webroot"].as_str() == Some(want);
            assert!(found, "{want}: {text}");
        }
    }

    #[test]
    fn a_ca_is_named_after_its_host() {
        assert_eq!(
            ca_name("https://acme-v02.api.letsencrypt.org/directory"),
            "letsencrypt"
        );
        assert_eq!(
            ca_name("https://acme-staging-v02.api.letsencrypt.org/directory"),
            "letsencrypt-staging"
        );
        assert_eq!(
            ca_name("https://acme.sectigo.com/v2/DV"),
            "acme-sectigo-com"
        );
        assert_eq!(ca_name("https://127.0.0.1:14000/dir"), "127-0-0-1-14000");
        assert_eq!(ca_name("https://user@[::1]/dir"), "1");
        assert_eq!(ca_name("https:///dir"), "acme");
    }
}
