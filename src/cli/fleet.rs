//! `cert-agent fleet status`: the fleet as etcd holds it (every text it prints from etcd comes
//! escaped from `fleet::status`: no terminal control passes); `cert-agent fleet rotate-key`:
//! every value sealed again under the new fleet key; `cert-agent fleet rollout resume|abort`
//! ([`rollout`]).

use std::path::Path;

use anyhow::{Result, anyhow};

use super::args::{FleetCommand, RolloutCommand};
use super::exit;
use super::output::{Output, or_dash};
use super::table::Table;
use crate::config::Config;
use crate::fleet::Verdict;
use crate::values::text::printable;

mod forget;
mod rollout;

/// `cert-agent fleet …`, with the configuration at `path`.
pub(super) async fn run(
    command: &FleetCommand,
    path: &Path,
    out: &Output,
    clock: crate::clock::Clock,
) -> Result<u8> {
    match command {
        FleetCommand::Status => status(&super::load_config_quietly(path)?, out, clock).await,
        FleetCommand::RotateKey => rotate_key(&super::load_config(path)?, out, clock).await,
        FleetCommand::ForgetHost { host } => {
            forget::forget(&super::load_config(path)?, host, out, clock).await
        }
        FleetCommand::Rollout(decision) => {
            let (name, verdict) = match decision {
                RolloutCommand::Resume { name } => (name, Verdict::Resume),
                RolloutCommand::Abort { name } => (name, Verdict::Abort),
            };
            let config = super::load_config(path)?;
            rollout::decide_on(&config, (name, verdict), out, clock).await
        }
    }
}

/// Prints the leader, each certificate's current serial and every host's; exit 1 when a host
/// lags behind, drifts, or the fleet's work on a certificate fails.
pub(super) async fn status(
    config: &Config,
    out: &Output,
    clock: crate::clock::Clock,
) -> Result<u8> {
    let link = crate::fleet::connect(config, clock)
        .await?
        .ok_or_else(|| anyhow!("no [fleet] in {}", config.path.display()))?;
    let mut status = crate::fleet::status(&link).await?;
    let issuers: std::collections::HashMap<&str, String> = config
        .certificates
        .iter()
        .map(|k| (k.name.as_str(), k.order.issuer.label()))
        .collect();
    for c in &mut status.certificates {
        c.issuer = issuers.get(c.name.as_str()).cloned();
    }
    status
        .warnings
        .extend(crate::fleet::previous_key_warning(config, clock.now()));
    let kept = crate::fleet::witness_audit(&config.agent.state_dir, &mut status.audit, clock.now());
    status.warnings.extend(kept);
    status.lead_stuck = crate::fleet::lead_stuck(&link, config).await;
    status.leads_lost = crate::fleet::leads_lost(&config.agent.state_dir);
    let rewound = status.audit.iter().any(|a| a.rewound.is_some());
    let unled = crate::fleet::mark_unled(
        &mut status.pending,
        status.leader.as_deref(),
        clock.now(),
        unled_bound(config, &link.config),
    );
    let lead = status.leader_alert.is_some() || status.lead_stuck.is_some();
    let alert =
        rewound || unled || lead || !status.unproven.is_empty() || !status.drifting.is_empty();
    let code = if status.lagging.is_empty() && status.failing.is_empty() && !alert {
        exit::OK
    } else {
        exit::ERROR
    };
    if out.json {
        out.print_json(&status)?;
        return Ok(code);
    }
    for w in &status.warnings {
        outln!("WARNING: {w}");
    }
    match status.leader.as_deref() {
        Some(l) => outln!("leader: {l}"),
        None => outln!("leader: {}", crate::fleet::leaderless_line(&status.pending)),
    }
    if status.leads_lost > 0 {
        outln!(
            "leads lost by this host: {} (its lease not renewed in time: see lease_ttl_secs)",
            status.leads_lost
        );
    }
    out.table(&table(&status));
    for c in &status.certificates {
        if let Some(e) = &c.error {
            outln!("{}: {e}", c.name);
        }
        if let Some(f) = &c.failure {
            outln!("{}: FAILING: {}", c.name, f.describe());
        }
        if let Some(h) = &c.halted {
            outln!("{}: {h}", c.name);
        }
        print_proofs(c);
        if let Some(r) = &c.retired {
            outln!(
                "{}: retired for the fleet by {} at {}{}; every host retires it on its next \
                 synchronisation: remove its [[certificate]] entry from every host's \
                 configuration",
                c.name,
                r.by,
                crate::clock::rfc3339(r.at),
                r.cancel
                    .as_deref()
                    .map(|c| format!(" ({c})"))
                    .unwrap_or_default()
            );
        }
    }
    for p in status.pending.iter().filter(|p| p.unled) {
        outln!(
            "{}: UNLED: no run has worked on its {} for {} s (more than {} s; last by {} at \
             {}): start `cert-agent run` (or `cert-agent renew`) on a host of the fleet",
            p.name,
            p.what,
            (clock.now() - p.last_led).whole_seconds(),
            unled_bound(config, &link.config).whole_seconds(),
            p.last_led_by,
            crate::clock::short_time(p.last_led)
        );
    }
    if !status.lagging.is_empty() {
        outln!(
            "lagging behind the current certificate for more than {} s: {}",
            link.config.lag_alert_secs,
            status.lagging.join(", ")
        );
    }
    print_trust(&status);
    Ok(code)
}

/// How long work may stay open at the CA with no host leading before `fleet status` exits 1:
/// `lag_alert_secs`, and at least one polling interval and one lease (a daemon's run gives
/// the lead up between its status checks).
fn unled_bound(config: &Config, fleet: &crate::config::FleetConfig) -> time::Duration {
    let secs = fleet
        .lag_alert_secs
        .max(config.agent.poll_interval_secs + fleet.lease_ttl_secs);
    time::Duration::seconds(i64::try_from(secs).unwrap_or(i64::MAX))
}

/// One row per certificate and host (one row for a certificate without hosts).
fn table(status: &crate::fleet::FleetStatus) -> Table {
    let mut t = Table::new(&[
        "CERTIFICATE",
        "ISSUER",
        "VERSION",
        "SERIAL",
        "PUBLISHED",
        "HOST",
        "HOST SERIAL",
        "SINCE",
        "STATE",
    ])
    .right(2)
    .flex(8);
    for c in &status.certificates {
        let published = c.published_at.map(|t| {
            format!(
                "{} by {}",
                crate::clock::short_time(t),
                c.published_by.as_deref().unwrap_or("?")
            )
        });
        if c.hosts.is_empty() {
            t.row(vec![
                c.name.clone(),
                or_dash(c.issuer.as_deref()),
                or_dash(c.version),
                or_dash(c.serial.as_deref()),
                or_dash(published.as_deref()),
                "-".into(),
                "-".into(),
                "-".into(),
                if c.retired.is_some() {
                    "retired".into()
                } else {
                    "-".into()
                },
            ]);
        }
        for h in &c.hosts {
            let state = h.state.clone();
            t.row(vec![
                c.name.clone(),
                or_dash(c.issuer.as_deref()),
                or_dash(c.version),
                or_dash(c.serial.as_deref()),
                or_dash(published.as_deref()),
                h.host.clone(),
                or_dash(h.serial.as_deref()),
                or_dash(h.since.map(crate::clock::short_time)),
                state,
            ]);
        }
    }
    t
}

/// The manifest's floor of each certificate, a suspect lead, each host's last audit line, and
/// each log that went back (`AUDIT REWOUND`).
fn print_trust(status: &crate::fleet::FleetStatus) {
    for c in &status.certificates {
        if let Some(f) = &c.floor {
            outln!(
                "{}: the manifest vouches for shared record {}, current {}, tombstone {} ({})",
                c.name,
                f.state,
                f.current,
                f.tombstone,
                f.by.join(", ")
            );
        }
    }
    if let Some(why) = &status.leader_alert {
        outln!("LEAD SUSPECT: {why}");
    }
    if let Some(why) = &status.lead_stuck {
        outln!("LEAD STUCK: {why}");
    }
    let audit = &status.audit;
    let lines: Vec<String> = audit
        .iter()
        .filter_map(|a| a.seq.map(|s| format!("{} {s}", a.host)))
        .collect();
    if !lines.is_empty() {
        outln!("audit log (host, last line): {}", lines.join(", "));
    }
    for a in audit {
        if let Some(why) = &a.rewound {
            outln!(
                "{}: AUDIT REWOUND: {why}; check its log there: cert-agent audit --verify \
                 --expect-min-seq N --expect-last-hash H (the line seen)",
                a.host
            );
        }
    }
}

/// What each host of `c` last proved it serves, each proof that failed, and each address where
/// a host drifted.
fn print_proofs(c: &crate::fleet::CertStatus) {
    for h in &c.hosts {
        if let Some(p) = &h.proof {
            let answers: Vec<String> = p
                .answers
                .iter()
                .map(|a| {
                    format!(
                        "{} {} {}",
                        a.address,
                        a.server_name,
                        a.served.as_deref().unwrap_or("no answer")
                    )
                })
                .collect();
            outln!(
                "{}: {} proved serial {} at {} ({}){}",
                c.name,
                h.host,
                p.serial,
                crate::clock::rfc3339(p.at),
                if answers.is_empty() {
                    "no verify address".to_owned()
                } else {
                    answers.join(", ")
                },
                p.health
                    .as_ref()
                    .and_then(|h| h.exit)
                    .map(|e| format!("; health command exit {e}"))
                    .unwrap_or_default()
            );
        }
        if let Some(why) = &h.proof_failure {
            outln!("{}: {}: PROOF FAILED: {why}", c.name, h.host);
        }
        for at in &h.drift {
            outln!(
                "{}: {}: DRIFT: {at}, not the current serial {}",
                c.name,
                h.host,
                c.serial.as_deref().unwrap_or("-")
            );
        }
        if let Some(r) = h.proof.as_ref().and_then(|p| p.rolled_back.as_ref()) {
            match &r.failure {
                None => outln!(
                    "{}: {}: ROLLED BACK to serial {} (served again)",
                    c.name,
                    h.host,
                    r.serial
                ),
                Some(why) => outln!(
                    "{}: {}: ROLLED BACK to serial {}, NOT SERVED AGAIN: {why}",
                    c.name,
                    h.host,
                    r.serial
                ),
            }
        }
    }
}

/// Seals every value of the fleet again under the new key and lists what it did; exit 3 when
/// a value was left as it is (it opens under neither key), 75 when every value is under the
/// new key but some hosts have not moved to it yet (listed; run it again after their next
/// run).
pub(super) async fn rotate_key(
    config: &Config,
    out: &Output,
    clock: crate::clock::Clock,
) -> Result<u8> {
    let report = crate::fleet::rotate_key(config, clock).await?;
    let code = if !report.left.is_empty() {
        exit::PARTIAL
    } else if !report.unmoved.is_empty() {
        exit::PENDING
    } else {
        exit::OK
    };
    if out.json {
        out.print_json(&report)?;
        return Ok(code);
    }
    let mut t = Table::new(&["KEY", "WHAT", "VERSION"]).flex(0);
    for r in &report.resealed {
        let version = if r.from == r.to {
            r.to.to_string()
        } else {
            format!("{} -> {}", r.from, r.to)
        };
        t.row(vec![printable(&r.key), r.what.to_owned(), version]);
    }
    if !report.resealed.is_empty() {
        out.table(&t);
    }
    outln!(
        "sealed again under fleet key id {} (previous key id {}): {} value(s); already under \
         it: {}",
        report.key_id,
        report.previous_key_id,
        report.resealed.len(),
        report.already.len()
    );
    for (key, why) in &report.left {
        outln!("left as it is: {}: {}", printable(key), printable(why));
    }
    for u in &report.unmoved {
        outln!(
            "not moved yet: {}: {}",
            printable(&u.host),
            printable(&u.why)
        );
    }
    if report.complete {
        outln!(
            "every value is under the new key and every host has moved: the rotation is \
             complete; remove previous_secret_file on every host"
        );
    } else if report.left.is_empty() {
        outln!(
            "the rotation is not complete: {} host(s) still open values with the previous key; \
             run `cert-agent fleet rotate-key` again after their next run (a host that will not \
             run again: `cert-agent fleet forget-host HOST`)",
            report.unmoved.len()
        );
    }
    Ok(code)
}
