//! Money ahead: the renewals of the coming days that are billed, their prices from the
//! catalogue, and whether the account's available balance covers them — for `cert-agent
//! forecast`, `check` (WARNING when the next 30 days are not covered, CRITICAL for 7) and the
//! metrics. The dates come from local state ([`crate::engine::forecast`]); the API is asked
//! once for the balance and, only when something billed falls due, once for the products.
//!
//! The last figures read are kept in `state_dir/money.json` (0600), so that the metrics of a
//! run that made no API call still show the balance and projected spend last seen.

use std::collections::BTreeMap;

use anyhow::{Context, Result};
use serde::{Deserialize, Serialize};
use time::{Duration, OffsetDateTime};

use crate::api::{Amount, Client, Product, price_of_order, sum_of};
use crate::config::{CertificateConfig, Config};
use crate::engine::forecast::{Due, DueKind, Knobs, upcoming};
use crate::engine::order::period_years;
use crate::store::{CertRecord, Store};
use crate::values::Decimal;

/// `check` is WARNING when the balance does not cover the billed renewals of this many days.
pub(crate) const WARNING_DAYS: i64 = 30;
/// `check` is CRITICAL when the balance does not cover the billed renewals of this many days.
pub(crate) const CRITICAL_DAYS: i64 = 7;

/// The reason of a renewal, and for a certificate validated by email that falls due on or
/// after the end of email validation, that it cannot be validated (nor reuse a validation)
/// by email.
fn sunset_reason(cert: &CertificateConfig, due: &Due) -> String {
    use crate::engine::sunset;
    if cert.dcv.method == crate::config::DcvMethod::Email && sunset::email_ended_on(due.at.date()) {
        return format!(
            "{}; email validation ends on {} (no reuse either): move it first with `cert-agent \
             dcv migrate {} --to http` (or `--to dns`)",
            due.reason,
            sunset::EMAIL_SUNSET,
            cert.name
        );
    }
    due.reason.clone()
}

/// One renewal in the forecast.
#[derive(Debug, Clone, Serialize)]
pub(crate) struct Item {
    /// The configured certificate.
    pub name: String,
    /// When it falls due.
    #[serde(with = "time::serde::rfc3339")]
    pub due: OffsetDateTime,
    /// `reissue` (free) or `order` (billed).
    pub kind: DueKind,
    pub reason: String,
    pub product_id: u64,
    /// The order's period in years (billed orders).
    pub years: u32,
    /// The catalogue price (net, account currency) of a billed order; `"0.00"` for a reissue;
    /// `null` when the catalogue does not tell it.
    pub price: Option<Decimal>,
}

/// The forecast of the coming `days`.
#[derive(Debug, Clone, Serialize)]
pub(crate) struct Forecast {
    #[serde(with = "time::serde::rfc3339")]
    pub generated_at: OffsetDateTime,
    pub days: u32,
    #[serde(with = "time::serde::rfc3339")]
    pub until: OffsetDateTime,
    /// Every renewal due in the period, by date.
    pub items: Vec<Item>,
    /// The sum of the billed orders' prices (those with a known price).
    pub total: Decimal,
    /// The account currency (of the balance; the catalogue's prices are in it too).
    pub currency: Option<String>,
    /// `available` of the balance call: usable for new bills.
    pub available: Option<Amount>,
    /// The available balance covers `total` (and every price is known).
    pub covered: Option<bool>,
    /// Certificates whose billed order has no price in the catalogue.
    pub unpriced: Vec<String>,
}

/// The renewals of the configured Partner API certificates due from `now` until `until`, from
/// local state. A certificate retired (here or for the fleet) and not started again is no
/// renewal: its configuration entry may stay until the operator edits it.
pub(crate) fn dues(
    config: &Config,
    store: &Store,
    now: OffsetDateTime,
    until: OffsetDateTime,
) -> Result<Vec<(CertificateConfig, CertRecord, Due)>> {
    let mut out = Vec::new();
    // An ACME CA bills nothing per order: only the Partner API's certificates are forecast.
    for cert in config
        .certificates
        .iter()
        .filter(|c| c.order.issuer.is_partner())
    {
        let rec = store.load(&cert.name)?;
        if store.retired_and_idle(&cert.name, &rec).is_some() {
            continue;
        }
        let knobs = Knobs {
            renew_before_days: config.agent.renew_before_days,
            order_days: cert.order.days,
        };
        for due in upcoming(&rec, knobs, now, until) {
            out.push((cert.clone(), rec.clone(), due));
        }
    }
    out.sort_by(|a, b| a.2.at.cmp(&b.2.at).then_with(|| a.0.name.cmp(&b.0.name)));
    Ok(out)
}

/// Whether any billed order falls due from `now` until `until` (no API call).
pub(crate) fn anything_billed(
    config: &Config,
    store: &Store,
    now: OffsetDateTime,
    until: OffsetDateTime,
) -> Result<bool> {
    Ok(dues(config, store, now, until)?
        .iter()
        .any(|(_, _, d)| d.kind == DueKind::Order))
}

/// The forecast of the next `days`: local dates, the products call when something billed is
/// due, one balance call.
pub(crate) async fn forecast(
    config: &Config,
    client: &Client,
    now: OffsetDateTime,
    days: u32,
) -> Result<Forecast> {
    let store = Store::existing(&config.agent.state_dir);
    let until = now + Duration::days(i64::from(days));
    let dues = dues(config, &store, now, until)?;
    let products = if dues.iter().any(|(_, _, d)| d.kind == DueKind::Order) {
        client
            .products(false)
            .await
            .context("could not read the products and their prices")?
    } else {
        Vec::new()
    };
    let balance = client
        .balance()
        .await
        .context("could not read the account balance")?;
    let f = priced(now, days, until, &dues, &products, Some(balance.available));
    remember(&store, &f, now);
    Ok(f)
}

/// The forecast from its parts (pure).
pub(crate) fn priced(
    now: OffsetDateTime,
    days: u32,
    until: OffsetDateTime,
    dues: &[(CertificateConfig, CertRecord, Due)],
    products: &[Product],
    available: Option<Amount>,
) -> Forecast {
    let mut unpriced = Vec::new();
    let items: Vec<Item> = dues
        .iter()
        .map(|(cert, _, due)| {
            let years = period_years(cert.order.days);
            let price = match due.kind {
                DueKind::Reissue => Some(Decimal::zero()),
                DueKind::Order => products
                    .iter()
                    .find(|p| p.id == cert.order.product_id)
                    .and_then(|p| price_of_order(&cert.domains, p, years)),
            };
            if price.is_none() && !unpriced.contains(&cert.name) {
                unpriced.push(cert.name.clone());
            }
            Item {
                name: cert.name.clone(),
                due: due.at,
                kind: due.kind,
                reason: sunset_reason(cert, due),
                product_id: cert.order.product_id,
                years,
                price,
            }
        })
        .collect();
    let total = sum_of(items.iter().filter_map(|i| i.price.as_ref())).unwrap_or_else(Decimal::zero);
    let covered = available
        .as_ref()
        .map(|a| unpriced.is_empty() && a.sum.cmp_value(&total) != std::cmp::Ordering::Less);
    Forecast {
        generated_at: now,
        days,
        until,
        items,
        total,
        currency: available.as_ref().map(|a| a.currency.clone()),
        available,
        covered,
        unpriced,
    }
}

impl Forecast {
    /// The billed spend due until `until` (known prices), and whether any price is unknown.
    pub(crate) fn spend_until(&self, until: OffsetDateTime) -> (Decimal, bool) {
        let within: Vec<&Item> = self
            .items
            .iter()
            .filter(|i| i.kind == DueKind::Order && i.due <= until)
            .collect();
        let total =
            sum_of(within.iter().filter_map(|i| i.price.as_ref())).unwrap_or_else(Decimal::zero);
        (total, within.iter().any(|i| i.price.is_none()))
    }
}

/// What `state_dir/money.json` keeps: the last balance read and the projected spend then.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Snapshot {
    #[serde(with = "time::serde::rfc3339")]
    pub at: OffsetDateTime,
    pub available: Option<Amount>,
    /// Billed renewals of the next 30 days, by the catalogue's prices.
    pub spend_30d: Decimal,
    /// Billed renewals of the next 30 days by certificate.
    #[serde(default)]
    pub by_certificate: BTreeMap<String, Decimal>,
}

const SNAPSHOT_FILE: &str = "money.json";

/// Keeps the figures of `f` (a state directory that cannot be written only loses them).
fn remember(store: &Store, f: &Forecast, now: OffsetDateTime) {
    let until = now + Duration::days(WARNING_DAYS);
    let (spend_30d, _) = f.spend_until(until);
    let mut by_certificate: BTreeMap<String, Decimal> = BTreeMap::new();
    for i in f
        .items
        .iter()
        .filter(|i| i.kind == DueKind::Order && i.due <= until)
    {
        if let Some(p) = &i.price {
            let sum = match by_certificate.get(&i.name) {
                Some(old) => sum_of([old, p]),
                None => Some(p.clone()),
            };
            if let Some(sum) = sum {
                by_certificate.insert(i.name.clone(), sum);
            }
        }
    }
    let snap = Snapshot {
        at: now,
        available: f.available.clone(),
        spend_30d,
        by_certificate,
    };
    if !store.dir().is_dir() {
        return;
    }
    if let Ok(bytes) = serde_json::to_vec_pretty(&snap)
        && let Err(e) = crate::fsutil::write_atomic(&store.dir().join(SNAPSHOT_FILE), &bytes, 0o600)
    {
        tracing::debug!(
            "could not keep the balance figures: {}",
            crate::fsutil::io_text(&e)
        );
    }
}

/// The figures last kept, if any (a damaged file counts as none), without the certificates
/// retired since (here or for the fleet).
pub(crate) fn last_snapshot(store: &Store) -> Option<Snapshot> {
    let bytes = std::fs::read(store.dir().join(SNAPSHOT_FILE)).ok()?;
    let mut snap: Snapshot = serde_json::from_slice(&bytes).ok()?;
    let retired: Vec<String> = snap
        .by_certificate
        .keys()
        .filter(|n| {
            store
                .load(n)
                .is_ok_and(|rec| store.retired_and_idle(n, &rec).is_some())
        })
        .cloned()
        .collect();
    if !retired.is_empty() {
        for n in &retired {
            snap.by_certificate.remove(n);
        }
        snap.spend_30d = sum_of(snap.by_certificate.values()).unwrap_or_else(Decimal::zero);
    }
    Some(snap)
}

/// After a run that already talked to the API: the balance and the next 30 days' spend read
/// again for the metrics (one balance call; the products call only when something billed is
/// due). A failure is logged, never the run's.
pub(super) async fn refresh_after_run(config: &Config, now: OffsetDateTime) {
    let client = match crate::engine::client(config) {
        Ok(c) => c,
        Err(e) => {
            tracing::debug!("balance not read for the metrics: {e:#}");
            return;
        }
    };
    if let Err(e) = forecast(config, &client, now, WARNING_DAYS as u32).await {
        tracing::warn!("balance not read for the metrics: {e:#}");
    }
}

/// `check`'s view of the money: `None` when nothing billed falls due in 30 days (no API call);
/// otherwise the forecast of 30 days, or why the balance could not be read.
pub(crate) async fn for_check(
    config: &Config,
    now: OffsetDateTime,
) -> Option<Result<Forecast, anyhow::Error>> {
    let store = Store::existing(&config.agent.state_dir);
    let until = now + Duration::days(WARNING_DAYS);
    match anything_billed(config, &store, now, until) {
        Ok(false) => return None,
        Ok(true) => {}
        Err(e) => return Some(Err(e)),
    }
    let client = match crate::engine::client(config) {
        Ok(c) => c,
        Err(e) => return Some(Err(e)),
    };
    Some(forecast(config, &client, now, WARNING_DAYS as u32).await)
}

#[cfg(test)]
mod tests;
