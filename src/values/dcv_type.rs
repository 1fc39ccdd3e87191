//! `DcvType`: how domain control is validated, as the Partner API names it.

use std::fmt;

use serde::{Deserialize, Serialize};

/// DCV method of an order item (section "OrderItem", dcv_type rules).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "SCREAMING_SNAKE_CASE")]
pub enum DcvType {
    Email,
    CnameCsrHash,
    HttpCsrHash,
    HttpsCsrHash,
    DnsTxtToken,
}

impl DcvType {
    /// The wire value, e.g. `HTTP_CSR_HASH`.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Email => "EMAIL",
            Self::CnameCsrHash => "CNAME_CSR_HASH",
            Self::HttpCsrHash => "HTTP_CSR_HASH",
            Self::HttpsCsrHash => "HTTPS_CSR_HASH",
            Self::DnsTxtToken => "DNS_TXT_TOKEN",
        }
    }

    /// Parses a wire value (`dcv_method` of the list and details calls).
    pub fn from_wire(s: &str) -> Option<Self> {
        [
            Self::Email,
            Self::CnameCsrHash,
            Self::HttpCsrHash,
            Self::HttpsCsrHash,
            Self::DnsTxtToken,
        ]
        .into_iter()
        .find(|t| t.as_str() == s)
    }
}

impl fmt::Display for DcvType {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}
