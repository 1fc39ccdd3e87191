//! A host catching up on many certificates reports every result: more than one etcd
//! transaction of results (150 certificates: two transactions of at most 100 puts), each one
//! present under `hosts/HOST/certs/` and opening (`fleet status` reads them); a certificate of
//! the batch whose published value does not open on the follower fails alone, reported with
//! its error, the others installed. Real etcd (three members), real nginx on both hosts.

use crate::support;

use std::time::Duration;

use support::env::norm_serial;
use support::etcd::EtcdCluster;
use support::webserver::Server;

use crate::fleet_e2e::{Fleet, ready};

const COUNT: usize = 150;

fn certs() -> Vec<(String, String)> {
    (0..COUNT)
        .map(|i| (format!("c{i}"), format!("c{i}.catchup.test")))
        .collect()
}

/// Two nginx hosts under `prefix` with [`COUNT`] certificates; web1 orders them all (the
/// sandbox validates through web1 only).
fn fleet_after_the_first_day(prefix: &str) -> (Fleet, EtcdCluster) {
    let env = support::env::TestEnv::new();
    let cluster = EtcdCluster::start(env.dir.path(), 3);
    let owned = certs();
    let list: Vec<(&str, &str)> = owned
        .iter()
        .map(|(n, d)| (n.as_str(), d.as_str()))
        .collect();
    let f = Fleet::build(
        env,
        &cluster.endpoints(),
        prefix,
        &[Server::Nginx, Server::Nginx],
        &list,
    );
    f.env.sandbox.set_dcv_ports(f.hosts[0].web.http_port(), 0);
    let first = f.agent(0, &["--json", "renew", "--wait", "300"]);
    first.expect_code(0);
    for (name, _) in &owned {
        first.installed_serial(name);
    }
    (f, cluster)
}

/// `fleet status` on web1: web2's row of each certificate, by name.
fn web2_rows(f: &Fleet) -> std::collections::BTreeMap<String, serde_json::Value> {
    let st = f.agent(0, &["--json", "fleet", "status"]);
    st.expect_code(0);
    let v = st.json();
    let mut rows = std::collections::BTreeMap::new();
    for c in v["certificates"].as_array().expect("certificates") {
        let web2 = c["hosts"]
            .as_array()
            .and_then(|h| h.iter().find(|h| h["host"] == "web2"))
            .cloned()
            .unwrap_or(serde_json::Value::Null);
        let mut row = web2;
        row["current"] = c["serial"].clone();
        rows.insert(c["name"].as_str().unwrap_or_default().to_owned(), row);
    }
    rows
}

#[test]
fn a_host_catching_up_on_more_than_one_transaction_of_results_reports_every_one() {
    if !ready() {
        return;
    }
    let (f, _cluster) = fleet_after_the_first_day("/catchup/");
    let mut etcd = f.etcd();
    let out = f.agent(1, &["--json", "renew"]);
    out.expect_code(0);
    for (name, _) in certs() {
        out.installed_serial(&name);
        assert!(
            etcd.get(&format!("hosts/web2/certs/{name}")).is_some(),
            "no result of {name} under hosts/web2/"
        );
    }
    let rows = web2_rows(&f);
    assert_eq!(rows.len(), COUNT);
    for (name, row) in &rows {
        let serial = row["serial"].as_str().map(norm_serial);
        assert_eq!(
            serial,
            row["current"].as_str().map(norm_serial),
            "{name}: {row}"
        );
        assert_eq!(row["state"], "current", "{name}: {row}");
    }
    f.wait_all_serve(
        &norm_serial(rows["c0"]["current"].as_str().unwrap_or_default()),
        Duration::from_secs(30),
    );
}

#[test]
fn a_certificate_that_fails_its_check_fails_alone_and_is_reported_with_its_error() {
    if !ready() {
        return;
    }
    let (f, _cluster) = fleet_after_the_first_day("/catchup-bad/");
    let mut etcd = f.etcd();
    // c7's published value replaced by c8's (sealed for another key and name): it does not
    // open on web2, which installs the other 149.
    let other = etcd.get("certs/c8/current").expect("c8 published");
    etcd.put("certs/c7/current", other);
    let out = f.agent(1, &["--json", "renew"]);
    out.expect_code(3);
    let bad = out.outcome("c7");
    assert_eq!(bad["outcome"], "failed", "{}", out.describe());
    let error = bad["error"].as_str().unwrap_or_default().to_owned();
    assert!(error.contains("certs/c7/current"), "{error}");
    for (name, _) in certs().iter().filter(|(n, _)| n != "c7") {
        out.installed_serial(name);
    }
    let rows = web2_rows(&f);
    let c7 = &rows["c7"];
    let state = c7["state"].as_str().unwrap_or_default();
    assert!(
        state.starts_with("error: ") && state.contains("certs/c7/current"),
        "{c7}"
    );
    assert!(c7["serial"].is_null(), "nothing installed for c7: {c7}");
    for (name, row) in rows.iter().filter(|(n, _)| n.as_str() != "c7") {
        assert_eq!(
            row["serial"].as_str().map(norm_serial),
            row["current"].as_str().map(norm_serial),
            "{name}: {row}"
        );
    }
}
