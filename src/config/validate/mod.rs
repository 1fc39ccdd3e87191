//! Validation of the configuration: the checker reads the spanned TOML document section by section (one file each), reports
//! every problem with its line, merges `[defaults]` into each certificate.

mod acme;
mod agent;
mod api;
mod certificate;
mod dcv;
mod document;
mod fleet;
mod preflight;
mod revocation;
mod split;
mod validation;

use std::collections::{BTreeMap, HashMap};
use std::fmt;
use std::net::SocketAddr;
use std::ops::Range;
use std::path::{Path, PathBuf};

use serde::Serialize;
use toml::Spanned;
use toml::de::{DeTable, DeValue};

use super::defs::{self, Key, Kind};
use super::error::{Problem, suggest};
use super::rules::{
    check_program, program_to_check, validate_certificate_name, validate_domain, validate_email,
};
use super::types::*;
use super::*;
use crate::values::endpoint::normalize_base_url;
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
    /// The line breaks of the main file (of the rest of it, when it is read in parts) while
    /// an included file is read: `[defaults]` lines are in it.
    main_breaks: Option<&'a [usize]>,
    /// Offsets of the text's line breaks, for line numbers in O(log n).
    breaks: Vec<usize>,
    /// While a part of a document read in parts ([`split`]) is read: where in the text it
    /// begins (its spans count from there).
    base: Option<usize>,
    /// The line breaks of the rest of a document read in parts (its spans are offsets of
    /// [`split::Parts::head`]).
    head_breaks: Option<Vec<usize>>,
    /// Documents from this size on are read in parts ([`split::SPLIT_FROM`]).
    split_from: usize,
    /// Each program checked so far, and what its check found: thousands of certificates
    /// naming the same reload command cost one check of it.
    checked: HashMap<String, Result<(), &'static str>>,
    /// The names of the `[acme.NAME]` tables, for the certificates' `issuer`.
    acme_names: Vec<String>,
}

fn breaks_of(text: &str) -> Vec<usize> {
    text.bytes()
        .enumerate()
        .filter(|(_, b)| *b == b'\n')
        .map(|(i, _)| i)
        .collect()
}

/// 1-based line of the byte `offset` of a text whose line breaks are `breaks`.
fn line_in(breaks: &[usize], offset: usize) -> usize {
    breaks.partition_point(|&b| b < offset) + 1
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
            main_breaks: None,
            breaks: breaks_of(text),
            base: None,
            head_breaks: None,
            split_from: split::SPLIT_FROM,
            checked: HashMap::new(),
            acme_names: Vec::new(),
        }
    }

    /// [`check_program`], once per program.
    fn program_fails(&mut self, program: &str) -> Option<&'static str> {
        if let Some(found) = self.checked.get(program) {
            return found.err();
        }
        let found = check_program(program);
        self.checked.insert(program.to_owned(), found);
        found.err()
    }

    /// Also reads the files `[agent] include` names.
    pub(super) fn with_includes(mut self) -> Self {
        self.includes = true;
        self
    }

    /// Reads a document of any size in parts (`true`) or whole (`false`): the tests and the
    /// fuzz target compare the two.
    pub(super) fn split(mut self, always: bool) -> Self {
        self.split_from = if always { 0 } else { usize::MAX };
        self
    }

    /// The line of `span`, a span of the tables being read.
    fn line(&self, span: &Range<usize>) -> usize {
        match self.base {
            Some(base) => line_in(&self.breaks, base + span.start),
            None => self.head_line(span.start),
        }
    }

    /// The line breaks of the document outside its parts: of the rest of it when it is read
    /// in parts, else of the text.
    fn head_breaks(&self) -> &[usize] {
        self.head_breaks.as_deref().unwrap_or(&self.breaks)
    }

    /// The line of `offset` in the document outside its parts.
    fn head_line(&self, offset: usize) -> usize {
        line_in(self.head_breaks(), offset)
    }

    /// The line of a key: a key of `[defaults]` is in the document outside its parts.
    fn field_line(&self, key_span: &Range<usize>, from_defaults: bool) -> usize {
        if from_defaults {
            self.head_line(key_span.start)
        } else {
            self.line(key_span)
        }
    }

    /// A problem at `line` of the file being read.
    fn report_at(&mut self, line: usize, context: &str, message: impl Into<String>) {
        self.problems.push(Problem {
            file: self.file.clone(),
            line,
            context: context.to_owned(),
            message: message.into(),
        });
    }

    fn report(&mut self, span: &Range<usize>, context: &str, message: impl Into<String>) {
        self.report_at(self.line(span), context, message);
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
            && let Some(main) = self.main_breaks
        {
            self.problems.push(Problem {
                file: None,
                line: line_in(main, f.key_span.start),
                context: scope.context.clone(),
                message: msg,
            });
            return;
        }
        let line = self.field_line(&f.key_span, f.from_defaults);
        self.report_at(line, &scope.context, msg);
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
            } else if let Some(home) = defs::home_of(key).filter(|h| *h != section) {
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

    /// A number declared in `defs/` (`Int`, `Seconds`): its value when it is in the declared
    /// range, else its declared default (none: the key is optional). A value of another type
    /// or out of range is reported.
    fn number<T: TryFrom<u64>>(&mut self, s: &Scope<'_, '_>, key: &Key) -> Option<T> {
        let (min, max, default) = key.kind.range()?;
        self.int(s, key.name, i128::from(min), i128::from(max))
            .and_then(|v| u64::try_from(v).ok())
            .or(default)
            .and_then(|v| T::try_from(v).ok())
    }

    /// [`Checker::number`] of a key declared with a default (`T::default()` for one without:
    /// a test holds every declared default to the effective configuration).
    fn setting<T: TryFrom<u64> + Default>(&mut self, s: &Scope<'_, '_>, key: &Key) -> T {
        self.number(s, key).unwrap_or_default()
    }

    /// A boolean declared in `defs/`: its value, else its declared default.
    fn flag(&mut self, s: &Scope<'_, '_>, key: &Key) -> bool {
        self.boolean(s, key.name)
            .unwrap_or_else(|| key.flag_default())
    }

    /// A fraction declared in `defs/`: a float above 0 and below 1, else its declared
    /// default; `None` when the value is wrong (reported).
    fn fraction(&mut self, s: &Scope<'_, '_>, key: &Key) -> Option<f64> {
        let Kind::Fraction {
            default,
            what,
            example,
        } = key.kind
        else {
            return None;
        };
        let Some(f) = s.get(key.name) else {
            return Some(default);
        };
        let x = match f.value.get_ref() {
            DeValue::Float(x) => x
                .as_str()
                .parse::<f64>()
                .ok()
                .filter(|x| *x > 0.0 && *x < 1.0),
            _ => None,
        };
        if x.is_none() {
            self.bad(
                s,
                &f,
                format!("expected a fraction {what} above 0 and below 1 (such as {example})"),
            );
        }
        x
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

    /// A choice declared in `defs/`: one of its options, read as the enum `T` whose serde
    /// names they are; else its declared default (none: `None`). A value that is not one of
    /// the options is reported, with a suggestion.
    fn choice<T: serde::de::DeserializeOwned>(
        &mut self,
        s: &Scope<'_, '_>,
        key: &Key,
    ) -> Option<T> {
        let Kind::Choice { options, default } = key.kind else {
            return None;
        };
        let picked = match self.string(s, key.name) {
            Some(v) if options.contains(&v.as_str()) => Some(v),
            Some(v) => {
                if let Some(f) = s.get(key.name) {
                    let hint = suggest(&v, options)
                        .map(|n| format!(" (did you mean {n:?}?)"))
                        .unwrap_or_default();
                    self.bad(
                        s,
                        &f,
                        format!("{v:?} is not one of {}{hint}", options.join(", ")),
                    );
                }
                None
            }
            None => None,
        };
        let name = picked.as_deref().or(default)?;
        T::deserialize(serde::de::value::StrDeserializer::<serde::de::value::Error>::new(name)).ok()
    }

    fn command(&mut self, s: &Scope<'_, '_>, key: &str) -> Option<CommandLine> {
        let f = s.get(key)?;
        match f.value.get_ref() {
            DeValue::String(v) if !v.trim().is_empty() => {
                let c = CommandLine::Shell(v.to_string());
                if self.programs
                    && let Some(program) = program_to_check(&c)
                    && let Some(why) = self.program_fails(program)
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
                        let c = CommandLine::Argv(a);
                        if self.programs
                            && let Some(program) = program_to_check(&c)
                            && let Some(why) = self.program_fails(program)
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
