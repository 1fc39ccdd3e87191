//! The end of email validation (CA/Browser Forum ballot SC-090): from 2028-03-15 no CA may
//! validate a domain by email to admin@/webmaster@-style or CAA/TXT contact addresses, and no
//! earlier email validation may be reused. Every certificate configured with `dcv = "email"`
//! is reported (WARNING until 90 days before the date, CRITICAL from then on) so that it is
//! moved to HTTP or DNS validation (`cert-agent dcv migrate`) in time.

use time::{Date, OffsetDateTime};

use crate::config::{CertificateConfig, DcvMethod};

/// The first day on which email validation (and the reuse of an earlier one) is forbidden.
pub(crate) const EMAIL_SUNSET: Date = time::macros::date!(2028 - 03 - 15);

/// From this many days before [`EMAIL_SUNSET`] an email-validated certificate is CRITICAL.
pub(crate) const CRITICAL_DAYS: i64 = 90;

/// How close the end of email validation is for one certificate.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub(crate) enum Stage {
    /// More than [`CRITICAL_DAYS`] before the date.
    Warning,
    /// Within [`CRITICAL_DAYS`] of the date.
    Critical,
    /// On or after the date: the certificate cannot be renewed as configured.
    Ended,
}

/// An email-validated certificate and how close the end of email validation is.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub(crate) struct EmailSunset {
    pub stage: Stage,
    /// Days from `now` to [`EMAIL_SUNSET`] (negative once it has passed).
    pub days_left: i64,
    /// One line for `status` and `check`, naming the date and what to do.
    pub message: String,
}

/// Whether `date` falls on or after [`EMAIL_SUNSET`]: an email validation cannot be made or
/// reused then.
pub(crate) fn email_ended_on(date: Date) -> bool {
    date >= EMAIL_SUNSET
}

/// The sunset of `cert`'s email validation at `now`; `None` when it does not validate by
/// email.
pub(crate) fn email_sunset(cert: &CertificateConfig, now: OffsetDateTime) -> Option<EmailSunset> {
    if cert.dcv.method != DcvMethod::Email {
        return None;
    }
    let days_left = (EMAIL_SUNSET - now.date()).whole_days();
    let stage = if days_left <= 0 {
        Stage::Ended
    } else if days_left <= CRITICAL_DAYS {
        Stage::Critical
    } else {
        Stage::Warning
    };
    let move_it = format!(
        "move it to HTTP or DNS validation: `cert-agent dcv migrate {} --to http` (or \
         `--to dns`)",
        cert.name
    );
    let message = match stage {
        Stage::Ended => format!(
            "validates by email (dcv = \"email\"), which ended on {EMAIL_SUNSET} (CA/B Forum \
             SC-090): no order or reissue can be validated by email, nor reuse an email \
             validation; {move_it}"
        ),
        _ => format!(
            "validates by email (dcv = \"email\"), which ends on {EMAIL_SUNSET} ({days_left} \
             days left; CA/B Forum SC-090, reuse of earlier email validations included); \
             {move_it}"
        ),
    };
    Some(EmailSunset {
        stage,
        days_left,
        message,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use time::macros::datetime;

    #[test]
    fn stages_follow_the_date() {
        let mut cert = crate::config::testing::certificate(
            "name = \"www\"\ndomains = [\"www.example.org\"]\nproduct_id = 101",
        );
        assert_eq!(email_sunset(&cert, datetime!(2026-11-28 12:00 UTC)), None);
        cert.dcv.method = DcvMethod::Email;
        let at = |t| email_sunset(&cert, t).map(|s| (s.stage, s.days_left));
        assert_eq!(
            at(datetime!(2027-12-15 23:59 UTC)),
            Some((Stage::Warning, 91))
        );
        assert_eq!(
            at(datetime!(2027-12-16 00:00 UTC)),
            Some((Stage::Critical, 90))
        );
        assert_eq!(
            at(datetime!(2028-03-14 23:59 UTC)),
            Some((Stage::Critical, 1))
        );
        assert_eq!(at(datetime!(2028-03-15 00:00 UTC)), Some((Stage::Ended, 0)));
        let s = email_sunset(&cert, datetime!(2028-04-01 00:00 UTC)).unwrap();
        assert!(
            s.message.contains("ended on 2028-03-15")
                && s.message.contains("dcv migrate www --to http"),
            "{}",
            s.message
        );
        assert!(!email_ended_on(time::macros::date!(2028 - 03 - 14)));
        assert!(email_ended_on(EMAIL_SUNSET));
    }
}
