//! How long the fleet's lead has been held, as this host saw it. A lead is one leader key
//! (its etcd revision): each synchronisation of this host notes the lead it finds — who holds
//! it, when this host first saw that very key and when it last did — in
//! `state_dir/fleet-lead.json`, and forgets it once the key is gone or another lead holds it.
//! A lead this host saw held longer than `[fleet] lead_alert_secs` (twice the longest run)
//! is alerted by `fleet status` (`LEAD STUCK`) and `check`: a leader process stopped while
//! its lease is kept alive, or a leader key on a lease an etcd writer keeps alive under the
//! name of a real host, stops every renewal without any value failing to open.

use std::path::Path;

use serde::{Deserialize, Serialize};
use time::OffsetDateTime;

use super::link::FleetLink;
use super::schema::printable_capped;
use crate::config::Config;

/// The file, in the state directory.
const FILE: &str = "fleet-lead.json";

/// The leader key's name under the prefix.
const LEADER: &str = "leader";

/// A lead as this host's synchronisations saw it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub(super) struct LeadSeen {
    /// The leader key's modification revision: one per lead.
    pub(super) revision: i64,
    /// The name it holds.
    pub(super) holder: String,
    /// When this host first saw it.
    #[serde(with = "time::serde::rfc3339")]
    pub(super) since: OffsetDateTime,
    /// When this host last saw it held.
    #[serde(with = "time::serde::rfc3339")]
    pub(super) seen: OffsetDateTime,
}

/// What this host notes after reading the leader key (`now_lead`: its value and revision;
/// `None`: no lead) at `now`, given the note before.
pub(super) fn next(
    before: Option<LeadSeen>,
    now_lead: Option<(String, i64)>,
    now: OffsetDateTime,
) -> Option<LeadSeen> {
    let (holder, revision) = now_lead?;
    let since = before
        .filter(|b| b.revision == revision)
        .map_or(now, |b| b.since);
    Some(LeadSeen {
        revision,
        holder: printable_capped(&holder, 255),
        since,
        seen: now,
    })
}

/// Why `lead` looks stuck against `limit` (seconds): seen held by the same key longer than
/// that; and whether it is past twice the limit (CRITICAL for `check`).
pub(super) fn stuck(lead: &LeadSeen, limit: u64) -> Option<(bool, String)> {
    let held = lead.seen - lead.since;
    let limit = time::Duration::seconds(i64::try_from(limit).unwrap_or(i64::MAX));
    if held <= limit {
        return None;
    }
    let why = format!(
        "the lead has been held by '{}' since {} (this host saw the same leader key at {}), \
         longer than lead_alert_secs ({} s, twice the longest run): a leader stopped while its \
         lease is kept alive, or a leader key an etcd writer keeps alive under a host's name; \
         while it holds the lead no host renews",
        lead.holder,
        crate::clock::rfc3339(lead.since),
        crate::clock::rfc3339(lead.seen),
        limit.whole_seconds()
    );
    Some((limit.checked_mul(2).is_some_and(|twice| held > twice), why))
}

fn read(dir: &Path) -> Option<LeadSeen> {
    parse(&std::fs::read(dir.join(FILE)).ok()?)
}

/// The note as `bytes` hold it; `None` when they are not one.
pub(super) fn parse(bytes: &[u8]) -> Option<LeadSeen> {
    serde_json::from_slice(bytes).ok()
}

/// Reads the leader key and notes the lead in `dir` (see [`next`]); returns the note. A read
/// or a write that fails changes nothing (said at debug level: the next synchronisation
/// notes it).
pub(super) async fn note(link: &FleetLink, dir: &Path) -> Option<LeadSeen> {
    let now_lead = match link.fleet.get(LEADER).await {
        Ok(v) => v.map(|(value, rev)| (String::from_utf8_lossy(&value).into_owned(), rev)),
        Err(e) => {
            tracing::debug!("the fleet's lead was not read: {e}");
            return read(dir);
        }
    };
    let noted = next(read(dir), now_lead, link.clock.now());
    let path = dir.join(FILE);
    let written = match &noted {
        Some(n) => serde_json::to_vec(n)
            .map_err(std::io::Error::other)
            .and_then(|bytes| crate::fsutil::write_atomic(&path, &bytes, 0o600)),
        None => match std::fs::remove_file(&path) {
            Err(e) if e.kind() != std::io::ErrorKind::NotFound => Err(e),
            _ => Ok(()),
        },
    };
    if let Err(e) = written {
        tracing::debug!("{}: {e}", path.display());
    }
    noted
}

/// For `fleet status`: the lead noted now (see [`note`]) when it is stuck.
pub(crate) async fn lead_stuck(link: &FleetLink, config: &Config) -> Option<String> {
    let fc = config.fleet.as_ref()?;
    let lead = note(link, &config.agent.state_dir).await?;
    stuck(&lead, fc.lead_alert_secs).map(|(_, why)| why)
}

/// For `check`: a lead this host's synchronisations saw held longer than `[fleet]
/// lead_alert_secs` — whether past twice it (CRITICAL), and why. `None` outside fleet mode.
pub(crate) fn lead_alert(config: &Config) -> Option<(bool, String)> {
    let fc = config.fleet.as_ref()?;
    stuck(&read(&config.agent.state_dir)?, fc.lead_alert_secs)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_lead_is_stuck_once_the_same_key_was_seen_held_past_the_limit() {
        let t0 = OffsetDateTime::UNIX_EPOCH;
        let s = time::Duration::seconds;
        let first = next(None, Some(("web1".into(), 7)), t0).unwrap();
        assert_eq!((first.since, first.seen), (t0, t0));
        assert!(stuck(&first, 60).is_none());
        // The same key seen again later: held since the first sight.
        let later = next(Some(first.clone()), Some(("web1".into(), 7)), t0 + s(61)).unwrap();
        assert_eq!(later.since, t0);
        let (critical, why) = stuck(&later, 60).unwrap();
        assert!(!critical);
        assert!(
            why.contains("'web1'") && why.contains("1970-01-01T00:00:00Z"),
            "{why}"
        );
        let long = next(Some(later.clone()), Some(("web1".into(), 7)), t0 + s(121)).unwrap();
        assert!(stuck(&long, 60).unwrap().0, "past twice the limit");
        // Another lead (a new key), or none: counted afresh, or forgotten.
        let other = next(Some(long), Some(("web1".into(), 9)), t0 + s(200)).unwrap();
        assert_eq!(other.since, t0 + s(200));
        assert!(stuck(&other, 60).is_none());
        assert_eq!(next(Some(other), None, t0 + s(300)), None);
        // A holder's name from etcd is made printable.
        let odd = next(None, Some(("\u{1b}[2Jx".into(), 1)), t0).unwrap();
        assert!(!odd.holder.contains('\u{1b}'), "{}", odd.holder);
    }

    #[test]
    fn a_garbage_or_missing_note_is_no_lead() {
        let dir = tempfile::tempdir().unwrap();
        assert_eq!(read(dir.path()), None);
        for garbage in [&b"\x00\xff not json"[..], b"{\"revision\":1}", b"[]"] {
            std::fs::write(dir.path().join(FILE), garbage).unwrap();
            assert_eq!(read(dir.path()), None);
        }
    }
}
