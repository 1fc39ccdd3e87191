//! Private keys: the supported types, generation, PEM in and out, and writing a key file so that
//! no other user can ever read it, not even for an instant.

use std::fmt;
use std::fs::{self, File};
use std::io::{self, Read};
use std::path::Path;
use std::str::FromStr;

use rcgen::{KeyPair, PublicKeyData, RsaKeySize, SignatureAlgorithm};
use rustls_pki_types::PrivateKeyDer;
use rustls_pki_types::pem::PemObject;
use serde::{Deserialize, Serialize};

use super::CryptoError;
use super::pem::pem_encode;

/// The key types the agent generates. The strings are those of the configuration
/// (`key_type = "ecdsa-p256"`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default, Serialize, Deserialize)]
pub enum KeyType {
    /// ECDSA on P-256 with SHA-256 (the default).
    #[default]
    #[serde(rename = "ecdsa-p256")]
    EcdsaP256,
    /// ECDSA on P-384 with SHA-384.
    #[serde(rename = "ecdsa-p384")]
    EcdsaP384,
    /// RSA, 2048-bit modulus, PKCS#1 v1.5 signatures with SHA-256.
    #[serde(rename = "rsa-2048")]
    Rsa2048,
    /// RSA, 3072-bit modulus.
    #[serde(rename = "rsa-3072")]
    Rsa3072,
    /// RSA, 4096-bit modulus.
    #[serde(rename = "rsa-4096")]
    Rsa4096,
}

impl KeyType {
    /// Every key type, in the order of the documentation.
    pub const ALL: [KeyType; 5] = [
        KeyType::EcdsaP256,
        KeyType::EcdsaP384,
        KeyType::Rsa2048,
        KeyType::Rsa3072,
        KeyType::Rsa4096,
    ];

    /// The configuration string, e.g. `ecdsa-p256`.
    pub fn as_str(self) -> &'static str {
        match self {
            KeyType::EcdsaP256 => "ecdsa-p256",
            KeyType::EcdsaP384 => "ecdsa-p384",
            KeyType::Rsa2048 => "rsa-2048",
            KeyType::Rsa3072 => "rsa-3072",
            KeyType::Rsa4096 => "rsa-4096",
        }
    }

    fn rsa_size(self) -> Option<RsaKeySize> {
        match self {
            KeyType::Rsa2048 => Some(RsaKeySize::_2048),
            KeyType::Rsa3072 => Some(RsaKeySize::_3072),
            KeyType::Rsa4096 => Some(RsaKeySize::_4096),
            KeyType::EcdsaP256 | KeyType::EcdsaP384 => None,
        }
    }

    fn algorithm(self) -> &'static SignatureAlgorithm {
        match self {
            KeyType::EcdsaP256 => &rcgen::PKCS_ECDSA_P256_SHA256,
            KeyType::EcdsaP384 => &rcgen::PKCS_ECDSA_P384_SHA384,
            KeyType::Rsa2048 | KeyType::Rsa3072 | KeyType::Rsa4096 => &rcgen::PKCS_RSA_SHA256,
        }
    }
}

impl fmt::Display for KeyType {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// An unknown key type string.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error(
    "unknown key type {0:?} (expected one of ecdsa-p256, ecdsa-p384, rsa-2048, rsa-3072, rsa-4096)"
)]
pub struct ParseKeyTypeError(pub String);

impl FromStr for KeyType {
    type Err = ParseKeyTypeError;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        KeyType::ALL
            .into_iter()
            .find(|t| t.as_str() == s)
            .ok_or_else(|| ParseKeyTypeError(s.to_owned()))
    }
}

/// A private key. Its `Debug` shows the key type only; the PEM text held here is overwritten
/// when the value is dropped (best effort: rcgen and aws-lc keep their own copies, which this
/// type cannot reach without the `zeroize` crate).
pub struct PrivateKey {
    key_pair: KeyPair,
    key_type: KeyType,
    pem: String,
}

impl fmt::Debug for PrivateKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("PrivateKey")
            .field("key_type", &self.key_type)
            .finish_non_exhaustive()
    }
}

impl Drop for PrivateKey {
    fn drop(&mut self) {
        let mut bytes = std::mem::take(&mut self.pem).into_bytes();
        bytes.fill(0);
        // Keep the writes from being optimised away as dead stores.
        std::hint::black_box(&bytes);
    }
}

impl PrivateKey {
    /// A fresh key of `key_type`.
    pub fn generate(key_type: KeyType) -> Result<Self, CryptoError> {
        let generated = match key_type.rsa_size() {
            Some(size) => KeyPair::generate_rsa_for(key_type.algorithm(), size),
            None => KeyPair::generate_for(key_type.algorithm()),
        };
        let key_pair = generated.map_err(|e| CryptoError::Generate {
            key_type,
            message: e.to_string(),
        })?;
        // rcgen serialises generated keys as PKCS#8 (aws-lc-rs `AsDer<Pkcs8V1Der>` for RSA).
        let pem = pem_encode("PRIVATE KEY", key_pair.serialized_der());
        Ok(Self {
            key_pair,
            key_type,
            pem,
        })
    }

    /// Loads the first private key of a PEM text: `PRIVATE KEY` (PKCS#8), `EC PRIVATE KEY`
    /// (SEC1) or `RSA PRIVATE KEY` (PKCS#1). `origin` names the source in errors (e.g. the
    /// file path).
    pub fn from_pem(pem: &[u8], origin: &str) -> Result<Self, CryptoError> {
        let parse_err = |message: String| CryptoError::KeyParse {
            origin: origin.to_owned(),
            message,
        };
        let der = PrivateKeyDer::from_pem_slice(pem).map_err(|e| {
            match e {
            rustls_pki_types::pem::Error::NoItemsFound => parse_err(
                "no PEM private key found (expected PRIVATE KEY, EC PRIVATE KEY or RSA PRIVATE KEY)"
                    .to_owned(),
            ),
            other => parse_err(format!("invalid PEM: {other}")),
        }
        })?;
        let key_pair = KeyPair::try_from(&der)
            .map_err(|e| parse_err(format!("not a usable private key: {e}")))?;
        let key_type = detect_key_type(&key_pair, origin)?;
        let label = match &der {
            PrivateKeyDer::Pkcs1(_) => "RSA PRIVATE KEY",
            PrivateKeyDer::Sec1(_) => "EC PRIVATE KEY",
            _ => "PRIVATE KEY",
        };
        let pem = pem_encode(label, der.secret_der());
        Ok(Self {
            key_pair,
            key_type,
            pem,
        })
    }

    /// The key's type.
    pub fn key_type(&self) -> KeyType {
        self.key_type
    }

    /// The private key as PEM (PKCS#8 for keys generated here; a loaded key keeps its format).
    /// Secret: write it only with [`write_key_file`], never log it.
    pub fn secret_pem(&self) -> &str {
        &self.pem
    }

    /// DER of the SubjectPublicKeyInfo of the key.
    pub fn public_key_der(&self) -> Vec<u8> {
        self.key_pair.subject_public_key_info()
    }

    /// The public key as PEM (`PUBLIC KEY`).
    pub fn public_key_pem(&self) -> String {
        pem_encode("PUBLIC KEY", &self.public_key_der())
    }

    /// The rcgen key pair, for signing (CSR).
    pub(crate) fn key_pair(&self) -> &KeyPair {
        &self.key_pair
    }
}

fn detect_key_type(key_pair: &KeyPair, origin: &str) -> Result<KeyType, CryptoError> {
    let unsupported = |what: String| CryptoError::UnsupportedKey {
        origin: origin.to_owned(),
        what,
    };
    let alg = key_pair.algorithm();
    if alg == &rcgen::PKCS_ECDSA_P256_SHA256 {
        return Ok(KeyType::EcdsaP256);
    }
    if alg == &rcgen::PKCS_ECDSA_P384_SHA384 {
        return Ok(KeyType::EcdsaP384);
    }
    if alg == &rcgen::PKCS_RSA_SHA256 {
        use x509_parser::prelude::FromDer;
        use x509_parser::public_key::PublicKey;
        use x509_parser::x509::SubjectPublicKeyInfo;
        let spki_der = key_pair.subject_public_key_info();
        let bits = SubjectPublicKeyInfo::from_der(&spki_der)
            .ok()
            .and_then(|(_, spki)| match spki.parsed() {
                Ok(PublicKey::RSA(rsa)) => Some(rsa.key_size()),
                _ => None,
            })
            .ok_or_else(|| unsupported("RSA public key could not be read".to_owned()))?;
        return match bits {
            2048 => Ok(KeyType::Rsa2048),
            3072 => Ok(KeyType::Rsa3072),
            4096 => Ok(KeyType::Rsa4096),
            other => Err(unsupported(format!(
                "RSA key of {other} bits (supported: 2048, 3072, 4096)"
            ))),
        };
    }
    Err(unsupported(
        "key algorithm (supported: ECDSA P-256, ECDSA P-384, RSA)".to_owned(),
    ))
}

/// Key files are a few kilobytes; anything much larger is not one.
const MAX_KEY_FILE_BYTES: u64 = 1 << 20;

/// Reads and parses a private key file (see [`PrivateKey::from_pem`]).
pub(crate) fn read_key_file(path: &Path) -> Result<PrivateKey, CryptoError> {
    let io_err = |source| CryptoError::KeyFile {
        action: "read",
        path: path.to_owned(),
        source,
    };
    let file = File::open(path).map_err(io_err)?;
    let len = file
        .metadata()
        .map_or(0, |m| m.len())
        .min(MAX_KEY_FILE_BYTES);
    let mut bytes = Vec::with_capacity(usize::try_from(len + 1).unwrap_or(0));
    file.take(MAX_KEY_FILE_BYTES + 1)
        .read_to_end(&mut bytes)
        .map_err(io_err)?;
    let result = if bytes.len() as u64 > MAX_KEY_FILE_BYTES {
        Err(CryptoError::KeyFileTooLarge {
            path: path.to_owned(),
            limit: MAX_KEY_FILE_BYTES,
        })
    } else {
        PrivateKey::from_pem(&bytes, &format!("'{}'", path.display()))
    };
    bytes.fill(0);
    std::hint::black_box(&bytes);
    result
}

/// Writes `key` to `path` atomically: a new temporary file in the same directory is created
/// with mode 0600 (and `O_EXCL`, `O_NOFOLLOW`); with `group`, it is given that group and then
/// mode 0640 — all before the first byte is written. Then the key is written, fsynced, the file
/// renamed over `path` and the directory fsynced. A symbolic link or a non-regular file at
/// `path` is refused. The exact mode is set explicitly, so the umask does not matter.
pub(crate) fn write_key_file(
    path: &Path,
    key: &PrivateKey,
    group: Option<u32>,
) -> Result<(), CryptoError> {
    write_private_file(path, key.secret_pem().as_bytes(), group)
}

fn write_private_file(path: &Path, contents: &[u8], group: Option<u32>) -> Result<(), CryptoError> {
    check_target(path)?;
    // Group first, then the group bit: the file is never readable by a group it was not meant
    // for. The explicit chmod also undoes a umask that removed owner bits.
    let opts = crate::fsutil::WriteOptions {
        mode: if group.is_some() { 0o640 } else { 0o600 },
        group,
        refuse_links: true,
    };
    crate::fsutil::write_atomic_with(path, contents, opts).map_err(|source| CryptoError::KeyFile {
        action: "write",
        path: path.to_owned(),
        source,
    })
}

/// Refuses a symbolic link or a non-regular file where the key goes.
fn check_target(path: &Path) -> Result<(), CryptoError> {
    match fs::symlink_metadata(path) {
        Ok(meta) if meta.file_type().is_symlink() => Err(CryptoError::KeyFileIsSymlink {
            path: path.to_owned(),
        }),
        Ok(meta) if !meta.file_type().is_file() => Err(CryptoError::KeyFileNotRegular {
            path: path.to_owned(),
        }),
        Ok(_) => Ok(()),
        Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(()),
        Err(source) => Err(CryptoError::KeyFile {
            action: "inspect",
            path: path.to_owned(),
            source,
        }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::fs::Permissions;
    use std::os::unix::fs::{MetadataExt, PermissionsExt};
    use std::sync::Mutex;

    /// The umask is per process; tests that change it take this lock.
    static UMASK: Mutex<()> = Mutex::new(());

    fn with_umask<T>(mask: u32, f: impl FnOnce() -> T) -> T {
        use nix::sys::stat::{Mode, umask};
        let _lock = UMASK.lock().unwrap_or_else(|e| e.into_inner());
        let old = umask(Mode::from_bits_truncate(mask));
        let out = f();
        umask(old);
        out
    }

    fn mode_of(path: &Path) -> u32 {
        fs::metadata(path).unwrap().permissions().mode() & 0o7777
    }

    #[test]
    fn key_type_strings_round_trip() {
        for t in KeyType::ALL {
            assert_eq!(t.to_string().parse::<KeyType>().unwrap(), t);
        }
        assert_eq!(KeyType::default(), KeyType::EcdsaP256);
        assert_eq!("ecdsa-p384".parse::<KeyType>().unwrap(), KeyType::EcdsaP384);
        let err = "rsa-1024".parse::<KeyType>().unwrap_err();
        assert!(err.to_string().contains("rsa-1024"), "{err}");
        assert!("ECDSA-P256".parse::<KeyType>().is_err());
    }

    #[test]
    fn key_type_serde_uses_config_strings() {
        #[derive(Deserialize, Serialize)]
        struct C {
            key_type: KeyType,
        }
        let c: C = serde_json::from_str(r#"{"key_type":"rsa-3072"}"#).unwrap();
        assert_eq!(c.key_type, KeyType::Rsa3072);
        assert_eq!(
            serde_json::to_string(&c).unwrap(),
            r#"{"key_type":"rsa-3072"}"#
        );
        assert!(serde_json::from_str::<C>(r#"{"key_type":"dsa"}"#).is_err());
    }

    fn check_generated(t: KeyType) {
        let key = PrivateKey::generate(t).unwrap();
        assert_eq!(key.key_type(), t);
        assert!(
            key.secret_pem()
                .starts_with("-----BEGIN PRIVATE KEY-----\n")
        );
        // PKCS#8 PEM loads back as the same key.
        let back = PrivateKey::from_pem(key.secret_pem().as_bytes(), "test").unwrap();
        assert_eq!(back.key_type(), t);
        assert_eq!(back.public_key_der(), key.public_key_der());
        assert_eq!(back.secret_pem(), key.secret_pem());
    }

    #[test]
    fn generates_ecdsa_p256() {
        check_generated(KeyType::EcdsaP256);
    }

    #[test]
    fn generates_ecdsa_p384() {
        check_generated(KeyType::EcdsaP384);
    }

    #[test]
    fn generates_rsa_2048() {
        check_generated(KeyType::Rsa2048);
    }

    #[test]
    fn generates_rsa_3072() {
        check_generated(KeyType::Rsa3072);
    }

    #[test]
    fn generates_rsa_4096() {
        check_generated(KeyType::Rsa4096);
    }

    #[test]
    fn generated_keys_are_pkcs8_for_openssl() {
        let dir = tempfile::tempdir().unwrap();
        for t in [KeyType::EcdsaP256, KeyType::Rsa2048] {
            let key = PrivateKey::generate(t).unwrap();
            let path = dir.path().join(format!("{t}.pem"));
            write_key_file(&path, &key, None).unwrap();
            let out = std::process::Command::new("/usr/bin/openssl")
                .args(["pkey", "-noout", "-text", "-in"])
                .arg(&path)
                .output()
                .unwrap();
            assert!(
                out.status.success(),
                "{}",
                String::from_utf8_lossy(&out.stderr)
            );
        }
    }

    #[test]
    fn debug_never_shows_key_material() {
        let key = PrivateKey::generate(KeyType::EcdsaP256).unwrap();
        let dbg = format!("{key:?}");
        assert_eq!(dbg, "PrivateKey { key_type: EcdsaP256, .. }");
        let body: String = key.secret_pem().lines().nth(1).unwrap().to_owned();
        assert!(!dbg.contains(&body[..16]));
    }

    #[test]
    fn loads_sec1_and_pkcs1_keys_from_openssl() {
        let dir = tempfile::tempdir().unwrap();
        let openssl = |args: &[&str]| {
            let out = std::process::Command::new("/usr/bin/openssl")
                .args(args)
                .current_dir(dir.path())
                .output()
                .unwrap();
            assert!(
                out.status.success(),
                "{}",
                String::from_utf8_lossy(&out.stderr)
            );
        };
        openssl(&[
            "ecparam",
            "-name",
            "secp384r1",
            "-genkey",
            "-noout",
            "-out",
            "ec.pem",
        ]);
        openssl(&["genrsa", "-traditional", "-out", "rsa.pem", "2048"]);

        let ec = read_key_file(&dir.path().join("ec.pem")).unwrap();
        assert_eq!(ec.key_type(), KeyType::EcdsaP384);
        assert!(
            ec.secret_pem()
                .starts_with("-----BEGIN EC PRIVATE KEY-----")
        );

        let rsa = read_key_file(&dir.path().join("rsa.pem")).unwrap();
        assert_eq!(rsa.key_type(), KeyType::Rsa2048);
        assert!(
            rsa.secret_pem()
                .starts_with("-----BEGIN RSA PRIVATE KEY-----")
        );
        // A CSR can be made with a loaded key.
        crate::crypto::Csr::new(&rsa, &["example.com".to_owned()]).unwrap();
    }

    #[test]
    fn rejects_non_keys_and_unsupported_keys() {
        let err = PrivateKey::from_pem(b"hello", "'x.pem'").unwrap_err();
        assert!(err.to_string().contains("no PEM private key"), "{err}");
        assert!(err.to_string().contains("'x.pem'"), "{err}");

        let garbage = b"-----BEGIN PRIVATE KEY-----\nAAAA\n-----END PRIVATE KEY-----\n";
        assert!(matches!(
            PrivateKey::from_pem(garbage, "t"),
            Err(CryptoError::KeyParse { .. })
        ));

        let ed = KeyPair::generate_for(&rcgen::PKCS_ED25519).unwrap();
        let err = PrivateKey::from_pem(ed.serialize_pem().as_bytes(), "t").unwrap_err();
        assert!(matches!(err, CryptoError::UnsupportedKey { .. }), "{err}");
    }

    #[test]
    fn key_file_is_0600_under_umask_000() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("privkey.pem");
        let key = PrivateKey::generate(KeyType::EcdsaP256).unwrap();
        with_umask(0o000, || write_key_file(&path, &key, None)).unwrap();
        assert_eq!(mode_of(&path), 0o600);
        assert_eq!(fs::read_to_string(&path).unwrap(), key.secret_pem());
        // Replacing an existing, too-open file: the new one is 0600 again.
        fs::set_permissions(&path, Permissions::from_mode(0o644)).unwrap();
        let key2 = PrivateKey::generate(KeyType::EcdsaP256).unwrap();
        with_umask(0o000, || write_key_file(&path, &key2, None)).unwrap();
        assert_eq!(mode_of(&path), 0o600);
        assert_eq!(fs::read_to_string(&path).unwrap(), key2.secret_pem());
        // No temporary file is left behind.
        assert_eq!(fs::read_dir(dir.path()).unwrap().count(), 1);
    }

    #[test]
    fn key_file_with_group_is_0640_and_owned_by_the_group() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("privkey.pem");
        let key = PrivateKey::generate(KeyType::EcdsaP256).unwrap();
        let gid = nix::unistd::getegid().as_raw();
        // Even a umask that removes group bits does not change the requested mode.
        with_umask(0o077, || write_key_file(&path, &key, Some(gid))).unwrap();
        assert_eq!(mode_of(&path), 0o640);
        assert_eq!(fs::metadata(&path).unwrap().gid(), gid);
        with_umask(0o000, || write_key_file(&path, &key, Some(gid))).unwrap();
        assert_eq!(mode_of(&path), 0o640);
    }

    #[test]
    fn key_file_refuses_a_symlink_target() {
        let dir = tempfile::tempdir().unwrap();
        let victim = dir.path().join("victim");
        fs::write(&victim, "untouched").unwrap();
        let link = dir.path().join("privkey.pem");
        std::os::unix::fs::symlink(&victim, &link).unwrap();
        let key = PrivateKey::generate(KeyType::EcdsaP256).unwrap();
        let err = write_key_file(&link, &key, None).unwrap_err();
        assert!(matches!(err, CryptoError::KeyFileIsSymlink { .. }), "{err}");
        assert!(err.to_string().contains("privkey.pem"), "{err}");
        assert_eq!(fs::read_to_string(&victim).unwrap(), "untouched");
        assert!(
            fs::symlink_metadata(&link)
                .unwrap()
                .file_type()
                .is_symlink()
        );
        // A dangling symlink is refused as well.
        let dangling = dir.path().join("dangling.pem");
        std::os::unix::fs::symlink(dir.path().join("nowhere"), &dangling).unwrap();
        assert!(matches!(
            write_key_file(&dangling, &key, None),
            Err(CryptoError::KeyFileIsSymlink { .. })
        ));
        assert!(!dir.path().join("nowhere").exists());
        // So is a directory.
        let sub = dir.path().join("sub");
        fs::create_dir(&sub).unwrap();
        assert!(matches!(
            write_key_file(&sub, &key, None),
            Err(CryptoError::KeyFileNotRegular { .. })
        ));
        assert_eq!(fs::read_dir(dir.path()).unwrap().count(), 4);
    }

    #[test]
    fn key_file_errors_name_the_file() {
        let key = PrivateKey::generate(KeyType::EcdsaP256).unwrap();
        let path = Path::new("/nonexistent-dir-for-cert-agent-tests/privkey.pem");
        let err = write_key_file(path, &key, None).unwrap_err();
        let msg = err.to_string();
        assert!(
            msg.starts_with("could not write private key file '/nonexistent-dir-for-cert-agent-tests/privkey.pem': "),
            "{msg}"
        );
        let err = read_key_file(path).unwrap_err();
        assert!(
            err.to_string()
                .starts_with("could not read private key file '/nonexistent")
        );
    }

    #[test]
    fn read_key_file_round_trip() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("k.pem");
        let key = PrivateKey::generate(KeyType::EcdsaP384).unwrap();
        write_key_file(&path, &key, None).unwrap();
        let back = read_key_file(&path).unwrap();
        assert_eq!(back.public_key_der(), key.public_key_der());
    }
}
