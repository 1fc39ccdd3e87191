//! `cert-agent fleet forget-host HOST`: a host that left the fleet for good (decommissioned,
//! renamed, re-imaged under another name) taken out of etcd, so that it stops counting.
//!
//! While its values stay, such a host keeps counting: its `seen` record puts it in a wave of
//! every rollout (the hosts after it wait for a proof it never makes), `fleet status` lists
//! it as lagging, `fleet rotate-key` as not moved, and its results and proofs keep two values
//! per certificate in etcd (20,000 at 10,000 certificates). Forgetting it deletes, in one
//! transaction fenced by the lead and only while its `seen` record is the one judged here:
//!
//! - `hosts/HOST/certs/` (what it installed), `hosts/HOST/proof/` (what it proved),
//!   `hosts/HOST/dcv/` (its word on ACME validation files) and `hosts/HOST/seen`;
//! - its manifest entry `manifest/HOST`, unless it vouches for a version of some certificate
//!   that no other host's entry vouches for (it is then the floor that keeps a new host from
//!   taking an older value put back, and stays).
//!
//! Its rollout decisions (`hosts/HOST/rollout/`) and notes of order intents it did not place
//! (`hosts/HOST/unplaced/`) stay: they bind the fleet (an abort keeps a serial out, a note
//! lets the next leader withdraw an intent without `--clear-intent`), whoever made them.
//!
//! A host that synchronised less than [`LIVE_FOR`] ago is live and is refused: it would
//! announce itself again at its next synchronisation. Run again, or on a host that comes back,
//! nothing is lost: a host that synchronises writes its values again.

use anyhow::{Context, Result, anyhow, bail};
use serde::Serialize;
use time::OffsetDateTime;

use crate::clock::Clock;
use crate::config::Config;
use crate::store::Store;

use super::coord::Written;
use super::envelope::{self, Place, Purpose};
use super::link::{FleetLink, LIVE_FOR, check_instance, check_key, connect, hold_state, lead_for};
use super::manifest::{ManifestEntry, read_entries};
use super::schema::{HostSeen, manifest_key, seen_key};
use super::versions::{Versions, Vouched};

/// What `forget-host` deleted and kept.
#[derive(Debug, Serialize)]
pub(crate) struct Forgotten {
    pub host: String,
    /// When the host last synchronised, as its `seen` record said (`None`: it had none that
    /// opens).
    #[serde(with = "time::serde::rfc3339::option")]
    pub last_seen: Option<OffsetDateTime>,
    /// Keys deleted, by part (`certs`, `proof`, `dcv`, `seen`, `manifest`).
    pub deleted: Vec<Part>,
    /// Keys kept, by part, with why.
    pub kept: Vec<Part>,
}

/// Some of a host's keys: which part, how many, and why they stay (for those kept).
#[derive(Debug, Serialize)]
pub(crate) struct Part {
    pub part: String,
    pub keys: usize,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub why: Option<String>,
}

impl Part {
    fn gone(part: &str, keys: usize) -> Self {
        Self {
            part: part.to_owned(),
            keys,
            why: None,
        }
    }

    fn kept(part: &str, keys: usize, why: String) -> Self {
        Self {
            part: part.to_owned(),
            keys,
            why: Some(why),
        }
    }
}

impl Forgotten {
    /// How many keys were deleted in all.
    pub(crate) fn deleted_keys(&self) -> usize {
        self.deleted.iter().map(|p| p.keys).sum()
    }
}

/// The parts under `hosts/HOST/` that go with the host.
const GONE: [&str; 3] = ["certs", "proof", "dcv"];

/// The parts under `hosts/HOST/` that stay, with why.
const KEPT: [(&str, &str); 2] = [
    (
        "rollout",
        "rollout decisions bind the fleet whoever made them",
    ),
    (
        "unplaced",
        "notes of order intents never placed let the next leader withdraw them",
    ),
];

/// Forgets `host` (see the module's documentation), as the fleet's leader.
pub(crate) async fn forget_host(config: &Config, clock: Clock, host: &str) -> Result<Forgotten> {
    if !crate::config::valid_host_name(host) {
        bail!(
            "{:?} is not a host name as [fleet] host names them (letters, digits, `.`, `-`, `_`)",
            crate::values::text::printable(host)
        );
    }
    let link = connect(config, clock)
        .await?
        .ok_or_else(|| anyhow!("no [fleet] in {}", config.path.display()))?;
    if host == link.fleet.host() {
        bail!(
            "{host} is this host ([fleet] host): a host does not forget itself; run \
             `fleet forget-host {host}` on another host of the fleet once this one has stopped"
        );
    }
    let store = Store::open(&config.agent.state_dir)?;
    let _lock = hold_state(&store, config, "fleet forget-host")?;
    let versions = Versions::load(store.dir())?;
    check_instance(&link, &versions).await?;
    if check_key(&link, None).await?.is_none() {
        bail!(
            "the fleet's key check does not open with this host's fleet key: nothing is \
             forgotten (a host that cannot open the fleet's values cannot tell a live host)"
        );
    }
    let seen_rel = seen_key(host);
    let seen = link.fleet.get(&seen_rel).await?;
    let last_seen = match &seen {
        Some((value, _)) => last_synchronised(&link, host, &seen_rel, value)?,
        None => None,
    };
    let (forgotten, prefixes, singles) = plan(&link, host, seen.is_some(), last_seen).await?;
    if prefixes.is_empty() && singles.is_empty() {
        if forgotten.kept.is_empty() {
            bail!(
                "no host {host} in the fleet: nothing under {} nor {}",
                link.fleet.key(&format!("hosts/{host}/")),
                link.fleet.key(&manifest_key(host))
            );
        }
        return Ok(forgotten);
    }
    let lead = lead_for(&link, "forgotten", "fleet forget-host").await?;
    let unchanged = seen.as_ref().map_or(0, |(_, revision)| *revision);
    let written = lead
        .delete_parts_unless_changed(&prefixes, &singles, (&seen_rel, unchanged))
        .await;
    lead.resign().await;
    match written.context("forgetting the host")? {
        Written::Done(_) => {}
        Written::Conflict(_) => bail!(
            "{host} synchronised while it was being forgotten ({} changed): it is live; \
             nothing was forgotten",
            link.fleet.key(&seen_rel)
        ),
    }
    let details = serde_json::json!({
        "host": host,
        "last_seen": forgotten.last_seen.map(crate::clock::rfc3339),
        "deleted": forgotten.deleted,
    });
    if let Err(e) = store.audit(None, "fleet-host-forgotten", &details) {
        tracing::warn!("{e}");
    }
    Ok(forgotten)
}

/// What forgetting `host` deletes (the whole parts, the single keys) and keeps, from the keys
/// etcd holds of it now; `seen`: whether it has a `seen` record.
async fn plan(
    link: &FleetLink,
    host: &str,
    seen: bool,
    last_seen: Option<OffsetDateTime>,
) -> Result<(Forgotten, Vec<String>, Vec<String>)> {
    let prefix = format!("hosts/{host}/");
    let keys = link.fleet.list_keys(&prefix).await?;
    let mut forgotten = Forgotten {
        host: host.to_owned(),
        last_seen,
        deleted: Vec::new(),
        kept: Vec::new(),
    };
    let mut prefixes = Vec::new();
    for part in GONE {
        let under = format!("{prefix}{part}/");
        let n = keys.iter().filter(|k| k.starts_with(&under)).count();
        if n > 0 {
            forgotten.deleted.push(Part::gone(part, n));
            prefixes.push(under);
        }
    }
    let mut singles = Vec::new();
    if seen {
        forgotten.deleted.push(Part::gone("seen", 1));
        singles.push(seen_key(host));
    }
    for (part, why) in KEPT {
        let under = format!("{prefix}{part}/");
        let n = keys.iter().filter(|k| k.starts_with(&under)).count();
        if n > 0 {
            forgotten.kept.push(Part::kept(part, n, why.to_owned()));
        }
    }
    let manifest_rel = manifest_key(host);
    if link.fleet.get(&manifest_rel).await?.is_some() {
        let (entries, _) = read_entries(link).await?;
        match only_floor(&entries, host) {
            None => {
                forgotten.deleted.push(Part::gone("manifest", 1));
                singles.push(manifest_rel);
            }
            Some(name) => forgotten.kept.push(Part::kept(
                "manifest",
                1,
                format!(
                    "its entry vouches for a version of {name} no other host's entry vouches \
                     for (the floor that keeps an older value put back out)"
                ),
            )),
        }
    }
    Ok((forgotten, prefixes, singles))
}

/// When `host` last synchronised, from its `seen` record (`value` at `rel`): refused while
/// that is less than [`LIVE_FOR`] ago (or in the future); `None` when the record does not
/// open (it announces nothing: no live host of this fleet wrote it).
fn last_synchronised(
    link: &FleetLink,
    host: &str,
    rel: &str,
    value: &[u8],
) -> Result<Option<OffsetDateTime>> {
    let place = Place::new(Purpose::HostSeen, rel, "");
    let seen = match envelope::open_json::<HostSeen>(&link.key, &link.fleet, &place, value) {
        Ok((_, seen)) => seen,
        Err(e) => {
            tracing::warn!("{e:#}: it announces nothing, and is deleted with the host");
            return Ok(None);
        }
    };
    let ago = link.clock.now() - seen.at;
    if ago < LIVE_FOR {
        bail!(
            "{host} is live: it last synchronised at {} ({}), less than {} minutes ago, and \
             would announce itself again at its next synchronisation; stop its agent \
             (`systemctl disable --now cert-agent-daemon`) and forget it {} minutes after \
             its last synchronisation",
            crate::clock::rfc3339(seen.at),
            ago_text(ago),
            LIVE_FOR.whole_minutes(),
            LIVE_FOR.whole_minutes()
        );
    }
    Ok(Some(seen.at))
}

/// `ago` as a person reads it ("3 minutes ago", "in the future").
fn ago_text(ago: time::Duration) -> String {
    if ago.is_negative() {
        "in the future by this host's clock".to_owned()
    } else {
        format!("{} minutes ago", ago.whole_minutes())
    }
}

/// The first certificate for which `host`'s entry among `entries` vouches for a version no
/// other entry does (`None`: every version it vouches for, another entry vouches for too).
fn only_floor(entries: &[(String, ManifestEntry)], host: &str) -> Option<String> {
    let (_, mine) = entries.iter().find(|(h, _)| h == host)?;
    mine.certs.iter().find_map(|(name, own)| {
        let others = entries
            .iter()
            .filter(|(h, _)| h != host)
            .filter_map(|(_, e)| e.certs.get(name).copied())
            .fold(Vouched::default(), Vouched::max);
        (own.state > others.state
            || own.current > others.current
            || own.tombstone > others.tombstone)
            .then(|| name.clone())
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn entry(certs: &[(&str, u64, u64)]) -> ManifestEntry {
        ManifestEntry {
            at: OffsetDateTime::UNIX_EPOCH,
            certs: certs
                .iter()
                .map(|(n, state, current)| {
                    (
                        (*n).to_owned(),
                        Vouched {
                            state: *state,
                            current: *current,
                            tombstone: 0,
                        },
                    )
                })
                .collect(),
        }
    }

    #[test]
    fn an_entry_is_the_only_floor_where_it_vouches_for_more_than_every_other() {
        let entries = vec![
            ("web1".to_owned(), entry(&[("www", 4, 3), ("api", 2, 2)])),
            ("web2".to_owned(), entry(&[("www", 5, 3), ("api", 2, 2)])),
            ("web3".to_owned(), entry(&[("www", 5, 4)])),
        ];
        // web1 is behind the others on every certificate: it may go.
        assert_eq!(only_floor(&entries, "web1"), None);
        // web3 alone vouches for www's current certificate at version 4.
        assert_eq!(only_floor(&entries, "web3").as_deref(), Some("www"));
        // web2 alone vouches for api (web1 too, equally): it may go only with web1 there.
        assert_eq!(only_floor(&entries, "web2"), None);
        assert_eq!(only_floor(&entries[1..], "web2").as_deref(), Some("api"));
        // A host without an entry that opens is no floor.
        assert_eq!(only_floor(&entries, "web9"), None);
    }

    #[test]
    fn a_tombstone_only_one_entry_saw_keeps_that_entry() {
        let mut seen_retire = entry(&[("old", 3, 3)]);
        if let Some(v) = seen_retire.certs.get_mut("old") {
            v.tombstone = 4;
        }
        let entries = vec![
            ("web1".to_owned(), seen_retire),
            ("web2".to_owned(), entry(&[("old", 3, 3)])),
        ];
        assert_eq!(only_floor(&entries, "web1").as_deref(), Some("old"));
        assert_eq!(only_floor(&entries, "web2"), None);
    }

    #[test]
    fn the_time_since_a_synchronisation_reads_as_minutes_or_as_the_future() {
        assert_eq!(ago_text(time::Duration::minutes(3)), "3 minutes ago");
        assert_eq!(
            ago_text(time::Duration::minutes(-2)),
            "in the future by this host's clock"
        );
    }
}
