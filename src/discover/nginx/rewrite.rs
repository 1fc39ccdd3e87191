//! The rewrite phase for the CA's request: `return`, `rewrite`, and `if` with its condition
//! evaluated where it can be (the request's method, URI, scheme, port; host comparisons).

use super::PROBE;
use super::regexes::Regexes;
use super::tree::Directive;
use crate::discover::Validation;

/// What a directive of the rewrite phase (`return`, `rewrite`, `if`) does to [`PROBE`], or
/// `None` when it lets it through. `place`: where it stands, for the reason.
pub(super) fn rewrite_phase(
    d: &Directive,
    place: &str,
    regexes: &mut Regexes,
) -> Option<Validation> {
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
pub(super) fn host_condition(args: &[String]) -> bool {
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
