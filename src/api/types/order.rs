//! Wire models of orders: the billed order and its answer, the renewal order (prolong) and
//! the reissue form.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use crate::values::{DcvType, Secret};

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

/// Answer of the renewal-order call (section "16. Renewal order").
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Prolongation {
    /// A credential: opening `{order_site_url}/lead/continue_order/{token}` signs in as the
    /// partner. `None` when none exists and none can be prepared.
    pub prolongation_token: Option<Secret>,
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

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;
    use crate::api::types::tests::de;

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

    // Section "16. Renewal order": token or null; a credential.
    #[test]
    fn prolong_result() {
        let p: Prolongation = de(json!({"prolongation_token": "pt-1"}));
        assert_eq!(p.prolongation_token.as_ref().unwrap().expose(), "pt-1");
        assert!(!format!("{p:?}").contains("pt-1"));
        let p: Prolongation = de(json!({"prolongation_token": null}));
        assert_eq!(p.prolongation_token, None);
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
