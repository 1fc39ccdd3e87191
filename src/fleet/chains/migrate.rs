//! The leader's rewrite in place of the `current` values a version before `chains/` wrote
//! (the Partner API's archive, or an ACME CA's whole chain): each written again in the chain
//! format at the next version, with the same certificate, serial and key, so that a host that
//! serves it accepts the new version and installs nothing. A leader reads every current value
//! once for it, and again after its host accepted a value in the old format (a host of the
//! earlier version led meanwhile); both are recorded in `fleet-versions.json`. A value it could
//! not rewrite (it no longer passes the checks: expired, say) is reported and rewritten at its
//! next publication; a pass a failed write ended (etcd, the lead) is taken up by the next lead.

use std::cell::RefCell;
use std::collections::BTreeSet;

use anyhow::{Context, Result, anyhow, bail};

use crate::config::{CertificateConfig, Config};
use crate::crypto::PrivateKey;
use crate::engine::deploy::{self, Checked};

use crate::fleet::coord::{Expect, Leadership, Written};
use crate::fleet::envelope::{self, Place, Purpose};
use crate::fleet::link::FleetLink;
use crate::fleet::schema::{Current, b64, current_key, unb64};
use crate::fleet::versions::Versions;

use super::{is_old, split, store};

/// Values read at once.
const CHUNK: usize = 100;

/// As the leader: rewrites each configured certificate's `current` value still in the old
/// format (see the module's documentation); how many it rewrote. A value that no longer passes
/// the checks is reported and left for its next publication; a write that fails (etcd, the
/// lead) ends the pass, which the next lead takes up again.
pub(crate) async fn migrate(
    link: &FleetLink,
    lead: &Leadership,
    config: &Config,
    versions: &RefCell<Versions>,
    known: &RefCell<BTreeSet<String>>,
) -> usize {
    if super::as_before() || versions.borrow().chains_migrated() {
        return 0;
    }
    let (mut rewritten, mut left) = (0, 0);
    for chunk in config.certificates.chunks(CHUNK) {
        let keys: Vec<String> = chunk.iter().map(|c| current_key(&c.name)).collect();
        let values = match link.fleet.read_fresh(&keys, |_| None).await {
            Ok(v) => v,
            Err(e) => {
                tracing::warn!("fleet: the current values to rewrite in the chain format: {e}");
                return rewritten;
            }
        };
        for cert in chunk {
            let Some((value, rev)) = values.get(&current_key(&cert.name)) else {
                continue;
            };
            let rewrite = match checked(link, cert, value) {
                Ok(Some(r)) => r,
                Ok(None) => continue,
                Err(e) => {
                    left += 1;
                    tracing::warn!(certificate = %cert.name, "fleet: not rewritten in the chain format: {e:#}");
                    continue;
                }
            };
            if let Err(e) = write(link, lead, cert, (rewrite, *rev), versions, known).await {
                tracing::warn!(certificate = %cert.name, "fleet: the rewrite in the chain format stops here: {e:#}");
                return rewritten;
            }
            rewritten += 1;
        }
    }
    versions.borrow_mut().set_chains_migrated(true);
    if left > 0 {
        tracing::warn!(
            left,
            "fleet: current values left in the archive format until their next publication"
        );
    }
    if rewritten > 0 {
        tracing::info!(
            rewritten,
            "fleet: current values rewritten in the chain format"
        );
    }
    rewritten
}

/// A value in the old format, opened and checked.
struct Rewrite {
    version: u64,
    before: Current,
    key_pem: Vec<u8>,
    leaf: String,
    ders: Vec<Vec<u8>>,
}

/// The value of `cert`, opened and checked, when it is in the old format (`None`: it is not).
fn checked(link: &FleetLink, cert: &CertificateConfig, value: &[u8]) -> Result<Option<Rewrite>> {
    let rel = current_key(&cert.name);
    let what = link.fleet.key(&rel);
    let place = Place::new(Purpose::Current, &rel, &cert.name);
    let (version, before): (u64, Current) =
        envelope::open_json(&link.key, &link.fleet, &place, value)?;
    if !is_old(&before) {
        return Ok(None);
    }
    let key_place = Place::new(Purpose::CurrentKey, &rel, &cert.name);
    let (at, key_pem) = envelope::open(
        &link.key,
        &link.fleet,
        &key_place,
        &unb64("key", &before.key)?,
    )?;
    if at != version || before.version != version {
        bail!("the key in {what} is of version {at}, not {version}; refused");
    }
    let key = PrivateKey::from_pem(&key_pem, "the fleet's record")
        .with_context(|| format!("the fleet's key of certificate '{}'", cert.name))?;
    let archive = unb64("archive", &before.archive)?;
    let now = link.clock.now();
    let checked = match &before.chain {
        Some(chain) if archive.is_empty() => deploy::check_chain(cert, chain.as_bytes(), &key, now),
        _ => deploy::check_archive(cert, &archive, &key, now),
    }
    .with_context(|| format!("the fleet's certificate {what}"))?;
    let (Checked::Valid(bundle) | Checked::NotYet(bundle)) = checked;
    let (leaf, ders) = split(&bundle)?;
    Ok(Some(Rewrite {
        version,
        before,
        key_pem,
        leaf,
        ders,
    }))
}

/// Writes `r` in the chain format at the next version, over the value read at `rev`.
async fn write(
    link: &FleetLink,
    lead: &Leadership,
    cert: &CertificateConfig,
    (r, rev): (Rewrite, i64),
    versions: &RefCell<Versions>,
    known: &RefCell<BTreeSet<String>>,
) -> Result<()> {
    let rel = current_key(&cert.name);
    let what = link.fleet.key(&rel);
    let intermediates = store(link, lead, &r.ders, known).await?;
    let next = versions.borrow().next_current(&cert.name, r.version)?;
    let key_place = Place::new(Purpose::CurrentKey, &rel, &cert.name);
    let sealed_key = envelope::seal(&link.key, &key_place, next, &r.key_pem)?;
    let doc = Current {
        version: next,
        archive: String::new(),
        chain: Some(r.leaf),
        intermediates,
        key: b64(&sealed_key),
        ..r.before
    };
    let place = Place::new(Purpose::Current, &rel, &cert.name);
    let sealed = envelope::seal_json(&link.key, &place, next, &doc)?;
    match lead
        .put(&rel, sealed.clone(), Expect::Revision(rev))
        .await?
    {
        Written::Done(at) => {
            let mut v = versions.borrow_mut();
            v.accept_current(
                &cert.name,
                &what,
                next,
                &sealed,
                &doc.serial,
                doc.not_before,
            )?;
            v.wrote_current(&cert.name, at);
            tracing::info!(certificate = %cert.name, version = next, "rewritten in the chain format");
            Ok(())
        }
        Written::Conflict(_) => Err(anyhow!("{what} changed while this host rewrote it")),
    }
}
