//! `cert-agent placeholder NAME` and `cert-agent snippet NAME`: what a site needs before its
//! first certificate — self-signed files at its paths, and the web server lines that use them.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use anyhow::{Result, anyhow};

use super::exit;
use super::output::Output;
use crate::clock::Clock;
use crate::config::UnknownCertificate;
use crate::config::{CertificateConfig, Config, ServerKind};
use crate::dcv::DCV_URL_DIR;
use crate::engine::install_paths;
use crate::store::Store;

fn certificate<'c>(config: &'c Config, name: &str) -> Result<&'c CertificateConfig> {
    config
        .certificate(name)
        .ok_or_else(|| anyhow!(UnknownCertificate::new(config, name)))
}

pub(super) fn placeholder(config: &Config, name: &str, out: &Output, clock: Clock) -> Result<u8> {
    let cert = certificate(config, name)?;
    let store = Store::open(&config.agent.state_dir)?;
    let _lock = store.lock()?;
    let written = crate::engine::placeholder::ensure(&store, cert, clock.now())?;
    if out.json {
        out.print_json(&serde_json::json!({ "name": name, "placeholder": written }))?;
        return Ok(exit::OK);
    }
    match written {
        Some(p) => {
            outln!(
                "self-signed placeholder (serial {}) written for '{name}'; the first certificate \
                 replaces it:",
                p.serial
            );
            for f in &p.files {
                outln!("  {}", f.display());
            }
        }
        None => outln!("the files of '{name}' exist already: nothing written"),
    }
    Ok(exit::OK)
}

pub(super) fn snippet(config: &Config, name: &str, out: &Output) -> Result<u8> {
    let cert = certificate(config, name)?;
    let text = match cert.install.server {
        ServerKind::Apache => apache(cert),
        _ => nginx(cert),
    };
    if out.json {
        out.print_json(&serde_json::json!({ "name": name, "snippet": text }))?;
    } else {
        out!("{text}");
    }
    Ok(exit::OK)
}

/// Domains grouped by the document root that serves their validation file (`None`: the
/// standalone server), in configuration order.
fn by_root(cert: &CertificateConfig) -> Vec<(Option<PathBuf>, Vec<String>)> {
    let mut out: Vec<(Option<PathBuf>, Vec<String>)> = Vec::new();
    for d in &cert.domains {
        let root = cert
            .dcv
            .webroot
            .as_ref()
            .and_then(|w| w.for_domain(d))
            .map(Path::to_path_buf);
        match out.iter_mut().find(|(r, _)| *r == root) {
            Some((_, names)) => names.push(d.clone()),
            None => out.push((root, vec![d.clone()])),
        }
    }
    out
}

/// The standalone server's address as the web server reaches it.
fn standalone_target(cert: &CertificateConfig) -> String {
    let l = cert.dcv.listen;
    if l.ip().is_unspecified() {
        format!("127.0.0.1:{}", l.port())
    } else {
        l.to_string()
    }
}

fn validation_note(cert: &CertificateConfig) -> Option<String> {
    if cert.dcv.method.is_http() {
        return None;
    }
    Some(format!(
        "# `dcv = \"{}\"`: nothing to serve on port 80 for validation.\n",
        serde_json::to_value(cert.dcv.method)
            .ok()
            .and_then(|v| v.as_str().map(str::to_owned))
            .unwrap_or_default()
    ))
}

fn nginx(cert: &CertificateConfig) -> String {
    let paths = install_paths(cert);
    let names = cert.domains.join(" ");
    let mut s = format!(
        "# cert-agent: the nginx lines of certificate '{}'.\n",
        cert.name
    );
    match validation_note(cert) {
        Some(note) => s.push_str(&note),
        None => {
            s.push_str(&format!(
                "# Port 80: the CA fetches http://NAME{DCV_URL_DIR}/<hash>.txt without \
                 following redirects.\n",
            ));
            for (root, domains) in by_root(cert) {
                let location = match (&root, cert.dcv.standalone) {
                    (_, true) => format!("proxy_pass http://{};", standalone_target(cert)),
                    (Some(r), false) => format!(
                        "root {};               # the webroot cert-agent writes to\n        \
                         default_type text/plain;",
                        r.display()
                    ),
                    (None, false) => "# no webroot configured for these names".to_owned(),
                };
                s.push_str(&format!(
                    "server {{\n    listen 80;\n    listen [::]:80;\n    server_name {};\n\n    \
                     location ^~ {DCV_URL_DIR}/ {{\n        {location}\n    }}\n    \
                     location / {{\n        return 301 https://$host$request_uri;\n    }}\n}}\n\n",
                    domains.join(" ")
                ));
            }
        }
    }
    let (certificate, key) = match (&paths.combined, &paths.fullchain, &paths.cert, &paths.key) {
        (Some(c), _, _, _) => (c.clone(), c.clone()),
        (None, Some(f), _, Some(k)) => (f.clone(), k.clone()),
        (None, None, Some(c), Some(k)) => (c.clone(), k.clone()),
        _ => (
            PathBuf::from("(no certificate file)"),
            PathBuf::from("(no key file)"),
        ),
    };
    s.push_str(&format!(
        "server {{\n    listen 443 ssl;\n    listen [::]:443 ssl;\n    server_name {names};\n\n    \
         ssl_certificate     {};\n    ssl_certificate_key {};\n}}\n",
        certificate.display(),
        key.display()
    ));
    s
}

fn apache(cert: &CertificateConfig) -> String {
    let paths = install_paths(cert);
    let (first, rest) = (cert.common_name(), cert.additional_domains());
    let alias = if rest.is_empty() {
        String::new()
    } else {
        format!("    ServerAlias {}\n", rest.join(" "))
    };
    let mut s = format!(
        "# cert-agent: the Apache lines of certificate '{}'.\n",
        cert.name
    );
    match validation_note(cert) {
        Some(note) => s.push_str(&note),
        None => {
            s.push_str(&format!(
                "# Port 80: the CA fetches http://NAME{DCV_URL_DIR}/<hash>.txt without \
                 following redirects (a2enmod rewrite alias; proxy_http for the standalone \
                 server).\n",
            ));
            let mut roots: BTreeMap<String, Vec<String>> = BTreeMap::new();
            for (root, domains) in by_root(cert) {
                let key = root.map_or(String::new(), |r| r.display().to_string());
                roots.entry(key).or_default().extend(domains);
            }
            for (root, domains) in roots {
                let (main, more) = domains
                    .split_first()
                    .map_or((first, &[][..]), |(a, b)| (a.as_str(), b));
                let more = if more.is_empty() {
                    String::new()
                } else {
                    format!("    ServerAlias {}\n", more.join(" "))
                };
                let serve = if cert.dcv.standalone {
                    format!(
                        "    ProxyPass {DCV_URL_DIR}/ http://{}{DCV_URL_DIR}/\n",
                        standalone_target(cert)
                    )
                } else if root.is_empty() {
                    "    # no webroot configured for these names\n".to_owned()
                } else {
                    format!(
                        "    Alias {DCV_URL_DIR}/ {root}{DCV_URL_DIR}/\n    \
                         <Directory {root}{DCV_URL_DIR}/>\n        Require all granted\n    \
                         </Directory>\n"
                    )
                };
                s.push_str(&format!(
                    "<VirtualHost *:80>\n    ServerName {main}\n{more}{serve}\n    RewriteEngine On\n    \
                     RewriteCond %{{REQUEST_URI}} !^/\\.well-known/pki-validation/\n    \
                     RewriteRule ^ https://%{{HTTP_HOST}}%{{REQUEST_URI}} [R=301,L]\n</VirtualHost>\n\n"
                ));
            }
        }
    }
    let mut files = String::new();
    match (&paths.combined, &paths.cert, &paths.chain, &paths.fullchain, &paths.key) {
        (Some(c), ..) => files.push_str(&format!("    SSLCertificateFile {}\n", c.display())),
        (None, Some(c), Some(ch), _, Some(k)) => files.push_str(&format!(
            "    SSLCertificateFile      {}\n    SSLCertificateChainFile {}\n    SSLCertificateKeyFile   {}\n",
            c.display(),
            ch.display(),
            k.display()
        )),
        (None, _, _, Some(f), Some(k)) | (None, Some(f), None, None, Some(k)) => files.push_str(&format!(
            "    SSLCertificateFile    {}\n    SSLCertificateKeyFile {}\n",
            f.display(),
            k.display()
        )),
        _ => files.push_str("    # no certificate files configured\n"),
    }
    s.push_str(&format!(
        "<VirtualHost *:443>\n    ServerName {first}\n{alias}\n    SSLEngine on\n{files}</VirtualHost>\n"
    ));
    s
}
