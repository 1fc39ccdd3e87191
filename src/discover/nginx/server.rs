//! The `server` blocks of the `http` block as [`Vhost`]s: names, `listen`, certificate files
//! and document root (those of `http` inherited), and the validation path's fate.

use std::path::PathBuf;

use super::access::Guards;
use super::regexes::Regexes;
use super::tree::{Directive, Includes, parse_dump};
use super::validation::validation;
use crate::discover::{At, DiscoverError, Listen, Vhost};

/// Every virtual host of an `nginx -T` dump.
pub(crate) fn vhosts(dump: &str) -> Result<Vec<Vhost>, DiscoverError> {
    let parsed = parse_dump(dump)?;
    let mut walker = Walker {
        includes: Includes::new(&parsed),
        out: Vec::new(),
        regexes: Regexes::default(),
    };
    let top = parsed.files.get(&parsed.main).cloned().unwrap_or_default();
    walker.walk(&top, Ctx::Main, &Inherited::default(), 0);
    Ok(walker.out)
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

/// Collects the `server` blocks of `http`, with what they inherit.
struct Walker<'p> {
    includes: Includes<'p>,
    out: Vec<Vhost>,
    regexes: Regexes,
}

impl Walker<'_> {
    fn walk(&mut self, list: &[Directive], ctx: Ctx, inherited: &Inherited, depth: usize) {
        let list = self.includes.expand(list, depth);
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
                    let children = self.includes.expand_all(children, depth + 1);
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
            address: None,
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
        address: listen_address(addr),
        port,
        ssl: args.iter().skip(1).any(|a| a == "ssl" || a == "quic"),
        default: args
            .iter()
            .skip(1)
            .any(|a| a == "default_server" || a == "default"),
    }
}

/// The address part of a `listen` address (`127.0.0.1:8443` → `127.0.0.1`, `[::]:443` →
/// `[::]`, `127.0.0.1` → itself); `None` for a bare port or a UNIX socket.
fn listen_address(addr: &str) -> Option<String> {
    if addr.starts_with("unix:") || addr.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    if addr.starts_with('[') {
        return addr.find(']').map(|end| addr[..=end].to_owned());
    }
    let host = match addr.rsplit_once(':') {
        Some((h, p)) if p.bytes().all(|b| b.is_ascii_digit()) => h,
        _ => addr,
    };
    (!host.is_empty()).then(|| host.to_owned())
}

#[cfg(test)]
mod tests {
    use super::*;

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
        assert_eq!(l("443 ssl").address, None);
        assert_eq!(l("[::]:443 ssl http2").address.as_deref(), Some("[::]"));
        assert_eq!(l("10.0.0.5:8443 ssl").address.as_deref(), Some("10.0.0.5"));
        assert_eq!(l("127.0.0.1").address.as_deref(), Some("127.0.0.1"));
        assert_eq!(l("*:443 ssl").address.as_deref(), Some("*"));
        assert_eq!(l("unix:/run/x.sock").address, None);
        assert!(l("[::]:443 ssl http2").ssl);
        assert_eq!(l("443 quic reuseport").port, 443);
        assert!(l("443 quic reuseport").ssl);
        assert_eq!(l("*:80").port, 80);
    }
}
