//! The convergence loop: for each configured certificate, decide the next action from the
//! stored state, the installed files and (only when needed) the API, and carry it out —
//! order, validate, wait, download, install, reissue, renew the subscription — with billing
//! safety throughout.

pub mod account_match;
pub mod adopt;
mod announce;
pub mod check;
mod context;
mod deploy;
pub mod fleet;
mod job;
pub mod keys;
pub mod metrics;
pub mod order;
pub mod placeholder;
pub mod plan;
mod poll;
mod publish;
mod reissue;
mod report;
mod run;
mod served;
mod start;
pub mod status;

pub use context::{RunOptions, TEST_CLOCK_OFFSET_ENV, client, client_options, now};
pub use deploy::install_paths;
pub use report::{CertReport, Outcome, RunReport, RunStats, RunStatus};
pub use run::run;

/// A certificate name that the configuration does not define (a usage error).
#[derive(Debug, thiserror::Error)]
#[error("no [[certificate]] named '{name}' in {} (configured: {})", config_path.display(), configured.join(", "))]
pub struct UnknownCertificate {
    pub name: String,
    pub config_path: std::path::PathBuf,
    pub configured: Vec<String>,
}

impl UnknownCertificate {
    pub fn new(config: &crate::config::Config, name: &str) -> Self {
        Self {
            name: name.to_owned(),
            config_path: config.path.clone(),
            configured: config.certificates.iter().map(|c| c.name.clone()).collect(),
        }
    }
}

/// The subscription end the details report, as recorded (`None` when the API reports none).
fn subscription_of(details: &crate::api::CertificateDetails) -> Option<crate::store::Subscription> {
    let ends = details
        .subscription_valid_to
        .as_deref()
        .and_then(crate::api::parse_api_date)?;
    Some(crate::store::Subscription {
        ends: ends.midnight().assume_utc(),
        multi_year: details.subscription_duration.is_some(),
    })
}
