//! The families of the metrics file: each one's name and help text, in the order they are
//! written.

/// [`Metric::EmailValidationEnds`]: name and help text.
pub(super) const EMAIL_VALIDATION_ENDS: (&str, &str) = (
    "cert_agent_certificate_email_validation_ends_days",
    "For a certificate validated by email: days until email validation ends (2028-03-15, CA/B \
     Forum SC-090), negative after; absent for other methods.",
);

/// [`Metric::FleetServedSerialMismatch`]: name and help text.
const FLEET_SERVED_SERIAL_MISMATCH: (&str, &str) = (
    "cert_agent_fleet_served_serial_mismatch",
    "In a fleet: 1 when this host's last proof of the installed certificate met another \
     serial at an address and name it proved (drift: a vhost missed, a reload that did \
     not take, a file changed by hand), 0 when every answer served the installed one; \
     absent until a proof of the installed certificate.",
);

/// The metrics, in the order they are written. Each is a gauge; [`Metric::def`]
/// holds its name and help text.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Metric {
    NotAfter,
    NotBefore,
    Subscription,
    Installed,
    LastAttempt,
    LastSuccess,
    ServedMatches,
    ServedChecked,
    FleetServedSerialMismatch,
    Failures,
    Pending,
    Retired,
    Info,
    Revoked,
    CrlUsable,
    FreshValidationDue,
    FreshValidationNeedsPerson,
    EmailValidationEnds,
    Outcome,
    RunStart,
    RunDuration,
    RunCertificates,
    RunRequests,
    RunOrders,
    RunReissues,
    BalanceAvailable,
    ProjectedSpend,
    BalanceRead,
}

impl Metric {
    pub(super) const ALL: [Metric; 28] = [
        Metric::NotAfter,
        Metric::NotBefore,
        Metric::Subscription,
        Metric::Installed,
        Metric::LastAttempt,
        Metric::LastSuccess,
        Metric::ServedMatches,
        Metric::ServedChecked,
        Metric::FleetServedSerialMismatch,
        Metric::Failures,
        Metric::Pending,
        Metric::Retired,
        Metric::Info,
        Metric::Revoked,
        Metric::CrlUsable,
        Metric::FreshValidationDue,
        Metric::FreshValidationNeedsPerson,
        Metric::EmailValidationEnds,
        Metric::Outcome,
        Metric::RunStart,
        Metric::RunDuration,
        Metric::RunCertificates,
        Metric::RunRequests,
        Metric::RunOrders,
        Metric::RunReissues,
        Metric::BalanceAvailable,
        Metric::ProjectedSpend,
        Metric::BalanceRead,
    ];

    /// Name and help text.
    pub(super) fn def(self) -> (&'static str, &'static str) {
        match self {
            Metric::NotAfter => (
                "cert_agent_certificate_not_after_timestamp_seconds",
                "When the installed certificate expires (Unix time).",
            ),
            Metric::NotBefore => (
                "cert_agent_certificate_not_before_timestamp_seconds",
                "When the installed certificate became valid (Unix time).",
            ),
            Metric::Subscription => (
                "cert_agent_subscription_end_timestamp_seconds",
                "When the paid subscription of the certificate's order ends (Unix time).",
            ),
            Metric::Installed => (
                "cert_agent_certificate_installed_timestamp_seconds",
                "When the installed certificate was last installed successfully (Unix time).",
            ),
            Metric::LastAttempt => (
                "cert_agent_certificate_last_attempt_timestamp_seconds",
                "When a run last looked at the certificate, worked on it or failed on it (Unix time).",
            ),
            Metric::LastSuccess => (
                "cert_agent_certificate_last_success_timestamp_seconds",
                "When a run last installed the certificate or found it in order (Unix time); absent \
                 while nothing is installed.",
            ),
            Metric::ServedMatches => (
                "cert_agent_certificate_served_matches_installed",
                "1 when the verify address served the installed certificate at the last look (check \
                 --served, status --served, the install's own verification, in a fleet this host's \
                 proof), 0 when it served another one or none.",
            ),
            Metric::ServedChecked => (
                "cert_agent_certificate_served_checked_timestamp_seconds",
                "When the served certificate was last compared with the installed one (Unix time).",
            ),
            Metric::FleetServedSerialMismatch => FLEET_SERVED_SERIAL_MISMATCH,
            Metric::Failures => (
                "cert_agent_certificate_consecutive_failures",
                "Failed runs in a row for the certificate (0 after a success); in fleet mode the \
                 fleet's failed attempts when they are more.",
            ),
            Metric::Pending => (
                "cert_agent_certificate_pending",
                "1 while an order, a reissue or a validation waits at the CA, else 0.",
            ),
            Metric::Info => (
                "cert_agent_certificate_info",
                "Always 1; its labels say where the certificate comes from: issuer=\"partner\" \
                 (the Partner API) or issuer=\"acme:NAME\" (the ACME CA of [acme.NAME]).",
            ),
            Metric::Retired => (
                "cert_agent_certificate_retired",
                "1 when the certificate was retired (cert-agent retire) and the configuration still \
                 lists it: nothing is managed and no other sample is written for it; else 0.",
            ),
            Metric::Revoked => (
                "cert_agent_certificate_revoked",
                "1 when the CRL lists the installed certificate as revoked, 0 when it does not \
                 (absent until a run read the CRL).",
            ),
            Metric::CrlUsable => (
                "cert_agent_certificate_crl_usable",
                "1 when the last run could use the installed certificate's CRL (fetched or kept, \
                 signed by the issuer, not stale), 0 when it was refused: revocation unknown.",
            ),
            Metric::FreshValidationDue => (
                "cert_agent_certificate_fresh_validation_due_timestamp_seconds",
                "When the next renewal that needs a fresh domain validation falls due (Unix time; \
                 absent when none does within 400 days).",
            ),
            Metric::FreshValidationNeedsPerson => (
                "cert_agent_certificate_fresh_validation_needs_person",
                "1 when that fresh validation needs a person (EMAIL, DNS without a hook), 0 when \
                 the agent does it (HTTP file, DNS hook).",
            ),
            Metric::EmailValidationEnds => EMAIL_VALIDATION_ENDS,
            Metric::Outcome => (
                "cert_agent_certificate_last_run_outcome",
                "1 for the outcome of the certificate in the last run that worked on it.",
            ),
            Metric::RunStart => (
                "cert_agent_last_run_start_timestamp_seconds",
                "When the last run started (Unix time).",
            ),
            Metric::RunDuration => (
                "cert_agent_last_run_duration_seconds",
                "How long the last run took.",
            ),
            Metric::RunCertificates => (
                "cert_agent_last_run_certificates",
                "Certificates of the last run by outcome.",
            ),
            Metric::RunRequests => (
                "cert_agent_last_run_api_requests",
                "Partner API requests of the last run by method, endpoint and HTTP status.",
            ),
            Metric::RunOrders => (
                "cert_agent_last_run_orders_placed",
                "Billed orders the last run placed (POST /api/v1/order answered 2xx).",
            ),
            Metric::RunReissues => (
                "cert_agent_last_run_reissues_sent",
                "Reissues the last run sent (answered 2xx).",
            ),
            Metric::BalanceAvailable => (
                "cert_agent_balance_available",
                "The account's available balance (usable for new bills) when last read, by currency.",
            ),
            Metric::ProjectedSpend => (
                "cert_agent_projected_spend_30d",
                "Catalogue price of the billed orders and renewals due in the next 30 days, as \
                 projected when the balance was last read, by currency.",
            ),
            Metric::BalanceRead => (
                "cert_agent_balance_read_timestamp_seconds",
                "When the balance and the projected spend were last read (Unix time).",
            ),
        }
    }
}
