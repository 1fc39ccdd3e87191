//! Partner API v1 client: one async function per endpoint, typed models, `ApiError`.
//!
//! - [`Client`] (in `client.rs`) has one `async fn` per endpoint of the Partner API v1
//!   reference (`docs/partner-api.openapi.yaml`), defined by area in `endpoints/`.
//! - `transport.rs` holds the HTTPS connection pool and the session: retries, the auth token
//!   header, sign-in on 401, body limits; `request.rs` is one request and its raw answer,
//!   `answer.rs` turns an answer into a value or an [`ApiError`].
//! - `options.rs`: [`ClientOptions`], the [`RetryPolicy`] and the [`SendGuard`]; `gate.rs`
//!   abandons a guarded request not sent within the time its guard gives it.
//! - [`types`] holds the wire models, each tested against the shapes of the document.
//! - [`ApiError`] (in `error.rs`) says which call failed, why, and whether repeating it is safe.
//! - `price.rs`: what an order of a product costs ([`price_of_order`]).
//! - `auth.rs` loads the password and caches the auth token in `state_dir/token` (0600, atomic).
//!
//! Depends only on the foundation (`values`, `fsutil`, `failpoint`).

mod answer;
mod auth;
mod client;
mod endpoints;
mod error;
mod gate;
mod options;
mod price;
mod request;
mod transport;
pub(crate) mod types;

pub use crate::values::Secret;
pub use auth::{PasswordSource, TOKEN_FILE};
pub use client::Client;
#[cfg(test)]
pub(crate) use error::Call;
pub use error::{ApiError, ErrorBody, TransportKind};
pub(crate) use options::user_agent;
pub use options::{ClientOptions, RetryPolicy, SendGuard};
pub(crate) use price::{price_of_order, sum_of};
pub(crate) use transport::RequestCount;
pub use types::*;
