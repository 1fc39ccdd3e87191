//! The Prometheus text file (`[agent] metrics_file`), written atomically at the end of every
//! run for node_exporter's textfile collector: per certificate what the state directory knows
//! (validity, subscription end, install time, last attempt and success, failures, pending
//! work, the last run's outcome, whether the served certificate matched the installed one when
//! `check --served` or `status --served` last looked), and per run its start, duration,
//! outcomes and Partner API calls. Names and help texts follow
//! the Prometheus conventions (`promtool check metrics` passes).

use std::fmt::Write as _;
use std::time::Duration;

use time::OffsetDateTime;

use crate::api::RequestCount;
use crate::config::Config;
use crate::store::{CertRecord, Store};

use super::served::{self, Observation};
use crate::engine::{Outcome, RunReport};

/// What one run leaves for the metrics.
struct RunFacts<'a> {
    started_at: OffsetDateTime,
    duration: Duration,
    report: &'a RunReport,
    requests: &'a [RequestCount],
}

/// Writes the metrics file of `config`, if one is configured; a failure is logged, never the
/// run's failure.
pub(super) fn write(config: &Config, store: &Store, report: &RunReport) {
    let Some(path) = &config.agent.metrics_file else {
        return;
    };
    let text = render_with(config, store, Some(report));
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
    render_with(config, &Store::existing(&config.agent.state_dir), report)
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

/// Renders the metrics; after a run (`report`), each certificate's last success is kept.
fn render_with(config: &Config, store: &Store, report: Option<&RunReport>) -> String {
    let records: Vec<(&crate::config::CertificateConfig, Option<CertRecord>)> = config
        .certificates
        .iter()
        .map(|c| (c, store.load(&c.name).ok()))
        .collect();
    let seen = served::load(store);
    let kept = kept_successes(store);
    let empty = RunReport::default();
    let stats = report.and_then(|r| r.stats.as_ref());
    let facts = stats.map(|s| RunFacts {
        started_at: s.started_at,
        duration: s.duration,
        report: report.unwrap_or(&empty),
        requests: &s.requests,
    });
    let (text, successes) = render(&records, &seen, &kept, facts.as_ref());
    if report.is_some() {
        keep_successes(store, &kept, &successes);
    }
    text
}

/// One metric family: its help, type and samples.
struct Family {
    name: &'static str,
    help: &'static str,
    samples: Vec<(String, f64)>,
}

impl Family {
    fn new(name: &'static str, help: &'static str) -> Self {
        Self {
            name,
            help,
            samples: Vec::new(),
        }
    }

    fn add(&mut self, labels: &str, value: f64) {
        self.samples.push((labels.to_owned(), value));
    }
}

/// The text exposition of the metrics.
fn render(
    certs: &[(&crate::config::CertificateConfig, Option<CertRecord>)],
    seen: &std::collections::BTreeMap<String, Observation>,
    kept: &Successes,
    run: Option<&RunFacts<'_>>,
) -> (String, Successes) {
    let mut successes = Successes::new();
    let empty = RunReport::default();
    let report = run.map_or(&empty, |r| r.report);
    let mut not_after = Family::new(
        "cert_agent_certificate_not_after_timestamp_seconds",
        "When the installed certificate expires (Unix time).",
    );
    let mut not_before = Family::new(
        "cert_agent_certificate_not_before_timestamp_seconds",
        "When the installed certificate became valid (Unix time).",
    );
    let mut subscription = Family::new(
        "cert_agent_subscription_end_timestamp_seconds",
        "When the paid subscription of the certificate's order ends (Unix time).",
    );
    let mut installed = Family::new(
        "cert_agent_certificate_installed_timestamp_seconds",
        "When the installed certificate was last installed successfully (Unix time).",
    );
    let mut last_attempt = Family::new(
        "cert_agent_certificate_last_attempt_timestamp_seconds",
        "When a run last looked at the certificate, worked on it or failed on it (Unix time).",
    );
    let mut last_success = Family::new(
        "cert_agent_certificate_last_success_timestamp_seconds",
        "When a run last installed the certificate or found it in order (Unix time).",
    );
    let mut served_matches = Family::new(
        "cert_agent_certificate_served_matches_installed",
        "1 when the verify address served the installed certificate at the last served check, \
         0 when it served another one or none.",
    );
    let mut served_checked = Family::new(
        "cert_agent_certificate_served_checked_timestamp_seconds",
        "When the served certificate was last compared with the installed one (Unix time).",
    );
    let mut failures = Family::new(
        "cert_agent_certificate_consecutive_failures",
        "Failed runs in a row for the certificate (0 after a success).",
    );
    let mut pending = Family::new(
        "cert_agent_certificate_pending",
        "1 while an order, a reissue or a validation waits at the CA, else 0.",
    );
    let mut outcome = Family::new(
        "cert_agent_certificate_last_run_outcome",
        "1 for the outcome of the certificate in the last run that worked on it.",
    );
    for (cert, rec) in certs {
        let labels = format!(
            "name=\"{}\",common_name=\"{}\",server=\"{}\"",
            escape(&cert.name),
            escape(cert.common_name()),
            cert.install.server
        );
        let Some(rec) = rec else {
            continue;
        };
        if let Some(i) = &rec.installed {
            not_after.add(&labels, unix(i.not_after));
            not_before.add(&labels, unix(i.not_before));
            installed.add(&labels, unix(i.installed_at));
        }
        if let Some(s) = &rec.subscription {
            subscription.add(&labels, unix(s.ends));
        }
        let this_run = run.and_then(|r| {
            let c = r.report.certificates.iter().find(|c| c.name == cert.name)?;
            Some((r.started_at, &c.outcome))
        });
        let installed_at = rec.installed.as_ref().map(|i| i.installed_at);
        let looked = this_run
            .filter(|(_, o)| !matches!(o, Outcome::Planned { .. }))
            .map(|(t, _)| t);
        let fine = looked.filter(|_| {
            rec.failures == 0 && !matches!(this_run, Some((_, Outcome::Failed { .. })))
        });
        if let Some(t) = [looked, rec.last_failed_at, installed_at]
            .into_iter()
            .flatten()
            .max()
        {
            last_attempt.add(&labels, unix(t));
        }
        let kept_success = kept.get(&cert.name).copied();
        if let Some(t) = [
            fine.map(|t| t.unix_timestamp()),
            installed_at.map(|t| t.unix_timestamp()),
            kept_success,
        ]
        .into_iter()
        .flatten()
        .max()
        {
            last_success.add(&labels, t as f64);
            successes.insert(cert.name.clone(), t);
        }
        if let (Some(o), Some(i)) = (seen.get(&cert.name), &rec.installed)
            && o.is_for(&i.serial)
        {
            served_matches.add(&labels, if o.matches() { 1.0 } else { 0.0 });
            served_checked.add(&labels, unix(o.at));
        }
        failures.add(&labels, f64::from(rec.failures));
        let waiting = rec.intent.is_some()
            || rec.reissue.is_some()
            || (rec.pending_key.is_some() && rec.order.is_some());
        pending.add(&labels, if waiting { 1.0 } else { 0.0 });
        if let Some(c) = report.certificates.iter().find(|c| c.name == cert.name) {
            let name = match c.outcome {
                Outcome::Unchanged { .. } => "unchanged",
                Outcome::Installed { .. } => "installed",
                Outcome::Pending { .. } => "pending",
                Outcome::Planned { .. } => "planned",
                Outcome::Failed { .. } => "failed",
            };
            outcome.add(&format!("{labels},outcome=\"{name}\""), 1.0);
        }
    }

    let mut per_run = Vec::new();
    if let Some(run) = run {
        let mut start = Family::new(
            "cert_agent_last_run_start_timestamp_seconds",
            "When the last run started (Unix time).",
        );
        start.add("", unix(run.started_at));
        let mut duration = Family::new(
            "cert_agent_last_run_duration_seconds",
            "How long the last run took.",
        );
        duration.add("", run.duration.as_secs_f64());
        let mut outcomes = Family::new(
            "cert_agent_last_run_certificates",
            "Certificates of the last run by outcome.",
        );
        for name in ["unchanged", "installed", "pending", "planned", "failed"] {
            let n = run
                .report
                .certificates
                .iter()
                .filter(|c| {
                    matches!(
                        (&c.outcome, name),
                        (Outcome::Unchanged { .. }, "unchanged")
                            | (Outcome::Installed { .. }, "installed")
                            | (Outcome::Pending { .. }, "pending")
                            | (Outcome::Planned { .. }, "planned")
                            | (Outcome::Failed { .. }, "failed")
                    )
                })
                .count();
            outcomes.add(&format!("outcome=\"{name}\""), n as f64);
        }
        let mut requests = Family::new(
            "cert_agent_last_run_api_requests",
            "Partner API requests of the last run by method, endpoint and HTTP status.",
        );
        let mut orders = Family::new(
            "cert_agent_last_run_orders_placed",
            "Billed orders the last run placed (POST /api/v1/order answered 2xx).",
        );
        let mut reissues = Family::new(
            "cert_agent_last_run_reissues_sent",
            "Reissues the last run sent (answered 2xx).",
        );
        let mut placed = 0u64;
        let mut reissued = 0u64;
        for r in run.requests {
            requests.add(
                &format!(
                    "method=\"{}\",endpoint=\"{}\",status=\"{}\"",
                    r.method,
                    escape(&r.endpoint),
                    r.status
                ),
                r.count as f64,
            );
            let ok = (200..300).contains(&r.status);
            if ok && r.method == "POST" && r.endpoint == "/api/v1/order" {
                placed += r.count;
            }
            if ok && r.method == "POST" && r.endpoint.ends_with("/reissue") {
                reissued += r.count;
            }
        }
        orders.add("", placed as f64);
        reissues.add("", reissued as f64);
        per_run = vec![start, duration, outcomes, requests, orders, reissues];
    }
    let mut out = String::new();
    for family in [
        not_after,
        not_before,
        subscription,
        installed,
        last_attempt,
        last_success,
        served_matches,
        served_checked,
        failures,
        pending,
        outcome,
    ]
    .into_iter()
    .chain(per_run)
    {
        if family.samples.is_empty() {
            continue;
        }
        let _ = writeln!(out, "# HELP {} {}", family.name, family.help);
        let _ = writeln!(out, "# TYPE {} gauge", family.name);
        for (labels, value) in &family.samples {
            if labels.is_empty() {
                let _ = writeln!(out, "{} {value}", family.name);
            } else {
                let _ = writeln!(out, "{}{{{labels}}} {value}", family.name);
            }
        }
    }
    (out, successes)
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
