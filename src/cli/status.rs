//! `cert-agent status` without an ID: every configured certificate from local state (in fleet
//! mode also the fleet's current certificates in etcd), no API call.

use anyhow::Result;

use super::exit;
use super::output::{Output, or_dash};
use super::table::Table;
use crate::clock::Clock;
use crate::config::Config;

/// Prints the local status of every configured certificate (with `served`, also what each
/// verify address serves).
pub(super) async fn run(config: &Config, served: bool, out: &Output, clock: Clock) -> Result<u8> {
    let mut rows = crate::monitor::status_rows(config, clock.now())?;
    if served {
        crate::monitor::add_served(config, &mut rows, clock.now()).await;
    }
    // Fleet mode: the fleet's current certificates in etcd (still no Partner API call).
    let behind = crate::fleet::behind(config, &[], clock).await;
    for r in &mut rows {
        if let Some(w) = behind.get(&r.name) {
            r.warning = Some(match r.warning.take() {
                Some(own) => format!("{own}; {w}"),
                None => w.clone(),
            });
        }
    }
    // A record that does not read: every row shown, and the command fails.
    let code = if rows
        .iter()
        .any(|r| r.state == crate::monitor::UNREADABLE_RECORD)
    {
        exit::ERROR
    } else {
        exit::OK
    };
    if out.json {
        // An array of the certificates, as it always was; the money in `forecast --json`.
        out.print_json(&rows)?;
        return Ok(code);
    }
    let money = crate::monitor::status::money(config);
    let mut headers = vec![
        "NAME",
        "ISSUER",
        "CERT ID",
        "STATE",
        "SERIAL",
        "EXPIRES",
        "DAYS",
        "SUBSCRIPTION",
        "CRL",
    ];
    if served {
        headers.push("SERVED");
    }
    headers.push("NEXT");
    let next = headers.len() - 1;
    let mut t = Table::new(&headers).right(2).right(6).flex(next);
    for r in &rows {
        t.row(
            vec![
                r.name.clone(),
                r.issuer.clone(),
                or_dash(r.certificate_id),
                r.state.clone(),
                or_dash(r.serial.as_deref()),
                or_dash(r.expires.map(|d| d.date())),
                or_dash(r.days_left),
                or_dash(r.subscription_ends.map(|d| d.date())),
                or_dash(r.revocation.as_ref().map(|v| v.column())),
            ]
            .into_iter()
            .chain(served.then(|| or_dash(r.served.as_deref())))
            .chain([r.next_action.clone()])
            .collect::<Vec<_>>(),
        );
    }
    out.table(&t);
    for r in &rows {
        if let Some(e) = &r.last_error {
            outln!("{}: last error: {e}", r.name);
        }
        if let Some(w) = &r.warning {
            outln!("{}: {w}", r.name);
        }
        if let Some(v) = r.revocation.as_ref().filter(|v| v.needs_attention()) {
            outln!("{}: {}", r.name, v.detail);
        }
        if let Some(v) = &r.validation {
            outln!("{}: {}", r.name, v.describe());
        }
        if let Some(s) = &r.email_sunset {
            outln!("{}: {}", r.name, s.message);
        }
    }
    if let Some(m) = &money {
        outln!("{}", m.describe());
    }
    Ok(code)
}
