//! What an order asks for and whether it may be placed: the names against the product's
//! rules, the price against the configured limit (exact decimal arithmetic), the host's clock
//! against the API's, and the order request itself.

use time::OffsetDateTime;

use crate::api::{Client, Decimal, Order, OrderItem, OrderRequest, Product, ProductType};
use crate::config::{CertificateConfig, Config, DcvMethod};

use super::OrderRefusal;

/// Largest difference between the host's clock and the API's accepted before a billed order.
pub(crate) const MAX_CLOCK_SKEW: time::Duration = time::Duration::hours(1);

/// Refuses a billed order when the host's clock disagrees badly with the API's (`Date`
/// header): every decision about validity and renewal would be wrong.
pub(super) fn check_clock(
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
            local: crate::clock::short_time(now),
            api: crate::clock::short_time(api_now),
        });
    }
    Ok(())
}

/// Refuses, before anything is billed, names the product cannot cover: a certificate whose
/// names are not all in the leaf is never installed.
pub(super) fn check_names(cert: &CertificateConfig, product: &Product) -> Result<(), OrderRefusal> {
    let refuse = |why: String| OrderRefusal::NamesDoNotFit {
        name: cert.name.clone(),
        product_id: cert.order.product_id,
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
pub(crate) fn period_years(days: u32) -> u32 {
    days.div_ceil(365).max(1)
}

pub(super) fn check_price(
    config: &Config,
    cert: &CertificateConfig,
    product: &Product,
) -> Result<Option<Decimal>, OrderRefusal> {
    let years = period_years(cert.order.days);
    let price = order_price(cert, product, years);
    let Some(max) = &config.agent.max_order_price else {
        return Ok(price);
    };
    let Some(price) = price else {
        return Err(OrderRefusal::NoPrice {
            name: cert.name.clone(),
            product_id: cert.order.product_id,
            years,
            max: max.to_string(),
        });
    };
    if price.cmp_value(max) == std::cmp::Ordering::Greater {
        return Err(OrderRefusal::TooExpensive {
            name: cert.name.clone(),
            product_id: cert.order.product_id,
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
pub(crate) fn order_price(
    cert: &CertificateConfig,
    product: &Product,
    years: u32,
) -> Option<Decimal> {
    crate::api::price_of_order(&cert.domains, product, years)
}

/// The order as the configuration describes it (`[defaults]` already merged).
pub(crate) fn order_request(
    cert: &CertificateConfig,
    product: &Product,
    csr_pem: &str,
) -> OrderRequest {
    let is_ucc = product.product_type == Some(ProductType::Ucc);
    let additional = cert.additional_domains();
    let item = OrderItem {
        nomenclature_id: cert.order.product_id,
        days: cert.order.days,
        ssl_server_software_id: cert.order.ssl_server_software_id,
        dcv_type: Some(cert.dcv.method.dcv_type()),
        dcv_email: match cert.dcv.method {
            DcvMethod::Email => cert.dcv.email.clone(),
            _ => None,
        },
        domain_name: cert.common_name().to_owned(),
        csr: csr_pem.to_owned(),
        country_name: cert.order.country.clone(),
        region_name: cert.order.region.clone(),
        city_name: cert.order.city.clone(),
        organization_name: cert.order.organization_name.clone(),
        organizational_unit: cert.order.organizational_unit.clone(),
        zip_code: cert.order.zip_code.clone(),
        address_1: cert.order.address_1.clone(),
        address_2: cert.order.address_2.clone(),
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
        unique_value: cert.order.unique_value.clone(),
    };
    OrderRequest {
        // Contact fields are omitted: the API takes them from the account data.
        order: Order {
            items: vec![item],
            ..Order::default()
        },
    }
}
