//! The CRL check of a fleet host's runs that do not lead: the first reads the installed
//! files once and keeps what the check needs (`due-follower.json`); the next ones open no
//! certificate file, check the kept serial against the CRL read once, and still see a
//! revocation — the run then takes the lead and replaces the certificate for the fleet.

use crate::fleet_e2e::{Fleet, ready, revoke_www};

use std::fs;
use std::time::Duration;

/// The debug line of a run's CRL check: (installed files read, references taken from the
/// file).
fn crl_reads(stderr: &str) -> Option<(usize, usize)> {
    let line = stderr
        .lines()
        .find(|l| l.contains("revocation: ") && l.contains("taken from due-follower.json"))?;
    let rest = line.split("revocation: ").nth(1)?;
    let mut words = rest.split_whitespace();
    let read = words.next()?.parse().ok()?;
    let taken = words.nth(3)?.parse().ok()?;
    Some((read, taken))
}

#[test]
fn a_run_that_does_not_lead_checks_the_crl_without_opening_the_certificate() {
    if !ready() {
        return;
    }
    let f = Fleet::pair("/crl-follower/");
    f.env.sandbox.set_dcv_ports(f.hosts[0].web.http_port(), 0);
    f.agent(0, &["--json", "renew", "--wait", "60"])
        .expect_code(0);
    let first = f.installed(0).expect("web1 installed");

    // web2's first run installs the fleet's certificate without leading, and reads it once.
    let join = f.agent(1, &["-v", "renew"]);
    join.expect_code(0);
    assert_eq!(
        f.installed(1).as_deref(),
        Some(first.as_str()),
        "{}",
        join.describe()
    );
    assert_eq!(crl_reads(&join.stderr), Some((1, 0)), "{}", join.stderr);
    let kept = f.hosts[1].state.join("due-follower.json");
    let text = fs::read_to_string(&kept).expect("the kept references");
    assert!(text.contains("\"www\""), "{text}");

    // The next one takes it from the file.
    let again = f.agent(1, &["-v", "renew"]);
    again.expect_code(0);
    assert_eq!(crl_reads(&again.stderr), Some((0, 1)), "{}", again.stderr);
    assert!(
        again.stderr.contains("does not take the lead"),
        "{}",
        again.stderr
    );

    // A damaged file: the installed files are read again (and the file written anew).
    fs::write(&kept, b"{\"format\": 2, \"garbage\"").unwrap();
    let damaged = f.agent(1, &["-v", "renew"]);
    damaged.expect_code(0);
    assert_eq!(
        crl_reads(&damaged.stderr),
        Some((1, 0)),
        "{}",
        damaged.stderr
    );

    // The CA revokes it: web2's next run sees it through the kept serial, takes the lead and
    // replaces the certificate for the fleet (one new order).
    revoke_www(&f);
    // A CRL kept from before stands until its nextUpdate: dropping it stands for that.
    let _ = fs::remove_dir_all(f.hosts[1].state.join("crl"));
    f.env.sandbox.set_dcv_ports(f.hosts[1].web.http_port(), 0);
    let replaced = f.agent(1, &["-v", "--json", "renew", "--wait", "60"]);
    replaced.expect_code(0);
    assert_eq!(
        crl_reads(&replaced.stderr).map(|r| r.1),
        Some(1),
        "{}",
        replaced.stderr
    );
    assert_eq!(
        replaced.outcome("www")["outcome"],
        "installed",
        "{}",
        replaced.describe()
    );
    let second = f.installed(1).expect("web2 installed");
    assert_ne!(second, first);
    assert_eq!(
        f.env.billed(),
        2,
        "one new order for the fleet\n{}",
        f.logs()
    );
    f.agent(0, &["renew"]).expect_code(0);
    f.wait_all_serve(&second, Duration::from_secs(60));
}
