//! `cert-agent acme account` and `cert-agent revoke` in fleet mode: the account shown is the
//! fleet's (`acme/CA/account` in etcd, registered by the first leader that needed it);
//! deactivating it and revoking a certificate the fleet serves are refused.

use anyhow::{Result, anyhow, bail};

use super::super::exit;
use super::super::output::Output;
use crate::clock::Clock;
use crate::config::{AcmeCa, Config};

/// Why `cert-agent revoke` refuses in fleet mode.
pub(super) const REVOKE_REFUSED: &str = "`cert-agent revoke` is not available in fleet mode ([fleet]): the certificate is the \
     fleet's, served by every host, and its revocation and replacement must go through the \
     leader; revoke it with the fleet's account from another ACME client (`cert-agent acme \
     account` shows the account) and the leader replaces it once its CRL check sees the \
     revocation (docs/acme.md, \"Fleet mode\")";

/// `cert-agent acme account [NAME]` in fleet mode: the fleet's account, written as this
/// host's copy; `--deactivate` refused.
pub(super) async fn account(
    config: &Config,
    ca: &AcmeCa,
    deactivate: bool,
    out: &Output,
    clock: Clock,
) -> Result<u8> {
    if deactivate {
        bail!(
            "the account of the ACME CA '{}' is the fleet's ([fleet]): `acme account \
             --deactivate` is not available in fleet mode, as every leader orders through it",
            ca.name
        );
    }
    let link = crate::fleet::connect(config, clock)
        .await?
        .ok_or_else(|| anyhow!("no [fleet] in {}", config.path.display()))?;
    let Some(a) = crate::fleet::fleet_account(&link, ca, &config.agent.state_dir).await? else {
        let key = link.fleet.key(&format!("acme/{}/account", ca.name));
        if out.json {
            out.print_json(&serde_json::json!({
                "ca": ca.name, "directory": ca.directory, "account": null, "fleet_key": key,
            }))?;
        } else {
            outln!(
                "the fleet has no account with the ACME CA '{}' yet ({key}): the first leader \
                 that orders one of its certificates registers it and shares it",
                ca.name
            );
        }
        return Ok(exit::OK);
    };
    if out.json {
        out.print_json(&serde_json::json!({
            "ca": ca.name,
            "directory": ca.directory,
            "account": a.account_url,
            "fleet_key": a.key,
            "registered_by": a.registered_by,
            "registered_at": crate::clock::rfc3339(a.registered_at),
            "file": a.file,
        }))?;
    } else {
        outln!("ACME CA:    {} ({})", ca.name, ca.directory);
        outln!("account:    {} (the fleet's)", a.account_url);
        outln!(
            "registered: by {} at {}",
            a.registered_by,
            crate::clock::rfc3339(a.registered_at)
        );
        outln!(
            "kept in:    {} (sealed), copied to {} (0600)",
            a.key,
            a.file.display()
        );
    }
    Ok(exit::OK)
}
