//! Matching sites against the account (`discover --account`): an order the account already
//! has that covers a site's names is adopted rather than paid for again; otherwise the product
//! that fits and its price are named.

use std::collections::BTreeMap;

use serde::Serialize;
use time::Date;

use super::Proposal;
use crate::api::{
    ApiError, Certificate, CertificateState, Client, Product, ProductType, parse_api_date,
    price_of_order,
};
use crate::values::Decimal;

/// The account's lists could not be read.
#[derive(Debug, thiserror::Error)]
pub(crate) enum AccountError {
    #[error("could not read the account's certificate list")]
    Certificates(#[source] ApiError),
    #[error("could not read the product list")]
    Products(#[source] ApiError),
}

/// What to do for each proposal (by name): the account's orders and products read once, each
/// proposal matched against them on `today`.
pub(crate) async fn match_account(
    client: &Client,
    proposals: &[Proposal],
    today: Date,
) -> Result<BTreeMap<String, Match>, AccountError> {
    let certificates = client
        .list_all(None, None)
        .await
        .map_err(AccountError::Certificates)?;
    let products = client
        .products(false)
        .await
        .map_err(AccountError::Products)?;
    Ok(proposals
        .iter()
        .map(|p| {
            let m = match_site(&p.domains, &certificates, &products, today);
            (p.name.clone(), m)
        })
        .collect())
}

/// What to do for a site.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(tag = "action", rename_all = "snake_case")]
pub(crate) enum Match {
    /// A live order covers every name: adopt it (no new order).
    Adopt {
        certificate_id: u64,
        /// The product of the order (by its name in the product list), for later orders.
        product_id: Option<u64>,
        state: String,
        valid_to: Option<String>,
        subscription_valid_to: Option<String>,
    },
    /// No live order covers the names: a new (billed) order.
    Order {
        product_id: Option<u64>,
        product: Option<String>,
        /// One year, net, account currency.
        price: Option<Decimal>,
        /// Orders of the account that were looked at and why they do not serve.
        passed_over: Vec<String>,
    },
}

/// The names of a list entry, lower case.
fn names_of(c: &Certificate) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    for n in c
        .all_domains
        .iter()
        .flatten()
        .chain(c.domain_name.iter())
        .chain(c.domain_names.iter().flatten())
    {
        let n = n.trim().to_ascii_lowercase();
        if !n.is_empty() && !out.contains(&n) {
            out.push(n);
        }
    }
    out
}

/// Whether `name` is covered by `names` (a wildcard covers one label below it).
fn covers(names: &[String], name: &str) -> bool {
    names.iter().any(|n| {
        n == name
            || n.strip_prefix("*.").is_some_and(|base| {
                name.split_once('.')
                    .is_some_and(|(label, rest)| !label.is_empty() && rest == base)
            })
    })
}

/// The order of `certificates` to adopt for `domains`, or what to order instead. Live: new,
/// in progress, waiting for approval or issued, with the certificate (for issued ones) and the
/// subscription not ended on `today`. Among several, the one that lasts longest.
fn match_site(
    domains: &[String],
    certificates: &[Certificate],
    products: &[Product],
    today: Date,
) -> Match {
    let mut best: Option<(&Certificate, Option<Date>)> = None;
    let mut passed_over = Vec::new();
    for c in certificates {
        let names = names_of(c);
        let covered: Vec<&String> = domains.iter().filter(|d| covers(&names, d)).collect();
        if covered.is_empty() {
            continue;
        }
        let id = c.internal_number;
        let state = c.status.code.as_ref().and_then(|s| s.state());
        let state_text = c
            .status
            .code
            .as_ref()
            .map_or("unknown".to_owned(), |s| s.as_str().to_owned());
        if covered.len() < domains.len() {
            let missing: Vec<&str> = domains
                .iter()
                .filter(|d| !covers(&names, d))
                .map(String::as_str)
                .collect();
            passed_over.push(format!(
                "{id} ({state_text}) does not cover {}",
                missing.join(", ")
            ));
            continue;
        }
        let live = matches!(
            state,
            Some(
                CertificateState::New
                    | CertificateState::InProgress
                    | CertificateState::WaitingForApproval
                    | CertificateState::Issued
            )
        );
        if !live {
            passed_over.push(format!("{id} is {state_text}"));
            continue;
        }
        let ends = |v: &Option<String>| v.as_deref().and_then(parse_api_date);
        let valid_to = ends(&c.valid_to);
        let sub_to = ends(&c.subscription_valid_to).or(valid_to);
        if state == Some(CertificateState::Issued) && valid_to.is_some_and(|d| d < today)
            || sub_to.is_some_and(|d| d < today)
        {
            passed_over.push(format!("{id} has ended"));
            continue;
        }
        if best.is_none_or(|(_, b)| sub_to > b) {
            best = Some((c, sub_to));
        }
    }
    if let Some((c, _)) = best {
        return Match::Adopt {
            certificate_id: c.internal_number,
            product_id: products
                .iter()
                .find(|p| p.name.as_deref() == Some(c.name.as_str()))
                .map(|p| p.id),
            state: c
                .status
                .code
                .as_ref()
                .map_or("unknown".to_owned(), |s| s.as_str().to_owned()),
            valid_to: c.valid_to.clone(),
            subscription_valid_to: c.subscription_valid_to.clone(),
        };
    }
    let fit = fit_product(domains, products);
    Match::Order {
        product_id: fit.as_ref().map(|(p, _)| p.id),
        product: fit.as_ref().and_then(|(p, _)| p.name.clone()),
        price: fit.and_then(|(_, price)| price),
        passed_over,
    }
}

/// The cheapest domain-validated product for `domains` (single name: `standart`, several:
/// `ucc`), with its one-year price.
fn fit_product<'p>(
    domains: &[String],
    products: &'p [Product],
) -> Option<(&'p Product, Option<Decimal>)> {
    let wanted = if domains.len() > 1 {
        ProductType::Ucc
    } else {
        ProductType::Standart
    };
    products
        .iter()
        .filter(|p| p.product_type.as_ref() == Some(&wanted))
        .filter(|p| p.validation_type.as_deref() == Some("dv"))
        .map(|p| (p, price_of_order(domains, p, 1)))
        .filter(|(_, price)| price.is_some())
        .min_by(|(_, a), (_, b)| match (a, b) {
            (Some(a), Some(b)) => a.cmp_value(b),
            _ => std::cmp::Ordering::Equal,
        })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cert(
        id: u64,
        state: &str,
        names: &[&str],
        valid_to: &str,
        sub_to: Option<&str>,
    ) -> Certificate {
        serde_json::from_value(serde_json::json!({
            "internal_number": id,
            "status": {"code": state, "description": state},
            "name": "DV",
            "domain_name": names[0],
            "domain_names": &names[1..],
            "valid_to": valid_to,
            "subscription_valid_to": sub_to,
        }))
        .unwrap()
    }

    fn d(v: &[&str]) -> Vec<String> {
        v.iter().map(|s| s.to_string()).collect()
    }

    #[test]
    fn covering_expired_cancelled_and_partial_orders() {
        let today = time::macros::date!(2026 - 06 - 01);
        let certs = vec![
            cert(1, "issued", &["a.example.com"], "2026-01-01", None),
            cert(
                2,
                "annulled",
                &["a.example.com", "b.example.com"],
                "2027-01-01",
                None,
            ),
            cert(
                3,
                "issued",
                &["a.example.com"],
                "2027-01-01",
                Some("2028-01-01"),
            ),
            cert(4, "issued", &["*.wild.example.com"], "2026-12-01", None),
            cert(
                5,
                "issued",
                &["b.example.com", "c.example.com"],
                "2027-03-01",
                None,
            ),
        ];
        match match_site(&d(&["a.example.com", "b.example.com"]), &certs, &[], today) {
            Match::Order { passed_over, .. } => {
                let text = passed_over.join("; ");
                assert!(text.contains("2 is annulled"), "{text}");
                assert!(
                    text.contains("3 (issued) does not cover b.example.com"),
                    "{text}"
                );
            }
            m => panic!("{m:?}"),
        }
        let m = match_site(&d(&["a.example.com"]), &certs, &[], today);
        assert!(
            matches!(
                m,
                Match::Adopt {
                    certificate_id: 3,
                    ..
                }
            ),
            "longest subscription: {m:?}"
        );
        let m = match_site(&d(&["x.wild.example.com"]), &certs, &[], today);
        assert!(
            matches!(
                m,
                Match::Adopt {
                    certificate_id: 4,
                    ..
                }
            ),
            "wildcard covers: {m:?}"
        );
        let m = match_site(&d(&["x.y.wild.example.com"]), &certs, &[], today);
        assert!(matches!(m, Match::Order { .. }), "one label only: {m:?}");
        let m = match_site(&d(&["c.example.com", "b.example.com"]), &certs, &[], today);
        assert!(
            matches!(
                m,
                Match::Adopt {
                    certificate_id: 5,
                    ..
                }
            ),
            "{m:?}"
        );
    }
}
