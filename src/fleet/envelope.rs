//! The envelope every value under the fleet's prefix travels in: AES-256-GCM under the fleet
//! key, with associated data that binds what the value is for (a purpose label), where it
//! lives (its key under the prefix), which certificate it belongs to and its version. A value
//! moved to another key, certificate or purpose, or altered, or written by anyone without the
//! fleet key, does not open.
//!
//! Layout: one header byte (the id of the key that sealed it, [`super::key`]), the version
//! (8 bytes, big-endian), then the nonce, the ciphertext and the tag. The header and the
//! version are in the associated data too. A value is sealed under the host's current key
//! and opens under any key the host holds whose id it names (the current one, and the
//! previous one while the fleet rotates).

use anyhow::{Result, anyhow};
use serde::Serialize;
use serde::de::DeserializeOwned;

use super::coord::Fleet;
use super::key::{FleetKeys, Which};

const HEADER_LEN: usize = 1 + 8;

/// What a sealed value is for: each kind of document its own label, so that none opens as
/// another.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Purpose {
    KeyCheck,
    Spec,
    State,
    PendingKey,
    Current,
    CurrentKey,
    Retired,
    Dcv,
    HostResult,
    HostSeen,
    Unplaced,
    Manifest,
    AcmeAccount,
    AcmeAccountKey,
    DcvServed,
    Proof,
    RolloutDecision,
    ChainCert,
}

impl Purpose {
    fn label(self) -> &'static str {
        match self {
            Self::KeyCheck => "key-check",
            Self::Spec => "spec",
            Self::State => "shared-record",
            Self::PendingKey => "pending-key",
            Self::Current => "current-certificate",
            Self::CurrentKey => "current-key",
            Self::Retired => "retired",
            Self::Dcv => "validation-file",
            Self::HostResult => "host-result",
            Self::HostSeen => "host-seen",
            Self::Unplaced => "order-not-placed",
            Self::Manifest => "manifest-entry",
            Self::AcmeAccount => "acme-account",
            Self::AcmeAccountKey => "acme-account-key",
            Self::DcvServed => "validation-served",
            Self::Proof => "host-proof",
            Self::RolloutDecision => "rollout-decision",
            Self::ChainCert => "chain-certificate",
        }
    }
}

/// Where a value belongs: its purpose, its key under the prefix and its certificate (empty
/// for values that belong to none).
#[derive(Debug, Clone, Copy)]
pub(super) struct Place<'a> {
    pub(super) purpose: Purpose,
    pub(super) rel: &'a str,
    pub(super) name: &'a str,
}

impl<'a> Place<'a> {
    pub(super) fn new(purpose: Purpose, rel: &'a str, name: &'a str) -> Self {
        Self { purpose, rel, name }
    }
}

/// The associated data: label, key, name (none holds a NUL), version, key id.
fn aad(place: &Place<'_>, version: u64, key_id: u8) -> Vec<u8> {
    format!(
        "cert-agent fleet\0{}\0{}\0{}\0{version}\0{key_id}",
        place.purpose.label(),
        place.rel,
        place.name
    )
    .into_bytes()
}

/// Seals `plain` for `place` at `version`, under the current key.
pub(super) fn seal(
    keys: &FleetKeys,
    place: &Place<'_>,
    version: u64,
    plain: &[u8],
) -> Result<Vec<u8>> {
    let key = keys.current();
    let body = key.seal_with(&aad(place, version, key.id()), plain)?;
    let mut out = Vec::with_capacity(HEADER_LEN + body.len());
    out.push(key.id());
    out.extend_from_slice(&version.to_be_bytes());
    out.extend_from_slice(&body);
    Ok(out)
}

/// Opens a value sealed for `place`: its version and plain text. The error names the etcd
/// key and never quotes the value.
pub(super) fn open(
    keys: &FleetKeys,
    fleet: &Fleet,
    place: &Place<'_>,
    sealed: &[u8],
) -> Result<(u64, Vec<u8>)> {
    open_which(keys, fleet, place, sealed).map(|(version, plain, _)| (version, plain))
}

/// [`open`], also saying which of the host's keys opened it.
pub(super) fn open_which(
    keys: &FleetKeys,
    fleet: &Fleet,
    place: &Place<'_>,
    sealed: &[u8],
) -> Result<(u64, Vec<u8>, Which)> {
    open_raw(keys, place, sealed).map_err(|why| {
        anyhow!(
            "the fleet's {} {} {why}; refused (a value written without the fleet key, moved \
             from another key or certificate, or altered)",
            place.purpose.label(),
            fleet.key(place.rel)
        )
    })
}

/// [`open`] without the words: why it does not open.
pub(super) fn open_raw(
    keys: &FleetKeys,
    place: &Place<'_>,
    sealed: &[u8],
) -> Result<(u64, Vec<u8>, Which), String> {
    let (Some(&key_id), Some(version)) = (
        sealed.first(),
        sealed
            .get(1..HEADER_LEN)
            .and_then(|b| <[u8; 8]>::try_from(b).ok()),
    ) else {
        return Err("is not a sealed value".into());
    };
    let version = u64::from_be_bytes(version);
    let body = sealed.get(HEADER_LEN..).unwrap_or_default();
    let mut tried = false;
    for (which, key) in keys.with_id(key_id) {
        tried = true;
        if let Some(plain) = key.open_with(&aad(place, version, key_id), body) {
            return Ok((version, plain, which));
        }
    }
    if tried {
        Err("does not open with this host's fleet key".to_owned())
    } else if keys.retired_with_id(key_id) {
        Err(format!(
            "is sealed under this host's previous fleet key (id {key_id}), which the fleet no \
             longer uses: its key check is under the current key, so the rotation is complete \
             and this is an old value put back or left behind (remove previous_secret_file)"
        ))
    } else {
        Err(format!(
            "is not a sealed value of a key this host holds (it names fleet key id {key_id}; \
             this host holds id {})",
            keys.ids()
        ))
    }
}

/// [`seal`] of a document's JSON.
pub(super) fn seal_json<T: Serialize>(
    key: &FleetKeys,
    place: &Place<'_>,
    version: u64,
    doc: &T,
) -> Result<Vec<u8>> {
    seal(key, place, version, &serde_json::to_vec(doc)?)
}

/// [`seal`] of a document's JSON without the entries its reader fills in by itself
/// ([`super::compact`]): for the shared records, one per certificate, whose defaults are a
/// third of their JSON. (The hosts' results and proofs have none to leave out; a host
/// writes thousands of them when it joins.)
pub(super) fn seal_json_lean<T: Serialize + DeserializeOwned>(
    key: &FleetKeys,
    place: &Place<'_>,
    version: u64,
    doc: &T,
) -> Result<Vec<u8>> {
    seal(key, place, version, &super::compact::to_vec(doc)?)
}

/// [`open`] of a document's JSON.
pub(super) fn open_json<T: DeserializeOwned>(
    key: &FleetKeys,
    fleet: &Fleet,
    place: &Place<'_>,
    sealed: &[u8],
) -> Result<(u64, T)> {
    let (version, plain) = open(key, fleet, place, sealed)?;
    let doc = serde_json::from_slice(&plain).map_err(|e| {
        anyhow!(
            "the fleet's {} {} opens but is not a valid document: {e}",
            place.purpose.label(),
            fleet.key(place.rel)
        )
    })?;
    Ok((version, doc))
}

#[cfg(test)]
mod tests {
    use super::super::key::FleetKey;
    use super::*;

    fn key(byte: u8) -> FleetKey {
        FleetKey::from_bytes(&[byte; super::super::key::KEY_LEN]).unwrap()
    }

    fn one(byte: u8) -> FleetKeys {
        FleetKeys::new(key(byte), None)
    }

    fn opens(k: &FleetKeys, place: &Place<'_>, sealed: &[u8]) -> Option<(u64, Vec<u8>)> {
        open_raw(k, place, sealed).ok().map(|(v, p, _)| (v, p))
    }

    /// Two keys of distinct ids (the old one, the new one).
    fn two() -> (u8, u8) {
        (2u8..=255)
            .find(|n| key(1).id() != key(*n).id())
            .map(|n| (1, n))
            .unwrap()
    }

    #[test]
    fn a_value_opens_only_for_its_purpose_key_name_and_version() {
        let place = Place::new(Purpose::PendingKey, "certs/www/state", "www");
        let sealed = seal(&one(1), &place, 3, b"secret").unwrap();
        assert_eq!(sealed[0], key(1).id());
        assert_eq!(
            opens(&one(1), &place, &sealed),
            Some((3, b"secret".to_vec()))
        );
        for other in [
            Place::new(Purpose::CurrentKey, "certs/www/state", "www"),
            Place::new(Purpose::PendingKey, "certs/shop/state", "www"),
            Place::new(Purpose::PendingKey, "certs/www/state", "shop"),
        ] {
            assert!(opens(&one(1), &other, &sealed).is_none(), "{other:?}");
        }
        assert!(opens(&one(2), &place, &sealed).is_none());
        // Another version written into the header: does not open.
        let mut moved = sealed.clone();
        moved[8] ^= 1;
        assert!(opens(&one(1), &place, &moved).is_none());
        assert!(opens(&one(1), &place, &sealed[..10]).is_none());
        assert!(opens(&one(1), &place, b"{\"record\":{}}").is_none());
        // Another key id written into the header: not this host's key, or not the id bound
        // by the associated data.
        let mut other_id = sealed.clone();
        other_id[0] = key(1).id().wrapping_add(1);
        let err = open_raw(&one(1), &place, &other_id).unwrap_err();
        assert!(err.contains(&format!("key id {}", other_id[0])), "{err}");
    }

    #[test]
    fn with_two_keys_both_open_and_only_the_current_one_seals() {
        let (old, new) = two();
        let place = Place::new(Purpose::State, "certs/www/state", "www");
        let under_old = seal(&one(old), &place, 4, b"record").unwrap();
        let rotating = FleetKeys::new(key(new), Some(key(old)));
        // Sealed under the old key: opens with the old key kept as previous.
        let (v, plain, which) = open_raw(&rotating, &place, &under_old).unwrap();
        assert_eq!(
            (v, plain.as_slice(), which),
            (4, &b"record"[..], Which::Previous)
        );
        // Sealed now: under the new key, with its id.
        let under_new = seal(&rotating, &place, 5, b"record").unwrap();
        assert_eq!(under_new[0], key(new).id());
        let (_, _, which) = open_raw(&rotating, &place, &under_new).unwrap();
        assert_eq!(which, Which::Current);
        // A host that has only the new key: the old value is refused, naming its key id.
        let err = open_raw(&one(new), &place, &under_old).unwrap_err();
        assert!(err.contains(&format!("key id {}", key(old).id())), "{err}");
        assert!(
            err.contains("not a sealed value of a key this host holds"),
            "{err}"
        );
        // A host that has only the old key cannot open what the new one sealed.
        assert!(opens(&one(old), &place, &under_new).is_none());
        // The key id is bound: the old value relabelled with the new id does not open.
        let mut relabelled = under_old.clone();
        relabelled[0] = key(new).id();
        assert!(opens(&rotating, &place, &relabelled).is_none());
        // The rotation complete: the previous key opens nothing, and says why.
        let retired = FleetKeys::new(key(new), Some(key(old)));
        assert!(retired.retire_previous());
        assert!(!retired.retire_previous(), "once");
        let err = open_raw(&retired, &place, &under_old).unwrap_err();
        assert!(
            err.contains("previous fleet key") && err.contains("rotation is complete"),
            "{err}"
        );
        assert!(opens(&retired, &place, &under_new).is_some());
        // Two keys of one id: both are tried.
        let same = (2u8..=255).find(|n| key(*n).id() == key(1).id() && *n != 1);
        if let Some(n) = same {
            let both = FleetKeys::new(key(n), Some(key(1)));
            assert!(opens(&both, &place, &under_old).is_some());
        }
    }
}
