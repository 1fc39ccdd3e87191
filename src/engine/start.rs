//! Starting one certificate: the planner picks its action from the record and the installed
//! files (reading the order first when a reissue is due), and the action is carried out as far
//! as it goes without waiting — an order placed, a reissue sent, a renewal prepared, an issued
//! certificate downloaded again. What then waits for the CA is left to the polling phase.

use anyhow::{Context, Result, bail};

use crate::clock;
use crate::revocation::Status;
use crate::store::{CertRecord, FileStamp, PartnerStage, RevocationSeen};

use super::context::Ctx;
use super::deploy;
use super::deploy::Checked;
use super::job::{Job, Mode, Next, Ready, Waiting, wanted};
use super::plan::{self, Action, Disk, Inputs, OrderFacts};
use super::report::Outcome;
use super::{held, keys, order, reissue};

/// Plans and starts the action of one certificate; a warning for the operator goes to
/// `warning_out`.
pub(super) async fn start(
    ctx: &Ctx<'_>,
    job: &mut Job<'_>,
    warning_out: &mut Option<String>,
) -> Result<Next> {
    if ctx.opts.clear_intent && order::clear_intent(job)? {
        tracing::warn!(certificate = %job.cert.name, "unreconciled order intent cleared by the operator");
    }
    if let Some(id) = job.cert.order.certificate_id
        && job.rec.partner.is_unordered()
    {
        if ctx.opts.dry_run {
            return Ok(Next::Done(Outcome::Planned {
                action: format!("adopt certificate {id} (`certificate_id`): no new order"),
            }));
        }
        let (state, message) = Box::pin(super::adopt::adopt_record(
            ctx.store,
            ctx.client()?,
            job.cert,
            &mut job.rec,
            id,
            ctx.now(),
        ))
        .await
        .with_context(|| format!("could not adopt certificate {id} (`certificate_id`)"))?;
        tracing::info!(certificate = %job.cert.name, "adopted certificate {id} ({state}){message}");
    }
    let disk = refresh_disk(ctx, job)?;
    if disk == Disk::AsInstalled {
        check_revocation(ctx, job).await?;
    }
    let action = plan_action(ctx, job, disk.clone()).await?;
    // A CRL that cannot be used does not stop a certificate from being quiet: the due summary
    // keeps what its CRL check needs, and every run checks it again.
    if matches!(action, Action::Idle { warning: None, .. })
        && disk == Disk::AsInstalled
        && job.revocation.as_ref().is_none_or(|r| r.state != "revoked")
        && (ctx.revocation.is_none() || job.crl_ref.is_some())
    {
        job.quiet_until = plan::quiet_until(&inputs(ctx, job, disk, None));
    }
    if ctx.opts.dry_run {
        return Ok(Next::Done(Outcome::Planned {
            action: plan::describe(&action, wanted(job.cert)),
        }));
    }
    tracing::debug!(certificate = %job.cert.name, "plan: {action:?}");
    act(ctx, job, action, warning_out).await
}

/// The installed files as found on disk; a leaf rewritten with the same certificate (e.g.
/// touched) has its new stamp remembered.
pub(super) fn refresh_disk(ctx: &Ctx<'_>, job: &mut Job<'_>) -> Result<Disk> {
    let (disk, refreshed_stamp) = disk_state(&job.rec);
    if let (Some(stamp), Some(inst)) = (refreshed_stamp, job.rec.installed.as_mut()) {
        inst.leaf_stamp = Some(stamp);
        if !ctx.opts.dry_run {
            job.save()?;
        }
    }
    Ok(disk)
}

/// The planner's decision; when a reissue is due, the order is read first (its subscription
/// end and names, one call) and the planner decides again with it. A dry run makes no call.
async fn plan_action(ctx: &Ctx<'_>, job: &mut Job<'_>, disk: Disk) -> Result<Action> {
    let action = plan::decide(&inputs(ctx, job, disk.clone(), None));
    if !matches!(action, Action::ReadOrderFirst { .. }) || ctx.opts.dry_run {
        return Ok(action);
    }
    let id = job.certificate_id()?;
    let details = Box::pin(ctx.client()?.details(id))
        .await
        .with_context(|| format!("could not read certificate {id} before reissuing it"))?;
    // A revoked certificate whose order has ended (annulled, expired) cannot be reissued:
    // the order is recorded as ended and the policy on new orders decides.
    let status = details.status.certificate.as_ref().and_then(|s| s.state());
    if let Some(state) = status.filter(|s| {
        matches!(
            s,
            crate::api::CertificateState::Annulled | crate::api::CertificateState::Expired
        )
    }) {
        job.rec.mark_ended(state.as_str());
        job.save()?;
        job.journal(
            "order-ended",
            serde_json::json!({ "certificate_id": id, "state": state.as_str() }),
        )?;
        return Ok(plan::decide(&inputs(ctx, job, disk, None)));
    }
    let facts = OrderFacts {
        subscription: super::job::subscription_of(&details),
        names: details.all_domains.clone(),
    };
    if facts.subscription.is_some() && facts.subscription != job.rec.partner.subscription {
        job.rec.partner.subscription = facts.subscription.clone();
        job.save()?;
    }
    Ok(plan::decide(&inputs(ctx, job, disk, Some(&facts))))
}

/// Reads the installed certificate's CRL (when `[revocation] check` is on and no replacement
/// is under way): what it says is kept in the record when it changed, so that the planner
/// sees a revocation, and goes to the report when it is not "not revoked"; a CRL that cannot
/// be used is logged as a warning and reported as `unknown`, never as "not revoked".
pub(super) async fn check_revocation(ctx: &Ctx<'_>, job: &mut Job<'_>) -> Result<()> {
    let Some(checker) = &ctx.revocation else {
        return Ok(());
    };
    let r = &job.rec;
    let Some(inst) = &r.installed else {
        return Ok(());
    };
    // A revocation is final: once seen (in a CRL, or made by `cert-agent revoke`) for the
    // installed serial, no later CRL answer takes it back.
    let revoked = r
        .revocation
        .as_ref()
        .is_some_and(|s| s.revokes(&inst.serial));
    let replacing = match &r.partner.stage {
        PartnerStage::NoOrder => false,
        PartnerStage::Intended(_) | PartnerStage::Ended { .. } => true,
        PartnerStage::Ordered { reissue, .. } => reissue.is_some(),
    };
    if revoked || replacing || r.pending_key.is_some() {
        // Its replacement is under way (or waits for the order policy): what was seen stands.
        job.revocation = r
            .revocation
            .as_ref()
            .filter(|s| s.revokes(&inst.serial))
            .map(|s| super::report::RevocationNote {
                state: s.state.clone(),
                detail: s.detail.clone(),
            });
        return Ok(());
    }
    let status = match crate::revocation::read_installed(inst) {
        Ok(cert) => {
            let status = checker.status_of(&cert, ctx.now()).await;
            if !matches!(status, Status::Revoked { .. }) {
                job.crl_ref = Some((
                    crate::store::due::CrlRef {
                        serial: hex::encode_upper(&cert.raw_serial),
                        issuer: crate::store::due::issuer_key(&cert.issuer_der),
                        urls: cert.crl_urls,
                        state: status.kind().to_owned(),
                    },
                    cert.issuer_der,
                ));
            }
            status
        }
        Err(why) => Status::Unknown { url: None, why },
    };
    let url = match &status {
        Status::Good { url, .. } | Status::Revoked { url, .. } => Some(url.clone()),
        Status::Unknown { url, .. } => url.clone(),
        Status::NoCrl => None,
    };
    let (revoked_at, reason) = match &status {
        Status::Revoked {
            revoked_at, reason, ..
        } => (Some(*revoked_at), reason.clone()),
        _ => (None, None),
    };
    let seen = RevocationSeen {
        serial: inst.serial.clone(),
        state: status.kind().to_owned(),
        url,
        detail: status.describe(),
        revoked_at,
        reason,
    };
    let name = &job.cert.name;
    match &status {
        Status::Revoked { .. } => {
            tracing::error!(certificate = %name, "the installed certificate is revoked: {}", seen.detail);
        }
        Status::Unknown { .. } => {
            tracing::debug!(certificate = %name, "{}", seen.detail);
        }
        Status::Good { .. } | Status::NoCrl => {}
    }
    if matches!(status, Status::Revoked { .. } | Status::Unknown { .. }) {
        job.revocation = Some(super::report::RevocationNote {
            state: seen.state.clone(),
            detail: seen.detail.clone(),
        });
    }
    if job.rec.revocation.as_ref() != Some(&seen) && !ctx.opts.dry_run {
        if matches!(status, Status::Revoked { .. }) {
            job.journal(
                "certificate-revoked",
                serde_json::json!({ "serial": seen.serial, "detail": seen.detail }),
            )?;
            job.rec.revocation = Some(seen);
            job.save()?;
        } else {
            // Not a revocation: written with the other certificates' once all have started
            // (a host that just installed thousands writes them together).
            job.rec.revocation = Some(seen.clone());
            ctx.crl_seen
                .borrow_mut()
                .push((job.cert.name.clone(), seen));
        }
    }
    Ok(())
}

fn inputs<'a>(
    ctx: &Ctx<'_>,
    job: &'a Job<'_>,
    disk: Disk,
    order_facts: Option<&'a OrderFacts>,
) -> Inputs<'a> {
    let opts = ctx.opts;
    Inputs {
        now: ctx.now(),
        record: &job.rec,
        disk,
        renew_before_days: ctx.config.agent.renew_before_days,
        allow_orders: opts.allow_orders,
        force: opts.force,
        ignore_backoff: opts.ignore_backoff,
        replace_ended: opts.replace_ended,
        reuse_key: opts.reuse_key || job.cert.order.reuse_key,
        family: job.cert.order.family,
        reinstall: opts.reinstall,
        wanted: wanted(job.cert),
        order_facts,
    }
}

/// Carries out `action`. The steps that call the API are boxed: the future every certificate
/// starts with stays small (it is moved into the run's set of starting certificates, a
/// thousand times in a run with nothing due), and only a certificate with work allocates.
async fn act(
    ctx: &Ctx<'_>,
    job: &mut Job<'_>,
    action: Action,
    warning_out: &mut Option<String>,
) -> Result<Next> {
    let name = job.cert.name.clone();
    match action {
        Action::Idle { next, warning } => {
            if let Some(w) = warning {
                tracing::warn!(certificate = %name, "{w}");
                *warning_out = Some(w);
            }
            Ok(Next::Done(unchanged(&job.rec, next)))
        }
        Action::NeedsOrder => {
            // A state for the operator to resolve, not a failure to back off from: it makes no
            // API call.
            let error = order::OrderRefusal::NotAllowed { name }.to_string();
            job.rec.last_error = Some(error.clone());
            job.save()?;
            Ok(Next::Done(Outcome::Failed { error }))
        }
        Action::Backoff { until } => Ok(Next::Done(Outcome::Failed {
            error: backoff_message(job, until, ctx.now()),
        })),
        Action::Hold { .. } => Ok(held::still_held(job)),
        Action::InstallHeld => match held::install(job) {
            Ok(next) => Ok(next),
            Err(e) => {
                // The held copy is dropped; the certificate is downloaded and checked again.
                let w = format!("{e:#}");
                tracing::warn!(certificate = %name, "{w}");
                *warning_out = Some(w);
                Box::pin(continue_pending(ctx, job)).await
            }
        },
        Action::Ended { state } => Ok(Next::Done(Outcome::Failed {
            error: format!(
                "certificate {} is {state}; nothing more can be done with this order and no new \
                 order is placed automatically: `cert-agent issue {name} --yes` places one",
                job.rec.certificate_id().unwrap_or(0),
            ),
        })),
        Action::CannotReissue { reason } => Ok(Next::Done(Outcome::Failed { error: reason })),
        Action::Order | Action::Reconcile => {
            replace_ended_order(job)?;
            let allow = ctx.opts.allow_orders;
            Box::pin(place_order(ctx, job, allow)).await
        }
        Action::Continue => Box::pin(continue_pending(ctx, job)).await,
        Action::Reinstall => Box::pin(reinstall(ctx, job)).await,
        Action::ReadOrderFirst { .. } => {
            bail!("internal error: a reissue was planned without reading the order first")
        }
        Action::Reissue { new_key, reason } => {
            tracing::info!(certificate = %name, "reissuing: {reason}");
            let previous = job.rec.installed.as_ref().map(|i| i.serial.clone());
            let reissued = Box::pin(reissue::start(ctx, job, new_key, ctx.now())).await?;
            Ok(wait_reissued(&job.rec, reissued, previous))
        }
        Action::RenewSubscription {
            order: true,
            reason,
        } => {
            let old = job.rec.certificate_id();
            job.journal(
                "subscription-renewal-order",
                serde_json::json!({ "renews": old, "reason": reason }),
            )?;
            job.rec.begin_subscription_renewal();
            job.save()?;
            tracing::warn!(certificate = %name, "placing a new order: {reason}");
            Box::pin(place_order(ctx, job, true)).await
        }
        Action::RenewSubscription {
            order: false,
            reason,
        } => {
            let message = Box::pin(prepare_renewal(ctx, job, &reason)).await?;
            tracing::warn!(certificate = %name, "{message}");
            *warning_out = Some(message.clone());
            Ok(Next::Done(Outcome::Unchanged { reason: message }))
        }
    }
}

/// Nothing to do for `rec` before `next`: the report's line.
pub(super) fn unchanged(rec: &CertRecord, next: Option<time::OffsetDateTime>) -> Outcome {
    let reason = match (&rec.installed, next) {
        (Some(i), Some(at)) => format!(
            "serial {} valid until {}; next renewal check after {}",
            i.serial,
            i.not_after.date(),
            at.date()
        ),
        _ => "up to date".to_owned(),
    };
    Outcome::Unchanged { reason }
}

/// Why a certificate in its failure backoff was not tried: when the next attempt is, how to
/// try now, and the last error.
pub(super) fn backoff_message(
    job: &Job<'_>,
    until: time::OffsetDateTime,
    now: time::OffsetDateTime,
) -> String {
    let minutes = (until - now).whole_minutes().max(1);
    let wait = if minutes >= 120 {
        format!("{} h {} min", minutes / 60, minutes % 60)
    } else {
        format!("{minutes} min")
    };
    format!(
        "not retried before {} (in {wait}) after {} failed attempt(s): the next run from then \
         tries again, `cert-agent renew --name {}` tries now; last error: {}",
        clock::short_time(until),
        job.rec.failures,
        job.cert.name,
        job.rec.last_error.as_deref().unwrap_or("unknown")
    )
}

/// Continues an order or reissue pending at the CA: validate, poll, download.
async fn continue_pending(ctx: &Ctx<'_>, job: &mut Job<'_>) -> Result<Next> {
    if let Some(previous) = job.rec.partner.reissue().map(|r| r.previous_serial.clone()) {
        let reissued = Box::pin(reissue::resume(ctx, job)).await?;
        Ok(wait_reissued(&job.rec, reissued, previous))
    } else {
        Box::pin(place_order(ctx, job, false)).await
    }
}

/// `issue --yes` replaces an ended order: its ID is kept as the one renewed.
fn replace_ended_order(job: &mut Job<'_>) -> Result<()> {
    let Some((state, pending)) = job.rec.replace_ended_order() else {
        return Ok(());
    };
    if let Some(p) = pending {
        keys::discard_key_file(&p.key_file);
    }
    job.save()?;
    job.journal(
        "ended-order-replaced",
        serde_json::json!({ "previous": job.rec.partner.renews, "state": state }),
    )
}

/// Makes sure the order exists (placing it when `allow` and none was placed) and waits for
/// its certificate.
async fn place_order(ctx: &Ctx<'_>, job: &mut Job<'_>, allow: bool) -> Result<Next> {
    let id = order::ensure_order(
        ctx.config,
        ctx.client()?,
        &ctx.products,
        job,
        allow,
        ctx.now(),
        ctx.lead,
    )
    .await?
    .certificate_id();
    Ok(wait(&job.rec, id, Mode::Issue))
}

/// Downloads the issued certificate again for the key installed with it.
async fn reinstall(ctx: &Ctx<'_>, job: &mut Job<'_>) -> Result<Next> {
    let id = job.certificate_id()?;
    let key = deploy::installed_key(job.cert)?;
    Ok(
        match deploy::download_checked(ctx, job.cert, id, &key, None).await? {
            Some((Checked::Valid(bundle), archive)) => {
                let install = deploy::cert_install(job.cert, &bundle, &key);
                Next::Ready(Box::new(Ready {
                    certificate_id: id,
                    bundle,
                    install,
                    archive,
                }))
            }
            Some((Checked::NotYet(bundle), _)) => Next::Done(Outcome::Pending {
                reason: format!(
                    "certificate {id} (serial {}) is valid from {}; it is installed again then",
                    bundle.serial_hex,
                    clock::rfc3339(bundle.not_before)
                ),
            }),
            None => Next::Done(Outcome::Pending {
                reason: format!("certificate {id}: its files are not available yet"),
            }),
        },
    )
}

/// Prepares the renewal order (`prolong`), stores its token (0600) and says where it is.
async fn prepare_renewal(ctx: &Ctx<'_>, job: &mut Job<'_>, reason: &str) -> Result<String> {
    let certificate_id = job.certificate_id()?;
    let p = ctx
        .client()?
        .prolong(certificate_id)
        .await
        .with_context(|| {
            format!("could not prepare the renewal of certificate {certificate_id}")
        })?;
    job.rec.partner.prolong_prepared_at = Some(ctx.now());
    job.save()?;
    let Some(token) = p.prolongation_token else {
        return Ok(format!(
            "{reason}; the API prepares no renewal order for certificate {certificate_id} yet \
             (it does for a multi-year subscription within 3 months of its end); place a new \
             order with `cert-agent issue {}` once it has ended, or set allow_orders",
            job.cert.name
        ));
    };
    let path = ctx
        .store
        .save_prolongation_token(certificate_id, token.expose())
        .context("could not store the renewal token")?;
    job.journal(
        "renewal-prepared",
        serde_json::json!({ "certificate_id": certificate_id, "token_file": path }),
    )?;
    Ok(format!(
        "{reason}: a renewal order is prepared (nothing is billed until it is completed on the \
         order site); its token is in {} (0600); `cert-agent prolong {certificate_id} \
         --show-token` prints the link",
        path.display()
    ))
}

fn wait_reissued(
    rec: &CertRecord,
    reissued: reissue::Reissued,
    previous_serial: Option<String>,
) -> Next {
    Next::Wait(Waiting {
        certificate_id: reissued.certificate_id,
        mode: Mode::Reissue { previous_serial },
        published: false,
        prefetched: reissued.details,
        last_poll: rec.last_poll,
        left_list_tries: 0,
        checked_at_start: false,
    })
}

fn wait(rec: &CertRecord, certificate_id: u64, mode: Mode) -> Next {
    Next::Wait(Waiting {
        certificate_id,
        mode,
        published: false,
        prefetched: None,
        last_poll: rec.last_poll,
        left_list_tries: 0,
        checked_at_start: false,
    })
}

/// The installed leaf as found on disk: its stamp first, the certificate only when the file
/// changed.
pub(crate) fn disk_state(rec: &CertRecord) -> (Disk, Option<FileStamp>) {
    let Some(inst) = &rec.installed else {
        return (Disk::Missing, None);
    };
    let Some(path) = &inst.leaf_file else {
        return (Disk::AsInstalled, None);
    };
    let stamp = FileStamp::of(path);
    if stamp.is_none() {
        return (Disk::Missing, None);
    }
    if stamp == inst.leaf_stamp {
        return (Disk::AsInstalled, None);
    }
    let serial = std::fs::read(path)
        .ok()
        .and_then(|pem| crate::crypto::CertificateInfo::from_pem(&pem).ok())
        .map(|c| c.serial_hex);
    match serial {
        Some(s) if crate::crypto::same_serial_hex(&s, &inst.serial) => (Disk::AsInstalled, stamp),
        other => (Disk::Differs(other), None),
    }
}
