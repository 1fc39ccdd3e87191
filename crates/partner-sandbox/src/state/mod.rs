//! The sandbox's semantics: accounts, catalogue, orders, certificate life cycle, DCV, reissue,
//! cancel, prolong and balance, all in memory behind the transport's one lock.
//!
//! Time is always a parameter (`now`): the transport owns the (scalable, advanceable) clock.
//! Internally every instant is a Unix timestamp in whole seconds (`i64`), which keeps the
//! state serialisable without extra features of `time`.
//!
//! Where the Partner API v1 reference is silent the strictest plausible behaviour is chosen; every such
//! choice is listed in `crates/partner-sandbox/docs/semantics.md`.
//!
//! Layout: `routes` (dispatch, auth), `params` (request parameters), `answers` (plain answer
//! shapes), `accounts` (signin, tokens, balance), `catalogue` (products, software, countries,
//! prices), `names` (host names, validation addresses), `orders` (order validation and
//! placement), `dcv` (validation methods, checks, DCV endpoints), `lifecycle` (time-driven
//! transitions, issuance), `certs` (list, details, status, downloads, cancel, prolong),
//! `reissue`, `control` (the test-only methods).

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};
use time::OffsetDateTime;

use crate::bundle::HostileInput;
use crate::ca::Authority;
use crate::wire::{ApiRequest, ApiResponse, DcvCheck};

mod accounts;
mod answers;
mod catalogue;
mod certs;
mod control;
mod dcv;
mod lifecycle;
mod model;
mod names;
mod orders;
mod params;
mod reissue;
mod rng;
mod routes;
#[cfg(test)]
mod tests;
mod wake;

use accounts::Account;
use model::Cert;
use rng::SeededRng;

pub use catalogue::{CA_DOMAINS, PROVIDER_D};
pub use control::{RevokeTarget, Revoked};

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

impl AccountSpec {
    /// The documented default accounts, all with password `sandbox`.
    pub fn defaults() -> Vec<AccountSpec> {
        [
            ("partner@sandbox.test", "partner"),
            ("billing@sandbox.test", "restricted"),
            ("retail@sandbox.test", "retail"),
            ("other@sandbox.test", "partner"),
            ("new@sandbox.test", "no_agreement"),
        ]
        .into_iter()
        .map(|(login, role)| AccountSpec {
            login: login.to_string(),
            password: "sandbox".to_string(),
            role: role.to_string(),
        })
        .collect()
    }

    /// Checks a list of account specs (known roles, unique non-empty logins).
    pub fn validate(specs: &[AccountSpec]) -> Result<(), String> {
        let mut seen = std::collections::BTreeSet::new();
        for spec in specs {
            if spec.login.trim().is_empty() {
                return Err("account with an empty login".to_string());
            }
            if !seen.insert(spec.login.as_str()) {
                return Err(format!("account '{}' is listed twice", spec.login));
            }
            if accounts::Role::parse(&spec.role).is_none() {
                return Err(format!(
                    "account '{}': unknown role '{}' (expected partner, restricted, retail or no_agreement)",
                    spec.login, spec.role
                ));
            }
        }
        Ok(())
    }
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

/// What the transport may print about an account at start.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct AccountInfo {
    pub id: u64,
    pub login: String,
    pub role: String,
    pub currency: String,
    /// Value for `X-PUBLIC-TOKEN` / `public_token` (products only).
    pub public_token: String,
}

/// The whole simulated world. Serialisable so a restarted sandbox keeps its orders.
#[derive(Debug, Serialize, Deserialize)]
pub struct State {
    config: StateConfig,
    rng: SeededRng,
    /// Anchor of family C's pickup cycle.
    created_at: i64,
    /// Latest `now` seen; used by control methods that take no time.
    last_now: i64,
    instant: bool,
    accounts: Vec<Account>,
    certs: BTreeMap<u64, Cert>,
    dns: Vec<DnsRecord>,
    /// Creation counter: orders the list newest first even within one second.
    seq: u64,
    /// Seconds the time scale has moved virtual time ahead of real time: issued certificates
    /// begin that much before the virtual issuance. Not saved: a restarted sandbox counts anew.
    #[serde(skip)]
    scale_drift: i64,
    /// Which certificates the next advance looks at.
    #[serde(skip, default = "wake::Wakes::stale")]
    wakes: wake::Wakes,
}

fn ts(t: OffsetDateTime) -> i64 {
    t.unix_timestamp()
}

impl State {
    pub fn new(config: StateConfig, now: OffsetDateTime) -> Self {
        let now = ts(now);
        let mut rng = SeededRng::new(config.seed);
        let specs = config
            .accounts
            .clone()
            .unwrap_or_else(AccountSpec::defaults);
        let mut accounts: Vec<Account> = Vec::with_capacity(specs.len());
        for spec in &specs {
            let id = loop {
                let id = rng.range(10_000, 99_999);
                if accounts.iter().all(|a| a.id != id) {
                    break id;
                }
            };
            accounts.push(Account::new(spec, id, rng.token(32), now));
        }
        Self {
            config,
            rng,
            created_at: now,
            last_now: now,
            instant: false,
            accounts,
            certs: BTreeMap::new(),
            dns: Vec::new(),
            seq: 0,
            scale_drift: 0,
            wakes: wake::Wakes::stale(),
        }
    }

    /// Answers one partner-API request (every endpoint of the document, including the
    /// ancillary ones and the alternate list path). OPTIONS and CORS are the transport's.
    pub fn dispatch(
        &mut self,
        req: &ApiRequest,
        now: OffsetDateTime,
        ca: &Authority,
    ) -> ApiResponse {
        let now = ts(now);
        self.advance(now, ca);
        let resp = self.route(req, now, ca);
        // A request can make something due at once (instant mode, a resend).
        self.advance(now, ca);
        resp
    }

    /// How far (seconds) the time scale has run virtual time ahead of real time.
    pub fn set_scale_drift(&mut self, secs: i64) {
        self.scale_drift = secs.max(0);
    }

    /// Time-driven transitions up to `now`: validation by DNS records / approved emails,
    /// issuance once every domain is validated, family C's pickup cycle, staff processing of
    /// cancellations, expiry, automatic preparation of renewal tokens ~30 days before expiry.
    pub fn tick(&mut self, now: OffsetDateTime, ca: &Authority) {
        self.advance(ts(now), ca);
    }

    /// HTTP file checks that are due at `now` (the validator's retry schedule lives here).
    pub fn due_dcv_checks(&mut self, now: OffsetDateTime) -> Vec<DcvCheck> {
        self.take_due_checks(ts(now))
    }

    /// Result of one HTTP file check: the body fetched, or why nothing was fetched.
    pub fn record_dcv_fetch(
        &mut self,
        check: &DcvCheck,
        fetched: Result<Vec<u8>, String>,
        now: OffsetDateTime,
        ca: &Authority,
    ) {
        let now = ts(now);
        self.record_fetch(check, fetched, now);
        self.advance(now, ca);
    }

    // ---- control API (tests only) ----

    /// Make validation and issuance instant (no waiting on schedules or pickup cycles).
    pub fn set_instant(&mut self, instant: bool) {
        self.instant = instant;
        self.wakes.touch_all();
    }

    pub fn set_dns_record(&mut self, record: DnsRecord) {
        self.put_dns_record(record);
    }

    pub fn remove_dns_record(&mut self, name: &str, rtype: &str) {
        self.delete_dns_records(name, rtype);
    }

    /// "Click" the EMAIL approval for one domain, or for every domain when `None`.
    pub fn approve_email(
        &mut self,
        certificate_id: u64,
        domain: Option<&str>,
    ) -> Result<(), String> {
        self.approve(certificate_id, domain)
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
        self.age(certificate_id, days_left, ts(now), ca)
    }

    /// Make the subscription end `days_left` days from `now`.
    pub fn shorten_subscription(
        &mut self,
        certificate_id: u64,
        days_left: i64,
        now: OffsetDateTime,
    ) -> Result<(), String> {
        self.shorten(certificate_id, days_left, ts(now))
    }

    /// Force a state (`annulled`, `expired`, `waiting_for_approval`, `other`, ...).
    pub fn force_status(&mut self, certificate_id: u64, status: &str) -> Result<(), String> {
        self.force(certificate_id, status)
    }

    /// Find the certificate to revoke; annul its order unless `keep_order`.
    pub fn revoke(
        &mut self,
        target: &RevokeTarget,
        keep_order: bool,
        now: OffsetDateTime,
    ) -> Result<Revoked, String> {
        self.revoke_at(target, keep_order, ts(now))
    }

    /// Invalidate the account's token as if another signin had issued a new one.
    pub fn rotate_token(&mut self, login: &str) -> Result<(), String> {
        self.rotate(login)
    }

    /// Sets the payments received of `login`'s account (cents of its currency): the balance
    /// call's `available` becomes this sum, `balance` this sum less the delivered bills.
    pub fn set_payments(&mut self, login: &str, cents: i64) -> Result<(), String> {
        if !(0..=100_000_000_000).contains(&cents) {
            return Err(format!(
                "payments {cents} cents out of range (0 to 1e9 units)"
            ));
        }
        let account = self
            .accounts
            .iter_mut()
            .find(|a| a.login == login)
            .ok_or_else(|| format!("no account '{login}'"))?;
        account.payments_cents = cents;
        Ok(())
    }

    /// Billed orders per account login.
    pub fn billed_orders(&self) -> Vec<(String, u64)> {
        self.accounts
            .iter()
            .map(|a| (a.login.clone(), a.billed_orders))
            .collect()
    }

    /// Facts of the current issued certificate, to build a hostile bundle from.
    pub fn hostile_input(
        &self,
        certificate_id: u64,
        now: OffsetDateTime,
        ca: &Authority,
    ) -> Option<OwnedHostileInput> {
        self.hostile(certificate_id, now, ca)
    }

    /// A read-only JSON view of one certificate's internal record (for tests).
    pub fn inspect(&self, certificate_id: u64) -> Option<serde_json::Value> {
        self.certs
            .get(&certificate_id)
            .and_then(|c| serde_json::to_value(c).ok())
    }

    // ---- additions beyond the transport's contract ----

    /// The accounts, for the start-up banner (passwords are the caller's).
    pub fn accounts(&self) -> Vec<AccountInfo> {
        self.accounts.iter().map(Account::info).collect()
    }

    /// Completes a prepared renewal order as the order site would (billed): a new certificate
    /// order for the same product, domains and CSR whose `prolonged_id` is the renewed one.
    /// Returns the new certificate ID.
    pub fn complete_renewal(
        &mut self,
        prolongation_token: &str,
        now: OffsetDateTime,
    ) -> Result<u64, String> {
        self.renew_by_token(prolongation_token, ts(now))
    }

    /// Every DNS record currently set.
    pub fn dns_records(&self) -> &[DnsRecord] {
        &self.dns
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
