//! `cert-agent check`: a monitoring check in the conventions of Nagios-style plugins (Icinga,
//! Zabbix, Checkmk, Sensu): one status line naming the worst certificates, performance data
//! (`'www_days_left'=41;14;7`), the details of every certificate that is not OK on the lines
//! after, and the exit code 0 OK, 1 WARNING, 2 CRITICAL, 3 UNKNOWN. It reads local state and
//! the installed files, plus, with `[revocation] check`, each installed certificate's CRL (kept
//! in `state_dir/crl/` until its `nextUpdate`, fetched when stale), and, with `--served`, shakes
//! hands with each certificate's verify address to compare what is served with what was
//! installed. The Partner API is asked only when a billed order falls due within 30 days:
//! whether the balance covers it (one balance call and one products call; none with
//! `--no-balance`).
//!
//! A renewal whose fresh domain validation needs a person (EMAIL, DNS without a hook) is a
//! WARNING from `[validation] warning_days` before it falls due.
//!
//! The levels are decided by [`assess`], a pure function with table tests.

use anyhow::Result;
use time::OffsetDateTime;

use crate::config::Config;
use crate::crypto::Serial;
use crate::revocation::{Checker, Status};
use crate::store::{CertRecord, Store};

use crate::clock::short_time;
use crate::engine::disk_state;
use crate::engine::forecast::{FreshValidation, next_fresh_validation};
use crate::engine::plan::Disk;

use super::money;
use super::served::{self, Served};

/// A check's result, ordered from best to worst (the exit code of the plugin conventions).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, PartialOrd, Ord, serde::Serialize)]
#[serde(rename_all = "UPPERCASE")]
pub(crate) enum Level {
    #[default]
    Ok = 0,
    Warning = 1,
    Critical = 2,
    Unknown = 3,
}

impl Level {
    /// `OK`, `WARNING`, `CRITICAL`, `UNKNOWN`.
    pub(crate) fn as_str(self) -> &'static str {
        match self {
            Self::Ok => "OK",
            Self::Warning => "WARNING",
            Self::Critical => "CRITICAL",
            Self::Unknown => "UNKNOWN",
        }
    }
}

/// What to check.
#[derive(Debug, Clone)]
pub(crate) struct CheckOptions {
    /// Certificates to check; empty: every configured one.
    pub names: Vec<String>,
    /// WARNING when fewer days than this are left.
    pub warning_days: i64,
    /// CRITICAL when fewer days than this are left.
    pub critical_days: i64,
    /// The thresholds are the defaults: for a short lifetime they shrink to its last quarter
    /// and tenth (thresholds the operator gave are taken as given).
    pub by_lifetime: bool,
    /// Also compare what each verify address serves with what was installed.
    pub served: bool,
    /// Check that the balance covers the billed orders due in 30 days (API calls only when
    /// one is due).
    pub balance: bool,
    /// Download each CRL now instead of using a kept copy younger than `refresh_secs`.
    pub refresh_crl: bool,
}

/// One certificate's result.
#[derive(Debug, Clone, serde::Serialize)]
pub(crate) struct CertCheck {
    pub name: String,
    pub level: Level,
    pub days_left: Option<i64>,
    /// Why it is not OK (empty when OK).
    pub problems: Vec<String>,
    /// The serial served at the verify address, when `--served` read one.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub served_serial: Option<String>,
    /// The next renewal that needs a fresh domain validation, if one falls due within a year.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub validation: Option<FreshValidation>,
}

/// Whether the balance covers the billed orders ahead.
#[derive(Debug, Clone, serde::Serialize)]
pub(crate) struct MoneyCheck {
    pub level: Level,
    /// Why it is not OK (empty when OK).
    pub problems: Vec<String>,
    /// `available` of the balance call, when read.
    pub available: Option<crate::values::Decimal>,
    pub currency: Option<String>,
    /// Billed orders due within 7 and 30 days (catalogue prices).
    pub spend_7d: Option<crate::values::Decimal>,
    pub spend_30d: Option<crate::values::Decimal>,
}

/// The whole check.
#[derive(Debug, Clone, serde::Serialize)]
pub(crate) struct CheckReport {
    pub level: Level,
    pub certificates: Vec<CertCheck>,
    /// The balance against the billed orders ahead; `None` when none falls due in 30 days (or
    /// `--no-balance`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub money: Option<MoneyCheck>,
    /// A WARNING about the fleet key: a previous fleet key still configured after the
    /// rotation ended on this host ([`crate::fleet::previous_key_warning`]).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub fleet_key: Option<String>,
    /// What this host saw of the fleet, each with its level: the lead held too long
    /// ([`crate::fleet::lead_alert`], `lead: …`), another host's audit log gone back
    /// ([`crate::fleet::audit_alerts`], `audit: …`).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub fleet: Vec<(Level, String)>,
    /// Thresholds, for the performance data.
    #[serde(skip)]
    pub warning_days: i64,
    #[serde(skip)]
    pub critical_days: i64,
}

impl CheckReport {
    /// The plugin output: the status line with performance data, then one line per
    /// certificate that is not OK.
    pub(crate) fn render(&self) -> String {
        let bad: Vec<&CertCheck> = {
            let mut v: Vec<&CertCheck> = self
                .certificates
                .iter()
                .filter(|c| c.level != Level::Ok)
                .collect();
            v.sort_by(|a, b| b.level.cmp(&a.level).then_with(|| a.name.cmp(&b.name)));
            v
        };
        let money_bad = self.money.as_ref().filter(|m| m.level != Level::Ok);
        let fleet_ok = self.fleet_key.is_none() && self.fleet.is_empty();
        let summary = if bad.is_empty() && money_bad.is_none() && fleet_ok {
            let nearest = self
                .certificates
                .iter()
                .filter_map(|c| c.days_left.map(|d| (d, &c.name)))
                .min();
            match nearest {
                Some((d, name)) => format!(
                    "{} certificate(s), the nearest expiry in {d} days ({name})",
                    self.certificates.len()
                ),
                None => format!("{} certificate(s)", self.certificates.len()),
            }
        } else {
            money_bad
                .map(|m| format!("balance: {}", m.problems.join(", ")))
                .into_iter()
                .chain(self.fleet_key.as_ref().map(|w| format!("fleet key: {w}")))
                .chain(self.fleet.iter().map(|(_, w)| format!("fleet {w}")))
                .chain(
                    bad.iter()
                        .take(3)
                        .map(|c| format!("{}: {}", c.name, c.problems.join(", "))),
                )
                .collect::<Vec<_>>()
                .join("; ")
                + &if bad.len() > 3 {
                    format!("; and {} more", bad.len() - 3)
                } else {
                    String::new()
                }
        };
        let mut perf: Vec<String> = self
            .certificates
            .iter()
            .filter_map(|c| {
                c.days_left.map(|d| {
                    format!(
                        "'{}_days_left'={d};{};{}",
                        c.name, self.warning_days, self.critical_days
                    )
                })
            })
            .collect();
        if let Some(m) = &self.money {
            if let Some(a) = &m.available {
                perf.push(format!("'balance_available'={a}"));
            }
            if let Some(s) = &m.spend_30d {
                perf.push(format!("'spend_30d'={s}"));
            }
        }
        let mut out = format!(
            "CERT-AGENT {} - {}",
            self.level.as_str(),
            one_line(&summary)
        );
        if !perf.is_empty() {
            out.push_str(" | ");
            out.push_str(&perf.join(" "));
        }
        out.push('\n');
        if let Some(m) = money_bad {
            out.push_str(&format!(
                "{} balance: {}\n",
                m.level.as_str(),
                one_line(&m.problems.join("; "))
            ));
        }
        if let Some(w) = &self.fleet_key {
            out.push_str(&format!("WARNING fleet key: {}\n", one_line(w)));
        }
        for (level, w) in &self.fleet {
            out.push_str(&format!("{} fleet {}\n", level.as_str(), one_line(w)));
        }
        for c in &bad {
            out.push_str(&format!(
                "{} {}: {}\n",
                c.level.as_str(),
                c.name,
                one_line(&c.problems.join("; "))
            ));
        }
        out
    }
}

/// Plugin output is line-based, and `|` starts the performance data.
fn one_line(text: &str) -> String {
    text.replace(['\n', '\r'], " ").replace('|', "/")
}

/// Checks the selected certificates.
pub(crate) async fn check(
    config: &Config,
    opts: &CheckOptions,
    clock: crate::clock::Clock,
) -> Result<CheckReport> {
    let now = clock.now();
    let store = Store::existing(&config.agent.state_dir);
    let certs = config.select(&opts.names)?;
    let mut certificates = Vec::with_capacity(certs.len());
    let mut seen = Vec::new();
    // In a fleet, what this host's last proofs saw (drift).
    let proved = if config.fleet.is_some() {
        served::load_proved(&store)
    } else {
        Default::default()
    };
    let crls = config
        .revocation
        .check
        .then(|| Checker::new(&config.agent.state_dir, &config.revocation).trying_now())
        .map(|c| if opts.refresh_crl { c.downloading() } else { c });
    for cert in certs {
        let rec = store.load(&cert.name)?;
        if let Some(archive) = store.retired_and_idle(&cert.name, &rec) {
            certificates.push(retired(&cert.name, &archive));
            continue;
        }
        let (disk, _) = disk_state(&rec);
        let served = if opts.served {
            Some(served::served(cert).await)
        } else {
            None
        };
        if let (Some(s), Some(inst)) = (&served, &rec.installed)
            && let Some(o) = served::Observation::of(now, &inst.serial, s)
        {
            seen.push((cert.name.clone(), o));
        }
        let mut c = assess(
            &rec,
            &disk,
            served.as_ref(),
            now,
            opts,
            config.agent.renew_before_days,
        );
        if let Some(o) = proved.get(&cert.name) {
            drift(&mut c, &rec, o);
        }
        if let (Some(crls), Some(inst), Disk::AsInstalled) = (&crls, &rec.installed, &disk) {
            revocation(&mut c, &crls.status(inst, now).await);
        }
        c.name = cert.name.clone();
        c.validation = next_fresh_validation(config, cert, &rec, now);
        if let Some(fresh) = &c.validation
            && let Some((level, text)) =
                validation_level(fresh, now, config.validation.warning_days)
        {
            c.level = c.level.max(level);
            c.problems.push(text);
        }
        if let Some(sunset) = crate::engine::sunset::email_sunset(cert, now) {
            c.level = c.level.max(sunset_level(sunset.stage));
            c.problems.push(sunset.message);
        }
        certificates.push(c);
    }
    if let Some(crls) = &crls {
        crls.finish();
    }
    // Fleet mode: a certificate this host has not installed of the fleet's current one.
    let behind = crate::fleet::behind(config, &opts.names, clock).await;
    for c in &mut certificates {
        if let Some(w) = behind.get(&c.name) {
            c.level = c.level.max(Level::Warning);
            c.problems.push(w.clone());
        }
    }
    served::remember(&store, seen);
    let money = if opts.balance && opts.names.is_empty() {
        money::for_check(config, now)
            .await
            .map(|f| money_check(f, now))
    } else {
        None
    };
    let fleet_key = crate::fleet::previous_key_warning(config, now);
    let lead = crate::fleet::lead_alert(config).map(|(critical, why)| {
        let level = if critical {
            Level::Critical
        } else {
            Level::Warning
        };
        (level, format!("lead: {why}"))
    });
    let audits = crate::fleet::audit_alerts(config).into_iter();
    let fleet: Vec<(Level, String)> = lead
        .into_iter()
        .chain(audits.map(|w| (Level::Critical, format!("audit: {w}"))))
        .collect();
    let level = certificates
        .iter()
        .map(|c| c.level)
        .chain(money.as_ref().map(|m| m.level))
        .chain(fleet_key.as_ref().map(|_| Level::Warning))
        .chain(fleet.iter().map(|(l, _)| *l))
        .max()
        .unwrap_or(Level::Ok);
    Ok(CheckReport {
        level,
        certificates,
        money,
        fleet_key,
        fleet,
        warning_days: opts.warning_days,
        critical_days: opts.critical_days,
    })
}

/// A certificate retired with `cert-agent retire` that the configuration still lists: nothing
/// is managed for it, and the entry is to go (WARNING, not the CRITICAL of "not installed").
fn retired(name: &str, archive: &std::path::Path) -> CertCheck {
    CertCheck {
        name: name.to_owned(),
        level: Level::Warning,
        days_left: None,
        problems: vec![format!(
            "retired ({}): remove its [[certificate]] entry from the configuration",
            archive.display()
        )],
        served_serial: None,
        validation: None,
    }
}

/// The level of one certificate from its record, its installed file and (when checked) what is
/// served.
pub(crate) fn assess(
    rec: &CertRecord,
    disk: &Disk,
    served: Option<&Served>,
    now: OffsetDateTime,
    opts: &CheckOptions,
    renew_before_days: u32,
) -> CertCheck {
    let mut found = Findings::default();
    let days_left = expiry(&mut found, rec, now, opts);
    installed_file(&mut found, rec, disk);
    let served_serial = served.and_then(|s| serving(&mut found, rec, s));
    attention(&mut found, rec, now, renew_before_days);
    CertCheck {
        name: rec.name.clone(),
        level: found.level,
        days_left,
        problems: found.problems,
        served_serial,
        validation: None,
    }
}

/// A renewal whose fresh validation needs a person is a WARNING from `warning_days` before it
/// falls due; one the agent validates itself is never a problem.
pub(crate) fn validation_level(
    fresh: &FreshValidation,
    now: OffsetDateTime,
    warning_days: u32,
) -> Option<(Level, String)> {
    if fresh.automatic || fresh.due - now > time::Duration::days(i64::from(warning_days)) {
        return None;
    }
    Some((
        Level::Warning,
        format!("{}: act before {}", fresh.describe(), short_time(fresh.due)),
    ))
}

/// The end of email validation: WARNING until 90 days before it, CRITICAL from then on.
pub(crate) fn sunset_level(stage: crate::engine::sunset::Stage) -> Level {
    match stage {
        crate::engine::sunset::Stage::Warning => Level::Warning,
        _ => Level::Critical,
    }
}

/// The problems found for one certificate and the level they raise it to.
#[derive(Default)]
struct Findings {
    level: Level,
    problems: Vec<String>,
}

impl Findings {
    fn raise(&mut self, level: Level, text: String) {
        self.level = self.level.max(level);
        self.problems.push(text);
    }
}

/// What the installed certificate's CRL says: revoked is CRITICAL (until a run installs its
/// replacement), a CRL that could not be used is WARNING naming its URL.
pub(crate) fn revocation(c: &mut CertCheck, status: &Status) {
    let level = match status {
        Status::Revoked { .. } => Level::Critical,
        Status::Unknown { .. } => Level::Warning,
        Status::Good { .. } | Status::NoCrl => return,
    };
    c.level = c.level.max(level);
    c.problems.push(status.describe());
}

/// Whether a certificate is installed and how many days it has left (`None`: none installed).
fn expiry(
    found: &mut Findings,
    rec: &CertRecord,
    now: OffsetDateTime,
    opts: &CheckOptions,
) -> Option<i64> {
    let days_left = rec
        .installed
        .as_ref()
        .map(|i| (i.not_after - now).whole_days());
    let acme_order = rec.acme.as_ref().is_some_and(|b| b.order_url.is_some());
    match (&rec.installed, days_left) {
        (None, _) => {
            let why = match rec.partner.ended() {
                Some(state) => format!("no certificate installed (order {state})"),
                None if rec.partner.order().is_some() || acme_order => {
                    "no certificate installed yet (issuance pending)".into()
                }
                None => "no certificate installed (no order yet)".into(),
            };
            found.raise(Level::Critical, why);
        }
        (Some(_), Some(d)) if d < 0 => {
            found.raise(Level::Critical, format!("expired {} days ago", -d));
        }
        (Some(inst), Some(_)) => {
            let (warning, critical) = thresholds(inst, opts);
            let left = inst.not_after - now;
            if left < critical {
                found.raise(Level::Critical, left_text(left));
            } else if left < warning {
                found.raise(Level::Warning, left_text(left));
            }
        }
        _ => {}
    }
    days_left
}

/// `check`'s default WARNING threshold in days.
pub(crate) const DEFAULT_WARNING_DAYS: i64 = 14;
/// `check`'s default CRITICAL threshold in days.
pub(crate) const DEFAULT_CRITICAL_DAYS: i64 = 7;

/// The WARNING and CRITICAL thresholds of an installed certificate: `warning_days` and
/// `critical_days`; with the default thresholds never more than a quarter and a tenth of its
/// lifetime (a 6-day certificate is not CRITICAL the day it is installed).
fn thresholds(
    inst: &crate::store::Installed,
    opts: &CheckOptions,
) -> (time::Duration, time::Duration) {
    use time::Duration;
    let (warning, critical) = (
        Duration::days(opts.warning_days),
        Duration::days(opts.critical_days),
    );
    if !opts.by_lifetime {
        return (warning, critical);
    }
    let lifetime = (inst.not_after - inst.not_before).max(Duration::ZERO);
    (warning.min(lifetime / 4i32), critical.min(lifetime / 10i32))
}

/// `N days left`, in hours under two days.
fn left_text(left: time::Duration) -> String {
    if left < time::Duration::days(2) {
        format!("{} hours left", left.whole_hours())
    } else {
        format!("{} days left", left.whole_days())
    }
}

/// Whether the file on disk still holds the installed certificate.
fn installed_file(found: &mut Findings, rec: &CertRecord, disk: &Disk) {
    match disk {
        Disk::AsInstalled => {}
        Disk::Missing if rec.installed.is_some() => found.raise(
            Level::Critical,
            "the installed certificate file is missing".into(),
        ),
        Disk::Missing => {}
        Disk::Differs(serial) => found.raise(
            Level::Critical,
            format!(
                "the installed file holds {}, not the installed serial {}",
                serial
                    .as_deref()
                    .map_or("no readable certificate".to_owned(), |s| format!(
                        "serial {s}"
                    )),
                rec.installed.as_ref().map_or("-", |i| i.serial.as_str())
            ),
        ),
    }
}

/// Whether the verify address serves the installed certificate; the serial it served.
fn serving(found: &mut Findings, rec: &CertRecord, served: &Served) -> Option<String> {
    let inst = rec.installed.as_ref()?;
    match served {
        Served::NotChecked => None,
        Served::Serial(s) => {
            if !same(s, &inst.serial) {
                found.raise(
                    Level::Critical,
                    format!("serves serial {s}, installed serial {}", inst.serial),
                );
            }
            Some(s.clone())
        }
        Served::Failed(e) => {
            found.raise(Level::Critical, format!("serving: {e}"));
            None
        }
    }
}

/// Drift, CRITICAL: this host's last fleet proof of the installed certificate met another
/// serial at an address and name (the same fact as `--served` meeting another serial: clients
/// get a certificate the fleet no longer renews).
fn drift(c: &mut CertCheck, rec: &CertRecord, proved: &served::Observation) {
    let Some(inst) = &rec.installed else {
        return;
    };
    match &proved.elsewhere {
        Some(at) if !at.is_empty() && proved.is_for(&inst.serial) => {
            c.level = c.level.max(Level::Critical);
            c.problems.push(format!(
                "drift: {}, installed serial {} (this host's fleet proof at {})",
                at.join("; "),
                inst.serial,
                short_time(proved.at)
            ));
        }
        _ => {}
    }
}

/// What needs the operator: failed runs, an order to reconcile, a validation pending for more
/// than a day, a subscription ending without a prepared renewal order.
fn attention(found: &mut Findings, rec: &CertRecord, now: OffsetDateTime, renew_before_days: u32) {
    if rec.failures > 0 {
        let last = rec.last_error.as_deref().unwrap_or("unknown error");
        let text = match rec.retry_after {
            Some(t) if t > now => format!(
                "the last {} run(s) failed, next try after {}: {last}",
                rec.failures,
                short_time(t)
            ),
            _ if rec.failures > 1 => format!("the last {} runs failed: {last}", rec.failures),
            _ => format!("the last run failed: {last}"),
        };
        found.raise(failing_level(rec.failures), text);
    }
    // Fleet mode: this host's part of the fleet's work, and the fleet's last attempts (the
    // leader's), on every host.
    if rec.host_failures > 0 && rec.host_error != rec.last_error {
        found.raise(
            failing_level(rec.host_failures),
            format!(
                "this host's last {} synchronisation(s) with the fleet failed: {}",
                rec.host_failures,
                rec.host_error.as_deref().unwrap_or("unknown error")
            ),
        );
    }
    if let Some(f) = rec.fleet_failure() {
        found.raise(failing_level(f.failures), f.describe());
    }
    // A halted rollout waits for a person, on every host.
    if let Some(h) = &rec.rollout_halted {
        found.raise(Level::Critical, h.clone());
    }
    if rec.partner.intent().is_some() {
        found.raise(
            Level::Warning,
            "an order whose outcome is unknown waits for reconciliation".into(),
        );
    }
    if let Some(p) = &rec.pending_key
        && now - p.created_at > time::Duration::days(1)
    {
        found.raise(
            Level::Warning,
            format!("validation pending since {}", short_time(p.created_at)),
        );
    }
    if let (Some(sub), Some(inst)) = (&rec.partner.subscription, &rec.installed)
        && sub.ends - now < time::Duration::days(i64::from(renew_before_days))
        && inst.not_after >= sub.ends - time::Duration::days(1)
        && rec.partner.prolong_prepared_at.is_none()
    {
        found.raise(
            Level::Warning,
            format!(
                "the subscription ends on {} and no renewal order is prepared",
                sub.ends.date()
            ),
        );
    }
}

/// Failures in a row from which a certificate is CRITICAL rather than WARNING.
pub(crate) const FAILURES_CRITICAL: u32 = 3;

/// WARNING for a failure, CRITICAL from [`FAILURES_CRITICAL`] in a row.
fn failing_level(failures: u32) -> Level {
    if failures >= FAILURES_CRITICAL {
        Level::Critical
    } else {
        Level::Warning
    }
}

fn same(a: &str, b: &str) -> bool {
    match (Serial::parse_hex(a), Serial::parse_hex(b)) {
        (Some(x), Some(y)) => x == y,
        _ => a.eq_ignore_ascii_case(b),
    }
}

mod balance;
#[cfg(test)]
mod tests;

pub(crate) use balance::money_check;
