//! `cert-agent fleet forget-host HOST`: a host that left the fleet for good taken out of etcd
//! ([`crate::fleet::forget_host`]).

use anyhow::Result;

use crate::cli::exit;
use crate::cli::output::{Output, or_dash};
use crate::clock::rfc3339;
use crate::config::Config;
use crate::values::text::printable;

/// Forgets `host` and says what was deleted and what stays.
pub(in crate::cli) async fn forget(
    config: &Config,
    host: &str,
    out: &Output,
    clock: crate::clock::Clock,
) -> Result<u8> {
    let forgotten = crate::fleet::forget_host(config, clock, host).await?;
    if out.json {
        out.print_json(&forgotten)?;
        return Ok(exit::OK);
    }
    let parts = |parts: &[crate::fleet::ForgottenPart]| {
        parts
            .iter()
            .map(|p| format!("{} {}", p.keys, p.part))
            .collect::<Vec<_>>()
            .join(", ")
    };
    if forgotten.deleted.is_empty() {
        outln!(
            "nothing of {} left to delete: it was forgotten before",
            printable(&forgotten.host)
        );
    } else {
        outln!(
            "forgot {}: {} key(s) deleted ({}); last synchronised {}",
            printable(&forgotten.host),
            forgotten.deleted_keys(),
            parts(&forgotten.deleted),
            or_dash(forgotten.last_seen.map(rfc3339))
        );
    }
    for p in &forgotten.kept {
        outln!(
            "kept: {} {} ({})",
            p.keys,
            p.part,
            p.why.as_deref().unwrap_or_default()
        );
    }
    Ok(exit::OK)
}
