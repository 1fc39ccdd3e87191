//! The configuration's keys are named in three places — the lists of accepted keys
//! (`keys.rs`), the readers (`validate/`) and the reference (`docs/configuration.md`). These
//! tests hold the three together: a key added to one and forgotten in another fails here.

use crate::config::keys::{
    ACME_KEYS, AGENT_KEYS, API_KEYS, CERT_ONLY_KEYS, FLEET_KEYS, PREFLIGHT_KEYS, REVOCATION_KEYS,
    SHARED_KEYS, VALIDATION_KEYS,
};

const REFERENCE: &str = include_str!("../../../docs/configuration.md");
const READERS: [&str; 11] = [
    include_str!("../validate/preflight.rs"),
    include_str!("../validate/acme.rs"),
    include_str!("../validate/dcv.rs"),
    include_str!("../validate/revocation.rs"),
    include_str!("../validate/mod.rs"),
    include_str!("../validate/document.rs"),
    include_str!("../validate/api.rs"),
    include_str!("../validate/agent.rs"),
    include_str!("../validate/fleet.rs"),
    include_str!("../validate/certificate.rs"),
    include_str!("../validate/validation.rs"),
];

fn accepted() -> impl Iterator<Item = &'static str> {
    [
        ACME_KEYS,
        AGENT_KEYS,
        API_KEYS,
        CERT_ONLY_KEYS,
        FLEET_KEYS,
        PREFLIGHT_KEYS,
        REVOCATION_KEYS,
        SHARED_KEYS,
        VALIDATION_KEYS,
    ]
    .into_iter()
    .flatten()
    .copied()
}

/// The keys the reference's tables name: every `key` in the first cell of a row.
fn documented() -> Vec<&'static str> {
    REFERENCE
        .lines()
        .filter_map(|l| l.strip_prefix("| "))
        .filter_map(|l| l.split(" |").next())
        .flat_map(|cell| cell.split('`').skip(1).step_by(2))
        .collect()
}

#[test]
fn every_accepted_key_is_in_the_reference() {
    let documented = documented();
    let missing: Vec<&str> = accepted().filter(|k| !documented.contains(k)).collect();
    assert!(
        missing.is_empty(),
        "accepted but not in docs/configuration.md: {missing:?}"
    );
}

#[test]
fn every_accepted_key_is_read() {
    let unread: Vec<&str> = accepted()
        .filter(|k| {
            let quoted = format!("\"{k}\"");
            !READERS.iter().any(|r| r.contains(&quoted))
        })
        .collect();
    assert!(unread.is_empty(), "accepted but never read: {unread:?}");
}

#[test]
fn every_documented_key_is_accepted() {
    let accepted: Vec<&str> = accepted().collect();
    // The reference's tables also name values and sections; keys are lower-case words that
    // the key lists know, or a typo of one.
    let unknown: Vec<&str> = documented()
        .into_iter()
        .filter(|k| {
            k.chars()
                .all(|c| c.is_ascii_lowercase() || c == '_' || c.is_ascii_digit())
                && k.contains('_')
                && !accepted.contains(k)
        })
        .collect();
    assert!(
        unknown.is_empty(),
        "in docs/configuration.md's tables but not accepted: {unknown:?}"
    );
}
