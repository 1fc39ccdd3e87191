//! `partner-sandbox serve`: runs the Partner API v1 sandbox in the foreground until Ctrl-C or
//! SIGTERM, for demos, manual testing and tests of other programs.

#![cfg_attr(not(test), warn(clippy::unwrap_used))]

use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::Context;
use clap::{Parser, Subcommand};
use partner_sandbox::state::{AccountSpec, StateConfig};
use partner_sandbox::{DcvBalance, Sandbox, SandboxConfig};

#[derive(Parser)]
#[command(
    name = "partner-sandbox",
    version,
    about = "A faithful simulator of the certificate reseller's Partner API v1",
    long_about = "A faithful simulator of the certificate reseller's Partner API v1, for tests, \
                  demos and benchmarks. It serves the partner API over HTTPS with its own CA, \
                  issues real X.509 certificates from its own root, validates domain control for \
                  real (HTTP file checks against 127.0.0.1, DNS records and email approvals set \
                  through the control API under /_sandbox/) and can inject faults. See \
                  crates/partner-sandbox/README.md."
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Serve the partner API (and the control API under /_sandbox/) until Ctrl-C or SIGTERM.
    Serve(ServeArgs),
}

#[derive(clap::Args)]
struct ServeArgs {
    /// HTTPS address of the partner API (and of the loopback-only control API).
    #[arg(long, value_name = "ADDR", default_value = "127.0.0.1:8443")]
    listen: SocketAddr,

    /// Data directory: api-ca.pem (trust anchor of the API's TLS certificate), root.pem (root of
    /// the issued certificates), the CA keys and, with --persist, state.json. Created if missing.
    #[arg(long, value_name = "DIR")]
    data: PathBuf,

    /// Also listen for plain HTTP here; every request is answered with 301 to the HTTPS URL,
    /// as the real service does.
    #[arg(long, value_name = "ADDR")]
    http_listen: Option<SocketAddr>,

    /// Plain-HTTP address serving the CRLs (GET /crl/{issuer}.crl); every certificate issued
    /// names it as its CRL distribution point. Port 0 picks a free one.
    #[arg(long, value_name = "ADDR", default_value = "127.0.0.1:0")]
    crl_listen: SocketAddr,

    /// Port(s) on 127.0.0.1 where the validator fetches HTTP_CSR_HASH files
    /// (/.well-known/pki-validation/<MD5>.txt, Host header = the domain). A list
    /// (`8081,8082`, or the flag repeated) puts the ports behind a load balancer: see
    /// --dcv-balance.
    #[arg(
        long,
        value_name = "PORT[,PORT...]",
        value_delimiter = ',',
        default_value = "80"
    )]
    dcv_http_port: Vec<u16>,

    /// Port(s) on 127.0.0.1 where the validator fetches HTTPS_CSR_HASH files (family S); the
    /// peer's certificate is not verified.
    #[arg(
        long,
        value_name = "PORT[,PORT...]",
        value_delimiter = ',',
        default_value = "443"
    )]
    dcv_https_port: Vec<u16>,

    /// How the validator picks among several DCV ports: `round-robin` (each fetch the next
    /// port), `random` (drawn with --seed), `all` (every check asks every port and passes only
    /// when all serve the file).
    #[arg(long, value_name = "MODE", default_value = "round-robin", value_parser = parse_balance)]
    dcv_balance: DcvBalance,

    /// Seed of every random ID and token (same seed, same IDs).
    #[arg(long, value_name = "N")]
    seed: Option<u64>,

    /// Virtual seconds per real second: 60 makes family C's 5-minute pickup cycle take 5 real
    /// seconds. The control API can also move the clock forward.
    #[arg(long, value_name = "F", default_value_t = 1.0)]
    time_scale: f64,

    /// JSON file with the accounts to create instead of the defaults:
    /// [{"login":"a@b.test","password":"pw","role":"partner"}, ...]; roles are partner,
    /// restricted, retail and no_agreement.
    #[arg(long, value_name = "FILE")]
    accounts: Option<PathBuf>,

    /// Validate and issue without waiting for schedules or pickup cycles (file checks are still
    /// fetched for real).
    #[arg(long)]
    instant: bool,

    /// Keep the state in DIR/state.json, so that a restarted sandbox keeps its orders.
    #[arg(long)]
    persist: bool,
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env()
                .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("partner_sandbox=info")),
        )
        .with_writer(std::io::stderr)
        .init();
    let result = match cli.command {
        Command::Serve(args) => serve(args),
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("partner-sandbox: {e:#}");
            ExitCode::FAILURE
        }
    }
}

fn serve(args: ServeArgs) -> anyhow::Result<()> {
    let accounts = match &args.accounts {
        Some(path) => {
            let text = std::fs::read_to_string(path)
                .with_context(|| format!("could not read accounts file '{}'", path.display()))?;
            let list: Vec<AccountSpec> = serde_json::from_str(&text).with_context(|| {
                format!(
                    "accounts file '{}' is not a JSON array of {{login, password, role}}",
                    path.display()
                )
            })?;
            AccountSpec::validate(&list)
                .map_err(|e| anyhow::anyhow!("accounts file '{}': {e}", path.display()))?;
            Some(list)
        }
        None => None,
    };
    if !(args.time_scale.is_finite() && args.time_scale > 0.0) {
        anyhow::bail!(
            "--time-scale must be a positive number, not {}",
            args.time_scale
        );
    }
    let config = SandboxConfig {
        data_dir: Some(args.data.clone()),
        listen: args.listen,
        seed: args.seed,
        time_scale: args.time_scale,
        dcv_http_ports: args.dcv_http_port.clone(),
        dcv_https_ports: args.dcv_https_port.clone(),
        dcv_balance: args.dcv_balance,
        http_listen: args.http_listen,
        crl_listen: args.crl_listen,
        state: StateConfig {
            accounts: accounts.clone(),
            ..StateConfig::default()
        },
        instant: args.instant,
        persist: args.persist,
        ..SandboxConfig::default()
    };
    let sandbox = Sandbox::start(config).context("could not start the sandbox")?;

    println!("partner-sandbox: Partner API v1 at {}", sandbox.base_url());
    println!(
        "  CA file (API TLS and issued): {}",
        sandbox.api_ca_path().display()
    );
    println!(
        "  root of issued certificates: {}",
        sandbox.root_path().display()
    );
    if let Some(http) = sandbox.http_addr() {
        println!("  plain HTTP (301 to HTTPS):   http://{http}");
    }
    println!(
        "  CRLs (plain HTTP):           {}",
        sandbox.crl_url("{issuer}")
    );
    let ports = |v: &[u16]| v.iter().map(u16::to_string).collect::<Vec<_>>().join(",");
    let several = args.dcv_http_port.len() > 1 || args.dcv_https_port.len() > 1;
    println!(
        "  DCV file checks:             http://127.0.0.1:{} and https://127.0.0.1:{}{}",
        ports(&args.dcv_http_port),
        ports(&args.dcv_https_port),
        if several {
            format!(" (balance: {})", args.dcv_balance.name())
        } else {
            String::new()
        }
    );
    println!(
        "  control API (loopback only): {}/_sandbox/",
        sandbox.base_url()
    );
    println!(
        "  clock: x{}{}{}",
        args.time_scale,
        if args.instant {
            ", instant validation"
        } else {
            ""
        },
        if args.persist {
            ", state persisted"
        } else {
            ""
        }
    );
    println!("  accounts (login, role, password, public token for products):");
    let specs = accounts.unwrap_or_else(AccountSpec::defaults);
    for info in sandbox.accounts() {
        let password = specs
            .iter()
            .find(|s| s.login == info.login)
            .map_or("?", |s| s.password.as_str());
        println!(
            "    {:<28} {:<13} {:<12} {}",
            info.login, info.role, password, info.public_token
        );
    }
    println!("Ctrl-C to stop.");

    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .context("could not start the signal handler")?;
    rt.block_on(wait_for_signal())?;
    eprintln!("partner-sandbox: stopping");
    drop(sandbox);
    Ok(())
}

fn parse_balance(s: &str) -> Result<DcvBalance, String> {
    DcvBalance::parse(s).ok_or_else(|| format!("'{s}' is not one of round-robin, random, all"))
}

async fn wait_for_signal() -> anyhow::Result<()> {
    let mut term = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate())
        .context("could not listen for SIGTERM")?;
    tokio::select! {
        r = tokio::signal::ctrl_c() => r.context("could not listen for Ctrl-C")?,
        _ = term.recv() => {}
    }
    Ok(())
}
