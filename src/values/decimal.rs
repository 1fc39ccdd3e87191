//! `Decimal`: an amount of money kept as its exact text, compared exactly, never a float.

use std::cmp::Ordering;
use std::fmt;

use serde::de::{self, Deserializer, Visitor};
use serde::{Deserialize, Serialize, Serializer};

/// A decimal amount kept as its exact text, e.g. `"12.50"`.
///
/// Deserialises from a JSON string (prices, `Price.value`) or a JSON number (details `price`,
/// balance `sum`). A number is kept as the shortest text that denotes the same value
/// (`12.10` becomes `"12.1"`); integers are exact. Never stored as a float.
#[derive(Clone, PartialEq, Eq, Hash)]
pub struct Decimal(String);

/// A text that is not a plain decimal number (`-?digits(.digits)?`).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("not a decimal number: {0:?}")]
pub struct InvalidDecimal(pub String);

impl Decimal {
    /// Parses `-?[0-9]+(\.[0-9]+)?` (surrounding whitespace is not accepted).
    pub fn parse(text: &str) -> Result<Self, InvalidDecimal> {
        let digits = text.strip_prefix('-').unwrap_or(text);
        let (int, frac) = match digits.split_once('.') {
            Some((i, f)) => (i, Some(f)),
            None => (digits, None),
        };
        let all_digits = |s: &str| !s.is_empty() && s.bytes().all(|b| b.is_ascii_digit());
        if all_digits(int) && frac.is_none_or(all_digits) {
            Ok(Self(text.to_owned()))
        } else {
            Err(InvalidDecimal(text.chars().take(40).collect()))
        }
    }

    /// `0.00`.
    pub fn zero() -> Self {
        Self("0.00".to_owned())
    }

    pub fn as_str(&self) -> &str {
        &self.0
    }

    /// Compares the values exactly (`"10.0"` equals `"10"`, `"9.99"` is less than `"10"`).
    pub fn cmp_value(&self, other: &Decimal) -> Ordering {
        let (na, ia, fa) = self.parts();
        let (nb, ib, fb) = other.parts();
        let zero_a = ia.is_empty() && fa.is_empty();
        let zero_b = ib.is_empty() && fb.is_empty();
        let neg_a = na && !zero_a;
        let neg_b = nb && !zero_b;
        match (neg_a, neg_b) {
            (false, true) => return Ordering::Greater,
            (true, false) => return Ordering::Less,
            _ => {}
        }
        let magnitude = ia
            .len()
            .cmp(&ib.len())
            .then_with(|| ia.cmp(ib))
            .then_with(|| fa.cmp(fb));
        if neg_a {
            magnitude.reverse()
        } else {
            magnitude
        }
    }

    /// (negative, integer digits without leading zeros, fraction digits without trailing zeros)
    fn parts(&self) -> (bool, &str, &str) {
        let neg = self.0.starts_with('-');
        let digits = self.0.trim_start_matches('-');
        let (int, frac) = digits.split_once('.').unwrap_or((digits, ""));
        (neg, int.trim_start_matches('0'), frac.trim_end_matches('0'))
    }
}

impl fmt::Display for Decimal {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl fmt::Debug for Decimal {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Decimal({})", self.0)
    }
}

impl std::str::FromStr for Decimal {
    type Err = InvalidDecimal;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Self::parse(s)
    }
}

impl Serialize for Decimal {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.serialize_str(&self.0)
    }
}

impl<'de> Deserialize<'de> for Decimal {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct V;
        impl Visitor<'_> for V {
            type Value = Decimal;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a decimal number or a string holding one")
            }
            fn visit_str<E: de::Error>(self, v: &str) -> Result<Decimal, E> {
                Decimal::parse(v).map_err(E::custom)
            }
            fn visit_u64<E: de::Error>(self, v: u64) -> Result<Decimal, E> {
                Ok(Decimal(v.to_string()))
            }
            fn visit_i64<E: de::Error>(self, v: i64) -> Result<Decimal, E> {
                Ok(Decimal(v.to_string()))
            }
            fn visit_f64<E: de::Error>(self, v: f64) -> Result<Decimal, E> {
                // Rust prints the shortest text that parses back to `v`, never an exponent.
                if v.is_finite() {
                    Decimal::parse(&v.to_string()).map_err(E::custom)
                } else {
                    Err(E::custom("not a finite number"))
                }
            }
        }
        deserializer.deserialize_any(V)
    }
}
