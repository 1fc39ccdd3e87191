//! `cert-agent discover`: the sites a web server already serves, read from what the server
//! itself reports (`nginx -T`; `apachectl -S` and the files it names), turned into proposed
//! `[[certificate]]` entries that keep the site's existing paths, so that no web server
//! configuration has to change.
//!
//! - `nginx.rs`: the `nginx -T` dump, its directives and `server` blocks;
//! - `apache.rs`: the `apachectl -S` listing and each `<VirtualHost>` block.
//!
//! Virtual hosts that share one certificate file become one proposal; names that cannot be
//! managed (regular expressions, wildcards, `_`, IP addresses, variables) are listed with the
//! reason. Reading a dump never panics: a malformed one is an error naming file and line.

mod apache;
mod nginx;

use std::collections::{BTreeMap, HashMap, HashSet};
use std::fmt;
use std::path::{Path, PathBuf};

use serde::Serialize;

use crate::config::validate_domain;
use crate::crypto::{CertificateInfo, read_key_file};

/// The document root proposed for names whose port 80 does not serve the validation path
/// from a document root yet: the web server is to serve `/.well-known/pki-validation/` from
/// here (the proposal's note says how).
pub const VALIDATION_ROOT: &str = "/var/www/cert-agent";

/// A place in a web server's configuration.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct At {
    pub file: String,
    pub line: usize,
}

impl fmt::Display for At {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}:{}", self.file, self.line)
    }
}

/// A dump that cannot be read.
#[derive(Debug, thiserror::Error)]
pub enum DiscoverError {
    #[error("{} line {}: {message}", at.file, at.line)]
    Parse { at: At, message: String },
    #[error("{0}")]
    Other(String),
}

/// One `listen` (nginx) or `<VirtualHost>` address (Apache).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct Listen {
    pub port: u16,
    pub ssl: bool,
    /// `default_server` / `_default_`.
    pub default: bool,
}

/// Whether `/.well-known/pki-validation/` of a virtual host is served from a document root.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Validation {
    /// From this document root.
    Served(PathBuf),
    /// Not, and why (a redirect, a `return`, a proxy, no root).
    Blocked(String),
    /// Cannot be told from the configuration, and why (a regular expression the `regex`
    /// crate cannot evaluate, a rewritten URI): to be checked by hand.
    Unknown(String),
}

impl Default for Validation {
    fn default() -> Self {
        Self::Blocked("not read".into())
    }
}

/// A virtual host as the web server configures it.
#[derive(Debug, Clone, Default, Serialize)]
pub struct Vhost {
    pub at: At,
    pub server: &'static str,
    pub names: Vec<String>,
    pub listens: Vec<Listen>,
    /// Serves TLS.
    pub tls: bool,
    pub cert_file: Option<PathBuf>,
    pub key_file: Option<PathBuf>,
    /// Apache `SSLCertificateChainFile`.
    pub chain_file: Option<PathBuf>,
    pub root: Option<PathBuf>,
    pub validation: Validation,
    /// What could not be read from the configuration and is to be checked by hand.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub notes: Vec<String>,
}

/// The certificate a site serves today.
#[derive(Debug, Clone, Serialize)]
pub struct Existing {
    pub subject: String,
    pub issuer: String,
    pub names: Vec<String>,
    #[serde(with = "time::serde::rfc3339")]
    pub not_after: time::OffsetDateTime,
    pub self_signed: bool,
    /// The key file exists on this host and belongs to the certificate.
    pub key_on_host: bool,
}

/// A name that cannot be managed, and why.
#[derive(Debug, Clone, Serialize)]
pub struct Skipped {
    pub name: String,
    pub at: At,
    pub reason: String,
}

/// A proposed `[[certificate]]`.
#[derive(Debug, Clone, Serialize)]
pub struct Proposal {
    pub name: String,
    pub server: &'static str,
    pub domains: Vec<String>,
    /// Document root per domain (for HTTP validation).
    pub webroot: BTreeMap<String, PathBuf>,
    pub cert_file: Option<PathBuf>,
    pub key_file: Option<PathBuf>,
    pub chain_file: Option<PathBuf>,
    /// The site's certificate and key files are written in place by cert-agent. `false` when
    /// they are symbolic links (certbot's `live/` directory): cert-agent never writes through
    /// a link, so it installs into its own files and the site is pointed at them.
    pub keep_paths: bool,
    /// The certificate the site serves today, when its file could be read.
    pub existing: Option<Existing>,
    /// Why the existing certificate could not be read.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub existing_error: Option<String>,
    /// The virtual hosts it covers.
    pub vhosts: Vec<At>,
    /// What needs doing before it works (a redirect in the way, no TLS server yet, ...).
    pub notes: Vec<String>,
}

/// What `discover` found.
#[derive(Debug, Clone, Serialize)]
pub struct Discovery {
    pub vhosts: Vec<Vhost>,
    pub proposals: Vec<Proposal>,
    pub skipped: Vec<Skipped>,
}

/// Reads an `nginx -T` dump.
pub fn nginx(dump: &str) -> Result<Discovery, DiscoverError> {
    Ok(propose(nginx::vhosts(dump)?))
}

/// Reads an `apachectl -S` listing and the `<VirtualHost>` blocks of the files it names.
pub fn apache(listing: &str) -> Result<Discovery, DiscoverError> {
    let mut vhosts = Vec::new();
    let mut texts: BTreeMap<String, String> = BTreeMap::new();
    let main_root = apache::main_document_root(listing);
    for at in apache::listed(listing)? {
        if !texts.contains_key(&at.file) {
            let text = std::fs::read_to_string(&at.file).map_err(|e| {
                DiscoverError::Other(format!(
                    "{}: {} (named by apachectl -S)",
                    at.file,
                    crate::fsutil::io_text(&e)
                ))
            })?;
            texts.insert(at.file.clone(), text);
        }
        let text = texts.get(&at.file).map(String::as_str).unwrap_or_default();
        vhosts.push(apache::vhost(text, &at, main_root.as_deref())?);
    }
    Ok(propose(vhosts))
}

/// The `<VirtualHost>` block starting at `line` of `text` (the content of `file`), as
/// [`apache`] reads each one `apachectl -S` names.
pub fn apache_vhost(text: &str, file: &str, line: usize) -> Result<Vhost, DiscoverError> {
    apache::vhost(
        text,
        &At {
            file: file.to_owned(),
            line,
        },
        None,
    )
}

/// Why a server name cannot be managed, or `None`.
fn unmanageable(name: &str) -> Option<String> {
    if name.is_empty() || name == "_" || name == "\"\"" {
        return Some("a catch-all name, not a domain".into());
    }
    if name.starts_with('~') {
        return Some("a regular expression".into());
    }
    if name.contains('$') {
        return Some("depends on a variable".into());
    }
    if name.starts_with('*') || name.ends_with(".*") || name.starts_with('.') {
        return Some(
            "a wildcard: needs a wildcard product and DNS validation; configure it by hand".into(),
        );
    }
    if name.parse::<std::net::IpAddr>().is_ok() {
        return Some("an IP address".into());
    }
    if let Err(why) = validate_domain(name) {
        return Some(why);
    }
    None
}

/// Groups virtual hosts into proposals.
fn propose(vhosts: Vec<Vhost>) -> Discovery {
    let mut skipped = Vec::new();
    // Names each virtual host may manage, lower case, in order, once.
    let managed: Vec<Vec<String>> = vhosts
        .iter()
        .map(|v| {
            let mut out: Vec<String> = Vec::new();
            for n in &v.names {
                // nginx and Apache compare names without regard to case; a trailing dot
                // writes the same name fully qualified.
                let lower = n.to_ascii_lowercase();
                let n = match lower.strip_suffix('.') {
                    Some(bare) if !bare.is_empty() && !bare.ends_with('.') => bare.to_owned(),
                    _ => lower,
                };
                match unmanageable(&n) {
                    Some(reason) if !skipped.iter().any(|s: &Skipped| s.name == n) => {
                        skipped.push(Skipped {
                            name: n,
                            at: v.at.clone(),
                            reason,
                        });
                    }
                    Some(_) => {}
                    None if !out.contains(&n) => out.push(n),
                    None => {}
                }
            }
            out
        })
        .collect();

    // TLS virtual hosts grouped by certificate file, then plain ones not covered by any.
    let mut groups: Vec<(Option<PathBuf>, Vec<usize>)> = Vec::new();
    let mut by_file: HashMap<&Path, usize> = HashMap::new();
    for (i, v) in vhosts.iter().enumerate() {
        if !v.tls || managed[i].is_empty() {
            continue;
        }
        match v.cert_file.as_deref() {
            Some(f) => match by_file.get(f) {
                Some(&g) => groups[g].1.push(i),
                None => {
                    by_file.insert(f, groups.len());
                    groups.push((Some(f.to_path_buf()), vec![i]));
                }
            },
            None => groups.push((None, vec![i])),
        }
    }
    let covered: HashSet<&str> = groups
        .iter()
        .flat_map(|(_, m)| {
            m.iter()
                .flat_map(|&i| managed[i].iter().map(String::as_str))
        })
        .collect();
    let mut by_names: HashMap<&[String], usize> = HashMap::new();
    for (i, v) in vhosts.iter().enumerate() {
        if v.tls || managed[i].is_empty() {
            continue;
        }
        if managed[i].iter().all(|n| covered.contains(n.as_str())) {
            continue;
        }
        match by_names.get(managed[i].as_slice()) {
            Some(&g) => groups[g].1.push(i),
            None => {
                by_names.insert(&managed[i], groups.len());
                groups.push((None, vec![i]));
            }
        }
    }
    // The plain-HTTP virtual host on port 80 that answers for a name: the first naming it,
    // else the default server of port 80.
    let on_80 = |v: &Vhost| v.listens.iter().any(|l| l.port == 80 && !l.ssl);
    let mut http_by_name: HashMap<&str, usize> = HashMap::new();
    for (i, v) in vhosts.iter().enumerate() {
        if on_80(v) {
            for n in &managed[i] {
                http_by_name.entry(n.as_str()).or_insert(i);
            }
        }
    }
    let http_default = vhosts
        .iter()
        .position(|v| on_80(v) && v.listens.iter().any(|l| l.default));
    let http_vhost = |domain: &str| {
        http_by_name
            .get(domain)
            .copied()
            .or(http_default)
            .map(|i| &vhosts[i])
    };

    let mut proposals: Vec<Proposal> = Vec::new();
    for (_, members) in &groups {
        let first = &vhosts[members[0]];
        let mut domains: Vec<String> = Vec::new();
        for &i in members {
            for n in &managed[i] {
                if !domains.contains(n) {
                    domains.push(n.clone());
                }
            }
        }
        let mut notes = Vec::new();
        let mut webroot = BTreeMap::new();
        for d in &domains {
            match http_vhost(d) {
                Some(h) => match &h.validation {
                    Validation::Served(root) => {
                        webroot.insert(d.clone(), root.clone());
                    }
                    Validation::Blocked(why) => notes.push(format!(
                        "{d}: port 80 ({}) does not serve /.well-known/pki-validation/ from a \
                         document root: {why}; serve it from {VALIDATION_ROOT} there ({})",
                        h.at,
                        validation_hint(first.server)
                    )),
                    Validation::Unknown(why) => notes.push(format!(
                        "{d}: whether port 80 ({}) serves /.well-known/pki-validation/ from a \
                         document root is unknown: {why}; or serve it from {VALIDATION_ROOT} \
                         there ({})",
                        h.at,
                        validation_hint(first.server)
                    )),
                },
                None => notes.push(format!(
                    "{d}: no virtual host on port 80 serves this name (the CA fetches the \
                     validation file over HTTP on port 80); serve \
                     /.well-known/pki-validation/ from {VALIDATION_ROOT} there ({})",
                    validation_hint(first.server)
                )),
            }
        }
        for &i in members {
            for n in &vhosts[i].notes {
                if !notes.contains(n) {
                    notes.push(n.clone());
                }
            }
        }
        if !first.tls {
            notes.push(
                "no TLS server for these names yet: cert-agent installs at its default paths; \
                 add the TLS server (`cert-agent snippet NAME`)"
                    .into(),
            );
        }
        let (existing, existing_error) = match &first.cert_file {
            Some(c) if not_a_file(c) => (None, None),
            Some(c) => match read_existing(c, first.key_file.as_deref()) {
                Ok(e) => (Some(e), None),
                Err(e) => (None, Some(e)),
            },
            None => (None, None),
        };
        let links: Vec<String> = [&first.cert_file, &first.key_file, &first.chain_file]
            .into_iter()
            .flatten()
            .filter(|p| std::fs::symlink_metadata(p).is_ok_and(|m| m.file_type().is_symlink()))
            .map(|p| p.display().to_string())
            .collect();
        let variable: Vec<String> = [&first.cert_file, &first.key_file, &first.chain_file]
            .into_iter()
            .flatten()
            .map(|p| p.display().to_string())
            .filter(|p| p.contains('$'))
            .collect();
        let inline: Vec<String> = [&first.cert_file, &first.key_file, &first.chain_file]
            .into_iter()
            .flatten()
            .filter(|p| not_a_file(p))
            .map(|p| p.display().to_string())
            .collect();
        let keep_paths = links.is_empty() && variable.is_empty() && inline.is_empty();
        if !inline.is_empty() {
            notes.push(format!(
                "{} {} not a file (nginx's `data:`, `engine:` or `store:`): cert-agent \
                 installs into its own files; give these names a server with file paths \
                 (`cert-agent snippet NAME`)",
                inline
                    .iter()
                    .map(|p| p.chars().take(40).collect::<String>())
                    .collect::<Vec<_>>()
                    .join(", "),
                if inline.len() == 1 { "is" } else { "are" }
            ));
        } else if !variable.is_empty() {
            notes.push(format!(
                "{} depend(s) on a variable (one file per name at request time): cert-agent \
                 installs into its own files; give these names a server with fixed paths \
                 (`cert-agent snippet NAME`)",
                variable.join(", ")
            ));
        } else if !keep_paths {
            notes.push(format!(
                "{} {} symbolic link(s) (certbot's live/ directory?): cert-agent never writes \
                 through a link, so it installs into its own files; point the site at them \
                 (`cert-agent snippet NAME` prints the lines)",
                links.join(", "),
                if links.len() == 1 { "is a" } else { "are" }
            ));
        }
        let mut name = domains[0].clone();
        let mut k = 2;
        while proposals.iter().any(|p| p.name == name) {
            name = format!("{}-{k}", domains[0]);
            k += 1;
        }
        name.truncate(64);
        proposals.push(Proposal {
            name,
            server: first.server,
            domains,
            webroot,
            cert_file: first.cert_file.clone(),
            key_file: first.key_file.clone(),
            chain_file: first.chain_file.clone(),
            keep_paths,
            existing,
            existing_error,
            vhosts: members.iter().map(|&i| vhosts[i].at.clone()).collect(),
            notes,
        });
    }
    Discovery {
        vhosts,
        proposals,
        skipped,
    }
}

/// A certificate or key given in the configuration itself or by a crypto engine or store
/// (nginx's `data:`, `engine:`, `store:`), not by a file.
fn not_a_file(p: &Path) -> bool {
    let p = p.to_string_lossy();
    ["data:", "engine:", "store:"]
        .iter()
        .any(|prefix| p.starts_with(prefix))
}

/// The lines that serve the validation path from [`VALIDATION_ROOT`].
fn validation_hint(server: &str) -> String {
    if server == "apache" {
        format!(
            "`Alias /.well-known/pki-validation/ {VALIDATION_ROOT}/.well-known/pki-validation/` \
             before any Redirect or RewriteRule"
        )
    } else {
        format!("`location ^~ /.well-known/pki-validation/ {{ root {VALIDATION_ROOT}; }}`")
    }
}

/// Certificate files are a few kilobytes; a configuration may name anything.
const MAX_CERT_FILE_BYTES: u64 = 1 << 20;

/// A regular file of at most [`MAX_CERT_FILE_BYTES`] (never a device or a pipe).
fn read_small(path: &Path) -> Result<Vec<u8>, String> {
    use std::io::Read as _;
    let fail = |e: std::io::Error| format!("{}: {}", path.display(), crate::fsutil::io_text(&e));
    let meta = std::fs::metadata(path).map_err(fail)?;
    if !meta.is_file() {
        return Err(format!("{}: not a regular file", path.display()));
    }
    let mut bytes = Vec::new();
    std::fs::File::open(path)
        .and_then(|f| f.take(MAX_CERT_FILE_BYTES + 1).read_to_end(&mut bytes))
        .map_err(fail)?;
    if bytes.len() as u64 > MAX_CERT_FILE_BYTES {
        return Err(format!(
            "{}: larger than {MAX_CERT_FILE_BYTES} bytes",
            path.display()
        ));
    }
    Ok(bytes)
}

/// The certificate in `cert` and whether `key` on this host belongs to it.
fn read_existing(cert: &Path, key: Option<&Path>) -> Result<Existing, String> {
    let pem = read_small(cert)?;
    let info = CertificateInfo::from_pem(&pem).map_err(|e| format!("{}: {e}", cert.display()))?;
    let key_on_host = key
        .filter(|k| std::fs::metadata(k).is_ok_and(|m| m.is_file()))
        .and_then(|k| read_key_file(k).ok())
        .is_some_and(|k| info.matches_key(&k));
    Ok(Existing {
        self_signed: info.subject == info.issuer,
        subject: info.subject,
        issuer: info.issuer,
        names: info.dns_names,
        not_after: info.not_after,
        key_on_host,
    })
}

/// `text` as one comment line: control characters (a line break among them) shown as `?`.
fn comment(text: &str) -> String {
    text.chars()
        .map(|c| if c.is_control() { '?' } else { c })
        .collect()
}

fn toml_str(s: &str) -> String {
    toml::Value::String(s.to_owned()).to_string()
}

impl Proposal {
    /// The proposal as a configuration fragment (`[agent] include`): the site's existing
    /// paths, its document roots, comments saying where it came from.
    pub fn fragment(&self, product_id: Option<u64>, certificate_id: Option<u64>) -> String {
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
        match product_id {
            Some(p) => s.push_str(&format!("product_id = {p}\n")),
            None => s.push_str("# product_id: from [defaults], or see `cert-agent products`\n"),
        }
        s.push_str(&format!("server = {}\n", toml_str(self.server)));
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn certbot_lineages_are_not_written_through() {
        let dir = tempfile::tempdir().unwrap();
        let archive = dir.path().join("archive/www.example.com");
        let live = dir.path().join("live/www.example.com");
        std::fs::create_dir_all(&archive).unwrap();
        std::fs::create_dir_all(&live).unwrap();
        for f in ["fullchain", "privkey"] {
            std::fs::write(archive.join(format!("{f}1.pem")), "x").unwrap();
            std::os::unix::fs::symlink(
                archive.join(format!("{f}1.pem")),
                live.join(format!("{f}.pem")),
            )
            .unwrap();
        }
        let dump = format!(
            "# configuration file /etc/nginx/nginx.conf:\nhttp {{\n\
             server {{ listen 80; server_name www.example.com; root /var/www/html; }}\n\
             server {{ listen 443 ssl; server_name www.example.com; \
             ssl_certificate {l}/fullchain.pem; ssl_certificate_key {l}/privkey.pem; }}\n}}\n",
            l = live.display()
        );
        let d = nginx(&dump).unwrap();
        let p = &d.proposals[0];
        assert!(!p.keep_paths);
        assert!(
            p.notes.iter().any(|n| n.contains("symbolic link")),
            "{:?}",
            p.notes
        );
        let f = p.fragment(None, None);
        assert!(
            !f.contains("fullchain_path") && !f.contains("key_path"),
            "{f}"
        );
        let parsed: toml::Table = f.parse().unwrap();
        assert_eq!(
            parsed["certificate"][0]["webroot"].as_str(),
            Some("/var/www/html")
        );
    }

    #[test]
    fn certbots_port_80_server_redirects_before_any_location() {
        let dump = "# configuration file /etc/nginx/sites-enabled/www:\nhttp {\n\
            server {\n\
            \x20   if ($host = www.example.com) {\n\
            \x20       return 301 https://$host$request_uri;\n\
            \x20   } # managed by Certbot\n\
            \x20   listen 80;\n\
            \x20   server_name www.example.com example.com;\n\
            \x20   return 404; # managed by Certbot\n\
            }\n\
            server {\n\
            \x20   listen [::]:443 ssl http2; listen 443 ssl; listen 443 quic reuseport;\n\
            \x20   server_name WWW.Example.COM. example.com;\n\
            \x20   root /var/www/html;\n\
            \x20   ssl_certificate /c/www.pem; ssl_certificate_key /c/www.key;\n\
            }\n}\n";
        let d = nginx(dump).unwrap();
        assert_eq!(d.proposals.len(), 1, "{:#?}", d.proposals);
        let p = &d.proposals[0];
        assert_eq!(p.domains, ["www.example.com", "example.com"]);
        assert!(p.webroot.is_empty(), "{:?}", p.webroot);
        for name in ["www.example.com", "example.com"] {
            let note = p
                .notes
                .iter()
                .find(|n| n.starts_with(&format!("{name}: ")))
                .unwrap();
            assert!(
                note.contains("under `if ($host = www.example.com)` at /etc/nginx/sites-enabled/www:3")
                    && note.contains("redirects (`return 301 https://$host$request_uri`) at /etc/nginx/sites-enabled/www:4")
                    && note.contains("for the other names: answers (`return 404`) at /etc/nginx/sites-enabled/www:8")
                    && note.contains("before any location is chosen (move it into `location / { }`)"),
                "{note}"
            );
        }
    }

    #[test]
    fn certificates_that_are_not_files_go_to_cert_agents_own() {
        let dump = "# configuration file /etc/nginx/nginx.conf:\nhttp {\n\
            server { listen 443 ssl; server_name a.example.com; \
            ssl_certificate data:$cert_pem; ssl_certificate_key engine:pkcs11:id_45; }\n}\n";
        let d = nginx(dump).unwrap();
        let p = &d.proposals[0];
        assert!(!p.keep_paths);
        assert!(p.existing.is_none() && p.existing_error.is_none(), "{p:?}");
        assert!(
            p.notes
                .iter()
                .any(|n| n.contains("engine:pkcs11:id_45") && n.contains("not a file")),
            "{:?}",
            p.notes
        );
        let f = p.fragment(None, None);
        assert!(
            !f.contains("fullchain_path") && !f.contains("key_path"),
            "{f}"
        );
    }

    #[test]
    fn names_that_cannot_be_managed() {
        for n in [
            "_",
            "~^www\\d+\\.example\\.com$",
            "*.example.com",
            ".example.com",
            "www.example.*",
            "10.0.0.1",
            "::1",
            "localhost",
            "$host",
        ] {
            assert!(unmanageable(n).is_some(), "{n}");
        }
        assert!(unmanageable("www.example.com").is_none());
    }

    #[test]
    fn shared_certificate_files_make_one_proposal() {
        let dump = "# configuration file /etc/nginx/nginx.conf:\nhttp {\n\
            server { listen 80 default_server; server_name _; root /var/www/html; }\n\
            server { listen 443 ssl; server_name a.example.com; ssl_certificate /c/multi.pem; ssl_certificate_key /c/multi.key; }\n\
            server { listen 443 ssl; server_name b.example.com; ssl_certificate /c/multi.pem; ssl_certificate_key /c/multi.key; }\n\
            server { listen 80; server_name c.example.com; location / { proxy_pass http://app; } }\n\
            }\n";
        let d = nginx(dump).unwrap();
        assert_eq!(d.proposals.len(), 2, "{:#?}", d.proposals);
        let p = &d.proposals[0];
        assert_eq!(p.domains, ["a.example.com", "b.example.com"]);
        assert_eq!(
            p.webroot.get("a.example.com"),
            Some(&PathBuf::from("/var/www/html")),
            "served by the default server"
        );
        assert!(
            p.existing_error
                .as_deref()
                .is_some_and(|e| e.contains("/c/multi.pem"))
        );
        let c = &d.proposals[1];
        assert_eq!(c.domains, ["c.example.com"]);
        assert!(
            c.notes.iter().any(|n| n.contains("passed on")),
            "{:?}",
            c.notes
        );
        assert!(
            c.notes.iter().any(|n| n.contains("no TLS server")),
            "{:?}",
            c.notes
        );
        assert_eq!(d.skipped[0].name, "_");
        let f = p.fragment(Some(1101), Some(42));
        let parsed: toml::Table = f.parse().unwrap();
        assert_eq!(
            parsed["certificate"][0]["fullchain_path"].as_str(),
            Some("/c/multi.pem")
        );
        assert_eq!(
            parsed["certificate"][0]["webroot"].as_str(),
            Some("/var/www/html")
        );
    }
}
