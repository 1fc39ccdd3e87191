//! The load balancer in front of the DCV file checks: the ports on 127.0.0.1 where the
//! validator fetches HTTP_CSR_HASH and HTTPS_CSR_HASH files, and how it picks among them. A
//! fleet of web servers behind one name is simulated by one port per host: the CA's request
//! lands on whichever host the balancer picks ([`DcvBalance::RoundRobin`],
//! [`DcvBalance::Random`]), or, in the strictest case, on any host at all
//! ([`DcvBalance::All`]: every port is asked and all must serve the file).

use serde::{Deserialize, Serialize};

/// How the balancer picks the port of one fetch.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum DcvBalance {
    /// Each fetch goes to the next port of the list, in turn (the default).
    #[default]
    RoundRobin,
    /// Each fetch goes to a port drawn from a seeded generator (same seed, same draws).
    Random,
    /// Each check fetches from every port and passes only when every one serves the file.
    All,
}

impl DcvBalance {
    /// The name used by the control API and the command line.
    pub fn name(self) -> &'static str {
        match self {
            Self::RoundRobin => "round_robin",
            Self::Random => "random",
            Self::All => "all",
        }
    }

    /// Parses `round_robin` (or `round-robin`), `random`, `all`.
    pub fn parse(s: &str) -> Option<Self> {
        match s.trim().to_ascii_lowercase().replace('-', "_").as_str() {
            "round_robin" => Some(Self::RoundRobin),
            "random" => Some(Self::Random),
            "all" => Some(Self::All),
            _ => None,
        }
    }
}

/// The ports and the balancer's own state (turns, generator).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DcvPorts {
    http: Vec<u16>,
    https: Vec<u16>,
    balance: DcvBalance,
    seed: u64,
    /// Fetches picked so far, per scheme (round robin) or the generator's state (random).
    turn: [u64; 2],
}

impl DcvPorts {
    /// One HTTP and one HTTPS port, round robin (which then always picks them).
    pub fn single(http: u16, https: u16) -> Self {
        Self::new(vec![http], vec![https], DcvBalance::RoundRobin, 1)
    }

    /// Lists of ports; an empty list counts as port 80 (HTTP) or 443 (HTTPS).
    pub fn new(http: Vec<u16>, https: Vec<u16>, balance: DcvBalance, seed: u64) -> Self {
        let or = |v: Vec<u16>, d: u16| if v.is_empty() { vec![d] } else { v };
        Self {
            http: or(http, 80),
            https: or(https, 443),
            balance,
            seed,
            turn: [seed, seed],
        }
    }

    pub fn http(&self) -> &[u16] {
        &self.http
    }

    pub fn https(&self) -> &[u16] {
        &self.https
    }

    pub fn balance(&self) -> DcvBalance {
        self.balance
    }

    pub fn seed(&self) -> u64 {
        self.seed
    }

    /// The ports one check fetches from: one port (round robin, random) or all of them.
    pub fn pick(&mut self, https: bool) -> Vec<u16> {
        let (ports, turn) = if https {
            (&self.https, &mut self.turn[1])
        } else {
            (&self.http, &mut self.turn[0])
        };
        let len = ports.len() as u64;
        let index = match self.balance {
            DcvBalance::All => return ports.clone(),
            DcvBalance::RoundRobin => {
                let i = turn.wrapping_sub(self.seed) % len.max(1);
                *turn = turn.wrapping_add(1);
                i
            }
            DcvBalance::Random => {
                *turn = splitmix64(*turn);
                *turn % len.max(1)
            }
        };
        usize::try_from(index)
            .ok()
            .and_then(|i| ports.get(i))
            .map_or_else(Vec::new, |p| vec![*p])
    }
}

/// One step of SplitMix64 (a small, well-mixed generator; not for secrets).
fn splitmix64(state: u64) -> u64 {
    let mut z = state.wrapping_add(0x9E37_79B9_7F4A_7C15);
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_robin_takes_turns_per_scheme() {
        let mut p = DcvPorts::new(vec![1, 2, 3], vec![9], DcvBalance::RoundRobin, 5);
        let picks: Vec<Vec<u16>> = (0..4).map(|_| p.pick(false)).collect();
        assert_eq!(picks, vec![vec![1], vec![2], vec![3], vec![1]]);
        assert_eq!(p.pick(true), vec![9]);
        assert_eq!(p.pick(false), vec![2]);
    }

    #[test]
    fn random_is_seeded_and_covers_every_port() {
        let draw = |seed| {
            let mut p = DcvPorts::new(vec![1, 2, 3], vec![], DcvBalance::Random, seed);
            (0..60).map(|_| p.pick(false)[0]).collect::<Vec<_>>()
        };
        assert_eq!(draw(7), draw(7));
        assert_ne!(draw(7), draw(8));
        for port in [1, 2, 3] {
            assert!(draw(7).contains(&port));
        }
    }

    #[test]
    fn all_asks_every_port() {
        let mut p = DcvPorts::new(vec![1, 2], vec![], DcvBalance::All, 1);
        assert_eq!(p.pick(false), vec![1, 2]);
        assert_eq!(p.pick(true), vec![443]);
    }

    #[test]
    fn names_parse_back() {
        for b in [DcvBalance::RoundRobin, DcvBalance::Random, DcvBalance::All] {
            assert_eq!(DcvBalance::parse(b.name()), Some(b));
        }
        assert_eq!(
            DcvBalance::parse("round-robin"),
            Some(DcvBalance::RoundRobin)
        );
        assert_eq!(DcvBalance::parse("sticky"), None);
    }
}
