//! `cert-agent dcv migrate NAME --to http|dns`: moves a certificate validated by email to
//! HTTP or DNS validation before email validation ends (2028-03-15, CA/B Forum SC-090). The
//! new method is checked with the pre-flight first; then the current order, when one is in
//! progress, is switched through the API's change DCV call (one call per name), recorded in
//! the audit log; last the configuration lines to change are printed. The agent never edits
//! the configuration.

use anyhow::{Result, bail};

use super::exit;
use super::output::Output;
use crate::api::Client;
use crate::config::{CertificateConfig, Config, Issuer};
use crate::engine::preflight as gate;
use crate::preflight::{self, Level, Requester, Validation};

/// The methods a certificate can move to, as `--to` names them.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Target {
    /// The change DCV call's value.
    api: &'static str,
    /// The configuration's `dcv` value.
    dcv: &'static str,
    /// CAA's `validationmethods` name.
    caa: &'static str,
    validation: Validation,
}

fn target(to: &str) -> Result<Target> {
    Ok(match to {
        "http" => Target {
            api: "HTTP_CSR_HASH",
            dcv: "http",
            caa: "http-01",
            validation: Validation::Http,
        },
        // The change DCV call offers CNAME_CSR_HASH for DNS (not DNS_TXT_TOKEN).
        "dns" => Target {
            api: "CNAME_CSR_HASH",
            dcv: "cname",
            caa: "dns-01",
            validation: Validation::Cname,
        },
        other => bail!("--to {other:?}: expected \"http\" or \"dns\""),
    })
}

/// Runs the migration of certificate `name`; exit 3 when the pre-flight fails or the CA
/// refuses the change.
pub(super) async fn run(
    client: &Client,
    config: &Config,
    name: &str,
    to: &str,
    out: &Output,
) -> Result<u8> {
    let cert = *config
        .select(&[name.to_owned()])?
        .first()
        .ok_or_else(|| anyhow::anyhow!("certificate '{name}' is not configured"))?;
    let target = target(to)?;
    if out.json {
        bail!("dcv migrate prints its steps as text only (no --json)");
    }
    if cert.order.issuer != Issuer::Partner {
        bail!("certificate '{name}' is ordered from an ACME CA, which does not validate by email");
    }
    if target.validation == Validation::Http && cert.domains.iter().any(|d| d.starts_with("*.")) {
        bail!(
            "certificate '{name}' has a wildcard name, which cannot be validated over HTTP: use \
             --to dns"
        );
    }
    // The pre-flight of the new method first: a name the CA could not validate that way is
    // not switched.
    let products = client.products(false).await?;
    let product = products.iter().find(|p| p.id == cert.order.product_id);
    let ids = gate::identities(
        config,
        product.and_then(|p| p.issuer.as_deref()),
        product.and_then(|p| p.brand.as_deref()),
    );
    let who = Requester {
        identities: &ids,
        account_uri: None,
        method: Some(target.caa),
    };
    let report = preflight::check(
        &gate::settings(config),
        &cert.domains,
        &who,
        target.validation,
    )
    .await;
    for f in &report.findings {
        let level = match f.level {
            Level::Ok => "OK",
            Level::Warning => "WARNING",
            Level::Failure => "FAILED",
        };
        outln!("pre-flight {}  {} {level}: {}", f.name, f.check, f.message);
        if let (Some(fix), false) = (&f.fix, f.level == Level::Ok) {
            outln!("    to fix: {fix}");
        }
    }
    if !report.failures().is_empty() {
        outln!(
            "certificate '{name}': the pre-flight of {} validation fails; nothing was changed",
            to.to_ascii_uppercase()
        );
        return Ok(exit::PARTIAL);
    }
    let refused = change_current_order(client, config, cert, target).await?;
    outln!("{}", config_lines(config, cert, target));
    Ok(if refused { exit::PARTIAL } else { exit::OK })
}

/// Switches the order in progress, name by name; whether the CA refused a change.
async fn change_current_order(
    client: &Client,
    config: &Config,
    cert: &CertificateConfig,
    target: Target,
) -> Result<bool> {
    let store = crate::store::Store::existing(&config.agent.state_dir);
    let rec = store.load(&cert.name)?;
    let in_progress = rec.installed.is_none() || rec.partner.reissue().is_some();
    let Some(order) = rec.partner.order().filter(|_| in_progress) else {
        outln!(
            "certificate '{}': no order in progress, nothing to change at the CA; the next \
             order or reissue validates by the method the configuration names",
            cert.name
        );
        return Ok(false);
    };
    let id = order.certificate_id;
    let mut refused = false;
    for domain in &cert.domains {
        let r = client.change_dcv(id, target.api, Some(domain)).await;
        let asked = serde_json::json!({ "method": target.api, "domain": domain, "migrate": true });
        super::audit::answer(config, "dcv-change", id, asked, &r)?;
        match r {
            Ok(a) => outln!(
                "certificate {id}: {domain}: validation changed to {} ({})",
                target.api,
                crate::values::text::printable(a.result.as_deref().unwrap_or("done"))
            ),
            Err(e) => {
                refused = true;
                outln!(
                    "certificate {id}: {domain}: the change to {} failed: {e}",
                    target.api
                );
            }
        }
    }
    Ok(refused)
}

/// The lines of the certificate's `[[certificate]]` table to change.
fn config_lines(config: &Config, cert: &CertificateConfig, target: Target) -> String {
    let mut text = format!(
        "Change the [[certificate]] table of '{}' in {} (the agent does not edit it):\n  \
         dcv = \"{}\"    # was \"email\"\n  remove dcv_email (and any additional validation \
         emails)\n",
        cert.name,
        config.path.display(),
        target.dcv
    );
    match target.validation {
        Validation::Http if cert.dcv.webroot.is_none() && !cert.dcv.standalone => text.push_str(
            "  webroot = \"/var/www/html\"    # the document root serving every name on port 80 \
             (or standalone = true)\n",
        ),
        Validation::Http => {}
        _ if cert.dcv.dns_hook.is_none() => text.push_str(
            "  dns_hook = [\"/usr/local/bin/dns-hook\"]    # adds and removes the CNAME record \
             (docs/dns-hooks.md); without it the records to create are printed\n",
        ),
        _ => {}
    }
    text.push_str(&format!(
        "then `cert-agent renew {}` places the validation {}.",
        cert.name,
        if target.validation == Validation::Http {
            "file"
        } else {
            "record"
        }
    ));
    text
}
