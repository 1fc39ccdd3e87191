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
