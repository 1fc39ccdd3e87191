//! The account and certificate commands that read the API: products, balance, list, show,
//! status ID, software, countries, download; and the dispatch of every API command (with a
//! 404 on a named certificate explained).

use std::io::Write;
use std::path::{Path, PathBuf};

use anyhow::{Context, Result, bail};
use serde::Serialize;

use super::actions;
use super::args::{Command, DcvCommand, ListArgs, Scope};
use super::exit;
use super::output::{Output, or_dash};
use super::table::{Table, money};
use crate::api::{self, ApiError, Client};
use crate::config::Config;
use crate::fsutil;

/// Runs an API command; a 404 on the certificate it names says so.
pub(super) async fn run(
    command: &Command,
    config: &Config,
    client: &Client,
    out: &Output,
) -> Result<u8> {
    let result = api_command(command, config, client, out).await;
    match (result, certificate_arg(command)) {
        (Err(e), Some(id)) if api_status(&e) == Some(404) => Err(e.context(format!(
            "certificate {id} was not found: it does not exist or belongs to another account"
        ))),
        (other, _) => other,
    }
}

/// The certificate ID a command names, if any.
fn certificate_arg(command: &Command) -> Option<u64> {
    match command {
        Command::Show { id }
        | Command::Status { id: Some(id), .. }
        | Command::Cancel { id, .. }
        | Command::Prolong { id, .. }
        | Command::Download { id, .. }
        | Command::Dcv(
            DcvCommand::Status { id } | DcvCommand::Change { id, .. } | DcvCommand::Resend { id },
        ) => Some(*id),
        _ => None,
    }
}

async fn api_command(
    command: &Command,
    config: &Config,
    client: &Client,
    out: &Output,
) -> Result<u8> {
    match command {
        Command::Products { eu_prices } => products(client, *eu_prices, out).await,
        Command::Balance => balance(client, out).await,
        Command::List(args) => list(client, args, out).await,
        Command::Show { id } => show(client, *id, out).await,
        Command::Status { id: Some(id), .. } => status(client, *id, out).await,
        Command::Software { product_id } => software(client, *product_id, out).await,
        Command::Countries => countries(client, out).await,
        Command::Dcv(cmd) => actions::dcv(client, config, cmd, out).await,
        Command::Cancel { id, yes } => actions::cancel(client, config, *id, *yes, out).await,
        Command::Prolong { id, show_token } => {
            actions::prolong(client, config, *id, *show_token, out).await
        }
        Command::Download { id, bundle, output } => {
            download(client, *id, *bundle, output.as_deref()).await
        }
        Command::Config(_)
        | Command::Fleet(_)
        | Command::Acme(_)
        | Command::Revoke { .. }
        | Command::Renew(_)
        | Command::Issue(_)
        | Command::Reissue { .. }
        | Command::Install { .. }
        | Command::Adopt { .. }
        | Command::Run { .. }
        | Command::Serve
        | Command::Check(_)
        | Command::Forecast { .. }
        | Command::Preflight { .. }
        | Command::Discover(_)
        | Command::Import(_)
        | Command::Placeholder { .. }
        | Command::Snippet { .. }
        | Command::Retire(_)
        | Command::Audit(_)
        | Command::Status { id: None, .. } => unreachable_config(),
    }
}

fn unreachable_config() -> Result<u8> {
    bail!("internal: this command is handled before the account commands")
}

async fn products(client: &Client, eu_prices: bool, out: &Output) -> Result<u8> {
    let products = client.products(eu_prices).await?;
    if out.json {
        out.print_json(&products)?;
        return Ok(exit::OK);
    }
    // Prices are net, in the account currency (EUR with --eu-prices); the balance call is the
    // only one that names the account currency.
    let currency = if eu_prices {
        Some("EUR".to_owned())
    } else {
        client.balance().await.ok().map(|b| b.balance.currency)
    };
    let mut sorted = products;
    sorted.sort_by(|a, b| b.prio.cmp(&a.prio).then(a.id.cmp(&b.id)));
    let mut t = Table::new(&[
        "ID",
        "PRODUCT",
        "BRAND",
        "VALIDATION",
        "TYPE",
        "ISSUER",
        "PRICES",
    ])
    .right(0)
    .flex(1);
    for p in &sorted {
        let mut prices: Vec<String> = p
            .prices
            .iter()
            .filter_map(|pr| {
                let value = pr.value.as_ref()?;
                Some(match pr.period {
                    Some(y) => format!("{y}y {}", money(value.as_str())),
                    None => money(value.as_str()),
                })
            })
            .collect();
        if let (Some(cur), false) = (&currency, prices.is_empty()) {
            prices.push(cur.clone());
        }
        t.row([
            p.id.to_string(),
            or_dash(p.name.as_deref()),
            or_dash(p.brand.as_deref()),
            or_dash(p.validation_type.as_deref()),
            or_dash(p.product_type.as_ref().map(|t| t.as_str().to_owned())),
            or_dash(p.issuer.as_deref()),
            prices.join(", "),
        ]);
    }
    out.table(&t);
    if !eu_prices {
        outln!("\nPrices are net per period (years); VAT is added on the invoice.");
    }
    Ok(exit::OK)
}

async fn balance(client: &Client, out: &Output) -> Result<u8> {
    let b = client.balance().await?;
    if out.json {
        out.print_json(&b)?;
        return Ok(exit::OK);
    }
    let mut t = Table::new(&["", "AMOUNT", "CURRENCY"]).right(1);
    for (name, amount) in [
        ("balance", &b.balance),
        ("reserved", &b.reserved),
        ("common", &b.common),
        ("prepayment", &b.prepayment),
        ("available", &b.available),
    ] {
        t.row([
            name.to_owned(),
            money(amount.sum.as_str()),
            amount.currency.clone(),
        ]);
    }
    out.table(&t);
    Ok(exit::OK)
}

async fn list(client: &Client, args: &ListArgs, out: &Output) -> Result<u8> {
    let scope = args.scope.map(list_scope);
    let q = args.q.as_deref();
    let (certs, pagination) = if args.all {
        (client.list_all(scope, q).await?, None)
    } else if args.page.is_some() || scope.is_some() || q.is_some() {
        let page = client.list(args.page.unwrap_or(1), scope, q).await?;
        (page.certificates, page.pagination)
    } else {
        (client.list_unpaged().await?, None)
    };
    if out.json {
        #[derive(Serialize)]
        struct ListOut<'a> {
            certificates: &'a [api::Certificate],
            #[serde(skip_serializing_if = "Option::is_none")]
            pagination: Option<&'a api::Pagination>,
        }
        out.print_json(&ListOut {
            certificates: &certs,
            pagination: pagination.as_ref(),
        })?;
        return Ok(exit::OK);
    }
    let mut t = Table::new(&[
        "ID",
        "STATE",
        "DOMAIN",
        "PRODUCT",
        "VALID TO",
        "SUBSCRIPTION TO",
        "PRICE",
    ])
    .right(0)
    .right(6)
    .flex(3);
    for c in &certs {
        let state = c
            .status
            .code
            .as_ref()
            .map(|s| s.as_str().to_owned())
            .or_else(|| c.status.description.clone());
        let mut domain = or_dash(c.domain_name.as_deref());
        let extra = c.domain_names.as_ref().map_or(0, Vec::len);
        if extra > 0 {
            domain.push_str(&format!(" (+{extra})"));
        }
        let price = match (&c.price, &c.currency) {
            (Some(p), Some(cur)) => format!("{} {cur}", money(p.as_str())),
            (Some(p), None) => money(p.as_str()),
            _ => "-".to_owned(),
        };
        t.row([
            c.internal_number.to_string(),
            or_dash(state),
            domain,
            c.name.clone(),
            or_dash(c.valid_to.as_deref()),
            or_dash(c.subscription_valid_to.as_deref()),
            price,
        ]);
    }
    if t.is_empty() {
        outln!("no certificates");
    } else {
        out.table(&t);
    }
    if let Some(p) = pagination.as_ref().filter(|p| p.total != Some(0)) {
        outln!(
            "\npage {} of {} ({} certificates){}",
            args.page.unwrap_or(1),
            or_dash(p.total_pages),
            or_dash(p.total),
            p.next_page
                .map(|n| format!("; next: --page {n}"))
                .unwrap_or_default()
        );
    }
    Ok(exit::OK)
}

fn list_scope(scope: Scope) -> api::ListScope {
    match scope {
        Scope::Issued => api::ListScope::ApiIssued,
        Scope::InProgress => api::ListScope::ApiInProgress,
        Scope::Annulled => api::ListScope::ApiAnnulled,
    }
}

async fn show(client: &Client, id: u64, out: &Output) -> Result<u8> {
    let d = client.details(id).await?;
    if out.json {
        out.print_json(&d)?;
        return Ok(exit::OK);
    }
    let state = d.status.certificate.as_ref().map(|s| s.as_str().to_owned());
    let mut rows: Vec<(&str, String)> = vec![
        ("certificate", d.id.to_string()),
        ("state", or_dash(state)),
        ("product", format!("{} (ID {})", d.name, d.nomenclature_id)),
        ("common name", d.common_name.clone()),
        ("domains", d.all_domains.join(", ")),
        ("CA order", or_dash(d.external_number.as_deref())),
        (
            "valid",
            format!(
                "{} .. {}",
                or_dash(d.valid_from.as_deref()),
                or_dash(d.valid_to.as_deref())
            ),
        ),
    ];
    if d.subscription_valid_from.is_some() || d.subscription_valid_to.is_some() {
        rows.push((
            "subscription",
            format!(
                "{} .. {}{}",
                or_dash(d.subscription_valid_from.as_deref()),
                or_dash(d.subscription_valid_to.as_deref()),
                d.subscription_duration
                    .map(|n| format!(" ({n} days)"))
                    .unwrap_or_default()
            ),
        ));
    }
    if let Some(r) = d.replacement_id {
        rows.push(("replaced by", r.to_string()));
    }
    if let Some(p) = d.prolonged_id {
        rows.push(("renews", p.to_string()));
    }
    rows.push(("DCV method", d.dcv_method.clone()));
    if !d.validation_email.is_empty() && d.validation_email != d.dcv_method {
        rows.push(("validation email", d.validation_email.clone()));
    }
    for (domain, email) in &d.additional_validation_emails {
        rows.push(("", format!("{domain}: {email}")));
    }
    let price = match &d.price {
        Some(p) => format!(
            "{} {}{}",
            money(p.as_str()),
            d.currency,
            if d.price_includes_vat {
                " (incl. VAT)"
            } else {
                ""
            }
        ),
        None => "-".to_owned(),
    };
    rows.push(("price", price));
    rows.push(("payment", d.payment_status.clone()));
    let width = rows.iter().map(|(k, _)| k.len()).max().unwrap_or(0);
    for (k, v) in rows {
        if k.is_empty() {
            outln!("{:width$}  {v}", "");
        } else {
            outln!("{k:width$}  {v}");
        }
    }
    if let Some(content) = &d.dcv_content {
        outln!("\nDCV content:\n{content}");
    }
    Ok(exit::OK)
}

async fn status(client: &Client, id: u64, out: &Output) -> Result<u8> {
    let s = client.status(id).await?;
    if out.json {
        out.print_json(&s)?;
        return Ok(exit::OK);
    }
    outln!(
        "certificate {id}: {}",
        or_dash(s.certificate.as_ref().map(|c| c.as_str().to_owned()))
    );
    Ok(exit::OK)
}

async fn software(client: &Client, product_id: u64, out: &Output) -> Result<u8> {
    let list = client.ssl_server_softwares(product_id).await?;
    if out.json {
        out.print_json(&list)?;
        return Ok(exit::OK);
    }
    let mut t = Table::new(&["ID", "CODE", "NAME", "ISSUER"])
        .right(0)
        .flex(2);
    for s in &list {
        t.row([
            s.id.to_string(),
            or_dash(s.code.as_deref()),
            or_dash(s.name.as_deref()),
            or_dash(s.issuer.as_deref()),
        ]);
    }
    out.table(&t);
    outln!(
        "\nSet `ssl_server_software_id` in a [[certificate]] to one of these IDs (0: the CA's default)."
    );
    Ok(exit::OK)
}

async fn countries(client: &Client, out: &Output) -> Result<u8> {
    let list = client.countries().await?;
    if out.json {
        out.print_json(&list)?;
        return Ok(exit::OK);
    }
    let mut t = Table::new(&["ID", "CODE", "NAME"]).right(0).flex(2);
    for c in &list {
        t.row([
            or_dash(c.id),
            or_dash(c.code.as_deref()),
            or_dash(c.name.as_deref()),
        ]);
    }
    out.table(&t);
    Ok(exit::OK)
}

async fn download(client: &Client, id: u64, bundle: bool, output: Option<&Path>) -> Result<u8> {
    let d = if bundle {
        client.download_bundle(id).await?
    } else {
        client.download(id).await?
    };
    match output {
        Some(p) if p == Path::new("-") => {
            let mut stdout = std::io::stdout().lock();
            stdout
                .write_all(&d.bytes)
                .and_then(|()| stdout.flush())
                .context("could not write the archive to stdout")?;
            return Ok(exit::OK);
        }
        _ => {}
    }
    let path = match output {
        Some(p) => p.to_path_buf(),
        None => PathBuf::from(d.filename.clone().unwrap_or_else(|| {
            if bundle {
                format!("bundle-{id}.zip")
            } else {
                format!("certificate-{id}.zip")
            }
        })),
    };
    fsutil::write_atomic(&path, &d.bytes, 0o644)
        .with_context(|| format!("could not write {}", path.display()))?;
    eprintln!("wrote {} ({} bytes)", path.display(), d.bytes.len());
    Ok(exit::OK)
}

/// True when `err` is (or wraps) an [`ApiError`] answered with HTTP `status`.
pub(super) fn api_status(err: &anyhow::Error) -> Option<u16> {
    err.chain()
        .find_map(|c| c.downcast_ref::<ApiError>())
        .and_then(ApiError::status)
}
