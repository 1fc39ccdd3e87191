//! When the daemon's next run starts: its schedule, sooner while work is pending or after a
//! run that failed as a whole, at the start of a certificate held until it is valid, and when a
//! kept CRL is due for its update.

use std::time::Duration;

use crate::clock::Clock;
use crate::config::Config;

use super::{DaemonOptions, jittered, random_up_to};

/// The wait until the next run after one that ended; `pending`: it left work pending at the
/// CA or found the lock taken; `failures`: the runs that failed as a whole in a row, this one
/// included (0 when it did not fail).
pub(super) fn next_wait(
    config: &Config,
    opts: &DaemonOptions,
    pending: bool,
    failures: u32,
) -> Duration {
    let wait = if failures > 0 {
        let base = retry_base(opts.retry_after_failure, opts.interval, failures);
        base + random_up_to(base / 2)
    } else if pending {
        let base = opts
            .pending_interval
            .unwrap_or(Duration::from_secs(config.agent.poll_interval_secs));
        base + random_up_to(base / 10)
    } else {
        jittered(opts.interval, opts.jitter)
    };
    // A certificate held until it is valid is installed when it begins.
    let wait = match until_held_valid(config, opts.clock) {
        Some(held) if held < wait => held,
        _ => wait,
    };
    // A revocation is seen when the CRL that lists it is published.
    match until_crl_update(config, opts.clock) {
        Some(crl) if crl < wait => {
            tracing::debug!("a kept CRL is due in {} s", crl.as_secs());
            crl
        }
        _ => wait,
    }
}

/// The wait before the next run after `failures` runs in a row failed as a whole (at least
/// one), before its jitter: `first`, doubled for each further failure, at most `interval`
/// (and never below `first` when `interval` is shorter).
fn retry_base(first: Duration, interval: Duration, failures: u32) -> Duration {
    let doublings = failures.saturating_sub(1).min(20);
    first
        .saturating_mul(1 << doublings)
        .min(interval.max(first))
}

/// How long until the first certificate held until it is valid begins (plus a second), when
/// one is held.
fn until_held_valid(config: &Config, clock: Clock) -> Option<Duration> {
    let store = crate::store::Store::existing(&config.agent.state_dir);
    let now = clock.now();
    config
        .certificates
        .iter()
        .filter_map(|c| store.load(&c.name).ok()?.held)
        .map(|h| {
            let secs = (h.not_before - now).whole_seconds().max(0);
            Duration::from_secs(u64::try_from(secs).unwrap_or(0) + 1)
        })
        .min()
}

/// The shortest time between two runs woken by CRLs.
const CRL_WAKE_MIN: Duration = Duration::from_secs(60);

/// How long until the first CRL kept for an installed certificate is due for its update
/// (its `nextUpdate`, plus a second; at least [`CRL_WAKE_MIN`]): the run then reads the new
/// CRL and acts on a revocation it lists. `None` when revocation is not checked or no usable
/// CRL is kept.
fn until_crl_update(config: &Config, clock: Clock) -> Option<Duration> {
    if !config.revocation.check {
        return None;
    }
    let store = crate::store::Store::existing(&config.agent.state_dir);
    let now = clock.now();
    let installed = config
        .certificates
        .iter()
        .filter_map(|c| store.load(&c.name).ok()?.installed);
    let next =
        crate::revocation::kept_next_update(store.dir(), &config.revocation, installed, now)?;
    Some(crl_wake(next, now))
}

/// The wait until `next_update` (plus a second) from `now`, at least [`CRL_WAKE_MIN`].
fn crl_wake(next_update: time::OffsetDateTime, now: time::OffsetDateTime) -> Duration {
    let secs = (next_update - now).whole_seconds().saturating_add(1).max(0);
    Duration::from_secs(u64::try_from(secs).unwrap_or(0)).max(CRL_WAKE_MIN)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A configuration of one certificate `www` under `dir`, its state in `state`.
    fn one_certificate(dir: &std::path::Path, state: &std::path::Path) -> Config {
        let text = format!(
            "[api]\nbase_url = \"https://127.0.0.1:1\"\nlogin = \"a@b.test\"\n\
             password_file = \"/nonexistent\"\n\n[defaults]\ncountry = \"DE\"\n\
             region = \"Berlin\"\ncity = \"Berlin\"\n\n[agent]\n\
             state_dir = \"{}\"\n\n[[certificate]]\nname = \"www\"\n\
             domains = [\"www.example.com\"]\nproduct_id = 1101\nserver = \"none\"\n\
             cert_path = \"{d}/c.pem\"\nkey_path = \"{d}/k.pem\"\n\
             webroot = \"{d}/www\"\n",
            state.display(),
            d = dir.display()
        );
        Config::parse(&text, &dir.join("config.toml")).expect("configuration")
    }

    #[test]
    fn a_failed_run_is_retried_sooner_doubling_up_to_the_interval() {
        let minute = Duration::from_secs(60);
        let hour = Duration::from_secs(3600);
        let first = 2 * minute;
        let waits: Vec<u64> = (1..=8)
            .map(|n| retry_base(first, hour, n).as_secs())
            .collect();
        assert_eq!(waits, [120, 240, 480, 960, 1920, 3600, 3600, 3600]);
        // A thousand failures in a row neither overflow nor pass the interval.
        assert_eq!(retry_base(first, hour, u32::MAX), hour);
        // An interval shorter than the first retry: the first retry's wait.
        assert_eq!(retry_base(first, minute, 3), first);
    }

    #[test]
    fn the_retry_wait_replaces_the_schedule_and_keeps_its_jitter_bounded() {
        let dir = tempfile::tempdir().expect("temp dir");
        let config = one_certificate(dir.path(), &dir.path().join("state"));
        let opts = DaemonOptions {
            interval: Duration::from_secs(3600),
            retry_after_failure: Duration::from_secs(100),
            ..DaemonOptions::default()
        };
        for _ in 0..50 {
            let w = next_wait(&config, &opts, false, 1);
            assert!(
                w >= Duration::from_secs(100) && w <= Duration::from_secs(150),
                "{w:?}"
            );
            let w = next_wait(&config, &opts, false, 2);
            assert!(
                w >= Duration::from_secs(200) && w <= Duration::from_secs(300),
                "{w:?}"
            );
            // Not failed: the schedule.
            let w = next_wait(&config, &opts, false, 0);
            assert!(w >= Duration::from_secs(3000), "{w:?}");
        }
    }

    #[test]
    fn a_held_certificate_wakes_the_daemon_at_its_start() {
        let dir = tempfile::tempdir().expect("temp dir");
        let state = dir.path().join("state");
        let config = one_certificate(dir.path(), &state);
        let store = crate::store::Store::open(&state).expect("state");
        assert_eq!(until_held_valid(&config, Clock::SYSTEM), None);
        let mut rec = store.load("www").expect("record");
        rec.held = Some(Box::new(crate::store::Held {
            certificate_id: 7,
            serial: "0A".into(),
            not_before: Clock::SYSTEM.now() + time::Duration::minutes(10),
        }));
        store.save(&rec).expect("saved");
        let wait = until_held_valid(&config, Clock::SYSTEM).expect("a wake-up");
        assert!(
            wait > Duration::from_secs(590) && wait <= Duration::from_secs(601),
            "{wait:?}"
        );
        // Already valid: at once (a second).
        let later = Clock::shifted(time::Duration::minutes(20));
        assert_eq!(
            until_held_valid(&config, later),
            Some(Duration::from_secs(1))
        );
    }

    #[test]
    fn a_kept_crl_wakes_the_daemon_at_its_next_update_not_more_than_once_a_minute() {
        let now = time::OffsetDateTime::from_unix_timestamp(1_800_000_000).expect("time");
        // Due in ten minutes: woken a second after it.
        assert_eq!(
            crl_wake(now + time::Duration::minutes(10), now),
            Duration::from_secs(601)
        );
        // Due in a few seconds, due now or overdue (a CRL not yet replaced): a minute.
        for due in [
            time::Duration::seconds(5),
            time::Duration::ZERO,
            time::Duration::hours(-3),
        ] {
            assert_eq!(crl_wake(now + due, now), CRL_WAKE_MIN, "{due}");
        }
        // Far away: the caller's schedule (the shorter) decides.
        assert_eq!(
            crl_wake(now + time::Duration::days(7), now),
            Duration::from_secs(7 * 86_400 + 1)
        );
    }

    #[test]
    fn no_kept_crl_no_wake() {
        let dir = tempfile::tempdir().expect("temp dir");
        let config = one_certificate(dir.path(), &dir.path().join("state"));
        assert_eq!(until_crl_update(&config, Clock::SYSTEM), None);
        // A damaged kept CRL does not wake the daemon either.
        let crl = dir.path().join("state/crl");
        std::fs::create_dir_all(&crl).expect("crl dir");
        std::fs::write(crl.join("0123.crl"), b"garbage").expect("written");
        assert_eq!(until_crl_update(&config, Clock::SYSTEM), None);
    }
}
