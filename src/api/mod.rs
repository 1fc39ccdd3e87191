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
pub mod types;

pub use crate::values::{MASK, Secret};
pub use auth::{PASSWORD_CREDENTIAL, PasswordSource, TOKEN_FILE};
pub use client::Client;
pub use endpoints::PAGE_SIZE;
pub use error::{ApiError, Call, ErrorBody, TransportKind};
pub use options::{
    ClientOptions, DEFAULT_CONNECT_TIMEOUT, DEFAULT_TIMEOUT, MAX_JSON_BYTES, MAX_ZIP_BYTES,
    RetryPolicy, SendGuard, normalize_base_url, user_agent,
};
pub use price::{price_of_order, sum_of};
pub use transport::RequestCount;
pub use types::*;
