//! `cert-agent status` without an ID: every configured certificate from local state, no API
//! call.

use anyhow::Result;

use super::exit;
use super::output::{Output, or_dash};
use super::table::Table;
use crate::config::Config;

/// `status` without an ID: every configured certificate from local state (no API call).
/// Prints the local status of every configured certificate.
pub(super) fn run(config: &Config, out: &Output) -> Result<u8> {
    let rows = crate::renew::status::collect(config)?;
    if out.json {
        out.print_json(&rows)?;
        return Ok(exit::OK);
    }
    let mut t = Table::new(&[
        "NAME",
        "CERT ID",
        "STATE",
        "SERIAL",
        "EXPIRES",
        "DAYS",
        "SUBSCRIPTION",
        "NEXT",
    ])
    .right(1)
    .right(5)
    .flex(7);
    for r in &rows {
        t.row([
            r.name.clone(),
            or_dash(r.certificate_id),
            r.state.clone(),
            or_dash(r.serial.as_deref()),
            or_dash(r.expires.map(|d| d.date())),
            or_dash(r.days_left),
            or_dash(r.subscription_ends.map(|d| d.date())),
            r.next_action.clone(),
        ]);
    }
    out.table(&t);
    for r in &rows {
        if let Some(e) = &r.last_error {
            outln!("{}: last error: {e}", r.name);
        }
        if let Some(w) = &r.warning {
            outln!("{}: {w}", r.name);
        }
    }
    Ok(exit::OK)
}
