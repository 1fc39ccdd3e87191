//! A host's proof of what it serves: after it installed and reloaded a fleet certificate, a
//! TLS handshake to the certificate's verify address for each of its names (SNI) must show
//! the new serial and a chain that links up to its root, and the optional `[fleet]
//! health_command` must exit 0. The result is written sealed under the host's own key,
//! `hosts/HOST/proof/NAME`, where `fleet status` reads it, and what it saw is kept in the
//! state directory (`state_dir/proved.json`). A proof that does not open, or
//! one written under another host's key, is refused naming its etcd key.

use std::collections::HashMap;
use std::time::{Duration, Instant};

use anyhow::{Result, anyhow};
use futures_util::StreamExt;
use serde::{Deserialize, Serialize};
use time::OffsetDateTime;

use crate::bundle::{Expected, ServerKind};
use crate::config::{CertificateConfig, CommandLine};
use crate::crypto::same_serial_hex;
use crate::store::served::Observation;

use super::envelope::{self, Place, Purpose};
use super::key::FleetKeys;
use super::link::FleetLink;
use super::schema::{printable_capped, proof_key};

/// How long the proofs of one synchronisation wait, in all, for every certificate, address
/// and name to serve the new serial (a reload settles asynchronously; the install's own check
/// saw one name served already). The handshakes run side by side, so that a host that leads
/// holds the lead this long at most for them.
const PROOF_WAIT: Duration = Duration::from_secs(4);
/// Handshakes of one certificate under way at once...
const NAMES_AT_ONCE: usize = 16;
/// ...and certificates proved at once.
const CERTIFICATES_AT_ONCE: usize = 4;
/// Limit of one handshake.
const HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(5);
/// Pause between handshakes to one address and name while it serves another serial.
const RETRY_PAUSE: Duration = Duration::from_millis(200);
/// Limit of the health command.
const HEALTH_TIMEOUT: Duration = Duration::from_secs(60);
/// Longest text kept of one reason.
const MAX_REASON: usize = 300;

/// What a host proved it serves of one certificate.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct Proof {
    /// The host that made the proof (the one whose key it is written under).
    pub host: String,
    /// The serial the host installed and proves.
    pub serial: String,
    /// The version of the fleet's certificate it installed.
    pub version: u64,
    #[serde(with = "time::serde::rfc3339")]
    pub at: OffsetDateTime,
    /// A proof that passed: since when this host has proved this serial served without a
    /// failed proof in between — the time of its first passing proof of it, kept by the
    /// drift proofs that pass again — so that they do not restart a wave's pause. None: it
    /// failed (or a proof of an older version: its `at`).
    #[serde(
        default,
        skip_serializing_if = "Option::is_none",
        with = "time::serde::rfc3339::option"
    )]
    pub since: Option<OffsetDateTime>,
    /// One answer per address and name.
    pub answers: Vec<Answer>,
    /// The health command's outcome (none configured: `None`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub health: Option<Health>,
    /// With a rollout in waves, after this proof failed: the host rolled its install back to
    /// the certificate it served before, and proved that again.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rolled_back: Option<RolledBack>,
}

/// What a host serves again after it rolled back an install whose proof failed.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct RolledBack {
    /// The serial it installed again (the one it served before).
    pub serial: String,
    /// Why it does not serve that serial again (its handshakes, or the rollback itself);
    /// none: proved served again.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub failure: Option<String>,
}

/// One handshake of a proof.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct Answer {
    pub address: String,
    pub server_name: String,
    /// The serial served (none: the handshake failed).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub served: Option<String>,
    /// Why the served chain does not verify (none: it does, or no handshake).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub chain_error: Option<String>,
    /// Why the handshake failed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
}

/// What the health command did.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct Health {
    /// Its exit code (none: killed by a signal, or it did not run to its end).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub exit: Option<i32>,
    /// Why it did not run to its end.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
}

impl Answer {
    /// Why this answer fails the proof of `serial`, when it does.
    fn failure(&self, serial: &str) -> Option<String> {
        let at = format!("{} (SNI {})", self.address, self.server_name);
        if let Some(e) = &self.error {
            return Some(format!("{at}: {e}"));
        }
        match &self.served {
            Some(s) if !same_serial_hex(s, serial) => {
                Some(format!("{at} serves serial {s}, not {serial}"))
            }
            None => Some(format!("{at}: no certificate seen")),
            Some(_) => self
                .chain_error
                .as_ref()
                .map(|e| format!("{at}: the served chain does not verify: {e}")),
        }
    }
}

impl Proof {
    /// Why the proof fails, every reason joined (none: it passed).
    pub(crate) fn failure(&self) -> Option<String> {
        let mut why: Vec<String> = self
            .answers
            .iter()
            .filter_map(|a| a.failure(&self.serial))
            .collect();
        if let Some(h) = &self.health {
            match (h.exit, &h.error) {
                (Some(0), None) => {}
                (_, Some(e)) => why.push(format!("the health command {e}")),
                (Some(code), None) => why.push(format!("the health command exited {code}")),
                (None, None) => why.push("the health command was killed by a signal".into()),
            }
        }
        (!why.is_empty()).then(|| why.join("; "))
    }

    /// The answers that served another serial than the one proved (drift):
    /// `ADDRESS (SNI NAME) serves SERIAL`, one per address and name.
    pub(crate) fn served_elsewhere(&self) -> Vec<String> {
        self.answers
            .iter()
            .filter_map(|a| {
                let s = a.served.as_deref()?;
                (!same_serial_hex(s, &self.serial))
                    .then(|| format!("{} (SNI {}) serves {s}", a.address, a.server_name))
            })
            .collect()
    }

    /// What this proof saw, as this host keeps it for `check` and the metrics: the answer for
    /// `common_name` (or the first one), and every address and name that served another
    /// serial. `None` without a handshake.
    pub(super) fn observation(&self, common_name: &str) -> Option<Observation> {
        let first = self
            .answers
            .iter()
            .find(|a| a.server_name == common_name)
            .or_else(|| self.answers.first())?;
        Some(Observation {
            at: self.at,
            installed_serial: self.serial.clone(),
            served_serial: first.served.clone(),
            error: first.error.clone(),
            elsewhere: Some(self.served_elsewhere()),
            proved_since: self.since,
        })
    }

    /// Every text made printable and capped (a proof read from etcd, opened but written by
    /// another host).
    pub(super) fn printable(mut self) -> Self {
        let p = |s: &mut String| *s = printable_capped(s, MAX_REASON);
        let o = |s: &mut Option<String>| {
            if let Some(s) = s {
                *s = printable_capped(s, MAX_REASON);
            }
        };
        p(&mut self.host);
        p(&mut self.serial);
        for a in &mut self.answers {
            p(&mut a.address);
            p(&mut a.server_name);
            o(&mut a.served);
            o(&mut a.chain_error);
            o(&mut a.error);
        }
        if let Some(h) = &mut self.health {
            o(&mut h.error);
        }
        if let Some(r) = &mut self.rolled_back {
            p(&mut r.serial);
            o(&mut r.failure);
        }
        self
    }
}

/// The names a proof sends as SNI: every configured name but wildcards (no handshake can
/// name one; the common name covers it when it is the only name).
fn server_names(cert: &CertificateConfig) -> Vec<String> {
    let mut names: Vec<String> = cert
        .domains
        .iter()
        .filter(|d| !d.starts_with("*."))
        .cloned()
        .collect();
    if names.is_empty() {
        names.push(cert.common_name().trim_start_matches("*.").to_owned());
    }
    names
}

/// Proves what this host serves of `cert` after installing `serial` (version `version`):
/// one handshake per name at the verify address (none configured: no answers), side by side,
/// each until `deadline`, then the health command.
pub(super) async fn prove(
    cert: &CertificateConfig,
    (serial, version): (&str, u64),
    (host, health): (&str, Option<&CommandLine>),
    (now, deadline): (OffsetDateTime, Instant),
) -> Proof {
    let answers = match cert
        .install
        .verify_address
        .as_deref()
        .filter(|a| !a.is_empty())
    {
        Some(address) => {
            let names = server_names(cert);
            let anchors = anchors_of(cert);
            let anchors = anchors.as_deref().map_or(&[][..], |a| a.as_slice());
            let asking: Vec<_> = names
                .iter()
                .map(|name| answer(address, name, serial, (now, deadline), anchors))
                .collect();
            futures_util::stream::iter(asking)
                .buffered(NAMES_AT_ONCE)
                .collect()
                .await
        }
        None => Vec::new(),
    };
    let health = match health {
        Some(c) => Some(run_health(c, &cert.name, serial).await),
        None => None,
    };
    let mut proof = Proof {
        host: host.to_owned(),
        serial: serial.to_owned(),
        version,
        at: now,
        since: None,
        answers,
        health,
        rolled_back: None,
    };
    proof.since = proof.failure().is_none().then_some(now);
    proof
}

impl Proof {
    /// When the pause after this host's wave starts, as far as this proof goes: since when it
    /// has proved the serial (never after the proof itself).
    pub(super) fn proved_since(&self) -> OffsetDateTime {
        self.since.map_or(self.at, |s| s.min(self.at))
    }

    /// A passing proof keeps the time since which this host proved the same serial without a
    /// failed proof in between (`kept`: what this host kept of its last proof).
    pub(super) fn carry_since(&mut self, kept: Option<&Observation>) {
        if self.failure().is_some() {
            self.since = None;
            return;
        }
        let before = kept
            .filter(|o| o.is_for(&self.serial))
            .and_then(|o| o.proved_since)
            .filter(|s| *s <= self.at);
        self.since = Some(before.unwrap_or(self.at));
    }
}

/// One address and name: handshakes until it serves `serial` or `deadline` passes (at least
/// one), then the served chain checked.
async fn answer(
    address: &str,
    name: &str,
    serial: &str,
    (now, deadline): (OffsetDateTime, Instant),
    anchors: &[rustls_pki_types::CertificateDer<'static>],
) -> Answer {
    let mut out = Answer {
        address: address.to_owned(),
        server_name: name.to_owned(),
        served: None,
        chain_error: None,
        error: None,
    };
    loop {
        let left = deadline.saturating_duration_since(Instant::now());
        let timeout = left.clamp(Duration::from_millis(500), HANDSHAKE_TIMEOUT);
        match crate::install::verify::served_chain(address, name, timeout).await {
            Ok(chain) => {
                out.error = None;
                out.served = chain
                    .first()
                    .and_then(|d| crate::install::verify::serial_of_der(d).ok())
                    .map(|s| s.to_string());
                if out
                    .served
                    .as_deref()
                    .is_some_and(|s| same_serial_hex(s, serial))
                {
                    out.chain_error = chain_error(&chain, name, now, anchors);
                    return out;
                }
            }
            Err(e) => {
                out.served = None;
                out.error = Some(printable_capped(&e.to_string(), MAX_REASON));
            }
        }
        if Instant::now() + RETRY_PAUSE >= deadline {
            return out;
        }
        tokio::time::sleep(RETRY_PAUSE).await;
    }
}

/// The roots a served chain must end at: the ones its install was checked against
/// (`chain_trust`; an ACME CA's chain is checked for its links only, as at the install).
/// `None` when they cannot be read (the install could not have passed either): links only.
fn anchors_of(
    cert: &CertificateConfig,
) -> Option<std::sync::Arc<Vec<rustls_pki_types::CertificateDer<'static>>>> {
    if !cert.order.issuer.is_partner() {
        return None;
    }
    crate::bundle::trust_anchors(cert.install.chain_trust, cert.install.ca_file.as_deref()).ok()
}

/// Why the chain served for `name` does not verify: the leaf must name it and be valid
/// `now`, each certificate must be signed by the next, up to one of `anchors` (none: up to a
/// root served, or the issuer of the last one served) — the checks every installed bundle
/// passes.
fn chain_error(
    chain: &[Vec<u8>],
    name: &str,
    now: OffsetDateTime,
    anchors: &[rustls_pki_types::CertificateDer<'static>],
) -> Option<String> {
    let pem: String = chain
        .iter()
        .map(|d| crate::crypto::pem_encode("CERTIFICATE", d))
        .collect();
    let spki = match x509_parser::parse_x509_certificate(chain.first()?) {
        Ok((_, leaf)) => leaf.tbs_certificate.subject_pki.raw.to_vec(),
        Err(e) => return Some(format!("the served leaf does not parse: {e}")),
    };
    let domains = [name.to_owned()];
    let expected = Expected {
        public_key_der: &spki,
        domains: &domains,
        now,
        trust_anchors: anchors,
    };
    crate::bundle::validate_chain(pem.as_bytes(), ServerKind::Nginx, &expected)
        .err()
        .map(|e| printable_capped(&e.to_string(), MAX_REASON))
}

/// Runs the health command with the certificate's name and serial in its environment.
async fn run_health(command: &CommandLine, name: &str, serial: &str) -> Health {
    let argv = command.argv();
    let cmd = crate::process::Command::new(&argv, HEALTH_TIMEOUT)
        .env("CERT_AGENT_CERTIFICATE", name)
        .env("CERT_AGENT_SERIAL", serial)
        .own_process_group();
    match crate::process::run(cmd).await {
        Ok(done) => Health {
            exit: done.status.code(),
            error: None,
        },
        Err(e) => Health {
            exit: None,
            error: Some(printable_capped(&e.to_string(), MAX_REASON)),
        },
    }
}

/// Logs `proof` of certificate `name` (what this host proved it serves, or why not).
fn log_proof(name: &str, proof: &Proof) {
    match proof.failure() {
        Some(why) => tracing::warn!(
            certificate = %name,
            serial = %proof.serial,
            "this host's proof of what it serves FAILED: {why}"
        ),
        None => tracing::info!(
            certificate = %name,
            serial = %proof.serial,
            answers = proof.answers.len(),
            "this host proved what it serves"
        ),
    }
}

/// Writes `proofs`, each sealed under this host's key `hosts/HOST/proof/NAME`, in
/// transactions of at most [`PUTS_PER_TXN`](crate::fleet::coord::PUTS_PER_TXN) puts, not one
/// request each; a failure to write is logged naming the certificates left (each proof stays
/// in the log).
async fn publish(link: &FleetLink, proofs: &[(String, Proof)]) {
    let mut names = Vec::with_capacity(proofs.len());
    let mut puts = Vec::with_capacity(proofs.len());
    for (name, proof) in proofs {
        log_proof(name, proof);
        match seal(&link.key, name, proof) {
            Ok(put) => {
                names.push(name.as_str());
                puts.push(put);
            }
            Err(e) => {
                tracing::warn!(certificate = %name, "could not write this host's proof to the fleet: {e:#}");
            }
        }
    }
    if let Err(e) = link.fleet.put_own_all(puts).await {
        let (count, shown) = e.left(&names);
        tracing::warn!(
            "could not write {count} of this host's proofs to the fleet ({shown}): {}",
            e.error
        );
    }
}

/// Proves and publishes, for each certificate this host installed from the fleet (name,
/// serial, version), what it serves; what it saw is kept in the state directory too.
pub(super) async fn prove_installed(
    link: &FleetLink,
    config: &crate::config::Config,
    installed: &[(String, String, u64)],
) {
    let proofs = prove_all(link, config, installed).await;
    publish_all(link, config, proofs).await;
}

/// Publishes `proofs` (certificate name, proof) made by this host, each passing one keeping
/// since when this host proved its serial ([`Proof::carry_since`]), and keeps what each saw
/// in the state directory.
pub(super) async fn publish_all(
    link: &FleetLink,
    config: &crate::config::Config,
    proofs: Vec<(String, Proof)>,
) {
    let store = crate::store::Store::existing(&config.agent.state_dir);
    let kept = crate::store::served::load_proved(&store);
    let mut proofs = proofs;
    for (name, proof) in &mut proofs {
        proof.carry_since(kept.get(name));
    }
    publish(link, &proofs).await;
    again::note_published(&store, &proofs);
    let configured = by_name(config);
    let mut seen = Vec::new();
    for (name, proof) in proofs {
        let cert = configured.get(name.as_str());
        if let Some(o) = cert.and_then(|c| proof.observation(c.common_name())) {
            seen.push((name, o));
        }
    }
    crate::store::served::remember_proved(&store, seen);
}

/// Proves, for each certificate (name, serial, version), what this host serves of it (the
/// proofs not published), each with the name of its certificate, in the order they end.
pub(super) async fn prove_all(
    link: &FleetLink,
    config: &crate::config::Config,
    installed: &[(String, String, u64)],
) -> Vec<(String, Proof)> {
    let health = link.config.health_command.as_ref();
    let deadline = Instant::now() + PROOF_WAIT;
    let configured = by_name(config);
    let proving: Vec<_> = installed
        .iter()
        .filter_map(|(name, serial, version)| {
            let cert = *configured.get(name.as_str())?;
            let proving = prove(
                cert,
                (serial, *version),
                (link.fleet.host(), health),
                (link.clock.now(), deadline),
            );
            Some(named(name, proving))
        })
        .collect();
    futures_util::stream::iter(proving)
        .buffer_unordered(CERTIFICATES_AT_ONCE)
        .map(|(name, proof)| (name.to_owned(), proof))
        .collect()
        .await
}

/// The configured certificates by name.
fn by_name(config: &crate::config::Config) -> HashMap<&str, &CertificateConfig> {
    config
        .certificates
        .iter()
        .map(|c| (c.name.as_str(), c))
        .collect()
}

/// The proof `proving` makes, with the name of its certificate.
async fn named(name: &str, proving: impl Future<Output = Proof>) -> (&str, Proof) {
    (name, proving.await)
}

/// Opens the proof at `rel` (`hosts/HOST/proof/NAME`): it must open for that key and have
/// been made by HOST. The error names the etcd key.
pub(super) fn open(link: &FleetLink, rel: &str, value: &[u8]) -> Result<Proof> {
    open_at(&link.key, &link.fleet.key(rel), rel, value)
}

/// [`open`] with `keys`, the etcd key being `full`.
pub(super) fn open_at(keys: &FleetKeys, full: &str, rel: &str, value: &[u8]) -> Result<Proof> {
    let (host, name) = match rel.split('/').collect::<Vec<_>>().as_slice() {
        ["hosts", host, "proof", name] => ((*host).to_owned(), (*name).to_owned()),
        _ => return Err(anyhow!("{full} is not a host's proof")),
    };
    let place = Place::new(Purpose::Proof, rel, &name);
    let (version, plain, _) = envelope::open_raw(keys, &place, value).map_err(|why| {
        anyhow!(
            "the fleet's host proof {full} {why}; refused (a value written without the fleet \
             key, moved from another host's key or certificate, or altered)"
        )
    })?;
    let proof: Proof = serde_json::from_slice(&plain).map_err(|e| {
        anyhow!("the fleet's host proof {full} opens but is not a valid document: {e}")
    })?;
    if proof.host != host {
        return Err(anyhow!(
            "the fleet's host proof {full} was made by host {:?}, not {host:?}: a host cannot \
             prove for another; refused",
            printable_capped(&proof.host, 255)
        ));
    }
    // As sealed: a time before 1970 is version 0.
    if u64::try_from(proof.at.unix_timestamp()).unwrap_or(0) != version {
        return Err(anyhow!(
            "the fleet's host proof {full} says it was made at {}, sealed as version \
             {version}; refused",
            crate::clock::rfc3339(proof.at)
        ));
    }
    Ok(proof.printable())
}

/// `proof` of certificate `name` sealed for its key under `hosts/HOST/proof/`, at the
/// version of its time.
pub(super) fn seal(keys: &FleetKeys, name: &str, proof: &Proof) -> Result<(String, Vec<u8>)> {
    let rel = proof_key(&proof.host, name);
    let place = Place::new(Purpose::Proof, &rel, name);
    let version = u64::try_from(proof.at.unix_timestamp()).unwrap_or(0);
    let sealed = envelope::seal_json(keys, &place, version, proof)?;
    Ok((rel, sealed))
}

mod again;

pub(super) use again::{fuzz as fuzz_failed, prove_again};

#[cfg(test)]
mod tests;
