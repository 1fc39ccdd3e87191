//! The time limit of a guarded request: a request whose [`SendGuard`] yields a time to be
//! sent in (a fleet leader's, until shortly before its lease's deadline) is abandoned — its
//! connection dropped — if it has not been handed to the connection by then, and the guard is
//! asked once more at that last moment.
//!
//! "Handed to the connection" is the moment the connection takes the request's body: its
//! bytes are given out once, by [`GatedBody`], which first asks the guard again and then
//! marks the request handed. Before that, nothing the API could act on has left this host
//! (HTTP/1.1 writes the head and the body in the same turn; over HTTP/2 at most a head
//! without its body), so a request abandoned then is a plain refusal to send, like the
//! guard's own ([`Abandoned::NotSent`]). A request handed over in time is awaited as any
//! other. A request without a body gives no such moment: abandoned at its time limit, it may
//! have been sent ([`Abandoned::MaybeSent`]; for a call with side effects an unknown
//! outcome, never a plain failure).
//!
//! Imports `options` (the guard) and the foundation.

use std::pin::Pin;
use std::sync::atomic::{AtomicU8, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::task::{Context, Poll};

use bytes::Bytes;
use hyper::body::{Frame, SizeHint};

use super::options::SendGuard;

/// Not handed to the connection yet.
const WAITING: u8 = 0;
/// Handed to the connection: it may have left.
const HANDED: u8 = 1;
/// Abandoned before it was handed over: it never leaves.
const ABANDONED: u8 = 2;

/// Why a guarded request was abandoned.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) enum Abandoned {
    /// Before any of it was handed to the connection: nothing was sent.
    NotSent(String),
    /// At its time limit, without a body that tells whether it left: it may have been sent.
    MaybeSent(String),
}

/// What a request and its body share: whether the body was handed over, and why it was
/// abandoned.
#[derive(Default)]
struct Shared {
    state: AtomicU8,
    reason: Mutex<Option<String>>,
}

impl Shared {
    /// Marks the request abandoned for `reason`, unless it was handed over already.
    fn abandon(&self, reason: String) -> bool {
        let won = self
            .state
            .compare_exchange(WAITING, ABANDONED, Ordering::SeqCst, Ordering::SeqCst)
            .is_ok();
        if won {
            *self.reason.lock().unwrap_or_else(PoisonError::into_inner) = Some(reason);
        }
        won
    }

    fn reason(&self) -> String {
        self.reason
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
            .unwrap_or_else(|| EXPIRED.to_owned())
    }
}

/// Why a request is abandoned at its time limit while its guard would still let a new one go
/// (the lease was renewed since the request was checked).
const EXPIRED: &str = "the request was not sent within the time its guard gave it (the \
                       deadline of this host's lead of the fleet, as it stood when the request \
                       was checked, passed)";

/// A request body that the connection can take once, and only while the guard lets it go.
struct GatedBody {
    bytes: Option<Bytes>,
    guard: SendGuard,
    shared: Arc<Shared>,
}

/// The error a [`GatedBody`] fails its request with when it was abandoned.
#[derive(Debug)]
struct Withheld;

impl std::fmt::Display for Withheld {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("the request body was withheld: the request was abandoned")
    }
}

impl std::error::Error for Withheld {}

impl hyper::body::Body for GatedBody {
    type Data = Bytes;
    type Error = Withheld;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        _cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, Withheld>>> {
        let Some(bytes) = self.bytes.take() else {
            return Poll::Ready(None);
        };
        // The last moment before the request leaves: the guard is asked again (on its own
        // clock, which may count time the timer of the request did not, such as a suspend).
        if let Err(reason) = self.guard.check() {
            self.shared.abandon(reason);
        }
        let handed = self
            .shared
            .state
            .compare_exchange(WAITING, HANDED, Ordering::SeqCst, Ordering::SeqCst)
            .is_ok();
        if handed {
            Poll::Ready(Some(Ok(Frame::data(bytes))))
        } else {
            Poll::Ready(Some(Err(Withheld)))
        }
    }

    fn is_end_stream(&self) -> bool {
        self.bytes.is_none()
    }

    fn size_hint(&self) -> SizeHint {
        SizeHint::with_exact(self.bytes.as_ref().map_or(0, |b| b.len() as u64))
    }
}

/// Sends `request` through `http`, abandoning it unless it is handed to the connection by
/// `until` (see the module's header). `Ok` holds what the send gave otherwise.
pub(super) async fn send(
    http: &reqwest::Client,
    mut request: reqwest::Request,
    guard: SendGuard,
    until: tokio::time::Instant,
) -> Result<reqwest::Result<reqwest::Response>, Abandoned> {
    let shared = Arc::new(Shared::default());
    let bytes = request
        .body()
        .and_then(reqwest::Body::as_bytes)
        .map(Bytes::copy_from_slice);
    let gated = bytes.is_some();
    if let Some(bytes) = bytes {
        *request.body_mut() = Some(reqwest::Body::wrap(GatedBody {
            bytes: Some(bytes),
            guard: guard.clone(),
            shared: shared.clone(),
        }));
    }
    let sending = http.execute(request);
    tokio::pin!(sending);
    let result = tokio::select! {
        biased;
        result = &mut sending => result,
        () = tokio::time::sleep_until(until) => {
            let reason = guard.check().err().unwrap_or_else(|| EXPIRED.to_owned());
            if !gated {
                return Err(Abandoned::MaybeSent(format!(
                    "abandoned at the time limit its guard gave it: {reason}"
                )));
            }
            if shared.abandon(reason) {
                // Dropping the request here drops its connection if it was being made.
                return Err(Abandoned::NotSent(shared.reason()));
            }
            // Handed over in time: its answer is awaited as any other's.
            sending.await
        }
    };
    match result {
        Err(_) if shared.state.load(Ordering::SeqCst) == ABANDONED => {
            Err(Abandoned::NotSent(shared.reason()))
        }
        other => Ok(other),
    }
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::AtomicUsize;
    use std::time::{Duration, Instant};

    use http_body_util::BodyExt;

    use super::*;
    use crate::api::auth::{PasswordSource, Session};
    use crate::api::error::TransportKind;
    use crate::api::options::{ClientOptions, RetryPolicy};
    use crate::api::types::{Order, OrderRequest};
    use crate::api::{ApiError, Client};

    const LEAD_TEXT: &str = "this host's lead of the fleet expired (paused or cut off from etcd)";

    fn body(guard: SendGuard, shared: &Arc<Shared>) -> GatedBody {
        GatedBody {
            bytes: Some(Bytes::from_static(b"{\"order\":{}}")),
            guard,
            shared: shared.clone(),
        }
    }

    #[tokio::test]
    async fn the_body_goes_once_and_only_while_the_guard_lets_it() {
        let open = SendGuard::with_deadline(|| Ok(Duration::from_secs(5)));
        let shared = Arc::new(Shared::default());
        let b = body(open.clone(), &shared);
        assert_eq!(hyper::body::Body::size_hint(&b).exact(), Some(12));
        let bytes = b.collect().await.expect("handed").to_bytes();
        assert_eq!(&bytes[..], b"{\"order\":{}}");
        assert_eq!(shared.state.load(Ordering::SeqCst), HANDED);
        assert!(
            !shared.abandon("late".into()),
            "handed: too late to abandon"
        );

        // The guard refuses when the connection asks for the body (a suspend it noticed on its
        // own clock): the body is withheld and the request counts as never sent.
        let closed = SendGuard::with_deadline(|| Err(LEAD_TEXT.to_owned()));
        let shared = Arc::new(Shared::default());
        assert!(body(closed, &shared).collect().await.is_err());
        assert_eq!(shared.state.load(Ordering::SeqCst), ABANDONED);
        assert_eq!(shared.reason(), LEAD_TEXT);

        // Abandoned first (at the time limit): the body is withheld whatever the guard says.
        let shared = Arc::new(Shared::default());
        assert!(shared.abandon(EXPIRED.to_owned()));
        assert!(body(open, &shared).collect().await.is_err());
        assert_eq!(shared.reason(), EXPIRED);
    }

    /// A server that accepts connections and never answers (a TLS accept held back, a host
    /// stopped inside the request): the request is abandoned at its time limit, not at the
    /// connect timeout.
    async fn silent_server() -> (std::net::SocketAddr, Arc<AtomicUsize>) {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let accepted = Arc::new(AtomicUsize::new(0));
        let count = accepted.clone();
        tokio::spawn(async move {
            let mut held = Vec::new();
            while let Ok((sock, _)) = listener.accept().await {
                count.fetch_add(1, Ordering::SeqCst);
                held.push(sock);
            }
        });
        (addr, accepted)
    }

    async fn client_at(addr: std::net::SocketAddr, limit: Duration) -> (Client, Arc<AtomicUsize>) {
        let asked = Arc::new(AtomicUsize::new(0));
        let seen = asked.clone();
        let mut o = ClientOptions::new(
            format!("https://{addr}"),
            "me@example.com",
            PasswordSource::default(),
        );
        o.retry = RetryPolicy::fast(3);
        o.connect_timeout = Duration::from_secs(10);
        o.guard = Some(SendGuard::with_deadline(move || {
            seen.fetch_add(1, Ordering::SeqCst);
            Ok(limit)
        }));
        let client = Client::new(o).unwrap();
        client
            .transport
            .assume_session(Session {
                token: crate::api::Secret::new("t"),
                user_id: 1,
            })
            .await;
        (client, asked)
    }

    #[tokio::test]
    async fn an_order_not_sent_within_its_time_limit_is_abandoned_and_not_sent() {
        let (addr, accepted) = silent_server().await;
        let (client, asked) = client_at(addr, Duration::from_millis(300)).await;
        let started = Instant::now();
        let e = client
            .order(&OrderRequest {
                order: Order::default(),
            })
            .await
            .unwrap_err();
        let took = started.elapsed();
        assert!(matches!(e, ApiError::NotSent { .. }), "{e:?}");
        assert!(!e.is_outcome_unknown() && !e.is_retryable(), "{e:?}");
        assert!(
            e.to_string()
                .starts_with("POST /api/v1/order: the request was not sent within the time"),
            "{e}"
        );
        assert!(e.to_string().ends_with("no request was sent"), "{e}");
        assert!(took >= Duration::from_millis(300), "{took:?}");
        assert!(
            took < Duration::from_secs(3),
            "not the connect timeout: {took:?}"
        );
        assert_eq!(
            accepted.load(Ordering::SeqCst),
            1,
            "one connection, dropped"
        );
        // Asked before the attempt and again at the limit; never repeated.
        assert_eq!(asked.load(Ordering::SeqCst), 2);
    }

    #[tokio::test]
    async fn a_limit_beyond_the_clock_is_no_limit() {
        let (addr, accepted) = silent_server().await;
        let (client, _) = client_at(addr, Duration::MAX).await;
        let call = tokio::time::timeout(
            Duration::from_millis(500),
            client.order(&OrderRequest {
                order: Order::default(),
            }),
        )
        .await;
        assert!(call.is_err(), "still waiting for the server: {call:?}");
        assert_eq!(accepted.load(Ordering::SeqCst), 1);
    }

    #[tokio::test]
    async fn a_read_without_a_body_past_its_time_limit_may_have_been_sent() {
        let (addr, accepted) = silent_server().await;
        let (client, _) = client_at(addr, Duration::from_millis(200)).await;
        let started = Instant::now();
        let e = client.balance().await.unwrap_err();
        assert!(
            matches!(
                e,
                ApiError::Transport {
                    kind: TransportKind::Timeout,
                    ..
                }
            ),
            "{e:?}"
        );
        assert!(
            e.to_string()
                .contains("abandoned at the time limit its guard gave it"),
            "{e}"
        );
        // A read is repeated (each attempt asks the guard again for a new limit).
        assert_eq!(accepted.load(Ordering::SeqCst), 3);
        assert!(started.elapsed() < Duration::from_secs(5));
    }
}
