//! A run's first round without the lead when the fleet has no work for a leader
//! ([`wanted`](super::wanted)): the facts gathered from what the synchronisation read (a
//! shared record it left out read at its revision, unless this host imported it at that
//! revision), and the run reported as the synchronisation decided.

use anyhow::Result;

use crate::config::{CertificateConfig, Config};
use crate::engine::{Outcome, RunOptions, RunReport};
use crate::fleet::envelope::{self, Place, Purpose};
use crate::fleet::link::FleetLink;
use crate::fleet::schema::{SharedState, shared_view, state_key};
use crate::store::{CertRecord, Store};

use super::import::ForImports;
use super::records_now::record_digest;
use super::wanted::{Asked, Facts, Run, Said, Shared, wanted};
use super::{FromSync, Synchronised};

/// What the report says of a certificate the synchronisation left as it was.
const NOTHING_DUE: &str = "the fleet's certificate is installed; nothing due";

/// Whether the round takes the lead: `false` when the fleet has no work for a leader (said in
/// the log; each certificate the synchronisation did not decide reported unchanged,
/// [`NOTHING_DUE`], then the fleet's failures); `true` otherwise (why said at debug level),
/// and always for an operator's command, a takeover or a later round (`follows`).
pub(super) async fn leads(
    synced: &Synchronised,
    for_imports: &ForImports,
    (config, opts, store): (&Config, &RunOptions, &Store),
    certs: &[&CertificateConfig],
    follows: bool,
    report: &mut RunReport,
) -> bool {
    let link = &synced.link;
    let now = link.clock.now();
    let asked = asked(opts, follows);
    let crl_due = asked == Asked::Unattended
        && super::super::leads::crl_due(
            store.dir(),
            link.fleet.host(),
            config
                .revocation
                .check
                .then_some(config.revocation.refresh_secs),
            now,
        );
    let run = Run {
        asked,
        crl_due,
        key_check_forged: link
            .forged_key_check
            .load(std::sync::atomic::Ordering::SeqCst)
            != 0,
    };
    let gathered = if asked == Asked::Explicit || crl_due || run.key_check_forged {
        None
    } else {
        Some(facts(synced, for_imports, store, certs, report).await)
    };
    let why = match &gathered {
        None => wanted(config, run, &[], now),
        Some(Err(e)) => Some(format!("the shared records were not read: {e:#}")),
        Some(Ok(g)) => {
            let facts: Vec<Facts<'_>> = g.iter().map(Gathered::facts).collect();
            wanted(config, run, &facts, now)
        }
    };
    let why = match (why, &gathered) {
        (None, Some(Ok(g))) if config.revocation.check => {
            let installed = g.iter().filter_map(|g| {
                let inst = g.local.as_ref()?.installed.as_ref()?;
                Some((g.cert.name.as_str(), inst))
            });
            super::kept_crl::revoked(config, store, installed, now).await
        }
        (why, _) => why,
    };
    if let Some(why) = why {
        tracing::debug!("fleet: this run takes the lead when it is free: {why}");
        return true;
    }
    tracing::info!(
        "the fleet has no work for a leader (nothing due, nothing in flight): this run \
         does not take the lead"
    );
    for c in &mut report.certificates {
        if matches!(c.outcome, Outcome::Pending { .. }) && !synced.decided.decided.contains(&c.name)
        {
            c.outcome = Outcome::Unchanged {
                reason: NOTHING_DUE.into(),
            };
        }
    }
    crate::fleet::follower::fleet_failures(store, report);
    false
}

/// An unattended run over every certificate, or one an operator asked for (in debug builds,
/// `CERT_AGENT_TEST_LEAD_NO_OP=1` too: the tests of a leader's run with nothing to do).
fn asked(opts: &RunOptions, follows: bool) -> Asked {
    let always = cfg!(debug_assertions)
        && std::env::var("CERT_AGENT_TEST_LEAD_NO_OP").is_ok_and(|v| v == "1");
    let plain = !always
        && !follows
        && opts.names.is_empty()
        && !opts.force
        && !opts.clear_intent
        && !opts.reuse_key
        && !opts.reinstall
        && !opts.replace_ended
        && !opts.ignore_backoff
        && opts.takeover.is_none();
    if plain {
        Asked::Unattended
    } else {
        Asked::Explicit
    }
}

/// One certificate's facts, owned.
struct Gathered<'a> {
    cert: &'a CertificateConfig,
    said: Said,
    refused: Option<&'a str>,
    shared: Option<Shared>,
    fleet_has: Option<(&'a str, time::OffsetDateTime)>,
    local: Option<CertRecord>,
}

impl Gathered<'_> {
    fn facts(&self) -> Facts<'_> {
        Facts {
            cert: self.cert,
            said: self.said,
            refused: self.refused,
            shared: match &self.shared {
                Some(Shared::Record(r)) => Shared::Record(r.clone()),
                Some(Shared::Absent) => Shared::Absent,
                Some(Shared::Unknown(why)) => Shared::Unknown(why.clone()),
                None => Shared::Unknown("not read".into()),
            },
            fleet_has: self.fleet_has,
            local: self.local.as_ref(),
        }
    }
}

/// The facts of each of `certs` (see the module's description).
async fn facts<'a>(
    synced: &'a Synchronised,
    for_imports: &ForImports,
    store: &Store,
    certs: &[&'a CertificateConfig],
    report: &RunReport,
) -> Result<Vec<Gathered<'a>>> {
    let link = &synced.link;
    let FromSync {
        decided: _,
        held,
        not_here,
    } = &synced.decided;
    let failed: std::collections::BTreeSet<&str> = report
        .certificates
        .iter()
        .filter(|c| matches!(c.outcome, Outcome::Failed { .. }))
        .map(|c| c.name.as_str())
        .collect();
    let mut out = Vec::with_capacity(certs.len());
    let mut to_read = Vec::new();
    for &cert in certs {
        let name = cert.name.as_str();
        let said = if synced.retired.contains(name) {
            Said::Retired
        } else if held.contains(name) {
            Said::Held
        } else if not_here.contains(name) {
            Said::NotHere
        } else if failed.contains(name) {
            Said::Failed
        } else {
            Said::InStep
        };
        let local = store.held_or_load(&for_imports.records, name).ok();
        let rel = state_key(name);
        let kept = &for_imports.kept;
        let shared = if let Some(value) = kept.state(&rel) {
            Some(open(link, cert, value))
        } else if let Some(rev) = kept.unread_at(&rel) {
            match &local {
                Some(l)
                    if for_imports.versions.import_changes_nothing(
                        name,
                        rev,
                        &record_digest(l),
                    ) =>
                {
                    Some(Shared::Record(Box::new(shared_view(l))))
                }
                _ => {
                    to_read.push(rel);
                    None
                }
            }
        } else {
            Some(Shared::Absent)
        };
        out.push(Gathered {
            cert,
            said,
            refused: synced.refused.get(name).map(String::as_str),
            shared,
            fleet_has: synced
                .fleet_has
                .get(name)
                .map(|(serial, nb)| (serial.as_str(), *nb)),
            local: local.map(std::borrow::Cow::into_owned),
        });
    }
    if to_read.is_empty() {
        return Ok(out);
    }
    let values = for_imports.kept.read_unread(link, &to_read).await?;
    for g in out.iter_mut().filter(|g| g.shared.is_none()) {
        g.shared = values
            .get(&state_key(&g.cert.name))
            .map(|v| open(link, g.cert, v));
    }
    Ok(out)
}

/// The shared record of `cert` opened from `value` (its place and name checked; its version
/// is the synchronisation's to check, which read it).
fn open(link: &FleetLink, cert: &CertificateConfig, value: &[u8]) -> Shared {
    let rel = state_key(&cert.name);
    let place = Place::new(Purpose::State, &rel, &cert.name);
    match envelope::open_json::<SharedState>(&link.key, &link.fleet, &place, value) {
        Ok((_, s)) if s.record.name == cert.name => Shared::Record(Box::new(s.record)),
        Ok(_) => Shared::Unknown(format!(
            "{} names another certificate",
            link.fleet.key(&rel)
        )),
        Err(e) => Shared::Unknown(format!("{e:#}")),
    }
}
