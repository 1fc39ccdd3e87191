//! nginx's regular expressions (PCRE) evaluated against the CA's request with the `regex`
//! crate, each pattern once per dump; what it cannot compile is said, not taken as a mismatch.

use std::collections::HashMap;

use super::PROBE;

/// Whether nginx's regular expressions match [`PROBE`] (or another part of the CA's request),
/// each pattern evaluated once per dump.
#[derive(Default)]
pub(super) struct Regexes {
    seen: HashMap<(String, bool, &'static str), Result<bool, String>>,
}

impl Regexes {
    /// Whether `pattern` (`caseless`: `~*`) matches [`PROBE`], or why it cannot be told: nginx
    /// uses PCRE, and what the `regex` crate cannot compile (lookaround, backreferences,
    /// possessive quantifiers) is not taken as a mismatch.
    pub(super) fn matches(&mut self, pattern: &str, caseless: bool) -> Result<bool, String> {
        self.matches_text(pattern, caseless, PROBE)
    }

    /// [`Self::matches`] for `text`.
    pub(super) fn matches_text(
        &mut self,
        pattern: &str,
        caseless: bool,
        text: &'static str,
    ) -> Result<bool, String> {
        let key = (pattern.to_owned(), caseless, text);
        if let Some(known) = self.seen.get(&key) {
            return known.clone();
        }
        // Bytes, not Unicode: PCRE as nginx compiles it (`\d`, `\w`, case folding in ASCII).
        let result = regex::bytes::RegexBuilder::new(pattern)
            .case_insensitive(caseless)
            .unicode(false)
            .size_limit(1 << 20)
            .build()
            .map(|re| re.is_match(text.as_bytes()))
            .map_err(|e| {
                let text = e.to_string();
                let last = text.lines().rev().find(|l| !l.trim().is_empty());
                let why = last.unwrap_or(&text).trim();
                why.strip_prefix("error: ").unwrap_or(why).to_owned()
            });
        self.seen.insert(key, result.clone());
        result
    }
}
