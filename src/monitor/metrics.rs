//! The Prometheus text file (`[agent] metrics_file`), written atomically at the end of every
//! run for node_exporter's textfile collector: per certificate what the state directory knows
//! (validity, subscription end, install time, last attempt and success, failures, pending
//! work, the last run's outcome, whether the served certificate matched the installed one when
//! `check --served` or `status --served` last looked), per run its start, duration,
//! outcomes and Partner API calls, per synchronisation of the daemon's follow loop with the
//! fleet its start, duration and outcomes (each kept in the state directory, so either shows
//! what the other wrote last); the account's available balance and the billed renewals of
//! the next 30 days as last read (`state_dir/money.json`, refreshed by `forecast`, by `check`
//! when it reads the balance, and after a run that talked to the API). Names and help texts
//! follow
//! the Prometheus conventions (`promtool check metrics` passes).

use std::fmt::Write as _;

use time::OffsetDateTime;

use crate::api::RequestCount;
use crate::config::Config;
use crate::store::{CertRecord, Store};

use super::served::{self, Observation};
use crate::engine::{Outcome, RunReport};

/// What the last run or synchronisation did with each certificate, and when it started.
struct RunFacts<'a> {
    started_at: OffsetDateTime,
    report: &'a RunReport,
}

/// Keeps the facts of `report` (a run or a fleet synchronisation, [`Pass`]) for the metrics,
/// then writes the metrics file of `config`, if one is configured; a failure is logged, never
/// the run's failure.
pub(super) fn write(config: &Config, store: &Store, report: &RunReport, pass: Pass) {
    if config.agent.metrics_file.is_none() && config.agent.metrics_listen.is_none() {
        return;
    }
    keep_pass(store, report, pass);
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
    Revoked,
    CrlUsable,
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
    const ALL: [Metric; 22] = [
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
        Metric::Revoked,
        Metric::CrlUsable,
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

/// The samples of every family (labels and value), kept apart by family in
/// [`Metric::ALL`]'s order, which is the enum's.
struct Samples([Vec<(String, f64)>; Metric::ALL.len()]);

impl Default for Samples {
    fn default() -> Self {
        Self(std::array::from_fn(|_| Vec::new()))
    }
}

impl Samples {
    fn add(&mut self, family: Metric, labels: &str, value: f64) {
        self.0[family as usize].push((labels.to_owned(), value));
    }

    /// The text exposition: each family with samples, in [`Metric::ALL`]'s order.
    fn text(&self) -> String {
        let mut out = String::new();
        for (family, samples) in Metric::ALL.into_iter().zip(&self.0) {
            if samples.is_empty() {
                continue;
            }
            let (name, help) = family.def();
            let _ = writeln!(out, "# HELP {name} {help}");
            let _ = writeln!(out, "# TYPE {name} gauge");
            for (labels, value) in samples {
                if labels.is_empty() {
                    let _ = writeln!(out, "{name} {value}");
                } else {
                    let _ = writeln!(out, "{name}{{{labels}}} {value}");
                }
            }
        }
        out
    }
}

/// The text exposition of the metrics, and each certificate's last success.
fn render(
    certs: &[(&crate::config::CertificateConfig, Option<CertRecord>)],
    seen: &std::collections::BTreeMap<String, Observation>,
    kept: &Successes,
    run: Option<&RunFacts<'_>>,
) -> (String, Successes) {
    let mut samples = Samples::default();
    let mut successes = Successes::new();
    for (cert, rec) in certs {
        let Some(rec) = rec else {
            continue;
        };
        let labels = format!(
            "name=\"{}\",common_name=\"{}\",server=\"{}\"",
            escape(&cert.name),
            escape(cert.common_name()),
            cert.install.server
        );
        let this_run = run.and_then(|r| {
            let c = r.report.certificates.iter().find(|c| c.name == cert.name)?;
            Some((r.started_at, &c.outcome))
        });
        if let Some(t) = certificate(&mut samples, &cert.name, &labels, rec, this_run, seen, kept) {
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
    labels: &str,
    rec: &CertRecord,
    this_run: Option<(OffsetDateTime, &Outcome)>,
    seen: &std::collections::BTreeMap<String, Observation>,
    kept: &Successes,
) -> Option<i64> {
    if let Some(i) = &rec.installed {
        samples.add(Metric::NotAfter, labels, unix(i.not_after));
        samples.add(Metric::NotBefore, labels, unix(i.not_before));
        samples.add(Metric::Installed, labels, unix(i.installed_at));
    }
    if let Some(s) = &rec.subscription {
        samples.add(Metric::Subscription, labels, unix(s.ends));
    }
    if let (Some(i), Some(r)) = (&rec.installed, &rec.revocation)
        && crate::crypto::same_serial_hex(&r.serial, &i.serial)
        && r.state != "no_crl"
    {
        let usable = r.state != "unknown";
        if usable {
            let revoked = r.state == "revoked";
            samples.add(Metric::Revoked, labels, if revoked { 1.0 } else { 0.0 });
        }
        samples.add(Metric::CrlUsable, labels, if usable { 1.0 } else { 0.0 });
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
        samples.add(Metric::LastAttempt, labels, unix(t));
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
        samples.add(Metric::LastSuccess, labels, t as f64);
    }
    if let (Some(o), Some(i)) = (seen.get(name), &rec.installed)
        && o.is_for(&i.serial)
    {
        samples.add(
            Metric::ServedMatches,
            labels,
            if o.matches() { 1.0 } else { 0.0 },
        );
        samples.add(Metric::ServedChecked, labels, unix(o.at));
    }
    samples.add(
        Metric::Failures,
        labels,
        f64::from(rec.consecutive_failures()),
    );
    let waiting = rec.intent.is_some()
        || rec.reissue.is_some()
        || (rec.pending_key.is_some() && rec.order.is_some());
    samples.add(Metric::Pending, labels, if waiting { 1.0 } else { 0.0 });
    if let Some((_, outcome)) = this_run {
        samples.add(
            Metric::Outcome,
            &format!("{labels},outcome=\"{}\"", outcome.kind()),
            1.0,
        );
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

// ---- Runs and the fleet's synchronisations, kept apart ----
//
// A run (`renew` by the timer, the daemon's scheduled runs, `issue`, `reissue`, `install`, a
// takeover) and a synchronisation of the daemon's follow loop with the fleet each leave their
// own facts in the state directory: the `cert_agent_last_run_*` families show runs only, the
// `cert_agent_last_sync_*` families synchronisations only, whichever of them wrote last.

/// What wrote the metrics: a run, or a synchronisation of the daemon's follow loop.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Pass {
    Run,
    Sync,
}

/// `state_dir/metrics-last-run.json`: the last run's facts.
const LAST_RUN_FILE: &str = "metrics-last-run.json";
/// `state_dir/metrics-last-sync.json`: the last synchronisation's facts.
const LAST_SYNC_FILE: &str = "metrics-last-sync.json";

/// The facts of the last run (or synchronisation: no requests) as kept between processes.
#[derive(Debug, Default, PartialEq, serde::Serialize, serde::Deserialize)]
struct KeptRun {
    /// Start, Unix time.
    started_at: i64,
    duration_secs: f64,
    /// Certificates by outcome kind.
    certificates: std::collections::BTreeMap<String, u64>,
    #[serde(default)]
    requests: Vec<KeptRequest>,
}

#[derive(Debug, PartialEq, serde::Serialize, serde::Deserialize)]
struct KeptRequest {
    method: String,
    endpoint: String,
    status: u16,
    count: u64,
}

impl KeptRun {
    fn of(report: &RunReport) -> Option<Self> {
        let stats = report.stats.as_ref()?;
        let mut certificates = std::collections::BTreeMap::new();
        for c in &report.certificates {
            *certificates.entry(c.outcome.kind().to_owned()).or_insert(0) += 1;
        }
        Some(Self {
            started_at: stats.started_at.unix_timestamp(),
            duration_secs: stats.duration.as_secs_f64(),
            certificates,
            requests: stats.requests.iter().map(KeptRequest::of).collect(),
        })
    }

    /// The kept facts in `bytes`; `None` when they do not read or make no sense (a damaged
    /// or foreign file shows no figures rather than wrong ones).
    fn parse(bytes: &[u8]) -> Option<Self> {
        let kept: Self = serde_json::from_slice(bytes).ok()?;
        (kept.duration_secs.is_finite() && kept.duration_secs >= 0.0).then_some(kept)
    }

    fn load(store: &Store, file: &str) -> Option<Self> {
        Self::parse(&std::fs::read(store.dir().join(file)).ok()?)
    }
}

impl KeptRequest {
    fn of(r: &RequestCount) -> Self {
        Self {
            method: r.method.to_owned(),
            endpoint: r.endpoint.clone(),
            status: r.status,
            count: r.count,
        }
    }
}

/// Keeps the facts of `report` as the last run's or the last synchronisation's; a state
/// directory the caller cannot write only loses them (logged).
fn keep_pass(store: &Store, report: &RunReport, pass: Pass) {
    let Some(kept) = KeptRun::of(report) else {
        return;
    };
    let file = match pass {
        Pass::Run => LAST_RUN_FILE,
        Pass::Sync => LAST_SYNC_FILE,
    };
    if let Ok(bytes) = serde_json::to_vec(&kept)
        && let Err(e) = crate::fsutil::write_atomic(&store.dir().join(file), &bytes, 0o600)
    {
        tracing::warn!(
            "could not keep the metrics of the last {}: {}",
            if pass == Pass::Run {
                "run"
            } else {
                "synchronisation"
            },
            crate::fsutil::io_text(&e)
        );
    }
}

/// The last run's families and the last synchronisation's, from what the state directory
/// keeps.
fn passes_text(store: &Store) -> String {
    let mut text = String::new();
    if let Some(run) = KeptRun::load(store, LAST_RUN_FILE) {
        let mut samples = Samples::default();
        last_run(&mut samples, &run);
        text.push_str(&samples.text());
    }
    if let Some(sync) = KeptRun::load(store, LAST_SYNC_FILE) {
        text.push_str(&sync_text(&sync));
    }
    text
}

/// The families of the last synchronisation with the fleet: name, help text.
const SYNC_FAMILIES: [(&str, &str); 3] = [
    (
        "cert_agent_last_sync_timestamp_seconds",
        "When the daemon's follow loop last synchronised this host with the fleet (Unix time, \
         its start).",
    ),
    (
        "cert_agent_last_sync_duration_seconds",
        "How long the last synchronisation with the fleet took.",
    ),
    (
        "cert_agent_last_sync_certificates",
        "Certificates of the last synchronisation with the fleet by outcome.",
    ),
];

fn sync_text(sync: &KeptRun) -> String {
    let mut out = String::new();
    for (i, (name, help)) in SYNC_FAMILIES.into_iter().enumerate() {
        let _ = writeln!(out, "# HELP {name} {help}");
        let _ = writeln!(out, "# TYPE {name} gauge");
        match i {
            0 => {
                let _ = writeln!(out, "{name} {}", sync.started_at as f64);
            }
            1 => {
                let _ = writeln!(out, "{name} {}", sync.duration_secs);
            }
            _ => {
                for kind in Outcome::KINDS {
                    let n = sync.certificates.get(kind).copied().unwrap_or(0);
                    let _ = writeln!(out, "{name}{{outcome=\"{kind}\"}} {}", n as f64);
                }
            }
        }
    }
    out
}

/// For the fuzz target `fleet_values`: `data` as `metrics-last-run.json` (or
/// `metrics-last-sync.json`) — refused or read, never a panic; what reads is rendered in the
/// text format and written and read back the same. Not an interface of the agent.
#[doc(hidden)]
pub fn fuzz_kept_pass(data: &[u8]) {
    if let Some(kept) = KeptRun::parse(data) {
        let mut samples = Samples::default();
        last_run(&mut samples, &kept);
        let _ = samples.text();
        let _ = sync_text(&kept);
        let Ok(bytes) = serde_json::to_vec(&kept) else {
            panic!("what reads is written");
        };
        assert_eq!(
            KeptRun::parse(&bytes).as_ref(),
            Some(&kept),
            "reads back the same"
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;

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
