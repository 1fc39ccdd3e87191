//! Configuration texts for unit tests, one place for all of them: the smallest valid file
//! ([`MINIMAL`]: `[api]` only), one certificate in it ([`with_certificate`],
//! [`certificate`]), and a main file including `conf.d/*.toml` on disk ([`with_conf_d`],
//! [`site`]).

use std::fs;
use std::path::{Path, PathBuf};

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

/// The main file of [`with_conf_d`]: `[agent]` with the state directory `STATE` (replaced) and
/// `include` on line 8, `[defaults]` giving every certificate its subject, product, server and
/// web root.
const INCLUDING: &str = r#"[api]
base_url = "https://partner.example.net"
login = "ops@example.com"
password_file = "/etc/cert-agent/password"

[agent]
state_dir = "STATE"
include = ["conf.d/*.toml"]

[defaults]
country = "DE"
region = "Berlin"
city = "Berlin"
product_id = 101
server = "none"
webroot = "/var/www/html"
"#;

/// A main file `config.toml` in a new temporary directory, including `conf.d/*.toml`, its
/// state directory `state/` beside it (made), `extra` appended to it and the fragments
/// `(file name, text)` written in `conf.d/`: the directory and the main file's path.
pub(crate) fn with_conf_d(
    extra: &str,
    fragments: &[(&str, String)],
) -> (tempfile::TempDir, PathBuf) {
    let dir = tempfile::tempdir().unwrap();
    let main = dir.path().join("config.toml");
    let state = dir.path().join("state");
    fs::create_dir(&state).unwrap();
    let text = INCLUDING.replace("STATE", &state.display().to_string());
    fs::write(&main, format!("{text}{extra}")).unwrap();
    fs::create_dir(dir.path().join("conf.d")).unwrap();
    for (name, text) in fragments {
        fs::write(dir.path().join("conf.d").join(name), text).unwrap();
    }
    (dir, main)
}

/// A `[[certificate]]` `name` for `domain` (the rest from [`with_conf_d`]'s `[defaults]`),
/// its files under `/etc/ssl/NAME/`.
pub(crate) fn site(name: &str, domain: &str) -> String {
    format!(
        "[[certificate]]\nname = \"{name}\"\ndomains = [\"{domain}\"]\n\
         fullchain_path = \"/etc/ssl/{name}/fullchain.pem\"\n\
         key_path = \"/etc/ssl/{name}/privkey.pem\"\n"
    )
}
