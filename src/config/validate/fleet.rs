//! `[fleet]`: the etcd cluster of the hosts sharing the certificates, and this host's name.

use super::*;
use crate::config::{Canaries, RolloutConfig, WaveSize, valid_host_name};

impl Checker<'_> {
    pub(super) fn fleet(&mut self, t: &DeTable<'_>, header: Range<usize>) -> Option<FleetConfig> {
        self.unknown_keys(t, "[fleet]", &defs::names(defs::FLEET), "[fleet]");
        let s = Scope {
            context: "[fleet]".into(),
            header,
            tables: vec![(t, false)],
        };
        let insecure_plaintext = self.flag(&s, &defs::FLEET_INSECURE_PLAINTEXT);
        let endpoints = self.endpoints(&s, insecure_plaintext);
        let ca_file = self.path(&s, "ca_file");
        let cert_file = self.path(&s, "cert_file");
        let key_file = self.path(&s, "key_file");
        for (set, other) in [("cert_file", "key_file"), ("key_file", "cert_file")] {
            if let (Some(f), None) = (s.get(set), s.get(other)) {
                self.bad(
                    &s,
                    &f,
                    format!("needs `{other}` too (a client certificate and its key)"),
                );
            }
        }
        let user = self.text(&s, "user");
        let password_file = self.path(&s, "password_file");
        for (set, other) in [("user", "password_file"), ("password_file", "user")] {
            if let (Some(f), None) = (s.get(set), s.get(other)) {
                self.bad(&s, &f, format!("needs `{other}` too (etcd authentication)"));
            }
        }
        let auth: Vec<String> = ["user", "password_file"]
            .into_iter()
            .filter(|k| s.get(k).is_some())
            .map(|k| format!("`{k}`"))
            .collect();
        if insecure_plaintext
            && !auth.is_empty()
            && let Some(f) = s.get("insecure_plaintext")
        {
            self.bad(
                &s,
                &f,
                format!(
                    "cannot go with {}: the etcd password would travel in clear; use \
                     https:// endpoints (with `ca_file`) for etcd authentication",
                    auth.join(" and ")
                ),
            );
        }
        let prefix = match self.text(&s, "prefix") {
            Some(p) if p.starts_with('/') && p.ends_with('/') && !p.contains("//") => p,
            Some(p) => {
                if let Some(f) = s.get("prefix") {
                    self.bad(
                        &s,
                        &f,
                        format!("{p:?} must start and end with `/`, such as \"/cert-agent/\""),
                    );
                }
                DEFAULT_FLEET_PREFIX.to_owned()
            }
            None => DEFAULT_FLEET_PREFIX.to_owned(),
        };
        let host = match self.text(&s, "host") {
            Some(h) if valid_host_name(&h) => h,
            Some(h) => {
                if let Some(f) = s.get("host") {
                    self.bad(
                        &s,
                        &f,
                        format!("{h:?} must be a host name: letters, digits, `.`, `-`, `_`"),
                    );
                }
                String::new()
            }
            None => {
                let h = std::fs::read_to_string("/proc/sys/kernel/hostname")
                    .map(|h| h.trim().to_owned())
                    .unwrap_or_default();
                if !valid_host_name(&h) {
                    self.report(
                        &s.header,
                        "[fleet]",
                        format!(
                            "the host name {h:?} cannot name this host in the fleet; set `host`"
                        ),
                    );
                }
                h
            }
        };
        let secret_file = self.path(&s, "secret_file");
        let previous_secret_file = self.path(&s, "previous_secret_file");
        let health_command = self.command(&s, "health_command");
        let rollout = self.rollout(&s);
        Some(FleetConfig {
            endpoints: endpoints?,
            ca_file,
            cert_file,
            key_file,
            user,
            password_file,
            insecure_plaintext,
            prefix,
            host,
            secret_file,
            previous_secret_file,
            lease_ttl_secs: self.setting(&s, &defs::FLEET_LEASE_TTL_SECS),
            lag_alert_secs: self.setting(&s, &defs::FLEET_LAG_ALERT_SECS),
            proof_interval_secs: self.setting(&s, &defs::FLEET_PROOF_INTERVAL_SECS),
            lead_alert_secs: self.setting(&s, &defs::FLEET_LEAD_ALERT_SECS),
            health_command,
            rollout,
        })
    }

    /// `rollout_canaries` (host names, or a count), `rollout_wave` (a count, or a fraction),
    /// `rollout_pause_secs`, `rollout_deadline_fraction`; none without `rollout_canaries`.
    fn rollout(&mut self, s: &Scope<'_, '_>) -> Option<RolloutConfig> {
        let Some(f) = s.get("rollout_canaries") else {
            for key in [
                "rollout_wave",
                "rollout_pause_secs",
                "rollout_deadline_fraction",
            ] {
                if let Some(f) = s.get(key) {
                    self.bad(
                        s,
                        &f,
                        "needs `rollout_canaries` (without it every host installs at once)",
                    );
                }
            }
            return None;
        };
        let canaries = match f.value.get_ref() {
            DeValue::Array(items) => {
                let names: Option<Vec<String>> = items
                    .iter()
                    .map(|i| {
                        i.get_ref()
                            .as_str()
                            .filter(|n| valid_host_name(n))
                            .map(str::to_owned)
                    })
                    .collect();
                match names {
                    Some(n) if !n.is_empty() => Some(Canaries::Named(n)),
                    _ => None,
                }
            }
            v => integer(v)
                .filter(|n| (1..=100_000).contains(n))
                .and_then(|n| usize::try_from(n).ok())
                .map(Canaries::Count),
        };
        if canaries.is_none() {
            self.bad(
                s,
                &f,
                "expected host names as [fleet] host names them, such as [\"web1\", \"web2\"], \
                 or a count of hosts from 1 to 100000",
            );
        }
        let wave = match s.get("rollout_wave") {
            None => Some(WaveSize::Fraction(1.0)),
            Some(f) => {
                let v = f.value.get_ref();
                let size = match v {
                    DeValue::Float(x) => x
                        .as_str()
                        .parse::<f64>()
                        .ok()
                        .filter(|x| *x > 0.0 && *x <= 1.0)
                        .map(WaveSize::Fraction),
                    v => integer(v)
                        .filter(|n| (1..=100_000).contains(n))
                        .and_then(|n| usize::try_from(n).ok())
                        .map(WaveSize::Count),
                };
                if size.is_none() {
                    self.bad(
                        s,
                        &f,
                        "expected a count of hosts from 1 to 100000, or a fraction of the hosts \
                         after the canaries above 0 and at most 1 (such as 0.25)",
                    );
                }
                size
            }
        };
        let pause_secs = self.setting(s, &defs::FLEET_ROLLOUT_PAUSE_SECS);
        let deadline_fraction = self.fraction(s, &defs::FLEET_ROLLOUT_DEADLINE_FRACTION)?;
        Some(RolloutConfig {
            canaries: canaries?,
            wave: wave?,
            pause_secs,
            deadline_fraction,
        })
    }

    /// `endpoints`: a non-empty array of `https://` URLs, or `http://` ones with
    /// `insecure_plaintext`.
    fn endpoints(&mut self, s: &Scope<'_, '_>, plaintext: bool) -> Option<Vec<String>> {
        let Some(f) = s.get("endpoints") else {
            self.missing(s, "endpoints");
            return None;
        };
        let items = match f.value.get_ref() {
            DeValue::Array(items) if !items.is_empty() => items,
            DeValue::Array(_) => {
                self.bad(s, &f, "must list at least one etcd member");
                return None;
            }
            other => {
                let found = type_name(other);
                self.bad(
                    s,
                    &f,
                    format!("expected an array of URLs such as [\"https://10.0.0.1:2379\"], found {found}"),
                );
                return None;
            }
        };
        let mut out = Vec::new();
        for item in items.iter() {
            match item.get_ref().as_str() {
                Some(u) if u.starts_with("http://") && !plaintext => {
                    self.bad(
                        s,
                        &f,
                        format!(
                            "{u:?} is plain http: etcd traffic would travel in clear; use \
                             https:// (with `ca_file`), or set `insecure_plaintext = true` in \
                             [fleet] on a trusted network"
                        ),
                    );
                    return None;
                }
                Some(u)
                    if (u.starts_with("https://") || u.starts_with("http://"))
                        && u.len() > "https://".len() =>
                {
                    out.push(u.trim_end_matches('/').to_owned());
                }
                Some(u) => {
                    self.bad(s, &f, format!("{u:?} is not an http:// or https:// URL"));
                    return None;
                }
                None => {
                    self.bad(
                        s,
                        &f,
                        format!("expected strings, found {}", type_name(item.get_ref())),
                    );
                    return None;
                }
            }
        }
        Some(out)
    }
}
