//! End-to-end install tests against a real nginx and a real apache2 under temporary
//! directories: install, config test, reload, verification of the served serial, and the two
//! rollbacks (failing config test, served-serial mismatch); the same with a combined key +
//! fullchain file as the only install path.

use crate::support;

use std::fs;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use cert_agent::testing::install::{
    CertInstall, CertMaterial, InstallError, InstallPaths, Ownership, PathOverrides,
    ServerCommands, ServerKind, VerifyTarget, install_all, verify::serial_of_pem,
};
use rcgen::{
    BasicConstraints, CertificateParams, DnType, IsCa, Issuer, KeyPair, KeyUsagePurpose,
    SerialNumber,
};
use support::webserver::{self, Apache, Nginx, Server, Site};

/// A test CA issuing leaves with distinct serials.
struct Ca {
    issuer: Issuer<'static, KeyPair>,
    pem: String,
}

impl Ca {
    fn new() -> Self {
        let mut p = CertificateParams::new(Vec::<String>::new()).unwrap();
        p.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
        p.distinguished_name
            .push(DnType::CommonName, "cert-agent install test CA");
        p.key_usages = vec![KeyUsagePurpose::KeyCertSign, KeyUsagePurpose::CrlSign];
        let key = KeyPair::generate().unwrap();
        let cert = p.self_signed(&key).unwrap();
        Ca {
            issuer: Issuer::new(p, key),
            pem: cert.pem(),
        }
    }

    /// A leaf for `names` (first one is the common name) with a new key.
    fn issue(&self, names: &[&str]) -> (CertMaterial, cert_agent::testing::crypto::Serial) {
        static NEXT: AtomicU64 = AtomicU64::new(1);
        let mut p = CertificateParams::new(names.iter().map(|s| s.to_string()).collect::<Vec<_>>())
            .unwrap();
        p.distinguished_name.push(DnType::CommonName, names[0]);
        let nanos = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .as_nanos() as u64;
        p.serial_number = Some(SerialNumber::from(
            (nanos & 0x7fff_ffff_ffff_0000) | NEXT.fetch_add(1, Ordering::Relaxed),
        ));
        let key = KeyPair::generate().unwrap();
        let cert = p.signed_by(&key, &self.issuer).unwrap();
        let material = CertMaterial::new(
            cert.pem().into_bytes(),
            self.pem.clone().into_bytes(),
            key.serialize_pem().into_bytes(),
        );
        let serial = serial_of_pem(&material.leaf_pem).unwrap();
        (material, serial)
    }
}

fn tmp() -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    fs::set_permissions(dir.path(), fs::Permissions::from_mode(0o755)).unwrap();
    dir
}

/// A running nginx or apache.
enum Running {
    Nginx(Nginx),
    Apache(Apache),
}

impl Running {
    /// nginx for `ServerKind::Nginx`, apache2 for any other kind, on free ports under `dir`.
    fn start(kind: ServerKind, dir: &Path, sites: &[Site]) -> Self {
        match kind {
            ServerKind::Nginx => Running::Nginx(Nginx::start_on_free_ports(dir, sites).unwrap()),
            _ => Running::Apache(Apache::start_on_free_ports(dir, sites).unwrap()),
        }
    }
    fn commands(&self) -> ServerCommands {
        match self {
            Running::Nginx(n) => n.server_commands(),
            Running::Apache(a) => a.server_commands(),
        }
    }
    fn https_addr(&self) -> String {
        match self {
            Running::Nginx(n) => n.https_addr(),
            Running::Apache(a) => a.https_addr(),
        }
    }
    fn http_addr(&self) -> String {
        match self {
            Running::Nginx(n) => n.http_addr(),
            Running::Apache(a) => a.http_addr(),
        }
    }
    fn logs(&self) -> String {
        match self {
            Running::Nginx(n) => n.logs(),
            Running::Apache(a) => a.logs(),
        }
    }
}

fn site(kind: ServerKind, name: &str, paths: &InstallPaths, webroot: &Path) -> Site {
    if let (Some(combined), None) = (&paths.combined, &paths.key) {
        // One file as certificate and key (nginx: both directives; apache: no
        // SSLCertificateKeyFile).
        return Site::new(name, combined.clone(), combined.clone(), webroot);
    }
    let key = paths.key.clone().unwrap();
    match kind {
        ServerKind::Apache => Site::new(name, paths.cert.clone().unwrap(), key, webroot)
            .with_chain(paths.chain.clone().unwrap()),
        _ => Site::new(name, paths.fullchain.clone().unwrap(), key, webroot),
    }
}

fn request(
    name: &str,
    paths: &InstallPaths,
    material: CertMaterial,
    commands: ServerCommands,
    verify: Option<VerifyTarget>,
) -> CertInstall {
    CertInstall {
        name: name.to_string(),
        domains: vec![format!("{name}.test")],
        paths: paths.clone(),
        ownership: Ownership::default(),
        material,
        commands,
        verify,
        deploy_hook: None,
    }
}

fn snapshot(paths: &InstallPaths) -> Vec<(PathBuf, Vec<u8>)> {
    paths
        .all()
        .map(|p| (p.to_path_buf(), fs::read(p).unwrap()))
        .collect()
}

fn assert_unchanged(before: &[(PathBuf, Vec<u8>)]) {
    for (path, bytes) in before {
        assert_eq!(
            &fs::read(path).unwrap(),
            bytes,
            "{} changed",
            path.display()
        );
    }
}

/// Waits for `serial` to be served: after a reload, a worker of the previous generation may
/// still accept a connection or two before it notices it is to shut down.
async fn assert_serves(
    https: &str,
    name: &str,
    serial: &cert_agent::testing::crypto::Serial,
    logs: &dyn Fn() -> String,
) {
    webserver::wait_for_serial(https, name, serial, Duration::from_secs(10))
        .await
        .unwrap_or_else(|e| panic!("{e}\n{}", logs()));
}

async fn install_one(req: CertInstall) -> Result<(), InstallError> {
    let mut out = install_all(std::slice::from_ref(&req)).await;
    out.remove(0).result
}

/// Install A → served A; failing config test → A's files and A served; verify mismatch →
/// rolled back, A served again; install B → served B.
/// Runs `body` against `kind`'s real server; a skip where the server is not installed (a
/// failure under CI).
async fn on<F: Future<Output = ()>>(kind: ServerKind, body: fn(ServerKind) -> F) {
    let server = match kind {
        ServerKind::Nginx => Server::Nginx,
        _ => Server::Apache,
    };
    if webserver::require(server) {
        body(kind).await;
    }
}

async fn scenario(kind: ServerKind) {
    let dir = tmp();
    let ssl = dir.path().join("ssl");
    let webroot = dir.path().join("www");
    let ca = Ca::new();
    let www = InstallPaths::resolve(kind, &ssl, "www", &PathOverrides::default());
    let other = InstallPaths::resolve(kind, &ssl, "other", &PathOverrides::default());

    // Initial files so the server can start: installed without test or reload.
    let no_server = ServerCommands::configured(ServerKind::None, None, None, None);
    let (boot, boot_serial) = ca.issue(&["www.test"]);
    let (other_cert, other_serial) = ca.issue(&["other.test"]);
    let out = install_all(&[
        request("www", &www, boot, no_server.clone(), None),
        request("other", &other, other_cert, no_server, None),
    ])
    .await;
    assert!(out.iter().all(|o| o.result.is_ok()), "{out:?}");

    let sites = [
        site(kind, "www.test", &www, &webroot),
        site(kind, "other.test", &other, &dir.path().join("other-www")),
    ];
    let server = Running::start(kind, dir.path(), &sites);
    let https = server.https_addr();
    let logs = || server.logs();
    assert_serves(&https, "www.test", &boot_serial, &logs).await;
    assert_eq!(
        webserver::served_serial(&https, "other.test").await,
        Ok(other_serial.clone()),
        "{}",
        logs()
    );

    // The plain-HTTP vhost serves the webroot by Host header.
    let pki = webroot.join(".well-known/pki-validation");
    fs::create_dir_all(&pki).unwrap();
    fs::set_permissions(
        webroot.join(".well-known"),
        fs::Permissions::from_mode(0o755),
    )
    .unwrap();
    fs::set_permissions(&pki, fs::Permissions::from_mode(0o755)).unwrap();
    fs::write(pki.join("ABC123.txt"), b"hash\ncomodoca.com\n").unwrap();
    fs::set_permissions(pki.join("ABC123.txt"), fs::Permissions::from_mode(0o644)).unwrap();
    let (status, body) = webserver::http_get(
        &server.http_addr(),
        "www.test",
        "/.well-known/pki-validation/ABC123.txt",
    )
    .unwrap();
    assert_eq!(
        (status, body.as_slice()),
        (200, &b"hash\ncomodoca.com\n"[..]),
        "{}",
        logs()
    );

    let verify = |name: &str, timeout: Duration| {
        Some(VerifyTarget {
            address: https.clone(),
            server_name: name.to_string(),
            timeout,
        })
    };

    // Install A: config test, reload, verify.
    let (a, a_serial) = ca.issue(&["www.test"]);
    install_one(request(
        "www",
        &www,
        a,
        server.commands(),
        verify("www.test", Duration::from_secs(10)),
    ))
    .await
    .unwrap_or_else(|e| panic!("{e}\n{}", logs()));
    assert_serves(&https, "www.test", &a_serial, &logs).await;
    let a_files = snapshot(&www);

    // A failing config test leaves A's files and A served.
    let (mut broken, _) = ca.issue(&["www.test"]);
    let mut commands = server.commands();
    match kind {
        ServerKind::Nginx => {
            // nginx -t loads the certificates: a damaged file fails it.
            broken.fullchain_pem =
                b"-----BEGIN CERTIFICATE-----\nAAAA\n-----END CERTIFICATE-----\n".to_vec();
        }
        _ => {
            // apache2 -t does not read certificates: break the configuration instead.
            let mut test = commands.configtest.take().unwrap();
            test.extend(["-C".to_string(), "NoSuchDirective on".to_string()]);
            commands.configtest = Some(test);
        }
    }
    let err = install_one(request(
        "www",
        &www,
        broken,
        commands,
        verify("www.test", Duration::from_secs(10)),
    ))
    .await
    .unwrap_err();
    assert!(matches!(err, InstallError::ConfigTest { .. }), "{err}");
    let text = err.to_string();
    match kind {
        ServerKind::Nginx => assert!(text.contains("nginx"), "{text}"),
        _ => assert!(text.contains("NoSuchDirective"), "{text}"),
    }
    assert_unchanged(&a_files);
    assert_serves(&https, "www.test", &a_serial, &logs).await;

    // A serial mismatch (the name checked is served from other files) rolls back, reloads,
    // and A is served again.
    let (c, _) = ca.issue(&["www.test"]);
    let err = install_one(request(
        "www",
        &www,
        c,
        server.commands(),
        verify("other.test", Duration::from_secs(3)),
    ))
    .await
    .unwrap_err();
    match &err {
        InstallError::Verify { cause } => {
            assert!(
                matches!(**cause, InstallError::SerialMismatch { .. }),
                "{err}"
            )
        }
        other => panic!("unexpected {other}"),
    }
    assert!(err.to_string().contains(&other_serial.to_string()), "{err}");
    assert_unchanged(&a_files);
    assert_serves(&https, "www.test", &a_serial, &logs).await;

    // Install B → served B.
    let (b, b_serial) = ca.issue(&["www.test"]);
    install_one(request(
        "www",
        &www,
        b.clone(),
        server.commands(),
        verify("www.test", Duration::from_secs(10)),
    ))
    .await
    .unwrap_or_else(|e| panic!("{e}\n{}", logs()));
    assert_serves(&https, "www.test", &b_serial, &logs).await;
    assert_eq!(fs::read(www.key.as_ref().unwrap()).unwrap(), b.key_pem);
    let leftovers: Vec<_> = fs::read_dir(ssl.join("www"))
        .unwrap()
        .filter_map(|e| e.ok())
        .filter(|e| e.file_name().to_string_lossy().contains("cert-agent-"))
        .collect();
    assert!(leftovers.is_empty(), "{leftovers:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn nginx_install_reload_verify_and_rollbacks() {
    on(ServerKind::Nginx, scenario).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn apache_install_reload_verify_and_rollbacks() {
    on(ServerKind::Apache, scenario).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn missing_reload_program_is_named_and_files_restored() {
    let dir = tmp();
    let ca = Ca::new();
    let paths = InstallPaths::resolve(
        ServerKind::Nginx,
        dir.path(),
        "www",
        &PathOverrides::default(),
    );
    let (a, _) = ca.issue(&["www.test"]);
    let none = ServerCommands::configured(ServerKind::None, None, None, None);
    install_one(request("www", &paths, a, none, None))
        .await
        .unwrap();
    let before = snapshot(&paths);
    let (b, _) = ca.issue(&["www.test"]);
    let commands = ServerCommands {
        configtest: Some(vec!["true".into()]),
        reload: Some(vec![
            "/nonexistent/nginx".into(),
            "-s".into(),
            "reload".into(),
        ]),
        timeout: Duration::from_secs(5),
    };
    let err = install_one(request("www", &paths, b, commands, None))
        .await
        .unwrap_err();
    assert!(matches!(err, InstallError::Reload { .. }), "{err}");
    assert!(err.to_string().contains("/nonexistent/nginx"), "{err}");
    assert_unchanged(&before);
}

/// A fresh host: the server starts on placeholder files, the first install replaces them,
/// the new certificate is served and the deploy hook runs once with the paths.
async fn first_install(kind: ServerKind) {
    let dir = tmp();
    let ca = Ca::new();
    let paths = InstallPaths::resolve(
        kind,
        &dir.path().join("ssl"),
        "www",
        &PathOverrides::default(),
    );
    let sites = [site(kind, "www.test", &paths, &dir.path().join("www"))];
    let server = Running::start(kind, dir.path(), &sites);
    let logs = || server.logs();
    let https = server.https_addr();
    let placeholder = webserver::served_serial(&https, "www.test").await.unwrap();

    let (a, a_serial) = ca.issue(&["www.test"]);
    assert_ne!(a_serial, placeholder);
    let hook_out = dir.path().join("hook.out");
    let mut req = CertInstall::new("www", vec!["www.test".into()], kind, a);
    req.paths = paths.clone();
    req.commands = server.commands();
    req.verify = Some(VerifyTarget::new(https.clone(), "www.test"));
    req.deploy_hook = Some(vec![
        "sh".into(),
        "-c".into(),
        format!(
            "echo \"$CERT_AGENT_NAME $CERT_AGENT_KEY_PATH\" >> '{}'",
            hook_out.display()
        ),
    ]);
    let out = install_all(std::slice::from_ref(&req)).await;
    assert!(out[0].result.is_ok(), "{:?}\n{}", out[0].result, logs());
    assert_eq!(
        out[0].installed_serial,
        Some(a_serial.to_string().to_ascii_lowercase())
    );
    assert_serves(&https, "www.test", &a_serial, &logs).await;
    assert_eq!(
        fs::read_to_string(&hook_out).unwrap(),
        format!("www {}\n", paths.key.as_ref().unwrap().display())
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn nginx_first_install_replaces_placeholder_and_runs_hook() {
    on(ServerKind::Nginx, first_install).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn apache_first_install_replaces_placeholder_and_runs_hook() {
    on(ServerKind::Apache, first_install).await;
}

/// With `combined_path` as the only install path: install A → served A, the file is the key
/// followed by the fullchain, private, alone in its directory; a failing config test keeps
/// A's combined file (same bytes, same inode) and A served; install B → served B.
async fn combined_scenario(kind: ServerKind) {
    use std::os::unix::fs::MetadataExt;
    let dir = tmp();
    let ssl = dir.path().join("ssl");
    let combined = ssl.join("www/www.pem");
    let paths = InstallPaths::resolve(
        kind,
        &ssl,
        "www",
        &PathOverrides {
            combined: Some(combined.clone()),
            ..Default::default()
        },
    );
    assert_eq!(paths.all().collect::<Vec<_>>(), vec![combined.as_path()]);
    let ca = Ca::new();
    let no_server = ServerCommands::configured(ServerKind::None, None, None, None);
    let (boot, boot_serial) = ca.issue(&["www.test"]);
    install_one(request("www", &paths, boot, no_server, None))
        .await
        .unwrap();
    let sites = [site(kind, "www.test", &paths, &dir.path().join("www"))];
    let server = Running::start(kind, dir.path(), &sites);
    let https = server.https_addr();
    let logs = || server.logs();
    assert_serves(&https, "www.test", &boot_serial, &logs).await;
    let verify = Some(VerifyTarget::new(https.clone(), "www.test"));

    let (a, a_serial) = ca.issue(&["www.test"]);
    install_one(request(
        "www",
        &paths,
        a.clone(),
        server.commands(),
        verify.clone(),
    ))
    .await
    .unwrap_or_else(|e| panic!("{e}\n{}", logs()));
    assert_serves(&https, "www.test", &a_serial, &logs).await;
    let content = fs::read(&combined).unwrap();
    assert_eq!(content, a.combined_pem());
    assert!(content.starts_with(&a.key_pem));
    assert!(content.ends_with(&a.fullchain_pem));
    let meta = fs::metadata(&combined).unwrap();
    assert_eq!(
        meta.mode() & 0o7777,
        0o600,
        "the combined file holds the key"
    );
    assert_eq!(
        fs::metadata(combined.parent().unwrap()).unwrap().mode() & 0o7777,
        0o700,
        "a directory holding only the combined file is private"
    );
    let names: Vec<_> = fs::read_dir(combined.parent().unwrap())
        .unwrap()
        .map(|e| e.unwrap().file_name())
        .collect();
    assert_eq!(names, vec![std::ffi::OsString::from("www.pem")]);

    // A failing config test keeps A's combined file and A served.
    let (mut broken, _) = ca.issue(&["www.test"]);
    let mut commands = server.commands();
    match kind {
        ServerKind::Nginx => {
            // nginx -t loads the certificate: a damaged chain in the combined file fails it.
            broken.fullchain_pem =
                b"-----BEGIN CERTIFICATE-----\nAAAA\n-----END CERTIFICATE-----\n".to_vec();
        }
        _ => {
            let mut test = commands.configtest.take().unwrap();
            test.extend(["-C".to_string(), "NoSuchDirective on".to_string()]);
            commands.configtest = Some(test);
        }
    }
    let err = install_one(request("www", &paths, broken, commands, verify.clone()))
        .await
        .unwrap_err();
    assert!(matches!(err, InstallError::ConfigTest { .. }), "{err}");
    assert_eq!(
        fs::read(&combined).unwrap(),
        content,
        "previous combined file"
    );
    assert_eq!(
        fs::metadata(&combined).unwrap().ino(),
        meta.ino(),
        "the previous file itself is back"
    );
    assert_serves(&https, "www.test", &a_serial, &logs).await;

    let (b, b_serial) = ca.issue(&["www.test"]);
    install_one(request("www", &paths, b.clone(), server.commands(), verify))
        .await
        .unwrap_or_else(|e| panic!("{e}\n{}", logs()));
    assert_serves(&https, "www.test", &b_serial, &logs).await;
    assert_eq!(fs::read(&combined).unwrap(), b.combined_pem());
    assert!(leftovers_in(combined.parent().unwrap()).is_empty());
}

fn leftovers_in(dir: &Path) -> Vec<std::ffi::OsString> {
    fs::read_dir(dir)
        .unwrap()
        .filter_map(|e| e.ok())
        .map(|e| e.file_name())
        .filter(|n| n.to_string_lossy().contains("cert-agent-"))
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn nginx_combined_file_install_and_rollback() {
    on(ServerKind::Nginx, combined_scenario).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn apache_combined_file_install_and_rollback() {
    on(ServerKind::Apache, combined_scenario).await;
}
