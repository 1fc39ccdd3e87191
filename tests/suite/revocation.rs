//! Revocation against the sandbox's CRLs: a revoked certificate served by a real nginx is
//! CRITICAL in `check` until the next run replaces it (a new order for an annulled order, a
//! reissue where the order allows one) and nginx serves the replacement; the order policy
//! holds (no order without `allow_orders`); a CRL that is forged, too large, stale or garbage
//! is refused and reported naming its URL, never read as "not revoked"; one CRL fetched once
//! for two certificates and kept until its `nextUpdate` or for `refresh_secs`.

use crate::support;

use std::fs;

use partner_sandbox::crl::CrlFault;
use partner_sandbox::state::RevokeTarget;
use support::env::{Publish, TestEnv, Web, norm_serial};
use support::webserver::{Server, require};

/// Revokes certificate `name`'s current certificate at the sandbox with `reason` (its CRL
/// lists it; `keep_order`: the order stays usable for a reissue).
fn revoke(
    env: &TestEnv,
    name: &str,
    reason: &str,
    keep_order: bool,
) -> partner_sandbox::crl::Revocation {
    env.sandbox
        .revoke(
            RevokeTarget::CertificateId(certificate_id(env, name)),
            reason,
            keep_order,
        )
        .unwrap()
}

fn certificate_id(env: &TestEnv, name: &str) -> u64 {
    env.record(name).unwrap()["order"]["certificate_id"]
        .as_u64()
        .unwrap()
}

fn installed_serial(env: &TestEnv, name: &str) -> String {
    norm_serial(
        env.record(name).unwrap()["installed"]["serial"]
            .as_str()
            .unwrap(),
    )
}

/// The CRL path of product 1101's issuer as the sandbox counts its fetches.
fn fetches(env: &TestEnv) -> u64 {
    env.sandbox.crl_fetches().values().sum()
}

#[test]
fn a_revoked_certificate_is_replaced_and_served() {
    if !require(Server::Nginx) {
        return;
    }
    let mut env = TestEnv::new();
    let metrics = env.path("cert_agent.prom");
    env.agent_extra = format!("metrics_file = \"{}\"\n", metrics.display());
    let webroot = env.path("www-root");
    let mut spec = env.cert_spec("www", &["www.revoked.test"], "nginx");
    spec.publish = Publish::Webroot(webroot.clone());
    env.write_placeholder(&spec);
    let web = Web::start(Server::Nginx, env.dir.path(), &[env.site(&spec, &webroot)]);
    env.certs.push(web.configure(spec));
    env.sandbox.set_dcv_ports(web.http_port(), 0);
    env.renew().expect_code(0);
    let first = installed_serial(&env, "www");
    let https = web.https_addr();
    env.served_leaf_with_serial(&https, "www.revoked.test", &first)
        .unwrap();
    env.agent(["check"]).run().expect_code(0);
    let billed = env.billed();

    // The CA revokes it (the order becomes annulled, as the API document says).
    let revoked = revoke(&env, "www", "keyCompromise", false);
    assert_eq!(norm_serial(&revoked.serial_hex), first);
    // The CRL the previous check kept is still valid until its nextUpdate, but older than
    // `refresh_secs` (six hours) it is read again: the revocation shows.
    age_kept_crls(&env, 6 * 3600);
    let critical = env.agent(["check"]).run();
    critical.expect_code(2);
    assert!(
        critical.stdout.starts_with("CERT-AGENT CRITICAL - www: ")
            && critical.stdout.contains("was revoked on")
            && critical.stdout.contains("keyCompromise"),
        "{}",
        critical.describe()
    );
    assert_eq!(env.billed(), billed, "check orders nothing");

    // The next run: the order is annulled, orders are allowed: a new order, installed and
    // served; the output says what was ordered and what it cost.
    let annulled = certificate_id(&env, "www");
    let run = env.agent(["renew", "--wait", "30"]).run();
    run.expect_code(0);
    let second = installed_serial(&env, "www");
    assert_ne!(second, first);
    let announced = run
        .stdout
        .lines()
        .find(|l| l.starts_with("www: placed a billed order"))
        .unwrap_or_else(|| panic!("no order line\n{}", run.describe()));
    assert!(
        announced.contains(&format!(
            "to replace order {annulled}, ended after its certificate was revoked: certificate {}",
            certificate_id(&env, "www")
        )) && announced.contains("price ")
            && announced.contains(" year"),
        "{announced}"
    );
    assert_eq!(
        env.billed(),
        billed + 1,
        "one new order\n{}",
        run.describe()
    );
    let served = env
        .served_leaf_with_serial(&https, "www.revoked.test", &second)
        .unwrap();
    assert_eq!(norm_serial(&served.serial), second);
    env.agent(["check"]).run().expect_code(0);
    let journal = env.journal();
    assert!(journal.contains("certificate-revoked"), "{journal}");

    // Nothing more to do: no order; the replacement's CRL entry is read: not revoked.
    let orders = env.order_posts();
    env.renew().expect_code(0);
    assert_eq!(env.order_posts(), orders);
    let text = fs::read_to_string(&metrics).unwrap();
    let revoked = text
        .lines()
        .find(|l| l.starts_with("cert_agent_certificate_revoked{name=\"www\""))
        .unwrap_or_else(|| panic!("no revoked gauge\n{text}"));
    assert!(revoked.ends_with(" 0"), "{revoked}");
}

#[test]
fn the_order_policy_decides_how_a_revoked_certificate_is_replaced() {
    let mut env = TestEnv::new();
    env.allow_orders = false;
    let keep = env.standalone_spec("keep", &["keep.revoked.test"]);
    env.certs.push(keep);
    env.agent(["--json", "issue", "keep", "--yes", "--wait", "30"])
        .run()
        .expect_code(0);
    let mut ended = env.cert_spec("ended", &["ended.revoked.test"], "none");
    ended.publish = env.spec("keep").publish.clone();
    env.certs.push(ended);
    env.agent(["--json", "issue", "ended", "--yes", "--wait", "30"])
        .run()
        .expect_code(0);
    let billed = env.billed();
    let keep_first = installed_serial(&env, "keep");
    let ended_first = installed_serial(&env, "ended");

    // "keep": revoked, its order still allows a reissue. "ended": revoked and annulled.
    for (name, keep_order) in [("keep", true), ("ended", false)] {
        revoke(&env, name, "superseded", keep_order);
    }
    let run = env.renew();
    // The reissue is free and done; no order is placed for the annulled one.
    let keep_second = run.installed_serial("keep");
    assert_ne!(keep_second, keep_first);
    let ended_outcome = run.outcome("ended");
    assert_eq!(ended_outcome["outcome"], "failed", "{}", run.describe());
    let error = ended_outcome["error"].as_str().unwrap();
    assert!(
        error.contains("annulled") && error.contains("issue ended --yes"),
        "{error}"
    );
    assert_eq!(
        ended_outcome["revocation"]["state"],
        "revoked",
        "{}",
        run.describe()
    );
    assert_eq!(env.billed(), billed, "no billed order\n{}", run.describe());
    assert_eq!(installed_serial(&env, "ended"), ended_first);

    // `check`: the reissued one is fine, the other stays CRITICAL.
    let check = env.agent(["check"]).run();
    check.expect_code(2);
    assert!(
        check.stdout.contains("CRITICAL ended: ") && !check.stdout.contains("keep:"),
        "{}",
        check.describe()
    );

    // The operator allows the order: the next run places it.
    let run = env
        .agent(["--json", "issue", "ended", "--yes", "--wait", "30"])
        .run();
    run.expect_code(0);
    assert_ne!(run.installed_serial("ended"), ended_first);
    assert_eq!(env.billed(), billed + 1);
    env.agent(["check"]).run().expect_code(0);
}

#[test]
fn crls_that_cannot_be_trusted_are_refused_and_reported() {
    let mut env = TestEnv::new();
    env.agent_extra = "\n[revocation]\nmax_crl_bytes = 1048576\n".to_owned();
    let spec = env.standalone_spec("www", &["www.crl.test"]);
    env.certs.push(spec);
    env.renew().expect_code(0);
    let issuer_url = {
        // The issuer of product 1101 decides the URL: read it from the installed chain's CRL
        // distribution point through a check.
        env.agent(["check"]).run().expect_code(0);
        let paths: Vec<String> = env.sandbox.crl_fetches().into_keys().collect();
        assert_eq!(paths.len(), 1, "{paths:?}");
        format!("http://{}{}", env.sandbox.crl_addr(), paths[0])
    };
    // The certificate is revoked under each bad CRL: never "not revoked", never OK.
    revoke(&env, "www", "keyCompromise", true);
    for (fault, why) in [
        (CrlFault::WrongKey, "signature does not verify"),
        (
            CrlFault::Oversized,
            "larger than max_crl_bytes (1048576 bytes)",
        ),
        (CrlFault::Stale, "stale"),
        (CrlFault::Garbage, "not a DER certificate revocation list"),
    ] {
        env.sandbox
            .set_crl_fault(Some(fault), Some(2 * 1024 * 1024));
        let _ = fs::remove_dir_all(env.state_dir().join("crl"));
        let check = env.agent(["check"]).run();
        check.expect_code(1);
        assert!(
            check.stdout.starts_with("CERT-AGENT WARNING - www: ")
                && check.stdout.contains(&format!(
                    "revocation unknown: the CRL {issuer_url} was refused"
                ))
                && check.stdout.contains(why),
            "{fault:?}\n{}",
            check.describe()
        );
        // A run neither replaces the certificate nor calls it fine.
        let run = env.renew();
        run.expect_code(0);
        let o = run.outcome("www");
        assert_eq!(o["outcome"], "unchanged", "{fault:?}\n{}", run.describe());
        assert_eq!(o["revocation"]["state"], "unknown", "{}", run.describe());
        assert!(
            o["revocation"]["detail"]
                .as_str()
                .unwrap_or_default()
                .contains(why),
            "{}",
            run.describe()
        );
        assert!(
            !env.state_dir().join("crl").exists()
                || fs::read_dir(env.state_dir().join("crl")).unwrap().count() == 0,
            "a refused CRL is not kept"
        );
    }
    // The CA's real CRL again: revoked, and replaced.
    env.sandbox.set_crl_fault(None, None);
    env.agent(["check"]).run().expect_code(2);
    let first = installed_serial(&env, "www");
    let run = env.renew();
    run.expect_code(0);
    assert_ne!(run.installed_serial("www"), first);
    env.agent(["check"]).run().expect_code(0);
}

#[test]
fn one_crl_is_fetched_once_for_two_certificates_and_kept() {
    let mut env = TestEnv::new();
    let a = env.standalone_spec("a", &["a.crl-cache.test"]);
    let mut b = env.cert_spec("b", &["b.crl-cache.test"], "none");
    b.publish = a.publish.clone();
    env.certs.push(a);
    env.certs.push(b);
    env.renew().expect_code(0);
    assert_eq!(
        fetches(&env),
        0,
        "nothing installed before the run: nothing read"
    );

    env.agent(["check"]).run().expect_code(0);
    assert_eq!(fetches(&env), 1, "{:?}", env.sandbox.crl_fetches());
    // Kept in the state directory until its nextUpdate: neither a run nor a check fetches it.
    env.renew().expect_code(0);
    env.agent(["check"]).run().expect_code(0);
    assert_eq!(fetches(&env), 1, "{:?}", env.sandbox.crl_fetches());
    let kept: Vec<_> = fs::read_dir(env.state_dir().join("crl"))
        .unwrap()
        .map(|e| e.unwrap())
        .collect();
    assert_eq!(kept.len(), 1);
    use std::os::unix::fs::PermissionsExt;
    assert_eq!(
        kept[0].metadata().unwrap().permissions().mode() & 0o777,
        0o600
    );
    // A kept copy that no longer verifies is not used: fetched again, once for both.
    fs::write(kept[0].path(), b"tampered").unwrap();
    env.renew().expect_code(0);
    assert_eq!(fetches(&env), 2, "{:?}", env.sandbox.crl_fetches());
    // Kept for less than `refresh_secs` (six hours): not fetched; older: fetched again.
    age_kept_crls(&env, 6 * 3600 - 120);
    env.agent(["check"]).run().expect_code(0);
    assert_eq!(fetches(&env), 2, "{:?}", env.sandbox.crl_fetches());
    age_kept_crls(&env, 6 * 3600 + 1);
    env.agent(["check"]).run().expect_code(0);
    assert_eq!(fetches(&env), 3, "{:?}", env.sandbox.crl_fetches());
}

/// Makes every CRL kept in the state directory look stored `secs` seconds ago.
fn age_kept_crls(env: &TestEnv, secs: u64) {
    let when = std::time::SystemTime::now() - std::time::Duration::from_secs(secs);
    for e in fs::read_dir(env.state_dir().join("crl")).unwrap() {
        let f = fs::File::options()
            .write(true)
            .open(e.unwrap().path())
            .unwrap();
        f.set_modified(when).unwrap();
    }
}

/// `status` (table and `--json`) and the metrics of one installed certificate from what the
/// CRL says: not checked before a run read it, good, unusable (a garbage CRL: why), and
/// revoked (date and reason) while the annulled order waits for the operator's leave to order.
#[test]
fn status_and_the_metrics_show_what_the_crl_said() {
    let mut env = TestEnv::new();
    env.watch_surfaces();
    let spec = env.standalone_spec("www", &["www.crl-status.test"]);
    env.certs.push(spec);
    env.renew().expect_code(0);
    env.allow_orders = false;
    let status = || {
        let out = env.agent(["--json", "status"]).run();
        out.expect_code(0);
        let v = out.json();
        (v[0]["revocation"].clone(), out)
    };
    let table = || {
        let out = env.agent(["status"]).run();
        out.expect_code(0);
        out.stdout
    };
    let (r, out) = status();
    assert_eq!(r["state"], "not_checked", "{}", out.describe());
    assert!(table().contains(" not checked "), "{}", table());

    env.renew().expect_code(0);
    let (r, out) = status();
    assert_eq!(r["state"], "good", "{}", out.describe());
    assert!(
        r["url"].as_str().unwrap_or_default().starts_with("http://"),
        "{r}"
    );
    assert!(table().contains(" good "), "{}", table());
    assert_eq!(
        env.metric("cert_agent_certificate_revoked", "www"),
        Some(0.0)
    );

    env.sandbox.set_crl_fault(Some(CrlFault::Garbage), None);
    fs::remove_dir_all(env.state_dir().join("crl")).unwrap();
    env.renew().expect_code(0);
    let (r, out) = status();
    assert_eq!(r["state"], "unknown", "{}", out.describe());
    let text = table();
    assert!(
        text.contains(" UNUSABLE ")
            && text.contains("www: revocation unknown: the CRL http://")
            && text.contains("not a DER certificate revocation list"),
        "{text}"
    );
    assert_eq!(
        env.metric("cert_agent_certificate_crl_usable", "www"),
        Some(0.0)
    );

    env.sandbox.set_crl_fault(None, None);
    let _ = fs::remove_dir_all(env.state_dir().join("crl"));
    revoke(&env, "www", "keyCompromise", false);
    let run = env.renew();
    assert_eq!(
        run.outcome("www")["outcome"],
        "failed",
        "{}",
        run.describe()
    );
    let (r, out) = status();
    assert_eq!(r["state"], "revoked", "{}", out.describe());
    assert_eq!(r["reason"], "keyCompromise", "{r}");
    let revoked_at = time::OffsetDateTime::parse(
        r["revoked_at"].as_str().unwrap_or_default(),
        &time::format_description::well_known::Rfc3339,
    )
    .unwrap_or_else(|e| panic!("revoked_at: {e}: {r}"));
    let text = table();
    assert!(
        text.contains(&format!(" REVOKED {} keyCompromise ", revoked_at.date()))
            && text.contains("www: serial ")
            && text.contains("was revoked on"),
        "{text}"
    );
    assert_eq!(
        env.metric("cert_agent_certificate_revoked", "www"),
        Some(1.0)
    );
    assert_eq!(
        env.metric("cert_agent_certificate_crl_usable", "www"),
        Some(1.0)
    );
    // Announced once, by the run that read it.
    let revoked: Vec<_> = env
        .notified()
        .into_iter()
        .filter(|e| e["event"] == "revoked")
        .collect();
    assert_eq!(revoked.len(), 1, "{revoked:?}");
}

/// The daemon wakes at the kept CRL's `nextUpdate`, not at its hourly schedule: a certificate
/// revoked after the daemon's run read the CRL is replaced by the run that reads the next CRL.
/// The sandbox's CRLs are valid for a day: its clock (and the agent's with it) is moved to 80 s
/// before the kept CRL's `nextUpdate`, so that the next one is due within the test.
#[test]
fn the_daemon_acts_on_a_revocation_when_the_next_crl_is_due() {
    let mut env = TestEnv::new();
    let spec = env.standalone_spec("www", &["www.crl-pace.test"]);
    env.certs.push(spec);
    let first = env.agent(["--json", "renew", "--wait", "60"]).run();
    first.expect_code(0);
    let first = first.installed_serial("www");
    // A check keeps the CRL (not listing the certificate) until its nextUpdate.
    env.agent(["check"]).run().expect_code(0);
    assert!(
        fs::read_dir(env.state_dir().join("crl")).unwrap().count() > 0,
        "a CRL kept"
    );
    let fetched = fetches(&env);
    let billed = env.billed();
    revoke(&env, "www", "keyCompromise", false);
    let day = partner_sandbox::crl::CRL_VALIDITY
        .whole_seconds()
        .unsigned_abs();
    env.sandbox
        .advance(std::time::Duration::from_secs(day - 80));
    let offset = support::scenario::clock_offset(&env).to_string();

    // Hourly schedule; the first run at once reads the kept CRL: nothing revoked yet.
    let config = env.write_config();
    let mut daemon = env
        .agent_at(
            &config,
            ["run", "--interval", "3600", "--first-run-delay", "0"],
        )
        .env(support::scenario::CLOCK_OFFSET_ENV, &offset)
        .spawn();
    let replaced = support::env::wait_until(std::time::Duration::from_secs(240), || {
        env.record("www")
            .and_then(|r| r["installed"]["serial"].as_str().map(norm_serial))
            .is_some_and(|s| s != first)
    });
    let _ = daemon.kill();
    let _ = daemon.wait();
    assert!(
        replaced,
        "the daemon replaced the revoked certificate when the next CRL was due\n{}",
        env.journal()
    );
    assert!(fetches(&env) > fetched, "the next CRL was fetched");
    assert_eq!(
        env.billed(),
        billed + 1,
        "one new order for the annulled one"
    );
    assert!(env.journal().contains("certificate-revoked"));
}

/// Full runs until the due summary keeps each of `names` with what its CRL check needs (the
/// summary keeps no record written within the last second, and a run that read a CRL writes
/// what it said into the record).
fn settle_summary(env: &TestEnv, names: &[String]) {
    let due = env.state_dir().join("due.json");
    let kept = || {
        let Ok(text) = fs::read_to_string(&due) else {
            return false;
        };
        let v: serde_json::Value = serde_json::from_str(&text).unwrap_or_default();
        let entries = v["certificates"].as_array().cloned().unwrap_or_default();
        names.iter().all(|n| {
            entries
                .iter()
                .any(|e| e["name"] == n.as_str() && e["crl"].is_object())
        })
    };
    for _ in 0..5 {
        // The summary keeps no record written within the last second: a clock second passes.
        std::thread::sleep(std::time::Duration::from_millis(1100));
        env.renew().expect_code(0);
        if kept() {
            return;
        }
    }
    panic!(
        "the summary keeps {names:?} with their CRL\n{}",
        fs::read_to_string(&due).unwrap_or_default()
    );
}

/// An installed file's path, content and modification time.
type Original = (std::path::PathBuf, Vec<u8>, std::time::SystemTime);

/// Overwrites each installed certificate file of `name` in place with garbage of its size and
/// sets its modification time back: the stamp a run compares (size, mtime, inode) is the one
/// the summary holds, but a run that opened the file would find no certificate in it.
fn garble_installed(env: &TestEnv, name: &str) -> Vec<Original> {
    let files = &env.spec(name).files;
    let mut originals = Vec::new();
    for path in [&files.cert, &files.chain, &files.fullchain]
        .into_iter()
        .flatten()
    {
        let bytes = fs::read(path).unwrap();
        let mtime = fs::metadata(path).unwrap().modified().unwrap();
        put_back(path, &vec![b'x'; bytes.len()], mtime);
        originals.push((path.clone(), bytes, mtime));
    }
    assert!(!originals.is_empty());
    originals
}

fn put_back(path: &std::path::Path, bytes: &[u8], mtime: std::time::SystemTime) {
    use std::io::Write as _;
    let mut f = fs::File::options().write(true).open(path).unwrap();
    f.write_all(bytes).unwrap();
    f.set_modified(mtime).unwrap();
}

/// Issue 42: a run with nothing due checks each CRL against the serials the due summary keeps,
/// without opening any installed certificate file — here the files hold garbage under their
/// old stamps while the CRL is fetched again (older than `refresh_secs`, the CRL store
/// changed); a revocation is still found, and acted on by the full path.
#[test]
fn a_run_with_nothing_due_checks_the_crl_without_opening_a_certificate_file() {
    let mut env = TestEnv::new();
    let spec = env.standalone_spec("www", &["www.crl-summary.test"]);
    env.certs.push(spec);
    env.renew().expect_code(0);
    settle_summary(&env, &["www".to_owned()]);
    let first = installed_serial(&env, "www");
    let fetched = fetches(&env);
    let originals = garble_installed(&env, "www");
    age_kept_crls(&env, 6 * 3600 + 1);
    let stray = env.state_dir().join("crl/stray");
    fs::write(&stray, b"").unwrap();
    fs::remove_file(&stray).unwrap();

    let out = env.agent(["-v", "--json", "renew", "--wait", "30"]).run();
    out.expect_code(0);
    let o = out.outcome("www");
    assert_eq!(o["outcome"], "unchanged", "{}", out.describe());
    assert!(
        o["revocation"].is_null(),
        "the garbage was not read: {}",
        out.describe()
    );
    assert_eq!(
        crate::renew_due::quiet_by_summary(&out),
        1,
        "{}",
        out.describe()
    );
    assert_eq!(fetches(&env), fetched + 1, "the CRL read again, once");

    for (path, bytes, mtime) in &originals {
        put_back(path, bytes, *mtime);
    }
    revoke(&env, "www", "keyCompromise", true);
    age_kept_crls(&env, 6 * 3600 + 1);
    let run = env.renew();
    run.expect_code(0);
    assert_ne!(run.installed_serial("www"), first, "{}", run.describe());
    assert!(env.journal().contains("certificate-revoked"));
}

/// Issue 42: with the CA's CRL unusable, a run over 50 certificates prints one line per
/// certificate and one for the CRL (with the count it leaves unknown), not a warning per
/// certificate; the first failure is tried again by the next run, later ones wait (5 minutes,
/// doubling); revocation stays "unknown" in every record; `check` tries at once, and the CRL
/// usable again is read by the runs.
#[test]
fn an_unusable_crl_is_reported_once_with_its_count_and_tried_again_on_a_backoff() {
    const N: usize = 50;
    let mut env = TestEnv::new();
    let head = env.standalone_spec("c00", &["c00.crl-outage.test"]);
    let publish = head.publish.clone();
    env.certs.push(head);
    for i in 1..N {
        let name = format!("c{i:02}");
        let mut spec = env.cert_spec(&name, &[&format!("{name}.crl-outage.test")], "none");
        spec.publish = publish.clone();
        env.certs.push(spec);
    }
    env.renew().expect_code(0);
    let names: Vec<String> = env.certs.iter().map(|c| c.name.clone()).collect();
    settle_summary(&env, &names);

    env.sandbox.set_crl_fault(Some(CrlFault::Garbage), None);
    fs::remove_dir_all(env.state_dir().join("crl")).unwrap();
    let url = format!("http://{}/crl/", env.sandbox.crl_addr());
    let fetched = fetches(&env);
    // Runs a second apart (the summary keeps no record written within the last second).
    let plain = |fetches_now: u64, retry: &str| {
        std::thread::sleep(std::time::Duration::from_millis(1100));
        let out = env.agent(["renew"]).run();
        out.expect_code(0);
        // Every line but the test configuration's own warning (its 1 s poll interval).
        let lines = out.stdout.lines().count()
            + out
                .stderr
                .lines()
                .filter(|l| !l.contains("config.toml line"))
                .count();
        assert!(lines <= N + 1, "{lines} lines\n{}", out.describe());
        let about: Vec<&str> = out
            .stderr
            .lines()
            .filter(|l| l.contains(&url) && !l.starts_with('c'))
            .collect();
        assert_eq!(about.len(), 1, "{}", out.describe());
        assert!(
            about[0].contains(&format!("revocation unknown for {N} certificate(s)"))
                && about[0].contains("not a DER certificate revocation list")
                && about[0].contains(retry),
            "{}",
            out.describe()
        );
        assert_eq!(
            out.stdout
                .lines()
                .filter(|l| l.contains("revocation unknown"))
                .count(),
            N,
            "{}",
            out.describe()
        );
        assert_eq!(fetches(&env), fetches_now, "{}", out.describe());
    };
    plain(fetched + 1, "tried again by the next run");
    plain(fetched + 2, "tried again after");
    plain(fetched + 2, "tried again after");
    for name in &names {
        assert_eq!(
            env.record(name).unwrap()["revocation"]["state"],
            "unknown",
            "{name}"
        );
    }
    // Kept in the summary: unknown on every report line, no certificate read (a clock second
    // first: the summary keeps no record written within the last second).
    std::thread::sleep(std::time::Duration::from_millis(1100));
    let out = env.agent(["-v", "--json", "renew", "--wait", "30"]).run();
    out.expect_code(0);
    assert_eq!(
        crate::renew_due::quiet_by_summary(&out),
        N,
        "{}",
        out.describe()
    );
    assert_eq!(out.outcome("c17")["revocation"]["state"], "unknown");
    assert_eq!(fetches(&env), fetched + 2);

    env.sandbox.set_crl_fault(None, None);
    env.agent(["check"]).run().expect_code(0);
    assert_eq!(fetches(&env), fetched + 3, "check tries at once");
    let out = env.agent(["renew"]).run();
    out.expect_code(0);
    assert!(
        !out.text().contains("revocation unknown"),
        "{}",
        out.describe()
    );
}

/// Issue 39: an older CRL — correctly signed, still valid, replayed after the CA published a
/// newer one — never replaces the newer one kept: it is refused (and said so), and the kept
/// one keeps showing the revocation.
#[test]
fn an_older_crl_replayed_does_not_replace_the_newer_one_kept() {
    let mut env = TestEnv::new();
    let spec = env.standalone_spec("www", &["www.crl-replay.test"]);
    env.certs.push(spec);
    env.renew().expect_code(0);
    env.agent(["check"]).run().expect_code(0);
    revoke(&env, "www", "keyCompromise", true);
    age_kept_crls(&env, 6 * 3600 + 1);
    env.agent(["check"]).run().expect_code(2);
    let kept_file = || {
        let mut files: Vec<_> = fs::read_dir(env.state_dir().join("crl"))
            .unwrap()
            .map(|e| e.unwrap().path())
            .collect();
        assert_eq!(files.len(), 1, "{files:?}");
        fs::read(files.remove(0)).unwrap()
    };
    let newer = kept_file();

    env.sandbox.set_crl_fault(Some(CrlFault::Replay), None);
    age_kept_crls(&env, 6 * 3600 + 1);
    let fetched = fetches(&env);
    let check = env.agent(["check"]).run();
    check.expect_code(2);
    assert_eq!(fetches(&env), fetched + 1, "{}", check.describe());
    assert!(
        check.stdout.contains("was revoked on")
            && check.stderr.contains("the server sent an older CRL")
            && check.stderr.contains("refused, the kept one stays"),
        "{}",
        check.describe()
    );
    assert_eq!(kept_file(), newer, "the newer CRL stays");
    // The run acts on the kept CRL: the certificate is replaced, not called fine.
    let first = installed_serial(&env, "www");
    let run = env.renew();
    run.expect_code(0);
    assert_ne!(run.installed_serial("www"), first, "{}", run.describe());
}

/// Issue 39: a CRL server's redirect to a loopback address (here another one than the CRL
/// server's) is not followed: the CRL is unknown, naming why, and nothing connects there.
#[test]
fn a_crl_redirect_to_a_loopback_address_is_not_followed() {
    let mut env = TestEnv::new();
    let spec = env.standalone_spec("www", &["www.crl-redirect.test"]);
    env.certs.push(spec);
    env.renew().expect_code(0);
    let listener = std::net::TcpListener::bind("127.0.0.2:0").unwrap();
    let target = listener.local_addr().unwrap();
    let hits = std::sync::Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let counted = hits.clone();
    std::thread::spawn(move || {
        use std::io::Write as _;
        for stream in listener.incoming() {
            counted.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
            if let Ok(mut s) = stream {
                let _ = s.write_all(b"HTTP/1.1 404 Not Found\r\ncontent-length: 0\r\n\r\n");
            }
        }
    });
    let location = format!("http://{target}/crl/s-one.crl");
    env.sandbox.set_crl_redirect(Some(&location));
    let check = env.agent(["check"]).run();
    check.expect_code(1);
    assert!(
        check.stdout.contains("revocation unknown")
            && check.stdout.contains(&format!(
                "the server redirected to {location}: not followed"
            ))
            && check.stdout.contains("loopback"),
        "{}",
        check.describe()
    );
    assert!(fetches(&env) >= 1, "the CRL server was asked");
    assert_eq!(hits.load(std::sync::atomic::Ordering::SeqCst), 0);
}

/// `check --refresh-crl` reads the CRL now: after a revocation, plain `check` still answers from
/// the copy kept for `refresh_secs` (OK), `check --refresh-crl` downloads the CRL and is
/// CRITICAL at once, and the copy it kept answers the next plain `check` too.
#[test]
fn check_refresh_crl_sees_a_revocation_at_once() {
    let mut env = TestEnv::new();
    let spec = env.standalone_spec("www", &["www.crl-refresh.test"]);
    env.certs.push(spec);
    env.renew().expect_code(0);
    env.allow_orders = false;
    let check = |extra: &[&str]| {
        let mut args = vec!["check", "--no-balance"];
        args.extend_from_slice(extra);
        env.agent(args).run()
    };
    let first = check(&[]);
    first.expect_code(0);
    let before = fetches(&env);
    revoke(&env, "www", "keyCompromise", false);
    let kept = check(&[]);
    kept.expect_code(0);
    assert_eq!(fetches(&env), before, "the kept copy answered");
    let fresh = check(&["--refresh-crl"]);
    fresh.expect_code(2);
    assert!(
        fresh.stdout.contains("CRITICAL") && fresh.stdout.contains("revoked"),
        "{}",
        fresh.describe()
    );
    assert_eq!(fetches(&env), before + 1, "downloaded once");
    let after = check(&[]);
    after.expect_code(2);
    assert_eq!(fetches(&env), before + 1, "the new copy is kept");
}
