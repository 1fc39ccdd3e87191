//! `cert-agent adopt NAME --certificate-id ID`: take over an order placed elsewhere. Its key
//! is not on this host, so the order is reissued with a local key — on its due date, or at
//! once with `--reissue`.

use anyhow::{Context, Result, bail};

use crate::api::{CertificateState, Client};
use crate::config::{CertificateConfig, Config};
use crate::crypto::CertificateInfo;
use crate::store::{CertRecord, Installed, OrderRef, Store};

use time::OffsetDateTime;

/// What `adopt` did.
#[derive(Debug, Clone, serde::Serialize)]
pub(crate) struct AdoptSummary {
    pub name: String,
    pub certificate_id: u64,
    pub state: String,
    pub message: String,
}

/// Records certificate `certificate_id` as the order of the configured certificate `name`.
pub(crate) async fn adopt(
    config: &Config,
    client: &Client,
    name: &str,
    certificate_id: u64,
    now: OffsetDateTime,
) -> Result<AdoptSummary> {
    let cert = config.certificate_named(name)?;
    let store = Store::open(&config.agent.state_dir)?;
    let _lock = store.lock()?;
    let mut rec = store.load(name)?;
    let (state, message) =
        adopt_record(&store, client, cert, &mut rec, certificate_id, now).await?;
    Ok(AdoptSummary {
        name: name.to_owned(),
        certificate_id,
        state: state.clone(),
        message: format!("'{name}' now manages certificate {certificate_id} ({state}){message}"),
    })
}

/// Adopts `certificate_id` into `rec` (the caller holds the run lock): checks that the order
/// is free, covers the certificate's common name and can still be reissued; records it, and
/// its issued certificate as installed (so that the due date comes from it). Returns the
/// order's state and the rest of a message for the operator.
pub(super) async fn adopt_record(
    store: &Store,
    client: &Client,
    cert: &CertificateConfig,
    rec: &mut CertRecord,
    certificate_id: u64,
    now: OffsetDateTime,
) -> Result<(String, String)> {
    let name = cert.name.as_str();
    check_free(store, rec, name, certificate_id)?;
    let details = client
        .details(certificate_id)
        .await
        .with_context(|| format!("could not read certificate {certificate_id}"))?;
    let configured: Vec<String> = cert
        .domains
        .iter()
        .map(|d| d.to_ascii_lowercase())
        .collect();
    if !configured.contains(&details.common_name.to_ascii_lowercase()) {
        bail!(
            "certificate {certificate_id} is for {} (all names: {}), which is not among the \
             domains of '{name}' ({})",
            details.common_name,
            details.all_domains.join(", "),
            cert.domains.join(", ")
        );
    }
    let state = details
        .status
        .certificate
        .as_ref()
        .map(|s| s.as_str().to_owned())
        .unwrap_or_else(|| "unknown".into());
    let code_state = details.status.certificate.as_ref().and_then(|s| s.state());
    if matches!(
        code_state,
        Some(CertificateState::Annulled | CertificateState::Expired)
    ) {
        bail!("certificate {certificate_id} is {state}; it cannot be reissued");
    }

    rec.partner.set_order(OrderRef {
        certificate_id,
        order_id: None,
        placed_at: now,
        adopted: true,
    });
    if let Some(s) = super::job::subscription_of(&details) {
        rec.partner.subscription = Some(s);
    }
    // The certificate issued elsewhere decides when the reissue is due.
    let mut message = String::new();
    if code_state == Some(CertificateState::Issued) {
        let leaf = issued_leaf(client, certificate_id).await?;
        if let Some(leaf) = leaf {
            rec.installed = Some(Installed {
                serial: leaf.serial_hex.clone(),
                not_before: leaf.not_before,
                not_after: leaf.not_after,
                certificate_id,
                files: Vec::new(),
                installed_at: now,
                leaf_file: None,
                leaf_stamp: None,
            });
            message = format!(
                "; its certificate (serial {}) is valid until {}: it is reissued with a key made \
                 on this host when it falls due, or now with `cert-agent reissue {name}`",
                leaf.serial_hex,
                leaf.not_after.date()
            );
        }
    }
    if message.is_empty() {
        message = "; it is reissued with a key made on this host on the next `renew`".to_owned();
    }
    // An order placed elsewhere may validate by another method than the configured one: the
    // reissue names the configured method and so switches it in the same step.
    let named = super::reissue::validation_of(cert).validation_email;
    if let Some(method) = named.filter(|m| !m.contains('@'))
        && !details.dcv_method.is_empty()
        && !details.dcv_method.eq_ignore_ascii_case(&method)
    {
        message.push_str(&format!(
            "; it validates by {} today: the reissue names {method} (`dcv = \"{}\"`), which \
             switches the method in the same step",
            details.dcv_method,
            serde_json::to_value(cert.dcv.method)
                .ok()
                .and_then(|v| v.as_str().map(str::to_owned))
                .unwrap_or_default()
        ));
    }
    store.save(rec)?;
    store.journal(
        name,
        "adopted",
        serde_json::json!({ "certificate_id": certificate_id, "state": state }),
    )?;
    Ok((state, message))
}

/// Refuses to adopt into a record that is busy (an order outcome unknown), belongs to another
/// order, or an order that another configured certificate manages.
fn check_free(store: &Store, rec: &CertRecord, name: &str, certificate_id: u64) -> Result<()> {
    if rec.partner.intent().is_some() {
        bail!(
            "certificate '{name}' has an order whose outcome is unknown; resolve it first \
             (`cert-agent renew --name {name}` reconciles it)"
        );
    }
    if let Some(o) = rec.partner.order()
        && o.certificate_id != certificate_id
    {
        bail!(
            "certificate '{name}' already belongs to order {}; adopting {certificate_id} would \
             abandon it (remove {} to start afresh)",
            o.certificate_id,
            store.record_path(name)?.display()
        );
    }
    for other in store.names()? {
        if other != name
            && let Ok(r) = store.load(&other)
            && r.partner.certificate_id() == Some(certificate_id)
        {
            bail!(
                "certificate {certificate_id} is already managed by '{other}'; one order \
                 belongs to one configured certificate"
            );
        }
    }
    Ok(())
}

/// The leaf of an issued certificate as the API serves it (`None` when the bundle holds none
/// that can be read).
async fn issued_leaf(client: &Client, certificate_id: u64) -> Result<Option<CertificateInfo>> {
    let download = client
        .download_bundle(certificate_id)
        .await
        .with_context(|| format!("could not download certificate {certificate_id}"))?;
    let leaf = crate::bundle::Archive::unpack(&download.bytes)
        .ok()
        .and_then(|a| {
            a.get("pem/fullchain.pem")
                .or_else(|| a.get("nginx/fullchain.crt"))
                .map(<[u8]>::to_vec)
        })
        .and_then(|pem| CertificateInfo::from_pem(&pem).ok());
    Ok(leaf)
}
