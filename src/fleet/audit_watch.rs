//! The daemon's own look at the other hosts' audit logs: on its schedule it reads every host's
//! sealed `seen` record, judges the last line each names against the highest this host saw
//! before ([`super::audit_seen::witness`], the record `fleet status` keeps too), and keeps the
//! hosts whose log went back in `state_dir/fleet-audit-rewound.json` (0600) for `check`. A host
//! newly found rewound is returned once (the daemon logs it and notifies `audit_rewound`);
//! it stays in the file, and so in `check`, until its log passes the line seen again.

use std::collections::BTreeMap;
use std::path::Path;

use anyhow::{Result, anyhow};
use serde::{Deserialize, Serialize};

use super::audit_seen::{HostAudit, witness};
use super::envelope::{self, Place, Purpose};
use super::link::FleetLink;
use super::schema::{HostSeen, printable_capped};
use crate::config::Config;

/// The file, in the state directory.
const FILE: &str = "fleet-audit-rewound.json";

/// The largest file read.
const MAX_FILE: u64 = 4 * 1024 * 1024;

/// The hosts whose log went back as this host last looked, with why.
#[derive(Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
struct Rewound {
    hosts: BTreeMap<String, String>,
}

fn read(dir: &Path) -> Rewound {
    crate::fsutil::read_private(&dir.join(FILE), MAX_FILE)
        .ok()
        .map(|b| parse(&b))
        .unwrap_or_default()
}

/// The file as `bytes` hold it: no host when they are not one.
fn parse(bytes: &[u8]) -> Rewound {
    serde_json::from_slice(bytes).unwrap_or_default()
}

/// `data` as the file: what reads is written and read back the same (the fuzz target
/// `fleet_local`).
pub(super) fn fuzz(data: &[u8]) {
    let r = parse(data);
    let Ok(bytes) = serde_json::to_vec_pretty(&r) else {
        panic!("what reads is written");
    };
    assert_eq!(parse(&bytes), r, "reads back the same");
    let _ = audit_alerts_of(r);
}

/// Every host's audit row from its `seen` record (one that does not open is an error row).
async fn read_rows(link: &FleetLink) -> Result<Vec<HostAudit>> {
    let mut rows = Vec::new();
    for (rel, value) in link.fleet.hosts_under("seen").await? {
        let parts: Vec<&str> = rel.split('/').collect();
        let ["hosts", host, "seen"] = parts.as_slice() else {
            continue;
        };
        let place = Place::new(Purpose::HostSeen, &rel, "");
        rows.push(
            match envelope::open_json::<HostSeen>(&link.key, &link.fleet, &place, &value) {
                Ok((_, seen)) => HostAudit::of(host, seen.audit.as_ref()),
                Err(e) => HostAudit {
                    error: Some(printable_capped(&format!("{e:#}"), 300)),
                    ..HostAudit::of(host, None)
                },
            },
        );
    }
    Ok(rows)
}

/// What the look found, against the hosts rewound before: the file's new content and the
/// hosts newly rewound (host, why). This host's own row is left out.
fn judge(before: &Rewound, rows: &[HostAudit], own: &str) -> (Rewound, Vec<(String, String)>) {
    let mut now = Rewound::default();
    let mut new = Vec::new();
    for r in rows.iter().filter(|r| r.host != own) {
        let Some(why) = &r.rewound else {
            continue;
        };
        if !before.hosts.contains_key(&r.host) {
            new.push((r.host.clone(), why.clone()));
        }
        now.hosts.insert(r.host.clone(), why.clone());
    }
    (now, new)
}

/// One look (see the module): the hosts whose audit log newly went back, each logged as a
/// warning. The fleet unreachable or the key not the fleet's: an error, nothing changed.
pub(crate) async fn look_at_audits(
    config: &Config,
    clock: crate::clock::Clock,
) -> Result<Vec<(String, String)>> {
    let link = super::connect(config, clock)
        .await?
        .ok_or_else(|| anyhow!("no [fleet] in {}", config.path.display()))?;
    let mut rows = read_rows(&link).await?;
    let dir = &config.agent.state_dir;
    for w in witness(dir, &mut rows, clock.now()) {
        tracing::warn!("{w}");
    }
    let (now, new) = judge(&read(dir), &rows, &printable_capped(link.fleet.host(), 255));
    for (host, why) in &new {
        tracing::warn!("{host}: AUDIT REWOUND: {why}");
    }
    let text = serde_json::to_vec_pretty(&now)?;
    crate::fsutil::write_atomic(&dir.join(FILE), &text, 0o600)
        .map_err(|e| anyhow!("could not write {}: {e}", dir.join(FILE).display()))?;
    Ok(new)
}

/// For `check`: each host whose audit log went back as this host's daemon last saw it
/// (`HOST: why`). Empty outside fleet mode.
pub(crate) fn audit_alerts(config: &Config) -> Vec<String> {
    if config.fleet.is_none() {
        return Vec::new();
    }
    audit_alerts_of(read(&config.agent.state_dir))
}

fn audit_alerts_of(r: Rewound) -> Vec<String> {
    r.hosts
        .into_iter()
        .map(|(host, why)| format!("{host}: AUDIT REWOUND: {why}"))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn row(host: &str, rewound: Option<&str>) -> HostAudit {
        HostAudit {
            rewound: rewound.map(str::to_owned),
            ..HostAudit::of(host, None)
        }
    }

    #[test]
    fn a_rewound_log_is_new_once_and_kept_until_it_passes_the_line_again() {
        let rows = vec![row("web1", Some("lines were removed")), row("web2", None)];
        let (first, new) = judge(&Rewound::default(), &rows, "web2");
        assert_eq!(new, [("web1".to_owned(), "lines were removed".to_owned())]);
        assert_eq!(first.hosts.len(), 1);
        // Still rewound: kept, not new again.
        let (second, new) = judge(&first, &rows, "web2");
        assert!(new.is_empty());
        assert_eq!(second, first);
        // Past the line again: gone; a later rewind is new once more.
        let (third, _) = judge(&second, &[row("web1", None)], "web2");
        assert!(third.hosts.is_empty());
        let (_, new) = judge(&third, &rows, "web2");
        assert_eq!(new.len(), 1);
        // This host's own row is never an alert here.
        let (own, new) = judge(&Rewound::default(), &[row("web2", Some("x"))], "web2");
        assert!(own.hosts.is_empty() && new.is_empty());
    }

    #[test]
    fn a_garbage_or_missing_file_holds_no_host() {
        use std::os::unix::fs::PermissionsExt;
        let dir = tempfile::tempdir().unwrap();
        assert_eq!(read(dir.path()), Rewound::default());
        let path = dir.path().join(FILE);
        for garbage in [&b"\x00\xff not json"[..], b"{\"hosts\":[1]}"] {
            std::fs::write(&path, garbage).unwrap();
            std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o600)).unwrap();
            assert_eq!(read(dir.path()), Rewound::default());
        }
    }
}
