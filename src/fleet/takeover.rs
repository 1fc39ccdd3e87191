//! Takeover: a lead that ended without being given up (the leader killed, cut off, or stalled
//! past its lease) may leave work open — an order intent, a reissue, a pending validation, a
//! certificate that is due. The daemons' follow loop ([`super::watch`]) sees the leader key
//! deleted; this module reads, from the sealed shared records every host already syncs, what
//! a new leader would do, and the daemon starts a run when there is any.

use std::collections::{BTreeMap, HashMap};

use anyhow::{Result, bail};

use crate::config::{CertificateConfig, Config};
use crate::engine::{
    self,
    plan::{self, Action, Disk},
};
use crate::store::{CertRecord, Installed, Store};

use super::coord::FleetError;
use super::envelope::{self, Place, Purpose};
use super::link::FleetLink;
use super::schema::{Current, SharedState, current_key, state_key};
use super::versions::Versions;

/// A lead that ended with its lease while work was open.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Takeover {
    /// The host that held the lead, when this host saw it take it.
    pub leader: Option<String>,
    /// What is open, one line per certificate (`'NAME': what`).
    pub open: Vec<String>,
}

impl Takeover {
    /// One line for the log and the run's report and journal.
    pub(crate) fn describe(&self) -> String {
        format!(
            "the lead{} ended with its lease while work was open: {}",
            self.leader
                .as_ref()
                .map(|h| format!(" of {}", super::schema::printable(h)))
                .unwrap_or_default(),
            self.open.join("; ")
        )
    }
}

/// Certificates whose shared record and current certificate are read together: their values
/// are read in transactions of a hundred gets and held until looked at (a current
/// certificate is about 17 KiB).
const CHUNK: usize = 250;

/// What the fleet's shared records leave open for a leader, one line per certificate of
/// `config` (`'NAME': what`); empty when a new leader would have nothing to do now. Read as a
/// run's planner would decide for the shared record and the fleet's current certificate
/// (backoffs respected). A record that does not open is left out, with a warning. Every
/// daemon of the fleet reads this when a lead ends with its lease: the values are read
/// [`CHUNK`] certificates at a time in transactions, not one request per value (ten
/// thousand certificates on fifty hosts would otherwise send a million requests at once).
/// A current certificate this host already holds — etcd still lists it at the revision this
/// host accepted it at (its own versions file, never etcd), and this host installed that
/// very certificate — is not read again: only its revision is (about 17 KiB less per
/// certificate, 170 MB less per daemon at 10,000). A replayed or forged value carries
/// another revision and is read and opened as before.
pub async fn open_work(config: &Config, link: &FleetLink) -> Vec<String> {
    let versions = Versions::load(&config.agent.state_dir)
        .inspect_err(|e| tracing::warn!("fleet: {e:#}"))
        .ok();
    let store = Store::existing(&config.agent.state_dir);
    let mut open = Vec::new();
    for chunk in config.certificates.chunks(CHUNK) {
        let held: HashMap<String, (i64, Installed)> = chunk
            .iter()
            .filter_map(|c| {
                let h = held_current(versions.as_ref()?, &store, &c.name)?;
                Some((current_key(&c.name), h))
            })
            .collect();
        let values = match read_chunk(link, chunk, &held).await {
            Ok(values) => values,
            Err(e) => {
                tracing::warn!("fleet: {e}");
                continue;
            }
        };
        for cert in chunk {
            let state = values
                .get(&state_key(&cert.name))
                .map(|(v, _)| v.as_slice());
            let rel = current_key(&cert.name);
            let current = match (values.get(&rel), held.get(&rel)) {
                (None, _) => Ok(None),
                (Some((_, at)), Some((rev, installed))) if at == rev => Ok(Some(installed.clone())),
                (Some((bytes, _)), _) => open_current(link, cert, bytes).map(Some),
            };
            match current.and_then(|current| open_for(config, link, cert, state, current)) {
                Ok(Some(what)) => open.push(format!("'{}': {what}", cert.name)),
                Ok(None) => {}
                Err(e) => tracing::warn!(certificate = %cert.name, "fleet: {e:#}"),
            }
        }
    }
    open
}

/// The shared records and current certificates of `chunk` as etcd holds them now (each with
/// its modification revision): of a current in `held`, first only its revision, and its
/// value only when etcd holds it at another revision than the one held.
async fn read_chunk(
    link: &FleetLink,
    chunk: &[CertificateConfig],
    held: &HashMap<String, (i64, Installed)>,
) -> Result<BTreeMap<String, (Vec<u8>, i64)>, FleetError> {
    let keys: Vec<String> = chunk
        .iter()
        .flat_map(|c| [state_key(&c.name), current_key(&c.name)])
        .collect();
    link.fleet
        .read_fresh(&keys, |k| held.get(k).map(|(rev, _)| *rev))
        .await
}

/// The current certificate of `name` as this host holds it: the revision it accepted the
/// fleet's value at, and its own install of that very certificate (the same serial).
/// `None`: its value is to be read.
fn held_current(versions: &Versions, store: &Store, name: &str) -> Option<(i64, Installed)> {
    let accepted = versions.accepted_current(name)?;
    let revision = accepted.value.revision.filter(|r| *r > 0)?;
    let installed = store.load(name).ok()?.installed?;
    crate::crypto::same_serial_hex(&installed.serial, &accepted.serial)
        .then_some((revision, installed))
}

/// The fleet's current certificate of `cert` from its sealed value, as the planner sees an
/// installed one.
fn open_current(link: &FleetLink, cert: &CertificateConfig, bytes: &[u8]) -> Result<Installed> {
    let rel = current_key(&cert.name);
    let place = Place::new(Purpose::Current, &rel, &cert.name);
    let (_, current): (u64, Current) = envelope::open_json(&link.key, &link.fleet, &place, bytes)?;
    Ok(installed(&current))
}

/// What is open for `cert`, if anything, from its shared record as etcd holds it (`None`: no
/// value) and the fleet's current certificate.
fn open_for(
    config: &Config,
    link: &FleetLink,
    cert: &CertificateConfig,
    state: Option<&[u8]>,
    current: Option<Installed>,
) -> Result<Option<String>> {
    let rel = state_key(&cert.name);
    let mut record = match state {
        Some(bytes) => {
            let place = Place::new(Purpose::State, &rel, &cert.name);
            let (_, shared): (u64, SharedState) =
                envelope::open_json(&link.key, &link.fleet, &place, bytes)?;
            if shared.record.name != cert.name {
                bail!(
                    "the fleet's record {} names certificate '{}', not '{}'",
                    link.fleet.key(&rel),
                    shared.record.name,
                    cert.name
                );
            }
            shared.record
        }
        None => CertRecord {
            name: cert.name.clone(),
            ..CertRecord::default()
        },
    };
    if current.is_some() {
        record.installed = current;
    }
    let now = link.clock.now();
    let action = plan::decide(&engine::unattended_inputs(
        config,
        cert,
        &record,
        Disk::AsInstalled,
        now,
    ));
    Ok(describe(&record, action))
}

/// The fleet's current certificate as the planner sees an installed one.
fn installed(current: &Current) -> Installed {
    Installed {
        serial: current.serial.clone(),
        not_before: current.not_before,
        not_after: current.not_after,
        certificate_id: current.certificate_id,
        files: Vec::new(),
        installed_at: current.published_at,
        leaf_file: None,
        leaf_stamp: None,
    }
}

/// The open work behind `action`, in words; `None` when a leader would do nothing now (idle,
/// backing off, an ended order, an order not allowed).
pub(super) fn describe(record: &CertRecord, action: Action) -> Option<String> {
    Some(match action {
        Action::Reconcile => "an order sent without a known answer".to_owned(),
        Action::Continue => match record.partner.reissue() {
            Some(r) if !r.confirmed => "a reissue sent without a known answer".to_owned(),
            Some(r) => format!(
                "a reissue of certificate {} pending at the CA (validation, issuance)",
                r.certificate_id
            ),
            None => match record.certificate_id() {
                Some(id) => {
                    format!("order {id} pending at the CA (validation, issuance)")
                }
                None => "an order pending at the CA".to_owned(),
            },
        },
        Action::Order => "no certificate yet: the first order is due".to_owned(),
        Action::ReadOrderFirst { reason, .. } | Action::Reissue { reason, .. } => {
            format!("a reissue is due ({reason})")
        }
        Action::RenewSubscription { reason, .. } => {
            format!("the subscription's renewal is due ({reason})")
        }
        Action::Idle { .. }
        | Action::NeedsOrder
        | Action::Reinstall
        | Action::Backoff { .. }
        | Action::Hold { .. }
        | Action::InstallHeld
        | Action::Ended { .. }
        | Action::CannotReissue { .. } => return None,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::engine::plan::Inputs;
    use crate::store::{OrderRef, ReissueState, Subscription};
    use time::{Duration, OffsetDateTime};

    fn decide(record: &CertRecord, now: OffsetDateTime) -> Option<String> {
        let domains = vec!["www.example.test".to_owned()];
        let action = plan::decide(&Inputs {
            now,
            record,
            disk: Disk::AsInstalled,
            renew_before_days: 30,
            allow_orders: true,
            force: false,
            ignore_backoff: false,
            replace_ended: false,
            reuse_key: false,
            family: None,
            reinstall: false,
            wanted: plan::Wanted {
                product_id: 1101,
                days: 365,
                domains: &domains,
            },
            order_facts: None,
        });
        describe(record, action)
    }

    fn issued(now: OffsetDateTime, days_left: i64) -> CertRecord {
        let current = Current {
            version: 1,
            certificate_id: 7,
            serial: "0A".into(),
            not_before: now - Duration::days(199 - days_left),
            not_after: now + Duration::days(days_left),
            published_by: "web1".into(),
            published_at: now,
            archive: String::new(),
            chain: None,
            intermediates: Vec::new(),
            key: String::new(),
        };
        CertRecord {
            name: "www".into(),
            partner: crate::store::PartnerBook {
                stage: crate::store::PartnerStage::Ordered {
                    order: OrderRef {
                        certificate_id: 7,
                        order_id: Some(7),
                        placed_at: now - Duration::days(199 - days_left),
                        adopted: false,
                    },
                    reissue: None,
                },
                subscription: Some(Subscription {
                    ends: now + Duration::days(400),
                    multi_year: true,
                }),
                ..Default::default()
            },
            installed: Some(installed(&current)),
            ..CertRecord::default()
        }
    }

    #[test]
    fn a_pending_reissue_or_intent_is_open_work_even_in_a_backoff() {
        let now = OffsetDateTime::now_utc();
        let mut r = issued(now, 150);
        assert_eq!(decide(&r, now), None, "nothing due");
        assert!(r.partner.begin_reissue(ReissueState {
            certificate_id: 7,
            csr_sha256: "AB".into(),
            previous_serial: Some("0A".into()),
            requested_at: now,
            confirmed: true,
        }));
        let open = decide(&r, now).unwrap_or_default();
        assert!(open.contains("reissue of certificate 7 pending"), "{open}");
        // A backoff holds a confirmed reissue back (the planner's rule)…
        r.retry_after = Some(now + Duration::hours(1));
        assert_eq!(decide(&r, now), None);
        // …but not one sent without a known answer.
        if let Some(x) = r.partner.reissue_mut() {
            x.confirmed = false;
        }
        let open = decide(&r, now).unwrap_or_default();
        assert!(open.contains("without a known answer"), "{open}");
    }

    #[test]
    fn a_due_certificate_or_a_missing_one_is_open_work() {
        let now = OffsetDateTime::now_utc();
        let open = decide(&issued(now, 20), now).unwrap_or_default();
        assert!(open.starts_with("a reissue is due"), "{open}");
        let none = CertRecord {
            name: "www".into(),
            ..CertRecord::default()
        };
        let open = decide(&none, now).unwrap_or_default();
        assert!(open.contains("first order"), "{open}");
        let mut ended = issued(now, 20);
        ended.mark_ended("annulled");
        assert_eq!(
            decide(&ended, now),
            None,
            "an ended order waits for the operator"
        );
    }
}
