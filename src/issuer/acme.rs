//! The ACME issuer (RFC 8555), on the `instant-acme` crate: the account (generated locally,
//! ECDSA P-256, registered once — with External Account Binding where the directory requires
//! it — and kept `0600`), and an order from `newOrder` to the certificate chain: the
//! authorizations' `http-01` challenges handed out as neutral [`Challenge`]s for the engine's
//! writers to publish, answered once published, the order finalized with the locally generated
//! CSR, the chain downloaded.
//!
//! Everything the directory sends is untrusted: answers are capped in size and time
//! ([`http`]), tokens and key authorizations are checked for their shape before anything is
//! written ([`ValidationFile::acme_http01`]), problem documents are quoted escaped and cut, and
//! the chain is checked against the key and names by the caller before it is installed.

mod account_bytes;
pub mod chain;
pub(crate) mod http;

pub(crate) use account_bytes::{check_account_bytes, read_account_bytes, write_account_bytes};

use std::path::{Path, PathBuf};
use std::time::Duration;

use time::OffsetDateTime;

use instant_acme::{
    Account, AccountCredentials, AuthorizationStatus, ChallengeType, ExternalAccountKey,
    Identifier, NewAccount, NewOrder, Order, OrderStatus, RetryPolicy,
};

use crate::dcv::{Challenge, HttpChallenge, ValidationFile, hook};
use crate::values::text::quote_max;

/// The account's file in its directory under the state directory.
pub const ACCOUNT_FILE: &str = "account.json";

/// Where the account of the `[acme.NAME]` CA `ca` is kept: `state_dir/acme/NAME/`.
pub(crate) fn account_dir(state_dir: &Path, ca: &str) -> PathBuf {
    state_dir.join("acme").join(ca)
}

/// Errors of the ACME issuer; each names the directory, the identifier or the file.
#[derive(Debug, thiserror::Error)]
pub enum AcmeError {
    /// The issuer cannot be set up as configured.
    #[error("ACME: {0}")]
    Config(String),
    /// The account file cannot be read or written.
    #[error("ACME account file '{}': {message}", path.display())]
    AccountFile { path: PathBuf, message: String },
    /// The directory answered with a problem document, or could not be reached.
    #[error("ACME directory {directory}: {message}")]
    Directory { directory: String, message: String },
    /// An identifier could not be validated.
    #[error("ACME validation of {identifier} failed: {message}")]
    Validation { identifier: String, message: String },
    /// The order went somewhere it should not.
    #[error("ACME order {order}: {message}")]
    Order { order: String, message: String },
    /// The CA's rate limit (`rateLimited`): nothing is asked of it before `until` (the time it
    /// gave, when it gave one).
    #[error("ACME directory {directory}: {message}")]
    RateLimited {
        directory: String,
        message: String,
        until: Option<OffsetDateTime>,
    },
}

impl AcmeError {
    /// Until when the CA asked not to be asked again (a rate limit with its time).
    pub fn retry_not_before(&self) -> Option<OffsetDateTime> {
        match self {
            Self::RateLimited { until, .. } => *until,
            _ => None,
        }
    }
}

/// An ACME CA as configured.
#[derive(Debug, Clone)]
pub struct Directory {
    /// The directory URL (`https://`; `http://` only on loopback).
    pub url: String,
    /// Contact URLs for the account (`mailto:…`).
    pub contact: Vec<String>,
    /// External Account Binding: the key id and the HMAC key, for CAs that require it.
    pub eab: Option<(String, Vec<u8>)>,
    /// An extra trust anchor for the directory's TLS (a private CA).
    pub ca_file: Option<PathBuf>,
}

/// How long an order may take from the answered challenges to the chain.
const ORDER_WAIT: Duration = Duration::from_secs(90);

/// The account of `directory`: read from `dir/account.json` when it was registered with this
/// directory before, else generated, registered and written there (`0600`, the directory
/// `0700`) before it is used.
pub async fn account(directory: &Directory, dir: &Path) -> Result<Account, AcmeError> {
    if !http::allowed_url(&directory.url) {
        return Err(AcmeError::Config(format!(
            "directory URL {} is not https:// (http:// is accepted on loopback only)",
            quote_max(&directory.url, 200)
        )));
    }
    let client = http::AcmeHttp::new(directory.ca_file.as_deref())?;
    let path = dir.join(ACCOUNT_FILE);
    let file_error = |message: String| AcmeError::AccountFile {
        path: path.clone(),
        message,
    };
    let stored = match crate::fsutil::read_private(&path, 64 * 1024) {
        Ok(bytes) => Some(bytes),
        Err(_) if !path.exists() => None,
        Err(message) => return Err(file_error(message)),
    };
    if let Some(bytes) = stored {
        let kept = parse_account_file(&bytes).map_err(file_error)?;
        if kept.directory != directory.url {
            return Err(file_error(format!(
                "registered with {}, not with the configured {}; move it aside to register anew",
                quote_max(&kept.directory, 200),
                quote_max(&directory.url, 200)
            )));
        }
        return Account::builder_with_http(Box::new(client))
            .from_credentials(kept.credentials)
            .await
            .map_err(|e| problem(&directory.url, e));
    }
    let contact: Vec<&str> = directory.contact.iter().map(String::as_str).collect();
    let eab = directory
        .eab
        .as_ref()
        .map(|(id, key)| ExternalAccountKey::new(id.clone(), key));
    let (account, credentials) = Account::builder_with_http(Box::new(client))
        .create(
            &NewAccount {
                contact: &contact,
                terms_of_service_agreed: true,
                only_return_existing: false,
            },
            directory.url.clone(),
            eab.as_ref(),
        )
        .await
        .map_err(|e| problem(&directory.url, e))?;
    let kept = KeptAccount {
        directory: directory.url.clone(),
        credentials,
    };
    let text = serde_json::to_vec(&kept).map_err(|e| file_error(e.to_string()))?;
    crate::fsutil::ensure_private_dir(dir, 0o700)
        .map_err(|e| file_error(format!("could not create its directory: {e}")))?;
    crate::fsutil::write_atomic(&path, &text, 0o600).map_err(|e| file_error(e.to_string()))?;
    Ok(account)
}

/// Reads an account file's bytes (hostile: the file may have been edited or cut short); the
/// reason as text when they are not one.
fn parse_account_file(bytes: &[u8]) -> Result<KeptAccount, String> {
    let kept: KeptAccount =
        serde_json::from_slice(bytes).map_err(|e| format!("not an account file ({e})"))?;
    if !http::allowed_url(&kept.directory) {
        return Err(format!(
            "names the directory {}, not an https:// URL",
            quote_max(&kept.directory, 200)
        ));
    }
    Ok(kept)
}

/// The directory an account file was registered with, when its bytes are an account file
/// (what [`account`] reads first; for the fuzz target).
pub fn account_file_directory(bytes: &[u8]) -> Result<String, String> {
    parse_account_file(bytes).map(|k| k.directory)
}

/// Writes an account registered elsewhere (its URL and its ECDSA P-256 key as PKCS#8 DER) to
/// `dir/account.json` (`0600`, the directory `0700`) for the directory `directory_url`, in the
/// form [`account`] reads. The key is never quoted in an error.
pub(crate) fn write_account(
    dir: &Path,
    directory_url: &str,
    account_url: &str,
    key_pkcs8: &[u8],
) -> Result<(), AcmeError> {
    use base64::Engine;
    let path = dir.join(ACCOUNT_FILE);
    let file_error = |message: String| AcmeError::AccountFile {
        path: path.clone(),
        message,
    };
    let credentials: AccountCredentials = serde_json::from_value(serde_json::json!({
        "id": account_url,
        "key_pkcs8": base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(key_pkcs8),
        "directory": directory_url,
    }))
    .map_err(|_| file_error("the account's key is not PKCS#8".into()))?;
    let kept = KeptAccount {
        directory: directory_url.to_owned(),
        credentials,
    };
    let text = serde_json::to_vec(&kept).map_err(|e| file_error(e.to_string()))?;
    crate::fsutil::ensure_private_dir(dir, 0o700)
        .map_err(|e| file_error(format!("could not create its directory: {e}")))?;
    crate::fsutil::write_atomic(&path, &text, 0o600).map_err(|e| file_error(e.to_string()))
}

/// What the account file holds: the directory it was registered with and the credentials
/// (the account URL and its private key).
#[derive(serde::Serialize, serde::Deserialize)]
struct KeptAccount {
    directory: String,
    credentials: AccountCredentials,
}

/// An order placed, with what must be published before its challenges are answered.
pub struct Placed {
    /// The order (its URL is [`Order::url`]: journaled, it resumes the same order).
    pub order: Order,
    /// The files to publish, one per authorization still pending.
    pub challenges: Vec<Challenge>,
}

/// How the names of an order are validated.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Method {
    /// `http-01`: a file under `/.well-known/acme-challenge/` of each name.
    Http,
    /// `dns-01`: a TXT record `_acme-challenge.<name>` (through the DNS hook); the only one
    /// for a wildcard.
    Dns,
}

impl Method {
    fn challenge_type(self) -> ChallengeType {
        match self {
            Self::Http => ChallengeType::Http01,
            Self::Dns => ChallengeType::Dns01,
        }
    }

    fn name(self) -> &'static str {
        match self {
            Self::Http => "http-01",
            Self::Dns => "dns-01",
        }
    }
}

/// Places an order for `domains` and reads what each pending authorization asks for by
/// `method`. A wildcard needs [`Method::Dns`].
pub async fn place(
    account: &Account,
    domains: &[String],
    method: Method,
) -> Result<Placed, AcmeError> {
    place_with(account, domains, method, &Options::default()).await
}

/// What a new order may carry beyond its names.
#[derive(Debug, Clone, Default)]
pub struct Options {
    /// The profile to ask for (checked against the directory's with [`check_profile`]).
    pub profile: Option<String>,
    /// The certificate this order renews (ARI's `replaces`, when the directory offers
    /// Renewal Information): its DER.
    pub replaces: Option<Vec<u8>>,
}

/// [`place`] with a profile and the certificate the order replaces.
pub async fn place_with(
    account: &Account,
    domains: &[String],
    method: Method,
    options: &Options,
) -> Result<Placed, AcmeError> {
    if method == Method::Http
        && let Some(wildcard) = domains.iter().find(|d| d.starts_with("*."))
    {
        return Err(AcmeError::Validation {
            identifier: quote_max(wildcard, 253),
            message: "a wildcard can be validated by dns-01 only (configure a dns_hook)".into(),
        });
    }
    let identifiers: Vec<Identifier> = domains.iter().cloned().map(Identifier::Dns).collect();
    if let Some(profile) = &options.profile {
        check_profile(account, profile)?;
    }
    let plain = || {
        let order = NewOrder::new(&identifiers);
        match &options.profile {
            Some(profile) => order.profile(profile),
            None => order,
        }
    };
    let replaced = options
        .replaces
        .as_deref()
        .map(rustls_pki_types::CertificateDer::from);
    // A certificate without an Authority Key Identifier (self-signed, or from a CA that
    // leaves it out, as an imported one may be) has no ARI identifier: the order goes
    // without `replaces`, which is optional.
    let replaces = replaced.as_ref().and_then(|c| {
        instant_acme::CertificateIdentifier::try_from(c)
            .map_err(|e| {
                tracing::info!(
                    "the order names no replaced certificate: it has no identifier ({e})"
                );
            })
            .ok()
    });
    let answer = match replaces {
        // Without Renewal Information the directory knows no `replaces`: the crate says so
        // before anything is sent, and the order goes without it.
        Some(id) => match account.new_order(&plain().replaces(id)).await {
            Err(instant_acme::Error::Unsupported(_)) => account.new_order(&plain()).await,
            other => other,
        },
        None => account.new_order(&plain()).await,
    };
    let mut order = answer.map_err(|e| problem("newOrder", e))?;
    let challenges = pending_challenges(&mut order, domains, method).await?;
    Ok(Placed { order, challenges })
}

/// The order at `url` (journaled when it was placed), with what its pending authorizations
/// still ask for: a run stopped at any step goes on with the same order.
pub async fn resume(
    account: &Account,
    url: &str,
    domains: &[String],
    method: Method,
) -> Result<Placed, AcmeError> {
    let mut order = account
        .order(url.to_owned())
        .await
        .map_err(|e| problem(url, e))?;
    let challenges = pending_challenges(&mut order, domains, method).await?;
    Ok(Placed { order, challenges })
}

/// The renewal window a directory with Renewal Information (RFC 9773) suggests for a
/// certificate, and when to ask again.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Window {
    /// Renew from here…
    pub start: OffsetDateTime,
    /// …and before here.
    pub end: OffsetDateTime,
    /// The CA's page explaining the window (e.g. after an incident), quoted escaped.
    pub explanation: Option<String>,
    /// Ask again no sooner than this (`Retry-After`, at least a minute, at most a day).
    pub retry_after: Duration,
}

/// Shortest and longest wait before asking for a window again, whatever `Retry-After` says.
const RETRY_AFTER_BOUNDS: (Duration, Duration) =
    (Duration::from_secs(60), Duration::from_secs(24 * 3600));

/// The window the directory suggests for the certificate `leaf_der`; `None` when the directory
/// offers no Renewal Information (the agent's own due rule then applies).
pub async fn renewal_window(
    account: &Account,
    leaf_der: &[u8],
) -> Result<Option<Window>, AcmeError> {
    let certificate = rustls_pki_types::CertificateDer::from(leaf_der);
    let id = instant_acme::CertificateIdentifier::try_from(&certificate).map_err(|e| {
        AcmeError::Config(format!(
            "the certificate has no identifier for Renewal Information: {e}"
        ))
    })?;
    let (info, retry_after) = match account.renewal_info(&id).await {
        Ok(answer) => answer,
        Err(instant_acme::Error::Unsupported(_)) => return Ok(None),
        Err(e) => return Err(problem("renewalInfo", e)),
    };
    let window = info.suggested_window;
    if window.end <= window.start {
        return Err(AcmeError::Directory {
            directory: "renewalInfo".into(),
            message: format!(
                "a renewal window that ends ({}) before it starts ({})",
                crate::clock::rfc3339(window.end),
                crate::clock::rfc3339(window.start)
            ),
        });
    }
    Ok(Some(Window {
        start: window.start,
        end: window.end,
        explanation: info.explanation_url.map(|u| quote_max(&u, 200)),
        // `Retry-After` is whole seconds; the crate hands it back less the time since.
        retry_after: Duration::from_secs(retry_after.as_secs_f64().round() as u64)
            .clamp(RETRY_AFTER_BOUNDS.0, RETRY_AFTER_BOUNDS.1),
    }))
}

/// When to renew inside `window` (RFC 9773, section 4.2): a time chosen uniformly in the
/// window by `fraction` (in `[0, 1)`, random per certificate so that a fleet of certificates
/// spreads over it); `now` when the window has already passed.
pub fn renew_at(window: &Window, now: OffsetDateTime, fraction: f64) -> OffsetDateTime {
    if window.end <= now {
        return now;
    }
    let start = window.start.max(now);
    let fraction = if fraction.is_finite() {
        fraction.clamp(0.0, 0.999_999)
    } else {
        0.0
    };
    let span = (window.end - start).as_seconds_f64();
    start
        .checked_add(time::Duration::saturating_seconds_f64(span * fraction))
        .map_or(window.end, |at| at.min(window.end))
}

/// Whether the directory advertises `profile`; otherwise a configuration error naming the
/// ones it does advertise.
pub fn check_profile(account: &Account, profile: &str) -> Result<(), AcmeError> {
    let advertised: Vec<String> = account.profiles().map(|p| p.name.to_owned()).collect();
    if advertised.iter().any(|p| p == profile) {
        return Ok(());
    }
    Err(AcmeError::Config(format!(
        "profile {} is not offered by the directory ({})",
        quote_max(profile, 60),
        if advertised.is_empty() {
            "it advertises no profiles".to_owned()
        } else {
            format!(
                "it offers: {}",
                advertised
                    .iter()
                    .map(|p| quote_max(p, 60))
                    .collect::<Vec<_>>()
                    .join(", ")
            )
        }
    )))
}

/// Revokes the certificate `leaf_der` issued through `account` (RFC 8555, section 7.6), with
/// a CRL reason code when given.
pub async fn revoke(
    account: &Account,
    leaf_der: &[u8],
    reason: Option<instant_acme::RevocationReason>,
) -> Result<(), AcmeError> {
    let certificate = rustls_pki_types::CertificateDer::from(leaf_der);
    account
        .revoke(&instant_acme::RevocationRequest {
            certificate: &certificate,
            reason,
        })
        .await
        .map_err(|e| problem("revokeCert", e))
}

/// The `http-01` file of every authorization of `order` still pending, each for the ordered
/// name it validates (an authorization for a name not ordered is refused).
async fn pending_challenges(
    order: &mut Order,
    domains: &[String],
    method: Method,
) -> Result<Vec<Challenge>, AcmeError> {
    let order_url = order.url().to_owned();
    let mut out = Vec::new();
    let mut authorizations = order.authorizations();
    while let Some(authz) = authorizations.next().await {
        let mut authz = authz.map_err(|e| problem(&order_url, e))?;
        if authz.status != AuthorizationStatus::Pending {
            continue;
        }
        let identifier = identifier_text(authz.identifier().identifier);
        // A wildcard's authorization names the base domain, marked as a wildcard.
        let wildcard = authz.identifier().wildcard;
        let ordered = match &authz.identifier().identifier {
            Identifier::Dns(name) => {
                let want = if wildcard {
                    format!("*.{name}")
                } else {
                    name.clone()
                };
                domains
                    .iter()
                    .find(|d| d.eq_ignore_ascii_case(&want))
                    .cloned()
            }
            _ => None,
        };
        let Some(domain) = ordered else {
            return Err(AcmeError::Validation {
                identifier,
                message: "the CA asks to validate a name that was not ordered".into(),
            });
        };
        let Some(challenge) = authz.challenge(method.challenge_type()) else {
            return Err(AcmeError::Validation {
                identifier,
                message: format!("the CA offers no {} challenge for it", method.name()),
            });
        };
        let key_authorization = challenge.key_authorization();
        let refused = |e: crate::dcv::DcvError| AcmeError::Validation {
            identifier: identifier.clone(),
            message: format!("the CA's challenge was refused: {e}"),
        };
        out.push(match method {
            Method::Http => Challenge::Http(HttpChallenge {
                file: ValidationFile::acme_http01(&challenge.token, key_authorization.as_str())
                    .map_err(refused)?,
                domains: vec![domain],
            }),
            Method::Dns => Challenge::Dns(
                hook::acme_txt_record(&domain, &key_authorization.dns_value()).map_err(refused)?,
            ),
        });
    }
    Ok(out)
}

/// Answers every pending challenge of `order` (their files published), waits for the order to
/// be ready, finalizes it with `csr_der` and returns the certificate chain (PEM).
pub async fn finish(
    order: &mut Order,
    csr_der: &[u8],
    method: Method,
) -> Result<String, AcmeError> {
    let order_url = order.url().to_owned();
    let policy = RetryPolicy::new()
        .initial_delay(Duration::from_millis(250))
        .timeout(ORDER_WAIT);
    // A resumed order may be further on: finalized (its certificate is fetched) or ready.
    match order.state().status {
        OrderStatus::Valid | OrderStatus::Processing => {
            return order
                .poll_certificate(&policy)
                .await
                .map_err(|e| problem(&order_url, e));
        }
        OrderStatus::Invalid => return Err(invalid_order(order, "invalid".into()).await),
        OrderStatus::Ready | OrderStatus::Pending => {}
    }
    let mut authorizations = order.authorizations();
    while let Some(authz) = authorizations.next().await {
        let mut authz = authz.map_err(|e| problem(&order_url, e))?;
        if authz.status != AuthorizationStatus::Pending {
            continue;
        }
        let identifier = identifier_text(authz.identifier().identifier);
        let Some(mut challenge) = authz.challenge(method.challenge_type()) else {
            return Err(AcmeError::Validation {
                identifier,
                message: format!("the CA offers no {} challenge for it", method.name()),
            });
        };
        challenge
            .set_ready()
            .await
            .map_err(|e| problem(&identifier, e))?;
    }
    match order.poll_ready(&policy).await {
        Ok(OrderStatus::Ready) => {}
        Ok(status) => return Err(invalid_order(order, format!("{status:?}")).await),
        Err(instant_acme::Error::Api(p)) => {
            return Err(invalid_order(order, problem_text(&p)).await);
        }
        Err(e) => return Err(problem(&order_url, e)),
    }
    order
        .finalize_csr(csr_der)
        .await
        .map_err(|e| problem(&order_url, e))?;
    order
        .poll_certificate(&policy)
        .await
        .map_err(|e| problem(&order_url, e))
}

/// Why an order is not ready: what the order says (`why`) and each failed authorization's
/// problem, by identifier (read again from the CA).
async fn invalid_order(order: &mut Order, why: String) -> AcmeError {
    let order_url = order.url().to_owned();
    let mut failures = Vec::new();
    let mut authorizations = order.authorizations();
    while let Some(Ok(mut authz)) = authorizations.next().await {
        let Ok(state) = authz.refresh().await else {
            continue;
        };
        if state.status == AuthorizationStatus::Valid {
            continue;
        }
        let identifier = identifier_text(state.identifier().identifier);
        let reason = state
            .challenges
            .iter()
            .find_map(|c| c.error.as_ref())
            .map_or_else(|| format!("{:?}", state.status), problem_text);
        failures.push(format!("{identifier}: {reason}"));
    }
    AcmeError::Order {
        order: quote_max(&order_url, 200),
        message: if failures.is_empty() {
            format!("not ready: {why}")
        } else {
            format!("not ready: {}", failures.join("; "))
        },
    }
}

fn identifier_text(id: &Identifier) -> String {
    match id {
        Identifier::Dns(name) => quote_max(name, 253),
        other => quote_max(&format!("{other:?}"), 253),
    }
}

/// An error of the directory `at`, with the problem document quoted escaped.
fn problem(at: &str, e: instant_acme::Error) -> AcmeError {
    let message = match &e {
        instant_acme::Error::Api(p) => problem_text(p),
        instant_acme::Error::Timeout(_) => "no answer in time".to_owned(),
        other => quote_max(&other.to_string(), 400),
    };
    if let instant_acme::Error::Api(p) = &e
        && problem_kind(p) == "rateLimited"
    {
        return AcmeError::RateLimited {
            directory: quote_max(at, 200),
            message,
            until: p.detail.as_deref().and_then(retry_after_in),
        };
    }
    AcmeError::Directory {
        directory: quote_max(at, 200),
        message,
    }
}

/// The problem's type without the ACME namespace (`rateLimited`, `caa`, ...).
fn problem_kind(p: &instant_acme::Problem) -> &str {
    p.r#type
        .as_deref()
        .map(|t| t.trim_start_matches("urn:ietf:params:acme:error:"))
        .unwrap_or("problem")
}

/// The time a rate limit's detail names (`retry after 2026-11-28 17:00:00 UTC`, or an RFC 3339
/// time), as Let's Encrypt and Boulder write it; at most a week ahead is believed.
fn retry_after_in(detail: &str) -> Option<OffsetDateTime> {
    let lower = detail.to_ascii_lowercase();
    let at = lower.find("retry after ")? + "retry after ".len();
    let rest = detail.get(at..)?.trim_start();
    let rfc3339 = rest.split([' ', ',', ';', ')']).next().unwrap_or("");
    let parsed = OffsetDateTime::parse(
        rfc3339.trim_end_matches('.'),
        &time::format_description::well_known::Rfc3339,
    )
    .ok()
    .or_else(|| {
        // `2026-11-28 17:00:00 UTC`
        let mut words = rest.split_whitespace();
        let text = format!(
            "{}T{}Z",
            words.next()?,
            words.next()?.trim_end_matches(['.', ','])
        );
        OffsetDateTime::parse(&text, &time::format_description::well_known::Rfc3339).ok()
    })?;
    let now = OffsetDateTime::now_utc();
    (parsed > now && parsed - now <= time::Duration::days(7)).then_some(parsed)
}

/// What an operator does about a problem of `kind`.
fn problem_hint(kind: &str) -> Option<&'static str> {
    Some(match kind {
        "rateLimited" => {
            "the CA's rate limit: the certificate is not tried again before the time it gave"
        }
        "caa" => {
            "the CAA records of the name do not allow this CA: add an `issue` record naming it"
        }
        "rejectedIdentifier" => "the CA does not issue for this name (its policy)",
        "unauthorized" | "incorrectResponse" | "connection" => {
            "the CA could not fetch the validation: check that the name points to this host and that port 80 serves the web root (or the DNS record, for dns-01)"
        }
        "dns" => "the CA could not resolve the name: check its DNS records",
        "externalAccountRequired" => {
            "the CA requires External Account Binding: set eab_kid and eab_hmac_file"
        }
        "badCSR" => "the CA refused the request's key or names",
        _ => return None,
    })
}

/// `type: detail` of a problem document, escaped and cut, with its subproblems' identifiers.
fn problem_text(p: &instant_acme::Problem) -> String {
    let kind = problem_kind(p);
    let detail = p.detail.as_deref().unwrap_or("(no detail)");
    let mut text = format!("{}: {}", quote_max(kind, 60), quote_max(detail, 300));
    if let Some(hint) = problem_hint(kind) {
        text.push_str(&format!(" ({hint})"));
    }
    for sub in p.subproblems.iter().take(10) {
        if let Some(id) = &sub.identifier {
            text.push_str(&format!(
                "; {}: {}",
                identifier_text(id),
                quote_max(sub.detail.as_deref().unwrap_or("(no detail)"), 200)
            ));
        }
    }
    text
}

#[cfg(test)]
mod tests {
    use super::*;
    use time::macros::datetime;

    fn window(start: OffsetDateTime, end: OffsetDateTime) -> Window {
        Window {
            start,
            end,
            explanation: None,
            retry_after: Duration::from_secs(3600),
        }
    }

    #[test]
    fn the_renewal_time_is_inside_the_window_and_spread_over_it() {
        let now = datetime!(2027-03-01 00:00 UTC);
        let w = window(
            datetime!(2027-03-10 00:00 UTC),
            datetime!(2027-03-12 00:00 UTC),
        );
        assert_eq!(renew_at(&w, now, 0.0), w.start);
        assert_eq!(renew_at(&w, now, 0.5), datetime!(2027-03-11 00:00 UTC));
        let last = renew_at(&w, now, 1.0);
        assert!(
            last < w.end && last > datetime!(2027-03-11 23:59 UTC),
            "{last}"
        );
        // Fractions out of range (a broken random source) stay inside.
        assert_eq!(renew_at(&w, now, -3.0), w.start);
        assert!(renew_at(&w, now, 7.0) < w.end);
        assert!(renew_at(&w, now, f64::NAN) >= w.start);
    }

    #[test]
    fn a_rate_limit_names_its_time_and_garbage_names_none() {
        let soon = OffsetDateTime::now_utc() + time::Duration::hours(2);
        let soon = soon.replace_nanosecond(0).unwrap();
        let fmt = time::format_description::parse("[year]-[month]-[day] [hour]:[minute]:[second]")
            .unwrap();
        let lets_encrypt = format!(
            "too many certificates (5) already issued for this exact set of identifiers in the \
             last 168h0m0s, retry after {} UTC: see https://letsencrypt.org/docs/rate-limits/",
            soon.format(&fmt).unwrap()
        );
        assert_eq!(retry_after_in(&lets_encrypt), Some(soon));
        let rfc = format!(
            "slow down; retry after {}.",
            soon.format(&time::format_description::well_known::Rfc3339)
                .unwrap()
        );
        assert_eq!(retry_after_in(&rfc), Some(soon));
        for garbage in [
            "retry after",
            "retry after tomorrow",
            "retry after 9999-12-31 23:59:59 UTC",
            "retry after 2001-01-01 00:00:00 UTC",
            "no time here",
            "retry after \u{1b}[31m",
        ] {
            assert_eq!(retry_after_in(garbage), None, "{garbage:?}");
        }
        assert!(problem_hint("caa").is_some_and(|h| h.contains("CAA")));
        assert_eq!(problem_hint("serverInternal"), None);
    }

    #[test]
    fn a_window_already_open_or_passed_renews_from_now() {
        let w = window(
            datetime!(2027-03-10 00:00 UTC),
            datetime!(2027-03-12 00:00 UTC),
        );
        let inside = datetime!(2027-03-11 00:00 UTC);
        assert_eq!(renew_at(&w, inside, 0.0), inside);
        assert!(renew_at(&w, inside, 0.99) < w.end);
        let after = datetime!(2027-04-01 00:00 UTC);
        assert_eq!(renew_at(&w, after, 0.5), after);
        // A window at the limits of time does not panic.
        let far = window(OffsetDateTime::UNIX_EPOCH, datetime!(9999-12-31 23:59 UTC));
        assert!(renew_at(&far, OffsetDateTime::UNIX_EPOCH, 0.999) <= far.end);
    }
}
