//! A large document read in parts: its `[[certificate]]` tables apart from the rest, a few
//! hundred at a time, so that the spanned document of ten thousand certificates (about 9 KiB
//! of memory per certificate) is never held whole — only the rest of the document and one
//! part at a time.
//!
//! The parts are found by a look at each line: a region of certificate tables begins at a
//! `[[certificate]]` header and ends before the next header that is neither another one nor
//! a `[certificate.KEY]` / `[[certificate.KEY]]` sub-table. Only headers spelled plainly (bare
//! keys, a comment after them at most) count; any other line that begins with `[` ends a
//! region. The rest of the document is read with each region replaced by its line breaks
//! only (so its lines are the document's own, and it costs nothing to read).
//!
//! A line that only looks like a header (inside a multi-line string or array) splits the
//! construct it is in, and the part before it no longer reads: when the rest of the document
//! or a part does not read, or holds anything but certificate tables where it should, the
//! whole document is read at once instead ([`Checker::document`](super::Checker)), which says
//! what is wrong as before. A document read in parts therefore reads as the whole would.

use std::ops::Range;

/// Documents from this size on are read in parts (a configuration of about 120 certificates).
pub(super) const SPLIT_FROM: usize = 64 * 1024;

/// Certificate tables per part.
const PER_PART: usize = 256;

/// A document's parts.
pub(super) struct Parts {
    /// The document with each region of certificate tables replaced by its line breaks.
    pub(super) head: String,
    /// The certificate tables, in the document's order, each range at most [`PER_PART`]
    /// tables and beginning at a `[[certificate]]` header.
    pub(super) tables: Vec<Range<usize>>,
}

#[derive(Debug, PartialEq, Eq)]
enum Line {
    /// `[[certificate]]`
    Certificate,
    /// `[certificate.KEY]` or `[[certificate.KEY]]`
    Sub,
    /// Any other line that begins with `[`.
    OtherHeader,
    /// Anything else.
    Other,
}

fn classify(line: &str) -> Line {
    let t = line.trim_start_matches([' ', '\t']);
    if !t.starts_with('[') {
        return Line::Other;
    }
    header_key(t).map_or(Line::OtherHeader, |(double, parts)| {
        match (double, parts.as_slice()) {
            (true, ["certificate"]) => Line::Certificate,
            (_, ["certificate", _, ..]) => Line::Sub,
            _ => Line::OtherHeader,
        }
    })
}

/// The key of a plainly spelled header line (`t` begins with `[`): whether it is an array
/// of tables, and the key's parts. `None` for anything else.
fn header_key(t: &str) -> Option<(bool, Vec<&str>)> {
    let (double, rest) = match t.strip_prefix("[[") {
        Some(r) => (true, r),
        None => (false, t.strip_prefix('[')?),
    };
    let end = rest.find(']')?;
    let (key, after) = rest.split_at(end);
    let after = after.strip_prefix(if double { "]]" } else { "]" })?;
    let after = after.trim_matches([' ', '\t', '\r', '\n']);
    if !(after.is_empty() || after.starts_with('#')) {
        return None;
    }
    let parts: Vec<&str> = key
        .split('.')
        .map(|p| p.trim_matches([' ', '\t']))
        .collect();
    parts
        .iter()
        .all(|p| {
            !p.is_empty()
                && p.bytes()
                    .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-')
        })
        .then_some((double, parts))
}

/// The parts of `text`, or `None` when it has no `[[certificate]]` header to read apart.
pub(super) fn parts(text: &str) -> Option<Parts> {
    let mut tables = Vec::new();
    let mut blanked: Vec<Range<usize>> = Vec::new();
    // The current region's start, and the current part's start and tables.
    let mut region: Option<usize> = None;
    let mut part: Option<(usize, usize)> = None;
    let mut at = 0;
    for line in text.split_inclusive('\n') {
        match classify(line) {
            Line::Certificate => {
                region.get_or_insert(at);
                part = match part {
                    Some((start, n)) if n < PER_PART => Some((start, n + 1)),
                    Some((start, _)) => {
                        tables.push(start..at);
                        Some((at, 1))
                    }
                    None => Some((at, 1)),
                };
            }
            Line::OtherHeader => {
                if let Some(start) = region.take() {
                    blanked.push(start..at);
                }
                if let Some((start, _)) = part.take() {
                    tables.push(start..at);
                }
            }
            Line::Sub | Line::Other => {}
        }
        at += line.len();
    }
    if let Some(start) = region {
        blanked.push(start..text.len());
    }
    if let Some((start, _)) = part {
        tables.push(start..text.len());
    }
    if tables.is_empty() {
        return None;
    }
    let mut head = String::new();
    let mut from = 0;
    for r in &blanked {
        head.push_str(text.get(from..r.start)?);
        let lines = text.get(r.clone())?.bytes().filter(|b| *b == b'\n').count();
        head.extend(std::iter::repeat_n('\n', lines));
        from = r.end;
    }
    head.push_str(text.get(from..)?);
    Some(Parts { head, tables })
}

#[cfg(test)]
mod tests;
