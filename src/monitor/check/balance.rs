//! The balance part of `cert-agent check`: whether the account covers the billed orders due
//! soon.

use anyhow::Result;
use time::OffsetDateTime;

use super::super::money::{CRITICAL_DAYS, Forecast, WARNING_DAYS};
use super::{Level, MoneyCheck};

/// The balance against the billed orders due in 7 and 30 days: CRITICAL when it does not cover
/// the 7 days, WARNING when not the 30 days, when a price is unknown or when the balance could
/// not be read.
pub(crate) fn money_check(forecast: Result<Forecast>, now: OffsetDateTime) -> MoneyCheck {
    let f = match forecast {
        Ok(f) => f,
        Err(e) => {
            return MoneyCheck {
                level: Level::Warning,
                problems: vec![format!(
                    "a billed order falls due within {WARNING_DAYS} days and the balance could \
                 not be read: {e:#}"
                )],
                available: None,
                currency: None,
                spend_7d: None,
                spend_30d: None,
            };
        }
    };
    let (spend_7d, unknown_7) = f.spend_until(now + time::Duration::days(CRITICAL_DAYS));
    let (spend_30d, unknown_30) = f.spend_until(now + time::Duration::days(WARNING_DAYS));
    let mut level = Level::Ok;
    let mut problems = Vec::new();
    let currency = f.currency.clone().unwrap_or_default();
    if let Some(a) = &f.available {
        let short =
            |spend: &crate::values::Decimal| a.sum.cmp_value(spend) == std::cmp::Ordering::Less;
        if short(&spend_7d) {
            level = Level::Critical;
            problems.push(format!(
                "available {} {currency} does not cover the {spend_7d} {currency} of orders due \
                 within {CRITICAL_DAYS} days",
                a.sum
            ));
        } else if short(&spend_30d) {
            level = Level::Warning;
            problems.push(format!(
                "available {} {currency} does not cover the {spend_30d} {currency} of orders due \
                 within {WARNING_DAYS} days",
                a.sum
            ));
        }
    }
    if unknown_7 || unknown_30 {
        level = level.max(Level::Warning);
        problems.push(format!(
            "the catalogue has no price for the order of {}",
            f.unpriced.join(", ")
        ));
    }
    MoneyCheck {
        level,
        problems,
        available: f.available.as_ref().map(|a| a.sum.clone()),
        currency: f.currency,
        spend_7d: Some(spend_7d),
        spend_30d: Some(spend_30d),
    }
}
