//! With a rollout in waves, a host whose proof of a new certificate fails rolls its own install
//! back: the install is proved before it is committed ([`HeldBatch`]), a failed proof rolls it
//! back through the install's own rollback (the previous certificate and key files renamed
//! back, config test, reload), the host proves again that it serves the serial it served
//! before, and its proof of the new serial, published, says so. The host then refuses that
//! serial locally (its record's `rolled_back`) while the rollout stays halted.

use std::collections::{BTreeMap, HashMap};

use crate::config::Config;
use crate::crypto::same_serial_hex;
use time::OffsetDateTime;

use crate::engine::Job;
use crate::engine::Live;
use crate::engine::deploy::HeldBatch;

use super::link::FleetLink;
use super::proof::{self, Proof, RolledBack};

/// The proofs of a held batch: each certificate's proof, and those to roll back (name → why).
pub(super) struct Checked {
    pub(super) proofs: Vec<(String, Proof)>,
    pub(super) back: HashMap<String, String>,
    /// The serial each certificate to roll back served before.
    previous: BTreeMap<String, String>,
}

impl Checked {
    /// The serial proved of certificate `name`.
    pub(super) fn serial_of(&self, name: &str) -> Option<String> {
        self.proofs
            .iter()
            .find(|(n, _)| n == name)
            .map(|(_, p)| p.serial.clone())
    }
}

/// Records, when `checked` rolled `job`'s install back, that rollback and why in its record
/// (`rolled_back`): that serial is refused here while its rollout stays halted.
pub(super) fn note(job: &mut Job<'_>, checked: Option<&Checked>, now: OffsetDateTime) {
    let name = job.cert.name.as_str();
    let Some((why, serial)) = checked.and_then(|c| Some((c.back.get(name)?, c.serial_of(name)?)))
    else {
        return;
    };
    job.rec.rolled_back = Some(Box::new(crate::store::RolledBack {
        serial,
        reason: why.clone(),
        at: now,
    }));
    if let Err(e) = job.save() {
        tracing::warn!(certificate = %job.cert.name, "could not record the rollback: {e:#}");
    }
}

/// Why this host does not install `serial` of the certificate of `rec` again: it rolled it
/// back after its proof failed (the record's `rolled_back`), and no one resumed the rollout
/// since (`decision`, the newest made on `serial`).
pub(super) fn refused_here(
    rec: &crate::store::CertRecord,
    serial: &str,
    decision: Option<&super::decision::Decision>,
) -> Option<String> {
    use super::decision::Verdict;
    let rb = rec
        .rolled_back
        .as_ref()
        .filter(|rb| same_serial_hex(&rb.serial, serial))?;
    if decision.is_some_and(|d| d.verdict == Verdict::Resume && d.at > rb.at) {
        return None;
    }
    Some(format!(
        "rolled back here at {}: {}; serial {serial} is refused on this host while its \
         rollout is halted",
        crate::clock::rfc3339(rb.at),
        rb.reason
    ))
}

/// Proves what this host serves of each certificate `held` made live (`published`: the
/// fleet's version of each); a failed proof of a certificate that replaced another rolls it
/// back (a first install has nothing to return to: it stays, its proof failed, as without
/// a rollout; nor does one installed because the certificate it replaced neared its end,
/// `overridden`: an expiring certificate is worse than an unproven one). `None` without a
/// rollout in waves: the batch is committed as it is and proved afterwards, as always.
pub(super) async fn check(
    link: &FleetLink,
    config: &Config,
    held: &HeldBatch<'_>,
    (published, overridden): (&BTreeMap<String, u64>, &BTreeMap<String, String>),
) -> Option<Checked> {
    link.config.rollout.as_ref()?;
    Some(check_live(link, config, &held.live(), (published, overridden)).await)
}

/// [`check`] of the certificates `live` (with a rollout in waves).
pub(super) async fn check_live(
    link: &FleetLink,
    config: &Config,
    live: &[Live],
    (published, overridden): (&BTreeMap<String, u64>, &BTreeMap<String, String>),
) -> Checked {
    let asked: Vec<(String, String, u64)> = live
        .iter()
        .map(|l| {
            let version = published.get(&l.name).copied().unwrap_or(0);
            (l.name.clone(), l.serial.clone(), version)
        })
        .collect();
    let proofs = proof::prove_all(link, config, &asked).await;
    let (mut back, mut previous) = to_roll_back(live, &proofs);
    back.retain(|name, _| !overridden.contains_key(name));
    previous.retain(|name, _| !overridden.contains_key(name));
    Checked {
        proofs,
        back,
        previous,
    }
}

/// Of `live`, those whose proof failed and that replaced another serial: name → why, and
/// name → the serial they replaced.
fn to_roll_back(
    live: &[Live],
    proofs: &[(String, Proof)],
) -> (HashMap<String, String>, BTreeMap<String, String>) {
    let mut back = HashMap::new();
    let mut previous = BTreeMap::new();
    for (name, p) in proofs {
        let Some(why) = p.failure() else { continue };
        let Some(l) = live.iter().find(|l| &l.name == name) else {
            continue;
        };
        match &l.previous {
            Some(prev) if !same_serial_hex(prev, &l.serial) => {
                back.insert(
                    name.clone(),
                    format!("this host's proof of serial {} failed: {why}", l.serial),
                );
                previous.insert(name.clone(), prev.clone());
            }
            _ => {}
        }
    }
    (back, previous)
}

/// After the batch was settled: each certificate rolled back proves again that this host
/// serves the serial it served before (a rollback that could not restore everything shows
/// there), and every proof of `checked` is published, a rolled back one saying what it rolled
/// back to.
pub(super) async fn publish(link: &FleetLink, config: &Config, checked: Checked) {
    let Checked {
        mut proofs,
        previous,
        ..
    } = checked;
    let again: Vec<(String, String, u64)> = previous
        .iter()
        .map(|(name, serial)| (name.clone(), serial.clone(), 0))
        .collect();
    let proved_again = prove_restored(link, config, &again).await;
    for (name, p) in &mut proofs {
        let Some(serial) = previous.get(name) else {
            continue;
        };
        let failure = match proved_again.get(name) {
            Some(again) => again.failure(),
            None => Some("it was not proved again".to_owned()),
        };
        match &failure {
            Some(why) => tracing::warn!(
                certificate = %name,
                serial = %serial,
                "rolled back, but this host does not serve serial {serial} again: {why}"
            ),
            None => tracing::warn!(
                certificate = %name,
                serial = %p.serial,
                "rolled back to serial {serial}, served again, after this host's proof failed"
            ),
        }
        p.rolled_back = Some(RolledBack {
            serial: serial.clone(),
            failure,
        });
    }
    proof::publish_all(link, config, proofs).await;
}

/// The proofs that this host serves again the serials of `again` (name, serial, version):
/// the same handshakes and health command as any proof.
async fn prove_restored(
    link: &FleetLink,
    config: &Config,
    again: &[(String, String, u64)],
) -> BTreeMap<String, Proof> {
    if again.is_empty() {
        return BTreeMap::new();
    }
    proof::prove_all(link, config, again)
        .await
        .into_iter()
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::fleet::proof::Answer;

    fn proof(serial: &str, served: &str) -> Proof {
        Proof {
            host: "web2".into(),
            serial: serial.into(),
            version: 2,
            at: OffsetDateTime::UNIX_EPOCH,
            answers: vec![Answer {
                address: "127.0.0.1:443".into(),
                server_name: "shop.test".into(),
                served: Some(served.into()),
                chain_error: None,
                error: None,
            }],
            health: None,
            since: None,
            rolled_back: None,
        }
    }

    fn live(name: &str, serial: &str, previous: Option<&str>) -> Live {
        Live {
            name: name.into(),
            serial: serial.into(),
            previous: previous.map(Into::into),
            previous_dates: None,
        }
    }

    #[test]
    fn only_a_failed_proof_of_a_certificate_that_replaced_another_is_rolled_back() {
        let live = [
            live("failed", "0B", Some("0A")),
            live("passed", "0B", Some("0A")),
            live("first", "0B", None),
            live("same", "0B", Some("0b")),
        ];
        let proofs: Vec<(String, Proof)> = vec![
            ("failed".into(), proof("0B", "0A")),
            ("passed".into(), proof("0B", "0B")),
            ("first".into(), proof("0B", "0A")),
            ("same".into(), proof("0B", "0A")),
        ];
        let (back, previous) = to_roll_back(&live, &proofs);
        assert_eq!(back.keys().collect::<Vec<_>>(), ["failed"]);
        assert!(
            back["failed"].starts_with("this host's proof of serial 0B failed: ")
                && back["failed"].contains("(SNI shop.test) serves serial 0A, not 0B"),
            "{back:?}"
        );
        assert_eq!(previous["failed"], "0A");
    }
}
