//! Wire models of domain control validation: acceptable DCV addresses and the DCV state of an
//! order per domain.

use std::collections::BTreeMap;

use serde::de::{self, Deserializer};
use serde::{Deserialize, Serialize};

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

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;
    use crate::api::types::tests::de;

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
}
