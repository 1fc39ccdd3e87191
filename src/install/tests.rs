//! Unit tests of the install transaction and flow against temporary directories.

use std::fs;
use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::time::Duration;

use super::files::{DIR_MODE, KEY_DIR_MODE, KEY_MODE, KEY_MODE_GROUP};
use super::staging::CheckedDirs;
use super::*;

/// True when this process may change owners (root); otherwise a skip with a notice, or a
/// failure when `CI` is set: CI runs as root, so a skip there would pass what never ran.
fn is_root() -> bool {
    if nix::unistd::geteuid().is_root() {
        return true;
    }
    assert!(
        std::env::var_os("CI").is_none_or(|v| v.is_empty()),
        "this test changes owners and needs root; CI is set"
    );
    eprintln!("skipped: needs root to change owners");
    false
}

/// A temp dir whose mode is 0755 (tempfile makes them 0700, which is fine too, but this keeps
/// the parent checks honest).
fn tmp() -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    fs::set_permissions(dir.path(), fs::Permissions::from_mode(0o755)).unwrap();
    dir
}

fn cert_pem(name: &str) -> (String, String) {
    let ck = rcgen::generate_simple_self_signed(vec![name.to_string()]).unwrap();
    (ck.cert.pem(), ck.signing_key.serialize_pem())
}

fn material(tag: &str) -> CertMaterial {
    let (leaf, key) = cert_pem("a.test");
    CertMaterial::new(
        format!("{leaf}# {tag}\n").into_bytes(),
        format!("# chain {tag}\n").into_bytes(),
        key.into_bytes(),
    )
}

fn nginx_paths(dir: &Path) -> InstallPaths {
    InstallPaths::resolve(ServerKind::Nginx, dir, "www", &PathOverrides::default())
}

fn none_paths(dir: &Path) -> InstallPaths {
    InstallPaths::resolve(ServerKind::None, dir, "www", &PathOverrides::default())
}

fn key_of(paths: &InstallPaths) -> &Path {
    paths.key.as_deref().unwrap()
}

fn mode(p: &Path) -> u32 {
    fs::metadata(p).unwrap().mode() & 0o7777
}

fn leftovers(dir: &Path) -> Vec<String> {
    fs::read_dir(dir)
        .unwrap()
        .filter_map(|e| e.ok())
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .filter(|n| n.contains(".cert-agent-"))
        .collect()
}

fn install(paths: &InstallPaths, m: &CertMaterial, own: &Ownership) {
    let mut tx = InstallTx::new();
    tx.stage_certificate(paths, m, own).unwrap();
    tx.apply().unwrap();
    tx.commit().unwrap();
}

#[test]
fn commit_installs_new_files_with_default_modes_and_leaves_nothing_behind() {
    let dir = tmp();
    let paths = none_paths(dir.path());
    let m = material("A");
    install(&paths, &m, &Ownership::default());
    assert_eq!(fs::read(paths.cert.as_ref().unwrap()).unwrap(), m.leaf_pem);
    assert_eq!(
        fs::read(paths.chain.as_ref().unwrap()).unwrap(),
        m.chain_pem
    );
    assert_eq!(
        fs::read(paths.fullchain.as_ref().unwrap()).unwrap(),
        m.fullchain_pem
    );
    assert_eq!(fs::read(key_of(&paths)).unwrap(), m.key_pem);
    assert_eq!(mode(key_of(&paths)), 0o600);
    for p in paths.certificate_paths() {
        assert_eq!(mode(p), 0o644);
    }
    assert_eq!(mode(&dir.path().join("www")), 0o755);
    assert!(leftovers(&dir.path().join("www")).is_empty());
}

#[test]
fn rollback_restores_previous_files_byte_identical_with_same_inode_and_mode() {
    let dir = tmp();
    let paths = nginx_paths(dir.path());
    let a = material("A");
    install(&paths, &a, &Ownership::default());
    let full = paths.fullchain.clone().unwrap();
    fs::set_permissions(&full, fs::Permissions::from_mode(0o640)).unwrap();
    let inode = fs::metadata(&full).unwrap().ino();

    let b = material("B");
    let mut tx = InstallTx::new();
    tx.stage_certificate(&paths, &b, &Ownership::default())
        .unwrap();
    // Staging changes nothing live.
    assert_eq!(fs::read(&full).unwrap(), a.fullchain_pem);
    tx.apply().unwrap();
    assert_eq!(fs::read(&full).unwrap(), b.fullchain_pem);
    assert_eq!(fs::read(key_of(&paths)).unwrap(), b.key_pem);
    assert_eq!(mode(&full), 0o640, "kept mode of the replaced file");
    tx.rollback().unwrap();

    assert_eq!(fs::read(&full).unwrap(), a.fullchain_pem);
    assert_eq!(fs::read(key_of(&paths)).unwrap(), a.key_pem);
    assert_eq!(fs::metadata(&full).unwrap().ino(), inode);
    assert_eq!(mode(&full), 0o640);
    assert!(leftovers(&dir.path().join("www")).is_empty());
}

#[test]
fn commit_without_apply_applies() {
    let dir = tmp();
    let paths = nginx_paths(dir.path());
    let m = material("A");
    let mut tx = InstallTx::new();
    tx.stage_certificate(&paths, &m, &Ownership::default())
        .unwrap();
    tx.commit().unwrap();
    assert_eq!(fs::read(key_of(&paths)).unwrap(), m.key_pem);
    assert!(leftovers(&dir.path().join("www")).is_empty());
}

#[test]
fn drop_without_commit_rolls_back() {
    let dir = tmp();
    let paths = nginx_paths(dir.path());
    let a = material("A");
    install(&paths, &a, &Ownership::default());
    {
        let mut tx = InstallTx::new();
        tx.stage_certificate(&paths, &material("B"), &Ownership::default())
            .unwrap();
        tx.apply().unwrap();
    }
    assert_eq!(fs::read(key_of(&paths)).unwrap(), a.key_pem);
    assert_eq!(
        fs::read(paths.fullchain.as_ref().unwrap()).unwrap(),
        a.fullchain_pem
    );
    assert!(leftovers(&dir.path().join("www")).is_empty());

    // Dropped before apply: only the staged files go away.
    {
        let mut tx = InstallTx::new();
        tx.stage_certificate(&paths, &material("C"), &Ownership::default())
            .unwrap();
        assert!(!leftovers(&dir.path().join("www")).is_empty());
    }
    assert!(leftovers(&dir.path().join("www")).is_empty());
    assert_eq!(fs::read(key_of(&paths)).unwrap(), a.key_pem);
}

#[test]
fn rollback_of_a_first_install_removes_files_and_created_directories() {
    let dir = tmp();
    let paths = InstallPaths::resolve(
        ServerKind::Apache,
        &dir.path().join("deep/er"),
        "www",
        &PathOverrides::default(),
    );
    let mut tx = InstallTx::new();
    tx.stage_certificate(&paths, &material("A"), &Ownership::default())
        .unwrap();
    tx.apply().unwrap();
    assert!(key_of(&paths).exists());
    tx.rollback().unwrap();
    assert!(!dir.path().join("deep").exists());
}

#[test]
fn key_only_directory_is_private() {
    let dir = tmp();
    let paths = InstallPaths::resolve(
        ServerKind::Nginx,
        dir.path(),
        "www",
        &PathOverrides {
            key: Some(dir.path().join("private/www.key")),
            ..Default::default()
        },
    );
    install(&paths, &material("A"), &Ownership::default());
    assert_eq!(mode(&dir.path().join("private")), 0o700);
    assert_eq!(mode(&dir.path().join("www")), 0o755);
}

#[test]
fn configured_owner_group_and_modes_apply_and_group_makes_key_0640() {
    if !is_root() {
        return;
    }
    let dir = tmp();
    let paths = nginx_paths(dir.path());
    let own = Ownership {
        owner: Some(Principal::Id(1234)),
        group: Some(Principal::parse("5678")),
        ..Default::default()
    };
    install(&paths, &material("A"), &own);
    let key = fs::metadata(key_of(&paths)).unwrap();
    assert_eq!(
        (key.uid(), key.gid(), key.mode() & 0o7777),
        (1234, 5678, 0o640)
    );
    let full = fs::metadata(paths.fullchain.as_ref().unwrap()).unwrap();
    assert_eq!(
        (full.uid(), full.gid(), full.mode() & 0o7777),
        (1234, 5678, 0o644)
    );

    let named = Ownership {
        owner: Some(Principal::parse("root")),
        group: Some(Principal::parse("root")),
        key_mode: Some(0o400),
        cert_mode: Some(0o444),
    };
    install(&paths, &material("B"), &named);
    let key = fs::metadata(key_of(&paths)).unwrap();
    assert_eq!((key.uid(), key.gid(), key.mode() & 0o7777), (0, 0, 0o400));
    assert_eq!(mode(paths.fullchain.as_ref().unwrap()), 0o444);
}

#[test]
fn unconfigured_install_keeps_existing_owner_group_and_mode() {
    if !is_root() {
        return;
    }
    let dir = tmp();
    let paths = nginx_paths(dir.path());
    install(&paths, &material("A"), &Ownership::default());
    let full = paths.fullchain.clone().unwrap();
    std::os::unix::fs::chown(key_of(&paths), Some(4321), Some(8765)).unwrap();
    fs::set_permissions(key_of(&paths), fs::Permissions::from_mode(0o440)).unwrap();
    std::os::unix::fs::chown(&full, Some(4321), Some(8765)).unwrap();
    fs::set_permissions(&full, fs::Permissions::from_mode(0o604)).unwrap();

    let b = material("B");
    install(&paths, &b, &Ownership::default());
    assert_eq!(fs::read(key_of(&paths)).unwrap(), b.key_pem);
    let key = fs::metadata(key_of(&paths)).unwrap();
    assert_eq!(
        (key.uid(), key.gid(), key.mode() & 0o7777),
        (4321, 8765, 0o440)
    );
    let f = fs::metadata(&full).unwrap();
    assert_eq!((f.uid(), f.gid(), f.mode() & 0o7777), (4321, 8765, 0o604));
}

#[test]
fn unknown_owner_name_is_an_error_naming_it() {
    let dir = tmp();
    let own = Ownership {
        owner: Some(Principal::parse("cert-agent-no-such-user")),
        ..Default::default()
    };
    let err = InstallTx::new()
        .stage_certificate(&nginx_paths(dir.path()), &material("A"), &own)
        .unwrap_err();
    assert!(err.to_string().contains("cert-agent-no-such-user"), "{err}");
}

#[test]
fn symlink_at_target_is_refused_and_its_destination_untouched() {
    let dir = tmp();
    let paths = nginx_paths(dir.path());
    fs::create_dir(dir.path().join("www")).unwrap();
    let outside = dir.path().join("outside.pem");
    fs::write(&outside, b"keep").unwrap();
    std::os::unix::fs::symlink(&outside, key_of(&paths)).unwrap();
    let err = InstallTx::new()
        .stage_certificate(&paths, &material("A"), &Ownership::default())
        .unwrap_err();
    assert!(matches!(err, InstallError::SymlinkTarget { .. }), "{err}");
    assert!(err.to_string().contains(&*key_of(&paths).to_string_lossy()));
    assert_eq!(fs::read(&outside).unwrap(), b"keep");
    assert!(leftovers(&dir.path().join("www")).is_empty());
}

#[test]
fn writable_parent_directory_is_refused() {
    for bad in [0o777, 0o775, 0o757] {
        let dir = tmp();
        let www = dir.path().join("www");
        fs::create_dir(&www).unwrap();
        fs::set_permissions(&www, fs::Permissions::from_mode(bad)).unwrap();
        let err = InstallTx::new()
            .stage_certificate(
                &nginx_paths(dir.path()),
                &material("A"),
                &Ownership::default(),
            )
            .unwrap_err();
        match &err {
            InstallError::InsecureDirectory { path, .. } => assert_eq!(path, &www),
            other => panic!("unexpected {other}"),
        }
        assert!(err.to_string().contains(&*www.to_string_lossy()));
        assert!(leftovers(&www).is_empty());

        // A writable ancestor further up is refused too.
        fs::set_permissions(&www, fs::Permissions::from_mode(0o755)).unwrap();
        fs::set_permissions(dir.path(), fs::Permissions::from_mode(bad)).unwrap();
        let err = InstallTx::new()
            .stage_certificate(
                &nginx_paths(dir.path()),
                &material("A"),
                &Ownership::default(),
            )
            .unwrap_err();
        assert!(
            matches!(err, InstallError::InsecureDirectory { .. }),
            "{err}"
        );
        fs::set_permissions(dir.path(), fs::Permissions::from_mode(0o755)).unwrap();
    }
}

#[test]
fn a_batch_checks_each_ancestor_once_and_still_each_files_directory() {
    let dir = tmp();
    let (a, b) = (dir.path().join("a"), dir.path().join("b"));
    for d in [&a, &b] {
        fs::create_dir(d).unwrap();
    }
    let checked = std::sync::Arc::new(CheckedDirs::default());
    let paths_in = |d: &Path| InstallPaths {
        key: Some(d.join("k.key")),
        fullchain: Some(d.join("f.pem")),
        cert: None,
        chain: None,
        combined: None,
    };
    let mut first = InstallTx::in_batch(checked.clone());
    first
        .stage_certificate(&paths_in(&a), &material("A"), &Ownership::default())
        .unwrap();
    // The directory a file goes into is checked for every file, ancestors checked before or
    // not: `b`, writable by others, is refused in the same batch.
    fs::set_permissions(&b, fs::Permissions::from_mode(0o777)).unwrap();
    let err = InstallTx::in_batch(checked.clone())
        .stage_certificate(&paths_in(&b), &material("B"), &Ownership::default())
        .unwrap_err();
    match &err {
        InstallError::InsecureDirectory { path, .. } => assert_eq!(path, &b),
        other => panic!("unexpected {other}"),
    }
    // So is `a` once it is: its ancestors were found safe, not `a` itself for good.
    fs::set_permissions(&a, fs::Permissions::from_mode(0o777)).unwrap();
    let err = InstallTx::in_batch(checked)
        .stage_certificate(&paths_in(&a), &material("C"), &Ownership::default())
        .unwrap_err();
    assert!(
        matches!(err, InstallError::InsecureDirectory { .. }),
        "{err}"
    );
    fs::set_permissions(&a, fs::Permissions::from_mode(0o755)).unwrap();
    first.rollback().unwrap();
}

#[test]
fn sticky_root_owned_directory_is_accepted() {
    if !is_root() {
        return;
    }
    let dir = tmp();
    let shared = dir.path().join("shared");
    fs::create_dir(&shared).unwrap();
    fs::set_permissions(&shared, fs::Permissions::from_mode(0o1777)).unwrap();
    install(&nginx_paths(&shared), &material("A"), &Ownership::default());
}

#[test]
fn write_error_leaves_the_live_file_untouched() {
    let dir = tmp();
    let paths = nginx_paths(dir.path());
    let a = material("A");
    install(&paths, &a, &Ownership::default());
    // A directory where the staged file would go makes the write fail.
    let blocker = dir.path().join("www/.fullchain.pem.cert-agent-new");
    fs::create_dir(&blocker).unwrap();
    let err = InstallTx::new()
        .stage_certificate(&paths, &material("B"), &Ownership::default())
        .unwrap_err();
    assert!(matches!(err, InstallError::Write { .. }), "{err}");
    assert!(err.to_string().contains("fullchain.pem"), "{err}");
    assert_eq!(fs::read(key_of(&paths)).unwrap(), a.key_pem);
    assert_eq!(
        fs::read(paths.fullchain.as_ref().unwrap()).unwrap(),
        a.fullchain_pem
    );
    fs::remove_dir(&blocker).unwrap();
    assert!(leftovers(&dir.path().join("www")).is_empty());
}

#[test]
fn debug_of_material_hides_the_key() {
    let m = material("A");
    let shown = format!("{m:?}");
    assert!(!shown.contains("PRIVATE KEY"), "{shown}");
    assert!(shown.contains("redacted"));
}

/// Runs [`umask_000_child`] in a child process: the umask is process-wide and other tests run
/// in parallel threads.
#[test]
fn modes_are_exact_under_umask_000() {
    let dir = tmp();
    let status = std::process::Command::new(std::env::current_exe().unwrap())
        .args([
            "--exact",
            "install::tests::umask_000_child",
            "--test-threads=1",
            "--quiet",
        ])
        .env("CERT_AGENT_UMASK_TEST_DIR", dir.path())
        .output()
        .unwrap();
    assert!(
        status.status.success(),
        "{}{}",
        String::from_utf8_lossy(&status.stdout),
        String::from_utf8_lossy(&status.stderr)
    );
    let www = dir.path().join("www");
    assert!(www.join("done").exists(), "the child did not run");
    assert_eq!(mode(&www), 0o755);
    assert_eq!(mode(&www.join("privkey.pem")), 0o600);
    assert_eq!(mode(&www.join("fullchain.pem")), 0o644);
    assert_eq!(mode(&dir.path().join("keys")), 0o700);
    assert_eq!(mode(&dir.path().join("keys/other.key")), 0o600);
}

#[test]
fn umask_000_child() {
    let Some(dir) = std::env::var_os("CERT_AGENT_UMASK_TEST_DIR") else {
        return;
    };
    let dir = PathBuf::from(dir);
    nix::sys::stat::umask(nix::sys::stat::Mode::empty());
    install(&nginx_paths(&dir), &material("A"), &Ownership::default());
    let other = InstallPaths::resolve(
        ServerKind::Nginx,
        &dir,
        "other",
        &PathOverrides {
            key: Some(dir.join("keys/other.key")),
            ..Default::default()
        },
    );
    install(&other, &material("B"), &Ownership::default());
    fs::write(dir.join("www/done"), b"").unwrap();
}

fn argv(v: &[&str]) -> Vec<String> {
    v.iter().map(|s| s.to_string()).collect()
}

fn cert_install(dir: &Path, name: &str, configtest: &[&str]) -> CertInstall {
    CertInstall {
        name: name.to_string(),
        domains: vec!["a.test".into(), "www.a.test".into()],
        paths: InstallPaths::resolve(ServerKind::Nginx, dir, name, &PathOverrides::default()),
        ownership: Ownership::default(),
        material: material(name),
        commands: ServerCommands {
            configtest: Some(argv(configtest)),
            reload: Some(argv(&["true"])),
            timeout: Duration::from_secs(10),
        },
        verify: None,
        deploy_hook: None,
    }
}

#[tokio::test]
async fn failing_config_test_restores_previous_files() {
    let dir = tmp();
    let mut first = cert_install(dir.path(), "www", &["true"]);
    let out = install_all(std::slice::from_ref(&first)).await;
    assert!(out[0].result.is_ok(), "{:?}", out[0].result);
    assert!(out[0].installed());
    let key_a = fs::read(key_of(&first.paths)).unwrap();
    let full = first.paths.fullchain.clone().unwrap();
    let full_a = fs::read(&full).unwrap();

    first.material = material("B");
    first.commands.configtest = Some(argv(&[
        "sh",
        "-c",
        "echo 'nginx: [emerg] cannot load certificate' >&2; exit 1",
    ]));
    let out = install_all(std::slice::from_ref(&first)).await;
    let err = out[0].result.as_ref().unwrap_err();
    assert!(matches!(err, InstallError::ConfigTest { .. }), "{err}");
    assert!(err.to_string().contains("cannot load certificate"), "{err}");
    assert!(!out[0].installed());
    assert_eq!(fs::read(key_of(&first.paths)).unwrap(), key_a);
    assert_eq!(fs::read(&full).unwrap(), full_a);
    assert!(leftovers(&dir.path().join("www")).is_empty());
}

#[tokio::test]
async fn one_server_is_tested_once_and_failures_stay_per_server() {
    let dir = tmp();
    let counter = dir.path().join("count");
    let count = format!("echo x >> '{}'", counter.display());
    let a = cert_install(dir.path(), "a", &["sh", "-c", &count]);
    let b = cert_install(dir.path(), "b", &["sh", "-c", &count]);
    let mut bad = cert_install(dir.path(), "c", &["false"]);
    bad.material.leaf_pem = b"not a certificate".to_vec();
    let out = install_all(&[a.clone(), b, bad]).await;
    assert!(out[0].result.is_ok());
    assert!(out[1].result.is_ok());
    assert!(matches!(
        out[2].result,
        Err(InstallError::BadCertificate { .. })
    ));
    assert_eq!(fs::read_to_string(&counter).unwrap(), "x\n");

    // The same path twice in one run is refused for the second certificate.
    let mut dup = cert_install(dir.path(), "d", &["true"]);
    dup.paths.key = a.paths.key.clone();
    let out = install_all(&[a, dup]).await;
    assert!(out[0].result.is_ok());
    assert!(matches!(
        out[1].result,
        Err(InstallError::DuplicatePath { .. })
    ));
}

#[tokio::test]
async fn deploy_hook_gets_names_and_paths_but_no_key_material() {
    let dir = tmp();
    let env_file = dir.path().join("env");
    let mut c = cert_install(dir.path(), "www", &["true"]);
    c.deploy_hook = Some(argv(&[
        "sh",
        "-c",
        &format!("env > '{}'", env_file.display()),
    ]));
    let out = install_all(std::slice::from_ref(&c)).await;
    assert!(out[0].result.is_ok(), "{:?}", out[0].result);
    let env = fs::read_to_string(&env_file).unwrap();
    assert!(env.contains("CERT_AGENT_NAME=www\n"));
    assert!(env.contains("CERT_AGENT_DOMAINS=a.test www.a.test\n"));
    assert!(env.contains(&format!(
        "CERT_AGENT_KEY_PATH={}\n",
        key_of(&c.paths).display()
    )));
    assert!(env.contains(&format!(
        "CERT_AGENT_FULLCHAIN_PATH={}\n",
        c.paths.fullchain.as_ref().unwrap().display()
    )));
    assert!(env.contains("CERT_AGENT_CERT_PATH=\n"));
    assert!(!env.contains("PRIVATE KEY"));

    c.deploy_hook = Some(argv(&["false"]));
    let out = install_all(std::slice::from_ref(&c)).await;
    assert!(out[0].installed());
    assert!(matches!(
        out[0].result,
        Err(InstallError::DeployHook { .. })
    ));
}

fn combined_paths(dir: &Path, extra: PathOverrides) -> InstallPaths {
    InstallPaths::resolve(
        ServerKind::Nginx,
        dir,
        "www",
        &PathOverrides {
            combined: Some(dir.join("tls/www.pem")),
            ..extra
        },
    )
}

#[test]
fn combined_file_holds_key_then_fullchain_with_the_key_mode() {
    let dir = tmp();
    let paths = combined_paths(dir.path(), PathOverrides::default());
    let combined = paths.combined.clone().unwrap();
    let m = material("A");
    install(&paths, &m, &Ownership::default());
    let mut expected = m.key_pem.clone();
    expected.extend_from_slice(&m.fullchain_pem);
    assert_eq!(fs::read(&combined).unwrap(), expected);
    assert_eq!(m.combined_pem(), expected);
    assert_eq!(mode(&combined), KEY_MODE);
    assert_eq!(mode(&dir.path().join("tls")), KEY_DIR_MODE);
    // Nothing else written: no default layout beside a combined file.
    assert!(!dir.path().join("www").exists());
    let names: Vec<_> = fs::read_dir(dir.path().join("tls"))
        .unwrap()
        .map(|e| e.unwrap().file_name())
        .collect();
    assert_eq!(names, vec![std::ffi::OsString::from("www.pem")]);

    // A key without a final newline still starts a line for the chain.
    let mut bare = material("B");
    bare.key_pem.pop();
    let mut expected = bare.key_pem.clone();
    expected.push(b'\n');
    expected.extend_from_slice(&bare.fullchain_pem);
    assert_eq!(bare.combined_pem(), expected);
}

#[test]
fn combined_file_rolls_back_to_the_previous_version() {
    let dir = tmp();
    let paths = combined_paths(
        dir.path(),
        PathOverrides {
            key: Some(dir.path().join("tls/www.key")),
            fullchain: Some(dir.path().join("tls/full.pem")),
            ..Default::default()
        },
    );
    let combined = paths.combined.clone().unwrap();
    let a = material("A");
    install(&paths, &a, &Ownership::default());
    let inode = fs::metadata(&combined).unwrap().ino();
    // The directory holds a certificate file too: not restricted.
    assert_eq!(mode(&dir.path().join("tls")), DIR_MODE);

    let b = material("B");
    let mut tx = InstallTx::new();
    tx.stage_certificate(&paths, &b, &Ownership::default())
        .unwrap();
    assert_eq!(
        tx.targets().collect::<Vec<_>>(),
        paths.all().collect::<Vec<_>>(),
        "key, combined, then the certificate files"
    );
    tx.apply().unwrap();
    assert_eq!(fs::read(&combined).unwrap(), b.combined_pem());
    tx.rollback().unwrap();
    assert_eq!(fs::read(&combined).unwrap(), a.combined_pem());
    assert_eq!(fs::metadata(&combined).unwrap().ino(), inode);
    assert_eq!(fs::read(key_of(&paths)).unwrap(), a.key_pem);
    assert!(leftovers(&dir.path().join("tls")).is_empty());
}

#[test]
fn combined_file_with_a_group_is_0640() {
    if !is_root() {
        return;
    }
    let dir = tmp();
    let paths = combined_paths(dir.path(), PathOverrides::default());
    let own = Ownership {
        group: Some(Principal::Id(5678)),
        ..Default::default()
    };
    install(&paths, &material("A"), &own);
    let meta = fs::metadata(paths.combined.as_ref().unwrap()).unwrap();
    assert_eq!((meta.gid(), meta.mode() & 0o7777), (5678, KEY_MODE_GROUP));
    assert_eq!(mode(&dir.path().join("tls")), 0o750);
}

#[test]
fn paths_without_key_or_combined_file_are_refused() {
    let dir = tmp();
    let mut paths = nginx_paths(dir.path());
    paths.key = None;
    let mut tx = InstallTx::new();
    let err = tx
        .stage_certificate(&paths, &material("A"), &Ownership::default())
        .unwrap_err();
    assert!(matches!(err, InstallError::NoKeyFile), "{err}");
    assert!(!dir.path().join("www").exists());
}

#[test]
fn unchanged_files_are_not_replaced() {
    let dir = tmp();
    let paths = none_paths(dir.path());
    let a = material("A");
    install(&paths, &a, &Ownership::default());
    let inode = |p: &Path| fs::metadata(p).unwrap().ino();
    let before: Vec<(PathBuf, u64)> = paths.all().map(|p| (p.to_path_buf(), inode(p))).collect();

    // The same material again: nothing staged, nothing renamed; a previous version left by
    // a crashed run is kept until the transaction commits, then goes.
    let stale = dir.path().join("www/.fullchain.pem.cert-agent-prev");
    fs::write(&stale, b"old").unwrap();
    let mut tx = InstallTx::new();
    tx.stage_certificate(&paths, &a, &Ownership::default())
        .unwrap();
    assert!(
        stale.exists(),
        "kept while the transaction can still roll back"
    );
    tx.commit().unwrap();
    assert!(leftovers(&dir.path().join("www")).is_empty());
    for (p, ino) in &before {
        assert_eq!(inode(p), *ino, "{} kept", p.display());
    }

    // Same key, new certificate: the key file stays, the certificate files are replaced.
    let mut b = material("B");
    b.key_pem = a.key_pem.clone();
    install(&paths, &b, &Ownership::default());
    assert_eq!(inode(key_of(&paths)), before[0].1);
    let full = paths.fullchain.as_deref().unwrap();
    assert_ne!(
        inode(full),
        before.iter().find(|(p, _)| p == full).unwrap().1
    );
    assert_eq!(fs::read(full).unwrap(), b.fullchain_pem);

    // Same bytes but another mode wanted: replaced.
    let own = Ownership {
        key_mode: Some(0o400),
        ..Default::default()
    };
    install(&paths, &b, &own);
    assert_eq!(mode(key_of(&paths)), 0o400);
    assert_ne!(inode(key_of(&paths)), before[0].1);
}

#[tokio::test]
async fn deploy_hook_gets_the_combined_path() {
    let dir = tmp();
    let env_file = dir.path().join("env");
    let mut c = cert_install(dir.path(), "www", &["true"]);
    c.paths = combined_paths(dir.path(), PathOverrides::default());
    c.deploy_hook = Some(argv(&[
        "sh",
        "-c",
        &format!("env > '{}'", env_file.display()),
    ]));
    let out = install_all(std::slice::from_ref(&c)).await;
    assert!(out[0].result.is_ok(), "{:?}", out[0].result);
    let env = fs::read_to_string(&env_file).unwrap();
    assert!(env.contains(&format!(
        "CERT_AGENT_COMBINED_PATH={}\n",
        dir.path().join("tls/www.pem").display()
    )));
    assert!(env.contains("CERT_AGENT_KEY_PATH=\n"), "{env}");
    assert!(env.contains("CERT_AGENT_FULLCHAIN_PATH=\n"), "{env}");
    assert!(!env.contains("PRIVATE KEY"));
}

#[tokio::test]
async fn a_batch_staged_in_slices_changes_nothing_before_it_finishes_and_tests_once() {
    let dir = tmp();
    let counter = dir.path().join("count");
    let count = format!("echo x >> '{}'", counter.display());
    let a = cert_install(dir.path(), "a", &["sh", "-c", &count]);
    let b = cert_install(dir.path(), "b", &["sh", "-c", &count]);
    // A later slice naming a path staged by an earlier one is refused for it.
    let mut dup = cert_install(dir.path(), "d", &["sh", "-c", &count]);
    dup.paths.fullchain = a.paths.fullchain.clone();
    let mut batch = InstallBatch::new(12);
    batch.stage(vec![a.clone()]);
    let full_a = a.paths.fullchain.clone().unwrap();
    assert!(!full_a.exists(), "nothing live before the batch finishes");
    batch.stage(vec![b.clone(), dup]);
    let out = batch.finish().await;
    assert_eq!(out.len(), 3);
    assert!(out[0].result.is_ok(), "{:?}", out[0].result);
    assert!(out[1].result.is_ok(), "{:?}", out[1].result);
    assert!(
        matches!(out[2].result, Err(InstallError::DuplicatePath { .. })),
        "{:?}",
        out[2].result
    );
    assert!(out[0].installed() && out[1].installed() && !out[2].installed());
    assert_eq!(fs::read(&full_a).unwrap(), a.material.fullchain_pem);
    let full_b = b.paths.fullchain.clone().unwrap();
    assert_eq!(fs::read(&full_b).unwrap(), b.material.fullchain_pem);
    assert_eq!(fs::read(key_of(&b.paths)).unwrap(), b.material.key_pem);
    // One config test for both slices.
    assert_eq!(fs::read_to_string(&counter).unwrap(), "x\n");
    for full in [&full_a, &full_b] {
        let dir = full.parent().unwrap();
        assert!(leftovers(dir).is_empty(), "{:?}", leftovers(dir));
    }
}

#[tokio::test]
async fn a_batch_dropped_before_it_finishes_removes_what_it_staged() {
    let dir = tmp();
    let a = cert_install(dir.path(), "a", &["true"]);
    let full = a.paths.fullchain.clone().unwrap();
    let mut batch = InstallBatch::new(4);
    batch.stage(vec![a.clone()]);
    let staged = leftovers(full.parent().unwrap());
    assert!(!staged.is_empty(), "staged beside the targets");
    drop(batch);
    assert!(!full.exists());
    assert!(!key_of(&a.paths).exists());
    // The directories it created went with it.
    let parent = full.parent().unwrap();
    assert!(!parent.exists() || leftovers(parent).is_empty());
}

#[tokio::test]
async fn a_held_install_refused_after_its_verification_gets_its_previous_files_back() {
    let dir = tmp();
    let reloads = dir.path().join("reloads");
    let count = format!("echo x >> '{}'", reloads.display());
    let mut a = cert_install(dir.path(), "a", &["true"]);
    let mut b = cert_install(dir.path(), "b", &["true"]);
    for c in [&mut a, &mut b] {
        c.commands.reload = Some(argv(&["sh", "-c", &count]));
    }
    let out = install_all(&[a.clone(), b.clone()]).await;
    assert!(out.iter().all(CertOutcome::installed), "{out:?}");
    let (full_a, full_b) = (
        a.paths.fullchain.clone().unwrap(),
        b.paths.fullchain.clone().unwrap(),
    );
    let (old_a, old_key_a) = (
        fs::read(&full_a).unwrap(),
        fs::read(key_of(&a.paths)).unwrap(),
    );
    let hook = dir.path().join("hooked");
    for c in [&mut a, &mut b] {
        c.material = material(&format!("{}2", c.name));
        c.deploy_hook = Some(argv(&[
            "sh",
            "-c",
            &format!("echo $CERT_AGENT_NAME >> '{}'", hook.display()),
        ]));
    }
    let mut batch = InstallBatch::new(8);
    batch.stage(vec![a.clone(), b.clone()]);
    let (held_out, held) = batch.finish_held().await;
    // Live, not committed: the previous versions are kept, no hook has run.
    assert!(held_out.iter().all(CertOutcome::installed), "{held_out:?}");
    assert_eq!(fs::read(&full_a).unwrap(), a.material.fullchain_pem);
    assert!(!leftovers(full_a.parent().unwrap()).is_empty());
    assert!(!hook.exists());
    let back = std::collections::HashMap::from([("a".to_owned(), "its proof failed".to_owned())]);
    let out = held.settle(&back, held_out).await;
    let err = out[0].result.as_ref().unwrap_err();
    assert!(matches!(err, InstallError::Refused { .. }), "{err}");
    assert!(err.to_string().contains("its proof failed"), "{err}");
    assert!(!out[0].installed() && out[1].installed(), "{out:?}");
    // a: the previous certificate and key, byte for byte; b: the new ones, committed.
    assert_eq!(fs::read(&full_a).unwrap(), old_a);
    assert_eq!(fs::read(key_of(&a.paths)).unwrap(), old_key_a);
    assert_eq!(fs::read(&full_b).unwrap(), b.material.fullchain_pem);
    for full in [&full_a, &full_b] {
        assert!(leftovers(full.parent().unwrap()).is_empty());
    }
    // One reload for the install, one for the batch, one after the rollback; b's hook only.
    assert_eq!(fs::read_to_string(&reloads).unwrap(), "x\nx\nx\n");
    assert_eq!(fs::read_to_string(&hook).unwrap(), "b\n");
}
