//! Web-server commands: the config test and reload argv per server kind (configurable, never
//! run through a shell), and running a command with a time limit and bounded, quoted output.

use std::ffi::OsString;
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use super::error::InstallError;
use super::paths::ServerKind;
use crate::process::{self, RunError};

/// Default time limit for a config test, reload or deploy hook.
pub(crate) const DEFAULT_COMMAND_TIMEOUT: Duration = Duration::from_secs(60);

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
            Some(argv) => run_command("config test", argv, &[], self.timeout).await,
            None => Ok(()),
        }
    }

    /// Runs the reload, if any.
    pub async fn reload(&self) -> Result<(), InstallError> {
        match &self.reload {
            Some(argv) => run_command("reload", argv, &[], self.timeout).await,
            None => Ok(()),
        }
    }
}

/// Runs `argv` directly (no shell) with `env` added to the environment, stdin closed, and a
/// time limit; `what` names the command in errors ("config test", "reload", "deploy hook").
/// A bare program name is looked up in `PATH`, then in the sbin directories. What a command
/// printed (at most 16 KiB of each stream) is quoted in the error when it fails.
pub(crate) async fn run_command(
    what: &'static str,
    argv: &[String],
    env: &[(&str, OsString)],
    timeout: Duration,
) -> Result<(), InstallError> {
    let command = display_command(argv);
    let mut cmd = process::Command::new(argv, timeout).output_limit(OUTPUT_LIMIT);
    for (k, v) in env {
        cmd = cmd.env(k, v);
    }
    let done = process::run(cmd).await.map_err(|e| match e {
        RunError::Empty => InstallError::EmptyCommand { what },
        RunError::NotFound { program } => InstallError::ProgramNotFound {
            what,
            command: command.clone(),
            program,
        },
        RunError::Spawn(e) | RunError::Wait(e) => InstallError::Spawn {
            what,
            command: command.clone(),
            cause: Arc::new(e),
        },
        RunError::Timeout {
            timeout,
            stdout,
            stderr,
        } => InstallError::CommandTimeout {
            what,
            command: command.clone(),
            seconds: timeout.as_secs(),
            output: quote_output(&stdout, &stderr),
        },
    })?;
    if !done.status.success() {
        return Err(InstallError::CommandFailed {
            what,
            command,
            status: done.status_text(),
            output: quote_output(&done.stdout, &done.stderr),
        });
    }
    Ok(())
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
pub(crate) fn display_command(argv: &[String]) -> String {
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

pub(crate) use crate::process::find_program;

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

        // More than the output limit printed: read to the end (no full pipe), not kept.
        run_command(
            "deploy hook",
            &argv(&["sh", "-c", "head -c 100000 /dev/zero"]),
            &[],
            Duration::from_secs(10),
        )
        .await
        .unwrap();
    }

    #[tokio::test]
    async fn arguments_are_not_interpreted_by_a_shell() {
        // ls names the paths it cannot find as it was given them: a shell would have
        // expanded `$HOME`, ended the command at `;` and run `id`.
        let err = run_command(
            "deploy hook",
            &argv(&["ls", "--", "/nonexistent/$HOME;", "/nonexistent/`id`"]),
            &[],
            Duration::from_secs(10),
        )
        .await
        .unwrap_err();
        let InstallError::CommandFailed { output, .. } = &err else {
            panic!("{err}");
        };
        assert!(output.contains("/nonexistent/$HOME;"), "{output}");
        assert!(output.contains("/nonexistent/`id`"), "{output}");
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
