//! What lives under the fleet's prefix in etcd:
//!
//! | key | what | written by |
//! |---|---|---|
//! | `leader` | the leading host's name, on its lease | the leader |
//! | `keycheck` | a known text | the first host; `fleet rotate-key` |
//! | `certs/NAME/spec` | names, product and key type every host must agree on | the first host |
//! | `certs/NAME/state` | the certificate's record (intent, order, reissue, subscription, backoff) and its pending key | the leader, fenced |
//! | `certs/NAME/current` | the certificate to serve: version, serial, the API's archive and the key | the leader, fenced |
//! | `dcv/NAME` | the validation file to serve while the CA checks | the leader, fenced |
//! | `hosts/HOST/certs/NAME` | what HOST installed (serial, version, time) or why it could not | HOST |
//! | `hosts/HOST/seen` | when HOST last synchronised | HOST |
//! | `hosts/HOST/unplaced/NAME` | an order intent of NAME whose order HOST did not place (its lead ended before it was sent, or the API refused it) | HOST |
//!
//! Every value but `leader` is sealed in the fleet's envelope ([`super::envelope`]); the
//! private keys inside the record and the certificate are sealed once more, each under its own
//! purpose.
//!
//! The documents' types, their keys, and their encoding.

use std::path::PathBuf;

use anyhow::{Result, anyhow};
use base64::Engine as _;
use serde::{Deserialize, Serialize};
use time::OffsetDateTime;

use crate::config::CertificateConfig;
use crate::store::{CertRecord, OrderIntent};

use super::envelope::{Place, Purpose};

/// Where the fleet key check lives, relative to the prefix.
pub(super) const KEY_CHECK: &str = "keycheck";

pub(super) fn spec_key(name: &str) -> String {
    format!("certs/{name}/spec")
}
pub(super) fn state_key(name: &str) -> String {
    format!("certs/{name}/state")
}
pub(super) fn current_key(name: &str) -> String {
    format!("certs/{name}/current")
}
pub(super) fn dcv_key(name: &str) -> String {
    format!("dcv/{name}")
}
pub(super) fn host_key(host: &str, name: &str) -> String {
    format!("hosts/{host}/certs/{name}")
}
pub(super) fn seen_key(host: &str) -> String {
    format!("hosts/{host}/seen")
}
pub(super) fn unplaced_key(host: &str, name: &str) -> String {
    format!("hosts/{host}/unplaced/{name}")
}

/// What lives at a key under the prefix, with the certificate it belongs to.
#[derive(Debug, Clone, Copy)]
pub(super) enum Kind<'a> {
    KeyCheck,
    Spec(&'a str),
    State(&'a str),
    Current(&'a str),
    Dcv(&'a str),
    HostResult(&'a str),
    HostSeen,
    Unplaced(&'a str),
}

impl<'a> Kind<'a> {
    pub(super) fn of(rel: &'a str) -> Option<Self> {
        let parts: Vec<&str> = rel.split('/').collect();
        Some(match parts.as_slice() {
            [k] if *k == KEY_CHECK => Self::KeyCheck,
            ["certs", name, "spec"] => Self::Spec(name),
            ["certs", name, "state"] => Self::State(name),
            ["certs", name, "current"] => Self::Current(name),
            ["dcv", name] => Self::Dcv(name),
            ["hosts", _, "certs", name] => Self::HostResult(name),
            ["hosts", _, "seen"] => Self::HostSeen,
            ["hosts", _, "unplaced", name] => Self::Unplaced(name),
            _ => return None,
        })
    }

    /// The envelope's place of a value at `rel` of this kind.
    pub(super) fn place(self, rel: &'a str) -> Place<'a> {
        let (purpose, name) = match self {
            Self::KeyCheck => (Purpose::KeyCheck, ""),
            Self::Spec(n) => (Purpose::Spec, n),
            Self::State(n) => (Purpose::State, n),
            Self::Current(n) => (Purpose::Current, n),
            Self::Dcv(n) => (Purpose::Dcv, n),
            Self::HostResult(n) => (Purpose::HostResult, n),
            Self::HostSeen => (Purpose::HostSeen, ""),
            Self::Unplaced(n) => (Purpose::Unplaced, n),
        };
        Place::new(purpose, rel, name)
    }

    /// What it is, in words.
    pub(super) fn label(self) -> &'static str {
        match self {
            Kind::KeyCheck => "key check",
            Kind::Spec(_) => "spec",
            Kind::State(_) => "shared record",
            Kind::Current(_) => "current certificate",
            Kind::Dcv(_) => "validation file",
            Kind::HostResult(_) => "host result",
            Kind::HostSeen => "host seen",
            Kind::Unplaced(_) => "order not placed",
        }
    }
}

/// What every host of the fleet must agree on for one certificate.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub(super) struct Spec {
    pub(super) domains: Vec<String>,
    pub(super) product_id: u64,
    pub(super) key_type: String,
    /// The host that wrote it first.
    #[serde(default)]
    pub(super) host: String,
}

impl Spec {
    pub(super) fn of(cert: &CertificateConfig, host: &str) -> Self {
        Self {
            domains: cert.domains.clone(),
            product_id: cert.order.product_id,
            key_type: cert.order.key_type.to_string(),
            host: host.to_owned(),
        }
    }

    /// What differs from `fleet`, in words.
    pub(super) fn differences(&self, fleet: &Self) -> Vec<String> {
        let mut out = Vec::new();
        if self.domains != fleet.domains {
            out.push(format!(
                "domains {:?} here, {:?} in the fleet",
                self.domains, fleet.domains
            ));
        }
        if self.product_id != fleet.product_id {
            out.push(format!(
                "product_id {} here, {} in the fleet",
                self.product_id, fleet.product_id
            ));
        }
        if self.key_type != fleet.key_type {
            out.push(format!(
                "key_type {} here, {} in the fleet",
                self.key_type, fleet.key_type
            ));
        }
        out
    }
}

/// The shared record of one certificate.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub(super) struct SharedState {
    /// The record without what belongs to one host (installed files, published validation
    /// files, the path of the pending key).
    pub(super) record: CertRecord,
    /// The pending key's PEM, sealed for the record's key and version (base64).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(super) pending_key: Option<String>,
    pub(super) written_by: String,
    #[serde(with = "time::serde::rfc3339")]
    pub(super) written_at: OffsetDateTime,
}

/// The certificate every host of the fleet serves.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub(super) struct Current {
    /// 1 for the first certificate, one more for each after it and for each time the fleet
    /// key rotates (the envelope's version).
    pub version: u64,
    pub certificate_id: u64,
    pub serial: String,
    #[serde(with = "time::serde::rfc3339")]
    pub not_before: OffsetDateTime,
    #[serde(with = "time::serde::rfc3339")]
    pub not_after: OffsetDateTime,
    pub published_by: String,
    #[serde(with = "time::serde::rfc3339")]
    pub published_at: OffsetDateTime,
    /// The archive the API sent (base64).
    pub(super) archive: String,
    /// The private key's PEM, sealed for this key, name and version (base64).
    pub(super) key: String,
}

/// A validation file the hosts serve.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub(super) struct DcvEntry {
    pub(super) file_name: String,
    pub(super) content: String,
}

/// What one host did with a certificate.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub(super) struct HostResult {
    /// The serial installed on the host (the last good one when `error` is set).
    pub serial: Option<String>,
    /// The version of the fleet's certificate this result is about.
    pub version: u64,
    #[serde(with = "time::serde::rfc3339")]
    pub at: OffsetDateTime,
    /// Since when the host serves `serial`.
    #[serde(default, with = "time::serde::rfc3339::option")]
    pub since: Option<OffsetDateTime>,
    /// Why the version could not be installed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
}

/// An order intent whose order was not placed, as its host notes it (the intent's identity).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub(super) struct Unplaced {
    pub(super) csr_sha256: String,
    pub(super) common_name: String,
    #[serde(with = "time::serde::rfc3339")]
    pub(super) created_at: OffsetDateTime,
}

impl Unplaced {
    pub(super) fn of(intent: &OrderIntent) -> Self {
        Self {
            csr_sha256: intent.csr_sha256.clone(),
            common_name: intent.common_name.clone(),
            created_at: intent.created_at,
        }
    }
}

pub(super) fn b64(bytes: &[u8]) -> String {
    base64::engine::general_purpose::STANDARD.encode(bytes)
}

pub(super) fn unb64(what: &str, text: &str) -> Result<Vec<u8>> {
    base64::engine::general_purpose::STANDARD
        .decode(text)
        .map_err(|e| anyhow!("the fleet's {what} is not base64: {e}"))
}

/// The record as the fleet shares it: without this host's installed files, validation files
/// and key path.
pub(super) fn shared_view(rec: &CertRecord) -> CertRecord {
    let mut r = rec.clone();
    r.installed = None;
    r.dcv = Default::default();
    if let Some(p) = &mut r.pending_key {
        p.key_file = PathBuf::new();
    }
    r
}
#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_spec_names_each_difference() {
        let spec = |d: &[&str], p: u64, k: &str| Spec {
            domains: d.iter().map(|s| (*s).to_owned()).collect(),
            product_id: p,
            key_type: k.into(),
            host: "web1".into(),
        };
        let fleet = spec(&["a.test", "b.test"], 101, "rsa2048");
        assert!(
            spec(&["a.test", "b.test"], 101, "rsa2048")
                .differences(&fleet)
                .is_empty()
        );
        let d = spec(&["a.test"], 102, "p256").differences(&fleet);
        assert_eq!(d.len(), 3, "{d:?}");
        assert!(d[0].contains("domains [\"a.test\"] here"), "{d:?}");
        assert!(
            d[1].contains("product_id 102 here, 101 in the fleet"),
            "{d:?}"
        );
        assert!(
            d[2].contains("key_type p256 here, rsa2048 in the fleet"),
            "{d:?}"
        );
    }

    #[test]
    fn the_shared_view_leaves_out_what_belongs_to_one_host() {
        use crate::store::PendingKey;
        let mut rec = CertRecord {
            name: "www".into(),
            failures: 2,
            ..CertRecord::default()
        };
        rec.dcv.files.push(PathBuf::from("/var/www/x.txt"));
        rec.pending_key = Some(PendingKey {
            key_file: PathBuf::from("/var/lib/cert-agent/keys/www/1.key"),
            csr_pem: "csr".into(),
            csr_md5: "M".into(),
            csr_sha256: "S".into(),
            created_at: OffsetDateTime::UNIX_EPOCH,
        });
        let v = shared_view(&rec);
        assert!(v.dcv.files.is_empty());
        assert_eq!(v.pending_key.unwrap().key_file, PathBuf::new());
        assert_eq!(v.failures, 2);
    }
}
