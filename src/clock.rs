//! The agent's clock, a value passed down from where a command starts: every decision takes
//! `now` from the [`Clock`] it was given, and nothing below reads the system clock or the
//! environment for a decision.
//!
//! In debug builds `CERT_AGENT_TEST_CLOCK_OFFSET_SECS` shifts the clock by a number of
//! seconds ([`Clock::from_env`], read once per command), so tests can follow the sandbox's
//! virtual clock through years of renewals. Release builds always use the system clock.

use time::format_description::well_known::Rfc3339;
use time::{OffsetDateTime, UtcOffset};

/// Environment variable that shifts the agent's clock by a number of seconds (debug builds
/// only).
pub(crate) const TEST_CLOCK_OFFSET_ENV: &str = "CERT_AGENT_TEST_CLOCK_OFFSET_SECS";

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

/// `2026-11-21T00:13:05Z`: UTC to the second, the agent's one exact form of a time (records,
/// JSON, and messages that quote a certificate's or a CRL's time).
pub(crate) fn rfc3339(t: OffsetDateTime) -> String {
    let t = t.to_offset(UtcOffset::UTC);
    let whole = t.replace_nanosecond(0).unwrap_or(t);
    whole.format(&Rfc3339).unwrap_or_else(|_| whole.to_string())
}

/// `2026-11-21 00:13 UTC`: UTC to the minute, the form people read in `status`, `check`,
/// plans and notifications.
pub(crate) fn short_time(t: OffsetDateTime) -> String {
    let t = t.to_offset(UtcOffset::UTC);
    format!("{} {:02}:{:02} UTC", t.date(), t.hour(), t.minute())
}

/// `00:13:05 UTC`: the time of day to the second, for a moment within the next minutes
/// (when a waiting run checks again).
pub(crate) fn time_of_day(t: OffsetDateTime) -> String {
    let t = t.to_offset(UtcOffset::UTC);
    format!("{:02}:{:02}:{:02} UTC", t.hour(), t.minute(), t.second())
}

#[cfg(test)]
mod tests {
    use super::*;
    use time::macros::datetime;

    #[test]
    fn times_are_written_in_utc_to_the_second_or_to_the_minute() {
        let t = datetime!(2026-11-21 01:13:05.75 +01:00);
        assert_eq!(rfc3339(t), "2026-11-21T00:13:05Z");
        assert_eq!(short_time(t), "2026-11-21 00:13 UTC");
        let late = datetime!(2026-12-31 23:59:59.999 UTC);
        assert_eq!(rfc3339(late), "2026-12-31T23:59:59Z");
        assert_eq!(short_time(late), "2026-12-31 23:59 UTC");
        assert_eq!(time_of_day(t), "00:13:05 UTC");
    }

    #[test]
    fn a_shifted_clock_runs_ahead_by_its_offset() {
        let ahead = Clock::shifted(time::Duration::days(400)).now() - Clock::SYSTEM.now();
        assert!((ahead - time::Duration::days(400)).abs() < time::Duration::seconds(5));
    }
}
