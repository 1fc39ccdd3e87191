//! `cert-agent renew` end to end for a certificate of an ACME CA (`issuer = "NAME"`), against
//! Pebble with External Account Binding required: the account registered once, `http-01`
//! answered through a real nginx or apache from the web root, the chain checked and
//! installed, the server reloaded and the served certificate checked by a TLS handshake; a
//! run stopped at each step goes on with the same order.

use crate::support;

use std::fs;
use std::path::PathBuf;

use support::env::{Publish, TestEnv, Web, files_under, key_spki};
use support::pebble::{self, Pebble};
use support::webserver::{Server, require};

/// One certificate of the ACME CA `pebble`, served by `kind` from `DIR/www-root`.
pub(crate) struct AcmeEnv {
    pub(crate) env: TestEnv,
    pub(crate) web: Web,
    pub(crate) pebble: Pebble,
    webroot: PathBuf,
    root: PathBuf,
}

pub(crate) fn acme_env(kind: Server, domain: &str) -> Option<AcmeEnv> {
    acme_env_with(kind, domain, None)
}

/// [`acme_env`] with Pebble issuing certificates valid for `validity_secs`.
fn acme_env_with(kind: Server, domain: &str, validity_secs: Option<u64>) -> Option<AcmeEnv> {
    if !require(kind) || !pebble::require() {
        return None;
    }
    let mut env = TestEnv::new();
    let server = match kind {
        Server::Nginx => "nginx",
        Server::Apache => "apache",
    };
    let webroot = env.path("www-root");
    let mut spec = env.cert_spec("www", &[domain], server);
    spec.publish = Publish::Webroot(webroot.clone());
    spec.extra = "issuer = \"pebble\"\n".into();
    env.write_placeholder(&spec);
    let web = Web::start(kind, env.dir.path(), &[env.site(&spec, &webroot)]);
    env.certs.push(web.configure(spec));
    let pebble = Pebble::start_with_validity(web.http_port(), validity_secs);
    env.tail_extra = pebble.config_table("pebble", &env.path("eab.key"));
    let root = env.path("pebble-root.pem");
    pebble.write_root(&root);
    Some(AcmeEnv {
        env,
        web,
        pebble,
        webroot,
        root,
    })
}

impl AcmeEnv {
    fn challenge_files(&self) -> Vec<PathBuf> {
        files_under(&self.webroot)
    }

    /// The served leaf once it has `serial`, checked against Pebble's root.
    fn served(&self, name: &str, serial: &str) -> support::env::Leaf {
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
        loop {
            let got = support::env::served_leaf(&self.root, &self.web.https_addr(), name);
            match got {
                Ok(l) if l.serial == serial => return l,
                other if std::time::Instant::now() > deadline => {
                    panic!("served for {name}: {other:?}\n{}", self.web.logs())
                }
                _ => std::thread::sleep(std::time::Duration::from_millis(100)),
            }
        }
    }
}

fn record_order_url(env: &TestEnv) -> Option<String> {
    env.record("www")?["acme"]["order_url"]
        .as_str()
        .map(str::to_owned)
}

/// The ACME certificate's whole path on one web server: one account, one order, the
/// challenge served from the web root and removed, the chain installed and served (a chain
/// to Pebble's root, our key, the name), the record without an order in progress; the next
/// run orders nothing and touches nothing.
fn acme_flow(kind: Server, domain: &str) {
    let Some(mut a) = acme_env(kind, domain) else {
        return;
    };
    a.env.watch_surfaces();
    let out = a.env.renew();
    out.expect_code(0);
    let serial = out.installed_serial("www");
    let leaf = a.served(domain, &serial);
    let files = a.env.spec("www").files.clone();
    assert_eq!(leaf.spki, key_spki(&files.key), "served for our key");
    assert!(leaf.dns_names.iter().any(|n| n == domain));
    assert!(
        a.challenge_files().is_empty(),
        "left in the web root: {:?}",
        a.challenge_files()
    );
    assert_eq!(a.pebble.requests("/order-plz"), 1, "{}", a.pebble.log());
    assert_eq!(record_order_url(&a.env), None, "no order in progress");
    let account = a.env.state_dir().join("acme/pebble/account.json");
    let mode = fs::metadata(&account).unwrap();
    assert_eq!(
        std::os::unix::fs::PermissionsExt::mode(&mode.permissions()) & 0o777,
        0o600
    );
    assert_eq!(a.env.billed(), 0, "the Partner API is not used");

    let again = a.env.renew();
    again.expect_code(0);
    assert_eq!(
        again.outcome("www")["outcome"],
        "unchanged",
        "{}",
        again.describe()
    );
    assert_eq!(a.pebble.requests("/order-plz"), 1);
    assert_eq!(
        a.pebble.requests("/sign-me-up"),
        1,
        "the account is registered once"
    );
    assert!(a.env.calls().is_empty(), "no Partner API call at all");

    // Every surface names the issuer.
    let status = a.env.agent(["--json", "status"]).run();
    status.expect_code(0);
    let row = &status.json()[0];
    assert_eq!(row["issuer"], "acme:pebble", "{row}");
    assert_eq!(row["state"], "installed");
    assert!(
        row["next_action"]
            .as_str()
            .is_some_and(|n| n.starts_with("nothing to do before")),
        "{row}"
    );
    let metrics = fs::read_to_string(a.env.path("metrics.prom")).unwrap();
    assert!(
        metrics.contains("cert_agent_certificate_info{name=\"www\",issuer=\"acme:pebble\"} 1"),
        "{metrics}"
    );
    let installed = a
        .env
        .notified()
        .into_iter()
        .find(|e| e["event"] == "installed")
        .expect("an installed event");
    assert_eq!(installed["issuer"], "acme:pebble", "{installed}");
    let check = a.env.agent(["check", "--no-balance"]).run();
    check.expect_code(0);
}

#[test]
fn an_acme_certificate_is_ordered_validated_through_nginx_installed_and_served() {
    acme_flow(Server::Nginx, "www.acme-nginx.test");
}

#[test]
fn an_acme_certificate_is_ordered_validated_through_apache_installed_and_served() {
    acme_flow(Server::Apache, "www.acme-apache.test");
}

/// A run stopped right after the order was journaled, and one stopped with every challenge
/// published but none answered: each next run goes on with the same order (one `newOrder`
/// in all), installs, and leaves nothing in the web root.
#[test]
fn a_run_stopped_at_each_acme_step_resumes_the_same_order() {
    for (i, point) in ["acme-order-placed", "acme-published", "acme-chain-received"]
        .into_iter()
        .enumerate()
    {
        let domain = format!("step{i}.acme-crash.test");
        let Some(a) = acme_env(Server::Nginx, &domain) else {
            return;
        };
        let crashed = a
            .env
            .agent(["--json", "renew", "--wait", "30"])
            .env("CERT_AGENT_FAILPOINT", point)
            .run();
        assert!(
            crashed
                .stderr
                .contains(&format!("failpoint '{point}' reached")),
            "{point}: {}",
            crashed.describe()
        );
        let url = record_order_url(&a.env).unwrap_or_else(|| panic!("{point}: no order journaled"));
        let out = a.env.renew();
        out.expect_code(0);
        let serial = out.installed_serial("www");
        a.served(&domain, &serial);
        assert_eq!(
            a.pebble.requests("/order-plz"),
            1,
            "{point}: one order, resumed ({url})\n{}",
            a.pebble.log()
        );
        assert!(
            a.challenge_files().is_empty(),
            "{point}: left in the web root: {:?}",
            a.challenge_files()
        );
        assert_eq!(record_order_url(&a.env), None);
    }
}

/// A configuration with ACME certificates only needs no `[api]`; the mistakes an operator
/// makes are named with their line: an issuer that is not configured, a validation an ACME
/// CA does not offer, a Partner-only key, a missing directory, an `http://` directory that
/// is not on loopback, ACME certificates in fleet mode.
#[test]
fn acme_configuration_mistakes_are_named_with_their_line() {
    let env = TestEnv::new();
    let dir = env.dir.path();
    let write = |name: &str, text: &str| -> PathBuf {
        let p = dir.join(name);
        fs::write(&p, text).unwrap();
        p
    };
    let state = env.state_dir();
    let good = format!(
        "[agent]\nstate_dir = \"{}\"\n\n[acme.le]\ndirectory = \"https://acme.test/dir\"\n\
         contact = \"ops@example.test\"\n\n[[certificate]]\nname = \"www\"\n\
         domains = [\"www.example.test\"]\nissuer = \"le\"\nwebroot = \"/srv/www\"\n\
         server = \"none\"\ncert_path = \"{}/c.pem\"\nkey_path = \"{}/k.pem\"\n",
        state.display(),
        dir.display(),
        dir.display()
    );
    let ok = env
        .agent_at(&write("good.toml", &good), ["config", "check"])
        .run();
    ok.expect_code(0);

    let cases: [(&str, String, &str); 5] = [
        (
            "unknown issuer",
            good.replace("issuer = \"le\"", "issuer = \"lee\""),
            "line 11",
        ),
        (
            "dcv email",
            good.replace(
                "issuer = \"le\"",
                "issuer = \"le\"\ndcv = \"email\"\ndcv_email = \"a@example.test\"",
            ),
            "validates by \"http\"",
        ),
        (
            "partner key",
            good.replace("issuer = \"le\"", "issuer = \"le\"\ncertificate_id = 7"),
            "is a Partner API key",
        ),
        (
            "no directory",
            good.replace("directory = \"https://acme.test/dir\"\n", ""),
            "missing required key `directory`",
        ),
        (
            "plain http",
            good.replace("https://acme.test/dir", "http://acme.test/dir"),
            "is not an https:// URL",
        ),
    ];
    for (what, text, expect) in cases {
        let out = env
            .agent_at(&write("bad.toml", &text), ["config", "check"])
            .run();
        assert_ne!(out.code, Some(0), "{what}: {}", out.describe());
        assert!(
            out.text().contains(expect),
            "{what}: expected {expect:?} in\n{}",
            out.describe()
        );
    }
    // A Partner certificate without [api] names the certificate.
    let partner = good.replace(
        "issuer = \"le\"\n",
        "product_id = 1101\ncountry = \"DE\"\nregion = \"B\"\ncity = \"B\"\n",
    );
    let out = env
        .agent_at(&write("partner.toml", &partner), ["config", "check"])
        .run();
    assert!(
        out.text()
            .contains("missing required section [api] (certificate 'www'"),
        "{}",
        out.describe()
    );
}

/// `acme account` shows the kept account without registering it again; `revoke` refuses
/// without `--yes` and for a Partner API certificate, revokes at the CA with it and records
/// the revocation, so that the next run orders a replacement (a new key) and serves it.
#[test]
fn acme_account_shows_the_account_and_revoke_leads_to_a_replacement() {
    let domain = "www.acme-revoke.test";
    let Some(a) = acme_env(Server::Nginx, domain) else {
        return;
    };
    let first = a.env.renew();
    first.expect_code(0);
    let serial = first.installed_serial("www");
    let old_key = key_spki(&a.env.spec("www").files.key);

    let shown = a.env.agent(["--json", "acme", "account"]).run();
    shown.expect_code(0);
    let json = shown.json();
    assert_eq!(json["ca"], "pebble");
    assert_eq!(json["registered_now"], false, "{}", shown.describe());
    assert!(
        json["account"]
            .as_str()
            .is_some_and(|u| u.starts_with("https://127.0.0.1"))
    );
    assert_eq!(
        a.pebble.requests("/sign-me-up"),
        1,
        "no second registration"
    );

    let refused = a
        .env
        .agent(["revoke", "www", "--reason", "keyCompromise"])
        .run();
    assert_ne!(refused.code, Some(0));
    assert!(refused.text().contains("--yes"), "{}", refused.describe());
    let unknown = a
        .env
        .agent(["revoke", "www", "--reason", "because", "--yes"])
        .run();
    assert_ne!(unknown.code, Some(0), "{}", unknown.describe());

    let revoked = a
        .env
        .agent(["revoke", "www", "--reason", "keyCompromise", "--yes"])
        .run();
    revoked.expect_code(0);
    assert!(revoked.text().contains(&serial), "{}", revoked.describe());
    assert_eq!(
        a.env.record("www").unwrap()["revocation"]["state"],
        "revoked"
    );
    assert!(
        a.pebble.log().contains("/revoke-cert"),
        "{}",
        a.pebble.log()
    );

    let next = a.env.renew();
    next.expect_code(0);
    let replacement = next.installed_serial("www");
    assert_ne!(replacement, serial);
    let leaf = a.served(domain, &replacement);
    assert_ne!(leaf.spki, old_key, "the replacement has a new key");
    assert_eq!(a.pebble.requests("/order-plz"), 2);
    let audit = fs::read_to_string(a.env.state_dir().join("audit.log")).unwrap();
    assert!(audit.contains("\"action\":\"revoke\""), "{audit}");

    // Deactivation: refused without --yes; with it the CA ends the account (checked by
    // asking again), its file is kept aside, and the next use registers a new account.
    let refused = a.env.agent(["acme", "account", "--deactivate"]).run();
    assert_ne!(refused.code, Some(0));
    assert!(refused.text().contains("--yes"), "{}", refused.describe());
    let ended = a
        .env
        .agent(["--json", "acme", "account", "--deactivate", "--yes"])
        .run();
    ended.expect_code(0);
    assert_eq!(ended.json()["state"], "deactivated", "{}", ended.describe());
    let dir = a.env.state_dir().join("acme/pebble");
    assert!(dir.join("account.json.deactivated").is_file());
    assert!(!dir.join("account.json").exists());
    let fresh = a.env.agent(["--json", "acme", "account"]).run();
    fresh.expect_code(0);
    assert_eq!(fresh.json()["registered_now"], true, "{}", fresh.describe());
    assert_ne!(fresh.json()["account"], json["account"]);
    assert_eq!(a.pebble.requests("/sign-me-up"), 2);
}

/// With Renewal Information (Pebble behind a proxy that adds it): the run after issuance asks
/// for the certificate's window; a window that has already begun renews at once, and the new
/// order names the certificate it replaces. The window is kept in the record.
#[test]
fn the_renewal_window_of_the_ca_decides_when_to_renew() {
    use support::pebble::{AriProxy, ProxyAnswers};
    let domain = "www.acme-ari.test";
    let Some(mut a) = acme_env(Server::Nginx, domain) else {
        return;
    };
    let rt = tokio::runtime::Runtime::new().unwrap();
    let fmt = |t: time::OffsetDateTime| {
        t.format(&time::format_description::well_known::Rfc3339)
            .unwrap()
    };
    let now = time::OffsetDateTime::now_utc();
    let answers = ProxyAnswers {
        window: Ok((
            fmt(now - time::Duration::hours(2)),
            fmt(now - time::Duration::hours(1)),
        )),
        profiles: vec![],
    };
    let proxy = rt.block_on(AriProxy::start(&a.pebble, answers));
    a.env.tail_extra = a
        .pebble
        .config_table_at("pebble", &a.env.path("eab.key"), &proxy.directory);

    let first = a.env.renew();
    first.expect_code(0);
    let serial = first.installed_serial("www");
    let book = &a.env.record("www").unwrap()["acme"];
    assert!(
        book.get("renewal_info").is_none_or(|v| v.is_null()),
        "{book}"
    );

    let second = a.env.renew();
    second.expect_code(0);
    let renewed = second.installed_serial("www");
    assert_ne!(renewed, serial, "{}", second.describe());
    a.served(domain, &renewed);
    assert_eq!(a.pebble.requests("/order-plz"), 2, "{}", a.pebble.log());
    let journal = a.env.journal();
    let renewal = journal
        .lines()
        .filter(|l| l.contains("acme-order-placed"))
        .nth(1)
        .unwrap_or_else(|| panic!("no second order in the journal:\n{journal}"));
    assert!(renewal.contains("inside the renewal window"), "{renewal}");
    assert!(renewal.contains("\"replaces\":true"), "{renewal}");
    drop(proxy);
}

/// A wildcard through `dns-01`: the DNS hook adds each `_acme-challenge` TXT record to
/// Pebble's DNS (pebble-challtestsrv) and removes it afterwards; the certificate covers the
/// wildcard and its base name, with the key made here. `http-01` for a wildcard is refused by
/// `config check`.
#[test]
fn a_wildcard_is_validated_by_dns_01_through_the_hook() {
    if !pebble::require() {
        return;
    }
    let mut env = TestEnv::new();
    let pebble = Pebble::start(support::webserver::free_port());
    let log = env.path("hook.log");
    let hook = env.path("dns-hook.sh");
    support::env::write_script(
        &hook,
        &format!(
            "echo \"$CERT_AGENT_DCV_ACTION $CERT_AGENT_DCV_RECORD_NAME $CERT_AGENT_DCV_RECORD_TYPE\" >> '{log}'\n\
             case \"$CERT_AGENT_DCV_ACTION\" in\n\
             add) curl -sSf -X POST -d \"{{\\\"host\\\":\\\"$CERT_AGENT_DCV_RECORD_NAME.\\\",\\\"value\\\":\\\"$CERT_AGENT_DCV_RECORD_VALUE\\\"}}\" '{dns}/set-txt' ;;\n\
             remove) curl -sSf -X POST -d \"{{\\\"host\\\":\\\"$CERT_AGENT_DCV_RECORD_NAME.\\\"}}\" '{dns}/clear-txt' ;;\n\
             esac\n",
            log = log.display(),
            dns = pebble.dns_management
        ),
    );
    let mut spec = env.cert_spec("wild", &["*.acme-wild.test", "acme-wild.test"], "none");
    spec.dcv = Some("dns-txt".into());
    spec.dns_hook = Some(vec![hook.to_string_lossy().into_owned()]);
    spec.extra = "issuer = \"pebble\"\n".into();
    env.certs.push(spec);
    env.tail_extra = pebble.config_table("pebble", &env.path("eab.key"));
    let out = env.renew();
    out.expect_code(0);
    let files = env.spec("wild").files.clone();
    let leaf = support::env::Leaf::from_pem_file(&files.leaf_file());
    let mut names = leaf.dns_names.clone();
    names.sort();
    assert_eq!(names, ["*.acme-wild.test", "acme-wild.test"]);
    assert_eq!(leaf.spki, key_spki(&files.key));
    let calls = fs::read_to_string(&log).unwrap();
    let adds = calls
        .lines()
        .filter(|l| l.starts_with("add _acme-challenge.acme-wild.test TXT"))
        .count();
    let removes = calls
        .lines()
        .filter(|l| l.starts_with("remove _acme-challenge.acme-wild.test"))
        .count();
    assert!(adds >= 1 && removes >= 1, "{calls}");
    let dcv = &env.record("wild").unwrap()["dcv"];
    assert_eq!(
        dcv["dns_records"].as_array().map(Vec::len),
        Some(0),
        "{dcv}"
    );

    // The same wildcard over http-01 is a configuration error.
    env.spec_mut("wild").dcv = None;
    env.spec_mut("wild").publish = Publish::Webroot(env.path("www"));
    let bad = env.agent(["config", "check"]).run();
    assert_ne!(bad.code, Some(0));
    assert!(
        bad.text().contains("cannot validate the wildcard"),
        "{}",
        bad.describe()
    );
}

/// A 6-day certificate (Pebble's validity set to 6 days) through the daemon: installed, it is
/// not due at once (the daemon's runs leave it alone); three days on (the agent's clock moved)
/// the daemon's first run renews it by itself, and nginx serves the new 6-day certificate.
/// (The moved clock makes the new certificate three days old too: the daemon's next run, 10
/// minutes on, would renew again; the test stops it before.)
#[test]
fn a_six_day_certificate_is_renewed_by_the_daemon() {
    let domain = "www.acme-short.test";
    let six_days = 6 * 86_400;
    let Some(a) = acme_env_with(Server::Nginx, domain, Some(six_days)) else {
        return;
    };
    let first = a.env.renew();
    first.expect_code(0);
    let serial = first.installed_serial("www");
    let leaf = a.served(domain, &serial);
    assert!(
        lifetime_secs(&leaf.der).abs_diff(six_days as i64) < 120,
        "{leaf:?}"
    );

    // Right after issuance: a run finds nothing to do (not due within its first third).
    let quiet = a.env.renew();
    quiet.expect_code(0);
    assert_eq!(
        quiet.outcome("www")["outcome"],
        "unchanged",
        "{}",
        quiet.describe()
    );

    let mut daemon = a
        .env
        .agent(["run", "--interval", "600", "--first-run-delay", "0"])
        .env(
            "CERT_AGENT_TEST_CLOCK_OFFSET_SECS",
            (3 * 86_400).to_string(),
        )
        .spawn();
    let renewed = support::env::wait_until(std::time::Duration::from_secs(60), || {
        a.env.record("www").is_some_and(|r| {
            r["installed"]["serial"]
                .as_str()
                .is_some_and(|s| support::env::norm_serial(s) != serial)
        })
    });
    let _ = nix::sys::signal::kill(
        nix::unistd::Pid::from_raw(daemon.id() as i32),
        nix::sys::signal::Signal::SIGTERM,
    );
    let _ = support::env::wait_exit(&mut daemon, std::time::Duration::from_secs(10));
    assert!(renewed, "the daemon did not renew\n{}", a.pebble.log());
    let record = a.env.record("www").unwrap();
    let new_serial = record["installed"]["serial"].as_str().unwrap().to_owned();
    let leaf = a.served(domain, &support::env::norm_serial(&new_serial));
    assert!(lifetime_secs(&leaf.der).abs_diff(six_days as i64) < 120);
    assert_eq!(a.pebble.requests("/order-plz"), 2);
}

/// Seconds from a certificate's notBefore to its notAfter.
fn lifetime_secs(der: &[u8]) -> i64 {
    let (_, cert) = x509_parser::parse_x509_certificate(der).expect("a certificate");
    let v = cert.validity();
    v.not_after.timestamp() - v.not_before.timestamp()
}

/// A journaled order whose names are no longer the configured ones (a name added while the
/// order waited) is dropped, not resumed: the next run orders the configured names.
#[test]
fn an_order_for_names_no_longer_configured_is_not_resumed() {
    let domain = "www.acme-names.test";
    let Some(mut a) = acme_env(Server::Nginx, domain) else {
        return;
    };
    let crashed = a
        .env
        .agent(["--json", "renew", "--wait", "30"])
        .env("CERT_AGENT_FAILPOINT", "acme-order-placed")
        .run();
    assert!(
        crashed.stderr.contains("failpoint"),
        "{}",
        crashed.describe()
    );
    assert!(record_order_url(&a.env).is_some());
    a.env
        .spec_mut("www")
        .domains
        .push("api.acme-names.test".into());
    let out = a.env.renew();
    out.expect_code(0);
    let serial = out.installed_serial("www");
    let leaf = a.served(domain, &serial);
    let mut names = leaf.dns_names.clone();
    names.sort();
    assert_eq!(names, ["api.acme-names.test", "www.acme-names.test"]);
    assert_eq!(a.pebble.requests("/order-plz"), 2);
    assert!(a.env.journal().contains("acme-order-dropped"));
}
