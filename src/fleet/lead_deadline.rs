//! The leader's local deadline: until when this host may act as the fleet's leader, counted
//! on the boot clock from the last lease renewal it *sent*, and the check its Partner API
//! client makes before every request against it.
//!
//! The deadline is a [`BootInstant`], read from `CLOCK_BOOTTIME`: unlike the monotonic clock
//! (`std::time::Instant`, `CLOCK_MONOTONIC`, which on Linux stands still while the system or
//! its VM is suspended), it runs on through a suspend as well as while the process is stopped
//! (SIGSTOP) or starved. A leader that resumes after its lease ended finds its deadline passed
//! before it sends or writes anything, whether or not its renewal task has run since.

use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::Duration;

use nix::time::{ClockId, clock_gettime};

use crate::api::SendGuard;

/// A point in time on `CLOCK_BOOTTIME`: like [`std::time::Instant`], but the time the system
/// spent suspended counts too. Only comparable with other `BootInstant`s of the same boot.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub(crate) struct BootInstant(Duration);

impl BootInstant {
    /// Now. A boot clock that cannot be read (never seen on Linux) reads as the end of time,
    /// so that every deadline counts as passed: a leader that cannot tell the time stops.
    pub(crate) fn now() -> Self {
        match clock_gettime(ClockId::CLOCK_BOOTTIME) {
            Ok(t) => Self::from_parts(t.tv_sec(), t.tv_nsec()),
            Err(_) => Self(Duration::MAX),
        }
    }

    fn from_parts(secs: i64, nanos: i64) -> Self {
        let secs = u64::try_from(secs).unwrap_or(0);
        let nanos = u32::try_from(nanos).unwrap_or(0).min(999_999_999);
        Self(Duration::new(secs, nanos))
    }

    /// `self` moved `d` later (the end of time at most).
    pub(crate) fn saturating_add(self, d: Duration) -> Self {
        Self(self.0.saturating_add(d))
    }

    /// `self` moved `d` earlier, `None` before the clock's start.
    #[cfg(test)]
    pub(crate) fn checked_sub(self, d: Duration) -> Option<Self> {
        self.0.checked_sub(d).map(Self)
    }

    /// How long after `earlier` this is (zero when it is not after it).
    pub(crate) fn saturating_duration_since(self, earlier: Self) -> Duration {
        self.0.saturating_sub(earlier.0)
    }
}

/// Until the lead is lost: a deadline (when the leader must have stopped acting), or `None`
/// once lost for good.
pub(super) type Held = Arc<Mutex<Option<BootInstant>>>;

/// Why a leader's request to the Partner API was not sent: the lead's deadline passed.
pub(crate) const LEAD_EXPIRED: &str =
    "this host's lead of the fleet expired (paused or cut off from etcd)";

/// Why a leader's request to the Partner API was not sent: the lease was not renewed in time
/// to leave the request its margin.
pub(crate) const LEAD_EXPIRING: &str =
    "this host's lead of the fleet is about to expire (its lease was not renewed in time)";

/// How long a renewal answered with `ttl` seconds lets the leader act: the TTL less a margin
/// of a fifth (at least 1 s), counted from when the renewal was sent.
pub(super) fn deadline_of(ttl: i64) -> Duration {
    let ttl = Duration::from_secs(u64::try_from(ttl).unwrap_or(0));
    ttl.saturating_sub((ttl / 5).max(Duration::from_secs(1)))
}

pub(super) fn lock(held: &Held) -> MutexGuard<'_, Option<BootInstant>> {
    held.lock().unwrap_or_else(PoisonError::into_inner)
}

/// The margin a request keeps from the lead's deadline: a tenth of the lease `ttl`, at least
/// 200 ms.
fn margin_of(ttl: Duration) -> Duration {
    (ttl / 10).max(Duration::from_millis(200))
}

/// How long a request may take to be sent at `now`: until `margin` before `deadline`, or why
/// no request may be sent any more. Past the deadline the lead is lost (`Err(true)`); within
/// the margin it may still be renewed (`Err(false)`).
fn remaining_at(
    deadline: BootInstant,
    margin: Duration,
    now: BootInstant,
) -> Result<Duration, bool> {
    let left = deadline.saturating_duration_since(now);
    if left.is_zero() {
        return Err(true);
    }
    match left.checked_sub(margin) {
        Some(d) if !d.is_zero() => Ok(d),
        _ => Err(false),
    }
}

/// The check before each request of the leader's Partner API client: it yields the time the
/// request has to be sent in — until a tenth of the lease `ttl` (at least 200 ms) before the
/// deadline — and refuses once none is left: the request then could reach the API after
/// another host took the lead. The client abandons a request not sent within that time. Past
/// the deadline the lead is lost for good (as
/// [`Leadership::ensure_held`](super::Leadership::ensure_held) finds it).
pub(super) fn send_guard(held: Held, ttl: Duration) -> SendGuard {
    let margin = margin_of(ttl);
    SendGuard::with_deadline(move || {
        let mut h = lock(&held);
        let lost = match *h {
            Some(deadline) => match remaining_at(deadline, margin, BootInstant::now()) {
                Ok(left) => return Ok(left),
                Err(lost) => lost,
            },
            None => true,
        };
        if lost {
            *h = None;
            Err(LEAD_EXPIRED.to_owned())
        } else {
            Err(LEAD_EXPIRING.to_owned())
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn held_until(d: Option<BootInstant>) -> Held {
        Arc::new(Mutex::new(d))
    }

    #[test]
    fn the_guard_refuses_near_and_past_the_deadline() {
        let ttl = Duration::from_secs(5);
        let held = held_until(Some(
            BootInstant::now().saturating_add(Duration::from_secs(3)),
        ));
        let guard = send_guard(held.clone(), ttl);
        assert_eq!(guard.check(), Ok(()));

        *lock(&held) = Some(BootInstant::now().saturating_add(Duration::from_millis(300)));
        assert_eq!(guard.check(), Err(LEAD_EXPIRING.to_owned()));
        assert!(lock(&held).is_some(), "a late renewal may still come");

        // As after a pause: the deadline passed while the process was stopped.
        *lock(&held) = BootInstant::now().checked_sub(Duration::from_secs(1));
        assert_eq!(guard.check(), Err(LEAD_EXPIRED.to_owned()));
        assert!(lock(&held).is_none(), "lost for good");
        *lock(&held) = None;
        assert_eq!(guard.check(), Err(LEAD_EXPIRED.to_owned()));
    }

    #[test]
    fn the_guard_yields_the_time_left_before_the_margin() {
        let ttl = Duration::from_secs(5);
        let held = held_until(Some(
            BootInstant::now().saturating_add(Duration::from_secs(3)),
        ));
        let left = send_guard(held, ttl)
            .remaining()
            .expect("3 s left")
            .expect("a deadline");
        // 3 s to the deadline less the 500 ms margin, less the time this test took.
        assert!(left <= Duration::from_millis(2500), "{left:?}");
        assert!(left > Duration::from_millis(2000), "{left:?}");
    }

    #[test]
    fn the_time_left_is_the_deadline_less_the_margin_and_now() {
        let t0 = BootInstant::from_parts(1_000, 0);
        let at = |ms: u64| t0.saturating_add(Duration::from_millis(ms));
        let margin = Duration::from_millis(500);
        let deadline = at(3_000);
        assert_eq!(
            remaining_at(deadline, margin, t0),
            Ok(Duration::from_millis(2500))
        );
        assert_eq!(
            remaining_at(deadline, margin, at(2_499)),
            Ok(Duration::from_millis(1))
        );
        assert_eq!(remaining_at(deadline, margin, at(2_500)), Err(false));
        assert_eq!(remaining_at(deadline, margin, at(2_999)), Err(false));
        assert_eq!(remaining_at(deadline, margin, at(3_000)), Err(true));
        assert_eq!(remaining_at(deadline, margin, at(60_000)), Err(true));
        assert_eq!(
            margin_of(Duration::from_secs(15)),
            Duration::from_millis(1500)
        );
        assert_eq!(
            margin_of(Duration::from_secs(1)),
            Duration::from_millis(200)
        );
    }

    #[test]
    fn the_boot_clock_runs_on_and_counts_what_the_monotonic_clock_counts() {
        let (b0, m0) = (BootInstant::now(), std::time::Instant::now());
        std::thread::sleep(Duration::from_millis(50));
        let (b1, m1) = (BootInstant::now(), std::time::Instant::now());
        let boot = b1.saturating_duration_since(b0);
        let mono = m1.duration_since(m0);
        assert!(boot >= Duration::from_millis(50), "{boot:?}");
        // Without a suspend in between both clocks advance alike (a suspend adds to the boot
        // clock only); a boot clock of the wrong kind (wall time, a frozen value) shows here.
        let diff = boot.abs_diff(mono);
        assert!(
            diff < Duration::from_millis(100),
            "{boot:?} against {mono:?}"
        );
        assert!(b0 < b1 && b1 != BootInstant(Duration::MAX));
        // Its reading is the kernel's CLOCK_BOOTTIME: at least the monotonic clock's
        // (equal until the first suspend).
        let mono_now = clock_gettime(ClockId::CLOCK_MONOTONIC).expect("the monotonic clock");
        let boot_now = BootInstant::now();
        let mono_now = BootInstant::from_parts(mono_now.tv_sec(), mono_now.tv_nsec());
        assert!(boot_now >= mono_now, "{boot_now:?} < {mono_now:?}");
    }

    #[test]
    fn boot_instants_saturate_instead_of_panicking() {
        let end = BootInstant(Duration::MAX);
        assert_eq!(end.saturating_add(Duration::from_secs(1)), end);
        assert_eq!(BootInstant::from_parts(-5, -1), BootInstant(Duration::ZERO));
        assert_eq!(
            BootInstant(Duration::ZERO).checked_sub(Duration::from_nanos(1)),
            None
        );
        let t = BootInstant::from_parts(10, 0);
        assert_eq!(t.saturating_duration_since(end), Duration::ZERO);
        assert_eq!(
            end.saturating_duration_since(t),
            Duration::MAX - Duration::from_secs(10)
        );
    }

    #[test]
    fn a_renewal_leaves_a_fifth_of_the_ttl_at_least_a_second() {
        assert_eq!(deadline_of(15), Duration::from_secs(12));
        assert_eq!(deadline_of(3), Duration::from_secs(2));
        assert_eq!(deadline_of(0), Duration::ZERO);
        assert_eq!(deadline_of(-1), Duration::ZERO);
    }
}
