//! docs/getting-started.md's walk "with the sandbox" runs as printed: every shell block marked
//! `<!-- test: run -->` is taken from the page, in order, and run in one `bash` with `set -euo
//! pipefail` — the sandbox started, a private nginx with a placeholder, the configuration,
//! `discover --http-port --write`, `issue`, the served serial, `status`, the trial stopped.
//! The test sets only the variables the page defines at its top (the directory and ports) and
//! puts the built `cert-agent` and `partner-sandbox` on the `PATH`, as the page's build step
//! does.

use std::fs;
use std::os::unix::fs::PermissionsExt;
use std::path::Path;
use std::time::Duration;

use crate::fleet_docs::{
    Started, marked_blocks, page_command, page_output, port_taken, require_programs, sandbox_binary,
};
use crate::support;
use support::webserver::{Server, free_port, free_port_pair, require};

/// Guards the newcomer's path: from the built binaries to a certificate served by a private
/// nginx, against the sandbox, with the commands exactly as the page prints them.
#[test]
fn the_getting_started_sandbox_walk_runs_as_printed() {
    let page =
        fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join("docs/getting-started.md"))
            .expect("docs/getting-started.md");
    let script = marked_blocks(&page).join("\n");
    for needed in [
        "partner-sandbox serve",
        "nginx -c",
        "discover --from",
        "--http-port",
        "issue \"$DOMAIN\" --yes",
        "status",
    ] {
        assert!(
            script.contains(needed),
            "the marked blocks of docs/getting-started.md no longer run `{needed}`"
        );
    }
    if !require(Server::Nginx) || !require_programs(&["openssl", "curl"]) {
        return;
    }
    let sandbox = sandbox_binary();
    // Ports are chosen free but released before the page binds them: a port taken meanwhile
    // by a parallel test is tried again on other ports.
    let mut walk = walk_page(&script, &sandbox);
    for _ in 0..2 {
        if walk.succeeded || !port_taken(&walk.describe) {
            break;
        }
        drop(walk);
        walk = walk_page(&script, &sandbox);
    }
    let (stdout, stderr, describe) = (&walk.stdout, &walk.stderr, &walk.describe);
    assert!(walk.succeeded, "the page's commands failed\n{describe}");
    // The installed file's serial, then the served one: the same.
    let serials: Vec<&str> = stdout
        .lines()
        .filter_map(|l| l.strip_prefix("serial="))
        .collect();
    assert_eq!(serials.len(), 2, "{describe}");
    assert_eq!(
        serials[0], serials[1],
        "nginx serves the installed certificate\n{describe}"
    );
    assert!(
        stdout.contains("wrote ") && stdout.contains("installed certificate "),
        "{describe}"
    );
    assert!(
        stderr.contains("www.try.test: waiting for the CA to validate and issue the order"),
        "{describe}"
    );
    let status_row = stdout
        .lines()
        .find(|l| l.starts_with("www.try.test ") && l.contains(" installed "))
        .unwrap_or_else(|| panic!("no installed row in status\n{describe}"));
    assert!(status_row.contains(serials[0]), "{status_row}");
}

/// One walk through the page's commands, its processes ended when dropped.
struct Walk {
    /// Kept until the walk's processes are ended (dropped first).
    _started: Started,
    succeeded: bool,
    stdout: String,
    stderr: String,
    describe: String,
    _dir: tempfile::TempDir,
}

fn walk_page(script: &str, sandbox: &Path) -> Walk {
    let dir = tempfile::tempdir().expect("temp dir");
    // nginx's workers (nobody, when run as root) must reach the web root.
    fs::set_permissions(dir.path(), fs::Permissions::from_mode(0o755)).unwrap();
    let trial = dir.path().join("try");
    let started = Started(vec![trial.join("sandbox.pid"), trial.join("nginx.pid")]);
    let (http, https) = free_port_pair();
    let mut command = page_command(script, sandbox);
    command
        .current_dir(dir.path())
        .env("TRY", &trial)
        .env("SANDBOX_PORT", free_port().to_string())
        .env("HTTP_PORT", http.to_string())
        .env("HTTPS_PORT", https.to_string());
    let (status, out) = page_output(command, Duration::from_secs(180));
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    // The page's own error comes last: a long report is cut in the middle when shown.
    let describe = format!(
        "--- sandbox.log ---\n{}--- stdout ---\n{stdout}\n--- stderr ---\n{stderr}\n--- the page's commands ended: {status:?}",
        fs::read_to_string(trial.join("sandbox.log")).unwrap_or_default()
    );
    Walk {
        _started: started,
        succeeded: status.is_some_and(|s| s.success()),
        stdout,
        stderr,
        describe,
        _dir: dir,
    }
}
