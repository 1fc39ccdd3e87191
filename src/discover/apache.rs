//! Apache: `apachectl -S` names every virtual host with its file and line; each
//! `<VirtualHost>` block is then read from that file.

use std::path::{Path, PathBuf};

use super::{At, DiscoverError, Listen, Validation, Vhost};
use crate::dcv::DCV_URL_DIR;

/// The main server's document root, `Main DocumentRoot: "DIR"` in `apachectl -S`: a virtual
/// host without `DocumentRoot` of its own serves from there.
pub(super) fn main_document_root(dump: &str) -> Option<PathBuf> {
    dump.lines().find_map(|line| {
        let rest = line.trim().strip_prefix("Main DocumentRoot:")?.trim();
        let dir = rest
            .strip_prefix('"')
            .and_then(|r| r.strip_suffix('"'))
            .unwrap_or(rest);
        (!dir.is_empty()).then(|| PathBuf::from(dir))
    })
}

/// One line of a configuration file: directive name (lower case), arguments, line number.
struct Line {
    name: String,
    args: Vec<String>,
    line: usize,
}

/// The directives of the `<VirtualHost>` block that `lines` (numbered lines of a file or a
/// macro's body) start with; `at`: where it is, for errors.
fn block_lines<'t>(
    lines: impl Iterator<Item = (usize, &'t str)>,
    at: &At,
) -> Result<Vec<Line>, DiscoverError> {
    let err = |line: usize, message: String| DiscoverError::Parse {
        at: At {
            file: at.file.clone(),
            line,
        },
        message,
    };
    let mut out = Vec::new();
    let mut pending = String::new();
    let mut start = 0;
    let mut opened = false;
    for (n, raw) in lines {
        if pending.is_empty() {
            start = n;
        }
        if let Some(cont) = raw.strip_suffix('\\') {
            pending.push_str(cont);
            pending.push(' ');
            continue;
        }
        pending.push_str(raw);
        let whole = std::mem::take(&mut pending);
        let t = whole.trim();
        if t.is_empty() || t.starts_with('#') {
            continue;
        }
        let words = split_words(t);
        let Some(first) = words.first() else { continue };
        let name = first.to_ascii_lowercase();
        if !opened {
            if name != "<virtualhost" && !name.starts_with("<virtualhost") {
                return Err(err(
                    n,
                    format!("expected <VirtualHost> here, found {first:?}"),
                ));
            }
            opened = true;
            out.push(Line {
                name: "<virtualhost".into(),
                args: words[1..]
                    .iter()
                    .map(|w| w.trim_end_matches('>').to_owned())
                    .filter(|w| !w.is_empty())
                    .collect(),
                line: start,
            });
            continue;
        }
        if name == "</virtualhost>" {
            return Ok(out);
        }
        out.push(Line {
            name,
            args: words[1..].to_vec(),
            line: start,
        });
    }
    Err(err(
        at.line,
        "<VirtualHost> is not closed by </VirtualHost>".into(),
    ))
}

/// Words of a directive line; double-quoted words keep their spaces (`\"` in them is `"`).
pub(super) fn split_words(t: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut cur = String::new();
    let mut quoted = false;
    let mut has = false;
    let mut chars = t.chars().peekable();
    while let Some(c) = chars.next() {
        match c {
            '\\' if quoted && matches!(chars.peek(), Some('"' | '\\')) => {
                if let Some(next) = chars.next() {
                    cur.push(next);
                }
            }
            '"' => {
                quoted = !quoted;
                has = true;
            }
            c if c.is_whitespace() && !quoted => {
                if has {
                    out.push(std::mem::take(&mut cur));
                    has = false;
                }
            }
            c => {
                cur.push(c);
                has = true;
            }
        }
    }
    if has {
        out.push(cur);
    }
    out
}

/// The virtual host at `at`, read from `text` (the file's content); `main_root`: the main
/// server's document root, which a block without `DocumentRoot` inherits.
pub(super) fn vhost(text: &str, at: &At, main_root: Option<&Path>) -> Result<Vhost, DiscoverError> {
    let lines = text
        .lines()
        .enumerate()
        .skip(at.line.saturating_sub(1))
        .map(|(i, l)| (i + 1, l));
    vhost_from(lines, at, main_root)
}

/// The virtual host whose `<VirtualHost>` block `lines` start with (numbered lines of a file
/// or of a macro's body); `at`: where the block is.
pub(super) fn vhost_from<'t>(
    lines: impl Iterator<Item = (usize, &'t str)>,
    at: &At,
    main_root: Option<&Path>,
) -> Result<Vhost, DiscoverError> {
    let lines = block_lines(lines, at)?;
    let mut v = Vhost {
        at: at.clone(),
        server: "apache",
        ..Vhost::default()
    };
    let seen = read_block(&lines, at, &mut v);
    tls_files(&mut v, at, seen.engine);
    if v.root.is_none() {
        v.root = main_root.map(Path::to_path_buf);
    }
    v.validation = validation(&v, at, seen);
    Ok(v)
}

/// What the directives of a block say about the validation path, beyond the [`Vhost`]'s
/// fields.
#[derive(Default)]
struct Seen {
    /// The first redirect (or `ProxyPass /`) outside `<Location>` and `<If>`, described.
    redirect: Option<String>,
    /// A `<Location>`, `<If>`, `RewriteCond` or `ProxyPass ... !` that names `well-known`.
    exception: bool,
    /// `Alias` of the validation path (or `/.well-known`): its directory and line.
    alias: Option<(String, usize)>,
    /// The line of `SSLEngine`.
    engine: Option<usize>,
}

/// Reads the directives of `lines` into `v`; what else they say about the validation path.
fn read_block(lines: &[Line], at: &At, v: &mut Vhost) -> Seen {
    let mut seen = Seen::default();
    let mut depth_location = 0usize;
    for l in lines {
        let here = At {
            file: at.file.clone(),
            line: l.line,
        };
        let first = l.args.first().cloned().unwrap_or_default();
        match l.name.as_str() {
            "<virtualhost" => {
                for a in &l.args {
                    let port = a
                        .rsplit_once(':')
                        .and_then(|(_, p)| p.parse().ok())
                        .unwrap_or(80);
                    v.listens.push(Listen {
                        address: a.rsplit_once(':').map(|(h, _)| h.to_owned()),
                        port,
                        ssl: false,
                        default: a.starts_with("_default_"),
                    });
                }
            }
            n if n.starts_with("<location")
                || n.starts_with("<if")
                    && !n.starts_with("<ifmodule")
                    && !n.starts_with("<ifdefine")
                    && !n.starts_with("<ifversion") =>
            {
                depth_location += 1;
                if l.args.iter().any(|a| a.contains("well-known")) {
                    seen.exception = true;
                }
            }
            n if n.starts_with("</location") || n == "</if>" => {
                depth_location = depth_location.saturating_sub(1);
            }
            _ if depth_location > 0 => {}
            "servername" => {
                // `ServerName name:port`.
                let name = first.rsplit_once(':').map_or(first.as_str(), |(n, p)| {
                    if p.chars().all(|c| c.is_ascii_digit()) {
                        n
                    } else {
                        first.as_str()
                    }
                });
                v.names.insert(0, name.to_owned());
            }
            "serveralias" => v.names.extend(l.args.iter().cloned()),
            "documentroot" => v.root = Some(PathBuf::from(&first)),
            "sslengine" => {
                v.tls = first.eq_ignore_ascii_case("on");
                seen.engine = Some(l.line);
            }
            "sslcertificatefile" => v.cert_file = Some(PathBuf::from(&first)),
            "sslcertificatekeyfile" => v.key_file = Some(PathBuf::from(&first)),
            "sslcertificatechainfile" => v.chain_file = Some(PathBuf::from(&first)),
            _ => validation_directive(l, &first, &here, &mut seen),
        }
    }
    seen
}

/// A directive that redirects, passes on, or exempts or maps the validation path.
fn validation_directive(l: &Line, first: &str, here: &At, seen: &mut Seen) {
    match l.name.as_str() {
        "redirect" | "redirectmatch" | "redirectpermanent" | "redirecttemporary" => {
            seen.redirect
                .get_or_insert(format!("{} at {here}", directive_name(&l.name)));
        }
        "rewriterule" => {
            let flags = l
                .args
                .get(2)
                .map(|f| f.to_ascii_uppercase())
                .unwrap_or_default();
            if flags.contains("R=") || flags.contains("[R") || flags.contains(",R") {
                seen.redirect
                    .get_or_insert(format!("RewriteRule at {here} redirects"));
            }
        }
        "rewritecond" if l.args.iter().any(|a| a.contains("well-known")) => seen.exception = true,
        "proxypass" => {
            let target = l.args.get(1).map(String::as_str).unwrap_or_default();
            if first.contains("well-known") && target == "!" {
                seen.exception = true;
            } else if first == "/" {
                seen.redirect
                    .get_or_insert(format!("ProxyPass / at {here} passes requests on"));
            }
        }
        "alias"
            if first.trim_end_matches('/').ends_with(DCV_URL_DIR)
                || first.trim_end_matches('/').ends_with("/.well-known") =>
        {
            seen.alias = Some((l.args.get(1).cloned().unwrap_or_default(), l.line));
        }
        _ => {}
    }
}

/// The TLS side of `v`: its listens marked, notes for the files the block does not name, or
/// (plain HTTP) its certificate files cleared. `engine`: the line of `SSLEngine`.
fn tls_files(v: &mut Vhost, at: &At, engine: Option<usize>) {
    // mod_ssl merges the main server's SSL directives into each virtual host: what the
    // block does not set may come from anywhere in the server configuration, which is not
    // read here. Said, not guessed.
    if v.tls {
        for l in &mut v.listens {
            l.ssl = true;
        }
        let engine_at = format!("{}:{}", at.file, engine.unwrap_or(at.line));
        if v.cert_file.is_none() {
            v.notes.push(format!(
                "`SSLEngine on` at {engine_at} but no SSLCertificateFile in the \
                 <VirtualHost> block: the certificate is inherited from the server \
                 configuration (not read by discover); check by hand which files it serves, \
                 and name them in the block"
            ));
        } else if v.key_file.is_none() {
            v.notes.push(format!(
                "no SSLCertificateKeyFile in the <VirtualHost> block at {}: the key is in the \
                 certificate file or inherited from the server configuration (not read by \
                 discover); check by hand, and name the key file in the block",
                at
            ));
        }
    } else {
        if engine.is_none() && v.listens.iter().any(|l| l.port == 443) {
            v.notes.push(format!(
                "the <VirtualHost> at {at} listens on port 443 without `SSLEngine on` in its \
                 block: taken as plain HTTP; if the server configuration sets SSLEngine and \
                 the certificate for every virtual host, check its files by hand"
            ));
        }
        v.cert_file = None;
        v.key_file = None;
        v.chain_file = None;
    }
}

/// Whether the validation path of `v` is served from a document root.
fn validation(v: &Vhost, at: &At, seen: Seen) -> Validation {
    match (seen.alias, seen.redirect) {
        (Some((dir, line)), _) => {
            let t = dir.trim_end_matches('/');
            match t
                .strip_suffix(DCV_URL_DIR)
                .or_else(|| t.strip_suffix("/.well-known"))
            {
                Some(base) => Validation::Served(PathBuf::from(base)),
                None => Validation::Blocked(format!(
                    "Alias at {}:{line} maps the validation path to {dir}: point it at \
                     DIR{DCV_URL_DIR} so that DIR can be the webroot",
                    at.file
                )),
            }
        }
        (None, Some(why)) if !seen.exception => Validation::Blocked(why),
        _ => match &v.root {
            Some(r) if r.is_absolute() && !r.to_string_lossy().contains('$') => {
                Validation::Served(r.clone())
            }
            Some(r) => Validation::Blocked(format!(
                "DocumentRoot {} is not an absolute path",
                r.display()
            )),
            None => Validation::Blocked(
                "no DocumentRoot in this virtual host, and none for the main server".into(),
            ),
        },
    }
}

fn directive_name(lower: &str) -> &'static str {
    match lower {
        "redirectmatch" => "RedirectMatch",
        "redirectpermanent" => "RedirectPermanent",
        "redirecttemporary" => "RedirectTemporary",
        _ => "Redirect",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const S: &str = "VirtualHost configuration:\n\
*:443                  is a NameVirtualHost\n\
         default server www.example.com (/etc/apache2/sites-enabled/default-ssl.conf:2)\n\
         port 443 namevhost www.example.com (/etc/apache2/sites-enabled/default-ssl.conf:2)\n\
                 alias example.com\n\
*:80                   www.example.com (/etc/apache2/sites-enabled/000-default.conf:1)\n\
ServerRoot: \"/etc/apache2\"\n\
Main DocumentRoot: \"/var/www/html\"\n\
Main ErrorLog: \"/var/log/apache2/error.log\"\n";

    #[test]
    fn the_main_document_root() {
        assert_eq!(main_document_root(S), Some(PathBuf::from("/var/www/html")));
        assert_eq!(main_document_root("garbage"), None);
    }

    fn at(file: &str) -> At {
        At {
            file: file.into(),
            line: 1,
        }
    }

    #[test]
    fn a_vhost_without_document_root_serves_the_main_one() {
        let text = "<VirtualHost *:80>\nServerName a.example.com\n</VirtualHost>\n";
        let main = Path::new("/var/www/html");
        let v = vhost(text, &at("/a.conf"), Some(main)).unwrap();
        assert_eq!(v.root.as_deref(), Some(main));
        assert_eq!(v.validation, Validation::Served(main.into()));
        let v = vhost(text, &at("/a.conf"), None).unwrap();
        assert!(matches!(v.validation, Validation::Blocked(_)), "{v:?}");
        let own = "<VirtualHost *:80>\nDocumentRoot /srv/a\n</VirtualHost>\n";
        let v = vhost(own, &at("/a.conf"), Some(main)).unwrap();
        assert_eq!(v.validation, Validation::Served("/srv/a".into()));
    }

    #[test]
    fn ssl_directives_the_block_does_not_set_are_said_not_guessed() {
        let text =
            "<VirtualHost _default_:443>\nServerName a.example.com\nSSLEngine on\n</VirtualHost>\n";
        let v = vhost(text, &at("/etc/httpd/conf.d/ssl.conf"), None).unwrap();
        assert!(v.tls);
        assert_eq!(v.cert_file, None);
        assert!(
            v.notes
                .iter()
                .any(|n| n.contains("/etc/httpd/conf.d/ssl.conf:3")
                    && n.contains("no SSLCertificateFile")
                    && n.contains("inherited")),
            "{:?}",
            v.notes
        );
        let text = "<VirtualHost *:443>\nSSLEngine on\nSSLCertificateFile /c.pem\n</VirtualHost>\n";
        let v = vhost(text, &at("/b.conf"), None).unwrap();
        assert!(
            v.notes
                .iter()
                .any(|n| n.contains("no SSLCertificateKeyFile")),
            "{:?}",
            v.notes
        );
        let text = "<VirtualHost *:443>\nServerName c.example.com\n</VirtualHost>\n";
        let v = vhost(text, &at("/c.conf"), None).unwrap();
        assert!(!v.tls);
        assert!(
            v.notes.iter().any(|n| n.contains("without `SSLEngine on`")),
            "{:?}",
            v.notes
        );
        let complete = "<VirtualHost *:443>\nSSLEngine on\nSSLCertificateFile /c.pem\nSSLCertificateKeyFile /c.key\n</VirtualHost>\n";
        assert!(
            vhost(complete, &at("/d.conf"), None)
                .unwrap()
                .notes
                .is_empty()
        );
    }

    #[test]
    fn a_vhost_block() {
        let text = "# x\n<IfModule mod_ssl.c>\n<VirtualHost *:443 [::]:443>\n  ServerName www.example.com:443\n  ServerAlias example.com \\\n    shop.example.com\n  DocumentRoot \"/var/www/my site\"\n  SSLEngine on\n  SSLCertificateFile /etc/ssl/www.crt\n  SSLCertificateKeyFile /etc/ssl/www.key\n  <Location /x>\n    Redirect / https://elsewhere/\n  </Location>\n</VirtualHost>\n</IfModule>\n";
        let v = vhost(
            text,
            &At {
                file: "/f.conf".into(),
                line: 3,
            },
            None,
        )
        .unwrap();
        assert_eq!(
            v.names,
            ["www.example.com", "example.com", "shop.example.com"]
        );
        assert!(v.tls);
        assert_eq!(v.listens.len(), 2);
        assert_eq!(v.validation, Validation::Served("/var/www/my site".into()));
        let redirect = "<VirtualHost *:80>\nServerName a.example.com\nDocumentRoot /srv\nRedirect permanent / https://a.example.com/\n</VirtualHost>\n";
        let v = vhost(
            redirect,
            &At {
                file: "/r.conf".into(),
                line: 1,
            },
            None,
        )
        .unwrap();
        assert!(
            matches!(v.validation, Validation::Blocked(ref w) if w.contains("/r.conf:4")),
            "{v:?}"
        );
        let e = vhost(
            "<VirtualHost *:80>\nServerName a\n",
            &At {
                file: "/u.conf".into(),
                line: 1,
            },
            None,
        )
        .unwrap_err();
        assert!(e.to_string().contains("/u.conf line 1"), "{e}");
        let e = vhost(
            "x\n",
            &At {
                file: "/u.conf".into(),
                line: 5,
            },
            None,
        )
        .unwrap_err();
        assert!(e.to_string().contains("/u.conf line 5"), "{e}");
    }
}
