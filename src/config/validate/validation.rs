//! `[validation]`: how long a domain validation may be reused, and how early `check` warns of
//! a renewal that needs a person to validate.

use super::*;

impl Checker<'_> {
    pub(super) fn validation(
        &mut self,
        t: &DeTable<'_>,
        header: Range<usize>,
    ) -> Option<ValidationConfig> {
        self.unknown_keys(t, "[validation]", VALIDATION_KEYS, "[validation]");
        let s = Scope {
            context: "[validation]".into(),
            header,
            tables: vec![(t, false)],
        };
        let reuse_days = self.uint(&s, "reuse_days", 1, 398);
        let warning_days = self
            .uint(&s, "warning_days", 1, 365)
            .unwrap_or(DEFAULT_VALIDATION_WARNING_DAYS);
        Some(ValidationConfig {
            reuse_days,
            warning_days,
        })
    }
}
