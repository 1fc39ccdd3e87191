//! `[agent]`: the state directory, the schedule, orders and notifications.

use super::*;

impl Checker<'_> {
    pub(super) fn agent(&mut self, t: &DeTable<'_>, header: Range<usize>) -> Option<AgentConfig> {
        self.unknown_keys(t, "[agent]", &defs::names(defs::AGENT), "[agent]");
        let s = Scope {
            context: "[agent]".into(),
            header,
            tables: vec![(t, false)],
        };
        let state_dir = self
            .path(&s, "state_dir")
            .unwrap_or_else(|| PathBuf::from(DEFAULT_STATE_DIR));
        let renew_before_days = self.setting(&s, &defs::AGENT_RENEW_BEFORE_DAYS);
        let poll_interval_secs: u64 = self.setting(&s, &defs::AGENT_POLL_INTERVAL_SECS);
        if poll_interval_secs < defs::AGENT_POLL_INTERVAL_SECS.number_default()
            && let Some(f) = s.get("poll_interval_secs")
        {
            let line = self.line(&f.key_span);
            self.warnings.push(Problem {
                file: self.file.clone(),
                line,
                context: "[agent]".into(),
                message: format!(
                    "`poll_interval_secs` = {poll_interval_secs}: the API asks for at most one \
                     status call per certificate every 300 seconds"
                ),
            });
        }
        let allow_orders = self.flag(&s, &defs::AGENT_ALLOW_ORDERS);
        let max_order_price = match s.get("max_order_price") {
            None => None,
            Some(f) => {
                let text = match f.value.get_ref() {
                    DeValue::String(v) => Some(v.to_string()),
                    DeValue::Integer(_) => integer(f.value.get_ref()).map(|i| i.to_string()),
                    DeValue::Float(x) => Some(x.as_str().to_owned()),
                    _ => None,
                };
                match text.as_deref().map(Decimal::parse) {
                    Some(Ok(d)) if !d.as_str().starts_with('-') => Some(d),
                    Some(Ok(_)) => {
                        self.bad(&s, &f, "must not be negative");
                        None
                    }
                    _ => {
                        self.bad(&s, &f, "must be a decimal amount such as \"100.00\"");
                        None
                    }
                }
            }
        };
        let concurrency = self.setting(&s, &defs::AGENT_CONCURRENCY);
        let notify_command = self.command(&s, "notify_command");
        let metrics_file = self.path(&s, "metrics_file");
        let notify_url = self.text(&s, "notify_url");
        if let (Some(u), Some(f)) = (&notify_url, s.get("notify_url"))
            && !(u.starts_with("https://") || u.starts_with("http://"))
        {
            self.bad(&s, &f, format!("{u:?} must be an http:// or https:// URL"));
        }
        let notify_timeout_secs = self.setting(&s, &defs::AGENT_NOTIFY_TIMEOUT_SECS);
        let metrics_listen = match self.text(&s, "metrics_listen") {
            Some(v) => match v.parse::<SocketAddr>() {
                Ok(a) => Some(a),
                Err(_) => {
                    if let Some(f) = s.get("metrics_listen") {
                        self.bad(
                            &s,
                            &f,
                            format!("{v:?} is not an address:port such as \"127.0.0.1:9793\""),
                        );
                    }
                    None
                }
            },
            None => None,
        };
        let serve_user = match self.text(&s, "serve_user") {
            Some(u) if u.bytes().all(|b| b.is_ascii_graphic() && b != b':') => u,
            Some(_) => {
                if let Some(f) = s.get("serve_user") {
                    self.bad(&s, &f, "must be a user name (printable, no spaces or `:`)");
                }
                DEFAULT_SERVE_USER.to_owned()
            }
            None => DEFAULT_SERVE_USER.to_owned(),
        };
        let include = self.include(&s);
        Some(AgentConfig {
            include,
            state_dir,
            renew_before_days,
            poll_interval_secs,
            allow_orders,
            max_order_price,
            concurrency,
            notify_command,
            metrics_file,
            notify_url,
            notify_timeout_secs,
            metrics_listen,
            serve_user,
        })
    }

    /// `include`: patterns of fragment files (one string or an array of strings).
    fn include(&mut self, s: &Scope<'_, '_>) -> Vec<String> {
        let Some(f) = s.get("include") else {
            return Vec::new();
        };
        let items: Option<Vec<String>> = match f.value.get_ref() {
            DeValue::String(v) => Some(vec![v.to_string()]),
            DeValue::Array(items) => items
                .iter()
                .map(|i| i.get_ref().as_str().map(str::to_owned))
                .collect(),
            _ => None,
        };
        match items {
            Some(v) if v.iter().all(|p| !p.trim().is_empty()) => v,
            _ => {
                self.bad(
                    s,
                    &f,
                    "expected an array of file patterns such as [\"/etc/cert-agent/conf.d/*.toml\"]",
                );
                Vec::new()
            }
        }
    }
}
