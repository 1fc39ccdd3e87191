//! What falls due ahead: for one certificate, the renewals of the coming days (each a free
//! reissue or a billed order) and which of them will need a fresh domain validation. Pure, like
//! the planner whose timing rules it follows: the record, the configuration's knobs and `now`
//! in, dates out.
//!
//! The renewals are the planner's ([`super::plan`]): the installed certificate falls due at its
//! renewal time; a reissue is free while it extends coverage before the reissue blackout (the
//! last 30 days of the subscription), otherwise only a new, billed order extends it. Later
//! renewals inside the horizon are projected: each new certificate lasts as long as the
//! current one, at most the longest lifetime in force on its issue date and never past the
//! subscription's end; a billed order starts a subscription of the configured `days`.
//!
//! The dates are those of CA/Browser Forum ballot SC-081v3 (Baseline Requirements 6.3.2 and
//! 4.2.1): certificates issued from 2026-03-15 live at most 200 days, from 2027-03-15 100 days,
//! from 2029-03-15 47 days (398 before); a domain validation may be reused for 200 days from
//! 2026-03-15, 100 days from 2027-03-15 and 10 days from 2029-03-15 (398 before).

use std::collections::BTreeMap;

use time::{Date, Duration, Month, OffsetDateTime};

use super::plan::{LAST_REISSUE_MARGIN, REISSUE_BLACKOUT_DAYS, renewal_time};
use crate::store::{CertRecord, ValidationMark};

/// The SC-081v3 steps: from this date on, (maximum certificate lifetime, domain validation
/// reuse) in days.
const SC081: [(i32, Month, u8, i64, i64); 3] = [
    (2026, Month::March, 15, 200, 200),
    (2027, Month::March, 15, 100, 100),
    (2029, Month::March, 15, 47, 10),
];
/// Before the first step: 398 days for both.
const BEFORE_SC081: (i64, i64) = (398, 398);

fn sc081_on(date: Date) -> (i64, i64) {
    let mut now = BEFORE_SC081;
    for (y, m, d, life, reuse) in SC081 {
        if Date::from_calendar_date(y, m, d).is_ok_and(|from| date >= from) {
            now = (life, reuse);
        }
    }
    now
}

/// The longest certificate lifetime (days) for a certificate issued on `date`.
pub(crate) fn max_lifetime_days_on(date: Date) -> i64 {
    sc081_on(date).0
}

/// How many days a domain validation may be reused for a certificate issued on `date`.
pub(crate) fn reuse_days_on(date: Date) -> i64 {
    sc081_on(date).1
}

/// Whether a renewal is free or billed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub(crate) enum DueKind {
    /// A reissue inside the paid subscription: free.
    Reissue,
    /// A new order (the subscription ends, no reissue can extend coverage, or there is no
    /// usable order): billed.
    Order,
}

/// One renewal falling due.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Due {
    pub at: OffsetDateTime,
    pub kind: DueKind,
    pub reason: String,
}

/// What the projection needs besides the record.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Knobs {
    pub renew_before_days: u32,
    /// The configured order's `days` (a billed order's subscription).
    pub order_days: u32,
}

/// A certificate as projected: its validity and its subscription's end.
#[derive(Debug, Clone)]
struct Term {
    serial: String,
    not_before: OffsetDateTime,
    not_after: OffsetDateTime,
    ends: OffsetDateTime,
}

/// Renewals due at most this many times per certificate in one projection (a guard: a
/// 47-day certificate renews about eight times a year).
const MAX_STEPS: usize = 400;

/// The renewals of `rec` that fall due from `now` until `until`, in order. A renewal already
/// due is due `now`. An order or reissue in progress projects nothing until it is installed.
pub(crate) fn upcoming(
    rec: &CertRecord,
    knobs: Knobs,
    now: OffsetDateTime,
    until: OffsetDateTime,
) -> Vec<Due> {
    let mut out = Vec::new();
    let mut term = match (&rec.installed, rec.partner.ended()) {
        (_, Some(state)) => {
            out.push(Due {
                at: now,
                kind: DueKind::Order,
                reason: format!("the order is {state}; only a new order replaces it"),
            });
            match after_order(now, now, knobs) {
                Some(term) => term,
                None => return out,
            }
        }
        (None, None) if rec.partner.is_unordered() => {
            out.push(Due {
                at: now,
                kind: DueKind::Order,
                reason: "no order yet".into(),
            });
            match after_order(now, now, knobs) {
                Some(term) => term,
                None => return out,
            }
        }
        (None, None) => return out,
        (Some(inst), None) => {
            if rec.pending_key.is_some()
                || rec.partner.reissue().is_some()
                || rec.partner.intent().is_some()
            {
                return out;
            }
            Term {
                serial: inst.serial.clone(),
                not_before: inst.not_before,
                not_after: inst.not_after,
                ends: rec
                    .partner
                    .subscription
                    .as_ref()
                    .map_or(inst.not_after, |s| s.ends.max(inst.not_after)),
            }
        }
    };
    for _ in 0..MAX_STEPS {
        let (due, next) = step(&rec.name, &term, knobs, now);
        // A certificate shorter than the renewal window falls due when it starts: at most two
        // renewals at one moment (a reissue, then the order it leads to), never a loop.
        let same_moment = out.iter().filter(|d| d.at == due.at).count();
        if due.at > until || same_moment >= 2 {
            break;
        }
        // A renewal whose term would run past the largest date (the end of year 9999) is
        // still due; nothing is projected after it.
        let Some(next) = next else {
            out.push(due);
            break;
        };
        if next.not_after <= due.at {
            break;
        }
        out.push(due);
        term = next;
    }
    out
}

/// The term a billed order placed at `at` starts: a subscription of `days`, its first
/// certificate as long as the rules of `at` allow; `None` when it would end after the largest
/// date there is (the end of year 9999).
fn after_order(at: OffsetDateTime, lifetime_from: OffsetDateTime, knobs: Knobs) -> Option<Term> {
    let days = i64::from(knobs.order_days.max(1));
    let life = max_lifetime_days_on(lifetime_from.date()).min(days);
    Some(Term {
        serial: String::new(),
        not_before: at,
        not_after: at.checked_add(Duration::days(life))?,
        ends: at.checked_add(Duration::days(days))?,
    })
}

/// The next renewal of `term` and the term it starts (`None` past the largest date).
fn step(name: &str, term: &Term, knobs: Knobs, now: OffsetDateTime) -> (Due, Option<Term>) {
    let blackout = term.ends - Duration::days(REISSUE_BLACKOUT_DAYS);
    let reissue_extends = term.not_after < term.ends - Duration::days(1);
    let mut at = renewal_time(
        name,
        &term.serial,
        term.not_before,
        term.not_after,
        knobs.renew_before_days,
    );
    let last_chance = blackout - LAST_REISSUE_MARGIN;
    if reissue_extends && at >= last_chance {
        at = last_chance.max(term.not_before);
    }
    let at = at.max(now);
    if reissue_extends && at < blackout {
        let lifetime = (term.not_after - term.not_before)
            .min(Duration::days(max_lifetime_days_on(at.date())))
            .max(Duration::days(1));
        let due = Due {
            at,
            kind: DueKind::Reissue,
            reason: format!(
                "the certificate ends on {}; the subscription runs to {}",
                term.not_after.date(),
                term.ends.date()
            ),
        };
        let next = Term {
            serial: String::new(),
            not_before: at,
            not_after: at
                .checked_add(lifetime)
                .map_or(term.ends, |end| end.min(term.ends)),
            ends: term.ends,
        };
        return (due, Some(next));
    }
    let reason = if reissue_extends {
        format!(
            "the subscription ends on {} and its last {REISSUE_BLACKOUT_DAYS} days allow no reissue",
            term.ends.date()
        )
    } else {
        format!(
            "the certificate reaches the end of the subscription ({})",
            term.ends.date()
        )
    };
    let due = Due {
        at,
        kind: DueKind::Order,
        reason,
    };
    (due, after_order(at, at, knobs))
}

/// How the configured validation method is carried out.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "UPPERCASE")]
pub(crate) enum ValidationMethod {
    Http,
    Dns,
    Email,
}

impl ValidationMethod {
    /// How a configured `dcv` method validates.
    pub(crate) fn of(method: crate::config::DcvMethod) -> Self {
        use crate::config::DcvMethod as M;
        match method {
            M::Http | M::Https => Self::Http,
            M::Cname | M::DnsTxt => Self::Dns,
            M::Email => Self::Email,
        }
    }

    /// How a configured certificate validates, with `[validation] reuse_days`.
    pub(crate) fn setup(
        cert: &crate::config::CertificateConfig,
        reuse_days: Option<u32>,
    ) -> ValidationSetup {
        ValidationSetup {
            method: Self::of(cert.dcv.method),
            dns_hook: cert.dcv.dns_hook.is_some(),
            reuse_days,
        }
    }

    /// `HTTP`, `DNS`, `EMAIL`.
    pub(crate) fn as_str(self) -> &'static str {
        match self {
            Self::Http => "HTTP",
            Self::Dns => "DNS",
            Self::Email => "EMAIL",
        }
    }
}

/// The next renewal that needs a fresh validation of some of its names.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub(crate) struct FreshValidation {
    /// When that renewal falls due.
    #[serde(with = "time::serde::rfc3339")]
    pub due: OffsetDateTime,
    /// The names whose last validation is too old then (or unknown).
    pub domains: Vec<String>,
    /// The reuse period in force on that date, in days.
    pub reuse_days: i64,
    /// The configured method.
    pub method: ValidationMethod,
    /// The agent validates without a person (HTTP file; DNS through a hook).
    pub automatic: bool,
}

/// How a configured certificate validates.
#[derive(Debug, Clone, Copy)]
pub(crate) struct ValidationSetup {
    pub method: ValidationMethod,
    /// A DNS hook is configured.
    pub dns_hook: bool,
    /// `[validation] reuse_days`: a CA's stricter reuse period, in days (the shorter of it and
    /// SC-081's applies).
    pub reuse_days: Option<u32>,
}

impl ValidationSetup {
    /// Whether the agent validates without a person.
    pub(crate) fn automatic(self) -> bool {
        match self.method {
            ValidationMethod::Http => true,
            ValidationMethod::Dns => self.dns_hook,
            ValidationMethod::Email => false,
        }
    }

    /// The reuse period for a certificate issued on `date`.
    pub(crate) fn reuse_days_on(self, date: Date) -> i64 {
        // SC-090: from the end of email validation no earlier one may be reused either.
        if self.method == ValidationMethod::Email && super::sunset::email_ended_on(date) {
            return 0;
        }
        let ballot = reuse_days_on(date);
        self.reuse_days.map_or(ballot, |d| ballot.min(i64::from(d)))
    }
}

/// Names of `domains` whose last validation (`marks`) is older than the reuse period in force
/// at `due`, or unknown.
pub(crate) fn stale_domains(
    domains: &[String],
    marks: &BTreeMap<String, ValidationMark>,
    due: OffsetDateTime,
    reuse_days: i64,
) -> Vec<String> {
    domains
        .iter()
        .filter(|d| {
            marks.get(&d.to_ascii_lowercase()).is_none_or(|m| {
                // A reuse period running past the largest date has not ended.
                m.at.checked_add(Duration::days(reuse_days))
                    .is_some_and(|end| end < due)
            })
        })
        .cloned()
        .collect()
}

/// The first of `dues` that needs a fresh validation, if any.
pub(crate) fn fresh_validation(
    dues: &[Due],
    domains: &[String],
    marks: &BTreeMap<String, ValidationMark>,
    setup: ValidationSetup,
) -> Option<FreshValidation> {
    dues.iter().find_map(|due| {
        let reuse_days = setup.reuse_days_on(due.at.date());
        let stale = stale_domains(domains, marks, due.at, reuse_days);
        (!stale.is_empty()).then(|| FreshValidation {
            due: due.at,
            domains: stale,
            reuse_days,
            method: setup.method,
            automatic: setup.automatic(),
        })
    })
}

/// How far ahead `status` and `check` look for a renewal that needs a fresh validation.
pub(crate) const FORESIGHT_DAYS: i64 = 400;

/// The next renewal of a configured certificate that needs a fresh validation, within
/// [`FORESIGHT_DAYS`].
pub(crate) fn next_fresh_validation(
    config: &crate::config::Config,
    cert: &crate::config::CertificateConfig,
    rec: &CertRecord,
    now: OffsetDateTime,
) -> Option<FreshValidation> {
    let knobs = Knobs {
        renew_before_days: config.agent.renew_before_days,
        order_days: cert.order.days,
    };
    let dues = upcoming(rec, knobs, now, now + Duration::days(FORESIGHT_DAYS));
    let setup = ValidationMethod::setup(cert, config.validation.reuse_days);
    fresh_validation(&dues, &cert.domains, &rec.validations, setup)
}

impl FreshValidation {
    /// `fresh validation of a.example, b.example (EMAIL, needs a person) for the renewal due
    /// 2027-04-02`.
    pub(crate) fn describe(&self) -> String {
        if self.method == ValidationMethod::Email && super::sunset::email_ended_on(self.due.date())
        {
            return format!(
                "the renewal due {} needs a fresh validation of {}, and email validation ends \
                 on {} (no reuse either): move it to HTTP or DNS validation (`cert-agent dcv \
                 migrate`)",
                self.due.date(),
                self.domains.join(", "),
                super::sunset::EMAIL_SUNSET
            );
        }
        let (date, method, domains) = (
            self.due.date(),
            self.method.as_str(),
            self.domains.join(", "),
        );
        if self.automatic {
            format!(
                "the renewal due {date} validates {domains} afresh by {method} (the earlier \
                 validation no longer counts); cert-agent does it itself, and the new one counts \
                 for {} days",
                self.reuse_days
            )
        } else {
            format!(
                "the renewal due {date} needs a person to validate {domains} afresh by {method} \
                 (the earlier validation no longer counts); the new one counts for {} days",
                self.reuse_days
            )
        }
    }
}

#[cfg(test)]
mod tests;
