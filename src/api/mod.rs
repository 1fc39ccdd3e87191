//! Partner API v1 client: one async function per endpoint, typed models, `ApiError`.
//!
//! - [`Client`] (in `client.rs`) holds the HTTPS connection pool and the session, and has one
//!   `async fn` per endpoint of the Partner API v1 reference
//!   (`docs/partner-api.openapi.yaml`).
//! - [`types`] holds the wire models, each tested against the shapes of the document.
//! - [`ApiError`] (in `error.rs`) says which call failed, why, and whether repeating it is safe.
//! - `auth.rs` loads the password and caches the auth token in `state_dir/token` (0600, atomic).
//!
//! Depends only on the foundation (`values`, `fsutil`).

mod auth;
mod client;
mod error;
pub mod types;

pub use crate::values::{MASK, Secret};
pub use auth::{PASSWORD_CREDENTIAL, PasswordSource, TOKEN_FILE};
pub use client::{
    Client, ClientOptions, DEFAULT_CONNECT_TIMEOUT, DEFAULT_TIMEOUT, MAX_JSON_BYTES, MAX_ZIP_BYTES,
    PAGE_SIZE, RequestCount, RetryPolicy, normalize_base_url, user_agent,
};
pub use error::{ApiError, Call, ErrorBody, TransportKind};
pub use types::*;
