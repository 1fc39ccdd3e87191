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

pub mod acme;
pub mod adopt;
mod context;
pub mod deploy;
mod due;
pub mod forecast;
mod held;
mod job;
pub mod keys;
mod lead;
pub mod order;
pub mod placeholder;
pub mod plan;
mod poll;
pub mod preflight;
mod publish;
mod reissue;
mod report;
pub mod retire;
mod retire_guard;
mod retire_own;
mod run;
mod start;
pub mod sunset;

pub use context::{RunOptions, client, client_guarded, client_options, progress};
pub use deploy::install_paths;
pub use due::express_of;
pub use held::line as held_line;
pub use job::{Job, Ready, unattended_inputs, wanted};
pub use lead::{Installable, Lead};
pub use poll::{polling_rule, until_next_check};
pub(crate) use publish::remove_published;
pub(crate) use publish::webroots;
pub use report::{CertReport, Outcome, RevocationNote, RunReport, RunStats, RunStatus};
pub use run::{EngineRun, run};
pub(crate) use start::disk_state;
