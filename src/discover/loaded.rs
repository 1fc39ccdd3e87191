//! The files a web server's configuration names for TLS, wherever they are, for `retire`:
//! nginx's from its `nginx -T` dump ([`super::nginx`]); Apache's from the files its
//! `apachectl -S` listing names, its main configuration file under `ServerRoot` and every
//! file those include — global and repeated `SSLCertificateFile` lines and virtual hosts
//! without `SSLEngine on` among them, a relative path taken from `ServerRoot` as Apache does.

use std::path::{Path, PathBuf};

use super::apache_listing::listed;
use super::{DiscoverError, NamedFile, Server};

/// Apache's directives that name a TLS file.
const APACHE_FILE_DIRECTIVES: [&str; 7] = [
    "sslcertificatefile",
    "sslcertificatekeyfile",
    "sslcertificatechainfile",
    "sslcacertificatefile",
    "sslcarevocationfile",
    "sslproxymachinecertificatefile",
    "sslproxycacertificatefile",
];

/// Files read at most (a configuration including itself in a loop stops here).
const FILE_BUDGET: usize = 20_000;

/// Every file the report `text` of `server` names for TLS, with where.
pub fn loaded_files(server: Server, text: &str) -> Result<Vec<NamedFile>, DiscoverError> {
    loaded_files_with(server, text, None)
}

/// [`loaded_files`], Apache's main configuration file being `apache_main` (its `-f`; a
/// relative path is taken from `ServerRoot`) instead of the usual names under `ServerRoot`.
pub(crate) fn loaded_files_with(
    server: Server,
    text: &str,
    apache_main: Option<&str>,
) -> Result<Vec<NamedFile>, DiscoverError> {
    match server {
        Server::Nginx => super::nginx::loaded_files(text),
        Server::Apache => apache_loaded(text, apache_main),
    }
}

/// `ServerRoot: "DIR"` of an `apachectl -S` listing.
fn server_root(listing: &str) -> Option<PathBuf> {
    listing.lines().find_map(|line| {
        let rest = line.trim().strip_prefix("ServerRoot:")?.trim();
        Some(PathBuf::from(rest.trim_matches('"')))
    })
}

fn apache_loaded(listing: &str, main: Option<&str>) -> Result<Vec<NamedFile>, DiscoverError> {
    let root = server_root(listing).unwrap_or_else(|| PathBuf::from("/etc/apache2"));
    let mut start: Vec<PathBuf> = match main {
        Some(main) => vec![root.join(main)],
        None => ["apache2.conf", "httpd.conf", "conf/httpd.conf"]
            .iter()
            .map(|f| root.join(f))
            .filter(|f| f.is_file())
            .collect(),
    };
    for l in listed(listing)? {
        start.push(root.join(&l.origin.source().file));
    }
    let mut reader = Reader {
        root,
        seen: Vec::new(),
        out: Vec::new(),
    };
    for f in start {
        reader.file(&f, 0);
    }
    Ok(reader.out)
}

struct Reader {
    root: PathBuf,
    seen: Vec<PathBuf>,
    out: Vec<NamedFile>,
}

impl Reader {
    fn file(&mut self, file: &Path, depth: usize) {
        if depth > 16 || self.seen.len() >= FILE_BUDGET || self.seen.iter().any(|s| s == file) {
            return;
        }
        self.seen.push(file.to_path_buf());
        let Ok(text) = std::fs::read_to_string(file) else {
            return;
        };
        for (i, line) in text.lines().enumerate() {
            let mut words = split_words(line);
            if words.is_empty() {
                continue;
            }
            let name = words.remove(0).to_ascii_lowercase();
            let at = super::At {
                file: file.display().to_string(),
                line: i + 1,
            };
            if APACHE_FILE_DIRECTIVES.contains(&name.as_str()) {
                for w in words {
                    self.out.push(NamedFile::new(&self.root, &w, at.clone()));
                }
            } else if name == "include" || name == "includeoptional" {
                for w in words {
                    for f in self.matching(&w) {
                        self.file(&f, depth + 1);
                    }
                }
            }
        }
    }

    /// The files an `Include` of `pattern` reads: a file, every file of a directory, or the
    /// names a `*`/`?` in the last part matches, in order.
    fn matching(&self, pattern: &str) -> Vec<PathBuf> {
        let full = self.root.join(pattern);
        if full.is_dir() {
            return sorted_files(&full, |_| true);
        }
        let name = full.file_name().map(|n| n.to_string_lossy().into_owned());
        match (full.parent(), name) {
            (Some(dir), Some(name)) if name.contains(['*', '?']) => {
                sorted_files(dir, |f| crate::fsutil::glob_matches(name.as_bytes(), f))
            }
            _ => vec![full],
        }
    }
}

fn sorted_files(dir: &Path, keep: impl Fn(&[u8]) -> bool) -> Vec<PathBuf> {
    let mut out: Vec<PathBuf> = std::fs::read_dir(dir)
        .map(|entries| {
            entries
                .filter_map(Result::ok)
                .filter(|e| keep(e.file_name().as_encoded_bytes()))
                .map(|e| e.path())
                .filter(|p| p.is_file())
                .collect()
        })
        .unwrap_or_default();
    out.sort();
    out
}

/// The words of a configuration line (quotes removed; nothing for a comment).
fn split_words(line: &str) -> Vec<String> {
    let t = line.trim();
    if t.starts_with('#') || t.starts_with('<') {
        return Vec::new();
    }
    let mut words = Vec::new();
    let mut rest = t;
    while !rest.is_empty() {
        if let Some(q) = rest.strip_prefix('"') {
            let end = q.find('"').unwrap_or(q.len());
            words.push(q[..end].to_owned());
            rest = q.get(end + 1..).unwrap_or("").trim_start();
        } else {
            let end = rest.find(char::is_whitespace).unwrap_or(rest.len());
            words.push(rest[..end].to_owned());
            rest = rest[end..].trim_start();
        }
    }
    words
}

#[cfg(test)]
mod tests {
    use super::*;

    fn paths(found: &[NamedFile]) -> Vec<String> {
        found.iter().map(|f| f.path.display().to_string()).collect()
    }

    /// What nginx loads besides the first pair of an `http` server: the second (ECDSA) pair,
    /// `stream {}` and `mail {}` servers, `ssl_trusted_certificate`, a relative path (from
    /// the main file's directory) and a variable.
    #[test]
    fn nginx_names_every_tls_file_in_every_block() {
        let dump = "# configuration file /srv/ng/nginx.conf:\n\
            http {\n  server {\n    listen 443 ssl;\n    ssl_certificate /c/rsa.pem;\n    \
            ssl_certificate_key /c/rsa.key;\n    ssl_certificate /c/ec.pem;\n    \
            ssl_certificate_key /c/ec.key;\n    ssl_trusted_certificate /c/trust.pem;\n  }\n  \
            include /srv/ng/sites/*.conf;\n}\n\
            stream {\n  server {\n    listen 993 ssl;\n    ssl_certificate rel/stream.pem;\n  }\n}\n\
            mail {\n  server {\n    ssl_certificate_key /c/mail.key;\n  }\n}\n\
            # configuration file /srv/ng/sites/a.conf:\n\
            server {\n  ssl_certificate /c/$ssl_server_name.pem;\n  ssl_protocols TLSv1.3;\n}\n";
        let found = loaded_files(Server::Nginx, dump).unwrap();
        assert_eq!(
            paths(&found),
            [
                "/c/rsa.pem",
                "/c/rsa.key",
                "/c/ec.pem",
                "/c/ec.key",
                "/c/trust.pem",
                "/srv/ng/rel/stream.pem",
                "/c/mail.key",
                "/c/*.pem"
            ]
        );
        assert_eq!(found[1].at.line, 5);
        assert!(found[7].names(Path::new("/c/www.example.com.pem")));
        assert!(!found[7].names(Path::new("/c/sub/www.pem")));
        assert!(found[5].names(Path::new("/srv/ng/rel/stream.pem")));
    }

    /// A dump naming its main file by a relative path (found by the fuzz target): every file
    /// named for TLS is still an absolute path, taken from the root.
    #[test]
    fn a_relative_main_file_still_names_absolute_paths() {
        let dump = "# configuration file r/sv/ng/nginx.conf:\n\
            stream {\n  server {\n    ssl_certificate rel/stream.pem;\n  }\n}\n";
        let found = loaded_files(Server::Nginx, dump).unwrap();
        assert_eq!(found.len(), 1);
        assert_eq!(found[0].path, Path::new("/r/sv/ng/rel/stream.pem"));
    }

    /// Apache's global and repeated `SSLCertificateFile`, a virtual host without `SSLEngine
    /// on`, a relative path from `ServerRoot`, and files reached through `Include`.
    #[test]
    fn apache_names_global_repeated_and_included_files() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path();
        std::fs::create_dir_all(root.join("sites")).unwrap();
        std::fs::create_dir_all(root.join("mods")).unwrap();
        std::fs::write(
            root.join("apache2.conf"),
            "ServerRoot \"/x\"\nSSLCertificateFile /g/global.pem\nInclude mods/*.conf\n\
             IncludeOptional sites/\n",
        )
        .unwrap();
        std::fs::write(
            root.join("mods/ssl.conf"),
            "# SSLCertificateFile /not/this.pem\nSSLCACertificateFile \"ca/trust.pem\"\n",
        )
        .unwrap();
        std::fs::write(
            root.join("sites/site.conf"),
            "<VirtualHost *:443>\n  ServerName www.example.com\n  SSLCertificateFile /v/rsa.pem\n  \
             SSLCertificateKeyFile /v/rsa.key\n  SSLCertificateFile /v/ec.pem\n  \
             SSLCertificateKeyFile /v/ec.key\n</VirtualHost>\n",
        )
        .unwrap();
        let listing = format!(
            "VirtualHost configuration:\n*:443 www.example.com ({}/sites/site.conf:1)\n\
             ServerRoot: \"{}\"\n",
            root.display(),
            root.display()
        );
        let found = loaded_files(Server::Apache, &listing).unwrap();
        let ps = paths(&found);
        for want in [
            "/g/global.pem".to_owned(),
            format!("{}/ca/trust.pem", root.display()),
            "/v/rsa.pem".into(),
            "/v/rsa.key".into(),
            "/v/ec.pem".into(),
            "/v/ec.key".into(),
        ] {
            assert!(ps.contains(&want), "{want} in {ps:?}");
        }
        assert!(!ps.iter().any(|p| p.contains("not/this")), "{ps:?}");
        assert_eq!(ps.len(), 6, "each file once: {ps:?}");
    }
}
