//! A run that waits for the CA between its rounds holds no lead, so its death ends no lease:
//! it says it waits with the fleet's `waiting` key (written by each of its rounds while
//! certificates wait, deleted by the round that leaves none). The follow loop expects a round
//! by the next allowed status check; when none came — no change of the key and no lead taken
//! for the polling interval (and a tenth), a lease and 5 s — and the key is still there while
//! nobody leads, the shared records are read for open work and the daemon takes it over, as
//! after a lead ended with its lease.

use std::path::Path;
use std::time::Duration;

use crate::config::Config;
use crate::fleet::link::FleetLink;
use crate::fleet::schema::{WAITING, printable};
use crate::fleet::takeover::{Takeover, open_work};

/// The `waiting` key, as the watch names it.
pub(super) const WAITING_KEY: &str = WAITING;

/// How long after the last sign of a waiting run (its `waiting` key written, a lead taken)
/// the daemons look whether it went on, for the configuration at `config_path` (as for the
/// API's 5-minute interval and a 15 s lease when it cannot be read).
pub(super) fn after(config_path: &Path) -> Duration {
    Config::load(config_path).map_or(Duration::from_secs(350), |c| stall_after(&c))
}

fn stall_after(config: &Config) -> Duration {
    let interval = Duration::from_secs(config.agent.poll_interval_secs);
    let lease = config.fleet.as_ref().map_or(Duration::from_secs(15), |f| {
        Duration::from_secs(f.lease_ttl_secs)
    });
    interval + interval / 10 + lease + Duration::from_secs(5)
}

/// No look planned (until the `waiting` key changes).
pub(super) fn not_yet() -> Option<tokio::time::Instant> {
    None
}

/// What the look found.
pub(super) enum Stall {
    /// The waiting run went on, ended, or another host leads now: nothing to do (`again`:
    /// look again later, a host leads).
    No { again: bool },
    /// No round followed and work is open: take it over.
    Open(Takeover),
}

/// Whether the run that said it waits went on (see the module's description).
pub(super) async fn look(config_path: &Path, link: &FleetLink) -> Stall {
    let host = match link.fleet.get(WAITING).await {
        // A host name as the waiting run wrote it; anything else (the key is not sealed) is
        // only shown, cut and escaped.
        Ok(Some((value, _))) => String::from_utf8_lossy(&value)
            .chars()
            .take(64)
            .collect::<String>(),
        Ok(None) => return Stall::No { again: false },
        Err(e) => {
            tracing::warn!("fleet: {e}");
            return Stall::No { again: true };
        }
    };
    match link.fleet.leader().await {
        Ok(None) => {}
        Ok(Some(_)) => return Stall::No { again: true },
        Err(e) => {
            tracing::warn!("fleet: {e}");
            return Stall::No { again: true };
        }
    }
    let config = match Config::load(config_path) {
        Ok(c) => c,
        Err(e) => {
            tracing::warn!("fleet: {e:#}");
            return Stall::No { again: false };
        }
    };
    let open = open_work(&config, link).await;
    if open.is_empty() {
        tracing::info!(
            "fleet: the run of {} that waited for the CA did not go on; no work is open",
            printable(&host)
        );
        return Stall::No { again: false };
    }
    Stall::Open(Takeover {
        leader: Some(host),
        open,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn config(fleet: &str, poll: u64) -> Config {
        let text = format!(
            "[agent]\npoll_interval_secs = {poll}\n[api]\nbase_url = \"https://127.0.0.1:1\"\n\
             login = \"a@b.test\"\npassword = \"x\"\n{fleet}"
        );
        Config::parse(&text, Path::new("/tmp/x.toml")).unwrap()
    }

    #[test]
    fn a_waiting_run_is_expected_by_its_next_status_check_and_a_lease() {
        let fleet = "[fleet]\nendpoints = [\"https://10.0.0.1:2379\"]\nhost = \"web1\"\n\
                     ca_file = \"/etc/ca.pem\"\nsecret_file = \"/etc/fleet.key\"\n";
        // The API's 5 minutes, a tenth of them, the default 15 s lease, 5 s.
        assert_eq!(
            stall_after(&config(fleet, 300)),
            Duration::from_secs(300 + 30 + 15 + 5)
        );
        let short = format!("{fleet}lease_ttl_secs = 5\n");
        assert_eq!(
            stall_after(&config(&short, 10)),
            Duration::from_secs(10 + 1 + 5 + 5)
        );
        // A configuration that cannot be read: as for the API's interval.
        assert_eq!(
            after(Path::new("/nonexistent/cert-agent.toml")),
            Duration::from_secs(350)
        );
    }
}
