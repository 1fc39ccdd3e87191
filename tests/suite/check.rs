//! `cert-agent check` (the monitoring check) through the binary with a real nginx: installed
//! and served agree (OK, no API call), the expiry thresholds (WARNING, CRITICAL), an install
//! that nginx never loaded (CRITICAL naming both serials, only with `--served`; `status
//! --served` shows it too; the metrics report what the served check saw, and what the next
//! install's own verification saw once it is fixed), and state that cannot be read (UNKNOWN).

use crate::support;

use std::fs;

use support::env::{Publish, TestEnv, Web};
use support::webserver::{Server, require};

#[test]
fn check_against_a_real_nginx() {
    if !require(Server::Nginx) {
        return;
    }
    let mut env = TestEnv::new();
    let metrics = env.path("cert_agent.prom");
    env.agent_extra = format!("metrics_file = \"{}\"\n", metrics.display());
    let served_metric = |env: &TestEnv| -> Option<String> {
        env.renew().expect_code(0);
        fs::read_to_string(&metrics)
            .unwrap()
            .lines()
            .find(|l| l.starts_with("cert_agent_certificate_served_matches_installed{"))
            .map(|l| l.rsplit(' ').next().unwrap_or_default().to_owned())
    };
    let webroot = env.path("www-root");
    let mut spec = env.cert_spec("www", &["www.check.test"], "nginx");
    spec.publish = Publish::Webroot(webroot.clone());
    env.write_placeholder(&spec);
    let web = Web::start(Server::Nginx, env.dir.path(), &[env.site(&spec, &webroot)]);
    env.certs.push(web.configure(spec));
    env.sandbox.set_dcv_ports(web.http_port(), 0);
    env.renew().expect_code(0);
    let serial_of = |env: &TestEnv| {
        env.record("www").unwrap()["installed"]["serial"]
            .as_str()
            .unwrap()
            .to_owned()
    };
    let first = serial_of(&env);
    // The install's own verification saw it served.
    assert_eq!(served_metric(&env).as_deref(), Some("1"));

    // Installed and served agree; local state only. An nginx worker of the configuration
    // before the reload may still take a connection for a moment on a loaded machine: the
    // check is about what it reports once nginx serves the installed certificate.
    let https = web.https_addr();
    assert!(
        support::env::wait_until(std::time::Duration::from_secs(10), || {
            env.served_leaf(&https, "www.check.test").is_ok_and(|l| {
                support::env::norm_serial(&l.serial) == support::env::norm_serial(&first)
            })
        }),
        "nginx does not serve the installed certificate"
    );
    let calls = env.calls().len();
    let ok = env.agent(["check", "--served"]).run();
    ok.expect_code(0);
    assert!(
        ok.stdout
            .starts_with("CERT-AGENT OK - 1 certificate(s), the nearest expiry in "),
        "{}",
        ok.describe()
    );
    assert!(
        ok.stdout.contains(" | 'www_days_left'="),
        "{}",
        ok.describe()
    );
    assert_eq!(env.calls().len(), calls, "check calls no API");
    assert_eq!(served_metric(&env).as_deref(), Some("1"));
    let status = env.agent(["status", "--served"]).run();
    status.expect_code(0);
    assert!(
        status.stdout.contains("SERVED") && status.stdout.contains(" yes "),
        "{}",
        status.describe()
    );

    // Thresholds above the days left.
    let warn = env.agent(["check", "--warning", "1000"]).run();
    warn.expect_code(1);
    assert!(
        warn.stdout.starts_with("CERT-AGENT WARNING - www: "),
        "{}",
        warn.describe()
    );
    env.agent(["check", "--warning", "1000", "--critical", "1000"])
        .run()
        .expect_code(2);

    // A reissue installed with a reload that does nothing and no verification: nginx still
    // serves the first certificate.
    let (reload, verify) = {
        let spec = &mut env.certs[0];
        let saved = (spec.reload_command.clone(), spec.verify_address.clone());
        spec.reload_command = Some(vec!["/bin/true".into()]);
        spec.verify_address = String::new();
        saved
    };
    env.agent(["--json", "reissue", "www", "--wait", "30"])
        .run()
        .expect_code(0);
    let second = serial_of(&env);
    assert_ne!(first, second);
    env.certs[0].reload_command = reload;
    env.certs[0].verify_address = verify;
    env.agent(["check"]).run().expect_code(0);
    let stale = env.agent(["check", "--served"]).run();
    stale.expect_code(2);
    assert!(
        stale
            .stdout
            .contains(&format!("serves serial {first}, installed serial {second}")),
        "{}",
        stale.describe()
    );

    assert_eq!(served_metric(&env).as_deref(), Some("0"));

    let status = env.agent(["--json", "status", "--served"]).run();
    status.expect_code(0);
    assert_eq!(
        status.json()[0]["served"],
        format!("NO: serves serial {first}"),
        "{}",
        status.describe()
    );

    // Fixed by an install that reloads and verifies: the metric is 1 again at once, without
    // another check --served (it stayed 0 until one).
    env.agent(["install", "www"]).run().expect_code(0);
    assert_eq!(served_metric(&env).as_deref(), Some("1"));
    let served = fs::read_to_string(env.state_dir().join("served.json")).unwrap();
    assert!(served.contains(&second), "{served}");

    // State that cannot be read.
    fs::write(env.state_dir().join("certs/www.json"), "{ not json").unwrap();
    let unknown = env.agent(["check"]).run();
    unknown.expect_code(3);
    assert!(
        unknown.stdout.starts_with("CERT-AGENT UNKNOWN - "),
        "{}",
        unknown.describe()
    );
}

/// `status` with one record that does not read: every certificate's row is shown (the other
/// one as usual), the unreadable one says so and names its file, and the command exits 1.
#[test]
fn status_shows_every_certificate_when_one_record_does_not_read() {
    let mut env = TestEnv::new();
    for name in ["good", "torn"] {
        let mut spec = env.cert_spec(name, &[&format!("{name}.status.test")], "none");
        spec.publish = Publish::Webroot(env.path("www"));
        env.certs.push(spec);
    }
    env.agent(["status"]).run().expect_code(0);
    let torn = env.state_dir().join("certs/torn.json");
    fs::create_dir_all(torn.parent().unwrap()).unwrap();
    fs::write(&torn, "{ torn").unwrap();
    let out = env.agent(["status"]).run();
    out.expect_code(1);
    let line = |name: &str| {
        out.stdout
            .lines()
            .find(|l| l.starts_with(name))
            .unwrap_or_default()
            .to_owned()
    };
    assert!(line("good").contains("no order"), "{}", out.describe());
    assert!(
        line("torn").contains("record unreadable"),
        "{}",
        out.describe()
    );
    assert!(
        out.stdout.contains("torn: last error: ") && out.stdout.contains("torn.json"),
        "{}",
        out.describe()
    );
    let json = env.agent(["--json", "status"]).run();
    json.expect_code(1);
    let rows: serde_json::Value = serde_json::from_str(&json.stdout).unwrap();
    assert_eq!(rows[0]["state"], "no order", "{}", json.describe());
    assert_eq!(rows[1]["state"], "record unreadable", "{}", json.describe());
}
