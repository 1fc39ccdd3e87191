//! The audit logs of the fleet's hosts, anchored off each host: every host's sealed `seen`
//! record carries the last line of its audit log ([`AuditMark`]); `fleet status` keeps, per
//! host, the highest line it has seen in its own state directory ([`FILE`], 0600) and reports
//! a host whose log went back — a lower `seq`, the same `seq` with another hash, no log where
//! it saw one, or its `seen` record gone. Whoever has root on a host can rewrite its whole log
//! and anchor consistently; the line kept on another host is out of their reach.

use std::collections::BTreeMap;
use std::path::Path;

use serde::{Deserialize, Serialize};
use time::OffsetDateTime;

use super::schema::AuditMark;
use crate::values::text::{printable, printable_capped};

/// The file in the state directory of the host running `fleet status`.
pub(super) const FILE: &str = "fleet-audit.json";

/// The largest file read: about 100 bytes per host.
const MAX_FILE: u64 = 4 * 1024 * 1024;

/// One host's audit log as `fleet status` shows it.
#[derive(Debug, Clone, Serialize)]
pub(crate) struct HostAudit {
    pub host: String,
    /// The last line its `seen` record names: none when it has no log, or its record is of
    /// an earlier version, does not open or is gone.
    pub seq: Option<u64>,
    pub hash: Option<String>,
    /// Why its `seen` record gives no line though it has one (it does not open).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    /// How its log went back since this host saw a later line of it.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub rewound: Option<String>,
}

impl HostAudit {
    /// A host's row from its opened `seen` record's line.
    pub(super) fn of(host: &str, mark: Option<&AuditMark>) -> Self {
        Self {
            host: printable(host),
            seq: mark.map(|m| m.seq),
            hash: mark.map(|m| printable_capped(&m.hash, 64)),
            error: None,
            rewound: None,
        }
    }
}

/// What this host keeps: per host, the highest line it saw.
#[derive(Debug, Default, Serialize, Deserialize)]
struct Kept {
    hosts: BTreeMap<String, Witnessed>,
}

/// A line of another host's log seen here, and when it was first seen.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
struct Witnessed {
    seq: u64,
    hash: String,
    #[serde(with = "time::serde::rfc3339")]
    at: OffsetDateTime,
}

/// Judges each host's line against the highest this host saw before (in `state_dir`), sets
/// `rewound` on each host whose log went back, adds a row for each host seen before that no
/// longer reports, and keeps the new highest lines. The highest line is kept when a log went
/// back, so that the host stays reported until its log passes that line again. Returns what
/// the operator is to be told besides (the file unreadable, unwritable).
pub(crate) fn witness(
    state_dir: &Path,
    audits: &mut Vec<HostAudit>,
    now: OffsetDateTime,
) -> Vec<String> {
    let path = state_dir.join(FILE);
    let mut warnings = Vec::new();
    let mut kept = match crate::fsutil::read_private(&path, MAX_FILE) {
        Ok(bytes) => serde_json::from_slice::<Kept>(&bytes).unwrap_or_else(|e| {
            warnings.push(format!(
                "{} is not a record of the hosts' audit logs ({e}); it is started again \
                 from what the hosts report now",
                path.display()
            ));
            Kept::default()
        }),
        Err(_) if !path.exists() => Kept::default(),
        Err(e) => {
            warnings.push(format!(
                "could not read {}: {e}; the hosts' audit logs are not compared with what \
                 this host saw before",
                path.display()
            ));
            return warnings;
        }
    };
    for a in audits.iter_mut() {
        let before = kept.hosts.get(&a.host);
        let reported = a.seq.zip(a.hash.as_deref());
        if let Some(b) = before {
            a.rewound = judge(b, reported, a.error.is_some());
        }
        if let Some((seq, hash)) = reported
            && before.is_none_or(|b| seq > b.seq)
        {
            let w = Witnessed {
                seq,
                hash: hash.to_owned(),
                at: now,
            };
            kept.hosts.insert(a.host.clone(), w);
        }
    }
    for (host, b) in &kept.hosts {
        if !audits.iter().any(|a| &a.host == host) {
            audits.push(HostAudit {
                host: host.clone(),
                seq: None,
                hash: None,
                error: Some("its `seen` record is gone".to_owned()),
                rewound: judge(b, None, false),
            });
        }
    }
    let text = serde_json::to_vec_pretty(&kept).unwrap_or_default();
    if let Err(e) = crate::fsutil::write_atomic(&path, &text, 0o600) {
        warnings.push(format!("could not write {}: {e}", path.display()));
    }
    warnings
}

/// How a host's log went back from line `before`, given the line it reports now (`None`: no
/// log, or no line it can tell; `unreadable`: its record does not open, which says nothing).
fn judge(before: &Witnessed, now: Option<(u64, &str)>, unreadable: bool) -> Option<String> {
    let seen = format!(
        "this host saw its line {} (hash {}) on {}",
        before.seq,
        before.hash,
        crate::clock::rfc3339(before.at)
    );
    match now {
        None if unreadable => None,
        None => Some(format!(
            "its audit log is gone or empty, or its `seen` record names no line, but {seen}"
        )),
        Some((seq, _)) if seq < before.seq => Some(format!(
            "its audit log ends at line {seq}, but {seen}: lines were removed"
        )),
        Some((seq, hash)) if seq == before.seq && hash != before.hash => Some(format!(
            "its line {seq} has hash {hash}, but {seen}: the log was rewritten"
        )),
        Some(_) => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(s: i64) -> OffsetDateTime {
        OffsetDateTime::from_unix_timestamp(1_800_000_000 + s).unwrap()
    }

    fn row(host: &str, seq: u64, hash: &str) -> HostAudit {
        HostAudit::of(
            host,
            Some(&AuditMark {
                seq,
                hash: hash.to_owned(),
            }),
        )
    }

    #[test]
    fn a_log_that_goes_back_is_reported_until_it_passes_the_line_seen() {
        let dir = tempfile::tempdir().unwrap();
        let mut first = vec![row("web1", 7, "aa"), row("web2", 3, "bb")];
        assert_eq!(witness(dir.path(), &mut first, at(0)), Vec::<String>::new());
        assert!(first.iter().all(|a| a.rewound.is_none()));
        // web1 cut short, web2 rewritten at the same line.
        let mut second = vec![row("web1", 5, "cc"), row("web2", 3, "dd")];
        witness(dir.path(), &mut second, at(10));
        let r1 = second[0].rewound.as_deref().unwrap();
        assert!(
            r1.contains("ends at line 5") && r1.contains("line 7 (hash aa)"),
            "{r1}"
        );
        let r2 = second[1].rewound.as_deref().unwrap();
        assert!(r2.contains("rewritten") && r2.contains("hash dd"), "{r2}");
        // Still reported on the next look: the line seen is kept.
        let mut third = vec![row("web1", 6, "ee"), row("web2", 4, "ff")];
        witness(dir.path(), &mut third, at(20));
        assert!(third[0].rewound.is_some());
        assert!(third[1].rewound.is_none(), "past the line seen");
        // web1's record gone: a row that says so; a record that does not open says nothing.
        let mut fourth = vec![HostAudit {
            error: Some("does not open".into()),
            ..HostAudit::of("web2", None)
        }];
        witness(dir.path(), &mut fourth, at(30));
        assert_eq!(fourth.len(), 2);
        assert!(fourth[0].rewound.is_none());
        assert_eq!(fourth[1].host, "web1");
        assert!(fourth[1].rewound.as_deref().unwrap().contains("gone"));
        assert_eq!(
            crate::store::mode_of(&dir.path().join(FILE)).unwrap(),
            0o600
        );
    }

    #[test]
    fn a_garbage_record_of_the_logs_is_started_again_and_said() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join(FILE);
        crate::fsutil::write_atomic(&path, b"\x00garbage{", 0o600).unwrap();
        let mut rows = vec![row("web1", 2, "aa")];
        let w = witness(dir.path(), &mut rows, at(0));
        assert!(
            w[0].contains("fleet-audit.json") && w[0].contains("started again"),
            "{w:?}"
        );
        assert!(rows[0].rewound.is_none());
        let mut again = vec![row("web1", 1, "bb")];
        assert!(witness(dir.path(), &mut again, at(1)).is_empty());
        assert!(again[0].rewound.is_some());
    }
}
