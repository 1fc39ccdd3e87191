//! What `discover` found, as the command shows it: the text report (each proposal with where
//! it comes from, what it serves today, its document roots, the account's answer and what is
//! to do; the names left out), or the JSON document.

use std::collections::BTreeMap;
use std::fmt::Write as _;

use serde::Serialize;

use super::{Discovery, Match, Orphan, Proposal, Validation, configured_as};
use crate::config::Config;

/// `discover --json`: what was found, with the account's answer per proposal (when asked).
#[derive(Debug, Serialize)]
pub(crate) struct Report<'a> {
    #[serde(flatten)]
    found: &'a Discovery,
    #[serde(skip_serializing_if = "BTreeMap::is_empty")]
    account: &'a BTreeMap<String, Match>,
    /// Configured certificates no virtual host serves any more.
    #[serde(skip_serializing_if = "<[Orphan]>::is_empty")]
    orphaned: &'a [Orphan],
}

impl<'a> Report<'a> {
    /// What was found, and the account's answers (empty: not asked).
    pub(crate) fn new(found: &'a Discovery, account: &'a BTreeMap<String, Match>) -> Self {
        Self {
            found,
            account,
            orphaned: &[],
        }
    }

    /// With the configured certificates no virtual host serves.
    pub(crate) fn with_orphaned(mut self, orphaned: &'a [Orphan]) -> Self {
        self.orphaned = orphaned;
        self
    }
}

/// The configured certificates no virtual host serves, with the hint to retire them.
pub(crate) fn orphans_text(orphaned: &[Orphan]) -> String {
    let mut s = String::new();
    if orphaned.is_empty() {
        return s;
    }
    s.push_str("\nConfigured, but served by no virtual host any more:\n");
    for o in orphaned {
        let _ = writeln!(s, "  {} ({})", o.name, o.domains.join(", "));
    }
    s.push_str(
        "  If these sites are gone, `cert-agent retire NAME [--cancel]` stops renewing them \
         (and cancels an order issued in the last 28 days).\n",
    );
    s
}

/// The text report, line by line; a proposal `configured` already has is said so.
pub(crate) fn report_text(
    found: &Discovery,
    matches: &BTreeMap<String, Match>,
    configured: Option<&Config>,
) -> String {
    let mut s = String::new();
    let _ = writeln!(
        s,
        "{} virtual host(s), {} proposed certificate(s), {} name(s) left out",
        found.vhosts.len(),
        found.proposals.len(),
        found.skipped.len()
    );
    for p in &found.proposals {
        s.push('\n');
        proposal(&mut s, p, matches.get(&p.name), configured);
    }
    if !found.skipped.is_empty() {
        s.push('\n');
        s.push_str("Left out:\n");
        for k in &found.skipped {
            let _ = writeln!(s, "  {} ({}): {}", k.name, k.at, k.reason);
        }
    }
    s
}

/// One proposal of the text report.
fn proposal(s: &mut String, p: &Proposal, m: Option<&Match>, configured: Option<&Config>) {
    let state = match configured_as(configured, p) {
        Some(k) => format!(" (already configured as '{k}')"),
        None => String::new(),
    };
    let _ = writeln!(s, "{}{state}: {}", p.name, p.domains.join(", "));
    let at: Vec<String> = p.vhosts.iter().map(ToString::to_string).collect();
    let _ = writeln!(s, "  from      {} ({})", at.join(", "), p.server);
    for m in &p.from_macro {
        let _ = writeln!(s, "  macro     {m}");
    }
    let _ = match (&p.existing, &p.existing_error, &p.cert_file) {
        (Some(e), _, Some(c)) => writeln!(
            s,
            "  serves    {} — {}, issuer {}, until {}{}",
            c.display(),
            e.subject,
            e.issuer,
            e.not_after.date(),
            if e.key_on_host {
                ""
            } else {
                "; key not on this host"
            }
        ),
        (None, Some(err), _) => writeln!(s, "  serves    (unreadable: {err})"),
        _ => writeln!(s, "  serves    no TLS yet"),
    };
    for (d, root) in &p.webroot {
        let _ = writeln!(s, "  webroot   {d}: {}", root.display());
    }
    match m {
        Some(Match::Adopt {
            certificate_id,
            state,
            valid_to,
            subscription_valid_to,
            ..
        }) => {
            let _ = writeln!(
                s,
                "  account   adopt order {certificate_id} ({state}, valid to {}, subscription to {}): no new order",
                valid_to.as_deref().unwrap_or("-"),
                subscription_valid_to
                    .as_deref()
                    .or(valid_to.as_deref())
                    .unwrap_or("-")
            );
        }
        Some(Match::Order {
            product_id,
            product,
            price,
            passed_over,
        }) => {
            let _ = writeln!(
                s,
                "  account   order {} (product {}) at {} a year{}",
                product.as_deref().unwrap_or("(no fitting product)"),
                product_id.map_or("-".to_owned(), |i| i.to_string()),
                price.as_ref().map_or("-".to_owned(), ToString::to_string),
                if passed_over.is_empty() {
                    String::new()
                } else {
                    format!("; passed over: {}", passed_over.join("; "))
                }
            );
        }
        None => {}
    }
    for n in &p.notes {
        let _ = writeln!(s, "  to do     {n}");
    }
}

/// Logs (debug) how many virtual hosts do not serve the validation path, and for how many it
/// cannot be told.
pub(crate) fn log_validation_counts(found: &Discovery) {
    let blocked = found
        .vhosts
        .iter()
        .filter(|v| matches!(v.validation, Validation::Blocked(_)))
        .count();
    let unknown = found
        .vhosts
        .iter()
        .filter(|v| matches!(v.validation, Validation::Unknown(_)))
        .count();
    tracing::debug!(
        "{blocked} virtual host(s) do not serve the validation path; for {unknown} it cannot be told"
    );
}
