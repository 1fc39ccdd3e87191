//! `cert-agent check`: the monitoring check. Its exit codes are those of monitoring plugins
//! (0 OK, 1 WARNING, 2 CRITICAL, 3 UNKNOWN), not the agent's: a configuration or state that
//! cannot be read is UNKNOWN, printed as a plugin status line.

use std::path::Path;

use anyhow::Result;

use super::args::CheckArgs;
use super::output::Output;
use crate::clock::Clock;
use crate::config::Config;
use crate::monitor::check::{self, CheckOptions, Level};

/// Runs the check and prints the plugin output (or the report as JSON).
pub(super) async fn run(path: &Path, args: &CheckArgs, out: &Output, clock: Clock) -> Result<u8> {
    let opts = CheckOptions {
        names: args.names.clone(),
        warning_days: args.warning.unwrap_or(check::DEFAULT_WARNING_DAYS),
        critical_days: args.critical.unwrap_or(check::DEFAULT_CRITICAL_DAYS),
        by_lifetime: args.warning.is_none() && args.critical.is_none(),
        served: args.served,
        balance: !args.no_balance,
        refresh_crl: args.refresh_crl,
    };
    let report = match Config::load(path) {
        Ok(config) => check::check(&config, &opts, clock).await,
        Err(e) => Err(e.into()),
    };
    let report = match report {
        Ok(r) => r,
        Err(e) => {
            outln!(
                "CERT-AGENT UNKNOWN - {}",
                format!("{e:#}").replace(['\n', '|'], " ")
            );
            return Ok(Level::Unknown as u8);
        }
    };
    if out.json {
        out.print_json(&report)?;
    } else {
        out!("{}", report.render());
    }
    Ok(report.level as u8)
}
