//! The leader's local deadline: until when this host may act as the fleet's leader, counted
//! on the monotonic clock from the last lease renewal it *sent*, and the check its Partner API
//! client makes before every request against it.
//!
//! The monotonic clock runs on while the process is stopped (SIGSTOP, a frozen VM): a leader
//! that resumes after its lease ended finds its deadline passed before it sends or writes
//! anything, whether or not its renewal task has run since.

use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::{Duration, Instant};

use crate::api::SendGuard;

/// Until the lead is lost: a deadline (when the leader must have stopped acting), or `None`
/// once lost for good.
pub(super) type Held = Arc<Mutex<Option<Instant>>>;

/// Why a leader's request to the Partner API was not sent: the lead's deadline passed.
pub const LEAD_EXPIRED: &str =
    "this host's lead of the fleet expired (paused or cut off from etcd)";

/// Why a leader's request to the Partner API was not sent: the lease was not renewed in time
/// to leave the request its margin.
pub const LEAD_EXPIRING: &str =
    "this host's lead of the fleet is about to expire (its lease was not renewed in time)";

/// How long a renewal answered with `ttl` seconds lets the leader act: the TTL less a margin
/// of a fifth (at least 1 s), counted from when the renewal was sent.
pub(super) fn deadline_of(ttl: i64) -> Duration {
    let ttl = Duration::from_secs(u64::try_from(ttl).unwrap_or(0));
    ttl.saturating_sub((ttl / 5).max(Duration::from_secs(1)))
}

pub(super) fn lock(held: &Held) -> MutexGuard<'_, Option<Instant>> {
    held.lock().unwrap_or_else(PoisonError::into_inner)
}

/// The check before each request of the leader's Partner API client: refused once less than
/// a tenth of the lease `ttl` (at least 200 ms) is left before the deadline — the request
/// then could reach the API after another host took the lead. Past the deadline the lead is
/// lost for good (as [`Leadership::ensure_held`](super::Leadership::ensure_held) finds it).
pub(super) fn send_guard(held: Held, ttl: Duration) -> SendGuard {
    let margin = (ttl / 10).max(Duration::from_millis(200));
    SendGuard::new(move || {
        let mut h = lock(&held);
        let now = Instant::now();
        match *h {
            Some(deadline) if now + margin < deadline => Ok(()),
            Some(deadline) if now < deadline => Err(LEAD_EXPIRING.to_owned()),
            _ => {
                *h = None;
                Err(LEAD_EXPIRED.to_owned())
            }
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_guard_refuses_near_and_past_the_deadline() {
        let ttl = Duration::from_secs(5);
        let held: Held = Arc::new(Mutex::new(Some(Instant::now() + Duration::from_secs(3))));
        let guard = send_guard(held.clone(), ttl);
        assert_eq!(guard.check(), Ok(()));

        *lock(&held) = Some(Instant::now() + Duration::from_millis(300));
        assert_eq!(guard.check(), Err(LEAD_EXPIRING.to_owned()));
        assert!(lock(&held).is_some(), "a late renewal may still come");

        // As after a pause: the deadline passed while the process was stopped.
        *lock(&held) = Instant::now().checked_sub(Duration::from_secs(1));
        assert_eq!(guard.check(), Err(LEAD_EXPIRED.to_owned()));
        assert!(lock(&held).is_none(), "lost for good");
        *lock(&held) = None;
        assert_eq!(guard.check(), Err(LEAD_EXPIRED.to_owned()));
    }

    #[test]
    fn a_renewal_leaves_a_fifth_of_the_ttl_at_least_a_second() {
        assert_eq!(deadline_of(15), Duration::from_secs(12));
        assert_eq!(deadline_of(3), Duration::from_secs(2));
        assert_eq!(deadline_of(0), Duration::ZERO);
        assert_eq!(deadline_of(-1), Duration::ZERO);
    }
}
