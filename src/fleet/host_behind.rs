//! This host behind its fleet: the fleet's current certificate, read from etcd, is another
//! (newer) one than this host installed, published more than `lag_alert_secs` ago. A host
//! whose daemon was killed keeps serving a superseded serial while its own records look
//! fine (a reissue it led still "in progress"); `check` and `status` on it say so.
//!
//! The read costs what a takeover's look costs: a current certificate this host accepted at
//! the revision etcd still lists, and installed, is not read again (only its revision is).

use std::collections::{BTreeMap, HashMap};
use std::time::Duration;

use anyhow::Result;
use time::OffsetDateTime;

use crate::clock::Clock;
use crate::config::Config;
use crate::store::{Installed, Store};

use super::envelope::{self, Place, Purpose};
use super::link::connect;
use super::schema::{Current, current_key, printable};
use super::versions::Versions;

/// How long `check` and `status` wait for etcd before they leave the fleet out.
const READ_BOUND: Duration = Duration::from_secs(5);

/// For each configured certificate of `names` (empty: every one) whose fleet's current
/// certificate is newer than what this host installed, published more than `lag_alert_secs`
/// ago: the warning, naming both serials and what to do. Empty without `[fleet]`; when etcd
/// does not answer within 5 s, or a value does not open, that is logged and left out.
pub(crate) async fn behind(
    config: &Config,
    names: &[String],
    clock: Clock,
) -> BTreeMap<String, String> {
    if config.fleet.is_none() {
        return BTreeMap::new();
    }
    match tokio::time::timeout(READ_BOUND, read(config, names, clock)).await {
        Ok(Ok(found)) => found,
        Ok(Err(e)) => {
            tracing::warn!("fleet: could not compare with the fleet's current certificates: {e:#}");
            BTreeMap::new()
        }
        Err(_) => {
            tracing::warn!(
                "fleet: etcd did not answer within {} s; this host's certificates were not \
                 compared with the fleet's",
                READ_BOUND.as_secs()
            );
            BTreeMap::new()
        }
    }
}

async fn read(config: &Config, names: &[String], clock: Clock) -> Result<BTreeMap<String, String>> {
    let Some(link) = connect(config, clock).await? else {
        return Ok(BTreeMap::new());
    };
    let store = Store::existing(&config.agent.state_dir);
    let versions = Versions::load(&config.agent.state_dir).ok();
    // etcd key → (certificate, what this host installed); the revision of the current this
    // host accepted and installed.
    let mut installed: BTreeMap<String, (String, Installed)> = BTreeMap::new();
    let mut held: HashMap<String, i64> = HashMap::new();
    for cert in config
        .certificates
        .iter()
        .filter(|c| names.is_empty() || names.contains(&c.name))
    {
        // A host kept back by a halted rollout is reported as such (CRITICAL), not as behind.
        let Some(inst) = store
            .load(&cert.name)
            .ok()
            .filter(|r| r.rollout_halted.is_none())
            .and_then(|r| r.installed)
        else {
            continue;
        };
        let key = current_key(&cert.name);
        if let Some(a) = versions
            .as_ref()
            .and_then(|v| v.accepted_current(&cert.name))
            && let Some(rev) = a.value.revision.filter(|r| *r > 0)
            && crate::crypto::same_serial_hex(&a.serial, &inst.serial)
        {
            held.insert(key.clone(), rev);
        }
        installed.insert(key, (cert.name.clone(), inst));
    }
    let keys: Vec<String> = installed.keys().cloned().collect();
    let values = link
        .fleet
        .read_fresh(&keys, |k| held.get(k).copied())
        .await?;
    let lag = time::Duration::seconds(i64::try_from(link.config.lag_alert_secs).unwrap_or(900));
    let now = clock.now();
    let mut out = BTreeMap::new();
    for (key, (bytes, rev)) in values {
        let Some((name, inst)) = installed.get(&key) else {
            continue;
        };
        if held.get(&key) == Some(&rev) {
            continue;
        }
        let place = Place::new(Purpose::Current, &key, name);
        match envelope::open_json::<Current>(&link.key, &link.fleet, &place, &bytes) {
            Ok((_, current)) => {
                if let Some(w) = warning(inst, &current, now, lag) {
                    out.insert(name.clone(), w);
                }
            }
            Err(e) => tracing::warn!(certificate = %name, "fleet: {e:#}"),
        }
    }
    Ok(out)
}

/// The warning when `current` is a newer certificate than `installed`, published more than
/// `lag` before `now`; `None` otherwise (the same serial, a newer certificate of this host's
/// own, or one published less than `lag` ago: its install may be under way).
fn warning(
    installed: &Installed,
    current: &Current,
    now: OffsetDateTime,
    lag: time::Duration,
) -> Option<String> {
    if crate::crypto::same_serial_hex(&current.serial, &installed.serial)
        || installed.not_before >= current.not_before
    {
        return None;
    }
    let late = now - current.published_at;
    if late <= lag {
        return None;
    }
    Some(format!(
        "behind the fleet: this host installed serial {} but the fleet's current certificate \
         is serial {} (version {}, published by {} at {}, {} s ago, more than lag_alert_secs \
         {} s); its own record of the work may be out of date: start its daemon (`systemctl \
         start cert-agent`) or run `cert-agent renew` here",
        installed.serial,
        printable(&current.serial),
        current.version,
        printable(&current.published_by),
        crate::clock::short_time(current.published_at),
        late.whole_seconds(),
        lag.whole_seconds()
    ))
}

#[cfg(test)]
mod tests {
    use super::*;
    use time::macros::datetime;

    const T: OffsetDateTime = datetime!(2027-04-27 22:00:00 UTC);

    fn installed(serial: &str, not_before: OffsetDateTime) -> Installed {
        Installed {
            serial: serial.into(),
            not_before,
            not_after: not_before + time::Duration::days(199),
            certificate_id: 7,
            files: Vec::new(),
            installed_at: not_before,
            leaf_file: None,
            leaf_stamp: None,
        }
    }

    fn current(serial: &str, not_before: OffsetDateTime) -> Current {
        Current {
            version: 2,
            certificate_id: 7,
            serial: serial.into(),
            not_before,
            not_after: not_before + time::Duration::days(199),
            published_by: "web2".into(),
            published_at: not_before,
            archive: String::new(),
            chain: None,
            intermediates: Vec::new(),
            key: String::new(),
        }
    }

    #[test]
    fn a_host_is_behind_only_past_the_bound_and_only_for_a_newer_certificate() {
        let lag = time::Duration::seconds(900);
        let old = installed("0A", T - time::Duration::days(150));
        let new = current("0B", T);
        let late = T + time::Duration::seconds(901);
        let w = warning(&old, &new, late, lag).expect("behind");
        assert!(
            w.contains("installed serial 0A but the fleet's current certificate is serial 0B")
                && w.contains("published by web2 at 2027-04-27 22:00 UTC, 901 s ago"),
            "{w}"
        );
        assert!(
            warning(&old, &new, T + lag, lag).is_none(),
            "within the bound"
        );
        assert!(
            warning(&installed("0b", T), &new, late, lag).is_none(),
            "the same serial"
        );
        let own = installed("0C", T + time::Duration::days(1));
        assert!(
            warning(&own, &new, late, lag).is_none(),
            "a newer one of its own"
        );
    }
}
