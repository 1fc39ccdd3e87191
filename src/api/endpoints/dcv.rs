//! Domain control validation: acceptable DCV addresses (endpoint 6), the DCV state of an
//! order (8), changing the method (9) and sending the emails again (10).

use reqwest::Method;

use super::certificate_path;
use crate::api::client::Client;
use crate::api::error::ApiError;
use crate::api::request::{Body, Kind, Request};
use crate::api::types::{ActionResult, DcvEmails, DcvStatus};

impl Client {
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
            self.transport.json_limit(),
        );
        req.body = Body::Form(form);
        self.transport.json(req).await
    }

    /// Endpoint 8, `GET /api/v1/ssl_certificates/{id}/dcv`: DCV state per domain, only while in
    /// progress (otherwise HTTP 422 with `certificate_status` in [`ErrorBody::Failure`](crate::api::ErrorBody::Failure)).
    pub async fn dcv_status(&self, certificate_id: u64) -> Result<DcvStatus, ApiError> {
        self.transport
            .json(self.transport.get(certificate_path(certificate_id, "/dcv")))
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
        self.transport
            .action(
                certificate_path(certificate_id, "/change_dcv"),
                Body::Form(form),
            )
            .await
    }

    /// Endpoint 10, `POST /api/v1/ssl_certificates/{id}/resend_dcv`. Refusal:
    /// [`ApiError::Refused`].
    pub async fn resend_dcv(&self, certificate_id: u64) -> Result<ActionResult, ApiError> {
        self.transport
            .action(certificate_path(certificate_id, "/resend_dcv"), Body::None)
            .await
    }
}
