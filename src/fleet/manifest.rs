//! The fleet's manifest and the floor of a host that has accepted nothing yet.
//!
//! Each host keeps the versions it accepted (`fleet-versions.json`, [`super::versions`]) and
//! refuses anything older; a host that has accepted nothing of a certificate — new,
//! autoscaled, re-imaged, or its versions file deleted — has nothing to compare with, and
//! would take an old sealed value an etcd writer put back. So every host writes its entry of
//! the fleet's manifest, `manifest/HOST` (sealed, written when what it vouches for changed):
//! per certificate, the highest versions of the shared record, the current certificate and
//! the tombstone it accepted. Before such a host opens any value of the certificate, it reads
//! every entry and takes the highest versions any of them vouches for as its floor: nothing
//! below is accepted. A replayed older value, or one replayed older entry, is outvoted by the
//! other entries (the leader's among them); only the whole prefix rolled back together (every
//! entry and value, a consistent old snapshot) or every entry deleted goes unseen.
//!
//! The same floor keeps a lead from ordering again a certificate whose shared record an etcd
//! writer deleted: while the hosts vouch for a live shared record (above the last tombstone)
//! and this host's own record shows no order, the lead does not work on it.

use std::collections::{BTreeMap, BTreeSet};

use anyhow::{Result, anyhow, bail};
use serde::{Deserialize, Serialize};
use time::OffsetDateTime;

use super::envelope::{self, Place, Purpose};
use super::link::FleetLink;
use super::schema::{MANIFEST, manifest_key, printable_capped};
use super::versions::{Floor, Versions, Vouched, digest};
use crate::store::CertRecord;

/// One host's entry of the fleet's manifest.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub(super) struct ManifestEntry {
    /// When the host wrote it.
    #[serde(with = "time::serde::rfc3339")]
    pub(super) at: OffsetDateTime,
    /// What the host vouches for, by certificate.
    #[serde(default)]
    pub(super) certs: BTreeMap<String, Vouched>,
}

/// The host whose manifest entry lives at `rel` (`manifest/HOST`).
pub(super) fn host_of(rel: &str) -> Option<&str> {
    rel.strip_prefix(MANIFEST)
        .filter(|h| !h.is_empty() && !h.contains('/'))
}

/// How many of the hosts that vouched for a floor it names (in the versions file, and in a
/// refusal).
const MAX_NAMED: usize = 3;

/// The floor of each of `names` from the opened `entries` (host, entry): the highest version
/// of each kind any entry vouches for, with (up to [`MAX_NAMED`] of) the hosts that vouched
/// for the highest shared record or current certificate. A name no entry mentions has none.
pub(super) fn floors(
    entries: &[(String, ManifestEntry)],
    names: &[String],
) -> BTreeMap<String, Floor> {
    let mut out = BTreeMap::new();
    for name in names {
        let vouching: Vec<(&String, Vouched)> = entries
            .iter()
            .filter_map(|(host, e)| Some((host, *e.certs.get(name)?)))
            .collect();
        if vouching.is_empty() {
            continue;
        }
        let versions = vouching
            .iter()
            .fold(Vouched::default(), |all, (_, v)| all.max(*v));
        let by = vouching
            .iter()
            .filter(|(_, v)| v.state == versions.state || v.current == versions.current)
            .map(|(host, _)| (*host).clone())
            .take(MAX_NAMED)
            .collect();
        out.insert(name.clone(), Floor { versions, by });
    }
    out
}

/// The manifest entry at `rel` opened: its host and the entry.
fn open_entry(link: &FleetLink, rel: &str, value: &[u8]) -> Result<(String, ManifestEntry)> {
    let host = host_of(rel)
        .ok_or_else(|| anyhow!("{} is not a manifest entry's key", link.fleet.key(rel)))?;
    let place = Place::new(Purpose::Manifest, rel, "");
    let (_, entry): (u64, ManifestEntry) =
        envelope::open_json(&link.key, &link.fleet, &place, value)?;
    Ok((printable_capped(host, 255), entry))
}

/// Every entry of the fleet's manifest that opens (host, entry), and why each other one does
/// not. One entry at a time: each grows with the number of certificates.
pub(super) async fn read_entries(
    link: &FleetLink,
) -> Result<(Vec<(String, ManifestEntry)>, Vec<String>), super::coord::FleetError> {
    let mut entries = Vec::new();
    let mut refused = Vec::new();
    for rel in link.fleet.list_keys(MANIFEST).await? {
        let Some((value, _)) = link.fleet.get(&rel).await? else {
            continue;
        };
        match open_entry(link, &rel, &value) {
            Ok(entry) => entries.push(entry),
            Err(e) => refused.push(format!("{e:#}")),
        }
    }
    Ok((entries, refused))
}

/// For each of `names` (configured certificates this host has accepted nothing of), the floor
/// from the fleet's manifest, taken into `versions`: versions of 0 when no entry names it (a
/// certificate new to the fleet), said as a warning when etcd holds values of it (`held`). A
/// manifest that cannot be read stops the synchronisation (nothing is accepted without it); an
/// entry that does not open vouches for nothing (a warning naming its key).
pub(super) async fn establish(
    link: &FleetLink,
    names: Vec<String>,
    held: &BTreeSet<String>,
    versions: &mut Versions,
) -> Result<()> {
    if names.is_empty() {
        return Ok(());
    }
    let shown = match names.len() {
        n if n > 5 => format!("{} and {} more", names[..5].join(", "), n - 5),
        _ => names.join(", "),
    };
    let unread = |e: super::coord::FleetError| {
        anyhow!(
            "could not read the fleet's manifest {} (this host has accepted nothing of {shown} \
             yet, and takes nothing of it before it knows the versions the fleet vouches \
             for): {e}",
            link.fleet.key(MANIFEST),
        )
    };
    let (entries, refused) = read_entries(link).await.map_err(unread)?;
    for e in refused {
        tracing::warn!("{e}; it vouches for nothing");
    }
    let floors = floors(&entries, &names);
    if !floors.is_empty() {
        tracing::info!(
            "this host has accepted nothing yet of {shown}: it takes the versions the fleet's \
             manifest vouches for as the floor of {} of them ({} entries read); nothing older \
             is accepted",
            floors.len(),
            entries.len()
        );
    }
    for name in names {
        match floors.get(&name) {
            Some(f) => {
                tracing::debug!(
                    certificate = %name,
                    "this host has accepted nothing of '{name}' yet: the fleet's manifest ({}) \
                     vouches for shared record version {}, current certificate version {} and \
                     tombstone version {}; nothing older is accepted",
                    f.by.join(", "),
                    f.versions.state,
                    f.versions.current,
                    f.versions.tombstone
                );
                versions.set_floor(&name, f.clone());
            }
            None => {
                if held.contains(&name) {
                    tracing::warn!(
                        certificate = %name,
                        "this host has accepted nothing of '{name}' yet and no entry of the \
                         fleet's manifest {} vouches for its versions (a fleet whose hosts do \
                         not write one yet, or entries deleted): it takes what etcd holds as \
                         the newest",
                        link.fleet.key(MANIFEST)
                    );
                } else {
                    tracing::debug!(certificate = %name, "'{name}' is new to the fleet");
                }
                versions.set_floor(&name, Floor::default());
            }
        }
    }
    Ok(())
}

/// This host's manifest entry sealed, with its key and the digest of what it vouches for
/// under which key; `None` when that is what it wrote last, or it vouches for nothing.
fn sealed_entry(link: &FleetLink, versions: &Versions) -> Option<(String, Vec<u8>, String)> {
    let certs = versions.vouched();
    if certs.is_empty() {
        return None;
    }
    let text = serde_json::to_vec(&(&certs, link.key.current().id())).ok()?;
    let digest = digest(&text);
    if versions.manifest_written(&digest) {
        return None;
    }
    let at = link.clock.now();
    let rel = manifest_key(link.fleet.host());
    let place = Place::new(Purpose::Manifest, &rel, "");
    let version = u64::try_from(at.unix_timestamp()).unwrap_or(0);
    match envelope::seal_json(&link.key, &place, version, &ManifestEntry { at, certs }) {
        Ok(sealed) => Some((rel, sealed, digest)),
        Err(e) => {
            tracing::warn!("{e:#}");
            None
        }
    }
}

/// Writes this host's manifest entry when what it vouches for changed since it last did
/// (the versions file saved with the digest of what was written). A failure is a warning:
/// the next synchronisation writes it.
pub(super) async fn publish(link: &FleetLink, versions: &mut Versions) {
    let Some((rel, sealed, digest)) = sealed_entry(link, versions) else {
        return;
    };
    if let Err(e) = link.fleet.put_own(&rel, sealed).await {
        tracing::warn!(
            "could not write this host's entry of the fleet's manifest {}: {e}",
            link.fleet.key(&rel)
        );
        return;
    }
    versions.wrote_manifest(&digest);
    if let Err(e) = versions.save() {
        tracing::warn!("{e:#}");
    }
}

/// Refuses the lead's work on `name` while etcd holds no shared record of it (`what`: its
/// key) but the fleet vouches for a live one (above the last tombstone) and this host's own
/// record (`local`) shows neither an order nor an order intent: the record was deleted (or
/// etcd rolled back to before it), and a first order now would be a second, billed one. A
/// host that knows the order (the one that led it) shares its record again at its next lead.
pub(super) fn check_missing_state(
    what: &str,
    versions: &Versions,
    name: &str,
    local: &CertRecord,
) -> Result<()> {
    let v = versions.vouched_of(name);
    if !v.live() || !local.partner.is_unordered() {
        return Ok(());
    }
    let by = versions
        .floor_of(name)
        .filter(|f| !f.by.is_empty())
        .map_or_else(String::new, |f| {
            format!(" (vouched for by {})", f.by.join(", "))
        });
    bail!(
        "{what} is missing, but the fleet accepted version {} of it{by}: the shared record \
         was deleted, or etcd rolled back; this host knows no order of '{name}' and places \
         none (it could be a second, billed order). A host whose own record shows the order \
         (the one that led it) shares it again at its next lead: run `cert-agent renew` there",
        v.state
    );
}

#[cfg(test)]
mod tests {
    use super::*;

    fn entry(certs: &[(&str, u64, u64, u64)]) -> ManifestEntry {
        ManifestEntry {
            at: OffsetDateTime::UNIX_EPOCH,
            certs: certs
                .iter()
                .map(|(n, s, c, t)| {
                    (
                        (*n).to_owned(),
                        Vouched {
                            state: *s,
                            current: *c,
                            tombstone: *t,
                        },
                    )
                })
                .collect(),
        }
    }

    #[test]
    fn the_floor_is_the_highest_any_entry_vouches_for_so_one_replayed_entry_is_outvoted() {
        let names = vec!["www".to_owned(), "shop".to_owned(), "new".to_owned()];
        let entries = vec![
            // web1's entry replayed from before the reissue.
            (
                "web1".to_owned(),
                entry(&[("www", 3, 1, 0), ("shop", 2, 1, 0)]),
            ),
            ("web2".to_owned(), entry(&[("www", 5, 2, 0)])),
            (
                "web3".to_owned(),
                entry(&[("www", 5, 2, 0), ("shop", 6, 1, 6)]),
            ),
        ];
        let f = floors(&entries, &names);
        let www = &f["www"];
        assert_eq!((www.versions.state, www.versions.current), (5, 2));
        assert_eq!(www.by, ["web2", "web3"]);
        assert!(www.versions.live());
        let shop = &f["shop"];
        assert_eq!(shop.versions.tombstone, 6);
        assert!(!shop.versions.live(), "retired: no live record vouched for");
        assert!(!f.contains_key("new"), "no entry names it");
        assert!(floors(&[], &names).is_empty());
    }

    #[test]
    fn only_a_manifest_key_names_a_host() {
        assert_eq!(host_of("manifest/web1"), Some("web1"));
        for bad in [
            "manifest/",
            "manifest/a/b",
            "hosts/web1/seen",
            "manifestweb1",
        ] {
            assert_eq!(host_of(bad), None, "{bad}");
        }
    }

    #[test]
    fn a_missing_shared_record_is_refused_only_while_a_live_one_is_vouched_for_and_unknown_here() {
        let dir = tempfile::tempdir().unwrap();
        let mut v = Versions::load(dir.path()).unwrap();
        let mut local = CertRecord {
            name: "www".into(),
            ..CertRecord::default()
        };
        // Nothing known: a first order.
        assert!(check_missing_state("/p/certs/www/state", &v, "www", &local).is_ok());
        v.set_floor(
            "www",
            Floor {
                versions: Vouched {
                    state: 4,
                    current: 1,
                    tombstone: 0,
                },
                by: vec!["web1".into()],
            },
        );
        let err = check_missing_state("/p/certs/www/state", &v, "www", &local)
            .unwrap_err()
            .to_string();
        assert!(
            err.contains("/p/certs/www/state is missing")
                && err.contains("version 4")
                && err.contains("web1")
                && err.contains("places none"),
            "{err}"
        );
        // This host knows the order: its lead shares its record again.
        local.partner.set_order(crate::store::OrderRef {
            certificate_id: 7,
            order_id: None,
            placed_at: OffsetDateTime::UNIX_EPOCH,
            adopted: false,
        });
        assert!(check_missing_state("k", &v, "www", &local).is_ok());
        // Retired since (a tombstone above the record): a new order is the bring-back's.
        local.partner.stage = crate::store::PartnerStage::NoOrder;
        v.accept_tombstone("www", "k", 5, b"tomb").unwrap();
        assert!(check_missing_state("k", &v, "www", &local).is_ok());
    }
}
