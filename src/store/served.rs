//! What the web server was last seen serving, kept in the state directory so that the metrics
//! and `check` can tell between two looks whether the served certificate is the installed one.
//! Three things look: `check --served` and `status --served` (a handshake with the verify
//! address), an install's own verification (it saw the new serial served, or rolled back),
//! and in a fleet this host's proofs of what it serves (every name at the verify address).
//! The first two keep `state_dir/served.json`, a fleet proof `state_dir/proved.json` as well.
//! An observation counts only for the certificate installed when it was made.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};
use time::OffsetDateTime;

use super::Store;

/// What the verify address served, when asked.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Served {
    /// No verify address configured (`verify_address = ""`, or `server = "none"`).
    NotChecked,
    /// The serial of the leaf served for the certificate's common name.
    Serial(String),
    /// The handshake failed.
    Failed(String),
}

/// File of the observations of a handshake with the common name, in the state directory.
const FILE: &str = "served.json";
/// File of the observations of this host's fleet proofs, in the state directory.
const PROVED_FILE: &str = "proved.json";

/// One look at what a certificate's verify address serves.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct Observation {
    /// When the handshake was made.
    #[serde(with = "time::serde::rfc3339")]
    pub at: OffsetDateTime,
    /// The serial installed at that time.
    pub installed_serial: String,
    /// The serial served, when the handshake succeeded.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub served_serial: Option<String>,
    /// Why the handshake failed, when it did.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    /// A fleet proof's addresses and names that served another serial than the installed
    /// one (`ADDRESS (SNI NAME) serves SERIAL`); none for a look of another kind.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub elsewhere: Option<Vec<String>>,
    /// A fleet proof that passed: since when this host has proved `installed_serial` served
    /// without a failed proof in between (none: it failed, or a look of another kind).
    #[serde(
        default,
        skip_serializing_if = "Option::is_none",
        with = "time::serde::rfc3339::option"
    )]
    pub proved_since: Option<OffsetDateTime>,
}

impl Observation {
    /// What was seen at `at` for the installed `installed_serial`.
    pub(crate) fn of(at: OffsetDateTime, installed_serial: &str, served: &Served) -> Option<Self> {
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
            elsewhere: None,
            proved_since: None,
        })
    }

    /// Whether the served certificate was the installed one (a failed handshake, or a fleet
    /// proof that met another serial anywhere: no).
    pub(crate) fn matches(&self) -> bool {
        self.elsewhere.as_ref().is_none_or(Vec::is_empty)
            && self
                .served_serial
                .as_deref()
                .is_some_and(|s| crate::crypto::same_serial_hex(s, &self.installed_serial))
    }

    /// Whether the observation was made for the certificate now installed with `serial`.
    pub(crate) fn is_for(&self, serial: &str) -> bool {
        crate::crypto::same_serial_hex(&self.installed_serial, serial)
    }
}

/// The observations of the handshakes with the common name kept in `store`'s directory (none
/// when the file is missing or unreadable).
pub(crate) fn load(store: &Store) -> BTreeMap<String, Observation> {
    load_file(store, FILE)
}

/// The observations of this host's fleet proofs kept in `store`'s directory.
pub(crate) fn load_proved(store: &Store) -> BTreeMap<String, Observation> {
    load_file(store, PROVED_FILE)
}

fn load_file(store: &Store, file: &str) -> BTreeMap<String, Observation> {
    std::fs::read(store.dir().join(file))
        .ok()
        .and_then(|b| serde_json::from_slice(&b).ok())
        .unwrap_or_default()
}

/// Adds `seen` (certificate name → observation) to the kept observations. A state directory
/// the caller cannot write (a monitoring user) only loses the observations: the check itself
/// does not fail for it.
pub(crate) fn remember(store: &Store, seen: Vec<(String, Observation)>) {
    remember_in(store, FILE, seen);
}

/// Adds the observations of this host's fleet proofs.
pub(crate) fn remember_proved(store: &Store, seen: Vec<(String, Observation)>) {
    remember_in(store, PROVED_FILE, seen);
}

fn remember_in(store: &Store, file: &str, seen: Vec<(String, Observation)>) {
    if seen.is_empty() || !store.dir().is_dir() {
        return;
    }
    let mut all = load_file(store, file);
    all.extend(seen);
    let written = serde_json::to_vec_pretty(&all)
        .map_err(|e| e.to_string())
        .and_then(|bytes| {
            crate::fsutil::write_atomic(&store.dir().join(file), &bytes, 0o644)
                .map_err(|e| crate::fsutil::io_text(&e))
        });
    if let Err(e) = written {
        tracing::debug!("could not keep what the web server served: {e}");
    }
}

/// The latest of `a` and `b` made for the installed `serial`.
pub(crate) fn latest_for<'a>(
    serial: &str,
    a: Option<&'a Observation>,
    b: Option<&'a Observation>,
) -> Option<&'a Observation> {
    [a, b]
        .into_iter()
        .flatten()
        .filter(|o| o.is_for(serial))
        .max_by_key(|o| o.at)
}

/// For the fuzz target `fleet_values`: `data` as `served.json` or `proved.json` — refused or
/// read, never a panic; what reads is written and read back the same, and each observation
/// answers whether it matches. Not an interface of the agent.
#[doc(hidden)]
pub fn fuzz_observations(data: &[u8]) {
    let Ok(all) = serde_json::from_slice::<BTreeMap<String, Observation>>(data) else {
        return;
    };
    for o in all.values() {
        let _ = (o.matches(), o.is_for(&o.installed_serial));
    }
    let Ok(bytes) = serde_json::to_vec(&all) else {
        panic!("what reads is written");
    };
    let again: BTreeMap<String, Observation> =
        serde_json::from_slice(&bytes).unwrap_or_else(|e| panic!("reads back: {e}"));
    assert_eq!(again, all, "reads back the same");
}

#[cfg(test)]
mod tests {
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
        let proved_elsewhere = Observation {
            elsewhere: Some(vec!["127.0.0.1:443 (SNI b.test) serves 99".into()]),
            ..same.clone()
        };
        assert!(!proved_elsewhere.matches());
    }

    #[test]
    fn observations_are_kept_beside_earlier_ones() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::existing(dir.path());
        let at = OffsetDateTime::UNIX_EPOCH;
        let obs = |s: &str| Observation::of(at, "01", &Served::Serial(s.into())).unwrap();
        remember(&store, vec![("www".into(), obs("01"))]);
        remember(&store, vec![("shop".into(), obs("02"))]);
        remember_proved(&store, vec![("www".into(), obs("03"))]);
        let all = load(&store);
        assert_eq!(all.len(), 2);
        assert!(all["www"].matches());
        assert!(!all["shop"].matches());
        assert!(!load_proved(&store)["www"].matches());
        for garbage in [
            &b"{not json"[..],
            b"[]",
            b"{\"www\":{\"at\":1}}",
            b"\xff\xfe",
        ] {
            std::fs::write(dir.path().join(FILE), garbage).unwrap();
            assert!(load(&store).is_empty());
        }
    }

    #[test]
    fn the_latest_look_for_the_installed_serial_counts() {
        let t = |s: i64| OffsetDateTime::from_unix_timestamp(s).unwrap();
        let at = |s: i64, installed: &str| {
            Observation::of(t(s), installed, &Served::Serial(installed.into())).unwrap()
        };
        let (old, new, other) = (at(10, "01"), at(20, "01"), at(30, "02"));
        assert_eq!(latest_for("01", Some(&old), Some(&new)), Some(&new));
        assert_eq!(latest_for("01", Some(&new), Some(&old)), Some(&new));
        assert_eq!(latest_for("01", Some(&other), Some(&old)), Some(&old));
        assert_eq!(latest_for("01", Some(&other), None), None);
    }
}
