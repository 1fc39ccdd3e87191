//! Virtual hosts into proposed certificates: the names each may manage, groups sharing one
//! certificate file, the port-80 virtual host that answers the CA for each name, the
//! certificate served today, and the notes on what needs doing.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::path::{Path, PathBuf};

use super::existing::read_existing;
use super::{Discovery, Existing, Proposal, Skipped, VALIDATION_ROOT, Validation, Vhost};
use crate::config::validate_domain;
use crate::dcv::DCV_URL_DIR;

/// Why a server name cannot be managed, or `None`.
pub(super) fn unmanageable(name: &str) -> Option<String> {
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
pub(super) fn propose(vhosts: Vec<Vhost>, http_port: u16) -> Discovery {
    let mut skipped = Vec::new();
    let managed = managed_names(&vhosts, &mut skipped);
    let groups = group(&vhosts, &managed);
    let port80 = Port80::new(&vhosts, &managed, http_port);
    let mut proposals: Vec<Proposal> = Vec::new();
    for members in &groups {
        let mut p = proposal(&vhosts, &managed, members, &port80, &proposals);
        if http_port != 80 {
            p.notes.push(format!(
                "document roots read from the plain-HTTP servers on port {http_port} \
                 (--http-port): the CA fetches the validation file on port 80, so its port 80 \
                 must reach this port (a port mapping, or a sandbox validating on \
                 {http_port}); no configuration key changes the port the CA fetches from"
            ));
        }
        proposals.push(p);
    }
    Discovery {
        vhosts,
        proposals,
        skipped,
    }
}

/// The names each virtual host may manage, lower case, in order, once; the others are added
/// to `skipped` (each name once) with the reason.
fn managed_names(vhosts: &[Vhost], skipped: &mut Vec<Skipped>) -> Vec<Vec<String>> {
    vhosts
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
        .collect()
}

/// The virtual hosts (indexes) of each proposal: TLS virtual hosts grouped by certificate
/// file, then plain ones not covered by any, grouped by their names.
fn group(vhosts: &[Vhost], managed: &[Vec<String>]) -> Vec<Vec<usize>> {
    let mut groups: Vec<Vec<usize>> = Vec::new();
    let mut by_file: HashMap<&Path, usize> = HashMap::new();
    for (i, v) in vhosts.iter().enumerate() {
        if !v.tls || managed[i].is_empty() {
            continue;
        }
        match v.cert_file.as_deref() {
            Some(f) => match by_file.get(f) {
                Some(&g) => groups[g].push(i),
                None => {
                    by_file.insert(f, groups.len());
                    groups.push(vec![i]);
                }
            },
            None => groups.push(vec![i]),
        }
    }
    let covered: HashSet<&str> = groups
        .iter()
        .flat_map(|m| {
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
            Some(&g) => groups[g].push(i),
            None => {
                by_names.insert(&managed[i], groups.len());
                groups.push(vec![i]);
            }
        }
    }
    groups
}

/// The plain-HTTP virtual host on port 80 (or the port `discover --http-port` names) that
/// answers for a name: the first naming it, else the default server of that port.
struct Port80<'v> {
    vhosts: &'v [Vhost],
    by_name: HashMap<&'v str, usize>,
    default: Option<usize>,
    port: u16,
}

impl<'v> Port80<'v> {
    fn new(vhosts: &'v [Vhost], managed: &'v [Vec<String>], port: u16) -> Self {
        let on_80 = |v: &Vhost| v.listens.iter().any(|l| l.port == port && !l.ssl);
        let mut by_name: HashMap<&str, usize> = HashMap::new();
        for (i, v) in vhosts.iter().enumerate() {
            if on_80(v) {
                for n in &managed[i] {
                    by_name.entry(n.as_str()).or_insert(i);
                }
            }
        }
        let default = vhosts
            .iter()
            .position(|v| on_80(v) && v.listens.iter().any(|l| l.default));
        Self {
            vhosts,
            by_name,
            default,
            port,
        }
    }

    fn answering(&self, domain: &str) -> Option<&'v Vhost> {
        self.by_name
            .get(domain)
            .copied()
            .or(self.default)
            .map(|i| &self.vhosts[i])
    }
}

/// The document root of each of `domains` whose port 80 serves the validation path from one,
/// and a note for each of the others. `server`: the web server, for the lines to add.
fn validation_roots(
    domains: &[String],
    port80: &Port80<'_>,
    server: &str,
) -> (BTreeMap<String, PathBuf>, Vec<String>) {
    let mut notes = Vec::new();
    let mut webroot = BTreeMap::new();
    let port = port80.port;
    for d in domains {
        match port80.answering(d) {
            Some(h) => match &h.validation {
                Validation::Served(root) => {
                    webroot.insert(d.clone(), root.clone());
                }
                Validation::Blocked(why) => notes.push(format!(
                    "{d}: port {port} ({}) does not serve {DCV_URL_DIR}/ from a \
                     document root: {why}; serve it from {VALIDATION_ROOT} there ({})",
                    h.at,
                    validation_hint(server)
                )),
                Validation::Unknown(why) => notes.push(format!(
                    "{d}: whether port {port} ({}) serves {DCV_URL_DIR}/ from a \
                     document root is unknown: {why}; or serve it from {VALIDATION_ROOT} \
                     there ({})",
                    h.at,
                    validation_hint(server)
                )),
            },
            None => notes.push(format!(
                "{d}: no virtual host on port {port} serves this name (the CA fetches the \
                 validation file over HTTP on port {port}); serve \
                 {DCV_URL_DIR}/ from {VALIDATION_ROOT} there ({})",
                validation_hint(server)
            )),
        }
    }
    (webroot, notes)
}

/// The certificate `v` serves today, or why it could not be read (neither when it names no
/// file).
fn existing_of(v: &Vhost) -> (Option<Existing>, Option<String>) {
    match &v.cert_file {
        Some(c) if not_a_file(c) => (None, None),
        Some(c) => match read_existing(c, v.key_file.as_deref()) {
            Ok(e) => (Some(e), None),
            Err(e) => (None, Some(e)),
        },
        None => (None, None),
    }
}

/// Whether cert-agent can write the certificate and key files of `v` in place; when not, a
/// note saying why is added to `notes` (files that are not files, depend on a variable, or
/// are symbolic links).
fn keeps_paths(v: &Vhost, notes: &mut Vec<String>) -> bool {
    let files = || {
        [&v.cert_file, &v.key_file, &v.chain_file]
            .into_iter()
            .flatten()
    };
    let links: Vec<String> = files()
        .filter(|p| std::fs::symlink_metadata(p).is_ok_and(|m| m.file_type().is_symlink()))
        .map(|p| p.display().to_string())
        .collect();
    let variable: Vec<String> = files()
        .map(|p| p.display().to_string())
        .filter(|p| p.contains('$'))
        .collect();
    let inline: Vec<String> = files()
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
    keep_paths
}

/// Whether the key file `v` names is the key of the certificate read for `v`: only then are
/// its paths kept. A site naming another file (`/etc/shadow`, another site's key) must not
/// make cert-agent write a key there; when not kept, a note says why.
fn key_is_the_sites(v: &Vhost, existing: Option<&Existing>, notes: &mut Vec<String>) -> bool {
    let Some(key) = &v.key_file else {
        return true;
    };
    let why = match (existing, &v.cert_file) {
        (Some(e), _) => match &e.key_problem {
            None => return true,
            Some(p) => p.clone(),
        },
        (None, Some(c)) => format!(
            "the certificate {} could not be read to check {} against it",
            c.display(),
            key.display()
        ),
        (None, None) => format!(
            "no certificate file is named to check {} against",
            key.display()
        ),
    };
    notes.push(format!(
        "the site's key file is not kept: {why}; cert-agent writes a key only where the \
         site's certificate shows it belongs, so it installs into its own files; point the \
         site at them (`cert-agent snippet NAME` prints the lines)"
    ));
    false
}

/// The proposal for the virtual hosts `members` (indexes into `vhosts`, the first one's
/// certificate files kept), named after its first domain unless `earlier` has that name.
fn proposal(
    vhosts: &[Vhost],
    managed: &[Vec<String>],
    members: &[usize],
    port80: &Port80<'_>,
    earlier: &[Proposal],
) -> Proposal {
    let first = &vhosts[members[0]];
    let mut domains: Vec<String> = Vec::new();
    for &i in members {
        for n in &managed[i] {
            if !domains.contains(n) {
                domains.push(n.clone());
            }
        }
    }
    let (webroot, mut notes) = validation_roots(&domains, port80, first.server);
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
    let (existing, existing_error) = existing_of(first);
    let keep_paths =
        keeps_paths(first, &mut notes) && key_is_the_sites(first, existing.as_ref(), &mut notes);
    let mut name = domains[0].clone();
    let mut k = 2;
    while earlier.iter().any(|p| p.name == name) {
        name = format!("{}-{k}", domains[0]);
        k += 1;
    }
    name.truncate(64);
    let verify_address = members
        .iter()
        .find_map(|&i| tls_address(&vhosts[i]))
        .filter(|a| a != DEFAULT_VERIFY_ADDRESS);
    Proposal {
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
        verify_address,
        configtest_command: None,
        reload_command: None,
        vhosts: members.iter().map(|&i| vhosts[i].at.clone()).collect(),
        from_macro: members
            .iter()
            .filter_map(|&i| vhosts[i].from_macro.clone())
            .collect(),
        notes,
    }
}

/// The configuration's default `verify_address`.
const DEFAULT_VERIFY_ADDRESS: &str = "127.0.0.1:443";

/// Where this host reaches the TLS server of `v` (`host:port`): its first TLS `listen` (nginx)
/// or its `<VirtualHost>` address (Apache, when it serves TLS), a wildcard address taken as
/// the loopback address of its family.
fn tls_address(v: &Vhost) -> Option<String> {
    if !v.tls {
        return None;
    }
    let l = v
        .listens
        .iter()
        .find(|l| l.ssl)
        .or_else(|| v.listens.first().filter(|_| v.server == "apache"))?;
    if l.port == 0 {
        return None;
    }
    let host = match l.address.as_deref() {
        None | Some("*" | "0.0.0.0" | "_default_") => "127.0.0.1",
        Some("[::]") => "[::1]",
        Some(h)
            if h.chars()
                .all(|c| c.is_ascii_alphanumeric() || ".-:[]".contains(c)) =>
        {
            h
        }
        Some(_) => return None,
    };
    Some(format!("{host}:{}", l.port))
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
            "`Alias {DCV_URL_DIR}/ {VALIDATION_ROOT}{DCV_URL_DIR}/` \
             before any Redirect or RewriteRule"
        )
    } else {
        format!("`location ^~ {DCV_URL_DIR}/ {{ root {VALIDATION_ROOT}; }}`")
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::discover::nginx;

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
        // The certificate cannot be read, so its key cannot be checked: not kept.
        assert!(!p.keep_paths);
        assert!(
            p.notes.iter().any(|n| n.contains(
                "the certificate /c/multi.pem could not be read to check /c/multi.key against it"
            )),
            "{:?}",
            p.notes
        );
        let f = p.fragment(Some(1101), Some(42));
        let parsed: toml::Table = f.parse().unwrap();
        assert!(
            parsed["certificate"][0].get("fullchain_path").is_none()
                && parsed["certificate"][0].get("key_path").is_none(),
            "{f}"
        );
        assert_eq!(
            parsed["certificate"][0]["webroot"].as_str(),
            Some("/var/www/html")
        );
    }

    /// A site's certificate and key in `dir`, and a dump whose TLS server names them with
    /// `key` as its `ssl_certificate_key`.
    fn site_naming_key(dir: &Path, key: &Path) -> (PathBuf, String) {
        let ck = rcgen::generate_simple_self_signed(vec!["www.example.com".to_owned()]).unwrap();
        let cert = dir.join("www.pem");
        std::fs::write(&cert, ck.cert.pem()).unwrap();
        std::fs::write(dir.join("www.key"), ck.signing_key.serialize_pem()).unwrap();
        let dump = format!(
            "# configuration file /etc/nginx/nginx.conf:\nhttp {{\n\
             server {{ listen 80; server_name www.example.com; root /var/www/html; }}\n\
             server {{ listen 443 ssl; server_name www.example.com; \
             ssl_certificate {}; ssl_certificate_key {}; }}\n}}\n",
            cert.display(),
            key.display()
        );
        (cert, dump)
    }

    #[test]
    fn a_key_path_is_kept_only_when_it_holds_the_certificates_key() {
        let dir = tempfile::tempdir().unwrap();
        let own = dir.path().join("www.key");
        let (cert, dump) = site_naming_key(dir.path(), &own);
        let p = &nginx(&dump).unwrap().proposals[0];
        assert!(p.keep_paths, "{:?}", p.notes);
        assert!(p.existing.as_ref().is_some_and(|e| e.key_on_host));
        let f = p.fragment(None, None);
        assert!(
            f.contains(&format!("key_path = \"{}\"", own.display())),
            "{f}"
        );
        assert!(
            f.contains(&format!("fullchain_path = \"{}\"", cert.display())),
            "{f}"
        );

        // Another site's key: not kept, and the fragment says why.
        let other = dir.path().join("other.key");
        let kp = rcgen::KeyPair::generate().unwrap();
        std::fs::write(&other, kp.serialize_pem()).unwrap();
        let (_, dump) = site_naming_key(dir.path(), &other);
        let p = &nginx(&dump).unwrap().proposals[0];
        assert!(!p.keep_paths);
        assert!(p.existing.as_ref().is_some_and(|e| !e.key_on_host));
        let f = p.fragment(None, None);
        assert!(
            !f.contains("key_path") && !f.contains("fullchain_path"),
            "{f}"
        );
        assert!(
            f.contains(&format!(
                "# To do: the site's key file is not kept: {} is not the key of the certificate",
                other.display()
            )),
            "{f}"
        );
        assert!(f.contains("Installed at the default paths"), "{f}");
    }

    #[test]
    fn a_key_path_that_cannot_be_read_or_is_no_key_is_not_kept() {
        let dir = tempfile::tempdir().unwrap();
        let missing = dir.path().join("absent.key");
        // /etc/shadow: unreadable for a user, not a key for root; a directory; a certificate.
        for (key, why) in [
            (
                missing.clone(),
                format!("{} cannot be read: no such file", missing.display()),
            ),
            (PathBuf::from("/etc/shadow"), "/etc/shadow ".to_owned()),
            (
                dir.path().to_path_buf(),
                format!("{} is not a regular file", dir.path().display()),
            ),
            (
                dir.path().join("www.pem"),
                format!("{}/www.pem is not a private key", dir.path().display()),
            ),
        ] {
            let (_, dump) = site_naming_key(dir.path(), &key);
            let p = &nginx(&dump).unwrap().proposals[0];
            assert!(!p.keep_paths, "{key:?}");
            let note = p.notes.iter().find(|n| n.contains("key file is not kept"));
            assert!(
                note.is_some_and(|n| n.contains(&why)),
                "{why}: {:?}",
                p.notes
            );
            let f = p.fragment(None, None);
            assert!(!f.contains("key_path"), "{f}");
            assert!(!f.contains("root:"), "{f}");
        }
    }

    /// Guards `discover --http-port`: a trial's nginx serves plain HTTP on 8080 only; read as
    /// for port 80 no server answers the CA (the fallback root, a note naming port 80), read
    /// for 8080 its document root is proposed and the note says how the CA reaches it.
    #[test]
    fn the_validation_port_picks_the_document_root_of_the_server_listening_there() {
        let dump = "# configuration file /tmp/trial/nginx.conf:\nhttp {\n\
             server { listen 8080; server_name www.example.com; root /srv/trial; }\n\
             server { listen 8443 ssl; server_name www.example.com; \
             ssl_certificate /srv/trial/fullchain.pem; ssl_certificate_key /srv/trial/key.pem; }\n}\n";
        let at_80 = &nginx(dump).unwrap().proposals[0];
        assert!(at_80.webroot.is_empty(), "{:?}", at_80.webroot);
        assert!(
            at_80
                .notes
                .iter()
                .any(|n| n.contains("no virtual host on port 80 serves this name")),
            "{:?}",
            at_80.notes
        );
        let found = crate::discover::read(crate::discover::Server::Nginx, dump, 8080).unwrap();
        let p = &found.proposals[0];
        assert_eq!(
            p.webroot.get("www.example.com").map(|r| r.as_path()),
            Some(Path::new("/srv/trial"))
        );
        assert!(
            p.notes
                .iter()
                .any(|n| n.contains("port 8080 (--http-port)")),
            "{:?}",
            p.notes
        );
        let parsed: toml::Table = p.fragment(None, None).parse().unwrap();
        assert_eq!(
            parsed["certificate"][0]["webroot"].as_str(),
            Some("/srv/trial")
        );
    }
}
