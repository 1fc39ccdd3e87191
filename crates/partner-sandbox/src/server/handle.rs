//! The handle of a running sandbox: its addresses and trust anchors, and the control
//! operations (clock, DNS, e-mail approval, faults, call log, ...) acting directly on the
//! shared state. Dropping it stops the sandbox.

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use serde_json::Value;
use time::OffsetDateTime;
use tokio::sync::watch;

use crate::balancer::{DcvBalance, DcvPorts};
use crate::control;
use crate::crl::{CrlFault, Revocation};
use crate::faults::Fault;
use crate::state::DnsRecord;
use crate::state::RevokeTarget;
use crate::world::{CallRecord, Shared};

/// A running sandbox; stops (and removes its temporary directory, if it made one) on drop.
pub struct SandboxHandle {
    pub(super) shared: Arc<Shared>,
    pub(super) addr: SocketAddr,
    pub(super) http_addr: Option<SocketAddr>,
    pub(super) crl_addr: SocketAddr,
    pub(super) base_url: String,
    pub(super) data_dir: PathBuf,
    pub(super) owned_dir: bool,
    pub(super) shutdown: watch::Sender<bool>,
    pub(super) thread: Option<std::thread::JoinHandle<()>>,
}

impl std::fmt::Debug for SandboxHandle {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SandboxHandle")
            .field("base_url", &self.base_url)
            .field("data_dir", &self.data_dir)
            .finish_non_exhaustive()
    }
}

impl SandboxHandle {
    /// `https://127.0.0.1:PORT` (no trailing slash).
    pub fn base_url(&self) -> &str {
        &self.base_url
    }

    /// The HTTPS listen address.
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// The plain-HTTP redirect listener's address, when configured.
    pub fn http_addr(&self) -> Option<SocketAddr> {
        self.http_addr
    }

    /// The plain-HTTP CRL listener's address.
    pub fn crl_addr(&self) -> SocketAddr {
        self.crl_addr
    }

    /// The CRL distribution point of an issuer value (`s-one`, `s-two`, `d-one`, `c-one`).
    pub fn crl_url(&self, issuer: &str) -> String {
        crate::ca::crl_url(&format!("http://{}", self.crl_addr), issuer)
    }

    /// Revokes a certificate (its current one for an ID, or a serial) with an RFC 5280 reason
    /// name or code; annuls its order unless `keep_order`. The CRL changes at once.
    pub fn revoke(
        &self,
        target: RevokeTarget,
        reason: &str,
        keep_order: bool,
    ) -> Result<Revocation, String> {
        control::revoke(&self.shared, &target, reason, keep_order)
    }

    /// Sets (or clears) the fault every CRL carries; `bytes` sizes `oversized`.
    pub fn set_crl_fault(&self, fault: Option<CrlFault>, bytes: Option<usize>) {
        control::set_crl_fault(&self.shared, fault, bytes);
    }

    /// Redirects (302) every CRL request to `location`, or with `None` serves them again.
    pub fn set_crl_redirect(&self, location: Option<&str>) {
        control::set_crl_redirect(&self.shared, location.map(str::to_owned));
    }

    /// How often each CRL path was fetched.
    pub fn crl_fetches(&self) -> BTreeMap<String, u64> {
        control::crl_fetches(&self.shared)
    }

    /// The sandbox's CA file (`DIR/api-ca.pem`): the trust anchor of the API's TLS
    /// certificate, then the root of the certificates it issues (`api.ca_file`).
    pub fn api_ca_path(&self) -> PathBuf {
        self.data_dir.join("api-ca.pem")
    }

    /// Root of the certificates the sandbox issues (`DIR/root.pem`).
    pub fn root_path(&self) -> PathBuf {
        self.data_dir.join("root.pem")
    }

    pub fn data_dir(&self) -> &Path {
        &self.data_dir
    }

    /// The virtual time.
    pub fn now(&self) -> OffsetDateTime {
        control::now(&self.shared)
    }

    /// Moves virtual time forward (time-driven transitions run at once); returns the new now.
    pub fn advance(&self, by: Duration) -> OffsetDateTime {
        let by = time::Duration::try_from(by).unwrap_or(time::Duration::MAX);
        control::advance(&self.shared, by)
    }

    pub fn set_instant(&self, instant: bool) {
        expect_ok("set_instant", control::set_instant(&self.shared, instant));
    }

    pub fn set_dns_record(&self, name: &str, rtype: &str, value: &str) {
        let record = DnsRecord {
            name: name.trim_end_matches('.').to_ascii_lowercase(),
            rtype: rtype.to_ascii_uppercase(),
            value: value.to_owned(),
        };
        expect_ok(
            "set_dns_record",
            control::set_dns_record(&self.shared, record),
        );
    }

    pub fn remove_dns_record(&self, name: &str, rtype: &str) {
        let name = name.trim_end_matches('.').to_ascii_lowercase();
        expect_ok(
            "remove_dns_record",
            control::remove_dns_record(&self.shared, &name, &rtype.to_ascii_uppercase()),
        );
    }

    /// "Clicks" the EMAIL approval for `domain` (every domain when `None`).
    pub fn approve_email(&self, certificate_id: u64, domain: Option<&str>) -> Result<(), String> {
        control::approve_email(&self.shared, certificate_id, domain)
    }

    /// Re-issues the current leaf so that it expires `days_left` days from now.
    pub fn age_certificate(&self, certificate_id: u64, days_left: i64) -> Result<(), String> {
        control::age_certificate(&self.shared, certificate_id, days_left)
    }

    /// Makes the subscription end `days_left` days from now.
    pub fn shorten_subscription(&self, certificate_id: u64, days_left: i64) -> Result<(), String> {
        control::shorten_subscription(&self.shared, certificate_id, days_left)
    }

    pub fn force_status(&self, certificate_id: u64, status: &str) -> Result<(), String> {
        control::force_status(&self.shared, certificate_id, status)
    }

    /// Invalidates `login`'s token as if another signin had issued a new one.
    pub fn rotate_token(&self, login: &str) -> Result<(), String> {
        control::rotate_token(&self.shared, login)
    }

    /// Completes a prepared renewal order (`prolongation_token`) as the order site would: a new,
    /// billed order; returns its certificate ID.
    pub fn complete_renewal(&self, prolongation_token: &str) -> Result<u64, String> {
        control::complete_renewal(&self.shared, prolongation_token)
    }

    /// Sets the payments received of `login`'s account, in cents of its currency: the balance
    /// call's `available` becomes this sum.
    pub fn set_payments(&self, login: &str, cents: i64) -> Result<(), String> {
        control::set_payments(&self.shared, login, cents)
    }

    /// The accounts (ID, login, role, currency, public token).
    pub fn accounts(&self) -> Vec<crate::state::AccountInfo> {
        control::accounts(&self.shared)
    }

    /// Every DNS record set through the control surface.
    pub fn dns_records(&self) -> Vec<DnsRecord> {
        control::dns_records(&self.shared)
    }

    /// Billed orders placed by `login` so far.
    pub fn billed_orders(&self, login: &str) -> u64 {
        control::billed_orders(&self.shared)
            .into_iter()
            .find(|(l, _)| l == login)
            .map_or(0, |(_, n)| n)
    }

    /// The most partner-API requests that were being answered at the same time since the
    /// previous call of this method (or the start); the count restarts from the requests open
    /// now.
    pub fn take_peak_concurrent_calls(&self) -> usize {
        self.shared.take_peak_in_flight()
    }

    /// Every partner-API call so far (oldest first).
    pub fn calls(&self) -> Vec<CallRecord> {
        control::calls(&self.shared)
    }

    pub fn clear_calls(&self) {
        control::clear_calls(&self.shared);
    }

    /// Arms a fault. Panics on an invalid fault (a bug in the test).
    pub fn inject(&self, fault: Fault) {
        if let Err(e) = control::inject(&self.shared, fault) {
            panic!("invalid fault: {e}");
        }
    }

    /// The faults still armed.
    pub fn faults(&self) -> Vec<Fault> {
        control::faults(&self.shared)
    }

    pub fn clear_faults(&self) {
        control::clear_faults(&self.shared);
    }

    /// The state's internal record of a certificate.
    pub fn inspect(&self, certificate_id: u64) -> Option<Value> {
        control::inspect(&self.shared, certificate_id)
    }

    /// Where the validator fetches HTTP and HTTPS DCV files (ports on 127.0.0.1).
    pub fn set_dcv_ports(&self, http: u16, https: u16) {
        control::set_dcv_ports(&self.shared, http, https);
    }

    /// Several HTTP ports behind a load balancer (one per host of a fleet): `balance` says
    /// how the validator picks among them; the HTTPS port and the seed stay.
    pub fn set_dcv_http_ports(&self, http: &[u16], balance: DcvBalance) {
        let old = control::dcv_pool(&self.shared);
        control::set_dcv_pool(
            &self.shared,
            DcvPorts::new(http.to_vec(), old.https().to_vec(), balance, old.seed()),
        );
    }

    /// Replaces the DCV ports and the balancer at once.
    pub fn set_dcv_pool(&self, ports: DcvPorts) {
        control::set_dcv_pool(&self.shared, ports);
    }

    /// Where (and how) the validator fetches DCV files now.
    pub fn dcv_ports(&self) -> DcvPorts {
        control::dcv_pool(&self.shared)
    }

    /// Runs one validator round now (tick, due checks, fetches) instead of waiting for the
    /// next one. Blocks until it is done; not for use on the sandbox's own runtime.
    pub fn validate_now(&self) {
        let shared = self.shared.clone();
        let run = move || {
            let rt = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build();
            if let Ok(rt) = rt {
                rt.block_on(crate::validator::round(&shared));
            }
        };
        // A fresh thread: safe from inside any runtime.
        let _ = std::thread::spawn(run).join();
    }
}

fn expect_ok(what: &str, r: Result<(), String>) {
    if let Err(e) = r {
        panic!("{what}: {e}");
    }
}

impl Drop for SandboxHandle {
    fn drop(&mut self) {
        let _ = self.shutdown.send(true);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
        self.shared.persist(true);
        if self.owned_dir {
            let _ = std::fs::remove_dir_all(&self.data_dir);
        }
    }
}
