//! Reissue (endpoint 12): a new certificate for the same order from a new CSR, free of charge.

use super::certificate_path;
use crate::api::client::Client;
use crate::api::error::ApiError;
use crate::api::request::Body;
use crate::api::types::{ActionResult, ReissueRequest};

impl Client {
    /// Endpoint 12, `POST /api/v1/ssl_certificates/{id}/reissue` (free). The new certificate is not
    /// ready on return: download until the serial differs. 422 `{success:false, error}`
    /// explains a rejection.
    pub async fn reissue(
        &self,
        certificate_id: u64,
        request: &ReissueRequest,
    ) -> Result<ActionResult, ApiError> {
        self.transport
            .action(
                certificate_path(certificate_id, "/reissue"),
                Body::Form(request.form_fields()),
            )
            .await
    }
}
