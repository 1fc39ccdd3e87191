//! `[fleet] rollout_canaries`, `rollout_wave`, `rollout_pause_secs`: the order in which the
//! fleet's hosts install a new certificate — the canaries first, then the others wave by wave;
//! `rollout_deadline_fraction`: how close to its end the certificate a host serves may come
//! before the waves stop holding the new one back. None set: every host installs at once.

use serde::Serialize;

/// Which hosts install a new certificate first.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(untagged)]
pub enum Canaries {
    /// These hosts (those that announce themselves to the fleet).
    Named(Vec<String>),
    /// The first this many of the hosts' names, sorted.
    Count(usize),
}

/// How many hosts install in each wave after the canaries.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
#[serde(untagged)]
pub enum WaveSize {
    /// This many hosts.
    Count(usize),
    /// This fraction (0 < f ≤ 1) of the hosts after the canaries, rounded up.
    Fraction(f64),
}

/// The fleet's rollout of a new certificate in waves.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct RolloutConfig {
    #[serde(rename = "rollout_canaries")]
    pub canaries: Canaries,
    #[serde(rename = "rollout_wave")]
    pub wave: WaveSize,
    /// Seconds between the last proof of a wave and the next wave's installs.
    #[serde(rename = "rollout_pause_secs")]
    pub pause_secs: u64,
    /// A host whose installed certificate has less than this fraction (0 < f < 1) of its
    /// lifetime left installs the fleet's new one at once, whatever its wave or a halt.
    #[serde(rename = "rollout_deadline_fraction")]
    pub deadline_fraction: f64,
}
