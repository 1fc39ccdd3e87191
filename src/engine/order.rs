//! Placing the billed order of a configured certificate exactly once.
//!
//! The sequence is crash safe at every step:
//! 1. a key and CSR are generated and the key is saved (0600) before anything is sent;
//! 2. the order *intent* (CSR SHA-256, common name, time) is saved and fsynced;
//! 3. `POST /api/v1/order` is sent once — never repeated automatically;
//! 4. the certificate and order IDs are saved and the intent cleared.
//!
//! A crash or lost answer between 2 and 4 leaves the intent. The next run then *reconciles*:
//! it searches the certificate list for the common name, reads the CSR of each candidate and
//! adopts the one whose CSR is ours. Until that succeeds, no new order is placed for the
//! certificate; the operator can clear the intent explicitly when the list proves that nothing
//! was ordered.

use anyhow::{Context, Result, anyhow, bail};
use time::OffsetDateTime;

use crate::api::{self, ApiError, CertificateState, Client, Decimal, Product};
use crate::config::Config;
use crate::crypto::CsrInfo;
use crate::store::{OrderIntent, OrderRef, PartnerStage, Store};

use super::job::Job;
use super::keys;
use super::lead::Lead;

mod request;

use request::{check_clock, check_names, check_price};
pub(crate) use request::{order_request, period_years};

/// Most candidates whose details are read while reconciling one intent.
const MAX_RECONCILE_DETAILS: usize = 25;

/// Why an order was not placed; each is a refusal the operator can act on.
#[derive(Debug, thiserror::Error)]
pub(crate) enum OrderRefusal {
    #[error(
        "certificate '{name}' has no order yet and placing one is billed: run \
         `cert-agent issue {name} --yes`, or set `allow_orders = true` in [agent]"
    )]
    NotAllowed { name: String },
    #[error(
        "certificate '{name}': product {product_id} is not in the product list of this account"
    )]
    UnknownProduct { name: String, product_id: u64 },
    #[error(
        "certificate '{name}': product {product_id} has no price for {years} year(s), so \
         max_order_price ({max}) cannot be checked"
    )]
    NoPrice {
        name: String,
        product_id: u64,
        years: u32,
        max: String,
    },
    #[error(
        "certificate '{name}': product {product_id} costs {price} for {years} year(s), more than \
         max_order_price ({max})"
    )]
    TooExpensive {
        name: String,
        product_id: u64,
        years: u32,
        price: String,
        max: String,
    },
    #[error(
        "certificate '{name}': this host's clock says {local} but the API's says {api}; no order \
         is placed while they disagree by more than an hour (fix the clock, e.g. with NTP)"
    )]
    ClockSkew {
        name: String,
        local: String,
        api: String,
    },
    #[error("certificate '{name}': product {product_id} ({kind}) cannot cover {names}: {why}")]
    NamesDoNotFit {
        name: String,
        product_id: u64,
        kind: String,
        names: String,
        why: String,
    },
    #[error(
        "certificate '{name}': an order sent at {sent} may have been placed, but no order with \
         this certificate's CSR is in the certificate list yet. No new order is placed while \
         this is unresolved. Run again later; if `cert-agent list --q {cn}` proves that nothing \
         was ordered, clear it with `cert-agent issue {name} --yes --clear-intent`"
    )]
    Unreconciled {
        name: String,
        cn: String,
        sent: String,
    },
    #[error(
        "certificate '{name}': {count} orders carry this certificate's CSR (IDs {ids}); adopt \
         the right one with `cert-agent adopt {name} --certificate-id ID`"
    )]
    Ambiguous {
        name: String,
        count: usize,
        ids: String,
    },
}

/// The outcome of [`ensure_order`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Ordered {
    /// The record already had its order.
    Existing(u64),
    /// An order was placed by this call.
    Placed(u64),
    /// A lost order was found in the list and adopted.
    Reconciled(u64),
}

impl Ordered {
    pub(crate) fn certificate_id(self) -> u64 {
        match self {
            Self::Existing(id) | Self::Placed(id) | Self::Reconciled(id) => id,
        }
    }
}

/// What the report says of a billed order this run placed: the order, the product, the
/// period, the catalogue price, and what it replaces (an order annulled after its certificate
/// was revoked, an ended subscription).
fn announcement(
    job: &Job<'_>,
    product: &Product,
    price: Option<&Decimal>,
    resp: &api::OrderResponse,
) -> String {
    let revoked = job
        .revocation
        .as_ref()
        .is_some_and(|r| r.state == "revoked")
        || job
            .rec
            .installed
            .as_ref()
            .zip(job.rec.revocation.as_ref())
            .is_some_and(|(i, r)| r.revokes(&i.serial));
    let why = match (job.rec.partner.renews, revoked) {
        (Some(old), true) => {
            format!(" to replace order {old}, ended after its certificate was revoked")
        }
        (Some(old), false) => format!(" to replace order {old}"),
        (None, true) => " to replace the revoked certificate".to_owned(),
        (None, false) => String::new(),
    };
    let years = period_years(job.cert.order.days);
    format!(
        "placed a billed order{why}: certificate {}, order {}, product {}{}, {years} year{}, {}",
        resp.certificate,
        resp.order,
        product.id,
        product
            .name
            .as_deref()
            .map(|n| format!(" ({})", crate::values::text::printable(n)))
            .unwrap_or_default(),
        if years == 1 { "" } else { "s" },
        match price {
            Some(p) => format!("price {p} (the catalogue's, in the account currency)"),
            None => "price not in the catalogue".to_owned(),
        }
    )
}

/// The product list, read at most once per run (prices and product types for every order).
#[derive(Debug, Default)]
pub(crate) struct ProductCache(tokio::sync::OnceCell<Vec<Product>>);

impl ProductCache {
    pub(super) async fn get(&self, client: &Client) -> Result<&[Product]> {
        self.0
            .get_or_try_init(|| client.products(false))
            .await
            .map(Vec::as_slice)
            .context("could not read the product list to check the order")
    }
}

/// Ensures the job's record has an order: reconciles a pending intent, or places the order
/// when allowed. Saves the record (and journals) after every step, through the job.
pub(super) async fn ensure_order(
    config: &Config,
    client: &Client,
    products: &ProductCache,
    job: &mut Job<'_>,
    allow: bool,
    now: OffsetDateTime,
    lead: Option<&dyn Lead>,
) -> Result<Ordered> {
    let cert = job.cert;
    if let Some(known) = known_order(job, client).await? {
        return Ok(known);
    }
    if !allow {
        return Err(OrderRefusal::NotAllowed {
            name: cert.name.clone(),
        }
        .into());
    }

    let products = products.get(client).await?;
    let product = products
        .iter()
        .find(|p| p.id == cert.order.product_id)
        .ok_or_else(|| OrderRefusal::UnknownProduct {
            name: cert.name.clone(),
            product_id: cert.order.product_id,
        })?;
    check_names(cert, product)?;
    let price = check_price(config, cert, product)?;
    check_clock(cert, client, now)?;
    let ids = super::preflight::product_identities(config, product);
    super::preflight::email_gate(config, job, now, "order")?;
    super::preflight::gate(config, job, &ids, None, "order").await?;

    let csr_pem = record_intent(job, price.as_ref(), now)?;

    // In a fleet the intent (and the key) reach etcd before the order is placed: a leader
    // that dies after this is followed by one that reconciles the intent.
    if let Some(lead) = lead {
        lead.share(cert, &job.rec).await?;
    }
    crate::failpoint::hit("intent-saved");
    let request = order_request(cert, product, &csr_pem);
    match client.order(&request).await {
        Ok(resp) => {
            crate::failpoint::hit("order-sent");
            job.rec.partner.set_order(OrderRef {
                certificate_id: resp.certificate,
                order_id: Some(resp.order),
                placed_at: now,
                adopted: false,
            });
            job.rec.last_state = Some("new".to_owned());
            job.record(
                "ordered",
                serde_json::json!({ "certificate_id": resp.certificate, "order_id": resp.order }),
            )?;
            crate::failpoint::hit("response-saved");
            if let Some(lead) = lead
                && let Err(e) = lead.share(cert, &job.rec).await
            {
                tracing::warn!(certificate = %cert.name, "{e:#}; the next leader reconciles the order from the list");
            }
            tracing::info!(
                certificate = %cert.name,
                certificate_id = resp.certificate,
                "order placed"
            );
            job.ordered = Some(announcement(job, product, price.as_ref(), &resp));
            Ok(Ordered::Placed(resp.certificate))
        }
        Err(err) if definitely_not_placed(&err) => {
            let intent = job.rec.partner.withdraw_intent();
            job.rec.partner.order_refused |= matches!(err, ApiError::Http { .. });
            job.record(
                "order-rejected",
                serde_json::json!({ "error": err.to_string() }),
            )?;
            // In a fleet the shared intent goes too (or, the lead lost, is noted as never
            // placed): the next leader orders normally instead of waiting for this order.
            if let (Some(lead), Some(intent)) = (lead, &intent) {
                lead.not_placed(cert, &job.rec, intent).await;
            }
            Err(anyhow!(err).context(format!(
                "the order for certificate '{}' was refused; nothing was billed",
                cert.name
            )))
        }
        Err(err) => {
            job.journal(
                "order-outcome-unknown",
                serde_json::json!({ "error": err.to_string() }),
            )?;
            Err(anyhow!(err).context(format!(
                "the order for certificate '{}' may or may not have been placed; the next run \
                 looks for it in the certificate list before anything else, and places no new \
                 order until it is found",
                cert.name
            )))
        }
    }
}

/// The order's intent for `job`, recorded before anything is sent: a new key's file is
/// written first, then the record names the key and the intent in one write, with
/// `key-generated` and `order-intent` journalled together. The CSR to send.
fn record_intent(
    job: &mut Job<'_>,
    price: Option<&Decimal>,
    now: OffsetDateTime,
) -> Result<String> {
    let cert = job.cert;
    let (pending, generated) = keys::pending_key_unsaved(job.store(), cert, &mut job.rec, now)?;
    if generated.is_some() {
        crate::failpoint::hit("key-saved");
    }
    let intended = job.rec.partner.intend(OrderIntent {
        csr_sha256: pending.csr_sha256.clone(),
        common_name: cert.common_name().to_owned(),
        created_at: now,
        product_id: cert.order.product_id,
        price: price.map(|p| p.as_str().to_owned()),
    });
    if !intended {
        bail!(
            "internal error: certificate '{}' gained an order or an order intent while its \
             order was prepared; no order is placed",
            cert.name
        );
    }
    let intent = serde_json::json!({
        "csr_sha256": pending.csr_sha256,
        "product_id": cert.order.product_id,
        "days": cert.order.days,
        "price": price.map(Decimal::as_str),
    });
    let events: Vec<(&str, serde_json::Value)> = generated
        .map(|key| ("key-generated", key))
        .into_iter()
        .chain([("order-intent", intent)])
        .collect();
    job.record_all(events)?;
    Ok(pending.csr_pem)
}

/// The order the record knows, or the one its intent placed (reconciled from the list);
/// `None` when nothing was ordered.
async fn known_order(job: &mut Job<'_>, client: &Client) -> Result<Option<Ordered>> {
    Ok(match &job.rec.partner.stage {
        PartnerStage::Ordered { order, .. } | PartnerStage::Ended { order, .. } => {
            Some(Ordered::Existing(order.certificate_id))
        }
        PartnerStage::Intended(intent) => {
            let intent = intent.clone();
            Some(Ordered::Reconciled(reconcile(job, client, &intent).await?))
        }
        PartnerStage::NoOrder => None,
    })
}

/// An answer that proves the order was not created: a 4xx with a documented body, a
/// connection that was never made, or a request the client's guard kept back (a fleet's
/// leader whose lead ended).
fn definitely_not_placed(err: &ApiError) -> bool {
    match err {
        ApiError::NotSent { .. } => true,
        ApiError::Http { status, .. } => (400..500).contains(status),
        ApiError::Transport {
            kind: api::TransportKind::Connect,
            ..
        } => true,
        ApiError::Config(_) | ApiError::Credentials(_) | ApiError::TokenCache { .. } => true,
        _ => false,
    }
}

/// Finds the order of a pending intent in the certificate list by its CSR and adopts it.
async fn reconcile(job: &mut Job<'_>, client: &Client, intent: &OrderIntent) -> Result<u64> {
    let cert = job.cert;
    let cn = intent.common_name.clone();
    let known = known_certificate_ids(job.store(), &cert.name)?;
    // Newest first; a lost order is recent, so the first pages hold it.
    let candidates = client.list_all(None, Some(&cn)).await.with_context(|| {
        format!("could not search the certificate list for '{cn}' to reconcile")
    })?;
    let mut matches = Vec::new();
    let mut checked = 0usize;
    for c in candidates
        .iter()
        .filter(|c| {
            c.domain_name
                .as_deref()
                .is_some_and(|d| d.eq_ignore_ascii_case(&cn))
        })
        .filter(|c| !known.contains(&c.internal_number))
        .filter(|c| {
            !matches!(
                c.status.code.as_ref().and_then(|s| s.state()),
                Some(CertificateState::Expired)
            )
        })
    {
        if checked >= MAX_RECONCILE_DETAILS {
            break;
        }
        checked += 1;
        let details = client.details(c.internal_number).await.with_context(|| {
            format!(
                "could not read certificate {} to reconcile",
                c.internal_number
            )
        })?;
        let Ok(info) = CsrInfo::from_pem(details.csr.as_bytes()) else {
            continue;
        };
        if info.hashes.sha256.eq_ignore_ascii_case(&intent.csr_sha256) {
            matches.push(c.internal_number);
        }
    }
    let sent = intent
        .created_at
        .format(&time::format_description::well_known::Rfc3339)
        .unwrap_or_default();
    match matches.as_slice() {
        [] => {
            job.journal(
                "reconcile-not-found",
                serde_json::json!({ "csr_sha256": intent.csr_sha256, "candidates": checked }),
            )?;
            Err(OrderRefusal::Unreconciled {
                name: cert.name.clone(),
                cn,
                sent,
            }
            .into())
        }
        [id] => {
            job.rec.partner.set_order(OrderRef {
                certificate_id: *id,
                order_id: None,
                placed_at: intent.created_at,
                adopted: true,
            });
            job.record("reconciled", serde_json::json!({ "certificate_id": id }))?;
            tracing::warn!(
                certificate = %cert.name,
                certificate_id = id,
                "an order whose answer was lost was found in the certificate list and adopted"
            );
            Ok(*id)
        }
        ids => Err(OrderRefusal::Ambiguous {
            name: cert.name.clone(),
            count: ids.len(),
            ids: ids
                .iter()
                .map(u64::to_string)
                .collect::<Vec<_>>()
                .join(", "),
        }
        .into()),
    }
}

/// Certificate IDs recorded by other configured certificates (never adopted twice).
fn known_certificate_ids(store: &Store, except: &str) -> Result<Vec<u64>> {
    let mut ids = Vec::new();
    for name in store.names()? {
        if name == except {
            continue;
        }
        if let Ok(r) = store.load(&name)
            && let Some(id) = r.partner.certificate_id()
        {
            ids.push(id);
        }
    }
    Ok(ids)
}

/// Clears an unreconciled intent on the operator's word (the pending key is kept).
pub(super) fn clear_intent(job: &mut Job<'_>) -> Result<bool> {
    let Some(intent) = job.rec.partner.withdraw_intent() else {
        return Ok(false);
    };
    job.record(
        "intent-cleared-by-operator",
        serde_json::json!({ "csr_sha256": intent.csr_sha256 }),
    )?;
    Ok(true)
}

#[cfg(test)]
mod tests;
