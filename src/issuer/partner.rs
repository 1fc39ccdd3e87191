//! The Partner API issuer's side of validation: what an order's details and DCV status ask to
//! be published, checked against the CSR whose key this host keeps, as neutral challenges.
//!
//! Everything the API sends is untrusted: the order must carry our CSR, the CSR-hash file's
//! content must start with our CSR's SHA-256 (and family S's reported hashes must be ours),
//! and DNS values are checked before they reach the hook.

use anyhow::{Context, Result, anyhow, bail};

use crate::api::{ApiError, CertificateDetails, Client};
use crate::config::{CertificateConfig, DcvMethod, Family};
use crate::crypto::{CsrHashes, CsrInfo};
use crate::dcv::{self, Challenge, HttpChallenge, ValidationFile, WellKnown, hook};
use crate::store::PendingKey;

use super::Validation;

/// The name of the CSR-hash validation file of the pending key's CSR (`<MD5>.txt`).
pub(crate) fn validation_file_name(pending: &PendingKey) -> String {
    format!("{}.txt", pending.csr_md5)
}

/// Where the CSR-hash validation files live below a web root's `.well-known`.
pub(crate) const WELL_KNOWN: WellKnown = WellKnown::PkiValidation;

/// Whether the order's details carry our CSR. `Ok(false)` while a reissue is not processed
/// yet (the details still show the previous CSR); an order placed with another CSR is an
/// error.
pub(crate) fn carries_our_csr(
    certificate_id: u64,
    details: &CertificateDetails,
    ours: &CsrHashes,
    reissue: bool,
) -> Result<bool> {
    let theirs = CsrInfo::from_pem(details.csr.as_bytes()).with_context(|| {
        format!("certificate {certificate_id}: the CSR the API reports cannot be read")
    })?;
    if theirs.hashes.sha256.eq_ignore_ascii_case(&ours.sha256) {
        return Ok(true);
    }
    if reissue {
        return Ok(false);
    }
    bail!(
        "certificate {certificate_id} was ordered with another CSR than the one whose key \
         this host keeps; refusing to validate it"
    )
}

/// What the order `certificate_id` asks to be published for its validation, by the
/// configured method. Reads the DCV status where the method needs it.
pub(crate) async fn challenges(
    client: &Client,
    cert: &CertificateConfig,
    certificate_id: u64,
    details: &CertificateDetails,
    ours: &CsrHashes,
) -> Result<Validation> {
    match cert.dcv.method {
        DcvMethod::Http | DcvMethod::Https => {
            http(client, cert, certificate_id, details, ours).await
        }
        DcvMethod::DnsTxt => txt(client, cert, certificate_id, details).await,
        DcvMethod::Cname => cname(client, cert, certificate_id, ours).await,
        DcvMethod::Email => Ok(Validation::Publish(vec![Challenge::Person(format!(
            "certificate {certificate_id} validates by email to {}: approve the message the \
             CA sent (resend it with `cert-agent dcv resend {certificate_id}`)",
            if details.validation_email.is_empty() {
                "the validation address"
            } else {
                details.validation_email.as_str()
            }
        ))])),
    }
}

/// HTTP(S) validation: the file named by our CSR's hashes, for every name of the certificate.
async fn http(
    client: &Client,
    cert: &CertificateConfig,
    certificate_id: u64,
    details: &CertificateDetails,
    ours: &CsrHashes,
) -> Result<Validation> {
    if !details.dcv_method.contains("CSR_HASH") || details.dcv_method.contains("CNAME") {
        bail!(
            "certificate {certificate_id} validates by {}, but the configuration says \
             `dcv = \"{}\"`; switch it with `cert-agent dcv change {certificate_id} {}`",
            details.dcv_method,
            if cert.dcv.method == DcvMethod::Https {
                "https"
            } else {
                "http"
            },
            cert.dcv.method.dcv_type().as_str()
        );
    }
    let Some(content) = details.dcv_content.as_deref() else {
        return Ok(Validation::Later);
    };
    let file = ValidationFile::for_csr(ours, content).with_context(|| {
        format!("certificate {certificate_id}: the validation content from the API")
    })?;
    if cert.order.family == Some(Family::S) {
        cross_check_hashes(client, certificate_id, ours).await?;
    }
    Ok(Validation::Publish(vec![Challenge::Http(HttpChallenge {
        file,
        domains: cert.domains.clone(),
    })]))
}

/// DNS TXT validation: one record per name.
async fn txt(
    client: &Client,
    cert: &CertificateConfig,
    certificate_id: u64,
    details: &CertificateDetails,
) -> Result<Validation> {
    // Family S has one value for the whole order (`dcv_content`); other families give
    // one per domain (`emails.random_value` of the DCV status).
    let per_domain: std::collections::BTreeMap<String, String> =
        match client.dcv_status(certificate_id).await {
            Ok(s) => s
                .domains
                .into_iter()
                .filter_map(|(d, e)| {
                    let v = e.emails.and_then(|m| m.random_value)?;
                    Some((d.to_ascii_lowercase(), v))
                })
                .collect(),
            Err(ApiError::Http { status: 422, .. }) => Default::default(),
            Err(e) => return Err(anyhow!(e).context("could not read the DCV status")),
        };
    let common = details
        .dcv_content
        .as_deref()
        .map(str::trim)
        .filter(|v| !v.is_empty());
    let mut records = Vec::new();
    for domain in &cert.domains {
        let key = domain.to_ascii_lowercase();
        let value = per_domain
            .get(&key)
            .or_else(|| per_domain.get(key.trim_start_matches("*.")))
            .map(String::as_str)
            .or(common);
        let Some(value) = value else {
            return Ok(Validation::Later);
        };
        records.push(Challenge::Dns(
            hook::txt_record(domain, value).context("the DNS TXT value from the API")?,
        ));
    }
    Ok(Validation::Publish(records))
}

/// CNAME validation: one record per name, through the hook when the CA's domain is configured,
/// otherwise by the operator.
async fn cname(
    client: &Client,
    cert: &CertificateConfig,
    certificate_id: u64,
    ours: &CsrHashes,
) -> Result<Validation> {
    let Some(ca_domain) = cert.dcv.cname_target_domain.as_deref() else {
        return Ok(Validation::Publish(vec![Challenge::Person(format!(
            "certificate {certificate_id} validates by CNAME records: for each domain \
             create `_{}.<domain>` CNAME `{}.{}[.<unique value>].<CA validation \
             domain>` (set `cname_target_domain` to let dns_hook create them)",
            ours.md5.to_ascii_lowercase(),
            &ours.sha256[..32].to_ascii_lowercase(),
            &ours.sha256[32..].to_ascii_lowercase()
        ))]));
    };
    // Family S puts its unique value into the target; the DCV status reports it.
    let unique = match client.dcv_status(certificate_id).await {
        Ok(s) => s
            .unique_value
            .or_else(|| s.domains.values().find_map(|d| d.unique_value.clone())),
        Err(ApiError::Http { status: 422, .. }) => None,
        Err(e) => return Err(anyhow!(e).context("could not read the DCV status")),
    };
    let records = cert
        .domains
        .iter()
        .map(|d| hook::cname_record(d, ours, unique.as_deref(), ca_domain).map(Challenge::Dns))
        .collect::<Result<Vec<_>, _>>()
        .context("the CNAME record for validation")?;
    Ok(Validation::Publish(records))
}

/// Family S reports the CSR hashes in the DCV status; they must be ours.
async fn cross_check_hashes(client: &Client, certificate_id: u64, ours: &CsrHashes) -> Result<()> {
    let status = match client.dcv_status(certificate_id).await {
        Ok(s) => s,
        // Only available while in progress; the content check above already holds.
        Err(ApiError::Http { status: 422, .. }) => return Ok(()),
        Err(e) => return Err(anyhow!(e).context("could not read the DCV status")),
    };
    for (domain, entry) in &status.domains {
        if let Some(h) = &entry.hashes {
            dcv::content::check_api_hashes(ours, h.md5.as_deref(), h.sha1.as_deref())
                .with_context(|| {
                    format!("certificate {certificate_id}, domain {domain}: DCV status hashes")
                })?;
        }
    }
    Ok(())
}
