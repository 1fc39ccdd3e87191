//! `cert-agent fleet status`: the fleet as etcd holds it — the leader, each certificate's
//! current serial, each host's result, the hosts that lag, the certificates retired. Every text read from etcd is
//! made [`printable`] here, so neither the table nor the JSON carries a terminal control.

use std::collections::{BTreeMap, BTreeSet};

use anyhow::Result;
use serde::Serialize;
use time::OffsetDateTime;

use crate::crypto;

use super::audit_seen::HostAudit;
use super::decision::Decisions;
use super::envelope::{self, Place, Purpose};
use super::leaderless_gap::{PendingWork, pending_of};
use super::link::FleetLink;
use super::proof::Proof;
use super::schema::{
    Current, HostResult, HostSeen, SharedState, Tombstone, printable, printable_capped,
};
use crate::store::FleetAttempt;

/// The fleet as `cert-agent fleet status` shows it.
#[derive(Debug, Serialize)]
pub(crate) struct FleetStatus {
    /// The host leading now (none between runs).
    pub leader: Option<String>,
    pub certificates: Vec<CertStatus>,
    /// Hosts that have not installed a current certificate `lag_alert_secs` after it was
    /// published.
    pub lagging: Vec<String>,
    /// Certificates whose fleet's last attempt failed, or whose shared record or current
    /// certificate in etcd does not open.
    pub failing: Vec<String>,
    /// Hosts whose last proof of what they serve failed, or does not open: `HOST: NAME: why`.
    pub unproven: Vec<String>,
    /// Hosts that installed the current certificate but whose last proof of it met another
    /// serial (drift): `HOST: NAME: ADDRESS (SNI NAME) serves SERIAL; …`.
    pub drifting: Vec<String>,
    /// What this host's operator is to do: a previous fleet key still configured after the
    /// rotation ended on this host ([`super::previous_key_warning`]).
    pub warnings: Vec<String>,
    /// Each host's audit log: the last line its `seen` record names, and whether it went
    /// back since this host saw a later one ([`super::audit_seen`]).
    pub audit: Vec<HostAudit>,
    /// Why the lead is suspect: held by a name no host announced (`hosts/NAME/seen`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub leader_alert: Option<String>,
    /// Work the shared records leave open at the CA (an order, a reissue), since when, and
    /// whether no run has led it for too long ([`super::leaderless_gap`]).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub pending: Vec<PendingWork>,
    /// Why the lead looks stuck: this host saw it held longer than `[fleet] lead_alert_secs`
    /// (set by the command, which knows the state directory: [`super::lead_stuck`]).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub lead_stuck: Option<String>,
    /// The leads this host lost (`cert_agent_fleet_leads_lost_total`; set by the command,
    /// which knows the state directory).
    pub leads_lost: u64,
}

/// The versions the fleet's manifest vouches for, for one certificate: what a host that has
/// accepted nothing of it takes as its floor ([`super::manifest`]).
#[derive(Debug, Serialize)]
pub(crate) struct FloorStatus {
    /// The shared record's, the current certificate's and the tombstone's version (0: none).
    pub state: u64,
    pub current: u64,
    pub tombstone: u64,
    /// Hosts whose entries vouch for the highest shared record or current certificate.
    pub by: Vec<String>,
}

/// One certificate of the fleet.
#[derive(Debug, Serialize)]
pub(crate) struct CertStatus {
    pub name: String,
    /// Where the certificate comes from (`partner`, `acme:NAME`) as this host's configuration
    /// says; none when this host does not configure it.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub issuer: Option<String>,
    /// The current certificate: its version, serial and when and by whom it was published.
    pub version: Option<u64>,
    pub serial: Option<String>,
    #[serde(with = "time::serde::rfc3339::option")]
    pub published_at: Option<OffsetDateTime>,
    pub published_by: Option<String>,
    /// Why the current certificate or the shared record in etcd cannot be shown (it does
    /// not open).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    /// The fleet's last attempt at the certificate, when it failed (the leader's, from the
    /// shared record): failures in a row, the error, when, and which host led.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub failure: Option<FleetAttempt>,
    /// `rollout halted at wave N: HOST: reason`, when a host of an earlier wave failed its
    /// proof of the current serial and a host of a later wave is kept back.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub halted: Option<String>,
    /// Retired for the fleet (`cert-agent retire`): its tombstone, opened.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub retired: Option<RetiredStatus>,
    /// The versions the fleet's manifest vouches for (none: no entry names it).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub floor: Option<FloorStatus>,
    pub hosts: Vec<HostStatus>,
}

/// A certificate's tombstone: retired for the whole fleet.
#[derive(Debug, Serialize)]
pub(crate) struct RetiredStatus {
    #[serde(with = "time::serde::rfc3339")]
    pub at: OffsetDateTime,
    /// The host that retired it.
    pub by: String,
    /// Whether the hosts delete their installed files.
    pub remove_files: bool,
    /// What the cancellation came to.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cancel: Option<String>,
}

/// What one host reported for a certificate.
#[derive(Debug, Serialize)]
pub(crate) struct HostStatus {
    pub host: String,
    /// The serial it installed, since when.
    pub serial: Option<String>,
    #[serde(with = "time::serde::rfc3339::option")]
    pub since: Option<OffsetDateTime>,
    /// Its last error, when its last attempt failed.
    pub error: Option<String>,
    /// Why it keeps a newer certificate of its own instead of the current one.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub skipped: Option<String>,
    /// It does not serve the current serial, longer than `lag_alert_secs` after it was
    /// published.
    pub lagging: bool,
    /// `current`, `installing`, `LAGGING`, `never installed`, `skipped: …` or `error: …`.
    pub state: String,
    /// What the host last proved it serves ([`super::proof`]), opened.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub proof: Option<Proof>,
    /// Why that proof failed, or why it does not open.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub proof_failure: Option<String>,
    /// Drift: the host installed the current certificate, and its last proof of it met
    /// another serial at these addresses and names (`ADDRESS (SNI NAME) serves SERIAL`).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub drift: Vec<String>,
}

/// Host `host`'s proof of certificate `name`, taken from `proofs`, and why it failed or does
/// not open.
fn host_proof(
    proofs: &mut BTreeMap<String, BTreeMap<String, Result<Proof, String>>>,
    name: &str,
    host: &str,
) -> (Option<Proof>, Option<String>) {
    match proofs.get_mut(name).and_then(|m| m.remove(host)) {
        Some(Ok(p)) => {
            let why = p.failure();
            (Some(p), why)
        }
        Some(Err(e)) => (None, Some(e)),
        None => (None, None),
    }
}

/// Whether a person aborted the rollout of the serial `proof` is about (its failure is then
/// decided: shown, not alerted).
fn aborted(decisions: &Decisions, name: &str, proof: Option<&Proof>) -> bool {
    proof.is_some_and(|p| {
        super::decision::newest(decisions.get(name), &p.serial)
            .is_some_and(|d| d.verdict == super::decision::Verdict::Abort)
    })
}

/// A host that serves the current certificate by its result but another serial by its proof
/// (`drift` not empty) is in state `DRIFT`: the drift in one line.
fn drifts(state: &mut String, drift: &[String]) -> Option<String> {
    if drift.is_empty() || state != "current" {
        return None;
    }
    *state = "DRIFT".to_owned();
    Some(drift.join("; "))
}

/// Where a proof of the current certificate met another serial (none: a proof of another
/// serial, or none).
fn drift_of(current: Option<&Current>, proof: Option<&Proof>) -> Vec<String> {
    match (current, proof) {
        (Some(c), Some(p)) if crypto::same_serial_hex(&c.serial, &p.serial) => p.served_elsewhere(),
        _ => Vec::new(),
    }
}

/// Reads the fleet's state: the leader, every certificate's current serial, every host's
/// result. Certificates of the fleet that this host's configuration does not list are shown
/// too.
pub(crate) async fn status(link: &FleetLink) -> Result<FleetStatus> {
    let leader = link.fleet.leader().await?.as_deref().map(printable);
    let now = link.clock.now();
    let lag = time::Duration::seconds(i64::try_from(link.config.lag_alert_secs).unwrap_or(900));
    let Certs {
        currents,
        mut errors,
        mut failures,
        mut retired,
        pending,
    } = read_certs(link).await?;
    let HostResults {
        results,
        hosts,
        audit,
        proofs,
        decisions,
    } = read_hosts(link, now).await?;
    let (entries, _) = super::manifest::read_entries(link).await?;
    let names: Vec<String> = currents.keys().cloned().collect();
    let mut floors = super::manifest::floors(&entries, &names);
    let leader_alert = suspect_lead(link, leader.as_deref(), &hosts);
    let mut rows = Rows {
        now,
        lag,
        proofs,
        decisions,
        lagging: BTreeSet::new(),
        unproven: Vec::new(),
        drifting: Vec::new(),
    };
    let mut failing = Vec::new();
    let mut certificates = Vec::new();
    for (name, current) in currents {
        let of_cert = results.get(&name);
        let tombstone = retired.remove(name.as_str());
        // A retired certificate has no host rows: no host installs it any more (its results
        // were deleted with the tombstone; "never installed" would say the wrong thing).
        let host_rows: Vec<HostStatus> = hosts
            .iter()
            .filter(|_| tombstone.is_none())
            .map(|host| {
                let r = of_cert.and_then(|m| m.get(host));
                rows.host_row(&name, current.as_ref(), host, r)
            })
            .collect();
        let error = errors.remove(name.as_str()).map(|e| e.join("; "));
        let failure = failures.remove(name.as_str());
        if error.is_some() || failure.is_some() {
            failing.push(printable(&name));
        }
        // A host kept back by a halted rollout says where it halted and why.
        let halted = host_rows.iter().find_map(|h| {
            h.skipped
                .as_deref()
                .filter(|s| s.starts_with("rollout halted"))
                .map(str::to_owned)
        });
        certificates.push(CertStatus {
            issuer: None,
            halted,
            name: printable(&name),
            version: current.as_ref().map(|c| c.version),
            serial: current.as_ref().map(|c| printable(&c.serial)),
            published_at: current.as_ref().map(|c| c.published_at),
            published_by: current.as_ref().map(|c| printable(&c.published_by)),
            error,
            failure,
            retired: tombstone,
            floor: floors.remove(&name).map(|f| FloorStatus {
                state: f.versions.state,
                current: f.versions.current,
                tombstone: f.versions.tombstone,
                by: f.by.iter().map(|h| printable(h)).collect(),
            }),
            hosts: host_rows,
        });
    }
    Ok(FleetStatus {
        leader,
        certificates,
        lagging: rows.lagging.into_iter().collect(),
        failing,
        unproven: rows.unproven,
        drifting: rows.drifting,
        warnings: Vec::new(),
        audit,
        leader_alert,
        pending,
        lead_stuck: None,
        leads_lost: 0,
    })
}

/// The host rows of `fleet status`: what each is judged against (the time, the lag allowed,
/// the hosts' proofs and the rollout decisions), and what the rows add to the fleet's lists.
struct Rows {
    now: OffsetDateTime,
    lag: time::Duration,
    proofs: BTreeMap<String, BTreeMap<String, Result<Proof, String>>>,
    decisions: Decisions,
    /// The hosts that have not installed a current certificate in time.
    lagging: BTreeSet<String>,
    /// `HOST: NAME: why` of each failed proof (not of a serial whose rollout was aborted).
    unproven: Vec<String>,
    /// `HOST: NAME: where another serial is served` of each host that drifts.
    drifting: Vec<String>,
}

impl Rows {
    /// The row of `host` for certificate `name`, whose fleet's current certificate is
    /// `current` and whose result this host reported is `r`; every text made printable.
    fn host_row(
        &mut self,
        name: &str,
        current: Option<&Current>,
        host: &str,
        r: Option<&HostResult>,
    ) -> HostStatus {
        let serial = r.and_then(|r| r.serial.as_deref());
        let serves_current = match (current, serial) {
            (Some(c), Some(s)) => crypto::same_serial_hex(&c.serial, s),
            (None, _) => true,
            (Some(_), None) => false,
        };
        let late = current.is_some_and(|c| !serves_current && self.now - c.published_at > self.lag);
        if late {
            self.lagging.insert(printable(host));
        }
        let error = r
            .and_then(|r| r.error.as_deref())
            .map(|e| printable_capped(e, FleetAttempt::MAX_ERROR));
        let skipped = r
            .and_then(|r| r.skipped.as_deref())
            .filter(|_| !serves_current)
            .map(|e| printable_capped(e, FleetAttempt::MAX_ERROR));
        let mut state = host_state(
            error.as_deref(),
            skipped.as_deref(),
            serial.is_some(),
            serves_current,
            late,
        );
        let (proof, proof_failure) = host_proof(&mut self.proofs, name, host);
        let aborted = aborted(&self.decisions, name, proof.as_ref());
        if let Some(why) = proof_failure.as_ref().filter(|_| !aborted) {
            self.unproven
                .push(format!("{}: {}: {why}", printable(host), printable(name)));
        }
        let drift = drift_of(current, proof.as_ref());
        if let Some(line) = drifts(&mut state, &drift) {
            self.drifting
                .push(format!("{}: {}: {line}", printable(host), printable(name)));
        }
        HostStatus {
            proof,
            proof_failure,
            drift,
            host: printable(host),
            serial: serial.map(printable),
            since: r.and_then(|r| r.since),
            error,
            skipped,
            lagging: late,
            state,
        }
    }
}

/// What `certs/` holds: each certificate's current certificate (when it opens), why a value
/// does not open, and the fleet's failing attempts.
struct Certs {
    currents: BTreeMap<String, Option<Current>>,
    errors: BTreeMap<String, Vec<String>>,
    failures: BTreeMap<String, FleetAttempt>,
    retired: BTreeMap<String, RetiredStatus>,
    pending: Vec<PendingWork>,
}

async fn read_certs(link: &FleetLink) -> Result<Certs> {
    let mut currents: BTreeMap<String, Option<Current>> = BTreeMap::new();
    let mut errors: BTreeMap<String, Vec<String>> = BTreeMap::new();
    let mut failures: BTreeMap<String, FleetAttempt> = BTreeMap::new();
    let mut retired: BTreeMap<String, RetiredStatus> = BTreeMap::new();
    let mut pending = Vec::new();
    for (key, value) in link.fleet.list("certs/").await? {
        let mut parts = key.splitn(3, '/');
        let (Some(_), Some(name), Some(what)) = (parts.next(), parts.next(), parts.next()) else {
            continue;
        };
        let entry = currents.entry(name.to_owned()).or_default();
        let opened = match what {
            "current" => {
                let place = Place::new(Purpose::Current, &key, name);
                envelope::open_json(&link.key, &link.fleet, &place, &value)
                    .map(|(_, c)| *entry = Some(c))
            }
            "state" => {
                let place = Place::new(Purpose::State, &key, name);
                envelope::open_json::<SharedState>(&link.key, &link.fleet, &place, &value).map(
                    |(_, s)| {
                        let attempt = s.attempt();
                        if attempt.failing() {
                            failures.insert(name.to_owned(), attempt);
                        }
                        pending.extend(pending_of(name, &s));
                    },
                )
            }
            "retired" => {
                let place = Place::new(Purpose::Retired, &key, name);
                envelope::open_json::<Tombstone>(&link.key, &link.fleet, &place, &value).map(
                    |(_, t)| {
                        retired.insert(
                            name.to_owned(),
                            RetiredStatus {
                                at: t.retired_at,
                                by: printable(&t.by),
                                remove_files: t.remove_files,
                                cancel: t
                                    .cancel
                                    .map(|c| printable_capped(&c, FleetAttempt::MAX_ERROR)),
                            },
                        );
                    },
                )
            }
            _ => Ok(()),
        };
        if let Err(e) = opened {
            errors
                .entry(name.to_owned())
                .or_default()
                .push(printable_capped(&format!("{e:#}"), FleetAttempt::MAX_ERROR));
        }
    }
    Ok(Certs {
        currents,
        errors,
        failures,
        retired,
        pending,
    })
}

/// Why the lead looks forged: it is held by a name no host has announced.
fn suspect_lead(
    link: &FleetLink,
    leader: Option<&str>,
    hosts: &BTreeSet<String>,
) -> Option<String> {
    leader
        .filter(|l| !hosts.iter().any(|h| printable(h) == *l))
        .map(|l| {
            format!(
                "the lead is held by '{l}', a name no host has announced ({}): a leader key \
                 written by an etcd writer, or a host whose `seen` record was deleted; while it \
                 holds the lead no host renews",
                link.fleet.key(&format!("hosts/{l}/seen"))
            )
        })
}

/// What `hosts/` holds.
struct HostResults {
    /// Every host's result per certificate (a result that does not open is an error).
    results: BTreeMap<String, BTreeMap<String, HostResult>>,
    /// The hosts that reported anything.
    hosts: BTreeSet<String>,
    /// The audit line of each host's `seen` record.
    audit: Vec<HostAudit>,
    /// Every host's proof per certificate (or why it does not open).
    proofs: BTreeMap<String, BTreeMap<String, Result<Proof, String>>>,
    /// The rollout decisions.
    decisions: Decisions,
}

async fn read_hosts(link: &FleetLink, now: OffsetDateTime) -> Result<HostResults> {
    let mut results: BTreeMap<String, BTreeMap<String, HostResult>> = BTreeMap::new();
    let mut hosts = BTreeSet::new();
    let mut audit = Vec::new();
    let mut proofs: BTreeMap<String, BTreeMap<String, Result<Proof, String>>> = BTreeMap::new();
    let mut decisions = Decisions::new();
    for (key, value) in link.fleet.list("hosts/").await? {
        let parts: Vec<&str> = key.split('/').collect();
        match parts.as_slice() {
            ["hosts", host, "seen"] => {
                hosts.insert((*host).to_owned());
                let place = Place::new(Purpose::HostSeen, &key, "");
                audit.push(
                    match envelope::open_json::<HostSeen>(&link.key, &link.fleet, &place, &value) {
                        Ok((_, seen)) => HostAudit::of(host, seen.audit.as_ref()),
                        Err(e) => HostAudit {
                            error: Some(printable_capped(&format!("{e:#}"), 300)),
                            ..HostAudit::of(host, None)
                        },
                    },
                );
            }
            ["hosts", host, "certs", name] => {
                hosts.insert((*host).to_owned());
                let place = Place::new(Purpose::HostResult, &key, name);
                let r =
                    match envelope::open_json::<HostResult>(&link.key, &link.fleet, &place, &value)
                    {
                        Ok((_, r)) => r,
                        Err(e) => HostResult {
                            serial: None,
                            version: 0,
                            at: now,
                            since: None,
                            error: Some(format!("{e:#}")),
                            skipped: None,
                        },
                    };
                results
                    .entry((*name).to_owned())
                    .or_default()
                    .insert((*host).to_owned(), r);
            }
            ["hosts", host, "proof", name] => {
                let proof = super::proof::open(link, &key, &value)
                    .map_err(|e| printable_capped(&format!("{e:#}"), FleetAttempt::MAX_ERROR));
                proofs
                    .entry((*name).to_owned())
                    .or_default()
                    .insert((*host).to_owned(), proof);
            }
            ["hosts", host, "rollout", name] => {
                super::decision::take_listed(&mut decisions, link, (&key, host, name), &value);
            }
            _ => {}
        }
    }
    Ok(HostResults {
        results,
        hosts,
        audit,
        proofs,
        decisions,
    })
}

/// A host's state for one certificate: its error first, then a skipped install, then
/// whether it ever installed one, then whether it serves the current one (or lags).
fn host_state(
    error: Option<&str>,
    skipped: Option<&str>,
    installed: bool,
    serves_current: bool,
    late: bool,
) -> String {
    match (error, skipped) {
        (Some(e), _) => format!("error: {e}"),
        (None, Some(why)) => format!("skipped: {why}"),
        (None, None) if !installed && late => "never installed (LAGGING)".to_owned(),
        (None, None) if !installed => "never installed".to_owned(),
        (None, None) if serves_current => "current".to_owned(),
        (None, None) if late => "LAGGING".to_owned(),
        (None, None) => "installing".to_owned(),
    }
}

#[cfg(test)]
mod tests {
    use super::host_state;

    #[test]
    fn each_host_state_has_its_own_name() {
        // (error, skipped, installed, serves current, late) -> state
        let rows = [
            (
                Some("boom"),
                Some("newer"),
                true,
                false,
                true,
                "error: boom",
            ),
            (None, Some("newer"), true, false, false, "skipped: newer"),
            (None, None, false, true, false, "never installed"),
            (None, None, false, false, false, "never installed"),
            (None, None, false, false, true, "never installed (LAGGING)"),
            (None, None, true, true, false, "current"),
            (None, None, true, false, true, "LAGGING"),
            (None, None, true, false, false, "installing"),
        ];
        for (error, skipped, installed, current, late, want) in rows {
            assert_eq!(
                host_state(error, skipped, installed, current, late),
                want,
                "{error:?} {skipped:?} {installed} {current} {late}"
            );
        }
    }
}
