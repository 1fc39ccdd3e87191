//! Benchmark fixture: a fleet of N installed certificates, far from expiry, laid out for
//! cert-agent, certbot and lego at once, so that `benches/run.sh` can time each tool's renew
//! check over the very same certificates.
//!
//! ```sh
//! cargo run --release --example bench_fleet -- --dir /tmp/fleet --count 1000 \
//!     --base-url https://127.0.0.1:9 [--certbot] [--lego] [--orders-only]
//! ```
//!
//! Under `DIR`:
//! - `agent/config.toml`, `agent/password`, `agent/state/certs/cN.json` and the installed files
//!   `agent/live/cN/{cert,chain,fullchain,privkey}.pem` — exactly what a run that issued and
//!   installed them leaves behind (records with the installed serial, validity and file stamp),
//!   so `cert-agent renew` finds every certificate installed and not due;
//! - with `--certbot`: `certbot/config/{archive,live,renewal}` lineages `cN.bench.test`
//!   (live symlinks into the archive, renewal configuration with a `server` that must never be
//!   contacted), plus empty `certbot/work` and `certbot/logs`;
//! - with `--lego`: `lego/certificates/cN.bench.test.{crt,key,issuer.crt,json}` (the account
//!   is registered separately, against a real ACME server, because lego needs one to start).
//!
//! `--fragments` puts each `[[certificate]]` into a file of its own, `agent/conf.d/cN.toml`,
//! read through `[agent] include` (one file per site, as hosting panels write them).
//!
//! `--orders-only` writes just the configuration (no state, no files): a fleet to be issued
//! from scratch, used for the issuance and API-economy measurements. `--poll-interval S` sets
//! `agent.poll_interval_secs` and `--dcv-port`/`--webroot` where the validation files go.
//!
//! Every certificate is issued by one local CA, valid from 10 days ago for 365 days, with an
//! ECDSA P-256 key, like a fresh one-year certificate. `--crl-url URL` names URL as every
//! certificate's CRL distribution point and writes `DIR/ca.crl`, the CA's CRL (DER, valid for
//! 7 days, listing one serial that is none of the fleet's), for a server to serve at URL.

use std::fmt::Write as _;
use std::fs;
use std::os::unix::fs::{PermissionsExt, symlink};
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use anyhow::{Context, Result, bail};
use cert_agent::testing::store::{
    CertRecord, FileStamp, Installed, OrderRef, RECORD_VERSION, Subscription,
};
use rcgen::{
    BasicConstraints, CertificateParams, CertificateRevocationListParams, CertifiedIssuer,
    CrlDistributionPoint, DnType, IsCa, KeyIdMethod, KeyPair, RevokedCertParams, SerialNumber,
};
use time::{Duration, OffsetDateTime};

struct Args {
    dir: PathBuf,
    count: usize,
    base_url: String,
    ca_file: Option<PathBuf>,
    certbot: bool,
    lego: bool,
    orders_only: bool,
    poll_interval: u64,
    webroot: Option<PathBuf>,
    fragments: bool,
    crl_url: Option<String>,
}

fn parse_args() -> Result<Args> {
    let mut a = Args {
        dir: PathBuf::new(),
        count: 0,
        base_url: "https://127.0.0.1:9".into(),
        ca_file: None,
        certbot: false,
        lego: false,
        orders_only: false,
        poll_interval: 300,
        webroot: None,
        fragments: false,
        crl_url: None,
    };
    let mut it = std::env::args().skip(1);
    while let Some(arg) = it.next() {
        let mut value = || it.next().with_context(|| format!("{arg} needs a value"));
        match arg.as_str() {
            "--dir" => a.dir = value()?.into(),
            "--count" => a.count = value()?.parse()?,
            "--base-url" => a.base_url = value()?,
            "--ca-file" => a.ca_file = Some(value()?.into()),
            "--poll-interval" => a.poll_interval = value()?.parse()?,
            "--webroot" => a.webroot = Some(value()?.into()),
            "--certbot" => a.certbot = true,
            "--lego" => a.lego = true,
            "--orders-only" => a.orders_only = true,
            "--fragments" => a.fragments = true,
            "--crl-url" => a.crl_url = Some(value()?),
            other => bail!("unknown argument {other:?}"),
        }
    }
    if a.dir.as_os_str().is_empty() || a.count == 0 {
        bail!(
            "usage: bench_fleet --dir DIR --count N [--base-url URL] [--ca-file PEM] \
               [--certbot] [--lego] [--orders-only] [--poll-interval S] [--webroot DIR] \
               [--crl-url URL]"
        );
    }
    Ok(a)
}

fn main() -> ExitCode {
    match parse_args().and_then(|a| build(&a)) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("bench_fleet: {e:#}");
            ExitCode::FAILURE
        }
    }
}

fn name(i: usize) -> String {
    format!("c{i}")
}

fn domain(i: usize) -> String {
    format!("c{i}.bench.test")
}

fn build(a: &Args) -> Result<()> {
    let agent = a.dir.join("agent");
    let state = agent.join("state");
    let live = agent.join("live");
    let webroot = a.webroot.clone().unwrap_or_else(|| agent.join("webroot"));
    for d in [&agent, &live, &webroot] {
        fs::create_dir_all(d).with_context(|| format!("could not create {}", d.display()))?;
    }
    let password = agent.join("password");
    write_mode(&password, b"sandbox", 0o600)?;
    write_config(a, &agent, &state, &live, &webroot, &password)?;
    if a.orders_only {
        return Ok(());
    }
    for d in [state.clone(), state.join("certs"), state.join("keys")] {
        fs::create_dir_all(&d)?;
        fs::set_permissions(&d, fs::Permissions::from_mode(0o700))?;
    }

    let now = OffsetDateTime::now_utc().replace_nanosecond(0)?;
    let not_before = now - Duration::days(10);
    let not_after = not_before + Duration::days(365);

    let ca_key = KeyPair::generate()?;
    let mut ca_params = CertificateParams::new(Vec::<String>::new())?;
    ca_params
        .distinguished_name
        .push(DnType::CommonName, "cert-agent bench CA");
    ca_params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    ca_params.not_before = not_before - Duration::days(30);
    ca_params.not_after = not_after + Duration::days(365);
    let ca = CertifiedIssuer::self_signed(ca_params, ca_key)?;
    let ca_pem = ca.pem();
    if a.crl_url.is_some() {
        let crl = CertificateRevocationListParams {
            this_update: now - Duration::hours(1),
            next_update: now + Duration::days(7),
            crl_number: SerialNumber::from(1u64),
            issuing_distribution_point: None,
            revoked_certs: vec![RevokedCertParams {
                serial_number: SerialNumber::from_slice(&[0x7f, 0x01]),
                revocation_time: now - Duration::hours(2),
                reason_code: None,
                invalidity_date: None,
            }],
            key_identifier_method: KeyIdMethod::Sha256,
        }
        .signed_by(&ca)?;
        fs::write(a.dir.join("ca.crl"), crl.der())?;
    }

    let certbot = a.dir.join("certbot");
    let lego = a.dir.join("lego").join("certificates");
    if a.certbot {
        for d in [
            "config/archive",
            "config/live",
            "config/renewal",
            "work",
            "logs",
        ] {
            fs::create_dir_all(certbot.join(d))?;
        }
    }
    if a.lego {
        fs::create_dir_all(&lego)?;
    }

    for i in 0..a.count {
        let (name, domain) = (name(i), domain(i));
        let key = KeyPair::generate()?;
        let mut params = CertificateParams::new(vec![domain.clone()])?;
        params.distinguished_name.push(DnType::CommonName, &domain);
        params.not_before = not_before;
        params.not_after = not_after;
        let mut serial = [0u8; 16];
        serial[0] = 0x40;
        serial[8..].copy_from_slice(&(i as u64 + 1).to_be_bytes());
        params.serial_number = Some(SerialNumber::from_slice(&serial));
        if let Some(url) = &a.crl_url {
            params.crl_distribution_points = vec![CrlDistributionPoint {
                uris: vec![url.clone()],
            }];
        }
        let leaf = params.signed_by(&key, &ca)?;
        let leaf_pem = leaf.pem();
        let key_pem = key.serialize_pem();
        let fullchain = format!("{leaf_pem}{ca_pem}");

        let dir = live.join(&name);
        fs::create_dir_all(&dir)?;
        let files = [
            dir.join("cert.pem"),
            dir.join("chain.pem"),
            dir.join("fullchain.pem"),
            dir.join("privkey.pem"),
        ];
        fs::write(&files[0], &leaf_pem)?;
        fs::write(&files[1], &ca_pem)?;
        fs::write(&files[2], &fullchain)?;
        write_mode(&files[3], key_pem.as_bytes(), 0o600)?;

        let serial_hex =
            cert_agent::testing::crypto::CertificateInfo::from_pem(leaf_pem.as_bytes())?.serial_hex;
        let id = 7_000_000 + i as u64;
        let record = CertRecord {
            version: RECORD_VERSION,
            name: name.clone(),
            partner: cert_agent::testing::store::PartnerBook {
                stage: cert_agent::testing::store::PartnerStage::Ordered {
                    order: OrderRef {
                        certificate_id: id,
                        order_id: Some(id + 1_000_000),
                        placed_at: not_before,
                        adopted: false,
                    },
                    reissue: None,
                },
                subscription: Some(Subscription {
                    ends: not_after,
                    multi_year: false,
                }),
                ..Default::default()
            },
            installed: Some(Installed {
                serial: serial_hex,
                not_before,
                not_after,
                certificate_id: id,
                files: files.to_vec(),
                installed_at: not_before,
                leaf_file: Some(files[2].clone()),
                leaf_stamp: FileStamp::of(&files[2]),
            }),
            last_state: Some("issued".into()),
            ..CertRecord::default()
        };
        let text = serde_json::to_vec_pretty(&record)?;
        write_mode(
            &state.join("certs").join(format!("{name}.json")),
            &text,
            0o600,
        )?;

        if a.certbot {
            certbot_lineage(
                &certbot.join("config"),
                &domain,
                &leaf_pem,
                &ca_pem,
                &key_pem,
            )?;
        }
        if a.lego {
            let base = lego.join(&domain);
            let with = |ext: &str| PathBuf::from(format!("{}{ext}", base.display()));
            fs::write(with(".crt"), &fullchain)?;
            fs::write(with(".issuer.crt"), &ca_pem)?;
            write_mode(&with(".key"), key_pem.as_bytes(), 0o600)?;
            let resource = serde_json::json!({
                "domain": domain,
                "certUrl": format!("https://127.0.0.1:9/certZ/{i}"),
                "certStableUrl": format!("https://127.0.0.1:9/certZ/{i}"),
            });
            fs::write(with(".json"), serde_json::to_vec_pretty(&resource)?)?;
        }
    }
    Ok(())
}

fn write_config(
    a: &Args,
    agent: &Path,
    state: &Path,
    live: &Path,
    webroot: &Path,
    password: &Path,
) -> Result<()> {
    let mut text = String::new();
    writeln!(
        text,
        "[api]\nbase_url = {:?}\nlogin = \"partner@sandbox.test\"\npassword_file = {password:?}",
        a.base_url
    )?;
    if let Some(ca) = &a.ca_file {
        writeln!(text, "ca_file = {ca:?}")?;
    }
    writeln!(
        text,
        "\n[agent]\nstate_dir = {state:?}\npoll_interval_secs = {}\nallow_orders = true\n\
         max_order_price = \"20.00\"\n{include}\n[preflight]\nhttp = false\n\n[defaults]\ncountry = \"DE\"\nregion = \"Berlin\"\n\
         city = \"Berlin\"\nproduct_id = 1101\nwebroot = {webroot:?}\nserver = \"none\"",
        a.poll_interval,
        include = if a.fragments {
            "include = [\"conf.d/*.toml\"]\n"
        } else {
            ""
        },
    )?;
    if a.fragments {
        fs::create_dir_all(agent.join("conf.d"))?;
    }
    for i in 0..a.count {
        let (name, domain) = (name(i), domain(i));
        let d = live.join(&name);
        let entry = format!(
            "\n[[certificate]]\nname = {name:?}\ndomains = [{domain:?}]\n\
             cert_path = {:?}\nchain_path = {:?}\nfullchain_path = {:?}\nkey_path = {:?}\n",
            d.join("cert.pem"),
            d.join("chain.pem"),
            d.join("fullchain.pem"),
            d.join("privkey.pem"),
        );
        if a.fragments {
            fs::write(agent.join("conf.d").join(format!("{name}.toml")), entry)?;
        } else {
            text.push_str(&entry);
        }
    }
    fs::write(agent.join("config.toml"), text)?;
    Ok(())
}

/// One certbot lineage as certbot 2.x writes it: archive files numbered 1, live symlinks, and
/// the renewal configuration. The `server` is a closed port: a renew check that contacted it
/// would fail.
fn certbot_lineage(config: &Path, domain: &str, leaf: &str, chain: &str, key: &str) -> Result<()> {
    let archive = config.join("archive").join(domain);
    let live = config.join("live").join(domain);
    fs::create_dir_all(&archive)?;
    fs::create_dir_all(&live)?;
    let parts = [
        ("cert", leaf.to_owned()),
        ("chain", chain.to_owned()),
        ("fullchain", format!("{leaf}{chain}")),
        ("privkey", key.to_owned()),
    ];
    for (kind, content) in &parts {
        let target = archive.join(format!("{kind}1.pem"));
        write_mode(&target, content.as_bytes(), 0o600)?;
        symlink(
            format!("../../archive/{domain}/{kind}1.pem"),
            live.join(format!("{kind}.pem")),
        )?;
    }
    let conf = format!(
        "# renew_before_expiry = 30 days\nversion = 2.1.0\n\
         archive_dir = {archive}\ncert = {live}/cert.pem\nprivkey = {live}/privkey.pem\n\
         chain = {live}/chain.pem\nfullchain = {live}/fullchain.pem\n\n\
         # Options used in the renewal process\n[renewalparams]\n\
         account = 0123456789abcdef0123456789abcdef\nauthenticator = webroot\n\
         webroot_path = /tmp/cert-agent-bench-webroot,\n\
         server = https://127.0.0.1:9/directory\nkey_type = ecdsa\n\
         [[webroot_map]]\n{domain} = /tmp/cert-agent-bench-webroot\n",
        archive = archive.display(),
        live = live.display(),
    );
    fs::write(config.join("renewal").join(format!("{domain}.conf")), conf)?;
    Ok(())
}

fn write_mode(path: &Path, data: &[u8], mode: u32) -> Result<()> {
    use std::io::Write;
    use std::os::unix::fs::OpenOptionsExt;
    let mut f = fs::OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(true)
        .mode(mode)
        .open(path)
        .with_context(|| format!("could not write {}", path.display()))?;
    f.write_all(data)?;
    Ok(())
}
