//! The state's one source of randomness: a ChaCha20 stream seeded by `StateConfig.seed`,
//! stored as (seed, word position) so that a persisted and reloaded state continues the same
//! stream instead of repeating IDs.

use rand::{RngExt, SeedableRng};
use rand_chacha::ChaCha20Rng;
use serde::{Deserialize, Serialize};

const ALNUM: &[u8] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789";
const LOWER_ALNUM: &[u8] = b"abcdefghijklmnopqrstuvwxyz0123456789";

#[derive(Debug, Clone, Serialize, Deserialize)]
pub(super) struct SeededRng {
    seed: u64,
    /// ChaCha word position reached so far.
    word_pos: u64,
}

impl SeededRng {
    pub(super) fn new(seed: u64) -> Self {
        Self { seed, word_pos: 0 }
    }

    fn with<T>(&mut self, f: impl FnOnce(&mut ChaCha20Rng) -> T) -> T {
        let mut rng = ChaCha20Rng::seed_from_u64(self.seed);
        rng.set_word_pos(u128::from(self.word_pos));
        let out = f(&mut rng);
        self.word_pos = u64::try_from(rng.get_word_pos()).unwrap_or(u64::MAX);
        out
    }

    /// Uniform in `lo..=hi`.
    pub(super) fn range(&mut self, lo: u64, hi: u64) -> u64 {
        self.with(|r| r.random_range(lo..=hi))
    }

    fn pick_from(&mut self, len: usize, alphabet: &[u8]) -> String {
        self.with(|r| {
            (0..len)
                .map(|_| char::from(alphabet[r.random_range(0..alphabet.len())]))
                .collect()
        })
    }

    /// Letters and digits (a credential-like token).
    pub(super) fn token(&mut self, len: usize) -> String {
        self.pick_from(len, ALNUM)
    }

    /// Lower-case letters and digits (DNS-friendly values).
    pub(super) fn lower_token(&mut self, len: usize) -> String {
        self.pick_from(len, LOWER_ALNUM)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn same_seed_same_stream_and_reload_continues_it() {
        let mut a = SeededRng::new(7);
        let mut b = SeededRng::new(7);
        assert_eq!(a.token(20), b.token(20));
        let saved = serde_json::to_string(&a).unwrap();
        let next = a.range(1, 1_000_000);
        let mut c: SeededRng = serde_json::from_str(&saved).unwrap();
        assert_eq!(c.range(1, 1_000_000), next);
        assert_ne!(SeededRng::new(8).token(20), SeededRng::new(7).token(20));
    }
}
