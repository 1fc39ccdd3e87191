//! The agent's clock. Every decision of a run takes `now` from here once and passes it on;
//! nothing below reads the system clock for a decision.
//!
//! In debug builds `CERT_AGENT_TEST_CLOCK_OFFSET_SECS` shifts the clock by a number of
//! seconds, so tests can follow the sandbox's virtual clock through years of renewals.
//! Release builds always use the system clock.

use time::OffsetDateTime;

/// Environment variable that shifts the agent's clock by a number of seconds (debug builds
/// only).
pub const TEST_CLOCK_OFFSET_ENV: &str = "CERT_AGENT_TEST_CLOCK_OFFSET_SECS";

/// The time every decision of a run uses.
pub fn now() -> OffsetDateTime {
    let real = OffsetDateTime::now_utc();
    if cfg!(debug_assertions)
        && let Some(secs) = std::env::var(TEST_CLOCK_OFFSET_ENV)
            .ok()
            .and_then(|v| v.trim().parse::<i64>().ok())
    {
        return real + time::Duration::seconds(secs);
    }
    real
}
