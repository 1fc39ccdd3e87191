//! A batch's records and journal lines written together: what a run that installs many
//! certificates at once (a fleet host catching up) writes for each of them, with one sync
//! per step of the batch instead of one per certificate, and the same guarantees.
//!
//! Records ([`Store::save_all`]): every record is written in full to a temporary file beside
//! it, all of them made durable ([`fsutil::SyncGroup`]: one `syncfs`, or an `fsync` of each
//! file on kernels whose `syncfs` does not report write-back errors), then each renamed over
//! its record, then the renames made durable. A crash at any point leaves each record either
//! as it was or as it is now, never a mixture or a partial file (a temporary file left
//! behind is not a record: `Store::names` reads only `NAME.json`).
//!
//! Journal ([`Store::journal_all`]): the batch's lines appended to `journal.log` in one write
//! and fsynced once, then those with effect to the audit log in one write, fsynced once. A
//! line is durable before `journal_all` returns, as with [`Store::journal`]; a crash during
//! the write leaves the lines before it in order, the last possibly cut short (closed by the
//! next append).

use std::fs::OpenOptions;
use std::io::{self, Write};
use std::os::unix::fs::OpenOptionsExt;
use std::path::Path;

use time::OffsetDateTime;

use super::{CertRecord, Records, Store, StoreError, audit};
use crate::fsutil::{self, SyncGroup, WriteOptions};

/// The error of a record whose batch could not be made durable.
fn sync_error(path: &Path, dir: &Path, e: &io::Error) -> StoreError {
    StoreError::Write {
        path: path.to_path_buf(),
        source: io::Error::new(
            e.kind(),
            format!("{e} (making the writes in {} durable)", dir.display()),
        ),
    }
}

/// One event of a batch for the journal: the certificate, the event, its detail (no secret).
pub(crate) type JournalEvent<'a> = (&'a str, &'a str, serde_json::Value);

impl Store {
    /// Replaces the record of each of `records` atomically and durably, as [`Store::save`]
    /// does one, with one sync for the batch's writes and one for its renames (see the
    /// module's documentation); one result per record, in order.
    pub fn save_all(&self, records: &[&CertRecord]) -> Vec<Result<(), StoreError>> {
        if records.is_empty() {
            return Vec::new();
        }
        let mut results: Vec<Option<Result<(), StoreError>>> =
            records.iter().map(|_| None).collect();
        let group = SyncGroup::for_files(records.len());
        let certs = self.records_dir();
        if let Err(source) = group.watch(&certs) {
            return records
                .iter()
                .map(|_| {
                    Err(StoreError::Write {
                        path: certs.clone(),
                        source: io::Error::new(source.kind(), source.to_string()),
                    })
                })
                .collect();
        }
        let mut staged = Vec::with_capacity(records.len());
        for (idx, record) in records.iter().enumerate() {
            match self.stage_record(record, &group) {
                Ok(s) => staged.push((idx, s)),
                Err(e) => results[idx] = Some(Err(e)),
            }
        }
        if let Err((dir, e)) = group.sync() {
            // Nothing was renamed: the temporary files go, every record stays as it was.
            for (idx, s) in staged {
                results[idx] = Some(Err(sync_error(s.target(), &dir, &e)));
            }
            return results.into_iter().map(|r| r.unwrap_or(Ok(()))).collect();
        }
        crate::failpoint::hit("records-written");
        let mut renamed = Vec::with_capacity(staged.len());
        for (n, (idx, s)) in staged.into_iter().enumerate() {
            let path = s.target().to_path_buf();
            match s.rename() {
                Ok(()) => renamed.push((idx, path)),
                Err(source) => results[idx] = Some(Err(StoreError::Write { path, source })),
            }
            if n == 0 {
                crate::failpoint::hit("record-renamed");
            }
        }
        let after = if renamed.is_empty() {
            Ok(())
        } else {
            group.sync()
        };
        for (idx, path) in renamed {
            results[idx] = Some(match &after {
                Ok(()) => Ok(()),
                Err((dir, e)) => Err(sync_error(&path, dir, e)),
            });
        }
        results.into_iter().map(|r| r.unwrap_or(Ok(()))).collect()
    }

    /// [`Store::save_all`] of records handed over: each one written goes into `into` (the
    /// records as the run holds them); each that could not be written is returned, by name,
    /// with its error (`into` keeps what it held for that name).
    pub fn save_all_into(
        &self,
        changed: Vec<CertRecord>,
        into: &mut Records,
    ) -> Vec<(String, StoreError)> {
        let refs: Vec<&CertRecord> = changed.iter().collect();
        let saved = self.save_all(&refs);
        drop(refs);
        let mut failed = Vec::new();
        for (rec, saved) in changed.into_iter().zip(saved) {
            match saved {
                Ok(()) => {
                    into.insert(rec.name.clone(), rec);
                }
                Err(e) => failed.push((rec.name, e)),
            }
        }
        failed
    }

    fn stage_record(
        &self,
        record: &CertRecord,
        group: &SyncGroup,
    ) -> Result<fsutil::StagedWrite, StoreError> {
        let (path, text) = self.record_text(record)?;
        let opts = WriteOptions {
            mode: 0o600,
            group: None,
            refuse_links: false,
        };
        fsutil::stage_atomic(&path, &text, opts, group)
            .map_err(|source| StoreError::Write { path, source })
    }

    /// Appends the events of a batch to `journal.log` in one write, fsynced once, then those
    /// with effect (see [`audit::action_of`]) to the audit log in one write, fsynced once; in
    /// order. Each `detail` must hold no secret.
    pub fn journal_all(&self, events: &[JournalEvent<'_>]) -> Result<(), StoreError> {
        if events.is_empty() {
            return Ok(());
        }
        let path = self.dir.join("journal.log");
        let now = OffsetDateTime::now_utc()
            .format(&time::format_description::well_known::Rfc3339)
            .unwrap_or_default();
        let mut text = String::new();
        for (name, event, detail) in events {
            let line = serde_json::json!({
                "time": now, "certificate": name, "event": event, "detail": detail
            });
            text.push_str(&line.to_string());
            text.push('\n');
        }
        let result = (|| {
            let mut f = OpenOptions::new()
                .append(true)
                .create(true)
                .mode(0o600)
                .open(&path)?;
            f.write_all(text.as_bytes())?;
            f.sync_data()
        })();
        result.map_err(|source| StoreError::Write { path, source })?;
        let audited: Vec<audit::NewEntry<'_>> = events
            .iter()
            .filter_map(|(name, event, detail)| {
                Some(audit::NewEntry {
                    action: audit::action_of(event)?,
                    event,
                    certificate: Some(name),
                    details: detail,
                })
            })
            .collect();
        audit::append_all(&self.dir, &audited)
            .map(drop)
            .map_err(|source| StoreError::Write {
                path: self.dir.join(audit::FILE),
                source,
            })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::fs;

    fn events(n: usize) -> Vec<(String, serde_json::Value)> {
        (0..n)
            .map(|i| {
                (
                    format!("c{i}"),
                    serde_json::json!({ "certificate_id": i, "serial": format!("{i:04X}") }),
                )
            })
            .collect()
    }

    #[test]
    fn a_batch_of_150_is_journalled_and_audited_completely_and_in_order() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open(dir.path()).unwrap();
        store
            .journal(
                "before",
                "ordered",
                serde_json::json!({"certificate_id": 1}),
            )
            .unwrap();
        let owned = events(150);
        let batch: Vec<JournalEvent<'_>> = owned
            .iter()
            .map(|(n, d)| (n.as_str(), "installed", d.clone()))
            // An event without effect: journalled, not audited.
            .chain([("c0", "poll", serde_json::json!({}))])
            .collect();
        store.journal_all(&batch).unwrap();
        store
            .journal("after", "ordered", serde_json::json!({"certificate_id": 2}))
            .unwrap();

        let journal = fs::read_to_string(dir.path().join("journal.log")).unwrap();
        let lines: Vec<serde_json::Value> = journal
            .lines()
            .map(|l| serde_json::from_str(l).unwrap())
            .collect();
        assert_eq!(lines.len(), 153);
        assert_eq!(lines[0]["certificate"], "before");
        for (i, line) in lines[1..151].iter().enumerate() {
            assert_eq!(line["certificate"], format!("c{i}"), "{line}");
            assert_eq!(line["event"], "installed");
            assert_eq!(line["detail"]["certificate_id"], i);
        }
        assert_eq!(lines[151]["event"], "poll");
        assert_eq!(lines[152]["certificate"], "after");

        let audit = fs::read(dir.path().join(audit::FILE)).unwrap();
        let verified = audit::verify(&audit);
        assert_eq!(verified.breaks, []);
        assert_eq!(verified.lines, 152);
        let entries: Vec<audit::AuditEntry> = audit
            .split(|&b| b == b'\n')
            .filter(|l| !l.is_empty())
            .map(|l| audit::parse_line(l).unwrap())
            .collect();
        for (i, e) in entries[1..151].iter().enumerate() {
            assert_eq!(e.seq, i as u64 + 2);
            assert_eq!(e.action, "install");
            assert_eq!(e.certificate.as_deref(), Some(format!("c{i}").as_str()));
            assert_eq!(e.certificate_id, Some(i as u64));
        }
        assert_eq!(entries[151].certificate.as_deref(), Some("after"));
    }

    #[test]
    fn an_audit_batch_after_an_interrupted_write_closes_it_and_chains_on() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open(dir.path()).unwrap();
        store
            .journal("a", "ordered", serde_json::json!({"certificate_id": 1}))
            .unwrap();
        // A write cut short by a crash.
        let mut f = OpenOptions::new()
            .append(true)
            .open(dir.path().join(audit::FILE))
            .unwrap();
        f.write_all(b"{\"seq\":2,\"time\":\"20").unwrap();
        let owned = events(3);
        let batch: Vec<JournalEvent<'_>> = owned
            .iter()
            .map(|(n, d)| (n.as_str(), "installed", d.clone()))
            .collect();
        store.journal_all(&batch).unwrap();
        let text = fs::read(dir.path().join(audit::FILE)).unwrap();
        let v = audit::verify(&text);
        // The fragment is line 2, a tolerated gap; the batch lines 3 to 5 after it.
        assert_eq!(v.lines, 5);
        assert_eq!(v.breaks.len(), 1, "{:?}", v.breaks);
        assert_eq!(
            (v.breaks[0].line, v.breaks[0].kind),
            (2, audit::BreakKind::Gap)
        );
        let last = text
            .split(|&b| b == b'\n')
            .rfind(|l| !l.is_empty())
            .map(|l| audit::parse_line(l).unwrap())
            .unwrap();
        assert_eq!(last.seq, 5);
        assert_eq!(last.certificate.as_deref(), Some("c2"));
    }

    #[test]
    fn a_batch_of_records_is_saved_each_one_or_refused_alone() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open(dir.path()).unwrap();
        let mut recs: Vec<CertRecord> = (0..150)
            .map(|i| CertRecord::new(&format!("c{i}")))
            .collect();
        for (i, r) in recs.iter_mut().enumerate() {
            r.failures = i as u32;
        }
        // A name that is not a file name is refused alone.
        recs[7].name = "../escape".into();
        let refs: Vec<&CertRecord> = recs.iter().collect();
        let results = store.save_all(&refs);
        assert_eq!(results.len(), 150);
        for (i, r) in results.iter().enumerate() {
            if i == 7 {
                assert!(matches!(r, Err(StoreError::BadName(_))), "{r:?}");
            } else {
                r.as_ref().unwrap();
                let back = store.load(&format!("c{i}")).unwrap();
                assert_eq!(back.failures, i as u32);
                assert_eq!(
                    super::super::mode_of(&dir.path().join(format!("certs/c{i}.json"))).unwrap(),
                    0o600
                );
            }
        }
        assert_eq!(store.names().unwrap().len(), 149);
        // No temporary file is left behind.
        let leftovers = fs::read_dir(dir.path().join("certs"))
            .unwrap()
            .filter_map(|e| e.ok())
            .filter(|e| e.file_name().to_string_lossy().contains(".tmp-"))
            .count();
        assert_eq!(leftovers, 0);
        assert!(store.save_all(&[]).is_empty());
    }
}
