//! The pre-flight before a billed order or a reissue: the configuration's `[preflight]` and
//! the product's CA turned into the DNS checks of [`crate::preflight`]; a failure stops the
//! request before anything is sent, and the certificate backs off like a refused order.

use anyhow::Result;

use crate::api::Product;
use crate::config::{CertificateConfig, Config, DcvMethod, Issuer};
use crate::preflight::{self, Requester, Settings, Validation};

use super::job::Job;

/// A request the pre-flight stopped before it was sent: a refusal the operator acts on, as
/// the order's own refusals are.
#[derive(Debug, thiserror::Error)]
#[error(
    "certificate '{name}': the pre-flight stops the {what} before it is sent (nothing is \
     billed; see docs/preflight.md): {why}"
)]
pub(crate) struct Stopped {
    name: String,
    what: String,
    why: String,
}

/// Where the system's resolver is named.
const RESOLV_CONF: &str = "/etc/resolv.conf";

/// The settings of `config`'s `[preflight]` (the resolver: configured, else the system's).
pub(crate) fn settings(config: &Config) -> Settings {
    let p = &config.preflight;
    let resolver = p.resolver.unwrap_or_else(|| {
        std::fs::read_to_string(RESOLV_CONF)
            .ok()
            .and_then(|t| preflight::system_resolver(&t))
            .unwrap_or_else(|| ([127, 0, 0, 1], 53).into())
    });
    Settings {
        caa: p.caa,
        dnssec: p.dnssec,
        http: p.http,
        resolver,
        timeout: std::time::Duration::from_secs(p.timeout_secs),
    }
}

/// The CAA identities of a product's CA: `[preflight] caa_identities` for its issuer value
/// or brand, else the built-in table's.
pub(crate) fn identities(
    config: &Config,
    issuer: Option<&str>,
    brand: Option<&str>,
) -> Vec<String> {
    let keys: Vec<String> = [issuer, brand]
        .into_iter()
        .flatten()
        .map(|k| k.trim().to_ascii_lowercase())
        .collect();
    keys.iter()
        .find_map(|k| config.preflight.caa_identities.get(k).cloned())
        .unwrap_or_else(|| preflight::known_identities(keys.iter().map(String::as_str)))
}

/// The validation method as CAA's `validationmethods` names it.
pub(crate) fn method(cert: &CertificateConfig) -> &'static str {
    match cert.dcv.method {
        DcvMethod::Http | DcvMethod::Https => "http-01",
        DcvMethod::Cname | DcvMethod::DnsTxt => "dns-01",
        DcvMethod::Email => "email",
    }
}

/// What the pre-flight asks beyond CAA for `cert`'s validation method: the name's addresses
/// for HTTP, the validation record's zone for DNS (`_acme-challenge` at an ACME CA,
/// `_pki-validation` for the Partner API's DNS_TXT_TOKEN).
pub(crate) fn validation(cert: &CertificateConfig) -> Validation {
    let acme = matches!(cert.order.issuer, Issuer::Acme(_));
    match cert.dcv.method {
        DcvMethod::Http | DcvMethod::Https => Validation::Http,
        DcvMethod::Cname | DcvMethod::DnsTxt if acme => Validation::Txt("_acme-challenge"),
        DcvMethod::DnsTxt => Validation::Txt("_pki-validation"),
        DcvMethod::Cname => Validation::Cname,
        DcvMethod::Email => Validation::Email,
    }
}

/// Whether any check of `[preflight]` is on.
pub(crate) fn any_check(config: &Config) -> bool {
    let p = &config.preflight;
    p.caa || p.dnssec || p.http
}

/// An ACME CA's CAA identities: `[preflight] caa_identities` for its name, else Let's
/// Encrypt's for a directory there.
pub(crate) fn acme_identities(config: &Config, name: &str) -> Vec<String> {
    if let Some(ids) = config
        .preflight
        .caa_identities
        .get(&name.to_ascii_lowercase())
    {
        return ids.clone();
    }
    match config.acme.get(name) {
        Some(ca) if ca.directory.contains("letsencrypt.org") => {
            preflight::known_identities(["letsencrypt"])
        }
        _ => Vec::new(),
    }
}

/// The identities of a Partner product's CA.
pub(crate) fn product_identities(config: &Config, product: &Product) -> Vec<String> {
    identities(config, product.issuer.as_deref(), product.brand.as_deref())
}

/// Before `what` (an order, a reissue) of a certificate validated by email once email
/// validation has ended ([`super::sunset::EMAIL_SUNSET`], CA/Browser Forum ballot SC-090): no
/// CA may validate a name by email any more, so the request would be billed and never
/// issued. Stopped like a failed pre-flight (journaled, backed off) unless `[preflight] email
/// = false`.
pub(super) fn email_gate(
    config: &Config,
    job: &mut Job<'_>,
    now: time::OffsetDateTime,
    what: &str,
) -> Result<()> {
    let cert = job.cert;
    if !config.preflight.email
        || cert.dcv.method != DcvMethod::Email
        || !super::sunset::email_ended_on(now.date())
    {
        return Ok(());
    }
    let why = format!(
        "validation by email ended on {} (CA/Browser Forum ballot SC-090): no CA validates {} \
         by email any more (to fix: dcv = \"http\", \"dns-txt\" or \"cname\"; `cert-agent dcv \
         migrate {} --to http|dns` for an order in progress)",
        super::sunset::EMAIL_SUNSET,
        cert.domains.join(", "),
        cert.name
    );
    let findings = serde_json::json!([{ "name": cert.name, "message": why }]);
    stop(job, what, why, findings)
}

/// The pre-flight before `what` (an order, a reissue): warnings are logged, failures stop it
/// with [`Stopped`], journaled, and (before a first order) the record is
/// marked refused so that it backs off from the first failure.
pub(super) async fn gate(
    config: &Config,
    job: &mut Job<'_>,
    identities: &[String],
    account_uri: Option<&str>,
    what: &str,
) -> Result<()> {
    let cert = job.cert;
    let who = Requester {
        identities,
        account_uri,
        method: Some(method(cert)),
    };
    let report = preflight::check(&settings(config), &cert.domains, &who, validation(cert)).await;
    for w in report.warnings() {
        tracing::warn!(certificate = %cert.name, "pre-flight: {}: {}", w.name, w.message);
    }
    let failures = report.failures();
    if failures.is_empty() {
        return Ok(());
    }
    let why = failures
        .iter()
        .map(|f| match &f.fix {
            Some(fix) => format!("{}: {} (to fix: {fix})", f.name, f.message),
            None => format!("{}: {}", f.name, f.message),
        })
        .collect::<Vec<_>>()
        .join("; ");
    stop(job, what, why, serde_json::json!(failures))
}

/// Stops `what` of `job`'s certificate before the request: journaled with its `findings`, and
/// (before a first order) the record marked refused so that it backs off from the first
/// failure.
fn stop(job: &mut Job<'_>, what: &str, why: String, findings: serde_json::Value) -> Result<()> {
    if job.rec.partner.order().is_none() {
        job.rec.partner.order_refused = true;
    }
    job.record(
        "preflight-failed",
        serde_json::json!({ "before": what, "findings": findings }),
    )?;
    Err(Stopped {
        name: job.cert.name.clone(),
        what: what.to_owned(),
        why,
    }
    .into())
}
