//! `cert-agent fleet rotate-key`: every value under the fleet's prefix sealed again under the
//! current fleet key, by a host that holds the previous key too, as the fleet's leader (every
//! write fenced by its lead, like a leader run's).
//!
//! What is re-sealed keeps its document; the shared record and the current certificate are
//! sealed at a higher version than any this host accepted or etcd holds (with the private key
//! each carries, sealed again at that version), so that every host accepts them as new
//! values, never as replays; a host that already serves the certificate installs nothing and
//! reloads nothing. The other values keep their version (nobody refuses them by version).
//! The key check is sealed again last: once it is under the new key, a host that holds only
//! the old key is no longer part of the fleet, and the rotation has ended on this host (the
//! previous key opens nothing here any more, recorded in `fleet-versions.json`). A value that
//! opens under neither key is left as it is and reported.
//!
//! The rotation is complete only once every host has moved: each host's sealed
//! `hosts/HOST/seen` names the new key as its current one and no previous key it still opens
//! values with (the rotation ended on it). Until then the hosts still on the old key are
//! listed. Running it again checks the hosts again; it re-seals a value still under the
//! previous key only while the rotation has not ended on this host (after that such a value is
//! one put back, and is left as it is).

use anyhow::{Context, Result, anyhow, bail};
use serde::Serialize;

use crate::clock::Clock;
use crate::config::Config;
use crate::store::Store;

use super::coord::{Expect, Leadership, RESIGNED, Written};
use super::envelope::{self, Place, Purpose};
use super::follower::hosts::report_seen;
use super::key::Which;
use super::link::{
    FleetLink, KEY_CHECK_TEXT, check_instance, check_key, connect, hold_state, lead_for,
    reseal_forged_key_check, retire_previous_key,
};
use super::schema::{AcmeAccountDoc, Current, HostSeen, KEY_CHECK, Kind, SharedState, b64, unb64};
use super::versions::Versions;

/// One value sealed again.
#[derive(Debug, Serialize)]
pub(crate) struct Resealed {
    /// Its etcd key.
    pub key: String,
    /// What it is (the envelope's purpose).
    pub what: &'static str,
    /// Its version before and after.
    pub from: u64,
    pub to: u64,
}

/// What `fleet rotate-key` did.
#[derive(Debug, Serialize)]
pub(crate) struct RotateReport {
    /// The id of the key everything is sealed under now, and of the previous key.
    pub key_id: u8,
    pub previous_key_id: u8,
    /// The values sealed again under the current key.
    pub resealed: Vec<Resealed>,
    /// The etcd keys already under the current key.
    pub already: Vec<String>,
    /// The values left as they are: their etcd key and why (they open under neither key, or
    /// are not the fleet's).
    pub left: Vec<(String, String)>,
    /// The hosts that have not moved yet: their name and why (their `seen` record names
    /// another current key, a previous key still in use, or does not open).
    pub unmoved: Vec<Unmoved>,
    /// Every value is under the current key and every host has moved: the rotation is
    /// complete, and the previous key file must be removed from every host.
    pub complete: bool,
}

/// A host still on the old key.
#[derive(Debug, Serialize)]
pub(crate) struct Unmoved {
    pub host: String,
    pub why: String,
}

/// A value sealed again, ready to be written.
struct Sealed {
    value: Vec<u8>,
    what: &'static str,
    from: u64,
    to: u64,
}

/// Re-seals every value under the prefix under the current key, as the leader.
pub(crate) async fn rotate_key(config: &Config, clock: Clock) -> Result<RotateReport> {
    let link = connect(config, clock)
        .await?
        .ok_or_else(|| anyhow!("no [fleet] in {}", config.path.display()))?;
    let Some(previous) = link.key.previous() else {
        bail!(
            "`fleet rotate-key` re-seals what the previous fleet key sealed: this host has no \
             previous key (set [fleet] previous_secret_file to the old key's file, or pass the \
             systemd credential cert-agent-fleet-key-previous, with the new key as secret_file)"
        );
    };
    let previous_key_id = previous.id();
    let store = Store::open(&config.agent.state_dir)?;
    let _lock = hold_state(&store, config, "fleet rotate-key")?;
    let mut versions = Versions::load(store.dir())?;
    check_instance(&link, &versions).await?;
    retire_previous_key(&link, &mut versions, None)?;
    let seen = check_key(&link, None).await?;
    retire_previous_key(&link, &mut versions, seen)?;
    let lead = lead_for(&link, "re-sealed", "fleet rotate-key").await?;
    reseal_forged_key_check(&link, &lead).await;
    let mut report = RotateReport {
        key_id: link.key.current().id(),
        previous_key_id,
        resealed: Vec::new(),
        already: Vec::new(),
        left: Vec::new(),
        unmoved: Vec::new(),
        complete: false,
    };
    let audit = |event: &str, details: serde_json::Value| {
        if let Err(e) = store.audit(None, event, &details) {
            tracing::warn!("{e}");
        }
    };
    audit(
        "fleet-lead-taken",
        serde_json::json!({ "host": link.fleet.host(), "for": "rotate-key" }),
    );
    let done = reseal_all(&link, &lead, &mut versions, &mut report).await;
    lead.resign().await;
    audit(
        "fleet-lead-given",
        serde_json::json!({
            "host": link.fleet.host(),
            "key_id": report.key_id,
            "resealed": report.resealed.len(),
            "ok": done.is_ok(),
        }),
    );
    done?;
    // The key check is under the current key now (sealed again last): the rotation has ended
    // on this host, which says so in its own `seen` record before it checks the others'.
    if check_key(&link, None).await? == Some(Which::Current) {
        retire_previous_key(&link, &mut versions, Some(Which::Current))?;
    }
    report_seen(&link, &store, link.fleet.host()).await;
    report.unmoved = unmoved_hosts(&link).await?;
    report.complete = report.left.is_empty() && report.unmoved.is_empty();
    Ok(report)
}

/// The hosts whose sealed `hosts/HOST/seen` does not show them moved to the current key: it
/// names another current key or a previous key still in use, or does not open.
async fn unmoved_hosts(link: &FleetLink) -> Result<Vec<Unmoved>> {
    let current = link.key.current().id();
    let mut out = Vec::new();
    // Each host's `seen` record only: its results and proofs are under `hosts/` too.
    for (rel, value) in link.fleet.hosts_under("seen").await? {
        let Some(host) = rel
            .strip_prefix("hosts/")
            .and_then(|r| r.strip_suffix("/seen"))
            .filter(|h| !h.contains('/'))
        else {
            continue;
        };
        let place = Place::new(Purpose::HostSeen, &rel, "");
        let why = match envelope::open_json::<HostSeen>(&link.key, &link.fleet, &place, &value) {
            Ok((_, seen)) if seen.key_id != current => format!(
                "its current fleet key is id {}, not {current} (last synchronised {})",
                seen.key_id,
                crate::clock::rfc3339(seen.at)
            ),
            Ok((_, seen)) => match seen.previous_key_id {
                Some(id) => format!(
                    "it still opens values with its previous fleet key (id {id}): it has not \
                     run since the key check was sealed again (last synchronised {})",
                    crate::clock::rfc3339(seen.at)
                ),
                None => continue,
            },
            Err(e) => format!("{e:#}"),
        };
        out.push(Unmoved {
            host: host.to_owned(),
            why,
        });
    }
    Ok(out)
}

/// Every key under the prefix, the key check last.
async fn reseal_all(
    link: &FleetLink,
    lead: &Leadership,
    versions: &mut Versions,
    report: &mut RotateReport,
) -> Result<()> {
    let mut keys: Vec<String> = link
        .fleet
        .list("")
        .await?
        .into_iter()
        .map(|(k, _)| k)
        .filter(|k| k != "leader" && k != RESIGNED && k != KEY_CHECK)
        .collect();
    keys.push(KEY_CHECK.to_owned());
    for rel in keys {
        lead.ensure_held()?;
        let Some((value, revision)) = link.fleet.get(&rel).await? else {
            continue;
        };
        let full = link.fleet.key(&rel);
        let Some(kind) = Kind::of(&rel) else {
            report
                .left
                .push((full, "not a key the fleet writes".to_owned()));
            continue;
        };
        let sealed = match reseal(link, versions, kind, &rel, &value) {
            Ok(Some(s)) => s,
            Ok(None) => {
                report.already.push(full);
                continue;
            }
            Err(e) => {
                report.left.push((full, format!("{e:#}")));
                continue;
            }
        };
        match lead
            .put(&rel, sealed.value.clone(), Expect::Revision(revision))
            .await?
        {
            Written::Done(_) => {}
            Written::Conflict(_) => bail!(
                "{full} changed while it was being sealed again; run `fleet rotate-key` again \
                 (it re-seals only what is still under the previous key)"
            ),
        }
        match kind {
            Kind::State(name) => {
                versions.accept_state(name, &full, sealed.to, &sealed.value)?;
                versions.save()?;
            }
            Kind::Retired(name) => {
                versions.accept_tombstone(name, &full, sealed.to, &sealed.value)?;
                versions.save()?;
            }
            _ => {}
        }
        tracing::info!(key = %full, version = sealed.to, "sealed again under the current fleet key");
        report.resealed.push(Resealed {
            key: full,
            what: sealed.what,
            from: sealed.from,
            to: sealed.to,
        });
    }
    Ok(())
}

/// The value at `rel` sealed again under the current key; `None` when it is under it already.
fn reseal(
    link: &FleetLink,
    versions: &Versions,
    kind: Kind<'_>,
    rel: &str,
    value: &[u8],
) -> Result<Option<Sealed>> {
    let place = kind.place(rel);
    let (version, plain, which) = envelope::open_which(&link.key, &link.fleet, &place, value)?;
    match kind {
        Kind::State(name) => reseal_state(link, versions, name, rel, version, &plain, which),
        Kind::Current(name) => reseal_current(link, versions, name, rel, version, &plain, which),
        Kind::AcmeAccount(ca) => reseal_account(link, ca, rel, version, &plain, which),
        // A tombstone takes the shared record's place: at the next version, as the record.
        Kind::Retired(name) if which != Which::Current => {
            let to = versions.next_state(name, version)?;
            Ok(Some(Sealed {
                value: envelope::seal(&link.key, &place, to, &plain)?,
                what: kind.label(),
                from: version,
                to,
            }))
        }
        _ if which == Which::Current => Ok(None),
        Kind::KeyCheck if plain != KEY_CHECK_TEXT => {
            bail!("the key check opens but does not hold the key check's text")
        }
        _ => Ok(Some(Sealed {
            value: envelope::seal(&link.key, &place, version, &plain)?,
            what: kind.label(),
            from: version,
            to: version,
        })),
    }
}

/// The shared record and its pending key, at the next version.
fn reseal_state(
    link: &FleetLink,
    versions: &Versions,
    name: &str,
    rel: &str,
    version: u64,
    plain: &[u8],
    which: Which,
) -> Result<Option<Sealed>> {
    let mut doc: SharedState =
        serde_json::from_slice(plain).context("the shared record is not a valid document")?;
    let key_place = Place::new(Purpose::PendingKey, rel, name);
    let pending = match &doc.pending_key {
        Some(sealed) => {
            let (at, pem, w) = envelope::open_which(
                &link.key,
                &link.fleet,
                &key_place,
                &unb64("pending key", sealed)?,
            )?;
            if at != version {
                bail!("its pending key is of version {at}, not {version}");
            }
            Some((pem, w))
        }
        None => None,
    };
    if which == Which::Current && pending.as_ref().is_none_or(|(_, w)| *w == Which::Current) {
        return Ok(None);
    }
    let to = versions.next_state(name, version)?;
    if let Some((pem, _)) = pending {
        doc.pending_key = Some(b64(&envelope::seal(&link.key, &key_place, to, &pem)?));
    }
    let place = Place::new(Purpose::State, rel, name);
    Ok(Some(Sealed {
        value: envelope::seal_json_lean(&link.key, &place, to, &doc)?,
        what: "shared record",
        from: version,
        to,
    }))
}

/// The current certificate and its key, at the next version.
fn reseal_current(
    link: &FleetLink,
    versions: &Versions,
    name: &str,
    rel: &str,
    version: u64,
    plain: &[u8],
    which: Which,
) -> Result<Option<Sealed>> {
    let mut doc: Current =
        serde_json::from_slice(plain).context("the current certificate is not a valid document")?;
    if doc.version != version {
        bail!("it says version {}, sealed as {version}", doc.version);
    }
    let key_place = Place::new(Purpose::CurrentKey, rel, name);
    let (at, pem, key_which) =
        envelope::open_which(&link.key, &link.fleet, &key_place, &unb64("key", &doc.key)?)?;
    if at != version {
        bail!("its key is of version {at}, not {version}");
    }
    if which == Which::Current && key_which == Which::Current {
        return Ok(None);
    }
    let to = versions.next_current(name, version)?;
    doc.version = to;
    doc.key = b64(&envelope::seal(&link.key, &key_place, to, &pem)?);
    let place = Place::new(Purpose::Current, rel, name);
    Ok(Some(Sealed {
        value: envelope::seal_json(&link.key, &place, to, &doc)?,
        what: "current certificate",
        from: version,
        to,
    }))
}

/// The fleet's ACME account and its credentials, under the current key (same version).
fn reseal_account(
    link: &FleetLink,
    ca: &str,
    rel: &str,
    version: u64,
    plain: &[u8],
    which: Which,
) -> Result<Option<Sealed>> {
    let mut doc: AcmeAccountDoc =
        serde_json::from_slice(plain).context("the ACME account is not a valid document")?;
    let key_place = Place::new(Purpose::AcmeAccountKey, rel, ca);
    let (at, credentials, key_which) = envelope::open_which(
        &link.key,
        &link.fleet,
        &key_place,
        &unb64("ACME account", &doc.credentials)?,
    )?;
    if at != version {
        bail!("its credentials are of version {at}, not {version}");
    }
    if which == Which::Current && key_which == Which::Current {
        return Ok(None);
    }
    doc.credentials = b64(&envelope::seal(
        &link.key,
        &key_place,
        version,
        &credentials,
    )?);
    let place = Place::new(Purpose::AcmeAccount, rel, ca);
    Ok(Some(Sealed {
        value: envelope::seal_json(&link.key, &place, version, &doc)?,
        what: "ACME account",
        from: version,
        to: version,
    }))
}
