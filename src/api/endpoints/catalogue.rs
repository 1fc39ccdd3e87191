//! What can be ordered: products and prices (endpoint 2), countries, and the server software
//! entries of a product (ancillary endpoints).

use crate::api::client::Client;
use crate::api::error::ApiError;
use crate::api::types::{Country, Product, ServerSoftware};

impl Client {
    /// Endpoint 2, `GET /api/v1/products`; with `eu_prices`, `recommended_prices=EU` (end-user
    /// prices in EUR instead of partner prices).
    pub async fn products(&self, eu_prices: bool) -> Result<Vec<Product>, ApiError> {
        let mut req = self.transport.get("/api/v1/products");
        if eu_prices {
            req.query.push(("recommended_prices", "EU".into()));
        }
        self.transport.json(req).await
    }

    /// `GET /api/v1/countries` (no token needed).
    pub async fn countries(&self) -> Result<Vec<Country>, ApiError> {
        let mut req = self.transport.get("/api/v1/countries");
        req.auth = false;
        self.transport.json(req).await
    }

    /// `GET /api/v1/users/{user_id}/nomenclatures/{product_id}/ssl_server_softwares`: server
    /// software entries of a product (no token sent; the user ID is the session's).
    pub async fn ssl_server_softwares(
        &self,
        product_id: u64,
    ) -> Result<Vec<ServerSoftware>, ApiError> {
        let user_id = self.user_id().await?;
        let mut req = self.transport.get(format!(
            "/api/v1/users/{user_id}/nomenclatures/{product_id}/ssl_server_softwares"
        ));
        req.auth = false;
        self.transport.json(req).await
    }
}
