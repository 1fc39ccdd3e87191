//! cert-agent: a certificate agent for web servers that orders, validates, installs and renews
//! certificates through a reseller's Partner API v1.
//!
//! Layering (an arrow means "may call"): `cli → renew → {api, dcv, install, store, bundle,
//! crypto, config}`. `api` and `crypto` depend on nothing else of ours; `bundle` uses
//! `crypto`'s certificate helpers; `config` uses `api`'s wire types and `crypto`'s key types;
//! `dcv` uses `crypto`'s CSR hashes; `fsutil` and `failpoint` are leaf utilities.

#![cfg_attr(not(test), warn(clippy::unwrap_used))]

pub mod api;
pub mod bundle;
pub mod cli;
pub mod config;
pub mod crypto;
pub mod daemon;
pub mod dcv;
pub mod failpoint;
pub mod fsutil;
pub mod install;
pub mod process;
pub mod renew;
pub mod signal;
pub mod store;
pub mod values;
