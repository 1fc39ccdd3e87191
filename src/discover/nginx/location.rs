//! nginx's choice of `location` for the CA's request (`ngx_http_core_find_location`): exact,
//! longest prefix, `^~`, regular expressions in order, nested locations.

use super::PROBE;
use super::regexes::Regexes;
use super::tree::Directive;
use crate::dcv::DCV_URL_DIR;

/// The forms of `location`.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(super) enum Kind {
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
pub(super) fn location_kind(args: &[String]) -> Option<(Kind, &str)> {
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
pub(super) fn describe(d: &Directive) -> String {
    format!("`location {}` at {}", d.args.join(" "), d.at)
}

/// The `location` nginx chooses for [`PROBE`] among those of one level (a server's, or
/// those nested in a location): the chosen location and the ones it is nested in, outermost
/// first; `done` when regular expressions of enclosing levels are no longer tried.
pub(super) struct Lookup<'d> {
    pub path: Vec<&'d Directive>,
    pub done: bool,
}

/// nginx's choice (`ngx_http_core_find_location`): an exact match wins; else the longest
/// prefix, then the locations nested in it; unless that prefix is `^~`, the regular
/// expressions of this level in their order, the first that matches (and the locations
/// nested in it) winning; else the prefix. `Err`: a regular expression that has to be tried
/// cannot be evaluated here, named with the reason.
pub(super) fn lookup<'d>(
    list: &'d [Directive],
    regexes: &mut Regexes,
) -> Result<Lookup<'d>, String> {
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
                     {DCV_URL_DIR}/",
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

/// The directives in `d`'s block.
pub(super) fn body(d: &Directive) -> &[Directive] {
    d.block.as_deref().unwrap_or_default()
}
