//! The issued certificate as archives: the CA's archive (endpoint 3) and the per-server bundle
//! (endpoint 15).

use super::certificate_path;
use crate::api::client::Client;
use crate::api::error::ApiError;
use crate::api::types::Download;

impl Client {
    /// Endpoint 3, `GET /api/v1/ssl_certificates/{id}/download`: the CA archive (ZIP). 422 while
    /// not issued (also while a reissue is processed: keep waiting).
    pub async fn download(&self, certificate_id: u64) -> Result<Download, ApiError> {
        self.transport
            .zip(certificate_path(certificate_id, "/download"))
            .await
    }

    /// Endpoint 15, `GET /api/v1/ssl_certificates/{id}/download_bundle`: the per-server ZIP bundle.
    pub async fn download_bundle(&self, certificate_id: u64) -> Result<Download, ApiError> {
        self.transport
            .zip(certificate_path(certificate_id, "/download_bundle"))
            .await
    }
}
