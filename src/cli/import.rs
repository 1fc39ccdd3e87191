//! `cert-agent import certbot`: reads certbot's directory, shows what taking it over would do
//! (per lineage: its names, expiry, CA and web root; what becomes of the account), and with
//! `--yes` takes the certificates over without a new order: the configuration of each one
//! (an included file per certificate with `--write DIR`, else printed), its record as
//! installed, the account where it can be reused.

use std::collections::BTreeMap;
use std::path::PathBuf;

use anyhow::{Context, Result};
use serde::Serialize;

use super::args::ImportCertbotArgs;
use super::exit::{self, UsageError};
use super::output::Output;
use crate::certbot::account::{self, AccountPlan};
use crate::certbot::lineage::Authenticator;
use crate::certbot::{self, Lineage, propose, takeover};
use crate::clock::Clock;
use crate::config::Config;
use crate::store::Store;

/// An ACME CA of certbot's lineages.
#[derive(Debug, Serialize)]
struct Ca {
    name: String,
    directory: String,
    /// Already an `[acme.NAME]` of the configuration.
    configured: bool,
    /// `reuse` or `new`.
    account: &'static str,
    /// Why a new account is registered.
    #[serde(skip_serializing_if = "Option::is_none")]
    why: Option<String>,
    contact: Vec<String>,
    #[serde(skip)]
    plan: Option<AccountPlan>,
}

/// One lineage in the report.
#[derive(Debug, Serialize)]
struct Item {
    name: String,
    domains: Vec<String>,
    serial: String,
    #[serde(with = "time::serde::rfc3339")]
    not_after: time::OffsetDateTime,
    ca: String,
    validation: String,
    server: &'static str,
    /// Why it is not taken over.
    #[serde(skip_serializing_if = "Option::is_none")]
    skipped: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    file: Option<PathBuf>,
    /// The configuration section, when it was taken over without --write.
    #[serde(skip_serializing_if = "Option::is_none")]
    toml: Option<String>,
}

#[derive(Debug, Serialize)]
struct Refused {
    file: PathBuf,
    line: Option<usize>,
    error: String,
}

#[derive(Debug, Serialize)]
struct Report {
    from: PathBuf,
    applied: bool,
    cas: Vec<Ca>,
    lineages: Vec<Item>,
    refused: Vec<Refused>,
}

pub(super) async fn certbot(
    config_path: &std::path::Path,
    args: &ImportCertbotArgs,
    out: &Output,
    clock: Clock,
) -> Result<u8> {
    let scan = certbot::scan(&args.from).map_err(|m| {
        UsageError(format!(
            "{m} (is it certbot's directory? --from names another)"
        ))
    })?;
    let config = match Config::load(config_path) {
        Ok(c) => Some(c),
        Err(e) if args.yes => {
            return Err(anyhow::Error::new(e)
                .context("the configuration names the state directory the records go to"));
        }
        Err(_) => None,
    };
    let mut cas = cas_of(&scan, config.as_ref());
    let store = match (&config, args.yes) {
        (Some(c), true) => Some(Store::open(&c.agent.state_dir)?),
        (Some(c), false) => Some(Store::existing(&c.agent.state_dir)),
        _ => None,
    };
    let mut items: Vec<Item> = scan
        .lineages
        .iter()
        .map(|l| item(l, &cas, config.as_ref(), store.as_ref()))
        .collect();
    let mut refused: Vec<Refused> = scan
        .refused
        .iter()
        .map(|e| Refused {
            file: e.file.clone(),
            line: e.line,
            error: e.to_string(),
        })
        .collect();
    let mut written_accounts = Vec::new();
    if let (true, Some(store)) = (args.yes, &store) {
        let _lock = store.lock()?;
        let now = clock.now();
        for (l, it) in scan.lineages.iter().zip(items.iter_mut()) {
            if it.skipped.is_some() {
                continue;
            }
            if let Err(e) = apply(store, l, it, args, now) {
                it.skipped = Some(format!("{e:#}"));
                refused.push(Refused {
                    file: l.conf_file.clone(),
                    line: None,
                    error: format!("{e:#}"),
                });
            }
        }
        let used: std::collections::BTreeSet<&str> = items
            .iter()
            .filter(|i| i.skipped.is_none())
            .map(|i| i.ca.as_str())
            .collect();
        for ca in cas.values_mut().filter(|c| used.contains(c.name.as_str())) {
            if let Some(AccountPlan::Reuse { url, key_pkcs8, .. }) = &ca.plan
                && let Some(file) =
                    takeover::write_account(store, &ca.name, &ca.directory, url, key_pkcs8)?
            {
                written_accounts.push(file);
            }
        }
    }
    let failed = !refused.is_empty() || items.iter().any(|i| i.skipped.is_some());
    let report = Report {
        from: scan.root.clone(),
        applied: args.yes,
        cas: cas.into_values().collect(),
        lineages: items,
        refused,
    };
    if out.json {
        out.print_json(&report)?;
    } else {
        print_text(&report, &scan, args, &written_accounts);
    }
    Ok(if failed { exit::PARTIAL } else { exit::OK })
}

/// One `[acme.NAME]` per distinct directory: the configured table of that directory, else a
/// new name from its host (made unique); with what becomes of certbot's account.
fn cas_of(scan: &certbot::Scan, config: Option<&Config>) -> BTreeMap<String, Ca> {
    let mut cas: BTreeMap<String, Ca> = BTreeMap::new();
    for l in &scan.lineages {
        if cas.contains_key(&l.server) {
            continue;
        }
        let configured = config.and_then(|c| {
            c.acme
                .values()
                .find(|a| a.directory == l.server)
                .map(|a| a.name.clone())
        });
        let name = configured.clone().unwrap_or_else(|| {
            let base = propose::ca_name(&l.server);
            let taken = |n: &str| {
                config.is_some_and(|c| c.acme.contains_key(n)) || cas.values().any(|c| c.name == n)
            };
            let mut name = base.clone();
            let mut i = 2;
            while taken(&name) {
                name = format!("{base}-{i}");
                i += 1;
            }
            name
        });
        let plan =
            account::read(&scan.root, &l.server, l.account.as_deref()).unwrap_or_else(|why| {
                AccountPlan::New {
                    why: format!("certbot's account cannot be read: {why}"),
                    contact: Vec::new(),
                }
            });
        let (kind, why) = match &plan {
            AccountPlan::Reuse { .. } => ("reuse", None),
            AccountPlan::New { why, .. } => ("new", Some(why.clone())),
        };
        cas.insert(
            l.server.clone(),
            Ca {
                name,
                directory: l.server.clone(),
                configured: configured.is_some(),
                account: kind,
                why,
                contact: plan.contact().to_vec(),
                plan: Some(plan),
            },
        );
    }
    cas
}

fn item(
    l: &Lineage,
    cas: &BTreeMap<String, Ca>,
    config: Option<&Config>,
    store: Option<&Store>,
) -> Item {
    let validation = match &l.authenticator {
        Authenticator::Webroot { default, map } => {
            let mut roots: Vec<String> = default.iter().map(|r| r.display().to_string()).collect();
            for (_, r) in map {
                let r = r.display().to_string();
                if !roots.contains(&r) {
                    roots.push(r);
                }
            }
            format!("webroot {}", roots.join(", "))
        }
        Authenticator::Standalone => "standalone".into(),
        Authenticator::ServerPlugin(plugin) => format!(
            "webroot {} (certbot used its {plugin} plugin: serve /.well-known/acme-challenge/ \
             from there on port 80)",
            propose::PLUGIN_WEBROOT
        ),
        Authenticator::Dns(plugin) => {
            format!("dns-txt (certbot used {plugin}: a dns_hook is needed)")
        }
    };
    let skipped = if config.is_some_and(|c| c.certificates.iter().any(|k| k.name == l.name)) {
        Some(format!(
            "a certificate named '{}' is already configured",
            l.name
        ))
    } else {
        store.and_then(|s| {
            takeover::check_free(s, &l.name)
                .err()
                .map(|e| format!("{e:#}"))
        })
    };
    Item {
        name: l.name.clone(),
        domains: l.domains.clone(),
        serial: l.leaf.serial_hex.clone(),
        not_after: l.leaf.not_after,
        ca: cas
            .get(&l.server)
            .map(|c| c.name.clone())
            .unwrap_or_default(),
        validation,
        server: l.installer,
        skipped,
        file: None,
        toml: None,
    }
}

/// Takes one lineage over: the record (and the live files as regular files), then its
/// configuration file.
fn apply(
    store: &Store,
    l: &Lineage,
    it: &mut Item,
    args: &ImportCertbotArgs,
    now: time::OffsetDateTime,
) -> Result<()> {
    let fragment = propose::fragment(l, &it.ca);
    let file = args
        .write
        .as_ref()
        .map(|d| d.join(format!("{}.toml", l.name)));
    if let Some(f) = &file
        && f.exists()
    {
        anyhow::bail!(
            "{} exists; it is kept and the lineage is not taken over",
            f.display()
        );
    }
    takeover::take_over(store, l, &it.ca, now)?;
    match &file {
        Some(f) => {
            if let Some(dir) = f.parent() {
                std::fs::create_dir_all(dir)
                    .with_context(|| format!("could not create {}", dir.display()))?;
            }
            crate::fsutil::write_atomic(f, fragment.as_bytes(), 0o644)
                .with_context(|| format!("could not write {}", f.display()))?;
            it.file = Some(f.clone());
        }
        None => it.toml = Some(fragment),
    }
    Ok(())
}

fn print_text(
    report: &Report,
    scan: &certbot::Scan,
    args: &ImportCertbotArgs,
    accounts: &[PathBuf],
) {
    outln!("certbot's directory {}:", report.from.display());
    for it in &report.lineages {
        outln!(
            "  {}: {} — serial {}, valid until {}, CA '{}', {}, server {}",
            it.name,
            it.domains.join(", "),
            it.serial,
            it.not_after.date(),
            it.ca,
            it.validation,
            it.server
        );
        if let Some(why) = &it.skipped {
            outln!("    not taken over: {why}");
        } else if let Some(f) = &it.file {
            outln!("    taken over: wrote {}", f.display());
        } else if let Some(toml) = &it.toml {
            outln!("    taken over; its configuration:\n\n{toml}");
        }
    }
    for r in &report.refused {
        outln!("  refused: {}", r.error);
    }
    for ca in &report.cas {
        match &ca.why {
            None => outln!(
                "  [acme.{}] {}: certbot's account is reused{}",
                ca.name,
                ca.directory,
                if accounts.is_empty() {
                    ""
                } else {
                    " (account written)"
                }
            ),
            Some(why) => outln!(
                "  [acme.{}] {}: a new account is registered on the first order ({why}){}",
                ca.name,
                ca.directory,
                if ca.contact.is_empty() {
                    String::new()
                } else {
                    format!(", contact {}", ca.contact.join(", "))
                }
            ),
        }
    }
    let new_cas: Vec<&Ca> = report.cas.iter().filter(|c| !c.configured).collect();
    if !new_cas.is_empty() {
        outln!(
            "\nAdd to the main configuration file (an included file holds certificates only):\n"
        );
        for ca in new_cas {
            outln!(
                "{}",
                propose::ca_table(&ca.name, &ca.directory, &ca.contact)
            );
        }
    }
    if !report.applied {
        outln!(
            "Nothing was written. To take these certificates over (no new order): \
             cert-agent import certbot --from {} --write /etc/cert-agent/conf.d --yes",
            scan.root.display()
        );
        return;
    }
    if args.write.is_some() {
        outln!(
            "Next: include the files ([agent] include = [\"{}/*.toml\"]), then \
             `cert-agent config check` and `cert-agent renew --dry-run`.",
            args.write
                .as_ref()
                .map(|d| d.display().to_string())
                .unwrap_or_default()
        );
    } else {
        outln!(
            "Next: add the certificates above to the configuration, then `cert-agent config check` and `cert-agent renew --dry-run`."
        );
    }
    outln!(
        "Stop certbot now — two renewers must not run: systemctl disable --now certbot.timer \
         (or remove /etc/cron.d/certbot)."
    );
}
