//! Between runs, the daemon follows the fleet: what the leader publishes is installed (and
//! validation files served) as it changes, not on the next timer tick.

use std::path::{Path, PathBuf};
use std::time::Duration;

use crate::clock::Clock;
use crate::config::Config;

use crate::engine::RunReport;
use crate::store::Store;

use super::coord::{Changes, FleetError, FleetWatch, LeadEvent};
use super::follower::{Followed, concerns_hosts, follow, read_by_sync};
use super::link::{FleetLink, connect};
use super::schema::printable;
use super::takeover::{Takeover, open_work};

mod retry;
mod waiting_run;

use retry::Retry;

/// Follows the fleet: synchronises at start (a host that was down catches up), then on every
/// change of a published certificate or validation file, and every five minutes what else
/// the synchronisation reads changed (a shared record, a spec, the key check). The
/// configuration is read again before each synchronisation (when it names other fleet key
/// files, the fleet is connected again with them). etcd out of reach is retried every five
/// seconds; nothing installed is touched meanwhile. A synchronisation that failed is tried
/// again after 1 s, doubling to 60 s with jitter ([`retry`]), sooner only for a change the
/// hosts act on at once; a success starts again at 1 s. `done` receives what each
/// synchronisation did (see [`follow`]), with the state directory's lock held.
///
/// A synchronisation reads the fleet in one request whatever the number of certificates,
/// and only when something it reads changed: the watch tells it, from the revision the last
/// synchronisation read at (after a reconnection too). While nothing changed, the
/// configuration did not and the last synchronisation left nothing to try again (a failure,
/// a certificate held until it is valid), the five-minute resynchronisation is one progress
/// request on the watch's stream — etcd confirms that the watch is alive and caught up — and
/// no read. A watch that does not answer it by the next resynchronisation is started again;
/// one that ends with an error (etcd out of reach, its revision compacted away, an answer it
/// could not read) is started from now after a full read.
///
/// When the leader key is deleted without the leader having given the lead up (its lease
/// ended: killed, cut off, stalled), the shared records are read for open work
/// ([`open_work`]); `lead_ended` receives it when there is any (the daemon then starts a
/// run). Returns only when the configuration has no `[fleet]`.
pub(crate) async fn follow_changes(
    config_path: PathBuf,
    clock: Clock,
    done: impl AsyncFn(&Config, &Store, RunReport),
    lead_ended: impl Fn(Takeover),
) {
    let retry_connect = Duration::from_secs(5);
    let every = resync_every();
    let mut state = Following::default();
    let mut retry = Retry::default();
    loop {
        let from = state.last.as_ref().map(|l| l.followed.revision + 1);
        let (link, mut watch) = match watching(&config_path, clock, from).await {
            Ok(Some(watching)) => watching,
            Ok(None) => return,
            Err(e) => {
                tracing::warn!("fleet: {e:#}");
                tokio::time::sleep(retry_connect).await;
                continue;
            }
        };
        let mut leader = link.fleet.leader().await.ok().flatten();
        let (mut waiting, stall_after) = (waiting_run::not_yet(), waiting_run::after(&config_path));
        // At a (re)connection: a full read unless the watch replays nothing that matters.
        let mut due = Due::Check;
        let mut awaiting = false;
        // When to look again after a failure or while a run holds the state.
        let mut retry_at: Option<tokio::time::Instant> = None;
        // Every `every`, however many changes arrive meanwhile (other hosts' reports would
        // otherwise put it off for ever).
        let mut tick = tokio::time::Instant::now() + every;
        loop {
            let now = tokio::time::Instant::now();
            if due != Due::No && (due == Due::Now || retry_at.is_none_or(|t| t <= now)) {
                match look(&config_path, &link, &mut watch, &mut state, due, &done).await {
                    Looked::Reconnect => break,
                    Looked::Done { progress } => {
                        awaiting |= progress;
                        due = Due::No;
                        retry_at = None;
                        retry.succeeded();
                    }
                    // A run holds the state: it synchronises itself; try again shortly.
                    Looked::Busy => retry_at = Some(now + Duration::from_secs(1)),
                    // Only a change the hosts act on at once goes before the backoff.
                    Looked::Failed => {
                        retry_at = Some(tokio::time::Instant::now() + retry.failed());
                        due = Due::Check;
                    }
                }
            }
            let base = if due == Due::No {
                tick
            } else {
                retry_at.unwrap_or_else(|| tokio::time::Instant::now() + Duration::from_secs(1))
            };
            let wake = waiting.map_or(base, |w| w.min(base));
            let mut seen = Seen {
                config_path: &config_path,
                link: &link,
                leader: &mut leader,
                lead_ended: &lead_ended,
                waiting: &mut waiting,
                stall_after,
            };
            tokio::select! {
                changed = watch.changed() => match changed {
                    Ok(changes) => {
                        awaiting = false;
                        let mut burst = Burst::new(tokio::time::Instant::now());
                        burst.note(&changes.keys);
                        if seen.take(&mut state, changes).await {
                            due = Due::Now;
                            // A leader publishes its run's certificates one after the other:
                            // the rest of the burst joins this synchronisation (one install,
                            // one reload).
                            if let Err(e) = seen.settle(&mut state, &mut watch, burst).await {
                                tracing::warn!("fleet: {e}");
                                // What the watch did not deliver is read in full.
                                state = Following::default();
                                tokio::time::sleep(retry_connect).await;
                                break;
                            }
                        }
                    }
                    Err(e) => {
                        tracing::warn!("fleet: {e}");
                        // Changes the watch did not deliver (its revision compacted away, an
                        // answer it could not read) may be missed: read everything again.
                        state = Following::default();
                        tokio::time::sleep(retry_connect).await;
                        break;
                    }
                },
                () = tokio::time::sleep_until(wake) => {
                    if seen.look_if_due(base).await {
                        continue;
                    }
                    if awaiting {
                        tracing::warn!(
                            "fleet: the watch did not confirm it is alive since the last \
                             resynchronisation; watching again"
                        );
                        break;
                    }
                    if due == Due::No {
                        due = Due::Tick;
                        tick = tokio::time::Instant::now() + every;
                    }
                }
            }
        }
    }
}

/// What one look at the fleet came to.
enum Looked {
    /// Nothing to do until the next change or resynchronisation (`progress`: a progress
    /// request is out on the watch).
    Done { progress: bool },
    /// A run holds the state directory.
    Busy,
    /// The configuration or the synchronisation failed.
    Failed,
    /// Connect and watch again (other fleet key files, a watch that failed).
    Reconnect,
}

/// Looks at the fleet as `due` says: synchronises unless nothing changed since the last
/// synchronisation, and at a resynchronisation with nothing changed asks the watch to
/// confirm it is alive.
async fn look<D: AsyncFn(&Config, &Store, RunReport)>(
    config_path: &Path,
    link: &FleetLink,
    watch: &mut FleetWatch,
    state: &mut Following,
    due: Due,
    done: &D,
) -> Looked {
    let config = match Config::load(config_path) {
        Ok(config) => config,
        Err(e) => {
            tracing::warn!("fleet: {e:#}");
            return Looked::Failed;
        }
    };
    if keys_changed(&config, link) {
        tracing::info!("fleet: the configuration names other fleet key files; connecting again");
        *state = Following::default();
        return Looked::Reconnect;
    }
    if state.quiet(&config) {
        if due != Due::Tick {
            return Looked::Done { progress: false };
        }
        tracing::debug!("fleet: nothing changed; asking the watch to confirm");
        return match watch.progress().await {
            Ok(()) => Looked::Done { progress: true },
            Err(e) => {
                tracing::warn!("fleet: {e}");
                Looked::Reconnect
            }
        };
    }
    match follow(&config, link, done).await {
        Ok(Some(followed)) => {
            tracing::debug!("fleet: synchronised");
            state.synchronised(&config, followed);
            Looked::Done { progress: false }
        }
        Ok(None) => Looked::Busy,
        Err(e) => {
            tracing::warn!("fleet: {e:#}");
            Looked::Failed
        }
    }
}

/// Connects to the fleet of the configuration at `config_path` and watches it from revision
/// `from` (`None`: from now); `None` without `[fleet]`.
async fn watching(
    config_path: &Path,
    clock: Clock,
    from: Option<i64>,
) -> anyhow::Result<Option<(FleetLink, FleetWatch)>> {
    let config = Config::load(config_path)?;
    let Some(link) = connect(&config, clock).await? else {
        return Ok(None);
    };
    let watch = link.fleet.watch_from(from).await?;
    Ok(Some((link, watch)))
}

/// When the follow loop looks at the fleet next.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Due {
    /// At the next resynchronisation.
    No,
    /// Now, reading only if something changed (a connection, a retry).
    Check,
    /// The five-minute resynchronisation.
    Tick,
    /// Now: a change the hosts act on at once.
    Now,
}

/// What the follow loop knows of the fleet between synchronisations.
#[derive(Default)]
struct Following {
    last: Option<Last>,
    /// A key the synchronisation reads changed since it last read.
    stale: bool,
    /// The last synchronisation's configuration has a rollout in waves: hosts' proofs are
    /// read, and a new one wakes the hosts.
    rollout: bool,
}

struct Last {
    followed: Followed,
    /// The configuration that synchronisation was for, serialised.
    config: Vec<u8>,
}

impl Following {
    /// Whether a synchronisation now would find what the last one found: nothing it reads
    /// changed, nor the configuration, and it left nothing to try again.
    fn quiet(&self, config: &Config) -> bool {
        !self.stale
            && self.last.as_ref().is_some_and(|l| {
                l.followed.clean && serde_json::to_vec(config).is_ok_and(|c| c == l.config)
            })
    }

    fn synchronised(&mut self, config: &Config, followed: Followed) {
        let before = self.last.as_ref().map_or(0, |l| l.followed.revision);
        self.last = Some(Last {
            followed: Followed {
                revision: followed.revision.max(before),
                ..followed
            },
            config: serde_json::to_vec(config).unwrap_or_default(),
        });
        self.stale = false;
        self.rollout = config.fleet.as_ref().is_some_and(|f| f.rollout.is_some());
    }

    /// Notes `changes`; whether the hosts act on them at once.
    fn changed(&mut self, changes: &Changes) -> bool {
        tracing::debug!(keys = ?changes.keys, revision = changes.revision, "fleet: changed");
        if changes.keys.iter().any(|k| read_by_sync(k, self.rollout)) {
            self.stale = true;
        }
        if let Some(l) = self.last.as_mut() {
            l.followed.revision = l.followed.revision.max(changes.revision);
        }
        changes.keys.iter().any(|k| concerns_hosts(k, self.rollout))
    }
}

/// How often the follow loop resynchronises: five minutes (in debug builds,
/// `CERT_AGENT_TEST_FLEET_RESYNC_SECS` for the tests).
fn resync_every() -> Duration {
    if cfg!(debug_assertions)
        && let Some(secs) = std::env::var("CERT_AGENT_TEST_FLEET_RESYNC_SECS")
            .ok()
            .and_then(|v| v.trim().parse::<u64>().ok())
            .filter(|s| *s > 0)
    {
        return Duration::from_secs(secs);
    }
    Duration::from_secs(300)
}

/// A change of a published certificate or validation file waits this long for the next one
/// before the synchronisation starts...
const BURST_QUIET: Duration = Duration::from_millis(500);
/// ...and no longer than this after the first.
const BURST_MAX: Duration = Duration::from_secs(5);
/// While a host leads, certificates it publishes wait for the next one this long (its run
/// publishes them one batch after another, and gives the lead up once done)...
const BURST_LEAD_QUIET: Duration = Duration::from_secs(3);
/// ...and no longer than this after the first.
const BURST_LEAD_MAX: Duration = Duration::from_secs(60);

/// A burst of changes taken together into one synchronisation (one install, one reload).
/// A validation file is served soon ([`BURST_QUIET`], at most [`BURST_MAX`]): the CA may
/// fetch it any moment. Certificates published while a host leads are its run's
/// publications, which end when it gives the lead up: the burst waits for that, or for
/// [`BURST_LEAD_QUIET`] without another change (at most [`BURST_LEAD_MAX`]), so that a mass
/// reissue of thousands, published over tens of seconds, is still one reload on every host.
#[derive(Debug, Clone, Copy)]
struct Burst {
    first: tokio::time::Instant,
    /// A validation file was published or withdrawn.
    validation: bool,
    /// A certificate was published or retired.
    certificates: bool,
}

impl Burst {
    fn new(first: tokio::time::Instant) -> Self {
        Burst {
            first,
            validation: false,
            certificates: false,
        }
    }

    fn note(&mut self, keys: &[String]) {
        for k in keys {
            if k.starts_with("dcv/") {
                self.validation = true;
            } else if concerns_hosts(k, false) {
                self.certificates = true;
            }
        }
    }

    /// How long to wait for the next change at `now` (`lead_held`: a host leads the fleet);
    /// `None`: the burst is over, synchronise.
    fn wait(&self, now: tokio::time::Instant, lead_held: bool) -> Option<Duration> {
        let waits_for_lead = self.certificates && !self.validation && lead_held;
        let cap = if waits_for_lead {
            BURST_LEAD_MAX
        } else {
            BURST_MAX
        };
        let left = (self.first + cap).saturating_duration_since(now);
        if left.is_zero() {
            return None;
        }
        Some(left.min(if waits_for_lead {
            BURST_LEAD_QUIET
        } else {
            BURST_QUIET
        }))
    }
}

/// What the follow loop keeps of the lead between changes.
struct Seen<'a, F: Fn(Takeover)> {
    config_path: &'a Path,
    link: &'a FleetLink,
    /// The host the last `Taken` named.
    leader: &'a mut Option<String>,
    lead_ended: &'a F,
    /// When to look whether a run that waits between its rounds went on.
    waiting: &'a mut Option<tokio::time::Instant>,
    stall_after: Duration,
}

impl<F: Fn(Takeover)> Seen<'_, F> {
    /// Notes `changes` in `state` and follows the lead's events; whether the hosts act on them
    /// at once.
    async fn take(&mut self, state: &mut Following, changes: Changes) -> bool {
        let concerns = state.changed(&changes);
        let now = tokio::time::Instant::now();
        if changes.keys.iter().any(|k| k == waiting_run::WAITING_KEY) {
            *self.waiting = Some(now + self.stall_after);
        }
        let taken = |_: &str| {
            // A round is under way: it writes or deletes `waiting` before it ends.
            if self.waiting.is_some() {
                *self.waiting = Some(now + self.stall_after);
            }
        };
        // One look at the open work covers every lead that ended in these changes.
        if let Some((held, revision)) = latest_ended(&mut *self.leader, changes.lead, taken) {
            let given_up = changes.resigned == Some(revision);
            if let Some(t) = ended(self.config_path, self.link, held, revision, given_up).await {
                (self.lead_ended)(t);
            }
        }
        concerns
    }

    /// Looks whether a run that waits between its rounds went on when the time for it came
    /// (see [`waiting_run`]); whether the follow loop's own wake time (`base`) is still to come.
    async fn look_if_due(&mut self, base: tokio::time::Instant) -> bool {
        if self
            .waiting
            .is_some_and(|w| w <= tokio::time::Instant::now())
        {
            self.look().await;
        }
        tokio::time::Instant::now() < base
    }

    async fn look(&mut self) {
        *self.waiting = None;
        match waiting_run::look(self.config_path, self.link).await {
            waiting_run::Stall::Open(t) => (self.lead_ended)(t),
            waiting_run::Stall::No { again: true } => {
                *self.waiting = Some(tokio::time::Instant::now() + self.stall_after);
            }
            waiting_run::Stall::No { again: false } => {}
        }
    }

    /// Takes further changes into `burst` until it is over (see [`Burst`]).
    async fn settle(
        &mut self,
        state: &mut Following,
        watch: &mut FleetWatch,
        mut burst: Burst,
    ) -> Result<(), FleetError> {
        while let Some(wait) = burst.wait(tokio::time::Instant::now(), self.leader.is_some()) {
            match tokio::time::timeout(wait, watch.changed()).await {
                Ok(changes) => {
                    let changes = changes?;
                    burst.note(&changes.keys);
                    self.take(state, changes).await;
                }
                Err(_) => return Ok(()),
            }
        }
        Ok(())
    }
}

/// Follows the lead `events` of one batch of changes: `leader` becomes the host that leads
/// after them (`taken` is told of each lead taken), and the result is the last lead that
/// ended among them — its holder as last seen, and the revision — or `None`. However many
/// ends a batch holds (a flood of them, forged or replayed by an etcd writer), the open work
/// is read once.
fn latest_ended(
    leader: &mut Option<String>,
    events: Vec<LeadEvent>,
    mut taken: impl FnMut(&str),
) -> Option<(Option<String>, i64)> {
    let mut latest: Option<(Option<String>, i64)> = None;
    for event in events {
        match event {
            LeadEvent::Taken { host } => {
                taken(&host);
                *leader = Some(host);
            }
            LeadEvent::Ended { revision } => {
                let held = leader.take().or_else(|| latest.take().and_then(|(h, _)| h));
                latest = Some((held, revision));
            }
        }
    }
    latest
}

/// The lead that was `held` ended at `revision`: a takeover when it ended with its lease and
/// left work open. `given_up`: the watch delivered the resignation with the deletion (no
/// read needed).
async fn ended(
    config_path: &Path,
    link: &FleetLink,
    held: Option<String>,
    revision: i64,
    given_up: bool,
) -> Option<Takeover> {
    let by = held
        .as_deref()
        .map_or_else(|| "a host".to_owned(), printable);
    if given_up {
        tracing::debug!("fleet: {by} gave the lead up");
        return None;
    }
    match link.fleet.resigned_at(revision).await {
        Ok(true) => {
            tracing::debug!("fleet: {by} gave the lead up");
            return None;
        }
        Ok(false) => {}
        Err(e) => tracing::warn!("fleet: {e}"),
    }
    let config = match Config::load(config_path) {
        Ok(c) => c,
        Err(e) => {
            tracing::warn!("fleet: {e:#}");
            return None;
        }
    };
    let open = open_work(&config, link).await;
    if open.is_empty() {
        tracing::info!("fleet: the lead of {by} ended with its lease; no work is open");
        return None;
    }
    Some(Takeover { leader: held, open })
}

/// Whether `config` names other fleet key files (or no `[fleet]`) than `link` was opened
/// with: a rotation of the fleet key is followed without a restart.
fn keys_changed(config: &Config, link: &FleetLink) -> bool {
    config.fleet.as_ref().is_none_or(|f| {
        f.secret_file != link.config.secret_file
            || f.previous_secret_file != link.config.previous_secret_file
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn config(names: &[&str]) -> Config {
        let mut text = String::from(
            "[api]\nbase_url = \"https://127.0.0.1:1\"\nlogin = \"a@b.test\"\npassword = \"x\"\n",
        );
        for name in names {
            text.push_str(&format!(
                "[[certificate]]\nname = \"{name}\"\ndomains = [\"{name}.example.com\"]\n\
                 product_id = 101\nwebroot = \"/var/www\"\ncountry = \"DE\"\n\
                 region = \"Berlin\"\ncity = \"Berlin\"\nserver = \"nginx\"\n"
            ));
        }
        Config::parse(&text, Path::new("/tmp/x.toml")).unwrap()
    }

    fn changes(keys: &[&str], revision: i64) -> Changes {
        Changes {
            keys: keys.iter().map(|k| (*k).to_owned()).collect(),
            revision,
            ..Changes::default()
        }
    }

    #[test]
    fn a_resynchronisation_reads_only_after_a_change_of_what_it_reads() {
        let c = config(&["a", "b"]);
        let mut state = Following::default();
        assert!(!state.quiet(&c), "nothing read yet");
        state.synchronised(
            &c,
            Followed {
                revision: 10,
                clean: true,
            },
        );
        assert!(state.quiet(&c));
        // Other hosts' reports and the lead: not read by a synchronisation.
        for key in [
            "hosts/web2/seen",
            "hosts/web2/certs/a",
            "leader",
            "resigned",
        ] {
            assert!(!state.changed(&changes(&[key], 11)), "{key}");
            assert!(state.quiet(&c), "{key}");
        }
        assert_eq!(state.last.as_ref().map(|l| l.followed.revision), Some(11));
        // A shared record, a spec, the key check: read at the next resynchronisation.
        for key in ["certs/a/state", "certs/b/spec", "keycheck"] {
            let mut s = Following::default();
            s.synchronised(
                &c,
                Followed {
                    revision: 10,
                    clean: true,
                },
            );
            assert!(!s.changed(&changes(&[key], 12)), "{key}");
            assert!(!s.quiet(&c), "{key}");
        }
        // A published certificate or validation file: read at once.
        assert!(state.changed(&changes(&["hosts/web2/seen", "certs/a/current"], 13)));
        assert!(state.changed(&changes(&["dcv/b"], 14)));
        assert!(!state.quiet(&c));
        state.synchronised(
            &c,
            Followed {
                revision: 14,
                clean: true,
            },
        );
        assert!(state.quiet(&c));
        // A synchronisation never moves the watch's start back.
        state.synchronised(
            &c,
            Followed {
                revision: 9,
                clean: true,
            },
        );
        assert_eq!(state.last.as_ref().map(|l| l.followed.revision), Some(14));
    }

    #[test]
    fn a_hosts_proof_wakes_the_hosts_only_with_a_rollout_in_waves() {
        let fleet = |rollout: &str| {
            let mut c = config(&["a"]);
            let text = format!(
                "[api]\nbase_url = \"https://127.0.0.1:1\"\nlogin = \"a@b.test\"\n\
                 password = \"x\"\n[fleet]\nhost = \"web1\"\n\
                 endpoints = [\"https://127.0.0.1:2\"]\n{rollout}\n"
            );
            c.fleet = Config::parse(&text, Path::new("/tmp/x.toml"))
                .unwrap()
                .fleet;
            c
        };
        let synced = |c: &Config| {
            let mut s = Following::default();
            s.synchronised(
                c,
                Followed {
                    revision: 10,
                    clean: true,
                },
            );
            s
        };
        let proof = "hosts/web2/proof/a";
        // Without a rollout: another host's proof is a report like the others.
        let plain = fleet("");
        let mut s = synced(&plain);
        assert!(!s.changed(&changes(&[proof], 11)));
        assert!(s.quiet(&plain), "a proof read without a rollout");
        // With one: it may open the next wave, read at once.
        let waves = fleet("rollout_canaries = 1\nrollout_wave = 1");
        let mut s = synced(&waves);
        assert!(s.changed(&changes(&[proof], 11)));
        assert!(!s.quiet(&waves));
        assert!(!s.changed(&changes(&["hosts/web2/proofs", "hosts/web2/certs/a"], 12)));
        // It never holds a burst for the lead's end.
        let mut b = Burst::new(tokio::time::Instant::now());
        b.note(&[proof.to_owned()]);
        assert_eq!(b.wait(b.first, true), Some(BURST_QUIET));
    }

    #[test]
    fn a_failure_or_another_configuration_reads_again() {
        let c = config(&["a"]);
        let mut state = Following::default();
        state.synchronised(
            &c,
            Followed {
                revision: 5,
                clean: false,
            },
        );
        assert!(!state.quiet(&c), "a failure is tried again");
        state.synchronised(
            &c,
            Followed {
                revision: 6,
                clean: true,
            },
        );
        assert!(state.quiet(&c));
        assert!(!state.quiet(&config(&["a", "b"])), "a certificate added");
    }

    #[test]
    fn a_burst_of_certificates_waits_for_the_lead_to_end_and_a_validation_file_does_not() {
        let t0 = tokio::time::Instant::now();
        let at = |ms: u64| t0 + Duration::from_millis(ms);
        let keys = |k: &[&str]| k.iter().map(|s| (*s).to_owned()).collect::<Vec<_>>();
        // Certificates while a host leads: 3 s of quiet or the lead's end, 60 s at most.
        let mut b = Burst::new(t0);
        b.note(&keys(&["certs/a/current", "hosts/h1/certs/a"]));
        assert_eq!(b.wait(at(0), true), Some(BURST_LEAD_QUIET));
        assert_eq!(b.wait(at(20_000), true), Some(BURST_LEAD_QUIET));
        assert_eq!(b.wait(at(58_500), true), Some(Duration::from_millis(1_500)));
        assert_eq!(b.wait(at(60_000), true), None);
        // The lead ended (given up after the publications): half a second of quiet, as any burst.
        assert_eq!(b.wait(at(20_000), false), None, "past the 5 s of a burst");
        assert_eq!(b.wait(at(1_000), false), Some(BURST_QUIET));
        // A validation file in the burst: served soon, lead or not.
        b.note(&keys(&["dcv/b"]));
        assert_eq!(b.wait(at(1_000), true), Some(BURST_QUIET));
        assert_eq!(b.wait(at(4_800), true), Some(Duration::from_millis(200)));
        assert_eq!(b.wait(at(5_000), true), None);
        // Only other hosts' reports: the quiet rule.
        let mut r = Burst::new(t0);
        r.note(&keys(&["hosts/h2/certs/a", "certs/a/state"]));
        assert_eq!(r.wait(at(0), true), Some(BURST_QUIET));
        // A retirement is a certificate change too.
        let mut t = Burst::new(t0);
        t.note(&keys(&["certs/a/retired"]));
        assert_eq!(t.wait(at(0), true), Some(BURST_LEAD_QUIET));
    }

    #[test]
    fn the_lead_events_of_a_batch_end_in_one_look_at_the_latest_end() {
        let taken = |host: &str| LeadEvent::Taken { host: host.into() };
        let ended = |revision| LeadEvent::Ended { revision };
        let mut seen = Vec::new();
        let mut leader = Some("web1".to_owned());
        // A flood of ends (forged or replayed) between leads taken: one look, at the last.
        let mut events = vec![ended(10), taken("web2"), ended(11)];
        events.extend((12..1012).map(ended));
        events.push(taken("web3"));
        events.push(ended(1013));
        let latest = latest_ended(&mut leader, events, |h| seen.push(h.to_owned()));
        assert_eq!(latest, Some((Some("web3".to_owned()), 1013)));
        assert_eq!(leader, None);
        assert_eq!(seen, ["web2", "web3"]);

        // Ends without a lead taken in between keep the holder last seen.
        let mut leader = Some("web1".to_owned());
        let latest = latest_ended(&mut leader, vec![ended(5), ended(6)], |_| {});
        assert_eq!(latest, Some((Some("web1".to_owned()), 6)));

        // A lead taken after the end: that host leads now, the end is still looked at.
        let mut leader = None;
        let latest = latest_ended(&mut leader, vec![ended(7), taken("web2")], |_| {});
        assert_eq!(latest, Some((None, 7)));
        assert_eq!(leader.as_deref(), Some("web2"));
        let mut leader = Some("web2".to_owned());
        assert_eq!(latest_ended(&mut leader, vec![taken("web3")], |_| {}), None);
        assert_eq!(leader.as_deref(), Some("web3"));
    }
}
