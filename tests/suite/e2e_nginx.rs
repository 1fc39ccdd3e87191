//! `cert-agent renew` end to end with a real nginx: order once, HTTP validation fetched through
//! nginx from the web root, install, config test, reload, verification of what is served; and
//! what happens when validation is not finished within a run or the run is killed meanwhile.

use crate::combined_flow;
use crate::support;

use std::fs;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::time::Duration;

use nix::sys::signal::{Signal, kill};
use nix::unistd::Pid;
use support::env::{Publish, TestEnv, Web, files_under, key_spki, wait_until};
use support::webserver::{Server, free_port, require};

/// Guards the product's main path on nginx: a host with a configured certificate and no order
/// ends up serving a sandbox-issued certificate for the name, with the key generated on the
/// host, after exactly one billed order; the next run does nothing and calls nothing.
#[test]
fn renew_orders_validates_through_nginx_installs_and_serves() {
    support::env::web_server_flow(Server::Nginx, "www.e2e-nginx.test");
}

/// nginx serving a placeholder for `domains` from `DIR/www-root`; the certificate configured
/// for it (webroot mode), `dcv` as given. The sandbox's DCV ports are left to the caller.
fn nginx_env(domains: &[&str], dcv: Option<&str>) -> Option<(TestEnv, Web, PathBuf)> {
    if !require(Server::Nginx) {
        return None;
    }
    let mut env = TestEnv::new();
    let webroot = env.path("www-root");
    let mut spec = env.cert_spec("www", domains, "nginx");
    spec.publish = Publish::Webroot(webroot.clone());
    spec.dcv = dcv.map(str::to_owned);
    if domains.len() > 1 {
        spec.product_id = 1103;
    }
    env.write_placeholder(&spec);
    let web = Web::start(Server::Nginx, env.dir.path(), &[env.site(&spec, &webroot)]);
    env.certs.push(web.configure(spec));
    Some((env, web, webroot))
}

fn validation_files(webroot: &Path) -> Vec<PathBuf> {
    files_under(webroot)
}

/// Guards multi-name validation through one vhost: each name of a ucc order is fetched
/// through nginx (Host = that name) and the served leaf covers every name, whichever SNI.
#[test]
fn several_names_validated_through_nginx() {
    let names = [
        "www.e2e-multi.test",
        "e2e-multi.test",
        "static.e2e-multi.test",
    ];
    let Some((env, web, webroot)) = nginx_env(&names, None) else {
        return;
    };
    env.sandbox.set_dcv_ports(web.http_port(), 0);
    let out = env.renew();
    out.expect_code(0);
    let serial = out.installed_serial("www");
    for name in names {
        let leaf = env
            .served_leaf_with_serial(&web.https_addr(), name, &serial)
            .unwrap_or_else(|e| panic!("{name}: {e}"));
        assert_eq!(leaf.serial, serial, "{name}");
    }
    assert!(validation_files(&webroot).is_empty());
    assert_eq!(env.billed(), 1);
}

/// Guards HTTPS_CSR_HASH: the sandbox fetches the file over TLS from nginx's HTTPS vhost
/// (still serving the placeholder), and the result is installed like over HTTP.
#[test]
fn https_validation_through_nginx() {
    let domain = "www.e2e-https-dcv.test";
    let Some((env, web, webroot)) = nginx_env(&[domain], Some("https")) else {
        return;
    };
    env.sandbox.set_dcv_ports(free_port(), web.https_port());
    let out = env.renew();
    out.expect_code(0);
    let serial = out.installed_serial("www");
    env.served_leaf_with_serial(&web.https_addr(), domain, &serial)
        .unwrap();
    assert!(validation_files(&webroot).is_empty());
}

/// Guards a run that ends before validation: exit 75 with the validation file published
/// (world-readable, named by the CSR's MD5, first line the CSR's SHA-256), at most one status
/// call per `poll_interval_secs`; the next run continues the same order, installs, and
/// removes the file.
#[test]
fn pending_validation_exits_75_and_next_run_continues() {
    let domain = "www.e2e-pending.test";
    let Some((mut env, web, webroot)) = nginx_env(&[domain], None) else {
        return;
    };
    env.poll_interval_secs = 2;
    // Nothing listens where the sandbox looks: validation cannot succeed yet.
    env.sandbox.set_dcv_ports(free_port(), 0);
    let first = env.agent(["renew", "--wait", "5"]).run();
    first.expect_code(75);
    assert!(first.stdout.contains("pending"), "{}", first.describe());
    assert_eq!(env.billed(), 1);

    let rec = env.record("www").unwrap();
    let md5 = rec["pending_key"]["csr_md5"].as_str().unwrap().to_owned();
    let sha = rec["pending_key"]["csr_sha256"]
        .as_str()
        .unwrap()
        .to_owned();
    let file = webroot.join(format!(".well-known/pki-validation/{md5}.txt"));
    let content = fs::read_to_string(&file).unwrap_or_else(|e| {
        panic!(
            "{}: {e}; present: {:?}",
            file.display(),
            validation_files(&webroot)
        )
    });
    assert_eq!(content.lines().next(), Some(sha.as_str()));
    let mode = fs::metadata(&file).unwrap().permissions().mode() & 0o777;
    assert_eq!(mode & 0o044, 0o044, "world-readable: {mode:o}");
    // Served by nginx to anyone asking for the name.
    let (status, body) = support::webserver::http_get(
        &format!("127.0.0.1:{}", web.http_port()),
        domain,
        &format!("/.well-known/pki-validation/{md5}.txt"),
    )
    .unwrap();
    assert_eq!((status, body), (200, content.into_bytes()));

    // Polling discipline: status calls at least poll_interval_secs apart.
    let times: Vec<_> = env
        .calls()
        .into_iter()
        .filter(|c| c.path.ends_with("/status"))
        .map(|c| c.time)
        .collect();
    assert!(!times.is_empty());
    for w in times.windows(2) {
        let gap = w[1] - w[0];
        assert!(
            gap >= time::Duration::milliseconds(1900),
            "status calls {gap} apart: {times:?}"
        );
    }

    env.sandbox.set_dcv_ports(web.http_port(), 0);
    let second = env.renew();
    second.expect_code(0);
    let serial = second.installed_serial("www");
    env.served_leaf_with_serial(&web.https_addr(), domain, &serial)
        .unwrap();
    assert_eq!(env.billed(), 1, "the same order was continued");
    assert_eq!(env.order_posts(), 1);
    assert!(
        validation_files(&webroot).is_empty(),
        "{:?}",
        validation_files(&webroot)
    );
}

/// Guards crash safety during validation: the agent is killed while waiting for the CA with the
/// file published; the next run places no new order, completes, and removes the file the
/// killed run left behind.
#[test]
fn killed_during_validation_next_run_completes_and_cleans_up() {
    let domain = "www.e2e-killed-dcv.test";
    let Some((env, web, webroot)) = nginx_env(&[domain], None) else {
        return;
    };
    env.sandbox.set_dcv_ports(free_port(), 0);
    let mut child = env.agent(["renew", "--wait", "60"]).spawn();
    // Published and recorded in the state (the write-ahead of the cleanup).
    let published = wait_until(Duration::from_secs(20), || {
        !validation_files(&webroot).is_empty()
            && env
                .record("www")
                .is_some_and(|r| r["dcv"]["files"].as_array().is_some_and(|f| !f.is_empty()))
    });
    kill(Pid::from_raw(child.id() as i32), Signal::SIGKILL).unwrap();
    child.wait().unwrap();
    assert!(published, "the validation file was published");
    assert_eq!(env.billed(), 1);

    env.sandbox.set_dcv_ports(web.http_port(), 0);
    let out = env.renew();
    out.expect_code(0);
    let serial = out.installed_serial("www");
    let leaf = env
        .served_leaf_with_serial(&web.https_addr(), domain, &serial)
        .unwrap();
    assert_eq!(leaf.spki, key_spki(&env.spec("www").files.key));
    assert_eq!(env.billed(), 1);
    assert_eq!(env.order_posts(), 1);
    assert!(
        validation_files(&webroot).is_empty(),
        "{:?}",
        validation_files(&webroot)
    );
}

/// Guards per-domain web roots: two vhosts with their own document roots share one
/// certificate; each name's validation file goes into its own root (fetched through its own
/// vhost), both roots are clean afterwards, and both vhosts serve the new certificate.
#[test]
fn per_domain_webroots_through_two_vhosts() {
    if !require(Server::Nginx) {
        return;
    }
    let names = ["www.e2e-vhosts.test", "shop.e2e-vhosts.test"];
    let mut env = TestEnv::new();
    let roots: Vec<PathBuf> = names
        .iter()
        .map(|n| env.path(&format!("root-{n}")))
        .collect();
    let mut spec = env.cert_spec("www", &names, "nginx");
    spec.product_id = 1103;
    spec.publish = Publish::WebrootPerDomain(
        names
            .iter()
            .zip(&roots)
            .map(|(n, r)| (n.to_string(), r.clone()))
            .collect(),
    );
    env.write_placeholder(&spec);
    let sites: Vec<_> = names
        .iter()
        .zip(&roots)
        .map(|(n, r)| {
            let mut one = spec.clone();
            one.domains = vec![n.to_string()];
            env.site(&one, r)
        })
        .collect();
    let web = Web::start(Server::Nginx, env.dir.path(), &sites);
    env.sandbox.set_dcv_ports(web.http_port(), 0);
    env.certs.push(web.configure(spec));

    let out = env.renew();
    out.expect_code(0);
    let serial = out.installed_serial("www");
    for n in names {
        env.served_leaf_with_serial(&web.https_addr(), n, &serial)
            .unwrap_or_else(|e| panic!("{n}: {e}"));
    }
    for r in &roots {
        assert!(files_under(r).is_empty(), "{:?}", files_under(r));
    }
    assert_eq!(env.billed(), 1);
}

/// Guards cleanup after a crash right after the validation file was written but before the
/// state recorded it (simulated: the record's list of published files is emptied after a
/// pending run). The sandbox validates from the leftover file; the next run must still remove
/// it: its path is known from the web root and the pending CSR.
#[test]
fn validation_file_unrecorded_by_a_crash_is_removed() {
    let domain = "www.e2e-unrecorded.test";
    let Some((env, web, webroot)) = nginx_env(&[domain], None) else {
        return;
    };
    env.sandbox.set_dcv_ports(free_port(), 0);
    env.agent(["renew", "--wait", "2"]).run().expect_code(75);
    assert_eq!(validation_files(&webroot).len(), 1);
    env.edit_record("www", |r| {
        r["dcv"]["files"] = serde_json::json!([]);
        r["dcv"]["dirs"] = serde_json::json!([]);
    });

    // The CA validates from the file that is still there (before the next run).
    env.sandbox.set_dcv_ports(web.http_port(), 0);
    env.sandbox.validate_now();
    let out = env.renew();
    out.expect_code(0);
    out.installed_serial("www");
    assert_eq!(env.billed(), 1);
    assert!(
        validation_files(&webroot).is_empty(),
        "validation file left in the web root: {:?}",
        validation_files(&webroot)
    );
}

/// Guards "once per run and per web server": two certificates for two vhosts of one nginx are
/// installed in one run with one config test and one reload, and both are served.
#[test]
fn two_certificates_one_reload() {
    if !require(Server::Nginx) {
        return;
    }
    let mut env = TestEnv::new();
    let webroot = env.path("www-root");
    let names = ["one.e2e-reload.test", "two.e2e-reload.test"];
    let specs: Vec<_> = names
        .iter()
        .enumerate()
        .map(|(i, n)| {
            let mut s = env.cert_spec(&format!("c{i}"), &[n], "nginx");
            s.publish = Publish::Webroot(webroot.clone());
            env.write_placeholder(&s);
            s
        })
        .collect();
    let sites: Vec<_> = specs.iter().map(|s| env.site(s, &webroot)).collect();
    let web = Web::start(Server::Nginx, env.dir.path(), &sites);
    env.sandbox.set_dcv_ports(web.http_port(), 0);
    let log = env.path("commands.log");
    let wrapper = env.path("log-and-run.sh");
    support::env::write_script(
        &wrapper,
        &format!("echo \"$1\" >> '{}'\nshift\nexec \"$@\"\n", log.display()),
    );
    let wrap = |what: &str, argv: Vec<String>| {
        let mut v = vec![wrapper.to_string_lossy().into_owned(), what.to_string()];
        v.extend(argv);
        v
    };
    for s in specs {
        let s = web.configure(s);
        let mut s = s;
        s.configtest_command = Some(wrap("configtest", web.configtest_command()));
        s.reload_command = Some(wrap("reload", web.reload_command()));
        env.certs.push(s);
    }
    let out = env.renew();
    out.expect_code(0);
    for (i, n) in names.iter().enumerate() {
        let serial = out.installed_serial(&format!("c{i}"));
        env.served_leaf_with_serial(&web.https_addr(), n, &serial)
            .unwrap_or_else(|e| panic!("{n}: {e}"));
    }
    let log = fs::read_to_string(&log).unwrap();
    assert_eq!(log.matches("reload").count(), 1, "one reload:\n{log}");
    assert_eq!(
        log.matches("configtest").count(),
        1,
        "one config test:\n{log}"
    );
    assert_eq!(env.billed(), 2);
}

/// Guards `combined_path` with nginx: the combined file is the only install path and nginx
/// names it in `ssl_certificate` and `ssl_certificate_key`; the new certificate is served
/// after the run, the next run sees it installed, and a reinstall reads the key back from it.
#[test]
fn combined_file_only_through_nginx() {
    combined_flow::combined_only_flow(Server::Nginx, "www.e2e-nginx-combined.test");
}
