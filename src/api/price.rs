//! What an order costs, from the product list's prices: exact decimal arithmetic in
//! millionths, never floating point.

use super::{Decimal, Product, ProductType};

/// The net price (account currency) of an order of `product` for `domains` over `years`: the
/// product's price for that period and, for a UCC product, its per-name options (plain names
/// and wildcards counted within each option's quantity range). `None` when the product's
/// prices do not tell it.
pub(crate) fn price_of_order(domains: &[String], product: &Product, years: u32) -> Option<Decimal> {
    let price_for = |prices: &[crate::api::Price]| {
        prices
            .iter()
            .find(|p| p.period == Some(years))
            .and_then(|p| p.value.as_ref())
            .and_then(|v| micros(v.as_str()))
    };
    let mut total = price_for(&product.prices)?;
    if product.product_type == Some(ProductType::Ucc) {
        let wildcards = domains.iter().filter(|d| d.starts_with("*.")).count() as u64;
        let plain = domains.len() as u64 - wildcards;
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

/// The exact sum of `amounts`; `None` when one has more than six decimals or the sum
/// overflows.
pub(crate) fn sum_of<'a>(amounts: impl IntoIterator<Item = &'a Decimal>) -> Option<Decimal> {
    let mut total: i128 = 0;
    for a in amounts {
        total = total.checked_add(micros(a.as_str())?)?;
    }
    Decimal::parse(&format_micros(total)).ok()
}

/// A decimal string in millionths (at most 6 decimals).
pub(crate) fn micros(text: &str) -> Option<i128> {
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

pub(crate) fn format_micros(v: i128) -> String {
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
        let d = |s: &str| Decimal::parse(s).unwrap();
        assert_eq!(
            sum_of(&[d("8.80"), d("27.5"), d("0.01")]).unwrap().as_str(),
            "36.31"
        );
        assert_eq!(sum_of(&[]).unwrap().as_str(), "0.00");
        assert_eq!(sum_of(&[d("1.1234567")]), None);
    }
}
