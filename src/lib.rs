//! cert-agent: a certificate agent for web servers that orders, validates, installs and renews
//! certificates through a reseller's Partner API v1 (and, as a library for now, an ACME CA).
//!
//! Layering (an arrow means "may import"; `docs/architecture.md` draws it and names each
//! room's imports, and `scripts/layout --check src` holds the code to it):
//!
//! - `main → cli → {daemon, run, monitor, fleet, engine, discover, the leaves}`;
//! - `daemon → run → {monitor, fleet} → engine` — the engine never calls monitoring or etcd; a
//!   fleet's leader takes part through `engine::Lead`;
//! - `engine → issuer` (what only one kind of CA knows: the Partner API's side of validation,
//!   as neutral challenges; the ACME issuer) `→` the leaves;
//! - `engine` → the leaves `api`, `bundle`, `config`, `dcv`, `install`, `preflight` (DNS
//!   checks before an order), `revocation`, `store`; `discover` is a leaf too (`→ api,
//!   config`), `certbot` (certbot's directory, for `import certbot`) reads `crypto`, `store`
//!   and the ACME issuer's account file, and `revocation` reads `api`, `config` and `store`;
//! - the other leaves import no sibling, only the foundation: `crypto`, `values` (value types
//!   several layers name), `clock`, `fsutil`, `process` (finding and running programs),
//!   `signal`, `failpoint`, `http_serve` (the serve loop of the small HTTP servers),
//!   `parallel` (a batch's independent items on a few threads).

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
