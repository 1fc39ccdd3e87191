//! Wire models of Partner API v1 (the reference's "Resources and their fields";
//! `docs/partner-api.openapi.yaml` has them as schemas).
//!
//! Rules: every field the document calls nullable is an `Option`; unknown fields are ignored
//! (no `deny_unknown_fields`); money stays decimal text ([`Decimal`]); the product type keeps the
//! document's `standart` spelling; credentials (auth token, prolongation token) are [`Secret`]s.

use std::collections::BTreeMap;
use std::fmt;

use serde::de::{self, Deserializer};
use serde::{Deserialize, Serialize};

use super::Secret;
pub use crate::values::{DcvType, Decimal, InvalidDecimal};

// ---------------------------------------------------------------------------------------------
// Helpers
// ---------------------------------------------------------------------------------------------

/// `null` or absent becomes the empty/default value (for arrays and maps the document always
/// sends, where an empty one means the same as none).
fn null_as_default<'de, D, T>(deserializer: D) -> Result<T, D::Error>
where
    D: Deserializer<'de>,
    T: Default + Deserialize<'de>,
{
    Ok(Option::<T>::deserialize(deserializer)?.unwrap_or_default())
}

/// A boolean, or `None` for null or anything else (the X-Pagination flags are not typed by the
/// document).
fn lenient_bool<'de, D: Deserializer<'de>>(deserializer: D) -> Result<Option<bool>, D::Error> {
    Ok(match serde_json::Value::deserialize(deserializer)? {
        serde_json::Value::Bool(b) => Some(b),
        _ => None,
    })
}

/// Parses a date of the API (`YYYY-MM-DD`, or an RFC 3339 date-time of which the date is taken).
pub fn parse_api_date(text: &str) -> Option<time::Date> {
    let date = text.get(..10)?;
    let rest = text.get(10..)?;
    if !(rest.is_empty() || rest.starts_with(['T', 't', ' '])) {
        return None;
    }
    let mut parts = date.split('-');
    let (y, m, d) = (parts.next()?, parts.next()?, parts.next()?);
    if y.len() != 4 || m.len() != 2 || d.len() != 2 {
        return None;
    }
    let month = time::Month::try_from(m.parse::<u8>().ok()?).ok()?;
    time::Date::from_calendar_date(y.parse().ok()?, month, d.parse().ok()?).ok()
}

// ---------------------------------------------------------------------------------------------
// Sign in
// ---------------------------------------------------------------------------------------------

/// SignInResponse (section "SignInResponse"). Account details are ignored.
#[derive(Debug, Clone, Deserialize)]
pub struct SignInResponse {
    /// User ID (used by the alternate list path and the software list).
    pub id: u64,
    /// Value for the `X-AUTH-TOKEN` header.
    pub auth_token: Secret,
}

// ---------------------------------------------------------------------------------------------
// Products
// ---------------------------------------------------------------------------------------------

/// Product `type` (section "Product"). `standart` is the document's spelling.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(from = "String", into = "String")]
pub enum ProductType {
    /// `standart`: single domain.
    Standart,
    /// `wildcard`: all subdomains (`*.domain`).
    Wildcard,
    /// `ucc`: several domains.
    Ucc,
    /// A value the document does not list.
    Other(String),
}

impl From<String> for ProductType {
    fn from(s: String) -> Self {
        match s.as_str() {
            "standart" => Self::Standart,
            "wildcard" => Self::Wildcard,
            "ucc" => Self::Ucc,
            _ => Self::Other(s),
        }
    }
}

impl From<ProductType> for String {
    fn from(t: ProductType) -> Self {
        t.as_str().to_owned()
    }
}

impl ProductType {
    pub fn as_str(&self) -> &str {
        match self {
            Self::Standart => "standart",
            Self::Wildcard => "wildcard",
            Self::Ucc => "ucc",
            Self::Other(s) => s,
        }
    }
}

/// Price (section "Price"): `value` and `rrp` are decimals as strings.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Price {
    /// Partner price, net, in the account currency.
    pub value: Option<Decimal>,
    /// Years.
    pub period: Option<u32>,
    /// Recommended end-user price.
    pub rrp: Option<Decimal>,
}

/// Option of a product (section "Option"): price of additional domains.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ProductOption {
    pub quantity_from: Option<u32>,
    /// `None`: no upper limit.
    pub quantity_to: Option<u32>,
    /// `None` for additional domains of multi-domain certificates; `wildcard` for a wildcard.
    #[serde(rename = "type")]
    pub option_type: Option<String>,
    pub description: Option<String>,
    #[serde(default, deserialize_with = "null_as_default")]
    pub prices: Vec<Price>,
}

/// Product (section "Product"), an element of the products array.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Product {
    /// Use as `nomenclature_id` in the order.
    pub id: u64,
    pub name: Option<String>,
    pub brand: Option<String>,
    /// `dv`, `ov`, `ev`.
    pub validation_type: Option<String>,
    pub is_ev: Option<bool>,
    #[serde(rename = "type")]
    pub product_type: Option<ProductType>,
    /// CA identifier.
    pub issuer: Option<String>,
    /// Display order, higher first.
    pub prio: Option<i64>,
    #[serde(default, deserialize_with = "null_as_default")]
    pub prices: Vec<Price>,
    #[serde(default, deserialize_with = "null_as_default")]
    pub options: Vec<ProductOption>,
    #[serde(default, deserialize_with = "null_as_default")]
    pub addons: Vec<serde_json::Value>,
}

// ---------------------------------------------------------------------------------------------
// Order
// ---------------------------------------------------------------------------------------------

/// `country_id` of an order: numeric ID or ISO 3166-1 alpha-2 code.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(untagged)]
pub enum CountryId {
    Id(u64),
    Code(String),
}

/// Body of `POST /api/v1/order` (section "OrderRequest").
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct OrderRequest {
    pub order: Order,
}

/// The `order` object. Contact fields left `None` take the account's data.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct Order {
    #[serde(skip_serializing_if = "Option::is_none")]
    pub first_name: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub last_name: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub phone: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub email: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub title: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub company: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub address_1: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub city_name: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub region_name: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub zip_code: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub fax: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub country_id: Option<CountryId>,
    /// At least one.
    pub items: Vec<OrderItem>,
}

/// One item of an order (section "OrderItem").
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct OrderItem {
    /// Product id.
    pub nomenclature_id: u64,
    /// 60 to 2200; 365 is one year.
    pub days: u32,
    /// 0 lets the service choose.
    pub ssl_server_software_id: u64,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub dcv_type: Option<DcvType>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub dcv_email: Option<String>,
    /// Fully qualified common name.
    pub domain_name: String,
    /// PEM certificate signing request.
    pub csr: String,
    /// ISO 3166-1 alpha-2 code of the organisation's country.
    pub country_name: String,
    pub region_name: String,
    pub city_name: String,
    /// Required for OV and EV.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub organization_name: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub organizational_unit: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub zip_code: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub address_1: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub address_2: Option<String>,
    /// Comma-separated list (ucc only). When sent, it alone lists the extra names.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub additional_domains: Option<String>,
    /// Domain to validation email (EMAIL method, ucc only).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub additional_validation_emails: Option<BTreeMap<String, String>>,
    /// At most 20 letters and digits (family S request token).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub unique_value: Option<String>,
}

/// OrderResponse (section "OrderResponse").
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct OrderResponse {
    /// Order ID.
    pub order: u64,
    /// Certificate ID (the `certificate_id` of the other calls).
    pub certificate: u64,
    /// Reference token of the order.
    pub token: Option<String>,
}

// ---------------------------------------------------------------------------------------------
// States
// ---------------------------------------------------------------------------------------------

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

// ---------------------------------------------------------------------------------------------
// Certificates (list)
// ---------------------------------------------------------------------------------------------

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

// ---------------------------------------------------------------------------------------------
// Certificate details
// ---------------------------------------------------------------------------------------------

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

// ---------------------------------------------------------------------------------------------
// DCV
// ---------------------------------------------------------------------------------------------

/// DcvEmails (section "DcvEmails"); may be the empty object `{}`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
pub struct DcvEmails {
    pub whois: Option<Vec<String>>,
    pub level_2: Option<Vec<String>>,
    pub level_3: Option<Vec<String>>,
    /// DNS TXT record value where the CA issued one.
    pub random_value: Option<String>,
}

impl DcvEmails {
    /// Every address, in order (whois, level 2, level 3), without repeats.
    pub fn all(&self) -> Vec<&str> {
        let mut out: Vec<&str> = Vec::new();
        for list in [&self.whois, &self.level_2, &self.level_3]
            .into_iter()
            .flatten()
        {
            for e in list {
                if !out.contains(&e.as_str()) {
                    out.push(e);
                }
            }
        }
        out
    }
}

/// CSR hashes of a domain entry as the API reports them (family S; checked against our own
/// [`crate::crypto::CsrHashes`]). `sha1` holds the SHA-256 hash despite its name.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ReportedCsrHashes {
    pub md5: Option<String>,
    /// SHA-256 of the CSR, despite the name.
    pub sha1: Option<String>,
}

/// One domain entry of DcvStatus (section "DcvStatus").
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct DomainDcv {
    /// DCV email sent or alternative method started.
    pub sent: Option<bool>,
    /// True once validated.
    pub valid: Option<bool>,
    /// True when the data comes from the CA.
    pub api: Option<bool>,
    /// The email for EMAIL, otherwise e.g. `HTTP CSR Hash`; null for family C.
    pub method: Option<String>,
    /// Family S only: current method as a dcv_type value.
    pub dcv_method: Option<String>,
    /// Status reported by the CA.
    pub status: Option<String>,
    pub emails: Option<DcvEmails>,
    /// Family S only.
    pub hashes: Option<ReportedCsrHashes>,
    /// Family S only.
    pub unique_value: Option<String>,
}

/// DcvStatus (section "DcvStatus"): one entry per domain, plus for family S an optional
/// `unique_value` (string or null) at the level of the domain keys.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct DcvStatus {
    /// Domain name to its DCV state.
    pub domains: BTreeMap<String, DomainDcv>,
    /// Family S: the unique value of the request token.
    pub unique_value: Option<String>,
}

impl DcvStatus {
    /// True when every domain is validated (and there is at least one).
    pub fn all_valid(&self) -> bool {
        !self.domains.is_empty() && self.domains.values().all(|d| d.valid == Some(true))
    }
}

impl<'de> Deserialize<'de> for DcvStatus {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        #[derive(Deserialize)]
        struct Wire {
            dcv: BTreeMap<String, serde_json::Value>,
            /// Also accepted beside `dcv` (the document's wording allows both readings).
            #[serde(default)]
            unique_value: Option<String>,
        }
        let wire = Wire::deserialize(deserializer)?;
        let mut out = DcvStatus {
            domains: BTreeMap::new(),
            unique_value: wire.unique_value,
        };
        for (key, value) in wire.dcv {
            if key == "unique_value" {
                match value {
                    serde_json::Value::Null => {}
                    serde_json::Value::String(s) => out.unique_value = Some(s),
                    _ => {
                        return Err(de::Error::custom(
                            "dcv.unique_value: expected a string or null",
                        ));
                    }
                }
                continue;
            }
            let entry = DomainDcv::deserialize(value)
                .map_err(|e| de::Error::custom(format_args!("dcv.{key}: {e}")))?;
            out.domains.insert(key, entry);
        }
        Ok(out)
    }
}

// ---------------------------------------------------------------------------------------------
// Actions, balance, prolong, ancillary
// ---------------------------------------------------------------------------------------------

/// ActionResult (section "ActionResult") of change DCV, resend DCV, reissue and cancel.
///
/// A call returns it only when `success` is true; `success: false` becomes
/// [`ApiError::Refused`](super::ApiError::Refused), and a missing or non-boolean `success` is a
/// decode error.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ActionResult {
    pub success: bool,
    /// E.g. `DCV email has been changed and resent`.
    pub result: Option<String>,
}

/// One member of the balance (`sum` rounded to 2 decimals, `currency` ISO 4217).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Amount {
    pub sum: Decimal,
    pub currency: String,
}

/// Balance (section "Balance"). All amounts include VAT where it applies.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Balance {
    /// Payments received minus delivered services.
    pub balance: Amount,
    /// Unpaid bills of certificates being issued or issued.
    pub reserved: Amount,
    /// Balance minus reserved (shown in the customer portal).
    pub common: Amount,
    /// Paid prepayment bills not yet assigned to a service.
    pub prepayment: Amount,
    /// Payments not assigned to any bill; usable for new bills.
    pub available: Amount,
}

/// Answer of the renewal-order call (section "16. Renewal order").
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Prolongation {
    /// A credential: opening `{order_site_url}/lead/continue_order/{token}` signs in as the
    /// partner. `None` when none exists and none can be prepared.
    pub prolongation_token: Option<Secret>,
}

/// A country of `GET /api/v1/countries` (entry fields are not detailed by the document; the
/// usual ones are typed, every other field is kept in `extra`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Country {
    pub id: Option<u64>,
    pub code: Option<String>,
    pub name: Option<String>,
    #[serde(flatten)]
    pub extra: BTreeMap<String, serde_json::Value>,
}

/// An entry of the server software list; `id` is sent as `ssl_server_software_id`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ServerSoftware {
    pub id: u64,
    pub code: Option<String>,
    pub name: Option<String>,
    pub issuer: Option<String>,
}

/// Form body of the reissue call (section "12. Reissue"); every field optional.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ReissueRequest {
    /// PEM CSR; required for family C with a new key; otherwise the current CSR is reused.
    pub csr: Option<String>,
    /// An email, or HTTP_CSR_HASH, HTTPS_CSR_HASH, CNAME_CSR_HASH; omitted keeps the method.
    pub validation_email: Option<String>,
    /// Multi-domain: validation email (or method) per domain (deepObject form encoding).
    pub validation_emails: BTreeMap<String, String>,
}

impl ReissueRequest {
    /// Form fields, `validation_emails[domain]=value` for the per-domain map.
    pub fn form_fields(&self) -> Vec<(String, String)> {
        let mut out = Vec::new();
        if let Some(csr) = &self.csr {
            out.push(("csr".to_owned(), csr.clone()));
        }
        if let Some(v) = &self.validation_email {
            out.push(("validation_email".to_owned(), v.clone()));
        }
        for (domain, v) in &self.validation_emails {
            out.push((format!("validation_emails[{domain}]"), v.clone()));
        }
        out
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
    use super::*;
    use serde_json::json;
    use std::cmp::Ordering;

    fn de<T: de::DeserializeOwned>(v: serde_json::Value) -> T {
        serde_json::from_value(v).expect("decodes")
    }

    #[test]
    fn decimal_parses_strings_and_numbers_exactly() {
        assert_eq!(de::<Decimal>(json!("12.50")).as_str(), "12.50");
        assert_eq!(de::<Decimal>(json!(12)).as_str(), "12");
        let from_number: Decimal = serde_json::from_str("1234.56").unwrap();
        assert_eq!(from_number.as_str(), "1234.56");
        let small: Decimal = serde_json::from_str("0.1").unwrap();
        assert_eq!(small.as_str(), "0.1");
        assert!(serde_json::from_value::<Decimal>(json!("12,50")).is_err());
        assert!(serde_json::from_value::<Decimal>(json!("1e5")).is_err());
        assert!(serde_json::from_value::<Decimal>(json!(true)).is_err());
        assert!(Decimal::parse(".5").is_err());
        assert!(Decimal::parse("5.").is_err());
        assert!(Decimal::parse("").is_err());
    }

    #[test]
    fn decimal_compares_values() {
        let d = |s: &str| Decimal::parse(s).unwrap();
        assert_eq!(d("10.0").cmp_value(&d("10")), Ordering::Equal);
        assert_eq!(d("9.99").cmp_value(&d("10")), Ordering::Less);
        assert_eq!(d("100.00").cmp_value(&d("99.999")), Ordering::Greater);
        assert_eq!(d("010.5").cmp_value(&d("10.50")), Ordering::Equal);
        assert_eq!(d("-1").cmp_value(&d("0")), Ordering::Less);
        assert_eq!(d("-2").cmp_value(&d("-1.5")), Ordering::Less);
        assert_eq!(d("-0").cmp_value(&d("0.00")), Ordering::Equal);
        assert_eq!(d("0.001").cmp_value(&d("0.01")), Ordering::Less);
    }

    // Section "SignInResponse": id, auth_token, plus account details that are ignored.
    #[test]
    fn sign_in_response() {
        let r: SignInResponse = de(json!({
            "id": 7, "auth_token": "tok-123", "language": "en", "email": "a@b.c",
            "roles": ["partner"]
        }));
        assert_eq!(r.id, 7);
        assert_eq!(r.auth_token.expose(), "tok-123");
        assert!(!format!("{r:?}").contains("tok-123"));
    }

    // Section "Product", "Price", "Option".
    #[test]
    fn product_with_prices_and_options() {
        let p: Product = de(json!({
            "id": 101, "name": "Basic DV", "brand": "brand1", "validation_type": "dv",
            "is_ev": false, "type": "standart", "issuer": "issuer1", "prio": 10,
            "prices": [{"value": "9.50", "period": 1, "rrp": "19.00"},
                       {"value": null, "period": null, "rrp": null}],
            "options": [{"quantity_from": 2, "quantity_to": null, "type": null,
                         "description": "additional domain",
                         "prices": [{"value": "5.00", "period": 1, "rrp": "8.00"}]},
                        {"quantity_from": 1, "quantity_to": 1, "type": "wildcard",
                         "description": null, "prices": []}],
            "addons": [],
            "unknown_field": {"ignored": true}
        }));
        assert_eq!(p.product_type, Some(ProductType::Standart));
        assert_eq!(p.prices[0].value.as_ref().unwrap().as_str(), "9.50");
        assert_eq!(p.prices[0].rrp.as_ref().unwrap().as_str(), "19.00");
        assert_eq!(
            p.prices[1],
            Price {
                value: None,
                period: None,
                rrp: None
            }
        );
        assert_eq!(p.options[0].quantity_to, None);
        assert_eq!(p.options[0].option_type, None);
        assert_eq!(p.options[1].option_type.as_deref(), Some("wildcard"));
        // `standart` is kept when written back.
        assert_eq!(serde_json::to_value(&p).unwrap()["type"], "standart");
    }

    // Section "Product": every field but id is nullable.
    #[test]
    fn product_all_nullable() {
        let p: Product = de(json!({
            "id": 1, "name": null, "brand": null, "validation_type": null, "is_ev": null,
            "type": null, "issuer": null, "prio": null, "prices": [], "options": [], "addons": []
        }));
        assert_eq!(p.name, None);
        assert_eq!(p.product_type, None);
        let q: Product = de(json!({"id": 2, "type": "ucc"}));
        assert_eq!(q.product_type, Some(ProductType::Ucc));
        assert!(q.prices.is_empty());
        let w: Product = de(json!({"id": 3, "type": "multi"}));
        assert_eq!(w.product_type, Some(ProductType::Other("multi".into())));
    }

    // Section "OrderRequest" / "OrderItem": omitted optional fields are not sent.
    #[test]
    fn order_request_serialises_only_set_fields() {
        let req = OrderRequest {
            order: Order {
                country_id: Some(CountryId::Code("DE".into())),
                items: vec![OrderItem {
                    nomenclature_id: 101,
                    days: 365,
                    ssl_server_software_id: 0,
                    dcv_type: Some(DcvType::HttpCsrHash),
                    domain_name: "www.example.com".into(),
                    csr: "-----BEGIN CERTIFICATE REQUEST-----".into(),
                    country_name: "DE".into(),
                    region_name: "Berlin".into(),
                    city_name: "Berlin".into(),
                    ..OrderItem::default()
                }],
                ..Order::default()
            },
        };
        let v = serde_json::to_value(&req).unwrap();
        assert_eq!(v["order"]["country_id"], "DE");
        let item = &v["order"]["items"][0];
        assert_eq!(item["dcv_type"], "HTTP_CSR_HASH");
        assert_eq!(item["days"], 365);
        assert!(item.get("unique_value").is_none());
        assert!(v["order"].get("first_name").is_none());
    }

    // Section "OrderResponse".
    #[test]
    fn order_response() {
        let r: OrderResponse = de(json!({"order": 5, "certificate": 77, "token": "abc"}));
        assert_eq!(
            (r.order, r.certificate, r.token.as_deref()),
            (5, 77, Some("abc"))
        );
        let r: OrderResponse = de(json!({"order": 5, "certificate": 77, "token": null}));
        assert_eq!(r.token, None);
    }

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

    // Section "DcvEmails": may be empty.
    #[test]
    fn dcv_emails() {
        let e: DcvEmails = de(json!({}));
        assert_eq!(e, DcvEmails::default());
        let e: DcvEmails = de(json!({
            "whois": ["a@example.com"], "level_2": ["admin@example.com", "a@example.com"],
            "level_3": null, "random_value": "rv123"
        }));
        assert_eq!(e.all(), ["a@example.com", "admin@example.com"]);
        assert_eq!(e.random_value.as_deref(), Some("rv123"));
    }

    // Section "DcvStatus": domain map with an optional unique_value beside the domains.
    #[test]
    fn dcv_status() {
        let s: DcvStatus = de(json!({"dcv": {
            "www.example.com": {
                "sent": true, "valid": false, "api": true, "method": "HTTP CSR Hash",
                "dcv_method": "HTTP_CSR_HASH", "status": "pending",
                "emails": {"whois": [], "random_value": null},
                "hashes": {"md5": "ABC", "sha1": "DEF"}, "unique_value": "u1"
            },
            "example.com": {"sent": null, "valid": true, "api": false, "method": null,
                            "status": "validated", "emails": {}},
            "unique_value": "u1"
        }}));
        assert_eq!(s.unique_value.as_deref(), Some("u1"));
        assert_eq!(s.domains.len(), 2);
        let w = &s.domains["www.example.com"];
        assert_eq!(w.hashes.as_ref().unwrap().sha1.as_deref(), Some("DEF"));
        assert_eq!(s.domains["example.com"].method, None);
        assert!(!s.all_valid());

        let s: DcvStatus = de(
            json!({"dcv": {"a.example.com": {"valid": true, "status": "ok"},
                                              "unique_value": null}}),
        );
        assert_eq!(s.unique_value, None);
        assert!(s.all_valid());

        assert!(serde_json::from_value::<DcvStatus>(json!({"dcv": {"unique_value": 5}})).is_err());
        assert!(serde_json::from_value::<DcvStatus>(json!({"dcv": {"a.b": 5}})).is_err());
    }

    // Section "ActionResult".
    #[test]
    fn action_result() {
        let a: ActionResult =
            de(json!({"success": true, "result": "The cancellation order has been sent"}));
        assert!(a.success);
        assert!(serde_json::from_value::<ActionResult>(json!({"result": "x"})).is_err());
        assert!(serde_json::from_value::<ActionResult>(json!({"success": "true"})).is_err());
    }

    // Section "Balance": five members with sum (number) and currency.
    #[test]
    fn balance() {
        let b: Balance = de(json!({
            "balance": {"sum": 120.5, "currency": "EUR"},
            "reserved": {"sum": 20.0, "currency": "EUR"},
            "common": {"sum": 100.5, "currency": "EUR"},
            "prepayment": {"sum": 0.0, "currency": "EUR"},
            "available": {"sum": 99.99, "currency": "EUR"}
        }));
        assert_eq!(b.balance.sum.as_str(), "120.5");
        assert_eq!(b.available.sum.as_str(), "99.99");
        assert_eq!(
            b.prepayment.sum.cmp_value(&Decimal::parse("0").unwrap()),
            Ordering::Equal
        );
    }

    // Section "16. Renewal order": token or null; a credential.
    #[test]
    fn prolong_result() {
        let p: Prolongation = de(json!({"prolongation_token": "pt-1"}));
        assert_eq!(p.prolongation_token.as_ref().unwrap().expose(), "pt-1");
        assert!(!format!("{p:?}").contains("pt-1"));
        let p: Prolongation = de(json!({"prolongation_token": null}));
        assert_eq!(p.prolongation_token, None);
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

    // Section "Ancillary endpoints".
    #[test]
    fn countries_and_software() {
        let c: Vec<Country> =
            de(json!([{"id": 1, "code": "DE", "name": "Germany", "phone": "+49"}]));
        assert_eq!(c[0].code.as_deref(), Some("DE"));
        assert_eq!(c[0].extra["phone"], "+49");
        let s: Vec<ServerSoftware> =
            de(json!([{"id": 180, "code": "linux", "name": "Linux", "issuer": "s1"}]));
        assert_eq!(s[0].id, 180);
    }

    #[test]
    fn reissue_form_uses_deep_object_encoding() {
        let r = ReissueRequest {
            csr: Some("PEM".into()),
            validation_email: None,
            validation_emails: [("a.example.com".to_owned(), "HTTP_CSR_HASH".to_owned())].into(),
        };
        assert_eq!(
            r.form_fields(),
            [
                ("csr".to_owned(), "PEM".to_owned()),
                (
                    "validation_emails[a.example.com]".to_owned(),
                    "HTTP_CSR_HASH".to_owned()
                )
            ]
        );
    }
}
