//! The fleet's current certificates as a synchronisation sees them: what each needs (nothing,
//! or its value opened and checked), the opening and checking of all of them on a few threads
//! at once (the envelope, the sealed key, the bundle's chain, key, names and dates: the CPU
//! work of a catch-up), then, one after the other and in order, the versions accepted and what
//! to install.

use std::collections::BTreeMap;

use anyhow::{Result, anyhow};
use time::OffsetDateTime;

use super::install_or_keep::{Keep, keeps, skip_result};
use super::{Synced, View};
use crate::config::CertificateConfig;
use crate::engine::{Job, Outcome, Ready};
use crate::fleet::link::FleetLink;
use crate::fleet::open_shared::{OpenedCurrent, named_intermediates, open_current};
use crate::fleet::schema::HostResult;
use crate::fleet::schema::current_key;
use crate::fleet::versions::Seen;

/// The fleet's current certificate of `cert` as this host sees it.
pub(super) struct CurrentSeen {
    pub(super) version: u64,
    /// From the checked bundle.
    pub(super) serial: String,
    pub(super) not_before: OffsetDateTime,
    /// What to install: `None` when this host serves it already, or something newer.
    pub(super) ready: Option<Ready>,
    /// Why this host keeps a newer certificate of its own instead.
    pub(super) skipped: Option<String>,
    /// It begins after this host's clock: installed by the first sync once it is valid.
    pub(super) held: Option<(u64, String, OffsetDateTime)>,
}

/// What a certificate's current value needs before [`finish`] says what to install.
pub(super) enum Planned {
    /// A value accepted before, which this host serves or keeps a newer one than: not opened.
    Kept(CurrentSeen),
    /// A value accepted before that this host must install: opened again.
    Reopen(CurrentSeen),
    /// A value not accepted before: opened, then accepted.
    New,
}

impl Planned {
    pub(super) fn opens(&self) -> bool {
        !matches!(self, Planned::Kept(_))
    }
}

/// What the fleet's current value of `cert` needs (`None`: the fleet has none). A value
/// accepted before is not opened again unless this host must install it.
pub(super) fn plan(
    link: &FleetLink,
    cert: &CertificateConfig,
    job: &Job<'_>,
    view: &View,
) -> Option<Planned> {
    let rel = current_key(&cert.name);
    let value = view.docs.get(&rel);
    if value.is_none() && !view.unread.contains_key(&rel) {
        return None;
    }
    let seen = value.map_or(Seen::Other, |v| view.versions.seen_current(&cert.name, v));
    let kept = view.versions.of(&cert.name).current;
    let Some(k) = kept.filter(|_| view.unchanged(&rel, value, seen)) else {
        return Some(Planned::New);
    };
    let key = link.fleet.key(&current_key(&cert.name));
    let mut seen = CurrentSeen {
        version: k.value.version,
        serial: k.serial,
        not_before: k.not_before,
        ready: None,
        skipped: None,
        held: None,
    };
    Some(
        match keeps(job, &key, seen.version, &seen.serial, seen.not_before) {
            Keep::Install => Planned::Reopen(seen),
            Keep::Serves => Planned::Kept(seen),
            Keep::Newer(why) => {
                seen.skipped = Some(why);
                Planned::Kept(seen)
            }
        },
    )
}

/// Reads the issuer certificates the current values of `certs` name that this
/// synchronisation has not read yet (most certificates name the same one or two).
pub(super) async fn read_intermediates(
    link: &FleetLink,
    view: &mut View,
    certs: &[&CertificateConfig],
) -> Result<()> {
    let named: Vec<String> = certs
        .iter()
        .filter_map(|c| view.docs.get(&current_key(&c.name)).map(|v| (c, v)))
        .flat_map(|(c, v)| named_intermediates(link, c, v))
        .filter(|h| crate::fleet::chains::is_hash(h))
        .collect();
    view.chains.fetch(link, &mut view.versions, named).await
}

/// Opens and checks the current value of each certificate of `certs` (each one the fleet
/// has a value of: [`plan`] said so) on a few threads at once, with the issuer certificates
/// [`read_intermediates`] read; the results in order, each error naming its certificate.
pub(super) fn open_all(
    link: &FleetLink,
    view: &View,
    certs: Vec<&CertificateConfig>,
) -> Vec<Result<OpenedCurrent>> {
    crate::parallel::map(certs, |cert| {
        let rel = current_key(&cert.name);
        let value = view.docs.get(&rel).ok_or_else(|| {
            anyhow!(
                "the fleet's certificate {} was not read; nothing was installed",
                link.fleet.key(&rel)
            )
        })?;
        open_current(link, cert, value, &view.chains)
    })
}

/// After [`open_all`]: refuses an older version than the one accepted, accepts the new one,
/// and says what to install — only what differs from what this host serves, and never
/// something older.
pub(super) fn finish(
    link: &FleetLink,
    cert: &CertificateConfig,
    job: &Job<'_>,
    planned: Planned,
    opened: Option<Result<OpenedCurrent>>,
    view: &mut View,
) -> Result<CurrentSeen> {
    let opened = match (planned, opened) {
        (Planned::Kept(seen), _) => return Ok(seen),
        (Planned::Reopen(mut seen), Some(opened)) => {
            let opened = opened?;
            seen.set_ready(opened.ready, opened.not_yet);
            return Ok(seen);
        }
        (Planned::New, Some(opened)) => opened?,
        (_, None) => {
            return Err(anyhow!(
                "the fleet's certificate of '{}' was not opened; nothing was installed",
                cert.name
            ));
        }
    };
    let rel = current_key(&cert.name);
    let key = link.fleet.key(&rel);
    let (version, ready) = (opened.version, opened.ready);
    let (serial, not_before) = (ready.bundle.serial_hex.clone(), ready.bundle.not_before);
    let value = view
        .docs
        .get(&rel)
        .cloned()
        .ok_or_else(|| anyhow!("the fleet's certificate {key} was not read"))?;
    view.versions
        .accept_current(&cert.name, &key, version, &value, &serial, not_before)?;
    if opened.old_format {
        // A leader of an earlier version published it: this host's next lead rewrites it.
        view.versions.set_chains_migrated(false);
    }
    let mut seen = CurrentSeen {
        version,
        serial,
        not_before,
        ready: None,
        skipped: None,
        held: None,
    };
    match keeps(job, &key, version, &seen.serial, not_before) {
        Keep::Install => seen.set_ready(ready, opened.not_yet),
        Keep::Serves => {}
        Keep::Newer(why) => seen.skipped = Some(why),
    }
    Ok(seen)
}

impl CurrentSeen {
    /// What to install, or — when it begins after this host's clock — what is held.
    fn set_ready(&mut self, ready: Ready, not_yet: bool) {
        if not_yet {
            self.held = Some((
                ready.certificate_id,
                ready.bundle.serial_hex.clone(),
                ready.bundle.not_before,
            ));
        } else {
            self.ready = Some(ready);
        }
    }
}

/// One configured certificate in a synchronisation, in the configuration's order.
pub(super) enum Step<'a> {
    /// Refused or retired: its outcome.
    Done(Synced),
    /// The fleet has a current value of it.
    Current(Box<(Job<'a>, Planned)>),
}

/// What [`take_steps`] found: the outcomes so far (in order), what to install, the version
/// published of each, and the fleet's certificates as read (serial and `not_before`).
pub(super) type Taken<'a> = (
    Vec<Synced>,
    Vec<(Job<'a>, Ready)>,
    BTreeMap<String, u64>,
    BTreeMap<String, (String, OffsetDateTime)>,
);

/// Takes each step in order with its opened value (from [`open_all`], in the same order): the
/// versions accepted, what to install, what is kept or held; the results of what is kept go
/// to `results`, the errors to the view's problems.
pub(super) fn take_steps<'a>(
    link: &FleetLink,
    steps: Vec<Step<'a>>,
    opened: &mut impl Iterator<Item = Result<OpenedCurrent>>,
    view: &mut View,
    results: &mut Vec<(String, HostResult)>,
) -> Taken<'a> {
    let (mut out, mut ready) = (Vec::new(), Vec::new());
    let (mut published, mut fleet_has) = (BTreeMap::new(), BTreeMap::new());
    for step in steps {
        let (job, planned) = match step {
            Step::Done(s) => {
                out.push(s);
                continue;
            }
            Step::Current(current) => *current,
        };
        let cert = job.cert;
        let this = planned.opens().then(|| opened.next()).flatten();
        let seen = match finish(link, cert, &job, planned, this, view) {
            Ok(seen) => seen,
            Err(e) => {
                view.problem(&cert.name, format!("{e:#}"));
                continue;
            }
        };
        fleet_has.insert(cert.name.clone(), (seen.serial.clone(), seen.not_before));
        if let Some(why) = seen.skipped {
            tracing::warn!(certificate = %cert.name, "{why}");
            results.push((
                cert.name.clone(),
                skip_result(link, &job, seen.version, &why),
            ));
            out.push(Synced {
                name: cert.name.clone(),
                outcome: Outcome::Unchanged { reason: why },
            });
        } else if let Some((id, serial, from)) = &seen.held {
            tracing::info!(
                certificate = %cert.name,
                serial = %serial,
                "the fleet's certificate begins after this host's clock; held until then"
            );
            out.push(Synced {
                name: cert.name.clone(),
                outcome: Outcome::Pending {
                    reason: format!(
                        "the fleet's {}",
                        crate::engine::held_line(*id, serial, *from)
                    ),
                },
            });
        } else if let Some(r) = seen.ready {
            published.insert(cert.name.clone(), seen.version);
            ready.push((job, r));
        }
    }
    (out, ready, published, fleet_has)
}
