//! `cert-agent discover`: runs `nginx -T` or `apachectl -S` (or reads a saved output), prints
//! the proposed certificates, and with `--write DIR` writes one configuration file per
//! certificate.

use std::collections::BTreeMap;
use std::path::Path;

use anyhow::Result;

use super::args::{DiscoverArgs, DiscoverServer};
use super::exit::{self, UsageError};
use super::output::Output;
use crate::clock::Clock;
use crate::config::Config;
use crate::discover::{self, DumpError, Match, Server, WriteOptions};

pub(super) async fn run(
    config_path: &Path,
    args: &DiscoverArgs,
    out: &Output,
    clock: Clock,
) -> Result<u8> {
    let server = args.server.map(|s| match s {
        DiscoverServer::Nginx => Server::Nginx,
        DiscoverServer::Apache => Server::Apache,
    });
    let (server, text) = discover::read_dump(args.from.as_deref(), server)
        .await
        .map_err(usage)?;
    let found = discover::read(server, &text, args.http_port)?;
    // Certificates already configured are not proposed again.
    let configured = if args.account {
        Some(super::load_config_quietly(config_path)?)
    } else {
        Config::load(config_path).ok()
    };
    let mut matches: BTreeMap<String, Match> = BTreeMap::new();
    if let Some(config) = configured.as_ref().filter(|_| args.account) {
        let client = super::client_for(config)?;
        let today = clock.now().date();
        matches = discover::match_account(&client, &found.proposals, today).await?;
    }
    let mut written = Vec::new();
    if let Some(dir) = &args.write {
        let options = WriteOptions {
            product_id: args.product_id,
            force: args.force,
        };
        written = discover::write_fragments(
            dir,
            &found,
            configured.as_ref(),
            &matches,
            options,
            &mut |file| eprintln!("{} exists: kept (--force replaces it)", file.display()),
        )?;
    }
    let orphaned = configured
        .as_ref()
        .map(|c| discover::orphans(&found, server, c))
        .unwrap_or_default();
    if out.json {
        out.print_json(&discover::Report::new(&found, &matches).with_orphaned(&orphaned))?;
        return Ok(exit::OK);
    }
    out!(
        "{}",
        discover::report_text(&found, &matches, configured.as_ref())
    );
    out!("{}", discover::orphans_text(&orphaned));
    discover::log_validation_counts(&found);
    for f in &written {
        outln!("wrote {}", f.display());
    }
    Ok(exit::OK)
}

/// A report that cannot be read for how the command was used is a usage error (exit 2).
fn usage(e: DumpError) -> anyhow::Error {
    if e.is_usage() {
        anyhow::Error::new(UsageError(e.to_string()))
    } else {
        anyhow::Error::new(e)
    }
}
