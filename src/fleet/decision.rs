//! A person's decision on a rollout in waves (`cert-agent fleet rollout resume|abort NAME`):
//! written sealed under the deciding host's own key, `hosts/HOST/rollout/NAME`, bound to the
//! serial it decides on (the fleet's current serial when it was made), the host and the time.
//! Its envelope has a purpose of its own (`rollout-decision`) and binds the key and the
//! certificate, so garbage, a value sealed without the fleet key, or one moved from another
//! key or certificate does not open; one that opens must name the host whose key it is under.
//! Each host applies the newest decision, of all the hosts', made on the serial it is about
//! to install ([`newest`]); the gates ([`super::rollout`]) do the rest: resume sets aside
//! the failed proofs made before it, abort refuses the serial.

use std::collections::BTreeMap;

use anyhow::{Context, Result, anyhow, bail};
use serde::{Deserialize, Serialize};
use time::OffsetDateTime;

use super::envelope::{self, Place, Purpose};
use super::key::FleetKeys;
use super::link::FleetLink;
use super::schema::{Current, current_key, decision_key, printable_capped};

/// What a person decided.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub(crate) enum Verdict {
    /// The halted waves go on; the host whose proof failed installs the serial again.
    Resume,
    /// No host installs the serial.
    Abort,
}

/// A decision on the rollout of one serial of one certificate.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct Decision {
    pub verdict: Verdict,
    /// The serial decided on.
    pub serial: String,
    /// The host it was made on (the one whose key it is written under).
    pub host: String,
    #[serde(with = "time::serde::rfc3339")]
    pub at: OffsetDateTime,
}

impl Decision {
    /// `rollout of serial S resumed by HOST at T` (or `aborted`).
    pub(crate) fn describe(&self) -> String {
        format!(
            "rollout of serial {} {} by {} at {}",
            self.serial,
            match self.verdict {
                Verdict::Resume => "resumed",
                Verdict::Abort => "aborted",
            },
            self.host,
            crate::clock::rfc3339(self.at)
        )
    }
}

/// Writes `verdict` on the rollout of the fleet's current serial of certificate `name`,
/// sealed, under this host's key; returns the decision written. The certificate must have a
/// current certificate in the fleet that opens.
pub(crate) async fn decide(link: &FleetLink, name: &str, verdict: Verdict) -> Result<Decision> {
    let rel = current_key(name);
    let full = link.fleet.key(&rel);
    let Some((value, _)) = link.fleet.get(&rel).await? else {
        bail!("the fleet has no current certificate of '{name}' ({full}): nothing to decide on");
    };
    let place = Place::new(Purpose::Current, &rel, name);
    let (_, current): (u64, Current) = envelope::open_json(&link.key, &link.fleet, &place, &value)?;
    let decision = Decision {
        verdict,
        serial: printable_capped(&current.serial, 255),
        host: link.fleet.host().to_owned(),
        at: link.clock.now(),
    };
    let (rel, sealed) = seal(&link.key, name, &decision)?;
    link.fleet
        .put_own(&rel, sealed)
        .await
        .with_context(|| format!("could not write the decision to {}", link.fleet.key(&rel)))?;
    Ok(decision)
}

/// `decision` on certificate `name` sealed for its key under `hosts/HOST/rollout/`, at the
/// version of its time.
pub(super) fn seal(keys: &FleetKeys, name: &str, decision: &Decision) -> Result<(String, Vec<u8>)> {
    let rel = decision_key(&decision.host, name);
    let place = Place::new(Purpose::RolloutDecision, &rel, name);
    let version = u64::try_from(decision.at.unix_timestamp()).unwrap_or(0);
    let sealed = envelope::seal_json(keys, &place, version, decision)?;
    Ok((rel, sealed))
}

/// Each certificate's rollout decisions that open, by the host that made them.
pub(super) type Decisions = BTreeMap<String, BTreeMap<String, Decision>>;

/// Adds the decision of `host` on certificate `name`, read at `rel` in a listing of `hosts/`,
/// to `decisions` when it opens; one that does not is logged naming its key and left out (a
/// decision that does not open was not made).
pub(super) fn take_listed(
    decisions: &mut Decisions,
    link: &FleetLink,
    (rel, host, name): (&str, &str, &str),
    value: &[u8],
) {
    match open_at(&link.key, &link.fleet.key(rel), rel, value) {
        Ok(d) => {
            decisions
                .entry(name.to_owned())
                .or_default()
                .insert(host.to_owned(), d);
        }
        Err(e) => tracing::warn!("{e:#}"),
    }
}

/// Opens the decision at `rel` (`hosts/HOST/rollout/NAME`, the etcd key being `full`): it
/// must open for that key and have been made on HOST. The error names the etcd key.
pub(super) fn open_at(keys: &FleetKeys, full: &str, rel: &str, value: &[u8]) -> Result<Decision> {
    let (host, name) = match rel.split('/').collect::<Vec<_>>().as_slice() {
        ["hosts", host, "rollout", name] => ((*host).to_owned(), (*name).to_owned()),
        _ => return Err(anyhow!("{full} is not a rollout decision")),
    };
    let place = Place::new(Purpose::RolloutDecision, rel, &name);
    let (version, plain, _) = envelope::open_raw(keys, &place, value).map_err(|why| {
        anyhow!(
            "the fleet's rollout decision {full} {why}; refused (a value written without the \
             fleet key, moved from another host's key or certificate, or altered)"
        )
    })?;
    let d: Decision = serde_json::from_slice(&plain).map_err(|e| {
        anyhow!("the fleet's rollout decision {full} opens but is not a valid document: {e}")
    })?;
    if d.host != host {
        return Err(anyhow!(
            "the fleet's rollout decision {full} was made on host {:?}, not {host:?}; refused",
            printable_capped(&d.host, 255)
        ));
    }
    if u64::try_from(d.at.unix_timestamp()).ok() != Some(version) {
        return Err(anyhow!(
            "the fleet's rollout decision {full} says it was made at {}, sealed as version \
             {version}; refused",
            crate::clock::rfc3339(d.at)
        ));
    }
    Ok(Decision {
        serial: printable_capped(&d.serial, 255),
        host: printable_capped(&d.host, 255),
        ..d
    })
}

/// The newest of `decisions` (by host) made on `serial`: the one each host applies.
pub(super) fn newest<'a>(
    decisions: Option<&'a BTreeMap<String, Decision>>,
    serial: &str,
) -> Option<&'a Decision> {
    decisions?
        .values()
        .filter(|d| crate::crypto::same_serial_hex(&d.serial, serial))
        .max_by_key(|d| d.at)
}

#[cfg(test)]
mod tests;
