//! The session and the account: sign in (endpoint 1), the session's user ID, the balance
//! (endpoint 11).

use crate::api::client::Client;
use crate::api::error::ApiError;
use crate::api::types::Balance;

impl Client {
    /// Endpoint 1, `POST /api/v1/users/signin`: signs in now (even with a cached token), caches the
    /// new token and returns the user ID. Other calls sign in by themselves when needed.
    pub async fn sign_in(&self) -> Result<u64, ApiError> {
        Ok(self.transport.sign_in().await?.user_id)
    }

    /// The user ID of the session (signs in when there is none).
    pub async fn user_id(&self) -> Result<u64, ApiError> {
        Ok(self.transport.session().await?.user_id)
    }

    /// Endpoint 11, `GET /api/v1/billing/balance`.
    pub async fn balance(&self) -> Result<Balance, ApiError> {
        self.transport
            .json(self.transport.get("/api/v1/billing/balance"))
            .await
    }
}
