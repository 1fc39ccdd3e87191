//! Readers of the JSON fields of an order and its items, with the Rails-style messages of
//! the real service ("Days can't be blank", "Csr must be a string").

use serde_json::{Map, Value};

/// `first_name` → `First name` (Rails' humanize, as in its error messages).
pub(super) fn humanize(field: &str) -> String {
    let text = field.replace('_', " ");
    let mut chars = text.chars();
    chars.next().map_or_else(String::new, |c| {
        c.to_uppercase().chain(chars).collect::<String>()
    })
}

/// A string field: `Ok(None)` when absent or null, `Err` when of another type.
pub(super) fn get_str<'a>(obj: &'a Map<String, Value>, key: &str) -> Result<Option<&'a str>, ()> {
    match obj.get(key) {
        None | Some(Value::Null) => Ok(None),
        Some(Value::String(s)) => Ok(Some(s)),
        Some(_) => Err(()),
    }
}

/// An integer field (JSON integer only): `Ok(None)` when absent or null.
pub(super) fn get_int(obj: &Map<String, Value>, key: &str) -> Result<Option<i64>, ()> {
    match obj.get(key) {
        None | Some(Value::Null) => Ok(None),
        Some(v) => v.as_i64().map(Some).ok_or(()),
    }
}

/// A required non-blank string; pushes the Rails-style message otherwise.
pub(super) fn required_str(
    obj: &Map<String, Value>,
    key: &str,
    errs: &mut Vec<String>,
) -> Option<String> {
    match get_str(obj, key) {
        Ok(Some(s)) if !s.trim().is_empty() => Some(s.trim().to_string()),
        Ok(_) => {
            errs.push(format!("{} can't be blank", humanize(key)));
            None
        }
        Err(()) => {
            errs.push(format!("{} must be a string", humanize(key)));
            None
        }
    }
}

/// An optional string; pushes a type error for other JSON types.
pub(super) fn optional_str(
    obj: &Map<String, Value>,
    key: &str,
    errs: &mut Vec<String>,
) -> Option<String> {
    match get_str(obj, key) {
        Ok(s) => s.map(str::to_string).filter(|s| !s.trim().is_empty()),
        Err(()) => {
            errs.push(format!("{} must be a string", humanize(key)));
            None
        }
    }
}

/// The integer fields of an order item.
const INTEGER_FIELDS: [&str; 3] = ["nomenclature_id", "days", "ssl_server_software_id"];

/// An order read from text (query string or form body) with its items' integer fields cast
/// as Rails casts them: decimal digits become the number, a blank value is absent, anything
/// else stays text (and is reported "is not a number").
pub(super) fn cast_text_integers(order: &Map<String, Value>) -> Map<String, Value> {
    let mut order = order.clone();
    if let Some(Value::Array(items)) = order.get_mut("items") {
        for item in items.iter_mut().filter_map(Value::as_object_mut) {
            for key in INTEGER_FIELDS {
                let Some(Value::String(text)) = item.get(key) else {
                    continue;
                };
                let text = text.trim();
                if text.is_empty() {
                    item.remove(key);
                } else if let Ok(n) = text.parse::<i64>() {
                    item.insert(key.to_string(), Value::from(n));
                }
            }
        }
    }
    order
}
