//! Benchmark driver: the client-side parts of issuing one certificate, timed one by one in
//! process — key generation per key type, the CSR, the check of a real per-server bundle from
//! the sandbox, and the install of its files — plus the sandbox's call log of that issuance.
//!
//! ```sh
//! cargo run --release --example bench_issue -- --out parts.json           # a JSON object
//! cargo run --release --example bench_issue -- --out parts.json --quick   # fewer repetitions
//! ```
//!
//! Each figure is the median of repeated runs with its minimum and maximum, in microseconds
//! of wall time on one thread (the work is CPU-bound, so the minimum is close to its CPU
//! time).

use std::fs;
use std::path::Path;
use std::process::ExitCode;
use std::time::Instant;

use anyhow::{Context, Result, bail};
use cert_agent::testing::bundle::{self, Expected};
use cert_agent::testing::crypto::{Csr, KeyType, PrivateKey};
use cert_agent::testing::install::{
    CertInstall, CertMaterial, InstallPaths, PathOverrides, ServerKind,
};
use clap::Parser;
use partner_sandbox::{Sandbox, SandboxConfig};
use serde_json::{Value, json};

fn main() -> ExitCode {
    match bench() {
        Ok(v) => {
            let text = serde_json::to_string_pretty(&v).unwrap_or_default();
            let out = std::env::args()
                .skip_while(|a| a != "--out")
                .nth(1)
                .unwrap_or_else(|| "/dev/stdout".into());
            match fs::write(&out, text + "\n") {
                Ok(()) => ExitCode::SUCCESS,
                Err(e) => {
                    eprintln!("bench_issue: could not write {out}: {e}");
                    ExitCode::FAILURE
                }
            }
        }
        Err(e) => {
            eprintln!("bench_issue: {e:#}");
            ExitCode::FAILURE
        }
    }
}

/// Median, minimum and maximum of `n` timings of `f`, in microseconds.
fn time_it(n: usize, mut f: impl FnMut() -> Result<()>) -> Result<Value> {
    f()?; // warm-up
    let mut t = Vec::with_capacity(n);
    for _ in 0..n {
        let start = Instant::now();
        f()?;
        t.push(start.elapsed().as_secs_f64() * 1e6);
    }
    t.sort_by(f64::total_cmp);
    Ok(json!({
        "n": n,
        "median_us": round(t[n / 2]),
        "min_us": round(t[0]),
        "max_us": round(t[n - 1]),
    }))
}

fn round(x: f64) -> f64 {
    (x * 10.0).round() / 10.0
}

fn bench() -> Result<Value> {
    let quick = std::env::args().any(|a| a == "--quick");
    let scale = if quick { 4 } else { 1 };

    let mut keygen = serde_json::Map::new();
    for kt in KeyType::ALL {
        let n = match kt {
            KeyType::EcdsaP256 | KeyType::EcdsaP384 => 400,
            KeyType::Rsa2048 => 40,
            KeyType::Rsa3072 => 16,
            KeyType::Rsa4096 => 8,
        } / scale;
        let v = time_it(n.max(3), || {
            PrivateKey::generate(kt)?;
            Ok(())
        })?;
        keygen.insert(kt.as_str().to_owned(), v);
    }

    let domains = vec!["www.example.test".to_owned()];
    let p256 = PrivateKey::generate(KeyType::EcdsaP256)?;
    let csr = time_it(400 / scale, || {
        Csr::new(&p256, &domains)?;
        Ok(())
    })?;

    let (issued, bundle_zip, key_pem, calls) = issue_one()?;
    let key = PrivateKey::from_pem(key_pem.as_bytes(), "installed key")?;
    let public_key = key.public_key_der();
    let check = time_it(400 / scale, || {
        let expected = Expected {
            public_key_der: &public_key,
            domains: &domains,
            now: time::OffsetDateTime::now_utc(),
            trust_anchors: &[],
        };
        bundle::read_bundle(&bundle_zip, ServerKind::None, &expected)?;
        Ok(())
    })?;
    let expected = Expected {
        public_key_der: &public_key,
        domains: &domains,
        now: time::OffsetDateTime::now_utc(),
        trust_anchors: &[],
    };
    let validated = bundle::read_bundle(&bundle_zip, ServerKind::None, &expected)?;

    let dir = tempfile::tempdir()?;
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    let mut i = 0;
    let install = time_it(100 / scale, || {
        // A fresh directory each time: the first install of a certificate.
        i += 1;
        let base = dir.path().join(format!("i{i}"));
        fs::create_dir_all(&base)?;
        install_once(&runtime, &base, &validated, &key)
    })?;
    let reinstall_dir = dir.path().join("again");
    fs::create_dir_all(&reinstall_dir)?;
    let reinstall = time_it(100 / scale, || {
        // The same files replaced: a renewal.
        install_once(&runtime, &reinstall_dir, &validated, &key)
    })?;

    Ok(json!({
        "keygen": keygen,
        "csr_p256": csr,
        "bundle_check": check,
        "bundle_bytes": bundle_zip.len(),
        "install_first": install,
        "install_replace": reinstall,
        "one_issuance": { "exit_code": issued, "api_calls": calls },
    }))
}

fn install_once(
    runtime: &tokio::runtime::Runtime,
    base: &Path,
    b: &bundle::ValidatedBundle,
    key: &PrivateKey,
) -> Result<()> {
    let material = CertMaterial::new(
        b.leaf_pem.clone().into_bytes(),
        b.chain_pem.clone().into_bytes(),
        key.secret_pem().as_bytes().to_vec(),
    );
    let mut inst = CertInstall::new(
        "www",
        vec!["www.example.test".into()],
        ServerKind::None,
        material,
    );
    inst.paths = InstallPaths::resolve(
        ServerKind::None,
        base,
        "www",
        &PathOverrides {
            cert: Some(base.join("cert.pem")),
            chain: Some(base.join("chain.pem")),
            fullchain: Some(base.join("fullchain.pem")),
            key: Some(base.join("privkey.pem")),
            combined: None,
        },
    );
    let out = runtime.block_on(cert_agent::testing::install::install_all(&[inst]));
    match out.first() {
        Some(o) if o.installed() => Ok(()),
        other => bail!("install failed: {other:?}"),
    }
}

/// Issues one certificate against the instant sandbox (standalone validation server, server
/// `none`) and returns the exit code, its per-server bundle, its key and the API calls made.
fn issue_one() -> Result<(u8, Vec<u8>, String, Value)> {
    let dir = tempfile::tempdir()?;
    let dir = dir.path();
    let sandbox = Sandbox::start(
        SandboxConfig::default()
            .data_dir(dir.join("sandbox"))
            .instant(true),
    )
    .context("could not start the sandbox")?;
    let port = std::net::TcpListener::bind("127.0.0.1:0")?
        .local_addr()?
        .port();
    sandbox.set_dcv_ports(port, 0);
    let out = dir.join("ssl");
    fs::create_dir_all(&out)?;
    let password = dir.join("password");
    cert_agent::testing::fsutil::write_atomic(&password, b"sandbox", 0o600)?;
    let config = dir.join("config.toml");
    fs::write(
        &config,
        format!(
            "[api]\nbase_url = {:?}\nlogin = \"partner@sandbox.test\"\npassword_file = {password:?}\n\
             ca_file = {:?}\n\n[agent]\nstate_dir = {:?}\npoll_interval_secs = 1\n\
             allow_orders = true\nmax_order_price = \"20.00\"\n\n[preflight]\nhttp = false\n\n[defaults]\ncountry = \"DE\"\n\
             region = \"Berlin\"\ncity = \"Berlin\"\n\n[[certificate]]\nname = \"www\"\n\
             domains = [\"www.example.test\"]\nproduct_id = 1101\nstandalone = true\n\
             listen = \"127.0.0.1:{port}\"\nserver = \"none\"\ncert_path = {:?}\n\
             chain_path = {:?}\nfullchain_path = {:?}\nkey_path = {:?}\n",
            sandbox.base_url(),
            sandbox.api_ca_path(),
            dir.join("state"),
            out.join("cert.pem"),
            out.join("chain.pem"),
            out.join("fullchain.pem"),
            out.join("privkey.pem"),
        ),
    )?;
    let cli = cert_agent::testing::cli::Cli::try_parse_from([
        "cert-agent".as_ref(),
        "--quiet".as_ref(),
        "--config".as_ref(),
        config.as_os_str(),
        "renew".as_ref(),
        "--wait".as_ref(),
        "60".as_ref(),
    ] as [&std::ffi::OsStr; 7])?;
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    let code = runtime.block_on(cert_agent::testing::cli::run(&cli))?;
    if code != 0 {
        bail!("cert-agent renew exited with {code}");
    }
    let calls: Vec<Value> = sandbox
        .calls()
        .iter()
        .map(|c| json!(format!("{} {}", c.method, c.path)))
        .collect();

    let parsed = cert_agent::testing::config::Config::load(&config)?;
    let store = cert_agent::testing::store::Store::existing(&parsed.agent.state_dir);
    let id = store
        .load("www")?
        .installed
        .context("no installed certificate recorded")?
        .certificate_id;
    let client = cert_agent::testing::api::Client::new(
        cert_agent::testing::engine::client_options(&parsed),
    )?;
    let zip = runtime.block_on(client.download_bundle(id))?.bytes;
    let key = fs::read_to_string(out.join("privkey.pem"))?;
    Ok((code, zip, key, json!(calls)))
}
