//! An order intent whose order was never placed. The leader shares its intent before it sends
//! the order; when the order is then not placed — the API refused it, or the request was
//! kept back by the lead's send guard because the lead ended first (a leader paused or cut
//! off) — the shared intent must not make the next leader wait for an order that does not
//! exist. A leader that still leads shares the record without the intent; one that lost the
//! lead cannot, and notes the intent instead under its own `hosts/HOST/unplaced/NAME`
//! (sealed, like every value). The next leader that imports a record holding that intent
//! without an order withdraws it and orders normally: the note proves the order was never
//! sent, because only the host that records an intent ever sends its order, at once, and
//! never after its guard refused it.
//!
//! The note names the intent (its CSR's hash, common name and time), so it withdraws that
//! intent only: an older note put back, or one moved to another certificate or host, does
//! nothing.

use anyhow::Result;

use crate::store::OrderIntent;

use super::envelope::{self, Place, Purpose};
use super::link::FleetLink;
use super::schema::{Unplaced, unplaced_key};

/// Notes under this host's part of the fleet that `intent` of `name` was never placed.
pub(super) async fn note(link: &FleetLink, name: &str, intent: &OrderIntent) {
    let rel = unplaced_key(link.fleet.host(), name);
    let place = Place::new(Purpose::Unplaced, &rel, name);
    let version = u64::try_from(intent.created_at.unix_timestamp()).unwrap_or(0);
    let sealed = match envelope::seal_json(&link.key, &place, version, &Unplaced::of(intent)) {
        Ok(s) => s,
        Err(e) => {
            tracing::warn!(certificate = %name, "{e:#}");
            return;
        }
    };
    match link.fleet.put_own(&rel, sealed).await {
        Ok(()) => tracing::warn!(
            certificate = %name,
            "noted in {} that the order intent was never placed: the next leader withdraws it",
            link.fleet.key(&rel)
        ),
        Err(e) => tracing::warn!(
            certificate = %name,
            "could not note that the order intent was never placed ({e}); the next leader \
             reconciles it from the certificate list"
        ),
    }
}

/// The host that noted `intent` of `name` as never placed, if one did. A note that does not
/// open is skipped (logged): it withdraws nothing.
pub(super) async fn noted_by(
    link: &FleetLink,
    name: &str,
    intent: &OrderIntent,
) -> Result<Option<String>> {
    let wanted = Unplaced::of(intent);
    // Each host's notes of this name only: its results and proofs are under `hosts/` too.
    for (rel, value) in link.fleet.hosts_under(&format!("unplaced/{name}")).await? {
        let parts: Vec<&str> = rel.split('/').collect();
        let ["hosts", host, "unplaced", of] = parts.as_slice() else {
            continue;
        };
        if *of != name {
            continue;
        }
        let place = Place::new(Purpose::Unplaced, &rel, name);
        match envelope::open_json::<Unplaced>(&link.key, &link.fleet, &place, &value) {
            Ok((_, doc)) if doc == wanted => return Ok(Some((*host).to_owned())),
            Ok(_) => {}
            Err(e) => tracing::warn!(certificate = %name, "{e:#}; not taken into account"),
        }
    }
    Ok(None)
}
