//! The checker: reads the spanned TOML document section by section (one file each), reports
//! every problem with its line, merges `[defaults]` into each certificate.

mod agent;
mod api;
mod certificate;
mod fleet;

use std::collections::{BTreeMap, HashMap};
use std::fmt;
use std::net::SocketAddr;
use std::ops::Range;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};

use serde::Serialize;
use toml::Spanned;
use toml::de::{DeTable, DeValue};

use super::error::{Problem, suggest};
use super::keys::*;
use super::rules::{validate_certificate_name, validate_domain, validate_email};
use super::types::*;
use super::*;
use crate::values::endpoint::{DEFAULT_CONNECT_TIMEOUT, DEFAULT_TIMEOUT, normalize_base_url};
use crate::values::{Decimal, Secret};

type Val<'i> = Spanned<DeValue<'i>>;

/// A value found for a key, with where it was found.
struct Field<'t, 'i> {
    key: &'t str,
    key_span: Range<usize>,
    value: &'t Val<'i>,
    from_defaults: bool,
}

/// A table being read (a certificate is read through itself, then `[defaults]`).
struct Scope<'t, 'i> {
    context: String,
    header: Range<usize>,
    tables: Vec<(&'t DeTable<'i>, bool)>,
}

impl<'t, 'i> Scope<'t, 'i> {
    fn get(&self, key: &str) -> Option<Field<'t, 'i>> {
        self.tables.iter().find_map(|(table, from_defaults)| {
            table
                .iter()
                .find(|(k, _)| k.get_ref() == key)
                .map(|(k, v)| Field {
                    key: k.get_ref().as_ref(),
                    key_span: k.span(),
                    value: v,
                    from_defaults: *from_defaults,
                })
        })
    }
}

fn type_name(v: &DeValue<'_>) -> &'static str {
    match v {
        DeValue::String(_) => "a string",
        DeValue::Integer(_) => "an integer",
        DeValue::Float(_) => "a float",
        DeValue::Boolean(_) => "a boolean",
        DeValue::Datetime(_) => "a date-time",
        DeValue::Array(_) => "an array",
        DeValue::Table(_) => "a table",
    }
}

fn integer(v: &DeValue<'_>) -> Option<i128> {
    v.as_integer()
        .and_then(|i| i128::from_str_radix(i.as_str(), i.radix()).ok())
}

pub(super) struct Checker<'a> {
    text: &'a str,
    pub(super) problems: Vec<Problem>,
    pub(super) warnings: Vec<Problem>,
    /// Check that the programs of command keys exist and are executable.
    programs: bool,
    /// Read the files `[agent] include` names (only when read from a file).
    includes: bool,
    /// The included file being read; `None`: the main file.
    file: Option<PathBuf>,
    /// The main file's text while an included file is read: `[defaults]` lines are in it.
    main_text: Option<&'a str>,
    /// Offsets of the text's line breaks, for line numbers in O(log n).
    breaks: Vec<usize>,
}

fn breaks_of(text: &str) -> Vec<usize> {
    text.bytes()
        .enumerate()
        .filter(|(_, b)| *b == b'\n')
        .map(|(i, _)| i)
        .collect()
}

/// 1-based line of `span` in `text`.
fn line_in(text: &str, span: &Range<usize>) -> usize {
    let end = span.start.min(text.len());
    text.as_bytes()[..end]
        .iter()
        .filter(|&&b| b == b'\n')
        .count()
        + 1
}

impl<'a> Checker<'a> {
    pub(super) fn new(text: &'a str, programs: bool) -> Self {
        Self {
            text,
            problems: Vec::new(),
            warnings: Vec::new(),
            programs,
            includes: false,
            file: None,
            main_text: None,
            breaks: breaks_of(text),
        }
    }

    /// Also reads the files `[agent] include` names.
    pub(super) fn with_includes(mut self) -> Self {
        self.includes = true;
        self
    }

    fn line(&self, span: &Range<usize>) -> usize {
        self.breaks.partition_point(|&b| b < span.start) + 1
    }

    fn report(&mut self, span: &Range<usize>, context: &str, message: impl Into<String>) {
        let line = self.line(span);
        self.problems.push(Problem {
            file: self.file.clone(),
            line,
            context: context.to_owned(),
            message: message.into(),
        });
    }

    /// A problem with a field's value, reported at its key.
    fn bad(&mut self, scope: &Scope<'_, '_>, f: &Field<'_, '_>, message: impl fmt::Display) {
        let from = if f.from_defaults {
            " (from [defaults])"
        } else {
            ""
        };
        let msg = format!("`{}`{from}: {message}", f.key);
        // A value from [defaults] is in the main file, also while an included file is read.
        if f.from_defaults
            && let Some(main) = self.main_text
        {
            self.problems.push(Problem {
                file: None,
                line: line_in(main, &f.key_span),
                context: scope.context.clone(),
                message: msg,
            });
            return;
        }
        self.report(&f.key_span, &scope.context, msg);
    }

    fn missing(&mut self, scope: &Scope<'_, '_>, key: &str) {
        let msg = format!("missing required key `{key}`");
        self.report(&scope.header, &scope.context, msg);
    }

    /// Reports unknown keys of `table` (allowed: `known`), with a suggestion.
    fn unknown_keys(&mut self, table: &DeTable<'_>, context: &str, known: &[&str], section: &str) {
        for (k, _) in table.iter() {
            let key: &str = k.get_ref();
            if known.contains(&key) {
                continue;
            }
            let mut msg = format!("unknown key `{key}`");
            if let Some(s) = suggest(key, known) {
                msg.push_str(&format!(" (did you mean `{s}`?)"));
            } else if let Some(home) = home_of(key).filter(|h| *h != section) {
                msg.push_str(&format!(" (it belongs in {home})"));
            }
            self.report(&k.span(), context, msg);
        }
    }

    // ---- typed getters: `None` when absent or wrong (wrong is reported) ----

    fn string(&mut self, s: &Scope<'_, '_>, key: &str) -> Option<String> {
        let f = s.get(key)?;
        match f.value.get_ref() {
            DeValue::String(v) => Some(v.to_string()),
            other => {
                self.bad(
                    s,
                    &f,
                    format!("expected a string, found {}", type_name(other)),
                );
                None
            }
        }
    }

    /// A non-empty string.
    fn text(&mut self, s: &Scope<'_, '_>, key: &str) -> Option<String> {
        let v = self.string(s, key)?;
        if v.trim().is_empty() {
            let f = s.get(key)?;
            self.bad(s, &f, "must not be empty");
            return None;
        }
        Some(v)
    }

    fn boolean(&mut self, s: &Scope<'_, '_>, key: &str) -> Option<bool> {
        let f = s.get(key)?;
        match f.value.get_ref() {
            DeValue::Boolean(b) => Some(*b),
            other => {
                self.bad(
                    s,
                    &f,
                    format!("expected true or false, found {}", type_name(other)),
                );
                None
            }
        }
    }

    fn int(&mut self, s: &Scope<'_, '_>, key: &str, min: i128, max: i128) -> Option<i128> {
        let f = s.get(key)?;
        match integer(f.value.get_ref()) {
            Some(v) if (min..=max).contains(&v) => Some(v),
            Some(v) => {
                self.bad(s, &f, format!("must be between {min} and {max} (got {v})"));
                None
            }
            None => {
                let found = type_name(f.value.get_ref());
                self.bad(s, &f, format!("expected an integer, found {found}"));
                None
            }
        }
    }

    fn uint<T: TryFrom<i128>>(
        &mut self,
        s: &Scope<'_, '_>,
        key: &str,
        min: i128,
        max: i128,
    ) -> Option<T> {
        self.int(s, key, min, max).and_then(|v| T::try_from(v).ok())
    }

    /// An absolute path.
    fn path(&mut self, s: &Scope<'_, '_>, key: &str) -> Option<PathBuf> {
        let v = self.text(s, key)?;
        let f = s.get(key)?;
        self.absolute(s, &f, &v)
    }

    fn absolute(&mut self, s: &Scope<'_, '_>, f: &Field<'_, '_>, v: &str) -> Option<PathBuf> {
        if !v.starts_with('/') {
            self.bad(s, f, format!("{v:?} must be an absolute path"));
            return None;
        }
        Some(PathBuf::from(v))
    }

    fn choice<T: Copy>(
        &mut self,
        s: &Scope<'_, '_>,
        key: &str,
        options: &[(&str, T)],
    ) -> Option<T> {
        let v = self.string(s, key)?;
        if let Some((_, t)) = options.iter().find(|(name, _)| *name == v) {
            return Some(*t);
        }
        let f = s.get(key)?;
        let names: Vec<&str> = options.iter().map(|(n, _)| *n).collect();
        let hint = suggest(&v, &names)
            .map(|n| format!(" (did you mean {n:?}?)"))
            .unwrap_or_default();
        self.bad(
            s,
            &f,
            format!("{v:?} is not one of {}{hint}", names.join(", ")),
        );
        None
    }

    fn command(&mut self, s: &Scope<'_, '_>, key: &str) -> Option<Command> {
        let f = s.get(key)?;
        match f.value.get_ref() {
            DeValue::String(v) if !v.trim().is_empty() => {
                let c = Command::Shell(v.to_string());
                if self.programs
                    && let Some(program) = program_to_check(&c)
                    && let Err(why) = check_program(program)
                {
                    self.bad(s, &f, format!("program {program:?} {why}"));
                }
                Some(c)
            }
            DeValue::Array(items) => {
                let argv: Option<Vec<String>> = items
                    .iter()
                    .map(|i| i.get_ref().as_str().map(str::to_owned))
                    .collect();
                match argv {
                    Some(a) if a.first().is_some_and(|p| !p.is_empty()) => {
                        let c = Command::Argv(a);
                        if self.programs
                            && let Some(program) = program_to_check(&c)
                            && let Err(why) = check_program(program)
                        {
                            self.bad(s, &f, format!("program {program:?} {why}"));
                        }
                        Some(c)
                    }
                    _ => {
                        self.bad(
                            s,
                            &f,
                            "expected a non-empty array of strings (program first)",
                        );
                        None
                    }
                }
            }
            other => {
                let found = match other {
                    DeValue::String(_) => "an empty string",
                    o => type_name(o),
                };
                self.bad(
                    s,
                    &f,
                    format!("expected a command string or an array of strings, found {found}"),
                );
                None
            }
        }
    }

    // ---- the document ----

    pub(super) fn document(&mut self, path: &Path) -> Option<Config> {
        let root = match DeTable::parse(self.text) {
            Ok(root) => root,
            Err(e) => {
                let span = e.span().unwrap_or(0..0);
                let msg = format!("invalid TOML: {}", e.message().trim());
                self.report(&span, "syntax", msg);
                return None;
            }
        };
        let root = root.get_ref();
        self.unknown_keys(root, "top level", TOP_KEYS, "top level");

        let section = |name: &str| root.iter().find(|(k, _)| k.get_ref() == name);
        let table_of = |c: &mut Self, name: &str| -> Option<(&DeTable<'_>, Range<usize>)> {
            let (k, v) = section(name)?;
            match v.get_ref() {
                DeValue::Table(t) => Some((t, v.span())),
                other => {
                    let msg = format!(
                        "`{name}` must be a table ([{name}]), found {}",
                        type_name(other)
                    );
                    c.report(&k.span(), "top level", msg);
                    None
                }
            }
        };
        let api = table_of(self, "api");
        let agent = table_of(self, "agent");
        let fleet = table_of(self, "fleet");
        let defaults = table_of(self, "defaults");

        let api = match api {
            Some((t, header)) => self.api(t, header),
            None => {
                if section("api").is_none() {
                    self.report(&(0..0), "top level", "missing required section [api]");
                }
                None
            }
        };
        let empty = DeTable::default();
        let (agent_table, agent_header) = agent.unwrap_or((&empty, 0..0));
        let agent = self.agent(agent_table, agent_header);
        let fleet = match fleet {
            Some((t, header)) => self.fleet(t, header).map(Some),
            None => Some(None),
        };

        if let Some((t, _)) = defaults {
            for (k, _) in t.iter() {
                if CERT_ONLY_KEYS.contains(&k.get_ref().as_ref()) {
                    let msg = format!(
                        "`{}` cannot be set in [defaults]; set it in each [[certificate]]",
                        k.get_ref()
                    );
                    self.report(&k.span(), "[defaults]", msg);
                }
            }
            let mut allowed = SHARED_KEYS.to_vec();
            allowed.extend_from_slice(CERT_ONLY_KEYS);
            self.unknown_keys(t, "[defaults]", &allowed, "[defaults]");
        }
        let defaults_table = defaults.map(|(t, _)| t);

        let mut certificates = self.certificates_of(root, defaults_table);
        let mut fragments = Vec::new();
        let mut stamps: Vec<(PathBuf, include::Stamp)> = Vec::new();
        let mut from_cache = false;
        if self.includes
            && let Some(a) = &agent
            && !a.include.is_empty()
        {
            let span = agent_table
                .iter()
                .find(|(k, _)| k.get_ref() == "include")
                .map_or(0..0, |(k, _)| k.span());
            let base = path.parent().unwrap_or(Path::new("/"));
            for pattern in &a.include {
                match include::expand(pattern, base) {
                    Ok(files) => fragments.extend(files),
                    Err(e) => self.report(&span, "[agent]", format!("`include`: {e}")),
                }
            }
            fragments.dedup();
            // Unchanged since a run that found them valid: the kept certificates (the checks
            // across certificates held for the same main file and the same included files).
            let kept = self
                .problems
                .is_empty()
                .then(|| cache::lookup(&a.state_dir, path, self.text, &fragments, self.programs));
            if let Some(Some(hit)) = kept {
                for (file, mode) in fragments.iter().zip(hit.modes) {
                    self.writable_by_others(file, mode);
                }
                certificates.extend(hit.certificates.into_iter().map(|c| (c, Origin::KEPT)));
                from_cache = true;
            } else {
                let mut dir = include::Dir::default();
                for file in &fragments {
                    if let Some(stamp) =
                        self.fragment(&mut dir, file, &span, defaults_table, &mut certificates)
                    {
                        stamps.push((file.clone(), stamp));
                    }
                }
            }
        }
        if !from_cache {
            self.across_certificates(&certificates, path);
            if self.problems.is_empty()
                && stamps.len() == fragments.len()
                && !fragments.is_empty()
                && let Some(a) = &agent
            {
                let kept: Vec<(&CertificateConfig, Option<&Path>)> = certificates
                    .iter()
                    .map(|(c, o)| (c, o.file.as_deref()))
                    .collect();
                cache::store(&a.state_dir, path, self.text, &stamps, &kept);
            }
        }
        let certificates = certificates.into_iter().map(|(c, _)| c).collect();

        let agent = agent?;
        let api = api?;
        let fleet = fleet?;
        Some(Config {
            path: path.to_path_buf(),
            api,
            agent,
            fleet,
            certificates,
            fragments,
            warnings: Vec::new(),
        })
    }

    /// The `[[certificate]]` tables of a document, each with where its name is.
    fn certificates_of(
        &mut self,
        root: &DeTable<'_>,
        defaults: Option<&DeTable<'_>>,
    ) -> Vec<(CertificateConfig, Origin)> {
        let mut out = Vec::new();
        let Some((k, v)) = root.iter().find(|(k, _)| k.get_ref() == "certificate") else {
            return out;
        };
        match v.get_ref() {
            DeValue::Array(items) if items.iter().all(|i| i.get_ref().is_table()) => {
                for (i, item) in items.iter().enumerate() {
                    if let DeValue::Table(t) = item.get_ref()
                        && let Some(c) = self.certificate(i, t, item.span(), defaults)
                    {
                        let span = t
                            .iter()
                            .find(|(k, _)| k.get_ref() == "name")
                            .map_or(item.span(), |(k, _)| k.span());
                        let origin = Origin {
                            file: self.file.clone(),
                            line: self.line(&span),
                        };
                        out.push((c, origin));
                    }
                }
            }
            _ => {
                self.report(
                    &k.span(),
                    "top level",
                    "`certificate` must be written as [[certificate]] tables",
                );
            }
        }
        out
    }

    /// Reads an included file: `[[certificate]]` tables only, `[defaults]` of the main file
    /// applied, every problem naming the included file and its line.
    fn fragment(
        &mut self,
        dir: &mut include::Dir,
        file: &Path,
        include_span: &Range<usize>,
        defaults: Option<&DeTable<'_>>,
        certificates: &mut Vec<(CertificateConfig, Origin)>,
    ) -> Option<include::Stamp> {
        let (text, stamp) = match dir.read(file) {
            Ok((t, stamp)) => {
                self.writable_by_others(file, stamp.mode());
                (t, stamp)
            }
            Err(e) => {
                let msg = format!(
                    "`include`: could not read {}: {}",
                    file.display(),
                    crate::fsutil::io_text(&e)
                );
                self.report(include_span, "[agent]", msg);
                return None;
            }
        };
        let mut sub = Checker {
            text: &text,
            problems: Vec::new(),
            warnings: Vec::new(),
            programs: self.programs,
            includes: false,
            file: Some(file.to_path_buf()),
            main_text: Some(self.text),
            breaks: breaks_of(&text),
        };
        match DeTable::parse(&text) {
            Ok(root) => {
                let root = root.get_ref();
                for (k, _) in root.iter() {
                    if k.get_ref() != "certificate" {
                        let msg = format!(
                            "`{}`: an included file holds only [[certificate]] tables; set it \
                             in the main configuration file",
                            k.get_ref()
                        );
                        sub.report(&k.span(), "top level", msg);
                    }
                }
                certificates.extend(sub.certificates_of(root, defaults));
            }
            Err(e) => {
                let span = e.span().unwrap_or(0..0);
                let msg = format!("invalid TOML: {}", e.message().trim());
                sub.report(&span, "syntax", msg);
            }
        }
        self.problems.append(&mut sub.problems);
        self.warnings.append(&mut sub.warnings);
        Some(stamp)
    }

    /// Warns about an included file anyone may write to.
    fn writable_by_others(&mut self, file: &Path, mode: u32) {
        if mode & 0o002 != 0 {
            self.warnings.push(Problem {
                file: Some(file.to_path_buf()),
                line: 1,
                context: "include".into(),
                message: format!(
                    "writable by others (mode {:04o}); anyone could add a certificate or a \
                     command to it: chmod o-w it",
                    mode & 0o7777
                ),
            });
        }
    }
}

/// Where a certificate is defined: its file (`None`: the main file) and the line of its name.
pub(super) struct Origin {
    file: Option<PathBuf>,
    line: usize,
}

impl Origin {
    /// A certificate kept from an earlier run (no checks across certificates are made again).
    const KEPT: Origin = Origin {
        file: None,
        line: 0,
    };
}

/// The section a key belongs to, for "it belongs in [agent]".
fn home_of(key: &str) -> Option<&'static str> {
    if API_KEYS.contains(&key) {
        Some("[api]")
    } else if AGENT_KEYS.contains(&key) {
        Some("[agent]")
    } else if SHARED_KEYS.contains(&key) || CERT_ONLY_KEYS.contains(&key) {
        Some("[[certificate]]")
    } else {
        None
    }
}

/// `host:port` with a non-empty host and a port 1..=65535 (`[::1]:443` accepted).
fn valid_host_port(v: &str) -> bool {
    if v.parse::<SocketAddr>().is_ok() {
        return true;
    }
    match v.rsplit_once(':') {
        Some((host, port)) => {
            !host.is_empty()
                && !host.contains(['/', ' ', '[', ']'])
                && port.parse::<u16>().is_ok_and(|p| p > 0)
        }
        None => false,
    }
}

/// The kebab-case name of a config enum value.
fn serde_plain<T: Serialize>(v: T) -> String {
    serde_json::to_value(v)
        .ok()
        .and_then(|v| v.as_str().map(str::to_owned))
        .unwrap_or_default()
}

/// The program of `command` that is checked: an argv's first word; for a string run by
/// `/bin/sh -c`, only a leading absolute path.
pub(super) fn program_to_check(command: &Command) -> Option<&str> {
    match command {
        Command::Shell(v) => v.split_whitespace().next().filter(|p| p.starts_with('/')),
        Command::Argv(a) => a.first().map(String::as_str),
    }
}

/// A program path exists and is executable, or a bare name is found in `PATH` or the sbin
/// directories; otherwise why not.
pub(super) fn check_program(program: &str) -> Result<(), &'static str> {
    let executable =
        |p: &Path| std::fs::metadata(p).is_ok_and(|m| m.is_file() && m.mode() & 0o111 != 0);
    if program.contains('/') {
        let p = Path::new(program);
        if !p.is_absolute() {
            return Err("must be an absolute path or a bare program name");
        }
        return match std::fs::metadata(p) {
            Err(_) => Err("does not exist"),
            Ok(_) if executable(p) => Ok(()),
            Ok(_) => Err("is not an executable file"),
        };
    }
    crate::process::find_program(program)
        .map(|_| ())
        .ok_or("was not found in PATH or the sbin directories")
}
