//! One certificate being worked on in a run: its configuration and its record, loaded once
//! when the run starts it and carried through every phase (start, poll, install) as a value.
//! Changes reach the disk through [`Job::save`]; the record's transitions are methods of
//! [`CertRecord`]. Also where a phase leaves a certificate ([`Next`]: done, waiting for the
//! CA, ready to install) and the run's work in progress ([`Work`]): the types every phase
//! shares, so that the phases import downward only.

use anyhow::Result;
use time::OffsetDateTime;

use crate::api::CertificateDetails;
use crate::bundle::ValidatedBundle;
use crate::clock::Clock;
use crate::config::{CertificateConfig, Config};
use crate::install::CertInstall;
use crate::store::{CertRecord, Store, Subscription};

use super::lead::Installable;
use super::plan;
use super::report::{Outcome, RunReport};

/// One configured certificate and its record.
pub(crate) struct Job<'a> {
    /// Its line in the run's report.
    pub idx: usize,
    pub cert: &'a CertificateConfig,
    pub rec: CertRecord,
    store: &'a Store,
    /// The record carried failures when the run started: cleared when this run does not fail.
    backed_off: bool,
    /// The run's clock.
    pub clock: Clock,
    /// What the CRL said of the installed certificate this run, when not "not revoked".
    pub revocation: Option<super::report::RevocationNote>,
    /// What the CRL check needed of the installed certificate this run and the issuer's
    /// certificate (DER), when the CRL did not say "revoked": what the due summary keeps.
    pub crl_ref: Option<(crate::store::due::CrlRef, Vec<u8>)>,
    /// Nothing to do this run, and nothing before then ([`plan::quiet_until`]): what the due
    /// summary keeps.
    pub quiet_until: Option<OffsetDateTime>,
    /// A billed order this run placed, as the report tells it.
    pub ordered: Option<String>,
}

impl<'a> Job<'a> {
    /// Reads the record of `cert`.
    pub(crate) fn load(
        store: &'a Store,
        cert: &'a CertificateConfig,
        idx: usize,
        clock: Clock,
    ) -> Result<Self> {
        Self::of(store, cert, idx, clock, store.load(&cert.name)?)
    }

    /// The job of `cert` with its record `rec`, as the state directory holds it now.
    pub(crate) fn of(
        store: &'a Store,
        cert: &'a CertificateConfig,
        idx: usize,
        clock: Clock,
        rec: CertRecord,
    ) -> Result<Self> {
        if let Some(archive) = store.retired_and_idle(&cert.name, &rec) {
            anyhow::bail!(
                "certificate '{}' was retired ({}): nothing is done for it; remove its \
                 [[certificate]] entry from the configuration, or move that file aside to \
                 manage it again",
                cert.name,
                archive.display()
            );
        }
        let backed_off = rec.failures > 0 || rec.retry_after.is_some();
        Ok(Self {
            idx,
            cert,
            rec,
            store,
            backed_off,
            clock,
            revocation: None,
            ordered: None,
            crl_ref: None,
            quiet_until: None,
        })
    }

    /// Whether the record carried failures when the run started.
    pub(crate) fn backed_off(&self) -> bool {
        self.backed_off
    }

    /// Writes the record.
    pub(crate) fn save(&self) -> Result<()> {
        Ok(self.store.save(&self.rec)?)
    }

    /// Writes the record, then appends `event` to the certificate's journal: a step that
    /// changed the record and must be on disk before the next one is taken.
    pub(crate) fn record(&self, event: &str, detail: serde_json::Value) -> Result<()> {
        self.save()?;
        self.journal(event, detail)
    }

    /// [`Job::record`] for several events: the record written once, then the events
    /// journalled together, in order (one write and one sync of the journal).
    pub(crate) fn record_all(&self, events: Vec<(&str, serde_json::Value)>) -> Result<()> {
        self.save()?;
        let events: Vec<crate::store::JournalEvent<'_>> = events
            .into_iter()
            .map(|(event, detail)| (self.cert.name.as_str(), event, detail))
            .collect();
        Ok(self.store.journal_all(&events)?)
    }

    /// The state directory the job's record lives in.
    pub(crate) fn store(&self) -> &'a Store {
        self.store
    }

    /// Appends an event to the certificate's journal.
    pub(crate) fn journal(&self, event: &str, detail: serde_json::Value) -> Result<()> {
        Ok(self.store.journal(&self.cert.name, event, detail)?)
    }

    /// The certificate of the current order.
    pub(crate) fn certificate_id(&self) -> Result<u64> {
        self.rec
            .certificate_id()
            .ok_or_else(|| anyhow::anyhow!("no order recorded"))
    }

    /// Records a failure with its backoff and turns it into an outcome. The failure is noted
    /// on the record as last saved: a step that failed half-way may have changed the record in
    /// memory without persisting it, and only what was persisted happened.
    pub(crate) fn fail(&mut self, err: &anyhow::Error) -> Outcome {
        let text = format!("{err:#}");
        match self.store.load(&self.cert.name) {
            Ok(saved) => self.rec = saved,
            Err(e) => {
                tracing::warn!(certificate = %self.cert.name, "could not record the failure: {e}");
                return Outcome::Failed { error: text };
            }
        }
        let now = self.clock.now();
        let failures = self.rec.note_failure(text.clone(), now);
        self.rec.retry_after = plan::retry_after(&self.rec, failures, now);
        // An ACME CA's rate limit: not before the time it gave.
        let ca_time = err
            .chain()
            .filter_map(|c| c.downcast_ref::<crate::issuer::acme::AcmeError>())
            .find_map(crate::issuer::acme::AcmeError::retry_not_before);
        if let Some(t) = ca_time {
            self.rec.retry_after = Some(self.rec.retry_after.map_or(t, |r| r.max(t)));
        }
        if let Err(e) = self.save() {
            tracing::warn!(certificate = %self.cert.name, "could not record the failure: {e}");
        }
        Outcome::Failed { error: text }
    }

    /// A certificate that did not fail this run starts afresh: no backoff (unless it was left
    /// untouched while a backoff still runs).
    pub(crate) fn clear_backoff_after(&mut self, outcome: &Outcome) {
        if !self.backed_off || matches!(outcome, Outcome::Failed { .. } | Outcome::Planned { .. }) {
            return;
        }
        let running = self.rec.retry_after.is_some_and(|t| t > self.clock.now());
        if matches!(outcome, Outcome::Unchanged { .. }) && running {
            return;
        }
        if self.rec.clear_failures()
            && let Err(e) = self.save()
        {
            tracing::debug!(certificate = %self.cert.name, "could not clear the backoff: {e}");
        }
    }
}

/// The planner's inputs for an unattended run (the timer's `renew`, a daemon's run): no
/// command's options, the backoff respected, billed orders as `config` allows.
pub(crate) fn unattended_inputs<'a>(
    config: &Config,
    cert: &'a CertificateConfig,
    record: &'a CertRecord,
    disk: plan::Disk,
    now: OffsetDateTime,
) -> plan::Inputs<'a> {
    plan::Inputs {
        now,
        record,
        disk,
        renew_before_days: config.agent.renew_before_days,
        allow_orders: config.agent.allow_orders,
        force: false,
        ignore_backoff: false,
        replace_ended: false,
        reuse_key: cert.order.reuse_key,
        family: cert.order.family,
        reinstall: false,
        wanted: wanted(cert),
        order_facts: None,
    }
}

/// What the configuration of `cert` asks for, as the planner sees it.
pub(crate) fn wanted(cert: &CertificateConfig) -> plan::Wanted<'_> {
    plan::Wanted {
        product_id: cert.order.product_id,
        days: cert.order.days,
        domains: &cert.domains,
    }
}

/// The subscription end the details report, as recorded (`None` when the API reports none).
pub(super) fn subscription_of(details: &CertificateDetails) -> Option<Subscription> {
    let ends = details
        .subscription_valid_to
        .as_deref()
        .and_then(crate::api::parse_api_date)?;
    Some(Subscription {
        ends: ends.midnight().assume_utc(),
        multi_year: details.subscription_duration.is_some(),
    })
}

/// A certificate whose bundle is downloaded and checked, ready to install.
pub struct Ready {
    pub certificate_id: u64,
    pub bundle: ValidatedBundle,
    pub install: CertInstall,
    /// The archive as the API sent it (what a fleet's leader hands to the other hosts).
    pub archive: Vec<u8>,
}

/// What is being waited for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) enum Mode {
    /// The first certificate of an order.
    Issue,
    /// A reissued certificate: ready when the served serial differs from this one.
    Reissue { previous_serial: Option<String> },
}

/// A certificate waiting for the CA.
#[derive(Debug)]
pub(super) struct Waiting {
    pub certificate_id: u64,
    pub mode: Mode,
    pub published: bool,
    /// Details read just before waiting began (after a reissue): the first check uses them
    /// instead of calling the API again.
    pub prefetched: Option<Box<CertificateDetails>>,
    /// When it was last checked, as this run counts it (a round's end once it was in one);
    /// written to the record when the run leaves it pending.
    pub last_poll: Option<OffsetDateTime>,
    /// How often its download was tried because it was missing from the list of certificates
    /// in progress ([`super::poll`]'s list watch) and it was not issued yet.
    pub left_list_tries: u8,
    /// First checked by the run right after it placed the order ([`super::poll::first_check`]),
    /// before the run's rounds began.
    pub checked_at_start: bool,
}

/// Where a certificate stands after a phase.
pub(super) enum Next {
    Done(Outcome),
    Wait(Waiting),
    Ready(Box<Ready>),
}

/// The certificates of a run that are neither done nor failed.
#[derive(Default)]
pub(super) struct Work<'a> {
    pub waiting: Vec<(Job<'a>, Waiting)>,
    pub ready: Vec<(Job<'a>, Ready)>,
}

impl<'a> Work<'a> {
    /// Files a certificate where a phase left it.
    pub(super) fn settle(
        &mut self,
        dry_run: bool,
        mut job: Job<'a>,
        next: Result<Next>,
        report: &mut RunReport,
    ) {
        match next {
            Ok(Next::Done(outcome)) => self.finish(dry_run, job, outcome, report),
            Ok(Next::Wait(w)) => self.waiting.push((job, w)),
            Ok(Next::Ready(r)) => self.ready.push((job, *r)),
            Err(err) => report.certificates[job.idx].outcome = job.fail(&err),
        }
    }

    /// A certificate is done for this run with `outcome`.
    pub(super) fn finish(
        &mut self,
        dry_run: bool,
        mut job: Job<'a>,
        outcome: Outcome,
        report: &mut RunReport,
    ) {
        if !dry_run {
            job.clear_backoff_after(&outcome);
        }
        report.certificates[job.idx].outcome = outcome;
    }
}

impl Installable {
    /// What a leader publishes of `r` once it is installed.
    pub fn of(r: &Ready) -> Self {
        Self {
            certificate_id: r.certificate_id,
            serial: r.bundle.serial_hex.clone(),
            not_before: r.bundle.not_before,
            not_after: r.bundle.not_after,
            key_pem: r.install.material.key_pem.clone(),
            archive: r.archive.clone(),
            // Only the Partner issuer hands an archive over; an ACME CA's chain travels as it
            // was checked.
            chain: r
                .archive
                .is_empty()
                .then(|| r.bundle.fullchain_pem.clone().into_bytes()),
        }
    }
}
