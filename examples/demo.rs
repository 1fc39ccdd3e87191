//! The main job end to end against the bundled Partner API sandbox, with no account and no
//! root: start the sandbox, write a configuration into a temporary directory, run
//! `cert-agent renew` (order, domain control validation, issuance, download, install, reload)
//! and show the installed certificate. Where nginx is installed it serves the certificate from
//! a private instance on a free port; otherwise the validation file comes from cert-agent's
//! built-in standalone server.
//!
//! ```sh
//! cargo run --example demo            # run once and show the result
//! cargo run --example demo -- --serve # keep nginx (and the sandbox) running until Ctrl-C
//! ```

#[path = "../tests/suite/support/webserver.rs"]
mod webserver;

use std::fs;
use std::path::Path;
use std::process::ExitCode;

use anyhow::{Context, Result, bail};
use clap::Parser;
use partner_sandbox::{Sandbox, SandboxConfig};

const DOMAIN: &str = "www.example.test";

fn main() -> ExitCode {
    match demo() {
        Ok(code) => ExitCode::from(code),
        Err(e) => {
            eprintln!("demo failed: {e:#}");
            ExitCode::FAILURE
        }
    }
}

fn demo() -> Result<u8> {
    let serve = std::env::args().any(|a| a == "--serve");
    let dir = tempfile::Builder::new()
        .prefix("cert-agent-demo-")
        .tempdir()
        .context("could not create a temporary directory")?
        .keep();
    println!("working directory: {}", dir.display());

    let sandbox = Sandbox::start(
        SandboxConfig::default()
            .data_dir(dir.join("sandbox"))
            .instant(true),
    )
    .context("could not start the sandbox")?;
    println!("Partner API sandbox: {}", sandbox.base_url());

    let out = dir.join("ssl");
    fs::create_dir_all(&out)?;
    let (fullchain, key) = (out.join("fullchain.pem"), out.join("privkey.pem"));
    let password = dir.join("password");
    write_private(&password, b"sandbox")?;

    let nginx_found = webserver::Nginx::binary().is_some();
    let mut nginx = None;
    let server_part = if nginx_found {
        // nginx needs a certificate to start: a self-signed placeholder, replaced by the run.
        placeholder(&fullchain, &key)?;
        let webroot = dir.join("www");
        fs::create_dir_all(&webroot)?;
        let site = webserver::Site::new(DOMAIN, &fullchain, &key, &webroot);
        let n = webserver::Nginx::start_on_free_ports(&dir.join("nginx"), &[site])
            .context("could not start nginx")?;
        sandbox.set_dcv_ports(n.http_port, 0);
        println!(
            "nginx: http://127.0.0.1:{} (validation files), https://{}",
            n.http_port,
            n.https_addr()
        );
        let part = format!(
            "webroot = {webroot:?}\nserver = \"nginx\"\nfullchain_path = {fullchain:?}\n\
             key_path = {key:?}\nconfigtest_command = {:?}\nreload_command = {:?}\n\
             verify_address = {:?}\n",
            n.configtest_command(),
            n.reload_command(),
            n.https_addr()
        );
        nginx = Some(n);
        part
    } else {
        let port = webserver::free_port();
        sandbox.set_dcv_ports(port, 0);
        println!("nginx is not installed: validation through the standalone server on port {port}");
        format!(
            "standalone = true\nlisten = \"127.0.0.1:{port}\"\nserver = \"none\"\n\
             cert_path = {:?}\nchain_path = {:?}\nfullchain_path = {fullchain:?}\n\
             key_path = {key:?}\n",
            out.join("cert.pem"),
            out.join("chain.pem")
        )
    };

    let config = dir.join("config.toml");
    let text = format!(
        "[api]\nbase_url = {:?}\nlogin = \"partner@sandbox.test\"\npassword_file = {password:?}\n\
         ca_file = {:?}\n\n[agent]\nstate_dir = {:?}\npoll_interval_secs = 1\nallow_orders = true\n\
         max_order_price = \"20.00\"\n\n\
         # The sandbox's names are in no DNS: the pre-flight's DNS checks are off.\n\
         [preflight]\ncaa = false\ndnssec = false\nhttp = false\n\n[defaults]\ncountry = \"DE\"\nregion = \"Berlin\"\n\
         city = \"Berlin\"\n\n[[certificate]]\nname = \"www\"\ndomains = [{DOMAIN:?}]\n\
         product_id = 1101\ndays = 365\n{server_part}",
        sandbox.base_url(),
        sandbox.api_ca_path(),
        dir.join("state"),
    );
    fs::write(&config, text)?;
    println!("configuration: {}\n", config.display());
    println!("$ cert-agent --config {} renew", config.display());

    let cli = cert_agent::testing::cli::Cli::try_parse_from([
        "cert-agent".as_ref(),
        "--config".as_ref(),
        config.as_os_str(),
        "renew".as_ref(),
        "--wait".as_ref(),
        "60".as_ref(),
    ] as [&std::ffi::OsStr; 6])?;
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    let code = runtime.block_on(cert_agent::testing::cli::run(&cli))?;
    if code != 0 {
        bail!("cert-agent renew exited with {code}");
    }

    let pem = fs::read(&fullchain)?;
    let info = cert_agent::testing::crypto::CertificateInfo::from_pem(&pem)?;
    let fmt = |t: time::OffsetDateTime| {
        t.format(&time::format_description::well_known::Rfc3339)
            .unwrap_or_default()
    };
    println!("\ninstalled {}:", fullchain.display());
    println!("  subject  {}", info.subject);
    println!("  names    {}", info.dns_names.join(", "));
    println!("  issuer   {}", info.issuer);
    println!("  serial   {}", info.serial_hex);
    println!(
        "  valid    {} .. {}",
        fmt(info.not_before),
        fmt(info.not_after)
    );
    println!(
        "  key      {} (mode {:o}), generated on this host",
        key.display(),
        cert_agent::testing::store::mode_of(&key)? & 0o777
    );
    println!(
        "  billed orders on the sandbox account: {}",
        sandbox.billed_orders("partner@sandbox.test")
    );

    if let Some(n) = &nginx {
        println!(
            "\nnginx serves it (cert-agent checked the served serial after the reload):\n  \
             curl --cacert {} --resolve {DOMAIN}:{}:127.0.0.1 https://{DOMAIN}:{}/",
            sandbox.root_path().display(),
            n.https_port,
            n.https_port
        );
        if serve {
            println!("\nserving until Ctrl-C");
            runtime.block_on(async {
                let _ = tokio::signal::ctrl_c().await;
            });
        }
    }
    Ok(0)
}

fn write_private(path: &Path, data: &[u8]) -> Result<()> {
    cert_agent::testing::fsutil::write_atomic(path, data, 0o600)
        .with_context(|| format!("could not write {}", path.display()))
}

fn placeholder(cert: &Path, key: &Path) -> Result<()> {
    let key_pair = rcgen::KeyPair::generate()?;
    let c = rcgen::CertificateParams::new(vec![DOMAIN.to_owned()])?.self_signed(&key_pair)?;
    fs::write(cert, c.pem())?;
    write_private(key, key_pair.serialize_pem().as_bytes())
}
