//! `[acme.NAME]`: the ACME CAs (directory, account contact, External Account Binding,
//! profile, trust anchor), and what a certificate of one needs (`issuer`, `profile`, a
//! validation an ACME CA offers).

use super::*;

/// A profile name as directories advertise them (`classic`, `shortlived`, `tlsserver`).
fn valid_profile(p: &str) -> bool {
    !p.is_empty()
        && p.len() <= 64
        && p.bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.'))
}

impl Checker<'_> {
    /// Every `[acme.NAME]` table of `t` (the value of the top-level `acme` key).
    pub(super) fn acme_cas(&mut self, t: &DeTable<'_>) -> BTreeMap<String, AcmeCa> {
        let mut out = BTreeMap::new();
        for (k, v) in t.iter() {
            let name: &str = k.get_ref();
            let context = format!("[acme.{name}]");
            if let Err(m) = validate_certificate_name(name) {
                self.report(&k.span(), &context, format!("the name of an ACME CA: {m}"));
                continue;
            }
            if name == "partner" {
                self.report(
                    &k.span(),
                    &context,
                    "\"partner\" names the Partner API (`issuer = \"partner\"`); choose another \
                     name for the ACME CA",
                );
                continue;
            }
            match v.get_ref() {
                DeValue::Table(table) => {
                    if let Some(ca) = self.acme_ca(name, table, v.span()) {
                        out.insert(name.to_owned(), ca);
                    }
                }
                other => {
                    let msg = format!(
                        "`acme.{name}` must be a table ([acme.{name}]), found {}",
                        type_name(other)
                    );
                    self.report(&k.span(), &context, msg);
                }
            }
        }
        out
    }

    fn acme_ca(&mut self, name: &str, t: &DeTable<'_>, header: Range<usize>) -> Option<AcmeCa> {
        let context = format!("[acme.{name}]");
        self.unknown_keys(t, &context, &defs::names(defs::ACME), "[acme.NAME]");
        let s = Scope {
            context,
            header,
            tables: vec![(t, false)],
        };
        let directory = self.text(&s, "directory");
        if s.get("directory").is_none() {
            self.missing(&s, "directory");
        }
        if let (Some(d), Some(f)) = (&directory, s.get("directory"))
            && !crate::issuer::acme::http::allowed_url(d)
        {
            self.bad(
                &s,
                &f,
                format!(
                    "{d:?} is not an https:// URL (http:// only to a loopback address), such as \
                     \"https://acme-v02.api.letsencrypt.org/directory\""
                ),
            );
        }
        let contact = self.contacts(&s);
        let eab_kid = self.text(&s, "eab_kid");
        let eab_hmac_file = self.path(&s, "eab_hmac_file");
        match (s.get("eab_kid"), s.get("eab_hmac_file")) {
            (Some(f), None) => self.bad(&s, &f, "needs `eab_hmac_file` (the CA's HMAC key)"),
            (None, Some(f)) => self.bad(&s, &f, "needs `eab_kid` (the CA's key id)"),
            _ => {}
        }
        let profile = self.profile(&s);
        let preferred_chain = self.preferred_chain(&s);
        let ca_file = self.path(&s, "ca_file");
        Some(AcmeCa {
            name: name.to_owned(),
            directory: directory?,
            contact,
            eab_kid,
            eab_hmac_file,
            profile,
            preferred_chain,
            ca_file,
        })
    }

    /// `contact`: one address or a list; each `mailto:` URL or a bare address (made one).
    fn contacts(&mut self, s: &Scope<'_, '_>) -> Vec<String> {
        let Some(f) = s.get("contact") else {
            return Vec::new();
        };
        let items: Vec<String> = match f.value.get_ref() {
            DeValue::String(v) => vec![v.to_string()],
            DeValue::Array(a) => {
                let strings: Option<Vec<String>> = a
                    .iter()
                    .map(|i| i.get_ref().as_str().map(str::to_owned))
                    .collect();
                match strings {
                    Some(v) => v,
                    None => {
                        self.bad(s, &f, "expected a list of e-mail addresses");
                        return Vec::new();
                    }
                }
            }
            other => {
                let found = type_name(other);
                self.bad(
                    s,
                    &f,
                    format!("expected an e-mail address or a list of them, found {found}"),
                );
                return Vec::new();
            }
        };
        let mut out = Vec::new();
        for item in items {
            let address = item.strip_prefix("mailto:").unwrap_or(&item);
            match validate_email(address) {
                Ok(()) => out.push(format!("mailto:{address}")),
                Err(m) => self.bad(s, &f, m),
            }
        }
        out
    }

    /// `profile`, checked for its shape (whether the directory offers it is checked when the
    /// directory is read).
    pub(super) fn profile(&mut self, s: &Scope<'_, '_>) -> Option<String> {
        let p = self.text(s, "profile")?;
        if !valid_profile(&p) {
            let f = s.get("profile")?;
            self.bad(
                s,
                &f,
                format!("{p:?} is not a profile name (letters, digits, '-', '_', '.')"),
            );
            return None;
        }
        Some(p)
    }

    /// `preferred_chain`: a Common Name as certificates carry it (printable, no control
    /// character, at most 64 characters as X.520 allows).
    fn preferred_chain(&mut self, s: &Scope<'_, '_>) -> Option<String> {
        let p = self.text(s, "preferred_chain")?;
        let trimmed = p.trim();
        if trimmed.is_empty()
            || trimmed.chars().count() > 64
            || trimmed.chars().any(char::is_control)
        {
            let f = s.get("preferred_chain")?;
            self.bad(
                s,
                &f,
                format!(
                    "{p:?} is not a CA's Common Name (1 to 64 printable characters), such as \
                     \"ISRG Root X1\""
                ),
            );
            return None;
        }
        Some(trimmed.to_owned())
    }

    /// A certificate's `issuer`: `partner` (the default) or the NAME of an `[acme.NAME]`.
    pub(super) fn issuer(&mut self, s: &Scope<'_, '_>) -> Option<Issuer> {
        let Some(v) = self.text(s, "issuer") else {
            return Some(Issuer::Partner);
        };
        if v == "partner" {
            return Some(Issuer::Partner);
        }
        let name = v.strip_prefix("acme:").unwrap_or(&v);
        if self.acme_names.iter().any(|n| n == name) {
            return Some(Issuer::Acme(name.to_owned()));
        }
        let f = s.get("issuer")?;
        let mut known = vec!["partner"];
        known.extend(self.acme_names.iter().map(String::as_str));
        let hint = suggest(name, &known)
            .map(|n| format!(" (did you mean {n:?}?)"))
            .unwrap_or_default();
        self.bad(
            s,
            &f,
            format!(
                "{v:?} is neither \"partner\" nor the name of an [acme.NAME] table (known: {}){hint}",
                known.join(", ")
            ),
        );
        None
    }

    /// What a certificate of an ACME CA needs: a validation an ACME CA offers (`http` as
    /// `http-01`, `dns-txt` as `dns-01`), and no Partner-only key.
    pub(super) fn acme_certificate(&mut self, s: &Scope<'_, '_>, ca: &str, dcv: &DcvSpec) {
        if !matches!(dcv.method, DcvMethod::Http | DcvMethod::DnsTxt) {
            let span = s.get("dcv").map_or(s.header.clone(), |f| f.key_span);
            self.report(
                &span,
                &s.context,
                format!(
                    "`dcv` = {:?}: the ACME CA {ca:?} validates by \"http\" (http-01) or \
                     \"dns-txt\" (dns-01 through `dns_hook`)",
                    serde_plain(dcv.method)
                ),
            );
        }
        for key in [
            "certificate_id",
            "family",
            "unique_value",
            "cname_target_domain",
        ] {
            if let Some(f) = s.get(key).filter(|f| !f.from_defaults) {
                self.bad(
                    s,
                    &f,
                    format!("is a Partner API key; the certificate's issuer is the ACME CA {ca:?}"),
                );
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::valid_profile;

    #[test]
    fn profile_names() {
        for ok in ["classic", "shortlived", "tls-server", "a.b_c"] {
            assert!(valid_profile(ok), "{ok}");
        }
        for bad in ["", "a b", "x/y", "ü", &"p".repeat(65)] {
            assert!(!valid_profile(bad), "{bad:?}");
        }
    }
}
