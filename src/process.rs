//! Child processes: finding a program the way the web servers' own tools are found (`PATH`,
//! then the sbin directories), and running one — directly from its argument vector, never
//! through a shell — with a time limit, bounded output and nothing left behind. The one
//! place that starts programs for web-server commands, deploy, DNS and notify hooks.

use std::ffi::OsString;
use std::os::unix::process::ExitStatusExt;
use std::path::PathBuf;
use std::process::{ExitStatus, Stdio};
use std::time::Duration;

use tokio::io::{AsyncRead, AsyncReadExt, AsyncWriteExt};

/// Directories searched after `PATH` for a bare program name: cron and some service managers
/// run with a `PATH` that lacks the sbin directories where nginx and apachectl live.
const SBIN_DIRS: &[&str] = &["/usr/local/sbin", "/usr/sbin", "/sbin"];

/// How long output is still collected after the program exited: a background process it left
/// may hold the pipes open, and the run must not wait for it.
const OUTPUT_GRACE: Duration = Duration::from_millis(500);

/// Finds a bare program name in `PATH` and then in the sbin directories.
pub fn find_program(name: &str) -> Option<PathBuf> {
    use std::os::unix::fs::PermissionsExt;
    let path = std::env::var_os("PATH").unwrap_or_default();
    std::env::split_paths(&path)
        .chain(SBIN_DIRS.iter().map(PathBuf::from))
        .map(|dir| dir.join(name))
        .find(|p| {
            std::fs::metadata(p)
                .map(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
                .unwrap_or(false)
        })
}

/// A program to run: its argument vector and how it runs.
#[derive(Debug, Clone)]
pub(crate) struct Command<'a> {
    argv: &'a [String],
    timeout: Duration,
    env: Vec<(OsString, OsString)>,
    env_remove_prefix: Option<&'a str>,
    stdin: Option<&'a [u8]>,
    own_group: bool,
    output_limit: usize,
}

impl<'a> Command<'a> {
    /// `argv[0]` (a path, or a bare name found by [`find_program`]) with the rest as its
    /// arguments, killed after `timeout`. Stdin is empty; stdout and stderr are kept up to
    /// 16 KiB each.
    pub(crate) fn new(argv: &'a [String], timeout: Duration) -> Self {
        Self {
            argv,
            timeout,
            env: Vec::new(),
            env_remove_prefix: None,
            stdin: None,
            own_group: false,
            output_limit: 16 * 1024,
        }
    }

    /// Adds a variable to the program's environment.
    pub(crate) fn env(mut self, key: impl Into<OsString>, value: impl Into<OsString>) -> Self {
        self.env.push((key.into(), value.into()));
        self
    }

    /// Removes every inherited variable whose name starts with `prefix` (set ones stay).
    pub(crate) fn env_remove_prefix(mut self, prefix: &'a str) -> Self {
        self.env_remove_prefix = Some(prefix);
        self
    }

    /// Writes `data` to the program's stdin, then closes it.
    pub(crate) fn stdin(mut self, data: &'a [u8]) -> Self {
        self.stdin = Some(data);
        self
    }

    /// Runs the program in a process group of its own, which is killed as a whole when the
    /// time limit passes (hooks that start helpers of their own).
    pub(crate) fn own_process_group(mut self) -> Self {
        self.own_group = true;
        self
    }

    /// Keeps at most `bytes` of stdout and of stderr (each).
    pub(crate) fn output_limit(mut self, bytes: usize) -> Self {
        self.output_limit = bytes;
        self
    }
}

/// How a program ended, with what it printed (bounded).
#[derive(Debug, Clone)]
pub(crate) struct Finished {
    pub status: ExitStatus,
    pub stdout: Vec<u8>,
    pub stderr: Vec<u8>,
}

impl Finished {
    /// `exit code N` or `killed by signal N`.
    pub(crate) fn status_text(&self) -> String {
        match self.status.code() {
            Some(code) => format!("exit code {code}"),
            None => format!("killed by signal {}", self.status.signal().unwrap_or(0)),
        }
    }
}

/// Why a program did not run to its end.
#[derive(Debug, thiserror::Error)]
pub(crate) enum RunError {
    #[error("the command is empty")]
    Empty,
    /// A bare name that is in neither `PATH` nor the sbin directories, or a path that is not
    /// a file.
    #[error("program '{program}' not found")]
    NotFound { program: String },
    #[error("could not be started: {0}")]
    Spawn(std::io::Error),
    #[error("could not be waited for: {0}")]
    Wait(std::io::Error),
    /// Killed at the time limit; what it had printed by then.
    #[error("did not finish within {} s", timeout.as_secs())]
    Timeout {
        timeout: Duration,
        stdout: Vec<u8>,
        stderr: Vec<u8>,
    },
}

/// Runs `cmd` to its end or its time limit. A non-zero exit is not an error here: the caller
/// reads [`Finished::status`].
pub(crate) async fn run(cmd: Command<'_>) -> Result<Finished, RunError> {
    let (program, args) = cmd.argv.split_first().ok_or(RunError::Empty)?;
    if program.is_empty() {
        return Err(RunError::Empty);
    }
    let not_found = || RunError::NotFound {
        program: program.clone(),
    };
    let resolved = if program.contains('/') {
        Some(PathBuf::from(program)).filter(|p| p.is_file())
    } else {
        find_program(program)
    }
    .ok_or_else(not_found)?;
    let mut child_cmd = tokio::process::Command::new(&resolved);
    child_cmd.args(args);
    if let Some(prefix) = cmd.env_remove_prefix {
        for (key, _) in std::env::vars_os() {
            if key.to_string_lossy().starts_with(prefix) {
                child_cmd.env_remove(key);
            }
        }
    }
    for (k, v) in &cmd.env {
        child_cmd.env(k, v);
    }
    child_cmd
        .stdin(if cmd.stdin.is_some() {
            Stdio::piped()
        } else {
            Stdio::null()
        })
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .kill_on_drop(true);
    if cmd.own_group {
        child_cmd.process_group(0);
    }
    let mut child = child_cmd.spawn().map_err(|e| match e.kind() {
        std::io::ErrorKind::NotFound => not_found(),
        _ => RunError::Spawn(e),
    })?;
    let group = cmd.own_group.then(|| child.id()).flatten();
    let limit = cmd.output_limit;
    let out = reader(child.stdout.take(), limit);
    let err = reader(child.stderr.take(), limit);
    let stdin = child.stdin.take().zip(cmd.stdin);
    let wait = async {
        if let Some((mut pipe, data)) = stdin {
            // A program that does not read its input must not hold the run up: a write error
            // (it exited, or closed stdin) is not the program's failure.
            let _ = pipe.write_all(data).await;
            drop(pipe);
        }
        child.wait().await
    };
    let status = tokio::time::timeout(cmd.timeout, wait).await;
    let status = match status {
        Ok(Ok(status)) => status,
        Ok(Err(e)) => {
            kill_group(group);
            return Err(RunError::Wait(e));
        }
        Err(_) => {
            kill_group(group);
            let _ = child.kill().await;
            return Err(RunError::Timeout {
                timeout: cmd.timeout,
                stdout: collect(out).await,
                stderr: collect(err).await,
            });
        }
    };
    Ok(Finished {
        status,
        stdout: collect(out).await,
        stderr: collect(err).await,
    })
}

/// Output of one pipe as it is read: shared so that what was read stays available when the
/// pipe never ends (a background process holding it open).
type Kept = std::sync::Arc<std::sync::Mutex<Vec<u8>>>;

/// Starts reading `pipe` beside the program.
fn reader<R: AsyncRead + Unpin + Send + 'static>(
    pipe: Option<R>,
    limit: usize,
) -> (tokio::task::JoinHandle<()>, Kept) {
    let kept = Kept::default();
    let task = tokio::spawn(read_bounded(pipe, limit, kept.clone()));
    (task, kept)
}

/// What a reader kept, waiting at most [`OUTPUT_GRACE`] for the pipe's end.
async fn collect((task, kept): (tokio::task::JoinHandle<()>, Kept)) -> Vec<u8> {
    let abort = task.abort_handle();
    if tokio::time::timeout(OUTPUT_GRACE, task).await.is_err() {
        abort.abort();
    }
    let mut kept = kept
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner);
    std::mem::take(&mut *kept)
}

/// Reads a pipe to its end, keeping the first `limit` bytes and discarding the rest so the
/// child never blocks on a full pipe.
async fn read_bounded<R: AsyncRead + Unpin>(pipe: Option<R>, limit: usize, kept: Kept) {
    let Some(mut pipe) = pipe else {
        return;
    };
    let mut buf = [0u8; 4096];
    loop {
        match pipe.read(&mut buf).await {
            Ok(0) | Err(_) => break,
            Ok(n) => {
                let mut kept = kept
                    .lock()
                    .unwrap_or_else(std::sync::PoisonError::into_inner);
                let room = limit.saturating_sub(kept.len());
                kept.extend_from_slice(&buf[..n.min(room)]);
            }
        }
    }
}

fn kill_group(pgid: Option<u32>) {
    if let Some(pid) = pgid.and_then(|p| i32::try_from(p).ok()) {
        let _ = nix::sys::signal::killpg(
            nix::unistd::Pid::from_raw(pid),
            nix::sys::signal::Signal::SIGKILL,
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sh(script: &str) -> Vec<String> {
        vec!["/bin/sh".into(), "-c".into(), script.into()]
    }

    #[tokio::test]
    async fn output_status_env_and_stdin() {
        let argv = sh("read line; echo \"$line $X\"; echo err >&2; exit 3");
        let done = run(Command::new(&argv, Duration::from_secs(10))
            .env("X", "there")
            .stdin(b"hello\n"))
        .await
        .unwrap();
        assert_eq!(done.stdout, b"hello there\n");
        assert_eq!(done.stderr, b"err\n");
        assert_eq!(done.status_text(), "exit code 3");
    }

    #[tokio::test]
    async fn output_is_bounded_and_time_limited() {
        let argv = sh("head -c 100000 /dev/zero; sleep 30");
        let started = std::time::Instant::now();
        let err = run(Command::new(&argv, Duration::from_millis(500)).output_limit(10))
            .await
            .unwrap_err();
        assert!(started.elapsed() < Duration::from_secs(10));
        match err {
            RunError::Timeout { stdout, .. } => assert_eq!(stdout.len(), 10),
            other => panic!("{other:?}"),
        }
    }

    #[tokio::test]
    async fn missing_programs_and_empty_commands() {
        let argv = vec!["cert-agent-no-such-program".to_string()];
        assert!(matches!(
            run(Command::new(&argv, Duration::from_secs(1))).await,
            Err(RunError::NotFound { .. })
        ));
        assert!(matches!(
            run(Command::new(&[], Duration::from_secs(1))).await,
            Err(RunError::Empty)
        ));
    }

    #[tokio::test]
    async fn the_group_is_killed_at_the_limit() {
        let dir = tempfile::tempdir().unwrap();
        let marker = dir.path().join("late");
        let argv = sh(&format!("(sleep 1; touch {}) & sleep 30", marker.display()));
        let err = run(Command::new(&argv, Duration::from_millis(300)).own_process_group()).await;
        assert!(matches!(err, Err(RunError::Timeout { .. })));
        tokio::time::sleep(Duration::from_millis(1500)).await;
        assert!(
            !marker.exists(),
            "a process of the group outlived the limit"
        );
    }
}
