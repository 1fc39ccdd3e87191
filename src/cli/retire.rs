//! `cert-agent retire NAME`: shows what retiring will do, asks on a terminal (`--yes` skips
//! the question and is needed without one), then retires and reports what the API answered
//! and what was removed.

use std::io::{BufRead, IsTerminal, Write};

use anyhow::{Context, Result};

use super::args::RetireArgs;
use super::exit::{self, UsageError};
use super::output::Output;
use crate::clock::Clock;
use crate::config::Config;
use crate::engine::retire::{self, ConfigEntry, RetireOptions, RetireReport};
use crate::fleet::Retiring;
use crate::store::Store;

pub(super) async fn run(
    config: &Config,
    args: &RetireArgs,
    out: &Output,
    clock: Clock,
    lock_wait: std::time::Duration,
) -> Result<u8> {
    let opts = RetireOptions {
        cancel: args.cancel,
        remove_files: args.remove_files,
        force: args.force,
    };
    let store = Store::open(&config.agent.state_dir)?;
    let _lock = crate::run::lock(&store, lock_wait).await?;
    let now = clock.now();
    let report = if config.fleet.is_some() {
        // The lead first: while another host leads, nothing is asked and nothing changes.
        let fleet = Retiring::begin(config, &store, &args.name, clock).await?;
        let ready = async {
            if args.revoke {
                anyhow::bail!("{}", super::acme::fleet_revoke_refused());
            }
            let plan = prepare(config, &store, args, opts, None).await?;
            let client = needs_client(&plan, opts)
                .then(|| fleet.client(config))
                .transpose()?;
            Ok::<_, anyhow::Error>((plan, client))
        }
        .await;
        match ready {
            Ok((plan, client)) => fleet.carry_out(plan, &store, client.as_ref(), opts).await?,
            Err(e) => {
                fleet.give_up().await;
                return Err(e);
            }
        }
    } else {
        // What is revoked is known (and refused, for a Partner certificate) before anything
        // is asked or changed.
        let revoking = if args.revoke {
            let rec = store.load(&args.name)?;
            Some(super::acme::revocable(config, &rec, &args.name)?)
        } else {
            None
        };
        let plan = prepare(config, &store, args, opts, revoking.as_ref()).await?;
        let client = needs_client(&plan, opts)
            .then(|| super::client_for(config))
            .transpose()?;
        if let Some(r) = &revoking {
            super::acme::revoke_at_ca(store.dir(), r, &args.reason).await?;
            store.journal(
                &args.name,
                "revoked",
                serde_json::json!({
                    "ca": r.ca.name, "serial": r.serial, "reason": args.reason, "by": "retire",
                }),
            )?;
            if !out.json {
                outln!(
                    "serial {} of '{}' was revoked at the ACME CA '{}' ({})",
                    r.serial,
                    args.name,
                    r.ca.name,
                    args.reason
                );
            }
        }
        retire::carry_out(plan, &store, client.as_ref(), opts, now)
            .await
            .with_context(|| match &revoking {
                Some(r) => format!(
                    "serial {} was revoked, but '{}' was not retired",
                    r.serial, args.name
                ),
                None => format!("'{}' was not retired", args.name),
            })?
    };
    for w in &report.warnings {
        tracing::warn!(certificate = %report.name, "{w}");
    }
    if out.json {
        out.print_json(&report)?;
    } else {
        print_report(&report, config.fleet.is_some());
    }
    crate::monitor::after_retire(
        config,
        &store,
        &report.name,
        report.certificate_id,
        &report.archive,
        event_message(&report),
        clock.now(),
    )
    .await;
    Ok(exit::OK)
}

/// The `retired` event's message: what was done, the cancellation's answer included.
fn event_message(r: &RetireReport) -> String {
    let mut text = format!(
        "'{}' is retired; its record is archived in {}",
        r.name,
        r.archive.display()
    );
    if let Some(c) = &r.cancel {
        text.push_str("; ");
        text.push_str(&c.describe());
    }
    text
}

/// What retiring will do, looked at (the web server's report) and confirmed.
async fn prepare<'a>(
    config: &'a Config,
    store: &Store,
    args: &RetireArgs,
    opts: RetireOptions,
    revoking: Option<&super::acme::Revocable<'_>>,
) -> Result<retire::Plan<'a>> {
    let mut plan = retire::plan(config, store, &args.name, opts)?;
    plan.guard(config, store, args.from.as_deref(), opts, true)
        .await?;
    let mut steps = plan.describe(opts);
    if let Some(r) = revoking {
        steps.insert(
            0,
            format!(
                "revoke serial {} at the ACME CA '{}' ({}): cannot be undone; clients refuse it \
                 as soon as they see the revocation",
                r.serial, r.ca.name, args.reason
            ),
        );
    }
    if config.fleet.is_some() {
        steps.push(format!(
            "retire '{}' for the whole fleet: a sealed tombstone in etcd, the fleet's record, \
             current certificate and validation file deleted; every other host retires it on \
             its next synchronisation{}",
            args.name,
            if opts.remove_files {
                " and deletes its installed files (never one its web server still names)"
            } else {
                ""
            }
        ));
    }
    if !args.yes {
        confirm(&args.name, &steps)?;
        // The web server may have changed while the question was open: asked again.
        plan.guard(config, store, args.from.as_deref(), opts, true)
            .await?;
    }
    Ok(plan)
}

/// Whether the API is called: a cancellation asked for, of a recorded order.
fn needs_client(plan: &retire::Plan<'_>, opts: RetireOptions) -> bool {
    opts.cancel && plan.certificate_id.is_some()
}

/// Asks on a terminal; without one, `--yes` is needed.
fn confirm(name: &str, steps: &[String]) -> Result<()> {
    let stdin = std::io::stdin();
    if !stdin.is_terminal() {
        let mut text = format!("retiring '{name}' needs --yes without a terminal; it would:");
        for s in steps {
            text.push_str(&format!("\n  - {s}"));
        }
        return Err(UsageError(text).into());
    }
    let mut err = std::io::stderr();
    let _ = writeln!(err, "Retiring '{name}' will:");
    for s in steps {
        let _ = writeln!(err, "  - {s}");
    }
    let _ = write!(err, "Go ahead? [y/N] ");
    let _ = err.flush();
    let mut answer = String::new();
    stdin
        .lock()
        .read_line(&mut answer)
        .context("could not read the answer")?;
    if matches!(answer.trim(), "y" | "Y" | "yes" | "Yes") {
        Ok(())
    } else {
        Err(UsageError(format!("'{name}' was not retired (nothing was changed)")).into())
    }
}

fn print_report(r: &RetireReport, fleet: bool) {
    if let Some(c) = &r.cancel {
        outln!("{}", c.describe());
    }
    for f in &r.removed {
        outln!("removed {}", f.display());
    }
    for (f, why) in &r.kept {
        outln!("kept {} ({why})", f.display());
    }
    outln!(
        "'{}' is retired{}; its record is archived in {}",
        r.name,
        if fleet {
            " for the fleet (every other host retires it on its next synchronisation)"
        } else {
            ""
        },
        r.archive.display()
    );
    if let ConfigEntry::Operator { file } = &r.config_entry {
        outln!(
            "remove the [[certificate]] entry '{}' from {} (cert-agent does not edit your \
             configuration); until then every run reports it as retired",
            r.name,
            file.display()
        );
    }
}
