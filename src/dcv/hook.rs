//! DNS validation (`dcv = "cname"` → CNAME_CSR_HASH, `dcv = "dns-txt"` → DNS_TXT_TOKEN, ACME's
//! `dns-01`): the record the CA looks for, and the `dns_hook` program that adds or removes it.
//!
//! The hook is started directly from its argument vector, never through a shell. It gets the
//! record in its environment:
//!
//! | Variable | Value |
//! |---|---|
//! | `CERT_AGENT_DCV_ACTION` | `add` or `remove` |
//! | `CERT_AGENT_DCV_RECORD_NAME` | e.g. `_pki-validation.example.com` or `_acme-challenge.example.com` (no trailing dot) |
//! | `CERT_AGENT_DCV_RECORD_TYPE` | `CNAME` or `TXT` |
//! | `CERT_AGENT_DCV_RECORD_VALUE` | the CNAME target or the TXT value |
//! | `CERT_AGENT_DCV_DOMAIN` | the certificate's domain being validated |
//! | `CERT_AGENT_NAME` | the configured certificate name |
//!
//! Its stdin is empty; stdout and stderr are captured (bounded). It runs in its own process
//! group, which is killed when the timeout passes. A non-zero exit is an error that quotes the
//! end of its stderr.

use std::time::Duration;

use serde::{Deserialize, Serialize};

use super::DcvError;
use crate::crypto::CsrHashes;
use crate::process::{self, RunError};
use crate::values::text::{quote, quote_max};

/// Most bytes of the hook's stderr (and stdout) kept.
const MAX_CAPTURE: usize = 4096;
/// Most characters of stderr quoted in an error.
const MAX_STDERR_QUOTE: usize = 1000;
/// Longest TXT value accepted from the API (one DNS character-string).
const MAX_TXT_VALUE: usize = 255;

/// The kind of DNS record.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "UPPERCASE")]
pub enum RecordType {
    /// CNAME_CSR_HASH.
    Cname,
    /// DNS_TXT_TOKEN.
    Txt,
}

impl RecordType {
    /// `CNAME` or `TXT`.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Cname => "CNAME",
            Self::Txt => "TXT",
        }
    }
}

/// A DNS record for domain control validation. Every part is checked when built by
/// [`txt_record`] or [`cname_record`]: names are lower-case host names, values are free of
/// anything a hook could misread.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct DnsRecord {
    /// The certificate's domain this record validates (as configured, may be `*.`).
    pub domain: String,
    /// Owner name, without trailing dot.
    pub name: String,
    /// CNAME or TXT.
    pub record_type: RecordType,
    /// CNAME target (without trailing dot) or TXT value.
    pub value: String,
}

impl std::fmt::Display for DnsRecord {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "{} {} {}",
            self.name,
            self.record_type.as_str(),
            self.value
        )
    }
}

/// The DNS_TXT_TOKEN record: `_pki-validation.<domain>` (a wildcard without `*.`) with the
/// random value from the DCV status (`emails.random_value`) or `dcv_content`.
///
/// The value comes from the API and is untrusted: 1 to 255 characters of letters, digits and
/// `- _ . + / = :`.
pub fn txt_record(domain: &str, random_value: &str) -> Result<DnsRecord, DcvError> {
    txt_record_at("_pki-validation", domain, random_value)
}

/// ACME's `dns-01` record (RFC 8555, section 8.4): `_acme-challenge.<domain>` (a wildcard
/// without `*.`) with the base64url SHA-256 of the key authorization. Checked like
/// [`txt_record`]'s value.
pub(crate) fn acme_txt_record(domain: &str, digest: &str) -> Result<DnsRecord, DcvError> {
    txt_record_at("_acme-challenge", domain, digest)
}

/// A TXT record `<label>.<domain>` with `value`, both checked.
fn txt_record_at(label: &str, domain: &str, random_value: &str) -> Result<DnsRecord, DcvError> {
    let base = check_domain(domain)?;
    let value = random_value.trim();
    if value.is_empty() || value.len() > MAX_TXT_VALUE {
        return Err(DcvError::DnsRecord {
            what: "TXT value",
            found: quote(random_value),
            problem: "empty or longer than 255 characters",
        });
    }
    if !value
        .bytes()
        .all(|b| b.is_ascii_alphanumeric() || b"-_.+/=:".contains(&b))
    {
        return Err(DcvError::DnsRecord {
            what: "TXT value",
            found: quote(random_value),
            problem: "characters other than letters, digits and - _ . + / = :",
        });
    }
    Ok(DnsRecord {
        domain: domain.to_owned(),
        name: format!("{label}.{base}"),
        record_type: RecordType::Txt,
        value: value.to_owned(),
    })
}

/// The CNAME_CSR_HASH record. This is the single definition of its shape:
///
/// - name: `_<MD5 of the CSR DER>.<domain>` (a wildcard without `*.`);
/// - value: `<SHA-256[0..32]>.<SHA-256[32..64]>[.<unique value>].<CA domain>`;
///
/// all lower case (DNS compares names case-insensitively; hooks may not). The unique value is
/// present for family S (DCV status `unique_value`, at most 20 letters and digits), absent for
/// the other families. `ca_domain` is the CA's validation domain of the certificate's family
/// (e.g. `sectigo.com`).
pub(crate) fn cname_record(
    domain: &str,
    hashes: &CsrHashes,
    unique_value: Option<&str>,
    ca_domain: &str,
) -> Result<DnsRecord, DcvError> {
    let base = check_domain(domain)?;
    let ca = check_domain(ca_domain)?;
    if ca_domain.starts_with("*.") {
        return Err(DcvError::DnsRecord {
            what: "CA domain",
            found: quote(ca_domain),
            problem: "wildcard",
        });
    }
    let hex = |s: &str, len: usize| s.len() == len && s.bytes().all(|b| b.is_ascii_hexdigit());
    if !hex(&hashes.md5, 32) || !hex(&hashes.sha256, 64) {
        return Err(DcvError::DnsRecord {
            what: "CSR hash",
            found: quote(&hashes.md5),
            problem: "not an MD5 / SHA-256 in hex",
        });
    }
    let sha = hashes.sha256.to_ascii_lowercase();
    let (a, b) = sha.split_at(32);
    let value = match unique_value {
        Some(uv) => {
            if uv.is_empty() || uv.len() > 20 || !uv.bytes().all(|b| b.is_ascii_alphanumeric()) {
                return Err(DcvError::DnsRecord {
                    what: "unique value",
                    found: quote(uv),
                    problem: "not 1 to 20 letters and digits",
                });
            }
            format!("{a}.{b}.{}.{ca}", uv.to_ascii_lowercase())
        }
        None => format!("{a}.{b}.{ca}"),
    };
    Ok(DnsRecord {
        domain: domain.to_owned(),
        name: format!("_{}.{base}", hashes.md5.to_ascii_lowercase()),
        record_type: RecordType::Cname,
        value,
    })
}

/// Checks a host name (optionally `*.`-prefixed) and returns it lower case without `*.` and
/// trailing dot.
fn check_domain(domain: &str) -> Result<String, DcvError> {
    let bad = |problem| DcvError::DnsRecord {
        what: "domain",
        found: quote(domain),
        problem,
    };
    let base = domain.strip_prefix("*.").unwrap_or(domain);
    let base = base.strip_suffix('.').unwrap_or(base).to_ascii_lowercase();
    if base.is_empty() || base.len() > 253 {
        return Err(bad("empty or longer than 253 characters"));
    }
    for label in base.split('.') {
        if label.is_empty() || label.len() > 63 {
            return Err(bad("empty label or label longer than 63 characters"));
        }
        if !label
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_')
        {
            return Err(bad("characters other than letters, digits, '-' and '_'"));
        }
        if label.starts_with('-') || label.ends_with('-') {
            return Err(bad("label starts or ends with '-'"));
        }
    }
    Ok(base)
}

/// Add or remove the record.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum HookAction {
    /// Create the record.
    Add,
    /// Delete the record.
    Remove,
}

impl HookAction {
    /// `add` or `remove`.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Add => "add",
            Self::Remove => "remove",
        }
    }
}

/// The configured `dns_hook`: a program and its arguments, and how long it may run.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DnsHook {
    /// Program (first element; looked up in `PATH` when it has no `/`) and its arguments.
    pub argv: Vec<String>,
    /// Longest run before the hook's process group is killed.
    pub timeout: Duration,
}

/// What a successful hook printed (each bounded, lossy UTF-8).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct HookOutput {
    /// Standard output.
    pub stdout: String,
    /// Standard error.
    pub stderr: String,
}

/// Runs the hook to `action` `record` for certificate `cert_name`. Succeeds when the program
/// exits 0 within the timeout.
pub async fn run(
    hook: &DnsHook,
    action: HookAction,
    record: &DnsRecord,
    cert_name: &str,
) -> Result<HookOutput, DcvError> {
    let Some(program) = hook.argv.first() else {
        return Err(DcvError::HookConfig {
            reason: "the command is empty",
        });
    };
    if program.is_empty() {
        return Err(DcvError::HookConfig {
            reason: "the program name is empty",
        });
    }
    let what = record.to_string();
    let spawn_error = |source| DcvError::HookSpawn {
        program: program.clone(),
        action: action.as_str(),
        record: what.clone(),
        source,
    };
    let cmd = process::Command::new(&hook.argv, hook.timeout)
        // Whatever an outer agent run left in the environment must not be mistaken for ours.
        .env_remove_prefix("CERT_AGENT_DCV_")
        .env("CERT_AGENT_DCV_ACTION", action.as_str())
        .env("CERT_AGENT_DCV_RECORD_NAME", &record.name)
        .env("CERT_AGENT_DCV_RECORD_TYPE", record.record_type.as_str())
        .env("CERT_AGENT_DCV_RECORD_VALUE", &record.value)
        .env("CERT_AGENT_DCV_DOMAIN", &record.domain)
        .env("CERT_AGENT_NAME", cert_name)
        .own_process_group()
        .output_limit(MAX_CAPTURE);
    let done = process::run(cmd).await.map_err(|e| match e {
        RunError::Empty => DcvError::HookConfig {
            reason: "the command is empty",
        },
        RunError::NotFound { .. } => spawn_error(std::io::ErrorKind::NotFound.into()),
        RunError::Spawn(source) | RunError::Wait(source) => spawn_error(source),
        RunError::Timeout { .. } => DcvError::HookTimeout {
            program: program.clone(),
            action: action.as_str(),
            record: what.clone(),
            timeout: hook.timeout,
        },
    })?;
    let status = done.status;
    let output = HookOutput {
        stdout: String::from_utf8_lossy(&done.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&done.stderr).into_owned(),
    };
    if status.success() {
        tracing::debug!(
            "dns_hook {program} {} {what}: ok; stdout: {}",
            action.as_str(),
            quote_max(output.stdout.trim(), MAX_STDERR_QUOTE)
        );
        Ok(output)
    } else {
        Err(DcvError::HookFailed {
            program: program.clone(),
            action: action.as_str(),
            record: what,
            status: status.to_string(),
            stderr: quote_max(output.stderr.trim(), MAX_STDERR_QUOTE),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn hashes() -> CsrHashes {
        CsrHashes::of_der(b"a CSR")
    }

    #[test]
    fn txt_record_for_domain_and_wildcard() {
        let r = txt_record("www.example.com", "abcDEF123").unwrap();
        assert_eq!(r.name, "_pki-validation.www.example.com");
        assert_eq!(r.record_type, RecordType::Txt);
        assert_eq!(r.value, "abcDEF123");
        let r = txt_record("*.Example.com", "abc").unwrap();
        assert_eq!(r.name, "_pki-validation.example.com");
        assert_eq!(r.domain, "*.Example.com");
    }

    #[test]
    fn hostile_txt_values_and_domains_are_refused() {
        for value in [
            "",
            "a b",
            "$(reboot)",
            "a;b",
            "a\nb",
            "`id`",
            &"x".repeat(256),
        ] {
            assert!(txt_record("example.com", value).is_err(), "{value:?}");
        }
        for domain in [
            "",
            "a..b",
            "-a.com",
            "a b.com",
            "a/b",
            "$(x).com",
            "*.*.a.com",
        ] {
            assert!(txt_record(domain, "abc").is_err(), "{domain:?}");
        }
    }

    #[test]
    fn cname_record_shape() {
        let h = hashes();
        let sha = h.sha256.to_lowercase();
        let r = cname_record("*.example.com", &h, Some("AbC12"), "sectigo.com").unwrap();
        assert_eq!(r.name, format!("_{}.example.com", h.md5.to_lowercase()));
        assert_eq!(r.record_type, RecordType::Cname);
        assert_eq!(
            r.value,
            format!("{}.{}.abc12.sectigo.com", &sha[..32], &sha[32..])
        );
        let r = cname_record("www.example.com", &h, None, "comodoca.com").unwrap();
        assert_eq!(
            r.value,
            format!("{}.{}.comodoca.com", &sha[..32], &sha[32..])
        );
        assert!(cname_record("www.example.com", &h, Some("a-b"), "x.com").is_err());
        assert!(cname_record("www.example.com", &h, None, "*.x.com").is_err());
        assert!(cname_record("www.example.com", &h, None, "x.com;y").is_err());
    }
}
