//! `cert-agent fleet status`: the fleet as etcd holds it — the leader, each certificate's
//! current serial, each host's result, the hosts that lag.

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
    let leader = link.fleet.leader().await?;
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
                    errors.insert(name.to_owned(), format!("{e:#}"));
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
                lagging.insert(host.clone());
            }
            host_rows.push(HostStatus {
                host: host.clone(),
                serial: r.and_then(|r| r.serial.clone()),
                since: r.and_then(|r| r.since),
                error: r.and_then(|r| r.error.clone()),
                lagging: late,
            });
        }
        let error = errors.remove(name.as_str());
        certificates.push(CertStatus {
            name,
            version: current.as_ref().map(|c| c.version),
            serial: current.as_ref().map(|c| c.serial.clone()),
            published_at: current.as_ref().map(|c| c.published_at),
            published_by: current.as_ref().map(|c| c.published_by.clone()),
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
