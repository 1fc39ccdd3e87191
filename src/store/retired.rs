//! Retired certificates: `state_dir/retired/NAME.json` holds the record of a certificate that
//! `cert-agent retire` stopped managing, with when and how; its presence keeps later runs
//! from starting NAME afresh (and placing a billed order) while the configuration still
//! lists it. An earlier archive of the same name is kept beside it as `NAME.json.UNIXTIME`.

use std::io;
use std::path::PathBuf;

use serde::{Deserialize, Serialize};
use time::OffsetDateTime;

use super::{CertRecord, Store, StoreError, check_name};
use crate::fsutil;

/// What is archived when a certificate is retired.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Retired {
    #[serde(with = "time::serde::rfc3339")]
    pub retired_at: OffsetDateTime,
    /// What was done: the cancellation's answer, files removed, notes.
    pub summary: serde_json::Value,
    /// The record as it was.
    pub record: CertRecord,
}

impl Store {
    /// `retired/NAME.json`.
    pub fn retired_path(&self, name: &str) -> Result<PathBuf, StoreError> {
        check_name(name)?;
        Ok(self.dir.join("retired").join(format!("{name}.json")))
    }

    /// When `name` was retired, if its archive is there (the record read when it can be).
    pub fn retired(&self, name: &str) -> Option<PathBuf> {
        let path = self.retired_path(name).ok()?;
        std::fs::symlink_metadata(&path).is_ok().then_some(path)
    }

    /// The archive of `name` when it was retired and nothing was started for it since (`rec`,
    /// its live record, has no order and no order intent): runs, `status` and `check` then
    /// leave it alone and say so, while the configuration still lists it.
    pub fn retired_and_idle(&self, name: &str, rec: &CertRecord) -> Option<PathBuf> {
        if !rec.partner.is_unordered() {
            return None;
        }
        self.retired(name)
    }

    /// Archives `retired` under `retired/` (0600, an earlier archive kept aside) and then
    /// removes the live record; returns the archive's path.
    pub fn archive_retired(&self, retired: &Retired) -> Result<PathBuf, StoreError> {
        let name = retired.record.name.as_str();
        let path = self.retired_path(name)?;
        let dir = self.dir.join("retired");
        fsutil::ensure_private_dir(&dir, 0o700).map_err(|source| StoreError::CreateDir {
            path: dir.clone(),
            source,
        })?;
        if path.exists() {
            let aside = dir.join(format!(
                "{name}.json.{}",
                retired.retired_at.unix_timestamp()
            ));
            std::fs::rename(&path, &aside).map_err(|source| StoreError::Write {
                path: aside.clone(),
                source,
            })?;
        }
        let text = serde_json::to_vec_pretty(retired).map_err(|e| StoreError::Write {
            path: path.clone(),
            source: io::Error::other(e),
        })?;
        fsutil::write_atomic(&path, &text, 0o600).map_err(|source| StoreError::Write {
            path: path.clone(),
            source,
        })?;
        let live = self.record_path(name)?;
        match std::fs::remove_file(&live) {
            Ok(()) => {}
            Err(e) if e.kind() == io::ErrorKind::NotFound => {}
            Err(source) => return Err(StoreError::Write { path: live, source }),
        }
        Ok(path)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn archive_keeps_history_and_removes_the_live_record() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open(dir.path()).unwrap();
        let mut rec = store.load("www").unwrap();
        rec.last_state = Some("issued".into());
        store.save(&rec).unwrap();
        assert!(store.retired("www").is_none());
        let at = OffsetDateTime::from_unix_timestamp(1_800_000_000).unwrap();
        let r = Retired {
            retired_at: at,
            summary: serde_json::json!({}),
            record: rec.clone(),
        };
        let path = store.archive_retired(&r).unwrap();
        assert_eq!(store.retired("www"), Some(path.clone()));
        assert_eq!(crate::store::mode_of(&path).unwrap(), 0o600);
        assert!(!dir.path().join("certs/www.json").exists());
        store.archive_retired(&r).unwrap();
        assert!(dir.path().join("retired/www.json.1800000000").exists());
        assert!(store.retired_path("../x").is_err());
    }
}
