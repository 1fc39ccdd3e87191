//! `cert-agent discover`: runs `nginx -T` or `apachectl -S` (or reads a saved output), prints
//! the proposed certificates, and with `--write DIR` writes one configuration file per
//! certificate.

use std::collections::BTreeMap;
use std::io::Read as _;
use std::path::Path;
use std::time::Duration;

use anyhow::{Context, Result, bail};

use super::args::{DiscoverArgs, DiscoverServer};
use super::exit::{self, UsageError};
use super::output::Output;
use crate::config::Config;
use crate::discover::{self, Discovery, Validation};
use crate::engine::account_match::{Match, match_site};

/// Output of a web server's dump is capped (a configuration of 10,000 sites is a few MB).
const DUMP_LIMIT: usize = 256 << 20;

pub(super) async fn run(config_path: &Path, args: &DiscoverArgs, out: &Output) -> Result<u8> {
    let (server, text) = match &args.from {
        Some(file) => {
            let text = read_from(file)?;
            let server = args
                .server
                .unwrap_or(if text.contains("# configuration file ") {
                    DiscoverServer::Nginx
                } else {
                    DiscoverServer::Apache
                });
            (server, text)
        }
        None => {
            let server =
                args.server
                    .unwrap_or(if crate::process::find_program("nginx").is_some() {
                        DiscoverServer::Nginx
                    } else {
                        DiscoverServer::Apache
                    });
            (server, ask(server).await?)
        }
    };
    let found: Discovery = match server {
        DiscoverServer::Nginx => discover::nginx(&text)?,
        DiscoverServer::Apache => discover::apache(&text)?,
    };
    // Certificates already configured are not proposed again.
    let configured = if args.account {
        Some(super::load_config(config_path)?)
    } else {
        Config::load(config_path).ok()
    };
    let mut matches: BTreeMap<String, Match> = BTreeMap::new();
    if let Some(config) = configured.as_ref().filter(|_| args.account) {
        let client = super::client_for(config)?;
        let certificates = client
            .list_all(None, None)
            .await
            .context("could not read the account's certificate list")?;
        let products = client
            .products(false)
            .await
            .context("could not read the product list")?;
        let today = crate::clock::now().date();
        for p in &found.proposals {
            matches.insert(
                p.name.clone(),
                match_site(&p.domains, &certificates, &products, today),
            );
        }
    }
    let known = |name: &str, domains: &[String]| {
        configured.as_ref().and_then(|c| {
            c.certificates
                .iter()
                .find(|k| k.name == name || domains.iter().any(|d| k.domains.contains(d)))
                .map(|k| k.name.clone())
        })
    };
    let mut written = Vec::new();
    if let Some(dir) = &args.write {
        std::fs::create_dir_all(dir)
            .with_context(|| format!("could not create {}", dir.display()))?;
        for p in &found.proposals {
            if let Some(k) = known(&p.name, &p.domains) {
                tracing::info!("'{}' is already configured as '{k}'", p.name);
                continue;
            }
            let file = dir.join(format!("{}.toml", p.name));
            if file.exists() && !args.force {
                eprintln!("{} exists: kept (--force replaces it)", file.display());
                continue;
            }
            let (product, adopt) = match matches.get(&p.name) {
                Some(Match::Adopt {
                    certificate_id,
                    product_id,
                    ..
                }) => (args.product_id.or(*product_id), Some(*certificate_id)),
                Some(Match::Order { product_id, .. }) => (args.product_id.or(*product_id), None),
                None => (args.product_id, None),
            };
            crate::fsutil::write_atomic(&file, p.fragment(product, adopt).as_bytes(), 0o644)
                .with_context(|| format!("could not write {}", file.display()))?;
            written.push(file);
        }
    }
    if out.json {
        #[derive(serde::Serialize)]
        struct Json<'a> {
            #[serde(flatten)]
            found: &'a Discovery,
            #[serde(skip_serializing_if = "BTreeMap::is_empty")]
            account: &'a BTreeMap<String, Match>,
        }
        out.print_json(&Json {
            found: &found,
            account: &matches,
        })?;
        return Ok(exit::OK);
    }
    outln!(
        "{} virtual host(s), {} proposed certificate(s), {} name(s) left out",
        found.vhosts.len(),
        found.proposals.len(),
        found.skipped.len()
    );
    for p in &found.proposals {
        outln!();
        let state = match known(&p.name, &p.domains) {
            Some(k) => format!(" (already configured as '{k}')"),
            None => String::new(),
        };
        outln!("{}{state}: {}", p.name, p.domains.join(", "));
        let at: Vec<String> = p.vhosts.iter().map(ToString::to_string).collect();
        outln!("  from      {} ({})", at.join(", "), p.server);
        match (&p.existing, &p.existing_error, &p.cert_file) {
            (Some(e), _, Some(c)) => outln!(
                "  serves    {} — {}, issuer {}, until {}{}",
                c.display(),
                e.subject,
                e.issuer,
                e.not_after.date(),
                if e.key_on_host {
                    ""
                } else {
                    "; key not on this host"
                }
            ),
            (None, Some(err), _) => outln!("  serves    (unreadable: {err})"),
            _ => outln!("  serves    no TLS yet"),
        }
        for (d, root) in &p.webroot {
            outln!("  webroot   {d}: {}", root.display());
        }
        match matches.get(&p.name) {
            Some(Match::Adopt {
                certificate_id,
                state,
                valid_to,
                subscription_valid_to,
                ..
            }) => outln!(
                "  account   adopt order {certificate_id} ({state}, valid to {}, subscription to {}): no new order",
                valid_to.as_deref().unwrap_or("-"),
                subscription_valid_to
                    .as_deref()
                    .or(valid_to.as_deref())
                    .unwrap_or("-")
            ),
            Some(Match::Order {
                product_id,
                product,
                price,
                passed_over,
            }) => {
                outln!(
                    "  account   order {} (product {}) at {} a year{}",
                    product.as_deref().unwrap_or("(no fitting product)"),
                    product_id.map_or("-".to_owned(), |i| i.to_string()),
                    price.as_ref().map_or("-".to_owned(), ToString::to_string),
                    if passed_over.is_empty() {
                        String::new()
                    } else {
                        format!("; passed over: {}", passed_over.join("; "))
                    }
                );
            }
            None => {}
        }
        for n in &p.notes {
            outln!("  to do     {n}");
        }
    }
    if !found.skipped.is_empty() {
        outln!();
        outln!("Left out:");
        for s in &found.skipped {
            outln!("  {} ({}): {}", s.name, s.at, s.reason);
        }
    }
    let blocked = found
        .vhosts
        .iter()
        .filter(|v| matches!(v.validation, Validation::Blocked(_)))
        .count();
    let unknown = found
        .vhosts
        .iter()
        .filter(|v| matches!(v.validation, Validation::Unknown(_)))
        .count();
    tracing::debug!(
        "{blocked} virtual host(s) do not serve the validation path; for {unknown} it cannot be told"
    );
    for f in &written {
        outln!("wrote {}", f.display());
    }
    Ok(exit::OK)
}

fn read_from(file: &Path) -> Result<String> {
    let mut bytes = Vec::new();
    if file == Path::new("-") {
        std::io::stdin()
            .take(DUMP_LIMIT as u64)
            .read_to_end(&mut bytes)
            .context("could not read stdin")?;
    } else {
        std::fs::File::open(file)
            .and_then(|f| f.take(DUMP_LIMIT as u64).read_to_end(&mut bytes))
            .with_context(|| format!("could not read {}", file.display()))?;
    }
    String::from_utf8(bytes).map_err(|_| {
        anyhow::anyhow!(UsageError(format!(
            "{} is not UTF-8 text (expected the output of `nginx -T` or `apachectl -S`)",
            file.display()
        )))
    })
}

/// Runs the server's own report: `nginx -T`, or `apachectl -S` (`apache2ctl` on Debian).
async fn ask(server: DiscoverServer) -> Result<String> {
    let candidates: &[&str] = match server {
        DiscoverServer::Nginx => &["nginx"],
        DiscoverServer::Apache => &["apachectl", "apache2ctl", "httpd"],
    };
    let Some(program) = candidates
        .iter()
        .find_map(|p| crate::process::find_program(p))
    else {
        bail!(UsageError(format!(
            "{} was not found in PATH; give the server's output with --from FILE",
            candidates.join(" or ")
        )));
    };
    let flag = if server == DiscoverServer::Nginx {
        "-T"
    } else {
        "-S"
    };
    let argv = vec![program.to_string_lossy().into_owned(), flag.to_owned()];
    let done = crate::process::run(
        crate::process::Command::new(&argv, Duration::from_secs(60)).output_limit(DUMP_LIMIT),
    )
    .await
    .with_context(|| format!("could not run {} {flag}", program.display()))?;
    if !done.status.success() {
        bail!(
            "{} {flag} failed ({}): {}",
            program.display(),
            done.status_text(),
            String::from_utf8_lossy(&done.stderr).trim()
        );
    }
    // apachectl -S prints part of its listing on stderr.
    let mut text = String::from_utf8_lossy(&done.stdout).into_owned();
    if server == DiscoverServer::Apache {
        text.push('\n');
        text.push_str(&String::from_utf8_lossy(&done.stderr));
    }
    Ok(text)
}
