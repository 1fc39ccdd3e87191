//! Time-driven transitions: a request reaching the CA (soon for families S and D, at the next
//! 5-minute pickup for family C), DNS checks, issuance once every domain is validated (family
//! C again at a pickup), staff processing of cancellations, expiry, and automatic preparation
//! of renewal tokens.

use time::OffsetDateTime;

use super::State;
use super::catalogue::Family;
use super::dcv::schedule_checks;
use super::model::{Base, Leaf};
use crate::ca::{Authority, IssueRequest};

pub(super) const DAY: i64 = 86_400;
/// A family S or D request reaches the CA this long after it was made.
pub(super) const REACH_DELAY: i64 = 20;
/// Family C's pickup cycle.
pub(super) const PICKUP: i64 = 300;
/// Staff process a cancellation request this long after it was made.
pub(super) const STAFF_DELAY: i64 = 3600;
/// The service prepares the renewal order this long before the subscription ends.
pub(super) const RENEWAL_PREPARATION: i64 = 30 * DAY;

pub(super) fn odt(t: i64) -> OffsetDateTime {
    OffsetDateTime::from_unix_timestamp(t).unwrap_or(OffsetDateTime::UNIX_EPOCH)
}

/// `YYYY-MM-DD` (UTC).
pub(super) fn date(t: i64) -> String {
    let d = odt(t).date();
    format!("{:04}-{:02}-{:02}", d.year(), u8::from(d.month()), d.day())
}

/// `YYYY-MM-DDTHH:MM:SSZ` (UTC).
pub(super) fn datetime(t: i64) -> String {
    let dt = odt(t);
    format!(
        "{}T{:02}:{:02}:{:02}Z",
        date(t),
        dt.hour(),
        dt.minute(),
        dt.second()
    )
}

impl State {
    /// The first family C pickup strictly after `t`.
    pub(super) fn next_pickup(&self, t: i64) -> i64 {
        let k = (t - self.created_at).div_euclid(PICKUP) + 1;
        self.created_at + k * PICKUP
    }

    /// When a request made at `now` reaches the CA.
    pub(super) fn reach_time(&self, family: Family, now: i64) -> i64 {
        if self.instant {
            now
        } else if family == Family::C {
            self.next_pickup(now)
        } else {
            now + REACH_DELAY
        }
    }

    /// Applies everything due up to `now`.
    pub(super) fn advance(&mut self, now: i64, ca: &Authority) {
        self.last_now = self.last_now.max(now);
        let ids = self.take_due(now);
        #[cfg(test)]
        self.check_rest_idle(&ids, now, ca);
        for id in &ids {
            self.advance_cert(*id, now, ca);
        }
        self.reschedule(&ids);
    }

    /// Tests: every certificate the advance does not look at would not have changed (it is
    /// advanced here and must come out as it went in, with the random numbers and accounts).
    #[cfg(test)]
    fn check_rest_idle(&mut self, ids: &[u64], now: i64, ca: &Authority) {
        let seen = |s: &State, id: u64| {
            serde_json::to_value((&s.certs[&id], &s.rng, &s.accounts)).expect("serialises")
        };
        let touched = self.wakes.clone();
        let rest: Vec<u64> = self
            .certs
            .keys()
            .filter(|id| !ids.contains(id))
            .copied()
            .collect();
        for id in rest {
            let before = seen(self, id);
            self.advance_cert(id, now, ca);
            assert_eq!(
                seen(self, id),
                before,
                "certificate {id} had something due at {now} but was not looked at"
            );
        }
        self.wakes = touched;
    }

    fn advance_cert(&mut self, id: u64, now: i64, ca: &Authority) {
        let instant = self.instant;
        let cert = self.cert(id);
        let family = cert.family();
        let hold = cert.forced_hold;

        // The request reaches the CA.
        let waiting = matches!(cert.base, Base::New | Base::InProgress)
            || (cert.base == Base::Issued && cert.reissue_requested_at.is_some());
        if !hold && !cert.at_ca && waiting && (instant || cert.ca_due_at <= now) {
            let t = if instant {
                now.min(cert.ca_due_at).max(cert.created_at)
            } else {
                cert.ca_due_at
            };
            let number = match cert.external_number {
                Some(n) => n,
                None => self.rng.range(10_000_000, 99_999_999),
            };
            let cert = self.cert_mut(id);
            cert.at_ca = true;
            cert.at_ca_since = Some(t);
            cert.external_number = Some(number);
            if cert.base == Base::New {
                cert.base = Base::InProgress;
            }
            cert.updated_at = t;
            schedule_checks(cert, t, instant);
        }

        if !hold && self.cert(id).dcv_active() {
            self.check_dns(id, now);
        }

        // Issuance once every domain is validated (family C at the next pickup).
        let cert = self.cert(id);
        if !hold && cert.dcv_active() && cert.domains.iter().all(|d| d.valid) {
            let validated = cert
                .domains
                .iter()
                .filter_map(|d| d.validated_at)
                .max()
                .unwrap_or(now)
                .min(now);
            let at = if instant {
                now
            } else if family == Family::C {
                self.next_pickup(validated)
            } else {
                validated
            };
            let cancelled_before = cert
                .pending_cancel_at
                .is_some_and(|c| c + STAFF_DELAY <= at);
            if at <= now && !cancelled_before {
                self.issue(id, at, ca);
            }
        }

        // Staff process a cancellation (people: not sped up by instant mode).
        let cert = self.cert(id);
        if let Some(requested) = cert.pending_cancel_at
            && requested + STAFF_DELAY <= now
        {
            self.annul(id, requested + STAFF_DELAY);
        }

        // Expiry of the current certificate.
        let cert = self.cert(id);
        if cert.base == Base::Issued
            && let Some(leaf) = &cert.leaf
            && leaf.not_after <= now
        {
            let cert = self.cert_mut(id);
            cert.base = Base::Expired;
            cert.reissue_requested_at = None;
            cert.at_ca = false;
            cert.updated_at = now;
        }

        // The service prepares the renewal order ~30 days before the subscription ends.
        let cert = self.cert(id);
        if cert.base == Base::Issued
            && cert.prolongation_token.is_none()
            && cert
                .subscription_end
                .is_some_and(|end| now >= end - RENEWAL_PREPARATION)
            && self.renewal_possible(cert, now)
        {
            let token = self.rng.token(32);
            self.cert_mut(id).prolongation_token = Some(token);
        }
    }

    /// Cancels the order: the bill is voided, every pending action ends.
    pub(super) fn annul(&mut self, id: u64, at: i64) {
        let cert = self.cert_mut(id);
        cert.base = Base::Annulled;
        cert.annulled_at = Some(at);
        cert.pending_cancel_at = None;
        cert.reissue_requested_at = None;
        cert.at_ca = false;
        cert.updated_at = at;
        let (login, bill_of) = (cert.account.clone(), cert.bill_of);
        self.bill_void(&login, bill_of);
    }

    /// Issues the certificate of the current request at `at`: the CSR's key, the ordered
    /// names, validity at most `max_cert_days` and never past the subscription end (which the
    /// first issuance fixes at `days` after it).
    pub(super) fn issue(&mut self, id: u64, at: i64, ca: &Authority) {
        let max_days = self.config.max_cert_days;
        let cert = self.cert(id);
        let subscription_end = cert.subscription_end.unwrap_or(at + cert.days * DAY);
        let not_after = (at + max_days * DAY).min(subscription_end);
        let names = cert.all_domains();
        let spki = cert.csr.spki_der();
        let issued = ca.issue(&IssueRequest {
            issuer: cert.product().issuer,
            public_key_der: &spki,
            common_name: &cert.common_name,
            dns_names: &names,
            // Under a time scale above 1 the certificate begins on the real clock (the virtual
            // issuance less the scale's lead), so that a client can install it at once.
            not_before: odt(at - self.scale_drift),
            not_after: odt(not_after),
        });
        let cert = self.cert_mut(id);
        match issued {
            Ok(leaf) => {
                cert.serials.push(leaf.serial_hex.clone());
                cert.leaf = Some(Leaf {
                    pem: leaf.pem,
                    serial_hex: leaf.serial_hex,
                    not_before: leaf.not_before.unix_timestamp(),
                    not_after: leaf.not_after.unix_timestamp(),
                    common_name: cert.common_name.clone(),
                    names,
                    spki_hex: cert.csr.spki_hex.clone(),
                });
                let first = cert.first_issued_at.is_none();
                cert.first_issued_at.get_or_insert(at);
                cert.subscription_end = Some(subscription_end);
                cert.base = Base::Issued;
                cert.reissue_requested_at = None;
                cert.at_ca = false;
                cert.at_ca_since = None;
                cert.last_error = None;
                cert.updated_at = at;
                if first && cert.bill_of == id {
                    let login = cert.account.clone();
                    self.bill_delivered(&login, id);
                }
            }
            Err(e) => cert.last_error = Some(format!("issuance failed: {e}")),
        }
    }
}
