//! A fleet run in rounds: the lead is taken for each round of work and given up between them.
//! A round synchronises, takes the lead when it is free, imports, runs the engine without
//! waiting (one status check of the waiting certificates, as the polling interval allows),
//! exports and resigns. While certificates of the run still wait for the CA and the run's
//! wait is not over, the run sleeps without the lead until the next status check is allowed,
//! then starts another round: every other host's run can lead meanwhile (a certificate added,
//! a revoked one replaced), and a host that leads then follows the fleet's pending
//! certificates up as well.

use std::collections::BTreeMap;
use std::time::Duration;

use anyhow::Result;

use crate::config::{CertificateConfig, Config};
use crate::engine::{self, Outcome, RunOptions, RunReport};
use crate::store::{Records, Store};

use super::bookkeeping::merge_requests;
use super::round;
use crate::fleet::coord::{Expect, Leadership};
use crate::fleet::link::connect;
use crate::fleet::schema::{WAITING, dcv_key};

/// What one round did.
pub(super) struct Round {
    pub(super) report: RunReport,
    /// Partner API requests of the round (none when it did not lead).
    pub(super) requests: Vec<crate::api::RequestCount>,
    /// This host led the round; otherwise another host held the lead and this host only
    /// installed what the fleet has.
    pub(super) led: bool,
    /// The records the round holds as it left them in the state directory (none when it did
    /// not lead).
    pub(super) records: Records,
}

impl Round {
    pub(super) fn led(
        report: RunReport,
        requests: Vec<crate::api::RequestCount>,
        records: Records,
    ) -> Self {
        Self {
            report,
            requests,
            led: true,
            records,
        }
    }

    pub(super) fn followed(report: RunReport) -> Self {
        Self {
            report,
            requests: Vec::new(),
            led: false,
            records: Records::new(),
        }
    }
}

/// What a fleet run did: its report (each certificate's last outcome), the Partner API
/// requests of every round, and the records it holds as it left them in the state directory
/// (those of a run of one round that led; after more rounds none, as what happens between
/// rounds writes records too): for what runs after it, instead of reading them again.
pub(crate) struct FleetRan {
    pub report: RunReport,
    pub requests: Vec<crate::api::RequestCount>,
    pub records: Records,
}

/// The shortest sleep between two rounds: a guard against a round that left a certificate
/// waiting without checking it.
const MIN_BETWEEN_ROUNDS: Duration = Duration::from_secs(1);

/// A run on a fleet host: installs what the fleet has and, when this host can take the lead,
/// does the fleet's work for `certs` in rounds (see the module's description) until none of
/// them waits for the CA any more, the run's wait (`opts.wait`) is over, or a stop is asked
/// (`opts.stop`: what the run published for validation is then withdrawn, as when a stop ends
/// an engine's wait). When another host leads at the first round, the run ends there, as
/// before: that host renews the fleet. The report holds each certificate's last outcome and
/// the requests of every round. Without etcd (or its quorum) at the first round nothing is
/// ordered and the run fails; what is installed stays.
pub(crate) async fn run(
    config: &Config,
    opts: &RunOptions,
    store: &Store,
    certs: &[&CertificateConfig],
) -> Result<FleetRan> {
    let started = tokio::time::Instant::now();
    let interval = Duration::from_secs(config.agent.poll_interval_secs);
    // Each round checks what is due once and leaves the rest pending: the waiting happens
    // here, without the lead.
    let each = RunOptions {
        wait: Duration::ZERO,
        ..opts.clone()
    };
    // Whether the fleet's `waiting` key may be this run's to delete: a takeover's run follows
    // up a run that left it.
    let marked = std::cell::Cell::new(opts.takeover.is_some());
    let first = round(config, &each, store, certs, &marked, false).await;
    crate::fleet::leads::keep_lost(store.dir());
    let first = first?;
    let mut report = first.report;
    let mut requests = first.requests;
    if !first.led {
        return Ok(FleetRan {
            report,
            requests,
            records: Records::new(),
        });
    }
    let each = following(opts);
    // The pending outcome of each waiting certificate as the last round that led gave it.
    let mut waiting: BTreeMap<String, String> = BTreeMap::new();
    let mut open = still_waiting(store, interval, opts, certs, &report, &mut waiting);
    let records = if open.is_empty() {
        first.records
    } else {
        Records::new()
    };
    let mut last_led = true;
    let mut rounds = 1u32;
    while !open.is_empty() {
        if stopping(opts) {
            stop_waiting(config, opts, store, &open, &mut report, &marked).await;
            break;
        }
        let delay = if last_led {
            next_round(store, interval, opts, &open)
        } else {
            // Another host led: it checks the fleet's pending certificates; this host looks
            // for what it publishes once per polling interval.
            interval.max(MIN_BETWEEN_ROUNDS)
        };
        if delay > opts.wait.saturating_sub(started.elapsed()) {
            break;
        }
        say(
            opts,
            &format!(
                "{} certificate(s) pending at the CA: waiting without the fleet's lead for the \
                 next round (at {}, {}); Ctrl-C stops and a later run continues",
                open.len(),
                crate::clock::time_of_day(opts.clock.now() + delay),
                engine::polling_rule(interval)
            ),
        );
        if sleep_or_stop(delay, opts).await {
            stop_waiting(config, opts, store, &open, &mut report, &marked).await;
            break;
        }
        rounds += 1;
        last_led = match round(config, &each, store, &open, &marked, true).await {
            Ok(r) => {
                if !r.led {
                    say(
                        opts,
                        &format!(
                            "round {rounds}: another host holds the fleet's lead; this host \
                             installed what the fleet has and leaves the checks to it"
                        ),
                    );
                }
                merge_requests(&mut requests, r.requests);
                merge_round(&mut report, r.report, r.led, &waiting);
                r.led
            }
            Err(e) => {
                tracing::warn!("fleet: round {rounds} of this run failed: {e:#}");
                note_failed_round(&mut report, &waiting, &format!("{e:#}"));
                false
            }
        };
        crate::fleet::leads::keep_lost(store.dir());
        open = still_waiting(store, interval, opts, &open, &report, &mut waiting);
    }
    tracing::debug!("fleet run: {rounds} round(s)");
    Ok(FleetRan {
        report,
        requests,
        records,
    })
}

/// The options of a round after the first: it follows what the first round started (status
/// checks, downloads, installs, the fleet's publication) and starts nothing a second time. No
/// `--force`: a certificate whose reissue another host completed between this run's rounds
/// would be reissued again (a second reissue, a new serial, one version too many in the
/// fleet). No ended order replaced (`issue --yes`), no order intent cleared, no reinstall, no
/// key reuse asked: each was the first round's to do. No wait (the run waits between its
/// rounds, without the lead) and no takeover (announced and journalled by the round that took
/// the work over). `allow_orders` stays: it permits and starts nothing by itself here (a later
/// round works only on certificates waiting at the CA, each with its order placed), and the
/// installs need it for the placeholders of sites whose certificate is not there yet.
/// Every field is named (no `..`): an option added to `RunOptions` must be decided here.
fn following(first: &RunOptions) -> RunOptions {
    let RunOptions {
        names,
        dry_run,
        force: _,
        wait: _,
        allow_orders,
        clear_intent: _,
        reuse_key: _,
        reinstall: _,
        ignore_backoff,
        replace_ended: _,
        stop,
        clock,
        takeover: _,
        progress,
    } = first;
    RunOptions {
        names: names.clone(),
        dry_run: *dry_run,
        force: false,
        wait: Duration::ZERO,
        allow_orders: *allow_orders,
        clear_intent: false,
        reuse_key: false,
        reinstall: false,
        ignore_backoff: *ignore_backoff,
        replace_ended: false,
        stop: stop.clone(),
        clock: *clock,
        takeover: None,
        progress: *progress,
    }
}

/// How long until the next round after one that led: until the earliest of `open` may be
/// checked again, or — so that certificates checked moments apart (each at its own status
/// call) stay in one round — until the last of those allowed within a tenth of the polling
/// interval after it.
fn next_round(
    store: &Store,
    interval: Duration,
    opts: &RunOptions,
    open: &[&CertificateConfig],
) -> Duration {
    let now = opts.clock.now();
    let delays: Vec<Duration> = open
        .iter()
        .filter_map(|c| store.load(&c.name).ok())
        .filter_map(|r| engine::until_next_check(interval, [&r], now))
        .collect();
    let Some(first) = delays.iter().copied().min() else {
        return interval.max(MIN_BETWEEN_ROUNDS);
    };
    let together = first + interval / 10;
    delays
        .into_iter()
        .filter(|d| *d <= together)
        .max()
        .unwrap_or(first)
        .max(MIN_BETWEEN_ROUNDS)
}

/// The certificates of `certs` that `report` leaves pending and whose records wait for the
/// CA (a status check can move them on); their pending reasons are kept in `waiting`.
fn still_waiting<'c>(
    store: &Store,
    interval: Duration,
    opts: &RunOptions,
    certs: &[&'c CertificateConfig],
    report: &RunReport,
    waiting: &mut BTreeMap<String, String>,
) -> Vec<&'c CertificateConfig> {
    let mut open = Vec::new();
    let lines = super::bookkeeping::lines_by_name(report);
    for cert in certs {
        let Some(line) = lines
            .get(&cert.name)
            .and_then(|&i| report.certificates.get(i))
        else {
            continue;
        };
        let Outcome::Pending { reason } = &line.outcome else {
            continue;
        };
        let Ok(rec) = store.load(&cert.name) else {
            continue;
        };
        if engine::until_next_check(interval, [&rec], opts.clock.now()).is_some() {
            waiting
                .entry(cert.name.clone())
                .or_insert_with(|| reason.clone());
            open.push(*cert);
        }
    }
    open
}

/// Takes a later round's outcomes into the run's report. A round that led decides; in a
/// round that another host led, a certificate this host's synchronisation did not install or
/// hold stays pending: the leader follows it up. One whose fleet value failed here (a value
/// this host cannot open or install, its failure recorded) stays pending too, the failure
/// said: the work on it goes on at the leader, whose publication the next round installs.
fn merge_round(
    report: &mut RunReport,
    round: RunReport,
    led: bool,
    waiting: &BTreeMap<String, String>,
) {
    let lines = super::bookkeeping::lines_by_name(report);
    for c in round.certificates {
        let Some(line) = lines
            .get(&c.name)
            .and_then(|&i| report.certificates.get_mut(i))
        else {
            continue;
        };
        line.outcome = match (led, c.outcome) {
            (false, Outcome::Unchanged { reason }) => Outcome::Pending {
                reason: match waiting.get(&c.name) {
                    Some(before) => format!("{before} ({reason})"),
                    None => reason,
                },
            },
            (false, Outcome::Failed { error }) => Outcome::Pending {
                reason: format!(
                    "{} (the fleet's certificate failed here: {error}; another host leads \
                     its work and this run follows it)",
                    waiting.get(&c.name).map_or("waiting", String::as_str)
                ),
            },
            (_, outcome) => outcome,
        };
        if c.warning.is_some() {
            line.warning = c.warning;
        }
        if c.revocation.is_some() {
            line.revocation = c.revocation;
        }
    }
}

/// A later round failed (etcd unreachable, its quorum lost): the waiting certificates stay
/// pending with the error; the next round tries again while the run's wait lasts.
fn note_failed_round(report: &mut RunReport, waiting: &BTreeMap<String, String>, error: &str) {
    for line in &mut report.certificates {
        if let Some(before) = waiting.get(&line.name) {
            line.outcome = Outcome::Pending {
                reason: format!("{before} (the last round failed: {error})"),
            };
        }
    }
}

/// A stop was asked while `open` wait: their validation files withdrawn (see [`withdraw`]),
/// each reported pending.
async fn stop_waiting(
    config: &Config,
    opts: &RunOptions,
    store: &Store,
    open: &[&CertificateConfig],
    report: &mut RunReport,
    marked: &std::cell::Cell<bool>,
) {
    let what = withdraw(config, opts, store, open, marked).await;
    for c in &mut report.certificates {
        if open.iter().any(|o| o.name == c.name) {
            c.outcome = Outcome::Pending {
                reason: format!("the run was stopped while waiting; {what}"),
            };
        }
    }
}

fn stopping(opts: &RunOptions) -> bool {
    opts.stop.as_ref().is_some_and(|s| *s.borrow())
}

/// Sleeps `delay`; `true` when a stop was asked first.
async fn sleep_or_stop(delay: Duration, opts: &RunOptions) -> bool {
    let Some(mut rx) = opts.stop.clone() else {
        tokio::time::sleep(delay).await;
        return false;
    };
    let stop = async {
        if rx.wait_for(|v| *v).await.is_err() {
            // The sender is gone: nobody can ask for a stop any more.
            std::future::pending::<()>().await;
        }
    };
    tokio::select! {
        () = tokio::time::sleep(delay) => false,
        () = stop => true,
    }
}

/// A run stopped between its rounds: when the lead is free, what it published for validation
/// of `certs` is withdrawn from the fleet (every host removes its copy) and from this host
/// (the next run publishes again); when another host leads, its work may need them and they
/// stay. Returns what was done, for the report.
async fn withdraw(
    config: &Config,
    opts: &RunOptions,
    store: &Store,
    certs: &[&CertificateConfig],
    marked: &std::cell::Cell<bool>,
) -> String {
    let link = match connect(config, opts.clock).await {
        Ok(Some(link)) => link,
        Ok(None) => return "validation files stay published (no [fleet])".into(),
        Err(e) => {
            return format!("validation files stay published (the fleet is unreachable: {e:#})");
        }
    };
    let lead = match link.fleet.try_lead_exclusive().await {
        Ok(Some(lead)) => lead,
        Ok(None) => {
            let leader = link.fleet.leader().await.ok().flatten();
            return format!(
                "{} leads the fleet: validation files stay published for its work",
                leader.as_deref().map_or_else(
                    || "another host".to_owned(),
                    crate::fleet::schema::printable
                )
            );
        }
        Err(e) => {
            return format!("validation files stay published (the lead could not be taken: {e})");
        }
    };
    audit(store, "fleet-lead-taken", link.fleet.host());
    for cert in certs {
        if let Err(e) = lead.delete(&dcv_key(&cert.name), Expect::Any).await {
            tracing::warn!(certificate = %cert.name, "could not withdraw the fleet's validation file: {e}");
        }
        match store.load(&cert.name) {
            Ok(mut rec) => engine::remove_published(store, cert, &mut rec).await,
            Err(e) => tracing::warn!(certificate = %cert.name, "{e:#}"),
        }
    }
    if marked.get() {
        unmark(&lead, marked).await;
    }
    lead.resign().await;
    audit(store, "fleet-lead-given", link.fleet.host());
    "validation files were removed and the next run publishes them again".into()
}

/// Before a round gives the lead up: when certificates of the round (`certs`) still wait for
/// the CA, the fleet's `waiting` key names this host (the daemons take the work over when no
/// round follows by the next allowed status check and a lease); otherwise the key goes when
/// this run may have left it (`marked`). Fenced by the lead; a failure is only said. Each
/// record is taken from `records` (the round's) where it is there, otherwise read.
pub(super) async fn mark_waiting(
    (lead, host, marked): (&Leadership, &str, &std::cell::Cell<bool>),
    opts: &RunOptions,
    (store, records): (&Store, &Records),
    config: &Config,
    certs: &[&CertificateConfig],
) {
    let interval = Duration::from_secs(config.agent.poll_interval_secs);
    let now = opts.clock.now();
    let waiting = certs.iter().any(|c| {
        store
            .held_or_load(records, &c.name)
            .is_ok_and(|r| engine::until_next_check(interval, [&*r], now).is_some())
    });
    if !waiting {
        if marked.get() {
            unmark(lead, marked).await;
        }
        return;
    }
    match lead
        .put(WAITING, host.as_bytes().to_vec(), Expect::Any)
        .await
    {
        Ok(_) => marked.set(true),
        Err(e) => tracing::warn!("fleet: could not say that this run waits: {e}"),
    }
}

async fn unmark(lead: &Leadership, marked: &std::cell::Cell<bool>) {
    match lead.delete(WAITING, Expect::Any).await {
        Ok(_) => marked.set(false),
        Err(e) => tracing::warn!("fleet: could not say that this run no longer waits: {e}"),
    }
}

fn audit(store: &Store, event: &str, host: &str) {
    if let Err(e) = store.audit(None, event, &serde_json::json!({ "host": host })) {
        tracing::warn!("{e}");
    }
}

/// A progress line for the person who runs the command, and the log.
fn say(opts: &RunOptions, message: &str) {
    engine::progress(opts, message);
}

#[cfg(test)]
mod tests;
