//! Rails (Rack) nested parameter keys: `a[b][c]=v` makes objects, `a[]=v` arrays, `a[][b]=v`
//! arrays of objects, and an object whose keys are all indices (`a[0][b]`, `a[1][b]`) becomes an
//! array in index order, as Rails' nested attributes read it. Every key and value stays text.
//!
//! Hostile input is bounded: at most [`MAX_DEPTH`] brackets per key, indices up to
//! [`MAX_INDEX`] (an index never sizes an allocation: the array is built from the keys
//! present), and a key whose nesting conflicts with an earlier one (`a=1&a[b]=2`) is refused
//! with Rack's own message.

use serde_json::{Map, Value};

/// Most bracket segments in one key (Rack's `param_depth_limit` is 32 as well).
pub(crate) const MAX_DEPTH: usize = 32;
/// Largest array index accepted in a key such as `items[12]`.
pub(crate) const MAX_INDEX: u64 = 9_999;

/// One bracket segment of a key.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Seg {
    /// `[name]`
    Key(String),
    /// `[]`
    Push,
}

/// Splits `a[b][]` into `a` and its segments. A key that is not a name followed by bracket
/// segments (`[x]`, `a[b`, `a[b]c`) is one flat name, as written.
fn split_key(name: &str) -> Result<(String, Vec<Seg>), String> {
    let Some(open) = name.find('[') else {
        return Ok((name.to_string(), Vec::new()));
    };
    let (head, mut rest) = name.split_at(open);
    if head.is_empty() {
        return Ok((name.to_string(), Vec::new()));
    }
    let mut segs = Vec::new();
    while !rest.is_empty() {
        let Some(inner) = rest.strip_prefix('[') else {
            return Ok((name.to_string(), Vec::new()));
        };
        let Some(close) = inner.find(']') else {
            return Ok((name.to_string(), Vec::new()));
        };
        let seg = &inner[..close];
        if seg.contains('[') {
            return Ok((name.to_string(), Vec::new()));
        }
        if segs.len() == MAX_DEPTH {
            return Err(format!(
                "parameter `{}' is nested deeper than {MAX_DEPTH} levels",
                shorten(name)
            ));
        }
        segs.push(if seg.is_empty() {
            Seg::Push
        } else {
            if let Some(index) = as_index_text(seg)
                && index.parse::<u64>().ok().is_none_or(|i| i > MAX_INDEX)
            {
                return Err(format!(
                    "index {} in parameter `{}' is above the largest index accepted, {MAX_INDEX}",
                    shorten(index),
                    shorten(name)
                ));
            }
            Seg::Key(seg.to_string())
        });
        rest = &inner[close + 1..];
    }
    Ok((head.to_string(), segs))
}

/// `seg` when it is all ASCII digits (an index, whatever its size).
fn as_index_text(seg: &str) -> Option<&str> {
    (!seg.is_empty() && seg.bytes().all(|b| b.is_ascii_digit())).then_some(seg)
}

/// At most 60 characters of a hostile key, for messages.
fn shorten(s: &str) -> String {
    let mut out: String = s.chars().take(60).collect();
    if out.len() < s.len() {
        out.push('…');
    }
    out
}

/// The Ruby class name Rack's messages use.
fn kind(v: &Value) -> &'static str {
    match v {
        Value::Object(_) => "Hash",
        Value::Array(_) => "Array",
        Value::String(_) => "String",
        _ => "NilClass",
    }
}

fn type_error(expected: &str, got: &Value, key: &str) -> String {
    format!(
        "expected {expected} (got {}) for param `{}'",
        kind(got),
        shorten(key)
    )
}

/// True when the path of keys exists in `v` (Rack's `params_hash_has_key?`).
fn has_path(v: &Value, path: &[Seg]) -> bool {
    let mut cur = v;
    for seg in path {
        let Seg::Key(k) = seg else { continue };
        match cur.as_object().and_then(|m| m.get(k)) {
            Some(next) => cur = next,
            None => return false,
        }
    }
    true
}

/// Stores `value` at `segs` below the slot `slot` (named `key` for messages).
fn store(slot: &mut Value, key: &str, segs: &[Seg], value: String) -> Result<(), String> {
    let Some((first, rest)) = segs.split_first() else {
        *slot = Value::String(value);
        return Ok(());
    };
    match first {
        Seg::Push => {
            if slot.is_null() {
                *slot = Value::Array(Vec::new());
            }
            let Value::Array(items) = slot else {
                return Err(type_error("Array", slot, key));
            };
            if rest.is_empty() {
                items.push(Value::String(value));
                return Ok(());
            }
            let reuse = items
                .last()
                .is_some_and(|last| last.is_object() && !has_path(last, rest));
            if !reuse {
                items.push(Value::Object(Map::new()));
            }
            match items.last_mut() {
                Some(last) => store(last, key, rest, value),
                None => Ok(()),
            }
        }
        Seg::Key(name) => {
            if slot.is_null() {
                *slot = Value::Object(Map::new());
            }
            let Value::Object(map) = slot else {
                return Err(type_error("Hash", slot, key));
            };
            let child = map.entry(name.clone()).or_insert(Value::Null);
            store(child, name, rest, value)
        }
    }
}

/// Objects whose keys are all indices become arrays in index order (no gaps are filled).
fn indexed_to_arrays(v: Value) -> Value {
    match v {
        Value::Object(map) => {
            let all_indices = !map.is_empty()
                && map
                    .keys()
                    .all(|k| as_index_text(k).is_some_and(|t| t.len() == 1 || !t.starts_with('0')));
            if all_indices {
                let mut pairs: Vec<(u64, Value)> = map
                    .into_iter()
                    .map(|(k, v)| (k.parse::<u64>().unwrap_or(u64::MAX), indexed_to_arrays(v)))
                    .collect();
                pairs.sort_by_key(|(i, _)| *i);
                Value::Array(pairs.into_iter().map(|(_, v)| v).collect())
            } else {
                Value::Object(
                    map.into_iter()
                        .map(|(k, v)| (k, indexed_to_arrays(v)))
                        .collect(),
                )
            }
        }
        Value::Array(items) => Value::Array(items.into_iter().map(indexed_to_arrays).collect()),
        other => other,
    }
}

/// The parameter tree of decoded `key=value` pairs, in order: a later plain key replaces an
/// earlier one, nested keys build objects and arrays. `Err` is Rack's message for the first
/// key that cannot be placed.
pub(crate) fn expand(pairs: &[(String, String)]) -> Result<Map<String, Value>, String> {
    let mut root = Value::Object(Map::new());
    for (name, value) in pairs {
        if name.is_empty() {
            continue;
        }
        let (head, segs) = split_key(name)?;
        let Value::Object(map) = &mut root else {
            break;
        };
        let slot = map.entry(head.clone()).or_insert(Value::Null);
        store(slot, &head, &segs, value.clone())?;
    }
    match indexed_to_arrays(root) {
        Value::Object(map) => Ok(map),
        _ => Ok(Map::new()),
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn tree(q: &[(&str, &str)]) -> Result<Value, String> {
        let pairs: Vec<(String, String)> = q
            .iter()
            .map(|(k, v)| ((*k).to_string(), (*v).to_string()))
            .collect();
        expand(&pairs).map(Value::Object)
    }

    #[test]
    fn flat_keys_last_one_wins() {
        assert_eq!(
            tree(&[("a", "1"), ("b", "x"), ("a", "2")]),
            Ok(json!({"a": "2", "b": "x"}))
        );
        assert_eq!(tree(&[("", "ignored")]), Ok(json!({})));
    }

    #[test]
    fn nested_objects() {
        assert_eq!(
            tree(&[("a[b][c]", "1"), ("a[b][d]", "2"), ("a[e]", "3")]),
            Ok(json!({"a": {"b": {"c": "1", "d": "2"}, "e": "3"}}))
        );
    }

    #[test]
    fn pushed_arrays_of_values_and_objects() {
        assert_eq!(
            tree(&[("a[]", "1"), ("a[]", "2")]),
            Ok(json!({"a": ["1", "2"]}))
        );
        // A new object starts when the last one already has the key (Rack's rule).
        assert_eq!(
            tree(&[("a[][b]", "1"), ("a[][c]", "2"), ("a[][b]", "3")]),
            Ok(json!({"a": [{"b": "1", "c": "2"}, {"b": "3"}]}))
        );
        assert_eq!(
            tree(&[("a[b][]", "x"), ("a[b][]", "y")]),
            Ok(json!({"a": {"b": ["x", "y"]}}))
        );
    }

    #[test]
    fn indices_make_arrays_in_index_order() {
        assert_eq!(
            tree(&[
                ("order[items][1][csr]", "B"),
                ("order[items][0][nomenclature_id]", "7"),
                ("order[items][0][csr]", "A"),
                ("order[items][10][csr]", "C"),
            ]),
            Ok(json!({"order": {"items": [
                {"nomenclature_id": "7", "csr": "A"}, {"csr": "B"}, {"csr": "C"}
            ]}}))
        );
        // Mixed: indices beside a name stay an object; "01" is a name, not an index.
        assert_eq!(
            tree(&[("a[0]", "x"), ("a[k]", "y")]),
            Ok(json!({"a": {"0": "x", "k": "y"}}))
        );
        assert_eq!(tree(&[("a[01]", "x")]), Ok(json!({"a": {"01": "x"}})));
        assert_eq!(
            tree(&[("a[0][]", "x"), ("a[0][]", "y")]),
            Ok(json!({"a": [["x", "y"]]}))
        );
    }

    #[test]
    fn huge_indices_are_refused_without_allocating() {
        let e = tree(&[("a[99999999]", "x")]).unwrap_err();
        assert!(e.contains("index 99999999"), "{e}");
        assert!(e.contains("9999"), "{e}");
        let huge = format!("a[{}]", "9".repeat(5000));
        let e = tree(&[(huge.as_str(), "x")]).unwrap_err();
        assert!(e.len() < 300, "the message stays short: {}", e.len());
        assert_eq!(tree(&[("a[9999]", "x")]), Ok(json!({"a": ["x"]})));
    }

    #[test]
    fn deep_nesting_is_refused() {
        let ok = format!("a{}", "[b]".repeat(MAX_DEPTH));
        assert!(tree(&[(ok.as_str(), "x")]).is_ok());
        let deep = format!("a{}", "[b]".repeat(MAX_DEPTH + 1));
        let e = tree(&[(deep.as_str(), "x")]).unwrap_err();
        assert!(e.contains("nested deeper than 32"), "{e}");
        let very = format!("a{}", "[]".repeat(100_000));
        assert!(tree(&[(very.as_str(), "x")]).is_err());
    }

    #[test]
    fn conflicts_are_rack_type_errors() {
        assert_eq!(
            tree(&[("a", "1"), ("a[b]", "2")]),
            Err("expected Hash (got String) for param `a'".to_string())
        );
        assert_eq!(
            tree(&[("a[]", "1"), ("a[b]", "2")]),
            Err("expected Hash (got Array) for param `a'".to_string())
        );
        assert_eq!(
            tree(&[("a[b]", "1"), ("a[]", "2")]),
            Err("expected Array (got Hash) for param `a'".to_string())
        );
        assert_eq!(
            tree(&[("a[b]", "1"), ("a[b][c]", "2")]),
            Err("expected Hash (got String) for param `b'".to_string())
        );
        // A later plain key replaces a nested value, as in Rack.
        assert_eq!(tree(&[("a[b]", "1"), ("a", "2")]), Ok(json!({"a": "2"})));
    }

    #[test]
    fn malformed_keys_are_flat_names() {
        assert_eq!(
            tree(&[("a[b", "1"), ("[x]", "2"), ("a[b]c", "3"), ("a[[b]]", "4")]),
            Ok(json!({"a[b": "1", "[x]": "2", "a[b]c": "3", "a[[b]]": "4"}))
        );
    }
}
