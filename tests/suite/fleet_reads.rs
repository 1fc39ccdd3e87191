//! A host's read of the fleet: the values it accepted (its versions file keeps the revision
//! it read or wrote each at) are not read again while their key keeps that revision; what
//! changed is read, and a forged or replayed value put under an existing key (a new revision)
//! is refused as before. Without the versions file, or with one that does not read, every
//! value is read. Two hosts with nginx, `www` and `shop` (the trial of `fleet_trust`).

use crate::fleet_e2e::ready;
use crate::fleet_trust::{GARBAGE, Trial};
use crate::support;

use std::collections::BTreeSet;
use std::fs;

use support::env::{AgentOutput, norm_serial};

/// What web2's read of the fleet in `out` (a run with `-v`) says: the keys under `certs/`,
/// the values it read (named when ten or fewer: by the listing's read, and by the reads of
/// the certificates a slice at a time), and the values it left unread.
fn read_of(out: &AgentOutput) -> (usize, BTreeSet<String>, usize) {
    let text = out.text();
    let line = text
        .lines()
        .find(|l| l.contains("key(s) under certs/"))
        .unwrap_or_else(|| panic!("no read of the fleet was logged\n{}", out.describe()));
    let number = |before: &str| -> usize {
        let head = line.split(before).next().unwrap_or_default();
        let word = head.split_whitespace().last().unwrap_or_default();
        word.parse()
            .unwrap_or_else(|_| panic!("no count before {before:?}: {line}"))
    };
    let keys = number(" key(s) under certs/");
    let unread = number(" unchanged since");
    let named = |line: &str, after: &str| -> Vec<String> {
        line.split(after)
            .nth(1)
            .and_then(|rest| rest.split(')').next())
            .map(|list| list.split(", ").map(str::to_owned).collect())
            .unwrap_or_default()
    };
    let mut names: BTreeSet<String> = named(line, " value(s) read (").into_iter().collect();
    for sliced in text
        .lines()
        .filter(|l| l.contains("value(s) read in a slice"))
    {
        names.extend(
            named(sliced, " (")
                .into_iter()
                .filter(|k| k.starts_with("certs/")),
        );
    }
    (keys, names, unread)
}

/// How many values the listing's read in `out` left to be read a slice at a time.
fn left_to_slices(out: &AgentOutput) -> usize {
    let text = out.text();
    let line = text
        .lines()
        .find(|l| l.contains("left to read in slices"))
        .unwrap_or_else(|| panic!("no read of the fleet was logged\n{}", out.describe()));
    let head = line
        .split(" left to read in slices")
        .next()
        .unwrap_or_default();
    let word = head.split_whitespace().last().unwrap_or_default();
    word.parse()
        .unwrap_or_else(|_| panic!("no count of values left to slices: {line}"))
}

/// How many keys under `certs/` changed since the listing web2 kept, when the read of the
/// fleet in `out` (a run with `-v`) made its listing from it; `None` when it listed every key.
fn listed_since(out: &AgentOutput) -> Option<usize> {
    let text = out.text();
    let line = text
        .lines()
        .find(|l| l.contains("the keys under certs/ as listed at revision"))?;
    let head = line.split(" changed since").next().unwrap_or_default();
    let word = head.split_whitespace().last().unwrap_or_default();
    Some(
        word.parse()
            .unwrap_or_else(|_| panic!("no count of changed keys: {line}")),
    )
}

/// web2's `renew -v`, leading whatever the fleet has for a leader (debug builds): its reads
/// as a leader are watched too.
fn led(t: &Trial) -> AgentOutput {
    t.f.env
        .agent_at(&t.f.hosts[1].config, ["-v", "--json", "renew"])
        .env("CERT_AGENT_TEST_LEAD_NO_OP", "1")
        .run()
}

fn set(keys: &[&str]) -> BTreeSet<String> {
    keys.iter().map(|k| (*k).to_owned()).collect()
}

#[test]
fn a_host_reads_only_what_changed_and_still_refuses_forged_and_replayed_values() {
    if !ready() {
        return;
    }
    let mut t = Trial::start();
    let old_state = t.etcd.get("certs/www/state").unwrap();
    let old_current = t.etcd.get("certs/www/current").unwrap();
    t.move_www_on();
    let versions = t.f.hosts[1].state.join("fleet-versions.json");

    // web2 accepted every value at its revision: its next run reads none of them again
    // (three keys of each certificate: spec, state, current).
    let out = led(&t);
    out.expect_code(0);
    let (keys, read, unread) = read_of(&out);
    assert_eq!(keys, 6, "{}", out.describe());
    assert!(read.is_empty(), "read again: {read:?}\n{}", out.describe());
    assert_eq!(unread, 6, "{}", out.describe());
    // Nor lists them: the listing its last run kept stands, and etcd says nothing changed.
    assert_eq!(listed_since(&out), Some(0), "{}", out.describe());
    // Nor, once it leads, the shared records its lead imported before (its records are as
    // those imports left them).
    assert!(
        out.text()
            .contains("2 shared record(s) as this host imported them (not read)"),
        "{}",
        out.describe()
    );

    // One certificate changes: web2 reads that certificate's changed values only, and
    // installs it.
    let re = t.f.agent(0, &["--json", "reissue", "shop", "--wait", "60"]);
    re.expect_code(0);
    let shop = re.installed_serial("shop");
    let out = led(&t);
    out.expect_code(0);
    let (_, read, unread) = read_of(&out);
    assert_eq!(
        read,
        set(&["certs/shop/current", "certs/shop/state"]),
        "{}",
        out.describe()
    );
    assert_eq!(unread, 4, "{}", out.describe());
    assert_eq!(listed_since(&out), Some(2), "{}", out.describe());
    assert!(
        out.text()
            .contains("1 shared record(s) as this host imported them (not read)"),
        "{}",
        out.describe()
    );
    let installed = t.installed(1, "shop").unwrap();
    assert_eq!(norm_serial(installed["serial"].as_str().unwrap()), shop);

    // A key added under certs/ and deleted again between two runs (no certificate of
    // web2's): the count tells the deletion, and every key is listed; then the listing
    // stands again.
    t.etcd.put("certs/other/state", GARBAGE.to_vec());
    let out = led(&t);
    out.expect_code(0);
    assert_eq!(listed_since(&out), Some(1), "{}", out.describe());
    t.etcd.delete("certs/other/state");
    let out = led(&t);
    out.expect_code(0);
    assert_eq!(listed_since(&out), None, "{}", out.describe());
    assert!(
        out.text().contains("every key is listed"),
        "{}",
        out.describe()
    );
    assert_eq!(read_of(&out).0, 6, "{}", out.describe());
    let out = led(&t);
    out.expect_code(0);
    assert_eq!(listed_since(&out), Some(0), "{}", out.describe());

    // Under an existing key, at a new revision: a forgery and two replays of older sealed
    // values are read and refused exactly as without the revisions.
    let text = fs::read_to_string(&versions).unwrap();
    assert!(text.contains("\"revision\""), "no revision kept: {text}");
    // web2 follows while it meets them (as the leader it would write its own copy back:
    // fleet_repair).
    t.web2_follows = true;
    t.attack("forged current", "certs/www/current", GARBAGE.to_vec());
    let e = t.attack("replayed current", "certs/www/current", old_current);
    assert!(e.contains("replay"), "{e}");
    let e = t.attack("replayed state", "certs/www/state", old_state);
    assert!(e.contains("replay"), "{e}");

    // A versions file that does not read: every value read, and the run says what is
    // wrong with the file (nothing done with the fleet until it reads).
    let kept = fs::read(&versions).unwrap();
    fs::write(&versions, b"{\"www\": {\"state\": 7").unwrap();
    let out = led(&t);
    let (keys, read, unread) = read_of(&out);
    // Nothing taken for known: the certificates are left to their slices, which the run
    // does not reach.
    let sliced = left_to_slices(&out);
    assert_eq!(
        (read.len() + sliced, unread),
        (keys, 0),
        "{}",
        out.describe()
    );
    assert!(out.code != Some(0), "{}", out.describe());
    assert!(
        out.text().contains("fleet-versions.json") && out.text().contains("damaged"),
        "{}",
        out.describe()
    );
    // Put back, then gone: every value read, accepted again, and nothing read after that.
    fs::write(&versions, &kept).unwrap();
    fs::remove_file(&versions).unwrap();
    let out = led(&t);
    out.expect_code(0);
    let (keys, read, unread) = read_of(&out);
    assert_eq!((read.len(), unread), (keys, 0), "{}", out.describe());
    let out = led(&t);
    out.expect_code(0);
    let (keys, read, unread) = read_of(&out);
    assert!(read.is_empty(), "read again: {read:?}\n{}", out.describe());
    assert_eq!(unread, keys, "{}", out.describe());
}
