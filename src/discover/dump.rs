//! The web server's own report, read: `nginx -T` or `apachectl -S` run on this host, or a
//! saved output (a file, or stdin), capped in size and required to be UTF-8.

use std::io::Read as _;
use std::path::Path;
use std::time::Duration;

use crate::process::{Command, RunError, find_program, run};

/// Output of a web server's dump is capped (a configuration of 10,000 sites is a few MB).
const DUMP_LIMIT: usize = 256 << 20;

/// The web servers `discover` reads.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Server {
    /// `nginx -T`.
    Nginx,
    /// `apachectl -S`.
    Apache,
}

/// The report could not be read.
#[derive(Debug, thiserror::Error)]
pub(crate) enum DumpError {
    /// The saved output is not text (a usage error).
    #[error(
        "{} is not UTF-8 text (expected the output of `nginx -T` or `apachectl -S`)",
        file.display()
    )]
    NotText { file: std::path::PathBuf },
    /// No program of the server is installed (a usage error).
    #[error("{programs} was not found in PATH; give the server's output with --from FILE")]
    NoProgram { programs: String },
    #[error("could not read {what}")]
    Read {
        what: String,
        #[source]
        source: std::io::Error,
    },
    #[error("could not run {command}")]
    Run {
        command: String,
        #[source]
        source: RunError,
    },
    #[error("{command} failed ({status}): {stderr}")]
    Failed {
        command: String,
        status: String,
        stderr: String,
    },
}

impl DumpError {
    /// Whether the command was used wrongly (a file that is not a report, no server to ask).
    pub(crate) fn is_usage(&self) -> bool {
        matches!(self, Self::NotText { .. } | Self::NoProgram { .. })
    }
}

/// The server's report and which server it is from: read from `from` (`-`: stdin) when given,
/// else asked of the server (`server`, or nginx when it is installed, else Apache). A saved
/// output is taken as nginx's when it has nginx's file markers.
pub(crate) async fn read_dump(
    from: Option<&Path>,
    server: Option<Server>,
) -> Result<(Server, String), DumpError> {
    match from {
        Some(file) => {
            let text = read_from(file)?;
            let server = server.unwrap_or(if text.contains("# configuration file ") {
                Server::Nginx
            } else {
                Server::Apache
            });
            Ok((server, text))
        }
        None => {
            let server = server.unwrap_or(if find_program("nginx").is_some() {
                Server::Nginx
            } else {
                Server::Apache
            });
            Ok((server, ask(server).await?))
        }
    }
}

fn read_from(file: &Path) -> Result<String, DumpError> {
    let mut bytes = Vec::new();
    if file == Path::new("-") {
        std::io::stdin()
            .take(DUMP_LIMIT as u64)
            .read_to_end(&mut bytes)
            .map_err(|source| DumpError::Read {
                what: "stdin".into(),
                source,
            })?;
    } else {
        std::fs::File::open(file)
            .and_then(|f| f.take(DUMP_LIMIT as u64).read_to_end(&mut bytes))
            .map_err(|source| DumpError::Read {
                what: file.display().to_string(),
                source,
            })?;
    }
    String::from_utf8(bytes).map_err(|_| DumpError::NotText {
        file: file.to_path_buf(),
    })
}

/// Runs the server's own report: `nginx -T`, or `apachectl -S` (`apache2ctl` on Debian).
async fn ask(server: Server) -> Result<String, DumpError> {
    let candidates: &[&str] = match server {
        Server::Nginx => &["nginx"],
        Server::Apache => &["apachectl", "apache2ctl", "httpd"],
    };
    let Some(program) = candidates.iter().find_map(|p| find_program(p)) else {
        return Err(DumpError::NoProgram {
            programs: candidates.join(" or "),
        });
    };
    let flag = if server == Server::Nginx { "-T" } else { "-S" };
    let argv = vec![program.to_string_lossy().into_owned(), flag.to_owned()];
    ask_with(server, &argv).await
}

/// The report command of the server that `configtest` (a configured `configtest_command`)
/// tests: the same program and options (`-c`, `-p`, `-f`, `-d`, `-D`...) with `-t` replaced by
/// `-T` (nginx) or `-S` (Apache); `None` when it is not such a command (a wrapper script, a
/// shell line with more than words), so what that server loads cannot be asked.
pub(crate) fn report_argv(server: Server, configtest: &[String]) -> Option<Vec<String>> {
    let program = configtest.first()?;
    let base = Path::new(program)
        .file_name()?
        .to_string_lossy()
        .into_owned();
    let is_server = match server {
        Server::Nginx => base.starts_with("nginx") || base == "openresty",
        Server::Apache => ["apachectl", "apache2ctl", "httpd", "apache2"].contains(&base.as_str()),
    };
    if !is_server || !configtest.iter().skip(1).any(|a| a == "-t") {
        return None;
    }
    let flag = if server == Server::Nginx { "-T" } else { "-S" };
    Some(
        configtest
            .iter()
            .filter(|a| *a != "-q")
            .map(|a| {
                if a == "-t" {
                    flag.to_owned()
                } else {
                    a.clone()
                }
            })
            .collect(),
    )
}

/// Runs the report command `argv` of `server` ([`report_argv`]).
pub(crate) async fn ask_with(server: Server, argv: &[String]) -> Result<String, DumpError> {
    let command = argv.join(" ");
    let done = run(Command::new(argv, Duration::from_secs(60)).output_limit(DUMP_LIMIT))
        .await
        .map_err(|source| DumpError::Run {
            command: command.clone(),
            source,
        })?;
    if !done.status.success() {
        return Err(DumpError::Failed {
            command,
            status: done.status_text(),
            stderr: String::from_utf8_lossy(&done.stderr).trim().to_owned(),
        });
    }
    // apachectl -S prints part of its listing on stderr.
    let mut text = String::from_utf8_lossy(&done.stdout).into_owned();
    if server == Server::Apache {
        text.push('\n');
        text.push_str(&String::from_utf8_lossy(&done.stderr));
    }
    Ok(text)
}
