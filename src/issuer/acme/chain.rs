//! Alternate chains (RFC 8555 §7.4.2): a CA may offer the same certificate under several
//! chains, the default one in the answer and the others as `Link: <URL>;rel="alternate"`.
//! `preferred_chain` picks the chain whose topmost certificate was issued by the named CA
//! (the Common Name of its issuer), as certbot's and lego's `--preferred-chain` do; when no
//! offered chain matches, the default chain is kept.
//!
//! The alternates are fetched with POST-as-GET requests signed here with the account's key
//! (ES256, the key the account was generated with), since the ACME crate hands out the default
//! chain only. Everything the CA sends is untrusted: at most [`MAX_ALTERNATES`] links are
//! followed, each an allowed URL, each answer capped like every other ([`super::http`]), and a
//! chain is taken only when its first certificate is the very certificate of the default
//! chain.

use aws_lc_rs::rand::SystemRandom;
use aws_lc_rs::signature::{ECDSA_P256_SHA256_FIXED_SIGNING, EcdsaKeyPair};
use base64::Engine as _;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use bytes::Bytes;
use rustls_pki_types::CertificateDer;
use rustls_pki_types::pem::PemObject;

use std::path::Path;

use instant_acme::Order;

use super::http::{AcmeHttp, allowed_url};
use super::{ACCOUNT_FILE, AcmeError, Directory, parse_account_file};
use crate::values::text::quote_max;

/// Most alternate chains looked at (Let's Encrypt offers one or two).
pub const MAX_ALTERNATES: usize = 8;

/// The account that signs the requests: its URL (`kid`) and its key.
pub struct Signer {
    kid: String,
    key: EcdsaKeyPair,
    rng: SystemRandom,
}

impl Signer {
    /// The signer of the account `kid` whose ECDSA P-256 key is `key_pkcs8` (PKCS#8 DER).
    pub fn new(kid: String, key_pkcs8: &[u8]) -> Result<Self, String> {
        let key = EcdsaKeyPair::from_pkcs8(&ECDSA_P256_SHA256_FIXED_SIGNING, key_pkcs8)
            .map_err(|_| "the account's key is not an ECDSA P-256 key".to_owned())?;
        Ok(Self {
            kid,
            key,
            rng: SystemRandom::new(),
        })
    }

    /// The JWS body of a POST-as-GET of `url` with `nonce` (flattened JSON serialisation,
    /// empty payload).
    fn post_as_get(&self, url: &str, nonce: &str) -> Result<Vec<u8>, String> {
        let protected = serde_json::json!({
            "alg": "ES256",
            "kid": self.kid,
            "nonce": nonce,
            "url": url,
        })
        .to_string();
        let protected = URL_SAFE_NO_PAD.encode(protected);
        let signature = self
            .key
            .sign(&self.rng, format!("{protected}.").as_bytes())
            .map_err(|_| "could not sign with the account's key".to_owned())?;
        Ok(serde_json::json!({
            "protected": protected,
            "payload": "",
            "signature": URL_SAFE_NO_PAD.encode(signature.as_ref()),
        })
        .to_string()
        .into_bytes())
    }
}

/// The URLs an answer's `Link` headers name with `rel="alternate"`, resolved against `base`
/// (the URL asked), allowed URLs only, without repeats, at most [`MAX_ALTERNATES`].
pub fn alternate_links(base: &str, headers: &http::HeaderMap) -> Vec<String> {
    let base = reqwest::Url::parse(base).ok();
    let mut out: Vec<String> = Vec::new();
    for value in headers.get_all(http::header::LINK) {
        let Ok(text) = value.to_str() else {
            continue;
        };
        for (target, params) in link_values(text) {
            if !params.split(';').any(is_rel_alternate) {
                continue;
            }
            let url = match &base {
                Some(b) => b.join(target).map(String::from).ok(),
                None => reqwest::Url::parse(target).map(String::from).ok(),
            };
            if let Some(url) = url
                && allowed_url(&url)
                && !out.contains(&url)
                && out.len() < MAX_ALTERNATES
            {
                out.push(url);
            }
        }
    }
    out
}

/// Whether one `Link` parameter is `rel` naming `alternate` among its relations.
fn is_rel_alternate(param: &str) -> bool {
    param.split_once('=').is_some_and(|(k, v)| {
        k.trim().eq_ignore_ascii_case("rel")
            && v.trim()
                .trim_matches('"')
                .split_ascii_whitespace()
                .any(|r| r.eq_ignore_ascii_case("alternate"))
    })
}

/// The `<target>` and parameter text of each value of one `Link` header line.
fn link_values(text: &str) -> Vec<(&str, &str)> {
    let mut out = Vec::new();
    let mut rest = text;
    while let Some(open) = rest.find('<') {
        let after = &rest[open + 1..];
        let Some(close) = after.find('>') else {
            break;
        };
        let tail = &after[close + 1..];
        let end = tail.find(',').unwrap_or(tail.len());
        out.push((&after[..close], &tail[..end]));
        rest = &tail[end..];
    }
    out
}

/// The certificates of a PEM chain, in order; `None` when it holds none or anything
/// unreadable.
fn chain_ders(pem: &str) -> Option<Vec<CertificateDer<'static>>> {
    let certs: Result<Vec<_>, _> = CertificateDer::pem_slice_iter(pem.as_bytes()).collect();
    certs.ok().filter(|c| !c.is_empty())
}

/// The Common Name of the issuer of a chain's topmost certificate (its last one).
pub fn top_issuer(pem: &str) -> Option<String> {
    let certs = chain_ders(pem)?;
    let top = certs.last()?;
    let (_, cert) = x509_parser::parse_x509_certificate(top.as_ref()).ok()?;
    let cn = cert.issuer().iter_common_name().next()?.as_str().ok()?;
    Some(cn.to_owned())
}

/// Whether `pem`'s topmost certificate was issued by the CA named `preferred`.
pub fn matches(pem: &str, preferred: &str) -> bool {
    top_issuer(pem).is_some_and(|cn| cn.trim().eq_ignore_ascii_case(preferred.trim()))
}

/// Among the chains offered (the default first), the one to install: the first whose topmost
/// certificate was issued by `preferred` and whose first certificate is the default chain's,
/// else the default.
pub fn choose<'a>(default: &'a str, alternates: &'a [String], preferred: &str) -> &'a str {
    if matches(default, preferred) {
        return default;
    }
    let Some(leaf) = chain_ders(default).and_then(|c| c.into_iter().next()) else {
        return default;
    };
    alternates
        .iter()
        .find(|alt| {
            matches(alt, preferred)
                && chain_ders(alt).and_then(|c| c.into_iter().next()).as_ref() == Some(&leaf)
        })
        .map_or(default, String::as_str)
}

/// A POST-as-GET session with the directory: its nonces.
struct Session<'a> {
    http: &'a AcmeHttp,
    signer: &'a Signer,
    new_nonce: String,
    nonce: Option<String>,
}

impl Session<'_> {
    async fn fresh_nonce(&mut self) -> Result<String, String> {
        if let Some(n) = self.nonce.take() {
            return Ok(n);
        }
        let answer = self
            .http
            .send(
                http::Method::HEAD,
                &self.new_nonce,
                &http::HeaderMap::new(),
                Bytes::new(),
            )
            .await?;
        replay_nonce(&answer.headers).ok_or_else(|| "the CA gave no nonce".to_owned())
    }

    /// POST-as-GET of `url`: the answer's headers and body; a `badNonce` is tried once more.
    async fn get(&mut self, url: &str) -> Result<(http::HeaderMap, Bytes), String> {
        let mut headers = http::HeaderMap::new();
        headers.insert(
            http::header::CONTENT_TYPE,
            http::HeaderValue::from_static("application/jose+json"),
        );
        for attempt in 0..2 {
            let nonce = self.fresh_nonce().await?;
            let body = self.signer.post_as_get(url, &nonce)?;
            let answer = self
                .http
                .send(http::Method::POST, url, &headers, Bytes::from(body))
                .await?;
            self.nonce = replay_nonce(&answer.headers);
            if answer.status.is_success() {
                return Ok((answer.headers, answer.body));
            }
            let problem = String::from_utf8_lossy(&answer.body);
            if attempt == 0 && problem.contains("urn:ietf:params:acme:error:badNonce") {
                continue;
            }
            return Err(format!(
                "{} answered {}: {}",
                quote_max(url, 200),
                answer.status,
                quote_max(&problem, 300)
            ));
        }
        Err(format!("{}: no fresh nonce accepted", quote_max(url, 200)))
    }
}

fn replay_nonce(headers: &http::HeaderMap) -> Option<String> {
    let n = headers.get("replay-nonce")?.to_str().ok()?;
    (!n.is_empty()
        && n.len() <= 256
        && n.bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_'))
    .then(|| n.to_owned())
}

/// The chain of the certificate at `cert_url` to install for `preferred`: `default` (the
/// chain the order's download gave) when its topmost issuer is `preferred`, else the first
/// matching alternate the CA offers for the same certificate, else `default`. The text says
/// why an alternate could not be read (the default chain is then the one to install).
pub async fn fetch_preferred(
    http: &AcmeHttp,
    signer: &Signer,
    directory_url: &str,
    cert_url: &str,
    default: String,
    preferred: &str,
) -> Result<String, (String, String)> {
    if matches(&default, preferred) {
        return Ok(default);
    }
    let fetched = async {
        let answer = http
            .send(
                http::Method::GET,
                directory_url,
                &http::HeaderMap::new(),
                Bytes::new(),
            )
            .await?;
        let dir: serde_json::Value = serde_json::from_slice(&answer.body)
            .map_err(|e| format!("the directory is not JSON ({e})"))?;
        let new_nonce = dir
            .get("newNonce")
            .and_then(serde_json::Value::as_str)
            .filter(|u| allowed_url(u))
            .ok_or_else(|| "the directory names no https:// newNonce".to_owned())?
            .to_owned();
        let mut session = Session {
            http,
            signer,
            new_nonce,
            nonce: None,
        };
        let (headers, _) = session.get(cert_url).await?;
        let mut alternates = Vec::new();
        for url in alternate_links(cert_url, &headers) {
            let (_, body) = session.get(&url).await?;
            let text = String::from_utf8(body.to_vec())
                .map_err(|_| format!("the chain at {} is not text", quote_max(&url, 200)))?;
            alternates.push(text);
        }
        Ok::<_, String>(alternates)
    }
    .await;
    match fetched {
        Ok(alternates) => {
            let chosen = choose(&default, &alternates, preferred).to_owned();
            Ok(chosen)
        }
        Err(why) => Err((default, why)),
    }
}

/// The signer of the account kept in `dir` (its URL and key), for the requests the ACME crate
/// does not make itself .
fn signer_in(dir: &Path) -> Result<Signer, AcmeError> {
    let path = dir.join(ACCOUNT_FILE);
    let file_error = |message: String| AcmeError::AccountFile {
        path: path.clone(),
        message,
    };
    let bytes = crate::fsutil::read_private(&path, 64 * 1024).map_err(file_error)?;
    let kept = parse_account_file(&bytes).map_err(file_error)?;
    let value = serde_json::to_value(&kept.credentials).map_err(|e| file_error(e.to_string()))?;
    let Some(id) = value.get("id").and_then(serde_json::Value::as_str) else {
        return Err(file_error("holds no account URL".into()));
    };
    let key = kept.credentials.private_key().secret_pkcs8_der();
    Signer::new(id.to_owned(), key).map_err(file_error)
}

/// The chain to install for `order` (valid, its default chain `default` downloaded): with
/// `preferred` set, the chain the CA offers whose topmost certificate was issued by that CA
/// ; the default chain when none matches, or when the alternates cannot be read
/// (said in the log: the certificate itself is the same).
pub async fn to_install(
    directory: &Directory,
    dir: &Path,
    order: &mut Order,
    default: String,
    preferred: &str,
) -> String {
    if matches(&default, preferred) {
        return default;
    }
    let Some(cert_url) = order.state().certificate.clone() else {
        return default;
    };
    let setup = AcmeHttp::new(directory.ca_file.as_deref())
        .map_err(|e| e.to_string())
        .and_then(|client| Ok((client, signer_in(dir).map_err(|e| e.to_string())?)));
    let (client, signer) = match setup {
        Ok(s) => s,
        Err(why) => {
            tracing::warn!("the default chain is kept: the offered chains cannot be read: {why}");
            return default;
        }
    };
    match fetch_preferred(
        &client,
        &signer,
        &directory.url,
        &cert_url,
        default,
        preferred,
    )
    .await
    {
        Ok(chosen) => {
            if !matches(&chosen, preferred) {
                tracing::info!(
                    "none of the chains offered for {} ends at a certificate issued by {}: the default chain is kept",
                    quote_max(&cert_url, 200),
                    quote_max(preferred, 64)
                );
            }
            chosen
        }
        Err((default, why)) => {
            tracing::warn!(
                "the default chain is kept: the chains offered for {} cannot be read: {why}",
                quote_max(&cert_url, 200)
            );
            default
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn headers(values: &[&str]) -> http::HeaderMap {
        let mut h = http::HeaderMap::new();
        for v in values {
            h.append(http::header::LINK, http::HeaderValue::from_str(v).unwrap());
        }
        h
    }

    #[test]
    fn alternate_links_are_read_resolved_and_bounded() {
        let base = "https://ca.example/cert/1";
        let h = headers(&[
            r#"<https://ca.example/cert/1/1>;rel="alternate", <https://ca.example/dir>;rel="index""#,
            r#"</cert/1/2> ; rel=alternate"#,
            r#"<https://ca.example/cert/1/1>;rel="alternate""#,
            r#"<http://evil.example/x>;rel="alternate""#,
            r#"<file:///etc/passwd>;rel="alternate""#,
            r#"<https://ca.example/up>;rel="up""#,
            "garbage <<<>>> ;;; rel=",
        ]);
        assert_eq!(
            alternate_links(base, &h),
            vec![
                "https://ca.example/cert/1/1".to_owned(),
                "https://ca.example/cert/1/2".to_owned()
            ]
        );
        let many: Vec<String> = (0..50)
            .map(|i| format!("<https://ca.example/c/{i}>;rel=\"alternate\""))
            .collect();
        let refs: Vec<&str> = many.iter().map(String::as_str).collect();
        assert_eq!(alternate_links(base, &headers(&refs)).len(), MAX_ALTERNATES);
        assert!(alternate_links(base, &headers(&[])).is_empty());
    }

    /// A chain of a leaf and an intermediate issued by a root named `root_cn`, sharing `leaf`.
    fn chain(leaf: &str, root_cn: &str) -> String {
        use rcgen::{BasicConstraints, CertificateParams, DnType, IsCa, Issuer, KeyPair};
        let root_key = KeyPair::generate().unwrap();
        let mut root = CertificateParams::default();
        root.distinguished_name.push(DnType::CommonName, root_cn);
        root.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
        let root_issuer = Issuer::new(root, root_key);
        let inter_key = KeyPair::generate().unwrap();
        let mut inter = CertificateParams::default();
        inter
            .distinguished_name
            .push(DnType::CommonName, "Intermediate");
        inter.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
        let inter_cert = inter.signed_by(&inter_key, &root_issuer).unwrap();
        format!("{leaf}{}", inter_cert.pem())
    }

    fn leaf() -> String {
        let key = rcgen::KeyPair::generate().unwrap();
        rcgen::CertificateParams::new(vec!["a.example".into()])
            .unwrap()
            .self_signed(&key)
            .unwrap()
            .pem()
    }

    #[test]
    fn the_preferred_chain_is_chosen_only_for_the_same_certificate() {
        let leaf = leaf();
        let default = chain(&leaf, "Root A");
        let alt = chain(&leaf, "Root B");
        let other_leaf = chain(&self::leaf(), "Root C");
        assert_eq!(top_issuer(&default).as_deref(), Some("Root A"));
        assert_eq!(choose(&default, &[], "Root A"), default);
        let alternates = [other_leaf.clone(), alt.clone()];
        assert_eq!(choose(&default, &alternates, "root b"), alt);
        // Another certificate under the preferred name is never taken.
        assert_eq!(choose(&default, &[other_leaf], "Root C"), default);
        // No match keeps the default; garbage is no match.
        assert_eq!(choose(&default, &alternates, "Root Z"), default);
        assert_eq!(
            choose(&default, &["garbage".into(), String::new()], "Root B"),
            default
        );
        assert_eq!(top_issuer("not a chain"), None);
    }

    #[test]
    fn a_post_as_get_is_signed_with_the_account_key() {
        let rng = SystemRandom::new();
        let pkcs8 = EcdsaKeyPair::generate_pkcs8(&ECDSA_P256_SHA256_FIXED_SIGNING, &rng).unwrap();
        let signer = Signer::new("https://ca.example/acct/1".into(), pkcs8.as_ref()).unwrap();
        let body = signer
            .post_as_get("https://ca.example/cert/1", "n0nce")
            .unwrap();
        let jws: serde_json::Value = serde_json::from_slice(&body).unwrap();
        assert_eq!(jws["payload"], "");
        let protected = URL_SAFE_NO_PAD
            .decode(jws["protected"].as_str().unwrap())
            .unwrap();
        let protected: serde_json::Value = serde_json::from_slice(&protected).unwrap();
        assert_eq!(protected["alg"], "ES256");
        assert_eq!(protected["kid"], "https://ca.example/acct/1");
        assert_eq!(protected["nonce"], "n0nce");
        let sig = URL_SAFE_NO_PAD
            .decode(jws["signature"].as_str().unwrap())
            .unwrap();
        use aws_lc_rs::signature::{ECDSA_P256_SHA256_FIXED, KeyPair, UnparsedPublicKey};
        let key =
            EcdsaKeyPair::from_pkcs8(&ECDSA_P256_SHA256_FIXED_SIGNING, pkcs8.as_ref()).unwrap();
        let message = format!("{}.", jws["protected"].as_str().unwrap());
        UnparsedPublicKey::new(&ECDSA_P256_SHA256_FIXED, key.public_key().as_ref())
            .verify(message.as_bytes(), &sig)
            .expect("the signature verifies");
        assert!(Signer::new("k".into(), b"not a key").is_err());
    }

    #[test]
    fn only_a_plain_nonce_is_taken() {
        let mut h = http::HeaderMap::new();
        assert_eq!(replay_nonce(&h), None);
        h.insert("replay-nonce", http::HeaderValue::from_static("abc-DEF_1"));
        assert_eq!(replay_nonce(&h).as_deref(), Some("abc-DEF_1"));
        h.insert("replay-nonce", http::HeaderValue::from_static("a b"));
        assert_eq!(replay_nonce(&h), None);
    }
}
