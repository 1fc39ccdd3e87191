//! The versions this host accepted: per certificate, the highest version of the shared record
//! and of the current certificate (with the digest of the value, and for the certificate the
//! serial and dates read from its checked bundle). Kept in `state_dir/fleet-versions.json`
//! (0600), so that an older sealed value put back into etcd (a replay) is refused, after a
//! restart too.
//!
//! A version is accepted only after the write it stands for (the leader's put to etcd, or the
//! read of a value etcd holds), never before. The file is written once a run's writes are
//! done (and every few seconds while a long run writes), not after each certificate: it holds
//! every certificate's versions, and rewriting it per certificate made a run of N publications
//! cost N times the file. A crash before the file was written loses only versions whose values
//! etcd holds: the next run reads them back and accepts them (each is higher than the file's),
//! while anything at or below what the file holds is still refused.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use anyhow::{Result, anyhow, bail};
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};
use time::OffsetDateTime;

use super::schema::{Kind, current_key, spec_key, state_key};

pub(super) const VERSIONS_FILE: &str = "fleet-versions.json";

/// This host's instance id, beside the versions ([`Versions::instance`]).
pub(super) const INSTANCE_FILE: &str = "fleet-instance";

/// One accepted value.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub(super) struct Accepted {
    pub(super) version: u64,
    /// SHA-256 of the value as etcd held it (hex).
    pub(super) digest: String,
    /// The etcd modification revision this host read or wrote that very value at: a read
    /// that finds the key at this revision does not read the value again (etcd changes no
    /// value without changing its revision). None: read it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(super) revision: Option<i64>,
}

/// The accepted current certificate, with what its checked bundle says.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub(super) struct AcceptedCurrent {
    #[serde(flatten)]
    pub(super) value: Accepted,
    pub(super) serial: String,
    #[serde(with = "time::serde::rfc3339")]
    pub(super) not_before: OffsetDateTime,
}

/// The fleet's spec of a certificate as this host last opened it and found it to agree with
/// its own configuration.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub(super) struct AgreedSpec {
    /// The etcd modification revision the spec was read at.
    pub(super) revision: i64,
    /// The digest of what this host's configuration said of the certificate (names,
    /// product, key type) when it agreed.
    pub(super) config: String,
}

#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub(super) struct CertVersions {
    #[serde(default)]
    pub(super) state: Option<Accepted>,
    #[serde(default)]
    pub(super) current: Option<AcceptedCurrent>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(super) spec: Option<AgreedSpec>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(super) imported: Option<Imported>,
    /// The version of the last tombstone accepted (tombstones count with the shared record's
    /// versions): a shared record accepted above it is a live one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(super) tombstone: Option<u64>,
    /// The versions the fleet's hosts vouched for when this host had accepted nothing of the
    /// certificate ([`super::manifest`]): nothing below them is accepted.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(super) floor: Option<Floor>,
    /// The shared record this host's state directory holds as of a version it accepted (it
    /// wrote it, or imported it whole): the copy a leader writes back in place of a value it
    /// refuses ([`super::repair`]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(super) held: Option<Held>,
}

/// This host's own copy of an accepted shared record: its version and the digest of what
/// the fleet shares of it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub(super) struct Held {
    pub(super) version: u64,
    pub(super) record: String,
}

/// The versions of one certificate a host vouches for in its sealed manifest entry: the
/// highest it accepted (or took as its floor) of the shared record, the current certificate
/// and the tombstone (0: none).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub(super) struct Vouched {
    #[serde(default, skip_serializing_if = "is_zero")]
    pub(super) state: u64,
    #[serde(default, skip_serializing_if = "is_zero")]
    pub(super) current: u64,
    #[serde(default, skip_serializing_if = "is_zero")]
    pub(super) tombstone: u64,
}

#[allow(clippy::trivially_copy_pass_by_ref)]
fn is_zero(v: &u64) -> bool {
    *v == 0
}

impl Vouched {
    /// The higher of each version.
    pub(super) fn max(self, other: Self) -> Self {
        Self {
            state: self.state.max(other.state),
            current: self.current.max(other.current),
            tombstone: self.tombstone.max(other.tombstone),
        }
    }

    /// Whether the shared record vouched for is a live record (above the last tombstone).
    pub(super) fn live(self) -> bool {
        self.state > self.tombstone
    }
}

/// The floor of one certificate: the versions vouched for, and by which hosts.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub(super) struct Floor {
    #[serde(flatten)]
    pub(super) versions: Vouched,
    /// The hosts whose manifest entries vouched for the highest of them.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub(super) by: Vec<String>,
}

/// The shared record as this host's lead last imported it into its state directory.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub(super) struct Imported {
    /// The etcd modification revision of the shared record imported.
    pub(super) revision: i64,
    /// The digest of this host's record as the import left it (what the fleet shares of it,
    /// and the fleet's last attempt).
    pub(super) record: String,
}

/// What a value read from etcd is, against what was accepted.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Seen {
    /// The very value accepted last.
    Same,
    /// Not accepted yet: open it, and accept it only at a higher version.
    Other,
}

/// The file: the versions by certificate, and the fleet keys this host saw retired.
#[derive(Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
struct File {
    /// The fingerprints of previous fleet keys the fleet finished rotating away from (no
    /// certificate name holds `@`).
    #[serde(
        default,
        rename = "@retired_keys",
        skip_serializing_if = "Vec::is_empty"
    )]
    retired_keys: Vec<String>,
    /// When this host first ran holding each previous fleet key (by fingerprint) beside a new
    /// current key: the rotation's grace period ([`ROTATION_GRACE`]) counts from it.
    #[serde(
        default,
        rename = "@rotating_since",
        skip_serializing_if = "BTreeMap::is_empty",
        with = "since_map"
    )]
    rotating_since: BTreeMap<String, OffsetDateTime>,
    /// The digest of the manifest entry this host last wrote ([`super::manifest::publish`]).
    #[serde(default, rename = "@manifest", skip_serializing_if = "Option::is_none")]
    manifest: Option<String>,
    /// The highest version this host opened of each host's proof and rollout decision, by its
    /// key (`hosts/HOST/proof/NAME`, `hosts/HOST/rollout/NAME`): an older value put back there
    /// is refused as a replay.
    #[serde(
        default,
        rename = "@rollout",
        skip_serializing_if = "BTreeMap::is_empty"
    )]
    rollout: BTreeMap<String, u64>,
    /// The highest version this host opened of each issuer certificate of the fleet's chains,
    /// by its hash (`chains/SHA256`): an older value put back there is refused as a replay.
    #[serde(
        default,
        rename = "@chains",
        skip_serializing_if = "BTreeMap::is_empty"
    )]
    chains: BTreeMap<String, u64>,
    /// Whether this host's last lead found every current value in the chain format
    /// ([`super::chains::migrate`]), and it accepted none in the old format since.
    #[serde(
        default,
        rename = "@chains_migrated",
        skip_serializing_if = "std::ops::Not::not"
    )]
    chains_migrated: bool,
    #[serde(flatten)]
    certs: BTreeMap<String, CertVersions>,
}

/// How long a host keeps opening values sealed under its previous fleet key after it first
/// ran holding it beside a new current key, when it never sees the fleet's key check under
/// the new key: past it, the rotation has ended on this host all the same.
pub(super) const ROTATION_GRACE: time::Duration = time::Duration::hours(24);

/// `@rotating_since`: RFC 3339 times by key fingerprint.
mod since_map {
    use std::collections::BTreeMap;

    use serde::{Deserialize, Deserializer, Serialize, Serializer};
    use time::OffsetDateTime;

    #[derive(Serialize, Deserialize)]
    struct At(#[serde(with = "time::serde::rfc3339")] OffsetDateTime);

    pub(super) fn serialize<S: Serializer>(
        map: &BTreeMap<String, OffsetDateTime>,
        s: S,
    ) -> Result<S::Ok, S::Error> {
        let out: BTreeMap<&String, At> = map.iter().map(|(k, v)| (k, At(*v))).collect();
        out.serialize(s)
    }

    pub(super) fn deserialize<'de, D: Deserializer<'de>>(
        d: D,
    ) -> Result<BTreeMap<String, OffsetDateTime>, D::Error> {
        let map = BTreeMap::<String, At>::deserialize(d)?;
        Ok(map.into_iter().map(|(k, At(v))| (k, v)).collect())
    }
}

/// The accepted versions of every certificate.
#[derive(Debug, Default)]
pub(super) struct Versions {
    path: PathBuf,
    file: File,
    changed: bool,
}

/// The digest of a value.
pub(super) fn digest(value: &[u8]) -> String {
    hex::encode(Sha256::digest(value))
}

impl Versions {
    /// Reads the file of `state_dir` (none yet: nothing accepted).
    pub(super) fn load(state_dir: &Path) -> Result<Self> {
        let path = state_dir.join(VERSIONS_FILE);
        match std::fs::read(&path) {
            Ok(bytes) => Self::parse(path, &bytes),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(Self {
                path,
                file: File::default(),
                changed: false,
            }),
            Err(e) => bail!("{}: {}", path.display(), crate::fsutil::io_text(&e)),
        }
    }

    /// The versions of the file at `path` that holds `bytes`.
    pub(super) fn parse(path: PathBuf, bytes: &[u8]) -> Result<Self> {
        let file = serde_json::from_slice(bytes).map_err(|e| damaged(&path, &e))?;
        Ok(Self {
            path,
            file,
            changed: false,
        })
    }

    /// What [`save`](Self::save) writes.
    pub(super) fn to_bytes(&self) -> Result<Vec<u8>> {
        Ok(serde_json::to_vec(&self.file)?)
    }

    /// Whether `other` holds the same versions and retired keys.
    pub(super) fn same_as(&self, other: &Self) -> bool {
        self.file == other.file
    }

    /// Writes the file when something was accepted since it was read.
    pub(super) fn save(&mut self) -> Result<()> {
        if !self.changed {
            return Ok(());
        }
        crate::fsutil::write_atomic(&self.path, &self.to_bytes()?, 0o600)
            .map_err(|e| anyhow!("{}: {}", self.path.display(), crate::fsutil::io_text(&e)))?;
        self.changed = false;
        Ok(())
    }

    /// Accepts `version` of the proof or rollout decision at `rel` unless this host opened a
    /// higher one there before (`Err`: that version).
    pub(super) fn accept_rollout(&mut self, rel: &str, version: u64) -> Result<(), u64> {
        let floor = self.file.rollout.entry(rel.to_owned()).or_insert(0);
        if version < *floor {
            return Err(*floor);
        }
        if version > *floor {
            *floor = version;
            self.changed = true;
        }
        Ok(())
    }

    /// Accepts `version` of the issuer certificate of `hash` unless this host opened a higher
    /// one of it before (`Err`: that version).
    pub(super) fn accept_chain(&mut self, hash: &str, version: u64) -> Result<(), u64> {
        let floor = self.file.chains.entry(hash.to_owned()).or_insert(0);
        if version < *floor {
            return Err(*floor);
        }
        if version > *floor {
            *floor = version;
            self.changed = true;
        }
        Ok(())
    }

    /// Whether every current value was found in the chain format (see the field).
    pub(super) fn chains_migrated(&self) -> bool {
        self.file.chains_migrated
    }

    /// Records whether every current value is in the chain format.
    pub(super) fn set_chains_migrated(&mut self, migrated: bool) {
        if self.file.chains_migrated != migrated {
            self.file.chains_migrated = migrated;
            self.changed = true;
        }
    }

    pub(super) fn of(&self, name: &str) -> CertVersions {
        self.file.certs.get(name).cloned().unwrap_or_default()
    }

    /// The current certificate of `name` this host accepted last, if any.
    pub(super) fn accepted_current(&self, name: &str) -> Option<&AcceptedCurrent> {
        self.file.certs.get(name)?.current.as_ref()
    }

    /// Whether the fleet finished rotating away from the key of `fingerprint`.
    pub(super) fn is_retired(&self, fingerprint: &str) -> bool {
        self.file.retired_keys.iter().any(|f| f == fingerprint)
    }

    /// This host's instance id: 16 random bytes (hex), made the first time and kept beside
    /// this file in `fleet-instance` (0600; a deleted or damaged versions file keeps it). It
    /// tells this host's `hosts/HOST/seen` from one another host configured with the same
    /// name wrote.
    pub(super) fn instance(&self) -> Result<String> {
        let path = self.path.with_file_name(INSTANCE_FILE);
        match std::fs::read_to_string(&path) {
            Ok(text)
                if text.trim().len() == 32
                    && text.trim().bytes().all(|b| b.is_ascii_hexdigit()) =>
            {
                return Ok(text.trim().to_owned());
            }
            Ok(_) => {}
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
            Err(e) => bail!("{}: {}", path.display(), crate::fsutil::io_text(&e)),
        }
        let mut bytes = [0u8; 16];
        aws_lc_rs::rand::fill(&mut bytes)
            .map_err(|_| anyhow!("the system's random source failed"))?;
        let id = hex::encode(bytes);
        crate::fsutil::write_atomic(&path, format!("{id}\n").as_bytes(), 0o600)
            .map_err(|e| anyhow!("{}: {}", path.display(), crate::fsutil::io_text(&e)))?;
        Ok(id)
    }

    /// When this host first ran holding the key of `fingerprint` as its previous key: recorded
    /// as `now` the first time it is asked.
    pub(super) fn rotating_since(
        &mut self,
        fingerprint: &str,
        now: OffsetDateTime,
    ) -> OffsetDateTime {
        if let Some(since) = self.file.rotating_since.get(fingerprint) {
            return *since;
        }
        self.file.rotating_since.insert(fingerprint.to_owned(), now);
        self.changed = true;
        now
    }

    /// Whether the rotation away from the key of `fingerprint` has ended on this host at
    /// `now`: the fleet's key check was seen under the new key, or [`ROTATION_GRACE`] passed
    /// since this host first held it as its previous key. Reads only what is recorded.
    pub(super) fn rotation_ended(&self, fingerprint: &str, now: OffsetDateTime) -> bool {
        self.is_retired(fingerprint)
            || self
                .file
                .rotating_since
                .get(fingerprint)
                .and_then(|since| since.checked_add(ROTATION_GRACE))
                .is_some_and(|end| now >= end)
    }

    /// Records that the fleet finished rotating away from the key of `fingerprint`.
    /// The revisions kept with the values are forgotten: every value is read (and opened
    /// with the keys left) again.
    pub(super) fn retire(&mut self, fingerprint: &str) {
        if !self.is_retired(fingerprint) {
            self.file.retired_keys.push(fingerprint.to_owned());
            for v in self.file.certs.values_mut() {
                if let Some(a) = &mut v.state {
                    a.revision = None;
                }
                if let Some(c) = &mut v.current {
                    c.value.revision = None;
                }
                v.spec = None;
                v.imported = None;
            }
            self.changed = true;
        }
    }

    /// After this host's lead imported the shared record of `name` read at `revision`, and
    /// its own record of it was left as `record` (its digest).
    pub(super) fn imported(&mut self, name: &str, revision: i64, record: &str) {
        if revision <= 0 {
            return;
        }
        let imported = Some(Imported {
            revision,
            record: record.to_owned(),
        });
        let v = self.file.certs.entry(name.to_owned()).or_default();
        if v.imported != imported {
            v.imported = imported;
            self.changed = true;
        }
    }

    /// Whether importing the shared record of `name`, at `revision`, would change nothing:
    /// this host imported that very revision, and its record (`record`: its digest) is as the
    /// import left it.
    pub(super) fn import_changes_nothing(&self, name: &str, revision: i64, record: &str) -> bool {
        self.file
            .certs
            .get(name)
            .and_then(|v| v.imported.as_ref())
            .is_some_and(|i| revision > 0 && i.revision == revision && i.record == record)
    }

    /// After the fleet's spec of `name`, read at `revision`, was opened and agreed with this
    /// host's configuration of it (`config`: its digest).
    pub(super) fn agreed_spec(&mut self, name: &str, revision: i64, config: &str) {
        if revision <= 0 {
            return;
        }
        let spec = Some(AgreedSpec {
            revision,
            config: config.to_owned(),
        });
        let v = self.file.certs.entry(name.to_owned()).or_default();
        if v.spec != spec {
            v.spec = spec;
            self.changed = true;
        }
    }

    /// Whether `value` of the shared record is the one accepted last.
    pub(super) fn seen_state(&self, name: &str, value: &[u8]) -> Seen {
        seen(self.of(name).state.as_ref(), value)
    }

    /// Whether `value` of the current certificate is the one accepted last.
    pub(super) fn seen_current(&self, name: &str, value: &[u8]) -> Seen {
        seen(self.of(name).current.as_ref().map(|c| &c.value), value)
    }

    /// Accepts the shared record `value` at `version`: refused (a replay) unless higher than
    /// the one accepted last. `what` names the etcd key.
    pub(super) fn accept_state(
        &mut self,
        name: &str,
        what: &str,
        version: u64,
        value: &[u8],
    ) -> Result<()> {
        let before = self.of(name);
        check_higher(what, before.state.as_ref(), version)?;
        check_floor(what, before.floor.as_ref(), |f| f.state, version)?;
        self.file.certs.entry(name.to_owned()).or_default().state = Some(Accepted {
            version,
            digest: digest(value),
            revision: None,
        });
        self.changed = true;
        Ok(())
    }

    /// Accepts the current certificate `value` at `version`, with the serial and dates of its
    /// checked bundle.
    pub(super) fn accept_current(
        &mut self,
        name: &str,
        what: &str,
        version: u64,
        value: &[u8],
        serial: &str,
        not_before: OffsetDateTime,
    ) -> Result<()> {
        let before = self.of(name);
        check_higher(what, before.current.as_ref().map(|c| &c.value), version)?;
        check_floor(what, before.floor.as_ref(), |f| f.current, version)?;
        self.file.certs.entry(name.to_owned()).or_default().current = Some(AcceptedCurrent {
            value: Accepted {
                version,
                digest: digest(value),
                revision: None,
            },
            serial: serial.to_owned(),
            not_before,
        });
        self.changed = true;
        Ok(())
    }

    /// The keys (relative to the prefix) whose values this host accepted at a revision it
    /// knows, with that revision: what a read of the fleet need not read again.
    /// A spec is known while `config` (the digest of this host's configuration of the
    /// certificate, by name) is the one it agreed with.
    pub(super) fn known(&self, config: &BTreeMap<String, String>) -> BTreeMap<String, i64> {
        let mut out = BTreeMap::new();
        for (name, v) in &self.file.certs {
            if let Some(s) = v
                .spec
                .as_ref()
                .filter(|s| config.get(name) == Some(&s.config))
            {
                out.insert(spec_key(name), s.revision);
            }
            if let Some(rev) = v.state.as_ref().and_then(|a| a.revision) {
                out.insert(state_key(name), rev);
            }
            if let Some(rev) = v.current.as_ref().and_then(|c| c.value.revision) {
                out.insert(current_key(name), rev);
            }
        }
        out
    }

    /// After `value` was read at `revision` under `rel` (relative to the prefix): when it is
    /// the very value accepted last for that key (its digest), the revision is kept with it.
    /// Anything else (not accepted, refused, another key) changes nothing.
    pub(super) fn note_read(&mut self, rel: &str, value: &[u8], revision: i64) {
        if revision <= 0 {
            return;
        }
        let (name, is_current) = match Kind::of(rel) {
            Some(Kind::State(name)) => (name, false),
            Some(Kind::Current(name)) => (name, true),
            _ => return,
        };
        let Some(v) = self.file.certs.get_mut(name) else {
            return;
        };
        let accepted = if is_current {
            v.current.as_mut().map(|c| &mut c.value)
        } else {
            v.state.as_mut()
        };
        if let Some(a) = accepted
            && a.revision != Some(revision)
            && a.digest == digest(value)
        {
            a.revision = Some(revision);
            self.changed = true;
        }
    }

    /// After this host wrote the shared record of `name` it accepted last, at `revision`.
    pub(super) fn wrote_state(&mut self, name: &str, revision: i64) {
        if let Some(a) = self.file.certs.get_mut(name).and_then(|v| v.state.as_mut()) {
            a.revision = Some(revision).filter(|r| *r > 0);
            self.changed = true;
        }
    }

    /// After this host wrote the current certificate of `name` it accepted last, at
    /// `revision`.
    pub(super) fn wrote_current(&mut self, name: &str, revision: i64) {
        if let Some(c) = self
            .file
            .certs
            .get_mut(name)
            .and_then(|v| v.current.as_mut())
        {
            c.value.revision = Some(revision).filter(|r| *r > 0);
            self.changed = true;
        }
    }

    /// The version the leader writes next for the shared record of `name`: one more than the
    /// highest of `seen` (what etcd holds) and what this host accepted. Overflow is an error.
    pub(super) fn next_state(&self, name: &str, seen: u64) -> Result<u64> {
        let kept = self.vouched_of(name).state;
        next(name, "shared record", kept.max(seen))
    }

    /// The same for the current certificate.
    pub(super) fn next_current(&self, name: &str, seen: u64) -> Result<u64> {
        let kept = self.vouched_of(name).current;
        next(name, "current certificate", kept.max(seen))
    }

    /// Accepts the tombstone `value` of `name` at `version` (counted with the shared record's
    /// versions, as [`accept_state`](Self::accept_state)).
    pub(super) fn accept_tombstone(
        &mut self,
        name: &str,
        what: &str,
        version: u64,
        value: &[u8],
    ) -> Result<()> {
        self.accept_state(name, what, version, value)?;
        self.file
            .certs
            .entry(name.to_owned())
            .or_default()
            .tombstone = Some(version);
        Ok(())
    }

    /// The versions of `name` this host vouches for: the highest it accepted, or its floor.
    pub(super) fn vouched_of(&self, name: &str) -> Vouched {
        self.file.certs.get(name).map(vouched).unwrap_or_default()
    }

    /// What this host vouches for, by certificate (those with nothing left out).
    pub(super) fn vouched(&self) -> BTreeMap<String, Vouched> {
        self.file
            .certs
            .iter()
            .map(|(name, v)| (name.clone(), vouched(v)))
            .filter(|(_, v)| *v != Vouched::default())
            .collect()
    }

    /// Whether this host has accepted nothing of `name`, and no floor was taken for it yet.
    pub(super) fn needs_floor(&self, name: &str) -> bool {
        self.file
            .certs
            .get(name)
            .is_none_or(|v| v.state.is_none() && v.current.is_none() && v.floor.is_none())
    }

    /// Takes `floor` for `name` (see [`needs_floor`](Self::needs_floor)).
    pub(super) fn set_floor(&mut self, name: &str, floor: Floor) {
        self.file.certs.entry(name.to_owned()).or_default().floor = Some(floor);
        self.changed = true;
    }

    /// The floor taken for `name`, if any.
    pub(super) fn floor_of(&self, name: &str) -> Option<&Floor> {
        self.file.certs.get(name)?.floor.as_ref()
    }

    /// After this host's state directory took `record` (its shared view's digest) as the
    /// shared record of `version` of `name`.
    pub(super) fn hold_state(&mut self, name: &str, version: u64, record: String) {
        let held = Some(Held { version, record });
        let v = self.file.certs.entry(name.to_owned()).or_default();
        if v.held != held {
            v.held = held;
            self.changed = true;
        }
    }

    /// Whether `digest` is that of the manifest entry this host wrote last.
    pub(super) fn manifest_written(&self, digest: &str) -> bool {
        self.file.manifest.as_deref() == Some(digest)
    }

    /// Its manifest entry is to be written again whatever it vouches for (etcd lost it).
    pub(super) fn forget_manifest_written(&mut self) {
        if self.file.manifest.take().is_some() {
            self.changed = true;
        }
    }

    /// After this host wrote its manifest entry of `digest`.
    pub(super) fn wrote_manifest(&mut self, digest: &str) {
        self.file.manifest = Some(digest.to_owned());
        self.changed = true;
    }
}

/// What `v` vouches for: the highest of what was accepted and the floor.
fn vouched(v: &CertVersions) -> Vouched {
    let accepted = Vouched {
        state: v.state.as_ref().map_or(0, |a| a.version),
        current: v.current.as_ref().map_or(0, |c| c.value.version),
        tombstone: v.tombstone.unwrap_or(0),
    };
    v.floor
        .as_ref()
        .map_or(accepted, |f| accepted.max(f.versions))
}

/// Refuses `version` below the floor's (`pick` says which of its versions): an older value
/// than the fleet's hosts vouched for.
fn check_floor(
    what: &str,
    floor: Option<&Floor>,
    pick: impl Fn(&Vouched) -> u64,
    version: u64,
) -> Result<()> {
    if let Some(f) = floor
        && version < pick(&f.versions)
    {
        bail!(
            "{what} holds version {version}, but the fleet's hosts ({}) vouch for version {} \
             in their sealed manifest entries: an older value put back (a replay); refused",
            if f.by.is_empty() {
                "none named".to_owned()
            } else {
                f.by.join(", ")
            },
            pick(&f.versions)
        );
    }
    Ok(())
}

/// The error of a file that does not read as versions: what it holds, why it matters, and the
/// safe way back.
fn damaged(path: &Path, e: &serde_json::Error) -> anyhow::Error {
    anyhow!(
        "{} is damaged ({e}): it holds the highest version of each certificate's shared record \
         and current certificate this host accepted from the fleet, which is how it refuses old \
         values put back into etcd; this host does nothing with the fleet until it reads. To \
         recover: move the file aside (`mv {p} {p}.damaged`) and run again — the host then \
         takes the versions the fleet's sealed manifest vouches for as its floor, so first \
         check with `cert-agent fleet status` that the fleet's current serial is the one you \
         expect (restoring the file from a backup of the state directory keeps what this host \
         accepted itself)",
        path.display(),
        p = path.display()
    )
}

fn seen(accepted: Option<&Accepted>, value: &[u8]) -> Seen {
    match accepted {
        Some(a) if a.digest == digest(value) => Seen::Same,
        _ => Seen::Other,
    }
}

fn check_higher(what: &str, before: Option<&Accepted>, version: u64) -> Result<()> {
    if let Some(b) = before
        && version <= b.version
    {
        bail!(
            "{what} holds version {version}, but this host accepted version {} already: an \
             older value put back (a replay); refused",
            b.version
        );
    }
    Ok(())
}

fn next(name: &str, what: &str, version: u64) -> Result<u64> {
    version.checked_add(1).ok_or_else(|| {
        anyhow!("the {what} of '{name}' is at version {version}, the last there is; refused")
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn versions_only_grow_and_survive_a_restart() {
        let dir = tempfile::tempdir().unwrap();
        let mut v = Versions::load(dir.path()).unwrap();
        assert_eq!(v.seen_state("www", b"a"), Seen::Other);
        v.accept_state("www", "/p/certs/www/state", 2, b"a")
            .unwrap();
        assert_eq!(v.seen_state("www", b"a"), Seen::Same);
        assert_eq!(v.seen_state("www", b"b"), Seen::Other);
        let err = v
            .accept_state("www", "/p/certs/www/state", 2, b"b")
            .unwrap_err()
            .to_string();
        assert!(
            err.contains("/p/certs/www/state") && err.contains("replay"),
            "{err}"
        );
        assert!(v.accept_state("www", "k", 1, b"c").is_err());
        v.accept_current("www", "k", 5, b"x", "AB", OffsetDateTime::UNIX_EPOCH)
            .unwrap();
        v.save().unwrap();
        let v = Versions::load(dir.path()).unwrap();
        assert_eq!(v.seen_current("www", b"x"), Seen::Same);
        assert_eq!(v.next_state("www", 0).unwrap(), 3);
        assert_eq!(v.next_current("www", 9).unwrap(), 10);
        assert!(v.next_state("shop", u64::MAX).is_err(), "no wrap");
        // A retired key is remembered beside the versions.
        let mut v = Versions::load(dir.path()).unwrap();
        assert!(!v.is_retired("ab12"));
        v.retire("ab12");
        v.save().unwrap();
        let v = Versions::load(dir.path()).unwrap();
        assert!(v.is_retired("ab12"));
        assert_eq!(v.seen_current("www", b"x"), Seen::Same);
        assert!(v.rotation_ended("ab12", OffsetDateTime::UNIX_EPOCH));
        use std::os::unix::fs::PermissionsExt;
        let mode = std::fs::metadata(dir.path().join(VERSIONS_FILE))
            .unwrap()
            .permissions()
            .mode();
        assert_eq!(mode & 0o777, 0o600);
    }

    #[test]
    fn a_proof_or_decision_older_than_one_opened_before_is_refused_after_a_restart_too() {
        let dir = tempfile::tempdir().unwrap();
        let mut v = Versions::load(dir.path()).unwrap();
        let key = "hosts/web1/rollout/www";
        assert_eq!(v.accept_rollout(key, 100), Ok(()));
        assert_eq!(v.accept_rollout(key, 100), Ok(()), "the same value again");
        assert_eq!(v.accept_rollout(key, 99), Err(100));
        assert_eq!(v.accept_rollout("hosts/web2/rollout/www", 5), Ok(()));
        v.save().unwrap();
        let mut v = Versions::load(dir.path()).unwrap();
        assert_eq!(v.accept_rollout(key, 50), Err(100));
        assert_eq!(v.accept_rollout(key, 101), Ok(()));
        assert_eq!(v.accept_rollout(key, 100), Err(101));
    }

    #[test]
    fn an_intermediate_older_than_one_opened_before_is_refused_after_a_restart_too() {
        let dir = tempfile::tempdir().unwrap();
        let mut v = Versions::load(dir.path()).unwrap();
        let (a, b) = ("a".repeat(64), "b".repeat(64));
        assert_eq!(v.accept_chain(&a, 1), Ok(()));
        assert_eq!(v.accept_chain(&a, 1), Ok(()), "the same value again");
        assert_eq!(v.accept_chain(&a, 7), Ok(()));
        assert_eq!(v.accept_chain(&b, 1), Ok(()), "another hash: its own floor");
        assert!(!v.chains_migrated());
        v.set_chains_migrated(true);
        v.save().unwrap();
        let mut v = Versions::load(dir.path()).unwrap();
        assert_eq!(v.accept_chain(&a, 1), Err(7));
        assert!(v.chains_migrated());
    }

    #[test]
    fn a_rotation_ends_after_its_grace_period_from_the_recorded_start_after_a_restart_too() {
        let dir = tempfile::tempdir().unwrap();
        let start = OffsetDateTime::UNIX_EPOCH + time::Duration::days(20_000);
        let mut v = Versions::load(dir.path()).unwrap();
        assert!(!v.rotation_ended("ab12", start), "nothing recorded");
        assert_eq!(v.rotating_since("ab12", start), start);
        v.save().unwrap();
        // A restart, later: the start is the recorded one, not the time asked again.
        let mut v = Versions::load(dir.path()).unwrap();
        let later = start + time::Duration::hours(3);
        assert_eq!(v.rotating_since("ab12", later), start);
        assert!(!v.rotation_ended("ab12", later));
        let just_before = start + ROTATION_GRACE - time::Duration::seconds(1);
        assert!(!v.rotation_ended("ab12", just_before));
        assert!(v.rotation_ended("ab12", start + ROTATION_GRACE));
        assert!(
            !v.rotation_ended("cd34", start + ROTATION_GRACE),
            "another key"
        );
        // A start near the end of time never overflows: the grace never ends by time then.
        let mut far = Versions::load(dir.path()).unwrap();
        far.rotating_since("ef56", time::PrimitiveDateTime::MAX.assume_utc());
        assert!(!far.rotation_ended("ef56", time::PrimitiveDateTime::MAX.assume_utc()));
        // The instance id: made once, kept.
        let id = Versions::load(dir.path()).unwrap().instance().unwrap();
        assert_eq!(id.len(), 32);
        std::fs::remove_file(dir.path().join(VERSIONS_FILE)).unwrap();
        assert_eq!(Versions::load(dir.path()).unwrap().instance().unwrap(), id);
        let other = tempfile::tempdir().unwrap();
        assert_ne!(
            Versions::load(other.path()).unwrap().instance().unwrap(),
            id
        );
        // A damaged id file: a new id.
        std::fs::write(dir.path().join(INSTANCE_FILE), "garbage").unwrap();
        let new = Versions::load(dir.path()).unwrap().instance().unwrap();
        assert!(new != id && new.len() == 32);
        // A damaged start is a damaged file, named.
        let bad = br#"{"@rotating_since":{"ab12":"yesterday"}}"#;
        let err = Versions::parse(dir.path().join(VERSIONS_FILE), bad).unwrap_err();
        assert!(err.to_string().contains(VERSIONS_FILE), "{err}");
    }

    #[test]
    fn a_crash_before_the_write_leaves_only_what_was_written_accepted() {
        let dir = tempfile::tempdir().unwrap();
        let mut v = Versions::load(dir.path()).unwrap();
        v.accept_current("www", "k", 1, b"one", "01", OffsetDateTime::UNIX_EPOCH)
            .unwrap();
        v.accept_state("www", "s", 4, b"four").unwrap();
        v.save().unwrap();
        // A run accepts what it published (after each write to etcd) and dies before the file
        // is written again.
        v.accept_current("www", "k", 2, b"two", "02", OffsetDateTime::UNIX_EPOCH)
            .unwrap();
        v.accept_state("www", "s", 5, b"five").unwrap();
        drop(v);
        let mut v = Versions::load(dir.path()).unwrap();
        // What the file held stands; what was published meanwhile is new, at a higher version.
        assert_eq!(v.seen_current("www", b"one"), Seen::Same);
        assert_eq!(v.seen_current("www", b"two"), Seen::Other);
        assert_eq!(v.seen_state("www", b"five"), Seen::Other);
        // Another value at a version already accepted, or lower, is refused (a replay or a
        // forgery of the crashed run's).
        assert!(
            v.accept_current("www", "k", 1, b"forged", "03", OffsetDateTime::UNIX_EPOCH)
                .is_err()
        );
        assert!(v.accept_state("www", "s", 4, b"forged").is_err());
        assert!(v.accept_state("www", "s", 3, b"three").is_err());
        // The published values are accepted when read back; the next versions follow them.
        v.accept_current("www", "k", 2, b"two", "02", OffsetDateTime::UNIX_EPOCH)
            .unwrap();
        v.accept_state("www", "s", 5, b"five").unwrap();
        assert_eq!(v.next_current("www", 0).unwrap(), 3);
        assert_eq!(v.next_state("www", 0).unwrap(), 6);
        v.save().unwrap();
        let v = Versions::load(dir.path()).unwrap();
        assert_eq!(v.seen_current("www", b"two"), Seen::Same);
        assert_eq!(v.seen_state("www", b"five"), Seen::Same);
    }

    #[test]
    fn revisions_are_kept_only_with_the_very_value_accepted() {
        let dir = tempfile::tempdir().unwrap();
        let mut v = Versions::load(dir.path()).unwrap();
        let none = BTreeMap::new();
        // Nothing accepted: nothing known, whatever is read.
        v.note_read("certs/www/state", b"s1", 10);
        assert!(v.known(&none).is_empty());
        v.accept_state("www", "k", 1, b"s1").unwrap();
        v.accept_current("www", "k", 1, b"c1", "01", OffsetDateTime::UNIX_EPOCH)
            .unwrap();
        assert!(v.known(&none).is_empty(), "accepted, revision not seen yet");
        // Another value (a forgery, a replay) at a revision: not kept.
        v.note_read("certs/www/state", b"forged", 11);
        v.note_read("certs/www/current", b"c0", 12);
        // Garbage revisions and keys: nothing.
        v.note_read("certs/www/state", b"s1", 0);
        v.note_read("certs/www/state", b"s1", -3);
        v.note_read("certs/www/spec", b"s1", 13);
        v.note_read("certs/shop/state", b"s1", 14);
        v.note_read("nonsense", b"s1", 15);
        assert!(v.known(&none).is_empty());
        // The accepted values, read at their revisions.
        v.note_read("certs/www/state", b"s1", 20);
        v.note_read("certs/www/current", b"c1", 21);
        let known = v.known(&none);
        assert_eq!(known.get("certs/www/state"), Some(&20));
        assert_eq!(known.get("certs/www/current"), Some(&21));
        assert_eq!(known.len(), 2);
        v.save().unwrap();
        // Kept in the file; a newer accepted value forgets the revision until it is read.
        let mut v = Versions::load(dir.path()).unwrap();
        assert_eq!(v.known(&none).len(), 2);
        v.accept_state("www", "k", 2, b"s2").unwrap();
        assert_eq!(v.known(&none).get("certs/www/state"), None);
        v.wrote_state("www", 30);
        assert_eq!(v.known(&none).get("certs/www/state"), Some(&30));
        v.accept_current("www", "k", 2, b"c2", "02", OffsetDateTime::UNIX_EPOCH)
            .unwrap();
        v.wrote_current("www", 31);
        assert_eq!(v.known(&none).get("certs/www/current"), Some(&31));
        // A spec is known only while the configuration is the one it agreed with.
        v.agreed_spec("www", 5, "cfg-a");
        v.agreed_spec("shop", 0, "cfg-a");
        let cfg = |d: &str| BTreeMap::from([("www".to_owned(), d.to_owned())]);
        assert_eq!(v.known(&cfg("cfg-a")).get("certs/www/spec"), Some(&5));
        assert_eq!(v.known(&cfg("cfg-b")).get("certs/www/spec"), None);
        assert_eq!(v.known(&none).get("certs/www/spec"), None);
        // An import: skipped only at the same revision with the record as it left it.
        v.imported("www", 40, "rec-a");
        v.imported("shop", -1, "rec-a");
        assert!(v.import_changes_nothing("www", 40, "rec-a"));
        assert!(!v.import_changes_nothing("www", 41, "rec-a"));
        assert!(!v.import_changes_nothing("www", 40, "rec-b"));
        assert!(!v.import_changes_nothing("shop", -1, "rec-a"));
        assert!(!v.import_changes_nothing("other", 40, "rec-a"));
        // A retired key: every value read again.
        v.retire("ab12");
        assert!(v.known(&cfg("cfg-a")).is_empty());
        assert!(!v.import_changes_nothing("www", 40, "rec-a"));
    }

    #[test]
    fn a_floor_refuses_what_is_below_it_and_the_leader_writes_above_it() {
        let dir = tempfile::tempdir().unwrap();
        let mut v = Versions::load(dir.path()).unwrap();
        assert!(v.needs_floor("www"));
        v.agreed_spec("www", 3, "cfg");
        assert!(v.needs_floor("www"), "a spec agreed is nothing accepted");
        let floor = Floor {
            versions: Vouched {
                state: 5,
                current: 2,
                tombstone: 0,
            },
            by: vec!["web2".into()],
        };
        v.set_floor("www", floor.clone());
        assert!(!v.needs_floor("www"));
        // Below the floor: a replay, naming who vouched; at it and above: taken.
        let err = v
            .accept_current(
                "www",
                "/p/certs/www/current",
                1,
                b"c1",
                "01",
                OffsetDateTime::UNIX_EPOCH,
            )
            .unwrap_err()
            .to_string();
        assert!(
            err.contains("/p/certs/www/current")
                && err.contains("replay")
                && err.contains("web2")
                && err.contains("version 2"),
            "{err}"
        );
        assert!(v.accept_state("www", "k", 4, b"s4").is_err());
        assert!(v.accept_tombstone("www", "k", 3, b"t3").is_err());
        v.accept_current("www", "k", 2, b"c2", "02", OffsetDateTime::UNIX_EPOCH)
            .unwrap();
        v.accept_state("www", "k", 5, b"s5").unwrap();
        assert_eq!(v.next_state("shop", 0).unwrap(), 1);
        v.save().unwrap();
        // Kept in the file, and vouched for with what was accepted.
        let mut v = Versions::load(dir.path()).unwrap();
        assert_eq!(v.floor_of("www"), Some(&floor));
        assert_eq!(v.vouched_of("www"), floor.versions);
        assert!(v.vouched_of("www").live());
        // A floor alone is vouched for too, and the leader writes above it.
        v.set_floor(
            "shop",
            Floor {
                versions: Vouched {
                    state: 9,
                    current: 4,
                    tombstone: 9,
                },
                by: Vec::new(),
            },
        );
        assert_eq!(v.next_state("shop", 0).unwrap(), 10);
        assert_eq!(v.next_current("shop", 0).unwrap(), 5);
        assert!(!v.vouched_of("shop").live(), "retired");
        let all = v.vouched();
        assert_eq!(all.len(), 2);
        assert_eq!(all["shop"].tombstone, 9);
        // A tombstone accepted counts with the shared record's versions.
        v.accept_tombstone("www", "k", 6, b"t6").unwrap();
        assert!(!v.vouched_of("www").live());
        assert_eq!(v.next_state("www", 0).unwrap(), 7);
        // What was written last is remembered by its digest.
        assert!(!v.manifest_written("d1"));
        v.wrote_manifest("d1");
        v.save().unwrap();
        assert!(Versions::load(dir.path()).unwrap().manifest_written("d1"));
    }

    #[test]
    fn a_damaged_file_is_named_with_what_it_holds_and_how_to_recover() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join(VERSIONS_FILE);
        for bad in [&b"{\"www\": {\"state\": 7}}"[..], b"\x00\xff", b"{"] {
            std::fs::write(&path, bad).unwrap();
            let err = format!("{:#}", Versions::load(dir.path()).unwrap_err());
            assert!(err.contains(&path.display().to_string()), "{err}");
            assert!(err.contains("damaged"), "{err}");
            assert!(err.contains("highest version"), "{err}");
            assert!(err.contains(&format!("mv {}", path.display())), "{err}");
            assert!(err.contains("fleet status"), "{err}");
        }
    }
}
