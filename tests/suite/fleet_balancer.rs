//! The sandbox validates a fleet through every host (the strict load balancer): while one host
//! lacks the validation file the certificate is not issued; once that host's daemon serves it,
//! the same order validates and installs, without a second order.

use crate::support;

use std::fs;
use std::process::Child;

use support::env::norm_serial;

use crate::fleet_e2e::{Fleet, ready};

/// Kills the daemon it holds when dropped.
struct Daemon(Child);

impl Drop for Daemon {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

fn installed(f: &Fleet, i: usize) -> Option<String> {
    let text = fs::read_to_string(f.hosts[i].state.join("certs/www.json")).ok()?;
    let v: serde_json::Value = serde_json::from_str(&text).ok()?;
    v["installed"]["serial"].as_str().map(norm_serial)
}

#[test]
fn a_fleet_validates_only_once_the_file_is_on_every_host() {
    if !ready() {
        return;
    }
    let f = Fleet::pair("/balancer/");

    // web2 runs no daemon: it never gets the file, and every check asks it too.
    let first = f.agent(0, &["--json", "renew", "--wait", "8"]);
    assert_eq!(f.env.billed(), 1, "{}", first.describe());
    assert_eq!(
        installed(&f, 0),
        None,
        "issued without web2: {}",
        first.describe()
    );

    // web2's daemon serves the published file: the same order validates.
    let _daemon = Daemon(
        f.env
            .agent_at(&f.hosts[1].config, ["run", "--interval", "3600"])
            .spawn(),
    );
    let second = f.agent(0, &["--json", "renew", "--wait", "60"]);
    second.expect_code(0);
    assert!(installed(&f, 0).is_some(), "{}", second.describe());
    assert_eq!(f.env.billed(), 1, "no second order: {}", f.logs());
}
