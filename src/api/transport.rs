//! The HTTPS transport of the Partner API client: the connection pool, the session (auth
//! token, sign-in, token cache), retries, and the shapes of calls the endpoints are built from
//! (a JSON read, an action answering `success`, an archive download).
//!
//! Safety rules kept here:
//! - HTTPS only; redirects are never followed (a redirect is an error naming the Location).
//! - The auth token goes only into the `X-AUTH-TOKEN` header, never into a URL.
//! - "Clients store the token and sign in again only when a call answers 401": one re-signin,
//!   then the call is repeated once; a second 401 is an error.
//! - Idempotent calls (GET, sign in, DCV emails) are retried on 5xx, 408, 429, connection
//!   errors and timeouts with capped, jittered exponential backoff. Calls with side effects are
//!   repeated only when the request was certainly not sent (no connection); `POST /order` is
//!   never repeated ("Every POST to the order endpoint creates a new certificate order and is
//!   billed"), and a lost answer to any of them is [`ApiError::OutcomeUnknown`].
//! - Response bodies are read chunk by chunk and refused past a limit.
//! - The options' [`SendGuard`](super::SendGuard) is asked immediately before each request
//!   goes out; a refusal sends nothing, is never repeated and is not counted. A request it
//!   gives a time limit is sent through `gate.rs`: abandoned unless handed to the connection
//!   within it (then not sent, as a refusal), or, without a body, at the limit (then it may
//!   have been sent: an unknown outcome for a call with side effects).
//!
//! Imports `options`, `request`, `answer`, `auth`, `error`, `gate`, `types` and the
//! foundation.

use std::time::Instant;

use reqwest::Method;
use reqwest::header::{self, HeaderValue};
use serde::de::DeserializeOwned;
use tokio::sync::Mutex;

use super::answer::{check_status, decode, disposition_filename, parse_http_date, received};
use super::auth::{self, Session};
use super::error::{ApiError, ErrorBody, TransportKind};
use super::gate::{self, Abandoned};
use super::options::{ClientOptions, SendGuard, normalize_base_url, user_agent};
use super::request::{Body, Kind, Raw, Request};
use super::types::{ActionResult, Download, SignInResponse};
use crate::fsutil::io_text;

/// Most of an error answer's body read (the rest is dropped; only an excerpt is kept).
const MAX_ERROR_BODY: usize = 64 * 1024;

/// How one attempt failed.
enum Failure {
    /// No connection was made: the request was not sent.
    NotSent(String),
    /// The request may have reached the server.
    MaybeSent(TransportKind, String),
    /// Not worth repeating (e.g. too large).
    Final(ApiError),
}

#[derive(Default)]
struct SessionSlot {
    /// The token cache was read (once per client).
    loaded: bool,
    session: Option<Session>,
}

/// The connection pool and the session of one client; every call goes through it.
pub(super) struct Transport {
    http: reqwest::Client,
    base_url: String,
    options: ClientOptions,
    session: Mutex<SessionSlot>,
    /// Local clock minus the API's `Date` header, in seconds, from the latest answer.
    clock_skew: std::sync::atomic::AtomicI64,
    /// Whether `clock_skew` was measured.
    clock_seen: std::sync::atomic::AtomicBool,
    /// HTTP exchanges by method, endpoint and status (for metrics).
    requests: std::sync::Mutex<std::collections::BTreeMap<(&'static str, String, u16), u64>>,
}

/// How many HTTP exchanges a client made with one endpoint and got one status.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RequestCount {
    pub method: &'static str,
    /// The path with its IDs replaced by `{id}`, e.g. `/api/v1/ssl_certificates/{id}/status`.
    pub endpoint: String,
    pub status: u16,
    pub count: u64,
}

impl Transport {
    /// The HTTP exchanges this client made so far (every attempt that got an answer), by
    /// method, endpoint and status.
    pub(super) fn request_counts(&self) -> Vec<RequestCount> {
        let counts = self
            .requests
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        counts
            .iter()
            .map(|((method, endpoint, status), count)| RequestCount {
                method,
                endpoint: endpoint.clone(),
                status: *status,
                count: *count,
            })
            .collect()
    }

    fn count_request(&self, method: &'static str, path: &str, status: u16) {
        let endpoint = endpoint_of(path);
        let mut counts = self
            .requests
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        *counts.entry((method, endpoint, status)).or_insert(0) += 1;
    }

    /// Builds the transport: checks the base URL (https only), loads `ca_file`, sets timeouts,
    /// User-Agent, no redirects. Does not connect or sign in.
    pub(super) fn new(options: ClientOptions) -> Result<Self, ApiError> {
        let base_url = normalize_base_url(&options.base_url)
            .map_err(|m| ApiError::Config(format!("api.base_url {:?}: {m}", options.base_url)))?;
        if options.login.is_empty() {
            return Err(ApiError::Config("api.login is empty".into()));
        }
        let mut builder = reqwest::Client::builder()
            .user_agent(user_agent())
            .redirect(reqwest::redirect::Policy::none())
            .retry(reqwest::retry::never())
            .https_only(true)
            .referer(false)
            .connect_timeout(options.connect_timeout)
            .timeout(options.timeout)
            .pool_idle_timeout(options.idle_reuse);
        if let Some(path) = &options.ca_file {
            let fail =
                |m: String| ApiError::Config(format!("api.ca_file '{}': {m}", path.display()));
            let pem = std::fs::read(path).map_err(|e| fail(io_text(&e)))?;
            let certs = reqwest::Certificate::from_pem_bundle(&pem)
                .map_err(|e| fail(format!("not a PEM certificate bundle: {e}")))?;
            if certs.is_empty() {
                return Err(fail("holds no PEM certificate".into()));
            }
            builder = builder.tls_certs_merge(certs);
        }
        let http = builder.build().map_err(|e| {
            ApiError::Config(format!("cannot build the HTTPS client: {}", chain(&e)))
        })?;
        Ok(Self {
            http,
            base_url,
            options,
            session: Mutex::new(SessionSlot::default()),
            clock_skew: std::sync::atomic::AtomicI64::new(0),
            clock_seen: std::sync::atomic::AtomicBool::new(false),
            requests: std::sync::Mutex::default(),
        })
    }

    /// How far the local clock is ahead of the API's (`Date` header of the latest answer;
    /// negative when behind), or `None` before any answer carried one. Precision: a second
    /// plus the answer's latency.
    pub(super) fn clock_skew(&self) -> Option<time::Duration> {
        self.clock_seen
            .load(std::sync::atomic::Ordering::Relaxed)
            .then(|| {
                time::Duration::seconds(self.clock_skew.load(std::sync::atomic::Ordering::Relaxed))
            })
    }

    /// The base URL in use (no trailing slash).
    pub(super) fn base_url(&self) -> &str {
        &self.base_url
    }

    /// The login signed in with.
    pub(super) fn login(&self) -> &str {
        &self.options.login
    }

    // -----------------------------------------------------------------------------------------
    // Call shapes
    // -----------------------------------------------------------------------------------------

    /// Largest JSON answer accepted (`max_json_bytes` of the options).
    pub(super) fn json_limit(&self) -> usize {
        self.options.max_json_bytes
    }

    /// An idempotent `GET` of `path` answering JSON, with the auth token.
    pub(super) fn get(&self, path: impl Into<String>) -> Request {
        Request::new(Method::GET, path, Kind::Read, self.json_limit())
    }

    /// Sends `req` and decodes its 2xx JSON answer.
    pub(super) async fn json<T: DeserializeOwned>(&self, req: Request) -> Result<T, ApiError> {
        self.execute_parsed(&req, |raw| decode(&req, raw)).await
    }

    /// Sends `req` (as [`Self::execute`] does) and reads its 2xx answer with `parse`. A read
    /// whose answer does not decode — an HTML page from a proxy, a truncated body, values of
    /// the wrong type — is transient, like a 5xx: it is tried again with the same backoff and
    /// limits, each attempt logged with what was received, and only then is it an error that
    /// says what was received. A call with side effects is never repeated here: its
    /// undecodable answer is an unknown outcome ([`decode`]).
    pub(super) async fn execute_parsed<T>(
        &self,
        req: &Request,
        parse: impl Fn(&Raw) -> Result<T, ApiError>,
    ) -> Result<T, ApiError> {
        let policy = &self.options.retry;
        let started = Instant::now();
        let mut attempt = 1u32;
        loop {
            let raw = self.execute(req).await?;
            let message = match parse(&raw) {
                Ok(value) => return Ok(value),
                Err(ApiError::Decode { message, .. }) if req.kind == Kind::Read => message,
                Err(e) => return Err(e),
            };
            let received = received(req, &raw);
            tracing::warn!(
                call = %req.call(),
                attempt,
                "the answer is not the documented JSON ({message}); received {received}"
            );
            let delay = policy.delay(attempt);
            if attempt < policy.max_attempts.max(1)
                && started.elapsed() + delay <= policy.max_elapsed
            {
                tokio::time::sleep(delay).await;
                attempt += 1;
                continue;
            }
            return Err(ApiError::Decode {
                call: req.call(),
                status: raw.status,
                message: format!("{message}; received {received} ({attempt} attempt(s))"),
            });
        }
    }

    /// A POST answering ActionResult: `success: false` is a refusal; a missing or
    /// non-boolean `success` leaves the outcome unknown.
    pub(super) async fn action(&self, path: String, body: Body) -> Result<ActionResult, ApiError> {
        let mut req = Request::new(Method::POST, path, Kind::Write, self.json_limit());
        req.body = body;
        let raw = self.execute(&req).await?;
        let value: serde_json::Value = decode(&req, &raw)?;
        match value.get("success") {
            Some(serde_json::Value::Bool(false)) => {
                let text = |k: &str| value.get(k).and_then(|v| v.as_str()).map(str::to_owned);
                Err(ApiError::Refused {
                    call: req.call(),
                    reason: text("result")
                        .or_else(|| text("error"))
                        .unwrap_or_else(|| "(no reason given)".into()),
                })
            }
            Some(serde_json::Value::Bool(true)) => decode(&req, &raw),
            // Whether the action was carried out cannot be read from this answer.
            other => Err(ApiError::OutcomeUnknown {
                call: req.call(),
                reason: format!(
                    "HTTP {} with an answer whose `success` {}",
                    raw.status,
                    match other {
                        None => "is missing",
                        Some(_) => "is not a boolean",
                    }
                ),
            }),
        }
    }

    /// A `GET` of an archive: its bytes, content type and safe file name.
    pub(super) async fn zip(&self, path: String) -> Result<Download, ApiError> {
        let mut req = Request::new(Method::GET, path, Kind::Read, self.options.max_zip_bytes);
        req.accept = "application/zip, application/octet-stream, */*";
        // An HTML page in place of the archive is a proxy's, not the service's answer: read
        // again like any undecodable read. (Anything else is the bundle reader's to judge.)
        self.execute_parsed(&req, |raw| {
            let content_type = raw.header("content-type");
            if content_type
                .as_deref()
                .is_some_and(|c| c.to_ascii_lowercase().starts_with("text/html"))
            {
                return Err(ApiError::Decode {
                    call: req.call(),
                    status: raw.status,
                    message: "an HTML page instead of the archive".into(),
                });
            }
            Ok(Download {
                filename: raw
                    .header("content-disposition")
                    .as_deref()
                    .and_then(disposition_filename),
                content_type,
                bytes: raw.body.clone(),
            })
        })
        .await
    }

    // -----------------------------------------------------------------------------------------
    // Session
    // -----------------------------------------------------------------------------------------

    /// Endpoint 1's work: signs in now (even with a cached token) and caches the new token.
    pub(super) async fn sign_in(&self) -> Result<Session, ApiError> {
        let mut slot = self.session.lock().await;
        slot.loaded = true;
        let session = self.sign_in_now().await?;
        slot.session = Some(session.clone());
        Ok(session)
    }

    /// The current session: cached in memory, else read from the token cache, else a sign-in.
    pub(super) async fn session(&self) -> Result<Session, ApiError> {
        let mut slot = self.session.lock().await;
        if !slot.loaded {
            slot.loaded = true;
            if slot.session.is_none()
                && let Some(dir) = &self.options.state_dir
            {
                slot.session = auth::read_token(dir, &self.base_url, &self.options.login);
            }
        }
        if let Some(s) = &slot.session {
            return Ok(s.clone());
        }
        // Signing in under the lock: concurrent calls wait for one sign-in.
        let s = self.sign_in_now().await?;
        slot.session = Some(s.clone());
        Ok(s)
    }

    /// After a 401 with `rejected`: sign in again, unless another call already did.
    async fn renew_session(&self, rejected: &Session) -> Result<Session, ApiError> {
        let mut slot = self.session.lock().await;
        if let Some(s) = &slot.session
            && s.token != rejected.token
        {
            return Ok(s.clone());
        }
        let s = self.sign_in_now().await?;
        slot.session = Some(s.clone());
        Ok(s)
    }

    /// Signs in and writes the token cache (a failure to cache is logged, not fatal).
    async fn sign_in_now(&self) -> Result<Session, ApiError> {
        let password = self.options.password.load()?;
        let body = serde_json::to_vec(&serde_json::json!({
            "login": self.options.login,
            "password": password.expose(),
        }))
        .map_err(|e| ApiError::Config(format!("cannot encode the sign-in: {e}")))?;
        let mut req = Request::new(
            Method::POST,
            "/api/v1/users/signin",
            Kind::Read,
            1024 * 1024,
        );
        req.body = Body::Json(body);
        req.auth = false;
        req.sensitive = true;
        // Not through `execute`: a sign-in carries no token and never signs in itself.
        let raw = check_status(&req, self.send(&req, None).await?)?;
        let r: SignInResponse = decode(&req, &raw)?;
        if r.auth_token.is_empty() {
            return Err(ApiError::Decode {
                call: req.call(),
                status: raw.status,
                message: "empty auth_token".into(),
            });
        }
        let session = Session {
            token: r.auth_token,
            user_id: r.id,
        };
        tracing::info!(login = %self.options.login, user_id = session.user_id, "signed in");
        if let Some(dir) = &self.options.state_dir
            && let Err(e) = auth::write_token(dir, &self.base_url, &self.options.login, &session)
        {
            tracing::warn!("{e}; the token is kept in memory only");
        }
        Ok(session)
    }

    // -----------------------------------------------------------------------------------------
    // Transport
    // -----------------------------------------------------------------------------------------

    /// Sends `req` with authentication (one re-signin on 401) and retries; returns a 2xx
    /// answer or the error for the status.
    async fn execute(&self, req: &Request) -> Result<Raw, ApiError> {
        let raw = if req.auth {
            let session = self.session().await?;
            let raw = self.send(req, Some(&session.token)).await?;
            if raw.status == 401 {
                // Section "Authentication", rule 4: sign in again only on 401, then repeat.
                // A 401 means the call was not carried out, so repeating is safe for any call.
                tracing::info!(call = %req.call(), "HTTP 401: signing in again");
                let renewed = self.renew_session(&session).await?;
                self.send(req, Some(&renewed.token)).await?
            } else {
                raw
            }
        } else {
            self.send(req, None).await?
        };
        check_status(req, raw)
    }

    /// One logical send: attempts with backoff as the call's kind allows.
    async fn send(
        &self,
        req: &Request,
        token: Option<&crate::api::Secret>,
    ) -> Result<Raw, ApiError> {
        let policy = &self.options.retry;
        let started = Instant::now();
        let mut attempt = 1u32;
        loop {
            let result = self.attempt(req, token, attempt).await;
            let repeat = match &result {
                Ok(raw) => req.kind == Kind::Read && retry_status(raw.status),
                Err(Failure::NotSent(_)) => req.kind != Kind::Order,
                Err(Failure::MaybeSent(..)) => req.kind == Kind::Read,
                Err(Failure::Final(_)) => false,
            };
            if repeat && attempt < policy.max_attempts.max(1) {
                let delay = policy.delay(attempt);
                if started.elapsed() + delay <= policy.max_elapsed {
                    tracing::info!(
                        call = %req.call(),
                        attempt,
                        delay_ms = delay.as_millis() as u64,
                        "retrying"
                    );
                    tokio::time::sleep(delay).await;
                    attempt += 1;
                    continue;
                }
            }
            return self.settle(req, result);
        }
    }

    /// Turns the last attempt's outcome into the call's result.
    fn settle(&self, req: &Request, result: Result<Raw, Failure>) -> Result<Raw, ApiError> {
        let call = req.call();
        match result {
            Ok(raw) if req.kind != Kind::Read && raw.status >= 500 => {
                // A 5xx to a call with side effects says nothing about whether it was done.
                let (status, body) = (raw.status, raw.body);
                Err(ApiError::OutcomeUnknown {
                    call,
                    reason: format!(
                        "HTTP {status}: {}",
                        ErrorBody::decode(&body)
                            .message()
                            .unwrap_or_else(|| "server error".into())
                    ),
                })
            }
            Ok(raw) => Ok(raw),
            Err(Failure::NotSent(message)) => Err(ApiError::Transport {
                call,
                kind: TransportKind::Connect,
                message,
            }),
            Err(Failure::MaybeSent(kind, message)) if req.kind == Kind::Read => {
                Err(ApiError::Transport {
                    call,
                    kind,
                    message,
                })
            }
            Err(Failure::MaybeSent(kind, message)) => Err(ApiError::OutcomeUnknown {
                call,
                reason: format!("{kind} after sending: {message}"),
            }),
            Err(Failure::Final(ApiError::TooLarge { limit, .. })) if req.kind != Kind::Read => {
                Err(ApiError::OutcomeUnknown {
                    call,
                    reason: format!("the answer is larger than {limit} bytes"),
                })
            }
            Err(Failure::Final(e)) => Err(e),
        }
    }

    /// Asks the options' guard whether `req` may be sent now: `Some` with the guard and the
    /// instant by which it must be handed to the connection when the guard gives a time limit.
    fn guard_limit(
        &self,
        req: &Request,
    ) -> Result<Option<(SendGuard, tokio::time::Instant)>, Failure> {
        let Some(guard) = &self.options.guard else {
            return Ok(None);
        };
        match guard.remaining() {
            Err(reason) => {
                let call = req.call();
                tracing::warn!(call = %call, "{reason}; no request was sent");
                Err(Failure::Final(ApiError::NotSent { call, reason }))
            }
            Ok(None) => Ok(None),
            Ok(Some(left)) => {
                // A limit beyond what the clock can count is no limit.
                let until = tokio::time::Instant::now().checked_add(left);
                if req.kind == Kind::Order {
                    crate::failpoint::hit("order-guarded");
                }
                Ok(until.map(|until| (guard.clone(), until)))
            }
        }
    }

    /// Sends `builder`: at once, or through the gate when `limit` says by when it must be
    /// handed to the connection (abandoned before: not sent; without a body: it may have been).
    async fn send_within(
        &self,
        builder: reqwest::RequestBuilder,
        limit: Option<(SendGuard, tokio::time::Instant)>,
        call: &super::error::Call,
    ) -> Result<reqwest::Response, Failure> {
        let Some((guard, until)) = limit else {
            return builder.send().await.map_err(|e| classify(&e));
        };
        let request = builder.build().map_err(|e| classify(&e))?;
        match gate::send(&self.http, request, guard, until).await {
            Ok(sent) => sent.map_err(|e| classify(&e)),
            Err(Abandoned::NotSent(reason)) => {
                tracing::warn!(call = %call, "{reason}; no request was sent");
                Err(Failure::Final(ApiError::NotSent {
                    call: call.clone(),
                    reason,
                }))
            }
            Err(Abandoned::MaybeSent(reason)) => {
                Err(Failure::MaybeSent(TransportKind::Timeout, reason))
            }
        }
    }

    /// One HTTP exchange, body read within its limit.
    async fn attempt(
        &self,
        req: &Request,
        token: Option<&crate::api::Secret>,
        attempt: u32,
    ) -> Result<Raw, Failure> {
        let url = format!("{}{}", self.base_url, req.path);
        let mut builder = self
            .http
            .request(req.method.clone(), &url)
            .header(header::ACCEPT, req.accept);
        if !req.query.is_empty() {
            builder = builder.query(&req.query);
        }
        if let Some(token) = token {
            let mut value = HeaderValue::from_str(token.expose()).map_err(|_| {
                Failure::Final(ApiError::Config(
                    "the auth token holds characters not allowed in a header".into(),
                ))
            })?;
            value.set_sensitive(true);
            builder = builder.header("X-AUTH-TOKEN", value);
        }
        builder = match &req.body {
            Body::None => builder,
            Body::Form(fields) => builder.form(fields),
            Body::Json(bytes) => builder
                .header(header::CONTENT_TYPE, "application/json")
                .body(bytes.clone()),
        };
        let call = req.call();
        // Asked last, after everything else is ready: nothing is sent once it refuses.
        let limit = self.guard_limit(req)?;
        let started = Instant::now();
        let result = async {
            let mut response = self.send_within(builder, limit, &call).await?;
            let status = response.status();
            let headers = response.headers().clone();
            if let Some(server) = headers
                .get(header::DATE)
                .and_then(|v| v.to_str().ok())
                .and_then(parse_http_date)
            {
                let skew = (time::OffsetDateTime::now_utc() - server).whole_seconds();
                self.clock_skew
                    .store(skew, std::sync::atomic::Ordering::Relaxed);
                self.clock_seen
                    .store(true, std::sync::atomic::Ordering::Relaxed);
            }
            let success = status.is_success();
            let limit = if success { req.limit } else { MAX_ERROR_BODY };
            if success
                && let Some(len) = response.content_length()
                && len > limit as u64
            {
                return Err(Failure::Final(ApiError::TooLarge {
                    call: call.clone(),
                    limit,
                }));
            }
            let mut body = Vec::new();
            while let Some(chunk) = response.chunk().await.map_err(|e| classify(&e))? {
                if body.len() + chunk.len() > limit {
                    if success {
                        return Err(Failure::Final(ApiError::TooLarge {
                            call: call.clone(),
                            limit,
                        }));
                    }
                    // An error body is only excerpted: keep its beginning.
                    body.extend_from_slice(&chunk[..limit - body.len()]);
                    break;
                }
                body.extend_from_slice(&chunk);
            }
            Ok(Raw {
                status: status.as_u16(),
                headers,
                body,
            })
        }
        .await;
        let elapsed_ms = started.elapsed().as_millis() as u64;
        if let Ok(raw) = &result {
            self.count_request(call.method, &call.path, raw.status);
        }
        match &result {
            Ok(raw) => tracing::debug!(
                method = call.method,
                path = %call.path,
                status = raw.status,
                elapsed_ms,
                attempt,
                "partner API call"
            ),
            Err(f) => tracing::debug!(
                method = call.method,
                path = %call.path,
                elapsed_ms,
                attempt,
                error = %match f {
                    Failure::NotSent(m) | Failure::MaybeSent(_, m) => m.clone(),
                    Failure::Final(e) => e.to_string(),
                },
                "partner API call failed"
            ),
        }
        result
    }
}

/// `path` with every all-digit segment replaced by `{id}`.
fn endpoint_of(path: &str) -> String {
    path.split('/')
        .map(|seg| {
            if !seg.is_empty() && seg.bytes().all(|b| b.is_ascii_digit()) {
                "{id}"
            } else {
                seg
            }
        })
        .collect::<Vec<_>>()
        .join("/")
}

/// Statuses worth another attempt of an idempotent call.
fn retry_status(status: u16) -> bool {
    status >= 500 || status == 408 || status == 429
}

/// Classifies a reqwest error: not sent (no connection), or may have been sent.
fn classify(e: &reqwest::Error) -> Failure {
    let message = chain(e);
    if e.is_connect() {
        Failure::NotSent(message)
    } else if e.is_builder() {
        Failure::Final(ApiError::Config(message))
    } else if e.is_timeout() {
        Failure::MaybeSent(TransportKind::Timeout, message)
    } else {
        Failure::MaybeSent(TransportKind::Other, message)
    }
}

/// An error and its sources, without the URL ("error sending request: connection refused").
fn chain(e: &(dyn std::error::Error + 'static)) -> String {
    let mut parts: Vec<String> = Vec::new();
    let mut cur: Option<&(dyn std::error::Error + 'static)> = Some(e);
    while let Some(err) = cur {
        let mut text = err.to_string();
        // reqwest appends " for url (…)": the URL is known from the call already.
        if let Some(i) = text.find(" for url (") {
            text.truncate(i);
        }
        if !parts.iter().any(|p| p.contains(&text)) {
            parts.push(text);
        }
        cur = err.source();
    }
    parts.join(": ")
}

#[cfg(test)]
impl Transport {
    /// Takes `session` as signed in, without asking the API or the token cache.
    pub(super) async fn assume_session(&self, session: Session) {
        let mut slot = self.session.lock().await;
        slot.session = Some(session);
        slot.loaded = true;
    }
}
