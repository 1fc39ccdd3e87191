//! Files and deployment through the binary: a full disk under the state directory (before the
//! order: nothing billed) or under the install directory (after the download: live files never
//! truncated, the next run installs without a new order); a read-only target; a symbolic link
//! planted at a target or in the web root; a group- or world-writable parent; modes under
//! `umask 000`; a configured group and mode surviving a renewal; and, through the library,
//! certificate and key always switched as a pair in a combined file while a reader watches
//! (with a control showing the reader catches a switch in two steps), and separate files left
//! as a matching pair after every install.
//! (Rollback after a failed config test or reload is proven by `e2e_rollback.rs` and
//! `install_e2e.rs`.)

use crate::support;

use std::fs;
use std::os::unix::fs::{MetadataExt, PermissionsExt, symlink};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};

use cert_agent::testing::install::{
    CertMaterial, InstallPaths, InstallTx, Ownership, PathOverrides, ServerKind,
};
use support::env::{Publish, TestEnv, snapshot};
use support::faults::{assert_pair, renew_with, require_root, run_env};
use support::scenario::certificate_id;

/// A tmpfs mounted at `dir` for the life of the guard.
struct Mount(PathBuf);

impl Mount {
    fn tmpfs(dir: &Path, size: &str) -> Self {
        fs::create_dir_all(dir).unwrap();
        let ok = Command::new("mount")
            .args(["-t", "tmpfs", "-o", &format!("size={size},mode=0755")])
            .arg("tmpfs")
            .arg(dir)
            .status()
            .unwrap()
            .success();
        assert!(ok, "mount tmpfs at {}", dir.display());
        Mount(dir.to_path_buf())
    }

    fn remount(&self, opts: &str) {
        let ok = Command::new("mount")
            .args(["-o", &format!("remount,{opts}")])
            .arg(&self.0)
            .status()
            .unwrap()
            .success();
        assert!(ok, "remount {opts}");
    }

    /// Fills the file system up with `DIR/.filler` (returns its path).
    fn fill(&self) -> PathBuf {
        use std::io::Write;
        let filler = self.0.join(".filler");
        let mut f = fs::File::create(&filler).unwrap();
        let block = vec![0u8; 1024];
        while f.write_all(&block).and_then(|_| f.sync_all()).is_ok() {}
        filler
    }
}

impl Drop for Mount {
    fn drop(&mut self) {
        let _ = Command::new("umount").arg("-l").arg(&self.0).status();
    }
}

fn mode(p: &Path) -> u32 {
    fs::symlink_metadata(p).unwrap().permissions().mode() & 0o7777
}

fn standalone(domain: &str) -> TestEnv {
    let mut env = TestEnv::new();
    let spec = env.standalone_spec("www", &[domain]);
    env.certs.push(spec);
    env
}

// ---- full disk, read-only target ----

/// Guards the intent write: the state directory's file system is full before the order, so
/// the intent cannot be recorded; no order may be sent.
#[test]
fn full_disk_under_the_state_dir_bills_nothing() {
    if !require_root("a tmpfs state directory") {
        return;
    }
    let env = standalone("statefull.faults-files.test");
    let state = Mount::tmpfs(&env.state_dir(), "64k");
    state.fill();
    let out = renew_with(&env, &[]);
    out.expect_failure();
    assert_eq!(
        env.order_posts(),
        0,
        "no order without a durable intent\n{}",
        out.describe()
    );
    assert_eq!(env.billed(), 0);
    drop(state);
}

/// Guards atomic installs: the install directory's file system is full when the bundle
/// arrives; the placeholders stay byte-identical (never truncated); once space is back the
/// next run installs the certificate without a new order.
#[test]
fn full_disk_under_the_install_dir_never_truncates_live_files() {
    if !require_root("a tmpfs install directory") {
        return;
    }
    let env = standalone("installfull.faults-files.test");
    let spec = env.spec("www").clone();
    let dir = spec.files.key.parent().unwrap().to_path_buf();
    let m = Mount::tmpfs(&dir, "64k");
    let placeholder = env.write_placeholder(&spec);
    let filler = m.fill();
    let out = renew_with(&env, &[]);
    out.expect_failure();
    assert_eq!(
        snapshot(&spec.files.all()),
        placeholder,
        "live files intact"
    );
    assert_eq!(env.billed(), 1);
    let leftovers: Vec<_> = fs::read_dir(&dir)
        .unwrap()
        .flatten()
        .map(|e| e.file_name())
        .filter(|n| n.to_string_lossy().contains("cert-agent"))
        .collect();
    assert!(leftovers.is_empty(), "staging files removed: {leftovers:?}");

    fs::remove_file(filler).unwrap();
    let again = run_env(&env, &["--json", "renew", "--wait", "30", "--force"], &[]);
    again.expect_code(0);
    again.installed_serial("www");
    assert_eq!(env.billed(), 1, "no second order");
    assert_pair(&env, "www");
    drop(m);
}

/// Guards a read-only install directory: the run fails clearly, files unchanged; once
/// writable again, the certificate is installed without a new order.
#[test]
fn read_only_target_fails_then_installs_without_a_new_order() {
    if !require_root("a read-only tmpfs") {
        return;
    }
    let env = standalone("readonly.faults-files.test");
    let spec = env.spec("www").clone();
    let dir = spec.files.key.parent().unwrap().to_path_buf();
    let m = Mount::tmpfs(&dir, "1m");
    let placeholder = env.write_placeholder(&spec);
    m.remount("ro");
    let out = renew_with(&env, &[]);
    out.expect_failure();
    assert!(
        out.text().to_lowercase().contains("read-only"),
        "the error says read-only\n{}",
        out.describe()
    );
    assert_eq!(snapshot(&spec.files.all()), placeholder);
    m.remount("rw");
    let again = run_env(&env, &["--json", "renew", "--wait", "30", "--force"], &[]);
    again.expect_code(0);
    assert_eq!(env.billed(), 1);
    assert_pair(&env, "www");
    drop(m);
}

// ---- links and permissions ----

/// Guards against following links out of the configured directory: the fullchain path is a
/// symlink to a file elsewhere; the run refuses it and the link's destination is untouched.
#[test]
fn a_symlink_planted_at_a_target_is_refused() {
    let env = standalone("link.faults-files.test");
    let spec = env.spec("www").clone();
    env.write_placeholder(&spec);
    let victim = env.path("elsewhere/victim.pem");
    fs::create_dir_all(victim.parent().unwrap()).unwrap();
    fs::write(&victim, "victim").unwrap();
    let target = spec.files.fullchain.clone().unwrap();
    fs::remove_file(&target).unwrap();
    symlink(&victim, &target).unwrap();
    let before = snapshot(&spec.files.all());

    let out = renew_with(&env, &[]);
    out.expect_failure();
    assert_eq!(fs::read_to_string(&victim).unwrap(), "victim");
    assert!(
        fs::symlink_metadata(&target)
            .unwrap()
            .file_type()
            .is_symlink()
    );
    assert_eq!(snapshot(&spec.files.all()), before);
    assert!(
        out.text().contains("link"),
        "the error names the link\n{}",
        out.describe()
    );
}

/// Guards the web root writer: `.well-known` in the web root is a symlink to a directory
/// outside it; nothing is written there.
#[test]
fn a_symlink_planted_in_the_webroot_is_not_followed() {
    let mut env = TestEnv::new();
    let webroot = env.path("www-root");
    let outside = env.path("outside");
    fs::create_dir_all(&webroot).unwrap();
    fs::create_dir_all(outside.join("pki-validation")).unwrap();
    symlink(&outside, webroot.join(".well-known")).unwrap();
    let mut spec = env.cert_spec("www", &["webrootlink.faults-files.test"], "none");
    spec.publish = Publish::Webroot(webroot);
    env.certs.push(spec);
    let out = renew_with(&env, &[]);
    out.expect_failure();
    let written = support::faults::entries(&outside);
    assert_eq!(
        written,
        vec![PathBuf::from("pki-validation")],
        "nothing written through the link\n{}",
        out.describe()
    );
}

/// Guards the parent directory check: an install directory writable by group or others
/// (anyone could swap the files) is refused.
#[test]
fn a_group_or_world_writable_parent_is_refused() {
    for bits in [0o777, 0o775] {
        let env = standalone(&format!("parent{bits:o}.faults-files.test"));
        let spec = env.spec("www").clone();
        let placeholder = env.write_placeholder(&spec);
        let dir = spec.files.key.parent().unwrap();
        fs::set_permissions(dir, fs::Permissions::from_mode(bits)).unwrap();
        let out = renew_with(&env, &[]);
        out.expect_failure();
        assert_eq!(snapshot(&spec.files.all()), placeholder, "{bits:o}");
        assert!(
            out.text().contains("writable"),
            "the error says writable\n{}",
            out.describe()
        );
    }
}

/// Guards file modes against the caller's umask: under `umask 000` the key is 0600, its
/// directory (when it holds only the key) 0700, certificates not writable by others, and the
/// state directory private.
#[test]
fn modes_hold_under_umask_000() {
    let mut env = TestEnv::new();
    let mut spec = env.standalone_spec("www", &["umask.faults-files.test"]);
    spec.files.key = env.path("keys/www/privkey.pem");
    env.certs.push(spec);
    let out = run_env(
        &env,
        &["--json", "renew", "--wait", "30"],
        &[("__UMASK__", "000")],
    );
    out.expect_code(0);
    let files = env.spec("www").files.clone();
    assert_eq!(mode(&files.key), 0o600, "key mode");
    assert_eq!(
        mode(files.key.parent().unwrap()),
        0o700,
        "key directory mode"
    );
    for p in [&files.cert, &files.chain, &files.fullchain]
        .into_iter()
        .flatten()
    {
        assert_eq!(mode(p) & 0o022, 0, "{} mode {:o}", p.display(), mode(p));
    }
    assert_eq!(
        mode(&env.state_dir()) & 0o077,
        0,
        "state dir {:o}",
        mode(&env.state_dir())
    );
    for rel in support::faults::entries(&env.state_dir()) {
        let p = env.state_dir().join(&rel);
        let m = mode(&p);
        assert_eq!(m & 0o077, 0, "{} is private ({m:o})", p.display());
    }
}

/// Guards configured ownership across renewals: `group = "nogroup"`, `mode = "0640"` hold for
/// the key after the first install and after a reissue with a new key.
#[test]
fn configured_group_and_mode_survive_a_renewal() {
    let mut env = TestEnv::new();
    let mut spec = env.standalone_spec("www", &["group.faults-files.test"]);
    spec.extra = "days = 730\nfamily = \"S\"\ngroup = \"nogroup\"\nmode = \"0640\"\n".into();
    env.certs.push(spec);
    renew_with(&env, &[]).expect_code(0);
    let files = env.spec("www").files.clone();
    let check = |when: &str| {
        let meta = fs::metadata(&files.key).unwrap();
        assert_eq!(
            meta.permissions().mode() & 0o7777,
            0o640,
            "{when}: key mode"
        );
        assert_eq!(meta.gid(), 65534, "{when}: key group");
        for p in [&files.cert, &files.fullchain].into_iter().flatten() {
            assert_eq!(
                fs::metadata(p).unwrap().gid(),
                65534,
                "{when}: {}",
                p.display()
            );
        }
    };
    check("first install");
    let key_before = fs::read(&files.key).unwrap();
    let id = certificate_id(&env, "www");
    env.sandbox.age_certificate(id, 20).unwrap();
    run_env(&env, &["--json", "install", "www"], &[]).expect_code(0);
    renew_with(&env, &[]).expect_code(0);
    assert_ne!(fs::read(&files.key).unwrap(), key_before, "a new key");
    check("after the reissue");
    assert_pair(&env, "www");
}

// ---- pair switching (library) ----

fn pair(name: &str) -> CertMaterial {
    let key = rcgen::KeyPair::generate().unwrap();
    let mut params = rcgen::CertificateParams::new(vec![name.to_owned()]).unwrap();
    params
        .distinguished_name
        .push(rcgen::DnType::CommonName, name);
    let cert = params.self_signed(&key).unwrap();
    CertMaterial::new(
        cert.pem().into_bytes(),
        Vec::new(),
        key.serialize_pem().into_bytes(),
    )
}

/// Whether the key and the first certificate of one PEM read belong together (false when
/// either is missing or unreadable).
fn pem_pair_matches(pem: &[u8]) -> bool {
    use rustls_pki_types::pem::PemObject;
    use rustls_pki_types::{CertificateDer, PrivateKeyDer};
    let (Ok(key), Ok(leaf)) = (
        PrivateKeyDer::from_pem_slice(pem),
        CertificateDer::from_pem_slice(pem),
    ) else {
        return false;
    };
    let Ok(key) = rcgen::KeyPair::try_from(&key) else {
        return false;
    };
    use rcgen::PublicKeyData;
    support::env::Leaf::from_der(&leaf).spki == key.subject_public_key_info()
}

/// What a reader saw while installs ran.
struct Watch {
    reads: u64,
    mismatches: u64,
}

/// Runs `switch(i, mismatches so far)` for `i` in `0..n` (until it returns false) while a
/// reader thread calls `read` in a loop; `read` returns whether the pair it saw matched.
fn watch_pair(
    n: usize,
    read: impl Fn() -> bool + Send + 'static,
    mut switch: impl FnMut(usize, u64) -> bool,
) -> Watch {
    let stop = Arc::new(AtomicBool::new(false));
    let mismatches = Arc::new(AtomicU64::new(0));
    let reads = Arc::new(AtomicU64::new(0));
    let reader = {
        let (stop, mismatches, reads) = (stop.clone(), mismatches.clone(), reads.clone());
        std::thread::spawn(move || {
            while !stop.load(Ordering::Relaxed) {
                reads.fetch_add(1, Ordering::Relaxed);
                if !read() {
                    mismatches.fetch_add(1, Ordering::Relaxed);
                }
            }
        })
    };
    for i in 0..n {
        if !switch(i, mismatches.load(Ordering::Relaxed)) {
            break;
        }
    }
    stop.store(true, Ordering::Relaxed);
    reader.join().unwrap();
    Watch {
        reads: reads.load(Ordering::Relaxed),
        mismatches: mismatches.load(Ordering::Relaxed),
    }
}

/// Installs `m` at `paths` through the install transaction (stage, apply, commit).
fn install_tx(paths: &InstallPaths, m: &CertMaterial) {
    let mut tx = InstallTx::new();
    tx.stage_certificate(paths, m, &Ownership::default())
        .unwrap();
    tx.apply().unwrap();
    tx.commit().unwrap();
}

fn pairs() -> Vec<CertMaterial> {
    (0..4)
        .map(|i| pair(&format!("p{i}.faults-files.test")))
        .collect()
}

/// Guards the pair switch: with a combined file, while 1000 installs alternate between four
/// key pairs, a reader that reads the file (as a web server does on a config test or reload)
/// and parses key and leaf from it never sees a certificate for another key, nor a missing or
/// partial file.
#[test]
fn certificate_and_key_are_switched_as_a_pair() {
    let dir = tempfile::tempdir().unwrap();
    let combined = dir.path().join("www.pem");
    let paths = InstallPaths::resolve(
        ServerKind::None,
        dir.path(),
        "www",
        &PathOverrides {
            combined: Some(combined.clone()),
            ..Default::default()
        },
    );
    assert_eq!(paths.all().collect::<Vec<_>>(), vec![combined.as_path()]);
    let pairs = pairs();
    install_tx(&paths, &pairs[0]);
    let file = combined.clone();
    let watch = watch_pair(
        1000,
        move || fs::read(&file).is_ok_and(|pem| pem_pair_matches(&pem)),
        |i, _| {
            install_tx(&paths, &pairs[(i + 1) % pairs.len()]);
            true
        },
    );
    eprintln!(
        "combined file: {} reads during 1000 installs, {} mismatched",
        watch.reads, watch.mismatches
    );
    assert!(watch.reads >= 100, "the reader ran: {} reads", watch.reads);
    assert_eq!(watch.mismatches, 0, "reads that saw a mismatched pair");
    assert_eq!(fs::read(&combined).unwrap(), pairs[1000 % 4].combined_pem());
}

/// Guards the pair reader above against passing for the wrong reason: the same reader, on a
/// combined file switched in two renames (first the new key with the old chain, then the new
/// chain), sees mismatched pairs within a few thousand switches.
#[test]
fn the_pair_reader_sees_a_switch_in_two_steps() {
    let dir = tempfile::tempdir().unwrap();
    let combined = dir.path().join("www.pem");
    let staged = dir.path().join(".www.pem.new");
    let pairs = pairs();
    let content = |key: &CertMaterial, chain: &CertMaterial| {
        let mut half = key.clone();
        half.fullchain_pem = chain.fullchain_pem.clone();
        half.combined_pem()
    };
    let rename_in = |data: &[u8]| {
        fs::write(&staged, data).unwrap();
        fs::rename(&staged, &combined).unwrap();
    };
    rename_in(&pairs[0].combined_pem());
    let file = combined.clone();
    let watch = watch_pair(
        20_000,
        move || fs::read(&file).is_ok_and(|pem| pem_pair_matches(&pem)),
        |i, seen| {
            let (old, new) = (&pairs[i % 4], &pairs[(i + 1) % 4]);
            rename_in(&content(new, old));
            rename_in(&new.combined_pem());
            seen == 0
        },
    );
    eprintln!(
        "combined file in two steps: {} reads, {} mismatched",
        watch.reads, watch.mismatches
    );
    assert!(
        watch.mismatches > 0,
        "a two-step switch must be visible to the reader ({} reads)",
        watch.reads
    );
}

/// Measures the window of separate key and fullchain files switched by the install
/// transaction (renames back to back, key first), with a reader that reads the key and then
/// the fullchain; the window is documented, not removed, so the test asserts only that the
/// reader ran and that every install left a matching pair on disk.
#[test]
fn separate_files_leave_a_matching_pair_after_each_install() {
    let dir = tempfile::tempdir().unwrap();
    let paths = InstallPaths::resolve(
        ServerKind::None,
        dir.path(),
        "www",
        &PathOverrides {
            fullchain: Some(dir.path().join("fullchain.pem")),
            key: Some(dir.path().join("privkey.pem")),
            combined: Some(dir.path().join("combined.pem")),
            ..Default::default()
        },
    );
    let pairs = pairs();
    install_tx(&paths, &pairs[0]);
    let (key, full) = (paths.key.clone().unwrap(), paths.fullchain.clone().unwrap());
    let (rk, rf) = (key.clone(), full.clone());
    let watch = watch_pair(
        300,
        move || match (fs::read(&rk), fs::read(&rf)) {
            (Ok(mut k), Ok(f)) => {
                k.extend_from_slice(&f);
                pem_pair_matches(&k)
            }
            _ => false,
        },
        |i, _| {
            install_tx(&paths, &pairs[(i + 1) % pairs.len()]);
            let mut on_disk = fs::read(&key).unwrap();
            on_disk.extend_from_slice(&fs::read(&full).unwrap());
            assert!(pem_pair_matches(&on_disk), "after install {i}");
            assert!(
                pem_pair_matches(&fs::read(paths.combined.as_ref().unwrap()).unwrap()),
                "combined after install {i}"
            );
            true
        },
    );
    eprintln!(
        "separate key and fullchain: {} reads during 300 installs, {} saw a mismatched pair",
        watch.reads, watch.mismatches
    );
    assert!(watch.reads >= 100, "the reader ran: {} reads", watch.reads);
}
