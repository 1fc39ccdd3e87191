//! `cert-agent retire NAME`: shows what retiring will do, asks on a terminal (`--yes` skips
//! the question and is needed without one), then retires and reports what the API answered
//! and what was removed.

use std::io::{BufRead, IsTerminal, Write};

use anyhow::{Context, Result};

use super::args::RetireArgs;
use super::exit::{self, UsageError};
use super::output::Output;
use crate::clock::Clock;
use crate::config::Config;
use crate::engine::retire::{self, CancelDecision, ConfigEntry, RetireOptions, RetireReport};
use crate::store::Store;

pub(super) async fn run(
    config: &Config,
    args: &RetireArgs,
    out: &Output,
    clock: Clock,
) -> Result<u8> {
    if config.fleet.is_some() {
        return Err(UsageError(format!(
            "retire in fleet mode: not yet. Retiring '{}' must remove it for every host of the \
             fleet (shared record, current certificate, validation files) as the leader; until \
             then remove it from every host's configuration and its state with `cert-agent \
             retire` on a configuration without [fleet]",
            args.name
        ))
        .into());
    }
    let opts = RetireOptions {
        cancel: args.cancel,
        remove_files: args.remove_files,
        force: args.force,
    };
    let store = Store::open(&config.agent.state_dir)?;
    let _lock = store.lock()?;
    let mut plan = retire::plan(config, &store, &args.name, opts)?;
    plan.look_at_web_server(args.from.as_deref(), opts, true)
        .await?;
    let steps = plan.describe(opts);
    if !args.yes {
        confirm(&args.name, &steps)?;
    }
    let client = if opts.cancel && plan.certificate_id.is_some() {
        Some(super::client_for(config)?)
    } else {
        None
    };
    let report = retire::carry_out(plan, &store, client.as_ref(), opts, clock.now()).await?;
    for w in &report.warnings {
        tracing::warn!(certificate = %report.name, "{w}");
    }
    if out.json {
        out.print_json(&report)?;
    } else {
        print_report(&report);
    }
    Ok(exit::OK)
}

/// Asks on a terminal; without one, `--yes` is needed.
fn confirm(name: &str, steps: &[String]) -> Result<()> {
    let stdin = std::io::stdin();
    if !stdin.is_terminal() {
        let mut text = format!("retiring '{name}' needs --yes without a terminal; it would:");
        for s in steps {
            text.push_str(&format!("\n  - {s}"));
        }
        return Err(UsageError(text).into());
    }
    let mut err = std::io::stderr();
    let _ = writeln!(err, "Retiring '{name}' will:");
    for s in steps {
        let _ = writeln!(err, "  - {s}");
    }
    let _ = write!(err, "Go ahead? [y/N] ");
    let _ = err.flush();
    let mut answer = String::new();
    stdin
        .lock()
        .read_line(&mut answer)
        .context("could not read the answer")?;
    if matches!(answer.trim(), "y" | "Y" | "yes" | "Yes") {
        Ok(())
    } else {
        Err(UsageError(format!("'{name}' was not retired (nothing was changed)")).into())
    }
}

fn print_report(r: &RetireReport) {
    if let Some(c) = &r.cancel {
        let id = c.certificate_id;
        match &c.decision {
            CancelDecision::Ask => outln!(
                "cancel certificate {id}: the API answered success={} \"{}\"",
                c.success.unwrap_or(false),
                c.result.as_deref().unwrap_or("")
            ),
            CancelDecision::TooLate { issued } => outln!(
                "cancel certificate {id}: not asked: it was issued on {issued}, more than \
                 {} days ago, and the API cancels an issued certificate only within {} days \
                 of its issuance",
                retire::CANCEL_WINDOW_DAYS,
                retire::CANCEL_WINDOW_DAYS
            ),
            CancelDecision::Ended { state } => {
                outln!("cancel certificate {id}: not asked: the order is already {state}");
            }
            CancelDecision::Pending => {
                outln!("cancel certificate {id}: not asked: a cancellation is already pending");
            }
        }
    }
    for f in &r.removed {
        outln!("removed {}", f.display());
    }
    for (f, why) in &r.kept {
        outln!("kept {} ({why})", f.display());
    }
    outln!(
        "'{}' is retired; its record is archived in {}",
        r.name,
        r.archive.display()
    );
    if let ConfigEntry::Operator { file } = &r.config_entry {
        outln!(
            "remove the [[certificate]] entry '{}' from {} (cert-agent does not edit your \
             configuration); until then every run reports it as retired",
            r.name,
            file.display()
        );
    }
}
