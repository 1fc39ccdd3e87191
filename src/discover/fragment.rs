//! A proposal as a configuration fragment (`[agent] include`): the site's existing paths, its
//! document roots, comments saying where it came from.

use std::path::{Path, PathBuf};

use super::{Proposal, VALIDATION_ROOT};

/// `text` as one comment line: control characters (a line break among them) shown as `?`.
fn comment(text: &str) -> String {
    text.chars()
        .map(|c| if c.is_control() { '?' } else { c })
        .collect()
}

fn toml_str(s: &str) -> String {
    toml::Value::String(s.to_owned()).to_string()
}

/// The ACME CAs a site's certificate is recognised by (its issuer's organisation): the name
/// proposed for its `[acme.NAME]`, what it is called, and its directory.
const ACME_BRANDS: [(&str, &str, &str, &str); 4] = [
    (
        "O=Let's Encrypt",
        "letsencrypt",
        "Let's Encrypt",
        "https://acme-v02.api.letsencrypt.org/directory",
    ),
    (
        "O=ZeroSSL",
        "zerossl",
        "ZeroSSL",
        "https://acme.zerossl.com/v2/DV90",
    ),
    (
        "O=Google Trust Services",
        "google",
        "Google Trust Services",
        "https://dv.acme-v02.api.pki.goog/directory",
    ),
    (
        "O=Buypass AS",
        "buypass",
        "Buypass",
        "https://api.buypass.com/acme/directory",
    ),
];

/// The ACME CA whose certificate `issuer` (a distinguished name) names: (name, what it is
/// called, directory).
fn acme_brand(issuer: &str) -> Option<(&'static str, &'static str, &'static str)> {
    ACME_BRANDS
        .iter()
        .find(|(org, ..)| issuer.contains(org))
        .map(|(_, name, label, dir)| (*name, *label, *dir))
}

/// The host of a URL (`https://HOST/...`), lower case.
fn url_host(url: &str) -> Option<String> {
    reqwest::Url::parse(url)
        .ok()?
        .host_str()
        .map(str::to_ascii_lowercase)
}

impl Proposal {
    /// How `renew` reaches the server: its own test and reload, its TLS address (only where
    /// they are not the defaults).
    fn server_lines(&self) -> String {
        let mut out = String::new();
        let argv = |k: &str, a: &[String]| {
            let items: Vec<String> = a.iter().map(|x| toml_str(x)).collect();
            format!("{k} = [{}]\n", items.join(", "))
        };
        if let (Some(test), Some(reload)) = (&self.configtest_command, &self.reload_command) {
            out.push_str(
                "# The nginx the report came from (not the system's): check the program path.\n",
            );
            out.push_str(&argv("configtest_command", test));
            out.push_str(&argv("reload_command", reload));
        }
        if let Some(a) = &self.verify_address {
            out.push_str(&format!("verify_address = {}\n", toml_str(a)));
        }
        out
    }

    /// The proposal as a configuration fragment (`[agent] include`): the site's existing
    /// paths, its document roots, comments saying where it came from.
    pub fn fragment(&self, product_id: Option<u64>, certificate_id: Option<u64>) -> String {
        self.fragment_with(
            product_id,
            certificate_id,
            &std::collections::BTreeMap::new(),
        )
    }

    /// [`Proposal::fragment`], knowing the configuration's ACME CAs (`acme`): a site whose
    /// certificate came from an ACME CA is proposed with that CA's `issuer` when it is
    /// configured, else with the lines to add.
    pub fn fragment_with(
        &self,
        product_id: Option<u64>,
        certificate_id: Option<u64>,
        acme: &std::collections::BTreeMap<String, crate::config::AcmeCa>,
    ) -> String {
        let mut s = String::new();
        let at: Vec<String> = self.vhosts.iter().map(ToString::to_string).collect();
        let mut head = format!(
            "Written by `cert-agent discover` from {} ({}).",
            at.join(", "),
            self.server
        );
        if let Some(e) = &self.existing {
            head.push_str(&format!(
                "\nServes today: {} (issuer {}), valid until {}{}.",
                comment(&e.subject),
                comment(&e.issuer),
                e.not_after.date(),
                if e.key_on_host {
                    ""
                } else {
                    "; its key is not on this host"
                }
            ));
        }
        for m in &self.from_macro {
            head.push_str(&format!("\nVirtual host {m}."));
        }
        for line in head.lines() {
            s.push_str(&format!("# {}\n", comment(line)));
        }
        for n in &self.notes {
            s.push_str(&format!("# To do: {}\n", comment(n)));
        }
        s.push_str("\n[[certificate]]\n");
        s.push_str(&format!("name = {}\n", toml_str(&self.name)));
        let domains: Vec<String> = self.domains.iter().map(|d| toml_str(d)).collect();
        s.push_str(&format!("domains = [{}]\n", domains.join(", ")));
        if let Some(id) = certificate_id {
            s.push_str(&format!(
                "# The account's order {id} covers these names: adopted, not ordered again.\n\
                 certificate_id = {id}\n"
            ));
        }
        let brand = self
            .existing
            .as_ref()
            .filter(|_| certificate_id.is_none())
            .and_then(|e| acme_brand(&e.issuer));
        let configured = brand.and_then(|(_, _, dir)| {
            let host = url_host(dir)?;
            acme.values()
                .find(|ca| url_host(&ca.directory).as_deref() == Some(host.as_str()))
        });
        match (brand, configured) {
            (Some((_, label, _)), Some(ca)) => s.push_str(&format!(
                "# Its certificate comes from {label} (ACME): renewed through [acme.{}].\n\
                 issuer = {}\n",
                ca.name,
                toml_str(&ca.name)
            )),
            (brand, _) => {
                if let Some((name, label, dir)) = brand {
                    s.push_str(&format!(
                        "# Its certificate comes from {label}, an ACME CA. To keep it there, \
                         declare\n# [acme.{name}] with directory = {} in the main \
                         configuration\n# (docs/acme.md), then set issuer = \"{name}\" \
                         here instead of product_id.\n",
                        toml_str(dir)
                    ));
                }
                match product_id {
                    Some(p) => s.push_str(&format!("product_id = {p}\n")),
                    None => {
                        s.push_str("# product_id: from [defaults], or see `cert-agent products`\n")
                    }
                }
            }
        }
        s.push_str(&format!("server = {}\n", toml_str(self.server)));
        s.push_str(&self.server_lines());
        // Names whose port 80 does not serve the validation path yet: VALIDATION_ROOT.
        let fallback = PathBuf::from(VALIDATION_ROOT);
        let roots: Vec<(&String, &PathBuf)> = self
            .domains
            .iter()
            .map(|d| (d, self.webroot.get(d).unwrap_or(&fallback)))
            .collect();
        if roots.iter().all(|(_, r)| *r == roots[0].1) {
            s.push_str(&format!(
                "webroot = {}\n",
                toml_str(&roots[0].1.to_string_lossy())
            ));
        } else {
            let entries: Vec<String> = roots
                .iter()
                .map(|(d, r)| format!("{} = {}", toml_str(d), toml_str(&r.to_string_lossy())))
                .collect();
            s.push_str(&format!("webroot = {{ {} }}\n", entries.join(", ")));
        }
        let path = |k: &str, p: &Path| format!("{k} = {}\n", toml_str(&p.to_string_lossy()));
        if !self.keep_paths {
            s.push_str(
                "# Installed at the default paths of `server` (see `cert-agent snippet`).\n",
            );
            return s;
        }
        match (self.server, &self.cert_file, &self.chain_file) {
            ("apache", Some(c), Some(ch)) => {
                s.push_str(&path("cert_path", c));
                s.push_str(&path("chain_path", ch));
            }
            (_, Some(c), _) => s.push_str(&path("fullchain_path", c)),
            _ => {}
        }
        if let Some(k) = &self.key_file {
            s.push_str(&path("key_path", k));
        }
        s
    }
}

/// How the last line of a file `discover --write` wrote begins: the SHA-256 of everything
/// above it follows, so `retire` removes only a file nobody has edited since.
const SEAL: &str = "# cert-agent discover wrote this file; sha256 of the lines above: ";

/// `text` with its seal line ([`fragment_unchanged`]).
pub(super) fn sealed(text: &str) -> String {
    use sha2::{Digest, Sha256};
    format!(
        "{text}{SEAL}{}\n",
        hex::encode(Sha256::digest(text.as_bytes()))
    )
}

/// Whether `text` is a file `discover --write` wrote, unchanged since: its last line is the
/// seal of everything above it.
pub fn fragment_unchanged(text: &str) -> bool {
    use sha2::{Digest, Sha256};
    let Some(body) = text.strip_suffix('\n') else {
        return false;
    };
    let (above, last) = match body.rfind('\n') {
        Some(i) => (&text[..=i], &body[i + 1..]),
        None => return false,
    };
    last.strip_prefix(SEAL)
        .is_some_and(|d| d == hex::encode(Sha256::digest(above.as_bytes())))
}

#[cfg(test)]
mod seal_tests {
    use super::*;

    /// A written file is its own until edited: a changed byte, an added line or a missing
    /// seal makes it the operator's.
    #[test]
    fn an_edited_fragment_is_no_longer_unchanged() {
        let text = "# Written by `cert-agent discover`\n\n[[certificate]]\nname = \"www\"\n";
        let s = sealed(text);
        assert!(fragment_unchanged(&s));
        assert!(!fragment_unchanged(text), "no seal");
        assert!(!fragment_unchanged(&s.replace("www", "wwx")), "edited");
        assert!(!fragment_unchanged(&format!("{s}# mine\n")), "a line added");
        assert!(
            !fragment_unchanged(&s.replace("\n[[", "\n\n[[")),
            "a line inserted"
        );
        assert!(!fragment_unchanged(""));
    }
}

#[cfg(test)]
mod acme_tests {
    use super::*;
    use crate::discover::model::{At, Existing};

    fn proposal(issuer: &str) -> Proposal {
        Proposal {
            name: "blog".into(),
            server: "nginx",
            domains: vec!["blog.example.com".into()],
            webroot: std::collections::BTreeMap::new(),
            cert_file: None,
            key_file: None,
            chain_file: None,
            keep_paths: false,
            existing: Some(Existing {
                subject: "CN=blog.example.com".into(),
                issuer: issuer.into(),
                names: vec!["blog.example.com".into()],
                not_after: time::OffsetDateTime::UNIX_EPOCH,
                self_signed: false,
                key_on_host: true,
                key_problem: None,
            }),
            existing_error: None,
            verify_address: None,
            configtest_command: None,
            reload_command: None,
            vhosts: vec![At {
                file: "/etc/nginx/sites-enabled/blog".into(),
                line: 3,
            }],
            from_macro: Vec::new(),
            notes: Vec::new(),
        }
    }

    /// A site served by a Let's Encrypt certificate: with a configured CA of the same
    /// directory host, the fragment names it as `issuer` (no product); without one, it says
    /// what to declare and keeps the Partner default. A Partner certificate, an adopted
    /// order and an unknown CA propose nothing of ACME.
    #[test]
    fn a_site_of_an_acme_ca_is_proposed_with_its_issuer() {
        let le = proposal("C=US, O=Let's Encrypt, CN=R11");
        let mut acme = std::collections::BTreeMap::new();
        let plain = le.fragment_with(Some(1101), None, &acme);
        let parsed: toml::Table = plain.parse().unwrap();
        assert!(parsed["certificate"][0].get("issuer").is_none(), "{plain}");
        assert!(plain.contains("[acme.letsencrypt]"), "{plain}");
        assert!(plain.contains("https://acme-v02.api.letsencrypt.org/directory"));
        acme.insert(
            "le".to_owned(),
            crate::config::AcmeCa {
                name: "le".into(),
                directory: "https://ACME-v02.api.letsencrypt.org/directory".into(),
                contact: Vec::new(),
                eab_kid: None,
                eab_hmac_file: None,
                profile: None,
                preferred_chain: None,
                ca_file: None,
            },
        );
        let with = le.fragment_with(Some(1101), None, &acme);
        let parsed: toml::Table = with.parse().unwrap();
        let cert = &parsed["certificate"][0];
        assert_eq!(cert["issuer"].as_str(), Some("le"), "{with}");
        assert!(cert.get("product_id").is_none(), "{with}");
        // An adopted Partner order stays the Partner API's.
        let adopted = le.fragment_with(Some(1101), Some(42), &acme);
        assert!(!adopted.contains("issuer ="), "{adopted}");
        for other in [
            "C=GB, O=Sectigo Limited, CN=Sectigo RSA DV",
            "CN=Let's Encrypt fake",
        ] {
            let f = proposal(other).fragment_with(Some(1101), None, &acme);
            assert!(!f.contains("ACME"), "{other}: {f}");
        }
    }
}
