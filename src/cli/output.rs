//! Printing: JSON for `--json`, aligned tables for people, one write per piece so that a
//! closed pipe ends the process quietly.

use anyhow::{Context, Result};
use serde::Serialize;

use super::table::{Table, terminal_width};

/// How a command prints: JSON (`--json`) or text.
pub(super) struct Output {
    pub json: bool,
    /// `--quiet`: errors only.
    pub quiet: bool,
}

impl Output {
    pub(super) fn new(json: bool, quiet: bool) -> Self {
        Self { json, quiet }
    }

    pub(super) fn print_json<T: Serialize + ?Sized>(&self, value: &T) -> Result<()> {
        let text = serde_json::to_string_pretty(value).context("could not encode JSON output")?;
        outln!("{}", crate::values::text::json_printable(&text));
        Ok(())
    }

    pub(super) fn table(&self, table: &Table) {
        out!("{}", table.render(terminal_width()));
    }
}

/// The value, or `-` when there is none.
pub(super) fn or_dash(v: Option<impl ToString>) -> String {
    v.map(|s| s.to_string()).unwrap_or_else(|| "-".to_owned())
}
