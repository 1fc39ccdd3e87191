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
                            if bytes[i + 1] == b'\n' {
                                line += 1;
                            }
                            word.extend_from_slice(&bytes[i..i + 2]);
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
                out.push((Token::Word(unescape(&word)), start_line));
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
                let word = unescape(&bytes[start..end]);
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

/// A word as nginx keeps it: `\"`, `\'` and `\\` lose their backslash, `\t`, `\r`, `\n` become
/// the control character, every other backslash stays (`\.` in a regular expression).
fn unescape(raw: &[u8]) -> String {
    if !raw.contains(&b'\\') {
        return String::from_utf8_lossy(raw).into_owned();
    }
    let mut out = Vec::with_capacity(raw.len());
    let mut i = 0;
    while let Some(&b) = raw.get(i) {
        if b == b'\\' {
            let unescaped = match raw.get(i + 1) {
                Some(&c @ (b'"' | b'\'' | b'\\')) => Some(c),
                Some(b't') => Some(b'\t'),
                Some(b'r') => Some(b'\r'),
                Some(b'n') => Some(b'\n'),
                _ => None,
            };
            if let Some(c) = unescaped {
                out.push(c);
                i += 2;
                continue;
            }
        }
        out.push(b);
        i += 1;
    }
    String::from_utf8_lossy(&out).into_owned()
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
        globs: HashMap::new(),
        regexes: Regexes::default(),
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
    guards: Guards,
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
    /// [`Self::matching`]'s answers.
    globs: HashMap<String, Vec<&'p str>>,
    regexes: Regexes,
}

/// Directives (counting those in blocks) the includes of one dump may produce in all: far
/// above real configurations (1,000 sites are about 15,000).
const INCLUDE_BUDGET: usize = 500_000;

impl<'p> Walker<'p> {
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
                    for m in self.matching(pattern) {
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

    /// The files of the dump an `include` of `pattern` reads, in order; each pattern matched
    /// against the dump's files once (the same snippet is often included by every site).
    fn matching(&mut self, pattern: &str) -> Vec<&'p str> {
        if let Some(known) = self.globs.get(pattern) {
            return known.clone();
        }
        let full = self.prefix.join(pattern);
        let full = full.to_string_lossy();
        let mut matched: Vec<&'p str> = self
            .paths
            .iter()
            .copied()
            .filter(|p| crate::fsutil::glob_matches(full.as_bytes(), p.as_bytes()))
            .collect();
        matched.sort_unstable();
        self.globs.insert(pattern.to_owned(), matched.clone());
        matched
    }

    /// [`Self::expand`], inside every block as well (`location`, `if`).
    fn expand_all(&mut self, list: &[Directive], depth: usize) -> Vec<Directive> {
        let mut out = self.expand(list, depth);
        for d in &mut out {
            if let Some(children) = d.block.take() {
                d.block = Some(self.expand_all(&children, depth + 1));
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
            here.guards = here.guards.within(&list, None);
        }
        for d in &list {
            let Some(children) = &d.block else { continue };
            match (ctx, d.name.as_str()) {
                (Ctx::Main, "http") => self.walk(children, Ctx::Http, &here, depth + 1),
                (Ctx::Http, "server") => {
                    let children = self.expand_all(children, depth + 1);
                    let v = server(&d.at, &children, &here, &mut self.regexes);
                    self.out.push(v);
                }
                // stream, mail, events, map, upstream, types: no web sites.
                _ => {}
            }
        }
    }
}

/// A `server` block as a [`Vhost`].
fn server(at: &At, list: &[Directive], inherited: &Inherited, regexes: &mut Regexes) -> Vhost {
    let mut v = Vhost {
        at: at.clone(),
        server: "nginx",
        ..Vhost::default()
    };
    let mut root = inherited.root.clone();
    let mut cert = inherited.cert.clone();
    let mut key = inherited.key.clone();
    let mut ssl_on = false;
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
    let guards = inherited.guards.within(list, None);
    v.validation = validation(list, root.as_deref(), &guards, regexes);
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

/// The request nginx chooses a `location` for: a validation file, named by the MD5 of a CSR in
/// upper-case hexadecimal.
const PROBE: &str = "/.well-known/pki-validation/0123456789ABCDEF0123456789ABCDEF.txt";

/// Whether nginx's regular expressions match [`PROBE`] (or another part of the CA's request),
/// each pattern evaluated once per dump.
#[derive(Default)]
struct Regexes {
    seen: HashMap<(String, bool, &'static str), Result<bool, String>>,
}

impl Regexes {
    /// Whether `pattern` (`caseless`: `~*`) matches [`PROBE`], or why it cannot be told: nginx
    /// uses PCRE, and what the `regex` crate cannot compile (lookaround, backreferences,
    /// possessive quantifiers) is not taken as a mismatch.
    fn matches(&mut self, pattern: &str, caseless: bool) -> Result<bool, String> {
        self.matches_text(pattern, caseless, PROBE)
    }

    /// [`Self::matches`] for `text`.
    fn matches_text(
        &mut self,
        pattern: &str,
        caseless: bool,
        text: &'static str,
    ) -> Result<bool, String> {
        let key = (pattern.to_owned(), caseless, text);
        if let Some(known) = self.seen.get(&key) {
            return known.clone();
        }
        // Bytes, not Unicode: PCRE as nginx compiles it (`\d`, `\w`, case folding in ASCII).
        let result = regex::bytes::RegexBuilder::new(pattern)
            .case_insensitive(caseless)
            .unicode(false)
            .size_limit(1 << 20)
            .build()
            .map(|re| re.is_match(text.as_bytes()))
            .map_err(|e| {
                let text = e.to_string();
                let last = text.lines().rev().find(|l| !l.trim().is_empty());
                let why = last.unwrap_or(&text).trim();
                why.strip_prefix("error: ").unwrap_or(why).to_owned()
            });
        self.seen.insert(key, result.clone());
        result
    }
}

/// The forms of `location`.
#[derive(Debug, Clone, Copy, PartialEq)]
enum Kind {
    /// `=`
    Exact,
    /// No modifier.
    Prefix,
    /// `^~`: a prefix that, when it is the longest, stops the regular expressions.
    NoRegex,
    /// `~`
    Regex,
    /// `~*`
    Caseless,
    /// `@name`: only reached by internal redirects.
    Named,
}

/// The form and the path or pattern of a `location`'s arguments, as nginx reads them (the
/// modifier may be written apart or joined: `= /x`, `=/x`, `~* \.txt$`, `~*\.txt$`).
fn location_kind(args: &[String]) -> Option<(Kind, &str)> {
    match args {
        [m, name] => {
            let kind = match m.as_str() {
                "=" => Kind::Exact,
                "^~" => Kind::NoRegex,
                "~" => Kind::Regex,
                "~*" => Kind::Caseless,
                _ => return None,
            };
            Some((kind, name))
        }
        [name] => Some(if let Some(p) = name.strip_prefix('=') {
            (Kind::Exact, p)
        } else if let Some(p) = name.strip_prefix("~*") {
            (Kind::Caseless, p)
        } else if let Some(p) = name.strip_prefix('~') {
            (Kind::Regex, p)
        } else if name.starts_with('@') {
            (Kind::Named, name.as_str())
        } else {
            (Kind::Prefix, name.as_str())
        }),
        _ => None,
    }
}

/// `location ARGS` at FILE:LINE.
fn describe(d: &Directive) -> String {
    format!("`location {}` at {}", d.args.join(" "), d.at)
}

/// The `location` nginx chooses for [`PROBE`] among those of one level (a server's, or
/// those nested in a location): the chosen location and the ones it is nested in, outermost
/// first; `done` when regular expressions of enclosing levels are no longer tried.
struct Lookup<'d> {
    path: Vec<&'d Directive>,
    done: bool,
}

/// nginx's choice (`ngx_http_core_find_location`): an exact match wins; else the longest
/// prefix, then the locations nested in it; unless that prefix is `^~`, the regular
/// expressions of this level in their order, the first that matches (and the locations
/// nested in it) winning; else the prefix. `Err`: a regular expression that has to be tried
/// cannot be evaluated here, named with the reason.
fn lookup<'d>(list: &'d [Directive], regexes: &mut Regexes) -> Result<Lookup<'d>, String> {
    let locations = || {
        list.iter()
            .filter(|d| d.name == "location" && d.block.is_some())
            .filter_map(|d| location_kind(&d.args).map(|(k, p)| (d, k, p)))
    };
    let mut prefix: Option<(&Directive, usize, bool)> = None;
    for (d, kind, path) in locations() {
        match kind {
            Kind::Exact if path == PROBE => {
                return Ok(Lookup {
                    path: vec![d],
                    done: true,
                });
            }
            Kind::Prefix | Kind::NoRegex
                if PROBE.starts_with(path) && prefix.is_none_or(|(_, len, _)| path.len() > len) =>
            {
                prefix = Some((d, path.len(), kind == Kind::NoRegex));
            }
            _ => {}
        }
    }
    let mut found = Vec::new();
    if let Some((d, _, noregex)) = prefix {
        let nested = lookup(body(d), regexes)?;
        found.push(d);
        found.extend(nested.path);
        if nested.done || noregex {
            return Ok(Lookup {
                path: found,
                done: nested.done,
            });
        }
    }
    for (d, kind, pattern) in locations() {
        if !matches!(kind, Kind::Regex | Kind::Caseless) {
            continue;
        }
        match regexes.matches(pattern, kind == Kind::Caseless) {
            Ok(true) => {
                let nested = lookup(body(d), regexes)?;
                let mut path = vec![d];
                path.extend(nested.path);
                return Ok(Lookup { path, done: true });
            }
            Ok(false) => {}
            Err(why) => {
                return Err(format!(
                    "{}: nginx may choose it, and its regular expression cannot be evaluated \
                     here ({why}); check by hand which location serves \
                     /.well-known/pki-validation/",
                    describe(d)
                ));
            }
        }
    }
    Ok(Lookup {
        path: found,
        done: false,
    })
}

/// The access rules (`allow`, `deny`) and `auth_basic` in force at one level: a level that
/// sets any replaces those of the level around it.
#[derive(Debug, Clone, Default)]
struct Guards {
    access: Vec<Directive>,
    /// The `location` that sets the access rules, when one does.
    access_in: Option<String>,
    auth: Option<Directive>,
}

impl Guards {
    /// These, overridden by what `list` sets (`location`: the block's, described).
    fn within(&self, list: &[Directive], location: Option<&Directive>) -> Guards {
        let access: Vec<Directive> = list
            .iter()
            .filter(|d| d.block.is_none() && (d.name == "allow" || d.name == "deny"))
            .cloned()
            .collect();
        let auth = list
            .iter()
            .rev()
            .find(|d| d.block.is_none() && d.name == "auth_basic");
        let mut out = self.clone();
        if !access.is_empty() {
            out.access = access;
            out.access_in = location.map(describe);
        }
        if let Some(a) = auth {
            out.auth = Some(a.clone());
        }
        out
    }

    /// Why they keep the CA out, or `None`. Its address is unknown: the first rule that
    /// names `all` decides.
    fn refusal(&self) -> Option<String> {
        let all = self
            .access
            .iter()
            .find(|d| d.args.first().is_some_and(|a| a == "all"));
        if let Some(d) = all
            && d.name == "deny"
        {
            return Some(match &self.access_in {
                Some(location) => format!("{location} refuses it (`deny all;` at {})", d.at),
                None => format!("`deny all;` at {} refuses it", d.at),
            });
        }
        if let Some(d) = &self.auth
            && d.args.first().is_some_and(|a| a != "off")
        {
            return Some(format!("`auth_basic` at {} asks for a password", d.at));
        }
        None
    }
}

/// What a directive of the rewrite phase (`return`, `rewrite`, `if`) does to [`PROBE`], or
/// `None` when it lets it through. `place`: where it stands, for the reason.
fn rewrite_phase(d: &Directive, place: &str, regexes: &mut Regexes) -> Option<Validation> {
    match (d.name.as_str(), &d.block) {
        ("return", None) => {
            let redirect = d.args.iter().any(|a| {
                matches!(a.as_str(), "301" | "302" | "303" | "307" | "308")
                    || a.starts_with("http://")
                    || a.starts_with("https://")
                    || a.starts_with("$scheme")
            });
            let what = if redirect { "redirects" } else { "answers" };
            Some(Validation::Blocked(format!(
                "{what} (`return {}`) at {}{place}",
                d.args.join(" "),
                d.at
            )))
        }
        ("rewrite", None) => {
            let [pattern, replacement, flags @ ..] = d.args.as_slice() else {
                return None;
            };
            match regexes.matches(pattern, false) {
                Ok(false) => None,
                Ok(true) => {
                    let redirect = flags.iter().any(|f| f == "redirect" || f == "permanent")
                        || replacement.starts_with("http://")
                        || replacement.starts_with("https://")
                        || replacement.starts_with("$scheme");
                    Some(if redirect {
                        Validation::Blocked(format!(
                            "redirects (`rewrite {}`) at {}{place}",
                            d.args.join(" "),
                            d.at
                        ))
                    } else {
                        Validation::Unknown(format!(
                            "`rewrite {}` at {} changes the URI{place}; check by hand",
                            d.args.join(" "),
                            d.at
                        ))
                    })
                }
                Err(why) => Some(Validation::Unknown(format!(
                    "the regular expression of `rewrite` at {} cannot be evaluated here \
                     ({why}); check by hand",
                    d.at
                ))),
            }
        }
        ("if", Some(children)) => {
            let cond = d.args.join(" ");
            let applies = condition(&cond, regexes);
            if applies == Some(false) {
                return None;
            }
            let inner = children
                .iter()
                .find_map(|c| rewrite_phase(c, place, regexes))?;
            Some(match (applies, inner) {
                (Some(_), Validation::Blocked(why)) => {
                    Validation::Blocked(format!("under `if {cond}` at {}: {why}", d.at))
                }
                (None, Validation::Blocked(why) | Validation::Unknown(why)) => {
                    Validation::Unknown(format!(
                        "the condition of `if {cond}` at {} cannot be evaluated here, and under \
                         it: {why}",
                        d.at
                    ))
                }
                (_, other) => other,
            })
        }
        _ => None,
    }
}

/// Whether the condition of an `if` (its arguments) compares the host name.
fn host_condition(args: &[String]) -> bool {
    args.first().is_some_and(|a| {
        let var = a.trim_start_matches('(');
        var == "$host" || var == "$http_host" || var == "$server_name"
    })
}

/// Whether the condition of an `if` (`cond`: its arguments, parentheses included) holds for
/// the CA's request: `GET` of [`PROBE`] over plain HTTP on port 80, for an existing file.
/// A comparison of the host name is taken as holding (certbot's
/// `if ($host = NAME) { return 301 ...; }`); `None` when it depends on anything else.
fn condition(cond: &str, regexes: &mut Regexes) -> Option<bool> {
    let inner = cond.trim().strip_prefix('(')?.strip_suffix(')')?.trim();
    let mut words = inner.splitn(3, ' ');
    let first = words.next()?;
    let op = words.next();
    let operand = words.next().map(str::trim);
    if let Some(test) = ["!-f", "!-d", "!-e", "!-x", "-f", "-d", "-e", "-x"]
        .into_iter()
        .find(|t| *t == first)
    {
        // A file test of the requested file: the validation file exists.
        let file = op.is_some_and(|o| o.contains("$request_filename") || o.contains("$uri"));
        if !file {
            return None;
        }
        let (negated, test) = match test.strip_prefix('!') {
            Some(t) => (true, t),
            None => (false, test),
        };
        return Some(matches!(test, "-f" | "-e") != negated);
    }
    let value = match first {
        "$host" | "$http_host" | "$server_name" => return Some(true),
        "$uri" | "$document_uri" | "$request_uri" => PROBE,
        "$request_method" => "GET",
        "$scheme" => "http",
        "$server_port" => "80",
        "$https" => "",
        _ => return None,
    };
    let Some(op) = op else {
        return Some(!value.is_empty() && value != "0");
    };
    let operand = operand.unwrap_or_default();
    let operand = operand
        .strip_prefix('"')
        .and_then(|o| o.strip_suffix('"'))
        .unwrap_or(operand);
    match op {
        "=" => Some(value == operand),
        "!=" => Some(value != operand),
        "~" | "~*" | "!~" | "!~*" => {
            let hit = regexes
                .matches_text(operand, op.ends_with('*'), value)
                .ok()?;
            Some(hit != op.starts_with('!'))
        }
        _ => None,
    }
}

/// Whether `/.well-known/pki-validation/` of the server whose directives are `list` is
/// served from a document root, and which.
fn validation(
    list: &[Directive],
    root: Option<&str>,
    guards: &Guards,
    regexes: &mut Regexes,
) -> Validation {
    // The server's rewrite phase comes before the location is chosen: a `location` cannot
    // exempt the validation path from it.
    const BEFORE: &str = ", before any location is chosen (move it into `location / { }`)";
    // certbot's port-80 server: an `if ($host = NAME) { return 301 ...; }` per name, then
    // `return 404;` for the others.
    let mut by_host: Vec<String> = Vec::new();
    for d in list {
        let Some(v) = rewrite_phase(d, BEFORE, regexes) else {
            continue;
        };
        match v {
            Validation::Blocked(why) if d.name == "if" && host_condition(&d.args) => {
                by_host.push(why);
            }
            Validation::Blocked(why) | Validation::Unknown(why) if !by_host.is_empty() => {
                return Validation::Blocked(format!(
                    "{}; for the other names: {why}",
                    by_host
                        .iter()
                        .map(|h| h.strip_suffix(BEFORE).unwrap_or(h))
                        .collect::<Vec<_>>()
                        .join("; ")
                ));
            }
            v => return v,
        }
    }
    if !by_host.is_empty() {
        return Validation::Blocked(format!("{} (for the names it matches)", by_host.join("; ")));
    }
    let path = match lookup(list, regexes) {
        Ok(found) => found.path,
        Err(why) => return Validation::Unknown(why),
    };
    in_location(&path, root, guards, regexes)
}

/// What the locations of `path` (outermost first; empty: none) do with [`PROBE`].
fn in_location(
    path: &[&Directive],
    root: Option<&str>,
    guards: &Guards,
    regexes: &mut Regexes,
) -> Validation {
    let Some(chosen) = path.last() else {
        if let Some(why) = guards.refusal() {
            return Validation::Blocked(why);
        }
        return match root {
            Some(r) => served(r),
            None => Validation::Blocked("no `root` for this server".into()),
        };
    };
    let name = describe(chosen);
    let place = format!(", in {name}");
    for c in body(chosen) {
        if let Some(v) = rewrite_phase(c, &place, regexes) {
            return v;
        }
    }
    let mut in_force = guards.clone();
    for d in path {
        in_force = in_force.within(body(d), Some(d));
    }
    if let Some(why) = in_force.refusal() {
        return Validation::Blocked(why);
    }
    for c in body(chosen) {
        match c.name.as_str() {
            "internal" => {
                return Validation::Blocked(format!("{name} is `internal` (404 to the CA)"));
            }
            "proxy_pass" | "fastcgi_pass" | "uwsgi_pass" | "scgi_pass" | "grpc_pass"
            | "memcached_pass" => {
                return Validation::Blocked(format!("{name} is passed on ({})", c.name));
            }
            _ => {}
        }
    }
    // `root` and `alias` are inherited by nested locations: the innermost one counts.
    for d in path.iter().rev() {
        for c in body(d).iter().rev() {
            match c.name.as_str() {
                "root" => {
                    return match c.args.first() {
                        Some(r) => served(r),
                        None => Validation::Blocked(format!("{} has an empty `root`", describe(d))),
                    };
                }
                "alias" => return alias(d, c.args.first().map(String::as_str).unwrap_or("")),
                _ => {}
            }
        }
    }
    match root {
        Some(r) => served(r),
        None => Validation::Blocked(format!("{name} has no `root`")),
    }
}

/// `alias DIR` in `location`: the file nginx serves for [`PROBE`] is DIR followed by the part
/// of the URI after the location's prefix; a document root when that ends in the URI.
fn alias(location: &Directive, dir: &str) -> Validation {
    let rest = match location_kind(&location.args) {
        Some((Kind::Prefix | Kind::NoRegex | Kind::Exact, prefix)) => PROBE.get(prefix.len()..),
        _ => None,
    };
    let file = rest.map(|r| format!("{dir}{r}"));
    if let Some(base) = file.as_deref().and_then(|f| f.strip_suffix(PROBE)) {
        return served(if base.is_empty() { "/" } else { base });
    }
    Validation::Blocked(format!(
        "{} uses `alias {dir}`: write `root` instead so that the file is at \
         ROOT/.well-known/pki-validation/",
        describe(location)
    ))
}

/// The directives in `d`'s block.
fn body(d: &Directive) -> &[Directive] {
    d.block.as_deref().unwrap_or_default()
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

    /// The validation of the one server of `/s.conf`, `body` starting on line 3.
    fn probe(body: &str) -> Validation {
        let dump = format!("# configuration file /s.conf:\nhttp {{\nserver {{\n{body}\n}}\n}}\n");
        let v = vhosts(&dump).unwrap();
        assert_eq!(v.len(), 1);
        v[0].validation.clone()
    }

    fn blocked(v: &Validation, parts: &[&str]) {
        match v {
            Validation::Blocked(why) => {
                for p in parts {
                    assert!(why.contains(p), "{p:?} not in {why:?}");
                }
            }
            other => panic!("not blocked: {other:?}"),
        }
    }

    fn served_from(path: &str) -> Validation {
        Validation::Served(path.into())
    }

    #[test]
    fn a_regex_location_denying_dotfiles_blocks_the_validation_path() {
        let v = probe(
            "root /var/www/a;\nlocation / { try_files $uri $uri/ =404; }\nlocation ~ /\\. { deny all; }",
        );
        blocked(&v, &["`location ~ /\\.` at /s.conf:5", "deny all"]);
        // Harmless ones: they do not match the validation file.
        let v = probe(
            "root /var/www/a;\nlocation ~ /\\.ht { deny all; }\n\
             location ~ \\.php$ { fastcgi_pass unix:/run/php.sock; }\nlocation / { }",
        );
        assert_eq!(v, served_from("/var/www/a"));
    }

    #[test]
    fn a_noregex_prefix_beats_regex_locations() {
        for wk in ["/.well-known/", "/.well-known/pki-validation/"] {
            let v = probe(&format!(
                "root /var/www/a;\nlocation ~ /\\. {{ deny all; }}\n\
                 location ^~ {wk} {{ root /srv/acme; }}"
            ));
            assert_eq!(v, served_from("/srv/acme"), "{wk}");
        }
        // A plain prefix does not stop them.
        let v = probe(
            "root /var/www/a;\nlocation /.well-known/ { root /srv/acme; }\nlocation ~ /\\. { deny all; }",
        );
        blocked(&v, &["deny all"]);
    }

    #[test]
    fn the_first_matching_regex_wins() {
        let v = probe(
            "root /var/www/a;\nlocation ~ ^/\\.well-known/ { root /srv/wk; }\n\
             location ~ /\\. { deny all; }",
        );
        assert_eq!(v, served_from("/srv/wk"));
        let v = probe(
            "root /var/www/a;\nlocation ~ /\\. { deny all; }\n\
             location ~ ^/\\.well-known/ { root /srv/wk; }",
        );
        blocked(&v, &["/s.conf:4"]);
    }

    #[test]
    fn caseless_regexes_ignore_case() {
        let v = probe("root /a;\nlocation ~* \\.(TXT|log)$ { deny all; }");
        blocked(&v, &["`location ~* \\.(TXT|log)$`"]);
        assert_eq!(
            probe("root /a;\nlocation ~ \\.(TXT|log)$ { deny all; }"),
            served_from("/a")
        );
        // The modifier joined to the pattern, and a quoted pattern.
        blocked(
            &probe("root /a;\nlocation ~*\\.TXT$ { deny all; }"),
            &["deny"],
        );
        blocked(
            &probe("root /a;\nlocation ~ \"\\.txt$\" { deny all; }"),
            &["deny"],
        );
        assert_eq!(
            probe("root /a;\nlocation ~ \"x\\.txt$\" { deny all; }"),
            served_from("/a"),
            "`\\.` keeps its backslash in quotes"
        );
    }

    #[test]
    fn a_regex_the_regex_crate_cannot_evaluate_makes_it_unknown() {
        let v = probe(
            "root /a;\nlocation ~ ^/(?!\\.well-known/) { return 301 https://$host$request_uri; }",
        );
        match v {
            Validation::Unknown(why) => {
                assert!(
                    why.contains("`location ~ ^/(?!\\.well-known/)` at /s.conf:4"),
                    "{why}"
                );
                assert!(why.contains("look-around"), "{why}");
            }
            other => panic!("{other:?}"),
        }
        // Not tried: an earlier one matches, or a `^~` prefix comes first.
        let v = probe("root /a;\nlocation ~ \\.txt$ { }\nlocation ~ (a)\\1 { deny all; }");
        assert_eq!(v, served_from("/a"));
        let v = probe("root /a;\nlocation ^~ /.well-known/ { }\nlocation ~ (a)\\1 { deny all; }");
        assert_eq!(v, served_from("/a"));
    }

    #[test]
    fn nested_locations_are_chosen_as_nginx_does() {
        let v = probe("root /a;\nlocation / {\n  location ~ /\\. { deny all; }\n}");
        blocked(&v, &["`location ~ /\\.` at /s.conf:5"]);
        let v = probe("location /.well-known/ {\n  root /srv/wk;\n  location ~ \\.txt$ { }\n}");
        assert_eq!(
            v,
            served_from("/srv/wk"),
            "root inherited by the nested location"
        );
        let v =
            probe("root /a;\nlocation ~ well-known {\n  location ~ \\.txt$ { root /srv/txt; }\n}");
        assert_eq!(v, served_from("/srv/txt"));
        // A nested prefix does not stop the regular expressions around it.
        let v = probe(
            "root /a;\nlocation / {\n  location ^~ /.well-known/ { root /srv/acme; }\n}\n\
             location ~ /\\. { deny all; }",
        );
        blocked(&v, &["/s.conf:7"]);
    }

    #[test]
    fn access_rules_and_passwords() {
        let v = probe("root /a;\ndeny all;\nlocation ^~ /.well-known/ { allow all; }");
        assert_eq!(v, served_from("/a"));
        blocked(
            &probe("root /a;\nallow 10.0.0.0/8;\ndeny all;\nlocation / { }"),
            &["`deny all;` at /s.conf:5"],
        );
        blocked(&probe("root /a;\nauth_basic \"staff\";"), &["auth_basic"]);
        let v =
            probe("root /a;\nauth_basic \"staff\";\nlocation /.well-known/ { auth_basic off; }");
        assert_eq!(v, served_from("/a"));
        blocked(
            &probe("root /a;\nlocation /.well-known/ { internal; }"),
            &["internal"],
        );
    }

    #[test]
    fn rewrites_and_returns() {
        let v = probe("root /a;\nrewrite ^/old/(.*)$ /new/$1 permanent;");
        assert_eq!(v, served_from("/a"), "does not match the validation path");
        blocked(
            &probe("root /a;\nrewrite ^ https://$host$request_uri? permanent;"),
            &["redirects", "/s.conf:4", "before any location"],
        );
        blocked(
            &probe("root /a;\nlocation / { return 301 https://$host$request_uri; }"),
            &["redirects", "in `location /` at /s.conf:4"],
        );
        assert!(matches!(
            probe("root /a;\nrewrite ^/(.*)$ /index.php?q=$1 last;"),
            Validation::Unknown(_)
        ));
    }

    #[test]
    fn if_conditions_are_evaluated_for_the_cas_request() {
        for (cond, then) in [
            ("($request_method !~ ^(GET|HEAD|POST)$ )", "return 444;"),
            ("(!-e $request_filename)", "rewrite ^ /index.php last;"),
            ("(-d $request_filename)", "return 403;"),
            ("($request_uri ~ ^/admin)", "return 403;"),
            ("($scheme = https)", "return 400;"),
        ] {
            let v = probe(&format!("root /a;\nif {cond} {{ {then} }}"));
            assert_eq!(v, served_from("/a"), "{cond}");
        }
        for cond in [
            "($scheme = http)",
            "($scheme != \"https\")",
            "($host = a.example.com)",
        ] {
            let v = probe(&format!(
                "root /a;\nif {cond} {{ return 301 https://$host$request_uri; }}"
            ));
            blocked(&v, &["under `if ($", "at /s.conf:4", "redirects"]);
        }
        match probe("root /a;\nif ($http_user_agent ~* bot) { return 403; }") {
            Validation::Unknown(why) => assert!(
                why.contains("`if ($http_user_agent ~* bot)` at /s.conf:4")
                    && why.contains("answers (`return 403`)"),
                "{why}"
            ),
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn includes_inside_locations_and_rules_of_http_count() {
        let dump = "# configuration file /etc/nginx/nginx.conf:\nhttp {\n  deny all;\n\
            \x20 server { root /a; location ^~ /.well-known/ { include snippets/acme.conf; } }\n\
            \x20 server { root /b; }\n}\n\
            # configuration file /etc/nginx/snippets/acme.conf:\nroot /srv/acme;\nallow all;\n";
        let v = vhosts(dump).unwrap();
        assert_eq!(v[0].validation, served_from("/srv/acme"));
        blocked(
            &v[1].validation,
            &["`deny all;` at /etc/nginx/nginx.conf:2"],
        );
    }

    #[test]
    fn an_alias_that_ends_in_the_location_is_a_root() {
        let v = probe("location ^~ /.well-known/ { alias /srv/acme/.well-known/; }");
        assert_eq!(v, served_from("/srv/acme"));
        let v = probe("location /.well-known/pki-validation/ { alias /srv/acme/; }");
        blocked(&v, &["alias /srv/acme/"]);
    }

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
        assert_eq!(l("[::]:443 ssl http2").port, 443);
        assert!(l("[::]:443 ssl http2").ssl);
        assert_eq!(l("443 quic reuseport").port, 443);
        assert!(l("443 quic reuseport").ssl);
        assert_eq!(l("*:80").port, 80);
    }
}
