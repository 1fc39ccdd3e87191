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
pub(crate) const FILE: &str = "audit.log";

/// `prev` of the first line.
pub(crate) const GENESIS: &str = "0000000000000000000000000000000000000000000000000000000000000000";

/// The tail read to find the last line (lines are far shorter; a longer one is found by
/// reading the whole file).
const TAIL: u64 = 64 * 1024;

/// The longest line the reader accepts (the writer caps its details well below this).
pub(crate) const MAX_LINE: usize = 64 * 1024;

/// The suffix every line ends with: `,"hash":"` + 64 hex digits + `"}`.
const HASH_SUFFIX_LEN: usize = 9 + 64 + 2;

/// The action of an audited journal event, or `None` for events without effect (a failed
/// reconciliation, an order seen ended).
pub(crate) fn action_of(event: &str) -> Option<&'static str> {
    Some(match event {
        "order-intent"
        | "ordered"
        | "order-rejected"
        | "order-outcome-unknown"
        | "reconciled"
        | "intent-cleared-by-operator"
        | "subscription-renewal-order"
        | "ended-order-replaced"
        | "adopted"
        | "imported"
        | "acme-order-placed"
        | "acme-order-dropped" => "order",
        "reissue-intent" | "reissued" | "reissue-refused" | "replaced" | "rollout-refused" => {
            "reissue"
        }
        "cancel" | "cancel-refused" => "cancel",
        "renewal-prepared" | "prolong" => "prolong",
        "dcv-published" | "dcv-change" | "dcv-resend" => "dcv",
        "installed" | "placeholder" => "install",
        "install-failed" => "rollback",
        "retired" | "fleet-retired" => "retire",
        "key-generated" => "key",
        "revoked" => "revoke",
        "acme-account-registered" | "acme-account-deactivated" => "account",
        "fleet-lead-taken" | "fleet-lead-given" | "fleet-imported" | "fleet-value-repaired" => {
            "fleet"
        }
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
    /// `rollback`, `retire`, `key`, `revoke`, `account`, `fleet`).
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
pub(crate) fn sha256_hex(bytes: &[u8]) -> String {
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

/// The line for `body`: its bytes and its `hash` member.
fn render(body: &Body<'_>) -> io::Result<(String, String)> {
    let mut text = serde_json::to_string(body).map_err(io::Error::other)?;
    let hash = sha256_hex(text.as_bytes());
    text.pop();
    text.push_str(&format!(",\"hash\":\"{hash}\"}}"));
    debug_assert_eq!(
        text.len() - text.rfind(",\"hash\"").unwrap_or(0),
        HASH_SUFFIX_LEN
    );
    Ok((text, hash))
}

/// What kind of break [`verify`] found.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum BreakKind {
    /// A line an interrupted write left incomplete: closed by the next write (the line after
    /// it chains to it) or still open at the end. The action it was to record may be missing;
    /// nothing written before or after it was changed. Tolerated.
    Gap,
    /// A line changed, removed, inserted or moved after it was written.
    Edit,
}

/// A break in the chain.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Broken {
    /// The line's number in the file (1 for the first).
    pub line: u64,
    /// A tolerated gap or an edit.
    pub kind: BreakKind,
    /// What is wrong with it.
    pub problem: String,
}

/// The result of [`verify`].
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Verified {
    /// Complete lines read (each ended by a line break).
    pub lines: u64,
    /// `seq` of the last sound line, 0 if there is none.
    pub last_seq: u64,
    /// SHA-256 of the last sound line ([`GENESIS`] if there is none): the `prev` of the line
    /// written after it.
    pub last_hash: String,
    /// Every break, in the order of the file.
    pub breaks: Vec<Broken>,
    /// For each hash asked for ([`verify_against`]), the `seq` of the sound line that has it
    /// (as its `hash` member or as the SHA-256 of its bytes), if any.
    #[serde(skip)]
    pub found: Vec<Option<u64>>,
}

impl Verified {
    /// The first edit, if any.
    pub fn first_edit(&self) -> Option<&Broken> {
        self.breaks.iter().find(|b| b.kind == BreakKind::Edit)
    }

    /// Whether no line was changed, removed, inserted or moved (tolerated gaps aside).
    pub fn intact(&self) -> bool {
        self.first_edit().is_none()
    }
}

/// Checks the whole chain of `text` (the file's bytes); see [`verify_against`].
pub fn verify(text: &[u8]) -> Verified {
    verify_against(text, &[])
}

/// An unreadable line, waiting for the line after it to tell a closed fragment from an edit.
struct Unreadable {
    line: u64,
    problem: String,
    /// It can be what an interrupted write leaves: a cut-short line.
    cut_short: bool,
}

/// Whether `line` can be a line the writer began and did not finish: not empty, begun as a
/// JSON object, and ended before the object was.
fn cut_short(line: &[u8]) -> bool {
    line.first() == Some(&b'{')
        && serde_json::from_slice::<serde::de::IgnoredAny>(line).is_err_and(|e| e.is_eof())
}

/// Checks the whole chain of `text` (the file's bytes): each line sound, numbered in order,
/// and chained to the one before. Reports every break and goes on after it: the next sound
/// line anchors the chain again. A cut-short line that the next line chains to (the writer
/// closed it), or that ends the file, is a tolerated gap. `wanted` are hashes whose lines are
/// looked for (`--expect-last-hash`, the state directory's anchor).
pub fn verify_against(text: &[u8], wanted: &[&str]) -> Verified {
    let mut v = Verified {
        lines: 0,
        last_seq: 0,
        last_hash: GENESIS.to_owned(),
        breaks: Vec::new(),
        found: vec![None; wanted.len()],
    };
    // What the next line must carry: the SHA-256 of the line before it (sound or not) and the
    // number after it.
    let mut expected_prev = GENESIS.to_owned();
    let mut expected_seq: u64 = 1;
    let mut unreadable: Option<Unreadable> = None;
    let mut n: u64 = 0;
    let mut rest = text;
    while !rest.is_empty() {
        n += 1;
        let line = match rest.iter().position(|&b| b == b'\n') {
            Some(i) => {
                v.lines = n;
                let line = &rest[..i];
                rest = &rest[i + 1..];
                line
            }
            None => std::mem::take(&mut rest),
        };
        let entry = match parse_line(line) {
            Ok(e) => e,
            Err(e) => {
                if let Some(u) = unreadable.take() {
                    v.breaks.push(u.into_break(BreakKind::Edit));
                }
                unreadable = Some(Unreadable {
                    line: n,
                    problem: if line.is_empty() {
                        format!("an empty line ({e})")
                    } else {
                        e.to_string()
                    },
                    cut_short: cut_short(line),
                });
                expected_prev = sha256_hex(line);
                expected_seq = expected_seq.saturating_add(1);
                continue;
            }
        };
        let follows = entry.prev == expected_prev;
        if let Some(u) = unreadable.take() {
            // The line before was unreadable: a closed fragment if this one chains to it,
            // else an edit whose first sound line after it anchors the chain again.
            let kind = if u.cut_short && follows {
                BreakKind::Gap
            } else {
                BreakKind::Edit
            };
            v.breaks.push(u.into_break(kind));
            if entry.seq != expected_seq {
                v.breaks.push(seq_break(n, entry.seq, expected_seq));
            }
        } else if entry.seq != expected_seq {
            v.breaks.push(seq_break(n, entry.seq, expected_seq));
        } else if !follows {
            v.breaks.push(Broken {
                line: n,
                kind: BreakKind::Edit,
                problem: if n == 1 {
                    "the first line does not start the chain (lines before it were removed)"
                        .to_owned()
                } else {
                    format!(
                        "it does not follow line {}: that line was changed, or lines were \
                         removed, inserted or reordered",
                        n - 1
                    )
                },
            });
        }
        expected_prev = sha256_hex(line);
        expected_seq = entry.seq.saturating_add(1);
        v.last_seq = entry.seq;
        v.last_hash.clone_from(&expected_prev);
        for (found, w) in v.found.iter_mut().zip(wanted) {
            if *w == entry.hash || *w == expected_prev {
                *found = Some(entry.seq);
            }
        }
    }
    if let Some(u) = unreadable {
        v.breaks.push(if u.cut_short {
            Broken {
                line: u.line,
                kind: BreakKind::Gap,
                problem: format!(
                    "the last line is incomplete ({}): a write that did not finish (the next \
                     one closes it), or the file was cut short",
                    u.problem
                ),
            }
        } else {
            u.into_break(BreakKind::Edit)
        });
    }
    v
}

impl Unreadable {
    fn into_break(self, kind: BreakKind) -> Broken {
        let problem = match kind {
            BreakKind::Gap => format!(
                "an incomplete line left by an interrupted write and closed by the next write \
                 ({}); the action it was to record may be missing, and the chain goes on after \
                 it",
                self.problem
            ),
            BreakKind::Edit => self.problem,
        };
        Broken {
            line: self.line,
            kind,
            problem,
        }
    }
}

fn seq_break(line: u64, seq: u64, expected: u64) -> Broken {
    Broken {
        line,
        kind: BreakKind::Edit,
        problem: format!(
            "it carries seq {seq} where {expected} was expected: lines before it were removed, \
             inserted or reordered"
        ),
    }
}

/// The anchor's file in the state directory: where the log ended when it was last written.
pub(crate) const ANCHOR_FILE: &str = "audit.anchor";

/// The anchor's length: a 20-digit `seq`, a space, 64 hex digits, a line break. Always the
/// same, so that it is rewritten in place.
const ANCHOR_LEN: usize = 20 + 1 + 64 + 1;

/// The last line written: its number and its SHA-256 (what the next line's `prev` is). Kept
/// in [`ANCHOR_FILE`] beside the log, so that a log cut short, or deleted, while the anchor is
/// left does not verify. It never names a line the log does not hold durably (it is written
/// after the log's fsync); after a crash it can name an earlier line.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Anchor {
    pub seq: u64,
    pub hash: String,
}

impl Anchor {
    fn render(&self) -> String {
        format!("{:020} {}\n", self.seq, self.hash)
    }

    /// Reads an anchor file's bytes.
    pub fn parse(bytes: &[u8]) -> Result<Self, String> {
        let text = std::str::from_utf8(bytes).map_err(|_| "not UTF-8 text".to_owned())?;
        let Some((seq, hash)) = text.strip_suffix('\n').and_then(|t| t.split_once(' ')) else {
            return Err("expected `SEQ HASH` and a line break".to_owned());
        };
        let seq = seq
            .parse::<u64>()
            .ok()
            .filter(|_| seq.len() == 20)
            .ok_or_else(|| "the number is not 20 digits".to_owned())?;
        if !is_hex64(hash) {
            return Err("the hash is not 64 lower-case hex digits".to_owned());
        }
        Ok(Self {
            seq,
            hash: hash.to_owned(),
        })
    }
}

/// The last whole line of `dir`'s log: its `seq` and its `hash` (as the journal's copy and
/// `--expect-last-hash` show it), what a fleet host reports in its sealed `seen` record so
/// that another host sees its log go back. `None` when the log is missing or empty. Only the
/// log's tail is read; a last line cut short (no line break) is passed over.
pub(crate) fn last_mark(dir: &Path) -> Result<Option<Anchor>, String> {
    let path = dir.join(FILE);
    let shown = || path.display().to_string();
    let file = match OpenOptions::new()
        .read(true)
        .custom_flags(nix::libc::O_NOFOLLOW)
        .open(&path)
    {
        Ok(f) => f,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(format!("could not read {}: {e}", shown())),
    };
    let len = file
        .metadata()
        .map_err(|e| format!("could not read {}: {e}", shown()))?
        .len();
    let start = len.saturating_sub(2 * TAIL + 2);
    let mut buf = vec![0u8; usize::try_from(len - start).map_err(|e| e.to_string())?];
    file.read_exact_at(&mut buf, start)
        .map_err(|e| format!("could not read {}: {e}", shown()))?;
    let Some(end) = buf.iter().rposition(|&b| b == b'\n') else {
        return match len {
            0 => Ok(None),
            _ => Err(format!(
                "{}: no whole line in its last {} bytes",
                shown(),
                buf.len()
            )),
        };
    };
    let from = buf[..end]
        .iter()
        .rposition(|&b| b == b'\n')
        .map_or(0, |i| i + 1);
    if from == 0 && start > 0 {
        return Err(format!(
            "{}: its last line is longer than {MAX_LINE} bytes",
            shown()
        ));
    }
    let entry = parse_line(&buf[from..end])
        .map_err(|e| format!("{}: its last whole line: {e}", shown()))?;
    Ok(Some(Anchor {
        seq: entry.seq,
        hash: entry.hash,
    }))
}

/// Reads `dir`'s anchor: `None` when there is none (or an empty one, as a crash can leave a
/// file just created).
pub(crate) fn read_anchor(dir: &Path) -> Result<Option<Anchor>, String> {
    let path = dir.join(ANCHOR_FILE);
    match std::fs::read(&path) {
        Ok(b) if b.is_empty() => Ok(None),
        Ok(b) if b.len() > ANCHOR_LEN => Err(format!(
            "{}: longer than an anchor ({} bytes)",
            path.display(),
            b.len()
        )),
        Ok(b) => Anchor::parse(&b)
            .map(Some)
            .map_err(|e| format!("{}: {e}", path.display())),
        Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(None),
        Err(e) => Err(format!("could not read {}: {e}", path.display())),
    }
}

/// Rewrites `dir`'s anchor in place (never through a link). Not fsynced: after a crash it may
/// name an earlier line, which verifies.
fn write_anchor(dir: &Path, anchor: &Anchor) -> io::Result<()> {
    let file = OpenOptions::new()
        .write(true)
        .create(true)
        .mode(0o600)
        .custom_flags(nix::libc::O_NOFOLLOW)
        .open(dir.join(ANCHOR_FILE))?;
    let text = anchor.render();
    debug_assert_eq!(text.len(), ANCHOR_LEN);
    file.write_all_at(text.as_bytes(), 0)?;
    file.set_len(ANCHOR_LEN as u64)
}

/// The name this host's audit lines carry.
static HOST: std::sync::OnceLock<String> = std::sync::OnceLock::new();

/// Names this host in the audit lines it writes from now on: in fleet mode the fleet's
/// `[fleet] host`, the name `fleet status` and the other hosts know it by, instead of the
/// system's host name. Only the first name given before a line is written counts.
pub(crate) fn name_host(name: &str) {
    let name = name.trim();
    if !name.is_empty() {
        let _ = HOST.set(name.to_owned());
    }
}

/// This host's name ([`name_host`], else the system's), read once.
fn host() -> &'static str {
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
pub(crate) struct NewEntry<'a> {
    pub action: &'a str,
    pub event: &'a str,
    pub certificate: Option<&'a str>,
    pub details: &'a serde_json::Value,
}

/// Appends one line to `dir/audit.log` (created 0600), fsyncs it, and sends it to the log;
/// returns its number.
pub(crate) fn append(dir: &Path, entry: &NewEntry<'_>) -> io::Result<u64> {
    append_all(dir, std::slice::from_ref(entry))
}

/// Appends the lines of a batch to `dir/audit.log` (created 0600) in order, each chained to
/// the one before, in one write fsynced once, and sends them to the log; returns the number of
/// the last one (0 for none). A crash during the write leaves a prefix of the lines, the last
/// one possibly cut short (closed by the next append, as any interrupted write).
pub(crate) fn append_all(dir: &Path, entries: &[NewEntry<'_>]) -> io::Result<u64> {
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
        let (line, hash) = render(&body)?;
        if line.len() > MAX_LINE {
            return Err(io::Error::other(format!(
                "an audit line of {} bytes is longer than {MAX_LINE}",
                line.len()
            )));
        }
        let line_prev = std::mem::replace(&mut prev, sha256_hex(line.as_bytes()));
        out.push_str(&line);
        out.push('\n');
        logged.push((seq, entry, certificate_id, line_prev, hash));
        seq += 1;
    }
    file.write_all(out.as_bytes())?;
    file.sync_data()?;
    let anchor = Anchor {
        seq: seq - 1,
        hash: prev,
    };
    if let Err(e) = write_anchor(dir, &anchor) {
        tracing::warn!(
            "could not write {}: {e}; `audit --verify` checks the log against the anchor \
             written before",
            dir.join(ANCHOR_FILE).display()
        );
    }
    for (seq, entry, certificate_id, prev, hash) in logged {
        tracing::info!(
            target: "cert_agent::audit",
            seq,
            action = entry.action,
            event = entry.event,
            certificate = entry.certificate.unwrap_or("-"),
            certificate_id,
            details = %entry.details,
            prev = %prev,
            hash = %hash,
            "audit"
        );
    }
    Ok(anchor.seq)
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

    /// The breaks as (line, kind).
    fn breaks(v: &Verified) -> Vec<(u64, BreakKind)> {
        v.breaks.iter().map(|b| (b.line, b.kind)).collect()
    }

    use BreakKind::{Edit, Gap};

    #[test]
    fn an_untouched_log_verifies_and_chains_from_genesis() {
        let (dir, lines) = log(4);
        let v = verify(&join(&lines));
        assert_eq!(v.breaks, []);
        assert!(v.intact());
        assert_eq!((v.lines, v.last_seq), (4, 4));
        assert_eq!(v.last_hash, sha256_hex(lines[3].as_bytes()));
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
        // The anchor beside it names the last line.
        let anchor = read_anchor(dir.path()).unwrap().unwrap();
        assert_eq!(anchor.seq, 4);
        assert_eq!(anchor.hash, v.last_hash);
        assert_eq!(
            crate::store::mode_of(&dir.path().join(ANCHOR_FILE)).unwrap(),
            0o600
        );
    }

    #[test]
    fn the_last_mark_is_the_last_whole_lines_seq_and_hash() {
        let empty = tempfile::tempdir().unwrap();
        assert_eq!(last_mark(empty.path()), Ok(None));
        let (dir, lines) = log(3);
        let last = parse_line(lines[2].as_bytes()).unwrap();
        let want = Anchor {
            seq: 3,
            hash: last.hash,
        };
        assert_eq!(last_mark(dir.path()), Ok(Some(want.clone())));
        // A line cut short at the end is passed over.
        let path = dir.path().join(FILE);
        let mut text = std::fs::read(&path).unwrap();
        text.extend_from_slice(b"{\"seq\":4,\"ti");
        std::fs::write(&path, &text).unwrap();
        assert_eq!(last_mark(dir.path()), Ok(Some(want)));
        // Garbage as the last line is an error naming the log.
        std::fs::write(&path, b"not an audit line\n").unwrap();
        let e = last_mark(dir.path()).unwrap_err();
        assert!(
            e.contains("audit.log") && e.contains("last whole line"),
            "{e}"
        );
    }

    #[test]
    fn an_edited_line_is_named_and_the_lines_after_it_are_checked() {
        let (_dir, mut lines) = log(6);
        lines[2] = lines[2].replace("\"certificate_id\":3", "\"certificate_id\":9");
        let v = verify(&join(&lines));
        // One break: the line after it anchors the chain again.
        assert_eq!(breaks(&v), [(3, Edit)]);
        assert!(v.breaks[0].problem.contains("changed"), "{:?}", v.breaks);
        assert_eq!((v.lines, v.last_seq), (6, 6));
        // A second edit further on is found too.
        lines[4] = lines[4].replace("\"certificate_id\":5", "\"certificate_id\":7");
        assert_eq!(breaks(&verify(&join(&lines))), [(3, Edit), (5, Edit)]);
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
        lines[1] = forged.0;
        let v = verify(&join(&lines));
        assert_eq!(breaks(&v), [(3, Edit)]);
        assert!(
            v.breaks[0].problem.contains("does not follow line 2"),
            "{:?}",
            v.breaks
        );
    }

    #[test]
    fn a_removed_line_is_named() {
        let (_dir, mut lines) = log(5);
        lines.remove(1);
        let v = verify(&join(&lines));
        assert_eq!(breaks(&v), [(2, Edit)]);
        assert!(v.breaks[0].problem.contains("seq 3"), "{:?}", v.breaks);
        assert_eq!(v.last_seq, 5);
        // The first line removed: the chain does not start at the genesis.
        let (_dir, mut lines) = log(2);
        lines.remove(0);
        assert_eq!(breaks(&verify(&join(&lines))), [(1, Edit)]);
    }

    #[test]
    fn reordered_lines_are_named() {
        let (_dir, mut lines) = log(4);
        lines.swap(1, 2);
        let v = verify(&join(&lines));
        assert_eq!(v.first_edit().map(|b| b.line), Some(2));
        assert!(v.breaks.iter().all(|b| b.kind == Edit), "{:?}", v.breaks);
    }

    #[test]
    fn a_cut_short_last_line_is_a_gap_and_the_closed_fragment_stays_one() {
        let (dir, lines) = log(3);
        let mut text = join(&lines);
        text.truncate(text.len() - 20);
        let v = verify(&text);
        assert_eq!(breaks(&v), [(3, Gap)]);
        assert!(v.breaks[0].problem.contains("incomplete"), "{:?}", v.breaks);
        assert!(v.intact());
        assert_eq!(v.last_seq, 2);
        std::fs::write(dir.path().join(FILE), &text).unwrap();
        // The next write ends the fragment and continues the numbering after it.
        assert_eq!(add(dir.path(), "installed", 4), 4);
        assert_eq!(add(dir.path(), "installed", 5), 5);
        let text = std::fs::read(dir.path().join(FILE)).unwrap();
        let v = verify(&text);
        assert_eq!(breaks(&v), [(3, Gap)]);
        assert!(v.breaks[0].problem.contains("closed"), "{:?}", v.breaks);
        assert_eq!((v.lines, v.last_seq), (5, 5));
        assert_eq!(read_anchor(dir.path()).unwrap().unwrap().seq, 5);
    }

    /// Guards the check after a gap: a closed fragment then an edit after it are both
    /// reported, each as what it is (the chain was checked past the fragment).
    #[test]
    fn a_closed_fragment_then_an_edit_after_it_are_both_reported() {
        let (dir, lines) = log(2);
        let mut text = join(&lines);
        text.extend_from_slice(b"{\"seq\":3,\"time\":\"2026-");
        std::fs::write(dir.path().join(FILE), &text).unwrap();
        for i in 4..=7 {
            assert_eq!(add(dir.path(), "installed", i), i);
        }
        let text = String::from_utf8(std::fs::read(dir.path().join(FILE)).unwrap()).unwrap();
        let mut lines: Vec<String> = text.lines().map(str::to_owned).collect();
        assert_eq!(breaks(&verify(&join(&lines))), [(3, Gap)]);
        lines[5] = lines[5].replace("\"certificate_id\":6", "\"certificate_id\":66");
        let v = verify(&join(&lines));
        assert_eq!(breaks(&v), [(3, Gap), (6, Edit)]);
        assert!(!v.intact());
        assert_eq!(v.last_seq, 7);
    }

    /// A line that is not cut short (garbage, an edited line) is an edit even when the line
    /// after it chains to it: only what an interrupted write leaves is tolerated.
    #[test]
    fn only_a_cut_short_line_is_tolerated() {
        let (dir, lines) = log(1);
        let mut text = join(&lines);
        text.extend_from_slice(b"{\"seq\":2} garbage");
        std::fs::write(dir.path().join(FILE), &text).unwrap();
        add(dir.path(), "installed", 3);
        let v = verify(&std::fs::read(dir.path().join(FILE)).unwrap());
        assert_eq!(breaks(&v), [(2, Edit)]);
        // A fragment the next line does not chain to is an edit too.
        let (_dir, mut lines) = log(3);
        lines[1].truncate(30);
        assert_eq!(breaks(&verify(&join(&lines))), [(2, Edit)]);
        // A last line whose line break alone is missing is sound.
        let (_dir, lines) = log(2);
        let mut text = join(&lines);
        text.pop();
        let v = verify(&text);
        assert_eq!((breaks(&v), v.last_seq), (vec![], 2));
    }

    #[test]
    fn wanted_hashes_are_found_by_member_or_line_hash() {
        let (_dir, lines) = log(3);
        let second = parse_line(lines[1].as_bytes()).unwrap();
        let line_hash = sha256_hex(lines[2].as_bytes());
        let v = verify_against(&join(&lines), &[&second.hash, &line_hash, GENESIS]);
        assert_eq!(v.found, [Some(2), Some(3), None]);
        // A dropped tail loses the line.
        let v = verify_against(&join(&lines[..2]), &[&line_hash]);
        assert_eq!((v.found[0], v.last_seq), (None, 2));
        assert!(v.intact());
    }

    #[test]
    fn anchors_are_read_strictly() {
        let good = Anchor {
            seq: 42,
            hash: GENESIS.to_owned(),
        };
        assert_eq!(Anchor::parse(good.render().as_bytes()), Ok(good));
        for bad in [
            &b""[..],
            b"42 0000\n",
            b"00000000000000000042 0000000000000000000000000000000000000000000000000000000000000000",
            b"0000000000000000004x 0000000000000000000000000000000000000000000000000000000000000000\n",
            b"00000000000000000042 000000000000000000000000000000000000000000000000000000000000000G\n",
            b"\xff\xfe",
        ] {
            assert!(Anchor::parse(bad).is_err(), "{bad:?}");
        }
        let dir = tempfile::tempdir().unwrap();
        assert_eq!(read_anchor(dir.path()), Ok(None));
        std::fs::write(dir.path().join(ANCHOR_FILE), "").unwrap();
        assert_eq!(read_anchor(dir.path()), Ok(None));
        std::fs::write(dir.path().join(ANCHOR_FILE), "garbage\n").unwrap();
        assert!(read_anchor(dir.path()).is_err());
        // Never written through a link.
        std::fs::remove_file(dir.path().join(ANCHOR_FILE)).unwrap();
        let target = dir.path().join("elsewhere");
        std::fs::write(&target, "x").unwrap();
        std::os::unix::fs::symlink(&target, dir.path().join(ANCHOR_FILE)).unwrap();
        add(dir.path(), "ordered", 1);
        assert_eq!(std::fs::read_to_string(&target).unwrap(), "x");
    }

    /// The fuzz target's rules over every cut and many single-byte changes of a real log: no
    /// panic, breaks in file order on lines the log has, a log without a break all sound.
    #[test]
    fn every_cut_and_flipped_byte_keeps_the_verifiers_rules() {
        let (_dir, lines) = log(4);
        let text = join(&lines);
        let check = |data: &[u8]| {
            let v = verify(data);
            let all = data.split(|&b| b == b'\n').count() - usize::from(data.ends_with(b"\n"));
            let all = if data.is_empty() { 0 } else { all };
            if v.breaks.is_empty() {
                assert_eq!(
                    v.last_seq as usize,
                    all,
                    "{:?}",
                    String::from_utf8_lossy(data)
                );
            }
            let mut at = 0;
            for b in &v.breaks {
                assert!(
                    b.line >= 1 && b.line as usize <= all && b.line >= at,
                    "{v:?}"
                );
                at = b.line;
            }
            v
        };
        for cut in 0..text.len() {
            let v = check(&text[..cut]);
            // A cut is never an edit: at most a gap at the end.
            assert!(v.intact(), "cut at {cut}: {:?}", v.breaks);
        }
        for at in (0..text.len()).step_by(7) {
            let mut flipped = text.clone();
            flipped[at] ^= 0x20;
            let v = check(&flipped);
            if flipped[at] != b'\n' && text[at] != b'\n' {
                assert!(!v.intact(), "byte {at} changed: {:?}", v.breaks);
            }
        }
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
        assert_eq!(breaks(&verify(b"garbage\n")), [(1, Edit)]);
        assert_eq!(breaks(&verify(b"\n\n")), [(1, Edit), (2, Edit)]);
    }

    #[test]
    fn a_replayed_line_is_refused() {
        let (_dir, mut lines) = log(3);
        let again = lines[2].clone();
        lines.push(again);
        assert_eq!(breaks(&verify(&join(&lines))), [(4, Edit)]);
    }

    /// The fuzz seed was written by another program from the format described above: the
    /// format is what the documentation says, not only what this writer does.
    #[test]
    fn a_log_written_from_the_documented_format_verifies() {
        let seed = include_bytes!("../../fuzz/corpus/audit/seed-log");
        let v = verify(seed);
        assert_eq!(v.breaks, []);
        assert_eq!(v.lines, 4);
        let cut = include_bytes!("../../fuzz/corpus/audit/seed-truncated");
        let v = verify(cut);
        assert_eq!(v.breaks.len(), 1);
        assert_eq!(v.breaks[0].kind, Gap);
    }

    #[test]
    fn events_without_effect_are_not_audited() {
        assert_eq!(action_of("reconcile-not-found"), None);
        assert_eq!(action_of("order-ended"), None);
        assert_eq!(action_of("ordered"), Some("order"));
        assert_eq!(action_of("install-failed"), Some("rollback"));
    }
}
