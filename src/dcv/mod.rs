//! Domain control validation: the webroot writer, the standalone HTTP server, DNS hooks and the
//! pre-flight self-check. These are the mechanisms; deciding when to use them is `renew`'s job.
//!
//! - [`ValidationFile`]: the checked name and content of the HTTP(S) CSR-hash file. The API's
//!   `dcv_content` is untrusted; it is cross-checked with [`content`] against our
//!   own CSR hashes before anything is written or served.
//! - [`webroot`]: publishes the file under `<webroot>/.well-known/pki-validation/` (never
//!   through a symbolic link) and returns a [`webroot::Published`] record for clean-up.
//! - [`standalone`]: a built-in HTTP/1.1 server that answers nothing but the published files.
//! - [`serve_dir`]: the publish directory and lock shared by `renew` and `cert-agent serve`.
//! - [`hook`]: DNS records for CNAME_CSR_HASH / DNS_TXT_TOKEN and the `dns_hook` program runner.
//! - [`selfcheck`]: fetches the file over plain HTTP as the CA would and names the likely cause
//!   of a failure.

pub mod content;
pub mod hook;
pub mod selfcheck;
pub mod serve_dir;
pub mod standalone;
pub mod webroot;

use std::net::SocketAddr;
use std::path::PathBuf;

use crate::crypto::CsrHashes;

pub use content::DCV_URL_DIR;

/// Longest validation file content accepted (same bound as the API check).
pub const MAX_CONTENT_BYTES: usize = content::MAX_DCV_CONTENT_BYTES;

/// Most lines accepted in a validation file.
pub const MAX_CONTENT_LINES: usize = content::MAX_DCV_CONTENT_LINES;

/// The HTTP(S) CSR-hash validation file: `<MD5 upper-case hex>.txt` and its content.
///
/// Only constructed through checks: the name is exactly 32 upper-case hex digits and `.txt`,
/// the content is lines of printable ASCII (LF or CRLF line ends), at most
/// [`MAX_CONTENT_BYTES`] bytes and [`MAX_CONTENT_LINES`] lines.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct ValidationFile {
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

    /// A file from a name and content that are not tied to a CSR at hand (e.g. reloaded from
    /// stored state). Checks the shape of both; see the type's documentation.
    pub fn from_parts(name: &str, content: &str) -> Result<Self, DcvError> {
        check_file_name(name)?;
        check_content(content)?;
        Ok(Self {
            name: name.to_owned(),
            content: content.to_owned(),
        })
    }

    /// `<MD5>.txt`.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The content, exactly as the API sent it.
    pub fn content(&self) -> &str {
        &self.content
    }

    /// `/.well-known/pki-validation/<MD5>.txt`, the URL path the CA fetches.
    pub fn url_path(&self) -> String {
        format!("{DCV_URL_DIR}/{}", self.name)
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

fn check_file_name(name: &str) -> Result<(), DcvError> {
    if is_file_name(name) {
        Ok(())
    } else {
        Err(DcvError::FileName {
            found: quote(name),
            problem: "not 32 upper-case hex digits followed by .txt",
        })
    }
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

/// Untrusted text for a message: escaped (no control character reaches a terminal or a log)
/// and cut to `max` characters.
pub(crate) fn quote_max(s: &str, max: usize) -> String {
    crate::values::text::quote_max(s, max)
}

/// [`quote_max`] with 80 characters.
pub(crate) fn quote(s: &str) -> String {
    quote_max(s, 80)
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

    #[test]
    fn deserialising_checks_again() {
        let good = ValidationFile::from_parts("0123456789ABCDEF0123456789ABCDEF.txt", "x").unwrap();
        let json = serde_json::to_string(&good).unwrap();
        assert_eq!(serde_json::from_str::<ValidationFile>(&json).unwrap(), good);
        let bad = r#"{"name":"../../etc/passwd","content":"x"}"#;
        assert!(serde_json::from_str::<ValidationFile>(bad).is_err());
    }
}
