//! Configuration texts for unit tests, one place for all of them: the smallest valid file
//! ([`MINIMAL`]: `[api]` only) and one certificate in it ([`with_certificate`],
//! [`certificate`]).

use std::path::Path;

use super::{CertificateConfig, Config};

/// The smallest valid configuration: `[api]` only (the password file is not read by parsing).
pub(crate) const MINIMAL: &str = r#"
[api]
base_url = "https://partner.example.net"
login = "ops@example.com"
password_file = "/etc/cert-agent/password"
"#;

/// The keys every test certificate shares: HTTP validation from `/var/www`, nginx, the files
/// under `/tmp`, the subject's location.
const CERTIFICATE: &str = r#"webroot = "/var/www"
country = "DE"
region = "Berlin"
city = "Berlin"
server = "nginx"
cert_path = "/tmp/c.pem"
key_path = "/tmp/k.pem"
"#;

/// [`MINIMAL`] with one `[[certificate]]` of `keys` (its `name`, `domains`, `product_id` and
/// whatever the test needs) and the shared keys.
pub(crate) fn with_certificate(keys: &str) -> String {
    format!("{MINIMAL}\n[[certificate]]\n{}\n{CERTIFICATE}", keys.trim())
}

/// The certificate of [`with_certificate`], parsed; panics with every problem when invalid.
pub(crate) fn certificate(keys: &str) -> CertificateConfig {
    let text = with_certificate(keys);
    match Config::parse(&text, Path::new("/etc/cert-agent/config.toml")) {
        Ok(config) => config.certificates[0].clone(),
        Err(e) => panic!("{e:#}\n{text}"),
    }
}
