//! Partner API v1 sandbox: a faithful simulator of the reseller's Partner API for tests, demos
//! and benchmarks. See `crates/partner-sandbox/README.md`.
//!
//! Semantics (`state`, `ca`, `bundle`) sit behind the seam in `wire`; the transport (`server`,
//! `control`, `faults`, `validator`, `clock`) turns HTTP into calls on that seam.

#![cfg_attr(not(test), warn(clippy::unwrap_used))]

pub mod balancer;
pub mod bundle;
pub mod ca;
pub mod state;
pub mod wire;

pub mod clock;
pub mod control;
pub mod crl;
pub mod faults;
pub mod server;
pub mod validator;
mod world;

pub use balancer::{DcvBalance, DcvPorts};
pub use faults::{BundleFailure, Fault, FaultKind};
pub use server::{Sandbox, SandboxConfig, SandboxError, SandboxHandle};
pub use world::CallRecord;
