//! Each configured certificate's samples (validity, install, attempts and successes, the
//! served check, the CRL, failures, pending work, the last run's outcome), and each one's last
//! success kept between runs.

use std::borrow::Cow;

use time::OffsetDateTime;

use crate::engine::forecast::FreshValidation;
use crate::engine::{Outcome, RunReport};
use crate::monitor::served::{Observation, latest_for};
use crate::store::{CertRecord, Store};

use super::family::Metric;
use super::samples::{Samples, escape, unix};

/// What was last seen served, per certificate: by a handshake with the common name
/// (`check --served`, `status --served`, an install's own verification), and by this host's
/// last fleet proof.
#[derive(Debug, Default)]
pub(super) struct Looks {
    pub(super) served: std::collections::BTreeMap<String, Observation>,
    pub(super) proved: std::collections::BTreeMap<String, Observation>,
}

/// What the last run or synchronisation did with each certificate, and when it started.
pub(super) struct RunFacts<'a> {
    pub(super) started_at: OffsetDateTime,
    pub(super) report: &'a RunReport,
}

/// Each certificate's last success (Unix time), as the metrics last showed it: a run that
/// finds a certificate in order writes no record, and a failing run after it must still show
/// when it was last fine.
pub(super) const SUCCESS_FILE: &str = "metrics-last-success.json";

pub(super) type Successes = std::collections::BTreeMap<String, i64>;

pub(super) fn kept_successes(store: &Store) -> Successes {
    std::fs::read(store.dir().join(SUCCESS_FILE))
        .ok()
        .and_then(|b| serde_json::from_slice(&b).ok())
        .unwrap_or_default()
}

/// Keeps `now` when it differs from `kept`; a state directory the caller cannot write only
/// loses the older figures.
pub(super) fn keep_successes(store: &Store, kept: &Successes, now: &Successes) {
    if now.is_empty() || now == kept || !store.dir().is_dir() {
        return;
    }
    if let Ok(bytes) = serde_json::to_vec(now)
        && let Err(e) = crate::fsutil::write_atomic(&store.dir().join(SUCCESS_FILE), &bytes, 0o600)
    {
        tracing::debug!(
            "could not keep the last successes: {}",
            crate::fsutil::io_text(&e)
        );
    }
}

/// One configured certificate as the metrics see it.
pub(super) struct CertFacts<'a> {
    pub(super) cert: &'a crate::config::CertificateConfig,
    /// Its record (`None`: it does not read), as the run held it or read.
    pub(super) rec: Option<Cow<'a, CertRecord>>,
    /// Retired with `cert-agent retire` and nothing started for it since.
    pub(super) retired: bool,
    /// The next renewal that needs a fresh domain validation.
    pub(super) fresh: Option<FreshValidation>,
    /// Validated by email: how close the end of email validation is.
    pub(super) sunset: Option<crate::engine::sunset::EmailSunset>,
}

/// The text exposition of the metrics, and each certificate's last success.
pub(super) fn render(
    certs: &[CertFacts<'_>],
    seen: &Looks,
    kept: &Successes,
    run: Option<&RunFacts<'_>>,
) -> (String, Successes) {
    let mut samples = Samples::default();
    let mut successes = Successes::new();
    // Each certificate's line of the run's report, by name (not searched for: quadratic at
    // 10,000 certificates).
    let lines: std::collections::HashMap<&str, &crate::engine::CertReport> = run
        .map(|r| {
            r.report
                .certificates
                .iter()
                .map(|c| (c.name.as_str(), c))
                .collect()
        })
        .unwrap_or_default();
    for facts in certs {
        let (cert, Some(rec)) = (facts.cert, facts.rec.as_deref()) else {
            continue;
        };
        let labels = samples.label(format!(
            "name=\"{}\",common_name=\"{}\",server=\"{}\"",
            escape(&cert.name),
            escape(cert.common_name()),
            cert.install.server
        ));
        let this_run = run.and_then(|r| {
            let c = lines.get(cert.name.as_str())?;
            Some((r.started_at, &c.outcome))
        });
        samples.put(
            Metric::Retired,
            labels,
            if facts.retired { 1.0 } else { 0.0 },
        );
        if facts.retired {
            // Nothing is managed: it must not look like a certificate never installed.
            continue;
        }
        samples.add(
            Metric::Info,
            &format!(
                "name=\"{}\",issuer=\"{}\"",
                escape(&cert.name),
                escape(&cert.order.issuer.label())
            ),
            1.0,
        );
        if let Some(f) = &facts.fresh {
            samples.put(Metric::FreshValidationDue, labels, unix(f.due));
            let person = if f.automatic { 0.0 } else { 1.0 };
            samples.put(Metric::FreshValidationNeedsPerson, labels, person);
        }
        if let Some(sunset) = &facts.sunset {
            samples.put(Metric::EmailValidationEnds, labels, sunset.days_left as f64);
        }
        if let Some(t) = certificate(&mut samples, &cert.name, labels, rec, this_run, seen, kept) {
            successes.insert(cert.name.clone(), t);
        }
    }
    (samples.text(), successes)
}

/// The samples of one certificate (`this_run`: when the last run started and what it did with
/// the certificate); its last success (Unix time), when it has one.
fn certificate(
    samples: &mut Samples,
    name: &str,
    labels: usize,
    rec: &CertRecord,
    this_run: Option<(OffsetDateTime, &Outcome)>,
    seen: &Looks,
    kept: &Successes,
) -> Option<i64> {
    if let Some(i) = &rec.installed {
        samples.put(Metric::NotAfter, labels, unix(i.not_after));
        samples.put(Metric::NotBefore, labels, unix(i.not_before));
        samples.put(Metric::Installed, labels, unix(i.installed_at));
    }
    if let Some(s) = &rec.partner.subscription {
        samples.put(Metric::Subscription, labels, unix(s.ends));
    }
    if let (Some(i), Some(r)) = (&rec.installed, &rec.revocation)
        && crate::crypto::same_serial_hex(&r.serial, &i.serial)
        && r.state != "no_crl"
    {
        let usable = r.state != "unknown";
        if usable {
            let revoked = r.state == "revoked";
            samples.put(Metric::Revoked, labels, if revoked { 1.0 } else { 0.0 });
        }
        samples.put(Metric::CrlUsable, labels, if usable { 1.0 } else { 0.0 });
    }
    let installed_at = rec.installed.as_ref().map(|i| i.installed_at);
    let looked = this_run
        .filter(|(_, o)| !matches!(o, Outcome::Planned { .. }))
        .map(|(t, _)| t);
    let fine = looked.filter(|_| {
        rec.consecutive_failures() == 0 && !matches!(this_run, Some((_, Outcome::Failed { .. })))
    });
    if let Some(t) = [looked, rec.last_failed_at, installed_at]
        .into_iter()
        .flatten()
        .max()
    {
        samples.put(Metric::LastAttempt, labels, unix(t));
    }
    // A success is an install, or a run that found the installed certificate in order: a
    // certificate never installed has none, whatever a run found.
    let success = [
        fine.map(|t| t.unix_timestamp()),
        installed_at.map(|t| t.unix_timestamp()),
        kept.get(name).copied(),
    ]
    .into_iter()
    .flatten()
    .max()
    .filter(|_| rec.installed.is_some());
    if let Some(t) = success {
        samples.put(Metric::LastSuccess, labels, t as f64);
    }
    let proved = rec
        .installed
        .as_ref()
        .and_then(|i| seen.proved.get(name).filter(|o| o.is_for(&i.serial)));
    if let Some(o) = proved {
        let elsewhere = o.elsewhere.as_ref().is_some_and(|e| !e.is_empty());
        samples.put(
            Metric::FleetServedSerialMismatch,
            labels,
            if elsewhere { 1.0 } else { 0.0 },
        );
    }
    if let Some(i) = &rec.installed
        && let Some(o) = latest_for(&i.serial, seen.served.get(name), proved)
    {
        samples.put(
            Metric::ServedMatches,
            labels,
            if o.matches() { 1.0 } else { 0.0 },
        );
        samples.put(Metric::ServedChecked, labels, unix(o.at));
    }
    samples.put(
        Metric::Failures,
        labels,
        f64::from(rec.consecutive_failures()),
    );
    let waiting = rec.partner.intent().is_some()
        || rec.partner.reissue().is_some()
        || rec.acme.as_ref().is_some_and(|b| b.order_url.is_some())
        || (rec.pending_key.is_some() && rec.partner.order().is_some());
    samples.put(Metric::Pending, labels, if waiting { 1.0 } else { 0.0 });
    if let Some((_, outcome)) = this_run {
        let with_outcome = format!("{},outcome=\"{}\"", samples.labels[labels], outcome.kind());
        samples.add(Metric::Outcome, &with_outcome, 1.0);
    }
    success
}
