//! The convergence loop: for each configured certificate, decide the next action from the
//! stored state, the installed files and (only when needed) the API, and carry it out —
//! order, validate, wait, download, install, reissue, renew the subscription — with billing
//! safety throughout.

pub mod adopt;
mod deploy;
pub mod keys;
pub mod order;
pub mod plan;
mod reissue;
pub mod run;
pub mod status;
mod validate;

pub use deploy::{argv, install_paths};

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
