//! The due summary in a run ([`crate::store::due`]): which certificates the last full run
//! found with nothing to do, and until when. A certificate whose entry still stands is
//! reported unchanged without reading its record; every other certificate takes the full path
//! (record, installed files, CRL, planner), and those it finds quiet are kept for the next
//! run. The file is rewritten only when what it keeps changed.
//!
//! With `[revocation] check`, a standing entry's serial is checked against its CRL (read once
//! per run for all the certificates that name it) with the issuer the entry keeps: while the
//! CRL says what it said when the entry was made ("not revoked", "unknown", no CRL), the entry
//! stands and no certificate file is opened; anything else (a revocation, a CRL usable again
//! or no longer) sends the certificate down the full path, which records it.
//!
//! Only an unattended run over every certificate (the timer's `renew`, a daemon's run, on a
//! host outside a fleet or as a fleet's leader) uses and writes the summary; a command with
//! options of its own (`--force`, named certificates, `issue`, `install`, a dry run...) takes
//! the full path throughout and leaves the summary to the records' stamps.
//!
//! In a fleet leader's run the summary is as sound as on one host: what the engine decides
//! for a certificate depends on its record, the configuration, the installed leaf, the CRL
//! store, the run's options and the time — never on etcd directly. The fleet reaches the
//! engine only through the records: before the engine runs, the leader's import writes every
//! shared record this host has not accepted yet into the local record (a new file, so a new
//! stamp, and the entry no longer stands), and the certificates the fleet decides for
//! elsewhere (held, not installed here, refused, retired) never reach the engine. A leader's
//! summary is kept under its own run options, so a run outside a fleet never uses it.

use std::collections::HashSet;

use time::OffsetDateTime;

use crate::config::{CertificateConfig, Config};
use crate::store::Store;
use crate::store::due::{
    self, Basis, CrlParts, CrlRef, DueSummary, Entry, Express, Issuers, KeptCrl,
};

use super::context::{Ctx, RunOptions};
use super::job::Job;
use super::report::RevocationNote;

/// A record changed this recently (or later) is not kept: a change within the same tick of
/// the file system's clock could leave its stamp as it was.
const SETTLED_NS: i128 = 1_000_000_000;

/// A quiet certificate's entry before its record's stamp is taken.
pub(super) struct QuietEntry {
    name: String,
    until: i64,
    leaf: Option<(std::path::PathBuf, crate::store::FileStamp)>,
    reason: String,
    crl: Option<(CrlRef, Vec<u8>)>,
}

/// The summary of one run.
pub(super) struct Due {
    basis: Basis,
    kept: DueSummary,
    /// The entries for the next run: those that stood, and those the full path found.
    next: Vec<Entry>,
    /// The issuers their CRL references name.
    issuers: Issuers,
    /// Entries used as they were.
    stood: usize,
    /// What a `renew` needs to run without the configuration, for a configuration that allows
    /// it.
    express: Option<Express>,
}

impl Due {
    /// The summary for a run of `opts` over `config`, when such a run may use one.
    pub(super) fn open(
        config: &Config,
        store: &Store,
        opts: &RunOptions,
        in_fleet: bool,
    ) -> Option<Self> {
        let plain = opts.names.is_empty()
            && !opts.dry_run
            && !opts.force
            && !opts.reinstall
            && !opts.clear_intent
            && !opts.replace_ended
            && !opts.reuse_key
            && !opts.ignore_backoff;
        // In a fleet, only the leader's engine (`in_fleet`) runs over every certificate.
        if !plain || (config.fleet.is_some() && !in_fleet) {
            return None;
        }
        let basis = Basis {
            version: env!("CARGO_PKG_VERSION").to_owned(),
            config: config.source_digest.clone()?,
            options: options_of(opts, in_fleet),
        };
        let kept = DueSummary::load(store, &basis);
        Some(Self {
            basis,
            next: Vec::with_capacity(kept.len()),
            issuers: Issuers::new(),
            kept,
            stood: 0,
            express: express_of(config),
        })
    }

    /// The kept entry of `cert` if it still stands at `now`.
    pub(super) fn standing(
        &self,
        store: &Store,
        cert: &CertificateConfig,
        now: OffsetDateTime,
    ) -> Option<&Entry> {
        let entry = self.kept.get(&cert.name)?;
        entry
            .stands(now.unix_timestamp(), store.record_stamp(&cert.name))
            .then_some(entry)
    }

    /// Whether the standing `entry` still stands against its CRL this run (`None`: the
    /// certificate takes the full path), with what the report says of its revocation. An entry
    /// without a CRL reference (a summary written without `[revocation] check` or by an older
    /// version) or whose issuer the file does not hold takes the full path once.
    pub(super) async fn crl_stands(
        &self,
        ctx: &Ctx<'_>,
        entry: &Entry,
        now: OffsetDateTime,
    ) -> Option<Option<RevocationNote>> {
        let Some(checker) = &ctx.revocation else {
            return Some(None);
        };
        let crl = entry.crl.as_ref()?;
        if crl.urls.is_empty() {
            return (crl.state == "no_crl").then_some(None);
        }
        let issuer = self.kept.issuer(&crl.issuer)?;
        let status = checker.status_of_ref(crl, issuer, now).await;
        if status.kind() != crl.state {
            return None;
        }
        checker.count(&status);
        Some(match status {
            crate::revocation::Status::Unknown { .. } => Some(RevocationNote {
                state: status.kind().to_owned(),
                detail: status.describe(),
            }),
            _ => None,
        })
    }

    /// `entry` stood: it is kept as it is.
    pub(super) fn stood(&mut self, entry: Entry) {
        if let Some(c) = &entry.crl
            && !self.issuers.contains_key(&c.issuer)
            && let Some(der) = self.kept.issuer(&c.issuer)
        {
            self.issuers.insert(c.issuer.clone(), der.to_vec());
        }
        self.stood += 1;
        self.next.push(entry);
    }

    /// The entry of a certificate that took the full path and ended unchanged with `reason`,
    /// when it is quiet ([`Job::quiet_until`]) and has no failures to clear; its record's stamp
    /// is taken by [`Due::found_quiet`] once the run has settled the certificate.
    pub(super) fn quiet_entry(job: &Job<'_>, reason: &str) -> Option<QuietEntry> {
        let until = job.quiet_until?;
        if job.backed_off() || job.rec.failures > 0 || job.rec.retry_after.is_some() {
            return None;
        }
        let inst = job.rec.installed.as_ref()?;
        let leaf = match (&inst.leaf_file, inst.leaf_stamp) {
            (Some(path), Some(stamp)) if path.to_str().is_some() => Some((path.clone(), stamp)),
            (None, _) => None,
            _ => return None,
        };
        Some(QuietEntry {
            name: job.cert.name.clone(),
            until: until.unix_timestamp(),
            leaf,
            reason: reason.to_owned(),
            crl: job.crl_ref.clone(),
        })
    }

    /// Keeps a quiet certificate found by the full path, with its record's stamp now; not when
    /// the record changed within the last second.
    pub(super) fn found_quiet(&mut self, store: &Store, q: QuietEntry) {
        let Some(record) = store.record_stamp(&q.name) else {
            return;
        };
        // File times are the system's, whatever the run's clock.
        if record.changed_since(OffsetDateTime::now_utc().unix_timestamp_nanos() - SETTLED_NS) {
            return;
        }
        let crl = q.crl.map(|(crl, der)| {
            self.issuers.entry(crl.issuer.clone()).or_insert(der);
            crl
        });
        self.next.push(Entry {
            name: q.name,
            until: q.until,
            record,
            leaf: q.leaf,
            reason: q.reason,
            crl,
        });
    }

    /// Writes the summary for the next run when it changed, with the CRLs the run read fresh
    /// (`crls`: every entry kept was checked against them).
    pub(super) fn finish(mut self, store: &Store, config: &Config, mut crls: Vec<KeptCrl>) {
        crls.sort_unstable_by(|a, b| (&a.url, &a.issuer).cmp(&(&b.url, &b.issuer)));
        crls.dedup_by(|a, b| a.url == b.url && a.issuer == b.issuer);
        if self.stood == self.kept.len()
            && self.next.len() == self.stood
            && self.kept.express() == self.express.as_ref()
            && self.kept.crls() == crls.as_slice()
        {
            return;
        }
        let mut seen = HashSet::with_capacity(self.next.len());
        if self.next.iter().any(|e| !seen.insert(e.name.as_str())) {
            due::remove(store);
            return;
        }
        drop(seen);
        // In the configuration's order, for a run that reports them without it.
        let order: std::collections::HashMap<&str, usize> = config
            .certificates
            .iter()
            .enumerate()
            .map(|(i, c)| (c.name.as_str(), i))
            .collect();
        self.next
            .sort_unstable_by_key(|e| order.get(e.name.as_str()).copied().unwrap_or(usize::MAX));
        let parts = CrlParts {
            issuers: std::mem::take(&mut self.issuers),
            crls,
        };
        due::save_with(
            store,
            &self.basis,
            &self.next,
            self.express.as_ref(),
            &parts,
        );
    }

    /// How many certificates were reported from the summary.
    pub(super) fn used(&self) -> usize {
        self.stood
    }
}

/// The run options a summary's entries were decided under: a fleet leader's summary is its
/// own (a summary of a run outside a fleet is not used by a leader's run, nor the other way).
fn options_of(opts: &RunOptions, in_fleet: bool) -> String {
    if in_fleet {
        format!("allow_orders={},fleet-leader", opts.allow_orders)
    } else {
        format!("allow_orders={}", opts.allow_orders)
    }
}

/// The express part of the summary ([`Express`]) for `config`: only for a configuration
/// whose source digest is known, outside a fleet, without notifications or metrics (a run
/// without the configuration does none of what they need).
pub(crate) fn express_of(config: &Config) -> Option<Express> {
    use std::os::unix::fs::MetadataExt as _;
    let a = &config.agent;
    if config.source_digest.is_none()
        || config.fleet.is_some()
        || a.notify_command.is_some()
        || a.notify_url.is_some()
        || a.metrics_file.is_some()
        || a.metrics_listen.is_some()
    {
        return None;
    }
    Some(Express {
        config: config.path.clone(),
        config_mode: std::fs::metadata(&config.path).ok()?.mode() & 0o7777,
        state_dir: a.state_dir.clone(),
        include: a.include.clone(),
        allow_orders: a.allow_orders,
        revocation: config.revocation.check,
        crl_limits: (
            config.revocation.max_crl_bytes,
            config.revocation.refresh_secs,
        ),
        warnings: config.warnings.clone(),
        programs: crate::config::sources::command_programs(config),
        certificates: config.certificates.len(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn basis(options: String) -> Basis {
        Basis {
            version: env!("CARGO_PKG_VERSION").to_owned(),
            config: "sources".into(),
            options,
        }
    }

    /// A summary written by a run outside a fleet is not a leader's, nor the other way round;
    /// each is used by its own kind of run; damaged or truncated, by neither.
    #[test]
    fn a_leaders_summary_and_a_single_hosts_are_not_each_others() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open(&dir.path().join("state")).unwrap();
        let opts = RunOptions::default();
        let leader = basis(options_of(&opts, true));
        let single = basis(options_of(&opts, false));
        assert_ne!(leader, single);
        let entry = |name: &str| Entry {
            name: name.into(),
            until: i64::MAX,
            record: due::Stamp::of_path(dir.path()).unwrap(),
            leaf: None,
            reason: "up to date".into(),
            crl: None,
        };
        due::save(&store, &leader, vec![entry("www")]);
        assert_eq!(DueSummary::load(&store, &leader).len(), 1);
        assert!(DueSummary::load(&store, &single).is_empty());
        due::save(&store, &single, vec![entry("shop")]);
        assert!(DueSummary::load(&store, &leader).is_empty());
        assert!(DueSummary::load(&store, &single).get("shop").is_some());
        let file = store.dir().join(due::DUE_FILE);
        let whole = std::fs::read(&file).unwrap();
        for garbage in [
            &whole[..whole.len() / 2],
            &b"\0\xff"[..],
            &b"[]"[..],
            &b""[..],
        ] {
            std::fs::write(&file, garbage).unwrap();
            assert!(DueSummary::load(&store, &leader).is_empty());
            assert!(DueSummary::load(&store, &single).is_empty());
        }
    }
}
