//! docs/fleet.md runs as printed: every shell block marked `<!-- test: run -->` is taken from
//! the page, in order, and run in one `bash` with `set -euo pipefail` — the etcd certificates
//! made with openssl, three etcd members on loopback with TLS and client certificates, the
//! root user and role, cert-agent's user, role and password, `auth enable`, the fleet key,
//! `etcdctl del` with the administrator's certificate, and the trial: the bundled sandbox,
//! three hosts each with its own nginx, one run that leads, daemons on the others, every host
//! serving the same serial, `fleet status`, the certificate retired for the fleet from one host,
//! and the trial stopped. The test sets only the
//! variables the page defines at its top (paths and ports).

use crate::support;

use std::collections::BTreeSet;
use std::fs;
use std::os::unix::fs::PermissionsExt;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use support::env::Leaf;
use support::webserver::{Server, free_port, free_port_pair, require};

/// The marker line before a fenced ```sh block that the test runs.
const MARKER: &str = "<!-- test: run -->";

/// The marked shell blocks of `page`, in order, each with the fence's indentation removed (as
/// Markdown renders them). Panics naming the line when a marker is not followed by a ```sh
/// fence, or a block is not closed. Also used for docs/getting-started.md.
pub(crate) fn marked_blocks(page: &str) -> Vec<String> {
    let lines: Vec<&str> = page.lines().collect();
    let mut blocks = Vec::new();
    let mut i = 0;
    while i < lines.len() {
        if lines[i].trim() != MARKER {
            i += 1;
            continue;
        }
        let fence = lines.get(i + 1).copied().unwrap_or_default();
        assert_eq!(
            fence.trim(),
            "```sh",
            "line {}: `{MARKER}` must be followed by a ```sh fence",
            i + 1
        );
        let indent = fence.len() - fence.trim_start().len();
        let mut body = Vec::new();
        let mut j = i + 2;
        loop {
            let line = lines
                .get(j)
                .unwrap_or_else(|| panic!("line {}: block not closed", i + 2));
            if line.trim() == "```" {
                break;
            }
            let strip = line.len().min(indent);
            body.push(if line[..strip].trim().is_empty() {
                &line[strip..]
            } else {
                line
            });
            j += 1;
        }
        blocks.push(body.join("\n"));
        i = j + 1;
    }
    blocks
}

/// Ends what the page started (it writes each process's PID to a file): SIGTERM, a few seconds'
/// grace, then SIGKILL — only those PIDs.
pub(crate) struct Started(pub(crate) Vec<PathBuf>);

impl Started {
    fn pids(&self) -> Vec<i32> {
        self.0
            .iter()
            .filter_map(|p| fs::read_to_string(p).ok())
            .filter_map(|s| s.trim().parse().ok())
            .collect()
    }
}

impl Drop for Started {
    fn drop(&mut self) {
        use nix::sys::signal::{Signal, kill};
        use nix::unistd::Pid;
        let pids = self.pids();
        for &pid in &pids {
            let _ = kill(Pid::from_raw(pid), Signal::SIGTERM);
        }
        let deadline = Instant::now() + Duration::from_secs(10);
        for &pid in &pids {
            while kill(Pid::from_raw(pid), None).is_ok() && Instant::now() < deadline {
                std::thread::sleep(Duration::from_millis(100));
            }
            let _ = kill(Pid::from_raw(pid), Signal::SIGKILL);
        }
    }
}

/// `target/debug/partner-sandbox`, built if needed (the page starts the sandbox as a program).
pub(crate) fn sandbox_binary() -> PathBuf {
    let bin_dir = Path::new(env!("CARGO_BIN_EXE_cert-agent"))
        .parent()
        .expect("binary directory")
        .to_path_buf();
    let target = bin_dir.parent().expect("target directory");
    let cargo = std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into());
    let status = Command::new(cargo)
        .args([
            "build",
            "--quiet",
            "--locked",
            "-p",
            "partner-sandbox",
            "--bin",
        ])
        .arg("partner-sandbox")
        .arg("--manifest-path")
        .arg(Path::new(env!("CARGO_MANIFEST_DIR")).join("Cargo.toml"))
        .env("CARGO_TARGET_DIR", target)
        .status()
        .expect("cargo runs");
    assert!(status.success(), "partner-sandbox could not be built");
    bin_dir.join("partner-sandbox")
}

pub(crate) fn require_programs(names: &[&str]) -> bool {
    let path = std::env::var_os("PATH").unwrap_or_default();
    let missing: Vec<&str> = names
        .iter()
        .copied()
        .filter(|n| {
            !std::env::split_paths(&path)
                .chain(["/usr/sbin".into(), "/sbin".into()])
                .any(|d| d.join(n).is_file())
        })
        .collect();
    if missing.is_empty() {
        return true;
    }
    let msg = format!("missing {missing:?} (apt-get install etcd-server etcd-client openssl curl)");
    assert!(std::env::var_os("CI").is_none(), "{msg}; CI is set");
    eprintln!("skipping: {msg}");
    false
}

/// `bash -c` of a page's marked blocks in its own process group, its output piped: it stops at
/// the first command that fails and names it on stderr (`exit N at line L of the marked
/// blocks: COMMAND`); `PATH` leads to `sandbox` and the tests' cert-agent first.
pub(crate) fn page_command(script: &str, sandbox: &Path) -> Command {
    let mut path = vec![
        sandbox.parent().expect("bin dir").to_path_buf(),
        PathBuf::from(env!("CARGO_BIN_EXE_cert-agent"))
            .parent()
            .expect("bin dir")
            .to_path_buf(),
    ];
    path.extend(std::env::split_paths(
        &std::env::var_os("PATH").unwrap_or_default(),
    ));
    path.extend(["/usr/sbin", "/sbin"].map(PathBuf::from));
    let mut command = Command::new("bash");
    command
        .arg("-c")
        .arg(format!(
            r#"set -euo pipefail
trap 'echo "exit $? at line $((LINENO - 2)) of the marked blocks: $BASH_COMMAND" >&2' ERR
{script}
"#
        ))
        .env("PATH", std::env::join_paths(path).expect("PATH"))
        .env_remove("CERT_AGENT_CONFIG")
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .process_group(0);
    command
}

/// Runs a [`page_command`] for at most `bound` (its process group killed past it): its exit
/// status (`None` when killed) and output.
pub(crate) fn page_output(
    mut command: Command,
    bound: Duration,
) -> (Option<std::process::ExitStatus>, std::process::Output) {
    let mut child = command.spawn().expect("bash runs");
    let status = support::env::wait_exit(&mut child, bound);
    if status.is_none() {
        let _ = nix::sys::signal::killpg(
            nix::unistd::Pid::from_raw(child.id() as i32),
            nix::sys::signal::Signal::SIGKILL,
        );
    }
    (status, child.wait_with_output().expect("output"))
}

/// Whether a page's report says a port it was given was taken meanwhile (a parallel test
/// bound it): etcd says "address already in use", nginx and the sandbox "Address already in
/// use".
pub(crate) fn port_taken(report: &str) -> bool {
    report
        .to_ascii_lowercase()
        .contains("address already in use")
}

/// One run of the page's script in a fresh directory, with fresh ports.
struct PageRun {
    /// Kept until the run's processes are ended (dropped first).
    started: Started,
    trial: PathBuf,
    succeeded: bool,
    stdout: String,
    elapsed: Duration,
    describe: String,
    _dir: tempfile::TempDir,
}

fn run_page(script: &str, sandbox: &Path) -> PageRun {
    let dir = tempfile::tempdir().expect("temp dir");
    // nginx's workers (nobody, when run as root) must reach the web roots.
    fs::set_permissions(dir.path(), fs::Permissions::from_mode(0o755)).unwrap();
    let root = dir.path();
    let members: Vec<String> = (1..=3)
        .map(|i| {
            let (client, peer) = free_port_pair();
            format!("etcd{i}:127.0.0.1:{client}:{peer}")
        })
        .collect();
    let hosts: Vec<String> = (1..=3)
        .map(|i| {
            let (http, https) = free_port_pair();
            format!("web{i}:{http}:{https}")
        })
        .collect();
    let trial = root.join("trial");
    let mut pid_files: Vec<PathBuf> = (1..=3)
        .flat_map(|i| {
            [
                trial.join(format!("etcd{i}.pid")),
                trial.join(format!("web{i}/nginx.pid")),
                trial.join(format!("web{i}/daemon.pid")),
            ]
        })
        .collect();
    pid_files.push(trial.join("sandbox.pid"));
    let started = Started(pid_files);

    let began = Instant::now();
    let mut command = page_command(script, sandbox);
    command
        .current_dir(root)
        .env("ETC", root.join("etc"))
        .env("PKI", root.join("pki"))
        .env("TRY", &trial)
        .env("MEMBERS", members.join(" "))
        .env("SANDBOX_PORT", free_port().to_string())
        .env("HOSTS", hosts.join(" "));
    let (status, out) = page_output(command, Duration::from_secs(240));
    let elapsed = began.elapsed();
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    let logs = || {
        let mut text = String::new();
        for name in [
            "sandbox.log",
            "web2/daemon.log",
            "web3/daemon.log",
            "etcd1.log",
            "etcd2.log",
            "etcd3.log",
        ] {
            let log = fs::read_to_string(trial.join(name)).unwrap_or_default();
            let tail: Vec<&str> = log.lines().rev().take(15).collect();
            text.push_str(&format!("--- {name} ---\n"));
            for l in tail.iter().rev() {
                text.push_str(l);
                text.push('\n');
            }
        }
        text
    };
    // The page's own error comes last: a long report is cut in the middle when shown.
    let describe = format!(
        "{}--- stdout ---\n{stdout}\n--- stderr ---\n{stderr}\n--- the page's commands ended after {elapsed:?}: {status:?}",
        logs()
    );
    PageRun {
        started,
        trial,
        succeeded: status.is_some_and(|s| s.success()),
        stdout: stdout.into_owned(),
        elapsed,
        describe,
        _dir: dir,
    }
}

/// Guards docs/fleet.md: its setting up and its trial of three hosts on one machine run as
/// printed on real etcd with TLS and authentication, three real nginx and the sandbox; every
/// host ends up serving the one certificate the fleet ordered.
#[test]
fn the_fleet_page_runs_as_printed() {
    let page = fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join("docs/fleet.md"))
        .expect("docs/fleet.md");
    let blocks = marked_blocks(&page);
    let script = blocks.join("\n");
    for needed in [
        "openssl req -x509",
        "etcdctl user add root --no-password",
        "etcdctl auth enable",
        "etcdctl del /cert-agent/certs/www/spec",
        "partner-sandbox serve",
        "nginx -c",
        "renew --wait",
        "fleet status",
    ] {
        assert!(
            script.contains(needed),
            "the marked blocks of docs/fleet.md no longer run `{needed}`"
        );
    }
    if !require(Server::Nginx) || !require_programs(&["etcd", "etcdctl", "openssl", "curl"]) {
        return;
    }
    let sandbox = sandbox_binary();

    // Ports are chosen free but released before the page binds them: a port taken meanwhile
    // by a parallel test is tried again on other ports (as the etcd support does).
    let mut run = run_page(&script, &sandbox);
    for _ in 0..2 {
        if run.succeeded || !port_taken(&run.describe) {
            break;
        }
        drop(run);
        run = run_page(&script, &sandbox);
    }
    let (trial, stdout, describe) = (&run.trial, &run.stdout, &run.describe);
    assert!(run.succeeded, "the page's commands failed\n{describe}");
    assert!(stdout.contains("Authentication Enabled"), "{describe}");

    // Every host served the same serial (the page's handshakes) and installed it (its files).
    let served: BTreeSet<&str> = (1..=3)
        .map(|i| {
            let prefix = format!("web{i}: serial=");
            stdout
                .lines()
                .find_map(|l| l.strip_prefix(prefix.as_str()))
                .unwrap_or_else(|| panic!("no handshake line of web{i}\n{describe}"))
        })
        .collect();
    assert_eq!(served.len(), 1, "one serial on every host\n{describe}");
    let serial = served.into_iter().next().unwrap_or_default();
    for i in 1..=3 {
        let installed = Leaf::from_pem_file(&trial.join(format!("web{i}/certs/www.pem")));
        assert_eq!(
            support::env::norm_serial(&installed.serial),
            support::env::norm_serial(serial),
            "web{i}'s installed file"
        );
    }
    assert_eq!(
        stdout
            .lines()
            .filter(|l| l.trim_end().ends_with("current"))
            .count(),
        3,
        "fleet status: every host current\n{describe}"
    );
    // Retired for the fleet from web3: one cancellation asked, web2's daemon archived its
    // record, and `fleet status` says who retired it.
    assert!(
        stdout.contains("'www' is retired for the fleet")
            && stdout.contains("the API answered success=true"),
        "{describe}"
    );
    assert!(stdout.contains("web2: www.json"), "{describe}");
    assert!(
        stdout.contains("www: retired for the fleet by web3"),
        "{describe}"
    );
    eprintln!("docs/fleet.md ran in {:?}", run.elapsed);
    drop(run.started);
}

#[test]
fn marked_blocks_are_taken_in_order_without_their_indentation() {
    let page = "text\n<!-- test: run -->\n```sh\na=1\n```\n```sh\nnot marked\n```\n\
                1. step\n\n   <!-- test: run -->\n   ```sh\n   b=2\n     c=3\n   ```\n";
    assert_eq!(marked_blocks(page), vec!["a=1", "b=2\n  c=3"]);
}
