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
use crate::store::audit::{self, AuditEntry};

pub(super) fn run(config: &Config, args: &AuditArgs, out: &Output) -> Result<u8> {
    let path = config.agent.state_dir.join(audit::FILE);
    let text = match std::fs::read(&path) {
        Ok(t) => t,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Vec::new(),
        Err(e) => {
            return Err(e).with_context(|| format!("could not read {}", path.display()));
        }
    };
    if args.verify {
        return verify(&path, &text, out);
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

fn verify(path: &std::path::Path, text: &[u8], out: &Output) -> Result<u8> {
    let v = audit::verify(text);
    if out.json {
        out.print_json(&serde_json::json!({
            "file": path,
            "lines": v.lines,
            "last_hash": v.last_hash,
            "intact": v.broken.is_none(),
            "broken": v.broken,
        }))?;
        return Ok(if v.broken.is_none() {
            exit::OK
        } else {
            exit::ERROR
        });
    }
    match v.broken {
        None => {
            outln!(
                "{}: {} line(s), chain intact (last hash {})",
                path.display(),
                v.lines,
                v.last_hash
            );
            Ok(exit::OK)
        }
        Some(b) => bail!(
            "{} line {}: {} ({} line(s) before it are intact)",
            path.display(),
            b.line,
            b.problem,
            v.lines
        ),
    }
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
