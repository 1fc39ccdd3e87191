//! Failpoints for crash-safety tests: with `CERT_AGENT_FAILPOINT=<name>` in the environment, a
//! debug build aborts the process (as a crash or `kill -9` would) when it reaches the step of
//! that name. Release builds compile every failpoint out.
//!
//! Steps, in the order a first issuance meets them: `key-saved`, `intent-saved`, `order-sent`,
//! `response-saved`, `dcv-placed`, `poll`, `download`, `files-staged`, `files-swapped`,
//! `config-tested`, `reloaded`, `committed`; a reissue also meets `reissue-sent`.

/// The environment variable naming the failpoint to trigger.
pub const ENV: &str = "CERT_AGENT_FAILPOINT";

/// Aborts here when this is the configured failpoint (debug builds only).
#[inline]
pub fn hit(name: &str) {
    if cfg!(debug_assertions) && std::env::var(ENV).is_ok_and(|v| v == name) {
        eprintln!("failpoint '{name}' reached: aborting");
        std::process::abort();
    }
}
