//! Shared helpers for integration tests: `mod support;` in a test file brings them in.

pub(crate) mod api;
pub(crate) mod balancer;
pub(crate) mod dns;
pub(crate) mod env;
pub(crate) mod etcd;
pub(crate) mod faults;
pub(crate) mod pebble;
pub(crate) mod scenario;
pub(crate) mod wait;
pub(crate) mod webserver;
