//! `cert-agent forecast [--days N]`: the renewals due in the next N days, free or billed, the
//! catalogue price of each billed order, the total and the available balance.

use anyhow::Result;

use super::exit;
use super::output::Output;
use super::table::{Table, money};
use crate::api::Client;
use crate::clock::Clock;
use crate::config::Config;
use crate::engine::forecast::DueKind;
use crate::monitor::money::{self, Forecast};

/// Prints the forecast of the next `days` (a table, or `--json`).
pub(super) async fn run(
    config: &Config,
    client: &Client,
    days: u32,
    out: &Output,
    clock: Clock,
) -> Result<u8> {
    let f = money::forecast(config, client, clock.now(), days).await?;
    if out.json {
        out.print_json(&f)?;
    } else {
        out!("{}", render(&f));
    }
    Ok(exit::OK)
}

fn render(f: &Forecast) -> String {
    let currency = f.currency.clone().unwrap_or_default();
    let amount = |d: &crate::values::Decimal| format!("{} {currency}", money(d.as_str()));
    let mut text = String::new();
    if f.items.is_empty() {
        text.push_str(&format!(
            "Nothing falls due in the next {} days (until {}).\n",
            f.days,
            f.until.date()
        ));
    } else {
        let mut t = Table::new(&["DUE", "CERTIFICATE", "RENEWAL", "PRICE", "REASON"])
            .right(3)
            .flex(4);
        for i in &f.items {
            t.row([
                i.due.date().to_string(),
                i.name.clone(),
                match i.kind {
                    DueKind::Reissue => "reissue (free)".to_owned(),
                    DueKind::Order => format!("order ({} y)", i.years),
                },
                match (&i.price, i.kind) {
                    (_, DueKind::Reissue) => "-".to_owned(),
                    (Some(p), DueKind::Order) => amount(p),
                    (None, DueKind::Order) => "unknown".to_owned(),
                },
                i.reason.clone(),
            ]);
        }
        text.push_str(&t.render(super::table::terminal_width()));
        text.push('\n');
    }
    let billed = f.items.iter().filter(|i| i.kind == DueKind::Order).count();
    text.push_str(&format!(
        "Billed orders in the next {} days: {billed}, total {}",
        f.days,
        amount(&f.total)
    ));
    if !f.unpriced.is_empty() {
        text.push_str(&format!(
            " (without {}: no price in the catalogue)",
            f.unpriced.join(", ")
        ));
    }
    text.push('\n');
    match (&f.available, f.covered) {
        (Some(a), Some(true)) => text.push_str(&format!(
            "Available balance: {} {} (covers the total)\n",
            money(a.sum.as_str()),
            a.currency
        )),
        (Some(a), _) if !f.unpriced.is_empty() => text.push_str(&format!(
            "Available balance: {} {} (whether it covers the total is unknown)\n",
            money(a.sum.as_str()),
            a.currency
        )),
        (Some(a), _) => text.push_str(&format!(
            "Available balance: {} {} (does NOT cover the total)\n",
            money(a.sum.as_str()),
            a.currency
        )),
        (None, _) => text.push_str("Available balance: unknown\n"),
    }
    text
}
