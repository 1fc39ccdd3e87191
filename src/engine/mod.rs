//! The convergence engine: for each configured certificate, decide the next action from the
//! stored state, the installed files and (only when needed) the API, and carry it out —
//! order, validate, wait, download, install, reissue, renew the subscription — with billing
//! safety throughout.
//!
//! Bottom up: `plan` (pure decisions), `report` (outcomes), `lead` (what a fleet's leader is
//! asked), `keys`, `job` (one certificate and where a phase leaves it), `context` (what a
//! run shares), then the steps `order`, `deploy`, `publish`, `reissue`, `adopt`,
//! `placeholder`, `retire`, the phases `start` and `poll`, and `run` over them. The engine knows
//! nothing of monitoring or etcd: a fleet takes part through [`Lead`].

pub(crate) mod acme;
pub(crate) mod adopt;
mod context;
pub(crate) mod deploy;
mod due;
pub(crate) mod forecast;
mod held;
mod job;
pub(crate) mod keys;
mod lead;
pub(crate) mod order;
pub(crate) mod placeholder;
pub(crate) mod plan;
mod poll;
pub(crate) mod preflight;
mod publish;
mod reissue;
mod report;
pub(crate) mod retire;
mod retire_guard;
mod retire_own;
mod run;
mod start;
pub(crate) mod sunset;

pub use context::{RunOptions, client_options};
pub(crate) use context::{client, client_guarded, progress};
pub(crate) use deploy::install_paths;
pub(crate) use held::line as held_line;
pub(crate) use job::{Job, Ready, unattended_inputs, wanted};
pub(crate) use lead::Installable;
pub use lead::Lead;
pub(crate) use lead::{Live, Refusal};
pub(crate) use poll::{polling_rule, until_next_check};
pub(crate) use publish::remove_published;
pub(crate) use publish::webroots;
pub(crate) use report::{CertReport, RunReport, RunStats};
pub use report::{Outcome, RunStatus};
pub use run::run;
pub(crate) use start::disk_state;
#[cfg(test)]
pub(crate) use {due::express_of, report::RevocationNote};
