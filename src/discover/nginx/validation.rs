//! Whether a `server` serves `/.well-known/pki-validation/` from a document root: its rewrite
//! phase, the location nginx chooses, the access rules there, then `root` or `alias`.

use std::path::PathBuf;

use super::PROBE;
use super::access::Guards;
use super::location::{Kind, body, describe, location_kind, lookup};
use super::regexes::Regexes;
use super::rewrite::{host_condition, rewrite_phase};
use super::tree::Directive;
use crate::dcv::DCV_URL_DIR;
use crate::discover::Validation;

/// Whether `/.well-known/pki-validation/` of the server whose directives are `list` is
/// served from a document root, and which.
pub(super) fn validation(
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
         ROOT{DCV_URL_DIR}/",
        describe(location)
    ))
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
