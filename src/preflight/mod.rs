//! Pre-flight: what the CA will check in DNS before it issues, checked by the agent before
//! a billed order is placed. For each name the relevant CAA RRset (RFC 8659: the closest
//! one climbing from the name, CNAMEs followed) must let the product's CA issue, and the
//! answers must validate (DNSSEC): a bogus zone stops the order, an unsigned one is a
//! warning. A resolver that cannot be reached is a warning too (the agent cannot tell).
//!
//! A leaf: it knows DNS, not the configuration; the engine passes [`Settings`] and the
//! CA's identities.

pub(crate) mod caa;
mod resolve;
pub(crate) mod wire;

use std::collections::HashMap;
use std::net::{IpAddr, SocketAddr};
use std::time::{Duration, Instant};

use serde::Serialize;

pub(crate) use caa::{Decision, Requester};
pub(crate) use resolve::{LookupError, system_resolver};

/// What the pre-flight checks and asks.
#[derive(Debug, Clone)]
pub(crate) struct Settings {
    pub caa: bool,
    pub dnssec: bool,
    /// A name validated over HTTP must resolve (A/AAAA).
    pub http: bool,
    pub resolver: SocketAddr,
    pub timeout: Duration,
}

/// How bad a finding is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub(crate) enum Level {
    Ok,
    Warning,
    Failure,
}

/// How the certificate's names are validated, for what the pre-flight asks beyond CAA.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Validation {
    /// The validation file over HTTP: the name must resolve to an address.
    Http,
    /// A TXT record at `<label>.<name>` (`_pki-validation`, `_acme-challenge`): its answer
    /// must not be bogus.
    Txt(&'static str),
    /// A CNAME at `_<hash>.<name>`, known once the CSR is made: the CNAME question for the
    /// name itself asks the zone the record will be in.
    Cname,
    /// Email: nothing in DNS beyond CAA.
    Email,
}

/// One finding for one name.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub(crate) struct Finding {
    pub name: String,
    pub level: Level,
    /// `caa`, `dnssec` or `http`.
    pub check: &'static str,
    /// What was found, naming the record and the zone.
    pub message: String,
    /// What to change, for a warning or failure.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub fix: Option<String>,
}

/// The pre-flight of one certificate's names.
#[derive(Debug, Clone, Default, Serialize)]
pub(crate) struct Report {
    pub findings: Vec<Finding>,
    /// DNS questions sent.
    pub queries: u32,
    pub millis: u64,
}

impl Report {
    /// The failures, each on its own line: what stops the order.
    pub(crate) fn failures(&self) -> Vec<&Finding> {
        self.findings
            .iter()
            .filter(|f| f.level == Level::Failure)
            .collect()
    }

    /// The warnings.
    pub(crate) fn warnings(&self) -> Vec<&Finding> {
        self.findings
            .iter()
            .filter(|f| f.level == Level::Warning)
            .collect()
    }
}

/// The CAA identities of a CA known by its Partner product's issuer value or brand, or by
/// the name `letsencrypt` for an ACME CA at Let's Encrypt. Case does not matter.
const IDENTITIES: &[(&str, &[&str])] = &[
    // The Partner sandbox's issuer values (families S, D and C).
    ("s-one", &["s-one.partner-sandbox.test"]),
    ("s-two", &["s-two.partner-sandbox.test"]),
    ("d-one", &["d-one.partner-sandbox.test"]),
    ("c-one", &["c-one.partner-sandbox.test"]),
    ("sectigo", &["sectigo.com", "comodoca.com", "comodo.com"]),
    ("comodo", &["sectigo.com", "comodoca.com", "comodo.com"]),
    ("positivessl", &["sectigo.com", "comodoca.com"]),
    (
        "digicert",
        &[
            "digicert.com",
            "symantec.com",
            "thawte.com",
            "geotrust.com",
            "rapidssl.com",
        ],
    ),
    ("geotrust", &["digicert.com", "geotrust.com"]),
    ("rapidssl", &["digicert.com", "rapidssl.com"]),
    ("thawte", &["digicert.com", "thawte.com"]),
    ("globalsign", &["globalsign.com"]),
    ("certum", &["certum.pl", "certum.eu"]),
    ("letsencrypt", &["letsencrypt.org"]),
    ("let's encrypt", &["letsencrypt.org"]),
];

/// The built-in CAA identities for the first of `keys` (issuer value, brand) the table
/// knows; empty when none.
pub(crate) fn known_identities<'a>(keys: impl IntoIterator<Item = &'a str>) -> Vec<String> {
    keys.into_iter()
        .find_map(|k| {
            IDENTITIES
                .iter()
                .find(|(n, _)| n.eq_ignore_ascii_case(k.trim()))
        })
        .map(|(_, ids)| ids.iter().map(|s| (*s).to_owned()).collect())
        .unwrap_or_default()
}

/// Runs the pre-flight for `names` (a wildcard as `*.example.org`) validated by `validation`.
pub(crate) async fn check(
    settings: &Settings,
    names: &[String],
    who: &Requester<'_>,
    validation: Validation,
) -> Report {
    let started = Instant::now();
    let mut report = Report::default();
    let http = settings.http && validation == Validation::Http;
    let record = settings.dnssec && matches!(validation, Validation::Txt(_) | Validation::Cname);
    if !settings.caa && !settings.dnssec && !http {
        return report;
    }
    let resolver = resolve::Resolver {
        addr: settings.resolver,
        timeout: settings.timeout,
        dnssec: settings.dnssec,
    };
    let mut cache = HashMap::new();
    let mut unsigned = Vec::new();
    for full in names {
        let (wildcard, base) = match full.strip_prefix("*.") {
            Some(rest) => (true, rest),
            None => (false, full.as_str()),
        };
        let name = crate::values::text::printable(full);
        if settings.caa || settings.dnssec {
            match resolver.caa(base, &mut cache).await {
                Ok(found) => {
                    report.queries += found.queries;
                    if settings.dnssec && !found.validated {
                        unsigned.push(name.clone());
                    }
                    if settings.caa {
                        report
                            .findings
                            .push(caa_finding(&name, wildcard, &found, who));
                    }
                }
                Err(e) => report.findings.push(lookup_finding(&name, &e, "caa")),
            }
        }
        if http && !wildcard {
            report
                .findings
                .push(address_finding(&resolver, &name, base, &mut report.queries).await);
        }
        if record {
            let asked = match validation {
                Validation::Txt(label) => (format!("{label}.{base}"), wire::TYPE_TXT),
                _ => (base.to_owned(), wire::TYPE_CNAME),
            };
            match resolver.record(&asked.0, asked.1).await {
                Ok(checked) => report.queries += checked.queries,
                Err(e) => report.findings.push(lookup_finding(&name, &e, "dns")),
            }
        }
    }
    if !unsigned.is_empty() {
        report
            .findings
            .push(unsigned_finding(&unsigned, settings.resolver));
    }
    report.millis = u64::try_from(started.elapsed().as_millis()).unwrap_or(u64::MAX);
    report
}

/// The addresses of `name` through the resolver of `settings`, for the self-check of the
/// validation file; a bogus answer or none at all is an error.
pub(crate) async fn addresses(settings: &Settings, name: &str) -> Result<Vec<IpAddr>, LookupError> {
    let resolver = resolve::Resolver {
        addr: settings.resolver,
        timeout: settings.timeout,
        dnssec: settings.dnssec,
    };
    resolver.addresses(name).await.map(|a| a.addrs)
}

/// Whether `name` resolves, for HTTP validation.
async fn address_finding(
    resolver: &resolve::Resolver,
    name: &str,
    base: &str,
    queries: &mut u32,
) -> Finding {
    let found = match resolver.addresses(base).await {
        Ok(found) => found,
        Err(e) => return lookup_finding(name, &e, "http"),
    };
    *queries += found.queries;
    let (level, message, fix) = if found.addrs.is_empty() {
        let answer = if found.nxdomain {
            "that the name does not exist (NXDOMAIN)"
        } else {
            "no A or AAAA record"
        };
        (
            Level::Failure,
            format!(
                "{name} has no address: the resolver {} answers {answer}; the CA cannot fetch \
                 the validation file",
                resolver.addr
            ),
            Some(format!(
                "add an A or AAAA record for {name} pointing at the web server that serves \
                 /.well-known/, or validate by DNS (dcv = \"dns_txt\" or \"cname\")"
            )),
        )
    } else {
        let list: Vec<String> = found.addrs.iter().map(ToString::to_string).collect();
        (
            Level::Ok,
            format!(
                "{name} resolves to {} (A/AAAA through {})",
                list.join(", "),
                resolver.addr
            ),
            None,
        )
    };
    Finding {
        name: name.to_owned(),
        level,
        check: "http",
        message,
        fix,
    }
}

/// The warning for names whose answers are not DNSSEC-validated.
fn unsigned_finding(unsigned: &[String], resolver: SocketAddr) -> Finding {
    Finding {
        name: unsigned.join(", "),
        level: Level::Warning,
        check: "dnssec",
        message: format!(
            "the answers for {} are not DNSSEC-validated (no AD bit from the resolver {}): \
             the zone is unsigned, or the resolver does not validate",
            unsigned.join(", "),
            resolver
        ),
        fix: Some(
            "nothing is needed to get the certificate; sign the zone (DNSSEC) to protect \
             its CAA records, and point [preflight] resolver at a validating resolver"
                .into(),
        ),
    }
}

/// A lookup that gave no usable answer, for the `check` (`caa`, `http`, `dns`) it served.
fn lookup_finding(name: &str, e: &LookupError, check: &'static str) -> Finding {
    let asked = match check {
        "caa" => {
            "CAA questions (an empty answer is fine); a CA refuses to issue when the CAA \
                  lookup fails"
        }
        "http" => {
            "A and AAAA questions for the name; the CA must resolve it to fetch the \
                   validation file"
        }
        _ => {
            "questions for the validation record (an empty answer is fine until it is \
              placed); the CA must read it"
        }
    };
    let (level, check, fix) = match e {
        LookupError::Bogus { zone, .. } => (
            Level::Failure,
            "dnssec",
            format!(
                "fix the zone {zone}'s DNSSEC: re-sign it, or make its DS record at the parent \
                 match its keys (or remove the DS to make it unsigned); the CA cannot validate \
                 it and will not issue"
            ),
        ),
        LookupError::ServFail { .. }
        | LookupError::Hostile { .. }
        | LookupError::Garbage { .. } => (
            Level::Failure,
            check,
            format!("make the name's authoritative servers answer {asked}"),
        ),
        LookupError::Timeout { .. } | LookupError::Io { .. } => (
            Level::Warning,
            check,
            "check [preflight] resolver (default: the first nameserver of /etc/resolv.conf); \
             the order proceeds unchecked"
                .to_owned(),
        ),
    };
    Finding {
        name: name.to_owned(),
        level,
        check,
        message: e.to_string(),
        fix: Some(fix),
    }
}

fn caa_finding(name: &str, wildcard: bool, found: &resolve::Found, who: &Requester<'_>) -> Finding {
    let at = found.at.as_deref().unwrap_or("");
    let (level, message, fix) = match caa::decide(&found.set, wildcard, who) {
        Decision::Unrestricted if found.at.is_none() => (
            Level::Ok,
            "no CAA record up to the top-level domain".to_owned(),
            None,
        ),
        Decision::Unrestricted => (
            Level::Ok,
            format!("the CAA records at {at} do not restrict issuance for this name"),
            None,
        ),
        Decision::Allowed(rec) => (Level::Ok, format!("{at} {rec} allows this CA"), None),
        Decision::Forbidden(why) => (
            Level::Failure,
            format!("CAA at {at} forbids this CA: {why}"),
            Some(format!(
                "add a CAA record at {at} for this CA, e.g. `{at}. CAA 0 {} \"{}\"`, or order \
                 from a CA it names",
                if wildcard { "issuewild" } else { "issue" },
                who.identities.first().map_or("CA-DOMAIN", String::as_str)
            )),
        ),
        Decision::Unknown(records) => (
            Level::Warning,
            format!("CAA at {at} names CAs ({records}) but this CA's CAA identities are unknown"),
            Some(
                "set [preflight] caa_identities for this product's issuer (see `cert-agent \
                 products`)"
                    .into(),
            ),
        ),
    };
    Finding {
        name: name.to_owned(),
        level,
        check: "caa",
        message,
        fix,
    }
}
