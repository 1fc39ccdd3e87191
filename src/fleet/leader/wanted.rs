//! Whether the fleet has work for a leader: decided, before a run's first round takes the lead,
//! from what its synchronisation read (the shared records, the fleet's current certificates,
//! this host's records and results). A run with nothing for a leader does not take the lead
//! (a joiner's first run, a scheduled no-op run): it installs what the fleet has and ends.
//! Pure; the planner's rule decides what is due ([`plan::decide`], as the engine and the
//! daemons' takeover look decide it). When in doubt — a value that did not open or was not
//! read, a value this host refuses, a failure here — the run leads as before.

use crate::config::{CertificateConfig, Config};
use crate::engine::{self, plan, plan::Disk};
use crate::store::CertRecord;

/// The fleet's shared record of a certificate, as the synchronisation left it.
#[derive(Debug)]
pub(super) enum Shared {
    /// Opened (the fleet key, its place and certificate).
    Record(Box<CertRecord>),
    /// No value: never ordered by the fleet.
    Absent,
    /// Not known here: it did not open, or could not be read (why).
    Unknown(String),
}

/// What this host's synchronisation said of a certificate.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Said {
    /// Nothing (in step), or installed the fleet's certificate.
    InStep,
    /// Held until it is valid: the fleet's work on it is done (a lead leaves it alone).
    Held,
    /// The fleet's certificate could not be installed here: a fault of this host, which a
    /// lead leaves to the fleet as well.
    NotHere,
    /// Failed for another reason: a value refused (it did not open, a replay), a spec refused.
    Failed,
    /// Retired for the fleet: no lead works on it.
    Retired,
}

/// One certificate as the decision sees it.
#[derive(Debug)]
pub(super) struct Facts<'a> {
    pub(super) cert: &'a CertificateConfig,
    pub(super) said: Said,
    /// Why this host refuses the fleet's spec, when it does.
    pub(super) refused: Option<&'a str>,
    pub(super) shared: Shared,
    /// The fleet's current certificate: serial and `not_before`; `None` when the fleet has
    /// none (or it was not read).
    pub(super) fleet_has: Option<(&'a str, time::OffsetDateTime)>,
    /// This host's record as the synchronisation left it (`None`: it did not read).
    pub(super) local: Option<&'a CertRecord>,
}

/// What the run is, besides its certificates.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Asked {
    /// An unattended run over every certificate (the timer's `renew`, a daemon's run).
    Unattended,
    /// An operator's command or option (`--force`, named certificates, `issue`, `reissue`,
    /// `install`, `--clear-intent`...), a takeover, or a later round of a run: it leads as
    /// before.
    Explicit,
}

/// What the run is and what it found for the whole fleet.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct Run {
    pub(super) asked: Asked,
    /// The fleet's CRL checks are this host's to make now (see [`crate::fleet::leads`]).
    pub(super) crl_due: bool,
    /// The fleet's key check was refused as not the fleet's: a leader seals it again.
    pub(super) key_check_forged: bool,
}

/// Why a leader is needed now (`None`: nothing for one).
pub(super) fn wanted(
    config: &Config,
    run: Run,
    certs: &[Facts<'_>],
    now: time::OffsetDateTime,
) -> Option<String> {
    if run.asked == Asked::Explicit {
        return Some("an operator's command, a takeover or a later round".into());
    }
    if run.crl_due {
        return Some("the CRLs of the fleet's certificates are due to be read".into());
    }
    if run.key_check_forged {
        return Some("the fleet's key check is not the fleet's (a leader seals it again)".into());
    }
    certs
        .iter()
        .find_map(|f| work(config, f, now).map(|w| format!("'{}': {w}", f.cert.name)))
}

/// The work a leader has on one certificate, in words.
fn work(config: &Config, f: &Facts<'_>, now: time::OffsetDateTime) -> Option<String> {
    if let Some(why) = f.refused {
        return Some(format!("its spec is refused here ({why})"));
    }
    match f.said {
        Said::Retired | Said::Held | Said::NotHere => return None,
        Said::Failed => return Some("a value of it failed here (to repair)".into()),
        Said::InStep => {}
    }
    let Some(local) = f.local else {
        return Some("this host's record of it was not read".into());
    };
    if local.partner.intent().is_some() || local.pending_key.is_some() {
        return Some("this host's record holds an order intent or a pending key".into());
    }
    let mut record = match &f.shared {
        Shared::Record(r) => (**r).clone(),
        Shared::Absent => return Some("the fleet has no shared record of it".into()),
        Shared::Unknown(why) => return Some(format!("its shared record is not known ({why})")),
    };
    let Some((serial, not_before)) = f.fleet_has else {
        return Some("the fleet has no current certificate of it".into());
    };
    let Some(installed) = &local.installed else {
        return Some("the fleet's current certificate is not installed here".into());
    };
    if !crate::crypto::same_serial_hex(&installed.serial, serial) {
        return Some(if installed.not_before > not_before {
            "this host serves a newer certificate than the fleet's (a lead hands it over)".into()
        } else {
            "this host does not serve the fleet's current certificate".into()
        });
    }
    if local
        .revocation
        .as_ref()
        .is_some_and(|r| r.revokes(&installed.serial))
    {
        return Some("its certificate is revoked".into());
    }
    record.installed = Some(installed.clone());
    let action = plan::decide(&engine::unattended_inputs(
        config,
        f.cert,
        &record,
        Disk::AsInstalled,
        now,
    ));
    crate::fleet::takeover::describe(&record, action)
}

#[cfg(test)]
mod tests;
