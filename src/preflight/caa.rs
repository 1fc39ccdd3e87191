//! CAA (RFC 8659) as the CA reads it: the record's wire form, an `issue`/`issuewild`
//! value's issuer domain and parameters (RFC 8657's `accounturi` and `validationmethods`
//! included), and the pure decision whether a CA may issue for a name given the relevant
//! RRset.

use std::fmt;

/// The critical flag of a CAA record (the high bit of the flags octet).
pub(crate) const CRITICAL: u8 = 128;
/// Tags whose meaning the pre-flight knows (a critical record with another tag forbids).
const KNOWN_TAGS: &[&str] = &[
    "issue",
    "issuewild",
    "iodef",
    "issuemail",
    "issuevmc",
    "contactemail",
    "contactphone",
];

/// One CAA record.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Caa {
    pub flags: u8,
    /// Lower case (tags compare without case).
    pub tag: String,
    pub value: Vec<u8>,
}

impl fmt::Display for Caa {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let value = String::from_utf8_lossy(&self.value);
        write!(
            f,
            "CAA {} {} \"{}\"",
            self.flags,
            self.tag,
            crate::values::text::printable(&value)
        )
    }
}

/// Why a CAA record could not be read.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum CaaError {
    #[error("a CAA record is shorter than its flags and tag length")]
    Short,
    #[error("a CAA record's tag is empty, longer than its data or not letters and digits")]
    BadTag,
}

/// Reads a CAA record's RDATA.
pub fn parse(rdata: &[u8]) -> Result<Caa, CaaError> {
    let [flags, len, rest @ ..] = rdata else {
        return Err(CaaError::Short);
    };
    let len = *len as usize;
    if len == 0 || len > rest.len() {
        return Err(CaaError::BadTag);
    }
    let (tag, value) = rest.split_at(len);
    if !tag.iter().all(u8::is_ascii_alphanumeric) {
        return Err(CaaError::BadTag);
    }
    Ok(Caa {
        flags: *flags,
        tag: String::from_utf8_lossy(tag).to_ascii_lowercase(),
        value: value.to_vec(),
    })
}

/// An `issue`/`issuewild` value as read: the issuer domain and the parameters in order.
pub(crate) type IssuerValue = (Option<String>, Vec<(String, String)>);

/// An `issue`/`issuewild` value: the issuer domain (`None` for `";"`, which names no CA) and
/// its parameters, or `None` when the value is malformed (then it authorises no CA).
pub fn issuer_value(value: &[u8]) -> Option<IssuerValue> {
    let text = std::str::from_utf8(value).ok()?;
    let mut parts = text.split(';');
    let domain = parts.next().unwrap_or("").trim();
    let domain = if domain.is_empty() {
        None
    } else {
        let ok = domain.split('.').all(|l| {
            !l.is_empty()
                && l.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'-')
                && !l.starts_with('-')
                && !l.ends_with('-')
        });
        if !ok {
            return None;
        }
        Some(domain.to_ascii_lowercase())
    };
    let mut params = Vec::new();
    for p in parts {
        let p = p.trim();
        if p.is_empty() {
            continue;
        }
        let (k, v) = p.split_once('=')?;
        let (k, v) = (k.trim(), v.trim());
        if k.is_empty() || !k.bytes().all(|b| b.is_ascii_alphanumeric()) {
            return None;
        }
        if v.bytes()
            .any(|b| b.is_ascii_whitespace() || b == b';' || !b.is_ascii_graphic())
        {
            return None;
        }
        params.push((k.to_ascii_lowercase(), v.to_owned()));
    }
    Some((domain, params))
}

/// What the agent knows of the CA and the order when it reads CAA.
#[derive(Debug, Clone, Default)]
pub struct Requester<'a> {
    /// The CA's CAA identities (issuer domain names), lower case.
    pub identities: &'a [String],
    /// The account URI at the CA, when the agent knows it (ACME).
    pub account_uri: Option<&'a str>,
    /// The validation method as RFC 8657 names it (`http-01`, `dns-01`), when known.
    pub method: Option<&'a str>,
}

/// The decision for one name.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Decision {
    /// No CAA record applies (none found, or only tags that do not restrict issuance).
    Unrestricted,
    /// A record names this CA with parameters that fit: the record.
    Allowed(String),
    /// The CA may not issue: why, naming the records.
    Forbidden(String),
    /// The CAA records name CAs but the agent knows no identity of this CA to compare.
    Unknown(String),
}

/// Whether the CA of `who` may issue for a name (`wildcard` for `*.name`) whose relevant
/// CAA RRset (RFC 8659 section 3: the closest one climbing from the name) is `set`.
pub fn decide(set: &[Caa], wildcard: bool, who: &Requester<'_>) -> Decision {
    if let Some(c) = set
        .iter()
        .find(|c| c.flags & CRITICAL != 0 && !KNOWN_TAGS.contains(&c.tag.as_str()))
    {
        return Decision::Forbidden(format!(
            "the record {c} is critical (flag 128) with a tag no CA may ignore"
        ));
    }
    let issue: Vec<&Caa> = set.iter().filter(|c| c.tag == "issue").collect();
    let wild: Vec<&Caa> = set.iter().filter(|c| c.tag == "issuewild").collect();
    let relevant = if wildcard && !wild.is_empty() {
        wild
    } else {
        issue
    };
    if relevant.is_empty() {
        return Decision::Unrestricted;
    }
    let list = || {
        relevant
            .iter()
            .map(ToString::to_string)
            .collect::<Vec<_>>()
            .join(", ")
    };
    if who.identities.is_empty() {
        return Decision::Unknown(list());
    }
    let mut named_with_other_terms = None;
    for c in &relevant {
        let Some((Some(domain), params)) = issuer_value(&c.value) else {
            continue;
        };
        if !who
            .identities
            .iter()
            .any(|i| i.eq_ignore_ascii_case(&domain))
        {
            continue;
        }
        match params_fit(&params, who) {
            Ok(()) => return Decision::Allowed(c.to_string()),
            Err(why) => {
                named_with_other_terms.get_or_insert(format!("{c} names this CA but {why}"));
            }
        }
    }
    Decision::Forbidden(match named_with_other_terms {
        Some(why) => why,
        None => format!(
            "{} {} no CAA identity of this CA ({})",
            list(),
            if relevant.len() == 1 { "names" } else { "name" },
            who.identities.join(", ")
        ),
    })
}

/// RFC 8657: `accounturi` must be the account's, `validationmethods` must list the method.
/// An unknown account or method cannot be shown to fit.
fn params_fit(params: &[(String, String)], who: &Requester<'_>) -> Result<(), String> {
    for (k, v) in params {
        match k.as_str() {
            "accounturi" => match who.account_uri {
                Some(a) if a == v => {}
                Some(_) => return Err(format!("only for the account {v}")),
                None => {
                    return Err(format!(
                        "only for the account {v}, which this agent cannot check for this CA"
                    ));
                }
            },
            "validationmethods" => {
                let allowed: Vec<&str> = v.split(',').map(str::trim).collect();
                match who.method {
                    Some(m) if allowed.iter().any(|a| a.eq_ignore_ascii_case(m)) => {}
                    Some(m) => {
                        return Err(format!("only with validation methods {v}, not {m}"));
                    }
                    None => return Err(format!("only with validation methods {v}")),
                }
            }
            _ => {}
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests;
