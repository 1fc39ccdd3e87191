//! How long the follow loop waits before it tries a failed synchronisation again: 1 s,
//! doubling to 60 s, each wait shortened by up to a quarter at random (hosts that failed
//! together do not all read the fleet again together), and back to 1 s after a success. A
//! synchronisation that cannot succeed by itself (a wrong fleet key, a state file that cannot
//! be saved, a refused create) then reads the fleet and logs about once a minute, not every
//! second.

use std::time::Duration;

/// The first wait after a failure.
const FIRST: Duration = Duration::from_secs(1);
/// The longest wait.
const MOST: Duration = Duration::from_secs(60);

/// The failures of the follow loop's synchronisation in a row.
#[derive(Debug, Default)]
pub(super) struct Retry {
    failures: u32,
}

impl Retry {
    /// Notes a failure: how long to wait before the next attempt.
    pub(super) fn failed(&mut self) -> Duration {
        let wait = wait_after(self.failures, rand::random::<f64>());
        self.failures = self.failures.saturating_add(1);
        wait
    }

    /// Notes a success: the next failure waits [`FIRST`] again.
    pub(super) fn succeeded(&mut self) {
        self.failures = 0;
    }
}

/// The wait after `earlier` failures in a row before this one: [`FIRST`] doubled `earlier`
/// times, [`MOST`] at most, less `fraction` (in `[0, 1)`) of a quarter of it.
fn wait_after(earlier: u32, fraction: f64) -> Duration {
    let full = FIRST
        .checked_mul(1u32.checked_shl(earlier).unwrap_or(u32::MAX))
        .unwrap_or(MOST)
        .min(MOST);
    full.saturating_sub((full / 4).mul_f64(fraction.clamp(0.0, 1.0)))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn waits_double_from_a_second_to_a_minute() {
        let waits: Vec<u64> = (0..10).map(|n| wait_after(n, 0.0).as_secs()).collect();
        assert_eq!(waits, [1, 2, 4, 8, 16, 32, 60, 60, 60, 60]);
        assert_eq!(wait_after(u32::MAX, 0.0), MOST);
        assert_eq!(wait_after(40, 0.0), MOST);
    }

    #[test]
    fn the_jitter_shortens_a_wait_by_a_quarter_at_most() {
        assert_eq!(wait_after(0, 0.5), Duration::from_millis(875));
        let nearly = wait_after(6, 0.999_999);
        assert!(nearly >= Duration::from_secs(45), "{nearly:?}");
        assert!(nearly < Duration::from_millis(45_001), "{nearly:?}");
        assert_eq!(wait_after(6, 7.0), Duration::from_secs(45));
        assert_eq!(wait_after(6, -1.0), MOST);
        let mut r = Retry::default();
        for n in 0..12 {
            let w = r.failed();
            let full = wait_after(n, 0.0);
            assert!(w <= full && w >= full * 3 / 4, "{n}: {w:?}");
        }
    }

    #[test]
    fn a_success_starts_again_at_a_second() {
        let mut r = Retry::default();
        for _ in 0..8 {
            r.failed();
        }
        assert!(r.failed() > Duration::from_secs(40));
        r.succeeded();
        assert!(r.failed() <= FIRST);
        assert!(r.failed() <= Duration::from_secs(2));
    }
}
