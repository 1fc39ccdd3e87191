//! Web-server commands: the config test and reload argv per server kind (configurable, never
//! run through a shell), and running a command with a time limit and bounded, quoted output.

use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::sync::Arc;
use std::time::Duration;

use tokio::io::{AsyncRead, AsyncReadExt};

use super::error::InstallError;
use super::paths::ServerKind;

/// Default time limit for a config test, reload or deploy hook.
pub const DEFAULT_COMMAND_TIMEOUT: Duration = Duration::from_secs(60);

/// How much of a command's stdout and of its stderr is kept (each).
const OUTPUT_LIMIT: usize = 16 * 1024;
/// How much of the kept output is quoted in an error message.
const QUOTE_LIMIT: usize = 2000;

/// The config test and reload commands of one web server. Certificates with equal commands
/// share a server: it is tested and reloaded once per run.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct ServerCommands {
    /// Checks the server's configuration (with the new files in place) without applying it.
    pub configtest: Option<Vec<String>>,
    /// Makes the running server load the new files.
    pub reload: Option<Vec<String>>,
    /// Time limit for each command.
    pub timeout: Duration,
}

impl ServerCommands {
    /// The default commands for `kind`: nginx → `nginx -t`, and `systemctl reload nginx` when
    /// systemd runs (`/run/systemd/system` exists) else `nginx -s reload`; apache →
    /// `apachectl -t` / `apachectl graceful` (or `apache2ctl`, whichever exists); none → no
    /// commands.
    pub fn defaults(kind: ServerKind) -> Self {
        let argv = |v: &[&str]| Some(v.iter().map(|s| s.to_string()).collect::<Vec<_>>());
        let (configtest, reload) = match kind {
            ServerKind::Nginx => {
                let reload = if Path::new("/run/systemd/system").is_dir() {
                    argv(&["systemctl", "reload", "nginx"])
                } else {
                    argv(&["nginx", "-s", "reload"])
                };
                (argv(&["nginx", "-t"]), reload)
            }
            ServerKind::Apache => {
                let ctl = if find_program("apachectl").is_none()
                    && find_program("apache2ctl").is_some()
                {
                    "apache2ctl"
                } else {
                    "apachectl"
                };
                (argv(&[ctl, "-t"]), argv(&[ctl, "graceful"]))
            }
            ServerKind::None => (None, None),
        };
        ServerCommands {
            configtest,
            reload,
            timeout: DEFAULT_COMMAND_TIMEOUT,
        }
    }

    /// The defaults for `kind` with each configured command (`configtest_command`,
    /// `reload_command`) taking the place of its default.
    pub fn configured(
        kind: ServerKind,
        configtest: Option<Vec<String>>,
        reload: Option<Vec<String>>,
        timeout: Option<Duration>,
    ) -> Self {
        let d = Self::defaults(kind);
        ServerCommands {
            configtest: configtest.or(d.configtest),
            reload: reload.or(d.reload),
            timeout: timeout.unwrap_or(d.timeout),
        }
    }

    /// Runs the config test, if any.
    pub async fn config_test(&self) -> Result<(), InstallError> {
        match &self.configtest {
            Some(argv) => run_command("config test", argv, &[], self.timeout)
                .await
                .map(drop),
            None => Ok(()),
        }
    }

    /// Runs the reload, if any.
    pub async fn reload(&self) -> Result<(), InstallError> {
        match &self.reload {
            Some(argv) => run_command("reload", argv, &[], self.timeout)
                .await
                .map(drop),
            None => Ok(()),
        }
    }
}

/// What a successful command printed (bounded).
#[derive(Debug, Clone, Default)]
pub struct CommandOutput {
    /// Standard output, at most 16 KiB.
    pub stdout: Vec<u8>,
    /// Standard error, at most 16 KiB.
    pub stderr: Vec<u8>,
}

/// Runs `argv` directly (no shell) with `env` added to the environment, stdin closed, and a
/// time limit; `what` names the command in errors ("config test", "reload", "deploy hook").
/// A bare program name is looked up in `PATH`, then in the sbin directories.
pub async fn run_command(
    what: &'static str,
    argv: &[String],
    env: &[(&str, OsString)],
    timeout: Duration,
) -> Result<CommandOutput, InstallError> {
    let (program, args) = argv
        .split_first()
        .ok_or(InstallError::EmptyCommand { what })?;
    let command = display_command(argv);
    let resolved = if program.contains('/') {
        Some(PathBuf::from(program)).filter(|p| p.is_file())
    } else {
        find_program(program)
    };
    let not_found = || InstallError::ProgramNotFound {
        what,
        command: command.clone(),
        program: program.clone(),
    };
    let resolved = resolved.ok_or_else(not_found)?;
    let mut cmd = tokio::process::Command::new(&resolved);
    cmd.args(args)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .kill_on_drop(true);
    for (k, v) in env {
        cmd.env(k, v);
    }
    let mut child = cmd.spawn().map_err(|e| {
        if e.kind() == std::io::ErrorKind::NotFound {
            not_found()
        } else {
            InstallError::Spawn {
                what,
                command: command.clone(),
                cause: Arc::new(e),
            }
        }
    })?;
    let out = tokio::spawn(read_bounded(child.stdout.take()));
    let err = tokio::spawn(read_bounded(child.stderr.take()));
    let status = tokio::time::timeout(timeout, child.wait()).await;
    // A program that daemonises may leave its output pipes open in a background process:
    // collect what is there shortly after exit instead of waiting for end of file.
    let collect = |h: tokio::task::JoinHandle<Vec<u8>>| async move {
        match tokio::time::timeout(Duration::from_millis(300), h).await {
            Ok(Ok(buf)) => buf,
            _ => Vec::new(),
        }
    };
    let status = match status {
        Ok(Ok(status)) => status,
        Ok(Err(e)) => {
            return Err(InstallError::Spawn {
                what,
                command,
                cause: Arc::new(e),
            });
        }
        Err(_) => {
            let _ = child.kill().await;
            let output = quote_output(&collect(out).await, &collect(err).await);
            return Err(InstallError::CommandTimeout {
                what,
                command,
                seconds: timeout.as_secs(),
                output,
            });
        }
    };
    let stdout = collect(out).await;
    let stderr = collect(err).await;
    if !status.success() {
        let status = match status.code() {
            Some(code) => format!("exit code {code}"),
            None => {
                use std::os::unix::process::ExitStatusExt;
                format!("killed by signal {}", status.signal().unwrap_or(0))
            }
        };
        return Err(InstallError::CommandFailed {
            what,
            command,
            status,
            output: quote_output(&stdout, &stderr),
        });
    }
    Ok(CommandOutput { stdout, stderr })
}

/// Reads a pipe to its end, keeping the first [`OUTPUT_LIMIT`] bytes and discarding the rest
/// so the child never blocks on a full pipe.
async fn read_bounded<R: AsyncRead + Unpin>(pipe: Option<R>) -> Vec<u8> {
    let mut kept = Vec::new();
    let Some(mut pipe) = pipe else {
        return kept;
    };
    let mut buf = [0u8; 4096];
    loop {
        match pipe.read(&mut buf).await {
            Ok(0) | Err(_) => break,
            Ok(n) => {
                let room = OUTPUT_LIMIT.saturating_sub(kept.len());
                kept.extend_from_slice(&buf[..n.min(room)]);
            }
        }
    }
    kept
}

/// `": <stderr and stdout>"` trimmed to the last [`QUOTE_LIMIT`] characters, or "" when the
/// command printed nothing.
fn quote_output(stdout: &[u8], stderr: &[u8]) -> String {
    let mut text = String::new();
    for part in [stderr, stdout] {
        let part = String::from_utf8_lossy(part);
        let part = part.trim();
        if !part.is_empty() {
            if !text.is_empty() {
                text.push('\n');
            }
            text.push_str(part);
        }
    }
    if text.is_empty() {
        return text;
    }
    let count = text.chars().count();
    if count > QUOTE_LIMIT {
        let tail: String = text.chars().skip(count - QUOTE_LIMIT).collect();
        text = format!("...{tail}");
    }
    format!(": {text}")
}

/// The command line as shown in messages: arguments with spaces or quotes are quoted.
pub fn display_command(argv: &[String]) -> String {
    argv.iter()
        .map(|a| {
            if a.is_empty() || a.contains(|c: char| c.is_whitespace() || c == '"' || c == '\'') {
                format!("{a:?}")
            } else {
                a.clone()
            }
        })
        .collect::<Vec<_>>()
        .join(" ")
}

pub use crate::process::find_program;

#[cfg(test)]
mod tests {
    use super::*;

    fn argv(v: &[&str]) -> Vec<String> {
        v.iter().map(|s| s.to_string()).collect()
    }

    #[tokio::test]
    async fn failing_command_quotes_its_output() {
        let err = run_command(
            "config test",
            &argv(&["sh", "-c", "echo 'bad directive in line 3' >&2; exit 1"]),
            &[],
            Duration::from_secs(10),
        )
        .await
        .unwrap_err()
        .to_string();
        assert!(err.contains("config test"), "{err}");
        assert!(err.contains("exit code 1"), "{err}");
        assert!(err.contains("bad directive in line 3"), "{err}");
    }

    #[tokio::test]
    async fn missing_program_is_named() {
        let err = run_command(
            "reload",
            &argv(&["cert-agent-no-such-program", "-s", "reload"]),
            &[],
            Duration::from_secs(10),
        )
        .await
        .unwrap_err();
        assert!(matches!(err, InstallError::ProgramNotFound { .. }));
        assert!(err.to_string().contains("'cert-agent-no-such-program'"));
    }

    #[tokio::test]
    async fn slow_command_times_out_and_output_is_bounded() {
        let err = run_command(
            "reload",
            &argv(&["sleep", "5"]),
            &[],
            Duration::from_millis(200),
        )
        .await
        .unwrap_err();
        assert!(matches!(err, InstallError::CommandTimeout { .. }), "{err}");

        let out = run_command(
            "deploy hook",
            &argv(&["sh", "-c", "head -c 100000 /dev/zero"]),
            &[],
            Duration::from_secs(10),
        )
        .await
        .unwrap();
        assert_eq!(out.stdout.len(), OUTPUT_LIMIT);
    }

    #[tokio::test]
    async fn arguments_are_not_interpreted_by_a_shell() {
        let out = run_command(
            "deploy hook",
            &argv(&["echo", "$HOME;", "`id`"]),
            &[],
            Duration::from_secs(10),
        )
        .await
        .unwrap();
        assert_eq!(out.stdout, b"$HOME; `id`\n");
    }

    #[test]
    fn defaults_per_kind() {
        let n = ServerCommands::defaults(ServerKind::Nginx);
        assert_eq!(n.configtest, Some(argv(&["nginx", "-t"])));
        assert!(n.reload.is_some());
        let a = ServerCommands::defaults(ServerKind::Apache);
        let t = a.configtest.unwrap();
        assert!(t[0] == "apachectl" || t[0] == "apache2ctl");
        assert_eq!(a.reload.unwrap()[1], "graceful");
        let none = ServerCommands::defaults(ServerKind::None);
        assert_eq!((none.configtest, none.reload), (None, None));
    }
}
