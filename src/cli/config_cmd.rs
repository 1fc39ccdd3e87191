//! `cert-agent config check`: the configuration as the agent reads it, or what is wrong
//! with it (file, line and key).

use std::path::Path;

use anyhow::Result;

use super::exit;
use super::output::Output;
use crate::config::Config;

/// Prints the configuration at `path` as read (text or JSON), warnings on stderr.
pub(super) fn run(path: &Path, out: &Output) -> Result<u8> {
    let config = Config::load(path)?;
    for warning in &config.warnings {
        eprintln!("warning: {warning}");
    }
    if out.json {
        out.print_json(&config)?;
    } else {
        out!("{}", config.render());
    }
    Ok(exit::OK)
}
