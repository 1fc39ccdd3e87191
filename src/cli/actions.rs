//! The commands that change something at the CA for one certificate: `dcv status|change|
//! resend`, `cancel`, `prolong` (the prepared renewal order and its token).

use anyhow::{Context, Result};

use super::args::DcvCommand;
use super::exit::{self, UsageError};
use super::output::{Output, or_dash};
use super::table::Table;
use crate::api::{self, Client};
use crate::config::Config;

pub(super) async fn dcv(
    client: &Client,
    config: &Config,
    cmd: &DcvCommand,
    out: &Output,
) -> Result<u8> {
    match cmd {
        DcvCommand::Emails { domain, provider } => {
            let emails = client.dcv_emails(domain, provider.as_deref()).await?;
            if out.json {
                out.print_json(&emails)?;
                return Ok(exit::OK);
            }
            let all = emails.all();
            if all.is_empty() {
                outln!("the CA reports no validation addresses for {domain}");
            }
            for (group, list) in [
                ("whois", &emails.whois),
                ("level 2", &emails.level_2),
                ("level 3", &emails.level_3),
            ] {
                if let Some(list) = list.as_ref().filter(|l| !l.is_empty()) {
                    outln!("{group}:");
                    for e in list {
                        outln!("  {e}");
                    }
                }
            }
            if let Some(v) = &emails.random_value {
                outln!("DNS TXT value: {v}");
            }
            Ok(exit::OK)
        }
        DcvCommand::Status { id } => {
            let s = client.dcv_status(*id).await?;
            if out.json {
                out.print_json(&s)?;
                return Ok(exit::OK);
            }
            let mut t = Table::new(&["DOMAIN", "VALID", "SENT", "METHOD", "STATUS"]).flex(3);
            for (domain, d) in &s.domains {
                let yes_no = |b: Option<bool>| match b {
                    Some(true) => "yes",
                    Some(false) => "no",
                    None => "-",
                };
                t.row([
                    domain.clone(),
                    yes_no(d.valid).to_owned(),
                    yes_no(d.sent).to_owned(),
                    or_dash(d.method.as_deref().or(d.dcv_method.as_deref())),
                    or_dash(d.status.as_deref()),
                ]);
            }
            out.table(&t);
            for (domain, d) in &s.domains {
                if let Some(h) = &d.hashes {
                    outln!(
                        "{domain}: CSR MD5 {} SHA-256 {}",
                        or_dash(h.md5.as_deref()),
                        or_dash(h.sha1.as_deref())
                    );
                }
            }
            if let Some(u) = &s.unique_value {
                outln!("unique value: {u}");
            }
            Ok(exit::OK)
        }
        DcvCommand::Change { id, target, domain } => {
            let r = client.change_dcv(*id, target, domain.as_deref()).await;
            let asked = serde_json::json!({ "method": target, "domain": domain });
            super::audit::answer(config, "dcv-change", *id, asked, &r)?;
            action_done(&r?, out)
        }
        DcvCommand::Migrate { name, to } => {
            super::migrate::run(client, config, name, to, out).await
        }
        DcvCommand::Resend { id } => {
            let r = client.resend_dcv(*id).await;
            super::audit::answer(config, "dcv-resend", *id, serde_json::json!({}), &r)?;
            action_done(&r?, out)
        }
    }
}

fn action_done(r: &api::ActionResult, out: &Output) -> Result<u8> {
    if out.json {
        out.print_json(r)?;
    } else {
        outln!(
            "{}",
            crate::values::text::printable(r.result.as_deref().unwrap_or("done"))
        );
    }
    Ok(exit::OK)
}

pub(super) async fn cancel(
    client: &Client,
    config: &Config,
    id: u64,
    yes: bool,
    out: &Output,
) -> Result<u8> {
    if !yes {
        return Err(UsageError(format!(
            "cancelling certificate {id} needs --yes. A cancellation is a request to the \
             service's staff and cannot be taken back; it is possible for any certificate not \
             yet issued, and for an issued one only within 28 days of its issuance."
        ))
        .into());
    }
    let r = client.cancel(id).await;
    super::audit::answer(config, "cancel", id, serde_json::json!({}), &r)?;
    action_done(&r?, out)
}

/// Base of the order site where renewal orders are completed (`api.order_site_url`).
fn order_site_url(config: &Config) -> Option<&str> {
    config.api.order_site_url.as_deref()
}

pub(super) async fn prolong(
    client: &Client,
    config: &Config,
    id: u64,
    show_token: bool,
    out: &Output,
) -> Result<u8> {
    let p = client.prolong(id).await?;
    crate::store::Store::open(&config.agent.state_dir)
        .and_then(|store| {
            let prepared = p.prolongation_token.is_some();
            let details = serde_json::json!({ "certificate_id": id, "prepared": prepared });
            store.audit(None, "prolong", &details)
        })
        .context("could not record the call in the audit log")?;
    let Some(token) = p.prolongation_token else {
        if out.json {
            out.print_json(&serde_json::json!({ "certificate": id, "prepared": false }))?;
        } else {
            outln!(
                "no renewal order can be prepared for certificate {id}: it was already renewed \
                 or replaced by a reissue, there is no order to renew, or its multi-year \
                 subscription ends more than 3 months from now (reissue instead)"
            );
        }
        return Ok(exit::OK);
    };
    let path = crate::store::Store::open(&config.agent.state_dir)
        .and_then(|store| store.save_prolongation_token(id, token.expose()))
        .context("could not store the renewal token")?;
    let link = order_site_url(config).map(|base| {
        format!(
            "{}/lead/continue_order/{}",
            base.trim_end_matches('/'),
            token.expose()
        )
    });
    if out.json {
        let mut v = serde_json::json!({
            "certificate": id,
            "prepared": true,
            "token_file": path,
        });
        if show_token {
            v["prolongation_token"] = serde_json::Value::String(token.expose().to_owned());
            if let Some(link) = &link {
                v["link"] = serde_json::Value::String(link.clone());
            }
        }
        out.print_json(&v)?;
        return Ok(exit::OK);
    }
    outln!(
        "a renewal order is prepared for certificate {id}; nothing is billed until it is \
         completed on the order site."
    );
    outln!("token stored in {} (mode 0600)", path.display());
    if show_token {
        match &link {
            Some(link) => outln!("complete it at: {link}"),
            None => outln!(
                "token: {} (complete it at <order site>/lead/continue_order/<token>; set \
                 api.order_site_url to get the link)",
                token.expose()
            ),
        }
        outln!("the link signs in as your partner account: do not share it");
    } else {
        outln!("run again with --show-token to print the completion link");
    }
    Ok(exit::OK)
}
