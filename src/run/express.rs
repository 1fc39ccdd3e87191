//! `cert-agent renew` with nothing due, without parsing the configuration: when the due
//! summary (`state_dir/due.json`) holds its express part ([`crate::store::due::Express`]) and
//! the configuration's sources — the main file's text and the files its `include` patterns
//! match now, each with its `stat` — give the digest the summary was made under, every
//! certificate's entry is checked as the full run checks it (the record's and the installed
//! leaf's stamps, the instant ahead, and with `[revocation] check` its serial against the CRL
//! kept for it, each kept CRL read once) and reported unchanged. A CRL that is not kept, not
//! fresh or not "not revoked" means the full run, which fetches it or reports it.
//!
//! Anything else — no summary, another configuration or state directory, a file changed, an
//! entry that does not stand, a program gone — means the full run, which parses the
//! configuration, decides from the records and writes the summary again. The summary is a
//! cache: a garbage, replayed or damaged one only ever sends the run down the full path.

use std::path::Path;
use std::time::Duration;

use anyhow::Result;

use crate::clock::Clock;
use crate::config::sources;
use crate::engine::{CertReport, Outcome, RunReport, RunStats};
use crate::store::Store;
use crate::store::due::{DUE_FILE, ExpressSummary, Stamp};

/// What the express run found.
pub(crate) enum Express {
    /// Every certificate reported unchanged; the configuration's warnings to print.
    Done(RunReport, Vec<String>),
    /// The full run is needed (why, for the debug log).
    Full(&'static str),
}

/// The express run of `renew` over the configuration at `config_path`: the lock taken (waiting
/// up to `lock_wait`) only once the summary was found to match.
pub(crate) async fn renew(
    config_path: &Path,
    clock: Clock,
    lock_wait: Duration,
) -> Result<Express> {
    let started_at = clock.now();
    let started = tokio::time::Instant::now();
    let Some((store, read_stamp, summary)) = matching_summary(config_path) else {
        return Ok(Express::Full("no summary for these configuration sources"));
    };
    let _lock = super::lock(&Store::open(store.dir())?, lock_wait).await?;
    // The file read is still the one in place (a run replaces it by rename).
    if Stamp::of_path(&store.dir().join(DUE_FILE)) != Some(read_stamp) {
        return Ok(Express::Full(
            "the summary changed while the lock was taken",
        ));
    }
    if !sources::programs_exist(&summary.express.programs) {
        return Ok(Express::Full("a program of a command is missing"));
    }
    let mut crls = summary.express.revocation.then(|| {
        let (max_bytes, refresh_secs) = summary.express.crl_limits;
        crate::revocation::KeptCrls::new(store.dir(), max_bytes, refresh_secs, &summary.crls)
    });
    let at = clock.now();
    let now = at.unix_timestamp();
    let mut certificates = Vec::with_capacity(summary.certificates.len());
    for e in summary.certificates {
        if !e.stands(now, store.record_stamp(&e.name)) {
            return Ok(Express::Full("a certificate's entry does not stand"));
        }
        if let Some(crls) = crls.as_mut() {
            let Some(crl) = &e.crl else {
                return Ok(Express::Full("an entry without its CRL reference"));
            };
            if !crls.still_good(crl, summary.issuers.get(&crl.issuer).map(Vec::as_slice), at) {
                return Ok(Express::Full(
                    "a certificate's CRL is not kept, not fresh or says otherwise",
                ));
            }
        }
        certificates.push(CertReport {
            name: e.name,
            outcome: Outcome::Unchanged { reason: e.reason },
            warning: None,
            revocation: None,
            ordered: None,
        });
    }
    tracing::debug!(
        "due summary: {n} of {n} certificate(s) quiet, their records not read; \
         the configuration not parsed (its sources unchanged)",
        n = certificates.len()
    );
    let report = RunReport {
        certificates,
        takeover: None,
        stats: Some(RunStats {
            started_at,
            duration: started.elapsed(),
            requests: Vec::new(),
        }),
    };
    Ok(Express::Done(report, summary.express.warnings))
}

/// The state directory whose summary was made from the configuration at `config_path` as it
/// is now, the summary file's stamp before it was read, and the summary; `None` on any doubt.
fn matching_summary(config_path: &Path) -> Option<(Store, Stamp, ExpressSummary)> {
    use std::io::Read as _;
    use std::os::unix::fs::MetadataExt as _;
    // One open: the text (for the state directory's guess and the digest) and the mode come
    // from the same file, even when it is replaced meanwhile.
    let mut file = std::fs::File::open(config_path).ok()?;
    let mode = file.metadata().ok()?.mode() & 0o7777;
    let mut text = String::new();
    file.read_to_string(&mut text).ok()?;
    drop(file);
    let state_dir = sources::guess_state_dir(&text)?;
    let store = Store::existing(&state_dir);
    let path = store.dir().join(DUE_FILE);
    let stamp = Stamp::of_path(&path)?;
    let summary = ExpressSummary::load(&store)?;
    let x = &summary.express;
    let b = &summary.basis;
    if x.config != config_path
        || x.state_dir != state_dir
        || x.config_mode != mode
        || b.version != env!("CARGO_PKG_VERSION")
        || b.options != format!("allow_orders={}", x.allow_orders)
    {
        return None;
    }
    let digest = sources::source_digest(config_path, &text, &x.include)?;
    drop(text);
    (digest == b.config).then_some((store, stamp, summary))
}

#[cfg(test)]
mod tests;
