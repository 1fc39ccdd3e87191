//! The audit log: `state_dir/audit.log`, one JSON line per action with effect (an order, a
//! reissue, a cancellation, a renewal order prepared, a validation published or changed, an
//! install or its rollback, a retirement, the fleet's lead taken or given), each chained to
//! the one before it by the SHA-256 of that line.
//!
//! A line is written as `{"seq":…,"time":…,"host":…,"action":…,"event":…,"certificate":…,
//! "certificate_id":…,"details":{…},"prev":"<hex>","hash":"<hex>"}`: `prev` is the SHA-256
//! (lower-case hex) of the previous line's bytes (without its line break), [`GENESIS`] for
//! the first; `hash` is the SHA-256 of the line's own bytes up to `,"hash"` with the closing
//! `}` appended, so that an edit of the last line shows too. `seq` is the line's number.
//!
//! One writer at a time: the file is opened with `O_APPEND` and held under an exclusive
//! `flock` while the last line is read and the new one appended and fsynced. The chain proves
//! that lines were not edited, removed or reordered by someone who did not rewrite every
//! line after them; it proves nothing against whoever can rewrite the whole file (see
//! docs/security.md).

use std::fs::{File, OpenOptions};
use std::io::{self, Write};
use std::os::unix::fs::{FileExt, OpenOptionsExt};
use std::path::Path;

use nix::fcntl::{Flock, FlockArg};
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};
use time::OffsetDateTime;

/// The file's name in the state directory.
pub const FILE: &str = "audit.log";

/// `prev` of the first line.
pub const GENESIS: &str = "0000000000000000000000000000000000000000000000000000000000000000";

/// The tail read to find the last line (lines are far shorter; a longer one is found by
/// reading the whole file).
const TAIL: u64 = 64 * 1024;

/// The longest line the reader accepts (the writer caps its details well below this).
pub const MAX_LINE: usize = 64 * 1024;

/// The suffix every line ends with: `,"hash":"` + 64 hex digits + `"}`.
const HASH_SUFFIX_LEN: usize = 9 + 64 + 2;

/// The action of an audited journal event, or `None` for events without effect (a failed
/// reconciliation, an order seen ended).
pub fn action_of(event: &str) -> Option<&'static str> {
    Some(match event {
        "order-intent"
        | "ordered"
        | "order-rejected"
        | "order-outcome-unknown"
        | "reconciled"
        | "intent-cleared-by-operator"
        | "subscription-renewal-order"
        | "ended-order-replaced"
        | "adopted" => "order",
        "reissue-intent" | "reissued" | "reissue-refused" | "replaced" => "reissue",
        "cancel" | "cancel-refused" => "cancel",
        "renewal-prepared" | "prolong" => "prolong",
        "dcv-published" | "dcv-change" | "dcv-resend" => "dcv",
        "installed" | "placeholder" => "install",
        "install-failed" => "rollback",
        "retired" | "fleet-retired" => "retire",
        "key-generated" => "key",
        "fleet-lead-taken" | "fleet-lead-given" | "fleet-imported" => "fleet",
        _ => return None,
    })
}

/// One line of the audit log.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct AuditEntry {
    /// The line's number (1 for the first).
    pub seq: u64,
    /// When it was written (UTC, RFC 3339).
    #[serde(with = "time::serde::rfc3339")]
    pub time: OffsetDateTime,
    /// The host that wrote it.
    pub host: String,
    /// The kind of action (`order`, `reissue`, `cancel`, `prolong`, `dcv`, `install`,
    /// `rollback`, `retire`, `key`, `fleet`).
    pub action: String,
    /// The step, as the journal names it (`ordered`, `reissue-intent`, ...).
    pub event: String,
    /// The configured certificate it concerns, if any.
    pub certificate: Option<String>,
    /// The Partner API's certificate ID it concerns, if known.
    pub certificate_id: Option<u64>,
    /// What else the step recorded (never a secret).
    pub details: serde_json::Value,
    /// SHA-256 of the previous line (hex), [`GENESIS`] for the first.
    pub prev: String,
    /// SHA-256 of this line without its `hash` member.
    pub hash: String,
}

/// The part of a line that is hashed (everything but `hash`, in the written order).
#[derive(Serialize)]
struct Body<'a> {
    seq: u64,
    #[serde(with = "time::serde::rfc3339")]
    time: OffsetDateTime,
    host: &'a str,
    action: &'a str,
    event: &'a str,
    certificate: Option<&'a str>,
    certificate_id: Option<u64>,
    details: &'a serde_json::Value,
    prev: &'a str,
}

/// Why a line is not a sound audit line.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum LineError {
    #[error("longer than {MAX_LINE} bytes")]
    TooLong,
    #[error("not UTF-8 text")]
    NotText,
    #[error("it does not end with its hash")]
    NoHash,
    #[error("not an audit line: {0}")]
    Shape(String),
    #[error("`{field}` is not 64 lower-case hex digits")]
    BadHex { field: &'static str },
    #[error("it was changed after it was written (its hash does not match its content)")]
    Changed,
}

/// SHA-256 of `bytes`, lower-case hex.
pub fn sha256_hex(bytes: &[u8]) -> String {
    hex::encode(Sha256::digest(bytes))
}

fn is_hex64(s: &str) -> bool {
    s.len() == 64 && s.bytes().all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f'))
}

/// Parses one line (without its line break) and checks it against its own hash.
pub fn parse_line(line: &[u8]) -> Result<AuditEntry, LineError> {
    if line.len() > MAX_LINE {
        return Err(LineError::TooLong);
    }
    let text = std::str::from_utf8(line).map_err(|_| LineError::NotText)?;
    let entry: AuditEntry =
        serde_json::from_str(text).map_err(|e| LineError::Shape(e.to_string()))?;
    if !is_hex64(&entry.hash) {
        return Err(LineError::BadHex { field: "hash" });
    }
    if !is_hex64(&entry.prev) {
        return Err(LineError::BadHex { field: "prev" });
    }
    let suffix = format!(",\"hash\":\"{}\"}}", entry.hash);
    let Some(body) = text.strip_suffix(&suffix) else {
        return Err(LineError::NoHash);
    };
    let mut hashed = String::with_capacity(body.len() + 1);
    hashed.push_str(body);
    hashed.push('}');
    if sha256_hex(hashed.as_bytes()) != entry.hash {
        return Err(LineError::Changed);
    }
    Ok(entry)
}

/// The line for `body`: its bytes and its hash.
fn render(body: &Body<'_>) -> io::Result<String> {
    let mut text = serde_json::to_string(body).map_err(io::Error::other)?;
    let hash = sha256_hex(text.as_bytes());
    text.pop();
    text.push_str(&format!(",\"hash\":\"{hash}\"}}"));
    debug_assert_eq!(
        text.len() - text.rfind(",\"hash\"").unwrap_or(0),
        HASH_SUFFIX_LEN
    );
    Ok(text)
}

/// What the first broken line of a log is.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Broken {
    /// Its number (1 for the first line).
    pub line: u64,
    /// What is wrong with it.
    pub problem: String,
}

/// The result of [`verify`].
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Verified {
    /// Complete lines read.
    pub lines: u64,
    /// Hash of the last sound line (what the next line's `prev` must be).
    pub last_hash: String,
    /// The first broken line, if any.
    pub broken: Option<Broken>,
}

/// Checks the whole chain of `text` (the file's bytes): each line sound, numbered in order,
/// and chained to the one before. Stops at the first broken line.
pub fn verify(text: &[u8]) -> Verified {
    let mut expected_prev = GENESIS.to_owned();
    let mut n: u64 = 0;
    let mut rest = text;
    while !rest.is_empty() {
        n += 1;
        let (line, complete) = match rest.iter().position(|&b| b == b'\n') {
            Some(i) => {
                let line = &rest[..i];
                rest = &rest[i + 1..];
                (line, true)
            }
            None => {
                let line = rest;
                rest = &[];
                (line, false)
            }
        };
        let broken = |problem: String| Verified {
            lines: n - 1,
            last_hash: expected_prev.clone(),
            broken: Some(Broken { line: n, problem }),
        };
        if !complete {
            return broken(
                "truncated: the last line has no line break (a write that did not finish, or a \
                 file cut short)"
                    .to_owned(),
            );
        }
        let entry = match parse_line(line) {
            Ok(e) => e,
            Err(e) if line.is_empty() => return broken(format!("an empty line ({e})")),
            Err(e) => return broken(e.to_string()),
        };
        if entry.seq != n {
            return broken(format!(
                "it carries seq {} where {n} was expected: lines before it were removed, \
                 inserted or reordered",
                entry.seq
            ));
        }
        if entry.prev != expected_prev {
            return broken(if n == 1 {
                "the first line does not start the chain (lines before it were removed)".into()
            } else {
                format!(
                    "it does not follow line {}: that line was changed, or lines were removed, \
                     inserted or reordered",
                    n - 1
                )
            });
        }
        expected_prev = sha256_hex(line);
    }
    Verified {
        lines: n,
        last_hash: expected_prev,
        broken: None,
    }
}

/// This host's name, read once.
fn host() -> &'static str {
    static HOST: std::sync::OnceLock<String> = std::sync::OnceLock::new();
    HOST.get_or_init(|| {
        std::fs::read_to_string("/proc/sys/kernel/hostname")
            .map(|h| h.trim().to_owned())
            .ok()
            .filter(|h| !h.is_empty())
            .unwrap_or_else(|| "unknown".to_owned())
    })
}

/// Where the next line goes: its number, the hash it chains to, and whether a line cut
/// short by an interrupted write must be ended first.
struct Tail {
    seq: u64,
    prev: String,
    close_fragment: bool,
}

/// Reads where the chain ends in `file` (held locked).
fn tail(file: &File) -> io::Result<Tail> {
    let len = file.metadata()?.len();
    if len == 0 {
        return Ok(Tail {
            seq: 1,
            prev: GENESIS.to_owned(),
            close_fragment: false,
        });
    }
    let start = len.saturating_sub(TAIL);
    let mut buf = vec![0u8; usize::try_from(len - start).map_err(io::Error::other)?];
    file.read_exact_at(&mut buf, start)?;
    let close_fragment = buf.last() != Some(&b'\n');
    let body = if close_fragment {
        &buf[..]
    } else {
        &buf[..buf.len() - 1]
    };
    // The last line (complete, or the fragment an interrupted write left).
    let cut = body.iter().rposition(|&b| b == b'\n');
    let last = match cut {
        Some(i) => &body[i + 1..],
        None if start == 0 => body,
        None => return whole_file_tail(file, close_fragment),
    };
    let prev = sha256_hex(last);
    let seq_of = |line: &[u8]| serde_json::from_slice::<SeqOnly>(line).ok().map(|s| s.seq);
    let seq = if close_fragment {
        // The fragment takes the number after the line before it.
        let before = match cut {
            Some(i) => {
                let head = &body[..i];
                let from = head.iter().rposition(|&b| b == b'\n').map_or(0, |j| j + 1);
                if from == 0 && start > 0 {
                    None
                } else {
                    seq_of(&head[from..])
                }
            }
            None => Some(0),
        };
        before.map(|s| s + 2)
    } else {
        seq_of(last).map(|s| s + 1)
    };
    match seq {
        Some(seq) => Ok(Tail {
            seq,
            prev,
            close_fragment,
        }),
        None => whole_file_tail(file, close_fragment),
    }
}

/// The tail found by reading the whole file (a last line that cannot be read alone).
fn whole_file_tail(file: &File, close_fragment: bool) -> io::Result<Tail> {
    let len = file.metadata()?.len();
    let mut buf = vec![0u8; usize::try_from(len).map_err(io::Error::other)?];
    file.read_exact_at(&mut buf, 0)?;
    let lines = buf.iter().filter(|&&b| b == b'\n').count() as u64;
    let body = buf.strip_suffix(b"\n").unwrap_or(&buf);
    let last = match body.iter().rposition(|&b| b == b'\n') {
        Some(i) => &body[i + 1..],
        None => body,
    };
    Ok(Tail {
        seq: lines + if close_fragment { 2 } else { 1 },
        prev: sha256_hex(last),
        close_fragment,
    })
}

#[derive(Deserialize)]
struct SeqOnly {
    seq: u64,
}

/// What is appended.
pub struct NewEntry<'a> {
    pub action: &'a str,
    pub event: &'a str,
    pub certificate: Option<&'a str>,
    pub details: &'a serde_json::Value,
}

/// Appends one line to `dir/audit.log` (created 0600), fsyncs it, and sends it to the log;
/// returns its number.
pub fn append(dir: &Path, entry: &NewEntry<'_>) -> io::Result<u64> {
    append_all(dir, std::slice::from_ref(entry))
}

/// Appends the lines of a batch to `dir/audit.log` (created 0600) in order, each chained to
/// the one before, in one write fsynced once, and sends them to the log; returns the number of
/// the last one (0 for none). A crash during the write leaves a prefix of the lines, the last
/// one possibly cut short (closed by the next append, as any interrupted write).
pub fn append_all(dir: &Path, entries: &[NewEntry<'_>]) -> io::Result<u64> {
    if entries.is_empty() {
        return Ok(0);
    }
    let path = dir.join(FILE);
    let file = OpenOptions::new()
        .read(true)
        .append(true)
        .create(true)
        .mode(0o600)
        .open(&path)?;
    let mut file =
        Flock::lock(file, FlockArg::LockExclusive).map_err(|(_, e)| io::Error::from(e))?;
    let tail = tail(&file)?;
    let mut out = String::new();
    if tail.close_fragment {
        tracing::warn!(
            seq = tail.seq - 1,
            "{} ended with an incomplete line (an interrupted write); it is closed and the \
             chain continues after it",
            path.display()
        );
        out.push('\n');
    }
    let (mut seq, mut prev) = (tail.seq, tail.prev);
    let time = OffsetDateTime::now_utc();
    let mut logged = Vec::with_capacity(entries.len());
    for entry in entries {
        let certificate_id = entry
            .details
            .get("certificate_id")
            .and_then(serde_json::Value::as_u64);
        let body = Body {
            seq,
            time,
            host: host(),
            action: entry.action,
            event: entry.event,
            certificate: entry.certificate,
            certificate_id,
            details: entry.details,
            prev: &prev,
        };
        let line = render(&body)?;
        if line.len() > MAX_LINE {
            return Err(io::Error::other(format!(
                "an audit line of {} bytes is longer than {MAX_LINE}",
                line.len()
            )));
        }
        prev = sha256_hex(line.as_bytes());
        out.push_str(&line);
        out.push('\n');
        logged.push((seq, entry, certificate_id));
        seq += 1;
    }
    file.write_all(out.as_bytes())?;
    file.sync_data()?;
    for (seq, entry, certificate_id) in logged {
        tracing::info!(
            target: "cert_agent::audit",
            seq,
            action = entry.action,
            event = entry.event,
            certificate = entry.certificate.unwrap_or("-"),
            certificate_id,
            details = %entry.details,
            "audit"
        );
    }
    Ok(seq - 1)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn add(dir: &Path, event: &str, n: u64) -> u64 {
        append(
            dir,
            &NewEntry {
                action: action_of(event).unwrap_or("other"),
                event,
                certificate: Some("www"),
                details: &serde_json::json!({ "certificate_id": n }),
            },
        )
        .unwrap()
    }

    fn log(n: u64) -> (tempfile::TempDir, Vec<String>) {
        let dir = tempfile::tempdir().unwrap();
        for i in 1..=n {
            assert_eq!(add(dir.path(), "ordered", i), i);
        }
        let text = std::fs::read_to_string(dir.path().join(FILE)).unwrap();
        let lines = text.lines().map(str::to_owned).collect();
        (dir, lines)
    }

    fn join(lines: &[String]) -> Vec<u8> {
        let mut s = lines.join("\n");
        s.push('\n');
        s.into_bytes()
    }

    #[test]
    fn an_untouched_log_verifies_and_chains_from_genesis() {
        let (dir, lines) = log(4);
        let v = verify(&join(&lines));
        assert_eq!(v.broken, None);
        assert_eq!(v.lines, 4);
        let first = parse_line(lines[0].as_bytes()).unwrap();
        assert_eq!(first.prev, GENESIS);
        assert_eq!(first.certificate_id, Some(1));
        assert_eq!(first.action, "order");
        let second = parse_line(lines[1].as_bytes()).unwrap();
        assert_eq!(second.prev, sha256_hex(lines[0].as_bytes()));
        assert_eq!(
            crate::store::mode_of(&dir.path().join(FILE)).unwrap(),
            0o600
        );
    }

    #[test]
    fn an_edited_line_is_named() {
        let (_dir, mut lines) = log(4);
        lines[2] = lines[2].replace("\"certificate_id\":3", "\"certificate_id\":9");
        let v = verify(&join(&lines));
        let b = v.broken.unwrap();
        assert_eq!(b.line, 3);
        assert!(b.problem.contains("changed"), "{}", b.problem);
        assert_eq!(v.lines, 2);
    }

    #[test]
    fn an_edited_line_with_its_own_hash_recomputed_breaks_the_next() {
        let (_dir, mut lines) = log(3);
        let e = parse_line(lines[1].as_bytes()).unwrap();
        let details = serde_json::json!({ "certificate_id": 99 });
        let forged = render(&Body {
            seq: e.seq,
            time: e.time,
            host: &e.host,
            action: &e.action,
            event: &e.event,
            certificate: e.certificate.as_deref(),
            certificate_id: Some(99),
            details: &details,
            prev: &e.prev,
        })
        .unwrap();
        lines[1] = forged;
        let b = verify(&join(&lines)).broken.unwrap();
        assert_eq!(b.line, 3);
        assert!(
            b.problem.contains("does not follow line 2"),
            "{}",
            b.problem
        );
    }

    #[test]
    fn a_removed_line_is_named() {
        let (_dir, mut lines) = log(4);
        lines.remove(1);
        let b = verify(&join(&lines)).broken.unwrap();
        assert_eq!(b.line, 2);
        assert!(b.problem.contains("seq 3"), "{}", b.problem);
        // The first line removed: the chain does not start at the genesis.
        let (_dir, mut lines) = log(2);
        lines.remove(0);
        assert_eq!(verify(&join(&lines)).broken.unwrap().line, 1);
    }

    #[test]
    fn reordered_lines_are_named() {
        let (_dir, mut lines) = log(4);
        lines.swap(1, 2);
        let b = verify(&join(&lines)).broken.unwrap();
        assert_eq!(b.line, 2);
    }

    #[test]
    fn a_truncated_last_line_is_reported_as_such_and_the_writer_closes_it() {
        let (dir, lines) = log(3);
        let mut text = join(&lines);
        text.truncate(text.len() - 20);
        let b = verify(&text).broken.unwrap();
        assert_eq!(b.line, 3);
        assert!(b.problem.contains("truncated"), "{}", b.problem);
        std::fs::write(dir.path().join(FILE), &text).unwrap();
        // The next write ends the fragment and continues the numbering after it.
        assert_eq!(add(dir.path(), "installed", 4), 4);
        let text = std::fs::read(dir.path().join(FILE)).unwrap();
        let b = verify(&text).broken.unwrap();
        assert_eq!(b.line, 3, "{}", b.problem);
        let last = text[..text.len() - 1]
            .rsplit(|&b| b == b'\n')
            .next()
            .unwrap();
        let e = parse_line(last).unwrap();
        assert_eq!(e.seq, 4);
    }

    #[test]
    fn garbage_lines_are_refused_with_a_reason() {
        for bad in [
            &b""[..],
            b"{}",
            b"not json",
            b"\xff\xfe",
            b"{\"seq\":1}",
            b"[1,2,3]",
        ] {
            assert!(parse_line(bad).is_err(), "{bad:?}");
        }
        assert_eq!(
            parse_line(&vec![b'a'; MAX_LINE + 1]),
            Err(LineError::TooLong)
        );
        let b = verify(b"garbage\n").broken.unwrap();
        assert_eq!(b.line, 1);
    }

    #[test]
    fn a_replayed_line_is_refused() {
        let (_dir, mut lines) = log(3);
        let again = lines[2].clone();
        lines.push(again);
        let b = verify(&join(&lines)).broken.unwrap();
        assert_eq!(b.line, 4);
    }

    /// The fuzz seed was written by another program from the format described above: the
    /// format is what the documentation says, not only what this writer does.
    #[test]
    fn a_log_written_from_the_documented_format_verifies() {
        let seed = include_bytes!("../../fuzz/corpus/audit/seed-log");
        let v = verify(seed);
        assert_eq!(v.broken, None);
        assert_eq!(v.lines, 4);
        let cut = include_bytes!("../../fuzz/corpus/audit/seed-truncated");
        assert!(verify(cut).broken.unwrap().problem.contains("truncated"));
    }

    #[test]
    fn events_without_effect_are_not_audited() {
        assert_eq!(action_of("reconcile-not-found"), None);
        assert_eq!(action_of("order-ended"), None);
        assert_eq!(action_of("ordered"), Some("order"));
        assert_eq!(action_of("install-failed"), Some("rollback"));
    }
}
