//! Daemon mode (`cert-agent run`): the long-running alternative to the systemd timer.
//!
//! - Runs the renew loop ([`crate::run::once`]) on a schedule: every
//!   [`DaemonOptions::interval`] ± [`DaemonOptions::jitter`], and sooner — after
//!   `agent.poll_interval_secs` — while work is pending at the CA (exit code 75), so that a
//!   validation is followed up without waiting an hour.
//! - A certificate held until it is valid (issued with a start after this host's clock) is
//!   installed by a run at its start, not at the next scheduled run.
//! - With revocation checked, a run also starts when the earliest CRL kept for the installed
//!   certificates reaches its `nextUpdate` (at most once a minute, never later than the
//!   schedule): a revocation is acted on within one CRL period ([`wake`]).
//! - Reloads the configuration when its file changes (inotify through `notify`, with a polling
//!   fallback) or on `SIGHUP`. A new configuration that does not validate is reported and the
//!   previous one is kept; a valid one is used from a run started shortly after.
//! - Stops on `SIGTERM`/`SIGINT`: no new run starts; a run in progress gets
//!   [`DaemonOptions::stop_grace`] to finish (it removes its own validation files, shuts its
//!   standalone DCV server down and saves its state as it goes). A run that is still busy then
//!   — or when a second signal arrives — is abandoned at its next await point. That is the
//!   crash the agent is built to survive: order intents are journalled before any `POST
//!   /order`, installs are atomic transactions that roll back when dropped, the standalone
//!   server closes with the process, and webroot validation files of an unfinished order are
//!   recorded in the state and removed by the run that sees the certificate issued.
//!
//! - With `[agent] metrics_listen`, serves `/metrics` for Prometheus ([`metrics`]), refreshed
//!   after every run and every synchronisation with the fleet (the address is read at start;
//!   changing it needs a restart).
//! - In a fleet, a follow loop installs what the leader publishes between the runs; its
//!   synchronisations are not runs (`cert_agent_last_sync_*`, not `cert_agent_last_run_*`) and
//!   deliver their notifications after the state directory's lock is released.
//!
//! A run's own standalone DCV server listens only while that run validates a certificate;
//! `cert-agent serve` (a separate process, dropping root after binding) answers between runs,
//! and runs publish into its directory while it holds its lock.

mod audits;
mod metrics;
mod wake;

use crate::clock::Clock;
use std::path::{Path, PathBuf};
use std::time::Duration;

use anyhow::Result;
use tokio::sync::{mpsc, watch};
use tokio::time::Instant;

use crate::config::Config;
use crate::engine::{Outcome, RunOptions, RunReport, RunStatus};

/// Schedule, limits and test seams of [`run_daemon`].
#[derive(Debug, Clone)]
pub struct DaemonOptions {
    /// Time between two runs when nothing is pending. Default: one hour.
    pub interval: Duration,
    /// Each wait is drawn from `interval ± jitter`, so that many hosts do not call the API at
    /// the same minute. Default: ten minutes.
    pub jitter: Duration,
    /// The first run starts after a random delay up to this. Default: one minute.
    pub first_run_delay: Duration,
    /// Time until the next run after one that left work pending at the CA; `None`: the
    /// configuration's `agent.poll_interval_secs` (the API's limit on status calls).
    pub pending_interval: Option<Duration>,
    /// How long one run waits for validation and issuance (`renew --wait`). Default: 600 s.
    pub run_wait: Duration,
    /// After a run that failed as a whole (the state directory, the fleet's etcd or the API
    /// out of reach), the next run starts after this, doubled after each further failure in a
    /// row up to `interval`, plus up to half of it at random. Default: two minutes.
    pub retry_after_failure: Duration,
    /// After a stop request, how long a run in progress may take to finish. Default: 60 s
    /// (below systemd's default `TimeoutStopSec=90s`).
    pub stop_grace: Duration,
    /// Quiet time after a change of the configuration file before it is read (editors write
    /// in several steps). Default: one second.
    pub reload_settle: Duration,
    /// After a valid new configuration is loaded, the next run starts within this time.
    /// `None`: the schedule is kept. Default: ten seconds.
    pub run_after_reload: Option<Duration>,
    /// Install handlers for `SIGTERM`, `SIGINT` (stop) and `SIGHUP` (reload). Default: true.
    pub handle_signals: bool,
    /// Stops the daemon when it turns `true` or when its sender is dropped (for embedding and
    /// tests; signals work as well).
    pub stop: Option<watch::Receiver<bool>>,
    /// Receives what the daemon does (for tests and embedding).
    pub events: Option<mpsc::UnboundedSender<DaemonEvent>>,
    /// Where the runs' time comes from. Default: [`Clock::from_env`].
    pub clock: Clock,
    /// In a fleet, when the lead ended with its lease while work was open, a run starts after
    /// a random delay up to this (so that the hosts do not all ask for the lead at once; one
    /// gets it). Default: five seconds.
    pub takeover_jitter: Duration,
}

impl Default for DaemonOptions {
    fn default() -> Self {
        Self {
            interval: Duration::from_secs(3600),
            jitter: Duration::from_secs(600),
            first_run_delay: Duration::from_secs(60),
            pending_interval: None,
            run_wait: Duration::from_secs(600),
            retry_after_failure: Duration::from_secs(120),
            stop_grace: Duration::from_secs(60),
            reload_settle: Duration::from_secs(1),
            run_after_reload: Some(Duration::from_secs(10)),
            handle_signals: true,
            stop: None,
            events: None,
            clock: Clock::from_env(),
            takeover_jitter: Duration::from_secs(5),
        }
    }
}

/// What the daemon reports through [`DaemonOptions::events`].
#[derive(Debug, Clone)]
pub enum DaemonEvent {
    /// A run starts, with the certificates of the configuration in use.
    RunStarted { certificates: Vec<String> },
    /// A run ended: its status and report (both `None` when the run failed as a whole,
    /// e.g. another run held the lock).
    RunFinished {
        status: Option<RunStatus>,
        report: Option<RunReport>,
    },
    /// A changed configuration file was loaded and is in use.
    ConfigReloaded { certificates: Vec<String> },
    /// A changed configuration file was invalid or unreadable; the previous one is kept.
    ConfigRejected { error: String },
    /// The daemon stops; `run_abandoned` when a run had to be left unfinished.
    Stopped { run_abandoned: bool },
}

/// Runs the daemon until it is asked to stop. Returns the exit code: 0 after a clean stop.
/// Fails at start when the configuration cannot be read or is invalid (exit 2 through the
/// caller's error mapping), or when the signal handlers cannot be installed.
pub async fn run_daemon(config_path: &Path, opts: DaemonOptions) -> Result<()> {
    let mut config = Config::load(config_path)?;
    if let Some(f) = &config.fleet {
        crate::store::audit::name_host(&f.host);
    }
    for warning in &config.warnings {
        tracing::warn!("{warning}");
    }
    let metrics = match config.agent.metrics_listen {
        Some(addr) => {
            let server =
                metrics::MetricsServer::start(addr, crate::monitor::metrics_text(&config, None))
                    .await?;
            say(&format!(
                "serving metrics on http://{}/metrics",
                server.local_addr
            ));
            Some(server)
        }
        None => None,
    };
    let mut daemon = Daemon {
        path: config_path.to_path_buf(),
        last_text: std::fs::read(config_path)
            .ok()
            .map(|t| fingerprint(t, &config.fragments)),
        events: opts.events.clone(),
        metrics,
    };
    let (changes_tx, mut changes) = mpsc::unbounded_channel();
    let _watcher = watch_config(config_path, &include_dirs(&config), changes_tx);
    let mut stop = StopRequests::new(opts.handle_signals, opts.stop.clone())?;
    let mut hup = if opts.handle_signals {
        Some(crate::signal::Hangups::install()?)
    } else {
        None
    };

    // In a fleet, what the leader publishes is installed (and validation files served) as it
    // is published, between the scheduled runs.
    let (takeover_tx, mut takeovers) = watch::channel(None::<LeadEnded>);
    let _follower = config.fleet.as_ref().map(|_| {
        let path = config_path.to_path_buf();
        let served = daemon.metrics.as_ref().map(metrics::MetricsServer::updater);
        AbortOnDrop(tokio::spawn(follow_fleet(
            path,
            opts.clock,
            served,
            takeover_tx,
        )))
    });
    let _audits = (config.fleet.as_ref()).map(|_| {
        let watch = audits::watch_audits(config_path.to_path_buf(), opts.clock, opts.interval);
        AbortOnDrop(tokio::spawn(watch))
    });
    // Why the next run starts before its schedule (a takeover), and when the last run began.
    let mut takeover: Option<String> = None;
    let mut last_run = Instant::now();
    // Runs that failed as a whole in a row, for the retry's backoff.
    let mut failures: u32 = 0;

    let first = random_up_to(opts.first_run_delay);
    say(&format!(
        "cert-agent daemon started with {} ({} certificate(s)); first run in {} s",
        config_path.display(),
        config.certificates.len(),
        first.as_secs()
    ));
    let mut next = Instant::now() + first;
    loop {
        tokio::select! {
            () = tokio::time::sleep_until(next) => {
                last_run = Instant::now();
                match daemon.run_once(&config, &opts, &mut stop, takeover.take()).await {
                    RunEnd::Finished { pending, locked, failed } => {
                        failures = if failed { failures.saturating_add(1) } else { 0 };
                        let wait = wake::next_wait(&config, &opts, pending || locked, failures);
                        if failed {
                            say(&format!("the next run starts in {} s", wait.as_secs()));
                        }
                        tracing::debug!("next run in {} s", wait.as_secs());
                        next = Instant::now() + wait;
                    }
                    RunEnd::Stopped { abandoned } => {
                        daemon.emit(DaemonEvent::Stopped { run_abandoned: abandoned });
                        return Ok(());
                    }
                }
            }
            Ok(()) = takeovers.changed() => {
                let latest = takeovers.borrow_and_update().clone();
                // A run that started after the lead ended saw it ended: nothing to add.
                if let Some(lead) = latest
                    && lead.noticed > last_run
                {
                    let wait = random_up_to(opts.takeover_jitter);
                    say(&format!(
                        "the fleet's lead ended with work open ({}); taking over (a run starts \
                         in {:.1} s)",
                        lead.takeover.open.join("; "),
                        wait.as_secs_f64()
                    ));
                    takeover = Some(lead.takeover.describe());
                    next = next.min(Instant::now() + wait);
                }
            }
            Some(()) = changes.recv() => {
                tokio::time::sleep(opts.reload_settle).await;
                while changes.try_recv().is_ok() {}
                if daemon.reload(&mut config) {
                    next = soon_after_reload(next, &opts);
                }
            }
            Some(()) = recv_hup(&mut hup) => {
                say("SIGHUP: reading the configuration again");
                if daemon.reload(&mut config) {
                    next = soon_after_reload(next, &opts);
                }
            }
            () = stop.requested() => {
                say("stopping");
                daemon.emit(DaemonEvent::Stopped { run_abandoned: false });
                return Ok(());
            }
        }
    }
}

/// A task that ends with its owner.
struct AbortOnDrop(tokio::task::JoinHandle<()>);

impl Drop for AbortOnDrop {
    fn drop(&mut self) {
        self.0.abort();
    }
}

/// A lead that ended with work open, and when the follow loop saw it.
#[derive(Debug, Clone, PartialEq)]
struct LeadEnded {
    takeover: crate::fleet::Takeover,
    noticed: Instant,
}

/// Follows the fleet between runs ([`crate::fleet::follow_changes`]): what each
/// synchronisation installed or failed on is printed and goes to the metrics file and
/// `/metrics` (`served`) as a synchronisation ([`crate::monitor::after_sync`]: the
/// `cert_agent_last_sync_*` families, not the runs'); its notifications are delivered after the
/// state directory's lock is released, so that a slow `notify_command` or `notify_url` never
/// holds up a run. A lead that ended with work open is noted in `takeovers`
/// ([`notice_lead_ended`]).
async fn follow_fleet(
    config_path: PathBuf,
    clock: Clock,
    served: Option<metrics::Updater>,
    takeovers: watch::Sender<Option<LeadEnded>>,
) {
    let lead_ended = notice_lead_ended(takeovers);
    let (deliveries_tx, mut deliveries) = mpsc::unbounded_channel::<crate::monitor::Delivery>();
    let follow = crate::fleet::follow_changes(
        config_path,
        clock,
        async move |config: &Config, store: &crate::store::Store, report: RunReport| {
            let changed = RunReport {
                certificates: report
                    .certificates
                    .iter()
                    .filter(|c| !matches!(c.outcome, Outcome::Unchanged { .. }))
                    .cloned()
                    .collect(),
                stats: None,
                takeover: None,
            };
            if !changed.certificates.is_empty() {
                print_report(&changed);
            }
            let delivery = crate::monitor::after_sync(config, store, &report, clock.now());
            if !delivery.is_empty() {
                let _ = deliveries_tx.send(delivery);
            }
            if let Some(m) = &served {
                m.update(crate::monitor::metrics_text(config, Some(&report)));
            }
        },
        lead_ended,
    );
    // One delivery after the other, in the order of the synchronisations, beside the loop.
    let deliver = async {
        while let Some(d) = deliveries.recv().await {
            d.deliver(DELIVERY_LOCK_WAIT).await;
        }
    };
    tokio::join!(follow, deliver);
}

/// What the follow loop calls when a lead ended with work open: the notice replaces any the
/// daemon has not taken yet (it takes them between runs; one run takes all the open work
/// over), so a flood of lead-ended events — forged or replayed by an etcd writer — holds one
/// notice, the latest, not one each.
fn notice_lead_ended(slot: watch::Sender<Option<LeadEnded>>) -> impl Fn(crate::fleet::Takeover) {
    move |takeover| {
        slot.send_replace(Some(LeadEnded {
            takeover,
            noticed: Instant::now(),
        }));
    }
}

/// How long a delivery of the follow loop whose `notify_url` failed waits for the state
/// directory's lock to keep the undelivered events.
const DELIVERY_LOCK_WAIT: Duration = Duration::from_secs(30);

struct Daemon {
    path: PathBuf,
    /// The bytes of the configuration in use (or last rejected), to ignore events that change
    /// nothing (a `touch`, our own reads).
    last_text: Option<Vec<u8>>,
    events: Option<mpsc::UnboundedSender<DaemonEvent>>,
    /// The `/metrics` endpoint, when configured.
    metrics: Option<metrics::MetricsServer>,
}

enum RunEnd {
    /// `failed`: the run failed as a whole (not only some of its certificates).
    Finished {
        pending: bool,
        locked: bool,
        failed: bool,
    },
    Stopped {
        abandoned: bool,
    },
}

impl Daemon {
    fn emit(&self, event: DaemonEvent) {
        if let Some(tx) = &self.events {
            let _ = tx.send(event);
        }
    }

    /// One renew run; a stop request lets it finish within the grace time.
    async fn run_once(
        &mut self,
        config: &Config,
        opts: &DaemonOptions,
        stop: &mut StopRequests,
        takeover: Option<String>,
    ) -> RunEnd {
        // Asked to stop, the run ends its waiting and removes what it published.
        let (run_stop, run_stop_rx) = watch::channel(false);
        let run_opts = RunOptions {
            wait: opts.run_wait,
            stop: Some(run_stop_rx),
            clock: opts.clock,
            takeover,
            ..RunOptions::unattended(config)
        };
        self.emit(DaemonEvent::RunStarted {
            certificates: names(config),
        });
        let run = crate::run::once(config, &run_opts);
        tokio::pin!(run);
        let result = tokio::select! {
            result = &mut run => result,
            () = stop.requested() => {
                let _ = run_stop.send(true);
                say(&format!(
                    "stopping: waiting up to {} s for the current run to finish",
                    opts.stop_grace.as_secs()
                ));
                let finished = tokio::select! {
                    r = tokio::time::timeout(opts.stop_grace, &mut run) => r.ok(),
                    () = stop.requested() => None,
                };
                let abandoned = match finished {
                    Some(result) => {
                        self.finished(config, result);
                        false
                    }
                    None => {
                        tracing::warn!(
                            "the current run did not finish in time and is abandoned; the next \
                             run continues from the saved state"
                        );
                        true
                    }
                };
                return RunEnd::Stopped { abandoned };
            }
        };
        self.finished(config, result)
    }

    /// Reports a finished run.
    fn finished(&self, config: &Config, result: Result<RunReport>) -> RunEnd {
        match result {
            Ok(report) => {
                if let Some(why) = &report.takeover {
                    say(&format!("this run took over the fleet's work ({why})"));
                }
                print_report(&report);
                if let Some(m) = &self.metrics {
                    m.update(crate::monitor::metrics_text(config, Some(&report)));
                }
                let status = report.status();
                self.emit(DaemonEvent::RunFinished {
                    status: Some(status),
                    report: Some(report),
                });
                RunEnd::Finished {
                    pending: status == RunStatus::Pending,
                    locked: false,
                    failed: false,
                }
            }
            Err(e) => {
                let locked = matches!(
                    e.downcast_ref::<crate::store::StoreError>(),
                    Some(crate::store::StoreError::Locked { .. })
                );
                if locked {
                    say(&format!("{e:#}; trying again later"));
                } else {
                    tracing::error!("run failed: {e:#}");
                }
                self.emit(DaemonEvent::RunFinished {
                    status: None,
                    report: None,
                });
                RunEnd::Finished {
                    pending: false,
                    locked,
                    failed: !locked,
                }
            }
        }
    }

    /// Reads the configuration file again; replaces `config` when it changed and is valid.
    /// Returns true when a new configuration is in use.
    fn reload(&mut self, config: &mut Config) -> bool {
        let text = match std::fs::read(&self.path) {
            Ok(t) => t,
            Err(e) => {
                let error = format!(
                    "could not read configuration file {}: {e}; keeping the configuration in use",
                    self.path.display()
                );
                tracing::error!("{error}");
                self.emit(DaemonEvent::ConfigRejected { error });
                return false;
            }
        };
        // The main file and the included files it names now, as read.
        let loaded = Config::load(&self.path);
        let fragments = loaded.as_ref().map_or(&[][..], |c| &c.fragments[..]);
        let text = fingerprint(text, fragments);
        if self.last_text.as_ref() == Some(&text) {
            tracing::debug!("configuration unchanged");
            return false;
        }
        self.last_text = Some(text);
        match loaded {
            Ok(new) => {
                for warning in &new.warnings {
                    tracing::warn!("{warning}");
                }
                *config = new;
                say(&format!(
                    "configuration reloaded from {} ({} certificate(s))",
                    self.path.display(),
                    config.certificates.len()
                ));
                self.emit(DaemonEvent::ConfigReloaded {
                    certificates: names(config),
                });
                true
            }
            Err(e) => {
                let error = format!("{e}");
                tracing::error!(
                    "the changed configuration is invalid; keeping the configuration in use:\n{error}"
                );
                self.emit(DaemonEvent::ConfigRejected { error });
                false
            }
        }
    }
}

/// The main file's bytes followed by each included file's name and bytes: what a reload
/// compares to tell a change from an event that changed nothing.
fn fingerprint(mut main: Vec<u8>, fragments: &[PathBuf]) -> Vec<u8> {
    for f in fragments {
        main.push(0);
        main.extend_from_slice(f.as_os_str().as_encoded_bytes());
        main.push(0);
        main.extend(std::fs::read(f).unwrap_or_default());
    }
    main
}

/// The directories `[agent] include` patterns read from: a file added, changed or removed
/// there may change the configuration.
fn include_dirs(config: &Config) -> Vec<PathBuf> {
    let base = config.path.parent().unwrap_or(Path::new("/"));
    let mut dirs: Vec<PathBuf> = config
        .agent
        .include
        .iter()
        .filter_map(|p| base.join(p).parent().map(Path::to_path_buf))
        .collect();
    dirs.sort();
    dirs.dedup();
    dirs
}

fn names(config: &Config) -> Vec<String> {
    config.certificates.iter().map(|c| c.name.clone()).collect()
}

fn soon_after_reload(next: Instant, opts: &DaemonOptions) -> Instant {
    match opts.run_after_reload {
        Some(delay) => next.min(Instant::now() + delay),
        None => next,
    }
}

/// One line per certificate whose run did something; "nothing to do" stays out of the log.
fn print_report(report: &RunReport) {
    for c in &report.certificates {
        if let Some(o) = &c.ordered {
            say(&format!("{}: {o}", c.name));
        }
        match &c.outcome {
            Outcome::Unchanged { .. } => tracing::debug!("{}", c.line()),
            Outcome::Failed { error } => tracing::error!("{}: {error}", c.name),
            _ => say(&c.line()),
        }
        if let Some(w) = &c.warning {
            tracing::warn!("{}: {w}", c.name);
        }
        if let Some(r) = &c.revocation {
            tracing::warn!("{}: {}", c.name, r.detail);
        }
    }
}

/// A line for the journal (stdout), whatever the log level.
fn say(message: &str) {
    println!("{message}");
}

/// `interval ± jitter`, at least one second.
fn jittered(interval: Duration, jitter: Duration) -> Duration {
    let jitter = jitter.min(interval);
    let low = interval.saturating_sub(jitter);
    (low + random_up_to(jitter * 2)).max(Duration::from_secs(1))
}

/// A uniformly random duration in `0..=max` (millisecond steps).
fn random_up_to(max: Duration) -> Duration {
    let ms = u64::try_from(max.as_millis()).unwrap_or(u64::MAX);
    if ms == 0 {
        return Duration::ZERO;
    }
    Duration::from_millis(rand::random_range(0..=ms))
}

/// `SIGTERM`, `SIGINT` and the embedder's stop flag.
struct StopRequests {
    signals: Option<crate::signal::StopSignals>,
    external: Option<watch::Receiver<bool>>,
}

impl StopRequests {
    fn new(handle_signals: bool, external: Option<watch::Receiver<bool>>) -> Result<Self> {
        let signals = if handle_signals {
            Some(crate::signal::StopSignals::install()?)
        } else {
            None
        };
        Ok(Self { signals, external })
    }

    /// Resolves when a stop is requested (again, after the first).
    async fn requested(&mut self) {
        let Self { signals, external } = self;
        let signals = async {
            match signals.as_mut() {
                Some(s) => s.recv().await,
                None => std::future::pending().await,
            }
        };
        let external = async {
            match external.as_mut() {
                // A dropped sender stops the daemon as well: nobody could stop it otherwise.
                Some(rx) => {
                    let _ = rx.wait_for(|stop| *stop).await;
                    // Seen once: a later call must not resolve at once on the same value.
                    *external = None;
                }
                None => std::future::pending().await,
            }
        };
        tokio::select! {
            () = signals => {}
            () = external => {}
        }
    }
}

async fn recv_hup(hup: &mut Option<crate::signal::Hangups>) -> Option<()> {
    match hup {
        Some(s) => s.recv().await,
        None => std::future::pending().await,
    }
}

/// Watches the directory of the configuration file (editors and configuration management
/// replace files by renaming), and the directory of its target when it is a symbolic link.
/// Sends `()` for every event that may have changed the file. The directories of `include`
/// patterns (as they were at start) are watched too, every file in them. `None` (with a
/// warning) when no watch can be set up: the file is then read again only on `SIGHUP`.
fn watch_config(
    path: &Path,
    include_dirs: &[PathBuf],
    tx: mpsc::UnboundedSender<()>,
) -> Option<Box<dyn notify::Watcher + Send>> {
    use notify::Watcher;

    let mut names = Vec::new();
    let mut dirs = Vec::new();
    for p in [Some(path.to_path_buf()), std::fs::canonicalize(path).ok()]
        .into_iter()
        .flatten()
    {
        let dir = match p.parent() {
            Some(d) if !d.as_os_str().is_empty() => d.to_path_buf(),
            _ => PathBuf::from("."),
        };
        if let Some(name) = p.file_name() {
            names.push(name.to_os_string());
        }
        if !dirs.contains(&dir) {
            dirs.push(dir);
        }
    }
    let included = include_dirs.to_vec();
    for dir in include_dirs {
        if !dirs.contains(dir) {
            dirs.push(dir.clone());
        }
    }
    let handler = move |event: notify::Result<notify::Event>| {
        let relevant = match &event {
            Ok(e) if e.need_rescan() => true,
            Ok(e) if e.kind.is_access() => false,
            Ok(e) => {
                e.paths.is_empty()
                    || e.paths.iter().any(|p| {
                        p.file_name().is_some_and(|n| names.iter().any(|m| m == n))
                            || p.parent().is_some_and(|d| included.iter().any(|i| i == d))
                    })
            }
            Err(_) => true,
        };
        if relevant {
            let _ = tx.send(());
        }
    };

    let mut watcher: Box<dyn Watcher + Send> = match notify::recommended_watcher(handler.clone()) {
        Ok(w) => Box::new(w),
        Err(e) => {
            tracing::warn!("could not watch the configuration ({e}); polling it every 5 s");
            match notify::PollWatcher::new(
                handler,
                notify::Config::default().with_poll_interval(Duration::from_secs(5)),
            ) {
                Ok(w) => Box::new(w),
                Err(e) => {
                    tracing::warn!(
                        "could not poll the configuration either ({e}); send SIGHUP to reload it"
                    );
                    return None;
                }
            }
        }
    };
    for dir in &dirs {
        if let Err(e) = watcher.watch(dir, notify::RecursiveMode::NonRecursive) {
            tracing::warn!(
                "could not watch {} for configuration changes ({e}); send SIGHUP to reload",
                dir.display()
            );
        }
    }
    Some(watcher)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn jittered_stays_within_interval_plus_minus_jitter() {
        let interval = Duration::from_secs(3600);
        let jitter = Duration::from_secs(600);
        for _ in 0..1000 {
            let d = jittered(interval, jitter);
            assert!(
                d >= Duration::from_secs(3000) && d <= Duration::from_secs(4200),
                "{d:?}"
            );
        }
    }

    #[test]
    fn jittered_never_reaches_zero() {
        for _ in 0..100 {
            assert!(
                jittered(Duration::from_secs(1), Duration::from_secs(10)) >= Duration::from_secs(1)
            );
        }
        assert_eq!(
            jittered(Duration::ZERO, Duration::ZERO),
            Duration::from_secs(1)
        );
    }

    #[test]
    fn random_up_to_zero_is_zero() {
        assert_eq!(random_up_to(Duration::ZERO), Duration::ZERO);
        for _ in 0..100 {
            assert!(random_up_to(Duration::from_millis(5)) <= Duration::from_millis(5));
        }
    }

    #[test]
    fn only_the_latest_lead_ended_notice_waits_for_the_daemon() {
        let (slot, mut notices) = watch::channel(None::<LeadEnded>);
        let notice = notice_lead_ended(slot);
        for i in 0..1000 {
            notice(crate::fleet::Takeover {
                leader: Some(format!("web{i}")),
                open: vec![format!("'c{i}': an order intent")],
            });
        }
        assert!(notices.has_changed().unwrap_or(false));
        let latest = notices.borrow_and_update().clone().expect("a notice");
        assert_eq!(latest.takeover.leader.as_deref(), Some("web999"));
        assert_eq!(latest.takeover.open, ["'c999': an order intent"]);
        assert!(
            !notices.has_changed().unwrap_or(true),
            "one notice, not a thousand"
        );
    }
}
