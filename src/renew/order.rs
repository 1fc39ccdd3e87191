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

use anyhow::{Context, Result, anyhow};
use time::OffsetDateTime;

use crate::api::{
    self, ApiError, CertificateState, Client, Decimal, Order, OrderItem, OrderRequest, Product,
    ProductType,
};
use crate::config::{CertificateConfig, Config, DcvMethod};
use crate::crypto::{Csr, CsrInfo, PrivateKey};
use crate::store::{CertRecord, OrderIntent, OrderRef, Store};

use super::keys;

/// Most candidates whose details are read while reconciling one intent.
const MAX_RECONCILE_DETAILS: usize = 25;

/// Why an order was not placed; each is a refusal the operator can act on.
#[derive(Debug, thiserror::Error)]
pub enum OrderRefusal {
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
pub enum Ordered {
    /// The record already had its order.
    Existing(u64),
    /// An order was placed by this call.
    Placed(u64),
    /// A lost order was found in the list and adopted.
    Reconciled(u64),
}

impl Ordered {
    pub fn certificate_id(self) -> u64 {
        match self {
            Self::Existing(id) | Self::Placed(id) | Self::Reconciled(id) => id,
        }
    }
}

/// The product list, read at most once per run (prices and product types for every order).
#[derive(Debug, Default)]
pub struct ProductCache(tokio::sync::OnceCell<Vec<Product>>);

impl ProductCache {
    async fn get(&self, client: &Client) -> Result<&[Product]> {
        self.0
            .get_or_try_init(|| client.products(false))
            .await
            .map(Vec::as_slice)
            .context("could not read the product list to check the order")
    }
}

/// Ensures `record` has an order: reconciles a pending intent, or places the order when
/// allowed. Saves the record after every step.
#[allow(clippy::too_many_arguments)]
pub async fn ensure_order(
    config: &Config,
    cert: &CertificateConfig,
    client: &Client,
    products: &ProductCache,
    store: &Store,
    record: &mut CertRecord,
    allow: bool,
    now: OffsetDateTime,
) -> Result<Ordered> {
    if let Some(order) = &record.order {
        return Ok(Ordered::Existing(order.certificate_id));
    }
    if let Some(intent) = record.intent.clone() {
        let id = reconcile(cert, client, store, record, &intent).await?;
        return Ok(Ordered::Reconciled(id));
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
        .find(|p| p.id == cert.product_id)
        .ok_or_else(|| OrderRefusal::UnknownProduct {
            name: cert.name.clone(),
            product_id: cert.product_id,
        })?;
    check_names(cert, product)?;
    let price = check_price(config, cert, product)?;
    check_clock(cert, client, now)?;

    let pending = keys::ensure_pending_key(store, cert, record, now)?;
    let csr_pem = pending.csr_pem.clone();

    record.intent = Some(OrderIntent {
        csr_sha256: pending.csr_sha256.clone(),
        common_name: cert.common_name().to_owned(),
        created_at: now,
        product_id: cert.product_id,
        price: price.as_ref().map(|p| p.as_str().to_owned()),
    });
    store.save(record)?;
    store.journal(
        &cert.name,
        "order-intent",
        serde_json::json!({
            "csr_sha256": pending.csr_sha256,
            "product_id": cert.product_id,
            "days": cert.days,
            "price": price.as_ref().map(Decimal::as_str),
        }),
    )?;

    crate::failpoint::hit("intent-saved");
    let request = order_request(cert, product, &csr_pem);
    match client.order(&request).await {
        Ok(resp) => {
            crate::failpoint::hit("order-sent");
            record.order = Some(OrderRef {
                certificate_id: resp.certificate,
                order_id: Some(resp.order),
                placed_at: now,
                adopted: false,
            });
            record.intent = None;
            record.last_state = Some("new".to_owned());
            store.save(record)?;
            store.journal(
                &cert.name,
                "ordered",
                serde_json::json!({ "certificate_id": resp.certificate, "order_id": resp.order }),
            )?;
            crate::failpoint::hit("response-saved");
            tracing::info!(
                certificate = %cert.name,
                certificate_id = resp.certificate,
                "order placed"
            );
            Ok(Ordered::Placed(resp.certificate))
        }
        Err(err) if definitely_not_placed(&err) => {
            record.intent = None;
            record.order_refused |= matches!(err, ApiError::Http { .. });
            store.save(record)?;
            store.journal(
                &cert.name,
                "order-rejected",
                serde_json::json!({ "error": err.to_string() }),
            )?;
            Err(anyhow!(err).context(format!(
                "the order for certificate '{}' was refused; nothing was billed",
                cert.name
            )))
        }
        Err(err) => {
            store.journal(
                &cert.name,
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

/// An answer that proves the order was not created: a 4xx with a documented body, or a
/// connection that was never made.
fn definitely_not_placed(err: &ApiError) -> bool {
    match err {
        ApiError::Http { status, .. } => (400..500).contains(status),
        ApiError::Transport {
            kind: api::TransportKind::Connect,
            ..
        } => true,
        ApiError::Config(_) | ApiError::Credentials(_) | ApiError::TokenCache { .. } => true,
        _ => false,
    }
}

/// Largest difference between the host's clock and the API's accepted before a billed order.
pub const MAX_CLOCK_SKEW: time::Duration = time::Duration::hours(1);

/// Refuses a billed order when the host's clock disagrees badly with the API's (`Date`
/// header): every decision about validity and renewal would be wrong.
fn check_clock(
    cert: &CertificateConfig,
    client: &Client,
    now: OffsetDateTime,
) -> Result<(), OrderRefusal> {
    let Some(skew) = client.clock_skew() else {
        return Ok(());
    };
    // `now` may differ from the system clock the client measured against (tests shift it).
    let skew = skew + (now - OffsetDateTime::now_utc());
    if skew.abs() > MAX_CLOCK_SKEW {
        let api_now = now - skew;
        return Err(OrderRefusal::ClockSkew {
            name: cert.name.clone(),
            local: super::plan::short_time(now),
            api: super::plan::short_time(api_now),
        });
    }
    Ok(())
}

/// Refuses, before anything is billed, names the product cannot cover: a certificate whose
/// names are not all in the leaf is never installed.
fn check_names(cert: &CertificateConfig, product: &Product) -> Result<(), OrderRefusal> {
    let refuse = |why: String| OrderRefusal::NamesDoNotFit {
        name: cert.name.clone(),
        product_id: cert.product_id,
        kind: product
            .product_type
            .as_ref()
            .map_or("unknown type", |t| t.as_str())
            .to_owned(),
        names: cert.domains.join(", "),
        why,
    };
    let wildcards = cert.domains.iter().filter(|d| d.starts_with("*.")).count();
    let plain = cert.domains.len() - wildcards;
    match product.product_type {
        Some(ProductType::Standart) if cert.domains.len() != 1 || wildcards != 0 => {
            return Err(refuse(
                "a single-name product covers exactly one name (use a multi-domain product)".into(),
            ));
        }
        Some(ProductType::Wildcard) => {
            let cn = cert.common_name();
            let bare = cn.strip_prefix("*.");
            let ok = bare.is_some()
                && cert
                    .additional_domains()
                    .iter()
                    .all(|d| Some(d.as_str()) == bare);
            if !ok {
                return Err(refuse(
                    "a wildcard product covers `*.<domain>` (and at most its bare domain)".into(),
                ));
            }
        }
        Some(ProductType::Ucc) => {
            let max = |kind: Option<&str>| {
                product
                    .options
                    .iter()
                    .filter(|o| o.option_type.as_deref() == kind)
                    .map(|o| o.quantity_to)
                    .collect::<Vec<_>>()
            };
            let plain_max = max(None);
            if !plain_max.is_empty()
                && !plain_max.contains(&None)
                && let Some(m) = plain_max.iter().flatten().max()
                && plain as u64 > u64::from(*m)
            {
                return Err(refuse(format!("at most {m} names without a wildcard")));
            }
            let wild_max = max(Some("wildcard"));
            if wildcards > 0 {
                let allowed = if wild_max.contains(&None) {
                    u64::MAX
                } else {
                    wild_max
                        .iter()
                        .flatten()
                        .map(|m| u64::from(*m))
                        .max()
                        .unwrap_or(0)
                };
                if wildcards as u64 > allowed {
                    return Err(refuse(format!("at most {allowed} wildcard names")));
                }
            }
        }
        _ => {}
    }
    Ok(())
}

/// Period in years of an order of `days` (365 is one year, 730 two).
pub fn period_years(days: u32) -> u32 {
    days.div_ceil(365).max(1)
}

fn check_price(
    config: &Config,
    cert: &CertificateConfig,
    product: &Product,
) -> Result<Option<Decimal>, OrderRefusal> {
    let years = period_years(cert.days);
    let price = order_price(cert, product, years);
    let Some(max) = &config.agent.max_order_price else {
        return Ok(price);
    };
    let Some(price) = price else {
        return Err(OrderRefusal::NoPrice {
            name: cert.name.clone(),
            product_id: cert.product_id,
            years,
            max: max.to_string(),
        });
    };
    if price.cmp_value(max) == std::cmp::Ordering::Greater {
        return Err(OrderRefusal::TooExpensive {
            name: cert.name.clone(),
            product_id: cert.product_id,
            years,
            price: price.to_string(),
            max: max.to_string(),
        });
    }
    Ok(Some(price))
}

/// The price of the order for `years`: the product's price, plus for a multi-domain (ucc)
/// product the option price of every name beyond those included. Per the document's Option
/// fields, the names numbered `quantity_from..=quantity_to` (common name counted as the first)
/// cost the option's price each: options of type null count the non-wildcard names, options
/// of type `wildcard` the wildcard names. `None` when a needed price is missing or unreadable.
pub fn order_price(cert: &CertificateConfig, product: &Product, years: u32) -> Option<Decimal> {
    let price_for = |prices: &[crate::api::Price]| {
        prices
            .iter()
            .find(|p| p.period == Some(years))
            .and_then(|p| p.value.as_ref())
            .and_then(|v| micros(v.as_str()))
    };
    let mut total = price_for(&product.prices)?;
    if product.product_type == Some(ProductType::Ucc) {
        let wildcards = cert.domains.iter().filter(|d| d.starts_with("*.")).count() as u64;
        let plain = cert.domains.len() as u64 - wildcards;
        for option in &product.options {
            let count = match option.option_type.as_deref() {
                None => plain,
                Some("wildcard") => wildcards,
                Some(_) => continue,
            };
            let from = u64::from(option.quantity_from.unwrap_or(1).max(1));
            let to = option
                .quantity_to
                .map_or(count, |t| u64::from(t).min(count));
            if to >= from {
                total += i128::from(to - from + 1) * price_for(&option.prices)?;
            }
        }
    }
    Decimal::parse(&format_micros(total)).ok()
}

/// A decimal string in millionths (at most 6 decimals).
fn micros(text: &str) -> Option<i128> {
    let t = text.trim();
    let (neg, t) = t.strip_prefix('-').map_or((false, t), |r| (true, r));
    let (int, frac) = t.split_once('.').unwrap_or((t, ""));
    if int.is_empty() && frac.is_empty()
        || frac.len() > 6
        || !int.bytes().chain(frac.bytes()).all(|b| b.is_ascii_digit())
    {
        return None;
    }
    let int: i128 = if int.is_empty() { 0 } else { int.parse().ok()? };
    let frac: i128 = format!("{frac:0<6}").parse().ok()?;
    let v = int.checked_mul(1_000_000)?.checked_add(frac)?;
    Some(if neg { -v } else { v })
}

fn format_micros(v: i128) -> String {
    let sign = if v < 0 { "-" } else { "" };
    let v = v.abs();
    let frac = format!("{:06}", v % 1_000_000);
    let frac = frac.trim_end_matches('0');
    let frac = if frac.len() < 2 {
        format!("{frac:0<2}")
    } else {
        frac.to_owned()
    };
    format!("{sign}{}.{frac}", v / 1_000_000)
}

/// The order as the configuration describes it (`[defaults]` already merged).
pub fn order_request(cert: &CertificateConfig, product: &Product, csr_pem: &str) -> OrderRequest {
    let is_ucc = product.product_type == Some(ProductType::Ucc);
    let additional = cert.additional_domains();
    let item = OrderItem {
        nomenclature_id: cert.product_id,
        days: cert.days,
        ssl_server_software_id: cert.ssl_server_software_id,
        dcv_type: Some(cert.dcv.dcv_type()),
        dcv_email: match cert.dcv {
            DcvMethod::Email => cert.dcv_email.clone(),
            _ => None,
        },
        domain_name: cert.common_name().to_owned(),
        csr: csr_pem.to_owned(),
        country_name: cert.country.clone(),
        region_name: cert.region.clone(),
        city_name: cert.city.clone(),
        organization_name: cert.organization_name.clone(),
        organizational_unit: cert.organizational_unit.clone(),
        zip_code: cert.zip_code.clone(),
        address_1: cert.address_1.clone(),
        address_2: cert.address_2.clone(),
        // additional_domains rule 1: when sent, it alone lists the extra names. Sending it
        // explicitly (or equal to the common name) keeps the order to exactly the configured
        // names, whatever else the CSR holds (rule 4).
        additional_domains: if is_ucc {
            Some(if additional.is_empty() {
                cert.common_name().to_owned()
            } else {
                additional.join(",")
            })
        } else {
            None
        },
        additional_validation_emails: None,
        unique_value: cert.unique_value.clone(),
    };
    OrderRequest {
        // Contact fields are omitted: the API takes them from the account data.
        order: Order {
            items: vec![item],
            ..Order::default()
        },
    }
}

/// Finds the order of a pending intent in the certificate list by its CSR and adopts it.
async fn reconcile(
    cert: &CertificateConfig,
    client: &Client,
    store: &Store,
    record: &mut CertRecord,
    intent: &OrderIntent,
) -> Result<u64> {
    let cn = intent.common_name.clone();
    let known = known_certificate_ids(store, &cert.name)?;
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
            store.journal(
                &cert.name,
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
            record.order = Some(OrderRef {
                certificate_id: *id,
                order_id: None,
                placed_at: intent.created_at,
                adopted: true,
            });
            record.intent = None;
            store.save(record)?;
            store.journal(
                &cert.name,
                "reconciled",
                serde_json::json!({ "certificate_id": id }),
            )?;
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
            && let Some(o) = r.order
        {
            ids.push(o.certificate_id);
        }
    }
    Ok(ids)
}

/// Clears an unreconciled intent on the operator's word (the pending key is kept).
pub fn clear_intent(store: &Store, record: &mut CertRecord) -> Result<bool> {
    let Some(intent) = record.intent.take() else {
        return Ok(false);
    };
    store.save(record)?;
    store.journal(
        &record.name,
        "intent-cleared-by-operator",
        serde_json::json!({ "csr_sha256": intent.csr_sha256 }),
    )?;
    Ok(true)
}

/// Builds a CSR for `cert` with `key`.
pub fn csr_for(cert: &CertificateConfig, key: &PrivateKey) -> Result<Csr> {
    Csr::new(key, &cert.domains)
        .with_context(|| format!("could not build the CSR of certificate '{}'", cert.name))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn decimal_arithmetic_is_exact() {
        assert_eq!(micros("6.60"), Some(6_600_000));
        assert_eq!(micros("27.5"), Some(27_500_000));
        assert_eq!(micros("x"), None);
        assert_eq!(micros("1.1234567"), None);
        assert_eq!(format_micros(40_700_000), "40.70");
        assert_eq!(format_micros(8_800_000 + 1), "8.800001");
    }

    #[test]
    fn period_follows_the_documents_day_counts() {
        assert_eq!(period_years(60), 1);
        assert_eq!(period_years(365), 1);
        assert_eq!(period_years(366), 2);
        assert_eq!(period_years(730), 2);
        assert_eq!(period_years(1825), 5);
    }

    #[test]
    fn only_4xx_and_unsent_requests_prove_nothing_was_billed() {
        let call = api::Call {
            method: "POST",
            path: "/api/v1/order".into(),
            idempotent: false,
        };
        let http = |status| ApiError::Http {
            call: call.clone(),
            status,
            body: Box::new(api::ErrorBody::Empty),
            excerpt: String::new(),
        };
        assert!(definitely_not_placed(&http(422)));
        assert!(definitely_not_placed(&http(403)));
        assert!(!definitely_not_placed(&ApiError::OutcomeUnknown {
            call: call.clone(),
            reason: "connection reset".into()
        }));
        assert!(!definitely_not_placed(&ApiError::Transport {
            call: call.clone(),
            kind: api::TransportKind::Other,
            message: "reset".into()
        }));
        assert!(definitely_not_placed(&ApiError::Transport {
            call,
            kind: api::TransportKind::Connect,
            message: "refused".into()
        }));
    }
}
