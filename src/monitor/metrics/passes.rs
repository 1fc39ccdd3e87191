//! Runs and the fleet's synchronisations, kept apart: the facts of the last of each in the
//! state directory (so that either shows what the other wrote last, and a restarted daemon
//! shows both), and their families.

use std::fmt::Write as _;

use crate::api::RequestCount;
use crate::engine::{Outcome, RunReport};
use crate::store::Store;

use super::family::Metric;
use super::samples::{Samples, escape};

//
// A run (`renew` by the timer, the daemon's scheduled runs, `issue`, `reissue`, `install`, a
// takeover) and a synchronisation of the daemon's follow loop with the fleet each leave their
// own facts in the state directory: the `cert_agent_last_run_*` families show runs only, the
// `cert_agent_last_sync_*` families synchronisations only, whichever of them wrote last.

/// What wrote the metrics: a run, or a synchronisation of the daemon's follow loop.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Pass {
    Run,
    Sync,
}

/// `state_dir/metrics-last-run.json`: the last run's facts.
pub(super) const LAST_RUN_FILE: &str = "metrics-last-run.json";
/// `state_dir/metrics-last-sync.json`: the last synchronisation's facts.
pub(super) const LAST_SYNC_FILE: &str = "metrics-last-sync.json";

/// The facts of the last run (or synchronisation: no requests) as kept between processes.
#[derive(Debug, Default, PartialEq, serde::Serialize, serde::Deserialize)]
pub(super) struct KeptRun {
    /// Start, Unix time.
    pub(super) started_at: i64,
    pub(super) duration_secs: f64,
    /// Certificates by outcome kind.
    pub(super) certificates: std::collections::BTreeMap<String, u64>,
    #[serde(default)]
    pub(super) requests: Vec<KeptRequest>,
}

#[derive(Debug, PartialEq, serde::Serialize, serde::Deserialize)]
pub(super) struct KeptRequest {
    pub(super) method: String,
    pub(super) endpoint: String,
    pub(super) status: u16,
    pub(super) count: u64,
}

impl KeptRun {
    pub(super) fn of(report: &RunReport) -> Option<Self> {
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
    pub(super) fn parse(bytes: &[u8]) -> Option<Self> {
        let kept: Self = serde_json::from_slice(bytes).ok()?;
        (kept.duration_secs.is_finite() && kept.duration_secs >= 0.0).then_some(kept)
    }

    pub(super) fn load(store: &Store, file: &str) -> Option<Self> {
        Self::parse(&std::fs::read(store.dir().join(file)).ok()?)
    }
}

impl KeptRequest {
    pub(super) fn of(r: &RequestCount) -> Self {
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
pub(super) fn keep_pass(store: &Store, report: &RunReport, pass: Pass) {
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
pub(super) fn passes_text(store: &Store) -> String {
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
pub(super) const SYNC_FAMILIES: [(&str, &str); 3] = [
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

pub(super) fn sync_text(sync: &KeptRun) -> String {
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

/// The samples of the last run, as kept: start, duration, outcomes, API requests, orders,
/// reissues.
pub(super) fn last_run(samples: &mut Samples, run: &KeptRun) {
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
