//! The stored form of the Partner bookkeeping: the flat fields every version of the record
//! wrote (`intent`, `order`, `reissue`, `ended`, `subscription`, `renews`,
//! `prolong_prepared_at`, `order_refused`), unchanged, and the reading of the first four into a
//! [`PartnerStage`].
//!
//! No run writes an intent beside an order, a reissue or an ended state without the order, so
//! a record holding one was edited or damaged. Each such combination is decided by billing
//! safety (an order whose outcome is unknown must never lead to a second order):
//! - an intent beside an order, a reissue or an ended state is refused ([`Contradiction`]):
//!   dropping the intent would forget an order that may have been billed, dropping the order
//!   would let a cleared intent order again;
//! - an ended state without its order is refused: nothing says which order ended, and reading
//!   it as "no order" would place a new order without the operator's `issue --yes`;
//! - a reissue without its order is read as the order of the certificate it was sent for
//!   (marked adopted, placed when the reissue was requested): a reissue is only ever of an
//!   order, so the order exists, and the certificate ID is all later steps need of it.

use serde::{Deserialize, Serialize};
use time::OffsetDateTime;

use super::{OrderIntent, OrderRef, PartnerBook, PartnerStage, ReissueState, Subscription};

/// The Partner fields as stored, flat beside the record's other fields.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct PartnerBookWire {
    /// Set before `POST /order`, cleared once the answer (or a reconciliation) is recorded.
    pub intent: Option<OrderIntent>,
    pub order: Option<OrderRef>,
    /// A reissue in flight.
    #[serde(default)]
    pub reissue: Option<ReissueState>,
    /// The state the order ended in (`annulled`, `expired`).
    #[serde(default)]
    pub ended: Option<String>,
    #[serde(default)]
    pub subscription: Option<Subscription>,
    #[serde(default)]
    pub renews: Option<u64>,
    #[serde(default, with = "time::serde::rfc3339::option")]
    pub prolong_prepared_at: Option<OffsetDateTime>,
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub order_refused: bool,
}

/// Text every refused combination's message starts with: the store names the file and says
/// to mend it rather than move it aside (an order would be lost with it).
pub(crate) const CONTRADICTION: &str = "contradictory order bookkeeping: ";

/// A stored combination of the Partner fields that no run writes and that cannot be read
/// without risking a second billed order.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{CONTRADICTION}{0}")]
pub struct Contradiction(String);

impl TryFrom<PartnerBookWire> for PartnerBook {
    type Error = Contradiction;

    fn try_from(w: PartnerBookWire) -> Result<Self, Contradiction> {
        let stage = stage_of(w.intent, w.order, w.reissue, w.ended)?;
        Ok(Self {
            stage,
            subscription: w.subscription,
            renews: w.renews,
            prolong_prepared_at: w.prolong_prepared_at,
            order_refused: w.order_refused,
        })
    }
}

impl From<PartnerBook> for PartnerBookWire {
    fn from(b: PartnerBook) -> Self {
        let (intent, order, reissue, ended) = match b.stage {
            PartnerStage::NoOrder => (None, None, None, None),
            PartnerStage::Intended(intent) => (Some(intent), None, None, None),
            PartnerStage::Ordered { order, reissue } => (None, Some(order), reissue, None),
            PartnerStage::Ended {
                order,
                state,
                reissue,
            } => (None, Some(order), reissue, Some(state)),
        };
        Self {
            intent,
            order,
            reissue,
            ended,
            subscription: b.subscription,
            renews: b.renews,
            prolong_prepared_at: b.prolong_prepared_at,
            order_refused: b.order_refused,
        }
    }
}

/// The stage the four stored fields describe (see the module's header for the combinations
/// no run writes).
fn stage_of(
    intent: Option<OrderIntent>,
    order: Option<OrderRef>,
    reissue: Option<ReissueState>,
    ended: Option<String>,
) -> Result<PartnerStage, Contradiction> {
    if let Some(intent) = intent {
        if order.is_none() && reissue.is_none() && ended.is_none() {
            return Ok(PartnerStage::Intended(intent));
        }
        let id = order
            .as_ref()
            .map(|o| o.certificate_id)
            .or(reissue.as_ref().map(|r| r.certificate_id));
        return Err(Contradiction(format!(
            "an order intent (CSR SHA-256 {:?}) beside {}: which one is current cannot be told; \
             set `intent` to null if that is this certificate's order, else set `order`, \
             `reissue` and `ended` to null (the next run then finds the intent's order in the \
             certificate list)",
            capped(&intent.csr_sha256),
            match id {
                Some(id) => format!("the order of certificate {id}"),
                None => "an ended order".to_owned(),
            }
        )));
    }
    let order = match (order, &reissue) {
        (Some(order), _) => order,
        (None, Some(r)) => OrderRef {
            certificate_id: r.certificate_id,
            order_id: None,
            placed_at: r.requested_at,
            adopted: true,
        },
        (None, None) => {
            return match ended {
                None => Ok(PartnerStage::NoOrder),
                Some(state) => Err(Contradiction(format!(
                    "an ended order ({:?}) without the order: which certificate ended cannot be \
                     told; set `order` to it, or set `ended` to null to order anew",
                    capped(&state)
                ))),
            };
        }
    };
    Ok(match ended {
        None => PartnerStage::Ordered { order, reissue },
        Some(state) => PartnerStage::Ended {
            order,
            state,
            reissue,
        },
    })
}

/// At most 64 characters of a stored value, for a message (shown with `{:?}`: control
/// characters escaped).
fn capped(text: &str) -> String {
    text.chars().take(64).collect()
}

/// Fuzzing: stored Partner fields read into the bookkeeping must never panic; what reads
/// writes the stored form back, which reads again the same, and the six combinations a run
/// writes (no reissue without its order) are written back unchanged.
pub fn fuzz_partner_book(data: &[u8]) {
    let Ok(wire) = serde_json::from_slice::<PartnerBookWire>(data) else {
        return;
    };
    let book = match PartnerBook::try_from(wire.clone()) {
        Ok(book) => book,
        Err(e) => {
            assert!(e.to_string().starts_with(CONTRADICTION));
            assert!(wire.intent.is_some() || wire.ended.is_some());
            return;
        }
    };
    let written = serde_json::to_vec(&book).expect("the bookkeeping serialises");
    let again: PartnerBook = serde_json::from_slice(&written).expect("what was written reads");
    assert_eq!(again, book);
    if wire.order.is_some() || wire.reissue.is_none() {
        assert_eq!(PartnerBookWire::from(book), wire);
    }
}

#[cfg(test)]
mod tests;
