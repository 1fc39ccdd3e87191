//! `cert-agent fleet status`: the fleet as etcd holds it — the leader, each certificate's
//! current serial, each host's result, the hosts that lag. Every text read from etcd is
//! made [`printable`] here, so neither the table nor the JSON carries a terminal control.

use std::collections::BTreeMap;

use anyhow::Result;
use serde::Serialize;
use time::OffsetDateTime;

use crate::crypto;

use super::envelope::{self, Place, Purpose};
use super::link::FleetLink;
use super::schema::{Current, HostResult};

/// The fleet as `cert-agent fleet status` shows it.
#[derive(Debug, Serialize)]
pub struct FleetStatus {
    /// The host leading now (none between runs).
    pub leader: Option<String>,
    pub certificates: Vec<CertStatus>,
    /// Hosts that have not installed a current certificate `lag_alert_secs` after it was
    /// published.
    pub lagging: Vec<String>,
}

/// One certificate of the fleet.
#[derive(Debug, Serialize)]
pub struct CertStatus {
    pub name: String,
    /// The current certificate: its version, serial and when and by whom it was published.
    pub version: Option<u64>,
    pub serial: Option<String>,
    #[serde(with = "time::serde::rfc3339::option")]
    pub published_at: Option<OffsetDateTime>,
    pub published_by: Option<String>,
    /// Why the current certificate in etcd cannot be shown (it does not open).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    pub hosts: Vec<HostStatus>,
}

/// What one host reported for a certificate.
#[derive(Debug, Serialize)]
pub struct HostStatus {
    pub host: String,
    /// The serial it installed, since when.
    pub serial: Option<String>,
    #[serde(with = "time::serde::rfc3339::option")]
    pub since: Option<OffsetDateTime>,
    /// Its last error, when its last attempt failed.
    pub error: Option<String>,
    /// It does not serve the current serial, longer than `lag_alert_secs` after it was
    /// published.
    pub lagging: bool,
}

/// Reads the fleet's state: the leader, every certificate's current serial, every host's
/// result. Certificates of the fleet that this host's configuration does not list are shown
/// too.
pub async fn status(link: &FleetLink) -> Result<FleetStatus> {
    let leader = link.fleet.leader().await?.as_deref().map(printable);
    let now = link.clock.now();
    let lag = time::Duration::seconds(i64::try_from(link.config.lag_alert_secs).unwrap_or(900));
    let mut currents: BTreeMap<String, Option<Current>> = BTreeMap::new();
    let mut errors: BTreeMap<String, String> = BTreeMap::new();
    for (key, value) in link.fleet.list("certs/").await? {
        let mut parts = key.splitn(3, '/');
        let (Some(_), Some(name), Some(what)) = (parts.next(), parts.next(), parts.next()) else {
            continue;
        };
        let entry = currents.entry(name.to_owned()).or_default();
        if what == "current" {
            let place = Place::new(Purpose::Current, &key, name);
            match envelope::open_json(&link.key, &link.fleet, &place, &value) {
                Ok((_, c)) => *entry = Some(c),
                Err(e) => {
                    errors.insert(name.to_owned(), printable(&format!("{e:#}")));
                }
            }
        }
    }
    let mut results: BTreeMap<String, BTreeMap<String, HostResult>> = BTreeMap::new();
    let mut hosts = std::collections::BTreeSet::new();
    for (key, value) in link.fleet.list("hosts/").await? {
        let parts: Vec<&str> = key.split('/').collect();
        match parts.as_slice() {
            ["hosts", host, "seen"] => {
                hosts.insert((*host).to_owned());
            }
            ["hosts", host, "certs", name] => {
                hosts.insert((*host).to_owned());
                let place = Place::new(Purpose::HostResult, &key, name);
                let r =
                    match envelope::open_json::<HostResult>(&link.key, &link.fleet, &place, &value)
                    {
                        Ok((_, r)) => r,
                        Err(e) => HostResult {
                            serial: None,
                            version: 0,
                            at: now,
                            since: None,
                            error: Some(format!("{e:#}")),
                        },
                    };
                results
                    .entry((*name).to_owned())
                    .or_default()
                    .insert((*host).to_owned(), r);
            }
            _ => {}
        }
    }
    let mut lagging = std::collections::BTreeSet::new();
    let mut certificates = Vec::new();
    for (name, current) in currents {
        let of_cert = results.get(&name);
        let mut host_rows = Vec::new();
        for host in &hosts {
            let r = of_cert.and_then(|m| m.get(host));
            let serves_current = match (&current, r.and_then(|r| r.serial.as_deref())) {
                (Some(c), Some(s)) => crypto::same_serial_hex(&c.serial, s),
                (None, _) => true,
                (Some(_), None) => false,
            };
            let late = current
                .as_ref()
                .is_some_and(|c| !serves_current && now - c.published_at > lag);
            if late {
                lagging.insert(printable(host));
            }
            host_rows.push(HostStatus {
                host: printable(host),
                serial: r.and_then(|r| r.serial.as_deref()).map(printable),
                since: r.and_then(|r| r.since),
                error: r.and_then(|r| r.error.as_deref()).map(printable),
                lagging: late,
            });
        }
        let error = errors.remove(name.as_str());
        certificates.push(CertStatus {
            name: printable(&name),
            version: current.as_ref().map(|c| c.version),
            serial: current.as_ref().map(|c| printable(&c.serial)),
            published_at: current.as_ref().map(|c| c.published_at),
            published_by: current.as_ref().map(|c| printable(&c.published_by)),
            error,
            hosts: host_rows,
        });
    }
    Ok(FleetStatus {
        leader,
        certificates,
        lagging: lagging.into_iter().collect(),
    })
}

/// `text` with every control character (C0, DEL, C1) and every bidirectional override shown
/// as an escape (`\x1b`, `\u{202e}`) and `\` as `\\`: what etcd holds cannot move the
/// cursor, recolour or retitle the terminal, or reorder what `fleet status` prints.
pub(crate) fn printable(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        match c {
            '\\' => out.push_str("\\\\"),
            c if c.is_control() => out.push_str(&format!("\\x{:02x}", u32::from(c))),
            '\u{200e}' | '\u{200f}' | '\u{202a}'..='\u{202e}' | '\u{2066}'..='\u{2069}' => {
                out.push_str(&format!("\\u{{{:04x}}}", u32::from(c)));
            }
            c => out.push(c),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::printable;

    #[test]
    fn terminal_controls_from_etcd_are_shown_as_escapes() {
        // Plain names, serials and messages pass unchanged.
        for plain in [
            "web1",
            "0A1B2C",
            "certs/www/current does not open: tag",
            "ä € 漢",
        ] {
            assert_eq!(printable(plain), plain);
        }
        // Clear screen, recolour, set the window title (OSC ... BEL), a C1 CSI, a carriage
        // return that overwrites the line, DEL, NUL.
        assert_eq!(printable("\x1b[2J\x1b[31mweb1"), "\\x1b[2J\\x1b[31mweb1");
        assert_eq!(printable("\x1b]0;owned\x07"), "\\x1b]0;owned\\x07");
        assert_eq!(printable("a\u{9b}31mb"), "a\\x9b31mb");
        assert_eq!(printable("current\rLAGGING"), "current\\x0dLAGGING");
        assert_eq!(printable("x\x7fy\0z\n"), "x\\x7fy\\x00z\\x0a");
        assert_eq!(printable("web\u{202e}1bew"), "web\\u{202e}1bew");
        // A literal backslash cannot pose as an escape.
        assert_eq!(printable("\\x1b"), "\\\\x1b");
        // Nothing it returns is a control character.
        let all: String = (0u32..0x300).filter_map(char::from_u32).collect();
        assert!(!printable(&all).chars().any(char::is_control));
    }
}
