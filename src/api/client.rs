//! [`Client`], the Partner API client: built from [`ClientOptions`], it has one `async fn` per
//! endpoint of the Partner API v1 reference (its sections "Endpoints" and "Ancillary
//! endpoints"; `docs/partner-api.openapi.yaml` describes them), defined by area in
//! `endpoints/`, over the [`Transport`] that sends them.
//!
//! Imports `transport`, `options` and `error`.

use super::error::ApiError;
use super::options::ClientOptions;
use super::transport::{RequestCount, Transport};

/// A Partner API client. Cheap to share behind an `Arc`; calls may run concurrently.
pub struct Client {
    pub(super) transport: Transport,
}

impl std::fmt::Debug for Client {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Client")
            .field("base_url", &self.transport.base_url())
            .field("login", &self.transport.login())
            .finish_non_exhaustive()
    }
}

impl Client {
    /// Builds the client: checks the base URL (https only), loads `ca_file`, sets timeouts,
    /// User-Agent, no redirects. Does not connect or sign in.
    pub fn new(options: ClientOptions) -> Result<Self, ApiError> {
        Ok(Self {
            transport: Transport::new(options)?,
        })
    }

    /// The HTTP exchanges this client made so far (every attempt that got an answer), by
    /// method, endpoint and status.
    pub fn request_counts(&self) -> Vec<RequestCount> {
        self.transport.request_counts()
    }

    /// How far the local clock is ahead of the API's (`Date` header of the latest answer;
    /// negative when behind), or `None` before any answer carried one. Precision: a second
    /// plus the answer's latency.
    pub fn clock_skew(&self) -> Option<time::Duration> {
        self.transport.clock_skew()
    }

    /// The base URL in use (no trailing slash).
    pub fn base_url(&self) -> &str {
        self.transport.base_url()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::api::auth::{PasswordSource, Session};
    use crate::api::error::TransportKind;
    use crate::api::options::RetryPolicy;
    use crate::api::types::{Order, OrderRequest};

    #[test]
    fn client_refuses_http_and_bad_ca_file() {
        let opts = |url: &str| ClientOptions::new(url, "me@example.com", PasswordSource::default());
        let e = Client::new(opts("http://127.0.0.1:1")).unwrap_err();
        assert!(matches!(e, ApiError::Config(_)));
        assert!(e.to_string().contains("https://"), "{e}");
        let dir = tempfile::tempdir().unwrap();
        let ca = dir.path().join("ca.pem");
        std::fs::write(&ca, "not pem").unwrap();
        let mut o = opts("https://127.0.0.1:1");
        o.ca_file = Some(ca.clone());
        let e = Client::new(o).unwrap_err().to_string();
        assert!(e.contains(&ca.display().to_string()), "{e}");
        assert!(Client::new(opts("https://127.0.0.1:1")).is_ok());
    }

    /// A server that accepts a connection and answers nothing: a side-effect POST must end in
    /// `OutcomeUnknown`, and the order must be sent once only.
    #[tokio::test]
    async fn lost_answer_to_an_order_is_outcome_unknown_and_not_repeated() {
        use tokio::io::AsyncReadExt;
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let accepted = std::sync::Arc::new(std::sync::atomic::AtomicUsize::new(0));
        let count = accepted.clone();
        tokio::spawn(async move {
            loop {
                let Ok((mut sock, _)) = listener.accept().await else {
                    return;
                };
                count.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
                // Read the TLS hello, then drop the connection without answering.
                let mut buf = [0u8; 1024];
                let _ = sock.read(&mut buf).await;
            }
        });
        let mut o = ClientOptions::new(
            format!("https://{addr}"),
            "me@example.com",
            PasswordSource::default(),
        );
        o.retry = RetryPolicy::fast(5);
        let client = Client::new(o).unwrap();
        // Pretend to be signed in so that the order itself is what gets sent.
        client
            .transport
            .assume_session(Session {
                token: crate::api::Secret::new("t"),
                user_id: 1,
            })
            .await;
        let e = client
            .order(&OrderRequest {
                order: Order::default(),
            })
            .await
            .unwrap_err();
        // A TLS handshake that fails is a connect error: not sent, and still not repeated.
        assert!(
            matches!(
                e,
                ApiError::Transport {
                    kind: TransportKind::Connect,
                    ..
                }
            ),
            "{e:?}"
        );
        assert!(e.is_retryable());
        assert_eq!(accepted.load(std::sync::atomic::Ordering::SeqCst), 1);

        // The same failure on a GET is retried up to the policy's attempts.
        let e = client.balance().await.unwrap_err();
        assert!(
            e.to_string().starts_with("GET /api/v1/billing/balance: "),
            "{e}"
        );
        assert_eq!(accepted.load(std::sync::atomic::Ordering::SeqCst), 6);
    }

    /// A guard that refuses: no connection reaches the server, for a sign-in, an order or a
    /// read; the error names the call and the reason, is not retryable, and nothing is
    /// counted as sent.
    #[tokio::test]
    async fn a_refusing_guard_sends_nothing() {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let accepted = std::sync::Arc::new(std::sync::atomic::AtomicUsize::new(0));
        let count = accepted.clone();
        tokio::spawn(async move {
            while let Ok((_sock, _)) = listener.accept().await {
                count.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
            }
        });
        let asked = std::sync::Arc::new(std::sync::atomic::AtomicUsize::new(0));
        let seen = asked.clone();
        let mut o = ClientOptions::new(
            format!("https://{addr}"),
            "me@example.com",
            PasswordSource {
                inline: Some(crate::api::Secret::new("pw")),
                ..PasswordSource::default()
            },
        );
        o.retry = RetryPolicy::fast(5);
        o.guard = Some(crate::api::SendGuard::new(move || {
            seen.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
            Err("this host's lead of the fleet expired (paused or cut off from etcd)".into())
        }));
        let client = Client::new(o).unwrap();
        // No session yet: the sign-in itself is kept back.
        let e = client.balance().await.unwrap_err();
        assert!(
            e.to_string()
                .starts_with("POST /api/v1/users/signin: this host's lead"),
            "{e}"
        );
        client
            .transport
            .assume_session(Session {
                token: crate::api::Secret::new("t"),
                user_id: 1,
            })
            .await;
        let e = client
            .order(&OrderRequest {
                order: Order::default(),
            })
            .await
            .unwrap_err();
        assert!(matches!(e, ApiError::NotSent { .. }), "{e:?}");
        assert_eq!(
            e.to_string(),
            "POST /api/v1/order: this host's lead of the fleet expired (paused or cut off from \
             etcd); no request was sent"
        );
        assert!(!e.is_retryable() && !e.is_outcome_unknown());
        let e = client.balance().await.unwrap_err();
        assert!(matches!(e, ApiError::NotSent { .. }), "{e:?}");
        // Asked once per call: a refusal is never retried.
        assert_eq!(asked.load(std::sync::atomic::Ordering::SeqCst), 3);
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
        assert_eq!(accepted.load(std::sync::atomic::Ordering::SeqCst), 0);
        assert!(client.request_counts().is_empty());
    }
}
