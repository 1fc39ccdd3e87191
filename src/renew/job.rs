//! One certificate being worked on in a run: its configuration and its record, loaded once
//! when the run starts it and carried through every phase (start, poll, install) as a value.
//! Changes reach the disk through [`Job::save`]; the record's transitions are methods of
//! [`CertRecord`].

use anyhow::Result;

use crate::config::CertificateConfig;
use crate::store::{CertRecord, Store};

use super::context::now;
use super::plan;
use super::report::Outcome;

/// One configured certificate and its record.
pub(super) struct Job<'a> {
    /// Its line in the run's report.
    pub idx: usize,
    pub cert: &'a CertificateConfig,
    pub rec: CertRecord,
    store: &'a Store,
    /// The record carried failures when the run started: cleared when this run does not fail.
    backed_off: bool,
}

impl<'a> Job<'a> {
    /// Reads the record of `cert`.
    pub(super) fn load(store: &'a Store, cert: &'a CertificateConfig, idx: usize) -> Result<Self> {
        let rec = store.load(&cert.name)?;
        let backed_off = rec.failures > 0 || rec.retry_after.is_some();
        Ok(Self {
            idx,
            cert,
            rec,
            store,
            backed_off,
        })
    }

    /// Writes the record.
    pub(super) fn save(&self) -> Result<()> {
        Ok(self.store.save(&self.rec)?)
    }

    /// Appends an event to the certificate's journal.
    pub(super) fn journal(&self, event: &str, detail: serde_json::Value) -> Result<()> {
        Ok(self.store.journal(&self.cert.name, event, detail)?)
    }

    /// The certificate of the current order.
    pub(super) fn certificate_id(&self) -> Result<u64> {
        self.rec
            .certificate_id()
            .ok_or_else(|| anyhow::anyhow!("no order recorded"))
    }

    /// Records a failure with its backoff and turns it into an outcome. The failure is noted
    /// on the record as last saved: a step that failed half-way may have changed the record in
    /// memory without persisting it, and only what was persisted happened.
    pub(super) fn fail(&mut self, err: &anyhow::Error) -> Outcome {
        let text = format!("{err:#}");
        match self.store.load(&self.cert.name) {
            Ok(saved) => self.rec = saved,
            Err(e) => {
                tracing::warn!(certificate = %self.cert.name, "could not record the failure: {e}");
                return Outcome::Failed { error: text };
            }
        }
        let failures = self.rec.note_failure(text.clone(), now());
        self.rec.retry_after = plan::retry_after(&self.rec, failures, now());
        if let Err(e) = self.save() {
            tracing::warn!(certificate = %self.cert.name, "could not record the failure: {e}");
        }
        Outcome::Failed { error: text }
    }

    /// A certificate that did not fail this run starts afresh: no backoff (unless it was left
    /// untouched while a backoff still runs).
    pub(super) fn clear_backoff_after(&mut self, outcome: &Outcome) {
        if !self.backed_off || matches!(outcome, Outcome::Failed { .. } | Outcome::Planned { .. }) {
            return;
        }
        let running = self.rec.retry_after.is_some_and(|t| t > now());
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

/// What the configuration of `cert` asks for, as the planner sees it.
pub(super) fn wanted(cert: &CertificateConfig) -> plan::Wanted<'_> {
    plan::Wanted {
        product_id: cert.order.product_id,
        days: cert.order.days,
        domains: &cert.domains,
    }
}
