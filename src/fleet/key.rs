//! The fleet key: 32 random bytes shared by every host of a fleet (a file of mode 0600, or a
//! systemd credential), under which every value the fleet stores in etcd is sealed.
//! Sealing is AES-256-GCM from the TLS stack's provider (aws-lc-rs), with a random 96-bit
//! nonce per seal; what the associated data binds is the envelope's ([`super::envelope`]).
//!
//! Each key has an id of one byte, derived from the key itself: the first byte of
//! HMAC-SHA256 under the key of a fixed label. Nothing is stored or configured for it; it
//! names, in each envelope, the key that sealed it, so that a host holding two keys (the
//! current one and, while the fleet rotates, the previous one: [`FleetKeys`]) tries the right
//! one. Two keys may share an id (one chance in 256): a host then tries both. The id says
//! nothing about the key (one byte of a pseudo-random function's output).

use std::path::Path;

use aws_lc_rs::aead::{AES_256_GCM, Aad, LessSafeKey, NONCE_LEN, Nonce, UnboundKey};
use aws_lc_rs::hmac;

/// The label whose HMAC under a key gives the key's id.
const ID_LABEL: &[u8] = b"cert-agent fleet key id";

/// The label whose HMAC under a key gives the key's fingerprint (kept in the state directory
/// to name a retired key; says nothing about the key).
const FINGERPRINT_LABEL: &[u8] = b"cert-agent fleet key fingerprint";

/// Length of the fleet key in bytes.
pub(crate) const KEY_LEN: usize = 32;

/// Why a fleet key could not be read, or a sealed value not opened.
#[derive(Debug, thiserror::Error)]
pub(crate) enum KeyError {
    #[error("the fleet key {path}: {reason}")]
    Unreadable { path: String, reason: String },
    #[error("the system's random source failed")]
    Random,
}

/// The fleet key. Its bytes never appear in `Debug` output.
pub(crate) struct FleetKey {
    key: LessSafeKey,
    id: u8,
    fingerprint: String,
}

impl std::fmt::Debug for FleetKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("FleetKey(..)")
    }
}

impl FleetKey {
    /// A key from its 32 bytes.
    pub(crate) fn from_bytes(bytes: &[u8]) -> Option<Self> {
        if bytes.len() != KEY_LEN {
            return None;
        }
        let key = UnboundKey::new(&AES_256_GCM, bytes).ok()?;
        let tag = hmac::sign(&hmac::Key::new(hmac::HMAC_SHA256, bytes), ID_LABEL);
        let id = tag.as_ref().first().copied()?;
        let print = hmac::sign(&hmac::Key::new(hmac::HMAC_SHA256, bytes), FINGERPRINT_LABEL);
        Some(Self {
            key: LessSafeKey::new(key),
            id,
            fingerprint: hex::encode(print.as_ref().get(..16)?),
        })
    }

    /// The key's id: the first byte of HMAC-SHA256 under the key of a fixed label.
    pub(crate) fn id(&self) -> u8 {
        self.id
    }

    /// The key's fingerprint: 16 bytes of HMAC-SHA256 under the key of a fixed label (hex).
    pub(super) fn fingerprint(&self) -> &str {
        &self.fingerprint
    }

    /// Reads the key from `path`: exactly 32 bytes, not readable by group or others.
    pub(crate) fn read(path: &Path) -> Result<Self, KeyError> {
        use std::os::unix::fs::PermissionsExt;
        let bad = |reason: String| KeyError::Unreadable {
            path: path.display().to_string(),
            reason,
        };
        let meta = std::fs::metadata(path).map_err(|e| bad(crate::fsutil::io_text(&e)))?;
        let mode = meta.permissions().mode() & 0o777;
        if mode & 0o077 != 0 {
            return Err(bad(format!(
                "mode {mode:04o} lets others read it; make it 0600 (chmod 600)"
            )));
        }
        let bytes = std::fs::read(path).map_err(|e| bad(crate::fsutil::io_text(&e)))?;
        Self::from_bytes(&bytes).ok_or_else(|| {
            bad(format!(
                "holds {} bytes, not the {KEY_LEN} random bytes of a fleet key (make one with \
                 `head -c 32 /dev/urandom > FILE`)",
                bytes.len()
            ))
        })
    }

    /// Seals `plain` with the associated data `aad`: nonce, then ciphertext and tag. The
    /// envelope ([`super::envelope`]) decides what the associated data binds.
    pub(super) fn seal_with(&self, aad: &[u8], plain: &[u8]) -> Result<Vec<u8>, KeyError> {
        let mut nonce = [0u8; NONCE_LEN];
        aws_lc_rs::rand::fill(&mut nonce).map_err(|_| KeyError::Random)?;
        let mut data = plain.to_vec();
        self.key
            .seal_in_place_append_tag(
                Nonce::assume_unique_for_key(nonce),
                Aad::from(aad),
                &mut data,
            )
            .map_err(|_| KeyError::Random)?;
        let mut out = Vec::with_capacity(NONCE_LEN + data.len());
        out.extend_from_slice(&nonce);
        out.extend_from_slice(&data);
        Ok(out)
    }

    /// Opens what [`seal_with`](Self::seal_with) made with the same associated data; `None`
    /// when it does not open (another key, other associated data, altered or cut short).
    pub(super) fn open_with(&self, aad: &[u8], sealed: &[u8]) -> Option<Vec<u8>> {
        if sealed.len() < NONCE_LEN {
            return None;
        }
        let (nonce, rest) = sealed.split_at(NONCE_LEN);
        let nonce = Nonce::try_assume_unique_for_key(nonce).ok()?;
        let mut data = rest.to_vec();
        let plain = self
            .key
            .open_in_place(nonce, Aad::from(aad), &mut data)
            .ok()?;
        Some(plain.to_vec())
    }
}

/// Which of a host's fleet keys opened a value.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Which {
    /// `secret_file`: the key everything is sealed with.
    Current,
    /// `previous_secret_file`: kept for reading while the fleet rotates its key.
    Previous,
}

/// A host's fleet keys: the current one, which seals everything, and while the fleet
/// rotates its key the previous one, which only opens.
#[derive(Debug)]
pub(crate) struct FleetKeys {
    current: FleetKey,
    previous: Option<FleetKey>,
    /// Set once the fleet's key check is seen under the current key (the rotation is
    /// complete): the previous key opens nothing any more.
    retired: std::sync::atomic::AtomicBool,
}

impl FleetKeys {
    pub(crate) fn new(current: FleetKey, previous: Option<FleetKey>) -> Self {
        Self {
            current,
            previous,
            retired: std::sync::atomic::AtomicBool::new(false),
        }
    }

    /// The previous key opens nothing from now on (the fleet finished rotating); `true` when
    /// it was in use until now.
    pub(super) fn retire_previous(&self) -> bool {
        self.previous.is_some() && !self.retired.swap(true, std::sync::atomic::Ordering::SeqCst)
    }

    /// Whether the previous key is retired and has the id `id`.
    pub(super) fn retired_with_id(&self, id: u8) -> bool {
        self.retired.load(std::sync::atomic::Ordering::SeqCst)
            && self.previous.as_ref().is_some_and(|k| k.id == id)
    }

    /// The key every value is sealed with.
    pub(crate) fn current(&self) -> &FleetKey {
        &self.current
    }

    /// The key kept for reading, if any.
    pub(crate) fn previous(&self) -> Option<&FleetKey> {
        self.previous.as_ref()
    }

    /// The id of the previous key while it still opens values (held, not retired).
    pub(super) fn previous_in_use(&self) -> Option<u8> {
        let retired = self.retired.load(std::sync::atomic::Ordering::SeqCst);
        self.previous.as_ref().filter(|_| !retired).map(|k| k.id)
    }

    /// The keys whose id is `id`, the current one first.
    pub(super) fn with_id(&self, id: u8) -> impl Iterator<Item = (Which, &FleetKey)> {
        let retired = self.retired.load(std::sync::atomic::Ordering::SeqCst);
        std::iter::once((Which::Current, &self.current))
            .chain(
                self.previous
                    .iter()
                    .filter(move |_| !retired)
                    .map(|k| (Which::Previous, k)),
            )
            .filter(move |(_, k)| k.id == id)
    }

    /// The ids this host holds, in words: `12 (current)` or `12 (current), 200 (previous)`.
    pub(super) fn ids(&self) -> String {
        let mut out = format!("{} (current)", self.current.id);
        if let Some(p) = &self.previous {
            out.push_str(&format!(", {} (previous)", p.id));
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn key(byte: u8) -> FleetKey {
        FleetKey::from_bytes(&[byte; KEY_LEN]).unwrap()
    }

    #[test]
    fn a_sealed_value_opens_only_with_the_same_key_and_associated_data() {
        let sealed = key(1).seal_with(b"www 3", b"private key").unwrap();
        assert!(!sealed.windows(11).any(|w| w == b"private key"));
        assert_eq!(key(1).open_with(b"www 3", &sealed).unwrap(), b"private key");
        assert!(key(2).open_with(b"www 3", &sealed).is_none());
        assert!(key(1).open_with(b"www 4", &sealed).is_none());
        let mut altered = sealed.clone();
        let last = altered.len() - 1;
        altered[last] ^= 1;
        assert!(key(1).open_with(b"www 3", &altered).is_none());
        assert!(key(1).open_with(b"www 3", &sealed[..5]).is_none());
        // A fresh nonce each time.
        assert_ne!(sealed, key(1).seal_with(b"www 3", b"private key").unwrap());
    }

    #[test]
    fn a_key_id_comes_from_the_key_and_picks_the_keys_to_try() {
        assert_eq!(key(1).id(), key(1).id());
        // Ids of distinct keys differ but for one chance in 256: find two that do.
        let (a, b) = (1u8..=255)
            .map(|n| (key(0), key(n)))
            .find(|(a, b)| a.id() != b.id())
            .unwrap();
        let (ia, ib) = (a.id(), b.id());
        let both = FleetKeys::new(b, Some(a));
        let found: Vec<Which> = both.with_id(ia).map(|(w, _)| w).collect();
        assert_eq!(found, vec![Which::Previous]);
        let found: Vec<Which> = both.with_id(ib).map(|(w, _)| w).collect();
        assert_eq!(found, vec![Which::Current]);
        assert!(both.ids().contains("(previous)"));
        assert_eq!(both.previous_in_use(), Some(ia));
        assert!(both.retire_previous());
        assert_eq!(both.previous_in_use(), None);
        assert_eq!(both.with_id(ia).count(), 0, "retired: opens nothing");
        let one = FleetKeys::new(key(5), None);
        assert_eq!(one.with_id(one.current().id()).count(), 1);
        assert!(one.previous().is_none());
    }

    #[test]
    fn the_key_file_must_be_32_private_bytes() {
        use std::os::unix::fs::PermissionsExt;
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("fleet.key");
        std::fs::write(&path, [7u8; 32]).unwrap();
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o600)).unwrap();
        assert!(FleetKey::read(&path).is_ok());
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o644)).unwrap();
        let err = FleetKey::read(&path).unwrap_err().to_string();
        assert!(err.contains("mode 0644"), "{err}");
        std::fs::write(&path, b"short").unwrap();
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o600)).unwrap();
        let err = FleetKey::read(&path).unwrap_err().to_string();
        assert!(err.contains("holds 5 bytes"), "{err}");
        assert!(!format!("{:?}", key(9)).contains('9'));
        let err = FleetKey::read(&dir.path().join("missing")).unwrap_err();
        assert!(err.to_string().contains("missing"), "{err}");
    }
}
