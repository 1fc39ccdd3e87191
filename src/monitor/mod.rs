//! Watching what the engine did and what the web servers serve: `cert-agent check` (the
//! monitoring plugin), `cert-agent status` from local state, what the verify addresses were
//! last seen serving, the Prometheus metrics, and the operator's notifications
//! (`notify_command`, `notify_url`) after each run.
//!
//! Bottom up: `served` (handshakes and what they saw), `check`, `status`, `metrics`,
//! `events` (the one source of notifications), `notify`, `announce`. The room reads the engine's outcomes and its start-phase view of
//! the disk; the engine never calls it.

mod announce;
pub(crate) mod check;
mod events;
mod metrics;
pub(crate) mod money;
mod notify;
mod served;
pub(crate) mod status;

#[doc(hidden)]
pub use crate::store::served::fuzz_observations as fuzz_served;
#[doc(hidden)]
pub use events::fuzz_announced;
#[doc(hidden)]
pub use metrics::fuzz_kept_pass;
pub(crate) use metrics::text as metrics_text;
pub(crate) use status::{UNREADABLE as UNREADABLE_RECORD, add_served, collect as status_rows};

use crate::config::Config;
use crate::engine::RunReport;
use crate::store::{Records, Store};

/// Whether the run talked to the Partner API (a run that did not is not made to, for the
/// metrics' balance: they keep the figures last read).
fn report_made_calls(report: &RunReport) -> bool {
    report
        .stats
        .as_ref()
        .is_some_and(|s| s.requests.iter().any(|r| r.count > 0))
}

/// What the events need beyond the run's report, for its certificates: the retired ones the
/// configuration still lists, and the renewals whose fresh validation needs a person within
/// `[validation] warning_days`.
fn facts(
    config: &Config,
    store: &Store,
    (report, records): (&RunReport, &Records),
    now: time::OffsetDateTime,
) -> events::Facts {
    let mut facts = events::Facts::default();
    let in_report: std::collections::HashSet<&str> = report
        .certificates
        .iter()
        .map(|r| r.name.as_str())
        .collect();
    for cert in config
        .certificates
        .iter()
        .filter(|c| in_report.contains(c.name.as_str()))
    {
        facts
            .issuers
            .insert(cert.name.clone(), cert.order.issuer.label());
        let Ok(rec) = store.held_or_load(records, &cert.name) else {
            continue;
        };
        if let Some(archive) = store.retired_and_idle(&cert.name, &rec) {
            facts
                .retired
                .insert(cert.name.clone(), archive.display().to_string());
            continue;
        }
        if let Some(fresh) = crate::engine::forecast::next_fresh_validation(config, cert, &rec, now)
            .filter(|f| check::validation_level(f, now, config.validation.warning_days).is_some())
        {
            facts.person_needed.insert(cert.name.clone(), fresh);
        }
        if let Some(sunset) = crate::engine::sunset::email_sunset(cert, now) {
            facts.email_sunset.insert(cert.name.clone(), sunset);
        }
        let here = config.fleet.as_ref().map(|f| f.host.as_str());
        if let Some(h) = rec
            .rollout_halted
            .as_ref()
            .filter(|h| here.is_some_and(|host| events::halt::names_host(h, host)))
        {
            facts.halted.insert(cert.name.clone(), h.clone());
        }
        if let Some(o) = &rec.rollout_overridden {
            facts.overridden.insert(cert.name.clone(), o.clone());
        }
    }
    facts
}

/// After `cert-agent retire NAME`: its `retired` event (`message`: what was done) to
/// `notify_command` and `notify_url`, once — a run that finds NAME retired later says nothing
/// more.
pub(crate) async fn after_retire(
    config: &Config,
    store: &Store,
    name: &str,
    certificate_id: Option<u64>,
    archive: &std::path::Path,
    message: String,
    now: time::OffsetDateTime,
) {
    if config.agent.notify_command.is_none() && config.agent.notify_url.is_none() {
        return;
    }
    let mut log = events::Announced::load(store);
    let archive = archive.display().to_string();
    let new: Vec<_> = log
        .retire(name, &archive, certificate_id, message, now)
        .into_iter()
        .collect();
    let report = RunReport::default();
    notify::notify(config, &report, &new).await;
    announce::announce(config, &mut log, &new, now).await;
    log.save(store);
}

/// After the daemon found other hosts' audit logs gone back (`new`: host, why; each found once):
/// an `audit_rewound` event each to `notify_command` and `notify_url`.
pub(crate) async fn after_audit_rewound(
    config: &Config,
    new: &[(String, String)],
    now: time::OffsetDateTime,
) {
    if config.agent.notify_command.is_none() && config.agent.notify_url.is_none() {
        return;
    }
    let Ok(store) = Store::open(&config.agent.state_dir) else {
        return;
    };
    let events: Vec<_> = new
        .iter()
        .map(|(host, why)| events::Event::audit_rewound(host, why, now))
        .collect();
    let mut log = events::Announced::load(&store);
    notify::notify(config, &RunReport::default(), &events).await;
    announce::announce(config, &mut log, &events, now).await;
    log.save(&store);
}

/// After a run: its events (each change of a certificate's state, once) to the operator's
/// `notify_command` and `notify_url`, then the metrics file (the `cert_agent_last_run_*`
/// families). `records`: the records the run holds as the state directory does (the others
/// are read).
pub(crate) async fn after_run(
    config: &Config,
    store: &Store,
    (report, records): (&RunReport, &Records),
    now: time::OffsetDateTime,
) {
    if config.agent.notify_command.is_some() || config.agent.notify_url.is_some() {
        let mut log = events::Announced::load(store);
        let new = log.advance(report, &facts(config, store, (report, records), now), now);
        notify::notify(config, report, &new).await;
        announce::announce(config, &mut log, &new, now).await;
        log.save(store);
    }
    if (config.agent.metrics_file.is_some() || config.agent.metrics_listen.is_some())
        && report_made_calls(report)
    {
        money::refresh_after_run(config, now).await;
    }
    metrics::write(config, store, report, metrics::Pass::Run, records);
}

/// After a synchronisation of the daemon's follow loop with the fleet, with the state
/// directory's lock held: its events are recorded as announced and the metrics file written
/// (the `cert_agent_last_sync_*` families; `cert_agent_last_run_*` stay the last run's). The
/// notifications are not sent here: the caller delivers the returned [`Delivery`] once it has
/// released the lock, so that a slow `notify_command` or `notify_url` never holds up a run.
pub(crate) fn after_sync(
    config: &Config,
    store: &Store,
    report: &RunReport,
    now: time::OffsetDateTime,
) -> Delivery {
    let mut delivery = Delivery {
        config: config.clone(),
        report: report.clone(),
        events: Vec::new(),
        undelivered: Vec::new(),
        now,
    };
    if config.agent.notify_command.is_some() || config.agent.notify_url.is_some() {
        let mut log = events::Announced::load(store);
        let none = Records::new();
        delivery.events = log.advance(report, &facts(config, store, (report, &none), now), now);
        // Taken along: posted first, and put back when the delivery fails.
        delivery.undelivered = std::mem::take(&mut log.undelivered);
        log.save(store);
    }
    metrics::write(config, store, report, metrics::Pass::Sync, &Records::new());
    delivery
}

/// The notifications of a synchronisation ([`after_sync`]), to send without the state
/// directory's lock.
pub(crate) struct Delivery {
    config: Config,
    report: RunReport,
    events: Vec<events::Event>,
    undelivered: Vec<events::Event>,
    now: time::OffsetDateTime,
}

impl Delivery {
    /// Whether there is anything to send.
    pub(crate) fn is_empty(&self) -> bool {
        self.events.is_empty() && self.undelivered.is_empty()
    }

    /// Runs `notify_command` and posts to `notify_url`. Events `notify_url` did not take are
    /// put back into `state_dir/announced.json` (the lock taken for that, waiting for a run
    /// up to `lock_wait`), so the next run or synchronisation posts them again.
    pub(crate) async fn deliver(self, lock_wait: std::time::Duration) {
        if self.is_empty() {
            return;
        }
        notify::notify(&self.config, &self.report, &self.events).await;
        let mut log = events::Announced::default();
        log.undelivered = self.undelivered;
        announce::announce(&self.config, &mut log, &self.events, self.now).await;
        if log.undelivered.is_empty() {
            return;
        }
        let store = Store::existing(&self.config.agent.state_dir);
        let waited = crate::store::lock_waiting(&store, lock_wait, |_| {}).await;
        match waited {
            Ok(_lock) => {
                let mut kept = events::Announced::load(&store);
                log.undelivered.append(&mut kept.undelivered);
                kept.undelivered = log.undelivered;
                kept.save(&store);
            }
            Err(e) => tracing::warn!(
                "notify_url: {} undelivered event(s) could not be kept for the next run: {e}",
                log.undelivered.len()
            ),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::engine::{CertReport, Outcome};

    #[tokio::test]
    async fn a_synchronisations_undelivered_events_are_kept_for_the_next_run() {
        let dir = tempfile::tempdir().expect("temp dir");
        let d = dir.path().display();
        // Nothing listens on port 1: every post is refused.
        let text = format!(
            "[api]\nbase_url = \"https://127.0.0.1:1\"\nlogin = \"a@b.test\"\n\
             password_file = \"/nonexistent\"\n\n[defaults]\ncountry = \"DE\"\n\
             region = \"Berlin\"\ncity = \"Berlin\"\n\n[agent]\nstate_dir = \"{d}/state\"\n\
             notify_url = \"http://127.0.0.1:1/hook\"\nnotify_timeout_secs = 2\n\n\
             [[certificate]]\nname = \"www\"\ndomains = [\"www.example.com\"]\n\
             product_id = 1101\nserver = \"none\"\ncert_path = \"{d}/c.pem\"\n\
             key_path = \"{d}/k.pem\"\nwebroot = \"{d}/www\"\n"
        );
        let config = Config::parse(&text, &dir.path().join("config.toml")).expect("configuration");
        let store = Store::open(&config.agent.state_dir).expect("state");
        let report = RunReport {
            certificates: vec![CertReport {
                name: "www".into(),
                outcome: Outcome::Failed {
                    error: "the fleet's last attempt failed".into(),
                },
                warning: None,
                revocation: None,
                ordered: None,
            }],
            stats: None,
            takeover: None,
        };
        let now = time::OffsetDateTime::now_utc();
        let delivery = after_sync(&config, &store, &report, now);
        assert_eq!(delivery.events.len(), 1);
        // Announced at once (a run meanwhile does not announce it again).
        let mut log = events::Announced::load(&store);
        assert!(log.undelivered.is_empty());
        assert!(
            log.advance(&report, &events::Facts::default(), now)
                .is_empty()
        );
        // Not delivered: put back for the next run, which posts it first.
        delivery.deliver(std::time::Duration::from_secs(5)).await;
        let log = events::Announced::load(&store);
        assert_eq!(log.undelivered.len(), 1, "{log:?}");
        assert_eq!(log.undelivered[0].event, "failed");
        let next = after_sync(&config, &store, &report, now);
        assert!(next.events.is_empty() && next.undelivered.len() == 1);
    }
}
