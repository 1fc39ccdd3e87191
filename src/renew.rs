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
