//! Wire models of certificates: states and pending actions, status, the list with its
//! pagination, details, and a downloaded archive.

use std::collections::BTreeMap;
use std::fmt;

use serde::{Deserialize, Serialize};

use super::{lenient_bool, null_as_default};
use crate::values::{Decimal, Secret};

/// A certificate state (section "States and transitions").
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum CertificateState {
    New,
    InProgress,
    Issued,
    Expired,
    Annulled,
    WaitingForApproval,
    /// A CA state that maps to none of the above.
    Other,
}

impl CertificateState {
    pub fn as_str(self) -> &'static str {
        match self {
            Self::New => "new",
            Self::InProgress => "in_progress",
            Self::Issued => "issued",
            Self::Expired => "expired",
            Self::Annulled => "annulled",
            Self::WaitingForApproval => "waiting_for_approval",
            Self::Other => "other",
        }
    }

    fn from_wire(s: &str) -> Option<Self> {
        [
            Self::New,
            Self::InProgress,
            Self::Issued,
            Self::Expired,
            Self::Annulled,
            Self::WaitingForApproval,
            Self::Other,
        ]
        .into_iter()
        .find(|t| t.as_str() == s)
    }

    /// States in which polling stops ("stop once the state is issued, expired or annulled").
    pub fn is_final(self) -> bool {
        matches!(self, Self::Issued | Self::Expired | Self::Annulled)
    }
}

/// An action pending on a certificate, shown as a suffix of the state code.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum PendingAction {
    /// `_pending_cancel`
    Cancel,
    /// `_pending_reissuing`
    Reissuing,
}

/// A state code as sent: `issued`, or with a pending suffix, e.g. `issued_pending_reissuing`
/// ("The status value of the list and details calls gets a suffix while an action is pending").
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(transparent)]
pub struct StateCode(pub String);

impl StateCode {
    /// The state without its pending suffix; `None` for a value the document does not list.
    pub fn state(&self) -> Option<CertificateState> {
        let base = match self.pending() {
            Some(PendingAction::Cancel) => self.0.trim_end_matches("_pending_cancel"),
            Some(PendingAction::Reissuing) => self.0.trim_end_matches("_pending_reissuing"),
            None => &self.0,
        };
        CertificateState::from_wire(base)
    }

    /// The pending action, if the code carries a suffix.
    pub fn pending(&self) -> Option<PendingAction> {
        if self.0.ends_with("_pending_cancel") {
            Some(PendingAction::Cancel)
        } else if self.0.ends_with("_pending_reissuing") {
            Some(PendingAction::Reissuing)
        } else {
            None
        }
    }

    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl fmt::Display for StateCode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

/// The reserved `client` object of a status (always status `new`, empty description).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ClientStatus {
    pub status: Option<String>,
    pub description: Option<String>,
}

/// CertificateStatus (section "CertificateStatus"), answer of the status call.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct CertificateStatus {
    /// State (the status call sends it without a pending suffix).
    pub certificate: Option<StateCode>,
    #[serde(default)]
    pub client: Option<ClientStatus>,
}

/// `status` of a list element: code and description carry the same state value.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ListStatus {
    pub code: Option<StateCode>,
    pub description: Option<String>,
}

/// Certificate (section "Certificate (element of the list response)").
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Certificate {
    /// Certificate ID.
    pub internal_number: u64,
    /// CA order number (an integer here, a string in the details call).
    pub external_number: Option<i64>,
    #[serde(default, deserialize_with = "null_as_default")]
    pub status: ListStatus,
    /// Product name.
    pub name: String,
    /// Common name.
    pub domain_name: Option<String>,
    /// Additional domains.
    pub domain_names: Option<Vec<String>>,
    pub duration_in_years: Option<u32>,
    pub public_comment: Option<String>,
    pub valid_from: Option<String>,
    pub valid_to: Option<String>,
    /// Days, for family S multi-year subscriptions.
    pub subscription_duration: Option<u32>,
    pub subscription_valid_from: Option<String>,
    pub subscription_valid_to: Option<String>,
    pub paid: Option<bool>,
    /// Net, decimal as string.
    pub price: Option<Decimal>,
    pub currency: Option<String>,
    /// Order reference token.
    pub token: Option<String>,
    /// Token of the prepared renewal order: a credential (masked in Debug and Serialize).
    pub prolongation_token: Option<Secret>,
    /// ID of the certificate this one renews.
    pub prolonged_id: Option<u64>,
    #[serde(default)]
    pub prolonged: bool,
    #[serde(default)]
    pub legacy_reissue: bool,
    pub dcv_method: Option<String>,
    /// File content for file-based methods; TXT value for DNS_TXT_TOKEN.
    pub dcv_content: Option<String>,
    pub all_validation_emails: Option<Vec<String>>,
    pub all_domains: Option<Vec<String>>,
}

/// Scope filter of the list call (only with `page`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ListScope {
    ApiIssued,
    ApiInProgress,
    ApiAnnulled,
}

impl ListScope {
    pub fn as_str(self) -> &'static str {
        match self {
            Self::ApiIssued => "api_issued",
            Self::ApiInProgress => "api_in_progress",
            Self::ApiAnnulled => "api_annulled",
        }
    }
}

impl std::str::FromStr for ListScope {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        [Self::ApiIssued, Self::ApiInProgress, Self::ApiAnnulled]
            .into_iter()
            .find(|x| x.as_str() == s)
            .ok_or_else(|| {
                format!(
                    "unknown scope {s:?} (expected api_issued, api_in_progress or api_annulled)"
                )
            })
    }
}

/// The JSON object of the `X-Pagination` header (section "7. List certificates").
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Pagination {
    pub total: Option<u64>,
    pub total_pages: Option<u64>,
    #[serde(default, deserialize_with = "lenient_bool")]
    pub first_page: Option<bool>,
    #[serde(default, deserialize_with = "lenient_bool")]
    pub last_page: Option<bool>,
    pub previous_page: Option<u64>,
    pub next_page: Option<u64>,
    #[serde(default, deserialize_with = "lenient_bool")]
    pub out_of_bounds: Option<bool>,
    pub offset: Option<u64>,
}

/// One page of the list call.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct CertificatePage {
    pub certificates: Vec<Certificate>,
    /// Decoded `X-Pagination`; `None` when the header is absent.
    pub pagination: Option<Pagination>,
}

/// `status` of the details call: `certificate` carries the state with its pending suffix.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct DetailsStatus {
    pub certificate: Option<StateCode>,
    #[serde(default)]
    pub client: Option<ClientStatus>,
}

/// CertificateDetails (section "CertificateDetails"): the stable fields only.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct CertificateDetails {
    pub id: u64,
    pub status: DetailsStatus,
    /// CA order number (a string here, an integer in the list); null until it reaches the CA.
    pub external_number: Option<String>,
    pub common_name: String,
    /// As entered, separated by commas or line breaks.
    #[serde(default, deserialize_with = "null_as_default")]
    pub additional_domains: String,
    #[serde(default, deserialize_with = "null_as_default")]
    pub all_domains: Vec<String>,
    pub valid_from: Option<String>,
    pub valid_to: Option<String>,
    pub subscription_duration: Option<u32>,
    pub subscription_valid_from: Option<String>,
    pub subscription_valid_to: Option<String>,
    /// Latest replacement after a reissue that created a new ID.
    pub replacement_id: Option<u64>,
    pub prolonged_id: Option<u64>,
    pub dcv_method: String,
    pub dcv_content: Option<String>,
    /// For family S ordered with an alternative method it holds the method name.
    pub validation_email: String,
    #[serde(default, deserialize_with = "null_as_default")]
    pub additional_validation_emails: BTreeMap<String, String>,
    /// PEM CSR of the current certificate.
    pub csr: String,
    pub nomenclature_id: u64,
    pub name: String,
    /// Amount due (a JSON number, VAT included where it applies); null when unknown.
    pub price: Option<Decimal>,
    pub price_includes_vat: bool,
    pub currency: String,
    /// `paid`, `unpaid`, `not_payable`.
    pub payment_status: String,
    pub unpaid: bool,
}

impl CertificateDetails {
    /// The additional domains as a list (the field separates them by commas or line breaks).
    pub fn additional_domain_list(&self) -> Vec<String> {
        self.additional_domains
            .split([',', '\n', '\r'])
            .map(str::trim)
            .filter(|s| !s.is_empty())
            .map(str::to_owned)
            .collect()
    }
}

/// A downloaded archive (download and download-bundle calls).
#[derive(Clone, PartialEq, Eq)]
pub struct Download {
    /// File name from `Content-Disposition`, reduced to a safe base name (no directories,
    /// no control characters, not `.`/`..`); `None` when absent or unusable.
    pub filename: Option<String>,
    pub content_type: Option<String>,
    pub bytes: Vec<u8>,
}

impl fmt::Debug for Download {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Download")
            .field("filename", &self.filename)
            .field("content_type", &self.content_type)
            .field("len", &self.bytes.len())
            .finish()
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;
    use crate::api::types::parse_api_date;
    use crate::api::types::tests::de;

    // Section "CertificateStatus".
    #[test]
    fn certificate_status() {
        let s: CertificateStatus = de(json!({
            "certificate": "in_progress", "client": {"status": "new", "description": ""}
        }));
        let code = s.certificate.unwrap();
        assert_eq!(code.state(), Some(CertificateState::InProgress));
        assert_eq!(code.pending(), None);
        let s: CertificateStatus = de(json!({"certificate": null, "client": {}}));
        assert_eq!(s.certificate, None);
    }

    // Section "States and transitions": pending suffixes.
    #[test]
    fn state_codes_with_pending_suffix() {
        let c = StateCode("issued_pending_reissuing".into());
        assert_eq!(c.state(), Some(CertificateState::Issued));
        assert_eq!(c.pending(), Some(PendingAction::Reissuing));
        let c = StateCode("in_progress_pending_cancel".into());
        assert_eq!(c.state(), Some(CertificateState::InProgress));
        assert_eq!(c.pending(), Some(PendingAction::Cancel));
        assert_eq!(StateCode("weird".into()).state(), None);
        assert!(CertificateState::Annulled.is_final());
        assert!(!CertificateState::InProgress.is_final());
    }

    // Section "Certificate (element of the list response)": external_number is an integer.
    #[test]
    fn certificate_list_element() {
        let c: Certificate = de(json!({
            "internal_number": 12, "external_number": 998877,
            "status": {"code": "issued_pending_cancel", "description": "issued_pending_cancel"},
            "name": "Basic DV", "domain_name": "www.example.com",
            "domain_names": ["example.com"], "duration_in_years": 1, "public_comment": null,
            "valid_from": "2025-01-01", "valid_to": "2025-07-20",
            "subscription_duration": null, "subscription_valid_from": null,
            "subscription_valid_to": null, "paid": true, "price": "9.50", "currency": "EUR",
            "token": "ref", "prolongation_token": "secret-prolong", "prolonged_id": null,
            "prolonged": false, "legacy_reissue": false, "dcv_method": "HTTP_CSR_HASH",
            "dcv_content": "abc\ndef", "all_validation_emails": null,
            "all_domains": ["www.example.com", "example.com"], "extra": 1
        }));
        assert_eq!(c.external_number, Some(998877));
        assert_eq!(
            c.status.code.as_ref().unwrap().pending(),
            Some(PendingAction::Cancel)
        );
        assert_eq!(c.price.as_ref().unwrap().as_str(), "9.50");
        assert_eq!(
            c.prolongation_token.as_ref().unwrap().expose(),
            "secret-prolong"
        );
        assert!(!format!("{c:?}").contains("secret-prolong"));
        assert!(
            !serde_json::to_string(&c)
                .unwrap()
                .contains("secret-prolong")
        );
        assert_eq!(
            parse_api_date(c.valid_to.as_deref().unwrap())
                .unwrap()
                .day(),
            20
        );
    }

    // Section "Certificate": every nullable field null.
    #[test]
    fn certificate_list_element_nulls() {
        let c: Certificate = de(json!({
            "internal_number": 1, "external_number": null,
            "status": {"code": null, "description": null}, "name": "X",
            "domain_name": null, "domain_names": null, "duration_in_years": null,
            "public_comment": null, "valid_from": null, "valid_to": null,
            "subscription_duration": null, "subscription_valid_from": null,
            "subscription_valid_to": null, "paid": null, "price": null, "currency": null,
            "token": null, "prolongation_token": null, "prolonged_id": null, "prolonged": false,
            "legacy_reissue": false, "dcv_method": null, "dcv_content": null,
            "all_validation_emails": null, "all_domains": null
        }));
        assert_eq!(c.external_number, None);
        assert_eq!(c.status.code, None);
    }

    // Section "CertificateDetails": external_number is a string, price a number or null.
    #[test]
    fn certificate_details() {
        let d: CertificateDetails = de(json!({
            "id": 12, "status": {"certificate": "issued_pending_reissuing",
                                  "client": {"status": "new", "description": ""}},
            "external_number": "998877", "common_name": "www.example.com",
            "additional_domains": "example.com,\nshop.example.com",
            "all_domains": ["www.example.com", "example.com", "shop.example.com"],
            "valid_from": "2025-01-01", "valid_to": "2025-07-20",
            "subscription_duration": 730, "subscription_valid_from": "2025-01-01",
            "subscription_valid_to": "2027-01-01", "replacement_id": null, "prolonged_id": null,
            "dcv_method": "HTTP_CSR_HASH", "dcv_content": null,
            "validation_email": "HTTP_CSR_HASH", "additional_validation_emails": {},
            "csr": "-----BEGIN CERTIFICATE REQUEST-----", "nomenclature_id": 101,
            "name": "Basic DV", "price": 11.9, "price_includes_vat": true, "currency": "EUR",
            "payment_status": "paid", "unpaid": false,
            "contact_person": {"unstable": true}
        }));
        assert_eq!(d.external_number.as_deref(), Some("998877"));
        assert_eq!(d.price.as_ref().unwrap().as_str(), "11.9");
        assert_eq!(
            d.status.certificate.as_ref().unwrap().state(),
            Some(CertificateState::Issued)
        );
        assert_eq!(
            d.additional_domain_list(),
            ["example.com", "shop.example.com"]
        );

        let d: CertificateDetails = de(json!({
            "id": 13, "status": {"certificate": "new"}, "external_number": null,
            "common_name": "a.example.com", "additional_domains": "", "all_domains": [],
            "valid_from": null, "valid_to": null, "replacement_id": 14,
            "dcv_method": "EMAIL", "validation_email": "admin@example.com",
            "additional_validation_emails": {"b.example.com": "admin@example.com"},
            "csr": "", "nomenclature_id": 1, "name": "X", "price": null,
            "price_includes_vat": false, "currency": "EUR", "payment_status": "not_payable",
            "unpaid": false
        }));
        assert_eq!(d.price, None);
        assert_eq!(d.replacement_id, Some(14));
        assert_eq!(d.external_number, None);
    }

    // Section "7. List certificates": X-Pagination.
    #[test]
    fn pagination_header() {
        let p: Pagination = serde_json::from_str(
            r#"{"total":120,"total_pages":3,"first_page":true,"last_page":false,
                "previous_page":null,"next_page":2,"out_of_bounds":false,"offset":0}"#,
        )
        .unwrap();
        assert_eq!(p.total_pages, Some(3));
        assert_eq!(p.next_page, Some(2));
        assert_eq!(p.first_page, Some(true));
        let p: Pagination = serde_json::from_str(r#"{"first_page":1,"next_page":null}"#).unwrap();
        assert_eq!(p.first_page, None);
        assert_eq!(p.next_page, None);
    }
}
