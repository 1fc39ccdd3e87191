//! The parts of a certificate's record that stand on their own: the last validation of a
//! domain, what the CRL said, the fleet's last attempt, a held certificate and the placeholder
//! written at the install paths.

use serde::{Deserialize, Serialize};
use time::OffsetDateTime;

/// The last successful validation of one domain, as the agent saw it: the certificate it
/// validated was issued.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ValidationMark {
    /// `HTTP`, `DNS` or `EMAIL`.
    pub method: String,
    #[serde(with = "time::serde::rfc3339")]
    pub at: OffsetDateTime,
}

/// What the CRL said of an installed certificate when a run last read it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct RevocationSeen {
    /// The serial it was said of.
    pub serial: String,
    /// `good`, `revoked`, `unknown` or `no_crl`.
    pub state: String,
    /// The CRL's URL, when one was read or tried.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub url: Option<String>,
    /// What was found, in words.
    pub detail: String,
    /// When the CRL says it was revoked (`revoked` only).
    #[serde(
        default,
        skip_serializing_if = "Option::is_none",
        with = "time::serde::rfc3339::option"
    )]
    pub revoked_at: Option<OffsetDateTime>,
    /// The CRL's reason code, when it gives one (`revoked` only).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
}

impl RevocationSeen {
    /// Whether it is about `serial` (the installed one) and says revoked.
    pub fn revokes(&self, serial: &str) -> bool {
        self.state == "revoked" && self.serial.eq_ignore_ascii_case(serial)
    }
}

/// The fleet's last attempt at a certificate: what its shared record says about failures.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct FleetAttempt {
    /// Consecutive failed attempts of the fleet (0: its last attempt did not fail).
    #[serde(default)]
    pub failures: u32,
    /// The last failure's message (printable, at most [`FleetAttempt::MAX_ERROR`] characters).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    /// When the fleet last failed on it.
    #[serde(
        default,
        skip_serializing_if = "Option::is_none",
        with = "time::serde::rfc3339::option"
    )]
    pub failed_at: Option<OffsetDateTime>,
    /// The host that wrote the shared record (the leader of that attempt).
    #[serde(default)]
    pub by: String,
}

impl FleetAttempt {
    /// The longest error text kept from the fleet's record.
    pub const MAX_ERROR: usize = 1000;

    /// Whether the fleet's last attempt failed.
    pub fn failing(&self) -> bool {
        self.failures > 0
    }

    /// One line for `status`, `check` and notifications.
    pub fn describe(&self) -> String {
        let when = self
            .failed_at
            .map(|t| format!(" at {}", crate::clock::short_time(t)))
            .unwrap_or_default();
        format!(
            "the fleet's last {} attempt(s) failed (led by {}{when}): {}",
            self.failures,
            if self.by.is_empty() { "?" } else { &self.by },
            self.error.as_deref().unwrap_or("unknown error")
        )
    }
}

/// An issued certificate held until it is valid (its archive in `held/NAME.zip`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Held {
    pub certificate_id: u64,
    /// Upper-case hex serial of the held leaf.
    pub serial: String,
    /// When it begins: installed from then on.
    #[serde(with = "time::serde::rfc3339")]
    pub not_before: OffsetDateTime,
}

/// The self-signed placeholder written at a certificate's install paths.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PlaceholderMark {
    pub serial: String,
    #[serde(with = "time::serde::rfc3339")]
    pub written_at: OffsetDateTime,
}

/// Fleet mode, with a rollout in waves: a serial of the fleet's that this host installed,
/// whose proof failed, and that it rolled back; not installed here again while its rollout
/// stays halted.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct RolledBack {
    /// The serial rolled back.
    pub serial: String,
    /// Why: the proof's failure.
    pub reason: String,
    #[serde(with = "time::serde::rfc3339")]
    pub at: OffsetDateTime,
}
