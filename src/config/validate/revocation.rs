//! `[revocation]`: whether the CRLs of the installed certificates are read, and the limits
//! of a download.

use super::*;

impl Checker<'_> {
    pub(super) fn revocation(
        &mut self,
        t: &DeTable<'_>,
        header: Range<usize>,
    ) -> Option<RevocationConfig> {
        self.unknown_keys(
            t,
            "[revocation]",
            &defs::names(defs::REVOCATION),
            "[revocation]",
        );
        let s = Scope {
            context: "[revocation]".into(),
            header,
            tables: vec![(t, false)],
        };
        Some(RevocationConfig {
            check: self.flag(&s, &defs::REVOCATION_CHECK),
            max_crl_bytes: self.setting(&s, &defs::REVOCATION_MAX_CRL_BYTES),
            timeout_secs: self.setting(&s, &defs::REVOCATION_TIMEOUT_SECS),
            refresh_secs: self.setting(&s, &defs::REVOCATION_REFRESH_SECS),
        })
    }
}
