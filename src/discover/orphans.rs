//! Configured certificates that the web server no longer serves: none of their names is a
//! name of any of its virtual hosts (a site removed, its certificate still renewed and
//! billed). `discover` lists them with a hint to retire them.

use serde::Serialize;

use super::{Discovery, Server};
use crate::config::Config;
use crate::values::ServerKind;

/// A configured certificate no virtual host serves.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub(crate) struct Orphan {
    pub name: String,
    pub domains: Vec<String>,
}

/// A server name as the servers compare it: lower case, without a trailing dot.
fn normal(name: &str) -> String {
    let lower = name.to_ascii_lowercase();
    match lower.strip_suffix('.') {
        Some(bare) if !bare.is_empty() => bare.to_owned(),
        _ => lower,
    }
}

/// The certificates of `config` for `server` whose names no virtual host of `found` has.
pub(crate) fn orphans(found: &Discovery, server: Server, config: &Config) -> Vec<Orphan> {
    let served: std::collections::HashSet<String> = found
        .vhosts
        .iter()
        .flat_map(|v| v.names.iter().map(|n| normal(n)))
        .collect();
    let kind = match server {
        Server::Nginx => ServerKind::Nginx,
        Server::Apache => ServerKind::Apache,
    };
    config
        .certificates
        .iter()
        .filter(|c| c.install.server == kind)
        .filter(|c| !c.domains.iter().any(|d| served.contains(&normal(d))))
        .map(|c| Orphan {
            name: c.name.clone(),
            domains: c.domains.clone(),
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_certificate_whose_names_no_server_block_has_is_listed() {
        let dump = "# configuration file /etc/nginx/nginx.conf:\n\
            http {\n server {\n listen 443 ssl;\n server_name WWW.Example.com.;\n \
            ssl_certificate /etc/ssl/a.pem;\n ssl_certificate_key /etc/ssl/a.key;\n }\n}\n";
        let found = crate::discover::nginx(dump).unwrap();
        let text = "[api]\nbase_url = \"https://127.0.0.1:1\"\nlogin = \"a@b.test\"\n\
            password = \"x\"\n[agent]\nstate_dir = \"/tmp/x\"\n[defaults]\ncountry = \"DE\"\n\
            region = \"B\"\ncity = \"B\"\n\
            [[certificate]]\nname = \"www\"\ndomains = [\"www.example.com\"]\nproduct_id = 1\n\
            webroot = \"/var/www\"\nserver = \"nginx\"\n\
            [[certificate]]\nname = \"old\"\ndomains = [\"old.example.com\"]\nproduct_id = 1\n\
            webroot = \"/var/www\"\nserver = \"nginx\"\n\
            [[certificate]]\nname = \"apache-site\"\ndomains = [\"a.example.com\"]\n\
            product_id = 1\nwebroot = \"/var/www\"\nserver = \"apache\"\n";
        let config =
            Config::parse(text, std::path::Path::new("/etc/cert-agent/config.toml")).unwrap();
        let o = orphans(&found, Server::Nginx, &config);
        assert_eq!(
            o,
            vec![Orphan {
                name: "old".into(),
                domains: vec!["old.example.com".into()]
            }]
        );
    }
}
