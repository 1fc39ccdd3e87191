//! What the web server was last seen serving: `check --served` and `status --served` shake
//! hands with each certificate's verify address and keep what they saw in
//! `state_dir/served.json`, so that the metrics can report whether the served certificate
//! matches the installed one (`cert_agent_certificate_served_matches_installed`) between
//! those checks. An observation counts only for the certificate installed when it was made.

use std::collections::BTreeMap;
use std::time::Duration;

use serde::{Deserialize, Serialize};
use time::OffsetDateTime;

use crate::config::CertificateConfig;
use crate::store::Store;

/// How long `--served` waits for one handshake.
const HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(10);

/// What the verify address served, when asked.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Served {
    /// No verify address configured (`verify_address = ""`, or `server = "none"`).
    NotChecked,
    /// The serial of the leaf served for the certificate's common name.
    Serial(String),
    /// The handshake failed.
    Failed(String),
}

/// What the certificate's verify address serves for its common name.
pub(super) async fn served(cert: &CertificateConfig) -> Served {
    let Some(address) = cert
        .install
        .verify_address
        .as_deref()
        .filter(|a| !a.is_empty())
    else {
        return Served::NotChecked;
    };
    match crate::install::verify::served_serial(address, cert.common_name(), HANDSHAKE_TIMEOUT)
        .await
    {
        Ok(serial) => Served::Serial(serial.to_string()),
        Err(e) => Served::Failed(e.to_string()),
    }
}

/// File of the observations, in the state directory.
const FILE: &str = "served.json";

/// One handshake with a certificate's verify address.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub(super) struct Observation {
    /// When the handshake was made.
    #[serde(with = "time::serde::rfc3339")]
    pub(super) at: OffsetDateTime,
    /// The serial installed at that time.
    pub(super) installed_serial: String,
    /// The serial served, when the handshake succeeded.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(super) served_serial: Option<String>,
    /// Why the handshake failed, when it did.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(super) error: Option<String>,
}

impl Observation {
    /// What was seen at `at` for the installed `installed_serial`.
    pub(super) fn of(at: OffsetDateTime, installed_serial: &str, served: &Served) -> Option<Self> {
        let (served_serial, error) = match served {
            Served::NotChecked => return None,
            Served::Serial(s) => (Some(s.clone()), None),
            Served::Failed(e) => (None, Some(e.clone())),
        };
        Some(Self {
            at,
            installed_serial: installed_serial.to_owned(),
            served_serial,
            error,
        })
    }

    /// Whether the served certificate was the installed one (a failed handshake: no).
    pub(super) fn matches(&self) -> bool {
        self.served_serial
            .as_deref()
            .is_some_and(|s| crate::crypto::same_serial_hex(s, &self.installed_serial))
    }

    /// Whether the observation was made for the certificate now installed with `serial`.
    pub(super) fn is_for(&self, serial: &str) -> bool {
        crate::crypto::same_serial_hex(&self.installed_serial, serial)
    }
}

/// The observations kept in `store`'s directory (none when the file is missing or unreadable).
pub(super) fn load(store: &Store) -> BTreeMap<String, Observation> {
    std::fs::read(store.dir().join(FILE))
        .ok()
        .and_then(|b| serde_json::from_slice(&b).ok())
        .unwrap_or_default()
}

/// Adds `seen` (certificate name → observation) to the kept observations. A state directory
/// the caller cannot write (a monitoring user) only loses the observations: the check itself
/// does not fail for it.
pub(super) fn remember(store: &Store, seen: Vec<(String, Observation)>) {
    if seen.is_empty() || !store.dir().is_dir() {
        return;
    }
    let mut all = load(store);
    all.extend(seen);
    let written = serde_json::to_vec_pretty(&all)
        .map_err(|e| e.to_string())
        .and_then(|bytes| {
            crate::fsutil::write_atomic(&store.dir().join(FILE), &bytes, 0o644)
                .map_err(|e| crate::fsutil::io_text(&e))
        });
    if let Err(e) = written {
        tracing::debug!("could not keep what the web server served: {e}");
    }
}

#[cfg(test)]
mod tests {
    use super::Served;
    use super::*;

    #[test]
    fn an_observation_matches_only_what_was_served_for_the_installed_serial() {
        let at = OffsetDateTime::UNIX_EPOCH;
        let same = Observation::of(at, "0a1b", &Served::Serial("0A1B".into())).unwrap();
        assert!(same.matches());
        assert!(same.is_for("0A1B"));
        assert!(!same.is_for("0A1C"));
        let other = Observation::of(at, "0a1b", &Served::Serial("99".into())).unwrap();
        assert!(!other.matches());
        let failed = Observation::of(at, "0a1b", &Served::Failed("refused".into())).unwrap();
        assert!(!failed.matches());
        assert!(Observation::of(at, "0a1b", &Served::NotChecked).is_none());
    }

    #[test]
    fn observations_are_kept_beside_earlier_ones() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::existing(dir.path());
        let at = OffsetDateTime::UNIX_EPOCH;
        let obs = |s: &str| Observation::of(at, "01", &Served::Serial(s.into())).unwrap();
        remember(&store, vec![("www".into(), obs("01"))]);
        remember(&store, vec![("shop".into(), obs("02"))]);
        let all = load(&store);
        assert_eq!(all.len(), 2);
        assert!(all["www"].matches());
        assert!(!all["shop"].matches());
        std::fs::write(dir.path().join(FILE), b"{not json").unwrap();
        assert!(load(&store).is_empty());
    }
}
