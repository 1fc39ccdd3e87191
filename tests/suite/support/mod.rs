//! Shared helpers for integration tests: `mod support;` in a test file brings them in.

pub mod api;
pub mod env;
pub mod faults;
pub mod scenario;
pub mod webserver;
