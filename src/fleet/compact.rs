//! A shared record's JSON as the fleet stores it: without the entries its reader fills in by
//! itself.
//!
//! Every value under the prefix is a document's JSON, sealed. Written whole, a certificate's
//! shared record carries about 300 bytes of `null`, `false`, `0` and empty lists (no reissue,
//! no intent, no validation file published, no failure), which etcd keeps for every
//! certificate: 30 MB at 100,000 certificates. Here an entry is left out only where the
//! document's own reader gives back the same document without it: the JSON is read back and
//! written again, and must equal what was written whole. An entry that the reader cannot do
//! without (it names the missing field) is kept wherever it occurs; a document that does not
//! come back the same is written whole. The check reads and writes the document once more
//! (its JSON as a tree, a few dozen allocations): it is made for the shared records, written
//! by the leader when a record changes, not for the hosts' results and proofs (nothing to
//! leave out, and thousands written by a host that joins).
//!
//! A host of an earlier version reads such a value too: every entry left out is of a field
//! that every version reads as absent in the same way (an `Option` or a field with its
//! default), as the reader of this version does.

use serde::Serialize;
use serde::de::DeserializeOwned;
use serde_json::Value;

/// How many fields the reader may name as needed before the document is written whole.
const MAX_NEEDED: usize = 16;

/// `doc`'s JSON without the entries its reader fills in itself (see the module's comment).
pub(super) fn to_vec<T: Serialize + DeserializeOwned>(doc: &T) -> serde_json::Result<Vec<u8>> {
    let full = serde_json::to_value(doc)?;
    for lean in [Lean::Defaults, Lean::Nulls] {
        if let Some(compact) = leanest::<T>(&full, lean) {
            return serde_json::to_vec(&compact);
        }
    }
    serde_json::to_vec(&full)
}

/// Which entries may be left out.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Lean {
    /// `null`, `false`, `0`, `""`, `[]` and `{}` (an object emptied by the same rule too).
    Defaults,
    /// `null` only (for a document whose reader defaults a field to something else).
    Nulls,
}

/// `full` without the entries `lean` allows and the reader of `T` fills in, or `None` when
/// the document does not come back the same.
fn leanest<T: Serialize + DeserializeOwned>(full: &Value, lean: Lean) -> Option<Value> {
    let mut needed: Vec<String> = Vec::new();
    loop {
        let mut compact = full.clone();
        strip(&mut compact, lean, &needed);
        match T::deserialize(&compact) {
            Ok(back) => {
                return (serde_json::to_value(&back).ok().as_ref() == Some(full))
                    .then_some(compact);
            }
            Err(e) => {
                let name = missing_field(&e.to_string())?;
                if needed.len() >= MAX_NEEDED || needed.contains(&name) {
                    return None;
                }
                needed.push(name);
            }
        }
    }
}

/// The field a reader's error says is missing.
fn missing_field(error: &str) -> Option<String> {
    let rest = error.split("missing field `").nth(1)?;
    Some(rest.split('`').next()?.to_owned())
}

/// Leaves out of every object in `v` the entries `lean` allows, but those named in `needed`.
fn strip(v: &mut Value, lean: Lean, needed: &[String]) {
    match v {
        Value::Object(map) => {
            map.retain(|name, value| {
                strip(value, lean, needed);
                needed.iter().any(|n| n == name) || !omissible(value, lean)
            });
        }
        Value::Array(items) => items.iter_mut().for_each(|i| strip(i, lean, needed)),
        _ => {}
    }
}

fn omissible(v: &Value, lean: Lean) -> bool {
    match (v, lean) {
        (Value::Null, _) => true,
        (_, Lean::Nulls) => false,
        (Value::Bool(b), Lean::Defaults) => !b,
        (Value::Number(n), Lean::Defaults) => n.as_u64() == Some(0) || n.as_i64() == Some(0),
        (Value::String(s), Lean::Defaults) => s.is_empty(),
        (Value::Array(a), Lean::Defaults) => a.is_empty(),
        (Value::Object(o), Lean::Defaults) => o.is_empty(),
    }
}

#[cfg(test)]
mod tests;
