//! Takeover: a lead that ended without being given up (the leader killed, cut off, or stalled
//! past its lease) may leave work open — an order intent, a reissue, a pending validation, a
//! certificate that is due. The daemons' follow loop ([`super::watch`]) sees the leader key
//! deleted; this module reads, from the sealed shared records every host already syncs, what
//! a new leader would do, and the daemon starts a run when there is any.

use anyhow::{Result, bail};

use crate::config::{CertificateConfig, Config};
use crate::engine::{
    self,
    plan::{self, Action, Disk},
};
use crate::store::{CertRecord, Installed};

use super::envelope::{self, Place, Purpose};
use super::link::FleetLink;
use super::schema::{Current, SharedState, current_key, state_key};

/// A lead that ended with its lease while work was open.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Takeover {
    /// The host that held the lead, when this host saw it take it.
    pub leader: Option<String>,
    /// What is open, one line per certificate (`'NAME': what`).
    pub open: Vec<String>,
}

impl Takeover {
    /// One line for the log and the run's report and journal.
    pub fn describe(&self) -> String {
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
pub async fn open_work(config: &Config, link: &FleetLink) -> Vec<String> {
    let mut open = Vec::new();
    for chunk in config.certificates.chunks(CHUNK) {
        let keys: Vec<String> = chunk
            .iter()
            .flat_map(|c| [state_key(&c.name), current_key(&c.name)])
            .collect();
        // Revision 0: the values as etcd holds them now.
        let values = match link.fleet.values_at(&keys, 0).await {
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
            let current = values
                .get(&current_key(&cert.name))
                .map(|(v, _)| v.as_slice());
            match open_for(config, link, cert, (state, current)) {
                Ok(Some(what)) => open.push(format!("'{}': {what}", cert.name)),
                Ok(None) => {}
                Err(e) => tracing::warn!(certificate = %cert.name, "fleet: {e:#}"),
            }
        }
    }
    open
}

/// What is open for `cert`, if anything, from its shared record and the fleet's current
/// certificate as etcd holds them (`None`: no value).
fn open_for(
    config: &Config,
    link: &FleetLink,
    cert: &CertificateConfig,
    (state, current): (Option<&[u8]>, Option<&[u8]>),
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
    let rel = current_key(&cert.name);
    if let Some(bytes) = current {
        let place = Place::new(Purpose::Current, &rel, &cert.name);
        let (_, current): (u64, Current) =
            envelope::open_json(&link.key, &link.fleet, &place, bytes)?;
        record.installed = Some(installed(&current));
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
fn describe(record: &CertRecord, action: Action) -> Option<String> {
    Some(match action {
        Action::Reconcile => "an order sent without a known answer".to_owned(),
        Action::Continue => match &record.reissue {
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
            key: String::new(),
        };
        CertRecord {
            name: "www".into(),
            order: Some(OrderRef {
                certificate_id: 7,
                order_id: Some(7),
                placed_at: now - Duration::days(199 - days_left),
                adopted: false,
            }),
            installed: Some(installed(&current)),
            subscription: Some(Subscription {
                ends: now + Duration::days(400),
                multi_year: true,
            }),
            ..CertRecord::default()
        }
    }

    #[test]
    fn a_pending_reissue_or_intent_is_open_work_even_in_a_backoff() {
        let now = OffsetDateTime::now_utc();
        let mut r = issued(now, 150);
        assert_eq!(decide(&r, now), None, "nothing due");
        r.reissue = Some(ReissueState {
            certificate_id: 7,
            csr_sha256: "AB".into(),
            previous_serial: Some("0A".into()),
            requested_at: now,
            confirmed: true,
        });
        let open = decide(&r, now).unwrap_or_default();
        assert!(open.contains("reissue of certificate 7 pending"), "{open}");
        // A backoff holds a confirmed reissue back (the planner's rule)…
        r.retry_after = Some(now + Duration::hours(1));
        assert_eq!(decide(&r, now), None);
        // …but not one sent without a known answer.
        if let Some(x) = r.reissue.as_mut() {
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
        let ended = CertRecord {
            ended: Some("annulled".into()),
            ..issued(now, 20)
        };
        assert_eq!(
            decide(&ended, now),
            None,
            "an ended order waits for the operator"
        );
    }
}
