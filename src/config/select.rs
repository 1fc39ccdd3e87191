//! Choosing certificates by name: what `--name`, `issue NAME`, `check --name` and the other
//! commands that name certificates work on.

use std::collections::HashSet;

use super::{CertificateConfig, Config};

/// A certificate name that the configuration does not define (a usage error).
#[derive(Debug, thiserror::Error)]
#[error("no [[certificate]] named '{name}' in {} (configured: {})", config_path.display(), configured.join(", "))]
pub struct UnknownCertificate {
    pub name: String,
    pub config_path: std::path::PathBuf,
    pub configured: Vec<String>,
}

impl UnknownCertificate {
    pub fn new(config: &Config, name: &str) -> Self {
        Self {
            name: name.to_owned(),
            config_path: config.path.clone(),
            configured: config.certificates.iter().map(|c| c.name.clone()).collect(),
        }
    }
}

impl Config {
    /// The certificate named `name`.
    pub fn certificate(&self, name: &str) -> Option<&CertificateConfig> {
        self.certificates.iter().find(|c| c.name == name)
    }

    /// The certificate named `name`, or the error that says which names exist.
    pub fn certificate_named(&self, name: &str) -> Result<&CertificateConfig, UnknownCertificate> {
        self.certificate(name)
            .ok_or_else(|| UnknownCertificate::new(self, name))
    }

    /// The certificates `names` choose, in the order given; every configured one when
    /// `names` is empty. A name given twice is chosen once: two concurrent starts of one
    /// certificate would each see no order and place one.
    pub fn select(&self, names: &[String]) -> Result<Vec<&CertificateConfig>, UnknownCertificate> {
        if names.is_empty() {
            return Ok(self.certificates.iter().collect());
        }
        let mut seen = HashSet::new();
        names
            .iter()
            .filter(|n| seen.insert(n.as_str()))
            .map(|n| self.certificate_named(n))
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn names(v: &[&str]) -> Vec<String> {
        v.iter().map(|s| (*s).to_owned()).collect()
    }

    fn two() -> Config {
        let mut config = Config::parse(
            "[api]\nbase_url = \"https://api.example.net\"\nlogin = \"a@example.net\"\n\
             password = \"x\"\n[defaults]\ncountry = \"DE\"\nregion = \"B\"\ncity = \"B\"\n\
             [[certificate]]\nname = \"www\"\ndomains = [\"a.example.com\"]\nproduct_id = 1\n\
             dcv = \"email\"\ndcv_email = \"admin@example.com\"\nserver = \"none\"\n\
             key_path = \"/k/privkey.pem\"\nfullchain_path = \"/k/f.pem\"\n",
            std::path::Path::new("t.toml"),
        )
        .unwrap();
        let mut other = config.certificates[0].clone();
        other.name = "api".into();
        config.certificates.push(other);
        config
    }

    #[test]
    fn a_name_given_twice_is_selected_once() {
        let config = two();
        let picked = config.select(&names(&["www", "api", "www"])).unwrap();
        let picked: Vec<&str> = picked.iter().map(|c| c.name.as_str()).collect();
        assert_eq!(picked, ["www", "api"]);
    }

    #[test]
    fn no_names_select_every_certificate() {
        let config = two();
        assert_eq!(config.select(&[]).unwrap().len(), 2);
    }

    #[test]
    fn an_unknown_name_says_which_exist() {
        let config = two();
        let err = config.select(&names(&["www", "mail"])).unwrap_err();
        assert_eq!(err.name, "mail");
        assert!(err.to_string().contains("configured: www, api"), "{err}");
    }
}
