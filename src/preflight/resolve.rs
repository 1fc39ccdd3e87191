//! Asking the resolver: one question over UDP (TCP when the answer is truncated), each try
//! bounded by the timeout, and the CAA climb of RFC 8659 with DNSSEC read from the answer (AD
//! bit: validated; SERVFAIL that a checking-disabled query answers: bogus).

use std::collections::HashMap;
use std::net::{IpAddr, SocketAddr};
use std::time::Duration;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpStream, UdpSocket};

use super::caa::{self, Caa};
use super::wire::{
    self, Answer, RCODE_NXDOMAIN, RCODE_SERVFAIL, TYPE_A, TYPE_AAAA, TYPE_CAA, TYPE_CNAME,
    TYPE_RRSIG, TYPE_TXT,
};

/// Tries of one UDP question before the resolver counts as unreachable.
const TRIES: u32 = 2;
/// Most CNAMEs followed from one name.
const MAX_CNAMES: usize = 16;

/// Why a lookup gave no usable answer.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub(crate) enum LookupError {
    #[error("the resolver {resolver} did not answer {what} within {secs} s ({tries} tries)")]
    Timeout {
        resolver: SocketAddr,
        what: String,
        secs: u64,
        tries: u32,
    },
    #[error("could not ask the resolver {resolver} for {what}: {error}")]
    Io {
        resolver: SocketAddr,
        what: String,
        error: String,
    },
    #[error("the resolver {resolver}'s answer for {what} is unreadable: {error}")]
    Garbage {
        resolver: SocketAddr,
        what: String,
        error: String,
    },
    #[error(
        "{what} does not validate (DNSSEC bogus) in the zone {zone}: the resolver {resolver} \
         answers SERVFAIL, and the records it returns with checking disabled carry signatures \
         that fail"
    )]
    Bogus {
        resolver: SocketAddr,
        what: String,
        zone: String,
    },
    #[error("the resolver {resolver} answers SERVFAIL for {what}, even with checking disabled")]
    ServFail { resolver: SocketAddr, what: String },
    #[error("{what}: {error}")]
    Hostile { what: String, error: String },
}

/// The resolver and the limits of one pre-flight.
#[derive(Debug, Clone)]
pub(super) struct Resolver {
    pub addr: SocketAddr,
    pub timeout: Duration,
    /// Ask with DO and read the AD bit; a SERVFAIL is tried again with CD to tell bogus.
    pub dnssec: bool,
}

/// The CAA RRset found for one name.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct Found {
    /// The owner where the climb stopped (None: no CAA anywhere up to the top-level domain).
    pub at: Option<String>,
    pub set: Vec<Caa>,
    /// Every answer on the way carried the AD bit.
    pub validated: bool,
    /// Questions sent (including retries).
    pub queries: u32,
}

/// One answer, as read.
#[derive(Debug, Clone)]
struct Asked {
    answer: Answer,
    queries: u32,
}

impl Resolver {
    /// Asks `name`/`rtype` (with CD when `cd`).
    async fn ask(&self, name: &str, rtype: u16, cd: bool) -> Result<Asked, LookupError> {
        let what = format!(
            "{} {}",
            type_name(rtype),
            crate::values::text::printable(name)
        );
        let id: u16 = rand::random();
        let q =
            wire::query(id, name, rtype, self.dnssec, cd).map_err(|e| LookupError::Hostile {
                what: what.clone(),
                error: e.to_string(),
            })?;
        let io = |e: std::io::Error| LookupError::Io {
            resolver: self.addr,
            what: what.clone(),
            error: e.to_string(),
        };
        let local: SocketAddr = if self.addr.is_ipv4() {
            ([0, 0, 0, 0], 0).into()
        } else {
            (std::net::Ipv6Addr::UNSPECIFIED, 0).into()
        };
        let sock = UdpSocket::bind(local).await.map_err(io)?;
        sock.connect(self.addr).await.map_err(io)?;
        let mut buf = vec![0u8; 65_535];
        let mut queries = 0;
        for _ in 0..TRIES {
            queries += 1;
            sock.send(&q).await.map_err(io)?;
            let deadline = tokio::time::Instant::now() + self.timeout;
            // Answers with another ID or question (late, spoofed) are skipped, not taken.
            loop {
                let Ok(got) = tokio::time::timeout_at(deadline, sock.recv(&mut buf)).await else {
                    break;
                };
                let n = got.map_err(io)?;
                let Ok(answer) = wire::parse(&buf[..n]) else {
                    continue;
                };
                if !matches_question(&answer, id, name, rtype) {
                    continue;
                }
                if answer.truncated {
                    let answer = self.ask_tcp(&q, &what).await?;
                    if !matches_question(&answer, id, name, rtype) {
                        return Err(LookupError::Garbage {
                            resolver: self.addr,
                            what,
                            error: "the TCP answer is for another question".into(),
                        });
                    }
                    return Ok(Asked {
                        answer,
                        queries: queries + 1,
                    });
                }
                return Ok(Asked { answer, queries });
            }
        }
        Err(LookupError::Timeout {
            resolver: self.addr,
            what,
            secs: self.timeout.as_secs(),
            tries: TRIES,
        })
    }

    async fn ask_tcp(&self, q: &[u8], what: &str) -> Result<Answer, LookupError> {
        let fail = |error: String| LookupError::Io {
            resolver: self.addr,
            what: what.to_owned(),
            error,
        };
        let exchange = async {
            let mut s = TcpStream::connect(self.addr).await?;
            let mut framed = (q.len() as u16).to_be_bytes().to_vec();
            framed.extend_from_slice(q);
            s.write_all(&framed).await?;
            let len = s.read_u16().await? as usize;
            let mut buf = vec![0u8; len];
            s.read_exact(&mut buf).await?;
            Ok::<_, std::io::Error>(buf)
        };
        let buf = tokio::time::timeout(self.timeout, exchange)
            .await
            .map_err(|_| fail(format!("no TCP answer within {} s", self.timeout.as_secs())))?
            .map_err(|e| fail(e.to_string()))?;
        wire::parse(&buf).map_err(|e| LookupError::Garbage {
            resolver: self.addr,
            what: what.to_owned(),
            error: e.to_string(),
        })
    }

    /// Asks, and tells a bogus answer (SERVFAIL that a CD query answers) from a broken server.
    async fn validated(&self, name: &str, rtype: u16) -> Result<Asked, LookupError> {
        let first = self.ask(name, rtype, false).await?;
        if first.answer.rcode != RCODE_SERVFAIL {
            return Ok(first);
        }
        let what = format!(
            "{} {}",
            type_name(rtype),
            crate::values::text::printable(name)
        );
        if !self.dnssec {
            return Err(LookupError::ServFail {
                resolver: self.addr,
                what,
            });
        }
        let unchecked = self.ask(name, rtype, true).await?;
        if unchecked.answer.rcode == RCODE_SERVFAIL {
            return Err(LookupError::ServFail {
                resolver: self.addr,
                what,
            });
        }
        let zone =
            signer(&unchecked.answer, name).unwrap_or_else(|| crate::values::text::printable(name));
        Err(LookupError::Bogus {
            resolver: self.addr,
            what,
            zone: if zone.is_empty() { ".".into() } else { zone },
        })
    }

    /// The relevant CAA RRset of `name` (RFC 8659 section 3): CAA at the name (through its
    /// CNAMEs), else at each parent up to the top-level domain. `cache` keeps each owner's
    /// answer for the other names of the run.
    pub(super) async fn caa(
        &self,
        name: &str,
        cache: &mut HashMap<String, (Vec<Caa>, bool)>,
    ) -> Result<Found, LookupError> {
        let mut queries = 0;
        let mut validated = true;
        let mut at = name.trim_end_matches('.').to_ascii_lowercase();
        loop {
            let (set, secure) = match cache.get(&at) {
                Some(hit) => hit.clone(),
                None => {
                    let asked = self.validated(&at, TYPE_CAA).await?;
                    queries += asked.queries;
                    let set = caa_of(&asked.answer, &at)?;
                    let got = (set, asked.answer.authenticated);
                    cache.insert(at.clone(), got.clone());
                    got
                }
            };
            validated &= secure;
            if !set.is_empty() {
                return Ok(Found {
                    at: Some(at),
                    set,
                    validated,
                    queries,
                });
            }
            match at.split_once('.') {
                Some((_, parent)) if !parent.is_empty() => at = parent.to_owned(),
                _ => {
                    return Ok(Found {
                        at: None,
                        set: Vec::new(),
                        validated,
                        queries,
                    });
                }
            }
        }
    }
}

/// A name's addresses (A and AAAA, CNAMEs followed).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct Addresses {
    pub addrs: Vec<IpAddr>,
    /// The name does not exist (NXDOMAIN), rather than having no address record.
    pub nxdomain: bool,
    /// Both answers carried the AD bit.
    pub validated: bool,
    pub queries: u32,
}

/// One record set asked for DNSSEC's sake (the DNS validation record): whether it was
/// validated.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct Checked {
    pub validated: bool,
    pub queries: u32,
}

impl Resolver {
    /// The A and AAAA records of `name` through the resolver (a bogus answer is an error).
    pub(super) async fn addresses(&self, name: &str) -> Result<Addresses, LookupError> {
        let mut found = Addresses {
            addrs: Vec::new(),
            nxdomain: false,
            validated: true,
            queries: 0,
        };
        for rtype in [TYPE_A, TYPE_AAAA] {
            let asked = self.validated(name, rtype).await?;
            found.queries += asked.queries;
            found.validated &= asked.answer.authenticated;
            found.nxdomain |= asked.answer.rcode == RCODE_NXDOMAIN;
            found
                .addrs
                .extend(addresses_of(&asked.answer, name, rtype)?);
        }
        Ok(found)
    }

    /// Asks `rtype` at `name` for DNSSEC's sake: an answer, positive or negative, that
    /// validates or is unsigned is fine; a bogus one is [`LookupError::Bogus`] naming the
    /// record and the zone that signs it.
    pub(super) async fn record(&self, name: &str, rtype: u16) -> Result<Checked, LookupError> {
        let asked = self.validated(name, rtype).await?;
        Ok(Checked {
            validated: asked.answer.authenticated,
            queries: asked.queries,
        })
    }
}

/// The addresses of the end of `name`'s CNAME chain in `answer`.
fn addresses_of(answer: &Answer, name: &str, rtype: u16) -> Result<Vec<IpAddr>, LookupError> {
    if answer.rcode == RCODE_NXDOMAIN {
        return Ok(Vec::new());
    }
    let what = format!(
        "{} {}",
        type_name(rtype),
        crate::values::text::printable(name)
    );
    if answer.rcode != 0 {
        return Err(LookupError::Hostile {
            what,
            error: format!("the resolver answers with RCODE {}", answer.rcode),
        });
    }
    let end = chain_end(answer, name).ok_or_else(|| LookupError::Hostile {
        what: what.clone(),
        error: format!("more than {MAX_CNAMES} CNAMEs, or a CNAME loop"),
    })?;
    Ok(answer
        .records
        .iter()
        .filter(|r| r.rtype == rtype && r.name == end)
        .filter_map(|r| match (rtype, r.data.len()) {
            (TYPE_A, 4) => <[u8; 4]>::try_from(r.data.as_slice())
                .ok()
                .map(IpAddr::from),
            (TYPE_AAAA, 16) => <[u8; 16]>::try_from(r.data.as_slice())
                .ok()
                .map(IpAddr::from),
            _ => None,
        })
        .collect())
}

/// The end of `name`'s CNAME chain in `answer`; `None` for a loop or a chain too long.
fn chain_end(answer: &Answer, name: &str) -> Option<String> {
    let mut owner = name.trim_end_matches('.').to_ascii_lowercase();
    for _ in 0..=MAX_CNAMES {
        match answer
            .records
            .iter()
            .find(|r| r.rtype == TYPE_CNAME && r.name == owner)
            .and_then(|r| r.target.clone())
        {
            Some(target) => owner = target,
            None => return Some(owner),
        }
    }
    None
}

/// The zone that signs what `answer` says about `name`: the signer of the RRSIG over the end
/// of its CNAME chain, else of any RRSIG of the answer, else of the authority section's (a
/// negative answer).
fn signer(answer: &Answer, name: &str) -> Option<String> {
    let end = chain_end(answer, name);
    let sigs = || answer.records.iter().filter(|r| r.rtype == TYPE_RRSIG);
    sigs()
        .find(|r| Some(&r.name) == end.as_ref())
        .or_else(|| sigs().next())
        .or_else(|| answer.authority.iter().find(|r| r.rtype == TYPE_RRSIG))
        .and_then(|r| r.target.clone())
}

/// The CAA records of the end of `name`'s CNAME chain in `answer` (NXDOMAIN: none).
fn caa_of(answer: &Answer, name: &str) -> Result<Vec<Caa>, LookupError> {
    let what = format!("CAA {}", crate::values::text::printable(name));
    if answer.rcode == RCODE_NXDOMAIN {
        return Ok(Vec::new());
    }
    if answer.rcode != 0 {
        return Err(LookupError::Hostile {
            what,
            error: format!("the resolver answers with RCODE {}", answer.rcode),
        });
    }
    let mut owner = name.to_owned();
    for _ in 0..=MAX_CNAMES {
        let next = answer
            .records
            .iter()
            .find(|r| r.rtype == TYPE_CNAME && r.name == owner)
            .and_then(|r| r.target.clone());
        match next {
            Some(target) => owner = target,
            None => {
                return answer
                    .records
                    .iter()
                    .filter(|r| r.rtype == TYPE_CAA && r.name == owner)
                    .map(|r| {
                        caa::parse(&r.data).map_err(|e| LookupError::Hostile {
                            what: what.clone(),
                            error: format!("{e} (at {owner})"),
                        })
                    })
                    .collect();
            }
        }
    }
    Err(LookupError::Hostile {
        what,
        error: format!("more than {MAX_CNAMES} CNAMEs, or a CNAME loop"),
    })
}

fn matches_question(a: &Answer, id: u16, name: &str, rtype: u16) -> bool {
    a.id == id
        && a.question
            .as_ref()
            .is_some_and(|(n, t)| *t == rtype && n.eq_ignore_ascii_case(name.trim_end_matches('.')))
}

fn type_name(rtype: u16) -> String {
    match rtype {
        TYPE_CAA => "CAA".into(),
        TYPE_CNAME => "CNAME".into(),
        TYPE_TXT => "TXT".into(),
        TYPE_A => "A".into(),
        TYPE_AAAA => "AAAA".into(),
        other => format!("TYPE{other}"),
    }
}

/// The first `nameserver` of a resolv.conf text, on port 53.
pub(crate) fn system_resolver(resolv_conf: &str) -> Option<SocketAddr> {
    resolv_conf.lines().find_map(|l| {
        let mut words = l.split_whitespace();
        (words.next() == Some("nameserver"))
            .then(|| words.next())
            .flatten()
            .and_then(|a| a.split('%').next())
            .and_then(|a| a.parse::<IpAddr>().ok())
            .map(|ip| SocketAddr::new(ip, 53))
    })
}

#[cfg(test)]
mod tests;
