//! Drift: a host that installed the fleet's current certificate but serves another serial
//! somewhere (a vhost missed, a reload that did not take, a file changed by hand). Each
//! synchronisation proves again ([`super::proof`]) what this host serves of every certificate
//! whose current it installed and whose last proof here is older than `[fleet]
//! proof_interval_secs`; the proof, sealed under the host's key like any other, shows the
//! drift to `fleet status` on every host, and what it saw is kept in the state directory
//! (`state_dir/proved.json`, [`super::proof::Proof::observation`]) for `check` and the
//! metrics of this host.

use crate::config::Config;
use crate::crypto::same_serial_hex;
use crate::store::served::Observation;
use crate::store::{Records, Store};

use super::link::FleetLink;
use super::versions::Versions;

/// The certificates to prove again now (name, serial, version): each whose fleet current this
/// host accepted and still has installed (`records`), with a verify address, whose last proof
/// kept here is not of that serial or is older than `interval_secs` — and that `just` (proved
/// by this synchronisation already) does not hold.
pub(super) fn due(
    config: &Config,
    (records, versions): (&Records, &Versions),
    kept: &std::collections::BTreeMap<String, Observation>,
    (now, interval_secs): (time::OffsetDateTime, u64),
    just: &[(String, String, u64)],
) -> Vec<(String, String, u64)> {
    let interval = time::Duration::seconds(i64::try_from(interval_secs).unwrap_or(i64::MAX));
    config
        .certificates
        .iter()
        .filter(|c| {
            c.install
                .verify_address
                .as_deref()
                .is_some_and(|a| !a.is_empty())
        })
        .filter(|c| !just.iter().any(|(n, _, _)| n == &c.name))
        .filter_map(|c| {
            let installed = records.get(&c.name)?.installed.as_ref()?;
            let current = versions.accepted_current(&c.name)?;
            if !same_serial_hex(&current.serial, &installed.serial) {
                // Not yet installed here (or kept back): lagging, not drift.
                return None;
            }
            let fresh = kept
                .get(&c.name)
                .filter(|o| o.is_for(&installed.serial))
                .is_some_and(|o| now - o.at < interval);
            (!fresh).then(|| {
                (
                    c.name.clone(),
                    installed.serial.clone(),
                    current.value.version,
                )
            })
        })
        .collect()
}

/// The drift pass of a synchronisation: proves again and publishes what [`due`] names.
pub(super) async fn prove_due(
    link: &FleetLink,
    config: &Config,
    (records, versions): (&Records, &Versions),
    just: &[(String, String, u64)],
) {
    let store = Store::existing(&config.agent.state_dir);
    let kept = crate::store::served::load_proved(&store);
    let now = link.clock.now();
    let again = due(
        config,
        (records, versions),
        &kept,
        (now, link.config.proof_interval_secs),
        just,
    );
    if again.is_empty() {
        return;
    }
    tracing::debug!(
        certificates = again.len(),
        "proving again what this host serves (drift)"
    );
    super::proof::prove_installed(link, config, &again).await;
}

#[cfg(test)]
mod tests;
