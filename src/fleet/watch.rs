//! Between runs, the daemon follows the fleet: what the leader publishes is installed (and
//! validation files served) as it changes, not on the next timer tick.

use std::path::{Path, PathBuf};
use std::time::Duration;

use crate::clock::Clock;
use crate::config::Config;

use crate::engine::RunReport;
use crate::store::Store;

use super::coord::{FleetError, LeadEvent};
use super::follower::{concerns_hosts, follow};
use super::link::{FleetLink, connect};
use super::schema::printable;
use super::takeover::{Takeover, open_work};

/// Follows the fleet: synchronises at start (a host that was down catches up), then on every
/// change of a published certificate or validation file, and every five minutes besides. The
/// configuration is read again before each synchronisation (when it names other fleet key
/// files, the fleet is connected again with them). etcd out of reach is retried every five
/// seconds; nothing installed is touched meanwhile. `done` receives what each
/// synchronisation did (see [`follow`]), with the state directory's lock held.
///
/// When the leader key is deleted without the leader having given the lead up (its lease
/// ended: killed, cut off, stalled), the shared records are read for open work
/// ([`open_work`]); `lead_ended` receives it when there is any (the daemon then starts a
/// run). Returns only when the configuration has no `[fleet]`.
pub async fn follow_changes(
    config_path: PathBuf,
    clock: Clock,
    done: impl AsyncFn(&Config, &Store, RunReport),
    lead_ended: impl Fn(Takeover),
) {
    let retry = Duration::from_secs(5);
    loop {
        let link = match Config::load(&config_path) {
            Ok(config) => match connect(&config, clock).await {
                Ok(Some(link)) => link,
                Ok(None) => return,
                Err(e) => {
                    tracing::warn!("fleet: {e:#}");
                    tokio::time::sleep(retry).await;
                    continue;
                }
            },
            Err(e) => {
                tracing::warn!("fleet: {e:#}");
                tokio::time::sleep(retry).await;
                continue;
            }
        };
        let mut watch = match link.fleet.watch().await {
            Ok(w) => w,
            Err(e) => {
                tracing::warn!("fleet: {e}");
                tokio::time::sleep(retry).await;
                continue;
            }
        };
        let mut leader = link.fleet.leader().await.ok().flatten();
        let mut due = true;
        loop {
            if due {
                match Config::load(&config_path) {
                    Ok(config) if keys_changed(&config, &link) => {
                        tracing::info!(
                            "fleet: the configuration names other fleet key files; connecting again"
                        );
                        break;
                    }
                    Ok(config) => match follow(&config, &link, &done).await {
                        Ok(true) => {
                            tracing::debug!("fleet: synchronised");
                            due = false;
                        }
                        // A run holds the state: it synchronises itself; try again shortly.
                        Ok(false) => {}
                        Err(e) => tracing::warn!("fleet: {e:#}"),
                    },
                    Err(e) => tracing::warn!("fleet: {e:#}"),
                }
            }
            let wait = if due {
                Duration::from_secs(1)
            } else {
                Duration::from_secs(300)
            };
            let mut seen = Seen {
                config_path: &config_path,
                link: &link,
                leader: &mut leader,
                lead_ended: &lead_ended,
            };
            tokio::select! {
                changed = watch.changed() => match changed {
                    Ok(changes) => {
                        if seen.take(changes).await {
                            // A leader publishes its run's certificates one after the
                            // other: the rest of the burst joins this synchronisation (one
                            // install, one reload).
                            if let Err(e) = seen.settle(&mut watch).await {
                                tracing::warn!("fleet: {e}");
                                tokio::time::sleep(retry).await;
                                break;
                            }
                            due = true;
                        }
                    }
                    Err(e) => {
                        tracing::warn!("fleet: {e}");
                        tokio::time::sleep(retry).await;
                        break;
                    }
                },
                () = tokio::time::sleep(wait) => due = true,
            }
        }
    }
}

/// A change of a published certificate or validation file waits this long for the next one
/// before the synchronisation starts...
const BURST_QUIET: Duration = Duration::from_millis(500);
/// ...and no longer than this after the first.
const BURST_MAX: Duration = Duration::from_secs(5);

/// What the watch loop keeps between changes.
struct Seen<'a, F: Fn(Takeover)> {
    config_path: &'a Path,
    link: &'a FleetLink,
    /// The host the last `Taken` named.
    leader: &'a mut Option<String>,
    lead_ended: &'a F,
}

impl<F: Fn(Takeover)> Seen<'_, F> {
    /// Follows the lead's events of `changes`; whether they concern what [`follow`] does.
    async fn take(&mut self, changes: super::coord::Changes) -> bool {
        tracing::debug!(keys = ?changes.keys, "fleet: changed");
        let concerns = changes.keys.iter().any(|k| concerns_hosts(k));
        for event in changes.lead {
            match event {
                LeadEvent::Taken { host } => *self.leader = Some(host),
                LeadEvent::Ended { revision } => {
                    let held = self.leader.take();
                    if let Some(t) = ended(self.config_path, self.link, held, revision).await {
                        (self.lead_ended)(t);
                    }
                }
            }
        }
        concerns
    }

    /// Takes further changes until none came for [`BURST_QUIET`], or [`BURST_MAX`] passed.
    async fn settle(&mut self, watch: &mut super::coord::FleetWatch) -> Result<(), FleetError> {
        let until = tokio::time::Instant::now() + BURST_MAX;
        loop {
            let left = until.saturating_duration_since(tokio::time::Instant::now());
            if left.is_zero() {
                return Ok(());
            }
            match tokio::time::timeout(left.min(BURST_QUIET), watch.changed()).await {
                Ok(changes) => {
                    self.take(changes?).await;
                }
                Err(_) => return Ok(()),
            }
        }
    }
}

/// The lead that was `held` ended at `revision`: a takeover when it ended with its lease and
/// left work open.
async fn ended(
    config_path: &Path,
    link: &FleetLink,
    held: Option<String>,
    revision: i64,
) -> Option<Takeover> {
    let by = held
        .as_deref()
        .map_or_else(|| "a host".to_owned(), printable);
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
