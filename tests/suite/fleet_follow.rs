//! The daemon's follow loop when a synchronisation keeps failing (here the state directory
//! cannot be opened: its `keys` is a file): it tries again after 1 s, doubling to 60 s, not
//! every second — each attempt reads the whole fleet and logs. Real etcd (three members), real
//! nginx.

use std::time::Duration;

use crate::fleet_e2e::{Fleet, ready};
use support::env::wait_until;

use crate::support;

/// The follow loop's warnings about `needle` in the logs.
fn failures(f: &Fleet, needle: &str) -> usize {
    f.logs()
        .lines()
        .filter(|l| l.contains("fleet: ") && l.contains(needle))
        .count()
}

#[test]
fn a_failing_synchronisation_is_tried_again_after_a_doubling_wait() {
    if !ready() {
        return;
    }
    let mut f = Fleet::pair("/retry/");
    // A resynchronisation every second: without the backoff each one would try again.
    f.start_daemon_with(1, &[("CERT_AGENT_TEST_FLEET_RESYNC_SECS", "1")]);
    let keys = f.hosts[1].state.join("keys");
    assert!(
        wait_until(Duration::from_secs(30), || keys.is_dir()),
        "the daemon did not synchronise\n{}",
        f.logs()
    );
    std::fs::remove_dir_all(&keys).expect("keys removed");
    std::fs::write(&keys, "not a directory").expect("keys replaced by a file");
    let needle = keys.display().to_string();
    assert!(
        wait_until(Duration::from_secs(10), || failures(&f, &needle) > 0),
        "the synchronisation did not fail\n{}",
        f.logs()
    );
    // Attempts at about 0, 1, 3, 7 and 15 s (each wait shortened by up to a quarter): five at
    // most in 14 s, where one a second makes fifteen.
    std::thread::sleep(Duration::from_secs(14));
    let seen = failures(&f, &needle);
    assert!(
        (3..=6).contains(&seen),
        "{seen} failed synchronisations in 14 s\n{}",
        f.logs()
    );
}
