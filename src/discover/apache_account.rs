//! Every name `apachectl -S` lists ends up in a proposal or under "left out" with the reason:
//! names apache shows that no `ServerName`/`ServerAlias` of the block gives (a block without
//! `ServerName` is shown with the main server's name or the host's address), and the names of
//! macro uses whose body could not be read.

use std::collections::HashSet;

use super::apache_listing::Listed;
use super::propose::unmanageable;
use super::{Discovery, Skipped, Vhost};

/// A name as proposals and "left out" carry it: lower case, without a trailing dot.
fn normal(name: &str) -> String {
    let lower = name.to_ascii_lowercase();
    match lower.strip_suffix('.') {
        Some(bare) if !bare.is_empty() && !bare.ends_with('.') => bare.to_owned(),
        _ => lower,
    }
}

/// Adds to `found.skipped` each name of `listed` that is neither proposed nor left out yet.
/// `made[k]`: the entry of `listed` that `found.vhosts[k]` was read from; `unread`: entries
/// (index, why) that gave no virtual host.
pub(super) fn account(
    found: &mut Discovery,
    listed: &[Listed],
    made: &[usize],
    unread: &[(usize, String)],
) {
    let mut accounted: HashSet<String> = found
        .proposals
        .iter()
        .flat_map(|p| p.domains.iter().map(|d| normal(d)))
        .chain(found.skipped.iter().map(|s| normal(&s.name)))
        .collect();
    for (k, &i) in made.iter().enumerate() {
        let Some(v) = found.vhosts.get(k) else {
            continue;
        };
        let Some(l) = listed.get(i) else { continue };
        for name in &l.names {
            let n = normal(name);
            if accounted.insert(n.clone()) {
                let reason = reason(&n, v);
                found.skipped.push(Skipped {
                    name: n,
                    at: v.at.clone(),
                    reason,
                });
            }
        }
    }
    for (i, why) in unread {
        let Some(l) = listed.get(*i) else { continue };
        for name in &l.names {
            let n = normal(name);
            if accounted.insert(n.clone()) {
                found.skipped.push(Skipped {
                    name: n,
                    at: l.origin.source().clone(),
                    reason: format!(
                        "made by a mod_macro use whose virtual host could not be read ({why}); \
                         check it by hand"
                    ),
                });
            }
        }
    }
}

/// Why `name`, listed by apache for `v` but not proposed, is left out.
fn reason(name: &str, v: &Vhost) -> String {
    let why = unmanageable(name);
    if v.names.is_empty() {
        let shown = if name.parse::<std::net::IpAddr>().is_ok() {
            "the host's address"
        } else {
            "the main server's name"
        };
        return format!(
            "the <VirtualHost> block has no ServerName: apache shows {shown} for it, a \
             default virtual host rather than a site{}; give the block a ServerName to manage \
             a site there",
            why.map(|w| format!(" ({w})")).unwrap_or_default()
        );
    }
    why.unwrap_or_else(|| {
        "listed by apachectl -S but named by no ServerName or ServerAlias of the \
         <VirtualHost> block: add it there to manage it"
            .into()
    })
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeSet;

    use crate::discover::{apache_from, nginx};

    const M: &str = "/etc/apache2/sites-enabled/macros.conf";
    const D: &str = "/etc/apache2/sites-enabled/default-ssl.conf";

    /// Names listed = names proposed + names left out, each name once.
    fn counted(listed: &BTreeSet<String>, found: &crate::discover::Discovery) {
        let proposed: BTreeSet<String> = found
            .proposals
            .iter()
            .flat_map(|p| p.domains.iter().cloned())
            .collect();
        let left: BTreeSet<String> = found.skipped.iter().map(|s| s.name.clone()).collect();
        assert!(proposed.is_disjoint(&left), "{proposed:?} {left:?}");
        let both: BTreeSet<String> = proposed.union(&left).cloned().collect();
        assert_eq!(&both, listed, "proposed {proposed:?}, left out {left:?}");
        assert_eq!(listed.len(), proposed.len() + left.len());
    }

    #[test]
    fn every_name_apache_lists_is_proposed_or_left_out() {
        let macros = "<Macro VHost $name $domain>\n<VirtualHost *:80>\n  ServerName $domain\n  \
            ServerAlias www.$domain *.$domain\n  DocumentRoot /var/www/$name\n</VirtualHost>\n\
            </Macro>\nUse VHost one one.example\nUse VHost two two.example\n\
            Use VHost broken\n";
        let default = "<VirtualHost _default_:443>\n  SSLEngine on\n</VirtualHost>\n\
            <VirtualHost *:80>\n  ServerName LOCALHOST\n  ServerAlias 192.0.2.1\n</VirtualHost>\n";
        let u = |line: usize| {
            format!(
                "(macro 'vhost' (defined on line 1 of \"{M}\") used on line {line} of \"{M}\":1)"
            )
        };
        let listing = format!(
            "VirtualHost configuration:\n\
             *:443                  192.0.2.7 ({D}:1)\n\
             *:80                   is a NameVirtualHost\n\
             \x20        default server one.example {u8}\n\
             \x20        port 80 namevhost one.example {u8}\n\
             \x20                alias www.one.example\n\
             \x20                wild alias *.one.example\n\
             \x20        port 80 namevhost two.example {u9}\n\
             \x20                alias www.two.example\n\
             \x20                wild alias *.two.example\n\
             \x20        port 80 namevhost broken.example {u10}\n\
             \x20        port 80 namevhost localhost ({D}:4)\n\
             \x20                alias 192.0.2.1\n\
             Main DocumentRoot: \"/var/www/html\"\n",
            u8 = u(8),
            u9 = u(9),
            u10 = u(10),
        );
        let found = apache_from(&listing, 80, |p| match p {
            M => Ok(macros.to_owned()),
            D => Ok(default.to_owned()),
            _ => Err("no such file".into()),
        })
        .unwrap();
        let listed: BTreeSet<String> = [
            "192.0.2.7",
            "one.example",
            "www.one.example",
            "*.one.example",
            "two.example",
            "www.two.example",
            "*.two.example",
            "broken.example",
            "localhost",
            "192.0.2.1",
        ]
        .iter()
        .map(|s| s.to_string())
        .collect();
        counted(&listed, &found);
        let why = |n: &str| {
            found
                .skipped
                .iter()
                .find(|s| s.name == n)
                .map(|s| s.reason.clone())
                .unwrap_or_default()
        };
        assert!(
            why("192.0.2.7").contains("no ServerName"),
            "{}",
            why("192.0.2.7")
        );
        assert!(why("192.0.2.1").contains("IP address"));
        assert!(why("broken.example").contains("gives 1 argument(s)"));
        let one = found
            .proposals
            .iter()
            .find(|p| p.name == "one.example")
            .unwrap();
        assert_eq!(one.vhosts[0].to_string(), format!("{M}:8"));
        assert_eq!(one.webroot["one.example"].to_str(), Some("/var/www/one"));
        assert!(one.from_macro[0].contains("macro 'vhost'"), "{one:?}");
        let text = crate::discover::report_text(&found, &Default::default(), None);
        assert!(
            text.contains(&format!(
                "  from      {M}:8 (apache)\n  macro     made by macro 'vhost'"
            )),
            "{text}"
        );
        let fragment = one.fragment(None, None);
        assert!(
            fragment.contains("# Virtual host made by macro 'vhost'")
                && fragment.contains("webroot = \"/var/www/one\""),
            "{fragment}"
        );
    }

    #[test]
    fn every_server_name_of_nginx_is_proposed_or_left_out() {
        let dump = "# configuration file /etc/nginx/nginx.conf:\nhttp {\n\
            server { listen 80 default_server; server_name _ \"\" 192.0.2.1 localhost; }\n\
            server { listen 80; server_name a.example WWW.A.example. ~^(?<x>.+)\\.example$ \
            *.a.example a.example.*; root /srv/a; }\n\
            server { listen 443 ssl; server_name a.example b.example $host; \
            ssl_certificate /c.pem; ssl_certificate_key /c.key; }\n}\n";
        let found = nginx(dump).unwrap();
        let listed: BTreeSet<String> = [
            "_",
            "\"\"",
            "192.0.2.1",
            "localhost",
            "a.example",
            "www.a.example",
            "~^(?<x>.+)\\.example$",
            "*.a.example",
            "a.example.*",
            "b.example",
            "$host",
        ]
        .iter()
        .map(|s| s.to_string())
        .collect();
        let left: Vec<&str> = found.skipped.iter().map(|s| s.name.as_str()).collect();
        let listed: BTreeSet<String> = listed
            .into_iter()
            .map(|n| {
                if left.contains(&n.as_str()) {
                    n
                } else {
                    n.replace('"', "")
                }
            })
            .collect();
        counted(&listed, &found);
    }

    /// Hostile macros at every line a listing may name: errors or names left out, no panic.
    #[test]
    fn hostile_macros_at_any_line_do_not_panic() {
        let text = "<Macro M $a $a $aa $aaa>\n<macro M $a>\nUse M $a\n</Macro>\n\
            <VirtualHost _default_:443>\nSSLEngine on\nSSLCertificateFile /s/$a$aa$aaa.pem\n\
            </VirtualHost>\n</MACRO>\nUse M x y z w\nUse M\n<Macro Self>\nUse Self\n</Macro>\n";
        for d in 1..=14 {
            for u in 1..=14 {
                for k in 1..=8 {
                    let used = format!(
                        "macro 'm' (defined on line {d} of \"{M}\") used on line {u} of \"{M}\""
                    );
                    let listing = format!(
                        "VirtualHost configuration:\n\
                         \x20        port 80 namevhost a.example ({used}:{k})\n\
                         \x20        port 80 namevhost b.example (macro 'self' (defined on line {d} of \"{M}\") used on line {u} of \"{used}\":{k})\n"
                    );
                    let found = apache_from(&listing, 80, |_| Ok(text.to_owned())).unwrap();
                    let names = found
                        .proposals
                        .iter()
                        .map(|p| p.domains.len())
                        .sum::<usize>()
                        + found.skipped.len();
                    assert_eq!(names, 2, "{listing}: {found:?}");
                }
            }
        }
    }
}
