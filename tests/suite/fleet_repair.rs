//! The leader repairs a value it refuses: an etcd writer without the fleet key puts garbage,
//! another certificate's sealed value or an older sealed value (a replay) at `www`'s spec,
//! shared record or current certificate; the next leader, which holds the copy it accepted, writes it
//! back sealed at a higher version, says so (a warning naming the key, a
//! `fleet-value-repaired` line in its journal and audit log) and goes on. Nothing is ordered or
//! reissued, every host keeps serving the certificate it served.

use crate::fleet_e2e::ready;
use crate::fleet_trust::{GARBAGE, Trial};

use std::fs;

use support::env::norm_serial;
use support::scenario::{show, state_changing};

use crate::support;

/// The `fleet-value-repaired` lines in host `i`'s file `file` (journal or audit log).
fn repairs(t: &Trial, i: usize, file: &str) -> usize {
    fs::read_to_string(t.f.hosts[i].state.join(file))
        .unwrap_or_default()
        .matches("fleet-value-repaired")
        .count()
}

fn serial(t: &Trial, i: usize) -> String {
    norm_serial(t.installed(i, "www").unwrap()["serial"].as_str().unwrap())
}

/// The writer puts `value` at `rel`; web2's run leads, repairs it and reports `www` as not
/// failed; web1's run after it takes the repaired value.
fn repaired(t: &mut Trial, case: &str, rel: &str, value: Vec<u8>) {
    let before: Vec<String> = (0..2).map(|i| serial(t, i)).collect();
    let calls = t.f.env.calls().len();
    let (billed, orders) = (t.f.env.billed(), t.f.env.order_posts());
    let noted = (repairs(t, 1, "journal.log"), repairs(t, 1, "audit.log"));
    t.etcd.put(rel, value.clone());

    let out = t.f.agent(1, &["--json", "renew"]);
    let key = format!("{}{rel}", crate::fleet_trust::PREFIX);
    let text = out.text();
    assert!(
        text.contains(&format!("{key} repaired")),
        "{case}: the repair is said, naming the key: {}",
        out.describe()
    );
    out.expect_code(0);
    assert_ne!(
        out.outcome("www")["outcome"],
        "failed",
        "{case}: {}",
        out.describe()
    );
    assert_eq!(
        (repairs(t, 1, "journal.log"), repairs(t, 1, "audit.log")),
        (noted.0 + 1, noted.1 + 1),
        "{case}: one fleet-value-repaired line in the journal and the audit log"
    );
    let now = t.etcd.get(rel).unwrap();
    assert_ne!(now, value, "{case}: the leader wrote its copy back");

    // Every host goes on with the certificate it served, from the repaired value.
    for i in [0, 1] {
        let out = t.f.agent(i, &["--json", "renew"]);
        out.expect_code(0);
        assert_ne!(
            out.outcome("www")["outcome"],
            "failed",
            "{case}: host {i}: {}",
            out.describe()
        );
        assert_eq!(serial(t, i), before[i], "{case}: host {i}");
    }
    assert_eq!(t.etcd.get(rel).unwrap(), now, "{case}: repaired once");
    let all = t.f.env.calls();
    assert!(
        state_changing(&all[calls..]).is_empty(),
        "{case}: nothing ordered or reissued: {}",
        show(&all[calls..])
    );
    assert_eq!(
        (t.f.env.billed(), t.f.env.order_posts()),
        (billed, orders),
        "{case}"
    );
}

#[test]
fn a_refused_shared_record_is_written_back_by_the_leader_that_holds_its_copy() {
    if !ready() {
        return;
    }
    let mut t = Trial::start();
    let rel = "certs/www/state";
    let old = t.etcd.get(rel).unwrap();
    t.move_www_on();
    let shop = t.etcd.get("certs/shop/state").unwrap();
    let current = t.etcd.get("certs/www/current").unwrap();
    repaired(&mut t, "garbage", rel, GARBAGE.to_vec());
    repaired(&mut t, "another certificate's record", rel, shop);
    repaired(&mut t, "another purpose", rel, current);
    repaired(&mut t, "replay", rel, old);
}

#[test]
fn a_refused_spec_is_written_back_by_the_leader_that_agreed_with_it() {
    if !ready() {
        return;
    }
    let mut t = Trial::start();
    let rel = "certs/www/spec";
    let shop = t.etcd.get("certs/shop/spec").unwrap();
    let check = t.etcd.get("keycheck").unwrap();
    repaired(&mut t, "garbage", rel, GARBAGE.to_vec());
    repaired(&mut t, "another certificate's spec", rel, shop);
    repaired(&mut t, "another purpose", rel, check);
}

#[test]
fn a_refused_current_certificate_is_written_back_by_the_leader_that_serves_it() {
    if !ready() {
        return;
    }
    let mut t = Trial::start();
    let rel = "certs/www/current";
    let old = t.etcd.get(rel).unwrap();
    t.move_www_on();
    let shop = t.etcd.get("certs/shop/current").unwrap();
    repaired(&mut t, "garbage", rel, GARBAGE.to_vec());
    repaired(&mut t, "another certificate's current", rel, shop);
    repaired(&mut t, "replay", rel, old);
}
