//! Domain control validation: the webroot writer, the standalone HTTP server, DNS hooks and the
//! pre-flight self-check. These are the mechanisms; deciding when to use them is `renew`'s job.
//!
//! What an issuer asks to be published is neutral ([`Challenge`]): an HTTP file at a path with
//! a content, a DNS record, or a step for a person. The writers below serve any of them, for
//! any issuer.
//!
//! - [`ValidationFile`]: the checked name and content of an HTTP validation file, in one of the
//!   [`WellKnown`] directories: the Partner API's CSR-hash file (`pki-validation/<MD5>.txt`;
//!   the API's `dcv_content` is untrusted and cross-checked with [`content`] against our own
//!   CSR hashes before anything is written or served) or ACME's `acme-challenge/<token>`.
//! - [`webroot`]: publishes the file under `<webroot>/.well-known/<directory>/` (never
//!   through a symbolic link) and returns a [`webroot::Published`] record for clean-up.
//! - [`standalone`]: a built-in HTTP/1.1 server that answers nothing but the published files.
//! - [`serve_dir`]: the publish directory and lock shared by `renew` and `cert-agent serve`.
//! - [`hook`]: DNS records for CNAME_CSR_HASH / DNS_TXT_TOKEN and the `dns_hook` program runner.
//! - [`selfcheck`]: fetches the file over plain HTTP as the CA would and names the likely cause
//!   of a failure.

mod challenge;
pub(crate) mod content;
pub(crate) mod hook;
pub(crate) mod selfcheck;
pub(crate) mod serve_dir;
pub(crate) mod standalone;
pub(crate) mod webroot;

use std::net::SocketAddr;
use std::path::PathBuf;

use crate::crypto::CsrHashes;
use crate::values::text::quote;

pub use challenge::Challenge;
pub(crate) use challenge::HttpChallenge;
pub(crate) use content::pki_validation;
pub(crate) use content::{DCV_DIR_NAME, DCV_URL_DIR};

/// Longest validation file content accepted (same bound as the API check).
pub const MAX_CONTENT_BYTES: usize = content::MAX_DCV_CONTENT_BYTES;

/// Most lines accepted in a validation file.
pub(crate) const MAX_CONTENT_LINES: usize = content::MAX_DCV_CONTENT_LINES;

/// The directory under `/.well-known/` a CA fetches a validation file from. It decides the
/// shape of the file's name and content; the two shapes cannot be confused (a CSR-hash file
/// name holds a `.`, an ACME token never does), so a file name alone tells its directory.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum WellKnown {
    /// `/.well-known/pki-validation/<MD5 of the CSR DER, upper-case hex>.txt`: the Partner
    /// API's HTTP(S) CSR-hash validation.
    PkiValidation,
    /// `/.well-known/acme-challenge/<token>`: ACME's `http-01` (RFC 8555, section 8.3).
    AcmeChallenge,
}

/// Shortest ACME token accepted: RFC 8555 asks for at least 128 bits of entropy (22
/// base64url characters); a little slack for CAs that count differently.
const MIN_TOKEN_CHARS: usize = 16;
/// Longest ACME token accepted.
const MAX_TOKEN_CHARS: usize = 128;
/// Length of a base64url SHA-256 JWK thumbprint (RFC 7638), the second half of a key
/// authorization.
const THUMBPRINT_CHARS: usize = 43;

impl WellKnown {
    /// Both directories.
    pub const ALL: [Self; 2] = [Self::PkiValidation, Self::AcmeChallenge];

    /// The directory's name below `.well-known`.
    pub fn dir_name(self) -> &'static str {
        match self {
            Self::PkiValidation => DCV_DIR_NAME,
            Self::AcmeChallenge => "acme-challenge",
        }
    }

    /// The directory as a URL path, e.g. `/.well-known/pki-validation`.
    pub fn url_dir(self) -> &'static str {
        match self {
            Self::PkiValidation => DCV_URL_DIR,
            Self::AcmeChallenge => "/.well-known/acme-challenge",
        }
    }

    /// The directory named `name` below `.well-known`, if it is one of ours.
    pub fn of_dir_name(name: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|w| w.dir_name() == name)
    }

    /// The directory a file named `name` belongs in, if `name` is a validation file name.
    pub fn of_file_name(name: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|w| w.accepts_name(name))
    }

    /// Is `name` a file name of this directory? `<32 upper-case hex>.txt`, or an ACME token
    /// (16 to 128 base64url characters: no `.`, `/`, `%` or anything else a path could use).
    pub fn accepts_name(self, name: &str) -> bool {
        match self {
            Self::PkiValidation => is_file_name(name),
            Self::AcmeChallenge => {
                (MIN_TOKEN_CHARS..=MAX_TOKEN_CHARS).contains(&name.len()) && is_base64url(name)
            }
        }
    }

    /// Why a name is not a file name of this directory, for messages.
    fn name_problem(self) -> &'static str {
        match self {
            Self::PkiValidation => "not 32 upper-case hex digits followed by .txt",
            Self::AcmeChallenge => "not an ACME token of 16 to 128 base64url characters",
        }
    }
}

fn is_base64url(s: &str) -> bool {
    s.bytes()
        .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_')
}

/// An HTTP validation file: its [`WellKnown`] directory, name and content.
///
/// Only constructed through checks. A CSR-hash file's name is exactly 32 upper-case hex
/// digits and `.txt`, its content lines of printable ASCII (LF or CRLF line ends), at most
/// [`MAX_CONTENT_BYTES`] bytes and [`MAX_CONTENT_LINES`] lines. An ACME file's name is its
/// token and its content the key authorization `<token>.<SHA-256 JWK thumbprint>` (RFC 8555,
/// section 8.1), nothing else. Serialised as `{name, content}`: the name tells the directory.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct ValidationFile {
    #[serde(skip)]
    well_known: WellKnown,
    name: String,
    content: String,
}

impl ValidationFile {
    /// The file for our CSR: the name from our own hashes, the content the API reported
    /// (`dcv_content`), which must start with our SHA-256 (checked by
    /// [`content::check_dcv_content`]).
    pub fn for_csr(hashes: &CsrHashes, dcv_content: &str) -> Result<Self, DcvError> {
        let content = content::check_dcv_content(hashes, dcv_content)?;
        Self::from_parts(&hashes.dcv_file_name(), content)
    }

    /// ACME's `http-01` file: `token` and the key authorization it must serve.
    pub fn acme_http01(token: &str, key_authorization: &str) -> Result<Self, DcvError> {
        if !WellKnown::AcmeChallenge.accepts_name(token) {
            return Err(DcvError::FileName {
                found: quote(token),
                problem: WellKnown::AcmeChallenge.name_problem(),
            });
        }
        Self::from_parts(token, key_authorization)
    }

    /// A file from a name and content that are not tied to a CSR or a challenge at hand
    /// (e.g. reloaded from stored state, or read from a publish directory): the name tells
    /// the directory, and both are checked for its shape; see the type's documentation.
    pub fn from_parts(name: &str, content: &str) -> Result<Self, DcvError> {
        let well_known = check_file_name(name)?;
        match well_known {
            WellKnown::PkiValidation => check_content(content)?,
            WellKnown::AcmeChallenge => check_key_authorization(name, content)?,
        }
        Ok(Self {
            well_known,
            name: name.to_owned(),
            content: content.to_owned(),
        })
    }

    /// The directory the file is served from.
    pub fn well_known(&self) -> WellKnown {
        self.well_known
    }

    /// `<MD5>.txt` or the ACME token.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The content, exactly as the issuer gave it.
    pub fn content(&self) -> &str {
        &self.content
    }

    /// The URL path the CA fetches, e.g. `/.well-known/pki-validation/<MD5>.txt`.
    pub fn url_path(&self) -> String {
        format!("{}/{}", self.well_known.url_dir(), self.name)
    }
}

impl<'de> serde::Deserialize<'de> for ValidationFile {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        #[derive(serde::Deserialize)]
        struct Raw {
            name: String,
            content: String,
        }
        let raw = Raw::deserialize(d)?;
        Self::from_parts(&raw.name, &raw.content).map_err(serde::de::Error::custom)
    }
}

/// Is `name` exactly 32 upper-case hex digits followed by `.txt`?
pub(crate) fn is_file_name(name: &str) -> bool {
    name.len() == 36
        && name.ends_with(".txt")
        && name.as_bytes()[..32]
            .iter()
            .all(|b| matches!(b, b'0'..=b'9' | b'A'..=b'F'))
}

/// The directory of the validation file named `name`, or why it is no validation file name.
fn check_file_name(name: &str) -> Result<WellKnown, DcvError> {
    WellKnown::of_file_name(name).ok_or_else(|| DcvError::FileName {
        found: quote(name),
        problem: if name.contains('.') {
            WellKnown::PkiValidation.name_problem()
        } else {
            "neither 32 upper-case hex digits followed by .txt nor an ACME token of 16 to 128 \
             base64url characters"
        },
    })
}

/// An ACME key authorization: `<token>.<43 base64url characters>`, one line, nothing else.
fn check_key_authorization(token: &str, content: &str) -> Result<(), DcvError> {
    let bad = |problem: &'static str| Err(DcvError::FileContent { line: 1, problem });
    let Some((head, thumbprint)) = content.split_once('.') else {
        return bad("not a key authorization (no `.`)");
    };
    if head != token {
        return bad("the key authorization is not for this token");
    }
    if thumbprint.len() != THUMBPRINT_CHARS || !is_base64url(thumbprint) {
        return bad("the key authorization does not end in a base64url SHA-256 thumbprint");
    }
    Ok(())
}

fn check_content(content: &str) -> Result<(), DcvError> {
    let bad = |line: usize, problem: &'static str| Err(DcvError::FileContent { line, problem });
    if content.trim().is_empty() {
        return bad(1, "empty");
    }
    if content.len() > MAX_CONTENT_BYTES {
        return bad(1, "longer than the limit");
    }
    let body = content.strip_suffix('\n').unwrap_or(content);
    let lines: Vec<&str> = body.split('\n').collect();
    if lines.len() > MAX_CONTENT_LINES {
        return bad(MAX_CONTENT_LINES + 1, "too many lines");
    }
    for (i, line) in lines.iter().enumerate() {
        let line = line.strip_suffix('\r').unwrap_or(line);
        if !line.bytes().all(|b| (0x20..0x7f).contains(&b)) {
            return bad(i + 1, "not printable ASCII");
        }
    }
    Ok(())
}

/// Errors of domain control validation. Each variant names the operation and the path,
/// address or program concerned.
#[derive(Debug, thiserror::Error)]
pub enum DcvError {
    /// The API's validation data does not match our CSR or is malformed.
    #[error("refusing validation data from the API: {0}")]
    ApiData(#[from] content::ContentError),

    /// A validation file name is not `<32 upper-case hex>.txt`.
    #[error("refusing validation file name {found}: {problem}")]
    FileName {
        found: String,
        problem: &'static str,
    },

    /// A validation file content is not short printable ASCII lines.
    #[error("refusing validation file content: line {line}: {problem}")]
    FileContent { line: usize, problem: &'static str },

    /// No webroot is configured for a domain of the certificate.
    #[error("no webroot configured for domain '{domain}'")]
    NoWebroot { domain: String },

    /// Webroots are recorded for clean-up after a crash, so they must be absolute.
    #[error("webroot '{}' is not an absolute path", path.display())]
    RelativeWebroot { path: PathBuf },

    /// A symbolic link where a directory or file of ours must be.
    #[error("refusing to {op} '{}': it is a symbolic link", path.display())]
    Symlink { op: &'static str, path: PathBuf },

    /// Something other than a directory where one is needed.
    #[error("refusing to {op} '{}': it is not a directory", path.display())]
    NotADirectory { op: &'static str, path: PathBuf },

    /// A path in a [`webroot::Published`] record is not one publishing creates.
    #[error("refusing to remove '{}': {reason}", path.display())]
    ForeignPath { path: PathBuf, reason: &'static str },

    /// A file system operation failed.
    #[error("could not {op} '{}': {source}", path.display())]
    Io {
        op: &'static str,
        path: PathBuf,
        source: std::io::Error,
    },

    /// The standalone server could not listen.
    #[error("could not listen on {addr} for DCV: {source}")]
    Listen {
        addr: SocketAddr,
        source: std::io::Error,
    },

    /// Another `cert-agent serve` holds the lock of the state directory.
    #[error("another cert-agent serve (pid {pid}) is running: it holds '{}'", path.display())]
    ServeRunning { path: PathBuf, pid: String },

    /// A DNS record part is not acceptable (malformed domain, hostile API value).
    #[error("invalid DNS record {what} {found}: {problem}")]
    DnsRecord {
        what: &'static str,
        found: String,
        problem: &'static str,
    },

    /// The DNS hook is not usable as configured.
    #[error("dns_hook: {reason}")]
    HookConfig { reason: &'static str },

    /// The DNS hook program could not be started.
    #[error("could not run dns_hook '{program}' to {action} {record}: {source}")]
    HookSpawn {
        program: String,
        action: &'static str,
        record: String,
        source: std::io::Error,
    },

    /// The DNS hook program did not finish in time (it was killed).
    #[error("dns_hook '{program}' to {action} {record} did not finish within {timeout:?}; killed")]
    HookTimeout {
        program: String,
        action: &'static str,
        record: String,
        timeout: std::time::Duration,
    },

    /// The DNS hook program failed.
    #[error("dns_hook '{program}' to {action} {record} failed ({status}); stderr: {stderr}")]
    HookFailed {
        program: String,
        action: &'static str,
        record: String,
        status: String,
        stderr: String,
    },

    /// The self-check could not be prepared.
    #[error("self-check of {url}: {reason}")]
    SelfCheck { url: String, reason: String },
}

#[cfg(test)]
mod tests {
    use super::*;

    fn hashes() -> CsrHashes {
        CsrHashes::of_der(b"a CSR")
    }

    #[test]
    fn file_for_csr_uses_our_name_and_the_checked_content() {
        let h = hashes();
        let content = format!("{}\nsectigo.com\nAbc123", h.sha256);
        let f = ValidationFile::for_csr(&h, &content).unwrap();
        assert_eq!(f.name(), format!("{}.txt", h.md5));
        assert_eq!(f.content(), content);
        assert_eq!(
            f.url_path(),
            format!("/.well-known/pki-validation/{}.txt", h.md5)
        );
        let other = CsrHashes::of_der(b"another CSR");
        let err = ValidationFile::for_csr(&h, &format!("{}\nx", other.sha256)).unwrap_err();
        assert!(matches!(err, DcvError::ApiData(_)), "{err}");
    }

    #[test]
    fn hostile_names_and_contents_are_refused() {
        let good = "0123456789ABCDEF0123456789ABCDEF.txt";
        ValidationFile::from_parts(good, "x\r\ny\n").unwrap();
        for name in [
            "",
            "0123456789abcdef0123456789abcdef.txt",
            "0123456789ABCDEF0123456789ABCDE.txt",
            "0123456789ABCDEF0123456789ABCDEF0.txt",
            "0123456789ABCDEF0123456789ABCDEF.TXT",
            "0123456789ABCDEF0123456789ABCDEF.txt/",
            "../3456789ABCDEF0123456789ABCDEF.txt",
            "0123456789ABCDEF0123456789ABCDE\0.txt",
            "0123456789ABCDEF0123456789ABCDÉ.txt",
        ] {
            let err = ValidationFile::from_parts(name, "x").unwrap_err();
            assert!(matches!(err, DcvError::FileName { .. }), "{name:?}");
            assert!(!err.to_string().chars().any(|c| c.is_control()));
        }
        for content in [
            "",
            " \n",
            "a\0b",
            "a\x1b[2J",
            "a\tb",
            "a\rb",
            "é",
            &"x\n".repeat(MAX_CONTENT_LINES + 1),
            &"x".repeat(MAX_CONTENT_BYTES + 1),
        ] {
            let err = ValidationFile::from_parts(good, content).unwrap_err();
            assert!(matches!(err, DcvError::FileContent { .. }), "{content:?}");
        }
    }

    const TOKEN: &str = "evaGxfADs6pSRb2LAv9IZf17Dt3juxGJ-PCt92wr-oA";
    const THUMBPRINT: &str = "9jg46WB3rR_AHD-EBXdN7cBkH1WOu0tA3M9fm21mqTI";

    #[test]
    fn an_acme_file_is_its_token_and_key_authorization() {
        let ka = format!("{TOKEN}.{THUMBPRINT}");
        let f = ValidationFile::acme_http01(TOKEN, &ka).unwrap();
        assert_eq!(f.well_known(), WellKnown::AcmeChallenge);
        assert_eq!(f.url_path(), format!("/.well-known/acme-challenge/{TOKEN}"));
        assert_eq!(f.content(), ka);
        // Read back from stored state or a publish directory: the name tells the directory.
        assert_eq!(ValidationFile::from_parts(TOKEN, &ka).unwrap(), f);
        let json = serde_json::to_string(&f).unwrap();
        assert_eq!(json, format!(r#"{{"name":"{TOKEN}","content":"{ka}"}}"#));
        assert_eq!(serde_json::from_str::<ValidationFile>(&json).unwrap(), f);
        // A CSR-hash file keeps its directory and its stored form.
        let pki = ValidationFile::from_parts("0123456789ABCDEF0123456789ABCDEF.txt", "x").unwrap();
        assert_eq!(pki.well_known(), WellKnown::PkiValidation);
        assert_eq!(
            serde_json::to_string(&pki).unwrap(),
            r#"{"name":"0123456789ABCDEF0123456789ABCDEF.txt","content":"x"}"#
        );
    }

    #[test]
    fn hostile_acme_tokens_and_key_authorizations_are_refused() {
        let short = "a".repeat(MIN_TOKEN_CHARS - 1);
        let long = "a".repeat(MAX_TOKEN_CHARS + 1);
        for token in [
            "",
            "../../../../etc/passwd",
            "evaGxfADs6pSRb2LAv9IZf17Dt3juxGJ/PCt92wr",
            "evaGxfADs6pSRb2LAv9IZf17Dt3juxGJ%2e%2e",
            "evaGxfADs6pSRb2LAv9IZf17Dt3juxGJ.oA",
            "evaGxfADs6pSRb2LAv9IZf17Dt3juxGJ=",
            "evaGxfADs6pSRb2LAv9IZf17Dt3juxGJ\0",
            "evaGxfADs6pSRb2LAv9IZf17Dt3juxGJ\x1b[2J",
            "evaGxfADs6pSRb2LAv9IZf17Dt3juxGJ é",
            short.as_str(),
            long.as_str(),
        ] {
            let err =
                ValidationFile::acme_http01(token, &format!("{token}.{THUMBPRINT}")).unwrap_err();
            assert!(matches!(err, DcvError::FileName { .. }), "{token:?}: {err}");
            assert!(!err.to_string().chars().any(char::is_control), "{err}");
            assert!(ValidationFile::from_parts(token, "x").is_err(), "{token:?}");
        }
        let other = "Zm9vYmFyYmF6cXV4cXV1eHF1dXgxMjM0NTY3ODkw";
        for content in [
            String::new(),
            TOKEN.to_owned(),
            format!("{other}.{THUMBPRINT}"),
            format!("{TOKEN}.{}", &THUMBPRINT[1..]),
            format!("{TOKEN}.{THUMBPRINT}\n"),
            format!("{TOKEN}.{THUMBPRINT}.x"),
            format!("{TOKEN}.{}+", &THUMBPRINT[1..]),
            format!("{TOKEN}.{THUMBPRINT}").replace('.', ". "),
        ] {
            let err = ValidationFile::acme_http01(TOKEN, &content).unwrap_err();
            assert!(matches!(err, DcvError::FileContent { .. }), "{content:?}");
        }
        // A CSR-hash file name is never taken for a token, nor the other way round.
        assert!(!WellKnown::AcmeChallenge.accepts_name("0123456789ABCDEF0123456789ABCDEF.txt"));
        assert!(!WellKnown::PkiValidation.accepts_name(TOKEN));
        assert_eq!(
            WellKnown::of_file_name(TOKEN),
            Some(WellKnown::AcmeChallenge)
        );
        assert_eq!(
            WellKnown::of_dir_name("acme-challenge"),
            Some(WellKnown::AcmeChallenge)
        );
        assert_eq!(
            WellKnown::of_dir_name("pki-validation"),
            Some(WellKnown::PkiValidation)
        );
        assert_eq!(WellKnown::of_dir_name("acme-challenge/"), None);
    }

    #[test]
    fn deserialising_checks_again() {
        let good = ValidationFile::from_parts("0123456789ABCDEF0123456789ABCDEF.txt", "x").unwrap();
        let json = serde_json::to_string(&good).unwrap();
        assert_eq!(serde_json::from_str::<ValidationFile>(&json).unwrap(), good);
        let bad = r#"{"name":"../../etc/passwd","content":"x"}"#;
        assert!(serde_json::from_str::<ValidationFile>(bad).is_err());
    }
}
