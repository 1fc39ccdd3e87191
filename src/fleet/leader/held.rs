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
use super::super::rollout::{self, Fleetwide, Gate};
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
        match rollout::listed(self.link).await {
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

    /// The serial of the fleet's current certificate `name` as etcd holds it now (`None`:
    /// none yet).
    async fn published_now(&self, name: &str) -> anyhow::Result<Option<String>> {
        use super::super::envelope::{self, Place, Purpose};
        let rel = super::super::schema::current_key(name);
        let Some((value, _)) = self.link.fleet.get(&rel).await? else {
            return Ok(None);
        };
        let place = Place::new(Purpose::Current, &rel, name);
        let (_, current): (u64, super::super::schema::Current) =
            envelope::open_json(&self.link.key, &self.link.fleet, &place, &value)?;
        Ok(Some(current.serial))
    }

    /// Why the leader does not install `serial` of `rec`'s certificate now, as the rollout
    /// decides for any host: an abort refuses it for good (the order or reissue that brought
    /// it is then closed); it rolled it back here and no one resumed the rollout since
    /// ([`rollback::refused_here`]); or the fleet publishes it already — another run's leader
    /// obtained it, and this run continues that order or reissue — and this host's wave has
    /// not come ([`rollout::gate`]: waiting) or an earlier wave's failed proof halted it. A
    /// serial obtained by this run is not published yet: the leader installs it first, and
    /// proves it. A certificate near its end is installed whatever (unless aborted).
    pub(super) async fn refuses(&self, rec: &CertRecord, serial: &str) -> Option<Refusal> {
        use super::super::decision::Verdict;
        let config = self.link.config.rollout.as_ref()?;
        let same = |s: &str| crate::crypto::same_serial_hex(s, serial);
        let here = rec.rolled_back.as_ref().is_some_and(|rb| same(&rb.serial));
        let read = self.fleet_has.get(&rec.name).is_some_and(|(s, _)| same(s));
        // Published since the round's synchronisation read the fleet (by the leader before
        // this one), or obtained by this run (not published): asked of etcd.
        let published = read
            || here
            || match self.published_now(&rec.name).await {
                Ok(now) => now.is_some_and(|s| same(&s)),
                Err(e) => {
                    return Some(Refusal {
                        reason: format!(
                            "serial {serial} is not installed: with a rollout in waves this host \
                             installs only what its wave allows, and it could not read the \
                             fleet's current certificate: {e:#}; the next run asks again"
                        ),
                        aborted: false,
                        waiting: true,
                    });
                }
            };
        // Neither: no read of the fleet's proofs.
        if !here && !published {
            return None;
        }
        let fleet = self.fleetwide().await;
        let decision = fleet.as_ref().and_then(|f| f.decision(&rec.name, serial));
        if let Some(d) = decision.filter(|d| d.verdict == Verdict::Abort) {
            return Some(Refusal {
                reason: format!("{}: serial {serial} is refused", d.describe()),
                aborted: true,
                waiting: false,
            });
        }
        let serving = rec
            .installed
            .as_ref()
            .map(|i| (i.serial.as_str(), i.not_before, i.not_after));
        if let Some(why) = rollout::overdue(config, serving, serial, self.link.clock.now()) {
            tracing::warn!(certificate = %rec.name, serial = %serial, "rollout_overridden: {why}");
            return None;
        }
        let refused = |reason, waiting| {
            Some(Refusal {
                reason,
                aborted: false,
                waiting,
            })
        };
        if here && let Some(reason) = rollback::refused_here(rec, serial, decision) {
            return refused(reason, false);
        }
        if !published {
            return None;
        }
        let Some(fleet) = fleet.as_ref() else {
            return refused(
                format!(
                    "serial {serial} is the fleet's, rolled out in waves, and this host could \
                     not read the fleet's proofs to tell whether its wave came; the next run \
                     reads them again"
                ),
                true,
            );
        };
        let none = BTreeMap::new();
        let proofs = fleet.proofs.get(&rec.name).unwrap_or(&none);
        let host = (self.link.fleet.host(), serial);
        match rollout::gate(
            config,
            &fleet.hosts,
            host,
            (proofs, decision),
            self.link.clock.now(),
        ) {
            Gate::Go => None,
            Gate::Wait(reason) => refused(reason, true),
            Gate::Halted(reason) => refused(reason, false),
        }
    }
}
