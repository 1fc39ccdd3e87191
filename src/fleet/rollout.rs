//! The rollout of a new certificate in waves (`[fleet] rollout_*`): each host decides its own
//! wave from the sorted names of the hosts that announce themselves (a sealed `hosts/HOST/seen`) — the
//! canaries first, then the others in name order, `rollout_wave` at a time — and installs a
//! new certificate only once every host of the waves before its own has proved it serves it
//! ([`super::proof`]) and `rollout_pause_secs` passed since the last of those proofs. A failed
//! proof of an earlier wave halts it: the host installs nothing of that serial. The decisions
//! are pure; [`read`] gathers what they need from etcd.

use std::collections::{BTreeMap, BTreeSet};

use anyhow::Result;
use time::OffsetDateTime;

use crate::config::{Canaries, RolloutConfig, WaveSize};
use crate::crypto::same_serial_hex;

use super::decision::{Decision, Verdict};
use super::envelope::{self, Place, Purpose};
use super::link::FleetLink;
use super::proof::Proof;
use super::schema::HostSeen;
use super::versions::Versions;

/// The waves of `hosts` (sorted, each once): the canaries first (named ones that announce
/// themselves, or the first of the sorted names), then the others in order, `wave` at a time.
/// The canaries' wave is empty when none of the named canaries announces itself.
pub(super) fn waves(config: &RolloutConfig, hosts: &[String]) -> Vec<Vec<String>> {
    let canaries: Vec<String> = match &config.canaries {
        Canaries::Named(names) => hosts
            .iter()
            .filter(|h| names.contains(h))
            .cloned()
            .collect(),
        Canaries::Count(n) => hosts.iter().take(*n).cloned().collect(),
    };
    let rest: Vec<String> = hosts
        .iter()
        .filter(|h| !canaries.contains(h))
        .cloned()
        .collect();
    let size = match config.wave {
        WaveSize::Count(n) => n,
        // The fraction of the hosts after the canaries, rounded up (at most 100,000 hosts: the
        // product is exact enough).
        #[allow(
            clippy::cast_possible_truncation,
            clippy::cast_sign_loss,
            clippy::cast_precision_loss
        )]
        WaveSize::Fraction(f) => (f * rest.len() as f64).ceil() as usize,
    }
    .max(1);
    let mut out = vec![canaries];
    out.extend(rest.chunks(size).map(<[String]>::to_vec));
    out
}

/// What a host may do with a new certificate.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) enum Gate {
    /// Install it.
    Go,
    /// Not yet: why, in words.
    Wait(String),
    /// An earlier wave's host failed its proof of the serial: never, until a person decides.
    Halted(String),
}

/// Whether `host` may install `serial` now: every host of the waves before its own must have
/// a proof of `serial` that passed (a failed one halts the rollout), and `pause_secs` must
/// have passed since the last of those hosts proved it ([`Proof::proved_since`]: a drift
/// proof that passes again does not restart the pause). A host that does not announce itself is in the last
/// wave. `proofs`: each host's last proof of this certificate.
///
/// `decision`: the newest decision made on `serial` ([`super::decision::newest`]): abort
/// refuses the serial; resume sets aside the failed proofs made before it (the hosts that
/// made them count as having proved, and prove again themselves).
pub(super) fn gate(
    config: &RolloutConfig,
    hosts: &[String],
    (host, serial): (&str, &str),
    (proofs, decision): (&BTreeMap<String, Proof>, Option<&Decision>),
    now: OffsetDateTime,
) -> Gate {
    if let Some(d) = decision.filter(|d| d.verdict == Verdict::Abort) {
        return Gate::Halted(format!("{}: serial {serial} is refused", d.describe()));
    }
    let waves = waves(config, hosts);
    let own = waves
        .iter()
        .position(|w| w.iter().any(|h| h == host))
        .unwrap_or(waves.len());
    let earlier = &waves[..own.min(waves.len())];
    for (i, wave) in earlier.iter().enumerate() {
        for h in wave {
            if let Some(p) = proofs.get(h).filter(|p| same_serial_hex(&p.serial, serial))
                && !set_aside(p, decision)
                && let Some(why) = p.failure()
            {
                return Gate::Halted(format!("rollout halted at wave {i}: {h}: {why}"));
            }
        }
    }
    let mut last = None;
    for (i, wave) in earlier.iter().enumerate() {
        for h in wave {
            match proofs.get(h).filter(|p| same_serial_hex(&p.serial, serial)) {
                Some(p) => last = last.max(Some(p.proved_since())),
                None => {
                    return Gate::Wait(format!(
                        "waiting for its wave ({own} of {}): {h} (wave {i}) has not proved \
                         serial {serial} yet",
                        waves.len() - 1
                    ));
                }
            }
        }
    }
    let pause = time::Duration::seconds(i64::try_from(config.pause_secs).unwrap_or(i64::MAX));
    match last {
        Some(at) if now < at + pause => Gate::Wait(format!(
            "waiting for its wave ({own} of {}): the pause after wave {} lasts until {}",
            waves.len() - 1,
            own.saturating_sub(1),
            crate::clock::rfc3339(at + pause)
        )),
        _ => Gate::Go,
    }
}

/// Why the waves no longer hold `serial` back from a host whose installed certificate is
/// `serving` (serial, `not_before`, `not_after`): less than `deadline_fraction` of its lifetime
/// is left at `now` (an expiring certificate is worse than an unproven one). `None`: the waves
/// hold it back as usual (or nothing is installed: a first install waits for its wave).
pub(super) fn overdue(
    config: &RolloutConfig,
    serving: Option<(&str, OffsetDateTime, OffsetDateTime)>,
    serial: &str,
    now: OffsetDateTime,
) -> Option<String> {
    let (old, not_before, not_after) = serving?;
    let life = (not_after - not_before).max(time::Duration::ZERO);
    let margin = life * config.deadline_fraction;
    let from = not_after - margin;
    (now >= from && !same_serial_hex(old, serial)).then(|| {
        format!(
            "installed serial {serial} at once, whatever its wave: the certificate this host \
             served (serial {old}) ends at {}, within the last {}% of its lifetime \
             (rollout_deadline_fraction {}, from {})",
            crate::clock::rfc3339(not_after),
            (config.deadline_fraction * 100.0).round(),
            config.deadline_fraction,
            crate::clock::rfc3339(from)
        )
    })
}

/// Whether a resume `decision` sets the failed proof `p` aside (made before it).
fn set_aside(p: &Proof, decision: Option<&Decision>) -> bool {
    decision.is_some_and(|d| d.verdict == Verdict::Resume && p.at <= d.at)
}

/// Where the rollout of `serial` halted, when it did: the first host, in wave order, of a wave
/// before the last whose proof of `serial` failed (a later wave is kept back) —
/// `rollout halted at wave N: HOST: reason`, the words of the [`Gate::Halted`] of the hosts it
/// keeps back. A person's `decision` ends the halt: abort (the serial is refused, no longer
/// halted), or resume (the failed proofs made before it are set aside). Once every host that
/// announces itself has a proof of `serial` (each installed it), the rollout is over and keeps
/// no host back: a proof failing then is drift on that host ([`super::drift`]), not a halt.
pub(super) fn halted(
    config: &RolloutConfig,
    hosts: &[String],
    serial: &str,
    (proofs, decision): (&BTreeMap<String, Proof>, Option<&Decision>),
) -> Option<String> {
    if decision.is_some_and(|d| d.verdict == Verdict::Abort) {
        return None;
    }
    let over = hosts.iter().all(|h| {
        proofs
            .get(h)
            .is_some_and(|p| same_serial_hex(&p.serial, serial))
    });
    if over {
        return None;
    }
    let waves = waves(config, hosts);
    let before_last = &waves[..waves.len().saturating_sub(1)];
    before_last.iter().enumerate().find_map(|(i, wave)| {
        wave.iter().find_map(|h| {
            let p = proofs
                .get(h)
                .filter(|p| same_serial_hex(&p.serial, serial) && !set_aside(p, decision))?;
            let why = p.failure()?;
            Some(format!("rollout halted at wave {i}: {h}: {why}"))
        })
    })
}

/// What the gates of one synchronisation need from etcd: the hosts that announce themselves
/// (sorted), and each host's last proof and decision per certificate (those that do not open
/// are left out, each logged naming its key: a host without a proof that opens has not proved
/// anything; a decision that does not open was not made).
#[derive(Debug, Default)]
pub(super) struct Fleetwide {
    pub(super) hosts: Vec<String>,
    pub(super) proofs: BTreeMap<String, BTreeMap<String, Proof>>,
    pub(super) decisions: BTreeMap<String, BTreeMap<String, Decision>>,
}

impl Fleetwide {
    /// The decision that applies to `serial` of certificate `name` (the newest made on it).
    pub(super) fn decision(&self, name: &str, serial: &str) -> Option<&Decision> {
        super::decision::newest(self.decisions.get(name), serial)
    }
}

/// Reads [`Fleetwide`]: each host's proofs, decisions and `seen` record, at one revision, not
/// its results ([`listed`]). A proof or decision older than one this host opened at its key
/// before (`versions`) is refused as a replay, naming its key.
pub(super) async fn read(link: &FleetLink, versions: &mut Versions) -> Result<Fleetwide> {
    Ok(gather(link, listed(link).await?, versions))
}

/// What [`gather`] takes: the keys of every host from `proof/` through `seen` (`proof/`,
/// `rollout/`, `seen`).
pub(super) async fn listed(link: &FleetLink) -> Result<Vec<(String, Vec<u8>)>, super::FleetError> {
    link.fleet.hosts_between("proof/", "seen").await
}

/// Whether the proof or decision at `key` (made at `at`) is no older than the one this host
/// opened there before; a replay is logged naming the key.
fn not_replayed(versions: &mut Versions, link: &FleetLink, key: &str, at: OffsetDateTime) -> bool {
    let version = u64::try_from(at.unix_timestamp()).unwrap_or(0);
    match versions.accept_rollout(key, version) {
        Ok(()) => true,
        Err(floor) => {
            tracing::warn!(
                "{} was made at {}, before the one this host opened there (version {floor}): \
                 an older value put back; refused",
                link.fleet.key(key),
                crate::clock::rfc3339(at)
            );
            false
        }
    }
}

/// [`Fleetwide`] of the values `listed` under `hosts/`.
pub(super) fn gather(
    link: &FleetLink,
    listed: Vec<(String, Vec<u8>)>,
    versions: &mut Versions,
) -> Fleetwide {
    let mut hosts = BTreeSet::new();
    let mut proofs: BTreeMap<String, BTreeMap<String, Proof>> = BTreeMap::new();
    let mut decisions = super::decision::Decisions::new();
    for (key, value) in listed {
        let parts: Vec<&str> = key.split('/').collect();
        match parts.as_slice() {
            // Only a host whose sealed `seen` record opens announces itself: an etcd writer
            // without the fleet key adds no host that would hold a wave back.
            ["hosts", host, "seen"] => {
                let place = Place::new(Purpose::HostSeen, &key, "");
                match envelope::open_json::<HostSeen>(&link.key, &link.fleet, &place, &value) {
                    Ok(_) => {
                        hosts.insert((*host).to_owned());
                    }
                    Err(e) => tracing::warn!("{e:#}"),
                }
            }
            ["hosts", host, "proof", name] => match super::proof::open(link, &key, &value) {
                Ok(p) if !not_replayed(versions, link, &key, p.at) => {}
                Ok(p) => {
                    proofs
                        .entry((*name).to_owned())
                        .or_default()
                        .insert((*host).to_owned(), p);
                }
                Err(e) => tracing::warn!("{e:#}"),
            },
            ["hosts", host, "rollout", name] => {
                super::decision::take_listed(&mut decisions, link, (&key, host, name), &value);
            }
            _ => {}
        }
    }
    decisions.retain(|name, by_host| {
        by_host.retain(|host, d| {
            let key = super::schema::decision_key(host, name);
            not_replayed(versions, link, &key, d.at)
        });
        !by_host.is_empty()
    });
    Fleetwide {
        hosts: hosts.into_iter().collect(),
        proofs,
        decisions,
    }
}

#[cfg(test)]
mod tests;
