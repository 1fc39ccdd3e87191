//! cert-agent: a certificate agent for web servers that orders, validates, installs and renews
//! certificates through a reseller's Partner API v1 or an ACME CA.
//!
//! Start reading at `docs/architecture.md`: the rooms (the modules below) and what each
//! keeps, which rooms each imports (held to the code by `scripts/layout --check src`), the
//! ten key types and one run from `cert-agent renew` to the web server's reload.

#![cfg_attr(not(test), warn(clippy::unwrap_used))]

pub mod api;
pub mod bundle;
pub mod certbot;
pub mod cli;
pub mod clock;
pub mod config;
pub mod crypto;
pub mod daemon;
pub mod dcv;
pub mod discover;
pub mod engine;
pub mod failpoint;
pub mod fleet;
pub mod fsutil;
mod http_serve;
pub mod install;
pub mod issuer;
pub mod monitor;
pub mod parallel;
pub mod preflight;
pub mod process;
pub mod revocation;
pub mod run;
pub mod signal;
pub mod store;
pub mod values;
