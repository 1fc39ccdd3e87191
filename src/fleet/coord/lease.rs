//! The leader's lease, renewed while this host leads; the leads this process lost, counted.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::Duration;

use etcd_client::{Client, ConnectOptions};

use super::super::lead_deadline::{BootInstant, Held, deadline_of, lock};

/// Leads this process lost since [`take_lost`] was last asked.
static LOST: AtomicU64 = AtomicU64::new(0);

/// Counts the lead of `lost` as lost: once per lead, whether the renewal or the leader's own
/// end of it saw it first.
fn lose(lost: &AtomicBool) {
    if !lost.swap(true, Ordering::SeqCst) {
        LOST.fetch_add(1, Ordering::SeqCst);
    }
}

/// The leads this process lost since it was last asked (counted afresh from 0).
pub(crate) fn take_lost() -> u64 {
    LOST.swap(0, Ordering::SeqCst)
}

/// The renewal of a leader's lease, on a thread and an etcd client of its own: the lead is
/// held for as long as the process lives and answers, also while the run's own thread is busy
/// for longer than the lease (installing thousands of certificates, a slow disk). A process
/// that stops (paused, killed) stops renewing, and its lead ends with the lease as before.
pub(super) struct Renewer {
    /// Dropped to stop the renewal at once.
    stop: Option<tokio::sync::oneshot::Sender<()>>,
    /// Set once the lead is lost (by the renewal, or at its end: [`Renewer::end`]).
    lost: Arc<AtomicBool>,
}

impl Renewer {
    pub(super) fn start(
        (endpoints, options): &(Vec<String>, ConnectOptions),
        lease: i64,
        ttl: Duration,
        held: Held,
    ) -> Self {
        let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
        let lost = Arc::new(AtomicBool::new(false));
        let lost_here = lost.clone();
        let (endpoints, options) = (endpoints.clone(), options.clone());
        let spawned = std::thread::Builder::new()
            .name("fleet-lease".into())
            .spawn(move || {
                let runtime = match tokio::runtime::Builder::new_current_thread()
                    .enable_all()
                    .build()
                {
                    Ok(r) => r,
                    Err(e) => {
                        tracing::warn!("fleet: the leader's lease cannot be renewed: {e}");
                        return;
                    }
                };
                let mut stopped = stopped;
                let lost = lost_here;
                runtime.block_on(async move {
                    let client = tokio::select! {
                        c = Client::connect(&endpoints, Some(options)) => c,
                        _ = &mut stopped => return,
                    };
                    match client {
                        Ok(client) => tokio::select! {
                            () = renew(client, lease, ttl, (held, lost)) => {}
                            _ = &mut stopped => {}
                        },
                        Err(e) => {
                            lose(&lost);
                            tracing::warn!(
                                "fleet: the leader's lease cannot be renewed (etcd: {e}); the \
                                 lead ends with it"
                            );
                        }
                    }
                });
            });
        if let Err(e) = spawned {
            tracing::warn!("fleet: the leader's lease cannot be renewed: {e}");
        }
        Renewer {
            stop: Some(stop),
            lost,
        }
    }

    /// Stops the renewal at once (the first call); a lead that `ended` before (its deadline
    /// passed, another host leads) is counted lost, once.
    pub(super) fn end(&mut self, ended: bool) {
        if self.stop.take().is_some() && ended {
            lose(&self.lost);
        }
    }
}

/// Renews `lease` three times per TTL, moving the deadline on after each answered renewal
/// (counted from when it was sent, on the boot clock). A renewal answered "no such lease", or no answer before
/// the deadline, loses the lead for good (counted: [`lose`]).
async fn renew(
    mut client: Client,
    lease: i64,
    ttl: Duration,
    (held, lost): (Held, Arc<AtomicBool>),
) {
    let every = (ttl / 3).max(Duration::from_millis(500));
    let mut channel = None;
    loop {
        tokio::time::sleep(every).await;
        let Some(deadline) = *lock(&held) else {
            return;
        };
        if BootInstant::now() >= deadline {
            *lock(&held) = None;
            lose(&lost);
            tracing::warn!(
                "fleet: the leader's lease could not be renewed in time; this host stops leading"
            );
            let _ = tokio::time::timeout(every, client.lease_revoke(lease)).await;
            return;
        }
        if channel.is_none() {
            channel = tokio::time::timeout(every, client.lease_keep_alive(lease))
                .await
                .ok()
                .and_then(Result::ok);
        }
        let Some((keeper, stream)) = channel.as_mut() else {
            continue;
        };
        let sent = BootInstant::now();
        let answer = tokio::time::timeout(every, async {
            keeper.keep_alive().await?;
            stream.message().await
        })
        .await;
        match answer {
            Ok(Ok(Some(r))) if r.ttl() > 0 => {
                let mut h = lock(&held);
                if h.is_some() {
                    *h = Some(sent.saturating_add(deadline_of(r.ttl())));
                }
            }
            Ok(Ok(Some(_))) => {
                *lock(&held) = None;
                lose(&lost);
                tracing::warn!("fleet: the leader's lease has ended; this host stops leading");
                return;
            }
            _ => channel = None,
        }
    }
}
