//! The tokens of one file of an `nginx -T` dump: words (quotes removed, escapes as nginx
//! keeps them), `{`, `}` and `;`, each with its line; OpenResty's Lua blocks skipped whole.

use crate::discover::{At, DiscoverError};

#[derive(Debug, PartialEq)]
pub(super) enum Token {
    Word(String),
    Open,
    Close,
    End,
}

/// The tokens of one file, each with its line.
pub(super) fn tokens(text: &str, file: &str) -> Result<Vec<(Token, usize)>, DiscoverError> {
    let mut out = Vec::new();
    let bytes = text.as_bytes();
    let mut i = 0;
    let mut line = 1;
    let err = |line: usize, message: &str| DiscoverError::Parse {
        at: At {
            file: file.to_owned(),
            line,
        },
        message: message.to_owned(),
    };
    while i < bytes.len() {
        let c = bytes[i];
        match c {
            b'\n' => {
                line += 1;
                i += 1;
            }
            // Every other whitespace byte nginx skips (form feed, vertical tab too): a word
            // never starts with one, so each token below consumes at least one byte.
            c if c.is_ascii_whitespace() || c == 0x0b => i += 1,
            b'#' => {
                while i < bytes.len() && bytes[i] != b'\n' {
                    i += 1;
                }
            }
            b'{' => {
                out.push((Token::Open, line));
                i += 1;
            }
            b'}' => {
                out.push((Token::Close, line));
                i += 1;
            }
            b';' => {
                out.push((Token::End, line));
                i += 1;
            }
            b'"' | b'\'' => {
                let start_line = line;
                let mut word = Vec::new();
                i += 1;
                loop {
                    match bytes.get(i) {
                        None => return Err(err(start_line, "unterminated quoted string")),
                        Some(&q) if q == c => {
                            i += 1;
                            break;
                        }
                        Some(b'\\') if i + 1 < bytes.len() => {
                            if bytes[i + 1] == b'\n' {
                                line += 1;
                            }
                            word.extend_from_slice(&bytes[i..i + 2]);
                            i += 2;
                        }
                        Some(&b) => {
                            if b == b'\n' {
                                line += 1;
                            }
                            word.push(b);
                            i += 1;
                        }
                    }
                }
                out.push((Token::Word(unescape(&word)), start_line));
            }
            _ => {
                let start = i;
                while i < bytes.len() {
                    let b = bytes[i];
                    if b.is_ascii_whitespace() || matches!(b, b';' | b'{' | b'}') {
                        break;
                    }
                    // `${var}` keeps its braces.
                    if b == b'$' && bytes.get(i + 1) == Some(&b'{') {
                        while i < bytes.len() && bytes[i] != b'}' {
                            i += 1;
                        }
                    }
                    if b == b'\\' {
                        i += 1;
                    }
                    i += 1;
                }
                let end = i.min(bytes.len());
                let word = unescape(&bytes[start..end]);
                let raw = word.ends_with("_by_lua_block");
                out.push((Token::Word(word), line));
                // OpenResty's `*_by_lua_block { ... }` holds Lua, not directives: its block is
                // skipped whole (nginx reads it the same way).
                if raw {
                    let mut j = i;
                    while j < bytes.len() && bytes[j].is_ascii_whitespace() {
                        if bytes[j] == b'\n' {
                            line += 1;
                        }
                        j += 1;
                    }
                    if bytes.get(j) == Some(&b'{') {
                        let open_line = line;
                        let (after, lines) = skip_lua(bytes, j)
                            .ok_or_else(|| err(open_line, "the Lua block is not closed"))?;
                        out.push((Token::Open, open_line));
                        line += lines;
                        out.push((Token::Close, line));
                        i = after;
                    }
                }
            }
        }
    }
    Ok(out)
}

/// A word as nginx keeps it: `\"`, `\'` and `\\` lose their backslash, `\t`, `\r`, `\n` become
/// the control character, every other backslash stays (`\.` in a regular expression).
fn unescape(raw: &[u8]) -> String {
    if !raw.contains(&b'\\') {
        return String::from_utf8_lossy(raw).into_owned();
    }
    let mut out = Vec::with_capacity(raw.len());
    let mut i = 0;
    while let Some(&b) = raw.get(i) {
        if b == b'\\' {
            let unescaped = match raw.get(i + 1) {
                Some(&c @ (b'"' | b'\'' | b'\\')) => Some(c),
                Some(b't') => Some(b'\t'),
                Some(b'r') => Some(b'\r'),
                Some(b'n') => Some(b'\n'),
                _ => None,
            };
            if let Some(c) = unescaped {
                out.push(c);
                i += 2;
                continue;
            }
        }
        out.push(b);
        i += 1;
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// The end of the Lua block opening at `bytes[open]` (`{`): the index after its closing brace,
/// and the line breaks inside. Braces in Lua strings and comments do not count.
fn skip_lua(bytes: &[u8], open: usize) -> Option<(usize, usize)> {
    let mut depth = 0usize;
    let mut lines = 0;
    let mut i = open;
    while i < bytes.len() {
        match bytes[i] {
            b'\n' => lines += 1,
            b'{' => depth += 1,
            b'}' => {
                depth = depth.saturating_sub(1);
                if depth == 0 {
                    return Some((i + 1, lines));
                }
            }
            q @ (b'"' | b'\'') => {
                i += 1;
                while i < bytes.len() && bytes[i] != q && bytes[i] != b'\n' {
                    if bytes[i] == b'\\' && bytes.get(i + 1) != Some(&b'\n') {
                        i += 1;
                    }
                    i += 1;
                }
                // A line break that ended an unterminated string still counts.
                if bytes.get(i) == Some(&b'\n') {
                    lines += 1;
                }
            }
            b'[' if long_bracket(bytes, i).is_some() => {
                i = skip_long(bytes, i, &mut lines)?;
                continue;
            }
            b'-' if bytes.get(i + 1) == Some(&b'-') => {
                if long_bracket(bytes, i + 2).is_some() {
                    i = skip_long(bytes, i + 2, &mut lines)?;
                    continue;
                }
                while i < bytes.len() && bytes[i] != b'\n' {
                    i += 1;
                }
                continue;
            }
            _ => {}
        }
        i += 1;
    }
    None
}

/// The level of a Lua long bracket opening at `bytes[i]` (`[[` is 0, `[=[` is 1, …).
fn long_bracket(bytes: &[u8], i: usize) -> Option<usize> {
    if bytes.get(i) != Some(&b'[') {
        return None;
    }
    let level = bytes[i + 1..].iter().take_while(|&&b| b == b'=').count();
    (bytes.get(i + 1 + level) == Some(&b'[')).then_some(level)
}

/// The index after the long string or comment opening at `bytes[open]`, its line breaks
/// added to `lines`; `None` when it is not closed.
fn skip_long(bytes: &[u8], open: usize, lines: &mut usize) -> Option<usize> {
    let level = long_bracket(bytes, open)?;
    let mut i = open + level + 2;
    while i < bytes.len() {
        match bytes[i] {
            b'\n' => *lines += 1,
            b']' if bytes[i + 1..].iter().take(level).all(|&b| b == b'=')
                && bytes.get(i + 1 + level) == Some(&b']') =>
            {
                return Some(i + level + 2);
            }
            _ => {}
        }
        i += 1;
    }
    None
}
