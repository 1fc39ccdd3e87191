//! mod_macro: the virtual hosts a `Use` line makes from a `<Macro>` template. The macro's
//! body is read from its file and the use's arguments are put in for its parameters as
//! mod_macro does (the earliest parameter in a line first, the longest name where several
//! start at one place; an `@` parameter's value in double quotes), so the paths a proposal
//! names are the ones apache uses for that site, and the macro needs no edit.

use std::collections::HashMap;
use std::path::Path;
use std::rc::Rc;

use super::apache::{split_words, vhost_from};
use super::apache_listing::{MacroUse, Origin};
use super::{At, DiscoverError, Vhost};

/// The most parameters a macro may take here.
const MAX_PARAMS: usize = 256;
/// The longest line a use may make (bytes).
const MAX_LINE: usize = 64 * 1024;

/// A line as apache reads it: continuation lines joined, trimmed; the lines it spans.
struct Logical {
    first: usize,
    last: usize,
    text: String,
}

/// Reads a file: its content, or why not.
type Read<'r> = Box<dyn FnMut(&str) -> Result<String, String> + 'r>;

/// A macro's parameters and its body lines (line number, text).
type Definition = (Vec<String>, Vec<(usize, String)>);

/// The configuration files read, each once.
pub(super) struct Files<'r> {
    read: Read<'r>,
    texts: HashMap<String, Rc<str>>,
    logical: HashMap<String, Rc<Vec<Logical>>>,
}

impl<'r> Files<'r> {
    /// Files read by `read` (path to content, or why not).
    pub(super) fn new(read: impl FnMut(&str) -> Result<String, String> + 'r) -> Self {
        Self {
            read: Box::new(read),
            texts: HashMap::new(),
            logical: HashMap::new(),
        }
    }

    /// The content of `path`.
    pub(super) fn text(&mut self, path: &str) -> Result<Rc<str>, DiscoverError> {
        if let Some(t) = self.texts.get(path) {
            return Ok(t.clone());
        }
        let text: Rc<str> = (self.read)(path)
            .map_err(|e| DiscoverError::Other(format!("{path}: {e} (named by apachectl -S)")))?
            .into();
        self.texts.insert(path.to_owned(), text.clone());
        Ok(text)
    }

    fn logical(&mut self, path: &str) -> Result<Rc<Vec<Logical>>, DiscoverError> {
        if let Some(l) = self.logical.get(path) {
            return Ok(l.clone());
        }
        let text = self.text(path)?;
        let mut out = Vec::new();
        let mut pending = String::new();
        let mut first = 0;
        for (i, raw) in text.lines().enumerate() {
            if pending.is_empty() {
                first = i + 1;
            }
            if let Some(cont) = raw.strip_suffix('\\') {
                pending.push_str(cont);
                pending.push(' ');
                continue;
            }
            pending.push_str(raw);
            out.push(Logical {
                first,
                last: i + 1,
                text: std::mem::take(&mut pending).trim().to_owned(),
            });
        }
        let l = Rc::new(out);
        self.logical.insert(path.to_owned(), l.clone());
        Ok(l)
    }

    /// The line of `path` that spans line `line`.
    fn line_at(&mut self, path: &str, line: usize) -> Result<String, String> {
        let lines = self.logical(path).map_err(|e| e.to_string())?;
        spanning(&lines, line)
            .map(|i| lines[i].text.clone())
            .ok_or_else(|| format!("{path} has no line {line}"))
    }
}

/// The index of the line of `lines` (in order, as [`Files::logical`] makes them) that spans
/// file line `line`.
fn spanning(lines: &[Logical], line: usize) -> Option<usize> {
    let i = lines.partition_point(|l| l.last < line);
    lines.get(i).filter(|l| l.first <= line).map(|_| i)
}

/// A line of a macro's body for one use: as written, and with the arguments put in.
#[derive(Debug, Clone)]
pub(super) struct BodyLine {
    /// Its line in the macro's file.
    pub line: usize,
    pub raw: String,
    pub text: String,
}

/// A macro's body as one use makes it.
#[derive(Debug)]
pub(super) struct Expanded {
    /// The file of the `<Macro>`.
    pub file: String,
    /// Body lines as apache counts them (comment lines left out).
    pub lines: Vec<BodyLine>,
    /// Each parameter with the use's value.
    pub args: Vec<(String, String)>,
}

/// The body of the macro of `m` as its use makes it.
pub(super) fn expand(m: &MacroUse, files: &mut Files<'_>) -> Result<Expanded, String> {
    let (params, body) = definition(m, files)?;
    let use_line = match &m.used {
        Origin::File(at) => files.line_at(&at.file, at.line)?,
        Origin::Macro(outer) => {
            let x = expand(outer, files)?;
            x.lines
                .get(outer.line.wrapping_sub(1))
                .map(|l| l.text.clone())
                .ok_or_else(|| format!("macro '{}' has no line {}", outer.name, outer.line))?
        }
    };
    let words = split_words(&use_line);
    let is_use = words.first().is_some_and(|w| w.eq_ignore_ascii_case("use"))
        && words
            .get(1)
            .is_some_and(|w| w.eq_ignore_ascii_case(&m.name));
    if !is_use {
        return Err(format!("{} is not `Use {} ...`", m.used.source(), m.name));
    }
    let values = &words[2..];
    if values.len() != params.len() {
        return Err(format!(
            "`Use {}` at {} gives {} argument(s), the macro takes {}",
            m.name,
            m.used.source(),
            values.len(),
            params.len()
        ));
    }
    let args: Vec<(String, String)> = params.into_iter().zip(values.iter().cloned()).collect();
    let mut lines = Vec::with_capacity(body.len());
    for (line, raw) in body {
        let text =
            substitute(&raw, &args).map_err(|e| format!("{}:{line}: {e}", m.defined.file))?;
        lines.push(BodyLine { line, raw, text });
    }
    Ok(Expanded {
        file: m.defined.file.clone(),
        lines,
        args,
    })
}

/// The parameters and body lines (line number, text) of the `<Macro>` of `m`.
fn definition(m: &MacroUse, files: &mut Files<'_>) -> Result<Definition, String> {
    let lines = files.logical(&m.defined.file).map_err(|e| e.to_string())?;
    let start = spanning(&lines, m.defined.line)
        .ok_or_else(|| format!("{} has no line {}", m.defined.file, m.defined.line))?;
    let words = split_words(&lines[start].text);
    let opens = words
        .first()
        .is_some_and(|w| w.eq_ignore_ascii_case("<macro"));
    let name = words.get(1).map(|w| w.trim_end_matches('>'));
    if !opens || !name.is_some_and(|n| n.eq_ignore_ascii_case(&m.name)) {
        return Err(format!("{} is not `<Macro {}>`", m.defined, m.name));
    }
    let params: Vec<String> = words[2..]
        .iter()
        .map(|w| w.trim_end_matches('>').to_owned())
        .filter(|w| !w.is_empty())
        .collect();
    if params.len() > MAX_PARAMS {
        return Err(format!(
            "macro '{}' at {} takes {} parameters: more than {MAX_PARAMS}, not read",
            m.name,
            m.defined,
            params.len()
        ));
    }
    let mut body = Vec::new();
    let mut depth = 1usize;
    for l in &lines[start + 1..] {
        if l.text.starts_with('#') {
            continue;
        }
        let first = l.text.split_whitespace().next().unwrap_or_default();
        let first = first.to_ascii_lowercase();
        if first.starts_with("</macro") {
            depth -= 1;
            if depth == 0 {
                return Ok((params, body));
            }
        } else if first.starts_with("<macro") {
            depth += 1;
        }
        body.push((l.first, l.text.clone()));
    }
    Err(format!("<Macro {}> at {} is not closed", m.name, m.defined))
}

/// `line` with each parameter of `args` replaced by its value, as mod_macro does.
fn substitute(line: &str, args: &[(String, String)]) -> Result<String, String> {
    let mut out = String::with_capacity(line.len());
    let mut rest = line;
    loop {
        let mut best: Option<(usize, usize)> = None;
        for (i, (p, _)) in args.iter().enumerate() {
            if p.is_empty() {
                continue;
            }
            if let Some(pos) = rest.find(p.as_str()) {
                let better =
                    best.is_none_or(|(bp, bi)| pos < bp || pos == bp && p.len() > args[bi].0.len());
                if better {
                    best = Some((pos, i));
                }
            }
        }
        let Some((pos, i)) = best else {
            out.push_str(rest);
            return Ok(out);
        };
        let (p, v) = &args[i];
        out.push_str(&rest[..pos]);
        if p.starts_with('@') {
            out.push('"');
            for c in v.chars() {
                if c == '"' || c == '\\' {
                    out.push('\\');
                }
                out.push(c);
            }
            out.push('"');
        } else {
            out.push_str(v);
        }
        rest = &rest[pos + p.len()..];
        if out.len() > MAX_LINE {
            return Err(format!(
                "the arguments make a line longer than {MAX_LINE} bytes"
            ));
        }
    }
}

/// The path directives whose values the macro's parameters make.
const PATHS: [&str; 5] = [
    "documentroot",
    "sslcertificatefile",
    "sslcertificatekeyfile",
    "sslcertificatechainfile",
    "alias",
];

/// The virtual host `m` makes: its block read from the expanded body, named as apache lists
/// it (`names`), placed at the `Use` line, and saying which macro and values made it.
pub(super) fn macro_vhost(
    m: &MacroUse,
    x: &Expanded,
    names: &[String],
    main_root: Option<&Path>,
) -> Result<Vhost, DiscoverError> {
    let from = m.line.saturating_sub(1);
    let block_at = At {
        file: x.file.clone(),
        line: x.lines.get(from).map_or(m.defined.line, |l| l.line),
    };
    let lines = x.lines.iter().skip(from).map(|l| (l.line, l.text.as_str()));
    let mut v = vhost_from(lines, &block_at, main_root)?;
    v.at = m.used.source().clone();
    v.names = names.to_vec();
    let mut made = Vec::new();
    for l in x.lines.iter().skip(from) {
        let first = l.text.split_whitespace().next().unwrap_or_default();
        let lower = first.to_ascii_lowercase();
        if lower.starts_with("</virtualhost") {
            break;
        }
        if l.raw != l.text && PATHS.contains(&lower.as_str()) {
            made.push(format!("`{}` (in the macro: `{}`)", l.text, l.raw));
        }
    }
    let values: Vec<String> = x.args.iter().map(|(p, v)| format!("{p}={v}")).collect();
    let mut said = format!(
        "made by macro '{}' (defined at {}) used at {}{}",
        m.name,
        m.defined,
        v.at,
        if values.is_empty() {
            String::new()
        } else {
            format!(" with {}", values.join(", "))
        }
    );
    if !made.is_empty() {
        said.push_str(&format!(
            "; paths with this use's values put in: {}",
            made.join(", ")
        ));
    }
    v.from_macro = Some(said);
    Ok(v)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::discover::apache_listing::parse_origin;

    const F: &str = "/etc/apache2/sites-enabled/macro.conf";

    fn files(text: &str) -> Files<'_> {
        Files::new(move |p| {
            if p == F {
                Ok(text.to_owned())
            } else {
                Err("no such file".into())
            }
        })
    }

    fn use_of(loc: &str) -> MacroUse {
        match parse_origin(loc) {
            Some(Origin::Macro(m)) => *m,
            o => panic!("{o:?}"),
        }
    }

    #[test]
    fn longest_parameter_first_and_quoted_at_parameters() {
        let args = [
            ("$d".to_owned(), "x".to_owned()),
            ("$domain".to_owned(), "example.com".to_owned()),
            ("@root".to_owned(), "/srv/my \"site\"".to_owned()),
        ];
        assert_eq!(
            substitute("ServerName www.$domain $d$domain", &args).unwrap(),
            "ServerName www.example.com xexample.com"
        );
        assert_eq!(
            substitute("DocumentRoot @root", &args).unwrap(),
            "DocumentRoot \"/srv/my \\\"site\\\"\""
        );
        assert_eq!(
            split_words(&substitute("DocumentRoot @root", &args).unwrap())[1],
            "/srv/my \"site\""
        );
        let args = [("%port".to_owned(), "8443".to_owned())];
        assert_eq!(
            substitute("<VirtualHost *:%port>", &args).unwrap(),
            "<VirtualHost *:8443>"
        );
        // A value is not substituted again.
        let args = [
            ("$a".to_owned(), "$b".to_owned()),
            ("$b".to_owned(), "z".to_owned()),
        ];
        assert_eq!(substitute("$a $b", &args).unwrap(), "$b z");
        let big = [("$a".to_owned(), "x".repeat(MAX_LINE))];
        assert!(substitute("$a $a", &big).is_err());
    }

    const BODY: &str = "<Macro VHost $name $domain>\n\
        \n\
        # a comment\n\
        <VirtualHost *:443>\n\
        \x20 ServerName $domain\n\
        \x20 ServerAlias www.$domain\n\
        \x20 DocumentRoot \"/var/www/$name\"\n\
        \x20 sslengine On\n\
        \x20 SSLCertificateFile \"/etc/ssl/$name.crt\"\n\
        \x20 SSLCertificateKeyFile /etc/ssl/$name.key\n\
        </VirtualHost>\n\
        </macro>\n\
        <Macro Outer $n>\n\
        \x20 Use VHost $n-in $n.org\n\
        </Macro>\n\
        use vhost \"site one\" \\\n\
        \x20  one.example.com\n\
        Use Outer nest\n\
        Use VHost too many arguments\n";

    #[test]
    fn a_use_made_into_its_virtual_host() {
        let mut f = files(BODY);
        let m = use_of(&format!(
            "macro 'vhost' (defined on line 1 of \"{F}\") used on line 17 of \"{F}\":2"
        ));
        let x = expand(&m, &mut f).unwrap();
        let names = [
            "one.example.com".to_owned(),
            "www.one.example.com".to_owned(),
        ];
        let v = macro_vhost(&m, &x, &names, None).unwrap();
        assert_eq!(v.at.to_string(), format!("{F}:17"));
        assert_eq!(v.names, names);
        assert!(v.tls);
        assert_eq!(v.root.as_deref(), Some(Path::new("/var/www/site one")));
        assert_eq!(
            v.cert_file.as_deref(),
            Some(Path::new("/etc/ssl/site one.crt"))
        );
        let said = v.from_macro.unwrap();
        assert!(
            said.contains("macro 'vhost'")
                && said.contains("$name=site one")
                && said.contains("(in the macro: `SSLCertificateFile \"/etc/ssl/$name.crt\"`)"),
            "{said}"
        );
        // Used from within another macro.
        let nested = use_of(&format!(
            "macro 'vhost' (defined on line 1 of \"{F}\") used on line 1 of \"macro 'outer' \
             (defined on line 13 of \"{F}\") used on line 18 of \"{F}\"\":2"
        ));
        let x = expand(&nested, &mut f).unwrap();
        let v = macro_vhost(&nested, &x, &["nest.org".into()], None).unwrap();
        assert_eq!(v.root.as_deref(), Some(Path::new("/var/www/nest-in")));
        assert_eq!(v.at.to_string(), format!("{F}:18"));
    }

    #[test]
    fn uses_that_do_not_fit_are_errors_not_panics() {
        let mut f = files(BODY);
        for (loc, says) in [
            ("used on line 19 of \"{F}\":2", "gives 3 argument(s)"),
            ("used on line 99 of \"{F}\":2", "has no line 99"),
            ("used on line 5 of \"{F}\":2", "is not `Use vhost"),
        ] {
            let loc = format!(
                "macro 'vhost' (defined on line 1 of \"{F}\") {}",
                loc.replace("{F}", F)
            );
            let e = expand(&use_of(&loc), &mut f).unwrap_err();
            assert!(e.contains(says), "{e}");
        }
        let wrong_def = use_of(&format!(
            "macro 'vhost' (defined on line 4 of \"{F}\") used on line 17 of \"{F}\":2"
        ));
        assert!(expand(&wrong_def, &mut f).is_err());
        let unclosed = "<Macro M $a>\n<VirtualHost *:80>\n";
        let mut f = files(unclosed);
        let m = use_of(&format!(
            "macro 'm' (defined on line 1 of \"{F}\") used on line 1 of \"{F}\":1"
        ));
        assert!(expand(&m, &mut f).unwrap_err().contains("not closed"));
        let many: String = (0..300).map(|i| format!(" $p{i}")).collect();
        let text = format!("<Macro M{many}>\n</Macro>\n");
        let mut f = files(&text);
        assert!(expand(&m, &mut f).unwrap_err().contains("more than 256"));
    }
}
