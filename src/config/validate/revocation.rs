//! `[revocation]`: whether the CRLs of the installed certificates are read, and the limits
//! of a download.

use super::*;

/// Smallest `max_crl_bytes`: below it no real CA's CRL fits.
const MIN_CRL_BYTES: i128 = 1024;
/// Largest `max_crl_bytes` (1 GiB): a CRL is held in memory while it is checked.
const MAX_CRL_BYTES: i128 = 1 << 30;

impl Checker<'_> {
    pub(super) fn revocation(
        &mut self,
        t: &DeTable<'_>,
        header: Range<usize>,
    ) -> Option<RevocationConfig> {
        self.unknown_keys(t, "[revocation]", REVOCATION_KEYS, "[revocation]");
        let s = Scope {
            context: "[revocation]".into(),
            header,
            tables: vec![(t, false)],
        };
        let defaults = RevocationConfig::default();
        Some(RevocationConfig {
            check: self.boolean(&s, "check").unwrap_or(defaults.check),
            max_crl_bytes: self
                .uint(&s, "max_crl_bytes", MIN_CRL_BYTES, MAX_CRL_BYTES)
                .unwrap_or(defaults.max_crl_bytes),
            timeout_secs: self
                .uint(&s, "timeout_secs", 1, 600)
                .unwrap_or(defaults.timeout_secs),
            refresh_secs: self
                .uint(&s, "refresh_secs", 60, 7 * 86_400)
                .unwrap_or(defaults.refresh_secs),
        })
    }
}
