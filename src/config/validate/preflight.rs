//! `[preflight]`: the DNS checks made before a billed order (CAA, DNSSEC), the resolver
//! asked, its time limit, and the CAA identities of a CA by its issuer value.

use super::*;

impl Checker<'_> {
    pub(super) fn preflight(
        &mut self,
        t: &DeTable<'_>,
        header: Range<usize>,
    ) -> Option<PreflightConfig> {
        self.unknown_keys(
            t,
            "[preflight]",
            &defs::names(defs::PREFLIGHT),
            "[preflight]",
        );
        let s = Scope {
            context: "[preflight]".into(),
            header,
            tables: vec![(t, false)],
        };
        let resolver = match s.get("resolver") {
            None => None,
            Some(f) => {
                let v = self.string(&s, "resolver")?;
                match v.parse::<SocketAddr>() {
                    Ok(a) => Some(a),
                    Err(_) => {
                        self.bad(
                            &s,
                            &f,
                            format!("{v:?} is not an IP address and port (e.g. \"127.0.0.1:53\")"),
                        );
                        return None;
                    }
                }
            }
        };
        Some(PreflightConfig {
            caa: self.flag(&s, &defs::PREFLIGHT_CAA),
            dnssec: self.flag(&s, &defs::PREFLIGHT_DNSSEC),
            http: self.flag(&s, &defs::PREFLIGHT_HTTP),
            email: self.flag(&s, &defs::PREFLIGHT_EMAIL),
            resolver,
            timeout_secs: self.setting(&s, &defs::PREFLIGHT_TIMEOUT_SECS),
            caa_identities: self.caa_identities(&s)?,
        })
    }

    /// `caa_identities`: a table issuer value → array of CAA issuer domain names.
    fn caa_identities(&mut self, s: &Scope<'_, '_>) -> Option<BTreeMap<String, Vec<String>>> {
        let mut out = BTreeMap::new();
        let Some(f) = s.get("caa_identities") else {
            return Some(out);
        };
        let DeValue::Table(t) = f.value.get_ref() else {
            let found = type_name(f.value.get_ref());
            self.bad(
                s,
                &f,
                format!("expected a table of issuer = [\"ca.example\"], found {found}"),
            );
            return None;
        };
        let mut ok = true;
        for (k, v) in t.iter() {
            let issuer = k.get_ref().to_ascii_lowercase();
            let at = Field {
                key: f.key,
                key_span: k.span(),
                value: v,
                from_defaults: false,
            };
            let ids: Option<Vec<String>> = match v.get_ref() {
                DeValue::Array(items) if !items.is_empty() => items
                    .iter()
                    .map(|i| {
                        i.get_ref()
                            .as_str()
                            .map(str::to_ascii_lowercase)
                            .filter(|d| validate_domain(d).is_ok() && !d.starts_with("*."))
                    })
                    .collect(),
                _ => None,
            };
            match ids {
                Some(ids) => {
                    out.insert(issuer, ids);
                }
                None => {
                    self.bad(
                        s,
                        &at,
                        format!(
                            "{issuer:?}: expected a non-empty array of CAA issuer domain names \
                             (e.g. [\"letsencrypt.org\"])"
                        ),
                    );
                    ok = false;
                }
            }
        }
        ok.then_some(out)
    }
}
