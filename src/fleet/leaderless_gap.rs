//! A leaderless gap with work pending: what a shared record leaves open at the CA (an order
//! or a reissue sent, an order without a known answer, an ACME order), since when, and
//! whether no run has led it for longer than a bound — `fleet status` says so instead of a
//! bare `leader: none (between runs)` when the run that led the work died and no daemon took
//! it over.

use serde::Serialize;
use time::OffsetDateTime;

use super::schema::{SharedState, printable};
use crate::store::CertRecord;

/// One certificate's work left open at the CA, as its shared record tells it.
#[derive(Debug, Clone, Serialize)]
pub(crate) struct PendingWork {
    pub name: String,
    /// `reissue`, `order`, `order sent without a known answer` or `ACME order`.
    pub what: String,
    /// When the work began (the reissue requested, the order placed or about to be).
    #[serde(with = "time::serde::rfc3339")]
    pub since: OffsetDateTime,
    /// The last sign of a leader working on it: the shared record's last write or status
    /// check, and the host that wrote it.
    #[serde(with = "time::serde::rfc3339")]
    pub last_led: OffsetDateTime,
    pub last_led_by: String,
    /// No leader now, and none has worked on it for longer than the bound
    /// ([`mark_unled`]).
    pub unled: bool,
}

/// The work `shared` leaves open at the CA for certificate `name`; `None` when there is none
/// (installed, ended, held until valid, or due but not begun).
pub(super) fn pending_of(name: &str, shared: &SharedState) -> Option<PendingWork> {
    let (what, since) = open_at_ca(&shared.record, shared.pending_key.is_some())?;
    let last_led = shared
        .record
        .last_poll
        .map_or(shared.written_at, |p| p.max(shared.written_at));
    Some(PendingWork {
        name: printable(name),
        what: what.to_owned(),
        since,
        last_led,
        last_led_by: printable(&shared.written_by),
        unled: false,
    })
}

/// What `rec` has open at the CA and since when. `sealed_key`: the shared record carries a
/// pending key (its path is each host's own).
fn open_at_ca(rec: &CertRecord, sealed_key: bool) -> Option<(&'static str, OffsetDateTime)> {
    if rec.partner.ended().is_some() || rec.held.is_some() {
        return None;
    }
    if let Some(i) = rec.partner.intent() {
        return Some(("order sent without a known answer", i.created_at));
    }
    if let Some(r) = rec.partner.reissue() {
        return Some(("reissue", r.requested_at));
    }
    if let Some(o) = rec.partner.order()
        && (rec.pending_key.is_some() || sealed_key)
    {
        return Some(("order", o.placed_at));
    }
    let acme = rec.acme.as_ref()?;
    acme.order_url.as_ref()?;
    Some(("ACME order", acme.placed_at?))
}

/// Marks the work no run has led for longer than `bound` while no host leads; returns
/// whether any is. With a leader, nothing is marked (it leads the work, or will).
pub(crate) fn mark_unled(
    pending: &mut [PendingWork],
    leader: Option<&str>,
    now: OffsetDateTime,
    bound: time::Duration,
) -> bool {
    let mut any = false;
    for p in pending.iter_mut() {
        p.unled = leader.is_none() && now - p.last_led > bound;
        any |= p.unled;
    }
    any
}

/// The leader line of `fleet status` when no host leads: the open work and who takes it
/// over, or `none (between runs)` when nothing is open.
pub(crate) fn leaderless_line(pending: &[PendingWork]) -> String {
    if pending.is_empty() {
        return "none (between runs)".to_owned();
    }
    let work: Vec<String> = pending
        .iter()
        .map(|p| {
            format!(
                "{} of {} pending since {}",
                p.what,
                p.name,
                crate::clock::short_time(p.since)
            )
        })
        .collect();
    format!(
        "none — {}, no run leads it; the next daemon run or `cert-agent renew` on any host \
         takes it over",
        work.join("; ")
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::{OrderIntent, OrderRef, ReissueState};
    use time::macros::datetime;

    const T: OffsetDateTime = datetime!(2026-11-28 22:41:10 UTC);

    fn shared(record: CertRecord) -> SharedState {
        SharedState {
            record,
            pending_key: None,
            written_by: "web1".into(),
            written_at: T,
        }
    }

    fn order() -> OrderRef {
        OrderRef {
            certificate_id: 7,
            order_id: None,
            placed_at: T - time::Duration::days(150),
            adopted: false,
        }
    }

    #[test]
    fn the_work_open_at_the_ca_is_named_with_its_start() {
        let mut rec = CertRecord::default();
        assert!(pending_of("www", &shared(rec.clone())).is_none(), "nothing");
        rec.partner.set_order(order());
        assert!(pending_of("www", &shared(rec.clone())).is_none(), "issued");
        assert!(rec.partner.begin_reissue(ReissueState {
            certificate_id: 7,
            csr_sha256: "AA".into(),
            previous_serial: None,
            requested_at: T - time::Duration::minutes(3),
            confirmed: true,
        }));
        let p = pending_of("www", &shared(rec.clone())).expect("a reissue");
        assert_eq!(
            (p.what.as_str(), p.since),
            ("reissue", T - time::Duration::minutes(3))
        );
        assert_eq!((p.last_led, p.last_led_by.as_str()), (T, "web1"));
        rec.mark_ended("annulled");
        assert!(pending_of("www", &shared(rec.clone())).is_none(), "ended");
        let mut first = CertRecord::default();
        first.partner.stage = crate::store::PartnerStage::Intended(OrderIntent {
            csr_sha256: "BB".into(),
            common_name: "www.example.test".into(),
            created_at: T,
            product_id: 1,
            price: None,
        });
        let p = pending_of("www", &shared(first)).expect("an intent");
        assert_eq!(p.what, "order sent without a known answer");
        let mut placed = CertRecord::default();
        placed.partner.set_order(order());
        let mut s = shared(placed);
        s.pending_key = Some("sealed".into());
        assert_eq!(pending_of("www", &s).expect("an order").what, "order");
    }

    #[test]
    fn work_is_unled_only_without_a_leader_and_past_the_bound() {
        let mut rec = CertRecord::default();
        rec.partner.set_order(order());
        assert!(rec.partner.begin_reissue(ReissueState {
            certificate_id: 7,
            csr_sha256: "AA".into(),
            previous_serial: None,
            requested_at: T,
            confirmed: true,
        }));
        let mut p = vec![pending_of("www", &shared(rec)).expect("a reissue")];
        let bound = time::Duration::seconds(900);
        let later = T + time::Duration::seconds(901);
        assert!(!mark_unled(&mut p, Some("web2"), later, bound));
        assert!(!mark_unled(&mut p, None, T + bound, bound));
        assert!(mark_unled(&mut p, None, later, bound) && p[0].unled);
        assert_eq!(
            leaderless_line(&p),
            "none — reissue of www pending since 2026-11-28 22:41 UTC, no run leads it; the next \
             daemon run or `cert-agent renew` on any host takes it over"
        );
        assert_eq!(leaderless_line(&[]), "none (between runs)");
    }
}
