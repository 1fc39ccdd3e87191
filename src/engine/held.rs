//! Certificates held until they are valid: an issued certificate that passed every check but
//! begins after this host's clock (a CA whose clock runs ahead, a host a little behind) is
//! kept — its archive in `state_dir/held/NAME.zip`, its serial and start in the record — and
//! installed by the first run once it is valid, without another API call. Holding is no
//! failure: no backoff, the run is pending (exit 75).

use anyhow::{Context, Result, bail};
use time::OffsetDateTime;

use crate::bundle::ValidatedBundle;
use crate::clock;
use crate::store::Held;

use super::deploy::{self, Checked};
use super::job::{Job, Next, Ready};
use super::keys;
use super::report::Outcome;

/// Keeps a checked certificate that begins after this host's clock (its archive in the state
/// directory) for a later run to install once it is valid.
pub(super) fn hold(
    job: &mut Job<'_>,
    certificate_id: u64,
    bundle: &ValidatedBundle,
    archive: &[u8],
) -> Result<Next> {
    job.store().save_held(&job.cert.name, archive)?;
    job.rec.held = Some(Box::new(Held {
        certificate_id,
        serial: bundle.serial_hex.clone(),
        not_before: bundle.not_before,
    }));
    job.record(
        "held",
        serde_json::json!({
            "certificate_id": certificate_id,
            "serial": bundle.serial_hex,
            "not_before": clock::rfc3339(bundle.not_before),
        }),
    )?;
    tracing::info!(
        certificate = %job.cert.name,
        serial = %bundle.serial_hex,
        "issued, valid from {}; held until then",
        clock::rfc3339(bundle.not_before)
    );
    Ok(Next::Done(Outcome::Pending {
        reason: line(certificate_id, &bundle.serial_hex, bundle.not_before),
    }))
}

/// `certificate 123 issued (serial AB…), valid from T; installs then`.
pub(crate) fn line(certificate_id: u64, serial: &str, not_before: OffsetDateTime) -> String {
    format!(
        "certificate {certificate_id} issued (serial {serial}), valid from {}; installs then",
        clock::rfc3339(not_before)
    )
}

/// The held certificate, still not valid: pending, nothing called.
pub(super) fn still_held(job: &Job<'_>) -> Next {
    let text = match &job.rec.held {
        Some(h) => line(h.certificate_id, &h.serial, h.not_before),
        None => "held until it is valid".to_owned(),
    };
    Next::Done(Outcome::Pending { reason: text })
}

/// The held certificate, now valid: read back, checked again (key, names, chain, clock) and
/// ready to install. A held archive that is gone or no longer checks is dropped, with the
/// error: the caller downloads the certificate again.
pub(super) fn install(job: &mut Job<'_>) -> Result<Next> {
    let result = ready(job);
    if result.is_err() {
        job.store().discard_held(&job.cert.name);
        job.rec.held = None;
        job.save()?;
    }
    result
}

fn ready(job: &Job<'_>) -> Result<Next> {
    let Some(held) = job.rec.held.clone() else {
        bail!("internal error: no held certificate recorded");
    };
    let Some(pending) = job.rec.pending_key.clone() else {
        bail!(
            "the held certificate {} has no local key in the state directory; it is dropped",
            held.certificate_id
        );
    };
    let key = keys::load_pending(&pending)?;
    let archive = job
        .store()
        .load_held(&job.cert.name, deploy::HELD_ARCHIVE_MAX)
        .context("the held certificate could not be read; it is dropped and downloaded again")?;
    let bundle = match deploy::check_archive(job.cert, &archive, &key, job.clock.now())
        .context("the held certificate was rejected; it is dropped and downloaded again")?
    {
        Checked::Valid(b) => b,
        Checked::NotYet(_) => return Ok(still_held(job)),
    };
    if !crate::crypto::same_serial_hex(&bundle.serial_hex, &held.serial) {
        bail!(
            "the held archive holds serial {}, not the recorded {}; it is dropped and \
             downloaded again",
            bundle.serial_hex,
            held.serial
        );
    }
    let install = deploy::cert_install(job.cert, &bundle, &key);
    Ok(Next::Ready(Box::new(Ready {
        certificate_id: held.certificate_id,
        bundle,
        install,
        archive,
    })))
}
