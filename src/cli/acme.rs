//! `cert-agent acme account [NAME]` (show the account of an ACME CA, registering it on first
//! use; `--deactivate`) and `cert-agent revoke NAME` (revokeCert for a certificate of an ACME
//! CA).

use anyhow::{Context, Result, anyhow, bail};

use super::exit;
use super::output::Output;
use crate::clock::Clock;
use crate::config::{AcmeCa, Config};
use crate::engine::acme::{account_dir, account_of};
use crate::issuer::acme;
use crate::store::{RevocationSeen, Store};

mod fleet;

/// The `[acme.NAME]` asked for, or the only one configured.
fn ca_of<'c>(config: &'c Config, name: Option<&str>) -> Result<&'c AcmeCa> {
    let known = || config.acme.keys().cloned().collect::<Vec<_>>().join(", ");
    match name {
        Some(n) => config.acme.get(n).ok_or_else(|| {
            anyhow!(
                "no [acme.{n}] in the configuration (configured: {})",
                known()
            )
        }),
        None if config.acme.len() == 1 => config
            .acme
            .values()
            .next()
            .ok_or_else(|| anyhow!("no ACME CA is configured")),
        None if config.acme.is_empty() => {
            bail!("no ACME CA is configured: add an [acme.NAME] table (docs/acme.md)")
        }
        None => bail!("several ACME CAs are configured ({}): name one", known()),
    }
}

/// `cert-agent acme account [NAME] [--deactivate --yes]`.
pub(super) async fn account(
    config: &Config,
    name: Option<&str>,
    (deactivate, yes): (bool, bool),
    out: &Output,
    clock: Clock,
    lock_wait: std::time::Duration,
) -> Result<u8> {
    let ca = ca_of(config, name)?;
    if config.fleet.is_some() {
        return fleet::account(config, ca, deactivate, out, clock).await;
    }
    let store = Store::open(&config.agent.state_dir)?;
    let _lock = crate::run::lock(&store, lock_wait).await?;
    let dir = account_dir(store.dir(), &ca.name);
    let file = dir.join(acme::ACCOUNT_FILE);
    let existed = file.exists();
    if deactivate && !existed {
        bail!(
            "the ACME CA '{}' has no account on this host ({} does not exist): nothing to \
             deactivate",
            ca.name,
            file.display()
        );
    }
    if deactivate && !yes {
        bail!(
            "deactivating the account of the ACME CA '{}' cannot be undone: its certificates \
             can no longer be renewed or revoked through it; add --yes to go ahead",
            ca.name
        );
    }
    let account = account_of(store.dir(), ca).await?;
    if !existed {
        store.audit(
            None,
            "acme-account-registered",
            &serde_json::json!({ "ca": ca.name, "account": account.id() }),
        )?;
    }
    let url = account.id().to_owned();
    if deactivate {
        account
            .deactivate()
            .await
            .map_err(|e| anyhow!("the ACME CA '{}' refused to deactivate {url}: {e}", ca.name))?;
        // The CA's answer to the deactivation is not seen through the client: the account is
        // asked again, and one still valid means the CA did not deactivate it.
        let again = account_of(store.dir(), ca).await?;
        let contacts: Vec<&str> = ca.contact.iter().map(String::as_str).collect();
        if again.update_contacts(&contacts).await.is_ok() {
            bail!(
                "the ACME CA '{}' still reports {url} valid after the request to deactivate it; \
                 nothing was changed here ({} is kept)",
                ca.name,
                file.display()
            );
        }
        let aside = dir.join(format!("{}.deactivated", acme::ACCOUNT_FILE));
        std::fs::rename(&file, &aside)
            .with_context(|| format!("could not move {} aside", file.display()))?;
        store.audit(
            None,
            "acme-account-deactivated",
            &serde_json::json!({ "ca": ca.name, "account": url }),
        )?;
        if out.json {
            out.print_json(&serde_json::json!({
                "ca": ca.name, "account": url, "state": "deactivated", "file": aside,
            }))?;
        } else {
            outln!(
                "deactivated {url} at the ACME CA '{}'; its file is kept as {} (the next order \
                 registers a new account)",
                ca.name,
                aside.display()
            );
        }
        return Ok(exit::OK);
    }
    if out.json {
        out.print_json(&serde_json::json!({
            "ca": ca.name,
            "directory": ca.directory,
            "account": url,
            "contact": ca.contact,
            "external_account_binding": ca.eab_kid,
            "file": file,
            "registered_now": !existed,
        }))?;
    } else {
        outln!("ACME CA:    {} ({})", ca.name, ca.directory);
        outln!("account:    {url}");
        outln!(
            "contact:    {}",
            if ca.contact.is_empty() {
                "none".to_owned()
            } else {
                ca.contact.join(", ")
            }
        );
        if let Some(kid) = &ca.eab_kid {
            outln!("bound to:   external account {kid}");
        }
        outln!(
            "kept in:    {} (0600){}",
            file.display(),
            if existed { "" } else { "; registered now" }
        );
    }
    Ok(exit::OK)
}

fn reason_of(text: &str) -> Result<instant_acme::RevocationReason> {
    use instant_acme::RevocationReason as R;
    Ok(match text {
        "unspecified" => R::Unspecified,
        "keyCompromise" => R::KeyCompromise,
        "affiliationChanged" => R::AffiliationChanged,
        "superseded" => R::Superseded,
        "cessationOfOperation" => R::CessationOfOperation,
        other => bail!(
            "unknown reason {other:?}: one of {}",
            super::args::REVOKE_REASONS.join(", ")
        ),
    })
}

/// What `revoke` and `retire --revoke` revoke: the ACME CA of the configured certificate
/// `name` and its installed leaf, read from the installed file and checked to be the
/// installed serial.
pub(super) struct Revocable<'c> {
    pub ca: &'c AcmeCa,
    pub der: Vec<u8>,
    pub serial: String,
}

/// The installed certificate of `name` (record `rec`) as [`Revocable`], or why it cannot be
/// revoked through the agent.
pub(super) fn revocable<'c>(
    config: &'c Config,
    rec: &crate::store::CertRecord,
    name: &str,
) -> Result<Revocable<'c>> {
    let cert = config
        .certificates
        .iter()
        .find(|c| c.name == name)
        .ok_or_else(|| anyhow!("no certificate '{name}' in the configuration"))?;
    let Some(ca_name) = cert.order.issuer.acme() else {
        bail!(
            "certificate '{name}' comes from the Partner API, which revokes through its order \
             site or support; `cert-agent revoke` revokes certificates of an ACME CA"
        );
    };
    if config.fleet.is_some() {
        bail!("{}", fleet::REVOKE_REFUSED);
    }
    let ca = ca_of(config, Some(ca_name))?;
    let Some(inst) = rec.installed.as_ref() else {
        bail!("certificate '{name}' has nothing installed: nothing to revoke");
    };
    let der = crate::engine::acme::installed_leaf_der(rec).ok_or_else(|| {
        anyhow!(
            "the installed certificate file of '{name}' cannot be read ({}): nothing is revoked",
            inst.leaf_file
                .as_ref()
                .map_or_else(|| "none recorded".to_owned(), |p| p.display().to_string())
        )
    })?;
    let info = crate::crypto::CertificateInfo::from_der(&der)
        .with_context(|| format!("the installed certificate file of '{name}'"))?;
    if !crate::crypto::same_serial_hex(&info.serial_hex, &inst.serial) {
        bail!(
            "the installed file of '{name}' holds serial {}, not the installed serial {}: nothing \
             is revoked (`cert-agent install {name}` puts the installed certificate back first)",
            info.serial_hex,
            inst.serial
        );
    }
    Ok(Revocable {
        ca,
        der,
        serial: inst.serial.clone(),
    })
}

/// Revokes `r` at its CA for `reason` (an RFC 5280 name) through the account kept under
/// `state_dir`.
pub(super) async fn revoke_at_ca(
    state_dir: &std::path::Path,
    r: &Revocable<'_>,
    reason: &str,
) -> Result<()> {
    let why = reason_of(reason)?;
    let account = account_of(state_dir, r.ca).await?;
    acme::revoke(&account, &r.der, Some(why))
        .await
        .with_context(|| {
            format!(
                "the ACME CA '{}' did not revoke serial {}",
                r.ca.name, r.serial
            )
        })
}

/// Why `retire --revoke` is refused in fleet mode (as `revoke` is).
pub(super) fn fleet_revoke_refused() -> &'static str {
    fleet::REVOKE_REFUSED
}

/// `cert-agent revoke NAME [--reason R] --yes`: the installed certificate of an ACME
/// certificate revoked at its CA; the next run orders its replacement.
pub(super) async fn revoke(
    config: &Config,
    name: &str,
    reason: &str,
    yes: bool,
    out: &Output,
    clock: Clock,
    lock_wait: std::time::Duration,
) -> Result<u8> {
    reason_of(reason)?;
    let store = Store::open(&config.agent.state_dir)?;
    let _lock = crate::run::lock(&store, lock_wait).await?;
    let mut rec = store.load(name)?;
    let r = revocable(config, &rec, name)?;
    let (ca, inst_serial) = (r.ca, r.serial.clone());
    if !yes {
        bail!(
            "revoking serial {inst_serial} of '{name}' at the ACME CA '{}' cannot be undone, and \
             clients refuse it as soon as they see the revocation; add --yes to go ahead (the \
             next run orders a replacement)",
            ca.name
        );
    }
    revoke_at_ca(store.dir(), &r, reason).await?;
    let inst = rec
        .installed
        .clone()
        .ok_or_else(|| anyhow!("certificate '{name}' has nothing installed"))?;
    let now = clock.now();
    let detail = format!(
        "serial {} was revoked on {} ({reason}) by cert-agent revoke",
        inst.serial,
        crate::clock::short_time(now)
    );
    rec.revocation = Some(RevocationSeen {
        serial: inst.serial.clone(),
        state: "revoked".into(),
        url: None,
        detail: detail.clone(),
        revoked_at: Some(now),
        reason: Some(reason.to_owned()),
    });
    store.save(&rec)?;
    store.journal(
        name,
        "revoked",
        serde_json::json!({ "ca": ca.name, "serial": inst.serial, "reason": reason }),
    )?;
    if out.json {
        out.print_json(&serde_json::json!({
            "name": name, "ca": ca.name, "serial": inst.serial, "reason": reason, "revoked": true,
        }))?;
    } else {
        outln!(
            "{detail} at the ACME CA '{}'; the next run orders its replacement",
            ca.name
        );
    }
    Ok(exit::OK)
}
