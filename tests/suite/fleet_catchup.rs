//! Hosts catching up on many certificates report every result: more than one etcd transaction
//! of results (150 certificates: two transactions of at most 100 puts), each one present under
//! `hosts/HOST/certs/` and opening (`fleet status` reads them), and each journalled, audited
//! and recorded installed (written together, one batch); a certificate of the batch whose
//! published value does not open on a joining host (following while another host leads) fails
//! alone, reported with its error, the others installed. A catch-up taken in several slices
//! (`CERT_AGENT_TEST_SYNC_SLICE`) refuses a forged and a garbage value of later slices and
//! installs the rest with one reload. A catch-up in slices holds one slice's bundles at a time:
//! its heap's peak (counted by the debug build's allocator, `CERT_AGENT_TEST_HEAP_PEAK`) is
//! below that of the same catch-up taken whole by more than the bundles of the slices it did
//! not hold. Real etcd (three members), real nginx on every host.

use crate::support;

use std::collections::BTreeMap;
use std::time::Duration;

use support::env::{AgentOutput, norm_serial};
use support::etcd::{EtcdClient, EtcdCluster};
use support::webserver::Server;

use crate::fleet_batch::{count_reloads, reloads};
use crate::fleet_e2e::{Fleet, numbered, ready};

const COUNT: usize = 150;
/// A run over [`COUNT`] certificates (a debug build on a loaded machine).
const LIMIT: Duration = Duration::from_secs(600);

fn names() -> Vec<String> {
    names_of(COUNT)
}

fn run(f: &Fleet, i: usize, args: &[&str]) -> AgentOutput {
    f.env.agent_at(&f.hosts[i].config, args).run_within(LIMIT)
}

/// `fleet status` on web1 (exiting `code`): `host`'s row of each certificate, by name, with
/// the fleet's current serial as `current`.
fn rows_of(f: &Fleet, host: &str, code: i32) -> BTreeMap<String, serde_json::Value> {
    let st = run(f, 0, &["--json", "fleet", "status"]);
    st.expect_code(code);
    let v = st.json();
    let mut rows = BTreeMap::new();
    for c in v["certificates"].as_array().expect("certificates") {
        let mut row = c["hosts"]
            .as_array()
            .and_then(|h| h.iter().find(|h| h["host"] == host))
            .cloned()
            .unwrap_or_else(|| serde_json::json!({}));
        row["current"] = c["serial"].clone();
        rows.insert(c["name"].as_str().unwrap_or_default().to_owned(), row);
    }
    rows
}

fn serial(v: &serde_json::Value) -> Option<String> {
    v.as_str().map(norm_serial)
}

#[test]
fn hosts_catching_up_on_more_than_one_transaction_of_results_report_every_one() {
    if !ready() {
        return;
    }
    let env = support::env::TestEnv::new();
    let cluster = EtcdCluster::start(env.dir.path(), 3);
    let servers = [Server::Nginx, Server::Nginx, Server::Nginx];
    let f = Fleet::numbered(env, &cluster.endpoints(), "/catchup/", &servers, COUNT);
    let first = run(&f, 0, &["--json", "renew", "--wait", "300"]);
    first.expect_code(0);

    // web2 catches up on all 150: every result under hosts/web2/, each opening and current.
    let mut etcd = EtcdClient::connect(cluster.endpoints(), "/catchup/");
    let out = run(&f, 1, &["--json", "renew"]);
    out.expect_code(0);
    for name in names() {
        assert_eq!(
            Some(out.installed_serial(&name)),
            serial(&first.outcome(&name)["serial"]),
            "{name}"
        );
        assert!(
            etcd.get(&format!("hosts/web2/certs/{name}")).is_some(),
            "no result of {name} under hosts/web2/"
        );
    }
    // Its 150 installs recorded together: one `installed` journal line and one audit line
    // each, in the batch's order, the audit chain intact.
    let journal = std::fs::read_to_string(f.hosts[1].state.join("journal.log")).unwrap();
    let installed: Vec<String> = journal
        .lines()
        .map(|l| serde_json::from_str::<serde_json::Value>(l).unwrap())
        .filter(|l| l["event"] == "installed")
        .map(|l| l["certificate"].as_str().unwrap_or_default().to_owned())
        .collect();
    assert_eq!(installed, names(), "{journal}");
    let audit = std::fs::read_to_string(f.hosts[1].state.join("audit.log")).unwrap();
    let audited: Vec<String> = audit
        .lines()
        .map(|l| serde_json::from_str::<serde_json::Value>(l).unwrap())
        .filter(|l| l["event"] == "installed")
        .map(|l| l["certificate"].as_str().unwrap_or_default().to_owned())
        .collect();
    assert_eq!(audited, names());
    let verify = f
        .env
        .agent_at(&f.hosts[1].config, ["audit", "--verify"])
        .run();
    verify.expect_code(0);
    for name in names() {
        let rec = std::fs::read_to_string(f.hosts[1].state.join(format!("certs/{name}.json")));
        let rec: serde_json::Value = serde_json::from_str(&rec.unwrap()).unwrap();
        assert_eq!(
            serial(&rec["installed"]["serial"]),
            Some(out.installed_serial(&name)),
            "{name}"
        );
    }
    let rows = rows_of(&f, "web2", 0);
    assert_eq!(rows.len(), COUNT);
    for (name, row) in &rows {
        assert_eq!(
            serial(&row["serial"]),
            serial(&row["current"]),
            "{name}: {row}"
        );
        assert_eq!(row["state"], "current", "{name}: {row}");
    }

    // c7's published value replaced by c8's (sealed for another key and name): it does not
    // open on web3, which joins now and installs the other 149; c7 fails alone, reported
    // under hosts/web3/ with its error.
    let other = etcd.get("certs/c8/current").expect("c8 published");
    etcd.put("certs/c7/current", other);
    // Another host leads meanwhile: web3's run only follows (a leader would take c7 for a
    // certificate the fleet has not issued).
    let lease = etcd.put_on_lease("leader", "web1", 600);
    let out = run(&f, 2, &["--json", "renew"]);
    out.expect_code(3);
    let bad = out.outcome("c7");
    assert_eq!(bad["outcome"], "failed", "{}", out.describe());
    let error = bad["error"].as_str().unwrap_or_default();
    assert!(error.contains("certs/c7/current"), "{error}");
    for name in names().iter().filter(|n| *n != "c7") {
        out.installed_serial(name);
    }
    etcd.revoke(lease);
    // Exit 1: c7's current certificate in etcd does not open.
    let rows = rows_of(&f, "web3", 1);
    let c7 = &rows["c7"];
    let state = c7["state"].as_str().unwrap_or_default();
    assert!(
        state.starts_with("error: ") && state.contains("certs/c7/current"),
        "{c7}"
    );
    assert!(c7["serial"].is_null(), "nothing installed for c7: {c7}");
    for (name, row) in rows.iter().filter(|(n, _)| n.as_str() != "c7") {
        assert_eq!(
            serial(&row["serial"]),
            serial(&row["current"]),
            "{name}: {row}"
        );
    }
}

/// Certificates of [`a_catch_up_in_slices_refuses_bad_values_of_later_slices_with_one_reload`],
/// taken [`SLICE`] at a time: three slices.
const SLICED: usize = 12;
const SLICE: &str = "5";

#[test]
fn a_catch_up_in_slices_refuses_bad_values_of_later_slices_with_one_reload() {
    if !ready() {
        return;
    }
    let env = support::env::TestEnv::new();
    let cluster = EtcdCluster::start(env.dir.path(), 3);
    let servers = [Server::Nginx, Server::Nginx];
    let f = Fleet::numbered(env, &cluster.endpoints(), "/sliced/", &servers, SLICED);
    let first = run(&f, 0, &["--json", "renew", "--wait", "300"]);
    first.expect_code(0);
    let counted = count_reloads(&f, 1);

    // c11 (third slice) holds c10's value (sealed for another key and name), c6 (second
    // slice) garbage.
    let mut etcd = EtcdClient::connect(cluster.endpoints(), "/sliced/");
    let other = etcd.get("certs/c10/current").expect("c10 published");
    etcd.put("certs/c11/current", other);
    etcd.put("certs/c6/current", b"\x00garbage{".to_vec());
    // Another host leads meanwhile: web2's run only follows.
    let lease = etcd.put_on_lease("leader", "web1", 600);
    let out = f
        .env
        .agent_at(&f.hosts[1].config, ["--json", "renew"])
        .env("CERT_AGENT_TEST_SYNC_SLICE", SLICE)
        .run_within(LIMIT);
    etcd.revoke(lease);
    out.expect_code(3);
    for bad in ["c6", "c11"] {
        let o = out.outcome(bad);
        assert_eq!(o["outcome"], "failed", "{bad}: {}", out.describe());
        let error = o["error"].as_str().unwrap_or_default();
        assert!(error.contains(&format!("certs/{bad}/current")), "{error}");
        let rec = std::fs::read_to_string(f.hosts[1].state.join(format!("certs/{bad}.json")));
        let installed = rec
            .ok()
            .and_then(|t| serde_json::from_str::<serde_json::Value>(&t).ok())
            .map(|v| v["installed"].clone());
        assert!(
            installed.is_none_or(|i| i.is_null()),
            "nothing installed for {bad}"
        );
    }
    for name in names_of(SLICED)
        .iter()
        .filter(|n| !["c6", "c11"].contains(&n.as_str()))
    {
        assert_eq!(
            Some(out.installed_serial(name)),
            serial(&first.outcome(name)["serial"]),
            "{name}"
        );
    }
    assert_eq!(reloads(&counted), 1, "one reload for three slices");
}

/// Certificates of [`a_catch_up_in_slices_holds_one_slice_of_bundles_at_a_time`], and the
/// slice of the run taken in slices.
const HELD: usize = 60;
const HELD_SLICE: usize = 6;

/// The most bytes of heap `host`'s `renew` held at once while it caught up on the fleet's
/// certificates taken `slice` at a time (another host leads: the run only follows).
fn catch_up_heap_peak(f: &Fleet, etcd: &mut EtcdClient, host: usize, slice: usize) -> usize {
    let report = f.env.path(&format!("heap-peak-{}", f.hosts[host].name));
    let lease = etcd.put_on_lease("leader", "web1", 600);
    let out = f
        .env
        .agent_at(&f.hosts[host].config, ["--json", "renew"])
        .env("CERT_AGENT_TEST_SYNC_SLICE", slice.to_string())
        .env("CERT_AGENT_TEST_HEAP_PEAK", &report)
        .run_within(LIMIT);
    etcd.revoke(lease);
    out.expect_code(0);
    for name in names_of(HELD) {
        out.installed_serial(&name);
    }
    let text = std::fs::read_to_string(&report)
        .unwrap_or_else(|e| panic!("no heap report at {}: {e}", report.display()));
    text.trim()
        .parse()
        .unwrap_or_else(|e| panic!("heap report {text:?}: {e}"))
}

/// The bound on memory: a host catching up holds one slice of the opened bundles at
/// a time, not every one. The same catch-up of [`HELD`] certificates, taken whole (web2)
/// and a [`HELD_SLICE`] at a time (web3, which also reads web2's results): the sliced run's
/// heap peaks lower by more than the PEM of the bundles it never held together (each
/// certificate's full chain as installed, counted once, though an opened bundle holds it
/// more than once: leaf, chain and full chain, their DER, the sealed value and its key).
#[test]
fn a_catch_up_in_slices_holds_one_slice_of_bundles_at_a_time() {
    if !ready() {
        return;
    }
    let env = support::env::TestEnv::new();
    let cluster = EtcdCluster::start(env.dir.path(), 3);
    let servers = [Server::Nginx, Server::Nginx, Server::Nginx];
    let f = Fleet::numbered(env, &cluster.endpoints(), "/held/", &servers, HELD);
    run(&f, 0, &["--json", "renew", "--wait", "300"]).expect_code(0);
    let mut etcd = EtcdClient::connect(cluster.endpoints(), "/held/");
    let whole = catch_up_heap_peak(&f, &mut etcd, 1, HELD);
    let sliced = catch_up_heap_peak(&f, &mut etcd, 2, HELD_SLICE);
    let out = f.hosts[0].state.parent().expect("host dir").join("out");
    let pem: usize = names_of(HELD)
        .iter()
        .map(|n| {
            std::fs::metadata(out.join(n).join("fullchain.pem"))
                .map(|m| m.len() as usize)
                .unwrap_or_else(|e| panic!("{n}'s full chain on web1: {e}"))
        })
        .sum();
    let never_together = pem / HELD * (HELD - HELD_SLICE);
    eprintln!(
        "heap peak: whole {whole} bytes, in slices of {HELD_SLICE} {sliced} bytes \
         (a full chain {} bytes, {never_together} bytes never held together)",
        pem / HELD
    );
    assert!(
        sliced.saturating_add(never_together) < whole,
        "a catch-up in slices of {HELD_SLICE} peaked at {sliced} bytes of heap, the same \
         catch-up whole at {whole}: it held the bundles of more than one slice at once \
         ({never_together} bytes of full chains never needed together)"
    );
}

fn names_of(n: usize) -> Vec<String> {
    numbered(n).into_iter().map(|(n, _)| n).collect()
}
