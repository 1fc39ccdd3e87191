//! `cert-agent renew` end to end in standalone mode: no web server, the agent's own DCV server
//! answers the sandbox's validator, the files are written to the configured paths only.

use crate::support;

use std::fs;
use std::net::TcpStream;
use std::os::unix::fs::PermissionsExt;

use support::env::{Leaf, TestEnv, key_spki};

/// Guards standalone validation and a files-only install: one billed order, the built-in
/// server serves the validation file while it is needed and is gone after the run, the
/// installed leaf, chain and full chain belong together and to the installed key, and a
/// second run calls nothing.
#[test]
fn standalone_renew_orders_validates_and_installs_files() {
    let mut env = TestEnv::new();
    let spec = env.standalone_spec("www", &["www.e2e-standalone.test"]);
    let support::env::Publish::Standalone(port) = spec.publish else {
        unreachable!()
    };
    let files = spec.files.clone();
    env.certs.push(spec);

    let out = env.renew();
    out.expect_code(0);
    let serial = out.installed_serial("www");
    assert_eq!(env.billed(), 1);
    assert_eq!(env.order_posts(), 1);

    let leaf = Leaf::from_pem_file(files.cert.as_ref().unwrap());
    assert_eq!(leaf.serial, serial);
    assert_eq!(
        leaf.spki,
        key_spki(&files.key),
        "leaf matches the installed key"
    );
    assert!(
        leaf.dns_names
            .iter()
            .any(|n| n == "www.e2e-standalone.test")
    );
    // fullchain = leaf followed by the chain.
    let cert = fs::read_to_string(files.cert.as_ref().unwrap()).unwrap();
    let chain = fs::read_to_string(files.chain.as_ref().unwrap()).unwrap();
    let full = fs::read_to_string(files.fullchain.as_ref().unwrap()).unwrap();
    assert!(chain.contains("BEGIN CERTIFICATE"), "chain: {chain}");
    assert!(!chain.contains(cert.trim()), "chain holds no leaf");
    assert!(
        full.starts_with(cert.trim_end()),
        "fullchain begins with the leaf"
    );
    assert!(full.contains(chain.trim()), "fullchain holds the chain");
    assert_eq!(
        Leaf::from_pem_file(files.fullchain.as_ref().unwrap()).serial,
        serial
    );
    assert!(
        !fs::read_to_string(&files.key).unwrap().is_empty(),
        "key written"
    );

    // The standalone server lived only as long as the run.
    assert!(
        TcpStream::connect(("127.0.0.1", port)).is_err(),
        "the DCV server on port {port} is stopped after the run"
    );
    // The state keeps no pending key once installed.
    let rec = env.record("www").unwrap();
    assert!(rec["pending_key"].is_null(), "{rec:#}");
    assert!(rec["intent"].is_null(), "{rec:#}");

    // State (records, journal, keys, token) is private to the agent.
    for p in support::env::files_under(&env.state_dir()) {
        let mode = fs::metadata(&p).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode & 0o077, 0, "{} has mode {mode:o}", p.display());
    }
    let journal = env.journal();
    assert!(!journal.contains("PRIVATE KEY"), "no key in the journal");
    assert!(
        !journal.contains(support::env::PASSWORD),
        "no password in the journal"
    );

    let calls = env.calls().len();
    let again = env.renew();
    again.expect_code(0);
    assert_eq!(env.calls().len(), calls, "nothing due: no API call");
    assert_eq!(
        Leaf::from_pem_file(files.cert.as_ref().unwrap()).serial,
        serial
    );
}

/// One standalone issuance of `product_id` with `key_type`; checks the installed leaf is for
/// the installed key (of the requested algorithm) and for every name.
fn issue_standalone(product_id: u64, key_type: &str, domains: &[&str]) {
    let mut env = TestEnv::new();
    let mut spec = env.standalone_spec("www", domains);
    spec.product_id = product_id;
    spec.extra = format!("key_type = \"{key_type}\"\n");
    let files = spec.files.clone();
    env.certs.push(spec);
    let out = env.renew();
    out.expect_code(0);
    let serial = out.installed_serial("www");
    let leaf = Leaf::from_pem_file(files.cert.as_ref().unwrap());
    assert_eq!(leaf.serial, serial);
    assert_eq!(leaf.spki, key_spki(&files.key), "{product_id}/{key_type}");
    for d in domains {
        assert!(
            leaf.dns_names.iter().any(|n| n == d),
            "{d} in {:?}",
            leaf.dns_names
        );
    }
    let algorithm = match key_type {
        "rsa-2048" => "1.2.840.113549.1.1.1",
        _ => "1.2.840.10045.2.1",
    };
    let (_, cert) = x509_parser::parse_x509_certificate(&leaf.der).unwrap();
    assert_eq!(
        cert.public_key().algorithm.algorithm.to_id_string(),
        algorithm,
        "{key_type}"
    );
    assert_eq!(env.billed(), 1);
}

/// Guards family D (product 2101): HTTP validation without DCV-status hashes.
#[test]
fn family_d_product_issues_and_installs() {
    issue_standalone(2101, "ecdsa-p256", &["www.e2e-family-d.test"]);
}

/// Guards family C (product 3101): HTTP validation, issuance at the CA's pickup.
#[test]
fn family_c_product_issues_and_installs() {
    issue_standalone(3101, "ecdsa-p256", &["www.e2e-family-c.test"]);
}

/// Guards RSA keys end to end (key, CSR, order, leaf for that key).
#[test]
fn rsa_2048_key_issues_and_installs() {
    issue_standalone(1101, "rsa-2048", &["www.e2e-rsa.test"]);
}

/// Guards P-384 keys end to end.
#[test]
fn ecdsa_p384_key_issues_and_installs() {
    issue_standalone(1101, "ecdsa-p384", &["www.e2e-p384.test"]);
}

/// Guards multi-name certificates (ucc product 1103): every name is ordered, validated through
/// the standalone server and present in the leaf.
#[test]
fn ucc_product_with_several_names_issues_and_installs() {
    issue_standalone(
        1103,
        "ecdsa-p256",
        &["www.e2e-ucc.test", "e2e-ucc.test", "api.e2e-ucc.test"],
    );
}

/// Guards `deploy_hook`: run once after a successful install with the name, domains and
/// installed paths in its environment.
#[test]
fn deploy_hook_runs_after_install_with_paths() {
    let mut env = TestEnv::new();
    let hook = env.path("deploy.sh");
    let log = env.path("deploy.log");
    support::env::write_script(
        &hook,
        &format!(
            "env | grep '^CERT_AGENT_' | sort >> '{}'\necho --- >> '{}'\n",
            log.display(),
            log.display()
        ),
    );
    let mut spec = env.standalone_spec("www", &["www.e2e-deploy.test", "e2e-deploy.test"]);
    spec.product_id = 1103;
    spec.extra = format!("deploy_hook = [\"{}\"]\n", hook.display());
    let files = spec.files.clone();
    env.certs.push(spec);
    env.renew().expect_code(0);
    let text = fs::read_to_string(&log).expect("the deploy hook ran");
    assert_eq!(text.matches("---").count(), 1, "ran once: {text}");
    for line in [
        "CERT_AGENT_NAME=www".to_string(),
        "CERT_AGENT_DOMAINS=www.e2e-deploy.test e2e-deploy.test".to_string(),
        format!("CERT_AGENT_KEY_PATH={}", files.key.display()),
        format!(
            "CERT_AGENT_FULLCHAIN_PATH={}",
            files.fullchain.as_ref().unwrap().display()
        ),
        format!(
            "CERT_AGENT_CERT_PATH={}",
            files.cert.as_ref().unwrap().display()
        ),
    ] {
        assert!(text.lines().any(|l| l == line), "{line} in:\n{text}");
    }
    // Nothing due: the hook does not run again.
    env.renew().expect_code(0);
    assert_eq!(fs::read_to_string(&log).unwrap().matches("---").count(), 1);
}

/// Guards `--dry-run`: it says what it would do, places no order, writes no file.
#[test]
fn dry_run_orders_nothing_and_writes_nothing() {
    let mut env = TestEnv::new();
    let spec = env.standalone_spec("www", &["www.e2e-dry.test"]);
    let files = spec.files.clone();
    env.certs.push(spec);
    let out = env.agent(["--json", "renew", "--dry-run"]).run();
    out.expect_code(0);
    assert_eq!(
        out.outcome("www")["outcome"],
        "planned",
        "{}",
        out.describe()
    );
    assert_eq!(env.order_posts(), 0);
    assert_eq!(env.billed(), 0);
    for p in files.all() {
        assert!(!p.exists(), "{} written", p.display());
    }
}

/// Guards sign-in renewal: the token cached by a run that ended pending is replaced by another
/// sign-in; the next run signs in again and completes the same order.
#[test]
fn replaced_token_between_runs_is_renewed() {
    let mut env = TestEnv::new();
    let spec = env.standalone_spec("www", &["www.e2e-token.test"]);
    env.certs.push(spec);
    // Validation cannot succeed while nothing listens where the sandbox looks.
    env.sandbox
        .set_dcv_ports(support::webserver::free_port(), 0);
    env.agent(["renew", "--wait", "2"]).run().expect_code(75);
    assert_eq!(env.billed(), 1);
    env.sandbox.rotate_token(support::env::LOGIN).unwrap();
    let support::env::Publish::Standalone(port) = env.certs[0].publish else {
        unreachable!()
    };
    env.sandbox.set_dcv_ports(port, 0);
    let out = env.renew();
    out.expect_code(0);
    out.installed_serial("www");
    assert_eq!(env.billed(), 1);
    assert!(
        env.calls().iter().any(|c| c.status == 401),
        "the old token was refused once"
    );
}

/// Guards transient API failures on reads: a 503 on the details call (a new order's first
/// check, right after it is placed) and 502s on the bundle download are retried within the
/// run (idempotent calls), and the run still installs with one order.
#[test]
fn transient_server_errors_on_reads_are_retried() {
    use partner_sandbox::{Fault, FaultKind};
    let mut env = TestEnv::new();
    let spec = env.standalone_spec("www", &["www.e2e-transient.test"]);
    env.certs.push(spec);
    env.sandbox.inject(
        Fault::new(FaultKind::Status { status: 503 })
            .method("GET")
            .path("/api/v1/ssl_certificates/*"),
    );
    env.sandbox.inject(
        Fault::new(FaultKind::Status { status: 502 })
            .path("/api/v1/ssl_certificates/*/download_bundle")
            .times(2),
    );
    let out = env.renew();
    out.expect_code(0);
    out.installed_serial("www");
    assert_eq!(env.billed(), 1);
    assert!(
        env.sandbox.faults().is_empty(),
        "every fault was hit: {:?}",
        env.sandbox.faults()
    );
}

/// Guards issued-but-not-downloadable: the bundle answers 422 "PEM data is not available";
/// the run ends pending (75) without installing, and the next run installs.
#[test]
fn bundle_not_available_yet_is_pending_then_installed() {
    use partner_sandbox::{BundleFailure, Fault, FaultKind};
    let mut env = TestEnv::new();
    let spec = env.standalone_spec("www", &["www.e2e-pem-later.test"]);
    let files = spec.files.clone();
    env.certs.push(spec);
    env.sandbox.inject(Fault::new(FaultKind::BundleFailure {
        failure: BundleFailure::PemNotAvailable,
    }));
    let first = env.agent(["renew", "--wait", "0"]).run();
    first.expect_code(75);
    assert!(!files.key.exists(), "nothing installed yet");
    let out = env.renew();
    out.expect_code(0);
    out.installed_serial("www");
    assert_eq!(env.billed(), 1);
    assert_eq!(env.order_posts(), 1);
}

/// Guards a CA that cannot be reached for the DCV status (422 from the DCV call): the agent's
/// own CSR hashes already match the content, so validation and install go on.
#[test]
fn dcv_status_unavailable_does_not_block_validation() {
    use partner_sandbox::{Fault, FaultKind};
    let mut env = TestEnv::new();
    let spec = env.standalone_spec("www", &["www.e2e-ca-down.test"]);
    env.certs.push(spec);
    env.sandbox
        .inject(Fault::new(FaultKind::CaUnreachable).times(5));
    let out = env.renew();
    out.expect_code(0);
    out.installed_serial("www");
}

/// Guards the private key's mode when replacing an existing key file that others could read:
/// the new key is written without any access for others (the owner's and group's bits are
/// kept), and the change is reported on stderr with the path.
#[test]
fn replaced_world_readable_key_loses_access_for_others() {
    let mut env = TestEnv::new();
    let spec = env.standalone_spec("www", &["www.e2e-keymode.test"]);
    env.write_placeholder(&spec);
    let files = spec.files.clone();
    fs::set_permissions(&files.key, fs::Permissions::from_mode(0o644)).unwrap();
    env.certs.push(spec);
    let out = env.renew();
    out.expect_code(0);
    let mode = fs::metadata(&files.key).unwrap().permissions().mode() & 0o777;
    assert_eq!(mode, 0o640, "owner and group bits kept, others removed");
    assert!(
        out.stderr.contains(&files.key.display().to_string()),
        "the mode change is reported with the path\n{}",
        out.describe()
    );
}

/// Guards email validation: the run ends pending (75) telling the operator to approve the
/// message; once approved at the CA, the next run installs the same order.
#[test]
fn email_validation_waits_for_the_operator() {
    let mut env = TestEnv::new();
    let domain = "www.e2e-email.test";
    let mut spec = env.cert_spec("www", &[domain], "none");
    spec.dcv = Some("email".into());
    spec.extra = format!("dcv_email = \"admin@{domain}\"\n");
    env.certs.push(spec);
    let first = env.agent(["renew", "--wait", "2"]).run();
    first.expect_code(75);
    assert!(
        first.stdout.contains("approve") && first.stdout.contains(&format!("admin@{domain}")),
        "the operator is told what to approve\n{}",
        first.describe()
    );
    let id = env.record("www").unwrap()["order"]["certificate_id"]
        .as_u64()
        .unwrap();
    env.sandbox.approve_email(id, None).unwrap();
    let out = env.renew();
    out.expect_code(0);
    out.installed_serial("www");
    assert_eq!(env.billed(), 1);
    assert_eq!(env.order_posts(), 1);
}

/// Guards an order cancelled at the CA while validation is pending: the next run fails
/// clearly, removes its validation file, and does not order a replacement by itself.
#[test]
fn cancelled_order_is_not_replaced_automatically() {
    let mut env = TestEnv::new();
    let webroot = env.path("www-root");
    fs::create_dir_all(&webroot).unwrap();
    let mut spec = env.cert_spec("www", &["www.e2e-annulled.test"], "none");
    spec.publish = support::env::Publish::Webroot(webroot.clone());
    env.certs.push(spec);
    // Nothing serves the web root: validation stays pending.
    env.sandbox
        .set_dcv_ports(support::webserver::free_port(), 0);
    env.agent(["renew", "--wait", "2"]).run().expect_code(75);
    assert_eq!(support::env::files_under(&webroot).len(), 1);
    let id = env.record("www").unwrap()["order"]["certificate_id"]
        .as_u64()
        .unwrap();
    env.sandbox.force_status(id, "annulled").unwrap();

    let out = env.renew();
    out.expect_code(1);
    assert!(out.text().contains("annulled"), "{}", out.describe());
    assert_eq!(env.billed(), 1);
    assert_eq!(env.order_posts(), 1, "no replacement order");
    assert!(
        support::env::files_under(&webroot).is_empty(),
        "{:?}",
        support::env::files_under(&webroot)
    );
    env.renew_force().expect_code(1);
    assert_eq!(env.order_posts(), 1, "not even when forced");
}
