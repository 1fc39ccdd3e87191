//! certbot's ACME account (`accounts/<server host and path>/<id>/`): `regr.json` (the account
//! URL and contact) and `private_key.json` (the key as a JWK). cert-agent's accounts are
//! ECDSA P-256: an EC P-256 key is converted to PKCS#8 and reused; any other key (certbot's
//! RSA keys) means a new account on the first order. No key material ever reaches an error
//! or the output.

use std::path::{Component, Path, PathBuf};

use base64::Engine;
use serde::Deserialize;

use super::lineage::read_file;
use crate::values::text::quote_max;

/// The largest account file read.
const MAX_ACCOUNT_BYTES: u64 = 64 * 1024;

/// What becomes of certbot's account.
#[derive(Debug, Clone)]
pub(crate) enum AccountPlan {
    /// The account is reused: its URL and its key (PKCS#8 DER; secret).
    Reuse {
        url: String,
        key_pkcs8: Vec<u8>,
        contact: Vec<String>,
    },
    /// A new account is registered on the first order, for `why`.
    New { why: String, contact: Vec<String> },
}

impl AccountPlan {
    /// The account's contact addresses.
    pub(crate) fn contact(&self) -> &[String] {
        match self {
            Self::Reuse { contact, .. } | Self::New { contact, .. } => contact,
        }
    }
}

#[derive(Deserialize)]
struct Regr {
    #[serde(default)]
    uri: Option<String>,
    #[serde(default)]
    body: RegrBody,
}

#[derive(Deserialize, Default)]
struct RegrBody {
    #[serde(default)]
    contact: Vec<String>,
}

/// The directory of account `id` of `server` under `root` (as certbot lays it out: the
/// server URL's host and path).
pub(crate) fn account_dir(root: &Path, server: &str, id: &str) -> Result<PathBuf, String> {
    let rest = server
        .strip_prefix("https://")
        .or_else(|| server.strip_prefix("http://"))
        .ok_or_else(|| format!("server {} is not a URL", quote_max(server, 200)))?;
    let id_ok = !id.is_empty() && id.len() <= 128 && id.chars().all(|c| c.is_ascii_alphanumeric());
    if !id_ok {
        return Err(format!("account id {} is not certbot's", quote_max(id, 60)));
    }
    let sub = Path::new(rest.trim_end_matches('/'));
    if !sub.components().all(|c| matches!(c, Component::Normal(_))) {
        return Err(format!(
            "server {} does not name an account directory",
            quote_max(server, 200)
        ));
    }
    Ok(root.join("accounts").join(sub).join(id))
}

/// Reads the account `id` of `server` and decides whether it can be reused.
pub(crate) fn read(root: &Path, server: &str, id: Option<&str>) -> Result<AccountPlan, String> {
    let Some(id) = id else {
        return Ok(AccountPlan::New {
            why: "the renewal configuration names no account".into(),
            contact: Vec::new(),
        });
    };
    let dir = account_dir(root, server, id)?;
    let read_in = |file: &str| -> Result<Vec<u8>, String> {
        let path = dir.join(file);
        let meta = std::fs::symlink_metadata(&path)
            .map_err(|e| format!("{}: {}", path.display(), crate::fsutil::io_text(&e)))?;
        if !meta.is_file() {
            return Err(format!("{}: not a regular file", path.display()));
        }
        read_file(&path, MAX_ACCOUNT_BYTES).map_err(|m| format!("{}: {m}", path.display()))
    };
    let regr: Regr = serde_json::from_slice(&read_in("regr.json")?).map_err(|e| {
        format!(
            "{}: not certbot's account registration ({})",
            dir.join("regr.json").display(),
            quote_max(&e.to_string(), 200)
        )
    })?;
    let contact: Vec<String> = regr
        .body
        .contact
        .iter()
        .take(10)
        .map(|c| c.trim_start_matches("mailto:").to_owned())
        .filter(|c| !c.is_empty() && c.len() <= 254 && !c.chars().any(char::is_control))
        .collect();
    let key_file = dir.join("private_key.json");
    let jwk = read_in("private_key.json")?;
    let url = regr
        .uri
        .filter(|u| u.starts_with("https://") || u.starts_with("http://"));
    match (ec_p256_pkcs8(&jwk), url) {
        (Ok(Some(key_pkcs8)), Some(url)) => Ok(AccountPlan::Reuse {
            url,
            key_pkcs8,
            contact,
        }),
        (Ok(Some(_)), None) => Ok(AccountPlan::New {
            why: format!(
                "{} holds no account URL (`uri`)",
                dir.join("regr.json").display()
            ),
            contact,
        }),
        (Ok(None), _) => Ok(AccountPlan::New {
            why: format!(
                "the key in {} is not ECDSA P-256 (cert-agent's accounts are)",
                key_file.display()
            ),
            contact,
        }),
        (Err(why), _) => Err(format!("{}: {why}", key_file.display())),
    }
}

/// The PKCS#8 DER of an EC P-256 JWK; `None` for a well-formed key of another type. Errors
/// never quote the input.
pub fn ec_p256_pkcs8(jwk: &[u8]) -> Result<Option<Vec<u8>>, String> {
    #[derive(Deserialize)]
    struct Jwk {
        kty: String,
        #[serde(default)]
        crv: Option<String>,
        #[serde(default)]
        x: Option<String>,
        #[serde(default)]
        y: Option<String>,
        #[serde(default)]
        d: Option<String>,
    }
    let key: Jwk = serde_json::from_slice(jwk).map_err(|_| "not a JSON Web Key".to_owned())?;
    match key.kty.as_str() {
        "EC" => {}
        "RSA" | "OKP" => return Ok(None),
        _ => return Err("not a JSON Web Key of a known type".into()),
    }
    if key.crv.as_deref() != Some("P-256") {
        return Ok(None);
    }
    let b64 = |v: Option<String>, what: &str| -> Result<Vec<u8>, String> {
        let v = v.ok_or_else(|| format!("the EC key has no `{what}`"))?;
        base64::engine::general_purpose::URL_SAFE_NO_PAD
            .decode(v.trim_end_matches('='))
            .map_err(|_| format!("the EC key's `{what}` is not base64url"))
    };
    let (x, y, d) = (b64(key.x, "x")?, b64(key.y, "y")?, b64(key.d, "d")?);
    if x.len() != 32 || y.len() != 32 || d.len() != 32 {
        return Err("the EC key's coordinates are not those of P-256".into());
    }
    let mut public = Vec::with_capacity(65);
    public.push(4);
    public.extend_from_slice(&x);
    public.extend_from_slice(&y);
    let pair = aws_lc_rs::signature::EcdsaKeyPair::from_private_key_and_public_key(
        &aws_lc_rs::signature::ECDSA_P256_SHA256_FIXED_SIGNING,
        &d,
        &public,
    )
    .map_err(|_| "the EC key's private and public parts do not belong together".to_owned())?;
    let doc = pair
        .to_pkcs8v1()
        .map_err(|_| "the EC key cannot be written as PKCS#8".to_owned())?;
    Ok(Some(doc.as_ref().to_vec()))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn b64(v: &[u8]) -> String {
        base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(v)
    }

    /// An EC P-256 JWK of a key made here, and the key.
    fn ec_jwk() -> (String, aws_lc_rs::signature::EcdsaKeyPair) {
        use aws_lc_rs::encoding::AsBigEndian;
        use aws_lc_rs::signature::KeyPair;
        let rng = aws_lc_rs::rand::SystemRandom::new();
        let alg = &aws_lc_rs::signature::ECDSA_P256_SHA256_FIXED_SIGNING;
        let doc = aws_lc_rs::signature::EcdsaKeyPair::generate_pkcs8(alg, &rng).unwrap();
        let pair = aws_lc_rs::signature::EcdsaKeyPair::from_pkcs8(alg, doc.as_ref()).unwrap();
        let public = pair.public_key().as_ref().to_vec();
        let d = pair.private_key().as_be_bytes().unwrap();
        let jwk = serde_json::json!({
            "kty": "EC", "crv": "P-256",
            "x": b64(&public[1..33]), "y": b64(&public[33..65]), "d": b64(d.as_ref()),
        });
        (jwk.to_string(), pair)
    }

    #[test]
    fn an_ec_p256_account_key_becomes_the_same_key_in_pkcs8() {
        use aws_lc_rs::signature::KeyPair;
        let (jwk, pair) = ec_jwk();
        let der = ec_p256_pkcs8(jwk.as_bytes()).unwrap().unwrap();
        let back = aws_lc_rs::signature::EcdsaKeyPair::from_pkcs8(
            &aws_lc_rs::signature::ECDSA_P256_SHA256_FIXED_SIGNING,
            &der,
        )
        .unwrap();
        assert_eq!(back.public_key().as_ref(), pair.public_key().as_ref());
    }

    #[test]
    fn rsa_and_other_curves_mean_a_new_account() {
        let rsa = r#"{"kty":"RSA","n":"AQAB","e":"AQAB","d":"AQAB"}"#;
        assert_eq!(ec_p256_pkcs8(rsa.as_bytes()).unwrap(), None);
        let p384 = r#"{"kty":"EC","crv":"P-384","x":"AA","y":"AA","d":"AA"}"#;
        assert_eq!(ec_p256_pkcs8(p384.as_bytes()).unwrap(), None);
    }

    #[test]
    fn a_forged_or_garbage_key_is_refused_without_quoting_it() {
        let (jwk, _) = ec_jwk();
        let mut v: serde_json::Value = serde_json::from_str(&jwk).unwrap();
        // Another key's private part under this public key.
        let (other, _) = ec_jwk();
        let other: serde_json::Value = serde_json::from_str(&other).unwrap();
        v["d"] = other["d"].clone();
        let secret = other["d"].as_str().unwrap().to_owned();
        let e = ec_p256_pkcs8(v.to_string().as_bytes()).unwrap_err();
        assert!(e.contains("do not belong together"), "{e}");
        assert!(!e.contains(&secret));
        for garbage in [
            &b"\x00\xff"[..],
            b"{}",
            b"{\"kty\":\"EC\",\"crv\":\"P-256\",\"d\":\"!!\",\"x\":\"AA\",\"y\":\"AA\"}",
        ] {
            let e = ec_p256_pkcs8(garbage).unwrap_err();
            assert!(!e.contains("!!"), "{e}");
        }
    }

    #[test]
    fn an_account_directory_never_leaves_the_certbot_directory() {
        let root = Path::new("/etc/letsencrypt");
        assert_eq!(
            account_dir(
                root,
                "https://acme-v02.api.letsencrypt.org/directory",
                "abc123"
            )
            .unwrap(),
            Path::new("/etc/letsencrypt/accounts/acme-v02.api.letsencrypt.org/directory/abc123")
        );
        assert!(account_dir(root, "https://x/../../etc", "abc").is_err());
        assert!(account_dir(root, "https://x/dir", "../abc").is_err());
        assert!(account_dir(root, "ftp://x/dir", "abc").is_err());
    }
}
