//! This host's leads of the fleet, kept across runs in `state_dir/fleet-leads.json`: how many
//! it lost (its lease not renewed in time, ended, or another host leading: the metric
//! `cert_agent_fleet_leads_lost_total` and `fleet status`), when its last round led, and
//! since when its runs found no work for a leader. With `[revocation] check` the CRLs of the
//! fleet's certificates are read by a leader's engine: a host whose runs have not led for
//! `[revocation] refresh_secs` (plus a share of it of its own, so that hosts that joined
//! together do not lead together) leads once to read them.

use std::path::Path;

use serde::{Deserialize, Serialize};
use time::OffsetDateTime;

/// The file, in the state directory.
const FILE: &str = "fleet-leads.json";

/// What the file keeps.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub(super) struct Leads {
    /// Leads this host lost, in every run since the file was made.
    #[serde(default)]
    pub(super) lost: u64,
    /// When a round of this host last led (Unix time).
    #[serde(default)]
    pub(super) led_at: Option<i64>,
    /// When a run of this host first found no work for a leader since it last led (Unix
    /// time).
    #[serde(default)]
    pub(super) idle_since: Option<i64>,
}

/// The file as `bytes` hold it; `None` when they are not one.
pub(super) fn parse(bytes: &[u8]) -> Option<Leads> {
    serde_json::from_slice(bytes).ok()
}

/// The file of `dir`: `Ok(None)` when there is none, `Err` when it does not read as one (the
/// path and why).
fn read(dir: &Path) -> Result<Option<Leads>, String> {
    let path = dir.join(FILE);
    match std::fs::read(&path) {
        Ok(bytes) => parse(&bytes)
            .map(Some)
            .ok_or_else(|| format!("{}: not this host's lead file; made afresh", path.display())),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
        Err(e) => Err(format!(
            "{}: {}",
            path.display(),
            crate::fsutil::io_text(&e)
        )),
    }
}

fn write(dir: &Path, leads: &Leads) {
    let path = dir.join(FILE);
    let written = serde_json::to_vec(leads)
        .map_err(std::io::Error::other)
        .and_then(|bytes| crate::fsutil::write_atomic(&path, &bytes, 0o600));
    if let Err(e) = written {
        tracing::warn!("could not write {}: {}", path.display(), e);
    }
}

/// The leads this host lost, as the file keeps them (0 without one).
pub(crate) fn lost(dir: &Path) -> u64 {
    read(dir).ok().flatten().map_or(0, |l| l.lost)
}

/// Adds the leads this process lost since it last said so ([`super::coord::take_leads_lost`])
/// to the file.
pub(super) fn keep_lost(dir: &Path) {
    let n = super::coord::take_leads_lost();
    if n == 0 {
        return;
    }
    let mut leads = read(dir).ok().flatten().unwrap_or_default();
    leads.lost = leads.lost.saturating_add(n);
    write(dir, &leads);
}

/// After a round that led at `now`.
pub(super) fn note_led(dir: &Path, now: OffsetDateTime) {
    let mut leads = read(dir).ok().flatten().unwrap_or_default();
    leads.led_at = Some(now.unix_timestamp());
    leads.idle_since = None;
    write(dir, &leads);
}

/// Whether the fleet's CRL checks are this host's to lead now (`refresh`: `[revocation]
/// refresh_secs`; `None`: revocation checking is off), noting when its runs started to
/// find no work for a leader. A file that does not read: due (leading is what runs did
/// before).
pub(super) fn crl_due(dir: &Path, host: &str, refresh: Option<u64>, now: OffsetDateTime) -> bool {
    let mut leads = match read(dir) {
        Ok(l) => l.unwrap_or_default(),
        Err(e) => {
            tracing::warn!("{e}");
            return refresh.is_some();
        }
    };
    let due = due(&leads, host, refresh, now);
    if leads.idle_since.is_none() && leads.led_at.is_none() {
        leads.idle_since = Some(now.unix_timestamp());
        write(dir, &leads);
    }
    due
}

/// [`crl_due`] of what the file keeps: `refresh` plus this host's share of it after the later
/// of its last lead and the start of its runs without one (none yet: not due, counted from
/// now).
pub(super) fn due(leads: &Leads, host: &str, refresh: Option<u64>, now: OffsetDateTime) -> bool {
    let Some(refresh) = refresh else {
        return false;
    };
    let Some(since) = leads.led_at.max(leads.idle_since) else {
        return false;
    };
    let share = share_of(host, refresh);
    let wait = i64::try_from(refresh.saturating_add(share)).unwrap_or(i64::MAX);
    now.unix_timestamp().saturating_sub(since) >= wait
}

/// This host's share of `refresh` (0 to `refresh` − 1 seconds, from its name): hosts that
/// joined together lead their CRL checks apart.
fn share_of(host: &str, refresh: u64) -> u64 {
    let digest = crate::fleet::versions::digest(host.as_bytes());
    let n = u64::from_str_radix(digest.get(..15).unwrap_or("0"), 16).unwrap_or(0);
    n.checked_rem(refresh).unwrap_or(0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn crl_checks_fall_to_a_host_a_refresh_and_its_share_after_it_last_led() {
        let t0 = OffsetDateTime::UNIX_EPOCH + time::Duration::days(20_000);
        let dir = tempfile::tempdir().unwrap();
        // A joiner: not due at its first run, counted from then.
        assert!(!crl_due(dir.path(), "web2", Some(3600), t0));
        let kept = read(dir.path()).unwrap().unwrap();
        assert_eq!(kept.idle_since, Some(t0.unix_timestamp()));
        let share = share_of("web2", 3600);
        assert!(share < 3600);
        let at = |s: u64| t0 + time::Duration::seconds(i64::try_from(s).unwrap());
        assert!(!crl_due(dir.path(), "web2", Some(3600), at(3599 + share)));
        assert!(crl_due(dir.path(), "web2", Some(3600), at(3600 + share)));
        // Led: counted afresh from the lead.
        note_led(dir.path(), at(4000 + share));
        assert!(!crl_due(dir.path(), "web2", Some(3600), at(4001 + share)));
        // Off: never due.
        assert!(!crl_due(dir.path(), "web2", None, at(100_000)));
        // Hosts' shares differ.
        assert_ne!(share_of("web1", 3600), share_of("web2", 3600));
    }

    #[test]
    fn lost_leads_add_up_and_a_garbage_file_is_made_afresh() {
        let dir = tempfile::tempdir().unwrap();
        assert_eq!(lost(dir.path()), 0);
        for garbage in [
            &b"\x00\xff not json"[..],
            b"{\"lost\":1.5}",
            b"{\"lost\":-1}",
            b"{\"lost\":\"7\"}",
        ] {
            std::fs::write(dir.path().join(FILE), garbage).unwrap();
            assert_eq!(lost(dir.path()), 0, "{garbage:?}");
            // A file that does not read leads (as before) and is not counted from.
            assert!(crl_due(
                dir.path(),
                "web1",
                Some(60),
                OffsetDateTime::UNIX_EPOCH
            ));
        }
        let mut leads = Leads {
            lost: 2,
            ..Leads::default()
        };
        write(dir.path(), &leads);
        assert_eq!(lost(dir.path()), 2);
        leads.lost = u64::MAX;
        write(dir.path(), &leads);
        assert_eq!(lost(dir.path()), u64::MAX);
    }
}
