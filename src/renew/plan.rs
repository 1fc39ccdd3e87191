//! The planner: for one configured certificate, the next action, decided from the stored
//! record, what the installed files look like, the configuration's knobs and `now`. It is a
//! pure function — no clock, no I/O — so every branch is tested with a table.
//!
//! Timing rules:
//! - a certificate is *due* when less than `renew_before_days` are left, or less than a third
//!   of its lifetime, whichever comes first (so 47-day certificates renew with 15+ days left);
//! - each certificate renews at a stable pseudo-random moment inside a window before that
//!   (hash of name and serial), so a fleet does not reissue all at once;
//! - a reissue is not possible in the last 30 days of the subscription (document, Limits:
//!   "reissue blackout: last 30 days of the subscription"), so a certificate that would fall
//!   due inside the blackout is reissued before it starts;
//! - when no reissue can extend coverage (the certificate already reaches the end of the
//!   subscription, or the blackout has begun), the subscription itself must be renewed: a
//!   renewal order is prepared (`prolong`), or a new billed order is placed where allowed;
//! - a reissue is decided twice: first from the record ([`Action::ReadOrderFirst`]), then with
//!   the order's subscription end and names as the API reports them now ([`OrderFacts`]), which
//!   may turn it into a renewal (the subscription ends sooner than recorded) or a refusal
//!   (Reissue rule 2: the configured names cannot be reissued into this order);
//! - a failure backs the certificate off for 1 h, doubling to 24 h — except the first failure
//!   of a certificate that never reached an order, which is tried again on the next run.

use sha2::{Digest, Sha256};
use time::{Duration, OffsetDateTime};

use crate::store::{CertRecord, Subscription};

pub use crate::config::Family;

/// The installed leaf as found on disk.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Disk {
    /// Unchanged since cert-agent wrote it (or changed but holds the recorded serial).
    AsInstalled,
    /// Holds another certificate (serial), or cannot be read as one (`None`).
    Differs(Option<String>),
    /// The file is gone.
    Missing,
}

/// Everything the decision depends on.
#[derive(Debug, Clone)]
pub struct Inputs<'a> {
    pub now: OffsetDateTime,
    pub record: &'a CertRecord,
    pub disk: Disk,
    pub renew_before_days: u32,
    pub allow_orders: bool,
    /// `--force`: reissue now (within what the rules allow).
    pub force: bool,
    /// An explicit command (a named certificate, `issue`, `reissue`, `install`): try now even
    /// after recent failures.
    pub ignore_backoff: bool,
    /// `issue --yes`: an ended order (annulled, expired) may be replaced by a new one.
    pub replace_ended: bool,
    pub reuse_key: bool,
    pub family: Option<Family>,
    /// `install NAME`: install the issued certificate again even where the files are intact.
    pub reinstall: bool,
    /// What the configuration asks for (product, names).
    pub wanted: Wanted<'a>,
    /// The order as the API reports it now, once read for a reissue ([`Action::ReadOrderFirst`]).
    pub order_facts: Option<&'a OrderFacts>,
}

/// What the configuration asks for: the product and the names.
#[derive(Debug, Clone, Copy)]
pub struct Wanted<'a> {
    pub product_id: u64,
    pub days: u32,
    /// The configured names; the first is the common name.
    pub domains: &'a [String],
}

/// The order as the API reports it, read just before a reissue.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct OrderFacts {
    /// The subscription's end (`None` when the API reports none: the record's stands).
    pub subscription: Option<Subscription>,
    /// The names the order covers (empty when unknown: rule 2 is not checked).
    pub names: Vec<String>,
}

/// The next action.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Action {
    /// Nothing to do before `next`; `warning` when the subscription ends soon.
    Idle {
        next: Option<OffsetDateTime>,
        warning: Option<String>,
    },
    /// No order yet, and orders are not allowed.
    NeedsOrder,
    /// Place the first order (billed).
    Order,
    /// An order was sent without a known answer: find it in the list before anything else.
    Reconcile,
    /// An order or reissue is pending at the CA: validate, poll, download, install.
    Continue,
    /// The installed files are missing or hold another certificate: install the issued one
    /// again.
    Reinstall,
    /// A reissue is due by the record: read the order's subscription end and names
    /// ([`OrderFacts`]) and decide again with them.
    ReadOrderFirst { new_key: bool, reason: String },
    /// Reissue (free); `new_key` unless the key is kept.
    Reissue { new_key: bool, reason: String },
    /// The subscription ends and no reissue can extend coverage: prepare the renewal order,
    /// or place a new billed order when `order` (orders allowed).
    RenewSubscription { order: bool, reason: String },
    /// Failed recently; no attempt before `until`.
    Backoff { until: OffsetDateTime },
    /// The order ended (annulled, expired): report it; only `issue --yes` orders anew.
    Ended { state: String },
    /// `--force` asked for a reissue that the rules do not allow now.
    CannotReissue { reason: String },
}

/// Days before the end of the subscription in which no reissue is possible.
pub const REISSUE_BLACKOUT_DAYS: i64 = 30;
/// Days before the end of the subscription from which every run warns.
pub const SUBSCRIPTION_WARNING_DAYS: i64 = 60;
/// Longest spread window before the due moment.
pub const MAX_SPREAD: Duration = Duration::days(7);
/// A reissue that would fall into the last week before the blackout is made at its start.
pub const LAST_REISSUE_MARGIN: Duration = Duration::days(7);

/// Decides the next action for one certificate.
pub fn decide(i: &Inputs<'_>) -> Action {
    let action = decide_from_record(i);
    let Action::Reissue { new_key, reason } = action else {
        return action;
    };
    match i.order_facts {
        None if i.record.order.is_some() => Action::ReadOrderFirst { new_key, reason },
        Some(facts) => {
            match names_cannot_change(&i.record.name, i.wanted, i.family, &facts.names) {
                Some(reason) => Action::CannotReissue { reason },
                None => Action::Reissue { new_key, reason },
            }
        }
        None => Action::Reissue { new_key, reason },
    }
}

/// When a certificate that failed `failures` times in a row is tried again: on the next run
/// after the first failure of a certificate that never reached the CA (no order, none sent
/// and refused: a passing fault before the first order must not cost an hour), otherwise
/// after [`backoff`] of the consecutive failures (counted from the second for such a
/// certificate).
pub fn retry_after(
    record: &CertRecord,
    failures: u32,
    now: OffsetDateTime,
) -> Option<OffsetDateTime> {
    let never_ordered = record.order.is_none()
        && record.intent.is_none()
        && !record.order_refused
        && record.ended.is_none()
        && record.installed.is_none()
        && record.renews.is_none();
    let counted = if never_ordered {
        failures.saturating_sub(1)
    } else {
        failures
    };
    (counted > 0).then(|| now + backoff(counted))
}

/// The decision from the record alone (reissues not yet checked against the order).
fn decide_from_record(i: &Inputs<'_>) -> Action {
    let r = i.record;
    if r.intent.is_some() {
        return Action::Reconcile;
    }
    // A reissue sent without a known answer is resolved by reading the details: no reason to
    // wait out a backoff for that.
    if r.reissue.as_ref().is_some_and(|x| !x.confirmed) {
        return Action::Continue;
    }
    if !i.force
        && !i.ignore_backoff
        && let Some(until) = r.retry_after
        && until > i.now
    {
        return Action::Backoff { until };
    }
    if let Some(state) = &r.ended {
        return if i.replace_ended && i.allow_orders {
            Action::Order
        } else {
            Action::Ended {
                state: state.clone(),
            }
        };
    }
    if r.order.is_none() {
        return if i.allow_orders {
            Action::Order
        } else {
            Action::NeedsOrder
        };
    }
    if r.pending_key.is_some() || r.reissue.is_some() {
        return Action::Continue;
    }
    // Family C refuses a reused key (Reissue rule 4): asking for one is refused before any
    // call rather than silently replaced by a new key.
    if i.reuse_key && i.family == Some(Family::C) && r.installed.is_some() && r.order.is_some() {
        let force_or_due = i.force || {
            r.installed.as_ref().is_some_and(|inst| {
                i.now
                    >= renewal_time(
                        &r.name,
                        &inst.serial,
                        inst.not_before,
                        inst.not_after,
                        i.renew_before_days,
                    )
            })
        };
        if force_or_due {
            return Action::CannotReissue {
                reason: "family C needs a new key for every reissue (document, Reissue rule \
                         4); the current key cannot be reused"
                    .to_owned(),
            };
        }
    }
    let new_key = !i.reuse_key;
    let Some(inst) = &r.installed else {
        // An order without a local key (adopted, or its key was lost): only a reissue with a
        // key made on this host can give a certificate this host can serve.
        return Action::Reissue {
            new_key: true,
            reason: "the order has no certificate with a key kept on this host".into(),
        };
    };
    if i.reinstall || i.disk != Disk::AsInstalled {
        return Action::Reinstall;
    }

    // The subscription end the API reports now, when read, else the recorded one.
    let subscription = i
        .order_facts
        .and_then(|f| f.subscription.as_ref())
        .or(r.subscription.as_ref());
    let ends = subscription.map_or(inst.not_after, |s| s.ends.max(inst.not_after));
    let blackout = ends - Duration::days(REISSUE_BLACKOUT_DAYS);
    // A reissue can extend coverage only if the certificate ends before the subscription.
    let reissue_extends = inst.not_after < ends - Duration::days(1);
    let mut renew_at = renewal_time(
        &r.name,
        &inst.serial,
        inst.not_before,
        inst.not_after,
        i.renew_before_days,
    );
    // The last reissue before the blackout gets a week of margin, so that a failed run or
    // two cannot push it into the blackout.
    let last_chance = blackout - LAST_REISSUE_MARGIN;
    if reissue_extends && renew_at >= last_chance {
        renew_at = last_chance.max(inst.not_before);
    }
    let days_left = (ends - i.now).whole_days();
    let warning = (i.now >= ends - Duration::days(SUBSCRIPTION_WARNING_DAYS)).then(|| {
        format!(
            "the subscription ends on {} ({days_left} days); {}",
            ends.date(),
            if r.prolong_prepared_at.is_some() {
                "a renewal order is prepared: complete it on the order site"
            } else if i.allow_orders {
                "a new order will be placed when the certificate falls due"
            } else {
                "a renewal order will be prepared when the certificate falls due"
            }
        )
    });

    if i.force {
        // A forced reissue is only ever a reissue: never a billed order.
        return if i.now < blackout {
            Action::Reissue {
                new_key,
                reason: "reissue requested (--force)".to_owned(),
            }
        } else {
            Action::CannotReissue {
                reason: format!(
                    "no reissue is possible in the last {REISSUE_BLACKOUT_DAYS} days of the \
                     subscription (it ends on {}); `cert-agent prolong ID` prepares the renewal \
                     order",
                    ends.date()
                ),
            }
        };
    }
    if i.now < renew_at {
        return Action::Idle {
            next: Some(renew_at),
            warning,
        };
    }
    if reissue_extends && i.now < blackout {
        let reason = format!(
            "the certificate ends on {} ({} days left)",
            inst.not_after.date(),
            (inst.not_after - i.now).whole_days()
        );
        return Action::Reissue { new_key, reason };
    }
    if !i.allow_orders
        && let Some(at) = r.prolong_prepared_at
        && i.now - at < Duration::days(1)
    {
        return Action::Idle {
            next: Some(at + Duration::days(1)),
            warning,
        };
    }
    let reason = if reissue_extends {
        format!(
            "the subscription ends on {} and its last {REISSUE_BLACKOUT_DAYS} days allow no reissue",
            ends.date()
        )
    } else {
        format!(
            "the certificate already reaches the end of the subscription ({}); only a renewal \
             order extends it",
            ends.date()
        )
    };
    Action::RenewSubscription {
        order: i.allow_orders,
        reason,
    }
}

/// When a certificate valid from `not_before` to `not_after` is renewed: the earlier of
/// "`renew_before_days` left" and "a third of the lifetime left", moved earlier by a stable
/// pseudo-random part of a window (a twelfth of the lifetime, at most 7 days).
pub fn renewal_time(
    name: &str,
    serial: &str,
    not_before: OffsetDateTime,
    not_after: OffsetDateTime,
    renew_before_days: u32,
) -> OffsetDateTime {
    let lifetime = (not_after - not_before).max(Duration::ZERO);
    let by_days = not_after - Duration::days(i64::from(renew_before_days));
    let by_third = not_after - lifetime / 3i32;
    let due = by_days.min(by_third);
    let window: Duration = (lifetime / 12i32).min(MAX_SPREAD);
    due - window * stable_fraction(name, serial)
}

/// A number in [0, 1) that depends only on `name` and `serial`.
fn stable_fraction(name: &str, serial: &str) -> f64 {
    let mut h = Sha256::new();
    h.update(name.as_bytes());
    h.update([0]);
    h.update(serial.as_bytes());
    let d = h.finalize();
    let mut b = [0u8; 8];
    b.copy_from_slice(&d[..8]);
    (u64::from_be_bytes(b) >> 11) as f64 / (1u64 << 53) as f64
}

/// Reissue rule 2: "the number of domains cannot grow", except that multi-domain family S
/// certificates may change domains up to the current number or 3, whichever is larger. Why the
/// configured names cannot be reissued into an order for `ordered`, if they cannot.
fn names_cannot_change(
    name: &str,
    wanted: Wanted<'_>,
    family: Option<Family>,
    ordered: &[String],
) -> Option<String> {
    use std::collections::BTreeSet;
    let ordered: BTreeSet<String> = ordered.iter().map(|d| d.to_ascii_lowercase()).collect();
    if ordered.is_empty() {
        return None;
    }
    let wanted_names: BTreeSet<String> = wanted
        .domains
        .iter()
        .map(|d| d.to_ascii_lowercase())
        .collect();
    let family_s = family == Some(Family::S);
    let limit = if family_s {
        ordered.len().max(3)
    } else {
        ordered.len()
    };
    let bare_of_wildcard = |d: &String| {
        ordered
            .iter()
            .any(|o| o.strip_prefix("*.").is_some_and(|b| b == d))
    };
    let extra = wanted_names
        .iter()
        .filter(|d| !ordered.contains(*d) && !bare_of_wildcard(d))
        .count();
    let count = wanted_names.iter().filter(|d| !bare_of_wildcard(d)).count();
    let cn = wanted
        .domains
        .first()
        .map(|d| d.to_ascii_lowercase())
        .unwrap_or_default();
    let cn_known = ordered.contains(&cn) || bare_of_wildcard(&cn);
    if cn_known && count <= limit && (extra == 0 || family_s) {
        return None;
    }
    Some(format!(
        "the configured names ({}) differ from the order's ({}) in a way a reissue cannot make \
         (document, Reissue rule 2: the number of domains cannot grow{}); place a new order \
         with `cert-agent issue {name} --yes`",
        wanted.domains.join(", "),
        ordered.iter().cloned().collect::<Vec<_>>().join(", "),
        if family_s {
            "; family S multi-domain: up to the current number or 3"
        } else {
            ""
        },
    ))
}

/// What a real run would do, for `--dry-run` and `status`.
pub fn describe(action: &Action, wanted: Wanted<'_>) -> String {
    match action {
        Action::Idle { next: Some(at), .. } => format!("do nothing before {}", at.date()),
        Action::Idle { next: None, .. } => "do nothing".into(),
        Action::NeedsOrder => {
            "do nothing: no order yet and orders are not allowed (`issue NAME --yes`)".into()
        }
        Action::Order => format!(
            "place a billed order for product {} ({} days) for {}",
            wanted.product_id,
            wanted.days,
            wanted.domains.join(", ")
        ),
        Action::Reconcile => {
            "search the certificate list for an order whose answer was lost".into()
        }
        Action::Continue => "continue validation, issuance and install".into(),
        Action::Reinstall => "download and install the issued certificate again".into(),
        Action::Reissue { new_key, reason } | Action::ReadOrderFirst { new_key, reason } => {
            format!(
                "reissue ({}) because {reason}",
                if *new_key { "new key" } else { "same key" }
            )
        }
        Action::RenewSubscription {
            order: true,
            reason,
        } => format!("place a new billed order because {reason}"),
        Action::RenewSubscription {
            order: false,
            reason,
        } => format!("prepare a renewal order because {reason}"),
        Action::Backoff { until } => format!("wait until {} after failures", short_time(*until)),
        Action::Ended { state } => {
            format!("report the {state} order (`issue NAME --yes` orders anew)")
        }
        Action::CannotReissue { reason } => format!("refuse the reissue: {reason}"),
    }
}

/// `2026-11-21 00:13 UTC`.
pub fn short_time(t: OffsetDateTime) -> String {
    let t = t.to_offset(time::UtcOffset::UTC);
    format!("{} {:02}:{:02} UTC", t.date(), t.hour(), t.minute())
}

/// Backoff after `failures` consecutive failed runs: 1 h, doubling, at most 24 h.
pub fn backoff(failures: u32) -> Duration {
    let hours = 1i64 << failures.saturating_sub(1).min(5);
    Duration::hours(hours.min(24))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::{Installed, OrderIntent, OrderRef, PendingKey, ReissueState, Subscription};
    use std::path::PathBuf;

    fn t(days: i64) -> OffsetDateTime {
        OffsetDateTime::from_unix_timestamp(1_800_000_000).unwrap() + Duration::days(days)
    }

    /// A record with an order and a certificate installed from day 0 to day `life`, in a
    /// subscription ending on day `sub`.
    fn installed(life: i64, sub: Option<i64>) -> CertRecord {
        CertRecord {
            name: "www".into(),
            order: Some(OrderRef {
                certificate_id: 7,
                order_id: Some(1),
                placed_at: t(0),
                adopted: false,
            }),
            installed: Some(Installed {
                serial: "0A".into(),
                not_before: t(0),
                not_after: t(life),
                certificate_id: 7,
                files: vec![],
                installed_at: t(0),
                leaf_file: None,
                leaf_stamp: None,
            }),
            subscription: sub.map(|d| Subscription {
                ends: t(d),
                multi_year: true,
            }),
            ..CertRecord::default()
        }
    }

    /// The order read before a reissue, reporting nothing new (the record's decision stands).
    static NO_NEWS: OrderFacts = OrderFacts {
        subscription: None,
        names: Vec::new(),
    };

    fn names(v: &[&str]) -> Vec<String> {
        v.iter().map(|s| (*s).to_owned()).collect()
    }

    static WWW: std::sync::LazyLock<Vec<String>> =
        std::sync::LazyLock::new(|| names(&["www.example.com"]));

    fn wanted(domains: &[String]) -> Wanted<'_> {
        Wanted {
            product_id: 1,
            days: 365,
            domains,
        }
    }

    /// Inputs of a timer run for `record` at `now`, the order already read (see
    /// `reissue_is_decided_again_with_the_order_read` for the first decision).
    fn inputs(record: &CertRecord, now: OffsetDateTime) -> Inputs<'_> {
        Inputs {
            now,
            record,
            disk: Disk::AsInstalled,
            renew_before_days: 30,
            allow_orders: false,
            force: false,
            ignore_backoff: false,
            replace_ended: false,
            reuse_key: false,
            family: None,
            reinstall: false,
            wanted: wanted(&WWW),
            order_facts: Some(&NO_NEWS),
        }
    }

    #[test]
    fn reissue_is_decided_again_with_the_order_read() {
        // Due for a reissue on day 184 of a 200-day certificate in a 5-year subscription.
        let rec = installed(200, Some(1825));
        let first = Inputs {
            order_facts: None,
            ..inputs(&rec, t(184))
        };
        let Action::ReadOrderFirst {
            new_key: true,
            reason,
        } = decide(&first)
        else {
            panic!("{:?}", decide(&first));
        };
        assert!(reason.contains("ends on"), "{reason}");
        // The dry-run text of the first decision is the reissue's.
        assert!(describe(&decide(&first), first.wanted).starts_with("reissue (new key) because"));

        // The API reports the same names, and no subscription end: reissue.
        let same = OrderFacts {
            subscription: None,
            names: names(&["www.example.com"]),
        };
        let i = Inputs {
            order_facts: Some(&same),
            ..first.clone()
        };
        assert!(matches!(decide(&i), Action::Reissue { new_key: true, .. }));

        // The subscription ends sooner than recorded (inside the blackout): a renewal.
        let ending = OrderFacts {
            subscription: Some(Subscription {
                ends: t(200),
                multi_year: false,
            }),
            names: Vec::new(),
        };
        let i = Inputs {
            order_facts: Some(&ending),
            ..first.clone()
        };
        assert!(
            matches!(decide(&i), Action::RenewSubscription { order: false, .. }),
            "{:?}",
            decide(&i)
        );

        // The configured names grew past the order's: refused (rule 2), naming the command.
        let grown = names(&["www.example.com", "api.example.com"]);
        let i = Inputs {
            wanted: wanted(&grown),
            order_facts: Some(&same),
            ..first.clone()
        };
        let Action::CannotReissue { reason } = decide(&i) else {
            panic!("{:?}", decide(&i));
        };
        assert!(reason.contains("`cert-agent issue www --yes`"), "{reason}");

        // Without an order there is nothing to read: adopted keys are reissued directly only
        // with an order, so a record without one never asks.
        let mut no_order = rec.clone();
        no_order.order = None;
        no_order.installed = None;
        let i = Inputs {
            order_facts: None,
            allow_orders: true,
            ..inputs(&no_order, t(184))
        };
        assert_eq!(decide(&i), Action::Order);
    }

    #[test]
    fn install_again_overrides_intact_files() {
        let rec = installed(200, Some(1825));
        let i = inputs(&rec, t(10));
        assert!(matches!(decide(&i), Action::Idle { .. }));
        let i = Inputs {
            reinstall: true,
            ..i
        };
        assert_eq!(decide(&i), Action::Reinstall);
        // Nothing installed yet: `install` continues the order instead.
        let mut pending = rec.clone();
        pending.installed = None;
        pending.pending_key = Some(pending_key());
        let i = Inputs {
            reinstall: true,
            ..inputs(&pending, t(10))
        };
        assert_eq!(decide(&i), Action::Continue);
    }

    #[test]
    fn a_first_failure_before_any_order_is_retried_on_the_next_run() {
        let now = t(0);
        let fresh = CertRecord {
            name: "www".into(),
            ..CertRecord::default()
        };
        // rows: (failures, retry after) for a certificate that never reached an order
        assert_eq!(retry_after(&fresh, 1, now), None);
        assert_eq!(retry_after(&fresh, 2, now), Some(now + Duration::hours(1)));
        assert_eq!(retry_after(&fresh, 3, now), Some(now + Duration::hours(2)));
        // an order sent without an answer is not "never ordered"
        let mut intent = fresh.clone();
        intent.intent = Some(OrderIntent {
            csr_sha256: "AA".into(),
            common_name: "www.example.com".into(),
            created_at: now,
            product_id: 1,
            price: None,
        });
        assert_eq!(retry_after(&intent, 1, now), Some(now + Duration::hours(1)));
        // nor is one whose order the CA refused
        let refused = CertRecord {
            order_refused: true,
            ..fresh.clone()
        };
        assert_eq!(
            retry_after(&refused, 1, now),
            Some(now + Duration::hours(1))
        );
        // a certificate with an order backs off from the first failure, up to 24 h
        let ordered = installed(200, Some(1825));
        assert_eq!(
            retry_after(&ordered, 1, now),
            Some(now + Duration::hours(1))
        );
        assert_eq!(
            retry_after(&ordered, 9, now),
            Some(now + Duration::hours(24))
        );
    }

    #[test]
    fn reissue_rule_2_on_the_configured_names() {
        let two = names(&["a.example.com", "b.example.com"]);
        let check = |domains: &[&str], family: Option<Family>, ordered: &[String]| {
            let domains = names(domains);
            names_cannot_change("www", wanted(&domains), family, ordered)
        };
        // Same names, fewer names: fine.
        assert!(check(&["a.example.com", "b.example.com"], None, &two).is_none());
        assert!(check(&["a.example.com"], None, &two).is_none());
        // Growth: refused.
        let grown = ["a.example.com", "b.example.com", "c.example.com"];
        assert!(check(&grown, None, &two).is_some());
        // Family S multi-domain may change up to max(current, 3).
        assert!(check(&grown, Some(Family::S), &two).is_none());
        let four = [
            "a.example.com",
            "b.example.com",
            "c.example.com",
            "d.example.com",
        ];
        assert!(check(&four, Some(Family::S), &two).is_some());
        // Other families may not swap a name.
        assert!(check(&["a.example.com", "c.example.com"], Some(Family::D), &two).is_some());
        // The common name must be one of the order's domains.
        assert!(check(&["c.example.com", "a.example.com"], Some(Family::S), &two).is_some());
        // A wildcard's bare domain is not counted as extra.
        let wild = names(&["*.example.com"]);
        assert!(check(&["*.example.com", "example.com"], None, &wild).is_none());
        // Names the API did not report: not checked.
        assert!(check(&grown, None, &[]).is_none());
    }

    #[test]
    fn describe_names_product_names_and_times() {
        let domains = names(&["a.example.com", "b.example.com"]);
        let w = wanted(&domains);
        assert_eq!(
            describe(&Action::Order, w),
            "place a billed order for product 1 (365 days) for a.example.com, b.example.com"
        );
        assert_eq!(
            describe(&Action::Backoff { until: t(0) }, w),
            format!("wait until {} after failures", short_time(t(0)))
        );
        assert_eq!(short_time(t(0)), "2027-01-15 08:00 UTC");
    }

    fn pending_key() -> PendingKey {
        PendingKey {
            key_file: PathBuf::from("/k"),
            csr_pem: String::new(),
            csr_md5: String::new(),
            csr_sha256: String::new(),
            created_at: t(0),
        }
    }

    #[test]
    fn every_branch() {
        let no_order = CertRecord {
            name: "www".into(),
            ..CertRecord::default()
        };
        let mut with_intent = no_order.clone();
        with_intent.intent = Some(OrderIntent {
            csr_sha256: "AA".into(),
            common_name: "www.example.com".into(),
            created_at: t(0),
            product_id: 1,
            price: None,
        });
        let mut pending = installed(200, Some(1825));
        pending.installed = None;
        pending.pending_key = Some(pending_key());
        let mut reissuing = installed(200, Some(1825));
        reissuing.reissue = Some(ReissueState {
            certificate_id: 7,
            csr_sha256: "BB".into(),
            previous_serial: Some("0A".into()),
            requested_at: t(100),
            confirmed: true,
        });
        let mut adopted = installed(200, None);
        adopted.installed = None;
        let mut failing = installed(200, Some(1825));
        failing.retry_after = Some(t(10) + Duration::hours(2));

        let multi = installed(200, Some(1825));
        let single = installed(365, Some(365));

        struct Case<'a> {
            what: &'a str,
            record: &'a CertRecord,
            now: OffsetDateTime,
            allow: bool,
            disk: Disk,
            expect: fn(&Action) -> bool,
        }
        let cases = [
            Case {
                what: "intent first",
                record: &with_intent,
                now: t(0),
                allow: true,
                disk: Disk::AsInstalled,
                expect: |a| *a == Action::Reconcile,
            },
            Case {
                what: "no order, not allowed",
                record: &no_order,
                now: t(0),
                allow: false,
                disk: Disk::AsInstalled,
                expect: |a| *a == Action::NeedsOrder,
            },
            Case {
                what: "no order, allowed",
                record: &no_order,
                now: t(0),
                allow: true,
                disk: Disk::AsInstalled,
                expect: |a| *a == Action::Order,
            },
            Case {
                what: "order pending",
                record: &pending,
                now: t(0),
                allow: false,
                disk: Disk::Missing,
                expect: |a| *a == Action::Continue,
            },
            Case {
                what: "reissue pending",
                record: &reissuing,
                now: t(150),
                allow: false,
                disk: Disk::AsInstalled,
                expect: |a| *a == Action::Continue,
            },
            Case {
                what: "adopted order without local key",
                record: &adopted,
                now: t(1),
                allow: false,
                disk: Disk::Missing,
                expect: |a| matches!(a, Action::Reissue { new_key: true, .. }),
            },
            Case {
                what: "backoff",
                record: &failing,
                now: t(10),
                allow: false,
                disk: Disk::AsInstalled,
                expect: |a| matches!(a, Action::Backoff { .. }),
            },
            Case {
                what: "file missing",
                record: &multi,
                now: t(10),
                allow: false,
                disk: Disk::Missing,
                expect: |a| *a == Action::Reinstall,
            },
            Case {
                what: "file differs",
                record: &multi,
                now: t(10),
                allow: false,
                disk: Disk::Differs(Some("0B".into())),
                expect: |a| *a == Action::Reinstall,
            },
            Case {
                what: "not due",
                record: &multi,
                now: t(100),
                allow: false,
                disk: Disk::AsInstalled,
                expect: |a| matches!(a, Action::Idle { warning: None, .. }),
            },
            Case {
                what: "due inside multi-year subscription",
                record: &multi,
                now: t(140),
                allow: false,
                disk: Disk::AsInstalled,
                expect: |a| matches!(a, Action::Reissue { new_key: true, .. }),
            },
            Case {
                what: "single year, due: prepare renewal",
                record: &single,
                now: t(300),
                allow: false,
                disk: Disk::AsInstalled,
                expect: |a| matches!(a, Action::RenewSubscription { order: false, .. }),
            },
            Case {
                what: "single year, due, orders allowed",
                record: &single,
                now: t(300),
                allow: true,
                disk: Disk::AsInstalled,
                expect: |a| matches!(a, Action::RenewSubscription { order: true, .. }),
            },
            Case {
                what: "warning 60 days before the end",
                record: &single,
                now: t(310),
                allow: false,
                disk: Disk::AsInstalled,
                expect: |a| matches!(a, Action::RenewSubscription { .. }),
            },
        ];
        for c in cases {
            let mut i = inputs(c.record, c.now);
            i.allow_orders = c.allow;
            i.disk = c.disk.clone();
            let a = decide(&i);
            assert!((c.expect)(&a), "{}: got {a:?}", c.what);
        }
    }

    #[test]
    fn due_is_the_earlier_of_days_left_and_a_third_of_the_lifetime() {
        // 200-day certificate: a third (66.7 days) comes before 30 days.
        let at = renewal_time("a", "01", t(0), t(200), 30);
        assert!(
            at <= t(200) - Duration::days(66) && at >= t(200) - Duration::days(74),
            "{at}"
        );
        // 47-day certificate: 30 days left comes before a third (15.7 days).
        let at = renewal_time("a", "01", t(0), t(47), 30);
        assert!(at <= t(17) && at >= t(17) - Duration::days(4), "{at}");
    }

    #[test]
    fn spread_is_stable_and_differs_between_certificates() {
        let a1 = renewal_time("a", "01", t(0), t(200), 30);
        let a2 = renewal_time("a", "01", t(0), t(200), 30);
        let b = renewal_time("b", "01", t(0), t(200), 30);
        assert_eq!(a1, a2);
        assert_ne!(a1, b);
        let f = stable_fraction("x", "y");
        assert!((0.0..1.0).contains(&f));
    }

    #[test]
    fn subscription_warning_starts_60_days_before_the_end() {
        let rec = installed(200, Some(400));
        // Certificate 2 (reissued) covers to day 400; not due yet on day 320 with a 200-day
        // life from day 200, but the subscription warning shows.
        let mut rec2 = rec.clone();
        if let Some(inst) = rec2.installed.as_mut() {
            inst.not_before = t(200);
            inst.not_after = t(400);
        }
        let a = decide(&inputs(&rec2, t(250)));
        assert!(matches!(a, Action::Idle { warning: None, .. }), "{a:?}");
        let a = decide(&inputs(&rec2, t(345)));
        match a {
            Action::Idle {
                warning: Some(w), ..
            }
            | Action::RenewSubscription { reason: w, .. } => {
                assert!(w.contains("subscription") || w.contains("renewal"), "{w}")
            }
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn reissue_moves_before_the_blackout_and_none_inside_it() {
        // A 45-day certificate from day 170 to 215 is due around day 196-200; the subscription
        // ends on day 220, so the blackout starts on day 190 and the last reissue moves to a
        // week before it (day 183).
        let mut rec = installed(215, Some(220));
        if let Some(inst) = rec.installed.as_mut() {
            inst.not_before = t(170);
        }
        let mut i = inputs(&rec, t(182));
        i.renew_before_days = 5;
        assert!(
            matches!(decide(&i), Action::Idle { .. }),
            "{:?}",
            decide(&i)
        );
        let i = Inputs { now: t(184), ..i };
        assert!(
            matches!(decide(&i), Action::Reissue { .. }),
            "{:?}",
            decide(&i)
        );
        // Inside the blackout no reissue is possible: the subscription must be renewed.
        let i = Inputs { now: t(195), ..i };
        assert!(
            matches!(decide(&i), Action::RenewSubscription { .. }),
            "{:?}",
            decide(&i)
        );
    }

    #[test]
    fn family_c_refuses_a_reused_key() {
        let rec = installed(200, Some(1825));
        let mut i = inputs(&rec, t(150));
        i.reuse_key = true;
        assert!(matches!(decide(&i), Action::Reissue { new_key: false, .. }));
        i.family = Some(Family::C);
        assert!(
            matches!(decide(&i), Action::CannotReissue { .. }),
            "{:?}",
            decide(&i)
        );
        i.reuse_key = false;
        assert!(matches!(decide(&i), Action::Reissue { new_key: true, .. }));
    }

    #[test]
    fn force_reissues_now_but_never_orders() {
        let rec = installed(200, Some(1825));
        let mut i = inputs(&rec, t(10));
        i.force = true;
        assert!(matches!(decide(&i), Action::Reissue { .. }));
        // A certificate that already reaches the end of its subscription: still a reissue.
        let rec = installed(60, Some(60));
        let mut i = inputs(&rec, t(5));
        i.force = true;
        i.allow_orders = true;
        assert!(
            matches!(decide(&i), Action::Reissue { .. }),
            "{:?}",
            decide(&i)
        );
        // Inside the blackout: refused, even with orders allowed.
        let rec = installed(200, Some(210));
        let mut i = inputs(&rec, t(185));
        i.force = true;
        i.allow_orders = true;
        assert!(
            matches!(decide(&i), Action::CannotReissue { .. }),
            "{:?}",
            decide(&i)
        );
    }

    #[test]
    fn an_ended_order_is_reported_until_issue_replaces_it() {
        let mut rec = installed(200, Some(1825));
        rec.ended = Some("annulled".into());
        let mut i = inputs(&rec, t(10));
        i.allow_orders = true;
        assert!(matches!(decide(&i), Action::Ended { .. }));
        i.replace_ended = true;
        assert_eq!(decide(&i), Action::Order);
    }

    #[test]
    fn prolong_is_prepared_at_most_once_a_day() {
        let mut rec = installed(365, Some(365));
        rec.prolong_prepared_at = Some(t(300));
        let a = decide(&inputs(&rec, t(300) + Duration::hours(5)));
        assert!(matches!(a, Action::Idle { .. }), "{a:?}");
        let a = decide(&inputs(&rec, t(301) + Duration::hours(1)));
        assert!(
            matches!(a, Action::RenewSubscription { order: false, .. }),
            "{a:?}"
        );
    }

    #[test]
    fn explicit_commands_ignore_the_backoff() {
        let mut rec = installed(200, Some(1825));
        rec.retry_after = Some(t(10) + Duration::hours(2));
        let mut i = inputs(&rec, t(10));
        assert!(matches!(decide(&i), Action::Backoff { .. }));
        i.ignore_backoff = true;
        assert!(
            matches!(decide(&i), Action::Idle { .. }),
            "{:?}",
            decide(&i)
        );
    }

    #[test]
    fn backoff_doubles_to_a_day() {
        assert_eq!(backoff(1), Duration::hours(1));
        assert_eq!(backoff(2), Duration::hours(2));
        assert_eq!(backoff(5), Duration::hours(16));
        assert_eq!(backoff(6), Duration::hours(24));
        assert_eq!(backoff(60), Duration::hours(24));
    }
}
