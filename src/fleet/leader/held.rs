//! With a rollout in waves, the leader is a host of its wave like the others: it proves what
//! it installs before the install is committed, and a failed proof of a certificate that
//! replaced another rolls its install back ([`super::super::rollback`]). The certificate is
//! published all the same — the fleet's rollout decides who installs it: the leader's failed
//! proof, published before it, halts the waves after the leader's own, and `cert-agent fleet
//! rollout resume|abort` decides on it as on any halt. The serial is then refused on the
//! leader (its record's `rolled_back`) until a person resumes the rollout, when the leader's
//! next run installs it and proves it again; the order or reissue that brought it stays open
//! on the leader meanwhile, so nothing is ordered again.

use std::collections::{BTreeMap, HashMap};
use std::rc::Rc;

use crate::engine::Live;
use crate::engine::Refusal;
use crate::store::CertRecord;

use super::super::rollback;
use super::super::rollout::{self, Fleetwide};
use super::FleetRun;

impl FleetRun<'_> {
    /// Whether this leader proves its installs before committing them: with a rollout in
    /// waves.
    pub(super) fn holds_installs(&self) -> bool {
        self.link.config.rollout.is_some()
    }

    /// The proofs, decisions and hosts of the fleet, read once a run when needed.
    async fn fleetwide(&self) -> Option<Rc<Fleetwide>> {
        if let Some(f) = self.fleetwide.borrow().as_ref() {
            return Some(Rc::clone(f));
        }
        match self.link.fleet.list("hosts/").await {
            Ok(listed) => {
                let f = rollout::gather(self.link, listed, &mut self.versions.borrow_mut());
                let f = Rc::new(f);
                *self.fleetwide.borrow_mut() = Some(Rc::clone(&f));
                Some(f)
            }
            Err(e) => {
                tracing::warn!("could not read the fleet's proofs and decisions: {e:#}");
                None
            }
        }
    }

    /// Proves `live` and names the installs to roll back; the proofs are kept for
    /// [`FleetRun::settled`]. An install that replaced a certificate near its end is kept
    /// whatever its proof (`rollout_deadline_fraction`), as on every host.
    pub(super) async fn prove_held(&self, live: &[Live]) -> HashMap<String, String> {
        let Some(config) = self.link.config.rollout.as_ref() else {
            return HashMap::new();
        };
        let now = self.link.clock.now();
        let overridden: BTreeMap<String, String> = live
            .iter()
            .filter_map(|l| {
                let (not_before, not_after) = l.previous_dates?;
                let serving = Some((l.previous.as_deref()?, not_before, not_after));
                let why = rollout::overdue(config, serving, &l.serial, now)?;
                tracing::warn!(certificate = %l.name, serial = %l.serial, "rollout_overridden: {why}");
                Some((l.name.clone(), why))
            })
            .collect();
        // The version each will be published at is not known yet: the proof names the serial.
        let published = BTreeMap::new();
        let checked =
            rollback::check_live(self.link, self.config, live, (&published, &overridden)).await;
        let back = checked.back.clone();
        *self.held_proofs.borrow_mut() = Some(checked);
        back
    }

    /// Publishes the proofs [`FleetRun::prove_held`] made, once the batch is settled: a rolled
    /// back certificate proved again at the serial it returned to.
    pub(super) async fn settled(&self) {
        let checked = self.held_proofs.borrow_mut().take();
        if let Some(checked) = checked {
            rollback::publish(self.link, self.config, checked).await;
        }
    }

    /// Why the leader does not install `serial` of `rec`'s certificate: it rolled it back here
    /// and no one resumed the rollout since ([`rollback::refused_here`]). An abort keeps it
    /// refused; a certificate near its end is installed whatever (unless aborted).
    pub(super) async fn refuses(&self, rec: &CertRecord, serial: &str) -> Option<Refusal> {
        let config = self.link.config.rollout.as_ref()?;
        // Only a serial rolled back here is refused: no read of the fleet otherwise.
        rec.rolled_back
            .as_ref()
            .filter(|rb| crate::crypto::same_serial_hex(&rb.serial, serial))?;
        let fleet = self.fleetwide().await;
        let decision = fleet.as_ref().and_then(|f| f.decision(&rec.name, serial));
        let aborted = decision.is_some_and(|d| d.verdict == super::super::decision::Verdict::Abort);
        let serving = rec
            .installed
            .as_ref()
            .map(|i| (i.serial.as_str(), i.not_before, i.not_after));
        if !aborted
            && let Some(why) = rollout::overdue(config, serving, serial, self.link.clock.now())
        {
            tracing::warn!(certificate = %rec.name, serial = %serial, "rollout_overridden: {why}");
            return None;
        }
        let reason = rollback::refused_here(rec, serial, decision)?;
        let reason = match decision.filter(|_| aborted) {
            Some(d) => format!("{}: serial {serial} is refused", d.describe()),
            None => reason,
        };
        Some(Refusal { reason, aborted })
    }
}
