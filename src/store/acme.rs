//! An ACME CA's bookkeeping in a certificate's record: the order in progress (its URL,
//! written before any challenge is answered, so that a run stopped at any step goes on with
//! the same order) and the renewal window the directory suggested (RFC 9773).

use serde::{Deserialize, Serialize};
use time::OffsetDateTime;

/// What the record keeps of a certificate of an ACME CA.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct AcmeBook {
    /// The `[acme.NAME]` the certificate's orders went to.
    pub ca: String,
    /// The order in progress: from `newOrder` until its certificate is installed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub order_url: Option<String>,
    /// The names that order was placed for (a configuration changed since orders anew).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub names: Vec<String>,
    /// When that order was placed.
    #[serde(
        default,
        skip_serializing_if = "Option::is_none",
        with = "time::serde::rfc3339::option"
    )]
    pub placed_at: Option<OffsetDateTime>,
    /// Whether the directory offers Renewal Information: `None` until it was asked for the
    /// installed certificate's window (after every new order).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub renewal_info: Option<bool>,
    /// The renewal window the directory suggested for the installed certificate.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub window: Option<RenewalWindow>,
}

/// A suggested renewal window, the moment chosen inside it, and when to ask again.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct RenewalWindow {
    /// The certificate (upper-case hex serial) the window is for.
    pub serial: String,
    #[serde(with = "time::serde::rfc3339")]
    pub start: OffsetDateTime,
    #[serde(with = "time::serde::rfc3339")]
    pub end: OffsetDateTime,
    /// A moment chosen at random inside the window: the certificate is renewed from then.
    #[serde(with = "time::serde::rfc3339")]
    pub renew_at: OffsetDateTime,
    /// When the directory may be asked again (its `Retry-After`).
    #[serde(with = "time::serde::rfc3339")]
    pub next_check: OffsetDateTime,
    /// The directory's explanation URL, when it gave one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub explanation: Option<String>,
}
