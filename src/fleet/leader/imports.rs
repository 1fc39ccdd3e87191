//! The records and `fleet-imported` journal lines of the certificates a leader's run imports,
//! written together before its engine reads them: a host that takes the lead over thousands
//! of certificates (a fresh host's first run) writes them with one sync for the records and
//! one for the journal lines, not two per certificate.

use std::collections::BTreeMap;

use anyhow::anyhow;

use crate::config::CertificateConfig;
use crate::store::{CertRecord, JournalEvent, Records, Store};

/// What the imports of one run write.
#[derive(Debug, Default)]
pub(in crate::fleet) struct Imports {
    /// Each record as imported.
    records: Vec<CertRecord>,
    /// The detail of each certificate's `fleet-imported` line (its record is among `records`).
    imported: Vec<(String, serde_json::Value)>,
    /// Pending key files the imported records no longer refer to, by certificate: removed
    /// once that certificate's record is written (until then the record on disk refers to
    /// them).
    dropped_keys: Vec<(String, std::path::PathBuf)>,
}

impl Imports {
    /// `record` to be written (the fleet's attempt noted, nothing else changed).
    pub(super) fn save(&mut self, record: CertRecord) {
        self.records.push(record);
    }

    /// The pending key file `key` of certificate `name`, removed once its imported record is
    /// written.
    pub(super) fn drop_key(&mut self, name: &str, key: std::path::PathBuf) {
        self.dropped_keys.push((name.to_owned(), key));
    }

    /// `record` to be written, then its `fleet-imported` line.
    pub(super) fn import(&mut self, record: CertRecord, detail: serde_json::Value) {
        self.imported.push((record.name.clone(), detail));
        self.records.push(record);
    }

    /// [`write`](Self::write) for a leader's run: each record written is put in `records`
    /// (the records as the run leaves them on disk); each certificate whose record or line
    /// could not be written is noted as this host's failure and leaves the run's `eligible`,
    /// `imported` and `records`; returned with its error.
    pub(super) fn write_for_run(
        self,
        store: &Store,
        eligible: &mut Vec<&CertificateConfig>,
        imported: &mut BTreeMap<String, Option<CertRecord>>,
        records: &mut Records,
    ) -> Vec<(String, String)> {
        let mut failed = Vec::new();
        for (name, e) in self.write_into(store, records) {
            eligible.retain(|c| c.name != name);
            imported.remove(&name);
            records.remove(&name);
            let error = format!("{e:#}");
            super::bookkeeping::note_host_failure(store, &name, &error);
            failed.push((name, error));
        }
        failed
    }

    /// Writes the records together ([`Store::save_all`]), then the `fleet-imported` lines of
    /// those written ([`Store::journal_all`]): a record before its line, as each import
    /// alone wrote them. The certificates whose record or line could not be written, each with
    /// its error.
    pub(in crate::fleet) fn write(self, store: &Store) -> Vec<(String, anyhow::Error)> {
        self.write_into(store, &mut Records::new())
    }

    /// [`write`](Self::write), each record written put into `into`; a certificate whose line
    /// could not be written is taken out of it again.
    fn write_into(self, store: &Store, into: &mut Records) -> Vec<(String, anyhow::Error)> {
        let mut failed: Vec<(String, anyhow::Error)> = store
            .save_all_into(self.records, into)
            .into_iter()
            .map(|(name, e)| (name, anyhow!(e)))
            .collect();
        let events: Vec<JournalEvent<'_>> = self
            .imported
            .iter()
            .filter(|(name, _)| !failed.iter().any(|(f, _)| f == name))
            .map(|(name, detail)| (name.as_str(), "fleet-imported", detail.clone()))
            .collect();
        if let Err(e) = store.journal_all(&events) {
            for (name, _, _) in &events {
                into.remove(*name);
                failed.push(((*name).to_owned(), anyhow!("{e}")));
            }
        }
        for (name, key) in &self.dropped_keys {
            if !failed.iter().any(|(f, _)| f == name) {
                crate::engine::keys::discard_key_file(key);
            }
        }
        failed
    }
}
