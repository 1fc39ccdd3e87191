//! The Partner API client: HTTPS transport, session, retries, and one `async fn` per endpoint
//! of the Partner API v1 reference (its sections "Endpoints" and "Ancillary endpoints";
//! `docs/partner-api.openapi.yaml` describes them).
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

use std::path::PathBuf;
use std::time::{Duration, Instant};

use reqwest::header::{self, HeaderMap, HeaderValue};
use reqwest::{Method, StatusCode};
use serde::de::DeserializeOwned;
use tokio::sync::Mutex;

use super::auth::{self, PasswordSource, Session};
use super::error::{ApiError, Call, ErrorBody, TransportKind, excerpt};
use super::types::*;
use crate::fsutil::io_text;
pub use crate::values::endpoint::{DEFAULT_CONNECT_TIMEOUT, DEFAULT_TIMEOUT, normalize_base_url};

/// Largest JSON answer accepted.
pub const MAX_JSON_BYTES: usize = 4 * 1024 * 1024;
/// Largest ZIP archive accepted (download calls).
pub const MAX_ZIP_BYTES: usize = 16 * 1024 * 1024;
/// Most of an error answer's body read (the rest is dropped; only an excerpt is kept).
const MAX_ERROR_BODY: usize = 64 * 1024;
/// Most pages [`Client::list_all`] reads (50 certificates each).
const MAX_PAGES: u32 = 10_000;
/// Certificates per page of the list call ("page size: 50 certificates").
pub const PAGE_SIZE: usize = 50;

/// `cert-agent/<version>`, sent as User-Agent.
pub fn user_agent() -> String {
    format!("cert-agent/{}", env!("CARGO_PKG_VERSION"))
}

/// Retries of idempotent calls: capped exponential backoff with jitter, bounded in count and
/// in total time.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RetryPolicy {
    /// Attempts in all, including the first (1 = no retry).
    pub max_attempts: u32,
    /// Delay before the first retry (before jitter).
    pub initial_backoff: Duration,
    /// Longest delay between two attempts.
    pub max_backoff: Duration,
    /// No retry starts once this much time has passed since the first attempt.
    pub max_elapsed: Duration,
}

impl Default for RetryPolicy {
    fn default() -> Self {
        Self {
            max_attempts: 4,
            initial_backoff: Duration::from_millis(500),
            max_backoff: Duration::from_secs(8),
            max_elapsed: Duration::from_secs(60),
        }
    }
}

impl RetryPolicy {
    /// No retries at all.
    pub fn none() -> Self {
        Self {
            max_attempts: 1,
            ..Self::default()
        }
    }

    /// `max_attempts` attempts with millisecond delays (for tests).
    pub fn fast(max_attempts: u32) -> Self {
        Self {
            max_attempts,
            initial_backoff: Duration::from_millis(1),
            max_backoff: Duration::from_millis(5),
            max_elapsed: Duration::from_secs(30),
        }
    }

    /// Delay before attempt `attempt + 1`: `initial · 2^(attempt-1)`, capped, times a random
    /// factor in [0.5, 1].
    pub fn delay(&self, attempt: u32) -> Duration {
        let exp = self
            .initial_backoff
            .saturating_mul(1u32 << attempt.saturating_sub(1).min(20));
        let capped = exp.min(self.max_backoff);
        // `try_from`: no panic even for an absurd `max_backoff`.
        Duration::try_from_secs_f64(capped.as_secs_f64() * rand::random_range(0.5..=1.0))
            .unwrap_or(capped)
    }
}

/// Everything the client needs. Build it with [`ClientOptions::new`] and adjust fields.
#[derive(Debug, Clone)]
pub struct ClientOptions {
    /// `api.base_url`, `https://` only; may carry a path prefix; no query, no user info.
    pub base_url: String,
    /// `api.login`.
    pub login: String,
    /// Where the password comes from (read only when a sign-in is needed).
    pub password: PasswordSource,
    /// `api.ca_file`: PEM file with extra trust anchors (in addition to the system roots).
    pub ca_file: Option<PathBuf>,
    /// `agent.state_dir`: the token is cached in `state_dir/token`. `None` keeps it in memory.
    pub state_dir: Option<PathBuf>,
    pub connect_timeout: Duration,
    /// Total time of one attempt, body included.
    pub timeout: Duration,
    pub retry: RetryPolicy,
    pub max_json_bytes: usize,
    pub max_zip_bytes: usize,
}

impl ClientOptions {
    /// Options with the default timeouts, retries and body limits, and no token cache.
    pub fn new(
        base_url: impl Into<String>,
        login: impl Into<String>,
        password: PasswordSource,
    ) -> Self {
        Self {
            base_url: base_url.into(),
            login: login.into(),
            password,
            ca_file: None,
            state_dir: None,
            connect_timeout: DEFAULT_CONNECT_TIMEOUT,
            timeout: DEFAULT_TIMEOUT,
            retry: RetryPolicy::default(),
            max_json_bytes: MAX_JSON_BYTES,
            max_zip_bytes: MAX_ZIP_BYTES,
        }
    }
}

/// What kind of call, for retries and for lost answers.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
    /// Changes nothing: may be repeated.
    Read,
    /// Changes something (not billed): repeated only when certainly not sent.
    Write,
    /// `POST /order`: billed; never repeated.
    Order,
}

enum Body {
    None,
    Form(Vec<(String, String)>),
    Json(Vec<u8>),
}

/// One request to make.
struct Request {
    method: Method,
    path: String,
    query: Vec<(&'static str, String)>,
    body: Body,
    /// Send the auth token (and handle 401 by signing in again).
    auth: bool,
    kind: Kind,
    /// Largest success body.
    limit: usize,
    /// Bodies of this call may hold credentials (sign in, prolong): no excerpt in errors.
    sensitive: bool,
    accept: &'static str,
}

impl Request {
    fn new(method: Method, path: impl Into<String>, kind: Kind, limit: usize) -> Self {
        Self {
            method,
            path: path.into(),
            query: Vec::new(),
            body: Body::None,
            auth: true,
            kind,
            limit,
            sensitive: false,
            accept: "application/json",
        }
    }

    fn call(&self) -> Call {
        Call {
            method: method_name(&self.method),
            path: self.path.clone(),
            idempotent: self.kind == Kind::Read,
        }
    }
}

fn method_name(m: &Method) -> &'static str {
    if *m == Method::POST { "POST" } else { "GET" }
}

/// An answer, read whole (within its limit).
struct Raw {
    status: u16,
    headers: HeaderMap,
    body: Vec<u8>,
}

impl Raw {
    fn header(&self, name: &str) -> Option<String> {
        self.headers
            .get(name)
            .and_then(|v| v.to_str().ok())
            .map(str::to_owned)
    }
}

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

/// A Partner API client. Cheap to share behind an `Arc`; calls may run concurrently.
pub struct Client {
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

impl std::fmt::Debug for Client {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Client")
            .field("base_url", &self.base_url)
            .field("login", &self.options.login)
            .finish_non_exhaustive()
    }
}

impl Client {
    /// The HTTP exchanges this client made so far (every attempt that got an answer), by
    /// method, endpoint and status.
    pub fn request_counts(&self) -> Vec<RequestCount> {
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

    /// Builds the client: checks the base URL (https only), loads `ca_file`, sets timeouts,
    /// User-Agent, no redirects. Does not connect or sign in.
    pub fn new(options: ClientOptions) -> Result<Self, ApiError> {
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
            .timeout(options.timeout);
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

    /// The base URL in use (no trailing slash).
    /// How far the local clock is ahead of the API's (`Date` header of the latest answer;
    /// negative when behind), or `None` before any answer carried one. Precision: a second
    /// plus the answer's latency.
    pub fn clock_skew(&self) -> Option<time::Duration> {
        self.clock_seen
            .load(std::sync::atomic::Ordering::Relaxed)
            .then(|| {
                time::Duration::seconds(self.clock_skew.load(std::sync::atomic::Ordering::Relaxed))
            })
    }

    pub fn base_url(&self) -> &str {
        &self.base_url
    }

    // -----------------------------------------------------------------------------------------
    // Endpoints
    // -----------------------------------------------------------------------------------------

    /// Endpoint 1, `POST /api/v1/users/signin`: signs in now (even with a cached token), caches the
    /// new token and returns the user ID. Other calls sign in by themselves when needed.
    pub async fn sign_in(&self) -> Result<u64, ApiError> {
        let mut slot = self.session.lock().await;
        slot.loaded = true;
        let session = self.sign_in_now().await?;
        slot.session = Some(session.clone());
        Ok(session.user_id)
    }

    /// The user ID of the session (signs in when there is none).
    pub async fn user_id(&self) -> Result<u64, ApiError> {
        Ok(self.session().await?.user_id)
    }

    /// Endpoint 2, `GET /api/v1/products`; with `eu_prices`, `recommended_prices=EU` (end-user
    /// prices in EUR instead of partner prices).
    pub async fn products(&self, eu_prices: bool) -> Result<Vec<Product>, ApiError> {
        let mut req = self.get("/api/v1/products");
        if eu_prices {
            req.query.push(("recommended_prices", "EU".into()));
        }
        self.json(req).await
    }

    /// Endpoint 3, `GET /api/v1/ssl_certificates/{id}/download`: the CA archive (ZIP). 422 while
    /// not issued (also while a reissue is processed: keep waiting).
    pub async fn download(&self, certificate_id: u64) -> Result<Download, ApiError> {
        self.zip(certificate_path(certificate_id, "/download"))
            .await
    }

    /// Endpoint 4, `GET /api/v1/ssl_certificates/{id}/status`. Poll at most once every 5 minutes.
    pub async fn status(&self, certificate_id: u64) -> Result<CertificateStatus, ApiError> {
        self.json(self.get(certificate_path(certificate_id, "/status")))
            .await
    }

    /// Endpoint 5, `POST /api/v1/order`: a new **billed** order. Never repeated by the client: a
    /// lost answer is [`ApiError::OutcomeUnknown`] (reconcile from the list), a connection that
    /// could not be made is [`ApiError::Transport`] with [`TransportKind::Connect`].
    pub async fn order(&self, order: &OrderRequest) -> Result<OrderResponse, ApiError> {
        let body = serde_json::to_vec(order)
            .map_err(|e| ApiError::Config(format!("cannot encode the order: {e}")))?;
        let mut req = Request::new(
            Method::POST,
            "/api/v1/order",
            Kind::Order,
            self.json_limit(),
        );
        req.body = Body::Json(body);
        self.json(req).await
    }

    /// Endpoint 6, `POST /api/v1/dcv_emails`: acceptable DCV addresses for a domain. `provider` is
    /// the legacy family-D provider identifier, if wanted.
    pub async fn dcv_emails(
        &self,
        domain_name: &str,
        provider: Option<&str>,
    ) -> Result<DcvEmails, ApiError> {
        let mut form = vec![("domain_name".to_owned(), domain_name.to_owned())];
        if let Some(p) = provider {
            form.push(("provider".to_owned(), p.to_owned()));
        }
        // Reads only: safe to repeat.
        let mut req = Request::new(
            Method::POST,
            "/api/v1/dcv_emails",
            Kind::Read,
            self.json_limit(),
        );
        req.body = Body::Form(form);
        self.json(req).await
    }

    /// Endpoint 7, `GET /api/v1/ssl_certificates?page=N[&scope=S][&q=TEXT]`: one page (50 per page)
    /// and the decoded `X-Pagination` header.
    pub async fn list(
        &self,
        page: u32,
        scope: Option<ListScope>,
        q: Option<&str>,
    ) -> Result<CertificatePage, ApiError> {
        self.list_at("/api/v1/ssl_certificates".into(), page, scope, q)
            .await
    }

    /// Endpoint 7, `GET /api/v1/ssl_certificates` without `page`: every certificate in one answer.
    pub async fn list_unpaged(&self) -> Result<Vec<Certificate>, ApiError> {
        self.json(self.get("/api/v1/ssl_certificates")).await
    }

    /// Endpoint 7: Every page of the list, in order (follows `next_page`; stops at the last page).
    pub async fn list_all(
        &self,
        scope: Option<ListScope>,
        q: Option<&str>,
    ) -> Result<Vec<Certificate>, ApiError> {
        let mut out = Vec::new();
        let mut page = 1u32;
        loop {
            let p = self.list(page, scope, q).await?;
            let got = p.certificates.len();
            out.extend(p.certificates);
            let next = match &p.pagination {
                Some(pg) if pg.out_of_bounds == Some(true) => None,
                Some(pg) => match (pg.next_page, pg.total_pages) {
                    (Some(n), _) => u32::try_from(n).ok(),
                    (None, Some(total)) if u64::from(page) < total => Some(page + 1),
                    _ => None,
                },
                None if got >= PAGE_SIZE => Some(page + 1),
                None => None,
            };
            match next {
                // Only forward: a server pointing backwards would make this loop forever.
                Some(n) if n > page && n <= MAX_PAGES => page = n,
                _ => return Ok(out),
            }
        }
    }

    /// Endpoint 7: The deprecated alternate path `/api/v1/users/{user_id}/our_ssl_certificates`
    /// (same parameters; the user ID is the session's). New code uses [`Client::list`].
    pub async fn list_via_user_path(
        &self,
        page: u32,
        scope: Option<ListScope>,
        q: Option<&str>,
    ) -> Result<CertificatePage, ApiError> {
        let user_id = self.user_id().await?;
        self.list_at(
            format!("/api/v1/users/{user_id}/our_ssl_certificates"),
            page,
            scope,
            q,
        )
        .await
    }

    /// Endpoint 8, `GET /api/v1/ssl_certificates/{id}/dcv`: DCV state per domain, only while in
    /// progress (otherwise HTTP 422 with `certificate_status` in [`ErrorBody::Failure`]).
    pub async fn dcv_status(&self, certificate_id: u64) -> Result<DcvStatus, ApiError> {
        self.json(self.get(certificate_path(certificate_id, "/dcv")))
            .await
    }

    /// Endpoint 9, `POST /api/v1/ssl_certificates/{id}/change_dcv`: `email` is an address or a
    /// method (HTTP_CSR_HASH, HTTPS_CSR_HASH, CNAME_CSR_HASH); `domain` for multi-domain
    /// certificates. A refusal (200 with `success: false`) is [`ApiError::Refused`].
    pub async fn change_dcv(
        &self,
        certificate_id: u64,
        email: &str,
        domain: Option<&str>,
    ) -> Result<ActionResult, ApiError> {
        let mut form = vec![("email".to_owned(), email.to_owned())];
        if let Some(d) = domain {
            form.push(("domain".to_owned(), d.to_owned()));
        }
        self.action(
            certificate_path(certificate_id, "/change_dcv"),
            Body::Form(form),
        )
        .await
    }

    /// Endpoint 10, `POST /api/v1/ssl_certificates/{id}/resend_dcv`. Refusal:
    /// [`ApiError::Refused`].
    pub async fn resend_dcv(&self, certificate_id: u64) -> Result<ActionResult, ApiError> {
        self.action(certificate_path(certificate_id, "/resend_dcv"), Body::None)
            .await
    }

    /// Endpoint 11, `GET /api/v1/billing/balance`.
    pub async fn balance(&self) -> Result<Balance, ApiError> {
        self.json(self.get("/api/v1/billing/balance")).await
    }

    /// Endpoint 12, `POST /api/v1/ssl_certificates/{id}/reissue` (free). The new certificate is not
    /// ready on return: download until the serial differs. 422 `{success:false, error}`
    /// explains a rejection.
    pub async fn reissue(
        &self,
        certificate_id: u64,
        request: &ReissueRequest,
    ) -> Result<ActionResult, ApiError> {
        self.action(
            certificate_path(certificate_id, "/reissue"),
            Body::Form(request.form_fields()),
        )
        .await
    }

    /// Endpoint 13, `POST /api/v1/ssl_certificates/{id}/cancel`: requests cancellation (not
    /// instant). "Cannot cancel a certificate that was issued more than 28 days ago" and "already
    /// cancelled" come back as [`ApiError::Refused`].
    pub async fn cancel(&self, certificate_id: u64) -> Result<ActionResult, ApiError> {
        self.action(certificate_path(certificate_id, "/cancel"), Body::None)
            .await
    }

    /// Endpoint 14, `GET /api/v1/ssl_certificates/{id}`: details (follow `replacement_id` after a
    /// reissue that created a new ID).
    pub async fn details(&self, certificate_id: u64) -> Result<CertificateDetails, ApiError> {
        self.json(self.get(certificate_path(certificate_id, "")))
            .await
    }

    /// Endpoint 15, `GET /api/v1/ssl_certificates/{id}/download_bundle`: the per-server ZIP bundle.
    pub async fn download_bundle(&self, certificate_id: u64) -> Result<Download, ApiError> {
        self.zip(certificate_path(certificate_id, "/download_bundle"))
            .await
    }

    /// Endpoint 16, `POST /api/v1/ssl_certificates/{id}/prolong`: prepares the renewal order (not
    /// billed) and returns its token, a credential. Repeated calls return the same token.
    pub async fn prolong(&self, certificate_id: u64) -> Result<Prolongation, ApiError> {
        let mut req = Request::new(
            Method::POST,
            certificate_path(certificate_id, "/prolong"),
            Kind::Write,
            self.json_limit(),
        );
        req.sensitive = true;
        self.json(req).await
    }

    /// `GET /api/v1/countries` (no token needed).
    pub async fn countries(&self) -> Result<Vec<Country>, ApiError> {
        let mut req = self.get("/api/v1/countries");
        req.auth = false;
        self.json(req).await
    }

    /// `GET /api/v1/users/{user_id}/nomenclatures/{product_id}/ssl_server_softwares`: server
    /// software entries of a product (no token sent; the user ID is the session's).
    pub async fn ssl_server_softwares(
        &self,
        product_id: u64,
    ) -> Result<Vec<ServerSoftware>, ApiError> {
        let user_id = self.user_id().await?;
        let mut req = self.get(format!(
            "/api/v1/users/{user_id}/nomenclatures/{product_id}/ssl_server_softwares"
        ));
        req.auth = false;
        self.json(req).await
    }

    // -----------------------------------------------------------------------------------------
    // Call shapes
    // -----------------------------------------------------------------------------------------

    fn json_limit(&self) -> usize {
        self.options.max_json_bytes
    }

    fn get(&self, path: impl Into<String>) -> Request {
        Request::new(Method::GET, path, Kind::Read, self.json_limit())
    }

    async fn list_at(
        &self,
        path: String,
        page: u32,
        scope: Option<ListScope>,
        q: Option<&str>,
    ) -> Result<CertificatePage, ApiError> {
        let mut req = self.get(path);
        req.query.push(("page", page.max(1).to_string()));
        if let Some(s) = scope {
            req.query.push(("scope", s.as_str().into()));
        }
        if let Some(q) = q {
            req.query.push(("q", q.into()));
        }
        self.execute_parsed(&req, |raw| {
            let pagination =
                match raw.header("x-pagination") {
                    Some(h) => Some(serde_json::from_str::<Pagination>(&h).map_err(|e| {
                        ApiError::Decode {
                            call: req.call(),
                            status: raw.status,
                            message: format!("X-Pagination header: {e}"),
                        }
                    })?),
                    None => None,
                };
            Ok(CertificatePage {
                certificates: decode(&req, raw)?,
                pagination,
            })
        })
        .await
    }

    async fn json<T: DeserializeOwned>(&self, req: Request) -> Result<T, ApiError> {
        self.execute_parsed(&req, |raw| decode(&req, raw)).await
    }

    /// Sends `req` (as [`Self::execute`] does) and reads its 2xx answer with `parse`. A read
    /// whose answer does not decode — an HTML page from a proxy, a truncated body, values of
    /// the wrong type — is transient, like a 5xx: it is tried again with the same backoff and
    /// limits, each attempt logged with what was received, and only then is it an error that
    /// says what was received. A call with side effects is never repeated here: its
    /// undecodable answer is an unknown outcome ([`decode`]).
    async fn execute_parsed<T>(
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
    /// non-boolean `success` is a decode error.
    async fn action(&self, path: String, body: Body) -> Result<ActionResult, ApiError> {
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

    async fn zip(&self, path: String) -> Result<Download, ApiError> {
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

    /// The current session: cached in memory, else read from the token cache, else a sign-in.
    async fn session(&self) -> Result<Session, ApiError> {
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
        let started = Instant::now();
        let call = req.call();
        let result = async {
            let mut response = builder.send().await.map_err(|e| classify(&e))?;
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

fn certificate_path(certificate_id: u64, suffix: &str) -> String {
    format!("/api/v1/ssl_certificates/{certificate_id}{suffix}")
}

/// Statuses worth another attempt of an idempotent call.
fn retry_status(status: u16) -> bool {
    status >= 500 || status == 408 || status == 429
}

/// Maps a non-2xx answer to its error.
fn check_status(req: &Request, raw: Raw) -> Result<Raw, ApiError> {
    let status = StatusCode::from_u16(raw.status).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
    if status.is_success() {
        return Ok(raw);
    }
    if status.is_redirection() {
        return Err(ApiError::Redirect {
            call: req.call(),
            status: raw.status,
            location: raw
                .header("location")
                .map(|l| excerpt(l.as_bytes()))
                .unwrap_or_else(|| "(no Location)".into()),
        });
    }
    let body = ErrorBody::decode(&raw.body);
    Err(ApiError::Http {
        call: req.call(),
        status: raw.status,
        // Bodies of sign-in and prolong may hold credentials: never excerpt them.
        excerpt: if req.sensitive {
            String::new()
        } else {
            excerpt(&raw.body)
        },
        body: Box::new(body),
    })
}

/// Decodes a 2xx JSON body. For a call with side effects (an order above all) an undecodable
/// 2xx means the call was probably carried out but its result is unknown:
/// [`ApiError::OutcomeUnknown`], never repeated blindly.
fn decode<T: DeserializeOwned>(req: &Request, raw: &Raw) -> Result<T, ApiError> {
    serde_json::from_slice(&raw.body).map_err(|e| {
        // The error text names the place, not the body (bodies may hold tokens).
        let message = e.to_string();
        if req.kind != Kind::Read {
            ApiError::OutcomeUnknown {
                call: req.call(),
                reason: format!("HTTP {} with an undecodable answer: {message}", raw.status),
            }
        } else {
            ApiError::Decode {
                call: req.call(),
                status: raw.status,
                message,
            }
        }
    })
}

/// What an answer was, for messages and logs: status, content type and the beginning of the
/// body — never for answers that may carry a credential (sign-in, prolong), whose body is not
/// quoted.
fn received(req: &Request, raw: &Raw) -> String {
    let content_type = raw
        .header("content-type")
        .map(|c| excerpt(c.as_bytes()))
        .unwrap_or_else(|| "no content type".into());
    if req.sensitive {
        return format!("HTTP {} ({content_type})", raw.status);
    }
    let start = &raw.body[..raw.body.len().min(RECEIVED_EXCERPT)];
    format!(
        "HTTP {} ({content_type}) beginning {:?}",
        raw.status,
        excerpt(start)
    )
}

/// How much of an undecodable answer is quoted.
const RECEIVED_EXCERPT: usize = 120;

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

/// The file name of a `Content-Disposition` header, reduced to a safe base name.
fn disposition_filename(value: &str) -> Option<String> {
    let mut plain = None;
    let mut extended = None;
    for part in value.split(';').map(str::trim) {
        let Some((key, v)) = part.split_once('=') else {
            continue;
        };
        match key.trim().to_ascii_lowercase().as_str() {
            "filename" => plain = Some(v.trim().trim_matches('"').to_owned()),
            // RFC 5987: charset'lang'value; only percent-encoded ASCII is kept.
            "filename*" => extended = v.split('\'').nth(2).map(percent_decode_ascii),
            _ => {}
        }
    }
    let name = extended.flatten().or(plain)?;
    let base = name.rsplit(['/', '\\']).next()?.trim();
    let ok = !base.is_empty()
        && base != "."
        && base != ".."
        && !base.starts_with('.')
        && base.chars().all(|c| !c.is_control())
        && base.len() <= 255;
    ok.then(|| base.to_owned())
}

fn percent_decode_ascii(s: &str) -> Option<String> {
    let bytes = s.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == b'%' {
            let hex = s.get(i + 1..i + 3)?;
            out.push(u8::from_str_radix(hex, 16).ok()?);
            i += 3;
        } else {
            out.push(bytes[i]);
            i += 1;
        }
    }
    String::from_utf8(out).ok().filter(|s| s.is_ascii())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn base_url_must_be_https_without_credentials() {
        assert_eq!(
            normalize_base_url("https://partner.example.net/").unwrap(),
            "https://partner.example.net"
        );
        assert_eq!(
            normalize_base_url("https://h:8443/prefix/").unwrap(),
            "https://h:8443/prefix"
        );
        assert!(
            normalize_base_url("http://partner.example.net")
                .unwrap_err()
                .contains("https://")
        );
        assert!(normalize_base_url("https://u:p@h").is_err());
        assert!(normalize_base_url("https://h/?auth_token=x").is_err());
        assert!(normalize_base_url("partner.example.net").is_err());
    }

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

    #[test]
    fn redirects_are_errors_naming_the_location() {
        let req = Request::new(Method::POST, "/api/v1/order", Kind::Order, 10);
        let mut headers = HeaderMap::new();
        headers.insert(
            header::LOCATION,
            HeaderValue::from_static("https://elsewhere.example/api/v1/order"),
        );
        let raw = Raw {
            status: 301,
            headers,
            body: Vec::new(),
        };
        let Err(e) = check_status(&req, raw) else {
            panic!("a redirect was accepted");
        };
        assert_eq!(
            e.to_string(),
            "POST /api/v1/order: HTTP 301: redirect to \"https://elsewhere.example/api/v1/order\" \
             not followed (check api.base_url)"
        );
        assert!(!e.is_retryable());
    }

    #[test]
    fn backoff_is_capped_and_jittered() {
        let p = RetryPolicy {
            max_attempts: 10,
            initial_backoff: Duration::from_millis(100),
            max_backoff: Duration::from_millis(1000),
            max_elapsed: Duration::from_secs(10),
        };
        for attempt in 1..12 {
            let d = p.delay(attempt);
            let full = Duration::from_millis(100 * (1u64 << (attempt - 1))).min(p.max_backoff);
            assert!(d <= full && d >= full / 2, "attempt {attempt}: {d:?}");
        }
    }

    #[test]
    fn content_disposition_names_are_made_safe() {
        assert_eq!(
            disposition_filename(r#"attachment; filename="vendor_OSC-12.zip""#).as_deref(),
            Some("vendor_OSC-12.zip")
        );
        assert_eq!(
            disposition_filename("attachment; filename=../../etc/passwd").as_deref(),
            Some("passwd")
        );
        assert_eq!(disposition_filename(r#"attachment; filename="..""#), None);
        assert_eq!(
            disposition_filename(r#"attachment; filename=".hidden""#),
            None
        );
        assert_eq!(
            disposition_filename("attachment; filename*=UTF-8''a%20b.zip; filename=x.zip")
                .as_deref(),
            Some("a b.zip")
        );
        assert_eq!(disposition_filename("attachment"), None);
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
        client.session.lock().await.session = Some(Session {
            token: crate::api::Secret::new("t"),
            user_id: 1,
        });
        client.session.lock().await.loaded = true;
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
}

/// An HTTP date (`Sun, 06 Nov 1994 08:49:37 GMT`, RFC 9110 IMF-fixdate).
fn parse_http_date(text: &str) -> Option<time::OffsetDateTime> {
    let format = time::macros::format_description!(
        "[weekday repr:short], [day] [month repr:short] [year] [hour]:[minute]:[second] GMT"
    );
    time::PrimitiveDateTime::parse(text.trim(), format)
        .ok()
        .map(time::PrimitiveDateTime::assume_utc)
}

#[cfg(test)]
mod http_date_tests {
    use super::parse_http_date;

    #[test]
    fn reads_imf_fixdate_and_refuses_other_forms() {
        let t = parse_http_date("Sun, 06 Nov 1994 08:49:37 GMT").unwrap();
        assert_eq!(t.unix_timestamp(), 784_111_777);
        assert!(parse_http_date("Sunday, 06-Nov-94 08:49:37 GMT").is_none());
        assert!(parse_http_date("garbage").is_none());
    }
}
