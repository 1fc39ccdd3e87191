//! Orders and certificates: the billed order (endpoint 5), the list (endpoint 7, with its
//! pages and its deprecated path), status (4), details (14), cancellation (13) and the
//! prolongation (16).

use reqwest::Method;

use super::certificate_path;
use crate::api::answer::decode;
use crate::api::client::Client;
use crate::api::error::ApiError;
use crate::api::request::{Body, Kind, Request};
use crate::api::types::{
    ActionResult, Certificate, CertificateDetails, CertificatePage, CertificateStatus, ListScope,
    OrderRequest, OrderResponse, Pagination, Prolongation,
};

/// Most pages [`Client::list_all`] reads (50 certificates each).
const MAX_PAGES: u32 = 10_000;
/// Certificates per page of the list call ("page size: 50 certificates").
pub(crate) const PAGE_SIZE: usize = 50;

impl Client {
    /// Endpoint 4, `GET /api/v1/ssl_certificates/{id}/status`. Poll at most once every 5 minutes.
    pub async fn status(&self, certificate_id: u64) -> Result<CertificateStatus, ApiError> {
        self.transport
            .json(
                self.transport
                    .get(certificate_path(certificate_id, "/status")),
            )
            .await
    }

    /// Endpoint 5, `POST /api/v1/order`: a new **billed** order. Never repeated by the client: a
    /// lost answer is [`ApiError::OutcomeUnknown`] (reconcile from the list), a connection that
    /// could not be made is [`ApiError::Transport`] with [`TransportKind::Connect`](crate::api::TransportKind::Connect).
    pub async fn order(&self, order: &OrderRequest) -> Result<OrderResponse, ApiError> {
        let body = serde_json::to_vec(order)
            .map_err(|e| ApiError::Config(format!("cannot encode the order: {e}")))?;
        let mut req = Request::new(
            Method::POST,
            "/api/v1/order",
            Kind::Order,
            self.transport.json_limit(),
        );
        req.body = Body::Json(body);
        self.transport.json(req).await
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
        self.transport
            .json(self.transport.get("/api/v1/ssl_certificates"))
            .await
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

    /// Endpoint 13, `POST /api/v1/ssl_certificates/{id}/cancel`: requests cancellation (not
    /// instant). "Cannot cancel a certificate that was issued more than 28 days ago" and "already
    /// cancelled" come back as [`ApiError::Refused`].
    pub async fn cancel(&self, certificate_id: u64) -> Result<ActionResult, ApiError> {
        self.transport
            .action(certificate_path(certificate_id, "/cancel"), Body::None)
            .await
    }

    /// Endpoint 14, `GET /api/v1/ssl_certificates/{id}`: details (follow `replacement_id` after a
    /// reissue that created a new ID).
    pub async fn details(&self, certificate_id: u64) -> Result<CertificateDetails, ApiError> {
        self.transport
            .json(self.transport.get(certificate_path(certificate_id, "")))
            .await
    }

    /// Endpoint 16, `POST /api/v1/ssl_certificates/{id}/prolong`: prepares the renewal order (not
    /// billed) and returns its token, a credential. Repeated calls return the same token.
    pub async fn prolong(&self, certificate_id: u64) -> Result<Prolongation, ApiError> {
        let mut req = Request::new(
            Method::POST,
            certificate_path(certificate_id, "/prolong"),
            Kind::Write,
            self.transport.json_limit(),
        );
        req.sensitive = true;
        self.transport.json(req).await
    }

    /// One page of the list at `path` (the list's own or its deprecated path) with the decoded
    /// `X-Pagination` header.
    async fn list_at(
        &self,
        path: String,
        page: u32,
        scope: Option<ListScope>,
        q: Option<&str>,
    ) -> Result<CertificatePage, ApiError> {
        let mut req = self.transport.get(path);
        req.query.push(("page", page.max(1).to_string()));
        if let Some(s) = scope {
            req.query.push(("scope", s.as_str().into()));
        }
        if let Some(q) = q {
            req.query.push(("q", q.into()));
        }
        self.transport
            .execute_parsed(&req, |raw| {
                let pagination = match raw.header("x-pagination") {
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
}
