//! certbot's renewal configuration (`renewal/NAME.conf`), the ConfigObj format certbot writes:
//! `key = value` lines at the top (the lineage's files), a `[renewalparams]` section (the CA,
//! the account, the authenticator and installer, the key) and its `[[webroot_map]]`
//! subsection (a web root per name). Read as untrusted text: every error names its line,
//! unknown keys are ignored, a key given twice is refused.

/// A value and the line it was read from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct At<T> {
    pub value: T,
    pub line: usize,
}

/// What cert-agent uses of a renewal configuration.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct RenewalConf {
    pub archive_dir: Option<At<String>>,
    pub cert: Option<At<String>>,
    pub privkey: Option<At<String>>,
    pub chain: Option<At<String>>,
    pub fullchain: Option<At<String>>,
    /// The ACME directory URL.
    pub server: Option<At<String>>,
    /// The account id (the directory name under `accounts/`).
    pub account: Option<At<String>>,
    pub authenticator: Option<At<String>>,
    pub installer: Option<At<String>>,
    /// `webroot_path`: the web roots given with `-w`, in order.
    pub webroot_path: Vec<At<String>>,
    /// `[[webroot_map]]`: the web root of each name.
    pub webroot_map: Vec<(At<String>, At<String>)>,
    pub key_type: Option<At<String>>,
    pub rsa_key_size: Option<At<String>>,
    pub elliptic_curve: Option<At<String>>,
    pub preferred_chain: Option<At<String>>,
}

/// A line of a renewal configuration that cannot be read.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("line {line}: {message}")]
pub struct ConfError {
    pub line: usize,
    pub message: String,
}

/// The largest renewal configuration read (certbot writes about 1 KiB).
pub(crate) const MAX_CONF_BYTES: usize = 64 * 1024;

#[derive(Clone, Copy, PartialEq, Eq)]
enum Section {
    Top,
    Params,
    WebrootMap,
    Other,
}

impl RenewalConf {
    /// Parses the text of a renewal configuration.
    pub fn parse(text: &str) -> Result<Self, ConfError> {
        if text.len() > MAX_CONF_BYTES {
            return Err(ConfError {
                line: 1,
                message: format!("larger than {MAX_CONF_BYTES} bytes"),
            });
        }
        let mut conf = Self::default();
        let mut section = Section::Top;
        let mut seen: std::collections::BTreeSet<(u8, String)> = Default::default();
        for (i, raw) in text.lines().enumerate() {
            let line = i + 1;
            let err = |message: String| ConfError { line, message };
            let trimmed = raw.trim();
            if trimmed.is_empty() || trimmed.starts_with('#') {
                continue;
            }
            if trimmed.starts_with('[') {
                section = section_of(trimmed, section).map_err(err)?;
                continue;
            }
            let Some((key, value)) = trimmed.split_once('=') else {
                return Err(err(format!(
                    "expected `key = value` or a [section], found {}",
                    crate::values::text::quote_max(trimmed, 60)
                )));
            };
            let key = key.trim();
            if key.is_empty() || key.chars().any(|c| c.is_control()) {
                return Err(err("a key is empty or holds control characters".into()));
            }
            let value = unquote(strip_comment(value.trim())).map_err(err)?;
            let tag = section as u8;
            if !seen.insert((tag, key.to_owned())) {
                return Err(err(format!(
                    "`{}` is given twice",
                    crate::values::text::quote_max(key, 60)
                )));
            }
            let at = At { value, line };
            conf.set(section, key, at);
        }
        Ok(conf)
    }

    fn set(&mut self, section: Section, key: &str, at: At<String>) {
        match (section, key) {
            (Section::Top, "archive_dir") => self.archive_dir = Some(at),
            (Section::Top, "cert") => self.cert = Some(at),
            (Section::Top, "privkey") => self.privkey = Some(at),
            (Section::Top, "chain") => self.chain = Some(at),
            (Section::Top, "fullchain") => self.fullchain = Some(at),
            (Section::Params, "server") => self.server = Some(at),
            (Section::Params, "account") => self.account = Some(at),
            (Section::Params, "authenticator") => self.authenticator = Some(at),
            (Section::Params, "installer") => self.installer = Some(at),
            (Section::Params, "key_type") => self.key_type = Some(at),
            (Section::Params, "rsa_key_size") => self.rsa_key_size = Some(at),
            (Section::Params, "elliptic_curve") => self.elliptic_curve = Some(at),
            (Section::Params, "preferred_chain") => self.preferred_chain = Some(at),
            (Section::Params, "webroot_path") => {
                self.webroot_path = list(&at.value)
                    .into_iter()
                    .map(|value| At {
                        value,
                        line: at.line,
                    })
                    .collect();
            }
            (Section::WebrootMap, _) => self.webroot_map.push((
                At {
                    value: key.to_owned(),
                    line: at.line,
                },
                at,
            )),
            _ => {}
        }
    }
}

fn section_of(header: &str, current: Section) -> Result<Section, String> {
    let (depth, name) = if let Some(inner) = header
        .strip_prefix("[[")
        .and_then(|h| strip_comment(h).trim_end().strip_suffix("]]"))
    {
        (2, inner.trim())
    } else if let Some(inner) = header
        .strip_prefix('[')
        .and_then(|h| strip_comment(h).trim_end().strip_suffix(']'))
    {
        (1, inner.trim())
    } else {
        return Err(format!(
            "a section header that does not close: {}",
            crate::values::text::quote_max(header, 60)
        ));
    };
    Ok(match (depth, name) {
        (1, "renewalparams") => Section::Params,
        (2, "webroot_map") if matches!(current, Section::Params | Section::WebrootMap) => {
            Section::WebrootMap
        }
        (2, "webroot_map") => {
            return Err("[[webroot_map]] outside [renewalparams]".into());
        }
        _ => Section::Other,
    })
}

/// A value without its trailing `# comment` (outside quotes).
fn strip_comment(value: &str) -> &str {
    let mut quote = None;
    for (i, c) in value.char_indices() {
        match (quote, c) {
            (None, '"' | '\'') => quote = Some(c),
            (Some(q), c) if c == q => quote = None,
            (None, '#') => return value[..i].trim_end(),
            _ => {}
        }
    }
    value
}

/// A value without the quotes ConfigObj may put around it; control characters refused.
fn unquote(value: &str) -> Result<String, String> {
    let inner = ['"', '\'']
        .iter()
        .find_map(|q| {
            value
                .strip_prefix(*q)
                .and_then(|v| v.strip_suffix(*q))
                .filter(|v| !v.contains(*q))
        })
        .unwrap_or(value);
    if inner.chars().any(char::is_control) {
        return Err("a value holds control characters".into());
    }
    Ok(inner.to_owned())
}

/// A ConfigObj list: `a, b` or `a,` (one element), empty elements dropped.
fn list(value: &str) -> Vec<String> {
    value
        .split(',')
        .map(|v| {
            let v = v.trim();
            ['"', '\'']
                .iter()
                .find_map(|q| v.strip_prefix(*q).and_then(|x| x.strip_suffix(*q)))
                .unwrap_or(v)
                .to_owned()
        })
        .filter(|v| !v.is_empty())
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// As certbot 2.1 writes it for `certonly --webroot -w /var/www/a -d a.example -w
    /// /var/www/b -d b.example`.
    const WEBROOT: &str = "\
# renew_before_expiry = 30 days
version = 2.1.0
archive_dir = /etc/letsencrypt/archive/a.example
cert = /etc/letsencrypt/live/a.example/cert.pem
privkey = /etc/letsencrypt/live/a.example/privkey.pem
chain = /etc/letsencrypt/live/a.example/chain.pem
fullchain = /etc/letsencrypt/live/a.example/fullchain.pem

# Options used in the renewal process
[renewalparams]
account = 0f3c6e2d4b5a69788796a5b4c3d2e1f0
authenticator = webroot
webroot_path = /var/www/a, /var/www/b
server = https://acme-v02.api.letsencrypt.org/directory
key_type = ecdsa
[[webroot_map]]
a.example = /var/www/a
b.example = /var/www/b
";

    #[test]
    fn certbots_own_renewal_conf_is_read() {
        let c = RenewalConf::parse(WEBROOT).unwrap();
        assert_eq!(
            c.cert.as_ref().unwrap().value,
            "/etc/letsencrypt/live/a.example/cert.pem"
        );
        assert_eq!(c.cert.as_ref().unwrap().line, 4);
        assert_eq!(
            c.server.unwrap().value,
            "https://acme-v02.api.letsencrypt.org/directory"
        );
        assert_eq!(c.authenticator.unwrap().value, "webroot");
        let roots: Vec<_> = c.webroot_path.iter().map(|w| w.value.as_str()).collect();
        assert_eq!(roots, ["/var/www/a", "/var/www/b"]);
        assert_eq!(c.webroot_map.len(), 2);
        assert_eq!(c.webroot_map[1].0.value, "b.example");
        assert_eq!(c.webroot_map[1].1.value, "/var/www/b");
        assert_eq!(c.key_type.unwrap().value, "ecdsa");
    }

    #[test]
    fn a_single_web_root_list_and_quoted_values_are_read() {
        let c = RenewalConf::parse(
            "[renewalparams]\nwebroot_path = /srv/www,\npreferred_chain = \"ISRG Root X1\" # chosen\n",
        )
        .unwrap();
        assert_eq!(c.webroot_path.len(), 1);
        assert_eq!(c.webroot_path[0].value, "/srv/www");
        assert_eq!(c.preferred_chain.unwrap().value, "ISRG Root X1");
    }

    #[test]
    fn garbage_is_refused_with_its_line() {
        for (text, line, what) in [
            (
                "cert = /a\n\nthis is not a setting\n",
                3,
                "expected `key = value`",
            ),
            ("cert = /a\ncert = /b\n", 2, "given twice"),
            ("[renewalparams\n", 1, "does not close"),
            ("[[webroot_map]]\na = /b\n", 1, "outside [renewalparams]"),
            ("cert = /a\u{7}b\n", 1, "control characters"),
            (" = x\n", 1, "key is empty"),
        ] {
            let e = RenewalConf::parse(text).unwrap_err();
            assert_eq!(e.line, line, "{text:?}: {e}");
            assert!(e.message.contains(what), "{text:?}: {e}");
        }
        let huge = "# x\n".repeat(MAX_CONF_BYTES);
        assert!(
            RenewalConf::parse(&huge)
                .unwrap_err()
                .message
                .contains("larger")
        );
    }

    #[test]
    fn other_sections_and_unknown_keys_are_ignored() {
        let c = RenewalConf::parse("[other]\ncert = /x\n[renewalparams]\nfoo = bar\n").unwrap();
        assert_eq!(c.cert, None);
    }
}
