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
//!   of a certificate that never reached an order, which is tried again on the next run;
//! - an installed certificate its CRL lists as revoked (`record.revocation`, written by the
//!   run before it plans) is replaced at once: reissued with a new key while the order allows
//!   a reissue, else — the order annulled or expired, or the blackout begun — by a new order
//!   where orders are allowed (the price limit still applies), or a prepared renewal.

use sha2::{Digest, Sha256};
use time::{Duration, OffsetDateTime};

use crate::clock::short_time;
use crate::store::{CertRecord, Installed, PartnerStage, Subscription};

pub(crate) use crate::config::Family;

/// The installed leaf as found on disk.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Disk {
    /// Unchanged since cert-agent wrote it (or changed but holds the recorded serial).
    AsInstalled,
    /// Holds another certificate (serial), or cannot be read as one (`None`).
    Differs(Option<String>),
    /// The file is gone.
    Missing,
}

/// Everything the decision depends on.
#[derive(Debug, Clone)]
pub(crate) struct Inputs<'a> {
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
pub(crate) struct Wanted<'a> {
    pub product_id: u64,
    pub days: u32,
    /// The configured names; the first is the common name.
    pub domains: &'a [String],
}

/// The order as the API reports it, read just before a reissue.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct OrderFacts {
    /// The subscription's end (`None` when the API reports none: the record's stands).
    pub subscription: Option<Subscription>,
    /// The names the order covers (empty when unknown: rule 2 is not checked).
    pub names: Vec<String>,
}

/// The next action.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Action {
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
    /// An issued certificate is held until it is valid, at `from`: nothing to call.
    Hold { from: OffsetDateTime },
    /// The held certificate is valid now: install it (no API call).
    InstallHeld,
    /// The order ended (annulled, expired): report it; only `issue --yes` orders anew.
    Ended { state: String },
    /// `--force` asked for a reissue that the rules do not allow now.
    CannotReissue { reason: String },
}

/// A held certificate that begins within this much of `now` is installed (the tolerance for a
/// host clock a little behind the CA's).
pub(crate) const HELD_TOLERANCE: Duration = Duration::minutes(5);
/// Days before the end of the subscription in which no reissue is possible.
pub(crate) const REISSUE_BLACKOUT_DAYS: i64 = 30;
/// Days before the end of the subscription from which every run warns.
pub(crate) const SUBSCRIPTION_WARNING_DAYS: i64 = 60;
/// Longest spread window before the due moment.
pub(crate) const MAX_SPREAD: Duration = Duration::days(7);
/// A reissue that would fall into the last week before the blackout is made at its start.
pub(crate) const LAST_REISSUE_MARGIN: Duration = Duration::days(7);

/// Decides the next action for one certificate.
pub(crate) fn decide(i: &Inputs<'_>) -> Action {
    let action = decide_from_record(i);
    let Action::Reissue { new_key, reason } = action else {
        return action;
    };
    match i.order_facts {
        None if i.record.partner.order().is_some() => Action::ReadOrderFirst { new_key, reason },
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
pub(crate) fn retry_after(
    record: &CertRecord,
    failures: u32,
    now: OffsetDateTime,
) -> Option<OffsetDateTime> {
    let never_ordered = record.partner.stage == PartnerStage::NoOrder
        && !record.partner.order_refused
        && record.installed.is_none()
        && record.partner.renews.is_none();
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
    if let Some(action) = from_state(i) {
        return action;
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
    if let Some(detail) = revoked(r) {
        return replace_revoked(i, inst, detail);
    }

    on_schedule(i, inst, new_key)
}

/// The decisions that the record's state alone makes (an order in flight, a backoff, an ended
/// order, no order yet, a pending certificate, a refused key reuse); `None` when the installed
/// certificate's schedule decides.
fn from_state(i: &Inputs<'_>) -> Option<Action> {
    let r = i.record;
    let stage = &r.partner.stage;
    if let PartnerStage::Intended(_) = stage {
        return Some(Action::Reconcile);
    }
    // An issued certificate waits for its start, not for a backoff or a forced reissue.
    if let Some(h) = &r.held {
        return Some(if h.not_before <= i.now + HELD_TOLERANCE {
            Action::InstallHeld
        } else {
            Action::Hold { from: h.not_before }
        });
    }
    // A reissue sent without a known answer is resolved by reading the details: no reason to
    // wait out a backoff for that (even of an order that ended meanwhile).
    if r.partner.reissue().is_some_and(|x| !x.confirmed) {
        return Some(Action::Continue);
    }
    if !i.force
        && !i.ignore_backoff
        && let Some(until) = r.retry_after
        && until > i.now
    {
        return Some(Action::Backoff { until });
    }
    let reissue = match stage {
        // A revoked certificate of an ended order is an emergency: the order policy decides
        // on a new order without waiting for `issue --yes`.
        PartnerStage::Ended { state, .. } => {
            return Some(
                if (i.replace_ended || revoked(r).is_some()) && i.allow_orders {
                    Action::Order
                } else {
                    Action::Ended {
                        state: state.clone(),
                    }
                },
            );
        }
        PartnerStage::NoOrder | PartnerStage::Intended(_) => {
            return Some(if i.allow_orders {
                Action::Order
            } else {
                Action::NeedsOrder
            });
        }
        PartnerStage::Ordered { reissue, .. } => reissue,
    };
    if r.pending_key.is_some() || reissue.is_some() {
        return Some(Action::Continue);
    }
    // Family C refuses a reused key (Reissue rule 4): asking for one is refused before any
    // call rather than silently replaced by a new key.
    let inst = r.installed.as_ref()?;
    let reuse_refused = i.reuse_key
        && i.family == Some(Family::C)
        && (i.force
            || i.now
                >= renewal_time(
                    &r.name,
                    &inst.serial,
                    inst.not_before,
                    inst.not_after,
                    i.renew_before_days,
                ));
    reuse_refused.then(|| Action::CannotReissue {
        reason: "family C needs a new key for every reissue (document, Reissue rule 4); the \
                 current key cannot be reused"
            .to_owned(),
    })
}

/// What the CRL said of the installed certificate, when it said revoked.
fn revoked(r: &CertRecord) -> Option<&str> {
    let inst = r.installed.as_ref()?;
    r.revocation
        .as_ref()
        .filter(|s| s.revokes(&inst.serial))
        .map(|s| s.detail.as_str())
}

/// The installed certificate is revoked: a reissue with a new key (the key may be what was
/// compromised) while one is possible, else the subscription's renewal by the order policy.
fn replace_revoked(i: &Inputs<'_>, inst: &Installed, detail: &str) -> Action {
    let ends = i
        .order_facts
        .and_then(|f| f.subscription.as_ref())
        .or(i.record.partner.subscription.as_ref())
        .map_or(inst.not_after, |s| s.ends.max(inst.not_after));
    let blackout = ends - Duration::days(REISSUE_BLACKOUT_DAYS);
    let reason = format!("the installed certificate is revoked: {detail}");
    if i.now < blackout {
        Action::Reissue {
            new_key: true,
            reason,
        }
    } else {
        Action::RenewSubscription {
            order: i.allow_orders,
            reason: format!(
                "{reason}; the last {REISSUE_BLACKOUT_DAYS} days of the subscription allow no reissue"
            ),
        }
    }
}

/// The installed certificate's schedule: idle until its renewal time, then a reissue while
/// one extends coverage, else the subscription's renewal.
fn on_schedule(i: &Inputs<'_>, inst: &Installed, new_key: bool) -> Action {
    let r = i.record;
    // The subscription end the API reports now, when read, else the recorded one.
    let ends = subscription_end(i, inst);
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
            if r.partner.prolong_prepared_at.is_some() {
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
        && let Some(at) = r.partner.prolong_prepared_at
        && i.now - at < Duration::days(1)
    {
        return Action::Idle {
            next: at.checked_add(Duration::days(1)),
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

/// The end of the subscription: as the API reports it now, when read, else as recorded; never
/// before the installed certificate's end.
fn subscription_end(i: &Inputs<'_>, inst: &Installed) -> OffsetDateTime {
    i.order_facts
        .and_then(|f| f.subscription.as_ref())
        .or(i.record.partner.subscription.as_ref())
        .map_or(inst.not_after, |s| s.ends.max(inst.not_after))
}

/// How long a quiet decision stands: when [`decide`] is [`Action::Idle`] without a warning,
/// the instant before which it stays so for the same record, installed files and knobs — the
/// renewal check, or the start of the subscription's warning window when sooner. `None` for
/// any other decision.
pub(crate) fn quiet_until(i: &Inputs<'_>) -> Option<OffsetDateTime> {
    let Action::Idle {
        next: Some(next),
        warning: None,
    } = decide(i)
    else {
        return None;
    };
    let inst = i.record.installed.as_ref()?;
    let warned_from = subscription_end(i, inst) - Duration::days(SUBSCRIPTION_WARNING_DAYS);
    Some(next.min(warned_from))
}

/// When a certificate valid from `not_before` to `not_after` is renewed: the earlier of
/// "`renew_before_days` left" and "a third of the lifetime left", moved earlier by a stable
/// pseudo-random part of a window (a twelfth of the lifetime, at most 7 days).
pub(crate) fn renewal_time(
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
pub(crate) fn describe(action: &Action, wanted: Wanted<'_>) -> String {
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
        Action::Hold { from } => format!(
            "install the issued certificate once it is valid, at {}",
            short_time(*from)
        ),
        Action::InstallHeld => "install the issued certificate held until it was valid".into(),
        Action::Ended { state } => {
            format!("report the {state} order (`issue NAME --yes` orders anew)")
        }
        Action::CannotReissue { reason } => format!("refuse the reissue: {reason}"),
    }
}

/// Backoff after `failures` consecutive failed runs: 1 h, doubling, at most 24 h.
pub(crate) fn backoff(failures: u32) -> Duration {
    let hours = 1i64 << failures.saturating_sub(1).min(5);
    Duration::hours(hours.min(24))
}

#[cfg(test)]
mod tests;
