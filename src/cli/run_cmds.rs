//! The commands that run the renewal engine — `renew`, `issue`, `reissue`, `install`,
//! `adopt --reissue` — with their options mapped in one place, and the run's report printed.

use std::time::Duration;

use anyhow::Result;

use super::args::{Command, RenewArgs};
use super::exit;
use super::output::Output;
use crate::config::Config;
use crate::engine::{Outcome, RunOptions};

/// Runs the engine with `opts` and prints its report; the exit code follows the run's status
/// (75 when another process still holds the lock after `lock_wait`).
pub(super) async fn run(
    config: &Config,
    opts: &RunOptions,
    out: &Output,
    lock_wait: Duration,
) -> Result<u8> {
    match crate::run::once_waiting(config, opts, lock_wait).await {
        Ok(report) => print(&report, out),
        Err(e) => locked_or(e),
    }
}

/// A run that could not take the state directory's lock ends with 75; other errors are
/// errors.
fn locked_or(e: anyhow::Error) -> Result<u8> {
    if let Some(crate::store::StoreError::Locked { .. }) =
        e.downcast_ref::<crate::store::StoreError>()
    {
        eprintln!("{e:#}");
        return Ok(exit::PENDING);
    }
    Err(e)
}

/// `renew` without names, `--force` or `--dry-run`: when the due summary vouches for every
/// certificate of the configuration as it is now, reported without parsing the configuration
/// ([`crate::run::express`]); otherwise the full run.
pub(super) async fn renew_plain(
    config_path: &std::path::Path,
    args: &RenewArgs,
    out: &Output,
    clock: crate::clock::Clock,
    lock_wait: u64,
) -> Result<u8> {
    use crate::run::express::{Express, renew};
    random_start_delay(args.random_delay).await;
    let wait = Duration::from_secs(lock_wait);
    match renew(config_path, clock, wait).await {
        Ok(Express::Done(report, warnings)) => {
            for w in &warnings {
                tracing::warn!("{w}");
            }
            return print(&report, out);
        }
        Ok(Express::Full(why)) => tracing::debug!("the full run: {why}"),
        Err(e) => return locked_or(e),
    }
    let config = super::load_config(config_path)?;
    let command = Command::Renew(RenewArgs {
        names: Vec::new(),
        random_delay: 0,
        ..*args
    });
    super::engine(&command, &config, out, lock_wait).await
}

/// Prints the run's report (a table, or `--json`); the exit code follows the run's status.
fn print(report: &crate::engine::RunReport, out: &Output) -> Result<u8> {
    if out.json {
        out.print_json(report)?;
        return Ok(exit::of_run(report.status()));
    }
    // One write for the whole report (thousands of lines on a large host); failures go to
    // stderr.
    // What the CRL said goes on the certificate's own line: one line per certificate, however
    // many a CRL outage leaves unknown.
    let mut text = String::new();
    for c in &report.certificates {
        if let Some(o) = &c.ordered {
            text.push_str(&format!("{}: {o}\n", c.name));
        }
        let mut line = c.line();
        if let Some(r) = &c.revocation {
            line.push_str("; ");
            line.push_str(&r.detail);
        }
        if matches!(c.outcome, Outcome::Failed { .. }) {
            eprintln!("{line}");
        } else {
            text.push_str(&line);
            text.push('\n');
        }
    }
    out!("{text}");
    Ok(exit::of_run(report.status()))
}

/// `renew --random-delay SECS`: a random sleep before an unattended run that systemd did not
/// start (cron); none on a terminal or under systemd (`INVOCATION_ID` set).
pub(super) async fn random_start_delay(max_secs: u64) {
    let unattended = !std::io::IsTerminal::is_terminal(&std::io::stderr())
        && std::env::var_os("INVOCATION_ID").is_none();
    if max_secs == 0 || !unattended {
        return;
    }
    let secs = rand::random_range(0..=max_secs);
    tracing::info!("waiting {secs} s before starting (--random-delay)");
    tokio::time::sleep(Duration::from_secs(secs)).await;
}

/// The engine's options for a command that runs it; `None` for the other commands. The one
/// place where commands become run options.
pub(super) fn options(command: &Command, config: &Config, out: &Output) -> Option<RunOptions> {
    // What a run waits for is said on standard error, terminal or not (a run started by hand
    // may wait minutes between status checks), unless the output is JSON or errors only.
    let progress = !out.json && !out.quiet;
    let explicit = |name: &str| RunOptions {
        stop: stop_on_signals(),
        progress,
        ..RunOptions::explicit(vec![name.to_owned()])
    };
    Some(match command {
        Command::Renew(args) => RunOptions {
            progress,
            ..renew_options(args, config)
        },
        Command::Issue(args) => RunOptions {
            wait: Duration::from_secs(args.wait),
            allow_orders: args.yes || config.agent.allow_orders,
            clear_intent: args.clear_intent,
            replace_ended: true,
            ..explicit(&args.name)
        },
        // A reissue is free; it never places an order.
        Command::Reissue {
            name,
            reuse_key,
            wait,
        } => RunOptions {
            force: true,
            reuse_key: *reuse_key,
            wait: Duration::from_secs(*wait),
            ..explicit(name)
        },
        Command::Install { name } => RunOptions {
            reinstall: true,
            ..explicit(name)
        },
        Command::Adopt {
            name,
            reissue: true,
            ..
        } => RunOptions {
            force: true,
            ..explicit(name)
        },
        _ => return None,
    })
}

fn renew_options(args: &RenewArgs, config: &Config) -> RunOptions {
    RunOptions {
        names: args.names.clone(),
        dry_run: args.dry_run,
        force: args.force,
        wait: Duration::from_secs(args.wait),
        // Unattended runs (no names) respect the backoff after failures; a named certificate
        // is an operator's request to try now.
        ignore_backoff: !args.names.is_empty() || args.force,
        stop: stop_on_signals(),
        ..RunOptions::unattended(config)
    }
}

/// A stop channel that turns `true` on the first SIGTERM or SIGINT: the run stops waiting,
/// removes what it published for validation and reports the rest as pending. A second signal
/// ends the process at once.
fn stop_on_signals() -> Option<tokio::sync::watch::Receiver<bool>> {
    crate::signal::StopSignals::channel(
        || {
            eprintln!(
                "stopping: cleaning up what this run published (a second signal stops at once)"
            )
        },
        || std::process::exit(130),
    )
}
