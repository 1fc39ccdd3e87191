//! Wire models of what can be ordered: products with their prices and options, countries,
//! server software entries.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use super::null_as_default;
use crate::values::Decimal;

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

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;
    use crate::api::types::tests::de;

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
}
