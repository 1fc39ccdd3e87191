//! `fleet forget-host`: two hosts with real nginx and a real three-member etcd serve one
//! certificate; web2 stops. While it is live (synchronised less than ten minutes ago) it is
//! not forgotten; neither is the host that runs the command, a name that is not a host name,
//! nor a host the fleet never had. Ten minutes on (the clock moved by the test), web2's
//! results, proofs, `seen` record and manifest entry go in one transaction; a rollout
//! decision stored under it stays; `fleet status` no longer lists it; web1's audit log says
//! so. web2 run again announces itself and reports again: nothing was lost. A `seen` record
//! that does not open (garbage, or a forgery without the fleet key) announces nothing: the
//! host under it is forgotten.

use crate::fleet_e2e::Fleet;
use crate::support;
use crate::support::env::AgentOutput;

use std::fs;

use serde_json::Value;

const PREFIX: &str = "/forget/";

/// The keys (relative to the prefix) under `hosts/HOST/` and at `manifest/HOST`.
fn keys_of(f: &Fleet, host: &str) -> Vec<String> {
    let full = |rel: &str| format!("{PREFIX}{rel}");
    let under = full(&format!("hosts/{host}/"));
    let manifest = full(&format!("manifest/{host}"));
    f.etcd()
        .revisions()
        .into_keys()
        .filter(|k| k.starts_with(&under) || *k == manifest)
        .map(|k| k[PREFIX.len()..].to_owned())
        .collect()
}

/// `fleet forget-host HOST` on web1, with its clock `offset` seconds ahead.
fn forget(f: &Fleet, host: &str, offset: u64) -> AgentOutput {
    f.env
        .agent_at(&f.hosts[0].config, ["fleet", "forget-host", host])
        .env("CERT_AGENT_TEST_CLOCK_OFFSET_SECS", offset.to_string())
        .run()
}

#[test]
fn a_host_that_left_is_forgotten_once_it_is_not_live_and_comes_back_when_it_runs() {
    if !crate::fleet_e2e::ready() {
        return;
    }
    let (f, serial) = Fleet::pair_serving(PREFIX);
    let before = keys_of(&f, "web2");
    for key in ["hosts/web2/seen", "hosts/web2/certs/www", "manifest/web2"] {
        assert!(
            before.iter().any(|k| k == key),
            "web2 has no {key}: {before:?}"
        );
    }

    // Live: refused, nothing deleted.
    let live = forget(&f, "web2", 0);
    live.expect_code(1);
    assert!(
        live.text().contains("web2 is live") && live.text().contains("minutes ago"),
        "{}",
        live.describe()
    );
    assert_eq!(keys_of(&f, "web2"), before);
    // Itself, a name that is no host name, a host the fleet never had: refused, named.
    let own = forget(&f, "web1", 660);
    own.expect_code(1);
    assert!(
        own.text().contains("web1 is this host"),
        "{}",
        own.describe()
    );
    let bad = forget(&f, "../web2", 660);
    bad.expect_code(1);
    assert!(
        bad.text().contains("\"../web2\" is not a host name"),
        "{}",
        bad.describe()
    );
    let none = forget(&f, "web9", 660);
    none.expect_code(1);
    assert!(
        none.text().contains("no host web9 in the fleet"),
        "{}",
        none.describe()
    );
    assert_eq!(keys_of(&f, "web2"), before);

    // A rollout decision made on web2 binds the fleet: it stays.
    let mut etcd = f.etcd();
    let decision = b"a decision made on web2".to_vec();
    etcd.put("hosts/web2/rollout/www", decision.clone());

    // Eleven minutes on: forgotten.
    let gone = forget(&f, "web2", 660);
    gone.expect_code(0);
    let text = gone.text();
    assert!(
        text.contains("forgot web2:") && text.contains("1 seen") && text.contains("1 manifest"),
        "{}",
        gone.describe()
    );
    assert!(text.contains("kept: 1 rollout"), "{}", gone.describe());
    assert_eq!(
        keys_of(&f, "web2"),
        vec!["hosts/web2/rollout/www".to_owned()],
        "{}",
        gone.describe()
    );
    assert_eq!(etcd.get("hosts/web2/rollout/www"), Some(decision));
    // web1's own values are untouched.
    assert!(
        keys_of(&f, "web1")
            .iter()
            .any(|k| k == "hosts/web1/certs/www"),
        "{}",
        gone.describe()
    );
    let audit = fs::read_to_string(f.hosts[0].state.join("audit.log")).unwrap_or_default();
    assert!(
        audit.contains("\"event\":\"fleet-host-forgotten\"") && audit.contains("\"web2\""),
        "{audit}"
    );
    let status = f.agent(0, &["--json", "fleet", "status"]);
    let v: Value = serde_json::from_str(&status.stdout).expect("fleet status --json");
    assert!(
        !v.to_string().contains("\"web2\""),
        "web2 still listed: {v}"
    );
    // Forgotten again: nothing is left to delete but what stays.
    let again = forget(&f, "web2", 660);
    again.expect_code(0);
    assert!(
        again.text().contains("nothing of web2 left to delete")
            && again.text().contains("kept: 1 rollout"),
        "{}",
        again.describe()
    );

    // web2 runs again: it announces itself and reports; nothing was lost.
    f.agent(1, &["--json", "renew"]).expect_code(0);
    let back = keys_of(&f, "web2");
    for key in ["hosts/web2/seen", "hosts/web2/certs/www", "manifest/web2"] {
        assert!(back.iter().any(|k| k == key), "web2 has no {key}: {back:?}");
    }
    // Its result is written again though it installed nothing: it shows as serving.
    let status = f.agent(0, &["--json", "fleet", "status"]);
    status.expect_code(0);
    let v = status.json();
    let web2 = v["certificates"][0]["hosts"]
        .as_array()
        .and_then(|hosts| hosts.iter().find(|h| h["host"] == "web2"))
        .cloned()
        .unwrap_or_default();
    assert_eq!(
        web2["serial"].as_str().map(support::env::norm_serial),
        Some(support::env::norm_serial(&serial)),
        "{v}"
    );

    // A seen record that does not open announces nothing: its host is forgotten at once.
    etcd.put("hosts/web2/seen", b"garbage, not sealed".to_vec());
    let forged = forget(&f, "web2", 0);
    forged.expect_code(0);
    assert!(
        forged.text().contains("last synchronised -"),
        "{}",
        forged.describe()
    );
    assert_eq!(
        keys_of(&f, "web2"),
        vec!["hosts/web2/rollout/www".to_owned()]
    );
}
