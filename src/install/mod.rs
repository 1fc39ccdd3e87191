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
pub mod server;
mod staging;
pub mod verify;

pub use error::InstallError;
pub use files::{
    CERT_MODE, CertMaterial, DIR_MODE, FileRole, InstallTx, KEY_DIR_MODE, KEY_MODE, KEY_MODE_GROUP,
    Ownership, Principal,
};
pub use flow::{CertInstall, CertOutcome, Held, InstallBatch, install_all};
pub use paths::{DEFAULT_BASE_DIR, InstallPaths, PathOverrides, ServerKind};
pub use server::{DEFAULT_COMMAND_TIMEOUT, ServerCommands};
pub use staging::CheckedDirs;
pub use verify::{DEFAULT_VERIFY_ADDRESS, DEFAULT_VERIFY_TIMEOUT, VerifyTarget};

#[cfg(test)]
mod tests;
