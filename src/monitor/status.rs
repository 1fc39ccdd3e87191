//! `cert-agent status` without an ID: what each configured certificate looks like from local
//! state, and what the next run would do — without any API call.

use anyhow::Result;
use time::OffsetDateTime;

use crate::config::Config;
use crate::store::{CertRecord, PartnerStage, Store};

use crate::engine::plan::{self, Action};
use crate::engine::{disk_state, unattended_inputs, wanted};

use super::served;

mod views;

pub(crate) use views::{MoneyView, RevocationView};

/// The balance against the billed renewals of the 30 days after it was last read, from
/// `state_dir/money.json` (`None` before one was written).
pub(crate) fn money(config: &Config) -> Option<MoneyView> {
    super::money::last_snapshot(&Store::existing(&config.agent.state_dir))
        .map(|s| MoneyView::of(&s))
}

/// One configured certificate.
#[derive(Debug, Clone, serde::Serialize)]
pub(crate) struct StatusRow {
    pub name: String,
    /// Where the certificate comes from: `partner` or `acme:NAME`.
    pub issuer: String,
    pub certificate_id: Option<u64>,
    /// `no order`, `order outcome unknown`, `installed`, `reissuing`, `issued, valid from T;
    /// installs then`, or the last API state.
    pub state: String,
    pub serial: Option<String>,
    #[serde(with = "time::serde::rfc3339::option")]
    pub expires: Option<OffsetDateTime>,
    pub days_left: Option<i64>,
    #[serde(with = "time::serde::rfc3339::option")]
    pub subscription_ends: Option<OffsetDateTime>,
    /// What the next run does, and when.
    pub next_action: String,
    /// Failed runs in a row (fleet mode: or the fleet's failed attempts, when more).
    pub failures: u32,
    /// This host's last error; in fleet mode also the fleet's, when its last attempt failed.
    pub last_error: Option<String>,
    pub warning: Option<String>,
    /// With `--served`: `yes`, `NO: serves serial …`, `not checked` (no verify address) or
    /// `error: …`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub served: Option<String>,
    /// The next renewal (within a year) that needs a fresh domain validation, and whether
    /// the agent does it without a person.
    pub validation: Option<crate::engine::forecast::FreshValidation>,
    /// A certificate validated by email: how close the end of email validation (2028-03-15)
    /// is.
    pub email_sunset: Option<crate::engine::sunset::EmailSunset>,
    /// What the CRL last said of the installed certificate (`null`: none installed).
    pub revocation: Option<RevocationView>,
}

/// Fills [`StatusRow::served`]: whether each certificate's verify address serves the installed
/// certificate (a TLS handshake per certificate with an installed one).
pub(crate) async fn add_served(config: &Config, rows: &mut [StatusRow], now: OffsetDateTime) {
    let mut seen = Vec::new();
    for (cert, row) in config.certificates.iter().zip(rows.iter_mut()) {
        let Some(installed) = &row.serial else {
            continue;
        };
        let served = served::served(cert).await;
        let Some(o) = served::Observation::of(now, installed, &served) else {
            row.served = Some("not checked".into());
            continue;
        };
        row.served = Some(match (&o.served_serial, &o.error) {
            (_, Some(e)) => format!("error: {e}"),
            _ if o.matches() => "yes".into(),
            (Some(s), None) => format!("NO: serves serial {s}"),
            (None, None) => "NO".into(),
        });
        seen.push((cert.name.clone(), o));
    }
    served::remember(&Store::existing(&config.agent.state_dir), seen);
}

/// Rows for every configured certificate.
pub(crate) fn collect(config: &Config, now: OffsetDateTime) -> Result<Vec<StatusRow>> {
    let store = Store::existing(&config.agent.state_dir);
    let mut rows = Vec::new();
    for cert in &config.certificates {
        // One record that does not read hides no other certificate: its row says why.
        let rec = match store.load(&cert.name) {
            Ok(rec) => rec,
            Err(e) => {
                rows.push(unreadable(config, cert, &format!("{e:#}"), now));
                continue;
            }
        };
        if let Some(archive) = store.retired_and_idle(&cert.name, &rec) {
            rows.push(retired(&cert.name, &archive));
            continue;
        }
        if cert.order.issuer.acme().is_some() {
            rows.push(acme_row(config, cert, &rec, now));
            continue;
        }
        let (disk, _) = disk_state(&rec);
        let action = plan::decide(&unattended_inputs(config, cert, &rec, disk, now));
        let state = partner_state(&rec);
        let warning = match &action {
            Action::Idle { warning, .. } => warning.clone(),
            _ => None,
        };
        rows.push(StatusRow {
            certificate_id: rec.partner.order().map(|o| o.certificate_id),
            subscription_ends: rec.partner.subscription.as_ref().map(|s| s.ends),
            warning,
            validation: crate::engine::forecast::next_fresh_validation(config, cert, &rec, now),
            ..row(
                config,
                cert,
                &rec,
                now,
                state,
                plan::describe(&action, wanted(cert)),
            )
        });
    }
    Ok(rows)
}

/// The state of a certificate whose record does not read ([`collect`]).
pub(crate) const UNREADABLE: &str = "record unreadable";

/// The row of a certificate whose record does not read: `why` (naming the file) as its last
/// error; no run works on it until the record is repaired or moved aside.
fn unreadable(
    config: &Config,
    cert: &crate::config::CertificateConfig,
    why: &str,
    now: OffsetDateTime,
) -> StatusRow {
    StatusRow {
        last_error: Some(why.to_owned()),
        failures: 0,
        ..row(
            config,
            cert,
            &CertRecord::new(&cert.name),
            now,
            UNREADABLE.to_owned(),
            "none: each run fails on this certificate until its record is repaired or moved \
             aside (a run then starts it anew)"
                .to_owned(),
        )
    }
}

/// What every configured certificate's row says of its record; the issuer's own parts
/// (order, subscription, warnings, validation) are left empty.
fn row(
    config: &Config,
    cert: &crate::config::CertificateConfig,
    rec: &CertRecord,
    now: OffsetDateTime,
    state: String,
    next_action: String,
) -> StatusRow {
    StatusRow {
        name: cert.name.clone(),
        issuer: cert.order.issuer.label(),
        certificate_id: None,
        state,
        serial: rec.installed.as_ref().map(|i| i.serial.clone()),
        expires: rec.installed.as_ref().map(|i| i.not_after),
        days_left: rec
            .installed
            .as_ref()
            .map(|i| (i.not_after - now).whole_days()),
        subscription_ends: None,
        next_action,
        failures: rec.consecutive_failures(),
        last_error: last_error(rec),
        warning: None,
        served: None,
        validation: None,
        email_sunset: crate::engine::sunset::email_sunset(cert, now),
        revocation: RevocationView::of(rec, config.revocation.check),
    }
}

/// A certificate of an ACME CA: its order in progress or what is installed, and what its
/// planner does next.
/// The state column of a Partner certificate: the order's stage, then what is under way.
fn partner_state(rec: &CertRecord) -> String {
    let reissuing = match &rec.partner.stage {
        PartnerStage::Ended { state, .. } => return format!("order {state}"),
        PartnerStage::Intended(_) => return "order outcome unknown".to_owned(),
        PartnerStage::NoOrder if rec.placeholder.is_some() => {
            return "no order (placeholder installed)".to_owned();
        }
        PartnerStage::NoOrder => return "no order".to_owned(),
        PartnerStage::Ordered { reissue, .. } => reissue.is_some(),
    };
    if let Some(h) = &rec.held {
        format!(
            "issued, valid from {}; installs then",
            crate::clock::rfc3339(h.not_before)
        )
    } else if reissuing {
        "reissuing".to_owned()
    } else if rec.pending_key.is_some() {
        rec.last_state.clone().unwrap_or_else(|| "ordered".into())
    } else if rec.installed.as_ref().is_some_and(|i| i.files.is_empty()) {
        "adopted (not installed here yet)".to_owned()
    } else if rec.installed.is_some() {
        "installed".to_owned()
    } else if rec.placeholder.is_some() {
        format!(
            "{} (placeholder installed)",
            rec.last_state.as_deref().unwrap_or("ordered")
        )
    } else {
        rec.last_state.clone().unwrap_or_else(|| "ordered".into())
    }
}

fn acme_row(
    config: &Config,
    cert: &crate::config::CertificateConfig,
    rec: &CertRecord,
    now: OffsetDateTime,
) -> StatusRow {
    use crate::engine::acme::plan as acme_plan;
    let (disk, _) = disk_state(rec);
    let action = acme_plan::decide(&acme_plan::Inputs {
        now,
        record: rec,
        disk,
        renew_before_days: config.agent.renew_before_days,
        force: false,
        ignore_backoff: false,
    });
    let book = rec.acme.as_ref();
    let state = if book.is_some_and(|b| b.order_url.is_some()) {
        "ACME order in progress".to_owned()
    } else if rec.installed.is_some() {
        "installed".to_owned()
    } else if rec.placeholder.is_some() {
        "no certificate (placeholder installed)".to_owned()
    } else {
        "no certificate".to_owned()
    };
    let warning = book
        .and_then(|b| b.window.as_ref())
        .and_then(|w| w.explanation.as_ref())
        .map(|url| format!("the CA explains its renewal window at {url}"));
    StatusRow {
        warning,
        ..row(config, cert, rec, now, state, acme_plan::describe(&action))
    }
}

/// A certificate retired with `cert-agent retire` that the configuration still lists.
fn retired(name: &str, archive: &std::path::Path) -> StatusRow {
    StatusRow {
        name: name.to_owned(),
        issuer: String::new(),
        certificate_id: None,
        state: "retired".to_owned(),
        serial: None,
        expires: None,
        days_left: None,
        subscription_ends: None,
        next_action: format!(
            "remove its [[certificate]] entry (record: {})",
            archive.display()
        ),
        failures: 0,
        last_error: None,
        warning: None,
        served: None,
        validation: None,
        email_sunset: None,
        revocation: None,
    }
}

/// The record's last error, this host's own in fleet mode, and the fleet's last failed
/// attempt, each when it is another.
fn last_error(rec: &CertRecord) -> Option<String> {
    let mut parts: Vec<String> = rec.last_error.iter().cloned().collect();
    if let Some(e) = rec.host_error.as_ref().filter(|_| rec.host_failures > 0)
        && !parts.contains(e)
    {
        parts.push(e.clone());
    }
    if let Some(f) = rec.fleet_failure() {
        parts.push(f.describe());
    }
    (!parts.is_empty()).then(|| parts.join("; "))
}
