//! Free reissues of the current order: a new key and CSR by default, the request recorded
//! before it is sent, confirmed after the answer, and the certificate ID switched when the CA
//! gives the reissued certificate a new one (`replacement_id`).
//!
//! Crash safety: the reissue is recorded (`confirmed = false`) before `POST .../reissue`. A run
//! that finds an unconfirmed reissue reads the certificate's details: if they show the new
//! CSR, a pending reissue or a replacement, the reissue happened; otherwise it is sent again
//! (a reissue is not billed, and the API allows only one at a time).

use anyhow::{Result, anyhow, bail};
use time::OffsetDateTime;

use crate::api::{ApiError, CertificateDetails, CertificateState, PendingAction, ReissueRequest};
use crate::config::{CertificateConfig, DcvMethod, Family};
use crate::crypto::{CsrInfo, PrivateKey};
use crate::store::{PartnerStage, ReissueState};

use super::context::Ctx;
use super::job::Job;
use super::keys;

/// The certificate to follow after a reissue, with the details read after it was sent when
/// they describe that certificate (the first check uses them instead of another call).
pub(super) struct Reissued {
    pub certificate_id: u64,
    pub details: Option<Box<CertificateDetails>>,
}

impl Reissued {
    fn id(certificate_id: u64) -> Self {
        Self {
            certificate_id,
            details: None,
        }
    }
}

/// Starts a reissue of the job's order. `new_key` false keeps the installed key.
pub(super) async fn start(
    ctx: &Ctx<'_>,
    job: &mut Job<'_>,
    new_key: bool,
    now: OffsetDateTime,
) -> Result<Reissued> {
    let cert = job.cert;
    let PartnerStage::Ordered { order, .. } = &job.rec.partner.stage else {
        bail!(
            "certificate '{}' has no order to reissue (none, or it has ended)",
            cert.name
        );
    };
    let certificate_id = order.certificate_id;
    // Reissue rule 6: a family S certificate on DNS_TXT_TOKEN must name another method for
    // every domain.
    if cert.order.family == Some(Family::S) && cert.dcv.method == DcvMethod::DnsTxt {
        bail!(
            "certificate '{}': a family S certificate validated by DNS TXT cannot be reissued \
             with the same method (document, Reissue rule 6); set `dcv` to http, https, cname \
             or email for the reissue",
            cert.name
        );
    }
    // Reissue rule 4: family C needs a new key every time.
    if !new_key && cert.order.family == Some(Family::C) {
        bail!(
            "certificate '{}': family C needs a new key for every reissue; refusing to send \
             the current key",
            cert.name
        );
    }
    super::preflight::email_gate(ctx.config, job, ctx.now(), "reissue")?;
    // The reissue is validated again like an order: a name whose CAA or DNSSEC stops the CA
    // is found here, before the request. The product list (read once per run) names the CA;
    // it is not read when no check is on.
    if super::preflight::any_check(ctx.config) {
        match ctx.products.get(ctx.client()?).await {
            Ok(list) => {
                if let Some(product) = list.iter().find(|p| p.id == cert.order.product_id) {
                    let ids = super::preflight::product_identities(ctx.config, product);
                    super::preflight::gate(ctx.config, job, &ids, None, "reissue").await?;
                }
            }
            Err(e) => {
                tracing::warn!(certificate = %cert.name, "{e:#}; the reissue goes without its pre-flight");
            }
        }
    }
    let key = if new_key {
        PrivateKey::generate(keys::key_type(cert))?
    } else {
        super::deploy::installed_key(cert)?
    };
    let pending = keys::save_new_key(ctx.store, cert, &key, now)?;
    job.rec.pending_key = Some(Box::new(pending.clone()));
    let begun = job.rec.partner.begin_reissue(ReissueState {
        certificate_id,
        csr_sha256: pending.csr_sha256.clone(),
        previous_serial: job.rec.installed.as_ref().map(|i| i.serial.clone()),
        requested_at: now,
        confirmed: false,
    });
    if !begun {
        bail!(
            "internal error: the order of certificate '{}' changed while its reissue was \
             prepared; nothing was sent",
            cert.name
        );
    }
    job.record(
        "reissue-intent",
        serde_json::json!({
            "certificate_id": certificate_id,
            "csr_sha256": pending.csr_sha256,
            "new_key": new_key,
        }),
    )?;
    if let Some(lead) = ctx.lead {
        lead.share(cert, &job.rec).await?;
    }
    send(ctx, job).await
}

/// Sends the recorded reissue and confirms it.
async fn send(ctx: &Ctx<'_>, job: &mut Job<'_>) -> Result<Reissued> {
    let cert = job.cert;
    let (Some(reissue), Some(pending)) = (
        job.rec.partner.reissue().cloned(),
        job.rec.pending_key.clone(),
    ) else {
        bail!("no reissue recorded for certificate '{}'", cert.name);
    };
    let request = ReissueRequest {
        csr: Some(pending.csr_pem.clone()),
        ..validation_of(cert)
    };
    match ctx
        .client()?
        .reissue(reissue.certificate_id, &request)
        .await
    {
        Ok(_) => {
            crate::failpoint::hit("reissue-sent");
            confirm(ctx, job).await
        }
        Err(e) if refused(&e) => {
            // Nothing happened at the CA: forget the attempt (the key is discarded).
            if let Some(p) = job.rec.pending_key.take() {
                keys::discard_key_file(&p.key_file);
            }
            job.rec.partner.end_reissue();
            // Reissue rule 1: not for expired or annulled certificates. Such an order has
            // ended; only a new order helps, and that is the operator's call.
            if let Ok(status) = ctx.client()?.status(reissue.certificate_id).await
                && let Some(state) = status.certificate.as_ref().and_then(|c| c.state())
                && matches!(
                    state,
                    CertificateState::Expired | CertificateState::Annulled
                )
            {
                job.rec.mark_ended(state.as_str());
            }
            job.record(
                "reissue-refused",
                serde_json::json!({ "error": e.to_string() }),
            )?;
            Err(anyhow!(e).context(format!(
                "the reissue of certificate {} was refused",
                reissue.certificate_id
            )))
        }
        // Kept back before it was sent (a fleet's leader whose lead ended): the reissue stays
        // recorded, as the fleet's shared record has it, for the next run to check and send.
        Err(e @ ApiError::NotSent { .. }) => Err(anyhow!(e).context(format!(
            "the reissue of certificate {} was not sent; it stays recorded for the next run",
            reissue.certificate_id
        ))),
        Err(e) => Err(anyhow!(e).context(format!(
            "the reissue of certificate {} may or may not have been received; the next run \
             checks the certificate before sending it again",
            reissue.certificate_id
        ))),
    }
}

/// The validation method the configuration asks for, named in the reissue call itself
/// (section "12. Reissue": `validation_email` for the common name, `validation_emails` for
/// the others), so that an order validated by another method (an order placed on the web site
/// with EMAIL validation, then adopted) switches in the same step. DNS TXT cannot be named on
/// reissue, and an email address is only named for the common name: otherwise the current
/// method is kept.
pub(crate) fn validation_of(cert: &CertificateConfig) -> ReissueRequest {
    let value = match cert.dcv.method {
        DcvMethod::Http => "HTTP_CSR_HASH",
        // HTTPS_CSR_HASH is a family S method; the others validate the same file over HTTP.
        DcvMethod::Https if cert.order.family == Some(Family::S) => "HTTPS_CSR_HASH",
        DcvMethod::Https => "HTTP_CSR_HASH",
        DcvMethod::Cname => "CNAME_CSR_HASH",
        DcvMethod::Email => {
            return ReissueRequest {
                validation_email: cert.dcv.email.clone(),
                ..ReissueRequest::default()
            };
        }
        DcvMethod::DnsTxt => return ReissueRequest::default(),
    };
    ReissueRequest {
        csr: None,
        validation_email: Some(value.to_owned()),
        validation_emails: cert
            .additional_domains()
            .iter()
            .map(|d| (d.to_ascii_lowercase(), value.to_owned()))
            .collect(),
    }
}

fn refused(e: &ApiError) -> bool {
    match e {
        ApiError::Http { status, .. } => (400..500).contains(status),
        ApiError::Refused { .. } => true,
        _ => false,
    }
}

/// Marks the reissue as received and follows a replacement ID.
async fn confirm(ctx: &Ctx<'_>, job: &mut Job<'_>) -> Result<Reissued> {
    let cert = job.cert;
    let Some(reissue) = job.rec.partner.reissue_mut() else {
        bail!("no reissue recorded for certificate '{}'", cert.name);
    };
    reissue.confirmed = true;
    let original = reissue.certificate_id;
    job.record(
        "reissued",
        serde_json::json!({ "certificate_id": original }),
    )?;
    follow_replacement(ctx, job, original).await
}

/// Reissue rule 7: some reissues give the certificate a new ID; read `replacement_id` from the
/// details of the original and use it from now on.
async fn follow_replacement(ctx: &Ctx<'_>, job: &mut Job<'_>, original: u64) -> Result<Reissued> {
    let cert = job.cert;
    let current = job.rec.partner.certificate_id().unwrap_or(original);
    // Only family S gives a reissued certificate a new ID (Reissue rule 7).
    if cert.order.family.is_some_and(|f| f != Family::S) {
        return Ok(Reissued::id(current));
    }
    let details = ctx.client()?.details(original).await?;
    match details.replacement_id {
        Some(new_id) if new_id != current => {
            if let Some(order) = job.rec.partner.order_mut() {
                order.certificate_id = new_id;
            }
            job.record(
                "replaced",
                serde_json::json!({ "original": original, "replacement": new_id }),
            )?;
            tracing::info!(
                certificate = %cert.name,
                "certificate {original} was replaced by {new_id} on reissue"
            );
            Ok(Reissued::id(new_id))
        }
        _ if current == original => Ok(Reissued {
            certificate_id: current,
            details: Some(Box::new(details)),
        }),
        _ => Ok(Reissued::id(current)),
    }
}

/// Resumes a recorded reissue: confirms one that was received, sends one that was not.
/// Returns the certificate ID to follow.
pub(super) async fn resume(ctx: &Ctx<'_>, job: &mut Job<'_>) -> Result<Reissued> {
    let cert = job.cert;
    let Some(reissue) = job.rec.partner.reissue().cloned() else {
        bail!("no reissue recorded for certificate '{}'", cert.name);
    };
    if reissue.confirmed {
        return Ok(Reissued::id(
            job.rec
                .partner
                .certificate_id()
                .unwrap_or(reissue.certificate_id),
        ));
    }
    let details = ctx.client()?.details(reissue.certificate_id).await?;
    let shows_new_csr = CsrInfo::from_pem(details.csr.as_bytes())
        .is_ok_and(|c| c.hashes.sha256.eq_ignore_ascii_case(&reissue.csr_sha256));
    let pending = details
        .status
        .certificate
        .as_ref()
        .and_then(|s| s.pending())
        == Some(PendingAction::Reissuing);
    if shows_new_csr || pending || details.replacement_id.is_some() {
        confirm(ctx, job).await
    } else {
        send(ctx, job).await
    }
}

#[cfg(test)]
mod tests {
    use super::validation_of;
    use crate::config::testing;

    fn cert(method: &str, extra: &str) -> crate::config::CertificateConfig {
        testing::certificate(&format!(
            "name = \"www\"\ndomains = [\"www.example.com\", \"shop.example.com\"]\n\
             product_id = 1\ndcv = \"{method}\"\n{extra}"
        ))
    }

    #[test]
    fn an_email_reissue_names_the_address_for_the_common_name_only() {
        let r = validation_of(&cert("email", r#"dcv_email = "admin@example.com""#));
        assert_eq!(r.validation_email.as_deref(), Some("admin@example.com"));
        assert!(r.validation_emails.is_empty(), "{:?}", r.validation_emails);
        let r = validation_of(&cert("http", ""));
        assert_eq!(r.validation_email.as_deref(), Some("HTTP_CSR_HASH"));
        assert_eq!(r.validation_emails.len(), 1);
    }
}
