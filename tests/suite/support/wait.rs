//! Waiting on an event with a deadline: the one way a test waits for something to happen.
//!
//! A test that needs a file, a log line, an etcd value, a port or a process exit polls for it
//! here instead of sleeping a fixed time: it goes on as soon as the event happens, and a
//! missed event fails the test naming what it waited for. A `sleep` left in a test is one
//! where the passing of time is what the test checks (a lease that must run out, a window in
//! which nothing may happen); each says so beside it.

// `tests/api_logs.rs` includes these helpers too and uses few of them.
#![allow(dead_code)]

use std::time::{Duration, Instant};

/// How often a condition is polled.
const POLL: Duration = Duration::from_millis(20);

/// Polls `happened` until it is true or `limit` passes; whether it happened.
pub(crate) fn poll(limit: Duration, mut happened: impl FnMut() -> bool) -> bool {
    let deadline = Instant::now() + limit;
    loop {
        if happened() {
            return true;
        }
        if Instant::now() > deadline {
            return false;
        }
        std::thread::sleep(POLL);
    }
}

/// Waits until `happened` is true; after `limit`, panics naming `what` it waited for.
pub(crate) fn until(limit: Duration, what: &str, happened: impl FnMut() -> bool) {
    until_with(limit, what, happened, String::new);
}

/// As [`until`], the panic message followed by `context()` (e.g. the hosts' logs).
pub(crate) fn until_with(
    limit: Duration,
    what: &str,
    happened: impl FnMut() -> bool,
    context: impl FnOnce() -> String,
) {
    if !poll(limit, happened) {
        panic!(
            "waited {limit:?} for {what}; it did not happen\n{}",
            context()
        );
    }
}

/// As [`until`] inside an async test: the runtime's other tasks (an in-process daemon or
/// server) go on while it waits.
pub(crate) async fn until_async(limit: Duration, what: &str, mut happened: impl FnMut() -> bool) {
    let deadline = Instant::now() + limit;
    while !happened() {
        assert!(
            Instant::now() <= deadline,
            "waited {limit:?} for {what}; it did not happen"
        );
        tokio::time::sleep(POLL).await;
    }
}
