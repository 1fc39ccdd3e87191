//! `cert-agent audit`: shows the audit log (`state_dir/audit.log`), filtered by date and
//! certificate, or checks its chain (`--verify`).

use anyhow::{Context, Result, bail};
use time::OffsetDateTime;
use time::format_description::well_known::Rfc3339;

use super::args::AuditArgs;
use super::exit::{self, UsageError};
use super::output::{Output, or_dash};
use super::table::Table;
use crate::config::Config;
use crate::store::Store;
use crate::store::audit::{self, AuditEntry};

pub(super) fn run(config: &Config, args: &AuditArgs, out: &Output) -> Result<u8> {
    let path = config.agent.state_dir.join(audit::FILE);
    // The anchor is read before the log: a line appended in between is then beyond the
    // anchor, never the other way round.
    let expected = args
        .verify
        .then(|| Expected::of(config, args))
        .transpose()?;
    let text = match std::fs::read(&path) {
        Ok(t) => t,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Vec::new(),
        Err(e) => {
            return Err(e).with_context(|| format!("could not read {}", path.display()));
        }
    };
    if let Some(expected) = expected {
        return verify(config, &expected, &path, &text, out);
    }
    let since = args.since.as_deref().map(parse_since).transpose()?;
    let mut entries = Vec::new();
    let mut unreadable = Vec::new();
    for (i, line) in text.split(|&b| b == b'\n').enumerate() {
        if line.is_empty() {
            continue;
        }
        match audit::parse_line(line) {
            Ok(e) => entries.push(e),
            Err(e) => unreadable.push((i + 1, e)),
        }
    }
    for (line, e) in &unreadable {
        tracing::warn!("{} line {line}: {e}", path.display());
    }
    entries.retain(|e| {
        since.is_none_or(|s| e.time >= s)
            && args
                .name
                .as_deref()
                .is_none_or(|n| e.certificate.as_deref() == Some(n))
    });
    if out.json {
        out.print_json(&entries)?;
    } else {
        print_table(&entries, out);
        if !unreadable.is_empty() {
            outln!(
                "{} line(s) could not be read; `cert-agent audit --verify` checks the chain",
                unreadable.len()
            );
        }
    }
    Ok(exit::OK)
}

fn print_table(entries: &[AuditEntry], out: &Output) {
    let mut t = Table::new(&[
        "SEQ",
        "TIME",
        "HOST",
        "ACTION",
        "EVENT",
        "CERTIFICATE",
        "ID",
        "DETAILS",
    ])
    .flex(7);
    for e in entries {
        t.row([
            e.seq.to_string(),
            e.time
                .replace_nanosecond(0)
                .unwrap_or(e.time)
                .format(&Rfc3339)
                .unwrap_or_default(),
            e.host.clone(),
            e.action.clone(),
            e.event.clone(),
            or_dash(e.certificate.as_deref()),
            e.certificate_id
                .map_or_else(|| "-".to_owned(), |i| i.to_string()),
            details_text(&e.details),
        ]);
    }
    out.table(&t);
}

/// The details as `key=value` pairs (the ID is its own column).
fn details_text(details: &serde_json::Value) -> String {
    let Some(map) = details.as_object() else {
        return details.to_string();
    };
    let parts: Vec<String> = map
        .iter()
        .filter(|(k, _)| k.as_str() != "certificate_id")
        .map(|(k, v)| match v {
            serde_json::Value::String(s) => format!("{k}={s}"),
            other => format!("{k}={other}"),
        })
        .collect();
    if parts.is_empty() {
        "-".to_owned()
    } else {
        parts.join(" ")
    }
}

/// What `--verify` checks the log against besides its own chain.
struct Expected {
    /// The anchor kept beside the log.
    anchor: Option<audit::Anchor>,
    /// `--expect-last-hash`, in lower case.
    last_hash: Option<String>,
    /// `--expect-min-seq`.
    min_seq: Option<u64>,
}

impl Expected {
    fn of(config: &Config, args: &AuditArgs) -> Result<Self> {
        let last_hash = args
            .expect_last_hash
            .as_deref()
            .map(|h| {
                let h = h.trim().to_ascii_lowercase();
                if h.len() == 64 && h.bytes().all(|b| b.is_ascii_hexdigit()) {
                    Ok(h)
                } else {
                    Err(UsageError(format!(
                        "--expect-last-hash {h:?}: expected 64 hex digits (a line's `hash`)"
                    )))
                }
            })
            .transpose()?;
        let anchor = audit::read_anchor(&config.agent.state_dir).map_err(|e| {
            anyhow::anyhow!(
                "{e}: the audit log's anchor is unreadable (edited, or not written by cert-agent)"
            )
        })?;
        Ok(Self {
            anchor,
            last_hash,
            min_seq: args.expect_min_seq,
        })
    }

    /// What the log lacks: each a sentence.
    fn problems(&self, v: &audit::Verified, config: &Config) -> Vec<String> {
        let mut problems = Vec::new();
        if let Some(a) = &self.anchor
            && v.found.first().copied().flatten() != Some(a.seq)
        {
            problems.push(if v.last_seq < a.seq {
                format!(
                    "the log ends at seq {} but {} names seq {} (hash {}): the log was cut \
                     short, or deleted",
                    v.last_seq,
                    audit::ANCHOR_FILE,
                    a.seq,
                    a.hash
                )
            } else {
                format!(
                    "the log holds no sound line seq {} with hash {} that {} names: that line \
                     was changed or the log rewritten",
                    a.seq,
                    a.hash,
                    audit::ANCHOR_FILE
                )
            });
        }
        if let Some(h) = &self.last_hash
            && v.found
                .get(usize::from(self.anchor.is_some()))
                .copied()
                .flatten()
                .is_none()
        {
            problems.push(format!(
                "no sound line has hash {h} (--expect-last-hash): the log was cut short or \
                 rewritten after that line was written"
            ));
        }
        if let Some(n) = self.min_seq
            && v.last_seq < n
        {
            problems.push(format!(
                "the log ends at seq {}, at least {n} expected (--expect-min-seq): lines were \
                 dropped from its end",
                v.last_seq
            ));
        }
        if v.last_seq == 0
            && self.anchor.is_none()
            && let Some(name) = acted_on(&config.agent.state_dir)
        {
            problems.push(format!(
                "the log is missing or empty, but the state shows actions: certificate '{name}' \
                 has an order, a key or an install recorded"
            ));
        }
        problems
    }
}

/// The first certificate whose record shows an action the audit log records (an order or
/// its intent, a generated key, an install or a placeholder), if any.
fn acted_on(state_dir: &std::path::Path) -> Option<String> {
    let store = Store::existing(state_dir);
    store
        .names()
        .ok()?
        .into_iter()
        .find(|name| match store.load(name) {
            Ok(r) => {
                !r.partner.is_unordered()
                    || r.pending_key.is_some()
                    || r.installed.is_some()
                    || r.placeholder.is_some()
            }
            Err(e) => {
                tracing::warn!("{e:#}");
                false
            }
        })
}

fn verify(
    config: &Config,
    expected: &Expected,
    path: &std::path::Path,
    text: &[u8],
    out: &Output,
) -> Result<u8> {
    let wanted: Vec<&str> = expected
        .anchor
        .iter()
        .map(|a| a.hash.as_str())
        .chain(expected.last_hash.as_deref())
        .collect();
    let v = audit::verify_against(text, &wanted);
    let problems = expected.problems(&v, config);
    let ok = v.intact() && problems.is_empty();
    let gaps: Vec<&audit::Broken> = v
        .breaks
        .iter()
        .filter(|b| b.kind == audit::BreakKind::Gap)
        .collect();
    if out.json {
        out.print_json(&serde_json::json!({
            "file": path,
            "lines": v.lines,
            "last_seq": v.last_seq,
            "last_hash": v.last_hash,
            "intact": ok,
            "broken": v.first_edit(),
            "breaks": v.breaks,
            "gaps": gaps.len(),
            "anchor": expected.anchor,
            "problems": problems,
        }))?;
        return Ok(if ok { exit::OK } else { exit::ERROR });
    }
    let listed: Vec<String> = v
        .breaks
        .iter()
        .map(|b| match b.kind {
            audit::BreakKind::Gap => format!("  line {}: gap: {}", b.line, b.problem),
            audit::BreakKind::Edit => format!("  line {}: {}", b.line, b.problem),
        })
        .chain(problems.iter().map(|p| format!("  {p}")))
        .collect();
    if !ok {
        bail!(
            "{}: the chain is broken ({} line(s), last sound seq {}):\n{}",
            path.display(),
            v.lines,
            v.last_seq,
            listed.join("\n")
        );
    }
    outln!(
        "{}: {} line(s), chain intact{} (last seq {}, last hash {})",
        path.display(),
        v.lines,
        match gaps.len() {
            0 => String::new(),
            n => format!(" but for {n} gap(s) an interrupted write left"),
        },
        v.last_seq,
        v.last_hash
    );
    for l in listed {
        outln!("{l}");
    }
    Ok(exit::OK)
}

/// `--since`: a date (midnight UTC) or an RFC 3339 time.
fn parse_since(s: &str) -> Result<OffsetDateTime> {
    if let Ok(t) = OffsetDateTime::parse(s, &Rfc3339) {
        return Ok(t);
    }
    let format = time::macros::format_description!("[year]-[month]-[day]");
    match time::Date::parse(s, &format) {
        Ok(d) => Ok(d.midnight().assume_utc()),
        Err(_) => Err(UsageError(format!(
            "--since {s:?}: expected a date (YYYY-MM-DD) or an RFC 3339 time"
        ))
        .into()),
    }
}

/// Records in the audit log a state-changing call asked for by hand, with the API's answer
/// (or why there was none): before the answer is printed, so that a failed record fails
/// the command rather than leaving the call unrecorded.
pub(super) fn answer(
    config: &Config,
    event: &str,
    id: u64,
    mut details: serde_json::Value,
    answer: &Result<crate::api::ActionResult, crate::api::ApiError>,
) -> Result<()> {
    details["certificate_id"] = serde_json::json!(id);
    match answer {
        Ok(r) => {
            details["success"] = serde_json::json!(r.success);
            details["result"] = serde_json::json!(r.result);
        }
        Err(e) => {
            details["success"] = serde_json::json!(false);
            details["error"] = serde_json::json!(e.to_string());
        }
    }
    let event = match (event, answer) {
        ("cancel", Err(_)) => "cancel-refused",
        (other, _) => other,
    };
    Store::open(&config.agent.state_dir)
        .and_then(|store| store.audit(None, event, &details))
        .context("could not record the call in the audit log")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn since_takes_a_date_or_a_time_and_refuses_garbage() {
        assert_eq!(
            parse_since("2026-03-15").unwrap(),
            time::macros::datetime!(2026-03-15 0:00 UTC)
        );
        assert_eq!(
            parse_since("2026-03-15T10:00:00+02:00").unwrap(),
            time::macros::datetime!(2026-03-15 8:00 UTC)
        );
        for bad in ["yesterday", "2026-13-01", "", "2026-03-15 10:00"] {
            assert!(parse_since(bad).is_err(), "{bad}");
        }
    }
}
