//! What lives under the fleet's prefix in etcd:
//!
//! | key | what | written by |
//! |---|---|---|
//! | `leader` | the leading host's name, on its lease | the leader |
//! | `resigned` | the name of the host that last gave the lead up, written in the transaction that deletes `leader` (a lead that ended without it ended with its lease) | the leader |
//! | `waiting` | the name of the host whose run left certificates waiting for the CA at its last round and means to check them again at the next allowed status check (deleted by the round that leaves none waiting); the daemons take the work over when no round follows in time | the leader, fenced |
//! | `keycheck` | a known text | the first host; `fleet rotate-key` |
//! | `certs/NAME/spec` | names, product and key type every host must agree on | the first host |
//! | `certs/NAME/state` | the certificate's record (intent, order, reissue, subscription, backoff) and its pending key | the leader, fenced |
//! | `certs/NAME/current` | the certificate to serve: version, serial, its leaf (PEM), the SHA-256 of each issuer certificate of its checked chain, in order, and the key (a value of an earlier version: the API's archive, or an ACME CA's whole chain) | the leader, fenced |
//! | `chains/SHA256` | an issuer certificate (intermediate, or a root a bundle carries) named by some `current`, its DER stored once per fleet under its SHA-256 ([`super::chains`]) | the leader, fenced, when absent |
//! | `certs/NAME/retired` | the tombstone of a certificate `cert-agent retire` retired for the fleet: when, by which host, whether the installed files go, what the cancellation came to | the leader, fenced (with the deletion of the certificate's state, current certificate, validation file, host results, hosts' word on ACME validation files and unplaced notes) |
//! | `acme/CA/account` | the fleet's account with the ACME CA `[acme.CA]`: its directory and URL, and its credentials (with the account's private key) sealed once more | the first leader that needs it, fenced, once |
//! | `dcv/NAME` | the validation file to serve while the CA checks | the leader, fenced |
//! | `hosts/HOST/dcv/NAME` | the ACME validation file HOST serves for NAME (its name and the SHA-256 of its content): the leader answers the ACME challenge once every live host says so | HOST |
//! | `hosts/HOST/certs/NAME` | what HOST installed (serial, version, time) or why it could not | HOST |
//! | `hosts/HOST/seen` | when HOST last synchronised, its instance id, the id of its current fleet key and of the previous key it still opens values with (none once the rotation ended on it), the `seq` and `hash` of the last line of its audit log | HOST |
//! | `hosts/HOST/proof/NAME` | what HOST proved it serves of NAME after its last install: the serial, each address's and name's answer (served serial, whether the chain verifies), the health command's exit, the time ([`super::proof`]) | HOST |
//! | `hosts/HOST/rollout/NAME` | a person's decision on the rollout of NAME's serial, made on HOST (`cert-agent fleet rollout resume\|abort`): resume or abort, the serial, the host, the time ([`super::decision`]) | HOST |
//! | `hosts/HOST/unplaced/NAME` | an order intent of NAME whose order HOST did not place (its lead ended before it was sent, or the API refused it) | HOST |
//! | `manifest/HOST` | HOST's entry of the fleet's manifest: per certificate, the highest versions of the shared record, the current certificate and the tombstone HOST accepted; a host that has accepted nothing of a certificate takes the highest of all entries as its floor ([`super::manifest`]) | HOST |
//!
//! Every value but `leader`, `resigned` and `waiting` is a document's JSON (a shared record's
//! without the entries its reader fills in by itself, [`super::compact`]) sealed in the
//! fleet's envelope ([`super::envelope`]); the private keys inside the record and the certificate are sealed once
//! more, each under its own purpose. The three host names carry no secret: a forged `resigned`
//! could only make the hosts leave a dead leader's work to their next scheduled run, as a host
//! with write access to the prefix could anyway; a forged `waiting` only makes the daemons read
//! the shared records for open work once, as a lead ended with its lease does.
//!
//! The documents' types, their keys, and their encoding.

use std::path::PathBuf;

use anyhow::{Result, anyhow};
use base64::Engine as _;
use serde::{Deserialize, Serialize};
use time::OffsetDateTime;

use crate::config::CertificateConfig;
use crate::store::{CertRecord, FleetAttempt, OrderIntent};

use super::envelope::{Place, Purpose};

/// Where a run that waits between its rounds says so, relative to the prefix.
pub(super) const WAITING: &str = "waiting";

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
pub(super) fn retired_key(name: &str) -> String {
    format!("certs/{name}/retired")
}
pub(super) fn chain_key(hash: &str) -> String {
    format!("chains/{hash}")
}
pub(super) fn dcv_key(name: &str) -> String {
    format!("dcv/{name}")
}
pub(super) fn acme_account_key(ca: &str) -> String {
    format!("acme/{ca}/account")
}
pub(super) fn dcv_served_key(host: &str, name: &str) -> String {
    format!("hosts/{host}/dcv/{name}")
}
pub(super) fn host_key(host: &str, name: &str) -> String {
    format!("hosts/{host}/certs/{name}")
}
pub(super) fn seen_key(host: &str) -> String {
    format!("hosts/{host}/seen")
}
pub(super) fn proof_key(host: &str, name: &str) -> String {
    format!("hosts/{host}/proof/{name}")
}
pub(super) fn decision_key(host: &str, name: &str) -> String {
    format!("hosts/{host}/rollout/{name}")
}
pub(super) fn unplaced_key(host: &str, name: &str) -> String {
    format!("hosts/{host}/unplaced/{name}")
}

/// Where the hosts' manifest entries live, relative to the prefix.
pub(super) const MANIFEST: &str = "manifest/";

pub(super) fn manifest_key(host: &str) -> String {
    format!("{MANIFEST}{host}")
}

/// What lives at a key under the prefix, with the certificate it belongs to.
#[derive(Debug, Clone, Copy)]
pub(super) enum Kind<'a> {
    KeyCheck,
    Spec(&'a str),
    State(&'a str),
    Current(&'a str),
    Retired(&'a str),
    Dcv(&'a str),
    HostResult(&'a str),
    HostSeen,
    Unplaced(&'a str),
    Manifest,
    AcmeAccount(&'a str),
    DcvServed(&'a str),
    Proof(&'a str),
    Decision(&'a str),
    Chain(&'a str),
}

impl<'a> Kind<'a> {
    pub(super) fn of(rel: &'a str) -> Option<Self> {
        let parts: Vec<&str> = rel.split('/').collect();
        Some(match parts.as_slice() {
            [k] if *k == KEY_CHECK => Self::KeyCheck,
            ["certs", name, "spec"] => Self::Spec(name),
            ["certs", name, "state"] => Self::State(name),
            ["certs", name, "current"] => Self::Current(name),
            ["certs", name, "retired"] => Self::Retired(name),
            ["dcv", name] => Self::Dcv(name),
            ["hosts", _, "certs", name] => Self::HostResult(name),
            ["hosts", _, "seen"] => Self::HostSeen,
            ["hosts", _, "unplaced", name] => Self::Unplaced(name),
            ["manifest", _] => Self::Manifest,
            ["acme", ca, "account"] => Self::AcmeAccount(ca),
            ["hosts", _, "dcv", name] => Self::DcvServed(name),
            ["hosts", _, "proof", name] => Self::Proof(name),
            ["hosts", _, "rollout", name] => Self::Decision(name),
            ["chains", hash] => Self::Chain(hash),
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
            Self::Retired(n) => (Purpose::Retired, n),
            Self::Dcv(n) => (Purpose::Dcv, n),
            Self::HostResult(n) => (Purpose::HostResult, n),
            Self::HostSeen => (Purpose::HostSeen, ""),
            Self::Unplaced(n) => (Purpose::Unplaced, n),
            Self::Manifest => (Purpose::Manifest, ""),
            Self::AcmeAccount(ca) => (Purpose::AcmeAccount, ca),
            Self::DcvServed(n) => (Purpose::DcvServed, n),
            Self::Proof(n) => (Purpose::Proof, n),
            Self::Decision(n) => (Purpose::RolloutDecision, n),
            Self::Chain(hash) => (Purpose::ChainCert, hash),
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
            Kind::Retired(_) => "tombstone",
            Kind::Dcv(_) => "validation file",
            Kind::HostResult(_) => "host result",
            Kind::HostSeen => "host seen",
            Kind::Unplaced(_) => "order not placed",
            Kind::Manifest => "manifest entry",
            Kind::AcmeAccount(_) => "ACME account",
            Kind::DcvServed(_) => "validation file served",
            Kind::Proof(_) => "host proof",
            Kind::Decision(_) => "rollout decision",
            Kind::Chain(_) => "intermediate certificate",
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
    /// The archive the API sent (base64), as a leader of an earlier version published it;
    /// empty when `chain` holds the certificate.
    pub(super) archive: String,
    /// The certificate's leaf (PEM) when `intermediates` names its issuers; else, as an
    /// earlier version published a certificate of an ACME CA, its checked chain (the leaf,
    /// then the intermediates). A host of a version without it reads an empty archive and
    /// refuses the certificate, naming it, without installing anything; a host of a version
    /// without `intermediates` finds no issuer of the leaf and refuses it too.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(super) chain: Option<String>,
    /// The hex SHA-256 of each issuer certificate of the chain, nearest first (the root last
    /// when the bundle held one): each stored once per fleet at `chains/SHA256`
    /// ([`super::chains`]).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub(super) intermediates: Vec<String>,
    /// The private key's PEM, sealed for this key, name and version (base64).
    pub(super) key: String,
}

/// The tombstone of a certificate retired for the whole fleet: every host archives its record,
/// withdraws what it serves for it and never installs, orders or publishes it again while the
/// tombstone is there.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub(super) struct Tombstone {
    #[serde(with = "time::serde::rfc3339")]
    pub(super) retired_at: OffsetDateTime,
    /// The host that retired it (and led then).
    pub(super) by: String,
    /// Whether each host deletes its installed files (never one its web server still names).
    pub(super) remove_files: bool,
    /// What the cancellation came to, in words (`None`: not asked for).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(super) cancel: Option<String>,
}

/// A validation file the hosts serve.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub(super) struct DcvEntry {
    pub(super) file_name: String,
    pub(super) content: String,
    /// The other `http-01` files of the same ACME order (one per name); a host of an earlier
    /// version serves the first file alone.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub(super) more: Vec<DcvFile>,
}

/// One more validation file of a [`DcvEntry`].
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub(super) struct DcvFile {
    pub(super) file_name: String,
    pub(super) content: String,
}

impl DcvEntry {
    /// Every file: (name, content).
    pub(super) fn files(&self) -> impl Iterator<Item = (&str, &str)> {
        std::iter::once((self.file_name.as_str(), self.content.as_str())).chain(
            self.more
                .iter()
                .map(|f| (f.file_name.as_str(), f.content.as_str())),
        )
    }
}

/// `acme/CA/account`: the fleet's account with an ACME CA. The credentials (the account's
/// private key among them) are sealed once more under their own purpose.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub(super) struct AcmeAccountDoc {
    /// The directory URL the account was registered with.
    pub(super) directory: String,
    /// The account's URL at the CA.
    pub(super) account_url: String,
    /// The account file's bytes, sealed for this key (base64).
    pub(super) credentials: String,
    pub(super) registered_by: String,
    #[serde(with = "time::serde::rfc3339")]
    pub(super) registered_at: OffsetDateTime,
}

/// `hosts/HOST/dcv/NAME`: the ACME validation file HOST serves for NAME.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub(super) struct DcvServed {
    pub(super) file_name: String,
    /// SHA-256 of the content served (lower-case hex).
    pub(super) content_sha256: String,
    #[serde(with = "time::serde::rfc3339")]
    pub(super) at: OffsetDateTime,
}

/// `hosts/HOST/seen`: when the host last synchronised, and where its fleet key rotation
/// stands (what `fleet rotate-key` checks before it calls a rotation complete).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub(super) struct HostSeen {
    #[serde(with = "time::serde::rfc3339")]
    pub at: OffsetDateTime,
    /// The id of the host's current fleet key.
    pub key_id: u8,
    /// The id of the previous key the host still opens values with; `None` when it holds
    /// none, or the rotation ended on it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub previous_key_id: Option<u8>,
    /// The host's instance id (random, one per state directory): another host configured
    /// with the same name writes another.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub instance: Option<String>,
    /// The last whole line of the host's audit log when it synchronised: another host's
    /// `fleet status` keeps the highest it saw and reports a log that went back.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub audit: Option<AuditMark>,
}

/// A line of a host's audit log: its `seq` and its `hash` (`audit --verify
/// --expect-min-seq SEQ --expect-last-hash HASH` on that host checks the log against it).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub(super) struct AuditMark {
    pub seq: u64,
    pub hash: String,
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
    /// Why the host does not install the version although it could (it serves a newer
    /// certificate of its own, which its next lead hands to the fleet).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub skipped: Option<String>,
}

impl SharedState {
    /// The fleet's last attempt as this record tells it: its texts made printable and capped
    /// (they come from etcd, opened but written by another host).
    pub(super) fn attempt(&self) -> FleetAttempt {
        attempt_of(&self.record, &self.written_by)
    }
}

/// The fleet's last attempt as `r`, the record `by` shared, tells it.
pub(super) fn attempt_of(r: &CertRecord, by: &str) -> FleetAttempt {
    {
        FleetAttempt {
            failures: r.failures,
            error: r
                .last_error
                .as_deref()
                .filter(|_| r.failures > 0)
                .map(|e| printable_capped(e, FleetAttempt::MAX_ERROR)),
            failed_at: r.last_failed_at,
            by: printable_capped(by, 255),
        }
    }
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
    // What the CRL said of this host's installed certificate: this host's, as `installed`.
    r.revocation = None;
    r.held = None;
    r.dcv = Default::default();
    r.fleet = None;
    r.host_failures = 0;
    r.host_error = None;
    r.rollout_halted = None;
    r.rolled_back = None;
    r.rollout_overridden = None;
    if let Some(p) = &mut r.pending_key {
        p.key_file = PathBuf::new();
    }
    r
}
/// What etcd holds is shown through the one sanitiser: it cannot move the cursor, recolour or
/// retitle the terminal, or reorder what `fleet status` prints.
pub(crate) use crate::values::text::{printable, printable_capped};

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
        rec.pending_key = Some(Box::new(PendingKey {
            key_file: PathBuf::from("/var/lib/cert-agent/keys/www/1.key"),
            csr_pem: "csr".into(),
            csr_md5: "M".into(),
            csr_sha256: "S".into(),
            created_at: OffsetDateTime::UNIX_EPOCH,
        }));
        rec.fleet = Some(FleetAttempt::default());
        rec.host_failures = 3;
        rec.host_error = Some("certs/www/current does not open".into());
        let v = shared_view(&rec);
        assert!(v.fleet.is_none() && v.host_failures == 0 && v.host_error.is_none());
        assert!(v.dcv.files.is_empty());
        assert_eq!(v.pending_key.unwrap().key_file, PathBuf::new());
        assert_eq!(v.failures, 2);
    }

    #[test]
    fn the_fleets_attempt_is_printable_and_capped() {
        let rec = CertRecord {
            name: "www".into(),
            failures: 2,
            last_error: Some(format!("\x1b[2J\x1b]0;owned\x07{}", "x".repeat(5000))),
            ..CertRecord::default()
        };
        let a = attempt_of(&rec, "web1\u{202e}");
        assert_eq!(a.failures, 2);
        let error = a.error.unwrap();
        assert!(
            error.starts_with("\\x1b[2J\\x1b]0;owned\\x07xxx"),
            "{error}"
        );
        assert!(!error.chars().any(char::is_control), "{error}");
        // Cut after MAX_ERROR characters of the text (14 before the run of `x`), with an
        // ellipsis.
        let xs = error
            .trim_start_matches(|c| c != 'o')
            .trim_start_matches("owned\\x07");
        assert_eq!(
            xs.matches('x').count(),
            FleetAttempt::MAX_ERROR - 14,
            "{error}"
        );
        assert!(error.ends_with('…'));
        assert_eq!(a.by, "web1\\u{202e}");
        // No failure: no error carried, even when the record keeps a message.
        let fine = CertRecord {
            failures: 0,
            last_error: Some("needs consent".into()),
            ..rec
        };
        let a = attempt_of(&fine, "web1");
        assert!(!a.failing() && a.error.is_none());
    }
}
