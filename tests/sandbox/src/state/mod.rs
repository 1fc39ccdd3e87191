//! The sandbox's semantics: accounts, catalogue, orders, certificate life cycle, DCV, reissue,
//! cancel, prolong and balance, all in memory behind the transport's one lock.
//!
//! Time is always a parameter (`now`): the transport owns the (scalable, advanceable) clock.

use serde::{Deserialize, Serialize};
use time::OffsetDateTime;

use crate::bundle::HostileInput;
use crate::ca::Authority;
use crate::wire::{ApiRequest, ApiResponse, DcvCheck};

/// Knobs fixed at start.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct StateConfig {
    /// Seed of every random ID and token.
    pub seed: u64,
    /// Longest lifetime of an issued certificate, in days (document: about 200).
    pub max_cert_days: i64,
    /// Accounts to create; `None` means the documented defaults (password `sandbox`).
    pub accounts: Option<Vec<AccountSpec>>,
}

impl Default for StateConfig {
    fn default() -> Self {
        Self {
            seed: 1,
            max_cert_days: 199,
            accounts: None,
        }
    }
}

/// An account to create at start (`--accounts FILE` is a JSON array of these).
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct AccountSpec {
    pub login: String,
    pub password: String,
    /// `partner`, `restricted`, `retail` or `no_agreement`.
    pub role: String,
}

/// A DNS record set through the control API (CNAME_CSR_HASH, DNS_TXT_TOKEN).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct DnsRecord {
    /// Fully qualified name, no trailing dot, lower case.
    pub name: String,
    /// `CNAME` or `TXT`.
    pub rtype: String,
    pub value: String,
}

/// The whole simulated world. Serialisable so a restarted sandbox keeps its orders.
#[derive(Debug, Serialize, Deserialize)]
pub struct State {
    _todo: (),
}

impl State {
    pub fn new(config: StateConfig, now: OffsetDateTime) -> Self {
        let _ = (config, now);
        todo!("state helper")
    }

    /// Answers one partner-API request (every endpoint of the document, including the
    /// ancillary ones and the alternate list path). OPTIONS and CORS are the transport's.
    pub fn dispatch(&mut self, req: &ApiRequest, now: OffsetDateTime, ca: &Authority) -> ApiResponse {
        let _ = (req, now, ca);
        todo!("state helper")
    }

    /// Time-driven transitions up to `now`: validation by DNS records / approved emails,
    /// issuance once every domain is validated, family C's pickup cycle, staff processing of
    /// cancellations, expiry, automatic preparation of renewal tokens ~30 days before expiry.
    pub fn tick(&mut self, now: OffsetDateTime, ca: &Authority) {
        let _ = (now, ca);
        todo!("state helper")
    }

    /// HTTP file checks that are due at `now` (the validator's retry schedule lives here).
    pub fn due_dcv_checks(&mut self, now: OffsetDateTime) -> Vec<DcvCheck> {
        let _ = now;
        todo!("state helper")
    }

    /// Result of one HTTP file check: the body fetched, or why nothing was fetched.
    pub fn record_dcv_fetch(
        &mut self,
        check: &DcvCheck,
        fetched: Result<Vec<u8>, String>,
        now: OffsetDateTime,
        ca: &Authority,
    ) {
        let _ = (check, fetched, now, ca);
        todo!("state helper")
    }

    // ---- control API (tests only) ----

    /// Make validation and issuance instant (no waiting on schedules or pickup cycles).
    pub fn set_instant(&mut self, instant: bool) {
        let _ = instant;
        todo!("state helper")
    }

    pub fn set_dns_record(&mut self, record: DnsRecord) {
        let _ = record;
        todo!("state helper")
    }

    pub fn remove_dns_record(&mut self, name: &str, rtype: &str) {
        let _ = (name, rtype);
        todo!("state helper")
    }

    /// "Click" the EMAIL approval for one domain, or for every domain when `None`.
    pub fn approve_email(&mut self, certificate_id: u64, domain: Option<&str>) -> Result<(), String> {
        let _ = (certificate_id, domain);
        todo!("state helper")
    }

    /// Re-issue the current leaf (same key, names and serial rules) so that it expires in
    /// `days_left` days from `now`.
    pub fn age_certificate(
        &mut self,
        certificate_id: u64,
        days_left: i64,
        now: OffsetDateTime,
        ca: &Authority,
    ) -> Result<(), String> {
        let _ = (certificate_id, days_left, now, ca);
        todo!("state helper")
    }

    /// Make the subscription end `days_left` days from `now`.
    pub fn shorten_subscription(
        &mut self,
        certificate_id: u64,
        days_left: i64,
        now: OffsetDateTime,
    ) -> Result<(), String> {
        let _ = (certificate_id, days_left, now);
        todo!("state helper")
    }

    /// Force a state (`annulled`, `expired`, `waiting_for_approval`, `other`, ...).
    pub fn force_status(&mut self, certificate_id: u64, status: &str) -> Result<(), String> {
        let _ = (certificate_id, status);
        todo!("state helper")
    }

    /// Invalidate the account's token as if another signin had issued a new one.
    pub fn rotate_token(&mut self, login: &str) -> Result<(), String> {
        let _ = login;
        todo!("state helper")
    }

    /// Billed orders per account login.
    pub fn billed_orders(&self) -> Vec<(String, u64)> {
        todo!("state helper")
    }

    /// Facts of the current issued certificate, to build a hostile bundle from.
    pub fn hostile_input(&self, certificate_id: u64, now: OffsetDateTime, ca: &Authority) -> Option<OwnedHostileInput> {
        let _ = (certificate_id, now, ca);
        todo!("state helper")
    }

    /// A read-only JSON view of one certificate's internal record (for tests).
    pub fn inspect(&self, certificate_id: u64) -> Option<serde_json::Value> {
        let _ = certificate_id;
        todo!("state helper")
    }
}

/// Owned data behind a [`HostileInput`].
#[derive(Debug, Clone)]
pub struct OwnedHostileInput {
    pub issuer: String,
    pub public_key_der: Vec<u8>,
    pub common_name: String,
    pub dns_names: Vec<String>,
    pub leaf_pem: String,
    pub chain_pem: Vec<String>,
    pub root_pem: String,
    pub now: OffsetDateTime,
}

impl OwnedHostileInput {
    pub fn borrow(&self) -> HostileInput<'_> {
        HostileInput {
            issuer: &self.issuer,
            public_key_der: &self.public_key_der,
            common_name: &self.common_name,
            dns_names: &self.dns_names,
            parts: crate::bundle::BundleParts {
                common_name: &self.common_name,
                leaf_pem: &self.leaf_pem,
                chain_pem: &self.chain_pem,
                root_pem: &self.root_pem,
            },
            now: self.now,
        }
    }
}
