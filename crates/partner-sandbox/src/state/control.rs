//! Test-only control of the state: ageing a certificate, shortening a subscription, forcing
//! a state.

use super::State;
use super::dcv::schedule_checks;
use super::lifecycle::{DAY, odt};
use super::model::{Base, Leaf};
use crate::ca::{Authority, IssueRequest};

/// Longest shift the control methods accept, in days (keeps the arithmetic far from overflow).
const MAX_CONTROL_DAYS: i64 = 100_000;

fn check_days(days: i64) -> Result<(), String> {
    if days.unsigned_abs() > MAX_CONTROL_DAYS.unsigned_abs() {
        Err(format!(
            "days {days} out of range (at most {MAX_CONTROL_DAYS} either way)"
        ))
    } else {
        Ok(())
    }
}

impl State {
    /// Re-signs the current leaf for the same key and names with a fresh serial so that it
    /// expires `days_left` days after `now`; it keeps its original lifetime where possible
    /// (so it looks issued long ago) and never starts after `now`.
    pub(super) fn age(
        &mut self,
        id: u64,
        days_left: i64,
        now: i64,
        ca: &Authority,
    ) -> Result<(), String> {
        check_days(days_left)?;
        let cert = self
            .certs
            .get(&id)
            .ok_or_else(|| format!("no certificate {id}"))?;
        let leaf = cert
            .leaf
            .as_ref()
            .ok_or_else(|| format!("certificate {id} has no issued certificate to age"))?;
        let not_after = now + days_left * DAY;
        let lifetime = (leaf.not_after - leaf.not_before).max(DAY);
        let not_before = (not_after - lifetime).min(now);
        let spki = hex::decode(&leaf.spki_hex).map_err(|e| e.to_string())?;
        let issued = ca
            .issue(&IssueRequest {
                issuer: cert.product().issuer,
                public_key_der: &spki,
                common_name: &leaf.common_name,
                dns_names: &leaf.names,
                not_before: odt(not_before),
                not_after: odt(not_after),
            })
            .map_err(|e| e.to_string())?;
        let cert = self.cert_mut(id);
        let old = cert
            .leaf
            .take()
            .unwrap_or_else(|| unreachable!("checked above"));
        cert.serials.push(issued.serial_hex.clone());
        cert.leaf = Some(Leaf {
            pem: issued.pem,
            serial_hex: issued.serial_hex,
            not_before: issued.not_before.unix_timestamp(),
            not_after: issued.not_after.unix_timestamp(),
            ..old
        });
        if cert.base == Base::Expired && not_after > now {
            cert.base = Base::Issued;
        }
        cert.updated_at = now;
        Ok(())
    }

    pub(super) fn shorten(&mut self, id: u64, days_left: i64, now: i64) -> Result<(), String> {
        check_days(days_left)?;
        let cert = self
            .find_mut(id)
            .ok_or_else(|| format!("no certificate {id}"))?;
        if cert.subscription_end.is_none() {
            return Err(format!(
                "certificate {id} has no subscription yet (it was never issued)"
            ));
        }
        cert.subscription_end = Some(now + days_left * DAY);
        cert.updated_at = now;
        Ok(())
    }

    /// Forces a base state. `new` holds the order before the CA; `issued` needs an issued
    /// certificate; `annulled` voids the bill like a processed cancellation.
    pub(super) fn force(&mut self, id: u64, status: &str) -> Result<(), String> {
        let base = Base::parse(status).ok_or_else(|| {
            format!(
                "unknown status '{status}' (new, in_progress, issued, expired, annulled, waiting_for_approval, other)"
            )
        })?;
        let now = self.last_now;
        let instant = self.instant;
        let cert = self
            .find_mut(id)
            .ok_or_else(|| format!("no certificate {id}"))?;
        if base == Base::Issued && cert.leaf.is_none() {
            return Err(format!("certificate {id} has no issued certificate"));
        }
        if base == Base::Annulled {
            self.annul(id, now);
            return Ok(());
        }
        cert.base = base;
        cert.forced_hold = base == Base::New;
        cert.updated_at = now;
        match base {
            Base::New => cert.at_ca = false,
            Base::InProgress => {
                if !cert.at_ca {
                    cert.at_ca = true;
                    cert.at_ca_since = Some(now);
                    schedule_checks(cert, now, instant);
                }
            }
            Base::Expired | Base::WaitingForApproval | Base::Other | Base::Issued => {
                cert.reissue_requested_at = None;
                cert.at_ca = false;
            }
            Base::Annulled => {}
        }
        Ok(())
    }
}

/// What the control API revokes: the current certificate of an ID, or any serial issued.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum RevokeTarget {
    CertificateId(u64),
    /// Hex, any case, leading zeros optional.
    Serial(String),
}

/// A certificate found for revocation.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Revoked {
    /// Upper-case hex, as issued.
    pub serial_hex: String,
    pub issuer: &'static str,
    pub certificate_id: u64,
    /// The order's status after the revocation.
    pub status: &'static str,
}

impl State {
    /// Finds the certificate to revoke and, unless `keep_order`, sets its order to
    /// `annulled` (document: "order cancelled or rejected, or certificate revoked"). The bill
    /// stands: the CA revoked, nobody cancelled.
    pub(super) fn revoke_at(
        &mut self,
        target: &RevokeTarget,
        keep_order: bool,
        now: i64,
    ) -> Result<Revoked, String> {
        let trimmed = |s: &str| s.trim_start_matches('0').to_ascii_uppercase();
        let (id, serial_hex) = match target {
            RevokeTarget::CertificateId(id) => {
                let cert = self
                    .certs
                    .get(id)
                    .ok_or_else(|| format!("no certificate {id}"))?;
                let leaf = cert
                    .leaf
                    .as_ref()
                    .ok_or_else(|| format!("certificate {id} has no issued certificate"))?;
                (*id, leaf.serial_hex.clone())
            }
            RevokeTarget::Serial(serial) => {
                let wanted = trimmed(serial);
                if wanted.is_empty() || !wanted.chars().all(|c| c.is_ascii_hexdigit()) {
                    return Err(format!("serial '{serial}' is not a hexadecimal number"));
                }
                self.certs
                    .values()
                    .find_map(|c| {
                        c.serials
                            .iter()
                            .find(|s| trimmed(s) == wanted)
                            .map(|s| (c.id, s.clone()))
                    })
                    .ok_or_else(|| format!("no certificate with serial {serial} was issued"))?
            }
        };
        let cert = self.cert_mut(id);
        let issuer = cert.product().issuer;
        if !keep_order && cert.base != Base::Annulled {
            cert.base = Base::Annulled;
            cert.annulled_at = Some(now);
            cert.pending_cancel_at = None;
            cert.reissue_requested_at = None;
            cert.at_ca = false;
            cert.updated_at = now;
        }
        Ok(Revoked {
            serial_hex,
            issuer,
            certificate_id: id,
            status: cert.base.as_str(),
        })
    }
}
