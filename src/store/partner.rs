//! The Partner API issuer's bookkeeping in a certificate's record: the billed order's intent
//! and the order, a reissue in flight, the subscription, and what ended or renews it. Kept
//! apart from what the engine records for every issuer (keys, installs, validation, failures).

use serde::{Deserialize, Serialize};
use time::OffsetDateTime;

/// A billed order about to be sent, or sent without a known answer.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct OrderIntent {
    /// Upper-case hex SHA-256 of the CSR's DER: identifies the order when reconciling.
    pub csr_sha256: String,
    /// Common name ordered (the `q` of the reconciling list call).
    pub common_name: String,
    /// When the intent was recorded (before the request was sent).
    #[serde(with = "time::serde::rfc3339")]
    pub created_at: OffsetDateTime,
    /// Product ordered.
    pub product_id: u64,
    /// Price of the product for the period at the time of the order, as the API gave it.
    pub price: Option<String>,
}

/// The order this certificate belongs to.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct OrderRef {
    pub certificate_id: u64,
    pub order_id: Option<u64>,
    #[serde(with = "time::serde::rfc3339")]
    pub placed_at: OffsetDateTime,
    /// True when the order was found by reconciliation or adopted, not from our own answer.
    #[serde(default)]
    pub adopted: bool,
}

/// A reissue requested for this certificate.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ReissueState {
    /// The certificate ID the reissue was sent for.
    pub certificate_id: u64,
    /// SHA-256 of the CSR sent (upper-case hex).
    pub csr_sha256: String,
    /// Serial of the certificate installed when the reissue was requested.
    pub previous_serial: Option<String>,
    #[serde(with = "time::serde::rfc3339")]
    pub requested_at: OffsetDateTime,
    /// False between "about to send" and the API's answer: after a crash the next run checks
    /// the certificate's details before sending again.
    pub confirmed: bool,
}

/// What the API said about the subscription, recorded at install time.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Subscription {
    /// End of the paid subscription (the certificate's own end when the API reports none).
    #[serde(with = "time::serde::rfc3339")]
    pub ends: OffsetDateTime,
    /// True when the API reported a multi-year subscription end.
    pub multi_year: bool,
}

/// What the Partner API issuer keeps of a certificate. Serialised flat inside the record.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct PartnerBook {
    /// Set before `POST /order`, cleared once the answer (or a reconciliation) is recorded.
    pub intent: Option<OrderIntent>,
    pub order: Option<OrderRef>,
    /// A reissue in flight.
    #[serde(default)]
    pub reissue: Option<ReissueState>,
    /// The order ended (`annulled`, `expired`): nothing more can be done with it, and a new
    /// order is placed only on the operator's explicit `issue --yes`.
    #[serde(default)]
    pub ended: Option<String>,
    /// The subscription of the current order.
    #[serde(default)]
    pub subscription: Option<Subscription>,
    /// The certificate ID this order renews (a billed order placed when the previous
    /// subscription ended).
    #[serde(default)]
    pub renews: Option<u64>,
    /// When a renewal order was last prepared with `prolong` (the token file is beside the
    /// record), to prepare it at most once a day.
    #[serde(default, with = "time::serde::rfc3339::option")]
    pub prolong_prepared_at: Option<OffsetDateTime>,
    /// The CA answered an order request of this certificate with a refusal (nothing billed):
    /// a later failure is no longer one "before anything reached the CA".
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub order_refused: bool,
}

impl PartnerBook {
    /// The ID of the current order's certificate.
    pub fn certificate_id(&self) -> Option<u64> {
        self.order.as_ref().map(|o| o.certificate_id)
    }
}
