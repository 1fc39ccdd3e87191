//! The planner of a certificate from an ACME CA: a pure function of the record, the installed
//! files and `now`, like the Partner planner ([`super::super::plan`]), with ACME's rules:
//! - an order journaled and not yet installed is resumed, never placed again;
//! - a certificate is renewed at the moment chosen inside the renewal window the directory
//!   suggested (RFC 9773), asked again once its `Retry-After` has passed; the directory is
//!   asked once after each new certificate whether it offers Renewal Information, and without
//!   it the agent's own due rule ([`super::super::plan::renewal_time`]) decides, with
//!   `renew_before_days` at most two thirds of the lifetime (a 6-day certificate is not due
//!   when installed);
//! - missing or changed installed files, a revoked certificate or `--force` order anew (an
//!   ACME order is not billed);
//! - failures back off as for every certificate.

use time::OffsetDateTime;

use crate::store::CertRecord;

use super::super::plan::{Disk, renewal_time};

/// Everything the decision depends on.
#[derive(Debug, Clone)]
pub(crate) struct Inputs<'a> {
    pub now: OffsetDateTime,
    pub record: &'a CertRecord,
    pub disk: Disk,
    pub renew_before_days: u32,
    /// `--force`, `install NAME`: a new certificate now.
    pub force: bool,
    /// An explicit command: try now even after recent failures.
    pub ignore_backoff: bool,
}

/// The next action.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Action {
    /// Nothing to do before `next`.
    Idle { next: Option<OffsetDateTime> },
    /// Failed recently; no attempt before `until`.
    Backoff { until: OffsetDateTime },
    /// Ask the directory for the installed certificate's renewal window, then decide again.
    AskWindow,
    /// Go on with the order journaled in the record.
    Resume,
    /// Place a new order, for `reason`; `replaces` the installed certificate (ARI).
    Order { reason: String, replaces: bool },
}

/// Decides the next action.
pub(crate) fn decide(i: &Inputs<'_>) -> Action {
    let r = i.record;
    let book = r.acme.as_ref();
    if !i.ignore_backoff
        && let Some(until) = r.retry_after.filter(|u| *u > i.now)
    {
        return Action::Backoff { until };
    }
    if book.is_some_and(|b| b.order_url.is_some()) {
        return Action::Resume;
    }
    let Some(inst) = &r.installed else {
        return Action::Order {
            reason: "no certificate is installed yet".into(),
            replaces: false,
        };
    };
    let order = |reason: String| Action::Order {
        reason,
        replaces: true,
    };
    if let Some(seen) = r.revocation.as_ref().filter(|s| s.revokes(&inst.serial)) {
        return order(format!(
            "the installed certificate is revoked: {}",
            seen.detail
        ));
    }
    match &i.disk {
        Disk::AsInstalled => {}
        Disk::Missing => return order("the installed certificate's file is missing".into()),
        Disk::Differs(_) => {
            return order("the installed file holds another certificate".into());
        }
    }
    if i.force {
        return order("a new certificate was asked for (--force)".into());
    }
    // `renew_before_days` never reaches into the first third of a short lifetime (a 6-day
    // certificate is not due the moment it is installed).
    let lifetime_days = (inst.not_after - inst.not_before).whole_days().max(0);
    let before = i
        .renew_before_days
        .min(u32::try_from(lifetime_days * 2 / 3).unwrap_or(u32::MAX));
    let own = renewal_time(
        &r.name,
        &inst.serial,
        inst.not_before,
        inst.not_after,
        before,
    );
    let window = book
        .and_then(|b| b.window.as_ref())
        .filter(|w| crate::crypto::same_serial_hex(&w.serial, &inst.serial));
    let renewal_info = book.and_then(|b| b.renewal_info);
    let (due, next_check) = match (window, renewal_info) {
        // The CA's window, never later than the certificate's own end.
        (Some(w), _) => (w.renew_at.min(inst.not_after), Some(w.next_check)),
        (None, Some(false)) => (own, None),
        // Not asked yet since the certificate was issued (or the window is another's).
        (None, _) => return Action::AskWindow,
    };
    if i.now >= due {
        let why = match window {
            Some(w) => format!(
                "inside the renewal window the CA suggested ({} to {})",
                crate::clock::short_time(w.start),
                crate::clock::short_time(w.end)
            ),
            None => format!(
                "the certificate ends on {} ({} days left)",
                inst.not_after.date(),
                (inst.not_after - i.now).whole_days()
            ),
        };
        return order(why);
    }
    match next_check {
        Some(at) if i.now >= at => Action::AskWindow,
        Some(at) => Action::Idle {
            next: Some(due.min(at)),
        },
        None => Action::Idle { next: Some(due) },
    }
}

/// How long a quiet decision stands (the due summary's `quiet_until`): the next moment to
/// look again when the decision is [`Action::Idle`].
pub(crate) fn quiet_until(i: &Inputs<'_>) -> Option<OffsetDateTime> {
    match decide(i) {
        Action::Idle { next } => next,
        _ => None,
    }
}

/// In words, for `--dry-run`.
pub(crate) fn describe(action: &Action) -> String {
    match action {
        Action::Idle { next: Some(at) } => {
            format!("nothing to do before {}", crate::clock::short_time(*at))
        }
        Action::Idle { next: None } => "nothing to do".into(),
        Action::Backoff { until } => format!(
            "not tried before {} after failures",
            crate::clock::short_time(*until)
        ),
        Action::AskWindow => "ask the ACME CA for the renewal window".into(),
        Action::Resume => "go on with the ACME order in progress".into(),
        Action::Order { reason, .. } => format!("place an ACME order: {reason}"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::{AcmeBook, Installed, RenewalWindow, RevocationSeen};
    use time::macros::datetime;

    fn installed() -> Installed {
        Installed {
            serial: "0A1B".into(),
            not_before: datetime!(2027-01-01 00:00 UTC),
            not_after: datetime!(2027-04-01 00:00 UTC),
            certificate_id: 0,
            files: Vec::new(),
            installed_at: datetime!(2027-01-01 00:00 UTC),
            leaf_file: None,
            leaf_stamp: None,
        }
    }

    fn record(book: Option<AcmeBook>, inst: Option<Installed>) -> CertRecord {
        let mut r: CertRecord = serde_json::from_value(serde_json::json!({
            "version": 1, "name": "site", "pending_key": null, "installed": null,
            "last_state": null, "last_error": null, "retry_after": null, "last_poll": null
        }))
        .expect("a record");
        r.acme = book.map(Box::new);
        r.installed = inst;
        r
    }

    fn inputs(r: &CertRecord, now: OffsetDateTime) -> Inputs<'_> {
        Inputs {
            now,
            record: r,
            disk: Disk::AsInstalled,
            renew_before_days: 30,
            force: false,
            ignore_backoff: false,
        }
    }

    fn book(renewal_info: bool, window: Option<RenewalWindow>) -> AcmeBook {
        AcmeBook {
            ca: "pebble".into(),
            order_url: None,
            names: Vec::new(),
            placed_at: None,
            renewal_info: Some(renewal_info),
            window,
        }
    }

    fn window(renew_at: OffsetDateTime, next_check: OffsetDateTime) -> RenewalWindow {
        RenewalWindow {
            serial: "0A1B".into(),
            start: renew_at - time::Duration::days(1),
            end: renew_at + time::Duration::days(1),
            renew_at,
            next_check,
            explanation: None,
        }
    }

    #[test]
    fn nothing_installed_orders_and_a_journaled_order_is_resumed() {
        let r = record(None, None);
        assert!(matches!(
            decide(&inputs(&r, datetime!(2027-01-01 00:00 UTC))),
            Action::Order {
                replaces: false,
                ..
            }
        ));
        let mut b = book(false, None);
        b.order_url = Some("https://ca.test/order/1".into());
        let r = record(Some(b), Some(installed()));
        assert_eq!(
            decide(&inputs(&r, datetime!(2027-01-02 00:00 UTC))),
            Action::Resume
        );
    }

    #[test]
    fn without_renewal_information_the_own_rule_decides() {
        let r = record(Some(book(false, None)), Some(installed()));
        let early = decide(&inputs(&r, datetime!(2027-01-15 00:00 UTC)));
        let Action::Idle { next: Some(next) } = early else {
            panic!("{early:?}");
        };
        // 90 days: due with a third (30 days) left, spread up to 7 days before.
        assert!(next <= datetime!(2027-03-02 00:00 UTC) && next >= datetime!(2027-02-22 00:00 UTC));
        assert!(matches!(
            decide(&inputs(&r, datetime!(2027-03-03 00:00 UTC))),
            Action::Order { replaces: true, .. }
        ));
        assert_eq!(
            quiet_until(&inputs(&r, datetime!(2027-01-15 00:00 UTC))),
            Some(next)
        );
    }

    #[test]
    fn the_window_of_the_ca_decides_and_is_asked_again_after_retry_after() {
        let now = datetime!(2027-01-15 00:00 UTC);
        // Renewal Information offered, no window yet: ask; and not known yet: ask.
        let r = record(Some(book(true, None)), Some(installed()));
        assert_eq!(decide(&inputs(&r, now)), Action::AskWindow);
        let mut unknown = book(true, None);
        unknown.renewal_info = None;
        let r = record(Some(unknown), Some(installed()));
        assert_eq!(decide(&inputs(&r, now)), Action::AskWindow);
        // A window later than the own rule is followed; idle until the earlier of the
        // renewal moment and the next check.
        let w = window(
            datetime!(2027-03-10 00:00 UTC),
            datetime!(2027-01-16 00:00 UTC),
        );
        let r = record(Some(book(true, Some(w))), Some(installed()));
        assert_eq!(
            decide(&inputs(&r, now)),
            Action::Idle {
                next: Some(datetime!(2027-01-16 00:00 UTC))
            }
        );
        assert_eq!(
            decide(&inputs(&r, datetime!(2027-01-16 00:00 UTC))),
            Action::AskWindow
        );
        assert!(matches!(
            decide(&inputs(&r, datetime!(2027-03-10 00:00 UTC))),
            Action::Order { replaces: true, .. }
        ));
        // A window for another serial is not this certificate's.
        let mut w = window(
            datetime!(2027-03-10 00:00 UTC),
            datetime!(2027-02-01 00:00 UTC),
        );
        w.serial = "FFFF".into();
        let r = record(Some(book(true, Some(w))), Some(installed()));
        assert_eq!(decide(&inputs(&r, now)), Action::AskWindow);
    }

    #[test]
    fn revoked_missing_forced_and_backed_off() {
        let now = datetime!(2027-01-15 00:00 UTC);
        let mut r = record(Some(book(false, None)), Some(installed()));
        r.revocation = Some(RevocationSeen {
            serial: "0A1B".into(),
            state: "revoked".into(),
            url: None,
            detail: "revoked on 2027-01-10".into(),
            revoked_at: Some(datetime!(2027-01-10 00:00 UTC)),
            reason: None,
        });
        assert!(matches!(decide(&inputs(&r, now)), Action::Order { .. }));
        let r = record(Some(book(false, None)), Some(installed()));
        let mut i = inputs(&r, now);
        i.disk = Disk::Missing;
        assert!(matches!(decide(&i), Action::Order { .. }));
        let mut i = inputs(&r, now);
        i.force = true;
        assert!(matches!(decide(&i), Action::Order { .. }));
        let mut r = record(Some(book(false, None)), Some(installed()));
        r.retry_after = Some(datetime!(2027-01-15 01:00 UTC));
        assert_eq!(
            decide(&inputs(&r, now)),
            Action::Backoff {
                until: datetime!(2027-01-15 01:00 UTC)
            }
        );
        let mut i = inputs(&r, now);
        i.ignore_backoff = true;
        assert!(matches!(decide(&i), Action::Idle { .. }));
    }

    #[test]
    fn a_six_day_certificate_is_not_due_at_once() {
        let mut inst = installed();
        inst.not_after = inst.not_before + time::Duration::days(6);
        let r = record(Some(book(false, None)), Some(inst));
        let i = inputs(&r, datetime!(2027-01-01 06:00 UTC));
        let Action::Idle { next: Some(next) } = decide(&i) else {
            panic!("{:?}", decide(&i));
        };
        assert!(next > datetime!(2027-01-02 00:00 UTC), "{next}");
        assert!(next < datetime!(2027-01-07 00:00 UTC), "{next}");
    }
}
