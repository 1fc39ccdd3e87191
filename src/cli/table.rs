//! Aligned text tables for human output that fit the terminal width.

use std::borrow::Cow;

use crate::values::text::shown;

/// Column alignment.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Align {
    Left,
    Right,
}

/// A table of strings with a header row. One column may be marked flexible: when the table is
/// wider than the terminal, that column is shortened with an ellipsis.
#[derive(Debug, Clone)]
pub(super) struct Table {
    headers: Vec<String>,
    align: Vec<Align>,
    rows: Vec<Vec<String>>,
    flex: Option<usize>,
}

impl Table {
    /// A table with these column headers, all left-aligned.
    pub(super) fn new(headers: &[&str]) -> Self {
        Self {
            headers: headers.iter().map(|h| (*h).to_owned()).collect(),
            align: vec![Align::Left; headers.len()],
            rows: Vec::new(),
            flex: None,
        }
    }

    /// Right-align column `col` (numbers, prices).
    pub(super) fn right(mut self, col: usize) -> Self {
        if let Some(a) = self.align.get_mut(col) {
            *a = Align::Right;
        }
        self
    }

    /// Mark column `col` as the one to shorten when the terminal is narrow.
    pub(super) fn flex(mut self, col: usize) -> Self {
        self.flex = Some(col);
        self
    }

    /// Add a row; missing cells are empty, extra cells are ignored. Every cell goes through
    /// the sanitiser ([`shown`]): what the API, etcd or a file put there cannot reach the
    /// terminal as a control.
    pub(super) fn row<I, S>(&mut self, cells: I)
    where
        I: IntoIterator<Item = S>,
        S: Into<String>,
    {
        let mut row: Vec<String> = cells
            .into_iter()
            .map(|c| {
                let c: String = c.into();
                match shown(&c) {
                    Cow::Borrowed(_) => c,
                    Cow::Owned(escaped) => escaped,
                }
            })
            .collect();
        row.resize(self.headers.len(), String::new());
        self.rows.push(row);
    }

    pub(super) fn is_empty(&self) -> bool {
        self.rows.is_empty()
    }

    /// Render with two spaces between columns, fitting `width` characters where the flexible
    /// column allows it.
    pub(super) fn render(&self, width: usize) -> String {
        let cols = self.headers.len();
        let mut widths: Vec<usize> = self.headers.iter().map(|h| display_width(h)).collect();
        for row in &self.rows {
            for (i, cell) in row.iter().enumerate().take(cols) {
                widths[i] = widths[i].max(display_width(cell));
            }
        }
        let total: usize = widths.iter().sum::<usize>() + 2 * cols.saturating_sub(1);
        if let Some(f) = self.flex.filter(|f| *f < cols)
            && total > width
        {
            let over = total - width;
            let min = display_width(&self.headers[f]).max(8);
            widths[f] = widths[f].saturating_sub(over).max(min);
        }
        let mut out = String::new();
        let mut line = |cells: &[String]| {
            let mut s = String::new();
            for (i, cell) in cells.iter().enumerate().take(cols) {
                let cell = fit(cell, widths[i]);
                let pad = widths[i].saturating_sub(display_width(&cell));
                let last = i + 1 == cols;
                match self.align[i] {
                    Align::Left if last => s.push_str(&cell),
                    Align::Left => {
                        s.push_str(&cell);
                        s.push_str(&" ".repeat(pad));
                    }
                    Align::Right => {
                        s.push_str(&" ".repeat(pad));
                        s.push_str(&cell);
                    }
                }
                if !last {
                    s.push_str("  ");
                }
            }
            out.push_str(s.trim_end());
            out.push('\n');
        };
        line(&self.headers);
        for row in &self.rows {
            line(row);
        }
        out
    }
}

fn display_width(s: &str) -> usize {
    s.chars().count()
}

fn fit(s: &str, width: usize) -> String {
    if display_width(s) <= width {
        return s.to_owned();
    }
    let keep = width.saturating_sub(1);
    let mut out: String = s.chars().take(keep).collect();
    out.push('…');
    out
}

/// The width to fit: unlimited when stdout is not a terminal (pipes and files get whole
/// cells); on a terminal `$COLUMNS` when set and sane, otherwise 120.
pub(super) fn terminal_width() -> usize {
    if !std::io::IsTerminal::is_terminal(&std::io::stdout()) {
        return usize::MAX;
    }
    std::env::var("COLUMNS")
        .ok()
        .and_then(|c| c.trim().parse::<usize>().ok())
        .filter(|c| (20..=1000).contains(c))
        .unwrap_or(120)
}

/// A decimal amount with exactly two decimals when it has fewer (`5000` → `5000.00`,
/// `7.5` → `7.50`); other text is returned as it is.
pub(super) fn money(amount: &str) -> String {
    let t = amount.trim();
    let valid = !t.is_empty()
        && t.trim_start_matches('-')
            .chars()
            .all(|c| c.is_ascii_digit() || c == '.')
        && t.matches('.').count() <= 1;
    if !valid {
        return t.to_owned();
    }
    match t.split_once('.') {
        None => format!("{t}.00"),
        Some((_, "")) => format!("{t}00"),
        Some((_, frac)) if frac.len() == 1 => format!("{t}0"),
        Some(_) => t.to_owned(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::values::text::is_unsafe;

    #[test]
    fn aligns_columns_and_right_aligns_numbers() {
        let mut t = Table::new(&["ID", "NAME", "PRICE"]).right(2);
        t.row(["1", "Basic DV", "10.00 EUR"]);
        t.row(["1234", "X", "7.5 EUR"]);
        let out = t.render(200);
        let expected = [
            "ID    NAME          PRICE",
            "1     Basic DV  10.00 EUR",
            "1234  X           7.5 EUR",
        ];
        assert_eq!(out.lines().collect::<Vec<_>>(), expected);
    }

    /// Guards the table against terminal controls in its cells (an API message, a value from
    /// etcd): shown escaped, the rest of the row as it was.
    #[test]
    fn cells_with_terminal_controls_are_shown_escaped() {
        let mut t = Table::new(&["NAME", "ERROR"]);
        t.row([
            "www",
            "refused\x1b[2J\x1b]0;owned\x07 \u{9b}31m \u{202e}txt.exe",
        ]);
        t.row(["api", "path C:\\x"]);
        let out = t.render(200);
        assert!(!out.chars().any(is_unsafe_but_newline), "{out:?}");
        assert!(
            out.contains("refused\\x1b[2J\\x1b]0;owned\\x07 \\x9b31m \\u{202e}txt.exe"),
            "{out}"
        );
        // Text without a control is left as it is (a value escaped before stays so).
        assert!(out.contains("path C:\\x"), "{out}");
    }

    fn is_unsafe_but_newline(c: char) -> bool {
        c != '\n' && is_unsafe(c)
    }

    #[test]
    fn money_has_two_decimals() {
        assert_eq!(money("5000"), "5000.00");
        assert_eq!(money("7.5"), "7.50");
        assert_eq!(money("10.00"), "10.00");
        assert_eq!(money("-3"), "-3.00");
        assert_eq!(money("n/a"), "n/a");
    }

    #[test]
    fn shortens_the_flexible_column_to_fit() {
        let mut t = Table::new(&["ID", "NAME"]).flex(1);
        t.row(["1", "a very long product name that does not fit"]);
        let out = t.render(20);
        for line in out.lines() {
            assert!(line.chars().count() <= 20, "{line:?} is wider than 20");
        }
        assert!(out.contains('…'));
    }
}
