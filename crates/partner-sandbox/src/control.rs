//! The control surface for tests: operations on the shared world (used directly by
//! [`crate::SandboxHandle`]) and their HTTP form under `/_sandbox/` (used by the binary's users;
//! loopback peers only). Nothing here is part of the partner API.

use serde::Deserialize;
use serde_json::{Value, json};
use time::OffsetDateTime;

use crate::balancer::{DcvBalance, DcvPorts};
use std::collections::BTreeMap;

use crate::crl::{CrlFault, Revocation};
use crate::faults::Fault;
use crate::state::{AccountInfo, DnsRecord, RevokeTarget};
use crate::world::{CallRecord, Shared, guarded};

/// Prefix of every control path.
pub const PREFIX: &str = "/_sandbox";

// ---- operations ----

pub(crate) fn now(shared: &Shared) -> OffsetDateTime {
    shared.lock().clock.now()
}

pub(crate) fn time_scale(shared: &Shared) -> f64 {
    shared.lock().clock.scale()
}

/// Moves the clock forward and lets the state catch up; returns the new `now`.
pub(crate) fn advance(shared: &Shared, by: time::Duration) -> OffsetDateTime {
    let now = {
        let mut w = shared.lock();
        w.clock.advance(by);
        let now = w.now();
        w.tick(now);
        now
    };
    shared.persist(true);
    now
}

/// Runs a state operation under the lock after a tick, then persists.
fn mutate<T>(
    shared: &Shared,
    op: impl FnOnce(&mut crate::world::World, OffsetDateTime) -> Result<T, String>,
) -> Result<T, String> {
    let out = {
        let mut w = shared.lock();
        let now = w.now();
        w.tick(now);
        guarded(|| op(&mut w, now))
            .map_err(|p| format!("sandbox internal error: {p}"))
            .and_then(|r| r)
    };
    shared.persist(false);
    out
}

pub(crate) fn set_instant(shared: &Shared, instant: bool) -> Result<(), String> {
    mutate(shared, |w, _| {
        w.state.set_instant(instant);
        Ok(())
    })
}

pub(crate) fn set_dns_record(shared: &Shared, record: DnsRecord) -> Result<(), String> {
    mutate(shared, |w, _| {
        w.state.set_dns_record(record);
        Ok(())
    })
}

pub(crate) fn remove_dns_record(shared: &Shared, name: &str, rtype: &str) -> Result<(), String> {
    mutate(shared, |w, _| {
        w.state.remove_dns_record(name, rtype);
        Ok(())
    })
}

pub(crate) fn approve_email(
    shared: &Shared,
    certificate_id: u64,
    domain: Option<&str>,
) -> Result<(), String> {
    mutate(shared, |w, _| w.state.approve_email(certificate_id, domain))
}

pub(crate) fn age_certificate(
    shared: &Shared,
    certificate_id: u64,
    days_left: i64,
) -> Result<(), String> {
    mutate(shared, |w, now| {
        let (state, ca) = (&mut w.state, &w.ca);
        state.age_certificate(certificate_id, days_left, now, ca)
    })
}

pub(crate) fn shorten_subscription(
    shared: &Shared,
    certificate_id: u64,
    days_left: i64,
) -> Result<(), String> {
    mutate(shared, |w, now| {
        w.state.shorten_subscription(certificate_id, days_left, now)
    })
}

pub(crate) fn force_status(
    shared: &Shared,
    certificate_id: u64,
    status: &str,
) -> Result<(), String> {
    mutate(shared, |w, _| w.state.force_status(certificate_id, status))
}

pub(crate) fn rotate_token(shared: &Shared, login: &str) -> Result<(), String> {
    mutate(shared, |w, _| w.state.rotate_token(login))
}

/// Completes a prepared renewal order as the order site would (billed); returns the new
/// certificate ID.
pub(crate) fn complete_renewal(shared: &Shared, prolongation_token: &str) -> Result<u64, String> {
    mutate(shared, |w, now| {
        w.state.complete_renewal(prolongation_token, now)
    })
}

pub(crate) fn set_payments(shared: &Shared, login: &str, cents: i64) -> Result<(), String> {
    mutate(shared, |w, _| w.state.set_payments(login, cents))
}

pub(crate) fn accounts(shared: &Shared) -> Vec<AccountInfo> {
    let w = shared.lock();
    guarded(|| w.state.accounts()).unwrap_or_else(|e| {
        tracing::error!("accounts failed: {e}");
        Vec::new()
    })
}

pub(crate) fn dns_records(shared: &Shared) -> Vec<DnsRecord> {
    let w = shared.lock();
    guarded(|| w.state.dns_records().to_vec()).unwrap_or_default()
}

pub(crate) fn billed_orders(shared: &Shared) -> Vec<(String, u64)> {
    let w = shared.lock();
    guarded(|| w.state.billed_orders()).unwrap_or_else(|e| {
        tracing::error!("billed_orders failed: {e}");
        Vec::new()
    })
}

/// Revokes a certificate: the CRL of its issuer lists it from now on.
pub(crate) fn revoke(
    shared: &Shared,
    target: &RevokeTarget,
    reason: &str,
    keep_order: bool,
) -> Result<Revocation, String> {
    let reason = crate::crl::parse_reason(reason).ok_or_else(|| {
        format!("unknown revocation reason '{reason}' (an RFC 5280 CRLReason name or code, e.g. keyCompromise or 1)")
    })?;
    mutate(shared, |w, now| {
        let found = w.state.revoke(target, keep_order, now)?;
        let revocation = Revocation {
            serial_hex: found.serial_hex,
            issuer: found.issuer,
            certificate_id: found.certificate_id,
            reason,
            revoked_at: now,
        };
        w.crls.revoke(revocation.clone());
        Ok(revocation)
    })
}

pub(crate) fn set_crl_fault(shared: &Shared, fault: Option<CrlFault>, bytes: Option<usize>) {
    shared.lock().crls.set_fault(fault, bytes);
}

pub(crate) fn set_crl_redirect(shared: &Shared, location: Option<String>) {
    shared.lock().crls.set_redirect(location);
}

pub(crate) fn crl_fetches(shared: &Shared) -> BTreeMap<String, u64> {
    shared.lock().crls.fetches().clone()
}

fn crl_json(shared: &Shared) -> Value {
    let w = shared.lock();
    json!({
        "base": w.ca.crl_base(),
        "revoked": w.crls.revoked(),
        "fault": w.crls.fault(),
        "fetches": w.crls.fetches(),
    })
}

/// `POST /_sandbox/revoke`.
fn revoke_http(shared: &Shared, r: Revoke) -> Result<Value, (u16, String)> {
    let target = match (r.certificate_id, r.serial) {
        (Some(id), None) => RevokeTarget::CertificateId(id),
        (None, Some(serial)) => RevokeTarget::Serial(serial),
        _ => {
            return Err((
                400,
                "give exactly one of certificate_id and serial".to_owned(),
            ));
        }
    };
    let reason = r.reason.unwrap_or_else(|| "unspecified".to_owned());
    let done = revoke(shared, &target, &reason, r.keep_order).map_err(unprocessable)?;
    let base = shared.lock().ca.crl_base().map(str::to_owned);
    Ok(json!({
        "ok": true,
        "revoked": done,
        "crl_url": base.map(|b| crate::ca::crl_url(&b, done.issuer)),
    }))
}

pub(crate) fn calls(shared: &Shared) -> Vec<CallRecord> {
    shared.lock().calls.clone()
}

pub(crate) fn clear_calls(shared: &Shared) {
    shared.lock().calls.clear();
}

pub(crate) fn inject(shared: &Shared, fault: Fault) -> Result<(), String> {
    fault.validate()?;
    shared.lock().faults.add(fault);
    Ok(())
}

pub(crate) fn faults(shared: &Shared) -> Vec<Fault> {
    shared.lock().faults.list()
}

pub(crate) fn clear_faults(shared: &Shared) {
    shared.lock().faults.clear();
}

pub(crate) fn inspect(shared: &Shared, certificate_id: u64) -> Option<Value> {
    let mut w = shared.lock();
    let now = w.now();
    w.tick(now);
    guarded(|| w.state.inspect(certificate_id)).unwrap_or_else(|e| {
        tracing::error!("inspect failed: {e}");
        None
    })
}

/// One HTTP and one HTTPS port; the balance mode and seed stay.
pub(crate) fn set_dcv_ports(shared: &Shared, http: u16, https: u16) {
    let mut w = shared.lock();
    let (balance, seed) = (w.dcv.balance(), w.dcv.seed());
    w.dcv = DcvPorts::new(vec![http], vec![https], balance, seed);
}

/// Replaces the ports and the balancer (its turns start over).
pub(crate) fn set_dcv_pool(shared: &Shared, ports: DcvPorts) {
    shared.lock().dcv = ports;
}

pub(crate) fn dcv_pool(shared: &Shared) -> DcvPorts {
    shared.lock().dcv.clone()
}

/// `{"http", "https"}`: a number for one port, a list for several; `balance` (and `seed` for
/// random) when a list has several ports.
fn dcv_ports_json(p: &DcvPorts) -> Value {
    let list = |v: &[u16]| match v {
        [one] => json!(one),
        many => json!(many),
    };
    let mut out = json!({ "http": list(p.http()), "https": list(p.https()) });
    if p.http().len() > 1 || p.https().len() > 1 {
        out["balance"] = json!(p.balance().name());
        if p.balance() == DcvBalance::Random {
            out["seed"] = json!(p.seed());
        }
    }
    out
}

/// The control API's `POST /_sandbox/dcv_ports`: what is given replaces, the rest stays.
fn change_dcv_ports(shared: &Shared, p: Ports) -> Result<Value, (u16, String)> {
    let old = dcv_pool(shared);
    let list = |given: Option<PortList>, old: &[u16], name: &str| match given {
        None => Ok(old.to_vec()),
        Some(PortList::One(p)) => Ok(vec![p]),
        Some(PortList::Many(v)) if v.is_empty() || v.len() > 64 => {
            Err((400, format!("{name} must list between 1 and 64 ports")))
        }
        Some(PortList::Many(v)) => Ok(v),
    };
    let http = list(p.http, old.http(), "http")?;
    let https = list(p.https, old.https(), "https")?;
    let balance = match p.balance.as_deref() {
        None => old.balance(),
        Some(b) => DcvBalance::parse(b).ok_or_else(|| {
            (
                400,
                format!("balance '{b}' is not one of round_robin, random, all"),
            )
        })?,
    };
    let ports = DcvPorts::new(http, https, balance, p.seed.unwrap_or(old.seed()));
    let answer = dcv_ports_json(&ports);
    set_dcv_pool(shared, ports);
    Ok(answer)
}

// ---- HTTP form ----

/// The routes, for `GET /_sandbox/` and the README.
const ROUTES: &[&str] = &[
    "GET  /_sandbox/accounts",
    "POST /_sandbox/accounts/payments        {\"login\":\"...\",\"sum\":\"12.34\"}",
    "GET  /_sandbox/clock",
    "POST /_sandbox/clock/advance            {\"days\":N,\"hours\":N,\"minutes\":N,\"seconds\":N}",
    "POST /_sandbox/instant                  {\"instant\":true}",
    "GET  /_sandbox/dns",
    "POST /_sandbox/dns                      {\"name\":\"...\",\"rtype\":\"TXT|CNAME\",\"value\":\"...\"}",
    "POST /_sandbox/dns/remove               {\"name\":\"...\",\"rtype\":\"TXT|CNAME\"}",
    "GET  /_sandbox/certificates/ID",
    "POST /_sandbox/certificates/ID/approve_email  {\"domain\":\"...\"} (optional)",
    "POST /_sandbox/certificates/ID/age            {\"days_left\":N}",
    "POST /_sandbox/certificates/ID/subscription   {\"days_left\":N}",
    "POST /_sandbox/certificates/ID/status         {\"status\":\"annulled\"}",
    "POST /_sandbox/rotate_token             {\"login\":\"...\"}",
    "POST /_sandbox/renewals/complete        {\"prolongation_token\":\"...\"}",
    "GET  /_sandbox/billed",
    "GET  /_sandbox/calls",
    "POST /_sandbox/calls/clear",
    "GET  /_sandbox/faults",
    "POST /_sandbox/faults                   a fault object or an array of them",
    "POST /_sandbox/faults/clear",
    "POST /_sandbox/revoke                   {\"certificate_id\":N | \"serial\":\"HEX\",\"reason\":\"keyCompromise\",\"keep_order\":false}",
    "GET  /_sandbox/crl                      revocations, the CRL fault, fetches per path",
    "POST /_sandbox/crl/fault                {\"fault\":\"wrong_key|oversized|stale|garbage|replay\"|null,\"bytes\":N}",
    "POST /_sandbox/crl/redirect             {\"location\":\"URL\"|null}: every CRL request answered 302",
    "GET  /_sandbox/dcv_ports",
    "POST /_sandbox/dcv_ports                {\"http\":N|[N,...],\"https\":N|[N,...],\"balance\":\"round_robin|random|all\",\"seed\":N}",
];

/// Answers one control request: `(status, JSON body)`.
pub(crate) fn handle_http(shared: &Shared, method: &str, path: &str, body: &[u8]) -> (u16, Value) {
    let rest = path.strip_prefix(PREFIX).unwrap_or(path);
    let segs: Vec<&str> = rest.split('/').filter(|s| !s.is_empty()).collect();
    let post = method == "POST";
    let get = method == "GET";
    match (segs.as_slice(), get, post) {
        ([], true, _) => (200, json!({ "routes": ROUTES })),
        (["accounts"], true, _) => (200, json!(accounts(shared))),
        (["accounts", "payments"], _, true) => with_body(body, |a: Payments| {
            let cents = cents_of(&a.sum).ok_or_else(|| {
                (
                    400,
                    format!("sum {:?} is not an amount such as \"12.34\"", a.sum),
                )
            })?;
            set_payments(shared, &a.login, cents).map_err(unprocessable)?;
            Ok(json!({ "ok": true }))
        }),
        (["clock"], true, _) => (200, clock_json(shared)),
        (["clock", "advance"], _, true) => with_body(body, |a: Advance| {
            let secs = a
                .days
                .saturating_mul(86_400)
                .saturating_add(a.hours.saturating_mul(3_600))
                .saturating_add(a.minutes.saturating_mul(60))
                .saturating_add(a.seconds);
            if secs < 0 {
                return Err((400, "the clock only moves forward".to_owned()));
            }
            advance(shared, time::Duration::seconds(secs));
            Ok(clock_json(shared))
        }),
        (["instant"], _, true) => with_body(body, |a: Instant| {
            set_instant(shared, a.instant).map_err(unprocessable)?;
            Ok(json!({ "ok": true, "instant": a.instant }))
        }),
        (["dns"], true, _) => (200, json!(dns_records(shared))),
        (["dns"], _, true) => with_body(body, |r: DnsRecord| {
            set_dns_record(shared, r).map_err(unprocessable)?;
            Ok(json!({ "ok": true }))
        }),
        (["dns", "remove"], _, true) => with_body(body, |r: DnsKey| {
            remove_dns_record(shared, &r.name, &r.rtype).map_err(unprocessable)?;
            Ok(json!({ "ok": true }))
        }),
        (["certificates", id], true, _) => {
            match id.parse::<u64>().ok().and_then(|id| inspect(shared, id)) {
                Some(v) => (200, v),
                None => (404, json!({ "error": format!("no certificate '{id}'") })),
            }
        }
        (["certificates", id, action], _, true) => {
            certificate_action(shared, id, action, body, method, path)
        }
        (["rotate_token"], _, true) => with_body(body, |a: Login| {
            rotate_token(shared, &a.login).map_err(unprocessable)?;
            Ok(json!({ "ok": true }))
        }),
        (["renewals", "complete"], _, true) => with_body(body, |r: Renewal| {
            let id = complete_renewal(shared, &r.prolongation_token).map_err(unprocessable)?;
            Ok(json!({ "ok": true, "certificate": id }))
        }),
        (["billed"], true, _) => {
            let map: serde_json::Map<String, Value> = billed_orders(shared)
                .into_iter()
                .map(|(login, n)| (login, json!(n)))
                .collect();
            (200, Value::Object(map))
        }
        (["calls"], true, _) => (200, json!(calls(shared))),
        (["calls", "clear"], _, true) => {
            clear_calls(shared);
            (200, json!({ "ok": true }))
        }
        (["faults"], true, _) => (200, json!(faults(shared))),
        (["faults"], _, true) => with_body(body, |f: OneOrMany| {
            let list = match f {
                OneOrMany::One(f) => vec![f],
                OneOrMany::Many(v) => v,
            };
            for f in &list {
                f.validate().map_err(|e| (400, e))?;
            }
            let n = list.len();
            for f in list {
                inject(shared, f).map_err(|e| (400, e))?;
            }
            Ok(json!({ "ok": true, "added": n }))
        }),
        (["faults", "clear"], _, true) => {
            clear_faults(shared);
            (200, json!({ "ok": true }))
        }
        (["revoke"], _, true) => with_body(body, |r: Revoke| revoke_http(shared, r)),
        (["crl"], true, _) => (200, crl_json(shared)),
        (["crl", "fault"], _, true) => with_body(body, |f: SetCrlFault| {
            set_crl_fault(shared, f.fault, f.bytes);
            Ok(json!({ "ok": true, "fault": f.fault }))
        }),
        (["crl", "redirect"], _, true) => with_body(body, |r: SetCrlRedirect| {
            set_crl_redirect(shared, r.location.clone());
            Ok(json!({ "ok": true, "location": r.location }))
        }),
        (["dcv_ports"], true, _) => (200, dcv_ports_json(&dcv_pool(shared))),
        (["dcv_ports"], _, true) => with_body(body, |p: Ports| change_dcv_ports(shared, p)),
        _ => not_found(method, path),
    }
}

/// `POST /_sandbox/certificates/ID/ACTION`: approves an EMAIL validation, ages the certificate,
/// shortens its subscription or forces its status.
fn certificate_action(
    shared: &Shared,
    id: &str,
    action: &str,
    body: &[u8],
    method: &str,
    path: &str,
) -> (u16, Value) {
    let Ok(id) = id.parse::<u64>() else {
        return (404, json!({ "error": format!("no certificate '{id}'") }));
    };
    match action {
        "approve_email" => with_body(body, |a: Approve| {
            approve_email(shared, id, a.domain.as_deref()).map_err(unprocessable)?;
            Ok(json!({ "ok": true }))
        }),
        "age" => with_body(body, |a: DaysLeft| {
            age_certificate(shared, id, a.days_left).map_err(unprocessable)?;
            Ok(json!({ "ok": true }))
        }),
        "subscription" => with_body(body, |a: DaysLeft| {
            shorten_subscription(shared, id, a.days_left).map_err(unprocessable)?;
            Ok(json!({ "ok": true }))
        }),
        "status" => with_body(body, |a: Status| {
            force_status(shared, id, &a.status).map_err(unprocessable)?;
            Ok(json!({ "ok": true }))
        }),
        _ => not_found(method, path),
    }
}

fn clock_json(shared: &Shared) -> Value {
    let now = now(shared);
    json!({
        "now": crate::clock::rfc3339(now),
        "unix": now.unix_timestamp(),
        "time_scale": time_scale(shared),
    })
}

fn not_found(method: &str, path: &str) -> (u16, Value) {
    (
        404,
        json!({ "error": format!("no control route {method} {path}; GET {PREFIX}/ lists them") }),
    )
}

fn unprocessable(e: String) -> (u16, String) {
    (422, e)
}

/// Parses the JSON body (an empty body counts as `{}`) and runs `f`.
fn with_body<T: for<'de> Deserialize<'de>>(
    body: &[u8],
    f: impl FnOnce(T) -> Result<Value, (u16, String)>,
) -> (u16, Value) {
    let body = if body.iter().all(u8::is_ascii_whitespace) {
        &b"{}"[..]
    } else {
        body
    };
    let parsed = match serde_json::from_slice::<T>(body) {
        Ok(v) => v,
        Err(e) => return (400, json!({ "error": format!("invalid JSON body: {e}") })),
    };
    match f(parsed) {
        Ok(v) => (200, v),
        Err((status, e)) => (status, json!({ "error": e })),
    }
}

#[derive(Deserialize)]
struct Advance {
    #[serde(default)]
    days: i64,
    #[serde(default)]
    hours: i64,
    #[serde(default)]
    minutes: i64,
    #[serde(default)]
    seconds: i64,
}

#[derive(Deserialize)]
struct Instant {
    instant: bool,
}

#[derive(Deserialize)]
struct DnsKey {
    name: String,
    rtype: String,
}

#[derive(Deserialize)]
struct Approve {
    #[serde(default)]
    domain: Option<String>,
}

#[derive(Deserialize)]
struct DaysLeft {
    days_left: i64,
}

#[derive(Deserialize)]
struct Status {
    status: String,
}

#[derive(Deserialize)]
struct Renewal {
    prolongation_token: String,
}

#[derive(Deserialize)]
struct Payments {
    login: String,
    sum: String,
}

/// `"12.34"` (at most two decimals, not negative) → 1234.
fn cents_of(text: &str) -> Option<i64> {
    let (int, frac) = text.split_once('.').unwrap_or((text, ""));
    if int.is_empty()
        || int.len() > 12
        || frac.len() > 2
        || !int.bytes().chain(frac.bytes()).all(|b| b.is_ascii_digit())
    {
        return None;
    }
    let frac: i64 = format!("{frac:0<2}").parse().ok()?;
    int.parse::<i64>().ok()?.checked_mul(100)?.checked_add(frac)
}

#[derive(Deserialize)]
struct Login {
    login: String,
}

#[derive(Deserialize)]
#[serde(untagged)]
enum OneOrMany {
    One(Fault),
    Many(Vec<Fault>),
}

#[derive(Deserialize)]
#[serde(untagged)]
enum PortList {
    One(u16),
    Many(Vec<u16>),
}

#[derive(Deserialize)]
struct Ports {
    #[serde(default)]
    http: Option<PortList>,
    #[serde(default)]
    https: Option<PortList>,
    #[serde(default)]
    balance: Option<String>,
    #[serde(default)]
    seed: Option<u64>,
}

#[derive(Deserialize)]
struct Revoke {
    #[serde(default)]
    certificate_id: Option<u64>,
    #[serde(default)]
    serial: Option<String>,
    #[serde(default)]
    reason: Option<String>,
    #[serde(default)]
    keep_order: bool,
}

#[derive(Deserialize)]
struct SetCrlRedirect {
    location: Option<String>,
}

#[derive(Deserialize)]
struct SetCrlFault {
    fault: Option<CrlFault>,
    #[serde(default)]
    bytes: Option<usize>,
}
