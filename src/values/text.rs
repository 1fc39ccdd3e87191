//! The one sanitiser for untrusted text shown to a person: API messages, values from etcd,
//! names from an archive, table cells. Every control character (C0, DEL, C1) and every
//! bidirectional control is shown as an escape, so that no such text can move the cursor,
//! recolour or retitle the terminal, or reorder what is printed around it.

/// Whether `c` must not reach a terminal as it is: a control character (C0, DEL, C1: ESC, CSI,
/// BEL, a carriage return, a line break), or a bidirectional mark, embedding, override or
/// isolate (U+200E, U+200F, U+202A..U+202E, U+2066..U+2069).
pub(crate) fn is_unsafe(c: char) -> bool {
    c.is_control()
        || matches!(c, '\u{200e}' | '\u{200f}' | '\u{202a}'..='\u{202e}' | '\u{2066}'..='\u{2069}')
}

/// Appends `c` to `out`, escaped if [`is_unsafe`]: `\x1b` for a control character,
/// `\u{202e}` for a bidirectional control, `\\` for `\` (so that a literal backslash cannot
/// pose as an escape).
fn push_escaped(out: &mut String, c: char) {
    match c {
        '\\' => out.push_str("\\\\"),
        c if c.is_control() => out.push_str(&format!("\\x{:02x}", u32::from(c))),
        c if is_unsafe(c) => out.push_str(&format!("\\u{{{:04x}}}", u32::from(c))),
        c => out.push(c),
    }
}

/// `text` with every unsafe character shown as an escape (see [`is_unsafe`]) and `\` as `\\`.
pub(crate) fn printable(text: &str) -> String {
    printable_capped(text, usize::MAX)
}

/// [`printable`], at most `max` characters of `text` (an ellipsis marks the cut).
pub(crate) fn printable_capped(text: &str, max: usize) -> String {
    let mut out = String::with_capacity(text.len().min(max));
    for (n, c) in text.chars().enumerate() {
        if n >= max {
            out.push('…');
            break;
        }
        push_escaped(&mut out, c);
    }
    out
}

/// `text` as it is when nothing in it is unsafe, else [`printable`]: for text assembled from
/// parts of which some were escaped already (a message quoting a value with
/// [`quote_max`], a cell made printable before), which an escape of every `\` would double.
pub(crate) fn shown(text: &str) -> std::borrow::Cow<'_, str> {
    if text.chars().any(is_unsafe) {
        printable(text).into()
    } else {
        text.into()
    }
}

/// [`shown`] line by line, keeping the line breaks and tabs (layout, harmless on a
/// terminal): for a message of several lines (an error with its causes, a command's output)
/// whose parts may hold untrusted text. Text with nothing unsafe is returned as it is.
pub(crate) fn printable_lines(text: &str) -> String {
    if !text
        .chars()
        .any(|c| is_unsafe(c) && !matches!(c, '\n' | '\t'))
    {
        return text.to_owned();
    }
    let mut out = String::with_capacity(text.len());
    for (i, line) in text.split('\n').enumerate() {
        if i > 0 {
            out.push('\n');
        }
        for (j, part) in line.split('\t').enumerate() {
            if j > 0 {
                out.push('\t');
            }
            out.push_str(&shown(part));
        }
    }
    out
}

/// How many characters of an untrusted value a message quotes ([`quote`]).
pub(crate) const QUOTE_CHARS: usize = 80;

/// Untrusted text for a message: [`quote_max`] with [`QUOTE_CHARS`] characters.
pub(crate) fn quote(text: &str) -> String {
    quote_max(text, QUOTE_CHARS)
}

/// Untrusted text for a message, in double quotes: [`printable`], `"` as `\"`, at most `max`
/// characters (an ellipsis after the closing quote marks the cut).
pub(crate) fn quote_max(text: &str, max: usize) -> String {
    let mut out = String::with_capacity(text.len().min(max) + 2);
    out.push('"');
    for c in text.chars().take(max) {
        if c == '"' {
            out.push_str("\\\"");
        } else {
            push_escaped(&mut out, c);
        }
    }
    out.push('"');
    if text.chars().nth(max).is_some() {
        out.push('…');
    }
    out
}

/// JSON text (as `serde_json` writes it) with DEL, the C1 controls and the bidirectional
/// controls written as `\u` escapes too (`serde_json` escapes only C0): the same JSON value,
/// safe to print to a terminal. Such characters only occur inside strings, where the escape
/// means the same character.
pub(crate) fn json_printable(json: &str) -> String {
    if !json.chars().any(is_unsafe) {
        return json.to_owned();
    }
    let mut out = String::with_capacity(json.len() + 16);
    for c in json.chars() {
        // Line breaks and tabs between tokens are layout, not text.
        if is_unsafe(c) && !matches!(c, '\n' | '\t' | '\r') {
            out.push_str(&format!("\\u{:04x}", u32::from(c)));
        } else {
            out.push(c);
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn terminal_controls_are_shown_as_escapes() {
        for plain in [
            "web1",
            "0A1B2C",
            "certs/www/current does not open: tag",
            "ä € 漢",
        ] {
            assert_eq!(printable(plain), plain);
        }
        // Clear screen, recolour, set the window title (OSC ... BEL), a C1 CSI, a carriage
        // return that overwrites the line, DEL, NUL, the bidi overrides and isolates.
        assert_eq!(printable("\x1b[2J\x1b[31mweb1"), "\\x1b[2J\\x1b[31mweb1");
        assert_eq!(printable("\x1b]0;owned\x07"), "\\x1b]0;owned\\x07");
        assert_eq!(printable("a\u{9b}31mb"), "a\\x9b31mb");
        assert_eq!(printable("current\rLAGGING"), "current\\x0dLAGGING");
        assert_eq!(printable("x\x7fy\0z\n"), "x\\x7fy\\x00z\\x0a");
        assert_eq!(printable("web\u{202e}1bew"), "web\\u{202e}1bew");
        assert_eq!(printable("a\u{2066}b\u{2069}"), "a\\u{2066}b\\u{2069}");
        assert_eq!(printable("\\x1b"), "\\\\x1b");
        assert_eq!(printable_capped("abcdef", 3), "abc…");
        assert_eq!(printable_lines("a\x1b\nb\u{202e}"), "a\\x1b\nb\\u{202e}");
        assert_eq!(printable_lines("a\tb\n"), "a\tb\n");
        assert_eq!(printable_lines("a\tb\x07\r\n"), "a\tb\\x07\\x0d\n");
        assert_eq!(printable_lines("\"a\\x1b\"\nC:\\x"), "\"a\\x1b\"\nC:\\x");
        assert_eq!(shown("C:\\x\x07"), "C:\\\\x\\x07");
        // Nothing it returns is a control character.
        let all: String = (0u32..0x300).filter_map(char::from_u32).collect();
        assert!(!printable(&all).chars().any(char::is_control));
    }

    #[test]
    fn quoted_text_is_escaped_and_cut() {
        assert_eq!(quote_max("a\x1bb", 80), "\"a\\x1bb\"");
        assert_eq!(quote_max("say \"hi\"", 80), "\"say \\\"hi\\\"\"");
        assert_eq!(quote_max("abcdef", 3), "\"abc\"…");
        assert_eq!(quote_max("abc", 3), "\"abc\"");
    }

    #[test]
    fn json_stays_the_same_value_and_carries_no_control() {
        let v = serde_json::json!({ "m": "a\u{1b}[2J\u{9b}1m\u{7f}\u{202e}z", "n": 1 });
        let text = serde_json::to_string_pretty(&v).unwrap();
        let safe = json_printable(&text);
        assert!(!safe.chars().any(|c| is_unsafe(c) && c != '\n'), "{safe}");
        assert_eq!(serde_json::from_str::<serde_json::Value>(&safe).unwrap(), v);
        assert_eq!(json_printable("{\n  \"a\": 1\n}"), "{\n  \"a\": 1\n}");
    }
}
