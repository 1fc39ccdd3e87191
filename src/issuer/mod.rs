//! The boundary between the engine and a CA. The engine keeps the schedule, the due rule,
//! backoff, record-before-call safety, the journal and the fleet's sharing; what only one kind
//! of CA knows lives here, one room per issuer.
//!
//! Validation crosses the boundary as neutral [`Challenge`](crate::dcv::Challenge)s: an
//! issuer turns what its CA asks for into HTTP files, DNS records or steps for a person, and
//! the engine publishes them with the writers of [`dcv`](crate::dcv), whatever the issuer.
//!
//! - [`partner`]: the reseller's Partner API v1 (CSR-hash files, DNS TXT/CNAME records, email
//!   approval).
//! - [`acme`]: an ACME CA (RFC 8555): the account and an order from `newOrder` to the chain,
//!   its `http-01` challenges handed out as neutral challenges.

pub(crate) mod acme;
pub(crate) mod partner;

use crate::dcv::Challenge;

/// What an issuer asks to be published for a certificate's validation.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Validation {
    /// Publish these, then wait for the CA.
    Publish(Vec<Challenge>),
    /// The CA does not say yet what to publish; ask again after the next poll.
    Later,
}
