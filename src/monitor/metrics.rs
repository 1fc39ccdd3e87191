//! The Prometheus text file (`[agent] metrics_file`), written atomically at the end of every
//! run for node_exporter's textfile collector: per certificate what the state directory knows
//! (validity, subscription end, install time, last attempt and success, failures, pending
//! work, the last run's outcome, whether the served certificate matched the installed one when
//! `check --served` or `status --served` last looked, what the CRL said, the next renewal that
//! needs a fresh domain validation and whether a person must do it, whether it was retired while
//! the configuration still lists it), per run its start, duration, outcomes and Partner API
//! calls, per synchronisation of the daemon's follow loop with the fleet its start, duration
//! and outcomes (each kept in the state directory, so either shows what the other wrote last);
//! the account's available balance and the billed renewals of
//! the next 30 days as last read (`state_dir/money.json`, refreshed by `forecast`, by `check`
//! when it reads the balance, and after a run that talked to the API). Names and help texts
//! follow
//! the Prometheus conventions (`promtool check metrics` passes).

use std::borrow::Cow;
use std::fmt::Write as _;

use time::OffsetDateTime;

use crate::api::RequestCount;
use crate::config::Config;
use crate::store::{CertRecord, Records, Store};

use super::served::{self, Observation};

mod passes;
use crate::engine::forecast::{FreshValidation, next_fresh_validation};
use crate::engine::{Outcome, RunReport};
pub(crate) use passes::Pass;
pub use passes::fuzz_kept_pass;
use passes::{KeptRun, keep_pass, passes_text};

/// What the last run or synchronisation did with each certificate, and when it started.
struct RunFacts<'a> {
    started_at: OffsetDateTime,
    report: &'a RunReport,
}

/// Keeps the facts of `report` (a run or a fleet synchronisation, [`Pass`]) for the metrics,
/// then writes the metrics file of `config`, if one is configured; a failure is logged, never
/// the run's failure. `records`: records as the state directory holds them, that the run
/// holds (the others are read).
pub(super) fn write(
    config: &Config,
    store: &Store,
    report: &RunReport,
    pass: Pass,
    records: &Records,
) {
    if config.agent.metrics_file.is_none() && config.agent.metrics_listen.is_none() {
        return;
    }
    keep_pass(store, report, pass);
    let Some(path) = &config.agent.metrics_file else {
        return;
    };
    let text = render_with(config, store, Some(report), records);
    if let Err(e) = crate::fsutil::write_atomic(path, text.as_bytes(), 0o644) {
        tracing::warn!(
            "could not write the metrics file {}: {}",
            path.display(),
            crate::fsutil::io_text(&e)
        );
    }
}

/// The metrics of `config`'s certificates from the state directory, and of `report` (the last
/// run) when there is one — what `[agent] metrics_file` holds and `cert-agent run` serves on
/// `metrics_listen`.
pub fn text(config: &Config, report: Option<&RunReport>) -> String {
    render_with(
        config,
        &Store::existing(&config.agent.state_dir),
        report,
        &Records::new(),
    )
}

/// Each certificate's last success (Unix time), as the metrics last showed it: a run that
/// finds a certificate in order writes no record, and a failing run after it must still show
/// when it was last fine.
const SUCCESS_FILE: &str = "metrics-last-success.json";

type Successes = std::collections::BTreeMap<String, i64>;

fn kept_successes(store: &Store) -> Successes {
    std::fs::read(store.dir().join(SUCCESS_FILE))
        .ok()
        .and_then(|b| serde_json::from_slice(&b).ok())
        .unwrap_or_default()
}

/// Keeps `now` when it differs from `kept`; a state directory the caller cannot write only
/// loses the older figures.
fn keep_successes(store: &Store, kept: &Successes, now: &Successes) {
    if now.is_empty() || now == kept || !store.dir().is_dir() {
        return;
    }
    if let Ok(bytes) = serde_json::to_vec(now)
        && let Err(e) = crate::fsutil::write_atomic(&store.dir().join(SUCCESS_FILE), &bytes, 0o600)
    {
        tracing::debug!(
            "could not keep the last successes: {}",
            crate::fsutil::io_text(&e)
        );
    }
}

/// One configured certificate as the metrics see it.
struct CertFacts<'a> {
    cert: &'a crate::config::CertificateConfig,
    /// Its record (`None`: it does not read), as the run held it or read.
    rec: Option<Cow<'a, CertRecord>>,
    /// Retired with `cert-agent retire` and nothing started for it since.
    retired: bool,
    /// The next renewal that needs a fresh domain validation.
    fresh: Option<FreshValidation>,
    /// Validated by email: how close the end of email validation is.
    sunset: Option<crate::engine::sunset::EmailSunset>,
}

/// Renders the metrics; after a run (`report`), each certificate's last success is kept. Each
/// record is taken from `records` where it is there, otherwise read.
fn render_with<'a>(
    config: &'a Config,
    store: &Store,
    report: Option<&RunReport>,
    records: &'a Records,
) -> String {
    let now = report
        .and_then(|r| r.stats.as_ref())
        .map_or_else(|| crate::clock::Clock::from_env().now(), |s| s.started_at);
    let records: Vec<CertFacts<'_>> = config
        .certificates
        .iter()
        .map(|cert| {
            let rec = store.held_or_load(records, &cert.name).ok();
            let retired = rec
                .as_ref()
                .is_some_and(|r| store.retired_and_idle(&cert.name, r).is_some());
            let fresh = rec
                .as_ref()
                .filter(|_| !retired)
                .and_then(|r| next_fresh_validation(config, cert, r, now));
            CertFacts {
                cert,
                rec,
                retired,
                fresh,
                sunset: crate::engine::sunset::email_sunset(cert, now),
            }
        })
        .collect();
    let seen = served::load(store);
    let kept = kept_successes(store);
    let empty = RunReport::default();
    let stats = report.and_then(|r| r.stats.as_ref());
    let facts = stats.map(|s| RunFacts {
        started_at: s.started_at,
        report: report.unwrap_or(&empty),
    });
    let money = super::money::last_snapshot(store);
    let (mut text, successes) = render(&records, &seen, &kept, facts.as_ref());
    text.push_str(&passes_text(store));
    if let Some(m) = &money {
        text.push_str(&money_text(m));
    }
    if report.is_some() {
        keep_successes(store, &kept, &successes);
    }
    text
}

/// [`Metric::EmailValidationEnds`]: name and help text.
const EMAIL_VALIDATION_ENDS: (&str, &str) = (
    "cert_agent_certificate_email_validation_ends_days",
    "For a certificate validated by email: days until email validation ends (2028-03-15, CA/B \
     Forum SC-090), negative after; absent for other methods.",
);

/// The metrics, in the order they are written. Each is a gauge; [`Metric::def`]
/// holds its name and help text.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Metric {
    NotAfter,
    NotBefore,
    Subscription,
    Installed,
    LastAttempt,
    LastSuccess,
    ServedMatches,
    ServedChecked,
    Failures,
    Pending,
    Retired,
    Info,
    Revoked,
    CrlUsable,
    FreshValidationDue,
    FreshValidationNeedsPerson,
    EmailValidationEnds,
    Outcome,
    RunStart,
    RunDuration,
    RunCertificates,
    RunRequests,
    RunOrders,
    RunReissues,
    BalanceAvailable,
    ProjectedSpend,
    BalanceRead,
}

impl Metric {
    const ALL: [Metric; 27] = [
        Metric::NotAfter,
        Metric::NotBefore,
        Metric::Subscription,
        Metric::Installed,
        Metric::LastAttempt,
        Metric::LastSuccess,
        Metric::ServedMatches,
        Metric::ServedChecked,
        Metric::Failures,
        Metric::Pending,
        Metric::Retired,
        Metric::Info,
        Metric::Revoked,
        Metric::CrlUsable,
        Metric::FreshValidationDue,
        Metric::FreshValidationNeedsPerson,
        Metric::EmailValidationEnds,
        Metric::Outcome,
        Metric::RunStart,
        Metric::RunDuration,
        Metric::RunCertificates,
        Metric::RunRequests,
        Metric::RunOrders,
        Metric::RunReissues,
        Metric::BalanceAvailable,
        Metric::ProjectedSpend,
        Metric::BalanceRead,
    ];

    /// Name and help text.
    fn def(self) -> (&'static str, &'static str) {
        match self {
            Metric::NotAfter => (
                "cert_agent_certificate_not_after_timestamp_seconds",
                "When the installed certificate expires (Unix time).",
            ),
            Metric::NotBefore => (
                "cert_agent_certificate_not_before_timestamp_seconds",
                "When the installed certificate became valid (Unix time).",
            ),
            Metric::Subscription => (
                "cert_agent_subscription_end_timestamp_seconds",
                "When the paid subscription of the certificate's order ends (Unix time).",
            ),
            Metric::Installed => (
                "cert_agent_certificate_installed_timestamp_seconds",
                "When the installed certificate was last installed successfully (Unix time).",
            ),
            Metric::LastAttempt => (
                "cert_agent_certificate_last_attempt_timestamp_seconds",
                "When a run last looked at the certificate, worked on it or failed on it (Unix time).",
            ),
            Metric::LastSuccess => (
                "cert_agent_certificate_last_success_timestamp_seconds",
                "When a run last installed the certificate or found it in order (Unix time).",
            ),
            Metric::ServedMatches => (
                "cert_agent_certificate_served_matches_installed",
                "1 when the verify address served the installed certificate at the last served check, \
                 0 when it served another one or none.",
            ),
            Metric::ServedChecked => (
                "cert_agent_certificate_served_checked_timestamp_seconds",
                "When the served certificate was last compared with the installed one (Unix time).",
            ),
            Metric::Failures => (
                "cert_agent_certificate_consecutive_failures",
                "Failed runs in a row for the certificate (0 after a success); in fleet mode the \
                 fleet's failed attempts when they are more.",
            ),
            Metric::Pending => (
                "cert_agent_certificate_pending",
                "1 while an order, a reissue or a validation waits at the CA, else 0.",
            ),
            Metric::Info => (
                "cert_agent_certificate_info",
                "Always 1; its labels say where the certificate comes from: issuer=\"partner\" \
                 (the Partner API) or issuer=\"acme:NAME\" (the ACME CA of [acme.NAME]).",
            ),
            Metric::Retired => (
                "cert_agent_certificate_retired",
                "1 when the certificate was retired (cert-agent retire) and the configuration still \
                 lists it: nothing is managed and no other sample is written for it; else 0.",
            ),
            Metric::Revoked => (
                "cert_agent_certificate_revoked",
                "1 when the CRL lists the installed certificate as revoked, 0 when it does not \
                 (absent until a run read the CRL).",
            ),
            Metric::CrlUsable => (
                "cert_agent_certificate_crl_usable",
                "1 when the last run could use the installed certificate's CRL (fetched or kept, \
                 signed by the issuer, not stale), 0 when it was refused: revocation unknown.",
            ),
            Metric::FreshValidationDue => (
                "cert_agent_certificate_fresh_validation_due_timestamp_seconds",
                "When the next renewal that needs a fresh domain validation falls due (Unix time; \
                 absent when none does within 400 days).",
            ),
            Metric::FreshValidationNeedsPerson => (
                "cert_agent_certificate_fresh_validation_needs_person",
                "1 when that fresh validation needs a person (EMAIL, DNS without a hook), 0 when \
                 the agent does it (HTTP file, DNS hook).",
            ),
            Metric::EmailValidationEnds => EMAIL_VALIDATION_ENDS,
            Metric::Outcome => (
                "cert_agent_certificate_last_run_outcome",
                "1 for the outcome of the certificate in the last run that worked on it.",
            ),
            Metric::RunStart => (
                "cert_agent_last_run_start_timestamp_seconds",
                "When the last run started (Unix time).",
            ),
            Metric::RunDuration => (
                "cert_agent_last_run_duration_seconds",
                "How long the last run took.",
            ),
            Metric::RunCertificates => (
                "cert_agent_last_run_certificates",
                "Certificates of the last run by outcome.",
            ),
            Metric::RunRequests => (
                "cert_agent_last_run_api_requests",
                "Partner API requests of the last run by method, endpoint and HTTP status.",
            ),
            Metric::RunOrders => (
                "cert_agent_last_run_orders_placed",
                "Billed orders the last run placed (POST /api/v1/order answered 2xx).",
            ),
            Metric::RunReissues => (
                "cert_agent_last_run_reissues_sent",
                "Reissues the last run sent (answered 2xx).",
            ),
            Metric::BalanceAvailable => (
                "cert_agent_balance_available",
                "The account's available balance (usable for new bills) when last read, by currency.",
            ),
            Metric::ProjectedSpend => (
                "cert_agent_projected_spend_30d",
                "Catalogue price of the billed orders and renewals due in the next 30 days, as \
                 projected when the balance was last read, by currency.",
            ),
            Metric::BalanceRead => (
                "cert_agent_balance_read_timestamp_seconds",
                "When the balance and the projected spend were last read (Unix time).",
            ),
        }
    }
}

/// The samples of every family (label set and value), kept apart by family in
/// [`Metric::ALL`]'s order, which is the enum's. A label set is kept once and shared by its
/// samples (a certificate's ~15).
struct Samples {
    /// The label sets; the first is the empty one.
    labels: Vec<String>,
    families: [Vec<(usize, f64)>; Metric::ALL.len()],
}

impl Default for Samples {
    fn default() -> Self {
        Self {
            labels: vec![String::new()],
            families: std::array::from_fn(|_| Vec::new()),
        }
    }
}

impl Samples {
    /// A label set for [`put`](Self::put).
    fn label(&mut self, labels: String) -> usize {
        self.labels.push(labels);
        self.labels.len() - 1
    }

    fn put(&mut self, family: Metric, label: usize, value: f64) {
        self.families[family as usize].push((label, value));
    }

    /// A sample with a label set of its own.
    fn add(&mut self, family: Metric, labels: &str, value: f64) {
        let label = if labels.is_empty() {
            0
        } else {
            self.label(labels.to_owned())
        };
        self.put(family, label, value);
    }

    /// The text exposition: each family with samples, in [`Metric::ALL`]'s order.
    fn text(&self) -> String {
        let size: usize = Metric::ALL
            .into_iter()
            .zip(&self.families)
            .flat_map(|(family, samples)| {
                let name = family.def().0.len();
                samples
                    .iter()
                    .map(move |(l, _)| name + self.labels[*l].len() + 24)
            })
            .sum();
        let mut out = String::with_capacity(size + 8192);
        for (family, samples) in Metric::ALL.into_iter().zip(&self.families) {
            if samples.is_empty() {
                continue;
            }
            let (name, help) = family.def();
            let _ = writeln!(out, "# HELP {name} {help}");
            let _ = writeln!(out, "# TYPE {name} gauge");
            for (label, value) in samples {
                out.push_str(name);
                let labels = &self.labels[*label];
                if !labels.is_empty() {
                    out.push('{');
                    out.push_str(labels);
                    out.push('}');
                }
                out.push(' ');
                push_value(&mut out, *value);
                out.push('\n');
            }
        }
        out
    }
}

/// `value` as the text format writes it: a whole number (the timestamps, counts and flags) as
/// an integer, anything else as Rust prints an `f64` (both as `{value}` would).
fn push_value(out: &mut String, value: f64) {
    // Whole numbers below 2^53 are exact as integers; -0 prints as "-0".
    if value.fract() == 0.0 && value.abs() < 9.0e15 && !(value == 0.0 && value.is_sign_negative()) {
        let _ = write!(out, "{}", value as i64);
    } else {
        let _ = write!(out, "{value}");
    }
}

/// The text exposition of the metrics, and each certificate's last success.
fn render(
    certs: &[CertFacts<'_>],
    seen: &std::collections::BTreeMap<String, Observation>,
    kept: &Successes,
    run: Option<&RunFacts<'_>>,
) -> (String, Successes) {
    let mut samples = Samples::default();
    let mut successes = Successes::new();
    // Each certificate's line of the run's report, by name (not searched for: quadratic at
    // 10,000 certificates).
    let lines: std::collections::HashMap<&str, &crate::engine::CertReport> = run
        .map(|r| {
            r.report
                .certificates
                .iter()
                .map(|c| (c.name.as_str(), c))
                .collect()
        })
        .unwrap_or_default();
    for facts in certs {
        let (cert, Some(rec)) = (facts.cert, facts.rec.as_deref()) else {
            continue;
        };
        let labels = samples.label(format!(
            "name=\"{}\",common_name=\"{}\",server=\"{}\"",
            escape(&cert.name),
            escape(cert.common_name()),
            cert.install.server
        ));
        let this_run = run.and_then(|r| {
            let c = lines.get(cert.name.as_str())?;
            Some((r.started_at, &c.outcome))
        });
        samples.put(
            Metric::Retired,
            labels,
            if facts.retired { 1.0 } else { 0.0 },
        );
        if facts.retired {
            // Nothing is managed: it must not look like a certificate never installed.
            continue;
        }
        samples.add(
            Metric::Info,
            &format!(
                "name=\"{}\",issuer=\"{}\"",
                escape(&cert.name),
                escape(&cert.order.issuer.label())
            ),
            1.0,
        );
        if let Some(f) = &facts.fresh {
            samples.put(Metric::FreshValidationDue, labels, unix(f.due));
            let person = if f.automatic { 0.0 } else { 1.0 };
            samples.put(Metric::FreshValidationNeedsPerson, labels, person);
        }
        if let Some(sunset) = &facts.sunset {
            samples.put(Metric::EmailValidationEnds, labels, sunset.days_left as f64);
        }
        if let Some(t) = certificate(&mut samples, &cert.name, labels, rec, this_run, seen, kept) {
            successes.insert(cert.name.clone(), t);
        }
    }
    (samples.text(), successes)
}

/// The samples of one certificate (`this_run`: when the last run started and what it did with
/// the certificate); its last success (Unix time), when it has one.
fn certificate(
    samples: &mut Samples,
    name: &str,
    labels: usize,
    rec: &CertRecord,
    this_run: Option<(OffsetDateTime, &Outcome)>,
    seen: &std::collections::BTreeMap<String, Observation>,
    kept: &Successes,
) -> Option<i64> {
    if let Some(i) = &rec.installed {
        samples.put(Metric::NotAfter, labels, unix(i.not_after));
        samples.put(Metric::NotBefore, labels, unix(i.not_before));
        samples.put(Metric::Installed, labels, unix(i.installed_at));
    }
    if let Some(s) = &rec.partner.subscription {
        samples.put(Metric::Subscription, labels, unix(s.ends));
    }
    if let (Some(i), Some(r)) = (&rec.installed, &rec.revocation)
        && crate::crypto::same_serial_hex(&r.serial, &i.serial)
        && r.state != "no_crl"
    {
        let usable = r.state != "unknown";
        if usable {
            let revoked = r.state == "revoked";
            samples.put(Metric::Revoked, labels, if revoked { 1.0 } else { 0.0 });
        }
        samples.put(Metric::CrlUsable, labels, if usable { 1.0 } else { 0.0 });
    }
    let installed_at = rec.installed.as_ref().map(|i| i.installed_at);
    let looked = this_run
        .filter(|(_, o)| !matches!(o, Outcome::Planned { .. }))
        .map(|(t, _)| t);
    let fine = looked.filter(|_| {
        rec.consecutive_failures() == 0 && !matches!(this_run, Some((_, Outcome::Failed { .. })))
    });
    if let Some(t) = [looked, rec.last_failed_at, installed_at]
        .into_iter()
        .flatten()
        .max()
    {
        samples.put(Metric::LastAttempt, labels, unix(t));
    }
    let success = [
        fine.map(|t| t.unix_timestamp()),
        installed_at.map(|t| t.unix_timestamp()),
        kept.get(name).copied(),
    ]
    .into_iter()
    .flatten()
    .max();
    if let Some(t) = success {
        samples.put(Metric::LastSuccess, labels, t as f64);
    }
    if let (Some(o), Some(i)) = (seen.get(name), &rec.installed)
        && o.is_for(&i.serial)
    {
        samples.put(
            Metric::ServedMatches,
            labels,
            if o.matches() { 1.0 } else { 0.0 },
        );
        samples.put(Metric::ServedChecked, labels, unix(o.at));
    }
    samples.put(
        Metric::Failures,
        labels,
        f64::from(rec.consecutive_failures()),
    );
    let waiting = rec.partner.intent.is_some()
        || rec.partner.reissue.is_some()
        || rec.acme.as_ref().is_some_and(|b| b.order_url.is_some())
        || (rec.pending_key.is_some() && rec.partner.order.is_some());
    samples.put(Metric::Pending, labels, if waiting { 1.0 } else { 0.0 });
    if let Some((_, outcome)) = this_run {
        let with_outcome = format!("{},outcome=\"{}\"", samples.labels[labels], outcome.kind());
        samples.add(Metric::Outcome, &with_outcome, 1.0);
    }
    success
}

/// The samples of the last run, as kept: start, duration, outcomes, API requests, orders,
/// reissues.
fn last_run(samples: &mut Samples, run: &KeptRun) {
    samples.add(Metric::RunStart, "", run.started_at as f64);
    samples.add(Metric::RunDuration, "", run.duration_secs);
    for kind in Outcome::KINDS {
        let n = run.certificates.get(kind).copied().unwrap_or(0);
        samples.add(
            Metric::RunCertificates,
            &format!("outcome=\"{kind}\""),
            n as f64,
        );
    }
    let mut placed = 0u64;
    let mut reissued = 0u64;
    for r in &run.requests {
        samples.add(
            Metric::RunRequests,
            &format!(
                "method=\"{}\",endpoint=\"{}\",status=\"{}\"",
                escape(&r.method),
                escape(&r.endpoint),
                r.status
            ),
            r.count as f64,
        );
        let ok = (200..300).contains(&r.status);
        if ok && r.method == "POST" && r.endpoint == "/api/v1/order" {
            placed = placed.saturating_add(r.count);
        }
        if ok && r.method == "POST" && r.endpoint.ends_with("/reissue") {
            reissued = reissued.saturating_add(r.count);
        }
    }
    samples.add(Metric::RunOrders, "", placed as f64);
    samples.add(Metric::RunReissues, "", reissued as f64);
}

/// The balance and the projected spend last read.
fn money_text(m: &super::money::Snapshot) -> String {
    let mut samples = Samples::default();
    let currency = m.available.as_ref().map(|a| a.currency.as_str());
    let labels = currency.map_or(String::new(), |c| format!("currency=\"{}\"", escape(c)));
    if let Some(a) = &m.available
        && let Ok(v) = a.sum.as_str().parse::<f64>()
    {
        samples.add(Metric::BalanceAvailable, &labels, v);
    }
    if let Ok(v) = m.spend_30d.as_str().parse::<f64>() {
        samples.add(Metric::ProjectedSpend, &labels, v);
    }
    samples.add(Metric::BalanceRead, "", unix(m.at));
    samples.text()
}

fn unix(t: OffsetDateTime) -> f64 {
    t.unix_timestamp() as f64
}

/// A label value in the text format: backslash, double quote and newline escaped.
fn escape(v: &str) -> String {
    v.replace('\\', "\\\\")
        .replace('"', "\\\"")
        .replace('\n', "\\n")
}

#[cfg(test)]
mod tests {
    use super::passes::sync_text;
    use super::*;

    fn config() -> Config {
        let cert = |name: &str| {
            format!(
                r#"
[[certificate]]
name = "{name}"
domains = ["{name}.example.com"]
product_id = 1101
webroot = "/var/www"
country = "DE"
region = "Berlin"
city = "Berlin"
server = "nginx"
cert_path = "/tmp/{name}.pem"
key_path = "/tmp/{name}.key"
"#
            )
        };
        let text = format!(
            "[api]\nbase_url = \"https://127.0.0.1:1\"\nlogin = \"a@b.test\"\npassword = \"x\"\n{}{}",
            cert("old"),
            cert("www")
        );
        Config::parse(&text, std::path::Path::new("/tmp/x.toml")).unwrap()
    }

    /// The integer shortcut writes every value as `{value}` does.
    #[test]
    fn values_are_written_as_rust_prints_them() {
        for v in [
            0.0,
            -0.0,
            1.0,
            -1.0,
            0.5,
            1_800_000_000.0,
            -1_800_000_000.0,
            8.999_999_999_999_998e15,
            9.0e15,
            1e16,
            2f64.powi(53) + 2.0,
            1e308,
            -9.223_372_036_854_776e18,
            f64::NAN,
            f64::INFINITY,
            f64::NEG_INFINITY,
            f64::MIN_POSITIVE,
            0.1 + 0.2,
        ] {
            let mut out = String::new();
            push_value(&mut out, v);
            assert_eq!(out, format!("{v}"), "{v:?}");
        }
    }

    /// A retired certificate the configuration still lists shows only as retired (no
    /// failures, no pending work, no outcome: nothing an alert on a certificate never
    /// installed matches); the other's fresh validation shows when it is due and that a
    /// person must do it.
    #[test]
    fn a_retired_certificate_and_a_fresh_validation_in_the_metrics() {
        let config = config();
        let due = time::macros::datetime!(2027-05-20 00:00 UTC);
        let facts = vec![
            CertFacts {
                cert: &config.certificates[0],
                rec: Some(Cow::Owned(CertRecord {
                    name: "old".into(),
                    ..CertRecord::default()
                })),
                retired: true,
                fresh: None,
                sunset: None,
            },
            CertFacts {
                cert: &config.certificates[1],
                rec: Some(Cow::Owned(CertRecord {
                    name: "www".into(),
                    ..CertRecord::default()
                })),
                retired: false,
                fresh: Some(FreshValidation {
                    due,
                    domains: vec!["www.example.com".into()],
                    reuse_days: 100,
                    method: crate::engine::forecast::ValidationMethod::Email,
                    automatic: false,
                }),
                sunset: Some(crate::engine::sunset::EmailSunset {
                    stage: crate::engine::sunset::Stage::Warning,
                    days_left: 472,
                    message: String::new(),
                }),
            },
        ];
        let report = RunReport {
            certificates: vec![crate::engine::CertReport {
                name: "old".into(),
                outcome: Outcome::Failed {
                    error: "certificate 'old' was retired".into(),
                },
                warning: None,
                revocation: None,
                ordered: None,
            }],
            stats: None,
            takeover: None,
        };
        let run = RunFacts {
            started_at: due,
            report: &report,
        };
        let (text, _) = render(&facts, &Default::default(), &Default::default(), Some(&run));
        let old: Vec<&str> = text
            .lines()
            .filter(|l| l.contains("name=\"old\""))
            .collect();
        assert_eq!(
            old,
            [
                "cert_agent_certificate_retired{name=\"old\",common_name=\"old.example.com\",server=\"nginx\"} 1"
            ],
            "{text}"
        );
        let www = "{name=\"www\",common_name=\"www.example.com\",server=\"nginx\"}";
        for line in [
            format!("cert_agent_certificate_retired{www} 0"),
            format!(
                "cert_agent_certificate_fresh_validation_due_timestamp_seconds{www} {}",
                due.unix_timestamp()
            ),
            format!("cert_agent_certificate_fresh_validation_needs_person{www} 1"),
            format!("cert_agent_certificate_email_validation_ends_days{www} 472"),
        ] {
            assert!(text.lines().any(|l| l == line), "{line}\n{text}");
        }
    }

    /// Every family is documented for operators in `docs/monitoring.md`.
    #[test]
    fn every_metric_is_documented() {
        let doc = include_str!("../../docs/monitoring.md");
        for m in Metric::ALL {
            let (name, _) = m.def();
            assert!(
                doc.contains(&format!("`{name}")),
                "{name} is not in docs/monitoring.md"
            );
        }
    }

    #[test]
    fn every_metric_is_listed_once_in_the_enums_order() {
        for (i, m) in Metric::ALL.into_iter().enumerate() {
            assert_eq!(m as usize, i, "{m:?}");
        }
    }

    /// The fuzz seed of `metrics-last-run.json` reads, and cut short it is refused without a
    /// panic.
    #[test]
    fn the_kept_pass_fuzz_seed_reads() {
        let seed = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("fuzz/corpus/fleet_values/seed-kept-pass");
        let data = std::fs::read(seed).expect("the seed");
        assert_eq!(data.first(), Some(&3), "the parser byte of fleet_values");
        assert!(KeptRun::parse(&data[1..]).is_some());
        for cut in [data.len() / 2, 2, 1] {
            fuzz_kept_pass(&data[1..cut]);
        }
    }

    #[test]
    fn kept_facts_that_make_no_sense_show_nothing() {
        for bad in [
            &b""[..],
            b"{}",
            b"[]",
            b"{\"started_at\":1,\"duration_secs\":-1,\"certificates\":{}}",
            b"{\"started_at\":\"x\",\"duration_secs\":1,\"certificates\":{}}",
            b"{\"started_at\":1,\"duration_secs\":1,\"certificates\":{\"failed\":-2}}",
        ] {
            assert_eq!(
                KeptRun::parse(bad),
                None,
                "{}",
                String::from_utf8_lossy(bad)
            );
        }
        // Hostile labels are escaped; unknown outcome kinds are not shown.
        let kept = KeptRun::parse(
            br#"{"started_at":5,"duration_secs":0.5,"certificates":{"installed":2,"x\"}":9},
                "requests":[{"method":"GET\"} 1\n","endpoint":"/a","status":200,"count":3}]}"#,
        )
        .expect("reads");
        let mut samples = Samples::default();
        last_run(&mut samples, &kept);
        let text = samples.text();
        assert!(
            text.contains("cert_agent_last_run_certificates{outcome=\"installed\"} 2"),
            "{text}"
        );
        assert!(!text.contains("} 9"), "{text}");
        assert!(text.contains("method=\"GET\\\"} 1\\n\""), "{text}");
        let sync = sync_text(&kept);
        assert!(
            sync.contains("cert_agent_last_sync_timestamp_seconds 5\n"),
            "{sync}"
        );
        assert!(
            sync.contains("cert_agent_last_sync_certificates{outcome=\"installed\"} 2"),
            "{sync}"
        );
        fuzz_kept_pass(
            br#"{"started_at":-9223372036854775808,"duration_secs":1e308,"certificates":{}}"#,
        );
    }
}
