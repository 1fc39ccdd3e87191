//! The certificate record and its parts, as stored in `state.json`.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use super::catalogue::{self, Family, Kind, ProductDef};
use super::names;
use crate::ca::CsrInfo;

/// A DCV method (dcv_type value).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub(super) enum Method {
    Email,
    Http,
    Https,
    Cname,
    DnsTxt,
}

impl Method {
    pub(super) fn code(self) -> &'static str {
        match self {
            Method::Email => "EMAIL",
            Method::Http => "HTTP_CSR_HASH",
            Method::Https => "HTTPS_CSR_HASH",
            Method::Cname => "CNAME_CSR_HASH",
            Method::DnsTxt => "DNS_TXT_TOKEN",
        }
    }

    /// The `method` text of DcvStatus for the alternative methods.
    pub(super) fn label(self) -> &'static str {
        match self {
            Method::Email => "EMAIL",
            Method::Http => "HTTP CSR Hash",
            Method::Https => "HTTPS CSR Hash",
            Method::Cname => "CNAME CSR Hash",
            Method::DnsTxt => "DNS TXT random value",
        }
    }

    /// Exact dcv_type value (case-sensitive, as the document lists them).
    pub(super) fn parse(s: &str) -> Option<Method> {
        [
            Method::Email,
            Method::Http,
            Method::Https,
            Method::Cname,
            Method::DnsTxt,
        ]
        .into_iter()
        .find(|m| m.code() == s)
    }

    pub(super) fn is_file(self) -> bool {
        matches!(self, Method::Http | Method::Https)
    }

    /// Families D and C treat HTTPS_CSR_HASH as HTTP_CSR_HASH.
    pub(super) fn for_family(self, family: Family) -> Method {
        if self == Method::Https && family != Family::S {
            Method::Http
        } else {
            self
        }
    }
}

/// The CA's own value name for the DNS TXT method, which family S also accepts in email
/// fields.
pub(super) const DNS_TXT_ALIASES: [&str; 2] = ["DNS_TXT_TOKEN", "DNSTXTRNDVAL"];

/// Base state (without the pending suffix).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub(super) enum Base {
    New,
    InProgress,
    Issued,
    Expired,
    Annulled,
    WaitingForApproval,
    Other,
}

impl Base {
    pub(super) fn as_str(self) -> &'static str {
        match self {
            Base::New => "new",
            Base::InProgress => "in_progress",
            Base::Issued => "issued",
            Base::Expired => "expired",
            Base::Annulled => "annulled",
            Base::WaitingForApproval => "waiting_for_approval",
            Base::Other => "other",
        }
    }

    pub(super) fn parse(s: &str) -> Option<Base> {
        [
            Base::New,
            Base::InProgress,
            Base::Issued,
            Base::Expired,
            Base::Annulled,
            Base::WaitingForApproval,
            Base::Other,
        ]
        .into_iter()
        .find(|b| b.as_str() == s)
    }
}

/// Validation of one domain of the current request (order or reissue).
#[derive(Debug, Clone, Serialize, Deserialize)]
pub(super) struct DomainDcv {
    pub domain: String,
    pub method: Method,
    /// The address for EMAIL.
    pub email: Option<String>,
    /// DNS TXT value for families D and C (per domain); family S uses the order's value.
    pub random_value: Option<String>,
    pub valid: bool,
    pub validated_at: Option<i64>,
    /// When the next check (file or DNS) is due.
    pub next_check: Option<i64>,
    /// A file check handed to the validator and not reported yet: since when.
    pub in_flight_since: Option<i64>,
    pub attempts: u32,
    pub last_result: Option<String>,
}

impl DomainDcv {
    pub(super) fn new(domain: String, method: Method, email: Option<String>) -> Self {
        Self {
            domain,
            method,
            email,
            random_value: None,
            valid: false,
            validated_at: None,
            next_check: None,
            in_flight_since: None,
            attempts: 0,
            last_result: None,
        }
    }
}

/// What the state keeps of a CSR.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub(super) struct CsrFacts {
    pub pem: String,
    pub common_name: Option<String>,
    pub dns_names: Vec<String>,
    /// Upper-case hex MD5 of the DER.
    pub md5_hex: String,
    /// Upper-case hex SHA-256 of the DER.
    pub sha256_hex: String,
    /// Hex of the SubjectPublicKeyInfo DER.
    pub spki_hex: String,
}

impl CsrFacts {
    pub(super) fn from_info(pem: &str, info: &CsrInfo) -> Self {
        Self {
            pem: pem.to_string(),
            common_name: info.common_name.clone(),
            dns_names: info.dns_names.clone(),
            md5_hex: info.md5_hex.clone(),
            sha256_hex: info.sha256_hex.clone(),
            spki_hex: hex::encode(&info.public_key_der),
        }
    }

    pub(super) fn spki_der(&self) -> Vec<u8> {
        hex::decode(&self.spki_hex).unwrap_or_default()
    }
}

/// An issued leaf.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub(super) struct Leaf {
    pub pem: String,
    pub serial_hex: String,
    pub not_before: i64,
    pub not_after: i64,
    pub common_name: String,
    pub names: Vec<String>,
    pub spki_hex: String,
}

/// Organisation and contact data of the order, kept for details and the list's `q`.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub(super) struct OrderInfo {
    pub organization_name: Option<String>,
    pub organizational_unit: Option<String>,
    pub country_name: String,
    pub region_name: String,
    pub city_name: String,
    pub zip_code: Option<String>,
    pub address_1: Option<String>,
    pub address_2: Option<String>,
    /// Administrative contact as sent (omitted fields filled from the account).
    pub contact: BTreeMap<String, serde_json::Value>,
}

/// One certificate (one order item) of an account.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub(super) struct Cert {
    pub id: u64,
    pub order_id: u64,
    /// Login of the owning account.
    pub account: String,
    pub seq: u64,
    pub created_at: i64,
    pub updated_at: i64,
    pub product_id: u64,
    pub days: i64,
    pub period: u32,
    pub price_cents: i64,
    pub currency: String,
    /// The certificate whose bill covers this one (itself for a billed order; the original
    /// for a replacement).
    pub bill_of: u64,
    pub order_token: String,
    pub software_id: u64,
    pub info: OrderInfo,
    pub common_name: String,
    /// Additional domains as entered (or as taken from the CSR).
    pub additional_input: String,
    /// Ordered additional domains.
    pub additional: Vec<String>,
    pub unique_value: String,
    pub csr: CsrFacts,
    /// One entry per domain to validate (wildcard products: the wildcard name only).
    pub domains: Vec<DomainDcv>,
    /// Family S DNS_TXT_TOKEN value for the whole order.
    pub order_txt_value: Option<String>,
    pub base: Base,
    /// The current request (order or reissue) has reached the CA.
    pub at_ca: bool,
    pub at_ca_since: Option<i64>,
    /// When the current request reaches the CA.
    pub ca_due_at: i64,
    pub external_number: Option<u64>,
    pub pending_cancel_at: Option<i64>,
    /// A reissue runs (requested at).
    pub reissue_requested_at: Option<i64>,
    pub leaf: Option<Leaf>,
    /// Serials of every leaf issued under this ID, oldest first.
    pub serials: Vec<String>,
    pub first_issued_at: Option<i64>,
    pub subscription_end: Option<i64>,
    pub replacement_id: Option<u64>,
    /// For a replacement: the certificate it replaces.
    pub replaces: Option<u64>,
    pub prolonged_id: Option<u64>,
    pub prolongation_token: Option<String>,
    /// The renewal order completed from this certificate's prolongation token.
    pub renewed_by: Option<u64>,
    pub annulled_at: Option<i64>,
    pub last_error: Option<String>,
    /// Held in a state forced through the control API: no automatic transitions.
    pub forced_hold: bool,
}

impl Cert {
    pub(super) fn product(&self) -> &'static ProductDef {
        // Products are never removed from the static catalogue; a stored ID always resolves.
        catalogue::product(self.product_id).unwrap_or(&catalogue::PRODUCTS[0])
    }

    pub(super) fn family(&self) -> Family {
        self.product().family()
    }

    /// Every name of the certificate: common name, additional domains, and the bare domain
    /// of a wildcard product that covers it.
    pub(super) fn all_domains(&self) -> Vec<String> {
        let mut all = vec![self.common_name.clone()];
        all.extend(self.additional.iter().cloned());
        let product = self.product();
        if product.kind == Kind::Wildcard && product.covers_bare {
            let bare = names::base_domain(&self.common_name).to_string();
            if !all.contains(&bare) {
                all.push(bare);
            }
        }
        all
    }

    /// A multi-year subscription (more than one price period).
    pub(super) fn multi_year(&self) -> bool {
        self.period > 1
    }

    /// The state the status call reports. While a reissue of an issued certificate runs,
    /// families S and D report in_progress; family C keeps reporting issued.
    pub(super) fn status_state(&self) -> Base {
        if self.base == Base::Issued && self.reissue_requested_at.is_some() {
            if self.family() == Family::C {
                Base::Issued
            } else {
                Base::InProgress
            }
        } else {
            self.base
        }
    }

    /// The state with the pending suffix, as in the list and details.
    pub(super) fn display_state(&self) -> String {
        let base = self.base.as_str();
        if self.pending_cancel_at.is_some() {
            format!("{base}_pending_cancel")
        } else if self.reissue_requested_at.is_some() {
            format!("{base}_pending_reissuing")
        } else {
            base.to_string()
        }
    }

    /// Validation of the current request is running at the CA.
    pub(super) fn dcv_active(&self) -> bool {
        self.at_ca
            && (self.base == Base::InProgress
                || (self.base == Base::Issued && self.reissue_requested_at.is_some()))
    }

    /// DCV status and resend are available ("in progress" as the status call says).
    pub(super) fn in_progress(&self) -> bool {
        self.status_state() == Base::InProgress
    }

    /// Downloadable: issued with no reissue running.
    pub(super) fn downloadable(&self) -> bool {
        self.base == Base::Issued && self.reissue_requested_at.is_none() && self.leaf.is_some()
    }

    pub(super) fn domain_mut(&mut self, domain: &str) -> Option<&mut DomainDcv> {
        self.domains.iter_mut().find(|d| d.domain == domain)
    }

    /// The validation method of the common name (the certificate's `dcv_method`).
    pub(super) fn main_method(&self) -> Method {
        self.domains.first().map_or(Method::Email, |d| d.method)
    }

    /// TXT value for a domain on DNS_TXT_TOKEN.
    pub(super) fn txt_value_for(&self, d: &DomainDcv) -> Option<String> {
        if self.family() == Family::S {
            self.order_txt_value.clone()
        } else {
            d.random_value.clone()
        }
    }
}
