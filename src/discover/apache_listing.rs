//! The `apachectl -S` listing: every virtual host with the names apache shows for it and
//! where it was defined, a file and line or a mod_macro use (`macro 'NAME' (defined on line
//! D of "FILE") used on line U of "FILE":N`, nested when a macro uses another).

use std::collections::HashMap;

use super::{At, DiscoverError};

/// How deep a macro may be used from within macros before the listing is not followed.
pub(super) const MAX_MACRO_DEPTH: usize = 8;

/// One virtual host of the listing.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct Listed {
    pub origin: Origin,
    /// The names apache shows for it (`namevhost`, `alias`, `wild alias`), in order, once.
    pub names: Vec<String>,
}

/// Where a virtual host (or a `Use` line) was defined.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) enum Origin {
    /// A line of a configuration file.
    File(At),
    /// Line `line` of a macro's body (1-based, comment lines not counted) as used at `used`.
    Macro(Box<MacroUse>),
}

/// A use of a macro, as apache names it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct MacroUse {
    /// The macro's name (lower case, as apache shows it).
    pub name: String,
    /// The `<Macro>` line.
    pub defined: At,
    /// Where its `Use` line is.
    pub used: Origin,
    /// The line of the macro's body meant (1-based).
    pub line: usize,
}

impl Origin {
    /// The configuration file line this comes from: the file line itself, or the `Use` line
    /// (of the outermost macro use) that made it.
    pub(super) fn source(&self) -> &At {
        match self {
            Origin::File(at) => at,
            Origin::Macro(m) => m.used.source(),
        }
    }
}

/// Reads apache's `WHERE:LINE` (the inside of the parentheses of a listing line).
pub(super) fn parse_origin(loc: &str) -> Option<Origin> {
    let (place, line) = loc.rsplit_once(':')?;
    parse_place(place, line.parse().ok()?, 0)
}

fn parse_place(place: &str, line: usize, depth: usize) -> Option<Origin> {
    if let Some(rest) = place.strip_prefix("macro '") {
        if depth >= MAX_MACRO_DEPTH {
            return None;
        }
        let (name, rest) = rest.split_once("' (defined on line ")?;
        let (d, rest) = rest.split_once(" of \"")?;
        let (file, rest) = rest.split_once("\") used on line ")?;
        let (u, rest) = rest.split_once(" of \"")?;
        let inner = rest.strip_suffix('"')?;
        let used = parse_place(inner, u.parse().ok()?, depth + 1)?;
        return Some(Origin::Macro(Box::new(MacroUse {
            name: name.to_owned(),
            defined: At {
                file: file.to_owned(),
                line: d.parse().ok()?,
            },
            used,
            line,
        })));
    }
    place.starts_with('/').then(|| {
        Origin::File(At {
            file: place.to_owned(),
            line,
        })
    })
}

/// Every virtual host `apachectl -S` lists, in order, once each, with its names.
pub(super) fn listed(dump: &str) -> Result<Vec<Listed>, DiscoverError> {
    let mut out: Vec<Listed> = Vec::new();
    let mut index: HashMap<String, usize> = HashMap::new();
    let mut current: Option<usize> = None;
    for line in dump.lines() {
        let t = line.trim();
        let alias = t
            .strip_prefix("wild alias ")
            .or_else(|| t.strip_prefix("alias "));
        if let Some(name) = alias {
            if let Some(i) = current {
                push_name(&mut out[i].names, name.trim());
            }
            continue;
        }
        current = None;
        let Some((head, rest)) = t.split_once(" (") else {
            continue;
        };
        let Some(loc) = rest.strip_suffix(')') else {
            continue;
        };
        let Some(origin) = parse_origin(loc) else {
            continue;
        };
        let i = *index.entry(loc.to_owned()).or_insert_with(|| {
            out.push(Listed {
                origin,
                names: Vec::new(),
            });
            out.len() - 1
        });
        if let Some(name) = head.split_whitespace().last() {
            push_name(&mut out[i].names, name);
        }
        current = Some(i);
    }
    if out.is_empty() && !dump.contains("VirtualHost configuration") {
        return Err(DiscoverError::Parse {
            at: At {
                file: "(apachectl -S)".into(),
                line: 1,
            },
            message: "no virtual host with \"(FILE:LINE)\": this is not the output of \
                      `apachectl -S`"
                .into(),
        });
    }
    Ok(out)
}

fn push_name(names: &mut Vec<String>, name: &str) {
    if !name.is_empty() && !names.iter().any(|n| n.eq_ignore_ascii_case(name)) {
        names.push(name.to_owned());
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const F: &str = "/etc/apache2/sites-enabled/macro.conf";

    #[test]
    fn plain_and_macro_locations_with_their_names() {
        let s = format!(
            "VirtualHost configuration:\n\
*:80                   is a NameVirtualHost\n\
         default server test.com (macro 'vhost' (defined on line 1 of \"{F}\") used on line 11 of \"{F}\":1)\n\
         port 80 namevhost test.com (macro 'vhost' (defined on line 1 of \"{F}\") used on line 11 of \"{F}\":1)\n\
                 alias www.test.com\n\
                 wild alias *.test.com\n\
         port 80 namevhost nest.org (macro 'vhost' (defined on line 1 of \"{F}\") used on line 1 of \"macro 'outer' (defined on line 12 of \"{F}\") used on line 16 of \"{F}\"\":2)\n\
*:443                  10.0.0.1 (/etc/apache2/sites-enabled/default-ssl.conf:2)\n\
Main DocumentRoot: \"/var/www/html\"\n"
        );
        let l = listed(&s).unwrap();
        assert_eq!(l.len(), 3, "{l:?}");
        assert_eq!(l[0].names, ["test.com", "www.test.com", "*.test.com"]);
        assert_eq!(l[0].origin.source().to_string(), format!("{F}:11"));
        let Origin::Macro(m) = &l[1].origin else {
            panic!("{l:?}")
        };
        assert_eq!((m.name.as_str(), m.line), ("vhost", 2));
        assert_eq!(m.used.source().to_string(), format!("{F}:16"));
        assert!(matches!(&m.used, Origin::Macro(o) if o.name == "outer" && o.line == 1));
        assert_eq!(l[2].names, ["10.0.0.1"]);
        assert_eq!(
            l[2].origin,
            Origin::File(At {
                file: "/etc/apache2/sites-enabled/default-ssl.conf".into(),
                line: 2
            })
        );
    }

    #[test]
    fn hostile_locations_are_not_followed() {
        let mut deep = F.to_owned();
        for _ in 0..50 {
            deep = format!("macro 'm' (defined on line 1 of \"{F}\") used on line 1 of \"{deep}\"");
        }
        assert_eq!(parse_origin(&format!("{deep}:1")), None);
        assert_eq!(parse_origin("macro 'm' (defined on line x:1"), None);
        assert_eq!(parse_origin("relative.conf:1"), None);
        assert!(listed("garbage").is_err());
    }
}
