//! Installing certificates: atomic, reversible file installs into web-server paths, config
//! test, reload, verification of the served certificate, rollback.
//!
//! The orchestrator builds one [`CertInstall`] per certificate to install in this run and calls
//! [`install_all`] once. The pieces are usable alone: [`InstallTx`] (the file transaction),
//! [`ServerCommands`] (config test and reload), [`verify`] (which certificate is served).

mod error;
mod files;
mod flow;
mod paths;
pub(crate) mod server;
mod staging;
pub(crate) mod verify;

pub use error::InstallError;
pub(crate) use files::Principal;
pub use files::{CertMaterial, InstallTx, Ownership};
pub use flow::{CertInstall, install_all};
pub(crate) use flow::{CertOutcome, Held, InstallBatch};
pub(crate) use paths::DEFAULT_BASE_DIR;
pub use paths::{InstallPaths, PathOverrides, ServerKind};
pub use server::ServerCommands;
pub(crate) use verify::DEFAULT_VERIFY_ADDRESS;
pub use verify::VerifyTarget;

#[cfg(test)]
mod tests;
