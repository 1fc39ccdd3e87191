//! Host names and addresses: syntax, internal names and private IP addresses, blocked
//! top-level domains, and the validation addresses accepted for a domain.

use std::net::IpAddr;

use serde_json::{Value, json};

/// Top-level domains the service refuses (sanctioned ccTLDs).
pub(super) const BLOCKED_TLDS: [&str; 4] = ["cu", "ir", "kp", "sy"];

/// Top-level labels that only exist inside private networks; names under them are internal
/// just like names without a dot.
const INTERNAL_TLDS: [&str; 9] = [
    "localhost",
    "local",
    "localdomain",
    "internal",
    "intranet",
    "lan",
    "home",
    "corp",
    "arpa",
];

/// Local parts of the constructed validation addresses.
pub(super) const EMAIL_LOCAL_PARTS: [&str; 5] = [
    "admin",
    "administrator",
    "hostmaster",
    "postmaster",
    "webmaster",
];

/// What a name is, for order validation.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) enum NameClass {
    /// A public host name (possibly `*.` wildcard).
    Public,
    /// Malformed: the reason.
    Invalid(String),
    /// No dot, or under an internal top-level label.
    Internal,
    PrivateIp,
    PublicIp,
    /// Under a blocked top-level domain: the TLD.
    Blocked(String),
}

/// `*.example.com` → `example.com`; other names unchanged.
pub(super) fn base_domain(name: &str) -> &str {
    name.strip_prefix("*.").unwrap_or(name)
}

pub(super) fn is_wildcard(name: &str) -> bool {
    name.starts_with("*.")
}

/// True for addresses that are not globally routable.
pub(super) fn is_private_ip(ip: &IpAddr) -> bool {
    match ip {
        IpAddr::V4(v4) => {
            let o = v4.octets();
            v4.is_private()
                || v4.is_loopback()
                || v4.is_link_local()
                || v4.is_unspecified()
                || v4.is_broadcast()
                || o[0] == 0
                || (o[0] == 100 && (64..=127).contains(&o[1]))
        }
        IpAddr::V6(v6) => {
            if let Some(v4) = v6.to_ipv4_mapped() {
                return is_private_ip(&IpAddr::V4(v4));
            }
            let first = v6.segments()[0];
            v6.is_loopback()
                || v6.is_unspecified()
                || (first & 0xfe00) == 0xfc00
                || (first & 0xffc0) == 0xfe80
        }
    }
}

/// Syntax check of a (lower-case) host name, `*.` allowed as the whole leftmost label.
fn syntax_problem(name: &str) -> Option<String> {
    if name.is_empty() {
        return Some("is empty".to_string());
    }
    if name.len() > 253 {
        return Some("is longer than 253 characters".to_string());
    }
    if name.ends_with('.') {
        return Some("ends with a dot".to_string());
    }
    let rest = base_domain(name);
    if rest.contains('*') {
        return Some("has a '*' other than a leading '*.' label".to_string());
    }
    for label in rest.split('.') {
        if label.is_empty() {
            return Some("has an empty label".to_string());
        }
        if label.len() > 63 {
            return Some(format!("has a label longer than 63 characters ('{label}')"));
        }
        if !label
            .bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-')
        {
            return Some(format!(
                "has a label with characters other than letters, digits and '-' ('{label}')"
            ));
        }
        if label.starts_with('-') || label.ends_with('-') {
            return Some(format!(
                "has a label starting or ending with '-' ('{label}')"
            ));
        }
    }
    let tld = rest.rsplit('.').next().unwrap_or(rest);
    if rest.contains('.') && tld.bytes().all(|b| b.is_ascii_digit()) {
        return Some("has a numeric top-level label".to_string());
    }
    None
}

/// Classifies a name as entered (already lower-cased by the caller).
pub(super) fn classify(name: &str) -> NameClass {
    if let Ok(ip) = name.parse::<IpAddr>() {
        return if is_private_ip(&ip) {
            NameClass::PrivateIp
        } else {
            NameClass::PublicIp
        };
    }
    if let Some(problem) = syntax_problem(name) {
        return NameClass::Invalid(problem);
    }
    let base = base_domain(name);
    let Some((_, tld)) = base.rsplit_once('.') else {
        return NameClass::Internal;
    };
    if INTERNAL_TLDS.contains(&tld) {
        return NameClass::Internal;
    }
    if BLOCKED_TLDS.contains(&tld) {
        return NameClass::Blocked(tld.to_string());
    }
    NameClass::Public
}

/// The problem with a name that is to be ordered, as the tail of a sentence naming it
/// (e.g. "is an internal name"), or `None` when it may be ordered.
pub(super) fn order_name_problem(name: &str) -> Option<String> {
    match classify(name) {
        NameClass::Public => None,
        NameClass::Invalid(why) => Some(format!("is not a valid host name: it {why}")),
        NameClass::Internal => Some(
            "is an internal name (a host name without a dot or under an internal top-level domain)"
                .to_string(),
        ),
        NameClass::PrivateIp => Some("is a private IP address (internal)".to_string()),
        NameClass::PublicIp => Some("is an IP address; only host names can be ordered".to_string()),
        NameClass::Blocked(tld) => Some(format!("is under the blocked top-level domain .{tld}")),
    }
}

/// True for CSR names the service refuses even when they are not ordered.
pub(super) fn is_internal(name: &str) -> bool {
    matches!(classify(name), NameClass::Internal | NameClass::PrivateIp)
}

/// The domain and its parents with at least two labels, longest first (`*.` removed).
pub(super) fn email_domains(name: &str) -> Vec<String> {
    let base = base_domain(name);
    let labels: Vec<&str> = base.split('.').collect();
    (0..labels.len().saturating_sub(1))
        .map(|i| labels[i..].join("."))
        .collect()
}

fn addresses_at(domain: &str) -> Vec<String> {
    EMAIL_LOCAL_PARTS
        .iter()
        .map(|local| format!("{local}@{domain}"))
        .collect()
}

/// Every validation address accepted for `name` (constructed addresses at the domain and at
/// each parent).
pub(super) fn accepted_emails(name: &str) -> Vec<String> {
    email_domains(name)
        .iter()
        .flat_map(|d| addresses_at(d))
        .collect()
}

pub(super) fn email_accepted_for(email: &str, name: &str) -> bool {
    let email = email.to_ascii_lowercase();
    accepted_emails(name).contains(&email)
}

/// A DcvEmails object for `name`: `level_2` holds the addresses at the registrable (two-label)
/// domain, `level_3` those at every longer suffix, `whois` is empty (the sandbox has no WHOIS).
pub(super) fn dcv_emails_value(name: &str) -> Value {
    let domains = email_domains(name);
    let (level_2, level_3): (Vec<String>, Vec<String>) = match domains.split_last() {
        Some((two, longer)) => (
            addresses_at(two),
            longer.iter().rev().flat_map(|d| addresses_at(d)).collect(),
        ),
        None => (Vec::new(), Vec::new()),
    };
    json!({ "whois": [], "level_2": level_2, "level_3": level_3 })
}

/// A plausible e-mail address (for contact fields).
pub(super) fn looks_like_email(s: &str) -> bool {
    match s.split_once('@') {
        Some((local, domain)) => {
            !local.is_empty()
                && !local.contains(char::is_whitespace)
                && domain.contains('.')
                && syntax_problem(&domain.to_ascii_lowercase()).is_none()
        }
        None => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn classifies_names() {
        assert_eq!(classify("www.example.com"), NameClass::Public);
        assert_eq!(classify("*.example.com"), NameClass::Public);
        assert_eq!(classify("server"), NameClass::Internal);
        assert_eq!(classify("db.internal"), NameClass::Internal);
        assert_eq!(classify("printer.local"), NameClass::Internal);
        assert_eq!(classify("10.1.2.3"), NameClass::PrivateIp);
        assert_eq!(classify("192.168.0.1"), NameClass::PrivateIp);
        assert_eq!(classify("172.16.5.5"), NameClass::PrivateIp);
        assert_eq!(classify("127.0.0.1"), NameClass::PrivateIp);
        assert_eq!(classify("100.64.0.1"), NameClass::PrivateIp);
        assert_eq!(classify("fd00::1"), NameClass::PrivateIp);
        assert_eq!(classify("fe80::1"), NameClass::PrivateIp);
        assert_eq!(classify("8.8.8.8"), NameClass::PublicIp);
        assert_eq!(classify("shop.example.cu"), NameClass::Blocked("cu".into()));
        assert!(matches!(classify("a..b.com"), NameClass::Invalid(_)));
        assert!(matches!(classify("-a.com"), NameClass::Invalid(_)));
        assert!(matches!(classify("a_b.com"), NameClass::Invalid(_)));
        assert!(matches!(classify("www.*.com"), NameClass::Invalid(_)));
        assert!(matches!(classify("**.com"), NameClass::Invalid(_)));
        assert!(matches!(classify("example.com."), NameClass::Invalid(_)));
        assert!(matches!(classify("example.123"), NameClass::Invalid(_)));
        assert!(matches!(
            classify(&format!("{}.com", "a".repeat(64))),
            NameClass::Invalid(_)
        ));
    }

    #[test]
    fn validation_addresses_cover_domain_and_parents() {
        let v = dcv_emails_value("www.shop.example.com");
        assert_eq!(v["level_2"][0], "admin@example.com");
        assert_eq!(v["level_2"].as_array().unwrap().len(), 5);
        assert_eq!(v["level_3"].as_array().unwrap().len(), 10);
        assert_eq!(v["level_3"][0], "admin@shop.example.com");
        assert!(email_accepted_for(
            "Webmaster@www.shop.example.com",
            "www.shop.example.com"
        ));
        assert!(email_accepted_for("admin@example.com", "*.example.com"));
        assert!(!email_accepted_for("info@example.com", "example.com"));
        assert!(!email_accepted_for("admin@other.com", "example.com"));
        assert!(!email_accepted_for("admin@com", "example.com"));
    }
}
