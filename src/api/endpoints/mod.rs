//! The endpoints of the Partner API v1, one `async fn` of [`Client`] each, by area:
//! `account.rs` (sign in, user ID, balance), `catalogue.rs` (products, countries, server
//! software), `orders.rs` (order, list, status, details, cancel, prolong), `dcv.rs` (DCV emails,
//! state, change, resend), `reissue.rs`, `download.rs` (archive and bundle).
//!
//! Each endpoint builds its request and hands it to the transport; none holds transport logic.
//!
//! [`Client`]: crate::api::Client

mod account;
mod catalogue;
mod dcv;
mod download;
mod orders;
mod reissue;

/// The path of one certificate's resource, e.g. `/api/v1/ssl_certificates/12/status`.
fn certificate_path(certificate_id: u64, suffix: &str) -> String {
    format!("/api/v1/ssl_certificates/{certificate_id}{suffix}")
}
