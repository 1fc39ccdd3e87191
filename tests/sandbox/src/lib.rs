//! Partner API v1 sandbox: a faithful simulator of the reseller's Partner API for tests, demos
//! and benchmarks. See `tests/sandbox/README.md`.

pub mod bundle;
pub mod ca;
pub mod state;
pub mod wire;
