//! Renewal-engine scenarios against the sandbox, driving the real `cert-agent` binary: free
//! reissues when the installed certificate falls due (families S and C, a replacement ID and a
//! crash between reissue and recording), the reissue blackout at the end of the subscription
//! (renewal order prepared, or exactly one new billed order), no call when nothing is due, the
//! run lock, the failure backoff, `status --json` and `renew --dry-run`.

use crate::support;

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
    // details (subscription end), reissue, details (replacement ID, state and DCV content in
    // one), DCV status (family S hash cross-check), status, download.
    assert!(
        calls.len() <= 6,
        "at most 6 calls for a family S reissue:\n{}",
        show(&calls)
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

/// Guards family C's key rule (document, Reissue rule 4): a due family C certificate
/// (`reuse_key = false`) is reissued with a new key, installed, not billed.
#[test]
fn family_c_reissue_uses_a_new_key() {
    let env = issued(
        &["www.family-c.test"],
        3101,
        "days = 730\nfamily = \"C\"\nreuse_key = false\n",
    );
    let files = env.spec("www").files.clone();
    let aged = age_installed(&env, 20);
    let key_before = fs::read(&files.key).unwrap();

    let out = env.renew();
    out.expect_code(0);
    let serial = out.installed_serial("www");
    assert_ne!(serial, aged);
    assert_ne!(fs::read(&files.key).unwrap(), key_before, "a new key");
    assert_eq!(installed_leaf(&env, "www").spki, key_spki(&files.key));
    assert_eq!(matching(&env.calls(), "POST", REISSUE).len(), 1);
    assert_eq!(env.billed(), 1);
}

/// Guards the refusal of a reused family C key before the API is called (document, Reissue
/// rule 4; issue 5: "a reused key is refused before calling the API"): `reissue www
/// --reuse-key` on a family C certificate fails with a message naming the rule, sends no
/// reissue, and leaves the installed key and certificate alone.
#[test]
fn family_c_reissue_with_reuse_key_is_refused_before_any_call() {
    let env = issued(
        &["www.family-c-reuse.test"],
        3101,
        "days = 730\nfamily = \"C\"\n",
    );
    let files = env.spec("www").files.clone();
    let serial = installed_leaf(&env, "www").serial;
    let key_now = fs::read(&files.key).unwrap();
    let before = env.calls().len();
    let refused = env
        .agent(["reissue", "www", "--reuse-key", "--wait", "10"])
        .run();
    let calls = env.calls()[before..].to_vec();
    assert!(
        matching(&calls, "POST", REISSUE).is_empty(),
        "no reissue call for a reused family C key:\n{}\n{}",
        show(&calls),
        refused.describe()
    );
    refused.expect_failure();
    assert!(
        refused.text().contains("family C"),
        "the refusal names the family rule\n{}",
        refused.describe()
    );
    assert_eq!(fs::read(&files.key).unwrap(), key_now, "key untouched");
    assert_eq!(installed_leaf(&env, "www").serial, serial);
}

/// Guards Reissue rule 7 (product 1202, issuer s-two: the reissued certificate gets a new
/// ID): the record follows `replacement_id`, and the new certificate is installed. Then a
/// crash between the reissue and its recording (the connection drops after the sandbox applied
/// the reissue): the run fails, the next run recovers the replacement from the details
/// without a second reissue call, and installs.
#[test]
fn family_s_replacement_id_is_followed_and_a_lost_reissue_answer_recovered() {
    let domains = ["a.replacement.test", "b.replacement.test"];
    let env = issued(&domains, 1202, "days = 1095\nfamily = \"S\"\n");
    let original = certificate_id(&env, "www");
    let aged = age_installed(&env, 20);

    let out = env.renew();
    out.expect_code(0);
    let serial = out.installed_serial("www");
    assert_ne!(serial, aged);
    let replacement = certificate_id(&env, "www");
    assert_ne!(
        replacement, original,
        "the record follows the replacement ID"
    );
    assert_eq!(out.outcome("www")["certificate_id"], replacement);
    let leaf = installed_leaf(&env, "www");
    assert_eq!(leaf.serial, serial);
    for d in domains {
        assert!(
            leaf.dns_names.iter().any(|n| n == d),
            "{:?}",
            leaf.dns_names
        );
    }
    assert_eq!(
        env.sandbox.inspect(original).unwrap()["replacement_id"],
        replacement,
        "the sandbox names the same replacement"
    );
    assert!(env.journal().contains("replaced"), "{}", env.journal());

    // The crash window: the reissue of the replacement is applied, its answer lost.
    let aged = age_installed(&env, 20);
    env.sandbox.inject(
        Fault::new(FaultKind::DropAfterApply)
            .method("POST")
            .path(REISSUE),
    );
    let before = env.calls().len();
    let crashed = env.renew();
    crashed.expect_failure();
    let rec = env.record("www").unwrap();
    assert!(
        !rec["reissue"].is_null(),
        "the reissue stays recorded: {rec:#}"
    );
    assert_eq!(matching(&env.calls()[before..], "POST", REISSUE).len(), 1);

    // The next run resolves the unanswered reissue from the details at once (no backoff:
    // reading the details is all it takes) and does not send it again.
    let recovered = scenario::renew_synced(&env);
    let calls = env.calls()[before..].to_vec();
    assert_eq!(
        matching(&calls, "POST", REISSUE).len(),
        1,
        "no second reissue call after the first went through:\n{}",
        show(&calls)
    );
    recovered.expect_code(0);
    let serial2 = recovered.installed_serial("www");
    assert_ne!(serial2, aged);
    assert_ne!(serial2, serial);
    let third = certificate_id(&env, "www");
    assert_ne!(third, replacement, "the second replacement is recorded");
    assert_eq!(
        env.sandbox.inspect(replacement).unwrap()["replacement_id"],
        third
    );
    assert_eq!(installed_leaf(&env, "www").serial, serial2);
    assert_eq!(env.billed(), 1);
}

/// Phase two of the blackout scenarios, once a renewal order is prepared: with
/// `allow_orders = true` the next run places exactly one new billed order (linked to the old
/// one), installs it, and later runs order nothing more.
fn orders_once_when_allowed(env: &mut TestEnv, old_id: u64, sync: bool) {
    env.allow_orders = true;
    let run = |env: &TestEnv| {
        if sync {
            scenario::renew_synced(env)
        } else {
            env.renew()
        }
    };
    let before = env.calls().len();
    let out = run(env);
    out.expect_code(0);
    out.installed_serial("www");
    assert_eq!(
        env.billed(),
        2,
        "exactly one new billed order\n{}",
        out.describe()
    );
    assert!(matching(&env.calls()[before..], "POST", REISSUE).is_empty());
    let rec = env.record("www").unwrap();
    assert_eq!(
        rec["renews"], old_id,
        "the new order is linked to the old: {rec:#}"
    );
    assert_ne!(certificate_id(env, "www"), old_id);
    for _ in 0..2 {
        let again = run(env);
        again.expect_code(0);
        assert_eq!(env.billed(), 2, "no further order\n{}", again.describe());
    }
    assert_eq!(env.order_posts(), 2);
}

/// Checks the prepared renewal order of `id`: one prolong call since `before`, no reissue
/// call, the token stored 0600 and never printed by any run.
fn renewal_prepared(env: &TestEnv, id: u64, before: usize, outputs: &[&support::env::AgentOutput]) {
    let calls = env.calls()[before..].to_vec();
    assert!(
        matching(&calls, "POST", REISSUE).is_empty(),
        "no reissue in the blackout:\n{}",
        show(&calls)
    );
    assert_eq!(
        matching(&calls, "POST", PROLONG).len(),
        1,
        "the renewal order is prepared once:\n{}",
        show(&calls)
    );
    assert_eq!(env.billed(), 1, "preparing a renewal order bills nothing");
    let path = env.state_dir().join(format!("prolongation/{id}.token"));
    let token = fs::read_to_string(&path)
        .unwrap_or_else(|e| panic!("{}: {e}", path.display()))
        .trim()
        .to_string();
    assert!(!token.is_empty());
    let mode = fs::metadata(&path).unwrap().permissions().mode() & 0o777;
    assert_eq!(mode, 0o600, "token file mode {mode:o}");
    for o in outputs {
        assert!(
            !o.text().contains(&token),
            "the token is printed\n{}",
            o.describe()
        );
    }
    assert!(
        !env.journal().contains(&token),
        "the token is in the journal"
    );
    assert!(
        outputs
            .iter()
            .any(|o| o.text().contains(&path.display().to_string())),
        "a run says where the token is"
    );
}

/// Guards the reissue blackout (document, Reissue rule 3 and Limits) when the subscription
/// turns out to end sooner than the order's `days` suggest: the installed certificate is due
/// and the subscription ends in 20 days, so no reissue may be sent; a renewal order is
/// prepared instead (prolong, token 0600, never printed), and with `allow_orders = true`
/// exactly one new billed order replaces the subscription.
#[test]
fn blackout_prepares_a_renewal_order_instead_of_a_reissue() {
    let mut env = issued(&["www.blackout.test"], 1101, "days = 730\nfamily = \"S\"\n");
    env.allow_orders = false;
    let id = certificate_id(&env, "www");
    age_installed(&env, 20);
    env.sandbox.shorten_subscription(id, 20).unwrap();
    let before = env.calls().len();

    let out = env.renew();
    out.expect_code(0);
    let again = env.renew();
    again.expect_code(0);
    renewal_prepared(&env, id, before, &[&out, &again]);
    orders_once_when_allowed(&mut env, id, false);
}

/// The blackout reached the natural way, on both clocks: a due certificate in a subscription
/// ending in 40 days is reissued (the last reissue, its certificate ends with the
/// subscription); 12 days later the blackout has begun, so the run prepares a renewal order
/// (no reissue call, token 0600, never printed); with `allow_orders = true` exactly one new
/// billed order follows, and later runs order nothing more.
#[test]
fn last_reissue_then_blackout_prepares_renewal_then_one_order() {
    let mut env = issued(
        &["www.blackout-natural.test"],
        1101,
        "days = 730\nfamily = \"S\"\n",
    );
    env.allow_orders = false;
    let id = certificate_id(&env, "www");
    age_installed(&env, 20);
    env.sandbox.shorten_subscription(id, 40).unwrap();
    let sub_end = env.sandbox.now() + time::Duration::days(40);

    let out = scenario::renew_synced(&env);
    out.expect_code(0);
    out.installed_serial("www");
    assert_eq!(matching(&env.calls(), "POST", REISSUE).len(), 1);
    let (_, not_after) = scenario::validity(&installed_leaf(&env, "www").der);
    assert!(
        (not_after - sub_end).abs() < time::Duration::days(1),
        "the last certificate ends with the subscription: {not_after} vs {sub_end}"
    );
    let status = scenario::run_synced(&env, &["--json", "status"]).json();
    let ends = status[0]["subscription_ends"]
        .as_str()
        .unwrap_or_default()
        .to_string();
    assert!(
        ends.starts_with(&sub_end.date().to_string()[..7]),
        "the subscription end is known: {status:#}"
    );

    env.sandbox
        .advance(std::time::Duration::from_secs(12 * 86_400));
    let before = env.calls().len();
    let out = scenario::renew_synced(&env);
    out.expect_code(0);
    let again = scenario::renew_synced(&env);
    again.expect_code(0);
    renewal_prepared(&env, id, before, &[&out, &again]);
    orders_once_when_allowed(&mut env, id, true);
}

/// Guards the run lock: while one run holds it (its order answer is slow), a second run with
/// `--lock-wait 0` exits 75 at once naming the PID that holds the lock, a third waits for it
/// (saying who holds it) and then finds nothing to do, and only one order is billed.
#[test]
fn concurrent_run_exits_75_naming_the_lock_holder() {
    let mut env = TestEnv::new();
    let spec = env.standalone_spec("www", &["www.lock.test"]);
    env.certs.push(spec);
    env.sandbox.inject(
        Fault::new(FaultKind::Delay { ms: 6_000 })
            .method("POST")
            .path(support::env::ORDER_PATH),
    );
    let mut first = env.agent(["renew", "--wait", "30"]).spawn();
    let pid = first.id();
    let holding = support::env::wait_until(std::time::Duration::from_secs(20), || {
        env.record("www").is_some_and(|r| !r["intent"].is_null())
    });
    assert!(holding, "the first run reached its order");
    // A third run waits for the lock (the default --lock-wait of 30 s), saying who holds it,
    // and finds the certificate done; the second fails at once with --lock-wait 0.
    let config = env.config_path();
    std::thread::scope(|s| {
        let waiting = s.spawn(|| env.agent_at(&config, ["renew", "--wait", "30"]).run());
        let second = env
            .agent_at(&config, ["renew", "--wait", "30", "--lock-wait", "0"])
            .run();
        second.expect_code(75);
        assert!(
            second.stderr.contains(&pid.to_string()),
            "the message names PID {pid}\n{}",
            second.describe()
        );
        let status = first.wait().unwrap();
        assert_eq!(status.code(), Some(0));
        let waited = waiting.join().unwrap();
        waited.expect_code(0);
        assert!(
            waited.stderr.contains(&format!("is locked by PID {pid} ("))
                && waited.stderr.contains("waiting up to 30 s"),
            "the waiting run names the holder\n{}",
            waited.describe()
        );
    });
    assert_eq!(env.billed(), 1, "no double order");
    assert_eq!(env.order_posts(), 1);
    assert!(
        Leaf::from_pem_file(&env.spec("www").files.leaf_file())
            .serial
            .len()
            > 1
    );
}

/// Guards the failure backoff: a certificate whose order is refused (422) is not retried by
/// the next run — no API call, a non-zero exit saying "not retried before" — and `--force`
/// retries it at once.
#[test]
fn failing_certificate_is_not_retried_before_its_backoff_except_with_force() {
    let mut env = TestEnv::new();
    let mut spec = env.standalone_spec("www", &["www.backoff.test"]);
    spec.domains = vec!["www.backoff.local".into()]; // an internal name: refused (422)
    env.certs.push(spec);

    let first = env.renew();
    first.expect_failure();
    let calls = env.calls();
    assert!(
        calls.iter().any(|c| c.status == 422),
        "the API refused:\n{}",
        show(&calls)
    );
    let rec = env.record("www").unwrap();
    assert!(!rec["retry_after"].is_null(), "backoff recorded: {rec:#}");

    let n = env.calls().len();
    let second = env.renew();
    second.expect_failure();
    assert!(
        second.text().contains("not retried before"),
        "{}",
        second.describe()
    );
    assert_eq!(
        env.calls().len(),
        n,
        "no call during the backoff:\n{}",
        show(&env.calls()[n..])
    );

    let forced = env
        .agent(["--json", "renew", "--wait", "10", "--force"])
        .run();
    forced.expect_failure();
    assert!(env.calls().len() > n, "--force retries now");
    assert!(
        !forced.text().contains("not retried before"),
        "{}",
        forced.describe()
    );
    assert_eq!(env.billed(), 0);
}

/// Guards the backoff of a certificate that never reached the CA: a failure before the first
/// order (here the product list keeps failing) is tried again by the next run; only the second
/// consecutive failure starts the backoff, and nothing is ordered meanwhile.
#[test]
fn a_failure_before_the_first_order_is_retried_by_the_next_run() {
    let mut env = TestEnv::new();
    env.sandbox.inject(
        Fault::new(FaultKind::Status { status: 503 })
            .method("GET")
            .path("/api/v1/products")
            .times(1000),
    );
    let spec = env.standalone_spec("www", &["www.first-failure.test"]);
    env.certs.push(spec);

    env.renew().expect_failure();
    let rec = env.record("www").unwrap();
    assert_eq!(rec["failures"], 1, "{rec:#}");
    assert!(rec["retry_after"].is_null(), "no backoff yet: {rec:#}");

    let n = env.calls().len();
    let second = env.renew();
    second.expect_failure();
    assert!(
        !second.text().contains("not retried before"),
        "{}",
        second.describe()
    );
    assert!(env.calls().len() > n, "the next run tries again");
    let rec = env.record("www").unwrap();
    assert_eq!(rec["failures"], 2, "{rec:#}");
    assert!(
        !rec["retry_after"].is_null(),
        "backoff from the second failure: {rec:#}"
    );

    let n = env.calls().len();
    let third = env.renew();
    third.expect_failure();
    assert!(
        third.text().contains("not retried before"),
        "{}",
        third.describe()
    );
    assert_eq!(env.calls().len(), n, "no call during the backoff");
    assert_eq!(env.order_posts(), 0);
    assert_eq!(env.billed(), 0);
}

/// Guards `status --json` (state, serial, expiry, subscription end, next action, from local
/// state only) and `renew --dry-run` on a due certificate: it describes the reissue it would
/// do, changes no file or state, and calls no billed or state-changing endpoint.
#[test]
fn status_json_and_dry_run_describe_without_acting() {
    let env = issued(&["www.status.test"], 1101, "days = 730\nfamily = \"S\"\n");
    let id = certificate_id(&env, "www");
    let n = env.calls().len();
    let status = env.agent(["--json", "status"]).run();
    status.expect_code(0);
    assert_eq!(env.calls().len(), n, "status reads local state only");
    let row = &status.json()[0];
    let leaf = installed_leaf(&env, "www");
    assert_eq!(row["name"], "www");
    assert_eq!(row["certificate_id"], id);
    assert_eq!(row["state"], "installed", "{row:#}");
    assert_eq!(
        support::env::norm_serial(row["serial"].as_str().unwrap()),
        leaf.serial
    );
    let (_, not_after) = scenario::validity(&leaf.der);
    let expires = row["expires"].as_str().unwrap();
    assert!(
        expires.starts_with(&not_after.date().to_string()),
        "{row:#}"
    );
    assert!(row["subscription_ends"].is_string(), "{row:#}");
    assert!(row["days_left"].as_i64().unwrap() > 100, "{row:#}");
    assert!(
        row["next_action"]
            .as_str()
            .unwrap()
            .contains("nothing before"),
        "{row:#}"
    );

    // Due: the dry run says it would reissue, and does nothing.
    age_installed(&env, 20);
    let status = env.agent(["--json", "status"]).run().json();
    assert!(
        status[0]["next_action"]
            .as_str()
            .unwrap()
            .contains("reissue"),
        "{status:#}"
    );
    let tree = env.tree();
    let state = support::env::files_under(&env.state_dir())
        .into_iter()
        .filter(|p| !p.ends_with("lock"))
        .map(|p| (p.clone(), fs::read(&p).unwrap()))
        .collect::<Vec<_>>();
    let n = env.calls().len();
    let dry = env.agent(["--json", "renew", "--dry-run"]).run();
    dry.expect_code(0);
    let o = dry.outcome("www");
    assert_eq!(o["outcome"], "planned", "{}", dry.describe());
    assert!(o["action"].as_str().unwrap().contains("reissue"), "{o:#}");
    let calls = env.calls()[n..].to_vec();
    assert!(state_changing(&calls).is_empty(), "{}", show(&calls));
    assert!(
        calls.is_empty(),
        "a dry run calls nothing:\n{}",
        show(&calls)
    );
    assert_eq!(env.tree(), tree, "no file changed");
    let state_after = support::env::files_under(&env.state_dir())
        .into_iter()
        .filter(|p| !p.ends_with("lock"))
        .map(|p| (p.clone(), fs::read(&p).unwrap()))
        .collect::<Vec<_>>();
    assert_eq!(state_after, state, "no state changed");
    assert_eq!(env.billed(), 1);
}

/// Guards tolerance of a small clock difference: the host's clock is 30 s behind the CA's, so
/// a freshly issued certificate starts "in the future" for the agent; it is installed all the
/// same (a few seconds of skew are normal; the document says nothing about back-dating), not
/// rejected and put into a one-hour backoff.
#[test]
fn host_clock_slightly_behind_the_ca_still_installs() {
    let mut env = TestEnv::new();
    let spec = env.standalone_spec("www", &["www.skew.test"]);
    env.certs.push(spec);
    let offset = (scenario::clock_offset(&env) - 30).to_string();
    let out = scenario::run_with(
        &env,
        &["--json", "renew", "--wait", "30"],
        &[(scenario::CLOCK_OFFSET_ENV, offset.as_str())],
    );
    out.expect_code(0);
    out.installed_serial("www");
    assert_eq!(env.billed(), 1);
}

/// Guards "nothing due → no API call": after the first install, timer runs on the following
/// days and a month later (both clocks moved) make no API call at all and leave the files
/// alone.
#[test]
fn nothing_due_makes_no_api_call() {
    let env = issued(
        &["www.nothing-due.test"],
        1101,
        "days = 730\nfamily = \"S\"\n",
    );
    let tree = env.tree();
    let n = env.calls().len();
    for days in [0u64, 1, 2, 30] {
        env.sandbox
            .advance(std::time::Duration::from_secs(days * 86_400));
        let out = scenario::renew_synced(&env);
        out.expect_code(0);
        assert_eq!(
            out.outcome("www")["outcome"],
            "unchanged",
            "{}",
            out.describe()
        );
    }
    let calls = env.calls()[n..].to_vec();
    assert!(calls.is_empty(), "no API call:\n{}", show(&calls));
    assert_eq!(env.tree(), tree, "no file changed");
}
