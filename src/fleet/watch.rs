//! Between runs, the daemon follows the fleet: what the leader publishes is installed (and
//! validation files served) as it changes, not on the next timer tick.

use std::path::PathBuf;
use std::time::Duration;

use crate::clock::Clock;
use crate::config::Config;

use super::follower::{Synced, concerns_hosts, follow};
use super::link::{FleetLink, connect};

/// Follows the fleet: synchronises at start (a host that was down catches up), then on every
/// change of a published certificate or validation file, and every five minutes besides. The
/// configuration is read again before each synchronisation (when it names other fleet key
/// files, the fleet is connected again with them). etcd out of reach is retried every five
/// seconds; nothing installed is touched meanwhile. `done` receives what each
/// synchronisation did. Returns only when the configuration has no `[fleet]`.
pub async fn follow_changes(config_path: PathBuf, clock: Clock, done: impl Fn(Vec<Synced>)) {
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
                    Ok(config) => match follow(&config, &link).await {
                        Ok(Some(synced)) => {
                            tracing::debug!(certificates = synced.len(), "fleet: synchronised");
                            done(synced);
                            due = false;
                        }
                        // A run holds the state: it synchronises itself; try again shortly.
                        Ok(None) => {}
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
            tokio::select! {
                changed = watch.changed() => match changed {
                    Ok(keys) => {
                        tracing::debug!(?keys, "fleet: changed");
                        due |= keys.iter().any(|k| concerns_hosts(k));
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

/// Whether `config` names other fleet key files (or no `[fleet]`) than `link` was opened
/// with: a rotation of the fleet key is followed without a restart.
fn keys_changed(config: &Config, link: &FleetLink) -> bool {
    config.fleet.as_ref().is_none_or(|f| {
        f.secret_file != link.config.secret_file
            || f.previous_secret_file != link.config.previous_secret_file
    })
}
