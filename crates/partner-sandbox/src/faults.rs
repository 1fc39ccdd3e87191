//! Fault injection: each fault applies to the next K partner-API calls that match its method and
//! path pattern. The transport consults [`Faults::take`] once per call and acts on the kind.

use serde::{Deserialize, Serialize};

use crate::bundle::HostileKind;

/// The login a `rotate_token` fault applies to when it names none.
pub const DEFAULT_ROTATE_LOGIN: &str = "partner@sandbox.test";

/// One fault rule, as given to [`crate::SandboxHandle::inject`] or `POST /_sandbox/faults`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Fault {
    /// HTTP method to match (`GET`, `POST`, ...); `None` matches any.
    #[serde(default)]
    pub method: Option<String>,
    /// Path pattern; `*` matches exactly one path segment, e.g.
    /// `/api/v1/ssl_certificates/*/status`. `None` means the kind's default path (see
    /// [`FaultKind::default_path`]).
    #[serde(default)]
    pub path: Option<String>,
    /// How many matching calls it applies to (at least 1).
    #[serde(default = "one")]
    pub times: u32,
    #[serde(flatten)]
    pub kind: FaultKind,
}

fn one() -> u32 {
    1
}

/// What happens to a matching call.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum FaultKind {
    /// Answer `status` (500, 502 or 503) with a small HTML body; the request is not applied.
    Status { status: u16 },
    /// Apply the request at once, then hold the answer back for `ms` milliseconds.
    Delay { ms: u64 },
    /// Apply the request (the billed order exists), then close the TCP connection without
    /// writing a single byte of the answer.
    DropAfterApply,
    /// Apply the request, then answer 200 with a truncated JSON body.
    MalformedJson,
    /// Apply the request, then answer 200 with an HTML maintenance page (`text/html`), as a
    /// proxy or load balancer in front of the service does now and then.
    HtmlPage,
    /// Apply the request, then answer 200 with the real JSON whose values have the wrong
    /// types (numbers as strings, strings as numbers, booleans as strings).
    WrongTypes,
    /// Rotate `login`'s token before the request is applied, as if another signin had
    /// happened: a call with the old token gets 401.
    RotateToken {
        #[serde(default = "default_login")]
        login: String,
    },
    /// DCV status answers `422 {success:false, error}`: the CA cannot be reached
    /// (only when the call would otherwise have succeeded).
    CaUnreachable,
    /// The bundle (or download) answers 422 `{errors: <message>}` (only when the call would
    /// otherwise have succeeded).
    BundleFailure { failure: BundleFailure },
    /// The bundle is replaced by a broken one (only when the call would otherwise have
    /// succeeded).
    HostileBundle { hostile: HostileKind },
    /// The call answers 422 `{success: false, error: <message>}` with the message given (only
    /// when the call would otherwise have succeeded): a refusal whose text a test chooses,
    /// terminal controls included.
    Refusal { message: String },
}

fn default_login() -> String {
    DEFAULT_ROTATE_LOGIN.to_owned()
}

/// The three documented bundle failures of endpoint 15.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum BundleFailure {
    /// `Certificate PEM data is not available`
    PemNotAvailable,
    /// `Failed to build certificate bundle`
    BuildFailed,
    /// `Failed to retrieve certificate PEM data`
    RetrieveFailed,
}

impl BundleFailure {
    /// The documented 422 text.
    pub fn message(self) -> &'static str {
        match self {
            Self::PemNotAvailable => "Certificate PEM data is not available",
            Self::BuildFailed => "Failed to build certificate bundle",
            Self::RetrieveFailed => "Failed to retrieve certificate PEM data",
        }
    }
}

impl FaultKind {
    /// The path a fault of this kind matches when it names none (`None`: every path).
    pub fn default_path(&self) -> Option<&'static str> {
        match self {
            Self::CaUnreachable => Some("/api/v1/ssl_certificates/*/dcv"),
            Self::BundleFailure { .. } | Self::HostileBundle { .. } => {
                Some("/api/v1/ssl_certificates/*/download_bundle")
            }
            _ => None,
        }
    }

    /// Short name for the call log.
    pub fn name(&self) -> &'static str {
        match self {
            Self::Status { .. } => "status",
            Self::Delay { .. } => "delay",
            Self::DropAfterApply => "drop_after_apply",
            Self::MalformedJson => "malformed_json",
            Self::HtmlPage => "html_page",
            Self::WrongTypes => "wrong_types",
            Self::RotateToken { .. } => "rotate_token",
            Self::CaUnreachable => "ca_unreachable",
            Self::BundleFailure { .. } => "bundle_failure",
            Self::HostileBundle { .. } => "hostile_bundle",
            Self::Refusal { .. } => "refusal",
        }
    }
}

impl Fault {
    /// A fault of `kind` for the next matching call on its default path (any path when the kind
    /// has none), any method.
    pub fn new(kind: FaultKind) -> Self {
        Self {
            method: None,
            path: None,
            times: 1,
            kind,
        }
    }

    /// Restricts the fault to `method`.
    pub fn method(mut self, method: &str) -> Self {
        self.method = Some(method.to_ascii_uppercase());
        self
    }

    /// Restricts the fault to paths matching `pattern` (`*` = one segment).
    pub fn path(mut self, pattern: &str) -> Self {
        self.path = Some(pattern.to_owned());
        self
    }

    /// Applies the fault to the next `k` matching calls.
    pub fn times(mut self, k: u32) -> Self {
        self.times = k;
        self
    }

    /// Checks what the control API receives.
    pub fn validate(&self) -> Result<(), String> {
        if self.times == 0 {
            return Err("times must be at least 1".into());
        }
        if let Some(p) = self.path.as_deref().filter(|p| !p.starts_with('/')) {
            return Err(format!("path pattern '{p}' must start with '/'"));
        }
        if let FaultKind::Status { status } = self.kind
            && !(400..=599).contains(&status)
        {
            return Err(format!("status {status} is not an error status (400-599)"));
        }
        Ok(())
    }

    fn matches(&self, method: &str, path: &str) -> bool {
        if self
            .method
            .as_deref()
            .is_some_and(|m| !m.eq_ignore_ascii_case(method))
        {
            return false;
        }
        match self.path.as_deref().or(self.kind.default_path()) {
            None => true,
            Some(pattern) => path_matches(pattern, path),
        }
    }
}

/// `*` matches exactly one non-empty path segment; everything else matches literally.
pub fn path_matches(pattern: &str, path: &str) -> bool {
    let pat: Vec<&str> = pattern.trim_end_matches('/').split('/').collect();
    let segs: Vec<&str> = path.trim_end_matches('/').split('/').collect();
    pat.len() == segs.len()
        && pat
            .iter()
            .zip(&segs)
            .all(|(p, s)| *p == *s || (*p == "*" && !s.is_empty()))
}

/// The armed faults, in the order they were added.
#[derive(Debug, Default)]
pub struct Faults {
    armed: Vec<Fault>,
}

impl Faults {
    pub fn add(&mut self, fault: Fault) {
        self.armed.push(fault);
    }

    pub fn clear(&mut self) {
        self.armed.clear();
    }

    /// The faults still armed (with their remaining counts).
    pub fn list(&self) -> Vec<Fault> {
        self.armed.clone()
    }

    /// The first armed fault matching this call, counted down (and disarmed at zero).
    pub fn take(&mut self, method: &str, path: &str) -> Option<FaultKind> {
        let i = self.armed.iter().position(|f| f.matches(method, path))?;
        let fault = &mut self.armed[i];
        let kind = fault.kind.clone();
        fault.times = fault.times.saturating_sub(1);
        if fault.times == 0 {
            self.armed.remove(i);
        }
        Some(kind)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn star_matches_one_segment() {
        let p = "/api/v1/ssl_certificates/*/status";
        assert!(path_matches(p, "/api/v1/ssl_certificates/12/status"));
        assert!(!path_matches(p, "/api/v1/ssl_certificates/12/13/status"));
        assert!(!path_matches(p, "/api/v1/ssl_certificates//status"));
        assert!(!path_matches(p, "/api/v1/ssl_certificates/12"));
        assert!(path_matches("/api/v1/order", "/api/v1/order"));
        assert!(!path_matches("/api/v1/order", "/api/v1/orders"));
    }

    #[test]
    fn counts_down_and_disarms() {
        let mut f = Faults::default();
        f.add(
            Fault::new(FaultKind::Status { status: 503 })
                .method("get")
                .path("/api/v1/products")
                .times(2),
        );
        assert_eq!(f.take("POST", "/api/v1/products"), None);
        assert!(f.take("GET", "/api/v1/products").is_some());
        assert!(f.take("GET", "/api/v1/products").is_some());
        assert_eq!(f.take("GET", "/api/v1/products"), None);
        assert!(f.list().is_empty());
    }

    #[test]
    fn kind_defaults_apply_when_no_path() {
        let mut f = Faults::default();
        f.add(Fault::new(FaultKind::CaUnreachable));
        assert_eq!(f.take("GET", "/api/v1/ssl_certificates/5/status"), None);
        assert_eq!(
            f.take("GET", "/api/v1/ssl_certificates/5/dcv"),
            Some(FaultKind::CaUnreachable)
        );
    }

    #[test]
    fn json_shape() {
        let f: Fault =
            serde_json::from_str(r#"{"kind":"hostile_bundle","hostile":"dot_dot","times":2}"#)
                .expect("parses");
        assert_eq!(f.times, 2);
        assert_eq!(
            f.kind,
            FaultKind::HostileBundle {
                hostile: HostileKind::DotDot
            }
        );
        let f: Fault = serde_json::from_str(r#"{"kind":"rotate_token"}"#).expect("parses");
        assert_eq!(
            f.kind,
            FaultKind::RotateToken {
                login: DEFAULT_ROTATE_LOGIN.into()
            }
        );
        let f: Fault = serde_json::from_str(
            r#"{"kind":"bundle_failure","failure":"build_failed","method":"GET"}"#,
        )
        .expect("parses");
        assert_eq!(f.method.as_deref(), Some("GET"));
    }
}
