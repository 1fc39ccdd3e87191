//! The envelope every value under the fleet's prefix travels in: AES-256-GCM under the fleet
//! key, with associated data that binds what the value is for (a purpose label), where it
//! lives (its key under the prefix), which certificate it belongs to and its version. A value
//! moved to another key, certificate or purpose, or altered, or written by anyone without the
//! fleet key, does not open.
//!
//! Layout: one header byte (the key id, 1 for now: room for rotation), the version (8 bytes,
//! big-endian), then the nonce, the ciphertext and the tag. The header and the version are in
//! the associated data too.

use anyhow::{Result, anyhow};
use serde::Serialize;
use serde::de::DeserializeOwned;

use super::coord::Fleet;
use super::key::FleetKey;

/// The id of the fleet key values are sealed with.
pub(super) const KEY_ID: u8 = 1;

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
    Dcv,
    HostResult,
    HostSeen,
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
            Self::Dcv => "validation-file",
            Self::HostResult => "host-result",
            Self::HostSeen => "host-seen",
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

/// Seals `plain` for `place` at `version`.
pub(super) fn seal(
    key: &FleetKey,
    place: &Place<'_>,
    version: u64,
    plain: &[u8],
) -> Result<Vec<u8>> {
    let body = key.seal_with(&aad(place, version, KEY_ID), plain)?;
    let mut out = Vec::with_capacity(HEADER_LEN + body.len());
    out.push(KEY_ID);
    out.extend_from_slice(&version.to_be_bytes());
    out.extend_from_slice(&body);
    Ok(out)
}

/// Opens a value sealed for `place`: its version and plain text. The error names the etcd
/// key and never quotes the value.
pub(super) fn open(
    key: &FleetKey,
    fleet: &Fleet,
    place: &Place<'_>,
    sealed: &[u8],
) -> Result<(u64, Vec<u8>)> {
    open_raw(key, place, sealed).map_err(|why| {
        anyhow!(
            "the fleet's {} {} {why}; refused (a value written without the fleet key, moved \
             from another key or certificate, or altered)",
            place.purpose.label(),
            fleet.key(place.rel)
        )
    })
}

/// [`open`] without the words: why it does not open.
fn open_raw(key: &FleetKey, place: &Place<'_>, sealed: &[u8]) -> Result<(u64, Vec<u8>), String> {
    let (Some(&key_id), Some(version)) = (
        sealed.first(),
        sealed
            .get(1..HEADER_LEN)
            .and_then(|b| <[u8; 8]>::try_from(b).ok()),
    ) else {
        return Err("is not a sealed value".into());
    };
    if key_id != KEY_ID {
        return Err(format!(
            "is not a sealed value of this fleet's key (key id {key_id}, not {KEY_ID})"
        ));
    }
    let version = u64::from_be_bytes(version);
    let body = sealed.get(HEADER_LEN..).unwrap_or_default();
    let plain = key
        .open_with(&aad(place, version, key_id), body)
        .ok_or_else(|| "does not open with this host's fleet key".to_owned())?;
    Ok((version, plain))
}

/// [`seal`] of a document's JSON.
pub(super) fn seal_json<T: Serialize>(
    key: &FleetKey,
    place: &Place<'_>,
    version: u64,
    doc: &T,
) -> Result<Vec<u8>> {
    seal(key, place, version, &serde_json::to_vec(doc)?)
}

/// [`open`] of a document's JSON.
pub(super) fn open_json<T: DeserializeOwned>(
    key: &FleetKey,
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
    use super::*;

    fn key(byte: u8) -> FleetKey {
        FleetKey::from_bytes(&[byte; super::super::key::KEY_LEN]).unwrap()
    }

    fn opens(k: &FleetKey, place: &Place<'_>, sealed: &[u8]) -> Option<(u64, Vec<u8>)> {
        open_raw(k, place, sealed).ok()
    }

    #[test]
    fn a_value_opens_only_for_its_purpose_key_name_and_version() {
        let place = Place::new(Purpose::PendingKey, "certs/www/state", "www");
        let sealed = seal(&key(1), &place, 3, b"secret").unwrap();
        assert_eq!(sealed[0], KEY_ID);
        assert_eq!(
            opens(&key(1), &place, &sealed),
            Some((3, b"secret".to_vec()))
        );
        for other in [
            Place::new(Purpose::CurrentKey, "certs/www/state", "www"),
            Place::new(Purpose::PendingKey, "certs/shop/state", "www"),
            Place::new(Purpose::PendingKey, "certs/www/state", "shop"),
        ] {
            assert!(opens(&key(1), &other, &sealed).is_none(), "{other:?}");
        }
        assert!(opens(&key(2), &place, &sealed).is_none());
        // Another version written into the header: does not open.
        let mut moved = sealed.clone();
        moved[8] ^= 1;
        assert!(opens(&key(1), &place, &moved).is_none());
        assert!(opens(&key(1), &place, &sealed[..10]).is_none());
        assert!(opens(&key(1), &place, b"{\"record\":{}}").is_none());
        let mut other_id = sealed.clone();
        other_id[0] = 2;
        assert!(
            open_raw(&key(1), &place, &other_id)
                .unwrap_err()
                .contains("key id 2")
        );
    }
}
