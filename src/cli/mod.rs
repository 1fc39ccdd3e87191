//! Command-line interface: parses the command line, runs each `cert-agent` command and prints
//! its result (aligned tables for people, `--json` for programs). One file per mode; errors
//! carry context naming what failed, and only [`exit`] turns outcomes and errors into the
//! documented exit codes.

/// `println!` that ends the process quietly when stdout is a closed pipe (`cert-agent list |
/// head`), instead of panicking. What it prints goes through the sanitiser line by line
/// ([`crate::values::text::printable_lines`]): an API message, a record's last error or a
/// value from etcd cannot reach the terminal as a control.
macro_rules! outln {
    ($($arg:tt)*) => {{
        use std::io::Write as _;
        let text = format!($($arg)*);
        let text = $crate::values::text::printable_lines(&text);
        if let Err(e) = writeln!(std::io::stdout(), "{text}") {
            $crate::cli::exit::stdout_failed(&e);
        }
    }};
}

/// `print!` with the same handling as [`outln!`].
macro_rules! out {
    ($($arg:tt)*) => {{
        use std::io::Write as _;
        let text = format!($($arg)*);
        let text = $crate::values::text::printable_lines(&text);
        if let Err(e) = write!(std::io::stdout(), "{text}") {
            $crate::cli::exit::stdout_failed(&e);
        }
    }};
}

mod account;
mod acme;
mod actions;
mod args;
mod audit;
mod check;
mod config_cmd;
mod discover;
pub(crate) mod exit;
mod fleet;
mod forecast;
mod import;
mod migrate;
mod output;
mod preflight;
mod retire;
mod run_cmds;
mod serve;
mod snippet;
mod status;
mod table;

use std::path::Path;
use std::process::ExitCode;

use anyhow::Result;
use clap::Parser;

use crate::api::Client;
use crate::clock::Clock;
use crate::config::Config;

pub use args::Cli;
pub(crate) use args::{AcmeCommand, Command, ConfigCommand, ImportCommand};
pub(crate) use exit::UsageError;
use output::Output;

/// Entry point of the binary.
pub fn main() -> ExitCode {
    let cli = Cli::parse();
    init_logging(cli.verbose, cli.quiet);
    let runtime = match tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
    {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("error: could not start the async runtime: {e}");
            return ExitCode::from(exit::ERROR);
        }
    };
    let ran = runtime.block_on(run(&cli));
    // What is left on the runtime's blocking threads — a name lookup of a self-check the run
    // let go, waiting for a resolver that does not answer — does not hold the exit (the run
    // awaited everything it writes).
    runtime.shutdown_timeout(std::time::Duration::from_millis(100));
    match ran {
        Ok(code) => ExitCode::from(code),
        Err(err) => {
            // The chain may carry what the API, a file or a command said.
            eprintln!(
                "error: {}",
                crate::values::text::printable_lines(&format!("{err:#}"))
            );
            ExitCode::from(exit::code_for(&err))
        }
    }
}

fn init_logging(verbose: u8, quiet: bool) {
    let level = match (quiet, verbose) {
        (true, _) => "error",
        (false, 0) => "warn",
        (false, 1) => "debug",
        (false, _) => "trace",
    };
    // Our own crate at the chosen level; dependencies one step quieter so that -vv stays
    // readable and never shows wire dumps.
    let mut filter = format!("warn,cert_agent={level}");
    // Under systemd (`INVOCATION_ID`) the audit log's lines also go to the journal, with
    // their fields (seq, action, event, certificate, certificate_id, details).
    if !quiet && verbose == 0 && std::env::var_os("INVOCATION_ID").is_some() {
        filter.push_str(",cert_agent::audit=info");
    }
    let builder = tracing_subscriber::fmt()
        .with_writer(std::io::stderr)
        .with_target(false)
        .with_ansi(std::io::IsTerminal::is_terminal(&std::io::stderr()))
        .with_env_filter(tracing_subscriber::EnvFilter::new(filter));
    // Timestamps only when asked for detail: the journal and cron add their own.
    let _ = if verbose > 0 {
        builder.try_init()
    } else {
        builder.without_time().try_init()
    };
}

/// Runs one command; returns the exit code for outcomes that are not errors.
pub async fn run(cli: &Cli) -> Result<u8> {
    let out = Output::new(cli.json, cli.quiet);
    // The one reading of where time comes from; everything below is given it.
    let clock = Clock::from_env();
    match &cli.command {
        Command::Config(ConfigCommand::Check) => config_cmd::run(&cli.config, &out),
        Command::Check(args) => check::run(&cli.config, args, &out, clock).await,
        Command::Discover(args) => discover::run(&cli.config, args, &out, clock).await,
        Command::Import(ImportCommand::Certbot(args)) => {
            import::certbot(&cli.config, args, &out, clock).await
        }
        Command::Placeholder { name } => {
            snippet::placeholder(&load_config(&cli.config)?, name, &out, clock)
        }
        Command::Snippet { name } => snippet::snippet(&load_config(&cli.config)?, name, &out),
        Command::Audit(args) => audit::run(&load_config_quietly(&cli.config)?, args, &out),
        Command::Retire(args) => {
            let lock_wait = std::time::Duration::from_secs(cli.lock_wait);
            retire::run(&load_config(&cli.config)?, args, &out, clock, lock_wait).await
        }
        Command::Acme(AcmeCommand::Account {
            name,
            deactivate,
            yes,
        }) => {
            let lock_wait = std::time::Duration::from_secs(cli.lock_wait);
            let config = load_config(&cli.config)?;
            acme::account(
                &config,
                name.as_deref(),
                (*deactivate, *yes),
                &out,
                clock,
                lock_wait,
            )
            .await
        }
        Command::Revoke { name, reason, yes } => {
            let lock_wait = std::time::Duration::from_secs(cli.lock_wait);
            let config = load_config(&cli.config)?;
            acme::revoke(&config, name, reason, *yes, &out, clock, lock_wait).await
        }
        Command::Fleet(command) => fleet::run(command, &cli.config, &out, clock).await,
        Command::Renew(args) => {
            if args.names.is_empty() && !args.dry_run && !args.force {
                return run_cmds::renew_plain(&cli.config, args, &out, clock, cli.lock_wait).await;
            }
            let config = load_config(&cli.config)?;
            run_cmds::random_start_delay(args.random_delay).await;
            engine(&cli.command, &config, &out, cli.lock_wait).await
        }
        Command::Issue(_) | Command::Reissue { .. } | Command::Install { .. } => {
            let config = load_config(&cli.config)?;
            engine(&cli.command, &config, &out, cli.lock_wait).await
        }
        Command::Adopt {
            name,
            certificate_id,
            reissue,
        } => {
            let config = load_config(&cli.config)?;
            let client = client_for(&config)?;
            let summary =
                crate::engine::adopt::adopt(&config, &client, name, *certificate_id, clock.now())
                    .await?;
            if out.json {
                out.print_json(&summary)?;
            } else {
                outln!("{}", summary.message);
            }
            if !*reissue {
                return Ok(exit::OK);
            }
            engine(&cli.command, &config, &out, cli.lock_wait).await
        }
        Command::Run {
            interval,
            wait,
            first_run_delay,
        } => {
            let opts = crate::daemon::DaemonOptions {
                interval: std::time::Duration::from_secs(*interval),
                jitter: std::time::Duration::from_secs((*interval / 6).min(600)),
                run_wait: std::time::Duration::from_secs(*wait),
                first_run_delay: std::time::Duration::from_secs(*first_run_delay),
                clock,
                ..Default::default()
            };
            crate::daemon::run_daemon(&cli.config, opts).await?;
            Ok(exit::OK)
        }
        Command::Forecast { days } => {
            let config = load_config_quietly(&cli.config)?;
            let client = client_for(&config)?;
            forecast::run(&config, &client, *days, &out, clock).await
        }
        Command::Preflight { names } => {
            let config = load_config_quietly(&cli.config)?;
            preflight::run(&config, names, &out).await
        }
        Command::Status { id: None, served } => {
            status::run(&load_config_quietly(&cli.config)?, *served, &out, clock).await
        }
        Command::Serve => {
            let plan = serve::Plan::of(&load_config(&cli.config)?)?;
            serve::serve(plan).await
        }
        command => {
            let config = load_config_quietly(&cli.config)?;
            let client = client_for(&config)?;
            account::run(command, &config, &client, &out).await
        }
    }
}

/// Runs the renewal engine for `command` (one of the commands that have run options).
async fn engine(command: &Command, config: &Config, out: &Output, lock_wait: u64) -> Result<u8> {
    let Some(opts) = run_cmds::options(command, config, out) else {
        anyhow::bail!("internal: this command does not run the renewal engine");
    };
    let lock_wait = std::time::Duration::from_secs(lock_wait);
    run_cmds::run(config, &opts, out, lock_wait).await
}

/// The configuration for a command that works on certificates: its warnings (a polling
/// interval below the API's limit, a file others may write, an include directory not made
/// yet) are printed once, here.
pub(crate) fn load_config(path: &Path) -> Result<Config> {
    read_config(path, true)
}

/// The configuration for a command that only reads (the account, `status`, `discover`,
/// `fleet status`): its warnings belong to the runs and to `config check`, and are only
/// logged at debug level here.
pub(crate) fn load_config_quietly(path: &Path) -> Result<Config> {
    read_config(path, false)
}

fn read_config(path: &Path, print_warnings: bool) -> Result<Config> {
    let config = Config::load(path)?;
    if let Some(f) = &config.fleet {
        crate::store::audit::name_host(&f.host);
    }
    for warning in &config.warnings {
        if print_warnings {
            tracing::warn!("{warning}");
        } else {
            tracing::debug!("{warning}");
        }
    }
    Ok(config)
}

/// The API client as the configuration describes it.
pub(crate) fn client_for(config: &Config) -> Result<Client> {
    crate::engine::client(config)
}
