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
//! when it reads the balance, and after a run that talked to the API); in a fleet the leads
//! this host lost (`state_dir/fleet-leads.json`). Names and help texts
//! follow
//! the Prometheus conventions (`promtool check metrics` passes).

use crate::config::Config;
use crate::store::{Records, Store};

use super::served;

mod certificate;
mod family;
mod passes;
mod samples;

use crate::engine::RunReport;
use crate::engine::forecast::next_fresh_validation;
use certificate::{CertFacts, Looks, RunFacts, keep_successes, kept_successes, render};
use family::Metric;
pub(crate) use passes::Pass;
pub use passes::fuzz_kept_pass;
use passes::{keep_pass, passes_text};
use samples::{Samples, escape, unix};

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
pub(crate) fn text(config: &Config, report: Option<&RunReport>) -> String {
    render_with(
        config,
        &Store::existing(&config.agent.state_dir),
        report,
        &Records::new(),
    )
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
    let seen = Looks {
        served: served::load(store),
        proved: served::load_proved(store),
    };
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
    if config.fleet.is_some() {
        text.push_str(&leads_lost_text(crate::fleet::leads_lost(store.dir())));
    }
    if let Some(m) = &money {
        text.push_str(&money_text(m));
    }
    if report.is_some() {
        keep_successes(store, &kept, &successes);
    }
    text
}

/// The counter of the leads this host lost (`state_dir/fleet-leads.json`, kept across runs).
fn leads_lost_text(lost: u64) -> String {
    let (name, help) = LEADS_LOST;
    let mut out = format!("# HELP {name} {help}\n# TYPE {name} counter\n{name} ");
    samples::push_value(&mut out, lost as f64);
    out.push('\n');
    out
}

/// The fleet's counter of leads lost: name and help text.
pub(super) const LEADS_LOST: (&str, &str) = (
    "cert_agent_fleet_leads_lost_total",
    "In a fleet: leads of this host that ended before it gave them up (the lease not renewed \
     in time or ended, e.g. the process paused or etcd answering late, or another host \
     leading), counted since the state directory was made.",
);

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

#[cfg(test)]
mod tests;
