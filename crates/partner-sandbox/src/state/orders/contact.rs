//! The administrative contact of an order: every field a string, omitted ones taken from the
//! account, a valid e-mail address, and a country from the countries call.

use std::collections::BTreeMap;

use serde_json::{Map, Value};

use super::fields::{get_str, humanize};
use crate::state::catalogue;
use crate::state::names;

/// Administrative contact fields of `order` (all optional strings).
const CONTACT_FIELDS: [&str; 10] = [
    "first_name",
    "last_name",
    "phone",
    "email",
    "title",
    "company",
    "address_1",
    "city_name",
    "region_name",
    "zip_code",
];

/// Validates the administrative contact of `order`; returns it with omitted fields taken
/// from the account.
pub(super) fn validate_contact(
    order: &Map<String, Value>,
    login: &str,
    errs: &mut Vec<String>,
) -> BTreeMap<String, Value> {
    let mut contact = BTreeMap::new();
    let defaults = [
        ("first_name", "Sandbox"),
        ("last_name", "Partner"),
        ("phone", "+10000000000"),
        ("email", login),
        ("title", "Administrator"),
        ("company", "Sandbox Partner Ltd"),
        ("address_1", "1 Sandbox Street"),
        ("city_name", "Berlin"),
        ("region_name", "Berlin"),
        ("zip_code", "10115"),
    ];
    for field in CONTACT_FIELDS {
        let value = match get_str(order, field) {
            Ok(Some(v)) => v.to_string(),
            Ok(None) => defaults
                .iter()
                .find(|(k, _)| *k == field)
                .map(|(_, v)| (*v).to_string())
                .unwrap_or_default(),
            Err(()) => {
                errs.push(format!("{} must be a string", humanize(field)));
                continue;
            }
        };
        if field == "email" && !names::looks_like_email(&value) {
            errs.push(format!("Email {value} is not a valid e-mail address"));
        }
        contact.insert(field.to_string(), Value::String(value));
    }
    match order.get("fax") {
        None | Some(Value::Null) => {
            contact.insert("fax".to_string(), Value::Null);
        }
        Some(Value::String(s)) => {
            contact.insert("fax".to_string(), Value::String(s.clone()));
        }
        Some(_) => errs.push("Fax must be a string or null".to_string()),
    }
    let country = match order.get("country_id") {
        None | Some(Value::Null) => Some("DE"),
        Some(Value::Number(n)) => n.as_u64().and_then(catalogue::country_by_id),
        Some(Value::String(s)) => match s.parse::<u64>() {
            Ok(id) => catalogue::country_by_id(id),
            Err(_) => catalogue::country_by_code(s).and_then(catalogue::country_by_id),
        },
        Some(_) => None,
    };
    match country {
        Some(code) => {
            contact.insert("country".to_string(), Value::String(code.to_string()));
        }
        None => errs.push(
            "Country is invalid (country_id must be a numeric country ID or an ISO 3166-1 alpha-2 code from the countries call)".to_string(),
        ),
    }
    contact
}
