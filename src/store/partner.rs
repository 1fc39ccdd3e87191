//! The Partner API issuer's bookkeeping in a certificate's record: where its billed order
//! stands ([`PartnerStage`]: none, intended, ordered with a reissue perhaps in flight, ended),
//! the subscription, and what renews it. Kept apart from what the engine records for every
//! issuer (keys, installs, validation, failures).
//!
//! Stored flat inside the record in the format every version wrote (`intent`, `order`,
//! `reissue`, `ended` beside the other fields; see `wire.rs`): the stage is read from those four
//! fields and written back into them, so that a record reads and writes byte for byte as
//! before. A combination no run writes is mapped or refused there, each case with its reason.

use serde::{Deserialize, Serialize};
use time::OffsetDateTime;

mod wire;

pub(crate) use wire::CONTRADICTION;
pub use wire::fuzz_partner_book;

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

/// Where a certificate's billed order stands. Each stage holds what exists in it and nothing
/// else: an intent never stands beside a known order, a reissue or an ended state always has
/// its order.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub enum PartnerStage {
    /// No order placed or sent (a new certificate, or the previous order given up for a new
    /// one: see [`PartnerBook::renews`]).
    #[default]
    NoOrder,
    /// A billed order recorded (fsynced) before `POST /order`, with no answer recorded yet:
    /// reconciled from the certificate list before anything else, and no other order is placed
    /// while it stands.
    Intended(OrderIntent),
    /// The order is known; `reissue`: a reissue of it in flight.
    Ordered {
        order: OrderRef,
        reissue: Option<ReissueState>,
    },
    /// The API reported the order ended (`annulled`, `expired`): nothing more can be done
    /// with it, and a new order is placed only on the operator's explicit `issue --yes` (or,
    /// the certificate revoked, where orders are allowed). A reissue in flight when it ended
    /// stays recorded until the order is replaced.
    Ended {
        order: OrderRef,
        state: String,
        reissue: Option<ReissueState>,
    },
}

/// What the Partner API issuer keeps of a certificate. Serialised flat inside the record, in
/// the stored form of `wire.rs`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(try_from = "wire::PartnerBookWire", into = "wire::PartnerBookWire")]
pub struct PartnerBook {
    /// The billed order's stage.
    pub stage: PartnerStage,
    /// The subscription of the current order.
    pub subscription: Option<Subscription>,
    /// The certificate ID this order renews (a billed order placed when the previous
    /// subscription ended, or in place of an ended order).
    pub renews: Option<u64>,
    /// When a renewal order was last prepared with `prolong` (the token file is beside the
    /// record), to prepare it at most once a day.
    pub prolong_prepared_at: Option<OffsetDateTime>,
    /// The CA answered an order request of this certificate with a refusal (nothing billed):
    /// a later failure is no longer one "before anything reached the CA".
    pub order_refused: bool,
}

impl PartnerBook {
    /// The order intent whose answer is not recorded yet.
    pub fn intent(&self) -> Option<&OrderIntent> {
        match &self.stage {
            PartnerStage::Intended(intent) => Some(intent),
            _ => None,
        }
    }

    /// The current order, ended or not.
    pub fn order(&self) -> Option<&OrderRef> {
        match &self.stage {
            PartnerStage::Ordered { order, .. } | PartnerStage::Ended { order, .. } => Some(order),
            PartnerStage::NoOrder | PartnerStage::Intended(_) => None,
        }
    }

    /// The current order, to follow a replacement ID.
    pub fn order_mut(&mut self) -> Option<&mut OrderRef> {
        match &mut self.stage {
            PartnerStage::Ordered { order, .. } | PartnerStage::Ended { order, .. } => Some(order),
            PartnerStage::NoOrder | PartnerStage::Intended(_) => None,
        }
    }

    /// The reissue in flight.
    pub fn reissue(&self) -> Option<&ReissueState> {
        match &self.stage {
            PartnerStage::Ordered { reissue, .. } | PartnerStage::Ended { reissue, .. } => {
                reissue.as_ref()
            }
            PartnerStage::NoOrder | PartnerStage::Intended(_) => None,
        }
    }

    /// The reissue in flight, to confirm it.
    pub fn reissue_mut(&mut self) -> Option<&mut ReissueState> {
        match &mut self.stage {
            PartnerStage::Ordered { reissue, .. } | PartnerStage::Ended { reissue, .. } => {
                reissue.as_mut()
            }
            PartnerStage::NoOrder | PartnerStage::Intended(_) => None,
        }
    }

    /// The state the order ended in (`annulled`, `expired`).
    pub fn ended(&self) -> Option<&str> {
        match &self.stage {
            PartnerStage::Ended { state, .. } => Some(state),
            _ => None,
        }
    }

    /// The ID of the current order's certificate.
    pub fn certificate_id(&self) -> Option<u64> {
        self.order().map(|o| o.certificate_id)
    }

    /// A billed order is about to be sent: its intent is recorded. Only without an order or
    /// an intent (the caller places an order only then); `false`, nothing changed, otherwise.
    #[must_use]
    pub fn intend(&mut self, intent: OrderIntent) -> bool {
        if self.stage != PartnerStage::NoOrder {
            return false;
        }
        self.stage = PartnerStage::Intended(intent);
        true
    }

    /// The order's answer, a reconciliation or an adoption: `order` is the current order. It
    /// replaces an intent, which is returned; a known order's reference is replaced, its
    /// reissue in flight and ended state kept.
    pub fn set_order(&mut self, order: OrderRef) -> Option<OrderIntent> {
        if let Some(known) = self.order_mut() {
            *known = order;
            return None;
        }
        let before = std::mem::replace(
            &mut self.stage,
            PartnerStage::Ordered {
                order,
                reissue: None,
            },
        );
        match before {
            PartnerStage::Intended(intent) => Some(intent),
            _ => None,
        }
    }

    /// Neither an order nor an order intent: nothing was ordered for this certificate (or
    /// the previous order was given up for a new one).
    pub fn is_unordered(&self) -> bool {
        self.stage == PartnerStage::NoOrder
    }

    /// The intent is withdrawn (the order was refused, nothing billed, or the operator cleared
    /// it): returned, and the certificate has no order again.
    pub fn withdraw_intent(&mut self) -> Option<OrderIntent> {
        if !matches!(self.stage, PartnerStage::Intended(_)) {
            return None;
        }
        match std::mem::take(&mut self.stage) {
            PartnerStage::Intended(intent) => Some(intent),
            _ => None,
        }
    }

    /// A reissue of the current order is about to be sent; `false` (nothing recorded) when
    /// there is no order, or it has ended.
    #[must_use]
    pub fn begin_reissue(&mut self, state: ReissueState) -> bool {
        match &mut self.stage {
            PartnerStage::Ordered { reissue, .. } => {
                *reissue = Some(state);
                true
            }
            _ => false,
        }
    }

    /// The reissue in flight is over (installed, or refused); returned.
    pub fn end_reissue(&mut self) -> Option<ReissueState> {
        match &mut self.stage {
            PartnerStage::Ordered { reissue, .. } | PartnerStage::Ended { reissue, .. } => {
                reissue.take()
            }
            PartnerStage::NoOrder | PartnerStage::Intended(_) => None,
        }
    }

    /// The API reports the current order ended (`annulled`, `expired`). Without an order
    /// nothing has ended: `false`, nothing changed.
    pub fn mark_ended(&mut self, ended: &str) -> bool {
        match std::mem::take(&mut self.stage) {
            PartnerStage::Ordered { order, reissue }
            | PartnerStage::Ended { order, reissue, .. } => {
                self.stage = PartnerStage::Ended {
                    order,
                    state: ended.to_owned(),
                    reissue,
                };
                true
            }
            other => {
                self.stage = other;
                false
            }
        }
    }

    /// The current order is given up for a new one (its subscription ended, or the order
    /// ended): it becomes the one renewed, and what belonged to it (subscription, reissue,
    /// prepared renewal) goes. Returns its certificate ID; `None`, nothing changed, without an
    /// order.
    pub fn give_up_order(&mut self) -> Option<u64> {
        let id = self.certificate_id()?;
        self.stage = PartnerStage::NoOrder;
        self.renews = Some(id);
        self.subscription = None;
        self.prolong_prepared_at = None;
        Some(id)
    }
}
