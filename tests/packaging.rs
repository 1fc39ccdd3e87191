//! Packaging is tested like code: the systemd units (hardening score, `systemd-analyze
//! verify`, the settings the agent relies on), the cron file, the maintainer scripts and the
//! example configuration are checked on every test run; the .deb and .rpm themselves (file
//! lists, modes, conffiles, versions, lintian, rpmlint, and an install / run / purge cycle
//! with dpkg) when `CERT_AGENT_PACKAGE_TESTS=1` (scripts/test-all sets it in CI after
//! `packaging/build.sh`).
//!
//! Lintian and rpmlint must report no error; every warning tag they report must be explained
//! in `packaging/README.md`. rpmlint runs with `packaging/rpmlint.toml`, whose filters are
//! explained there too.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::sync::OnceLock;

const ROOT: &str = env!("CARGO_MANIFEST_DIR");
const VERSION: &str = env!("CARGO_PKG_VERSION");
const BIN: &str = env!("CARGO_BIN_EXE_cert-agent");

/// Highest `systemd-analyze security` exposure accepted, in tenths (2.0).
const MAX_EXPOSURE_TENTHS: u32 = 20;

fn root() -> &'static Path {
    Path::new(ROOT)
}

fn read(rel: &str) -> String {
    std::fs::read_to_string(root().join(rel)).unwrap_or_else(|e| panic!("{rel}: {e}"))
}

fn have(program: &str) -> bool {
    Command::new("sh")
        .args(["-c", &format!("command -v {program}")])
        .output()
        .is_ok_and(|o| o.status.success())
}

fn run(cmd: &mut Command) -> Output {
    cmd.output()
        .unwrap_or_else(|e| panic!("could not run {cmd:?}: {e}"))
}

fn text(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

/// `Key=value` lines of a unit file (comments and sections dropped).
fn unit_settings(unit: &str) -> Vec<(String, String)> {
    unit.lines()
        .map(str::trim)
        .filter(|l| !l.is_empty() && !l.starts_with('#') && !l.starts_with('['))
        .filter_map(|l| l.split_once('='))
        .map(|(k, v)| (k.trim().to_owned(), v.trim().to_owned()))
        .collect()
}

fn values(settings: &[(String, String)], key: &str) -> Vec<String> {
    settings
        .iter()
        .filter(|(k, _)| k == key)
        .map(|(_, v)| v.clone())
        .collect()
}

fn one(settings: &[(String, String)], key: &str) -> String {
    let v = values(settings, key);
    assert_eq!(v.len(), 1, "{key}: expected one value, got {v:?}");
    v[0].clone()
}

/// systemd-analyze is there; without it the unit checks are skipped, except in the package
/// checks in CI (scripts/test-all installs it there).
fn have_systemd_analyze() -> bool {
    if have("systemd-analyze") {
        return true;
    }
    assert!(
        !(package_tests() && in_ci()),
        "systemd-analyze is required for the package checks in CI (apt-get install systemd)"
    );
    eprintln!("systemd-analyze not installed: skipped");
    false
}

// ---------------------------------------------------------------------------------------------
// Units, cron file, scripts, example configuration: every run
// ---------------------------------------------------------------------------------------------

/// The sandbox settings the renewal service switches on (`yes`); the standalone DCV server's
/// unit has the same values.
const SWITCHED_ON: [&str; 9] = [
    "ProtectHome",
    "PrivateTmp",
    "PrivateDevices",
    "NoNewPrivileges",
    "ProtectKernelTunables",
    "ProtectKernelModules",
    "ProtectControlGroups",
    "RestrictSUIDSGID",
    "LockPersonality",
];

#[test]
fn renewal_service_runs_renew_once_and_treats_pending_as_success() {
    let s = unit_settings(&read("systemd/cert-agent.service"));
    assert_eq!(one(&s, "Type"), "oneshot");
    assert_eq!(one(&s, "ExecStart"), "/usr/bin/cert-agent renew");
    assert_eq!(one(&s, "SuccessExitStatus"), "75");
    assert!(
        values(&s, "Restart").is_empty(),
        "a oneshot run is not restarted"
    );
    assert_eq!(one(&s, "LoadCredential"), "cert-agent-password");
    assert_eq!(one(&s, "StateDirectory"), "cert-agent");
    assert_eq!(one(&s, "StateDirectoryMode"), "0700");
    assert_eq!(one(&s, "UMask"), "0077");
    assert_eq!(one(&s, "ProtectSystem"), "strict");
    for key in SWITCHED_ON {
        assert_eq!(one(&s, key), "yes", "{key}");
    }
    let rw: Vec<String> = values(&s, "ReadWritePaths")
        .iter()
        .flat_map(|v| v.split_whitespace().map(str::to_owned).collect::<Vec<_>>())
        .collect();
    for path in ["-/etc/ssl/cert-agent", "-/var/www"] {
        assert!(
            rw.iter().any(|p| p == path),
            "ReadWritePaths lacks {path}: {rw:?}"
        );
    }
    assert_eq!(
        one(&s, "RestrictAddressFamilies"),
        "AF_UNIX AF_INET AF_INET6"
    );
    assert_eq!(
        one(&s, "CapabilityBoundingSet"),
        "CAP_DAC_OVERRIDE CAP_FOWNER CAP_NET_BIND_SERVICE"
    );
    assert!(values(&s, "SystemCallFilter").contains(&"@system-service".to_owned()));
}

#[test]
fn timer_runs_hourly_spread_and_catches_up() {
    let s = unit_settings(&read("systemd/cert-agent.timer"));
    assert_eq!(one(&s, "OnCalendar"), "hourly");
    assert_eq!(one(&s, "RandomizedDelaySec"), "1h");
    assert_eq!(one(&s, "Persistent"), "true");
    assert_eq!(one(&s, "WantedBy"), "timers.target");
}

#[test]
fn daemon_unit_runs_the_daemon_with_the_same_sandbox() {
    let daemon = unit_settings(&read("systemd/cert-agent-daemon.service"));
    assert_eq!(one(&daemon, "ExecStart"), "/usr/bin/cert-agent run");
    assert_eq!(one(&daemon, "ExecReload"), "/bin/kill -HUP $MAINPID");
    assert_eq!(one(&daemon, "Conflicts"), "cert-agent.timer");
    assert_eq!(one(&daemon, "KillMode"), "mixed");
    // The sandbox of the timer's service, setting for setting.
    let service = unit_settings(&read("systemd/cert-agent.service"));
    let sandbox = |s: &[(String, String)]| -> BTreeSet<(String, String)> {
        s.iter()
            .filter(|(k, _)| {
                k.starts_with("Protect")
                    || k.starts_with("Private")
                    || k.starts_with("Restrict")
                    || k.starts_with("SystemCall")
                    || k.starts_with("Capability")
                    || k.starts_with("State")
                    || [
                        "ReadWritePaths",
                        "UMask",
                        "NoNewPrivileges",
                        "LockPersonality",
                        "MemoryDenyWriteExecute",
                        "KeyringMode",
                        "ProcSubset",
                        "LoadCredential",
                    ]
                    .contains(&k.as_str())
            })
            .cloned()
            .collect()
    };
    assert_eq!(sandbox(&daemon), sandbox(&service));
}

/// The standalone DCV server's unit: `cert-agent serve`, started as root only to bind and switch
/// user, with no capability beyond that and the system calls to switch user added to the
/// services' filter; not restarted after a configuration error.
#[test]
fn serve_unit_runs_serve_with_only_the_rights_to_bind_and_switch_user() {
    let s = unit_settings(&read("systemd/cert-agent-serve.service"));
    assert_eq!(one(&s, "Type"), "exec");
    assert_eq!(one(&s, "ExecStart"), "/usr/bin/cert-agent serve");
    assert_eq!(one(&s, "RestartPreventExitStatus"), "2");
    assert_eq!(
        one(&s, "CapabilityBoundingSet"),
        "CAP_NET_BIND_SERVICE CAP_SETUID CAP_SETGID"
    );
    assert_eq!(
        values(&s, "SystemCallFilter"),
        ["@system-service", "~@privileged @resources", "@setuid"]
    );
    assert!(values(&s, "ReadWritePaths").is_empty(), "writes nothing");
    assert!(values(&s, "LoadCredential").is_empty(), "needs no password");
    assert_eq!(one(&s, "StateDirectory"), "cert-agent");
    assert_eq!(one(&s, "StateDirectoryMode"), "0700");
    // The rest of the sandbox as the renewal service's.
    let service = unit_settings(&read("systemd/cert-agent.service"));
    for key in SWITCHED_ON.iter().copied().chain([
        "ProtectSystem",
        "MemoryDenyWriteExecute",
        "RestrictNamespaces",
        "RestrictAddressFamilies",
        "SystemCallArchitectures",
        "UMask",
    ]) {
        assert_eq!(values(&s, key), values(&service, key), "{key}");
    }
}

/// Highest exposure accepted for `cert-agent-serve.service`, in tenths (2.1): it needs
/// `CAP_SETUID`/`CAP_SETGID` and the `@setuid` system calls to switch to `serve_user`, which
/// `systemd-analyze` counts although the process holds no capability after the switch.
const MAX_SERVE_EXPOSURE_TENTHS: u32 = 21;

/// `systemd-analyze security --offline=true`: overall exposure of each service at most 2.0
/// (2.1 for the standalone DCV server, see [`MAX_SERVE_EXPOSURE_TENTHS`]).
#[test]
fn services_are_hardened_to_exposure_2_or_less() {
    if !have_systemd_analyze() {
        return;
    }
    for (unit, max) in [
        ("cert-agent.service", MAX_EXPOSURE_TENTHS),
        ("cert-agent-daemon.service", MAX_EXPOSURE_TENTHS),
        ("cert-agent-serve.service", MAX_SERVE_EXPOSURE_TENTHS),
    ] {
        let path = root().join("systemd").join(unit);
        let out = run(Command::new("systemd-analyze")
            .args(["security", "--offline=true", "--no-pager"])
            .arg(format!("--threshold={max}"))
            .arg(&path));
        let report = text(&out.stdout) + &text(&out.stderr);
        let score = report
            .lines()
            .find_map(|l| l.split("Overall exposure level for ").nth(1))
            .unwrap_or("(no score)")
            .to_owned();
        eprintln!("{score}");
        assert!(
            out.status.success(),
            "{unit} exposure above {}.{}:\n{report}",
            max / 10,
            max % 10
        );
    }
}

/// `systemd-analyze verify` of the units, with `ExecStart=` pointing at the built binary (the
/// installed units are verified as shipped by the install test).
#[test]
fn units_verify_clean() {
    if !have_systemd_analyze() {
        return;
    }
    let dir = tempfile::tempdir().expect("temporary directory");
    let mut files = Vec::new();
    for unit in [
        "cert-agent.service",
        "cert-agent.timer",
        "cert-agent-daemon.service",
        "cert-agent-serve.service",
    ] {
        let body = read(&format!("systemd/{unit}")).replace("/usr/bin/cert-agent", BIN);
        let path = dir.path().join(unit);
        std::fs::write(&path, body).expect("write unit");
        files.push(path);
    }
    let out = run(Command::new("systemd-analyze")
        .args(["verify", "--man=no"])
        .args(&files));
    let messages = text(&out.stdout) + &text(&out.stderr);
    assert!(
        out.status.success() && messages.trim().is_empty(),
        "systemd-analyze verify:\n{messages}"
    );
}

#[test]
fn cron_file_runs_renew_hourly_only_without_systemd() {
    let cron = read("packaging/cron.d-cert-agent");
    let jobs: Vec<&str> = cron
        .lines()
        .filter(|l| !l.trim().is_empty() && !l.starts_with('#') && !l.contains('='))
        .collect();
    assert_eq!(jobs.len(), 1, "{jobs:?}");
    let job = jobs[0];
    let fields: Vec<&str> = job.split_whitespace().collect();
    assert_eq!(fields[1..5], ["*", "*", "*", "*"], "hourly: {job}");
    assert_eq!(fields[5], "root");
    assert!(job.contains("test ! -d /run/systemd/system &&"), "{job}");
    assert!(job.contains("test -x /usr/bin/cert-agent &&"), "{job}");
    assert!(job.contains("/usr/bin/cert-agent -q renew"), "{job}");
    assert!(!job.contains('%'), "cron turns % into a newline: {job}");
}

/// The cron command, run by `sh` with `/run/systemd/system` present, does nothing; without it,
/// it reaches the run (the sleep and the agent replaced by harmless commands).
#[test]
fn cron_command_is_a_no_op_when_systemd_runs() {
    let cron = read("packaging/cron.d-cert-agent");
    let job = cron
        .lines()
        .find(|l| l.contains("cert-agent -q renew"))
        .expect("job line");
    let command = job.split_whitespace().skip(6).collect::<Vec<_>>().join(" ");
    let dir = tempfile::tempdir().expect("temporary directory");
    let marker = dir.path().join("ran");
    let fake_systemd = dir.path().join("run-systemd-system");
    std::fs::create_dir(&fake_systemd).expect("mkdir");
    let cmd = command
        .replace("/run/systemd/system", &fake_systemd.display().to_string())
        .replace("test -x /usr/bin/cert-agent", "true")
        .replace("sleep", "true")
        .replace(
            "/usr/bin/cert-agent",
            &format!("touch {} #", marker.display()),
        );
    run(Command::new("sh").args(["-c", &cmd]));
    assert!(!marker.exists(), "the job ran under systemd: {cmd}");
    // Without systemd the same line reaches the run.
    std::fs::remove_dir(&fake_systemd).expect("rmdir");
    run(Command::new("sh").args(["-c", &cmd]));
    assert!(
        marker.exists(),
        "the job did not run without systemd: {cmd}"
    );
}

#[test]
fn maintainer_scripts_are_valid_sh() {
    for script in [
        "packaging/debian/postinst",
        "packaging/debian/prerm",
        "packaging/debian/postrm",
        "packaging/rpm/post.sh",
        "packaging/rpm/preun.sh",
        "packaging/rpm/postun.sh",
        "packaging/build.sh",
    ] {
        let shell = if script.ends_with("build.sh") {
            "bash"
        } else {
            "sh"
        };
        let out = run(Command::new(shell).arg("-n").arg(root().join(script)));
        assert!(out.status.success(), "{script}: {}", text(&out.stderr));
    }
    for script in [
        "packaging/debian/postinst",
        "packaging/debian/prerm",
        "packaging/debian/postrm",
    ] {
        let body = read(script);
        assert!(body.starts_with("#!/bin/sh\n"), "{script}");
        assert!(body.contains("\nset -e\n"), "{script}");
    }
    // State is removed on purge only.
    let postrm = read("packaging/debian/postrm");
    let purge = postrm.find("\"$1\" = \"purge\"").expect("purge branch");
    let rm = postrm
        .find("rm -rf /var/lib/cert-agent")
        .expect("state removal");
    assert!(rm > purge);
    assert!(!read("packaging/rpm/postun.sh").contains("rm "));
}

/// The shipped example validates with `config check`, which does not need the password file.
#[test]
fn example_config_validates_without_the_password_file() {
    let example = root().join("packaging/config.toml");
    let example_text = read("packaging/config.toml");
    assert!(example_text.contains("password_file = \"/etc/cert-agent/password\""));
    let dir = tempfile::tempdir().expect("temporary directory");
    // The example's paths are absolute system paths: check a copy whose password file does
    // not exist anywhere, to be sure that nothing reads it.
    let copy = dir.path().join("config.toml");
    std::fs::write(
        &copy,
        example_text.replace(
            "/etc/cert-agent/password",
            "/nonexistent/cert-agent/password",
        ),
    )
    .expect("write");
    for path in [&example, &copy] {
        let out = run(Command::new(BIN)
            .arg("--config")
            .arg(path)
            .args(["config", "check"])
            .env_remove("CREDENTIALS_DIRECTORY"));
        assert!(
            out.status.success(),
            "config check {}: {}{}",
            path.display(),
            text(&out.stdout),
            text(&out.stderr)
        );
    }
}

// ---------------------------------------------------------------------------------------------
// The packages: CERT_AGENT_PACKAGE_TESTS=1
// ---------------------------------------------------------------------------------------------

fn package_tests() -> bool {
    std::env::var("CERT_AGENT_PACKAGE_TESTS").as_deref() == Ok("1")
}

fn in_ci() -> bool {
    std::env::var_os("CI").is_some_and(|v| !v.is_empty())
}

/// True when `tool` is there; otherwise a skip (outside CI) or a failure (in CI).
fn require(tool: &str) -> bool {
    if have(tool) {
        return true;
    }
    assert!(!in_ci(), "{tool} is required in CI (apt-get install it)");
    eprintln!("{tool} not installed: skipped");
    false
}

struct Packages {
    deb: PathBuf,
    rpm: PathBuf,
}

/// The packages in `<target>/packages`, built with packaging/build.sh when missing.
fn packages() -> &'static Packages {
    static PACKAGES: OnceLock<Packages> = OnceLock::new();
    PACKAGES.get_or_init(|| {
        let target = Path::new(BIN)
            .parent()
            .and_then(Path::parent)
            .expect("target directory")
            .to_path_buf();
        let dir = target.join("packages");
        let find = |ext: &str| -> Option<PathBuf> {
            std::fs::read_dir(&dir)
                .ok()?
                .filter_map(Result::ok)
                .map(|e| e.path())
                .find(|p| {
                    p.extension().is_some_and(|e| e == ext)
                        && p.file_name()
                            .is_some_and(|n| n.to_string_lossy().contains(VERSION))
                })
        };
        if find("deb").is_none() || find("rpm").is_none() {
            let status = Command::new(root().join("packaging/build.sh"))
                .status()
                .expect("packaging/build.sh");
            assert!(status.success(), "packaging/build.sh failed");
        }
        Packages {
            deb: find("deb").expect(".deb in target/packages"),
            rpm: find("rpm").expect(".rpm in target/packages"),
        }
    })
}

/// What every package must contain: path, mode.
const CONTENTS: &[(&str, u32)] = &[
    ("/usr/bin/cert-agent", 0o755),
    ("/usr/lib/systemd/system/cert-agent.service", 0o644),
    ("/usr/lib/systemd/system/cert-agent.timer", 0o644),
    ("/usr/lib/systemd/system/cert-agent-daemon.service", 0o644),
    ("/usr/lib/systemd/system/cert-agent-serve.service", 0o644),
    ("/etc/cert-agent/config.toml", 0o600),
    ("/etc/cron.d/cert-agent", 0o644),
    ("/usr/share/man/man1/cert-agent.1.gz", 0o644),
    ("/usr/share/man/man1/cert-agent-renew.1.gz", 0o644),
    ("/usr/share/man/man1/cert-agent-config-check.1.gz", 0o644),
    ("/usr/share/bash-completion/completions/cert-agent", 0o644),
    (
        "/usr/share/fish/vendor_completions.d/cert-agent.fish",
        0o644,
    ),
    ("/usr/share/doc/cert-agent/README.md", 0o644),
    ("/usr/share/doc/cert-agent/README.packaging.md", 0o644),
];

/// `mode path` pairs from an `ls -l`-like listing (`dpkg-deb -c`, `rpm -qlv`).
fn listing(out: &str) -> Vec<(String, u32)> {
    out.lines()
        .filter_map(|l| {
            let fields: Vec<&str> = l.split_whitespace().collect();
            let perms = fields.first()?;
            let path = fields
                .iter()
                .find(|f| f.starts_with('/') || f.starts_with("./"))?;
            let path = path.trim_start_matches('.').to_owned();
            Some((path, parse_mode(perms)?))
        })
        .collect()
}

/// `-rw-------` → 0o600.
fn parse_mode(perms: &str) -> Option<u32> {
    let bits = perms.get(1..10)?;
    let mut mode = 0;
    for (i, c) in bits.chars().enumerate() {
        if c != '-' {
            mode |= 1 << (8 - i);
        }
    }
    Some(mode)
}

fn assert_contents(kind: &str, files: &[(String, u32)], extra: &[(&str, u32)]) {
    for (path, mode) in CONTENTS.iter().chain(extra) {
        let found = files.iter().find(|(p, _)| p == path);
        match found {
            Some((_, m)) => assert_eq!(*m, *mode, "{kind}: {path} has mode {m:o}"),
            None => panic!("{kind}: {path} missing; contents:\n{files:#?}"),
        }
    }
    let man_pages = files
        .iter()
        .filter(|(p, _)| p.starts_with("/usr/share/man/man1/cert-agent"))
        .count();
    assert!(man_pages >= 10, "{kind}: one man page per subcommand");
}

#[test]
fn deb_contains_every_file_with_its_mode_and_conffiles() {
    if !package_tests() || !require("dpkg-deb") {
        return;
    }
    let p = packages();
    let out = run(Command::new("dpkg-deb").arg("-c").arg(&p.deb));
    assert!(out.status.success());
    let files = listing(&text(&out.stdout));
    assert_contents(
        "deb",
        &files,
        &[
            ("/usr/share/zsh/vendor-completions/_cert-agent", 0o644),
            ("/usr/share/doc/cert-agent/copyright", 0o644),
            ("/usr/share/doc/cert-agent/changelog.Debian.gz", 0o644),
            ("/usr/share/doc/cert-agent/changelog.gz", 0o644),
        ],
    );

    let conffiles = run(Command::new("dpkg-deb")
        .args(["-I"])
        .arg(&p.deb)
        .arg("conffiles"));
    let conffiles: BTreeSet<String> = text(&conffiles.stdout)
        .lines()
        .map(|l| l.trim().to_owned())
        .collect();
    assert_eq!(
        conffiles,
        BTreeSet::from([
            "/etc/cert-agent/config.toml".to_owned(),
            "/etc/cron.d/cert-agent".to_owned()
        ])
    );

    let field = |name: &str| {
        let out = run(Command::new("dpkg-deb").arg("-f").arg(&p.deb).arg(name));
        text(&out.stdout).trim().to_owned()
    };
    assert_eq!(field("Package"), "cert-agent");
    assert_eq!(field("Version"), format!("{VERSION}-1"));
    assert!(field("Depends").contains("libc6"), "{}", field("Depends"));
    let info = text(&run(Command::new("dpkg-deb").arg("-I").arg(&p.deb)).stdout);
    for script in ["postinst", "prerm", "postrm"] {
        assert!(info.contains(script), "{script} missing:\n{info}");
    }
    eprintln!(
        "{}: {} bytes",
        p.deb.display(),
        std::fs::metadata(&p.deb).map(|m| m.len()).unwrap_or(0)
    );
}

#[test]
fn rpm_contains_every_file_with_its_mode_and_config_files() {
    if !package_tests() || !require("rpm") {
        return;
    }
    let p = packages();
    let out = run(Command::new("rpm").args(["-qlvp"]).arg(&p.rpm));
    assert!(out.status.success(), "{}", text(&out.stderr));
    let files = listing(&text(&out.stdout));
    assert_contents(
        "rpm",
        &files,
        &[
            ("/usr/share/zsh/site-functions/_cert-agent", 0o644),
            ("/usr/share/doc/cert-agent/CHANGELOG.md", 0o644),
            ("/usr/share/licenses/cert-agent/LICENSE-MIT", 0o644),
            ("/usr/share/licenses/cert-agent/LICENSE-APACHE", 0o644),
        ],
    );
    let config = text(
        &run(Command::new("rpm")
            .args(["-qp", "--configfiles"])
            .arg(&p.rpm))
        .stdout,
    );
    let config: BTreeSet<&str> = config.lines().map(str::trim).collect();
    assert_eq!(
        config,
        BTreeSet::from(["/etc/cert-agent/config.toml", "/etc/cron.d/cert-agent"])
    );
    // %config(noreplace): the file flags of the config files include noreplace (1 << 4).
    let flags = text(
        &run(Command::new("rpm")
            .args(["-qp", "--qf", "[%{FILENAMES} %{FILEFLAGS}\n]"])
            .arg(&p.rpm))
        .stdout,
    );
    for path in ["/etc/cert-agent/config.toml", "/etc/cron.d/cert-agent"] {
        let f: u32 = flags
            .lines()
            .find_map(|l| l.strip_prefix(&format!("{path} ")))
            .and_then(|v| v.trim().parse().ok())
            .unwrap_or_else(|| panic!("no flags for {path}:\n{flags}"));
        assert!(
            f & 1 != 0 && f & 16 != 0,
            "{path}: flags {f} lack config/noreplace"
        );
    }
    let version = text(
        &run(Command::new("rpm")
            .args(["-qp", "--qf", "%{VERSION}-%{RELEASE}"])
            .arg(&p.rpm))
        .stdout,
    );
    assert_eq!(version, format!("{VERSION}-1"));
    let scripts = text(&run(Command::new("rpm").args(["-qp", "--scripts"]).arg(&p.rpm)).stdout);
    for part in ["postinstall", "preuninstall", "postuninstall"] {
        assert!(scripts.contains(part), "{part} missing:\n{scripts}");
    }
    eprintln!(
        "{}: {} bytes",
        p.rpm.display(),
        std::fs::metadata(&p.rpm).map(|m| m.len()).unwrap_or(0)
    );
}

/// Tags that `packaging/README.md` explains (lines such as "- `tag-name`: why").
fn explained_tags() -> BTreeSet<String> {
    read("packaging/README.md")
        .lines()
        .filter_map(|l| l.trim().strip_prefix("- `"))
        .filter_map(|l| l.split('`').next())
        .map(str::to_owned)
        .collect()
}

/// `X: package: tag details` lines of lintian → (level, tag).
fn lintian_findings(out: &str) -> Vec<(char, String)> {
    out.lines()
        .filter_map(|l| {
            let (level, rest) = l.split_once(": ")?;
            let level = level.chars().next().filter(|_| level.len() == 1)?;
            let tag = rest.split_once(": ")?.1.split_whitespace().next()?;
            Some((level, tag.to_owned()))
        })
        .collect()
}

#[test]
fn lintian_reports_no_error_and_only_explained_warnings() {
    if !package_tests() || !require("lintian") {
        return;
    }
    let p = packages();
    let out = run(Command::new("lintian")
        .args(["--tag-display-limit", "0", "--display-info"])
        .arg(&p.deb));
    let report = text(&out.stdout) + &text(&out.stderr);
    eprintln!("lintian:\n{report}");
    let findings = lintian_findings(&text(&out.stdout));
    let errors: Vec<_> = findings.iter().filter(|(l, _)| *l == 'E').collect();
    assert!(errors.is_empty(), "lintian errors: {errors:?}\n{report}");
    let explained = explained_tags();
    let unexplained: BTreeSet<_> = findings
        .iter()
        .filter(|(l, t)| *l == 'W' && !explained.contains(t))
        .map(|(_, t)| t.clone())
        .collect();
    assert!(
        unexplained.is_empty(),
        "lintian warnings not explained in packaging/README.md: {unexplained:?}"
    );
}

#[test]
fn rpmlint_reports_no_error_and_only_explained_warnings() {
    if !package_tests() || !require("rpmlint") {
        return;
    }
    let p = packages();
    let out = run(Command::new("rpmlint")
        .arg("--config")
        .arg(root().join("packaging/rpmlint.toml"))
        .arg(&p.rpm));
    let report = text(&out.stdout) + &text(&out.stderr);
    eprintln!("rpmlint:\n{report}");
    // "cert-agent.x86_64: W: tag-name details"
    let findings: Vec<(char, String)> = text(&out.stdout)
        .lines()
        .filter_map(|l| {
            let rest = l.split_once(": ")?.1;
            let (level, rest) = rest.split_once(": ")?;
            let level = level.chars().next().filter(|_| level.len() == 1)?;
            Some((level, rest.split_whitespace().next()?.to_owned()))
        })
        .collect();
    let errors: Vec<_> = findings.iter().filter(|(l, _)| *l == 'E').collect();
    assert!(errors.is_empty(), "rpmlint errors: {errors:?}\n{report}");
    assert!(
        report.contains(" 0 errors"),
        "rpmlint summary shows errors:\n{report}"
    );
    let explained = explained_tags();
    let unexplained: BTreeSet<_> = findings
        .iter()
        .filter(|(l, t)| *l == 'W' && !explained.contains(t))
        .map(|(_, t)| t.clone())
        .collect();
    assert!(
        unexplained.is_empty(),
        "rpmlint warnings not explained in packaging/README.md: {unexplained:?}"
    );
}

fn is_root() -> bool {
    nix::unistd::geteuid().is_root()
}

fn mode_of(path: &str) -> Option<u32> {
    use std::os::unix::fs::PermissionsExt;
    std::fs::metadata(path)
        .ok()
        .map(|m| m.permissions().mode() & 0o7777)
}

/// Installs the .deb with dpkg, runs the installed binary on the installed example, verifies
/// the installed units, and purges the package again.
#[test]
fn deb_installs_runs_the_example_and_purges() {
    if !package_tests() || !require("dpkg") {
        return;
    }
    if !is_root() {
        assert!(!in_ci(), "installing the .deb needs root; CI is set");
        eprintln!("not root: install test skipped");
        return;
    }
    let p = packages();
    let installed_before = run(Command::new("dpkg-query").args(["-W", "cert-agent"]))
        .status
        .success();
    assert!(
        !installed_before || in_ci(),
        "cert-agent is already installed here; the test would replace it"
    );
    let out = run(Command::new("dpkg").arg("-i").arg(&p.deb));
    assert!(
        out.status.success(),
        "dpkg -i: {}{}",
        text(&out.stdout),
        text(&out.stderr)
    );
    let result = std::panic::catch_unwind(|| {
        let version = run(Command::new("/usr/bin/cert-agent").arg("--version"));
        assert!(version.status.success());
        assert_eq!(
            text(&version.stdout).trim(),
            format!("cert-agent {VERSION}")
        );

        let check = run(Command::new("/usr/bin/cert-agent")
            .args(["config", "check"])
            .env_remove("CERT_AGENT_CONFIG")
            .env_remove("CREDENTIALS_DIRECTORY"));
        assert!(
            check.status.success(),
            "config check on the installed example: {}{}",
            text(&check.stdout),
            text(&check.stderr)
        );
        assert!(text(&check.stdout).contains("/etc/cert-agent/config.toml"));

        assert_eq!(mode_of("/etc/cert-agent/config.toml"), Some(0o600));
        assert_eq!(mode_of("/var/lib/cert-agent"), Some(0o700));
        assert_eq!(mode_of("/etc/cert-agent/conf.d"), Some(0o700));
        assert_eq!(mode_of("/etc/ssl/cert-agent"), Some(0o755));
        assert_eq!(mode_of("/etc/cron.d/cert-agent"), Some(0o644));

        if have("systemd-analyze") {
            let man = if have("man") { "--man=yes" } else { "--man=no" };
            let out = run(Command::new("systemd-analyze").args([
                "verify",
                man,
                "/usr/lib/systemd/system/cert-agent.service",
                "/usr/lib/systemd/system/cert-agent.timer",
                "/usr/lib/systemd/system/cert-agent-daemon.service",
                "/usr/lib/systemd/system/cert-agent-serve.service",
            ]));
            let messages = text(&out.stdout) + &text(&out.stderr);
            assert!(
                out.status.success() && messages.trim().is_empty(),
                "systemd-analyze verify of the installed units:\n{messages}"
            );
        }
        if have("man") {
            let out = run(Command::new("man").args(["-w", "cert-agent-renew"]));
            assert!(out.status.success(), "man page not found");
        }
    });

    // Leave state behind to see that purge removes it.
    let _ = std::fs::write("/var/lib/cert-agent/marker", b"state");
    let purge = run(Command::new("dpkg").args(["--purge", "cert-agent"]));
    assert!(
        purge.status.success(),
        "dpkg --purge: {}{}",
        text(&purge.stdout),
        text(&purge.stderr)
    );
    if let Err(panic) = result {
        std::panic::resume_unwind(panic);
    }
    for gone in [
        "/usr/bin/cert-agent",
        "/etc/cert-agent",
        "/etc/cron.d/cert-agent",
        "/var/lib/cert-agent",
        "/usr/lib/systemd/system/cert-agent.timer",
    ] {
        assert!(!Path::new(gone).exists(), "{gone} left after purge");
    }
}
