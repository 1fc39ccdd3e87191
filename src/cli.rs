//! Command-line interface: runs each `cert-agent` command and formats its output (aligned
//! tables for people, `--json` for programs). Errors carry context naming what failed; `main`
//! prints the whole chain and maps it to the documented exit codes.

mod args;
mod serve;
mod table;

/// `println!` that ends the process quietly when stdout is a closed pipe (`cert-agent list |
/// head`), instead of panicking.
macro_rules! outln {
    ($($arg:tt)*) => {{
        use std::io::Write as _;
        if let Err(e) = writeln!(std::io::stdout(), $($arg)*) {
            $crate::cli::stdout_failed(&e);
        }
    }};
}

/// `print!` with the same handling as [`outln!`].
macro_rules! out {
    ($($arg:tt)*) => {{
        use std::io::Write as _;
        if let Err(e) = write!(std::io::stdout(), $($arg)*) {
            $crate::cli::stdout_failed(&e);
        }
    }};
}

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use anyhow::{Context, Result, bail};
use clap::Parser;
use serde::Serialize;

use crate::api::{self, ApiError, Client};
use crate::config::Config;
use crate::fsutil;

pub use args::{Cli, Command, ConfigCommand, DcvCommand, IssueArgs, ListArgs, RenewArgs, Scope};
use table::{Table, money, terminal_width};

/// Stdout could not be written: a closed pipe ends the process as `SIGPIPE` would (status
/// 141, nothing printed); any other error is reported.
pub(crate) fn stdout_failed(e: &std::io::Error) {
    if e.kind() == std::io::ErrorKind::BrokenPipe {
        std::process::exit(141);
    }
    eprintln!("error: could not write to standard output: {e}");
    std::process::exit(i32::from(exit::ERROR));
}

/// Exit codes of DESIGN.md.
pub mod exit {
    /// Done, nothing left to do.
    pub const OK: u8 = 0;
    /// An error.
    pub const ERROR: u8 = 1;
    /// Usage or configuration error.
    pub const USAGE: u8 = 2;
    /// Some certificates failed, others succeeded.
    pub const PARTIAL: u8 = 3;
    /// Work is pending at the CA; the next run continues.
    pub const PENDING: u8 = 75;

    /// The exit code of a run that ended with `status`.
    pub fn of_run(status: crate::renew::RunStatus) -> u8 {
        use crate::renew::RunStatus;
        match status {
            RunStatus::Done => OK,
            RunStatus::Pending => PENDING,
            RunStatus::Partial => PARTIAL,
            RunStatus::Failed => ERROR,
        }
    }
}

/// A usage or configuration error: exits with code 2.
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
pub struct UsageError(pub String);

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
    match runtime.block_on(run(&cli)) {
        Ok(code) => ExitCode::from(code),
        Err(err) => {
            eprintln!("error: {err:#}");
            ExitCode::from(exit_code_for(&err))
        }
    }
}

fn exit_code_for(err: &anyhow::Error) -> u8 {
    for cause in err.chain() {
        if cause.downcast_ref::<UsageError>().is_some()
            || cause.downcast_ref::<crate::config::ConfigError>().is_some()
            || cause
                .downcast_ref::<crate::renew::UnknownCertificate>()
                .is_some()
        {
            return exit::USAGE;
        }
    }
    exit::ERROR
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
    let filter = format!("warn,cert_agent={level}");
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
    let out = Output { json: cli.json };
    match &cli.command {
        Command::Config(ConfigCommand::Check) => config_check(&cli.config, &out),
        Command::Renew(args) => {
            let config = load_config(&cli.config)?;
            random_start_delay(args.random_delay).await;
            let opts = crate::renew::RunOptions {
                names: args.names.clone(),
                dry_run: args.dry_run,
                force: args.force,
                wait: std::time::Duration::from_secs(args.wait),
                allow_orders: config.agent.allow_orders,
                // Unattended runs (no names) respect the backoff after failures; a named
                // certificate is an operator's request to try now.
                ignore_backoff: !args.names.is_empty() || args.force,
                stop: stop_on_signals(),
                ..Default::default()
            };
            renew(&config, &opts, &out).await
        }
        Command::Reissue {
            name,
            reuse_key,
            wait,
        } => {
            let config = load_config(&cli.config)?;
            let opts = crate::renew::RunOptions {
                names: vec![name.clone()],
                force: true,
                reuse_key: *reuse_key,
                wait: std::time::Duration::from_secs(*wait),
                // A reissue is free; it never places an order.
                allow_orders: false,
                ignore_backoff: true,
                stop: stop_on_signals(),
                ..Default::default()
            };
            renew(&config, &opts, &out).await
        }
        Command::Install { name } => {
            let config = load_config(&cli.config)?;
            let opts = crate::renew::RunOptions {
                names: vec![name.clone()],
                reinstall: true,
                allow_orders: false,
                ignore_backoff: true,
                stop: stop_on_signals(),
                ..Default::default()
            };
            renew(&config, &opts, &out).await
        }
        Command::Adopt {
            name,
            certificate_id,
            reissue,
        } => {
            let config = load_config(&cli.config)?;
            let client = client_for(&config)?;
            let summary =
                crate::renew::adopt::adopt(&config, &client, name, *certificate_id).await?;
            if out.json {
                out.print_json(&summary)?;
            } else {
                outln!("{}", summary.message);
            }
            if !*reissue {
                return Ok(exit::OK);
            }
            let opts = crate::renew::RunOptions {
                names: vec![name.clone()],
                force: true,
                allow_orders: false,
                ignore_backoff: true,
                stop: stop_on_signals(),
                ..Default::default()
            };
            renew(&config, &opts, &out).await
        }
        Command::Run { interval, wait } => {
            let opts = crate::daemon::DaemonOptions {
                interval: std::time::Duration::from_secs(*interval),
                jitter: std::time::Duration::from_secs((*interval / 6).min(600)),
                run_wait: std::time::Duration::from_secs(*wait),
                ..Default::default()
            };
            crate::daemon::run_daemon(&cli.config, opts).await?;
            Ok(exit::OK)
        }
        Command::Status { id: None } => {
            let config = load_config(&cli.config)?;
            local_status(&config, &out)
        }
        Command::Serve => {
            let plan = serve::Plan::of(&load_config(&cli.config)?)?;
            serve::serve(plan).await
        }
        Command::Issue(args) => {
            let config = load_config(&cli.config)?;
            let opts = crate::renew::RunOptions {
                names: vec![args.name.clone()],
                dry_run: false,
                force: false,
                wait: std::time::Duration::from_secs(args.wait),
                allow_orders: args.yes || config.agent.allow_orders,
                clear_intent: args.clear_intent,
                ignore_backoff: true,
                replace_ended: true,
                stop: stop_on_signals(),
                ..Default::default()
            };
            renew(&config, &opts, &out).await
        }
        command => {
            let config = load_config(&cli.config)?;
            let client = client_for(&config)?;
            run_api_command(command, &config, &client, &out).await
        }
    }
}

fn load_config(path: &Path) -> Result<Config> {
    let config = Config::load(path)?;
    for warning in &config.warnings {
        tracing::warn!("{warning}");
    }
    Ok(config)
}

/// The API client as the configuration describes it.
pub fn client_for(config: &Config) -> Result<Client> {
    let options = config.client_options();
    Client::new(options).context("could not set up the Partner API client")
}

fn config_check(path: &Path, out: &Output) -> Result<u8> {
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

struct Output {
    json: bool,
}

impl Output {
    fn print_json<T: Serialize + ?Sized>(&self, value: &T) -> Result<()> {
        let text = serde_json::to_string_pretty(value).context("could not encode JSON output")?;
        outln!("{text}");
        Ok(())
    }

    fn table(&self, table: &Table) {
        out!("{}", table.render(terminal_width()));
    }
}

async fn run_api_command(
    command: &Command,
    config: &Config,
    client: &Client,
    out: &Output,
) -> Result<u8> {
    let result = api_command(command, config, client, out).await;
    match (result, certificate_arg(command)) {
        (Err(e), Some(id)) if api_status(&e) == Some(404) => Err(e.context(format!(
            "certificate {id} was not found: it does not exist or belongs to another account"
        ))),
        (other, _) => other,
    }
}

/// The certificate ID a command names, if any.
fn certificate_arg(command: &Command) -> Option<u64> {
    match command {
        Command::Show { id }
        | Command::Status { id: Some(id) }
        | Command::Cancel { id, .. }
        | Command::Prolong { id, .. }
        | Command::Download { id, .. }
        | Command::Dcv(
            DcvCommand::Status { id } | DcvCommand::Change { id, .. } | DcvCommand::Resend { id },
        ) => Some(*id),
        _ => None,
    }
}

async fn api_command(
    command: &Command,
    config: &Config,
    client: &Client,
    out: &Output,
) -> Result<u8> {
    match command {
        Command::Products { eu_prices } => products(client, *eu_prices, out).await,
        Command::Balance => balance(client, out).await,
        Command::List(args) => list(client, args, out).await,
        Command::Show { id } => show(client, *id, out).await,
        Command::Status { id: Some(id) } => status(client, *id, out).await,
        Command::Software { product_id } => software(client, *product_id, out).await,
        Command::Countries => countries(client, out).await,
        Command::Dcv(cmd) => dcv(client, cmd, out).await,
        Command::Cancel { id, yes } => cancel(client, *id, *yes, out).await,
        Command::Prolong { id, show_token } => prolong(client, config, *id, *show_token, out).await,
        Command::Download { id, bundle, output } => {
            download(client, *id, *bundle, output.as_deref()).await
        }
        Command::Config(_)
        | Command::Renew(_)
        | Command::Issue(_)
        | Command::Reissue { .. }
        | Command::Install { .. }
        | Command::Adopt { .. }
        | Command::Run { .. }
        | Command::Serve
        | Command::Status { id: None } => unreachable_config(),
    }
}

fn unreachable_config() -> Result<u8> {
    bail!("internal: this command is handled before the account commands")
}

async fn renew(config: &Config, opts: &crate::renew::RunOptions, out: &Output) -> Result<u8> {
    use crate::renew::Outcome;
    let report = match crate::renew::run(config, opts).await {
        Ok(r) => r,
        Err(e) => {
            if let Some(crate::store::StoreError::Locked { .. }) =
                e.downcast_ref::<crate::store::StoreError>()
            {
                eprintln!("{e:#}");
                return Ok(exit::PENDING);
            }
            return Err(e);
        }
    };
    if out.json {
        out.print_json(&report)?;
        return Ok(exit::of_run(report.status()));
    }
    // One write for the whole report (thousands of lines on a large host).
    let mut text = String::new();
    for c in &report.certificates {
        use std::fmt::Write as _;
        let _ = match &c.outcome {
            Outcome::Unchanged { reason } => writeln!(text, "{}: nothing to do ({reason})", c.name),
            Outcome::Installed {
                certificate_id,
                serial,
                not_after,
            } => writeln!(
                text,
                "{}: installed certificate {certificate_id}, serial {serial}, valid until {}",
                c.name,
                not_after
                    .format(&time::format_description::well_known::Rfc3339)
                    .unwrap_or_default()
            ),
            Outcome::Pending { reason } => writeln!(text, "{}: pending: {reason}", c.name),
            Outcome::Planned { action } => writeln!(text, "{}: would {action}", c.name),
            Outcome::Failed { error } => {
                eprintln!("{}: error: {error}", c.name);
                Ok(())
            }
        };
    }
    out!("{text}");
    Ok(exit::of_run(report.status()))
}

fn or_dash(v: Option<impl ToString>) -> String {
    v.map(|s| s.to_string()).unwrap_or_else(|| "-".to_owned())
}

async fn products(client: &Client, eu_prices: bool, out: &Output) -> Result<u8> {
    let products = client.products(eu_prices).await?;
    if out.json {
        out.print_json(&products)?;
        return Ok(exit::OK);
    }
    // Prices are net, in the account currency (EUR with --eu-prices); the balance call is the
    // only one that names the account currency.
    let currency = if eu_prices {
        Some("EUR".to_owned())
    } else {
        client.balance().await.ok().map(|b| b.balance.currency)
    };
    let mut sorted = products;
    sorted.sort_by(|a, b| b.prio.cmp(&a.prio).then(a.id.cmp(&b.id)));
    let mut t = Table::new(&[
        "ID",
        "PRODUCT",
        "BRAND",
        "VALIDATION",
        "TYPE",
        "ISSUER",
        "PRICES",
    ])
    .right(0)
    .flex(1);
    for p in &sorted {
        let mut prices: Vec<String> = p
            .prices
            .iter()
            .filter_map(|pr| {
                let value = pr.value.as_ref()?;
                Some(match pr.period {
                    Some(y) => format!("{y}y {}", money(value.as_str())),
                    None => money(value.as_str()),
                })
            })
            .collect();
        if let (Some(cur), false) = (&currency, prices.is_empty()) {
            prices.push(cur.clone());
        }
        t.row([
            p.id.to_string(),
            or_dash(p.name.as_deref()),
            or_dash(p.brand.as_deref()),
            or_dash(p.validation_type.as_deref()),
            or_dash(p.product_type.as_ref().map(|t| t.as_str().to_owned())),
            or_dash(p.issuer.as_deref()),
            prices.join(", "),
        ]);
    }
    out.table(&t);
    if !eu_prices {
        outln!("\nPrices are net per period (years); VAT is added on the invoice.");
    }
    Ok(exit::OK)
}

async fn balance(client: &Client, out: &Output) -> Result<u8> {
    let b = client.balance().await?;
    if out.json {
        out.print_json(&b)?;
        return Ok(exit::OK);
    }
    let mut t = Table::new(&["", "AMOUNT", "CURRENCY"]).right(1);
    for (name, amount) in [
        ("balance", &b.balance),
        ("reserved", &b.reserved),
        ("common", &b.common),
        ("prepayment", &b.prepayment),
        ("available", &b.available),
    ] {
        t.row([
            name.to_owned(),
            money(amount.sum.as_str()),
            amount.currency.clone(),
        ]);
    }
    out.table(&t);
    Ok(exit::OK)
}

async fn list(client: &Client, args: &ListArgs, out: &Output) -> Result<u8> {
    let scope = args.scope.map(list_scope);
    let q = args.q.as_deref();
    let (certs, pagination) = if args.all {
        (client.list_all(scope, q).await?, None)
    } else if args.page.is_some() || scope.is_some() || q.is_some() {
        let page = client.list(args.page.unwrap_or(1), scope, q).await?;
        (page.certificates, page.pagination)
    } else {
        (client.list_unpaged().await?, None)
    };
    if out.json {
        #[derive(Serialize)]
        struct ListOut<'a> {
            certificates: &'a [api::Certificate],
            #[serde(skip_serializing_if = "Option::is_none")]
            pagination: Option<&'a api::Pagination>,
        }
        out.print_json(&ListOut {
            certificates: &certs,
            pagination: pagination.as_ref(),
        })?;
        return Ok(exit::OK);
    }
    let mut t = Table::new(&[
        "ID",
        "STATE",
        "DOMAIN",
        "PRODUCT",
        "VALID TO",
        "SUBSCRIPTION TO",
        "PRICE",
    ])
    .right(0)
    .right(6)
    .flex(3);
    for c in &certs {
        let state = c
            .status
            .code
            .as_ref()
            .map(|s| s.as_str().to_owned())
            .or_else(|| c.status.description.clone());
        let mut domain = or_dash(c.domain_name.as_deref());
        let extra = c.domain_names.as_ref().map_or(0, Vec::len);
        if extra > 0 {
            domain.push_str(&format!(" (+{extra})"));
        }
        let price = match (&c.price, &c.currency) {
            (Some(p), Some(cur)) => format!("{} {cur}", money(p.as_str())),
            (Some(p), None) => money(p.as_str()),
            _ => "-".to_owned(),
        };
        t.row([
            c.internal_number.to_string(),
            or_dash(state),
            domain,
            c.name.clone(),
            or_dash(c.valid_to.as_deref()),
            or_dash(c.subscription_valid_to.as_deref()),
            price,
        ]);
    }
    if t.is_empty() {
        outln!("no certificates");
    } else {
        out.table(&t);
    }
    if let Some(p) = pagination.as_ref().filter(|p| p.total != Some(0)) {
        outln!(
            "\npage {} of {} ({} certificates){}",
            args.page.unwrap_or(1),
            or_dash(p.total_pages),
            or_dash(p.total),
            p.next_page
                .map(|n| format!("; next: --page {n}"))
                .unwrap_or_default()
        );
    }
    Ok(exit::OK)
}

fn list_scope(scope: Scope) -> api::ListScope {
    match scope {
        Scope::Issued => api::ListScope::ApiIssued,
        Scope::InProgress => api::ListScope::ApiInProgress,
        Scope::Annulled => api::ListScope::ApiAnnulled,
    }
}

async fn show(client: &Client, id: u64, out: &Output) -> Result<u8> {
    let d = client.details(id).await?;
    if out.json {
        out.print_json(&d)?;
        return Ok(exit::OK);
    }
    let state = d.status.certificate.as_ref().map(|s| s.as_str().to_owned());
    let mut rows: Vec<(&str, String)> = vec![
        ("certificate", d.id.to_string()),
        ("state", or_dash(state)),
        ("product", format!("{} (ID {})", d.name, d.nomenclature_id)),
        ("common name", d.common_name.clone()),
        ("domains", d.all_domains.join(", ")),
        ("CA order", or_dash(d.external_number.as_deref())),
        (
            "valid",
            format!(
                "{} .. {}",
                or_dash(d.valid_from.as_deref()),
                or_dash(d.valid_to.as_deref())
            ),
        ),
    ];
    if d.subscription_valid_from.is_some() || d.subscription_valid_to.is_some() {
        rows.push((
            "subscription",
            format!(
                "{} .. {}{}",
                or_dash(d.subscription_valid_from.as_deref()),
                or_dash(d.subscription_valid_to.as_deref()),
                d.subscription_duration
                    .map(|n| format!(" ({n} days)"))
                    .unwrap_or_default()
            ),
        ));
    }
    if let Some(r) = d.replacement_id {
        rows.push(("replaced by", r.to_string()));
    }
    if let Some(p) = d.prolonged_id {
        rows.push(("renews", p.to_string()));
    }
    rows.push(("DCV method", d.dcv_method.clone()));
    if !d.validation_email.is_empty() && d.validation_email != d.dcv_method {
        rows.push(("validation email", d.validation_email.clone()));
    }
    for (domain, email) in &d.additional_validation_emails {
        rows.push(("", format!("{domain}: {email}")));
    }
    let price = match &d.price {
        Some(p) => format!(
            "{} {}{}",
            money(p.as_str()),
            d.currency,
            if d.price_includes_vat {
                " (incl. VAT)"
            } else {
                ""
            }
        ),
        None => "-".to_owned(),
    };
    rows.push(("price", price));
    rows.push(("payment", d.payment_status.clone()));
    let width = rows.iter().map(|(k, _)| k.len()).max().unwrap_or(0);
    for (k, v) in rows {
        if k.is_empty() {
            outln!("{:width$}  {v}", "");
        } else {
            outln!("{k:width$}  {v}");
        }
    }
    if let Some(content) = &d.dcv_content {
        outln!("\nDCV content:\n{content}");
    }
    Ok(exit::OK)
}

/// `renew --random-delay SECS`: a random sleep before an unattended run that systemd did not
/// start (cron); none on a terminal or under systemd (`INVOCATION_ID` set).
async fn random_start_delay(max_secs: u64) {
    let unattended = !std::io::IsTerminal::is_terminal(&std::io::stderr())
        && std::env::var_os("INVOCATION_ID").is_none();
    if max_secs == 0 || !unattended {
        return;
    }
    let secs = rand::random_range(0..=max_secs);
    tracing::info!("waiting {secs} s before starting (--random-delay)");
    tokio::time::sleep(std::time::Duration::from_secs(secs)).await;
}

/// A stop channel that turns `true` on the first SIGTERM or SIGINT: the run stops waiting,
/// removes what it published for validation and reports the rest as pending. A second signal
/// ends the process at once.
fn stop_on_signals() -> Option<tokio::sync::watch::Receiver<bool>> {
    use tokio::signal::unix::{SignalKind, signal};
    let (tx, rx) = tokio::sync::watch::channel(false);
    let mut term = signal(SignalKind::terminate()).ok()?;
    let mut int = signal(SignalKind::interrupt()).ok()?;
    tokio::spawn(async move {
        tokio::select! {
            _ = term.recv() => {}
            _ = int.recv() => {}
        }
        eprintln!("stopping: cleaning up what this run published (a second signal stops at once)");
        let _ = tx.send(true);
        tokio::select! {
            _ = term.recv() => {}
            _ = int.recv() => {}
        }
        std::process::exit(130);
    });
    Some(rx)
}

/// `status` without an ID: every configured certificate from local state (no API call).
fn local_status(config: &Config, out: &Output) -> Result<u8> {
    let rows = crate::renew::status::collect(config)?;
    if out.json {
        out.print_json(&rows)?;
        return Ok(exit::OK);
    }
    let mut t = Table::new(&[
        "NAME",
        "CERT ID",
        "STATE",
        "SERIAL",
        "EXPIRES",
        "DAYS",
        "SUBSCRIPTION",
        "NEXT",
    ])
    .right(1)
    .right(5)
    .flex(7);
    for r in &rows {
        t.row([
            r.name.clone(),
            or_dash(r.certificate_id),
            r.state.clone(),
            or_dash(r.serial.as_deref()),
            or_dash(r.expires.map(|d| d.date())),
            or_dash(r.days_left),
            or_dash(r.subscription_ends.map(|d| d.date())),
            r.next_action.clone(),
        ]);
    }
    out.table(&t);
    for r in &rows {
        if let Some(e) = &r.last_error {
            outln!("{}: last error: {e}", r.name);
        }
        if let Some(w) = &r.warning {
            outln!("{}: {w}", r.name);
        }
    }
    Ok(exit::OK)
}

async fn status(client: &Client, id: u64, out: &Output) -> Result<u8> {
    let s = client.status(id).await?;
    if out.json {
        out.print_json(&s)?;
        return Ok(exit::OK);
    }
    outln!(
        "certificate {id}: {}",
        or_dash(s.certificate.as_ref().map(|c| c.as_str().to_owned()))
    );
    Ok(exit::OK)
}

async fn software(client: &Client, product_id: u64, out: &Output) -> Result<u8> {
    let list = client.ssl_server_softwares(product_id).await?;
    if out.json {
        out.print_json(&list)?;
        return Ok(exit::OK);
    }
    let mut t = Table::new(&["ID", "CODE", "NAME", "ISSUER"])
        .right(0)
        .flex(2);
    for s in &list {
        t.row([
            s.id.to_string(),
            or_dash(s.code.as_deref()),
            or_dash(s.name.as_deref()),
            or_dash(s.issuer.as_deref()),
        ]);
    }
    out.table(&t);
    outln!(
        "\nSet `ssl_server_software_id` in a [[certificate]] to one of these IDs (0: the CA's default)."
    );
    Ok(exit::OK)
}

async fn countries(client: &Client, out: &Output) -> Result<u8> {
    let list = client.countries().await?;
    if out.json {
        out.print_json(&list)?;
        return Ok(exit::OK);
    }
    let mut t = Table::new(&["ID", "CODE", "NAME"]).right(0).flex(2);
    for c in &list {
        t.row([
            or_dash(c.id),
            or_dash(c.code.as_deref()),
            or_dash(c.name.as_deref()),
        ]);
    }
    out.table(&t);
    Ok(exit::OK)
}

async fn dcv(client: &Client, cmd: &DcvCommand, out: &Output) -> Result<u8> {
    match cmd {
        DcvCommand::Emails { domain, provider } => {
            let emails = client.dcv_emails(domain, provider.as_deref()).await?;
            if out.json {
                out.print_json(&emails)?;
                return Ok(exit::OK);
            }
            let all = emails.all();
            if all.is_empty() {
                outln!("the CA reports no validation addresses for {domain}");
            }
            for (group, list) in [
                ("whois", &emails.whois),
                ("level 2", &emails.level_2),
                ("level 3", &emails.level_3),
            ] {
                if let Some(list) = list.as_ref().filter(|l| !l.is_empty()) {
                    outln!("{group}:");
                    for e in list {
                        outln!("  {e}");
                    }
                }
            }
            if let Some(v) = &emails.random_value {
                outln!("DNS TXT value: {v}");
            }
            Ok(exit::OK)
        }
        DcvCommand::Status { id } => {
            let s = client.dcv_status(*id).await?;
            if out.json {
                out.print_json(&s)?;
                return Ok(exit::OK);
            }
            let mut t = Table::new(&["DOMAIN", "VALID", "SENT", "METHOD", "STATUS"]).flex(3);
            for (domain, d) in &s.domains {
                let yes_no = |b: Option<bool>| match b {
                    Some(true) => "yes",
                    Some(false) => "no",
                    None => "-",
                };
                t.row([
                    domain.clone(),
                    yes_no(d.valid).to_owned(),
                    yes_no(d.sent).to_owned(),
                    or_dash(d.method.as_deref().or(d.dcv_method.as_deref())),
                    or_dash(d.status.as_deref()),
                ]);
            }
            out.table(&t);
            for (domain, d) in &s.domains {
                if let Some(h) = &d.hashes {
                    outln!(
                        "{domain}: CSR MD5 {} SHA-256 {}",
                        or_dash(h.md5.as_deref()),
                        or_dash(h.sha1.as_deref())
                    );
                }
            }
            if let Some(u) = &s.unique_value {
                outln!("unique value: {u}");
            }
            Ok(exit::OK)
        }
        DcvCommand::Change { id, target, domain } => {
            let r = client.change_dcv(*id, target, domain.as_deref()).await?;
            action_done(&r, out)
        }
        DcvCommand::Resend { id } => {
            let r = client.resend_dcv(*id).await?;
            action_done(&r, out)
        }
    }
}

fn action_done(r: &api::ActionResult, out: &Output) -> Result<u8> {
    if out.json {
        out.print_json(r)?;
    } else {
        outln!("{}", r.result.as_deref().unwrap_or("done"));
    }
    Ok(exit::OK)
}

async fn cancel(client: &Client, id: u64, yes: bool, out: &Output) -> Result<u8> {
    if !yes {
        return Err(UsageError(format!(
            "cancelling certificate {id} needs --yes. A cancellation is a request to the \
             service's staff and cannot be taken back; it is possible for any certificate not \
             yet issued, and for an issued one only within 28 days of its issuance."
        ))
        .into());
    }
    let r = client.cancel(id).await?;
    action_done(&r, out)
}

/// Base of the order site where renewal orders are completed (`api.order_site_url`).
fn order_site_url(config: &Config) -> Option<&str> {
    config.api.order_site_url.as_deref()
}

async fn prolong(
    client: &Client,
    config: &Config,
    id: u64,
    show_token: bool,
    out: &Output,
) -> Result<u8> {
    let p = client.prolong(id).await?;
    let Some(token) = p.prolongation_token else {
        if out.json {
            out.print_json(&serde_json::json!({ "certificate": id, "prepared": false }))?;
        } else {
            outln!(
                "no renewal order can be prepared for certificate {id}: it was already renewed \
                 or replaced by a reissue, there is no order to renew, or its multi-year \
                 subscription ends more than 3 months from now (reissue instead)"
            );
        }
        return Ok(exit::OK);
    };
    let path = crate::store::Store::open(&config.agent.state_dir)
        .and_then(|store| store.save_prolongation_token(id, token.expose()))
        .context("could not store the renewal token")?;
    let link = order_site_url(config).map(|base| {
        format!(
            "{}/lead/continue_order/{}",
            base.trim_end_matches('/'),
            token.expose()
        )
    });
    if out.json {
        let mut v = serde_json::json!({
            "certificate": id,
            "prepared": true,
            "token_file": path,
        });
        if show_token {
            v["prolongation_token"] = serde_json::Value::String(token.expose().to_owned());
            if let Some(link) = &link {
                v["link"] = serde_json::Value::String(link.clone());
            }
        }
        out.print_json(&v)?;
        return Ok(exit::OK);
    }
    outln!(
        "a renewal order is prepared for certificate {id}; nothing is billed until it is \
         completed on the order site."
    );
    outln!("token stored in {} (mode 0600)", path.display());
    if show_token {
        match &link {
            Some(link) => outln!("complete it at: {link}"),
            None => outln!(
                "token: {} (complete it at <order site>/lead/continue_order/<token>; set \
                 api.order_site_url to get the link)",
                token.expose()
            ),
        }
        outln!("the link signs in as your partner account: do not share it");
    } else {
        outln!("run again with --show-token to print the completion link");
    }
    Ok(exit::OK)
}

async fn download(client: &Client, id: u64, bundle: bool, output: Option<&Path>) -> Result<u8> {
    let d = if bundle {
        client.download_bundle(id).await?
    } else {
        client.download(id).await?
    };
    match output {
        Some(p) if p == Path::new("-") => {
            let mut stdout = std::io::stdout().lock();
            stdout
                .write_all(&d.bytes)
                .and_then(|()| stdout.flush())
                .context("could not write the archive to stdout")?;
            return Ok(exit::OK);
        }
        _ => {}
    }
    let path = match output {
        Some(p) => p.to_path_buf(),
        None => PathBuf::from(d.filename.clone().unwrap_or_else(|| {
            if bundle {
                format!("bundle-{id}.zip")
            } else {
                format!("certificate-{id}.zip")
            }
        })),
    };
    fsutil::write_atomic(&path, &d.bytes, 0o644)
        .with_context(|| format!("could not write {}", path.display()))?;
    eprintln!("wrote {} ({} bytes)", path.display(), d.bytes.len());
    Ok(exit::OK)
}

/// True when `err` is (or wraps) an [`ApiError`] answered with HTTP `status`.
pub fn api_status(err: &anyhow::Error) -> Option<u16> {
    err.chain()
        .find_map(|c| c.downcast_ref::<ApiError>())
        .and_then(ApiError::status)
}
