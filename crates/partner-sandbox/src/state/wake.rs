//! Which certificates [`State::advance`](super::State) looks at: those a request, the
//! validator or a control method changed since the last advance, and those with something
//! due by time (the request reaching the CA, a DNS check, issuance at a pickup, a processed
//! cancellation, expiry, the renewal token). Every other certificate has nothing to do, so
//! a request costs the same with ten orders or ten thousand.

use std::collections::{BTreeMap, BTreeSet};

use super::State;
use super::catalogue::Family;
use super::lifecycle::{RENEWAL_PREPARATION, STAFF_DELAY};
use super::model::{Base, Cert, Method};

/// The index of what is due. Not saved: a loaded state looks at every certificate once.
#[derive(Debug, Default, Clone)]
pub(super) struct Wakes {
    /// Every certificate is looked at by the next advance (a new or loaded state, instant
    /// mode switched).
    stale: bool,
    /// Changed since the last advance.
    touched: BTreeSet<u64>,
    /// `(instant, id)` of every certificate with something due at a known instant.
    due: BTreeSet<(i64, u64)>,
    /// Each certificate's entry in `due`.
    at: BTreeMap<u64, i64>,
}

impl Wakes {
    /// A state whose every certificate the next advance looks at.
    pub(super) fn stale() -> Self {
        Self {
            stale: true,
            ..Self::default()
        }
    }

    /// The certificate changed: the next advance looks at it.
    pub(super) fn touch(&mut self, id: u64) {
        self.touched.insert(id);
    }

    /// Every certificate changed (a setting that every schedule depends on).
    pub(super) fn touch_all(&mut self) {
        self.stale = true;
    }
}

impl State {
    /// The certificates the advance to `now` looks at, in ID order (the order the random
    /// numbers they draw were always drawn in).
    pub(super) fn take_due(&mut self, now: i64) -> Vec<u64> {
        let w = &mut self.wakes;
        let mut ids = std::mem::take(&mut w.touched);
        if std::mem::take(&mut w.stale) {
            ids.extend(self.certs.keys().copied());
        }
        ids.extend(w.due.range(..=(now, u64::MAX)).map(|(_, id)| *id));
        ids.into_iter()
            .filter(|id| self.certs.contains_key(id))
            .collect()
    }

    /// After the advance looked at `ids`: when each has something due next.
    pub(super) fn reschedule(&mut self, ids: &[u64]) {
        for id in ids {
            self.wakes.touched.remove(id);
            if let Some(old) = self.wakes.at.remove(id) {
                self.wakes.due.remove(&(old, *id));
            }
            let Some(at) = self.certs.get(id).and_then(|c| self.wake_at(c)) else {
                continue;
            };
            self.wakes.at.insert(*id, at);
            self.wakes.due.insert((at, *id));
        }
    }

    /// The earliest instant at which the advance may change `cert` without anything else
    /// changing it first; never later than that (earlier only costs a look).
    fn wake_at(&self, cert: &Cert) -> Option<i64> {
        let mut wake: Option<i64> = None;
        let mut at = |t: i64| wake = Some(wake.map_or(t, |w| w.min(t)));
        let instant = self.instant;
        let hold = cert.forced_hold;
        let waiting = matches!(cert.base, Base::New | Base::InProgress)
            || (cert.base == Base::Issued && cert.reissue_requested_at.is_some());
        if !hold && !cert.at_ca && waiting {
            at(if instant { i64::MIN } else { cert.ca_due_at });
        }
        if !hold && cert.dcv_active() {
            if cert.domains.iter().all(|d| d.valid) {
                let validated = cert
                    .domains
                    .iter()
                    .filter_map(|d| d.validated_at)
                    .max()
                    .unwrap_or(i64::MIN);
                at(if instant || validated == i64::MIN {
                    i64::MIN
                } else if cert.family() == Family::C {
                    self.next_pickup(validated)
                } else {
                    validated
                });
            } else {
                // File and email validations arrive through the validator or a request
                // (which touch the certificate); DNS checks run on their schedule (at every
                // advance in instant mode).
                for d in cert.domains.iter().filter(|d| !d.valid) {
                    if matches!(d.method, Method::Cname | Method::DnsTxt) {
                        at(if instant {
                            i64::MIN
                        } else {
                            d.next_check.unwrap_or(i64::MIN)
                        });
                    }
                }
            }
        }
        if let Some(requested) = cert.pending_cancel_at {
            at(requested.saturating_add(STAFF_DELAY));
        }
        if cert.base == Base::Issued
            && let Some(leaf) = &cert.leaf
        {
            at(leaf.not_after);
        }
        if cert.base == Base::Issued
            && cert.prolongation_token.is_none()
            && let Some(end) = cert.subscription_end
            && let Some(possible) = self.renewal_possible_from(cert)
        {
            at(possible.max(end.saturating_sub(RENEWAL_PREPARATION)));
        }
        wake
    }
}
