//! The sandbox's virtual clock: start time + real elapsed time × scale + whatever the control API
//! advanced. Every state call receives this `now`; responses carry it in their `Date` header.

use std::time::Instant;

use time::{Duration, OffsetDateTime, UtcOffset};

/// Virtual time. Monotonic: it never goes back, whatever the scale.
#[derive(Debug, Clone)]
pub struct Clock {
    start_virtual: OffsetDateTime,
    start_real: Instant,
    scale: f64,
    offset: Duration,
}

impl Clock {
    /// A clock that reads `start` now and runs `scale` times faster than real time afterwards
    /// (`scale` must be finite and > 0; anything else is taken as 1).
    pub fn new(start: OffsetDateTime, scale: f64) -> Self {
        let scale = if scale.is_finite() && scale > 0.0 {
            scale
        } else {
            1.0
        };
        Self {
            start_virtual: start.to_offset(UtcOffset::UTC),
            start_real: Instant::now(),
            scale,
            offset: Duration::ZERO,
        }
    }

    /// The current virtual time (UTC), truncated to whole milliseconds.
    pub fn now(&self) -> OffsetDateTime {
        let real = self.start_real.elapsed().as_secs_f64() * self.scale;
        let scaled = Duration::seconds_f64(real.min(1.0e12));
        let t = self.start_virtual + scaled + self.offset;
        let ms = t.millisecond();
        t.replace_millisecond(ms).unwrap_or(t)
    }

    /// Moves virtual time forward by `by` (negative amounts are ignored).
    pub fn advance(&mut self, by: Duration) {
        if by.is_positive() {
            self.offset += by;
        }
    }

    /// How far the time scale has moved virtual time ahead of real time since the start
    /// (zero at a scale of 1 or less; what `advance` added is not part of it).
    pub fn scale_drift(&self) -> Duration {
        if self.scale <= 1.0 {
            return Duration::ZERO;
        }
        let ahead = self.start_real.elapsed().as_secs_f64() * (self.scale - 1.0);
        Duration::seconds_f64(ahead.min(1.0e12))
    }

    /// How many virtual seconds pass per real second.
    pub fn scale(&self) -> f64 {
        self.scale
    }
}

/// `Sun, 06 Nov 1994 08:49:37 GMT` (IMF-fixdate, RFC 9110 §5.6.7), for the `Date` header.
pub fn http_date(t: OffsetDateTime) -> String {
    let t = t.to_offset(UtcOffset::UTC);
    let weekday = ["Mon", "Tue", "Wed", "Thu", "Fri", "Sat", "Sun"]
        [usize::from(t.weekday().number_days_from_monday())];
    let month = [
        "Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec",
    ][usize::from(u8::from(t.month()) - 1)];
    format!(
        "{weekday}, {:02} {month} {:04} {:02}:{:02}:{:02} GMT",
        t.day(),
        t.year(),
        t.hour(),
        t.minute(),
        t.second()
    )
}

/// `2026-05-01T12:00:00.250Z` (RFC 3339, UTC, milliseconds).
pub fn rfc3339(t: OffsetDateTime) -> String {
    let t = t.to_offset(UtcOffset::UTC);
    format!(
        "{:04}-{:02}-{:02}T{:02}:{:02}:{:02}.{:03}Z",
        t.year(),
        u8::from(t.month()),
        t.day(),
        t.hour(),
        t.minute(),
        t.second(),
        t.millisecond()
    )
}

/// Serde helper: an `OffsetDateTime` as an RFC 3339 string (written) or a Unix timestamp in
/// seconds (read back).
pub(crate) mod serde_rfc3339 {
    use serde::{Deserialize, Deserializer, Serializer};
    use time::OffsetDateTime;

    pub(crate) fn serialize<S: Serializer>(t: &OffsetDateTime, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(&super::rfc3339(*t))
    }

    pub(crate) fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<OffsetDateTime, D::Error> {
        let s = String::deserialize(d)?;
        super::parse_rfc3339(&s).ok_or_else(|| serde::de::Error::custom(format!("bad time '{s}'")))
    }
}

/// Parses what [`rfc3339`] writes (UTC, `Z`, optional fraction).
pub fn parse_rfc3339(s: &str) -> Option<OffsetDateTime> {
    let s = s.strip_suffix('Z')?;
    let (date, clock) = s.split_once('T')?;
    let mut d = date.splitn(3, '-');
    let year: i32 = d.next()?.parse().ok()?;
    let month: u8 = d.next()?.parse().ok()?;
    let day: u8 = d.next()?.parse().ok()?;
    let (hms, frac) = clock.split_once('.').unwrap_or((clock, "0"));
    let mut c = hms.splitn(3, ':');
    let hour: u8 = c.next()?.parse().ok()?;
    let minute: u8 = c.next()?.parse().ok()?;
    let second: u8 = c.next()?.parse().ok()?;
    let frac = format!("{frac:0<9}");
    let nanos: u32 = frac.get(..9)?.parse().ok()?;
    let date =
        time::Date::from_calendar_date(year, time::Month::try_from(month).ok()?, day).ok()?;
    let time = time::Time::from_hms_nano(hour, minute, second, nanos).ok()?;
    Some(time::PrimitiveDateTime::new(date, time).assume_utc())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn http_date_is_imf_fixdate() {
        let t = OffsetDateTime::from_unix_timestamp(784_111_777).expect("valid");
        assert_eq!(http_date(t), "Sun, 06 Nov 1994 08:49:37 GMT");
    }

    #[test]
    fn rfc3339_round_trips() {
        let t = OffsetDateTime::from_unix_timestamp_nanos(1_777_777_777_250_000_000).expect("ok");
        let s = rfc3339(t);
        assert_eq!(s, "2026-05-03T03:09:37.250Z");
        assert_eq!(parse_rfc3339(&s), Some(t));
    }

    #[test]
    fn advance_moves_forward_only() {
        let start = OffsetDateTime::from_unix_timestamp(1_000_000_000).expect("valid");
        let mut c = Clock::new(start, 1.0);
        c.advance(Duration::days(3));
        c.advance(Duration::days(-10));
        let now = c.now();
        assert!(now >= start + Duration::days(3));
        assert!(now < start + Duration::days(3) + Duration::minutes(1));
    }

    #[test]
    fn scale_speeds_time_up() {
        let start = OffsetDateTime::from_unix_timestamp(1_000_000_000).expect("valid");
        let c = Clock::new(start, 100_000.0);
        std::thread::sleep(std::time::Duration::from_millis(20));
        assert!(c.now() >= start + Duration::seconds(1000));
    }

    #[test]
    fn scale_drift_is_the_lead_of_the_scale_alone() {
        let start = OffsetDateTime::from_unix_timestamp(1_000_000_000).expect("valid");
        let mut fast = Clock::new(start, 1_000.0);
        fast.advance(Duration::days(30));
        std::thread::sleep(std::time::Duration::from_millis(20));
        let drift = fast.scale_drift();
        assert!(drift >= Duration::seconds(19), "{drift}");
        // What `advance` added is not part of it: the virtual time less the drift is the real
        // time elapsed plus the advance.
        let real = fast.now() - drift - start - Duration::days(30);
        assert!(real < Duration::seconds(5), "{real}");
        assert_eq!(Clock::new(start, 1.0).scale_drift(), Duration::ZERO);
        assert_eq!(Clock::new(start, 0.5).scale_drift(), Duration::ZERO);
    }
}
