//! The Partner API endpoint as configured: the base URL's rules and the client's default time
//! limits (the configuration checks and shows them; the client applies them).

use std::time::Duration;

/// Default connect timeout.
pub(crate) const DEFAULT_CONNECT_TIMEOUT: Duration = Duration::from_secs(10);
/// Default total timeout of one request (connect, send, receive the whole body).
pub(crate) const DEFAULT_TIMEOUT: Duration = Duration::from_secs(60);
/// How long an idle connection is kept for the next request, by the Partner API client and
/// the ACME client alike. Below the shortest keep-alive
/// time servers commonly use (Apache's 5 s): a request is never sent on a connection the
/// server, or a load balancer on the way, may be closing or may have dropped without a word.
/// Such a request is lost in flight, and for an order that means an outcome nobody knows.
/// Calls that follow one another closely share a connection; one after a pause connects anew.
pub(crate) const IDLE_CONNECTION_REUSE: Duration = Duration::from_secs(4);

/// Checks an `api.base_url` and returns it without a trailing slash. Errors are sentences
/// ("must use https://").
pub(crate) fn normalize_base_url(base_url: &str) -> Result<String, String> {
    let url = reqwest::Url::parse(base_url).map_err(|e| format!("not a valid URL: {e}"))?;
    if url.scheme() != "https" {
        return Err(format!(
            "must use https:// (got {}://); plain HTTP is redirected by the service and would \
             expose credentials",
            url.scheme()
        ));
    }
    if url.host_str().is_none_or(str::is_empty) {
        return Err("has no host".into());
    }
    if !url.username().is_empty() || url.password().is_some() {
        return Err("must not carry a user name or password".into());
    }
    if url.query().is_some() || url.fragment().is_some() {
        return Err("must not carry a query or fragment".into());
    }
    Ok(url.as_str().trim_end_matches('/').to_owned())
}
