//! `cert-agent` binary: parse the command line, run the command, map the outcome to the
//! documented exit codes.

#![cfg_attr(not(test), warn(clippy::unwrap_used))]

use std::process::ExitCode;

fn main() -> ExitCode {
    cert_agent::main()
}
