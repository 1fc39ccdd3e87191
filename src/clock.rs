//! The agent's clock, a value passed down from where a command starts: every decision takes
//! `now` from the [`Clock`] it was given, and nothing below reads the system clock or the
//! environment for a decision.
//!
//! In debug builds `CERT_AGENT_TEST_CLOCK_OFFSET_SECS` shifts the clock by a number of
//! seconds ([`Clock::from_env`], read once per command), so tests can follow the sandbox's
//! virtual clock through years of renewals. Release builds always use the system clock.

use time::OffsetDateTime;

/// Environment variable that shifts the agent's clock by a number of seconds (debug builds
/// only).
pub const TEST_CLOCK_OFFSET_ENV: &str = "CERT_AGENT_TEST_CLOCK_OFFSET_SECS";

/// Where a command's time comes from: the system clock, shifted by a fixed offset in tests.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Clock {
    offset: time::Duration,
}

impl Clock {
    /// The system clock as it is.
    pub const SYSTEM: Clock = Clock {
        offset: time::Duration::ZERO,
    };

    /// The system clock, shifted by `CERT_AGENT_TEST_CLOCK_OFFSET_SECS` in debug builds.
    pub fn from_env() -> Self {
        if cfg!(debug_assertions)
            && let Some(secs) = std::env::var(TEST_CLOCK_OFFSET_ENV)
                .ok()
                .and_then(|v| v.trim().parse::<i64>().ok())
        {
            return Clock {
                offset: time::Duration::seconds(secs),
            };
        }
        Self::SYSTEM
    }

    /// The system clock shifted by `offset` (for tests of the library).
    pub fn shifted(offset: time::Duration) -> Self {
        Clock { offset }
    }

    /// The time now, by this clock.
    pub fn now(self) -> OffsetDateTime {
        OffsetDateTime::now_utc() + self.offset
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_shifted_clock_runs_ahead_by_its_offset() {
        let ahead = Clock::shifted(time::Duration::days(400)).now() - Clock::SYSTEM.now();
        assert!((ahead - time::Duration::days(400)).abs() < time::Duration::seconds(5));
    }
}
