//! The HTTP(S) CSR-hash validation file: its name and content, computed from the agent's own
//! CSR, and checks of what the API reports (`dcv_content`, DCV status `hashes`, a file name).
//!
//! Everything the API sends is untrusted: it ends up in a file under the web root, in log
//! lines and in hook environments, so it is checked against our own hashes and a narrow
//! character set, and error messages quote it escaped and shortened.

use crate::crypto::CsrHashes;
use crate::values::text::quote;

/// The name of the Partner API's validation files' directory below `/.well-known/`: its one
/// spelling, from which [`DCV_DIR_NAME`], [`DCV_URL_DIR`] and any other constant path with
/// it are made (`concat!`).
macro_rules! pki_validation {
    () => {
        "pki-validation"
    };
}
pub(crate) use pki_validation;

/// The directory of validation files below `/.well-known/`.
pub(crate) const DCV_DIR_NAME: &str = pki_validation!();

/// The directory of validation files, as a URL path.
pub(crate) const DCV_URL_DIR: &str = concat!("/.well-known/", pki_validation!());

/// Longest `dcv_content` accepted (the real content is about 100 bytes).
pub(crate) const MAX_DCV_CONTENT_BYTES: usize = 1024;

/// Most lines accepted in `dcv_content` (hash, CA domain, unique value).
pub(crate) const MAX_DCV_CONTENT_LINES: usize = 8;

/// Characters that mean something to a shell; refused in names and content.
const SHELL_META: &[char] = &[
    '$', '`', ';', '|', '&', '<', '>', '(', ')', '\\', '"', '\'', '*', '?', '!', '{', '}', '[',
    ']', '~', '#', '^',
];

/// Why API-provided validation data was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ContentError {
    #[error("dcv_content is empty")]
    EmptyContent,
    #[error("dcv_content is longer than {limit} bytes ({len})")]
    ContentTooLong { len: usize, limit: usize },
    #[error("dcv_content has more than {limit} lines")]
    TooManyLines { limit: usize },
    #[error(
        "dcv_content line 1 is not the SHA-256 of our CSR: expected {expected}, the API sent {found}"
    )]
    HashMismatch { expected: String, found: String },
    #[error("dcv_content line {line}: {problem} in {found}")]
    BadContent {
        line: usize,
        problem: &'static str,
        found: String,
    },
    #[error("validation file name {found}: {problem}")]
    BadFileName {
        problem: &'static str,
        found: String,
    },
    #[error("validation file name {found} is not the one for our CSR (expected \"{expected}\")")]
    FileNameMismatch { expected: String, found: String },
    #[error("the API's {which} CSR hash {found} is not ours ({expected})")]
    ApiHashMismatch {
        which: &'static str,
        expected: String,
        found: String,
    },
}

impl CsrHashes {
    /// `<MD5>.txt`, the validation file's name.
    pub fn dcv_file_name(&self) -> String {
        format!("{}.txt", self.md5)
    }

    /// `/.well-known/pki-validation/<MD5>.txt`, the URL path the CA fetches.
    pub fn dcv_url_path(&self) -> String {
        format!("{DCV_URL_DIR}/{}", self.dcv_file_name())
    }
}

/// Checks the API's `dcv_content` against our CSR's hashes and returns the text to publish.
///
/// Line 1 must be our SHA-256 (upper or lower case, surrounding spaces ignored). Every line
/// is printable ASCII without shell metacharacters; `\n` or `\r\n` end lines. The content is
/// returned unchanged: the CA compares what it fetches with what it sent.
pub(crate) fn check_dcv_content<'a>(
    ours: &CsrHashes,
    content: &'a str,
) -> Result<&'a str, ContentError> {
    if content.trim().is_empty() {
        return Err(ContentError::EmptyContent);
    }
    if content.len() > MAX_DCV_CONTENT_BYTES {
        return Err(ContentError::ContentTooLong {
            len: content.len(),
            limit: MAX_DCV_CONTENT_BYTES,
        });
    }
    let body = content.strip_suffix('\n').unwrap_or(content);
    let body = body.strip_suffix('\r').unwrap_or(body);
    let lines: Vec<&str> = body
        .split('\n')
        .map(|l| l.strip_suffix('\r').unwrap_or(l))
        .collect();
    if lines.len() > MAX_DCV_CONTENT_LINES {
        return Err(ContentError::TooManyLines {
            limit: MAX_DCV_CONTENT_LINES,
        });
    }
    for (i, line) in lines.iter().enumerate() {
        if let Some(problem) = content_problem(line) {
            return Err(ContentError::BadContent {
                line: i + 1,
                problem,
                found: quote(line),
            });
        }
    }
    let first = lines[0].trim_matches(' ');
    if !first.eq_ignore_ascii_case(&ours.sha256) {
        return Err(ContentError::HashMismatch {
            expected: ours.sha256.clone(),
            found: quote(first),
        });
    }
    Ok(content)
}

fn content_problem(line: &str) -> Option<&'static str> {
    if line.chars().any(|c| c.is_ascii_control()) {
        return Some("control character");
    }
    if !line.is_ascii() {
        return Some("non-ASCII character");
    }
    if line.contains(SHELL_META) {
        return Some("shell metacharacter");
    }
    None
}

/// Checks a validation file name the API reports (e.g. parsed from a URL it sent) and returns
/// it: it must be our `<MD5>.txt` (hex digits in either case) and nothing else: no `/`, no
/// `..`, no control or shell characters.
pub(crate) fn check_dcv_file_name<'a>(
    ours: &CsrHashes,
    name: &'a str,
) -> Result<&'a str, ContentError> {
    let bad = |problem: &'static str| ContentError::BadFileName {
        problem,
        found: quote(name),
    };
    if name.is_empty() {
        return Err(bad("empty"));
    }
    if name.chars().any(|c| c.is_control()) {
        return Err(bad("control character"));
    }
    if name.contains('/') || name.contains('\\') {
        return Err(bad("path separator"));
    }
    if name.contains("..") {
        return Err(bad("'..'"));
    }
    if name.contains(SHELL_META) {
        return Err(bad("shell metacharacter"));
    }
    if !name.is_ascii() {
        return Err(bad("non-ASCII character"));
    }
    if !name.eq_ignore_ascii_case(&ours.dcv_file_name()) {
        return Err(ContentError::FileNameMismatch {
            expected: ours.dcv_file_name(),
            found: quote(name),
        });
    }
    Ok(name)
}

/// Checks the hashes of the DCV status call (`hashes.md5`, and `hashes.sha1`, which holds the
/// SHA-256 despite its name) against ours. Absent values are not an error.
pub fn check_api_hashes(
    ours: &CsrHashes,
    md5: Option<&str>,
    sha256: Option<&str>,
) -> Result<(), ContentError> {
    for (which, theirs, expected) in [("MD5", md5, &ours.md5), ("SHA-256", sha256, &ours.sha256)] {
        if let Some(theirs) = theirs
            && !theirs.trim().eq_ignore_ascii_case(expected)
        {
            return Err(ContentError::ApiHashMismatch {
                which,
                expected: expected.clone(),
                found: quote(theirs),
            });
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ours() -> CsrHashes {
        CsrHashes::of_der(b"a CSR")
    }

    #[test]
    fn file_name_and_path() {
        let h = ours();
        assert_eq!(h.dcv_file_name(), format!("{}.txt", h.md5));
        assert_eq!(
            h.dcv_url_path(),
            format!("/.well-known/pki-validation/{}.txt", h.md5)
        );
    }

    #[test]
    fn accepts_the_usual_content() {
        let h = ours();
        for content in [
            format!("{}\nsectigo.com\nAbc123", h.sha256),
            format!("{}\r\nsectigo.com\r\nAbc123\r\n", h.sha256),
            format!("{}\ncomodoca.com\n", h.sha256.to_lowercase()),
            h.sha256.clone(),
        ] {
            assert_eq!(check_dcv_content(&h, &content).unwrap(), content);
        }
    }

    #[test]
    fn rejects_hostile_content() {
        let h = ours();
        let cases: Vec<(String, &str)> = vec![
            (String::new(), "empty"),
            ("  \n".to_owned(), "empty"),
            ("../x".to_owned(), "not the SHA-256"),
            ("$(reboot)".to_owned(), "shell metacharacter"),
            (format!("{}\n$(reboot)", h.sha256), "shell metacharacter"),
            (format!("{}\n`id`", h.sha256), "shell metacharacter"),
            (
                format!("{}\nsectigo.com; rm -rf /", h.sha256),
                "shell metacharacter",
            ),
            (
                format!("{}\x1b[2J\nsectigo.com", h.sha256),
                "control character",
            ),
            (format!("{}\nsec\0tigo.com", h.sha256), "control character"),
            (
                format!("{}\nsectigo.com\x07", h.sha256),
                "control character",
            ),
            (format!("{}\tx", h.sha256), "control character"),
            (format!("{}\rsectigo.com", h.sha256), "control character"),
            (format!("{}\nsectigö.com", h.sha256), "non-ASCII"),
            (format!("{}\n", ours_other().sha256), "not the SHA-256"),
            (h.md5.clone(), "not the SHA-256"),
            (
                format!("{}{}", h.sha256, "\nx".repeat(10)),
                "more than 8 lines",
            ),
            (
                format!("{}\n{}", h.sha256, "a".repeat(2000)),
                "longer than 1024",
            ),
        ];
        for (content, expected) in cases {
            let err = check_dcv_content(&h, &content).unwrap_err();
            let msg = err.to_string();
            assert!(msg.contains(expected), "{content:?}: {msg}");
            assert!(!msg.chars().any(|c| c.is_control()), "{msg:?}");
        }
    }

    fn ours_other() -> CsrHashes {
        CsrHashes::of_der(b"another CSR")
    }

    #[test]
    fn file_name_checks() {
        let h = ours();
        let name = h.dcv_file_name();
        assert_eq!(check_dcv_file_name(&h, &name).unwrap(), name);
        let lower = name.to_lowercase();
        assert_eq!(check_dcv_file_name(&h, &lower).unwrap(), lower);
        for (bad, expected) in [
            ("", "empty"),
            ("../x", "path separator"),
            ("..", "'..'"),
            ("..txt", "'..'"),
            ("/etc/passwd", "path separator"),
            ("a\\b.txt", "path separator"),
            ("$(reboot).txt", "shell metacharacter"),
            ("x;reboot", "shell metacharacter"),
            ("a\nb.txt", "control character"),
            ("a\0b.txt", "control character"),
            ("ÄBC.txt", "non-ASCII"),
            (
                "0123456789ABCDEF0123456789ABCDEF.txt",
                "not the one for our CSR",
            ),
        ] {
            let err = check_dcv_file_name(&h, bad).unwrap_err();
            let msg = err.to_string();
            assert!(msg.contains(expected), "{bad:?}: {msg}");
            assert!(!msg.chars().any(|c| c.is_control()), "{msg:?}");
        }
        let traversal = format!("../{name}");
        assert!(check_dcv_file_name(&h, &traversal).is_err());
    }

    #[test]
    fn api_hashes() {
        let h = ours();
        check_api_hashes(&h, Some(&h.md5), Some(&h.sha256.to_lowercase())).unwrap();
        check_api_hashes(&h, None, None).unwrap();
        let other = ours_other();
        let err = check_api_hashes(&h, Some(&other.md5), None).unwrap_err();
        assert!(err.to_string().contains("MD5"), "{err}");
        let err = check_api_hashes(&h, None, Some("$(reboot)")).unwrap_err();
        assert!(err.to_string().contains("SHA-256"), "{err}");
    }

    #[test]
    fn quote_escapes_and_shortens() {
        assert_eq!(quote("a\x1bb"), "\"a\\x1bb\"");
        let long = "x".repeat(200);
        let q = quote(&long);
        assert!(q.len() < 100 && q.ends_with('…'));
    }
}
