//! The documented exit codes (0 done, 1 error, 2 usage or configuration, 3 partial, 75
//! pending), decided here alone: from a run's status, or from an error's kind.

use crate::engine::RunStatus;

/// Done, nothing left to do.
pub(crate) const OK: u8 = 0;
/// An error.
pub(crate) const ERROR: u8 = 1;
/// Usage or configuration error.
pub(crate) const USAGE: u8 = 2;
/// Some certificates failed, others succeeded.
pub(crate) const PARTIAL: u8 = 3;
/// Work is pending at the CA; the next run continues.
pub(crate) const PENDING: u8 = 75;

/// The exit code of a run that ended with `status`.
pub(crate) fn of_run(status: RunStatus) -> u8 {
    match status {
        RunStatus::Done => OK,
        RunStatus::Pending => PENDING,
        RunStatus::Partial => PARTIAL,
        RunStatus::Failed => ERROR,
    }
}

/// A usage or configuration error: exits with code 2.
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
pub(crate) struct UsageError(pub String);

/// The exit code of a command that failed with `err`.
pub(super) fn code_for(err: &anyhow::Error) -> u8 {
    for cause in err.chain() {
        if cause.downcast_ref::<UsageError>().is_some()
            || cause.downcast_ref::<crate::config::ConfigError>().is_some()
            || cause
                .downcast_ref::<crate::config::UnknownCertificate>()
                .is_some()
        {
            return USAGE;
        }
        if cause
            .downcast_ref::<crate::fleet::LeadElsewhere>()
            .is_some()
        {
            return PENDING;
        }
    }
    ERROR
}

/// Stdout could not be written: a closed pipe ends the process as `SIGPIPE` would (status
/// 141, nothing printed); any other error is reported.
pub(crate) fn stdout_failed(e: &std::io::Error) {
    if e.kind() == std::io::ErrorKind::BrokenPipe {
        std::process::exit(141);
    }
    eprintln!("error: could not write to standard output: {e}");
    std::process::exit(i32::from(ERROR));
}
