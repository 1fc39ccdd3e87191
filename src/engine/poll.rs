//! Waiting for the CA: certificates that wait are checked at most once per
//! `poll_interval_secs` each (across runs: the last call is recorded). When several are due in
//! one round, one `list` call per page of in-progress certificates stands in for their status
//! calls. Validation is published once the API says what to publish; an issued certificate is
//! downloaded and checked, and then ready to install.
//!
//! A new order is checked once right after it is placed ([`first_check`]: the details call,
//! then validation published), so that the CA validates it while the run places the next
//! ones. Between status checks, a run that waits for new orders in progress whose validation
//! is published watches the list of certificates in progress (the list call, not the status
//! call the polling rule limits): 1 s after the run began, then 2, 4, 8 … s after the last
//! look began, at most `poll_interval_secs`, and 1 s after the start of a look that found an
//! order gone from the list (at once when its downloads took longer). An order that left the
//! list was issued (or ended): its certificate is downloaded at once — a download, not a
//! status call — and when it is not issued yet, the order waits for its next status check as
//! before.

use std::collections::HashSet;
use std::time::Duration;

use anyhow::{Context, Result, anyhow, bail};
use futures_util::StreamExt;
use time::OffsetDateTime;

use crate::api::{CertificateDetails, CertificateState, ListScope, PendingAction};
use crate::store::{CertRecord, PartnerStage};

use super::context::{Ctx, progress, stop_requested, stopped};
use super::deploy::{self, Checked};
use super::held;
use super::job::{Job, Mode, Next, Ready, Waiting, Work};
use super::keys;
use super::publish::{self, Published};
use super::report::{Outcome, RunReport};

/// At least this many certificates due in one round are polled with the list call.
const BULK_POLL_MIN: usize = 3;

/// Polls the waiting certificates until none is left or the run's wait is over.
pub(super) async fn rounds<'a>(ctx: &Ctx<'_>, work: &mut Work<'a>, report: &mut RunReport) {
    let interval = Duration::from_secs(ctx.config.agent.poll_interval_secs);
    let mut rounds_done = 0u32;
    let mut watch = Watch {
        gap: WATCH_FIRST.min(interval),
        last: ctx.started,
        announced: false,
    };
    share_start_stamps(&mut work.waiting.iter_mut().map(|(_, w)| w).collect::<Vec<_>>());
    while !work.waiting.is_empty() {
        // One clock reading for the whole set, so that certificates checked together stay
        // together.
        let t = ctx.now();
        let delays: Vec<Duration> = work
            .waiting
            .iter()
            .map(|(_, w)| until_allowed(w.last_poll, interval, t))
            .collect();
        let soonest = delays.iter().copied().min().unwrap_or(Duration::ZERO);
        let remaining = ctx.opts.wait.saturating_sub(ctx.started.elapsed());
        if stop_requested(ctx.opts) {
            stop_waiting(ctx, work, report).await;
            return;
        }
        // The list watch's next look, when an order is watched and it comes before the next
        // status check, within the run's wait.
        let look = (soonest > Duration::ZERO && work.waiting.iter().any(|(j, w)| watched(j, w)))
            .then(|| until_look(watch.gap, watch.last.elapsed()))
            .filter(|gap| *gap < soonest && *gap <= remaining);
        // The wait is over (at least one round was made), or the next check comes after it.
        if look.is_none() && (soonest > remaining || (remaining.is_zero() && rounds_done > 0)) {
            leave_pending(ctx, work, delays, report);
            return;
        }
        if !soonest.is_zero() {
            if !watch.announced {
                for line in waiting_lines(&work.waiting, &delays, t, interval) {
                    progress(ctx.opts, &line);
                }
                watch.announced = look.is_some();
            }
            tokio::select! {
                () = tokio::time::sleep(look.unwrap_or(soonest)) => {}
                () = stopped(ctx.opts) => {
                    stop_waiting(ctx, work, report).await;
                    return;
                }
            }
            if look.is_some() {
                watch.last = tokio::time::Instant::now();
                let found = look_at_list(ctx, work, report).await;
                watch.gap = next_gap(found, watch.gap, interval);
                continue;
            }
        }
        watch.announced = false;
        let (due, later): (Vec<_>, Vec<_>) = std::mem::take(&mut work.waiting)
            .into_iter()
            .zip(delays)
            .partition(|(_, d)| *d <= soonest);
        work.waiting = later.into_iter().map(|(w, _)| w).collect();
        let due: Vec<_> = due.into_iter().map(|(w, _)| w).collect();
        round(ctx, due, work, report).await;
        rounds_done += 1;
    }
}

/// The list watch's first look, after the run begins; each later one comes twice as long
/// after the one before began, up to `poll_interval_secs`, and this long after one that found
/// an order gone began.
const WATCH_FIRST: Duration = Duration::from_secs(1);

/// The list watch of one run: the gap to its next look, when the last one began (before the
/// first: when the run began), and whether the waiting lines were printed for the status
/// check the looks come before.
struct Watch {
    gap: Duration,
    last: tokio::time::Instant,
    announced: bool,
}

/// How long until the list watch's next look: `gap` after the last one began, `since_last`
/// ago; at once when that has passed (the downloads of a look that found orders gone took
/// longer than the gap).
fn until_look(gap: Duration, since_last: Duration) -> Duration {
    gap.saturating_sub(since_last)
}

/// The gap after a look: [`WATCH_FIRST`] again when orders had left the list (`found`: while
/// orders leave it, the next look comes soon), else twice the last one; at most `interval`.
fn next_gap(found: bool, gap: Duration, interval: Duration) -> Duration {
    if found {
        WATCH_FIRST.min(interval)
    } else {
        (gap * 2).min(interval)
    }
}

/// Whether a certificate the run just started has its first check at once
/// ([`first_check`]): a new order, never checked, its validation not published yet.
pub(super) fn first_check_now(w: &Waiting) -> bool {
    matches!(w.mode, Mode::Issue) && !w.published && w.last_poll.is_none() && w.prefetched.is_none()
}

/// A new order's first check, right after it was placed, as the first round would make it (the
/// details call, which says what to publish, then the validation published): the CA then
/// validates it while the run places the next orders, and the run's first round is not
/// needed for it.
pub(super) async fn first_check(ctx: &Ctx<'_>, job: &mut Job<'_>, w: Waiting) -> Result<Next> {
    let mut next = step(ctx, job, w, None).await;
    if let Ok(Next::Wait(w)) = &mut next {
        w.checked_at_start = true;
    }
    next
}

/// The certificates first checked while the run started them ([`first_check`], each at its
/// own time) all count as checked at the latest of those times: never earlier than its own
/// check, so that the polling rule holds, and together, so that they stay in one round — and
/// one list call — for as long as they wait.
fn share_start_stamps(waiting: &mut [&mut Waiting]) {
    let latest = waiting
        .iter()
        .filter(|w| w.checked_at_start)
        .filter_map(|w| w.last_poll)
        .max();
    let Some(latest) = latest else {
        return;
    };
    for w in waiting.iter_mut().filter(|w| w.checked_at_start) {
        w.last_poll = Some(latest);
    }
}

/// How often the list watch downloads an order missing from the list that is not issued yet.
/// The list is read a page at a time, so an order can be missed while others leave the pages
/// before its own; an order that left it without being issued (ended) waits for its status
/// check.
const WATCH_TRIES: u8 = 3;

/// Whether the list watch looks out for `job`: a new order (not a reissue: a reissued
/// certificate is not in the list of certificates in progress) whose validation is
/// published, last seen in progress, and not tried [`WATCH_TRIES`] times already.
fn watched(job: &Job<'_>, w: &Waiting) -> bool {
    matches!(w.mode, Mode::Issue)
        && w.published
        && w.left_list_tries < WATCH_TRIES
        && job.rec.last_state.as_deref() == Some("in_progress")
}

/// One look of the list watch: the orders watched that left the list of certificates in
/// progress are downloaded (up to `agent.concurrency` at once); those not issued yet wait
/// for their status check. A list that cannot be read changes nothing. Whether an order
/// left the list.
async fn look_at_list<'a>(ctx: &Ctx<'_>, work: &mut Work<'a>, report: &mut RunReport) -> bool {
    let Some(in_progress) = in_progress_ids(ctx).await else {
        return false;
    };
    let (left, stay): (Vec<_>, Vec<_>) = std::mem::take(&mut work.waiting)
        .into_iter()
        .partition(|(j, w)| watched(j, w) && !in_progress.contains(&w.certificate_id));
    work.waiting = stay;
    if left.is_empty() {
        return false;
    }
    tracing::debug!(
        "{} order(s) left the list of certificates in progress",
        left.len()
    );
    let mut downloading = futures_util::stream::iter(left)
        .map(|(mut job, mut w)| async move {
            w.left_list_tries += 1;
            let next = issued(ctx, &mut job, w, None).await;
            (job, next)
        })
        .buffer_unordered(ctx.concurrency());
    while let Some((job, next)) = downloading.next().await {
        work.settle(ctx.opts.dry_run, job, next, report);
    }
    true
}

/// Certificates waiting at once that are announced one line each; more share one line.
const WAITING_LINES_MAX: usize = 5;

/// What the run waits for and until when, for the person watching (the status checks follow
/// the polling rule, and nothing else is printed until they do): one line per waiting
/// certificate, or one line for many.
fn waiting_lines(
    waiting: &[(Job<'_>, Waiting)],
    delays: &[Duration],
    now: OffsetDateTime,
    interval: Duration,
) -> Vec<String> {
    let rule = polling_rule(interval);
    let tail = "Ctrl-C stops and a later run continues";
    let at = |d: Duration| crate::clock::time_of_day(now + d);
    if waiting.len() > WAITING_LINES_MAX {
        let soonest = delays.iter().copied().min().unwrap_or(Duration::ZERO);
        return vec![format!(
            "{} certificates: waiting for the CA to validate and issue (next status check at \
             {}, {rule}); {tail}",
            waiting.len(),
            at(soonest)
        )];
    }
    waiting
        .iter()
        .zip(delays)
        .map(|((job, w), d)| {
            let what = match w.mode {
                Mode::Issue => "to validate and issue the order",
                Mode::Reissue { .. } => "to validate and issue the reissue",
            };
            format!(
                "{}: waiting for the CA {what} (next status check at {}, {rule}); {tail}",
                job.cert.name,
                at(*d)
            )
        })
        .collect()
}

/// `5-minute polling rule` (`poll_interval_secs` = 300; the Partner API allows one status
/// call per certificate every 5 minutes), or `polling every 20 s` for an interval that is not
/// whole minutes.
pub(crate) fn polling_rule(interval: Duration) -> String {
    let secs = interval.as_secs();
    if secs >= 60 && secs.is_multiple_of(60) {
        format!("{}-minute polling rule", secs / 60)
    } else {
        format!("polling every {secs} s")
    }
}

/// One round: checks every due certificate (with one list call when enough are due).
async fn round<'a>(
    ctx: &Ctx<'_>,
    due: Vec<(Job<'a>, Waiting)>,
    work: &mut Work<'a>,
    report: &mut RunReport,
) {
    let in_progress = if due.len() >= BULK_POLL_MIN {
        in_progress_ids(ctx).await
    } else {
        None
    };
    let in_round: HashSet<usize> = due.iter().map(|(j, _)| j.idx).collect();
    let in_progress = in_progress.as_ref();
    let mut stepping = futures_util::stream::iter(due)
        .map(|(mut job, w)| async move {
            let next = step(ctx, &mut job, w, in_progress).await;
            (job, next)
        })
        .buffer_unordered(ctx.concurrency());
    while let Some((job, next)) = stepping.next().await {
        work.settle(ctx.opts.dry_run, job, next, report);
    }
    drop(stepping);
    // Every certificate of the round that still waits counts as checked at the round's end
    // (never earlier than its own call), so that they stay in one round — and one list call
    // — for as long as they wait. Kept in memory while the run waits and written to the
    // records when the run leaves them pending.
    let round_end = ctx.now();
    for (_, w) in work
        .waiting
        .iter_mut()
        .filter(|(j, _)| in_round.contains(&j.idx))
    {
        w.last_poll = Some(round_end);
    }
}

/// The IDs of the account's certificates in progress (one list call per page), or `None`
/// when the list cannot be read (each is then polled on its own).
async fn in_progress_ids(ctx: &Ctx<'_>) -> Option<HashSet<u64>> {
    let listed = match ctx.client() {
        Ok(client) => client
            .list_all(Some(ListScope::ApiInProgress), None)
            .await
            .map_err(anyhow::Error::from),
        Err(e) => Err(e),
    };
    match listed {
        Ok(list) => Some(list.iter().map(|c| c.internal_number).collect()),
        Err(e) => {
            tracing::warn!("list of certificates in progress failed ({e}); polling each");
            None
        }
    }
}

/// The run's wait is over: every waiting certificate is reported pending, its round-end
/// stamp kept in its record.
fn leave_pending(
    ctx: &Ctx<'_>,
    work: &mut Work<'_>,
    delays: Vec<Duration>,
    report: &mut RunReport,
) {
    for ((mut job, w), d) in std::mem::take(&mut work.waiting).into_iter().zip(delays) {
        save_stamp(&mut job, &w);
        let outcome = Outcome::Pending {
            reason: format!(
                "certificate {}: waiting for {} (state {}); next check in {} s",
                w.certificate_id,
                match w.mode {
                    Mode::Issue => "validation and issuance",
                    Mode::Reissue { .. } => "the reissued certificate",
                },
                job.rec.last_state.as_deref().unwrap_or("unknown"),
                d.as_secs().max(1)
            ),
        };
        work.finish(ctx.opts.dry_run, job, outcome, report);
    }
}

/// Writes a waiting certificate's round-end stamp into its record (the next run keeps the
/// polling interval from it).
fn save_stamp(job: &mut Job<'_>, w: &Waiting) {
    if let Some(stamp) = w.last_poll
        && job.rec.keep_latest_poll(stamp)
        && let Err(e) = job.save()
    {
        tracing::warn!(certificate = %job.cert.name, "{e}");
    }
}

/// The run was asked to stop: remove what each waiting certificate published for validation
/// (the next run publishes again) and report it as pending.
async fn stop_waiting(ctx: &Ctx<'_>, work: &mut Work<'_>, report: &mut RunReport) {
    for (mut job, w) in std::mem::take(&mut work.waiting) {
        save_stamp(&mut job, &w);
        publish::cleanup_dcv(ctx, job.cert, &mut job.rec).await;
        let outcome = Outcome::Pending {
            reason: format!(
                "certificate {}: the run was stopped while waiting; validation files were \
                 removed and the next run publishes them again",
                w.certificate_id
            ),
        };
        work.finish(ctx.opts.dry_run, job, outcome, report);
    }
}

/// How long until the earliest of `records` that waits for the CA (an order or a reissue in
/// flight, not held, not ended, no order intent to reconcile) may have its status checked
/// again: its last check (for a certificate checked in a round, the round's end) plus
/// `interval` (`agent.poll_interval_secs`); zero when one was never checked or is due. `None`
/// when none of them waits for the CA. What a fleet's run that gave the lead up between its
/// rounds sleeps for.
pub(crate) fn until_next_check<'r>(
    interval: Duration,
    records: impl IntoIterator<Item = &'r CertRecord>,
    now: OffsetDateTime,
) -> Option<Duration> {
    records
        .into_iter()
        .filter(|r| waits_for_ca(r))
        .map(|r| until_allowed(r.last_poll, interval, now))
        .min()
}

/// Whether `rec` waits for the CA: a status check can move it on.
fn waits_for_ca(rec: &CertRecord) -> bool {
    match &rec.partner.stage {
        PartnerStage::Ordered { reissue, .. } => {
            (rec.pending_key.is_some() || reissue.is_some()) && rec.held.is_none()
        }
        PartnerStage::NoOrder | PartnerStage::Intended(_) | PartnerStage::Ended { .. } => false,
    }
}

fn until_allowed(last: Option<OffsetDateTime>, interval: Duration, t: OffsetDateTime) -> Duration {
    let Some(last) = last else {
        return Duration::ZERO;
    };
    let since = Duration::try_from(t - last).unwrap_or(Duration::ZERO);
    interval.saturating_sub(since)
}

/// The state of a waiting certificate, as the list, the details or a status call says; the
/// details are kept when they were read. Records the call and the state.
async fn read_state(
    ctx: &Ctx<'_>,
    job: &mut Job<'_>,
    w: &Waiting,
    listed: bool,
    details: &mut Option<CertificateDetails>,
) -> Result<(CertificateState, bool)> {
    let id = w.certificate_id;
    if listed {
        job.rec.last_state = Some("in_progress".into());
        job.save()?;
        return Ok((CertificateState::InProgress, false));
    }
    // Until validation is published, the details call stands in for the status call: it
    // carries the state (with a pending reissue marked) and what to publish, one call for
    // both.
    crate::failpoint::hit("status-check");
    let polled: Result<_> = async {
        if details.is_none() && !w.published {
            let d = ctx.client()?.details(id).await;
            *details = Some(d.with_context(|| format!("could not read certificate {id}"))?);
        }
        Ok(match details {
            Some(d) => d.status.certificate.clone(),
            None => {
                let s = ctx.client()?.status(id).await;
                s.with_context(|| format!("could not read the state of certificate {id}"))?
                    .certificate
            }
        })
    }
    .await;
    let code = match polled {
        Ok(code) => code,
        Err(e) => {
            // The call counts against the polling limit even when it failed.
            job.save()?;
            return Err(e);
        }
    };
    let Some(code) = code else {
        bail!("the API reported no state for certificate {id}");
    };
    let reissue_pending = code.pending() == Some(PendingAction::Reissuing);
    job.rec.last_state = Some(code.as_str().to_owned());
    job.save()?;
    crate::failpoint::hit("poll");
    let state = code.state().ok_or_else(|| {
        anyhow!(
            "certificate {id} is in state '{}', which cert-agent does not know",
            code.as_str()
        )
    })?;
    Ok((state, reissue_pending))
}

/// One status-type check of a waiting certificate, and what follows from it.
async fn step(
    ctx: &Ctx<'_>,
    job: &mut Job<'_>,
    mut w: Waiting,
    in_progress: Option<&HashSet<u64>>,
) -> Result<Next> {
    let id = w.certificate_id;
    job.rec.last_poll = Some(job.clock.now());
    w.last_poll = job.rec.last_poll;
    let mut details = w.prefetched.take().map(|d| *d);
    let listed = in_progress.is_some_and(|s| s.contains(&id));
    let (state, reissue_pending) = read_state(ctx, job, &w, listed, &mut details).await?;
    let reissuing = matches!(w.mode, Mode::Reissue { .. });
    match state {
        CertificateState::New
        | CertificateState::InProgress
        | CertificateState::WaitingForApproval => {
            keep_waiting(ctx, job, w, reissuing, details).await
        }
        // The previous certificate, while the reissue runs: nothing new to download yet.
        CertificateState::Issued if reissuing && reissue_pending => {
            keep_waiting(ctx, job, w, true, details).await
        }
        CertificateState::Issued => issued(ctx, job, w, details).await,
        other => {
            publish::cleanup_dcv(ctx, job.cert, &mut job.rec).await;
            if matches!(
                other,
                CertificateState::Annulled | CertificateState::Expired
            ) {
                job.rec.mark_ended(other.as_str());
                job.save()?;
                job.journal(
                    "order-ended",
                    serde_json::json!({ "certificate_id": id, "state": other.as_str() }),
                )?;
            }
            bail!(
                "certificate {id} is {}; nothing more can be done with this order and no new \
                 order is placed automatically: `cert-agent issue {} --yes` places one",
                other.as_str(),
                job.cert.name
            )
        }
    }
}

/// Issued: download and check the certificate; while the API still serves the previous one
/// (after a reissue) keep waiting.
async fn issued(
    ctx: &Ctx<'_>,
    job: &mut Job<'_>,
    w: Waiting,
    details: Option<CertificateDetails>,
) -> Result<Next> {
    let id = w.certificate_id;
    let previous = match &w.mode {
        Mode::Reissue { previous_serial } => previous_serial.clone(),
        Mode::Issue => None,
    };
    let Some(pending) = job.rec.pending_key.clone() else {
        bail!(
            "certificate {id} has no local key in the state directory; adopt it with \
             `cert-agent adopt {} --certificate-id {id}`",
            job.cert.name
        );
    };
    let key = keys::load_pending(&pending)?;
    match deploy::download_checked(ctx, job.cert, id, &key, previous.as_deref()).await? {
        Some((Checked::Valid(bundle), archive)) => {
            crate::failpoint::hit("download");
            publish::cleanup_dcv_before_install(ctx, job.cert, &mut job.rec).await;
            let install = deploy::cert_install(job.cert, &bundle, &key);
            Ok(Next::Ready(Box::new(Ready {
                certificate_id: id,
                bundle,
                install,
                archive,
            })))
        }
        Some((Checked::NotYet(bundle), archive)) => {
            publish::cleanup_dcv(ctx, job.cert, &mut job.rec).await;
            held::hold(job, id, &bundle, &archive)
        }
        // Some CAs keep reporting "issued" for the previous certificate while a reissue is
        // validated: publish for the new CSR meanwhile.
        None if matches!(w.mode, Mode::Reissue { .. }) => {
            keep_waiting(ctx, job, w, true, details).await
        }
        None => Ok(Next::Wait(w)),
    }
}

/// Still waiting: makes sure validation is published (again from the record when an earlier
/// run published it, otherwise as the API says); done when the operator must act.
async fn keep_waiting(
    ctx: &Ctx<'_>,
    job: &mut Job<'_>,
    mut w: Waiting,
    reissuing: bool,
    details: Option<CertificateDetails>,
) -> Result<Next> {
    if w.published {
        return Ok(Next::Wait(w));
    }
    if publish::republish(ctx, job.cert, &job.rec).await? {
        w.published = true;
        return Ok(Next::Wait(w));
    }
    let published = publish::publish_dcv(
        ctx,
        job.cert,
        &mut job.rec,
        w.certificate_id,
        reissuing,
        details,
    )
    .await?;
    match published {
        Published::Yes => w.published = true,
        Published::Later => {}
        Published::Operator(reason) => return Ok(Next::Done(Outcome::Pending { reason })),
    }
    Ok(Next::Wait(w))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::{Held, OrderIntent, OrderRef, PendingKey};
    use time::macros::datetime;

    fn waiting(name: &str, last_poll: Option<OffsetDateTime>) -> CertRecord {
        CertRecord {
            name: name.into(),
            partner: crate::store::PartnerBook {
                stage: PartnerStage::Ordered {
                    order: OrderRef {
                        certificate_id: 7,
                        order_id: None,
                        placed_at: datetime!(2026-11-26 09:00 UTC),
                        adopted: false,
                    },
                    reissue: None,
                },
                ..Default::default()
            },
            pending_key: Some(Box::new(PendingKey {
                key_file: "k".into(),
                csr_pem: String::new(),
                csr_md5: "AA".into(),
                csr_sha256: "BB".into(),
                created_at: datetime!(2026-11-26 09:00 UTC),
            })),
            last_poll,
            ..Default::default()
        }
    }

    #[test]
    fn the_earliest_waiting_record_says_when_the_next_check_is_allowed() {
        let now = datetime!(2026-11-26 10:00 UTC);
        let five = Duration::from_secs(300);
        let a = waiting("a", Some(now - time::Duration::seconds(60)));
        let b = waiting("b", Some(now - time::Duration::seconds(200)));
        assert_eq!(
            until_next_check(five, [&a, &b], now),
            Some(Duration::from_secs(100))
        );
        // Checked longer ago than the interval, or never: due now.
        let c = waiting("c", Some(now - time::Duration::seconds(900)));
        assert_eq!(until_next_check(five, [&a, &c], now), Some(Duration::ZERO));
        let d = waiting("d", None);
        assert_eq!(until_next_check(five, [&d], now), Some(Duration::ZERO));
        // Records that no status check moves on are not counted.
        let mut held = waiting("held", None);
        held.held = Some(Box::new(Held {
            certificate_id: 7,
            serial: "01".into(),
            not_before: now + time::Duration::days(1),
        }));
        let mut ended = waiting("ended", None);
        ended.mark_ended("annulled");
        let mut intent = waiting("intent", None);
        intent.partner.stage = PartnerStage::Intended(OrderIntent {
            csr_sha256: "BB".into(),
            common_name: "a.test".into(),
            created_at: now,
            product_id: 1,
            price: None,
        });
        let mut installed = waiting("installed", None);
        installed.pending_key = None;
        let none = CertRecord::default();
        assert_eq!(
            until_next_check(five, [&held, &ended, &intent, &installed, &none], now),
            None
        );
        assert_eq!(
            until_next_check(five, [&held, &a], now),
            Some(Duration::from_secs(240))
        );
    }

    /// When the list watch's looks begin (seconds after the run began), for a wait that begins
    /// at `wait_begins` and looks that each find orders gone or not and take so long (the
    /// list call and the downloads of what left it).
    fn look_times(wait_begins: f64, interval: Duration, looks: &[(bool, f64)]) -> Vec<f64> {
        let secs = Duration::from_secs_f64;
        let (mut now, mut last, mut gap) = (wait_begins, 0.0, WATCH_FIRST.min(interval));
        let mut began = Vec::new();
        for &(found, took) in looks {
            now += until_look(gap, secs(now - last)).as_secs_f64();
            began.push((now * 1000.0).round() / 1000.0);
            last = now;
            now += took;
            gap = next_gap(found, gap, interval);
        }
        began
    }

    #[test]
    fn the_list_watch_looks_at_once_while_orders_leave_the_list_faster_than_it_reads_them() {
        let five = Duration::from_secs(300);
        // The run placed orders for 7 s, each published at once: the first look comes as the
        // wait begins; its downloads took 2.5 s, so the next comes at once, then 1 s after
        // the start of one that found orders gone, then twice as long after each that found
        // none.
        let looks = [
            (true, 2.5),
            (true, 0.3),
            (false, 0.1),
            (false, 0.1),
            (false, 0.1),
            (true, 0.1),
            (false, 0.1),
        ];
        assert_eq!(
            look_times(7.0, five, &looks),
            [7.0, 9.5, 10.5, 12.5, 16.5, 24.5, 25.5]
        );
        // A wait that begins right after the run began: the first look 1 s after the run's
        // start, not after the wait's.
        assert_eq!(look_times(0.25, five, &[(false, 0.1)]), [1.0]);
    }

    #[test]
    fn the_list_watch_gap_doubles_up_to_the_polling_interval() {
        let twenty = Duration::from_secs(20);
        let none = [(false, 0.0); 7];
        assert_eq!(
            look_times(1.0, twenty, &none),
            [1.0, 3.0, 7.0, 15.0, 31.0, 51.0, 71.0]
        );
        // An interval shorter than the first gap bounds every gap.
        let half = Duration::from_millis(500);
        assert_eq!(next_gap(true, half, half), half);
        assert_eq!(next_gap(false, half, half), half);
        assert_eq!(
            until_look(Duration::from_secs(1), Duration::from_secs(3)),
            Duration::ZERO
        );
    }

    fn first_checked(at: Option<OffsetDateTime>, at_start: bool) -> Waiting {
        Waiting {
            certificate_id: 7,
            mode: Mode::Issue,
            published: true,
            prefetched: None,
            last_poll: at,
            left_list_tries: 0,
            checked_at_start: at_start,
        }
    }

    #[test]
    fn orders_checked_as_they_were_placed_share_the_latest_check_and_one_round() {
        let t = datetime!(2026-11-26 10:00 UTC);
        let s = |n: i64| Some(t + time::Duration::seconds(n));
        let mut a = first_checked(s(0), true);
        let mut b = first_checked(s(7), true);
        let mut c = first_checked(s(3), true);
        // Checked by an earlier run: its own stamp stays.
        let mut d = first_checked(s(-100), false);
        share_start_stamps(&mut [&mut a, &mut b, &mut c, &mut d]);
        assert_eq!(
            [a.last_poll, b.last_poll, c.last_poll, d.last_poll],
            [s(7), s(7), s(7), s(-100)]
        );
        // Never earlier than a certificate's own check: the next status check of each comes
        // a whole interval after its own at the soonest, all of them in one round.
        let five = Duration::from_secs(300);
        let now = t + time::Duration::seconds(10);
        let delays: Vec<_> = [&a, &b, &c]
            .iter()
            .map(|w| until_allowed(w.last_poll, five, now))
            .collect();
        assert_eq!(delays, [Duration::from_secs(297); 3]);
        // None checked at the start: nothing changes.
        let mut e = first_checked(None, false);
        share_start_stamps(&mut [&mut e]);
        assert_eq!(e.last_poll, None);
    }

    #[test]
    fn a_new_order_is_checked_at_once_unless_it_was_checked_or_published_before() {
        assert!(first_check_now(&Waiting {
            published: false,
            ..first_checked(None, false)
        }));
        let t = datetime!(2026-11-26 10:00 UTC);
        for w in [
            first_checked(None, false),
            Waiting {
                published: false,
                ..first_checked(Some(t), false)
            },
            Waiting {
                published: false,
                mode: Mode::Reissue {
                    previous_serial: None,
                },
                ..first_checked(None, false)
            },
        ] {
            assert!(!first_check_now(&w), "{w:?}");
        }
    }

    #[test]
    fn the_polling_rule_is_named_in_minutes_or_seconds() {
        assert_eq!(
            polling_rule(Duration::from_secs(300)),
            "5-minute polling rule"
        );
        assert_eq!(polling_rule(Duration::from_secs(1)), "polling every 1 s");
        assert_eq!(polling_rule(Duration::from_secs(90)), "polling every 90 s");
    }
}
