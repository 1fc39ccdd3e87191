//! The `combined_path` flow shared by `e2e_nginx` and `e2e_apache`.

use std::fs;
use std::os::unix::fs::MetadataExt;
use std::process::{Command, Stdio};

use rcgen::PublicKeyData;
use rustls_pki_types::pem::PemObject;

use crate::support::env::{AgentOutput, Leaf, Publish, TestEnv, Web};
use crate::support::webserver::{Server, Site, require};

/// `cert-agent renew` end to end with `combined_path` as the only install path, on a real
/// `kind` server that uses the combined file as certificate and key: the placeholder combined
/// file is served; the run orders once, validates through the server, installs the combined
/// file (key followed by the full chain, 0600, nothing else written), tests and reloads the
/// server; a TLS handshake shows the new leaf for the key in the file. The next run sees it
/// installed (no API call); `cert-agent install` reinstalls it with the key read back from
/// the combined file; `status` shows it installed.
pub(crate) fn combined_only_flow(kind: Server, domain: &str) {
    if !require(kind) {
        return;
    }
    let mut env = TestEnv::new();
    let server = match kind {
        Server::Nginx => "nginx",
        Server::Apache => "apache",
    };
    let webroot = env.path("www-root");
    let combined = env.path("out/www/www.pem");
    let mut spec = env.cert_spec("www", &[domain], server);
    spec.publish = Publish::Webroot(webroot.clone());
    spec.extra = format!("combined_path = {:?}\n", combined.to_str().unwrap());
    let site = Site::new(domain, &combined, &combined, &webroot);
    let web = Web::start(kind, env.dir.path(), &[site]);
    env.sandbox.set_dcv_ports(web.http_port(), 0);
    env.certs.push(web.configure(spec));
    let placeholder = fs::read(&combined).unwrap();

    // The test environment writes the layout's separate paths; this configuration names
    // the combined file alone.
    let config = env.path("combined-only.toml");
    let text: String = env
        .config_text()
        .lines()
        .filter(|l| {
            ![
                "cert_path =",
                "chain_path =",
                "fullchain_path =",
                "key_path =",
            ]
            .iter()
            .any(|k| l.starts_with(k))
        })
        .map(|l| format!("{l}\n"))
        .collect();
    assert!(text.contains("combined_path ="), "{text}");
    fs::write(&config, text).unwrap();
    let agent = |args: &[&str]| {
        let out = Command::new(env!("CARGO_BIN_EXE_cert-agent"))
            .arg("--config")
            .arg(&config)
            .args(args)
            .env_remove("CERT_AGENT_CONFIG")
            .stdin(Stdio::null())
            .output()
            .expect("cert-agent runs");
        AgentOutput {
            code: out.status.code(),
            stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
            stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
            args: args.iter().map(|a| a.to_string()).collect(),
        }
    };
    let key_spki = || {
        let key = rustls_pki_types::PrivateKeyDer::from_pem_file(&combined).unwrap();
        rcgen::KeyPair::try_from(&key)
            .unwrap()
            .subject_public_key_info()
    };

    let out = agent(&["--json", "renew", "--wait", "30"]);
    out.expect_code(0);
    let serial = out.installed_serial("www");
    let leaf = env
        .served_leaf_with_serial(&web.https_addr(), domain, &serial)
        .unwrap_or_else(|e| panic!("served leaf: {e}\n{}\n{}", out.describe(), web.logs()));
    assert_eq!(leaf.serial, serial);
    assert_eq!(
        leaf.spki,
        key_spki(),
        "served for the key in the combined file"
    );
    let pem = fs::read_to_string(&combined).unwrap();
    assert_ne!(pem.as_bytes(), placeholder.as_slice());
    assert!(pem.starts_with("-----BEGIN "), "{pem}");
    let key_end = pem.find("PRIVATE KEY-----\n-----BEGIN CERTIFICATE-----");
    assert!(key_end.is_some(), "key first, then the certificates");
    assert!(
        pem.matches("BEGIN CERTIFICATE").count() >= 2,
        "leaf and chain"
    );
    assert_eq!(Leaf::from_pem_file(&combined).serial, serial);
    assert_eq!(fs::metadata(&combined).unwrap().mode() & 0o7777, 0o600);
    let written: Vec<_> = fs::read_dir(combined.parent().unwrap())
        .unwrap()
        .map(|e| e.unwrap().file_name())
        .collect();
    assert_eq!(written, vec![std::ffi::OsString::from("www.pem")]);
    assert_eq!(env.billed(), 1);

    // Installed as far as the next run can tell: nothing due, no API call.
    let calls = env.calls().len();
    let again = agent(&["--json", "renew", "--wait", "30"]);
    again.expect_code(0);
    assert_eq!(
        again.outcome("www")["outcome"],
        "unchanged",
        "{}",
        again.describe()
    );
    assert_eq!(env.calls().len(), calls);

    // A reinstall reads the installed key back from the combined file.
    let inode = fs::metadata(&combined).unwrap().ino();
    let reinstall = agent(&["--json", "install", "www"]);
    reinstall.expect_code(0);
    assert_eq!(reinstall.installed_serial("www"), serial);
    assert_eq!(fs::read_to_string(&combined).unwrap(), pem);
    assert_eq!(
        fs::metadata(&combined).unwrap().ino(),
        inode,
        "identical content is not replaced"
    );
    let still = env.served_leaf(&web.https_addr(), domain).unwrap();
    assert_eq!(still.serial, serial);

    let status = agent(&["--json", "status"]);
    status.expect_code(0);
    assert!(
        status.stdout.contains("\"installed\""),
        "{}",
        status.describe()
    );
    assert_eq!(env.billed(), 1);
}
