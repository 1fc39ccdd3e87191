//! Rollback end to end: when installing a new certificate fails after the files were written
//! (config test fails, or the server does not serve the new serial), the previous files are
//! restored byte for byte and the previous certificate is still served.

use crate::support;

use std::fs;

use support::env::{Leaf, Publish, TestEnv, Web, snapshot};
use support::webserver::{Server, Site, require};

/// Makes the next run order a new certificate for `name`, as if the first one had never been
/// recorded (the installed files stay).
fn forget_order(env: &TestEnv, name: &str) {
    env.edit_record(name, |r| {
        r["order"] = serde_json::Value::Null;
        r["installed"] = serde_json::Value::Null;
        r["last_poll"] = serde_json::Value::Null;
        r["last_state"] = serde_json::Value::Null;
    });
}

/// nginx serving certificate A, installed by a first run; returns (env, nginx, serial A).
fn installed_on_nginx(domain: &str) -> Option<(TestEnv, Web, String)> {
    if !require(Server::Nginx) {
        return None;
    }
    let mut env = TestEnv::new();
    let webroot = env.path("www-root");
    let mut spec = env.cert_spec("www", &[domain], "nginx");
    spec.publish = Publish::Webroot(webroot.clone());
    env.write_placeholder(&spec);
    let web = Web::start(Server::Nginx, env.dir.path(), &[env.site(&spec, &webroot)]);
    env.sandbox.set_dcv_ports(web.http_port(), 0);
    env.certs.push(web.configure(spec));
    let out = env.renew();
    out.expect_code(0);
    let serial = out.installed_serial("www");
    env.served_leaf_with_serial(&web.https_addr(), domain, &serial)
        .unwrap();
    Some((env, web, serial))
}

/// Guards the config-test rollback with a real nginx: certificate B is downloaded and written,
/// `configtest_command` fails, the files of A come back byte-identical, nginx is not reloaded
/// onto B and still serves A, and the run fails.
#[test]
fn failing_config_test_restores_previous_files_and_keeps_serving() {
    let domain = "www.e2e-rollback-test.test";
    let Some((mut env, web, serial_a)) = installed_on_nginx(domain) else {
        return;
    };
    let files = env.spec("www").files.clone();
    let a = snapshot(&files.all());
    forget_order(&env, "www");
    env.spec_mut("www").configtest_command = Some(vec!["false".into()]);

    let out = env.renew();
    out.expect_code(1);
    assert_eq!(
        env.billed(),
        2,
        "a second certificate was ordered and issued"
    );
    assert_eq!(
        snapshot(&files.all()),
        a,
        "previous files restored byte for byte"
    );
    let served = env.served_leaf(&web.https_addr(), domain).unwrap();
    assert_eq!(served.serial, serial_a, "A is still served");
    assert!(
        out.outcome("www")["error"]
            .as_str()
            .unwrap_or_default()
            .to_lowercase()
            .contains("config"),
        "the error names the config test\n{}",
        out.describe()
    );
}

/// Guards the served-serial rollback: B is installed and nginx reloaded, but the verification
/// address is another server still serving something else, so the agent restores A, reloads,
/// and fails; A is what nginx serves afterwards.
#[test]
fn served_serial_mismatch_rolls_back_and_fails() {
    let domain = "www.e2e-rollback-verify.test";
    let Some((mut env, web, serial_a)) = installed_on_nginx(domain) else {
        return;
    };
    // A second nginx with a certificate of its own for the same name.
    let other_dir = env.path("other");
    fs::create_dir_all(&other_dir).unwrap();
    let mut decoy = env.cert_spec("decoy", &[domain], "nginx");
    decoy.publish = Publish::Nothing;
    env.write_placeholder(&decoy);
    let decoy_root = env.path("decoy-root");
    let decoy_web = Web::start(
        Server::Nginx,
        &other_dir,
        &[Site::new(
            domain,
            decoy.files.fullchain.clone().unwrap(),
            &decoy.files.key,
            &decoy_root,
        )],
    );

    let files = env.spec("www").files.clone();
    let a = snapshot(&files.all());
    forget_order(&env, "www");
    env.spec_mut("www").verify_address = decoy_web.https_addr();

    let out = env.renew();
    out.expect_code(1);
    assert_eq!(env.billed(), 2);
    assert_eq!(
        snapshot(&files.all()),
        a,
        "previous files restored byte for byte"
    );
    let served = env
        .served_leaf_with_serial(&web.https_addr(), domain, &serial_a)
        .unwrap();
    assert_eq!(
        served.serial, serial_a,
        "A is served again after the rollback"
    );
    assert_eq!(Leaf::from_pem_file(&files.leaf_file()).serial, serial_a);
}

/// Guards the config-test rollback without a web server: files-only layout with a failing
/// `configtest_command`; nothing that was there before changes.
#[test]
fn failing_config_test_restores_files_without_web_server() {
    let mut env = TestEnv::new();
    let spec = env.standalone_spec("www", &["files.e2e-rollback.test"]);
    let files = spec.files.clone();
    env.certs.push(spec);
    env.renew().expect_code(0);
    let a = snapshot(&files.all());
    assert_eq!(a.len(), files.all().len());

    forget_order(&env, "www");
    env.spec_mut("www").configtest_command = Some(vec!["false".into()]);
    let out = env.renew();
    out.expect_code(1);
    assert_eq!(env.billed(), 2);
    assert_eq!(
        snapshot(&files.all()),
        a,
        "previous files restored byte for byte"
    );
}

/// Guards recovery after a rollback: once the config test passes again, the next (forced) run
/// installs
/// the certificate that was rolled back (same order, same key), without ordering again.
#[test]
fn next_run_after_rollback_installs_the_pending_certificate() {
    let mut env = TestEnv::new();
    let spec = env.standalone_spec("www", &["retry.e2e-rollback.test"]);
    let files = spec.files.clone();
    env.certs.push(spec);
    let first = env.renew();
    first.expect_code(0);
    let serial_a = first.installed_serial("www");

    forget_order(&env, "www");
    env.spec_mut("www").configtest_command = Some(vec!["false".into()]);
    env.renew().expect_code(1);
    assert_eq!(env.billed(), 2);

    env.spec_mut("www").configtest_command = Some(vec!["true".into()]);
    let out = env.renew_force();
    out.expect_code(0);
    let serial_b = out.installed_serial("www");
    assert_ne!(serial_a, serial_b);
    let leaf = Leaf::from_pem_file(files.cert.as_ref().unwrap());
    assert_eq!(leaf.serial, serial_b);
    assert_eq!(leaf.spki, support::env::key_spki(&files.key));
    assert_eq!(env.billed(), 2, "no third order");
    assert_eq!(env.order_posts(), 2);
}

/// Guards the config-test rollback with a real apache2 (leaf and chain in separate files).
#[test]
fn failing_config_test_restores_previous_files_on_apache() {
    if !require(Server::Apache) {
        return;
    }
    let domain = "www.e2e-rollback-apache.test";
    let mut env = TestEnv::new();
    let webroot = env.path("www-root");
    let mut spec = env.cert_spec("www", &[domain], "apache");
    spec.publish = Publish::Webroot(webroot.clone());
    env.write_placeholder(&spec);
    let web = Web::start(Server::Apache, env.dir.path(), &[env.site(&spec, &webroot)]);
    env.sandbox.set_dcv_ports(web.http_port(), 0);
    let files = spec.files.clone();
    env.certs.push(web.configure(spec));
    let first = env.renew();
    first.expect_code(0);
    let serial_a = first.installed_serial("www");
    env.served_leaf_with_serial(&web.https_addr(), domain, &serial_a)
        .unwrap();
    let a = snapshot(&files.all());

    forget_order(&env, "www");
    env.spec_mut("www").configtest_command = Some(vec!["false".into()]);
    env.renew().expect_code(1);
    assert_eq!(
        snapshot(&files.all()),
        a,
        "previous files restored byte for byte"
    );
    assert_eq!(
        env.served_leaf(&web.https_addr(), domain).unwrap().serial,
        serial_a
    );
}

/// Guards the failure message of a rolled-back install: it names the config test and says the
/// previous files were restored, and states the command's failure once (not repeated by the
/// error chain).
#[test]
fn config_test_failure_is_reported_once() {
    let mut env = TestEnv::new();
    let spec = env.standalone_spec("www", &["message.e2e-rollback.test"]);
    env.certs.push(spec);
    env.renew().expect_code(0);
    forget_order(&env, "www");
    env.spec_mut("www").configtest_command = Some(vec!["false".into()]);
    let out = env.renew();
    out.expect_code(1);
    let error = out.outcome("www")["error"]
        .as_str()
        .unwrap_or_default()
        .to_owned();
    assert!(error.contains("previous files restored"), "{error}");
    assert_eq!(
        error.matches("`false` failed").count(),
        1,
        "the cause is stated once: {error}"
    );
}
