//! A host that has accepted nothing yet (new, re-imaged, its versions file deleted) learns
//! the fleet's versions from the sealed manifest (`manifest/HOST`, one entry per host) before
//! it takes anything from etcd: an older sealed value an etcd writer puts back — the
//! certificate before a reissue, with one host's manifest entry from before it — is refused,
//! a deleted versions file is rebuilt at the fleet's versions, and a deleted shared record
//! never leads a host without a record of the order to order again.

use crate::fleet_e2e::{DOMAIN, Fleet, ready};

use std::fs;

use support::webserver::Server;

use crate::support;

const PREFIX: &str = "/floor/";

/// `n` hosts with nginx; the sandbox validates through web1 alone (the other hosts may not
/// have run yet). web1 orders `www`, web2 installs it.
fn issued(n: usize) -> Fleet {
    let f = Fleet::start_under(PREFIX, &vec![Server::Nginx; n], &[("www", DOMAIN)]);
    f.env.sandbox.set_dcv_ports(f.hosts[0].web.http_port(), 0);
    f.agent(0, &["--json", "renew", "--wait", "60"])
        .expect_code(0);
    f.agent(1, &["--json", "renew"]).expect_code(0);
    assert_eq!(f.env.billed(), 1, "{}", f.logs());
    f
}

/// web1 reissues `www` and web2 installs it; the serial before and after.
fn reissue(f: &Fleet) -> (String, String) {
    let before = f.installed(0).expect("web1 serves www");
    f.agent(0, &["--json", "reissue", "www", "--wait", "60"])
        .expect_code(0);
    f.agent(1, &["--json", "renew"]).expect_code(0);
    let after = f.installed(0).expect("web1 serves www");
    assert_ne!(before, after, "a new serial");
    assert_eq!(f.installed(1).as_deref(), Some(after.as_str()));
    (before, after)
}

/// Host `i`'s versions file, read.
fn versions(f: &Fleet, i: usize) -> serde_json::Value {
    let text = fs::read(f.hosts[i].state.join("fleet-versions.json")).expect("a versions file");
    serde_json::from_slice(&text).expect("JSON")
}

#[test]
fn a_new_host_joining_while_old_values_and_a_manifest_entry_are_replayed_takes_none() {
    if !ready() {
        return;
    }
    let f = issued(3);
    let mut etcd = f.etcd();
    let old_current = etcd
        .get("certs/www/current")
        .expect("a current certificate");
    let old_state = etcd.get("certs/www/state").expect("a shared record");
    let old_entry = etcd.get("manifest/web1").expect("web1's manifest entry");
    let (old, new) = reissue(&f);
    let state = etcd.get("certs/www/state").expect("a shared record");
    // The writer puts the certificate and the shared record before the reissue back, and
    // web1's manifest entry of then; another host's lead (on a lease of its own) keeps web3 a
    // follower.
    etcd.put("certs/www/current", old_current);
    etcd.put("certs/www/state", old_state);
    etcd.put("manifest/web1", old_entry);
    etcd.put_on_lease("leader", "elsewhere", 600);

    let out = f.agent(2, &["--json", "renew"]);
    let o = out.outcome("www");
    assert_eq!(o["outcome"], "failed", "{}", out.describe());
    let error = o["error"].as_str().unwrap_or_default();
    for key in ["current", "state"] {
        assert!(
            error.contains(&format!("{PREFIX}certs/www/{key} holds version")),
            "{key}: {error}"
        );
    }
    assert!(
        error.contains("replay") && error.contains("web2"),
        "{error}"
    );
    assert_eq!(f.installed(2), None, "nothing installed on web3");
    assert_ne!(f.served(2).as_deref(), Some(old.as_str()));

    // The fleet's own values back: web3 installs the next certificate.
    let mut etcd = f.etcd();
    etcd.put("certs/www/state", state);
    etcd.delete("leader");
    f.agent(0, &["--json", "reissue", "www", "--wait", "60"])
        .expect_code(0);
    let newest = f.installed(0).expect("web1 serves www");
    assert_ne!(newest, new);
    etcd.put_on_lease("leader", "elsewhere", 600);
    let out = f.agent(2, &["--json", "renew"]);
    out.expect_code(0);
    assert_eq!(
        f.installed(2).as_deref(),
        Some(newest.as_str()),
        "{}",
        out.describe()
    );
}

#[test]
fn a_deleted_versions_file_is_rebuilt_from_the_manifest_not_reset() {
    if !ready() {
        return;
    }
    let f = issued(2);
    let mut etcd = f.etcd();
    let old_current = etcd
        .get("certs/www/current")
        .expect("a current certificate");
    let (_, new) = reissue(&f);
    let before = versions(&f, 1);
    let accepted = before["www"]["current"]["version"]
        .as_u64()
        .expect("a version");
    assert!(accepted >= 2, "{before}");

    fs::remove_file(f.hosts[1].state.join("fleet-versions.json")).expect("removed");
    etcd.put("certs/www/current", old_current);
    etcd.put_on_lease("leader", "elsewhere", 600);
    let out = f.agent(1, &["--json", "renew"]);
    let o = out.outcome("www");
    assert_eq!(o["outcome"], "failed", "{}", out.describe());
    assert!(
        o["error"].as_str().unwrap_or_default().contains("replay"),
        "{}",
        out.describe()
    );
    assert_eq!(f.installed(1).as_deref(), Some(new.as_str()), "kept");
    // Rebuilt at the fleet's versions (its own entry and web1's), never at the replayed one.
    let after = versions(&f, 1);
    assert_eq!(
        after["www"]["floor"]["current"].as_u64(),
        Some(accepted),
        "{after}"
    );
    let taken = after["www"]["current"]["version"].as_u64().unwrap_or(0);
    assert!(taken == 0 || taken >= accepted, "{after}");
}

#[test]
fn a_deleted_shared_record_never_leads_a_host_without_a_record_of_the_order_to_order_again() {
    if !ready() {
        return;
    }
    let f = issued(4);
    let mut etcd = f.etcd();
    let serial = f.installed(0).expect("web1 serves www");
    etcd.delete("certs/www/state");

    // web3 has no record of its own; it installs the fleet's certificate and leads (a
    // short wait: an order placed would wait for its validation).
    let out = f.agent(2, &["--json", "renew", "--wait", "1"]);
    assert_eq!(
        f.env.billed(),
        1,
        "a second billed order\n{}",
        out.describe()
    );
    assert_eq!(f.env.order_posts(), 1, "{}", out.describe());
    let o = out.outcome("www");
    assert_eq!(o["outcome"], "failed", "{}", out.describe());
    let error = o["error"].as_str().unwrap_or_default();
    assert!(
        error.contains(&format!("{PREFIX}certs/www/state is missing")) && error.contains("none"),
        "{error}"
    );
    assert_eq!(f.installed(2).as_deref(), Some(serial.as_str()));

    // web1 knows the order: its lead shares its record again, and web3's next lead finds it.
    f.agent(0, &["--json", "renew"]).expect_code(0);
    assert!(etcd.get("certs/www/state").is_some(), "shared again");
    let out = f.agent(2, &["--json", "renew"]);
    out.expect_code(0);
    assert_eq!(f.env.billed(), 1, "{}", out.describe());

    // Every value of www deleted (its spec, shared record and certificate): the manifest's
    // entries still show it ordered, and another new host orders nothing either.
    for key in ["spec", "state", "current"] {
        etcd.delete(&format!("certs/www/{key}"));
    }
    let out = f.agent(3, &["--json", "renew", "--wait", "1"]);
    assert_eq!(
        f.env.billed(),
        1,
        "a second billed order\n{}",
        out.describe()
    );
    let error = out.outcome("www")["error"]
        .as_str()
        .unwrap_or_default()
        .to_owned();
    assert!(
        error.contains(&format!("{PREFIX}certs/www/state is missing")),
        "{}",
        out.describe()
    );
    // web1 hands its record and its certificate to the fleet again; web4 installs it.
    f.agent(0, &["--json", "renew"]).expect_code(0);
    let out = f.agent(3, &["--json", "renew"]);
    out.expect_code(0);
    assert_eq!(f.installed(3).as_deref(), Some(serial.as_str()));
    assert_eq!(f.env.billed(), 1, "{}", out.describe());
}

#[test]
fn an_old_tombstone_replayed_after_the_certificate_came_back_retires_nothing_on_a_new_host() {
    if !ready() {
        return;
    }
    let f = issued(3);
    f.agent(0, &["--json", "retire", "www", "--yes"])
        .expect_code(0);
    f.agent(1, &["--json", "renew"]);
    let mut etcd = f.etcd();
    let tombstone = etcd.get("certs/www/retired").expect("a tombstone");
    // Brought back as docs/fleet.md says, and ordered afresh.
    etcd.delete("certs/www/retired");
    for h in &f.hosts[..2] {
        fs::rename(
            h.state.join("retired/www.json"),
            h.state.join("retired/www.json.back"),
        )
        .expect("archived");
    }
    f.agent(0, &["--json", "renew", "--wait", "60"])
        .expect_code(0);
    f.agent(1, &["--json", "renew"]).expect_code(0);
    assert_eq!(f.env.billed(), 2, "{}", f.logs());

    // The writer puts the old tombstone back as web3 joins.
    etcd.put("certs/www/retired", tombstone);
    etcd.put_on_lease("leader", "elsewhere", 600);
    let out = f.agent(2, &["--json", "renew"]);
    let o = out.outcome("www");
    assert_eq!(o["outcome"], "failed", "{}", out.describe());
    let error = o["error"].as_str().unwrap_or_default();
    assert!(
        error.contains(&format!("{PREFIX}certs/www/retired holds version"))
            && error.contains("replay"),
        "{error}"
    );
    assert!(
        !f.hosts[2].state.join("retired/www.json").exists(),
        "web3 retired www\n{}",
        out.describe()
    );
}
