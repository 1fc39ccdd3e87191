//! Renewal-engine scenarios against the sandbox, driving the real `cert-agent` binary: free
//! reissues when the installed certificate falls due (families S and C, a replacement ID and a
//! crash between reissue and recording), the reissue blackout at the end of the subscription
//! (renewal order prepared, or exactly one new billed order), no call when nothing is due, the
//! run lock, the failure backoff, `status --json` and `renew --dry-run`.

mod support;

use std::fs;
use std::os::unix::fs::PermissionsExt;

use partner_sandbox::{Fault, FaultKind};
use support::env::{Leaf, TestEnv, key_spki, served_leaf};
use support::scenario::{
    self, PROLONG, REISSUE, certificate_id, installed_leaf, matching, serve_files_once, show,
    state_changing,
};

/// A world with one standalone, files-only certificate `www` for `domains`, with `extra`
/// TOML lines in its section, issued and installed by a first `renew` (one billed order).
fn issued(domains: &[&str], product_id: u64, extra: &str) -> TestEnv {
    let mut env = TestEnv::new();
    let mut spec = env.standalone_spec("www", domains);
    spec.product_id = product_id;
    spec.extra = extra.to_string();
    env.certs.push(spec);
    let out = env.renew();
    out.expect_code(0);
    out.installed_serial("www");
    assert_eq!(env.billed(), 1, "the first order is billed once");
    env
}

/// Ages the issued certificate of `www` to `days_left` at the sandbox and installs the aged
/// leaf (same key), so that the installed certificate is the one falling due.
fn age_installed(env: &TestEnv, days_left: i64) -> String {
    let id = certificate_id(env, "www");
    env.sandbox.age_certificate(id, days_left).unwrap();
    let out = env.agent(["--json", "install", "www"]).run();
    out.expect_code(0);
    out.installed_serial("www")
}

/// Guards the reissue when due: the installed certificate has 20 days left, so `renew`
/// reissues (free) with a new key; the new serial is installed, the key file is new and
/// belongs to the leaf, the files serve a chain to the sandbox root, and no order is billed.
#[test]
fn reissue_when_due_installs_a_new_serial_with_a_new_key() {
    let env = issued(
        &["www.reissue-due.test"],
        1101,
        "days = 730\nfamily = \"S\"\n",
    );
    let files = env.spec("www").files.clone();
    let aged = age_installed(&env, 20);
    let key_before = fs::read(&files.key).unwrap();
    let before = env.calls().len();

    let out = env.renew();
    out.expect_code(0);
    let serial = out.installed_serial("www");
    assert_ne!(serial, aged, "a new serial\n{}", out.describe());

    let calls = env.calls()[before..].to_vec();
    let reissues = matching(&calls, "POST", REISSUE);
    assert_eq!(reissues.len(), 1, "one reissue call:\n{}", show(&calls));
    eprintln!(
        "calls for one reissue: {} ({})",
        calls.len(),
        calls
            .iter()
            .map(|c| format!("{} {}", c.method, c.path))
            .collect::<Vec<_>>()
            .join(", ")
    );
    assert_eq!(env.billed(), 1, "a reissue is not billed");
    assert_eq!(env.order_posts(), 1, "no order call");

    // Installed: the new leaf, a new key that belongs to it.
    let leaf = installed_leaf(&env, "www");
    assert_eq!(leaf.serial, serial);
    let key_after = fs::read(&files.key).unwrap();
    assert_ne!(key_after, key_before, "the key file changed");
    assert_eq!(
        leaf.spki,
        key_spki(&files.key),
        "the leaf is for the new key"
    );
    let mode = fs::metadata(&files.key).unwrap().permissions().mode() & 0o777;
    assert_eq!(mode & 0o077, 0, "key mode {mode:o}");
    let (_, not_after) = scenario::validity(&leaf.der);
    assert!(
        not_after - env.sandbox.now() > time::Duration::days(100),
        "the reissued certificate lives long again: {not_after}"
    );

    // Served from the files: a TLS server reading them presents the new leaf, trusted
    // through the sandbox root.
    let addr = serve_files_once(files.fullchain.as_ref().unwrap(), &files.key);
    let served = served_leaf(&env.sandbox.root_path(), &addr, "www.reissue-due.test")
        .unwrap_or_else(|e| panic!("served: {e}"));
    assert_eq!(served.serial, serial);

    // Done: the next run has nothing to do and calls nothing.
    let n = env.calls().len();
    env.renew().expect_code(0);
    assert_eq!(env.calls().len(), n, "{}", show(&env.calls()[n..]));
}
