//! `Secret`: a string that must never be printed (passwords, auth tokens, prolongation tokens).

use std::fmt;

use serde::{Deserialize, Deserializer, Serialize, Serializer};

/// What a [`Secret`] shows instead of its value (Debug and Serialize).
pub(crate) const MASK: &str = "********";

/// A credential. `Debug` and `Serialize` show [`MASK`]; there is no `Display`. Read the value
/// only where it is sent or stored, with [`Secret::expose`].
#[derive(Clone, PartialEq, Eq, Default)]
pub struct Secret(String);

impl Secret {
    pub fn new(value: impl Into<String>) -> Self {
        Self(value.into())
    }

    /// The secret value. Call it only to put the value on the wire or into a 0600 file.
    pub fn expose(&self) -> &str {
        &self.0
    }

    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }
}

impl fmt::Debug for Secret {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Secret({MASK})")
    }
}

impl Serialize for Secret {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.serialize_str(MASK)
    }
}

impl<'de> Deserialize<'de> for Secret {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        String::deserialize(deserializer).map(Secret)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn debug_and_serialize_never_show_the_value() {
        let s = Secret::new("hunter2");
        assert_eq!(format!("{s:?}"), "Secret(********)");
        assert_eq!(format!("{:?}", Some(&s)), "Some(Secret(********))");
        assert_eq!(serde_json::to_string(&s).unwrap(), "\"********\"");
        assert_eq!(s.expose(), "hunter2");
    }
}
