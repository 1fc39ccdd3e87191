//! `cert-agent retire`: a certificate is no longer managed. Its order is cancelled when asked
//! and the API's cancellation window allows it ("cancel: any not-yet-issued state at any time;
//! issued within 28 days of issuance"), what was published for validation and a placeholder
//! are removed, with `--remove-files` the installed files too (only files still this
//! certificate's by their content, never a path another certificate or record names, never
//! one a web server still loads unless forced: `retire_guard.rs`), the record is
//! archived under `state_dir/retired/` (which keeps later runs away from NAME), and an include
//! file written by `discover --write` for it and unchanged since is removed; any other
//! configuration is the operator's to edit, and the entry is named.
//!
//! In two steps, so that the operator can confirm in between: [`plan`] reads everything and
//! changes nothing; [`carry_out`] acts.

use std::path::{Path, PathBuf};

use anyhow::{Context, Result, bail};
use serde::Serialize;
use time::{Date, OffsetDateTime};

use crate::api::{ApiError, CertificateDetails, CertificateState, Client, PendingAction};
use crate::config::{CertificateConfig, Config};
use crate::store::{CertRecord, Retired, Store};

use super::deploy::install_paths;
pub use super::retire_own::Own;

/// "cancel window after issuance: 28 days".
pub(crate) const CANCEL_WINDOW_DAYS: i64 = 28;

/// The first line of an include file that `discover --write` wrote (and the agent owns).
const DISCOVER_HEADER: &str = "# Written by `cert-agent discover`";

/// What the operator asked for.
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct RetireOptions {
    pub cancel: bool,
    pub remove_files: bool,
    pub force: bool,
}

/// Where the certificate's configuration entry lives.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub(crate) enum ConfigEntry {
    /// Not (or no longer) in the configuration.
    None,
    /// An include file `discover --write` wrote for this certificate alone: removed.
    Owned { file: PathBuf },
    /// The operator's file: named, not edited.
    Operator { file: PathBuf },
}

/// What retiring a certificate will do, read before anything changes.
pub(crate) struct Plan<'a> {
    pub name: String,
    pub cert: Option<&'a CertificateConfig>,
    pub record: CertRecord,
    /// The order's certificate ID, if there is one.
    pub certificate_id: Option<u64>,
    /// Installed files to delete (`--remove-files`).
    pub files: Vec<PathBuf>,
    /// Placeholder files to delete.
    pub placeholder_files: Vec<PathBuf>,
    /// Files left in place, with the reason.
    pub kept: Vec<(PathBuf, String)>,
    /// What makes an installed file this certificate's (its serial, key and chain).
    pub own: Own,
    /// What makes a placeholder file the recorded placeholder.
    pub placeholder_own: Own,
    pub config_entry: ConfigEntry,
}

/// Reads what retiring `name` involves; changes nothing. The caller holds the run lock.
pub(crate) fn plan<'a>(
    config: &'a Config,
    store: &Store,
    name: &str,
    opts: RetireOptions,
) -> Result<Plan<'a>> {
    let cert = config.certificates.iter().find(|c| c.name == name);
    let record_file = store.record_path(name)?;
    if !record_file.exists() {
        if let Some(archive) = store.retired(name) {
            bail!(
                "certificate '{name}' is already retired ({}){}",
                archive.display(),
                if cert.is_some() {
                    "; remove its [[certificate]] entry from the configuration"
                } else {
                    ""
                }
            );
        }
        if cert.is_none() {
            bail!(
                "no certificate '{name}' is configured in {} or recorded in {}",
                config.path.display(),
                store.dir().display()
            );
        }
    }
    let record = store.load(name)?;
    if record.partner.intent().is_some() && !opts.force {
        bail!(
            "an order for '{name}' was sent without a known answer: it may have been billed. \
             Run `cert-agent renew --name {name}` to find it in the certificate list first \
             (then retire it with --cancel), or retire with --force to stop tracking it anyway"
        );
    }
    let mut files = Vec::new();
    if opts.remove_files
        && let Some(i) = &record.installed
    {
        files.extend(i.files.iter().cloned());
    }
    let mut placeholder_files = Vec::new();
    if record.placeholder.is_some()
        && let Some(c) = cert
    {
        placeholder_files.extend(install_paths(c).all().map(Path::to_path_buf));
    }
    files.retain(|f| !placeholder_files.contains(f));
    let own = match &record.installed {
        Some(i) => Own::of(Some(&i.serial), i.files.iter().chain(&i.leaf_file)),
        None => Own::default(),
    };
    let placeholder_own = Own::of(
        record.placeholder.as_ref().map(|p| p.serial.as_str()),
        &placeholder_files,
    );
    Ok(Plan {
        own,
        placeholder_own,
        name: name.to_owned(),
        cert,
        certificate_id: record.certificate_id(),
        record,
        files,
        placeholder_files,
        kept: Vec::new(),
        config_entry: config_entry(config, name)?,
    })
}

/// The file that defines `name`: the main file or one of its includes.
fn config_entry(config: &Config, name: &str) -> Result<ConfigEntry> {
    if !config.certificates.iter().any(|c| c.name == name) {
        return Ok(ConfigEntry::None);
    }
    for file in config.fragments.iter().chain(std::iter::once(&config.path)) {
        let Ok(text) = std::fs::read_to_string(file) else {
            continue;
        };
        let Ok(doc) = text.parse::<toml::Table>() else {
            continue;
        };
        let certs = doc
            .get("certificate")
            .and_then(toml::Value::as_array)
            .map(Vec::as_slice)
            .unwrap_or_default();
        let here = certs
            .iter()
            .any(|c| c.get("name").and_then(toml::Value::as_str) == Some(name));
        if !here {
            continue;
        }
        let owned = *file != config.path
            && text.starts_with(DISCOVER_HEADER)
            && crate::discover::fragment_unchanged(&text)
            && certs.len() == 1
            && doc.len() == 1;
        return Ok(if owned {
            ConfigEntry::Owned { file: file.clone() }
        } else {
            ConfigEntry::Operator { file: file.clone() }
        });
    }
    Ok(ConfigEntry::Operator {
        file: config.path.clone(),
    })
}

impl Plan<'_> {
    /// What will be done, one line each (for the confirmation and the report).
    pub(crate) fn describe(&self, opts: RetireOptions) -> Vec<String> {
        let mut lines = Vec::new();
        match (opts.cancel, self.certificate_id) {
            (true, Some(id)) => lines.push(format!(
                "ask the API to cancel certificate {id} (if inside the cancellation window)"
            )),
            (true, None) => lines.push("no order is recorded: nothing to cancel".into()),
            (false, Some(id)) => lines.push(format!(
                "leave order {id} running at the CA (--cancel asks for its cancellation)"
            )),
            (false, None) => {}
        }
        if !self.record.dcv.is_empty() || self.record.pending_key.is_some() {
            lines.push("remove the published validation files and records".into());
        }
        for f in self.placeholder_files.iter().chain(&self.files) {
            lines.push(format!("delete {}", f.display()));
        }
        for (f, why) in &self.kept {
            lines.push(format!("keep {} ({why})", f.display()));
        }
        lines.push(format!(
            "archive the state record under retired/ (later runs leave '{}' alone)",
            self.name
        ));
        match &self.config_entry {
            ConfigEntry::Owned { file } => {
                lines.push(format!("remove {} (written by discover)", file.display()));
            }
            ConfigEntry::Operator { file } => lines.push(format!(
                "the [[certificate]] entry '{}' in {} stays: remove it yourself",
                self.name,
                file.display()
            )),
            ConfigEntry::None => {}
        }
        lines
    }
}

/// Whether a cancellation can be asked for, from the order's details.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(tag = "decision", rename_all = "snake_case")]
pub(crate) enum CancelDecision {
    /// Not issued yet, or issued within the window: ask.
    Ask,
    /// Issued more than 28 days ago: the API would refuse; not asked.
    TooLate {
        #[serde(serialize_with = "date_text")]
        issued: Date,
    },
    /// The order already ended (annulled, expired): nothing to cancel.
    Ended { state: String },
    /// A cancellation is already pending.
    Pending,
}

/// A date as `YYYY-MM-DD`.
fn date_text<S: serde::Serializer>(d: &Date, s: S) -> Result<S::Ok, S::Error> {
    s.collect_str(d)
}

/// The cancellation rule of the API ("cancel: any not-yet-issued state at any time; issued
/// within 28 days of issuance"). The issuance is the subscription's start (the first
/// issuance), else the current certificate's; dates are whole days, so the call is skipped
/// only once the window has certainly passed and the API decides the day in between.
pub(crate) fn cancel_decision(details: &CertificateDetails, now: OffsetDateTime) -> CancelDecision {
    let code = details.status.certificate.as_ref();
    if code.and_then(|c| c.pending()) == Some(PendingAction::Cancel) {
        return CancelDecision::Pending;
    }
    match code.and_then(|c| c.state()) {
        Some(s @ (CertificateState::Annulled | CertificateState::Expired)) => {
            CancelDecision::Ended {
                state: s.as_str().to_owned(),
            }
        }
        Some(CertificateState::Issued) => {
            let issued = details
                .subscription_valid_from
                .as_deref()
                .or(details.valid_from.as_deref())
                .and_then(crate::api::parse_api_date);
            match issued {
                Some(d)
                    if d.checked_add(time::Duration::days(CANCEL_WINDOW_DAYS + 1))
                        .is_some_and(|end| now.date() > end) =>
                {
                    CancelDecision::TooLate { issued: d }
                }
                _ => CancelDecision::Ask,
            }
        }
        _ => CancelDecision::Ask,
    }
}

/// What asking for the cancellation came to.
#[derive(Debug, Clone, Serialize)]
pub(crate) struct CancelReport {
    pub certificate_id: u64,
    pub decision: CancelDecision,
    /// Whether the cancel call was made.
    pub called: bool,
    /// The API's `success` and `result`, as they came.
    pub success: Option<bool>,
    pub result: Option<String>,
}

impl CancelReport {
    /// What the cancellation came to, in one line.
    pub(crate) fn describe(&self) -> String {
        let id = self.certificate_id;
        match &self.decision {
            CancelDecision::Ask => format!(
                "cancel certificate {id}: the API answered success={} \"{}\"",
                self.success.unwrap_or(false),
                self.result.as_deref().unwrap_or("")
            ),
            CancelDecision::TooLate { issued } => format!(
                "cancel certificate {id}: not asked: it was issued on {issued}, more than \
                 {CANCEL_WINDOW_DAYS} days ago, and the API cancels an issued certificate only \
                 within {CANCEL_WINDOW_DAYS} days of its issuance"
            ),
            CancelDecision::Ended { state } => {
                format!("cancel certificate {id}: not asked: the order is already {state}")
            }
            CancelDecision::Pending => {
                format!("cancel certificate {id}: not asked: a cancellation is already pending")
            }
        }
    }
}

/// What retiring did.
#[derive(Debug, Clone, Serialize)]
pub(crate) struct RetireReport {
    pub name: String,
    pub certificate_id: Option<u64>,
    pub cancel: Option<CancelReport>,
    pub removed: Vec<PathBuf>,
    pub kept: Vec<(PathBuf, String)>,
    pub archive: PathBuf,
    pub config_entry: ConfigEntry,
    pub warnings: Vec<String>,
}

/// Asks for the cancellation when the window allows it; the API's answer (also a refusal) is
/// reported as it came. An error reaching the API stops the retirement before anything
/// changed.
async fn cancel(client: &Client, id: u64, now: OffsetDateTime) -> Result<CancelReport> {
    let details = client
        .details(id)
        .await
        .with_context(|| format!("could not read certificate {id}; nothing was changed"))?;
    let decision = cancel_decision(&details, now);
    let mut report = CancelReport {
        certificate_id: id,
        decision: decision.clone(),
        called: false,
        success: None,
        result: None,
    };
    if decision != CancelDecision::Ask {
        return Ok(report);
    }
    report.called = true;
    match client.cancel(id).await {
        Ok(r) => {
            report.success = Some(r.success);
            report.result = r.result;
        }
        Err(ApiError::Refused { reason, .. }) => {
            report.success = Some(false);
            report.result = Some(reason);
        }
        Err(e) => {
            return Err(anyhow::Error::new(e).context(format!(
                "the cancellation of certificate {id} has no known answer; nothing else was \
                 changed: `cert-agent show {id}` shows whether it is pending"
            )));
        }
    }
    Ok(report)
}

/// Retires the certificate of `plan`: cancels (with `client`, when asked), removes, archives,
/// journals. The caller holds the run lock.
pub(crate) async fn carry_out(
    plan: Plan<'_>,
    store: &Store,
    client: Option<&Client>,
    opts: RetireOptions,
    now: OffsetDateTime,
) -> Result<RetireReport> {
    let cancel_report = ask_cancel(&plan, store, client, opts, now).await?;
    finish(plan, store, cancel_report, now).await
}

/// The API side of retiring: the cancellation asked for (with `client`) when `opts` asks and
/// an order is recorded, inside the window; the answer journaled. `None`: not asked for.
pub(crate) async fn ask_cancel(
    plan: &Plan<'_>,
    store: &Store,
    client: Option<&Client>,
    opts: RetireOptions,
    now: OffsetDateTime,
) -> Result<Option<CancelReport>> {
    Ok(match (opts.cancel, plan.certificate_id, client) {
        (true, Some(id), Some(client)) => {
            let r = cancel(client, id, now).await?;
            if r.called {
                let event = if r.success == Some(true) {
                    "cancel"
                } else {
                    "cancel-refused"
                };
                let details = serde_json::json!({
                    "certificate_id": id,
                    "success": r.success,
                    "result": r.result,
                });
                store.journal(&plan.name, event, details)?;
            }
            Some(r)
        }
        _ => None,
    })
}

/// This host's side of retiring, after [`ask_cancel`]: the published validation files and
/// the placeholder removed, the installed files with `--remove-files`, the private leftovers,
/// the include file `discover` wrote; the record archived and the retirement journaled.
pub(crate) async fn finish(
    plan: Plan<'_>,
    store: &Store,
    cancel_report: Option<CancelReport>,
    now: OffsetDateTime,
) -> Result<RetireReport> {
    let mut warnings = Vec::new();
    let mut rec = plan.record.clone();
    match plan.cert {
        Some(cert) => super::publish::remove_published(store, cert, &mut rec).await,
        None => {
            let published = crate::dcv::webroot::Published {
                files: std::mem::take(&mut rec.dcv.files),
                dirs: std::mem::take(&mut rec.dcv.dirs),
            };
            if let Err(e) = crate::dcv::webroot::remove(&published) {
                warnings.push(format!("could not remove validation files: {e}"));
            }
            if let Some((file, _)) = rec.dcv.standalone_file.take()
                && let Err(e) = crate::dcv::serve_dir::remove(store.dir(), &file)
            {
                warnings.push(format!("could not remove a validation file: {e}"));
            }
            for (name, rtype, _) in std::mem::take(&mut rec.dcv.dns_records) {
                warnings.push(format!(
                    "the {rtype} record {name} was added through the dns_hook of a certificate \
                     no longer configured: remove it by hand"
                ));
            }
        }
    }
    let mut removed = Vec::new();
    let mut kept = plan.kept.clone();
    let checked = plan
        .placeholder_files
        .iter()
        .map(|f| (f, &plan.placeholder_own))
        .chain(plan.files.iter().map(|f| (f, &plan.own)));
    for (f, own) in checked {
        // Read again right before it goes: a file replaced since the plan stays.
        if let Some(why) = own.foreign(f) {
            kept.push((f.clone(), why));
            continue;
        }
        match std::fs::remove_file(f) {
            Ok(()) => removed.push(f.clone()),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
            Err(e) => warnings.push(format!("could not delete {}: {e}", f.display())),
        }
    }
    drop_private_leftovers(store, &rec, &mut warnings);
    if let ConfigEntry::Owned { file } = &plan.config_entry {
        match std::fs::remove_file(file) {
            Ok(()) => removed.push(file.clone()),
            Err(e) => warnings.push(format!("could not remove {}: {e}", file.display())),
        }
    }
    let summary = serde_json::json!({
        "certificate_id": plan.certificate_id,
        "cancel": cancel_report,
        "removed": removed,
        "kept": kept,
        "config_entry": plan.config_entry,
    });
    let archive = store.archive_retired(&Retired {
        retired_at: now,
        summary: summary.clone(),
        record: rec,
    })?;
    store.journal(&plan.name, "retired", summary)?;
    Ok(RetireReport {
        name: plan.name,
        certificate_id: plan.certificate_id,
        cancel: cancel_report,
        removed,
        kept,
        archive,
        config_entry: plan.config_entry,
        warnings,
    })
}

/// Pending keys (never installed) and a stored renewal token: credentials of a certificate
/// no longer managed.
fn drop_private_leftovers(store: &Store, rec: &CertRecord, warnings: &mut Vec<String>) {
    let keys = store.dir().join("keys").join(&rec.name);
    if keys.is_dir()
        && let Err(e) = std::fs::remove_dir_all(&keys)
    {
        warnings.push(format!("could not remove {}: {e}", keys.display()));
    }
    if let Some(id) = rec.certificate_id() {
        let token = store.dir().join("prolongation").join(format!("{id}.token"));
        match std::fs::remove_file(&token) {
            Ok(()) => {}
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
            Err(e) => warnings.push(format!("could not remove {}: {e}", token.display())),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn details(state: &str, issued: Option<&str>) -> CertificateDetails {
        let v = serde_json::json!({
            "id": 7,
            "status": { "certificate": state, "client": { "status": "new", "description": "" } },
            "external_number": null,
            "common_name": "www.example.com",
            "additional_domains": "",
            "all_domains": ["www.example.com"],
            "valid_from": issued,
            "valid_to": null,
            "subscription_duration": null,
            "subscription_valid_from": issued,
            "subscription_valid_to": null,
            "replacement_id": null,
            "prolonged_id": null,
            "dcv_method": "HTTP_CSR_HASH",
            "dcv_content": null,
            "validation_email": "",
            "additional_validation_emails": {},
            "csr": "",
            "nomenclature_id": 1,
            "name": "DV",
            "price": null,
            "price_includes_vat": false,
            "currency": "EUR",
            "payment_status": "paid",
            "unpaid": false
        });
        serde_json::from_value(v).unwrap()
    }

    /// A host retiring what the fleet retired keeps the installed files its web server still
    /// names and deletes the rest; `retire` on the host itself refuses them (unless forced).
    #[test]
    fn files_the_web_server_names_are_kept_by_a_fleet_host_and_refused_by_retire() {
        let dump = "# configuration file /etc/nginx/nginx.conf:\nhttp {\n  server {\n    \
                    listen 443 ssl;\n    server_name www.example.com;\n    ssl_certificate \
                    /srv/out/fullchain.pem;\n    ssl_certificate_key /srv/out/privkey.pem;\n  \
                    }\n}\n";
        let named = crate::discover::loaded_files(crate::discover::Server::Nginx, dump).unwrap();
        let plan = || Plan {
            name: "www".into(),
            cert: None,
            record: CertRecord::default(),
            certificate_id: None,
            files: ["fullchain.pem", "privkey.pem", "chain.pem"]
                .iter()
                .map(|f| PathBuf::from("/srv/out").join(f))
                .collect(),
            placeholder_files: Vec::new(),
            kept: Vec::new(),
            own: Own::default(),
            placeholder_own: Own::default(),
            config_entry: ConfigEntry::None,
        };
        let mut kept = plan();
        kept.in_use(&named, false, true).unwrap();
        assert_eq!(kept.files, vec![PathBuf::from("/srv/out/chain.pem")]);
        let names: Vec<_> = kept.kept.iter().map(|(f, _)| f.clone()).collect();
        assert_eq!(
            names,
            vec![
                PathBuf::from("/srv/out/fullchain.pem"),
                PathBuf::from("/srv/out/privkey.pem")
            ]
        );
        assert!(kept.kept[0].1.contains("still named at"), "{:?}", kept.kept);
        let mut refused = plan();
        let e = refused
            .in_use(&named, false, false)
            .unwrap_err()
            .to_string();
        assert!(e.contains("/srv/out/fullchain.pem (named at"), "{e}");
        let mut forced = plan();
        forced.in_use(&named, true, false).unwrap();
        assert_eq!(forced.files.len(), 3, "--force deletes them all");
    }

    #[test]
    fn the_28_day_window_decides_whether_cancel_is_asked() {
        let now = time::macros::datetime!(2026-06-30 12:00 UTC);
        let cases = [
            ("new", None, CancelDecision::Ask),
            ("in_progress", None, CancelDecision::Ask),
            ("waiting_for_approval", None, CancelDecision::Ask),
            ("issued", Some("2026-06-25"), CancelDecision::Ask),
            // Issued on the last day there is: its window has not ended (and no panic).
            ("issued", Some("9999-12-31"), CancelDecision::Ask),
            // 28 and 29 days: the API decides the boundary day.
            ("issued", Some("2026-06-02"), CancelDecision::Ask),
            ("issued", Some("2026-06-01"), CancelDecision::Ask),
            (
                "issued",
                Some("2026-05-31"),
                CancelDecision::TooLate {
                    issued: time::macros::date!(2026 - 05 - 31),
                },
            ),
            (
                "issued_pending_cancel",
                Some("2026-06-25"),
                CancelDecision::Pending,
            ),
            (
                "annulled",
                None,
                CancelDecision::Ended {
                    state: "annulled".into(),
                },
            ),
            (
                "expired",
                Some("2025-01-01"),
                CancelDecision::Ended {
                    state: "expired".into(),
                },
            ),
            // Issued without a date: the API decides.
            ("issued", None, CancelDecision::Ask),
        ];
        for (state, issued, want) in cases {
            assert_eq!(
                cancel_decision(&details(state, issued), now),
                want,
                "{state} {issued:?}"
            );
        }
    }
}
