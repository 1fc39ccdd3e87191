//! Wire models of Partner API v1 (the reference's "Resources and their fields";
//! `docs/partner-api.openapi.yaml` has them as schemas).
//!
//! Rules: every field the document calls nullable is an `Option`; unknown fields are ignored
//! (no `deny_unknown_fields`); money stays decimal text ([`Decimal`]); the product type keeps the
//! document's `standart` spelling; credentials (auth token, prolongation token) are
//! [`Secret`](crate::api::Secret)s. Each model is tested beside it against the shapes of the
//! document.
//!
//! By area: `account.rs` (sign-in answer, action result, balance), `catalogue.rs` (products,
//! countries, server software), `order.rs` (order, renewal order, reissue form),
//! `certificate.rs` (states, status, list, details, download), `dcv.rs` (DCV addresses and
//! state). This file holds the deserialising helpers they share.

use serde::Deserialize;
use serde::de::Deserializer;

pub use crate::values::DcvType;
pub(crate) use crate::values::Decimal;

mod account;
mod catalogue;
mod certificate;
mod dcv;
mod order;

pub(crate) use account::Amount;
pub use account::{ActionResult, Balance, SignInResponse};
pub(crate) use catalogue::Price;
pub use catalogue::{Country, Product, ProductType, ServerSoftware};
pub use certificate::{Certificate, CertificateDetails, CertificateStatus, ListScope, Pagination};
pub(crate) use certificate::{CertificatePage, CertificateState, Download, PendingAction};
pub use dcv::{DcvEmails, DcvStatus};
pub use order::{Order, OrderItem, OrderRequest, OrderResponse, Prolongation, ReissueRequest};

// ---------------------------------------------------------------------------------------------
// Helpers
// ---------------------------------------------------------------------------------------------

/// `null` or absent becomes the empty/default value (for arrays and maps the document always
/// sends, where an empty one means the same as none).
fn null_as_default<'de, D, T>(deserializer: D) -> Result<T, D::Error>
where
    D: Deserializer<'de>,
    T: Default + Deserialize<'de>,
{
    Ok(Option::<T>::deserialize(deserializer)?.unwrap_or_default())
}

/// A boolean, or `None` for null or anything else (the X-Pagination flags are not typed by the
/// document).
fn lenient_bool<'de, D: Deserializer<'de>>(deserializer: D) -> Result<Option<bool>, D::Error> {
    Ok(match serde_json::Value::deserialize(deserializer)? {
        serde_json::Value::Bool(b) => Some(b),
        _ => None,
    })
}

/// Parses a date of the API (`YYYY-MM-DD`, or an RFC 3339 date-time of which the date is taken).
pub fn parse_api_date(text: &str) -> Option<time::Date> {
    let date = text.get(..10)?;
    let rest = text.get(10..)?;
    if !(rest.is_empty() || rest.starts_with(['T', 't', ' '])) {
        return None;
    }
    let mut parts = date.split('-');
    let (y, m, d) = (parts.next()?, parts.next()?, parts.next()?);
    if y.len() != 4 || m.len() != 2 || d.len() != 2 {
        return None;
    }
    let month = time::Month::try_from(m.parse::<u8>().ok()?).ok()?;
    time::Date::from_calendar_date(y.parse().ok()?, month, d.parse().ok()?).ok()
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;
    use std::cmp::Ordering;

    pub(super) fn de<T: serde::de::DeserializeOwned>(v: serde_json::Value) -> T {
        serde_json::from_value(v).expect("decodes")
    }

    #[test]
    fn decimal_parses_strings_and_numbers_exactly() {
        assert_eq!(de::<Decimal>(json!("12.50")).as_str(), "12.50");
        assert_eq!(de::<Decimal>(json!(12)).as_str(), "12");
        let from_number: Decimal = serde_json::from_str("1234.56").unwrap();
        assert_eq!(from_number.as_str(), "1234.56");
        let small: Decimal = serde_json::from_str("0.1").unwrap();
        assert_eq!(small.as_str(), "0.1");
        assert!(serde_json::from_value::<Decimal>(json!("12,50")).is_err());
        assert!(serde_json::from_value::<Decimal>(json!("1e5")).is_err());
        assert!(serde_json::from_value::<Decimal>(json!(true)).is_err());
        assert!(Decimal::parse(".5").is_err());
        assert!(Decimal::parse("5.").is_err());
        assert!(Decimal::parse("").is_err());
    }

    #[test]
    fn decimal_compares_values() {
        let d = |s: &str| Decimal::parse(s).unwrap();
        assert_eq!(d("10.0").cmp_value(&d("10")), Ordering::Equal);
        assert_eq!(d("9.99").cmp_value(&d("10")), Ordering::Less);
        assert_eq!(d("100.00").cmp_value(&d("99.999")), Ordering::Greater);
        assert_eq!(d("010.5").cmp_value(&d("10.50")), Ordering::Equal);
        assert_eq!(d("-1").cmp_value(&d("0")), Ordering::Less);
        assert_eq!(d("-2").cmp_value(&d("-1.5")), Ordering::Less);
        assert_eq!(d("-0").cmp_value(&d("0.00")), Ordering::Equal);
        assert_eq!(d("0.001").cmp_value(&d("0.01")), Ordering::Less);
    }
}
