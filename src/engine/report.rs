//! What a run reports: one outcome per certificate and the run's status as a whole.

use std::time::Duration;

use time::OffsetDateTime;

use crate::config::CertificateConfig;

/// The outcome for one certificate.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
#[serde(tag = "outcome", rename_all = "snake_case")]
pub enum Outcome {
    /// Nothing to do.
    Unchanged { reason: String },
    /// A new certificate is installed (and served, where checked).
    Installed {
        certificate_id: u64,
        serial: String,
        #[serde(with = "time::serde::rfc3339")]
        not_after: OffsetDateTime,
    },
    /// Waiting for the CA or the operator; the next run continues.
    Pending { reason: String },
    /// What a real run would do (`--dry-run`).
    Planned { action: String },
    /// This certificate failed; others may have succeeded.
    Failed { error: String },
}

impl Outcome {
    /// Every kind of outcome, as [`Outcome::kind`] names them (the `outcome` of `--json`, the
    /// metrics' `outcome` label).
    pub const KINDS: [&'static str; 5] = ["unchanged", "installed", "pending", "planned", "failed"];

    /// The outcome's kind in one word.
    pub fn kind(&self) -> &'static str {
        match self {
            Outcome::Unchanged { .. } => "unchanged",
            Outcome::Installed { .. } => "installed",
            Outcome::Pending { .. } => "pending",
            Outcome::Planned { .. } => "planned",
            Outcome::Failed { .. } => "failed",
        }
    }
}

/// One certificate's line of the report.
#[derive(Debug, Clone, serde::Serialize)]
pub struct CertReport {
    pub name: String,
    #[serde(flatten)]
    pub outcome: Outcome,
    /// A warning for the operator (subscription ending, renewal order prepared).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub warning: Option<String>,
    /// What the CRL said of the installed certificate, when it was read and did not say
    /// "not revoked".
    #[serde(skip_serializing_if = "Option::is_none")]
    pub revocation: Option<RevocationNote>,
    /// A billed order this run placed: what was ordered, what it cost and why.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub ordered: Option<String>,
}

/// What the CRL said of an installed certificate.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct RevocationNote {
    /// `revoked` or `unknown`.
    pub state: String,
    pub detail: String,
}

/// The whole run.
#[derive(Debug, Clone, Default, serde::Serialize)]
pub struct RunReport {
    pub certificates: Vec<CertReport>,
    /// Set when this run took over the fleet's work after a lead ended with its lease: why.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub takeover: Option<String>,
    /// When the run started, how long it took, the API calls it made (for metrics).
    #[serde(skip)]
    pub stats: Option<RunStats>,
}

/// The run's own figures.
#[derive(Debug, Clone)]
pub struct RunStats {
    pub started_at: OffsetDateTime,
    pub duration: Duration,
    /// HTTP exchanges with the Partner API by method, endpoint and status.
    pub requests: Vec<crate::api::RequestCount>,
}

/// How a run ended as a whole; `cli` turns it into the documented exit code.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum RunStatus {
    /// Every selected certificate is done; nothing is left to do.
    Done,
    /// Nothing failed, and work is pending at the CA or the operator.
    Pending,
    /// Some certificates failed, others did not.
    Partial,
    /// Every selected certificate failed.
    Failed,
}

impl RunReport {
    /// The run as a whole: failed when every certificate failed, partial when some did,
    /// pending when none failed and some wait, done otherwise.
    pub fn status(&self) -> RunStatus {
        let failed = self
            .certificates
            .iter()
            .filter(|c| matches!(c.outcome, Outcome::Failed { .. }))
            .count();
        let pending = self
            .certificates
            .iter()
            .any(|c| matches!(c.outcome, Outcome::Pending { .. }));
        match failed {
            0 if pending => RunStatus::Pending,
            0 => RunStatus::Done,
            n if n == self.certificates.len() => RunStatus::Failed,
            _ => RunStatus::Partial,
        }
    }
}

impl CertReport {
    /// This certificate's line of the run's report, as `renew` prints it and the daemon logs
    /// it: `NAME: nothing to do (…)`, `NAME: installed certificate …`, `NAME: pending: …`,
    /// `NAME: would …`, `NAME: error: …`.
    pub fn line(&self) -> String {
        let name = &self.name;
        match &self.outcome {
            Outcome::Unchanged { reason } => format!("{name}: nothing to do ({reason})"),
            Outcome::Installed {
                certificate_id,
                serial,
                not_after,
            } => format!(
                "{name}: installed certificate {certificate_id}, serial {serial}, valid until {}",
                not_after
                    .format(&time::format_description::well_known::Rfc3339)
                    .unwrap_or_default()
            ),
            Outcome::Pending { reason } => format!("{name}: pending: {reason}"),
            Outcome::Planned { action } => format!("{name}: would {action}"),
            Outcome::Failed { error } => format!("{name}: error: {error}"),
        }
    }
}

impl RunReport {
    /// Every selected certificate, not started yet.
    pub fn not_started(certs: &[&CertificateConfig]) -> Self {
        Self {
            stats: None,
            takeover: None,
            certificates: certs
                .iter()
                .map(|c| CertReport {
                    name: c.name.clone(),
                    outcome: Outcome::Pending {
                        reason: "not started".into(),
                    },
                    warning: None,
                    revocation: None,
                    ordered: None,
                })
                .collect(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_kind_is_the_json_tag() {
        let all = [
            Outcome::Unchanged { reason: "r".into() },
            Outcome::Installed {
                certificate_id: 1,
                serial: "01".into(),
                not_after: OffsetDateTime::UNIX_EPOCH,
            },
            Outcome::Pending { reason: "r".into() },
            Outcome::Planned { action: "a".into() },
            Outcome::Failed { error: "e".into() },
        ];
        for (o, kind) in all.iter().zip(Outcome::KINDS) {
            assert_eq!(o.kind(), kind);
            let json = serde_json::to_value(o).unwrap();
            assert_eq!(json["outcome"], kind);
        }
    }
}
