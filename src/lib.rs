//! cert-agent: a certificate agent for web servers that orders, validates, installs and renews
//! certificates through a reseller's Partner API v1 or an ACME CA.
//!
//! Start reading at `docs/architecture.md`: the rooms (the modules below) and what each
//! keeps, which rooms each imports (held to the code by `scripts/layout --check src`), the
//! ten key types and one run from `cert-agent renew` to the web server's reload.

#![cfg_attr(not(test), warn(clippy::unwrap_used))]

mod api;
mod bundle;
mod certbot;
mod cli;
mod clock;
mod config;
mod crypto;
mod daemon;
mod dcv;
mod discover;
mod engine;
mod failpoint;
mod fleet;
mod fsutil;
mod http_serve;
mod install;
mod issuer;
mod monitor;
mod parallel;
mod preflight;
mod process;
mod revocation;
mod run;
mod signal;
mod store;
#[doc(hidden)]
pub mod testing;
mod values;

/// The `cert-agent` binary's entry: parse the command line, run, map the outcome to an exit code.
pub use cli::main;
