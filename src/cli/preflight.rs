//! `cert-agent preflight [NAME]... [--json]`: the DNS checks made before a billed order
//! (CAA, DNSSEC), on demand, for the named certificates or all of them. Nothing is ordered.

use anyhow::{Context, Result};
use serde::Serialize;

use super::exit;
use super::output::Output;
use crate::config::{Config, Issuer};
use crate::engine::preflight as gate;
use crate::preflight::{self, Level, Report, Requester};

#[derive(Serialize)]
struct Item<'a> {
    certificate: &'a str,
    #[serde(flatten)]
    report: Report,
}

/// Runs the pre-flight of the selected certificates; exit 3 when one fails.
pub(super) async fn run(config: &Config, names: &[String], out: &Output) -> Result<u8> {
    let certs = config.select(names)?;
    let mut products = None;
    let settings = gate::settings(config);
    let mut items = Vec::new();
    for cert in certs {
        let ids =
            match &cert.order.issuer {
                Issuer::Partner => {
                    if products.is_none() {
                        let client = super::client_for(config)?;
                        products =
                            Some(client.products(false).await.context(
                                "could not read the product list for the CAs' identities",
                            )?);
                    }
                    let product = products
                        .iter()
                        .flatten()
                        .find(|p| p.id == cert.order.product_id);
                    gate::identities(
                        config,
                        product.and_then(|p| p.issuer.as_deref()),
                        product.and_then(|p| p.brand.as_deref()),
                    )
                }
                Issuer::Acme(name) => gate::acme_identities(config, name),
            };
        let who = Requester {
            identities: &ids,
            account_uri: None,
            method: Some(gate::method(cert)),
        };
        let report = preflight::check(&settings, &cert.domains, &who, gate::validation(cert)).await;
        items.push(Item {
            certificate: &cert.name,
            report,
        });
    }
    let failed = items.iter().any(|i| !i.report.failures().is_empty());
    if out.json {
        out.print_json(&items)?;
    } else {
        out!("{}", render(&items, &settings.resolver.to_string()));
    }
    Ok(if failed { exit::PARTIAL } else { exit::OK })
}

fn render(items: &[Item<'_>], resolver: &str) -> String {
    let mut text = String::new();
    for i in items {
        for f in &i.report.findings {
            let level = match f.level {
                Level::Ok => "OK",
                Level::Warning => "WARNING",
                Level::Failure => "FAILED",
            };
            text.push_str(&format!(
                "{}  {}  {} {}: {}\n",
                i.certificate, f.name, f.check, level, f.message
            ));
            if let (Some(fix), false) = (&f.fix, f.level == Level::Ok) {
                text.push_str(&format!("    to fix: {fix}\n"));
            }
        }
        text.push_str(&format!(
            "{}: {} DNS question(s) to {resolver} in {} ms\n",
            i.certificate, i.report.queries, i.report.millis
        ));
    }
    text
}
