//! Every configuration key, declared once: its section, its name, its kind (with the range of
//! a number, the options of a choice), its default as the reference prints it and the
//! reference's sentence. From these declarations come the keys each section accepts (any other
//! is refused with a suggestion), the generic checks of the scalar keys (type, range or
//! options, default: `Checker::number`, `Checker::flag`, `Checker::fraction`,
//! `Checker::choice`) and the key tables of `docs/configuration.md` (`reference.rs`, held to
//! the page by a test). Checks that are not about one key alone (keys that need each other,
//! paths, URLs, names) stay in `validate/`.
//!
//! - `service.rs`: `[api]`, `[agent]`, `[validation]`, `[revocation]`, `[preflight]`;
//! - `fleet.rs`: `[fleet]`, `[acme.NAME]`;
//! - `certificate.rs`: `[[certificate]]` (and `[defaults]`).

/// Declares keys: each `IDENT { name, kind, default, doc, per_certificate }` becomes the
/// constant `IDENT`, and the list names them all in order (the reference's row order).
macro_rules! keys {
    ($section:expr => $list:ident { $($id:ident { $($field:ident: $value:expr),* $(,)? })* }) => {
        $(
            #[allow(
                clippy::needless_update,
                reason = "a key declaring every field leaves nothing to the base"
            )]
            pub(in crate::config) const $id: Key = Key {
                section: $section,
                ident: stringify!($id),
                $($field: $value,)*
                ..Key::BASE
            };
        )*
        /// The keys of one section (or one part of `[[certificate]]`), in the reference's order.
        pub(in crate::config) const $list: &[Key] = &[$($id),*];
    };
}

mod certificate;
mod fleet;
#[cfg(test)]
pub(super) mod reference;
mod service;

pub(super) use certificate::*;
pub(super) use fleet::*;
pub(super) use service::*;

/// Where a key is written.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(in crate::config) enum Section {
    Api,
    Agent,
    Fleet,
    Validation,
    Revocation,
    Preflight,
    Acme,
    /// `[[certificate]]` (and `[defaults]`), one part of the reference each.
    Certificate(Part),
}

/// The parts of a certificate's keys, as the reference groups them.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(in crate::config) enum Part {
    Order,
    Key,
    Dcv,
    Install,
}

/// What a key holds. Numbers and booleans are checked here for their type and range, with the
/// same words for every key; the other kinds name the reference's type and are read by their
/// own reader in `validate/`.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(in crate::config) enum Kind {
    Bool {
        default: bool,
    },
    /// A whole number in `min..=max`; `default` when absent (none: the key is optional).
    Int {
        min: u64,
        max: u64,
        default: Option<u64>,
    },
    /// A duration in whole seconds in `min..=max`.
    Seconds {
        min: u64,
        max: u64,
        default: Option<u64>,
    },
    /// A float above 0 and below 1: `what` it is a fraction of, and an `example`.
    Fraction {
        default: f64,
        what: &'static str,
        example: &'static str,
    },
    /// One of `options` (read as the enum whose serde names they are); `default` when
    /// absent or not one of them.
    Choice {
        options: &'static [&'static str],
        default: Option<&'static str>,
    },
    /// A string (the reader says whether it may be empty).
    String,
    /// An absolute path.
    Path,
    /// A command: a string run by `/bin/sh -c`, or an argv array.
    Command,
    /// Anything else, as the reference names its type; read by its own reader.
    Other(&'static str),
}

impl Kind {
    /// The reference's "type" column.
    #[cfg(test)]
    pub(in crate::config) fn label(&self) -> &'static str {
        match self {
            Self::Bool { .. } => "boolean",
            Self::Int { .. } => "integer",
            Self::Seconds { .. } => "integer (seconds)",
            Self::Fraction { .. } => "float",
            Self::Choice { .. } | Self::String => "string",
            Self::Path => "path",
            Self::Command => "command",
            Self::Other(label) => label,
        }
    }

    /// A number's range and default.
    pub(in crate::config) const fn range(&self) -> Option<(u64, u64, Option<u64>)> {
        match *self {
            Self::Int { min, max, default } | Self::Seconds { min, max, default } => {
                Some((min, max, default))
            }
            _ => None,
        }
    }
}

/// One configuration key.
#[derive(Debug, Clone, Copy)]
#[cfg_attr(
    not(test),
    expect(
        dead_code,
        reason = "the section, the constant's name, the default's text and the sentence are \
                  read by the reference's renderer and the schema tests"
    )
)]
pub(in crate::config) struct Key {
    pub(in crate::config) section: Section,
    /// The name of its constant here (what a reader in `validate/` names).
    pub(in crate::config) ident: &'static str,
    /// As written in the file.
    pub(in crate::config) name: &'static str,
    pub(in crate::config) kind: Kind,
    /// The reference's "default" column; for a number or a boolean with a default, what
    /// follows the value (`(10 MiB)`).
    pub(in crate::config) default: &'static str,
    /// A certificate's own key, which `[defaults]` cannot set.
    pub(in crate::config) per_certificate: bool,
    /// The reference's sentence (after the range of a number).
    pub(in crate::config) doc: &'static str,
}

impl Key {
    /// What a declaration does not say.
    const BASE: Key = Key {
        section: Section::Api,
        ident: "",
        name: "",
        kind: Kind::String,
        default: "",
        per_certificate: false,
        doc: "",
    };

    /// The default of a number (0 for a number declared without one).
    pub(in crate::config) const fn number_default(&self) -> u64 {
        match self.kind.range() {
            Some((_, _, Some(d))) => d,
            _ => 0,
        }
    }

    /// The default of a boolean (false for another kind).
    pub(in crate::config) const fn flag_default(&self) -> bool {
        match self.kind {
            Kind::Bool { default } => default,
            _ => false,
        }
    }
}

/// Every section's keys, in the reference's order.
#[cfg(test)]
pub(in crate::config) const SECTIONS: [&[Key]; 11] = [
    API,
    AGENT,
    FLEET,
    VALIDATION,
    REVOCATION,
    PREFLIGHT,
    ACME,
    CERTIFICATE_ORDER,
    CERTIFICATE_KEY,
    CERTIFICATE_DCV,
    CERTIFICATE_INSTALL,
];

/// The top level's keys: the sections, `[defaults]` and `[[certificate]]`.
pub(in crate::config) const TOP_LEVEL: &[&str] = &[
    "api",
    "agent",
    "fleet",
    "validation",
    "revocation",
    "preflight",
    "acme",
    "defaults",
    "certificate",
];

/// Every declared key.
#[cfg(test)]
pub(in crate::config) fn all() -> impl Iterator<Item = &'static Key> {
    SECTIONS.into_iter().flatten()
}

/// The names of `keys`, for the check of unknown keys and its suggestion.
pub(in crate::config) fn names(keys: &[Key]) -> Vec<&'static str> {
    keys.iter().map(|k| k.name).collect()
}

/// A certificate's keys.
pub(in crate::config) fn certificate_keys() -> impl Iterator<Item = &'static Key> {
    [
        CERTIFICATE_ORDER,
        CERTIFICATE_KEY,
        CERTIFICATE_DCV,
        CERTIFICATE_INSTALL,
    ]
    .into_iter()
    .flatten()
}

/// The names a `[[certificate]]` (and `[defaults]`, which refuses the per-certificate ones)
/// accepts.
pub(in crate::config) fn certificate_names() -> Vec<&'static str> {
    certificate_keys().map(|k| k.name).collect()
}

/// Whether `name` is a certificate's own key, which `[defaults]` cannot set.
pub(in crate::config) fn per_certificate(name: &str) -> bool {
    certificate_keys().any(|k| k.per_certificate && k.name == name)
}

/// The section an unknown key belongs to, for "it belongs in [agent]" (the sections a
/// misplaced key is most often meant for).
pub(in crate::config) fn home_of(name: &str) -> Option<&'static str> {
    let has = |keys: &[Key]| keys.iter().any(|k| k.name == name);
    if has(API) {
        Some("[api]")
    } else if has(AGENT) {
        Some("[agent]")
    } else if certificate_keys().any(|k| k.name == name) {
        Some("[[certificate]]")
    } else {
        None
    }
}
