//! `[validation]`: how long a domain validation may be reused, and how early `check` warns of
//! a renewal that needs a person to validate.

use super::*;

impl Checker<'_> {
    pub(super) fn validation(
        &mut self,
        t: &DeTable<'_>,
        header: Range<usize>,
    ) -> Option<ValidationConfig> {
        self.unknown_keys(
            t,
            "[validation]",
            &defs::names(defs::VALIDATION),
            "[validation]",
        );
        let s = Scope {
            context: "[validation]".into(),
            header,
            tables: vec![(t, false)],
        };
        let reuse_days = self.number(&s, &defs::VALIDATION_REUSE_DAYS);
        let warning_days = self.setting(&s, &defs::VALIDATION_WARNING_DAYS);
        Some(ValidationConfig {
            reuse_days,
            warning_days,
        })
    }
}
