//! `[api]`: the endpoint, the credentials and the client's limits.

use super::*;

impl Checker<'_> {
    pub(super) fn api(&mut self, t: &DeTable<'_>, header: Range<usize>) -> Option<ApiConfig> {
        self.unknown_keys(t, "[api]", &defs::names(defs::API), "[api]");
        let s = Scope {
            context: "[api]".into(),
            header,
            tables: vec![(t, false)],
        };
        let base_url = match self.text(&s, "base_url") {
            Some(url) => match normalize_base_url(&url) {
                Ok(u) => Some(u),
                Err(m) => {
                    let f = s.get("base_url")?;
                    self.bad(&s, &f, format!("{url:?} {m}"));
                    None
                }
            },
            None => {
                if s.get("base_url").is_none() {
                    self.missing(&s, "base_url");
                }
                None
            }
        };
        let login = self.text(&s, "login");
        if s.get("login").is_none() {
            self.missing(&s, "login");
        }
        let password_file = self.path(&s, "password_file");
        let password = self.string(&s, "password").map(Secret::new);
        if let (Some(f), Some(_)) = (s.get("password"), s.get("password_file")) {
            self.bad(&s, &f, "set either `password_file` or `password`, not both");
        } else if let Some(f) = s.get("password") {
            let line = self.line(&f.key_span);
            self.warnings.push(Problem {
                file: self.file.clone(),
                line,
                context: "[api]".into(),
                message: "`password` in the configuration file is accepted but discouraged; \
                          use `password_file` (mode 0600) or the systemd credential \
                          cert-agent-password"
                    .into(),
            });
            if password.as_ref().is_some_and(Secret::is_empty) {
                self.bad(&s, &f, "must not be empty");
            }
        }
        let ca_file = self.path(&s, "ca_file");
        let order_site_url = self.string(&s, "order_site_url");
        if let (Some(u), Some(f)) = (&order_site_url, s.get("order_site_url"))
            && let Err(e) = normalize_base_url(u)
        {
            self.bad(&s, &f, e);
        }
        let order_site_url = order_site_url.map(|u| u.trim_end_matches('/').to_owned());
        let connect_timeout_secs = self.setting(&s, &defs::API_CONNECT_TIMEOUT_SECS);
        let timeout_secs = self.setting(&s, &defs::API_TIMEOUT_SECS);
        let retries = self.setting(&s, &defs::API_RETRIES);
        Some(ApiConfig {
            base_url: base_url?,
            login: login?,
            password_file,
            password,
            ca_file,
            order_site_url,
            connect_timeout_secs,
            timeout_secs,
            retries,
        })
    }
}
