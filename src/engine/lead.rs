//! What the engine asks of a fleet's leader, and what it hands back to it: the narrow
//! interface through which the fleet takes part in a run without the engine knowing etcd.

use futures_util::future::LocalBoxFuture;
use time::OffsetDateTime;

use crate::config::{AcmeCa, CertificateConfig};
use crate::dcv::ValidationFile;
use crate::store::{CertRecord, OrderIntent};

/// A fleet's leader, as the engine sees it while it leads.
pub trait Lead {
    /// Shares `rec` (and its pending key) with the other hosts: called before every billed or
    /// state-changing call to the Partner API, which is not made when this fails.
    fn share<'a>(
        &'a self,
        cert: &'a CertificateConfig,
        rec: &'a CertRecord,
    ) -> LocalBoxFuture<'a, anyhow::Result<()>>;

    /// Publishes the validation file for every host.
    fn publish_dcv<'a>(
        &'a self,
        cert: &'a CertificateConfig,
        file: &'a ValidationFile,
    ) -> LocalBoxFuture<'a, anyhow::Result<()>>;

    /// Withdraws the validation file from every host.
    fn remove_dcv<'a>(&'a self, cert: &'a CertificateConfig) -> LocalBoxFuture<'a, ()>;

    /// The order of `intent` was not placed — refused by the API, or kept back by the send
    /// guard because the lead ended before it was sent — and `rec` (without the intent) is the
    /// record now: the other hosts must not wait for that order. Shares `rec` while the lead
    /// is held; otherwise notes, in this host's own part of the fleet, that the intent was
    /// never placed, so that the next leader withdraws it and orders normally.
    fn not_placed<'a>(
        &'a self,
        _cert: &'a CertificateConfig,
        _rec: &'a CertRecord,
        _intent: &'a OrderIntent,
    ) -> LocalBoxFuture<'a, ()> {
        Box::pin(async {})
    }

    /// The check the run's Partner API client makes before every request it sends: it
    /// refuses once this host may no longer lead (`None`: no check).
    fn send_guard(&self) -> Option<crate::api::SendGuard> {
        None
    }

    /// Makes this host's account with the ACME CA `ca` the fleet's before it is used: the
    /// fleet's account written here when the fleet has one, else this host's registered
    /// (when it has none) and shared.
    fn acme_account<'a>(&'a self, _ca: &'a AcmeCa) -> LocalBoxFuture<'a, anyhow::Result<()>> {
        Box::pin(async { Ok(()) })
    }

    /// The other hosts that do not serve every one of `files` for `cert` yet, after waiting
    /// a while for them: an ACME challenge is answered only once this is empty.
    fn hosts_not_serving<'a>(
        &'a self,
        _cert: &'a CertificateConfig,
        _files: &'a [ValidationFile],
    ) -> LocalBoxFuture<'a, anyhow::Result<Vec<String>>> {
        Box::pin(async { Ok(Vec::new()) })
    }

    /// Whether this host proves what it installs before the install is committed (a rollout
    /// in waves): the engine then installs up to the verification, asks [`Lead::prove_held`]
    /// which installs to roll back, settles the batch and calls [`Lead::settled`].
    fn holds_installs(&self) -> bool {
        false
    }

    /// Proves what this host serves of each certificate of `live` (its new files live, not yet
    /// committed) and names those to roll back: name → why.
    fn prove_held<'a>(
        &'a self,
        _live: &'a [Live],
    ) -> LocalBoxFuture<'a, std::collections::HashMap<String, String>> {
        Box::pin(async { std::collections::HashMap::new() })
    }

    /// After the batch [`Lead::prove_held`] saw was settled (the installs to roll back rolled
    /// back, the others committed): the proofs published.
    fn settled(&self) -> LocalBoxFuture<'_, ()> {
        Box::pin(async {})
    }

    /// Why this host does not install `serial` of the certificate of `rec` now: it rolled that
    /// serial back here after its proof failed, and no one resumed the rollout since; or the
    /// fleet publishes that serial already (another leader obtained it) and the rollout keeps
    /// it from this host, as it keeps it from any host (`None`: install it).
    fn refuses<'a>(
        &'a self,
        _rec: &'a CertRecord,
        _serial: &'a str,
    ) -> LocalBoxFuture<'a, Option<Refusal>> {
        Box::pin(async { None })
    }

    /// The record of `name` as this host's state directory holds it now, when the leader's
    /// run already read or wrote it (its import): the engine takes it instead of reading it
    /// again (`None`: read it).
    fn take_record(&self, _name: &str) -> Option<CertRecord> {
        None
    }
}

/// A certificate whose new files are live in a held batch ([`super::deploy::HeldBatch`]): its name, the serial it
/// serves now, and the certificate installed before it (none: a first install).
pub struct Live {
    pub name: String,
    pub serial: String,
    /// The serial installed before.
    pub previous: Option<String>,
    /// The dates (`not_before`, `not_after`) of the certificate installed before.
    pub previous_dates: Option<(OffsetDateTime, OffsetDateTime)>,
}

/// Why a leader does not install a certificate it obtained ([`Lead::refuses`]).
pub struct Refusal {
    /// In words.
    pub reason: String,
    /// Refused for good (its rollout aborted): the order or reissue that brought it is closed.
    pub aborted: bool,
    /// Not yet (this host's wave has not come): pending work, not a refusal.
    pub waiting: bool,
}

/// A certificate the engine installed, as a leader publishes it to the other hosts.
#[derive(Clone)]
pub struct Installable {
    pub certificate_id: u64,
    pub serial: String,
    pub not_before: OffsetDateTime,
    pub not_after: OffsetDateTime,
    pub key_pem: Vec<u8>,
    /// The archive as the API sent it (what the other hosts check again); empty for a
    /// certificate of an ACME CA.
    pub archive: Vec<u8>,
    /// The checked chain (the leaf, then the intermediates, PEM) of a certificate of an ACME
    /// CA, which the other hosts check again.
    pub chain: Option<Vec<u8>>,
}
