//! The completeness of a certificate's domain control validation: what each method needs
//! (a web root or the standalone server for HTTP, a hook for DNS, an address for email).

use super::*;

impl Checker<'_> {
    /// How domain control is carried out must be complete for the method: a web root or the
    /// standalone server (and no wildcard) for HTTP(S), a hook for DNS, an address for email.
    pub(super) fn dcv_complete(
        &mut self,
        s: &Scope<'_, '_>,
        spec: &DcvSpec,
        domains: Option<&[String]>,
    ) {
        let DcvSpec {
            method: dcv,
            webroot,
            standalone,
            dns_hook,
            email: dcv_email,
            ..
        } = spec;
        let (dcv, standalone) = (*dcv, *standalone);
        let dcv_field = s.get("dcv");
        let dcv_line = dcv_field.as_ref().map_or_else(
            || self.line(&s.header),
            |f| self.field_line(&f.key_span, f.from_defaults),
        );
        let dcv_name = serde_plain(dcv);
        if dcv.is_http() {
            match (&webroot, standalone) {
                (Some(_), true) => {
                    if let Some(f) = s.get("standalone") {
                        self.bad(
                            s,
                            &f,
                            "set either `webroot` or `standalone = true`, not both",
                        );
                    }
                }
                (None, false) if s.get("webroot").is_none() => self.report_at(
                    dcv_line,
                    &s.context,
                    format!("`dcv` = {dcv_name:?} needs `webroot` or `standalone = true`"),
                ),
                _ => {}
            }
            // dcv_type rules: HTTP_CSR_HASH / HTTPS_CSR_HASH are "not for wildcard names".
            if let Some(d) = domains
                .as_ref()
                .and_then(|d| d.iter().find(|d| d.starts_with("*.")))
            {
                self.report_at(
                    dcv_line,
                    &s.context,
                    format!(
                        "`dcv` = {dcv_name:?} cannot validate the wildcard {d:?}; use \"dns-txt\", \
                         \"cname\" or \"email\""
                    ),
                );
            }
            if let (Some(Webroot::PerDomain(map)), Some(domains), Some(f)) =
                (&webroot, &domains, s.get("webroot"))
            {
                for d in domains.iter().filter(|d| !map.contains_key(*d)) {
                    self.bad(s, &f, format!("has no entry for the domain {d:?}"));
                }
                for d in map.keys().filter(|k| !domains.contains(k)) {
                    self.bad(
                        s,
                        &f,
                        format!("{d:?} is not one of the certificate's domains"),
                    );
                }
            }
        }
        if dcv.is_dns() && dns_hook.is_none() && s.get("dns_hook").is_none() {
            self.report_at(
                dcv_line,
                &s.context,
                format!(
                    "`dcv` = {dcv_name:?} needs `dns_hook` (the program that sets DNS records)"
                ),
            );
        }
        if dcv == DcvMethod::Email && dcv_email.is_none() && s.get("dcv_email").is_none() {
            self.report_at(
                dcv_line,
                &s.context,
                "`dcv` = \"email\" needs `dcv_email` (an address from `cert-agent dcv emails`)",
            );
        }
    }
}
