//! `chains/SHA256`: the issuer certificates of the fleet's chains (intermediates, and a root a
//! bundle carries), each stored once per fleet under the SHA-256 of its DER and sealed for that
//! key. A certificate's `current` value holds its leaf and names its issuers by hash
//! ([`Current::intermediates`](super::schema::Current)), so that the certificates of one CA do
//! not each carry the same intermediates.
//!
//! A value is the certificate's DER, sealed for its key ([`Purpose::ChainCert`]): moved to
//! another hash's key it does not open, and what opens must hash to its key. It is immutable
//! (the same hash, the same bytes): the leader creates it when absent, and writes it again only
//! when what etcd holds there does not open to it, at a higher version. A host keeps the
//! highest version it opened of each (`fleet-versions.json`), so that an older sealed value put
//! back is refused as a replay. A host opening the fleet's certificates reads each value once
//! per synchronisation ([`Intermediates`]), however many certificates name it.

use std::collections::{BTreeMap, BTreeSet};

use anyhow::{Result, anyhow, bail};
use rustls_pki_types::CertificateDer;
use rustls_pki_types::pem::PemObject;
use sha2::{Digest, Sha256};

use crate::bundle::ValidatedBundle;
use crate::crypto::pem_encode;

use super::coord::{Expect, Leadership, Written};
use super::envelope::{self, Place, Purpose};
use super::key::FleetKeys;
use super::link::FleetLink;
use super::schema::chain_key;
use super::versions::Versions;

mod migrate;

pub(super) use migrate::migrate;

/// The most issuer certificates a certificate's chain names (a chain holds at most ten
/// certificates with its leaf).
pub(super) const MAX_NAMED: usize = 9;

/// The hex SHA-256 of `der` (lower case): the key it is stored under.
pub(super) fn hash_of(der: &[u8]) -> String {
    hex::encode(Sha256::digest(der))
}

/// Whether `hash` is a hash this module writes (64 lower-case hex digits).
pub(super) fn is_hash(hash: &str) -> bool {
    hash.len() == 64 && hash.bytes().all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f'))
}

/// The place of the value of `hash` (`rel`: its key).
fn place<'a>(rel: &'a str, hash: &'a str) -> Place<'a> {
    Place::new(Purpose::ChainCert, rel, hash)
}

/// A checked bundle as the fleet shares it: its leaf (PEM), and its issuer certificates in
/// chain order (DER), nearest first, with the root last when the bundle holds one.
pub(super) fn split(bundle: &ValidatedBundle) -> Result<(String, Vec<Vec<u8>>)> {
    let mut issuers = bundle.chain_der.clone();
    if let Some(root) = &bundle.root_pem {
        let der = CertificateDer::from_pem_slice(root.as_bytes())
            .map_err(|e| anyhow!("the bundle's root does not read back as PEM: {e}"))?;
        issuers.push(der.as_ref().to_vec());
    }
    if issuers.len() > MAX_NAMED {
        bail!(
            "the chain holds {} issuer certificates, more than the {MAX_NAMED} the fleet shares",
            issuers.len()
        );
    }
    Ok((bundle.leaf_pem.clone(), issuers))
}

/// The chain (PEM) of `leaf` and the issuer certificates `ders`, in order.
pub(super) fn chain_pem(leaf: &str, ders: &[&[u8]]) -> String {
    let mut out = leaf.to_owned();
    if !out.ends_with('\n') {
        out.push('\n');
    }
    for der in ders {
        out.push_str(&pem_encode("CERTIFICATE", der));
    }
    out
}

/// Seals `der` for its key at `version`.
pub(super) fn seal(keys: &FleetKeys, der: &[u8], version: u64) -> Result<(String, Vec<u8>)> {
    let hash = hash_of(der);
    let rel = chain_key(&hash);
    let sealed = envelope::seal(keys, &place(&rel, &hash), version, der)?;
    Ok((rel, sealed))
}

/// Opens the value `sealed` read at `chains/HASH`: its version and the certificate's DER,
/// which hashes to `hash`. Why it does not is said without the key (the caller names it).
pub(super) fn open_raw(
    keys: &FleetKeys,
    hash: &str,
    sealed: &[u8],
) -> Result<(u64, Vec<u8>), String> {
    if !is_hash(hash) {
        return Err("is not at the key of a SHA-256".to_owned());
    }
    let rel = chain_key(hash);
    let (version, der, _) = envelope::open_raw(keys, &place(&rel, hash), sealed)?;
    let got = hash_of(&der);
    if got != hash {
        return Err(format!(
            "opens to a certificate of SHA-256 {got}, not its key's (a value sealed for \
             another certificate)"
        ));
    }
    Ok((version, der))
}

/// For the tests of a fleet: the value `sealed` at `rel` (relative to the prefix) opened with
/// the fleet key `secret`: its version and what it holds (`None`: it does not open, or `rel`
/// is no key the fleet writes).
pub fn open_value(secret: &[u8], rel: &str, sealed: &[u8]) -> Option<(u64, Vec<u8>)> {
    let keys = FleetKeys::new(super::key::FleetKey::from_bytes(secret)?, None);
    let kind = super::schema::Kind::of(rel)?;
    envelope::open_raw(&keys, &kind.place(rel), sealed)
        .ok()
        .map(|(version, plain, _)| (version, plain))
}

/// For the tests of a fleet: `plain` sealed at `rel` (relative to the prefix) at `version`
/// under the fleet key `secret` (`None`: `rel` is no key the fleet writes).
pub fn seal_value(secret: &[u8], rel: &str, version: u64, plain: &[u8]) -> Option<Vec<u8>> {
    let keys = FleetKeys::new(super::key::FleetKey::from_bytes(secret)?, None);
    let kind = super::schema::Kind::of(rel)?;
    envelope::seal(&keys, &kind.place(rel), version, plain).ok()
}

/// Each issuer certificate read and opened in one synchronisation, by hash: its DER, or why it
/// is refused (naming its key).
#[derive(Debug, Default)]
pub(super) struct Intermediates {
    found: BTreeMap<String, Result<Vec<u8>, String>>,
}

impl Intermediates {
    /// Reads, opens and checks each of `hashes` not read yet in this synchronisation; a value
    /// at a lower version than one this host opened before is refused (a replay).
    pub(super) async fn fetch(
        &mut self,
        link: &FleetLink,
        versions: &mut Versions,
        hashes: impl IntoIterator<Item = String>,
    ) -> Result<()> {
        let wanted: BTreeSet<String> = hashes
            .into_iter()
            .filter(|h| !self.found.contains_key(h))
            .collect();
        for hash in wanted {
            let rel = chain_key(&hash);
            let what = link.fleet.key(&rel);
            let found = match link.fleet.get(&rel).await? {
                None => Err(format!(
                    "the fleet's intermediate certificate {what} is missing; refused"
                )),
                Some((sealed, _)) => match open_raw(&link.key, &hash, &sealed) {
                    Err(why) => Err(format!(
                        "the fleet's intermediate certificate {what} {why}; refused (a value \
                         written without the fleet key, moved from another key, or altered)"
                    )),
                    Ok((version, der)) => match versions.accept_chain(&hash, version) {
                        Ok(()) => Ok(der),
                        Err(floor) => Err(format!(
                            "the fleet's intermediate certificate {what} is of version \
                             {version}, older than version {floor} this host opened before; \
                             refused (an older value put back)"
                        )),
                    },
                },
            };
            self.found.insert(hash, found);
        }
        Ok(())
    }

    /// The chain (PEM) of `leaf` and the issuer certificates `hashes` names, each read by
    /// [`fetch`](Self::fetch).
    pub(super) fn chain(&self, leaf: &str, hashes: &[String]) -> Result<String> {
        if hashes.len() > MAX_NAMED {
            bail!(
                "it names {} intermediate certificates, more than {MAX_NAMED}; refused",
                hashes.len()
            );
        }
        let mut ders = Vec::with_capacity(hashes.len());
        for hash in hashes {
            match self.found.get(hash) {
                Some(Ok(der)) => ders.push(der.as_slice()),
                Some(Err(why)) => bail!("{why}"),
                None => bail!(
                    "it names the intermediate certificate {}, which was not read",
                    chain_key(&crate::values::text::quote_max(hash, 64))
                ),
            }
        }
        Ok(chain_pem(leaf, &ders))
    }
}

/// Whether `current` is in the format of a version before `chains/` (the archive, or an ACME
/// CA's whole chain).
pub(super) fn is_old(current: &super::schema::Current) -> bool {
    !current.archive.is_empty() || (current.chain.is_some() && current.intermediates.is_empty())
}

/// What a `current` value holds of a certificate's chain: the archive (base64), the chain or
/// leaf (PEM), and the hashes of the issuer certificates stored at `chains/`.
pub(super) struct Shared {
    pub(super) archive: String,
    pub(super) chain: Option<String>,
    pub(super) intermediates: Vec<String>,
}

/// Whether this leader publishes as a version before `chains/` did (the archive, or an ACME
/// CA's whole chain): in debug builds, `CERT_AGENT_TEST_FLEET_ARCHIVE=1`, for the tests of a
/// fleet whose hosts are of both versions.
fn as_before() -> bool {
    cfg!(debug_assertions)
        && std::env::var("CERT_AGENT_TEST_FLEET_ARCHIVE").is_ok_and(|v| v.trim() == "1")
}

/// What the fleet's `current` value of `cert` holds of the installed certificate `r`: its
/// checked chain split into the leaf and its issuer certificates, each stored at
/// `chains/SHA256` ([`store`]).
pub(super) async fn shared_form(
    link: &FleetLink,
    lead: &Leadership,
    cert: &crate::config::CertificateConfig,
    r: &crate::engine::Installable,
    known: &std::cell::RefCell<BTreeSet<String>>,
) -> Result<Shared> {
    use crate::engine::deploy::{self, Checked};
    if as_before() {
        return Ok(Shared {
            archive: super::schema::b64(&r.archive),
            chain: r
                .chain
                .as_ref()
                .map(|c| String::from_utf8_lossy(c).into_owned()),
            intermediates: Vec::new(),
        });
    }
    let key = crate::crypto::PrivateKey::from_pem(&r.key_pem, "the installed certificate")?;
    let now = link.clock.now();
    let checked = match &r.chain {
        _ if !r.archive.is_empty() => deploy::check_archive(cert, &r.archive, &key, now),
        Some(chain) => deploy::check_chain(cert, chain, &key, now),
        None => bail!(
            "certificate '{}': no archive and no chain to share",
            cert.name
        ),
    }
    .map_err(|e| anyhow!("certificate '{}': its chain to share: {e:#}", cert.name))?;
    let (Checked::Valid(bundle) | Checked::NotYet(bundle)) = checked;
    let (leaf, ders) = split(&bundle)?;
    let intermediates = store(link, lead, &ders, known).await?;
    Ok(Shared {
        archive: String::new(),
        chain: Some(leaf),
        intermediates,
    })
}

/// Stores each of `ders` at its key for the fleet, as the leader (fenced), unless this run
/// stored or found it already (`known`): created when absent, and written again at a higher
/// version when the value there does not open to it. Returns the hashes, in order.
pub(super) async fn store(
    link: &FleetLink,
    lead: &Leadership,
    ders: &[Vec<u8>],
    known: &std::cell::RefCell<BTreeSet<String>>,
) -> Result<Vec<String>> {
    let mut hashes = Vec::with_capacity(ders.len());
    for der in ders {
        let hash = hash_of(der);
        if !known.borrow().contains(&hash) {
            store_one(link, lead, &hash, der).await?;
            known.borrow_mut().insert(hash.clone());
        }
        hashes.push(hash);
    }
    Ok(hashes)
}

/// [`store`] of one certificate.
async fn store_one(link: &FleetLink, lead: &Leadership, hash: &str, der: &[u8]) -> Result<()> {
    let rel = chain_key(hash);
    let expect = match link.fleet.get(&rel).await? {
        None => (Expect::Absent, 1),
        Some((sealed, rev)) => match open_raw(&link.key, hash, &sealed) {
            Ok(_) => return Ok(()),
            Err(why) => {
                tracing::warn!(
                    "the fleet's intermediate certificate {} {why}; written again",
                    link.fleet.key(&rel)
                );
                // Above the version it names and above the clock's seconds: higher than any
                // version a host may have opened before.
                let named = sealed
                    .get(1..9)
                    .and_then(|b| <[u8; 8]>::try_from(b).ok())
                    .map_or(0, u64::from_be_bytes);
                let now = u64::try_from(link.clock.now().unix_timestamp()).unwrap_or(0);
                (Expect::Revision(rev), named.max(now).saturating_add(1))
            }
        },
    };
    let (expect, version) = expect;
    let (_, sealed) = seal(&link.key, der, version)?;
    match lead.put(&rel, sealed, expect).await? {
        Written::Done(_) => Ok(()),
        // Written by a publication of this run at the same time: the same bytes, if it opens.
        Written::Conflict(_) => match link.fleet.get(&rel).await? {
            Some((sealed, _)) if open_raw(&link.key, hash, &sealed).is_ok() => Ok(()),
            _ => bail!(
                "the fleet's intermediate certificate {} changed while this host wrote it; the \
                 next run writes it again",
                link.fleet.key(&rel)
            ),
        },
    }
}

#[cfg(test)]
mod tests {
    use super::super::key::{FleetKey, KEY_LEN};
    use super::*;

    fn keys(byte: u8) -> FleetKeys {
        FleetKeys::new(FleetKey::from_bytes(&[byte; KEY_LEN]).unwrap(), None)
    }

    #[test]
    fn a_value_opens_only_at_its_own_hash_under_the_fleet_key() {
        let der = b"not a certificate, but bytes with a hash".to_vec();
        let hash = hash_of(&der);
        let (rel, sealed) = seal(&keys(1), &der, 3).unwrap();
        assert_eq!(rel, format!("chains/{hash}"));
        assert_eq!(open_raw(&keys(1), &hash, &sealed), Ok((3, der.clone())));
        // Another fleet key.
        assert!(open_raw(&keys(2), &hash, &sealed).is_err());
        // Moved to another hash's key.
        let other = hash_of(b"another");
        let err = open_raw(&keys(1), &other, &sealed).unwrap_err();
        assert!(err.contains("does not open"), "{err}");
        // Sealed for its key, holding another certificate's bytes.
        let forged = envelope::seal(&keys(1), &place(&chain_key(&other), &other), 1, &der).unwrap();
        let err = open_raw(&keys(1), &other, &forged).unwrap_err();
        assert!(err.contains("another certificate"), "{err}");
        // Garbage, and a key that is no hash.
        assert!(open_raw(&keys(1), &hash, b"garbage").is_err());
        let err = open_raw(&keys(1), "../x", &sealed).unwrap_err();
        assert!(err.contains("SHA-256"), "{err}");
        assert!(!is_hash(&hash.to_ascii_uppercase()));
    }

    #[test]
    fn a_chain_is_the_leaf_then_each_issuer_named_and_refuses_what_was_not_opened() {
        let mut found = Intermediates::default();
        found.found.insert("a".repeat(64), Ok(vec![1, 2, 3]));
        found.found.insert("b".repeat(64), Err("refused: b".into()));
        let pem = found.chain("LEAF\n", &["a".repeat(64)]).unwrap();
        assert!(
            pem.starts_with("LEAF\n-----BEGIN CERTIFICATE-----\nAQID\n"),
            "{pem}"
        );
        let err = found
            .chain("LEAF\n", &["a".repeat(64), "b".repeat(64)])
            .unwrap_err();
        assert_eq!(err.to_string(), "refused: b");
        let err = found.chain("LEAF\n", &["c".repeat(64)]).unwrap_err();
        assert!(err.to_string().contains("was not read"), "{err}");
        let many = vec!["a".repeat(64); MAX_NAMED + 1];
        assert!(found.chain("LEAF\n", &many).is_err());
    }
}
