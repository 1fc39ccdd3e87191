//! `nginx -T`: the dump of every configuration file nginx read ("# configuration file PATH:"
//! before each), parsed into directives, with `include` followed through the dump from the
//! first file, and every `server` of the `http` block turned into a [`Vhost`].

use std::collections::HashMap;
use std::path::{Path, PathBuf};

use super::{At, DiscoverError, Listen, Validation, Vhost};

/// One directive: its name and arguments (quotes removed), where it is, and its block.
#[derive(Debug, Clone)]
pub(super) struct Directive {
    pub name: String,
    pub args: Vec<String>,
    pub at: At,
    pub block: Option<Vec<Directive>>,
}

/// Splits a dump into `(file, text, line of the text's first line in the dump)`.
fn files_of(dump: &str) -> Vec<(String, String, usize)> {
    let mut out: Vec<(String, String, usize)> = Vec::new();
    for (i, line) in dump.split_inclusive('\n').enumerate() {
        let trimmed = line.trim_end_matches(['\n', '\r']);
        if let Some(rest) = trimmed.strip_prefix("# configuration file ")
            && let Some(path) = rest.strip_suffix(':')
        {
            out.push((path.to_owned(), String::new(), i + 2));
            continue;
        }
        if let Some(last) = out.last_mut() {
            last.1.push_str(line);
        }
    }
    out
}

#[derive(Debug, PartialEq)]
enum Token {
    Word(String),
    Open,
    Close,
    End,
}

/// The tokens of one file, each with its line.
fn tokens(text: &str, file: &str) -> Result<Vec<(Token, usize)>, DiscoverError> {
    let mut out = Vec::new();
    let bytes = text.as_bytes();
    let mut i = 0;
    let mut line = 1;
    let err = |line: usize, message: &str| DiscoverError::Parse {
        at: At {
            file: file.to_owned(),
            line,
        },
        message: message.to_owned(),
    };
    while i < bytes.len() {
        let c = bytes[i];
        match c {
            b'\n' => {
                line += 1;
                i += 1;
            }
            // Every other whitespace byte nginx skips (form feed, vertical tab too): a word
            // never starts with one, so each token below consumes at least one byte.
            c if c.is_ascii_whitespace() || c == 0x0b => i += 1,
            b'#' => {
                while i < bytes.len() && bytes[i] != b'\n' {
                    i += 1;
                }
            }
            b'{' => {
                out.push((Token::Open, line));
                i += 1;
            }
            b'}' => {
                out.push((Token::Close, line));
                i += 1;
            }
            b';' => {
                out.push((Token::End, line));
                i += 1;
            }
            b'"' | b'\'' => {
                let start_line = line;
                let mut word = Vec::new();
                i += 1;
                loop {
                    match bytes.get(i) {
                        None => return Err(err(start_line, "unterminated quoted string")),
                        Some(&q) if q == c => {
                            i += 1;
                            break;
                        }
                        Some(b'\\') if i + 1 < bytes.len() => {
                            word.push(bytes[i + 1]);
                            i += 2;
                        }
                        Some(&b) => {
                            if b == b'\n' {
                                line += 1;
                            }
                            word.push(b);
                            i += 1;
                        }
                    }
                }
                out.push((
                    Token::Word(String::from_utf8_lossy(&word).into_owned()),
                    start_line,
                ));
            }
            _ => {
                let start = i;
                while i < bytes.len() {
                    let b = bytes[i];
                    if b.is_ascii_whitespace() || matches!(b, b';' | b'{' | b'}') {
                        break;
                    }
                    // `${var}` keeps its braces.
                    if b == b'$' && bytes.get(i + 1) == Some(&b'{') {
                        while i < bytes.len() && bytes[i] != b'}' {
                            i += 1;
                        }
                    }
                    if b == b'\\' {
                        i += 1;
                    }
                    i += 1;
                }
                let end = i.min(bytes.len());
                let word = String::from_utf8_lossy(&bytes[start..end]).into_owned();
                let raw = word.ends_with("_by_lua_block");
                out.push((Token::Word(word), line));
                // OpenResty's `*_by_lua_block { ... }` holds Lua, not directives: its block is
                // skipped whole (nginx reads it the same way).
                if raw {
                    let mut j = i;
                    while j < bytes.len() && bytes[j].is_ascii_whitespace() {
                        if bytes[j] == b'\n' {
                            line += 1;
                        }
                        j += 1;
                    }
                    if bytes.get(j) == Some(&b'{') {
                        let open_line = line;
                        let (after, lines) = skip_lua(bytes, j)
                            .ok_or_else(|| err(open_line, "the Lua block is not closed"))?;
                        out.push((Token::Open, open_line));
                        line += lines;
                        out.push((Token::Close, line));
                        i = after;
                    }
                }
            }
        }
    }
    Ok(out)
}

/// The end of the Lua block opening at `bytes[open]` (`{`): the index after its closing brace,
/// and the line breaks inside. Braces in Lua strings and comments do not count.
fn skip_lua(bytes: &[u8], open: usize) -> Option<(usize, usize)> {
    let mut depth = 0usize;
    let mut lines = 0;
    let mut i = open;
    while i < bytes.len() {
        match bytes[i] {
            b'\n' => lines += 1,
            b'{' => depth += 1,
            b'}' => {
                depth = depth.saturating_sub(1);
                if depth == 0 {
                    return Some((i + 1, lines));
                }
            }
            q @ (b'"' | b'\'') => {
                i += 1;
                while i < bytes.len() && bytes[i] != q && bytes[i] != b'\n' {
                    if bytes[i] == b'\\' && bytes.get(i + 1) != Some(&b'\n') {
                        i += 1;
                    }
                    i += 1;
                }
                // A line break that ended an unterminated string still counts.
                if bytes.get(i) == Some(&b'\n') {
                    lines += 1;
                }
            }
            b'[' if long_bracket(bytes, i).is_some() => {
                i = skip_long(bytes, i, &mut lines)?;
                continue;
            }
            b'-' if bytes.get(i + 1) == Some(&b'-') => {
                if long_bracket(bytes, i + 2).is_some() {
                    i = skip_long(bytes, i + 2, &mut lines)?;
                    continue;
                }
                while i < bytes.len() && bytes[i] != b'\n' {
                    i += 1;
                }
                continue;
            }
            _ => {}
        }
        i += 1;
    }
    None
}

/// The level of a Lua long bracket opening at `bytes[i]` (`[[` is 0, `[=[` is 1, …).
fn long_bracket(bytes: &[u8], i: usize) -> Option<usize> {
    if bytes.get(i) != Some(&b'[') {
        return None;
    }
    let level = bytes[i + 1..].iter().take_while(|&&b| b == b'=').count();
    (bytes.get(i + 1 + level) == Some(&b'[')).then_some(level)
}

/// The index after the long string or comment opening at `bytes[open]`, its line breaks
/// added to `lines`; `None` when it is not closed.
fn skip_long(bytes: &[u8], open: usize, lines: &mut usize) -> Option<usize> {
    let level = long_bracket(bytes, open)?;
    let mut i = open + level + 2;
    while i < bytes.len() {
        match bytes[i] {
            b'\n' => *lines += 1,
            b']' if bytes[i + 1..].iter().take(level).all(|&b| b == b'=')
                && bytes.get(i + 1 + level) == Some(&b']') =>
            {
                return Some(i + level + 2);
            }
            _ => {}
        }
        i += 1;
    }
    None
}

/// The directives of one file.
pub(super) fn parse_file(text: &str, file: &str) -> Result<Vec<Directive>, DiscoverError> {
    let toks = tokens(text, file)?;
    let mut pos = 0;
    let list = block(&toks, &mut pos, file, 0)?;
    if pos < toks.len() {
        return Err(DiscoverError::Parse {
            at: At {
                file: file.to_owned(),
                line: toks[pos].1,
            },
            message: "unexpected \"}\"".into(),
        });
    }
    Ok(list)
}

fn block(
    toks: &[(Token, usize)],
    pos: &mut usize,
    file: &str,
    depth: usize,
) -> Result<Vec<Directive>, DiscoverError> {
    let at = |line| At {
        file: file.to_owned(),
        line,
    };
    if depth > 64 {
        let line = toks.get(*pos).map_or(0, |t| t.1);
        return Err(DiscoverError::Parse {
            at: at(line),
            message: "blocks nested more than 64 deep".into(),
        });
    }
    let mut out = Vec::new();
    while let Some((tok, line)) = toks.get(*pos) {
        match tok {
            Token::Close => {
                if depth == 0 {
                    return Err(DiscoverError::Parse {
                        at: at(*line),
                        message: "unexpected \"}\"".into(),
                    });
                }
                return Ok(out);
            }
            Token::Open | Token::End => {
                return Err(DiscoverError::Parse {
                    at: at(*line),
                    message: format!(
                        "unexpected \"{}\"",
                        if *tok == Token::Open { "{" } else { ";" }
                    ),
                });
            }
            Token::Word(name) => {
                let start = *line;
                *pos += 1;
                let mut args = Vec::new();
                loop {
                    match toks.get(*pos) {
                        Some((Token::Word(w), _)) => {
                            args.push(w.clone());
                            *pos += 1;
                        }
                        Some((Token::End, _)) => {
                            *pos += 1;
                            out.push(Directive {
                                name: name.clone(),
                                args,
                                at: at(start),
                                block: None,
                            });
                            break;
                        }
                        Some((Token::Open, _)) => {
                            *pos += 1;
                            let children = block(toks, pos, file, depth + 1)?;
                            match toks.get(*pos) {
                                Some((Token::Close, _)) => *pos += 1,
                                _ => {
                                    return Err(DiscoverError::Parse {
                                        at: at(start),
                                        message: format!("the block of \"{name}\" is not closed"),
                                    });
                                }
                            }
                            out.push(Directive {
                                name: name.clone(),
                                args,
                                at: at(start),
                                block: Some(children),
                            });
                            break;
                        }
                        Some((Token::Close, _)) | None => {
                            return Err(DiscoverError::Parse {
                                at: at(start),
                                message: format!("directive \"{name}\" is not terminated by \";\""),
                            });
                        }
                    }
                }
            }
        }
    }
    Ok(out)
}

/// Every virtual host of an `nginx -T` dump.
pub(super) fn vhosts(dump: &str) -> Result<Vec<Vhost>, DiscoverError> {
    let files = files_of(dump);
    let Some((main, _, _)) = files.first() else {
        return Err(DiscoverError::Parse {
            at: At {
                file: "(dump)".into(),
                line: 1,
            },
            message: "no \"# configuration file PATH:\" line: this is not the output of `nginx -T`"
                .into(),
        });
    };
    let mut parsed: HashMap<&str, Vec<Directive>> = HashMap::new();
    for (path, text, first) in &files {
        let _ = first;
        let list = parse_file(text, path)?;
        parsed.insert(path.as_str(), list);
    }
    // Relative includes are read from the directory of the main file (nginx's prefix).
    let prefix = Path::new(main)
        .parent()
        .unwrap_or(Path::new("/"))
        .to_path_buf();
    let paths: Vec<&str> = files.iter().map(|(p, _, _)| p.as_str()).collect();
    let mut walker = Walker {
        parsed: &parsed,
        paths,
        prefix,
        out: Vec::new(),
        budget: INCLUDE_BUDGET,
        stack: vec![main.as_str()],
    };
    let top = parsed.get(main.as_str()).cloned().unwrap_or_default();
    walker.walk(&top, Ctx::Main, &Inherited::default(), 0);
    Ok(walker.out)
}

/// A directive and everything in its block.
fn size(d: &Directive) -> usize {
    1 + d.block.as_deref().map_or(0, |b| b.iter().map(size).sum())
}

#[derive(Debug, Clone, Copy, PartialEq)]
enum Ctx {
    Main,
    Http,
}

/// What a `server` inherits from `http`.
#[derive(Debug, Clone, Default)]
struct Inherited {
    root: Option<String>,
    cert: Option<String>,
    key: Option<String>,
}

struct Walker<'p> {
    parsed: &'p HashMap<&'p str, Vec<Directive>>,
    paths: Vec<&'p str>,
    prefix: PathBuf,
    out: Vec<Vhost>,
    /// Directives `include` may still produce: files that include each other (or one file
    /// included many times over) stop here instead of growing without bound.
    budget: usize,
    /// The files being expanded (an include of one of them is a cycle and skipped).
    stack: Vec<&'p str>,
}

/// Directives (counting those in blocks) the includes of one dump may produce in all: far
/// above real configurations (1,000 sites are about 15,000).
const INCLUDE_BUDGET: usize = 500_000;

impl Walker<'_> {
    /// The directives of `list` with `include`s replaced by the files they name.
    fn expand(&mut self, list: &[Directive], depth: usize) -> Vec<Directive> {
        let mut out = Vec::new();
        for d in list {
            if self.budget == 0 {
                break;
            }
            if d.name == "include" && d.block.is_none() {
                if depth >= 16 {
                    continue;
                }
                for pattern in &d.args {
                    let full = self.prefix.join(pattern);
                    let full = full.to_string_lossy();
                    let mut matched: Vec<&str> = self
                        .paths
                        .iter()
                        .copied()
                        .filter(|p| crate::fsutil::glob_matches(full.as_bytes(), p.as_bytes()))
                        .collect();
                    matched.sort_unstable();
                    for m in matched {
                        if self.stack.contains(&m) {
                            continue;
                        }
                        if let Some(l) = self.parsed.get(m) {
                            self.stack.push(m);
                            let expanded = self.expand(l, depth + 1);
                            self.stack.pop();
                            out.extend(expanded);
                        }
                    }
                }
            } else {
                self.budget = self.budget.saturating_sub(size(d));
                out.push(d.clone());
            }
        }
        out
    }

    fn walk(&mut self, list: &[Directive], ctx: Ctx, inherited: &Inherited, depth: usize) {
        let list = self.expand(list, depth);
        let mut here = inherited.clone();
        if ctx == Ctx::Http {
            for d in &list {
                match d.name.as_str() {
                    "root" => here.root = d.args.first().cloned(),
                    "ssl_certificate" => here.cert = d.args.first().cloned(),
                    "ssl_certificate_key" => here.key = d.args.first().cloned(),
                    _ => {}
                }
            }
        }
        for d in &list {
            let Some(children) = &d.block else { continue };
            match (ctx, d.name.as_str()) {
                (Ctx::Main, "http") => self.walk(children, Ctx::Http, &here, depth + 1),
                (Ctx::Http, "server") => {
                    let children = self.expand(children, depth + 1);
                    self.out.push(server(&d.at, &children, &here));
                }
                // stream, mail, events, map, upstream, types: no web sites.
                _ => {}
            }
        }
    }
}

/// A `server` block as a [`Vhost`].
fn server(at: &At, list: &[Directive], inherited: &Inherited) -> Vhost {
    let mut v = Vhost {
        at: at.clone(),
        server: "nginx",
        ..Vhost::default()
    };
    let mut root = inherited.root.clone();
    let mut cert = inherited.cert.clone();
    let mut key = inherited.key.clone();
    let mut ssl_on = false;
    let mut server_return: Option<At> = None;
    let mut locations: Vec<&Directive> = Vec::new();
    for d in list {
        match d.name.as_str() {
            "server_name" => v.names.extend(d.args.iter().cloned()),
            "listen" => v.listens.push(listen(&d.args)),
            "ssl" => ssl_on = d.args.first().is_some_and(|a| a == "on"),
            "ssl_certificate" if v.cert_file.is_none() => {
                cert = d.args.first().cloned();
                v.cert_file = cert.clone().map(PathBuf::from);
            }
            "ssl_certificate_key" if v.key_file.is_none() => {
                key = d.args.first().cloned();
                v.key_file = key.clone().map(PathBuf::from);
            }
            "root" => root = d.args.first().cloned(),
            "return" | "rewrite"
                if d.block.is_none()
                    && (d.name == "return"
                        || d.args.iter().any(|a| a == "redirect" || a == "permanent")) =>
            {
                server_return.get_or_insert(d.at.clone());
            }
            "if" => {
                if let Some(children) = &d.block
                    && children.iter().any(|c| c.name == "return")
                {
                    server_return.get_or_insert(d.at.clone());
                }
            }
            "location" => locations.push(d),
            _ => {}
        }
    }
    if v.listens.is_empty() {
        v.listens.push(Listen {
            port: 80,
            ssl: false,
            default: false,
        });
    }
    if ssl_on {
        for l in &mut v.listens {
            l.ssl = true;
        }
    }
    v.tls = v.listens.iter().any(|l| l.ssl);
    if v.tls {
        v.cert_file = cert.map(PathBuf::from);
        v.key_file = key.map(PathBuf::from);
    } else {
        v.cert_file = None;
        v.key_file = None;
    }
    v.root = root.clone().map(PathBuf::from);
    v.validation = validation(&locations, root.as_deref(), server_return);
    v
}

/// `listen` arguments: the port and the flags that matter here.
fn listen(args: &[String]) -> Listen {
    let addr = args.first().map(String::as_str).unwrap_or("80");
    let port = if addr.starts_with("unix:") {
        0
    } else {
        let tail = addr.rsplit_once(':').map_or(addr, |(_, p)| p);
        let tail = if addr.starts_with('[') && !addr.contains("]:") {
            "80"
        } else {
            tail
        };
        tail.parse()
            .unwrap_or(if addr.contains('.') || addr.starts_with('[') {
                80
            } else {
                0
            })
    };
    Listen {
        port,
        ssl: args.iter().skip(1).any(|a| a == "ssl" || a == "quic"),
        default: args
            .iter()
            .skip(1)
            .any(|a| a == "default_server" || a == "default"),
    }
}

const PROBE: &str = "/.well-known/pki-validation/x.txt";

/// Whether `/.well-known/pki-validation/` is served from a document root, and which.
fn validation(
    locations: &[&Directive],
    root: Option<&str>,
    server_return: Option<At>,
) -> Validation {
    if let Some(at) = server_return {
        return Validation::Blocked(format!("redirects or returns at {at} before any location"));
    }
    // nginx's choice: an exact match, else the longest prefix (final with ^~), else the first
    // regular expression that matches, else that prefix. Regular expressions are not
    // evaluated here: one naming well-known is taken as matching, others as not.
    let mut best: Option<(&Directive, usize, bool)> = None;
    let mut regex: Option<&Directive> = None;
    for d in locations {
        let (modifier, path) = match d.args.as_slice() {
            [m, p] => (m.as_str(), p.as_str()),
            [p] => ("", p.as_str()),
            _ => continue,
        };
        match modifier {
            "=" if path == PROBE => return in_location(d, root),
            "" | "^~"
                if PROBE.starts_with(path) && best.is_none_or(|(_, len, _)| path.len() > len) =>
            {
                best = Some((d, path.len(), modifier == "^~"));
            }
            "~" | "~*" if regex.is_none() && path.contains("well-known") => regex = Some(d),
            _ => {}
        }
    }
    match (best, regex) {
        (Some((d, _, true)), _) => in_location(d, root),
        (_, Some(r)) => in_location(r, root),
        (Some((d, _, false)), None) => in_location(d, root),
        (None, None) => match root {
            Some(r) => served(r),
            None => Validation::Blocked("no `root` for this server".into()),
        },
    }
}

fn in_location(d: &Directive, root: Option<&str>) -> Validation {
    let children = d.block.as_deref().unwrap_or_default();
    let mut root = root.map(str::to_owned);
    for c in children {
        match c.name.as_str() {
            "return" => {
                return Validation::Blocked(format!(
                    "`location` at {} returns {}",
                    d.at,
                    c.args.join(" ")
                ));
            }
            "proxy_pass" | "fastcgi_pass" | "uwsgi_pass" | "scgi_pass" | "grpc_pass" => {
                return Validation::Blocked(format!(
                    "`location` at {} is passed on ({})",
                    d.at, c.name
                ));
            }
            "alias" => {
                let dir = c.args.first().map(String::as_str).unwrap_or_default();
                // An alias ending in the validation directory is a root above it.
                let trimmed = dir.trim_end_matches('/');
                if let Some(base) = trimmed.strip_suffix("/.well-known/pki-validation") {
                    return served(base);
                }
                return Validation::Blocked(format!(
                    "`location` at {} uses `alias {dir}`: write `root` instead so that the file \
                     is at ROOT/.well-known/pki-validation/",
                    d.at
                ));
            }
            "root" => root = c.args.first().cloned(),
            _ => {}
        }
    }
    match root {
        Some(r) => served(&r),
        None => Validation::Blocked(format!("`location` at {} has no `root`", d.at)),
    }
}

fn served(root: &str) -> Validation {
    if root.contains('$') {
        return Validation::Blocked(format!("the root {root:?} depends on a variable"));
    }
    if !root.starts_with('/') {
        return Validation::Blocked(format!("the root {root:?} is relative to nginx's prefix"));
    }
    Validation::Served(PathBuf::from(root))
}

#[cfg(test)]
mod tests {
    use super::*;

    const DUMP: &str = "nginx: the configuration file /etc/nginx/nginx.conf syntax is ok\n\
# configuration file /etc/nginx/nginx.conf:\n\
events {}\n\
http {\n\
    root /var/www/default;\n\
    include /etc/nginx/sites-enabled/*;\n\
}\n\
stream { server { listen 12345; proxy_pass 127.0.0.1:1; } }\n\
\n\
# configuration file /etc/nginx/sites-enabled/shop:\n\
server {\n\
    listen 80;\n\
    server_name shop.example.com \"www.shop.example.com\";\n\
    location ^~ /.well-known/pki-validation/ { root /srv/acme; }\n\
    location / { return 301 https://$host$request_uri; }\n\
}\n\
server {\n\
    listen 443 ssl default_server; http2 on;\n\
    server_name shop.example.com www.shop.example.com;\n\
    ssl_certificate /etc/ssl/shop.pem; # the chain\n\
    ssl_certificate_key /etc/ssl/shop.key;\n\
}\n\
\n";

    #[test]
    fn servers_of_the_http_block_through_includes() {
        let v = vhosts(DUMP).unwrap();
        assert_eq!(v.len(), 2, "{v:#?}");
        assert_eq!(v[0].names, ["shop.example.com", "www.shop.example.com"]);
        assert_eq!(v[0].at.to_string(), "/etc/nginx/sites-enabled/shop:1");
        assert_eq!(v[0].validation, Validation::Served("/srv/acme".into()));
        assert!(!v[0].tls);
        assert!(v[1].tls && v[1].listens[0].default);
        assert_eq!(
            v[1].cert_file.as_deref(),
            Some(Path::new("/etc/ssl/shop.pem"))
        );
        assert_eq!(
            v[1].validation,
            Validation::Served("/var/www/default".into()),
            "inherited root"
        );
    }

    #[test]
    fn malformed_dumps_name_the_file_and_line() {
        for (text, expect) in [
            (
                "# configuration file /a.conf:\nhttp {\n server {\n",
                "/a.conf line 2",
            ),
            (
                "# configuration file /a.conf:\nhttp { }\n}\n",
                "/a.conf line 2",
            ),
            (
                "# configuration file /a.conf:\n\nhttp { listen \"80 }\n",
                "/a.conf line 2",
            ),
            (
                "# configuration file /a.conf:\nx;\n# configuration file /b.conf:\n\n{\n",
                "/b.conf line 2",
            ),
            ("no marker", "not the output of `nginx -T`"),
        ] {
            let e = vhosts(text).unwrap_err().to_string();
            assert!(e.contains(expect), "{text:?}: {e}");
        }
    }

    #[test]
    fn includes_that_include_each_other_end() {
        let mut dump = String::from(
            "# configuration file /etc/nginx/nginx.conf:\nhttp { include /etc/nginx/*.conf; }\n",
        );
        for i in 0..20 {
            dump.push_str(&format!(
                "# configuration file /etc/nginx/f{i}.conf:\ninclude /etc/nginx/*.conf;\n\
                 server {{ server_name s{i}.example.com; }}\n"
            ));
        }
        let started = std::time::Instant::now();
        let v = vhosts(&dump).unwrap();
        assert!(v.len() >= 20, "{}", v.len());
        assert!(started.elapsed() < std::time::Duration::from_secs(30));
    }

    #[test]
    fn every_whitespace_byte_separates_words() {
        let v = vhosts(
            "# configuration file /a.conf:\nhttp {\x0cserver {\x0bserver_name\x0ca.example.com; }\n}\n",
        )
        .unwrap();
        assert_eq!(v[0].names, ["a.example.com"]);
    }

    #[test]
    fn lua_blocks_are_skipped_whole() {
        let v = vhosts(
            "# configuration file /a.conf:\nhttp {\n server {\n  server_name a.example.com;\n  \
             content_by_lua_block {\n   -- don't { count\n   ngx.say(\"}\")\n   local q = [==[ } ]] ]==]\n   \
             --[[\n   { ]]\n   if x then y() end\n  }\n  \
             listen 443 ssl;\n }\n}\n",
        )
        .unwrap();
        assert_eq!(v[0].names, ["a.example.com"]);
        assert!(v[0].tls, "directives after the Lua block are read");
        let e = vhosts("# configuration file /a.conf:\nhttp { server { access_by_lua_block { a(\n")
            .unwrap_err();
        assert!(e.to_string().contains("Lua block is not closed"), "{e}");
    }

    #[test]
    fn listen_forms() {
        let l = |s: &str| listen(&s.split(' ').map(str::to_owned).collect::<Vec<_>>());
        assert_eq!(l("443 ssl").port, 443);
        assert!(l("443 ssl").ssl);
        assert_eq!(l("[::]:8443 ssl default_server").port, 8443);
        assert!(l("[::]:8443 ssl default_server").default);
        assert_eq!(l("127.0.0.1").port, 80);
        assert_eq!(l("127.0.0.1:81").port, 81);
        assert_eq!(l("[::]").port, 80);
    }
}
