//! Configuration: the TOML contract (`[api]`, `[agent]`, `[defaults]`, `[[certificate]]`,
//! documented in `docs/configuration.md`), its defaults, and validation whose every message
//! names the file, the line and the key ("config.toml line 14: certificate 'www': unknown key
//! `webrot` (did you mean `webroot`?)").
//!
//! The file is read with `toml`'s spanned document (`DeTable`) rather than serde structs, so
//! that every problem, including unknown keys and type errors, is reported with its line, and
//! all problems are reported at once. `[defaults]` values are merged into each certificate;
//! [`Config::render`] prints the effective result with secrets masked (`config check`).
//!
//! - `types.rs`: the validated configuration;
//! - `check/`: the checker, one file per section (`api.rs`, `agent.rs`, `certificate.rs`);
//! - `defs/`: every key declared once (section, name, kind and range, default, the reference's
//!   sentence): the keys each section accepts, the generic checks of numbers and booleans,
//!   and the key tables of `docs/configuration.md`; `error.rs`: problems and "did you mean";
//! - `rules.rs`: value rules the command line shares (domain names, certificate names, email);
//! - `include.rs`: the files `[agent] include` names; `cache.rs`: their checked certificates,
//!   kept between runs while the files are unchanged.
//!
//! Depends only on the foundation: `values`, `process`, `fsutil`, `crypto` (`KeyType`).

mod cache;
mod defs;
mod error;
mod include;
mod rollout;
mod rules;
mod select;
pub(crate) mod sources;
mod types;
mod validate;

#[cfg(test)]
pub(crate) mod testing;
#[cfg(test)]
pub(crate) mod tests;

use std::ffi::OsString;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};

pub use error::ConfigError;
pub(crate) use rollout::{Canaries, RolloutConfig, WaveSize};
pub(crate) use rules::{valid_host_name, validate_certificate_name, validate_domain};
pub(crate) use select::UnknownCertificate;
pub(crate) use types::{
    AcmeCa, ApiConfig, ChainTrust, CommandLine, DcvMethod, Family, FleetConfig, Issuer,
    RevocationConfig, ServerKind, Webroot,
};
pub use types::{CertificateConfig, Config};

/// Default configuration file.
#[allow(dead_code)] // reported dead: the command line spells its own default (cli/args.rs)
pub(crate) const DEFAULT_CONFIG_PATH: &str = "/etc/cert-agent/config.toml";
/// Environment variable naming the configuration file (below `--config`).
#[allow(dead_code)] // reported dead: the command line reads it itself (clap's `env`)
pub(crate) const CONFIG_ENV: &str = "CERT_AGENT_CONFIG";

/// Default `agent.state_dir`.
pub(crate) const DEFAULT_STATE_DIR: &str = "/var/lib/cert-agent";
/// Default `agent.serve_user`: the user `cert-agent serve` runs as after binding its ports.
pub(crate) const DEFAULT_SERVE_USER: &str = "cert-agent-serve";
/// Default key prefix of a fleet in etcd.
pub(crate) const DEFAULT_FLEET_PREFIX: &str = "/cert-agent/";
/// Default `listen` of the standalone DCV server.
pub(crate) const DEFAULT_LISTEN: &str = "0.0.0.0:80";
/// Default `verify_address` when a web server is configured.
pub(crate) const DEFAULT_VERIFY_ADDRESS: &str = "127.0.0.1:443";

/// The configuration file to use: `--config PATH`, else `$CERT_AGENT_CONFIG`, else
/// [`DEFAULT_CONFIG_PATH`].
#[allow(dead_code)] // reported dead: the command line resolves the path (clap's `env`, default)
pub(crate) fn resolve_config_path(cli: Option<&Path>) -> PathBuf {
    resolve_config_path_from(cli, std::env::var_os(CONFIG_ENV))
}

/// [`resolve_config_path`] with the environment value given (for tests).
#[allow(dead_code)] // reported dead: used by its own tests only, like `resolve_config_path`
pub(crate) fn resolve_config_path_from(cli: Option<&Path>, env: Option<OsString>) -> PathBuf {
    match (cli, env) {
        (Some(p), _) => p.to_path_buf(),
        (None, Some(e)) if !e.is_empty() => PathBuf::from(e),
        _ => PathBuf::from(DEFAULT_CONFIG_PATH),
    }
}

impl Config {
    /// The effective configuration as TOML, defaults applied and secrets masked.
    pub fn render(&self) -> String {
        let body = toml::to_string(self)
            .unwrap_or_else(|e| format!("# the configuration cannot be shown as TOML: {e}\n"));
        format!(
            "# Effective configuration read from {}\n\
             # [defaults] are merged into each [[certificate]]; secrets are masked.\n\
             # Install paths not shown take the default of the certificate's `server`.\n\n{body}",
            self.path.display()
        )
    }

    /// Reads and validates the file.
    pub fn load(path: &Path) -> Result<Config, ConfigError> {
        let text = std::fs::read_to_string(path).map_err(|e| ConfigError::Read {
            path: path.to_path_buf(),
            message: crate::fsutil::io_text(&e),
        })?;
        // Read from a file on the host that runs it: the programs it names must be there.
        let mut config = Self::parse_checked(&text, path, true)?;
        if config.api.password.is_some()
            && let Ok(meta) = std::fs::metadata(path)
            && meta.mode() & 0o044 != 0
        {
            config.warnings.push(format!(
                "{}: holds api.password but is readable by group or others (mode {:04o}); \
                 use api.password_file or chmod 600 it",
                path.display(),
                meta.mode() & 0o7777
            ));
        }
        Ok(config)
    }

    /// Validates `text`; `path` is only used in messages. Does not look at the file system
    /// ([`Config::load`] also checks that the programs of command keys exist).
    pub fn parse(text: &str, path: &Path) -> Result<Config, ConfigError> {
        Self::parse_checked(text, path, false)
    }

    /// [`Config::parse`], with a document of any size read in parts (`true`) or whole
    /// (`false`) whatever its size: both must give the same result (the tests and the fuzz
    /// target compare them).
    pub fn parse_in_parts(text: &str, path: &Path, in_parts: bool) -> Result<Config, ConfigError> {
        Self::parse_with(validate::Checker::new(text, false).split(in_parts), path)
    }

    fn parse_checked(text: &str, path: &Path, programs: bool) -> Result<Config, ConfigError> {
        // Read from a file: the files it includes are read too.
        let mut c = validate::Checker::new(text, programs);
        if programs {
            c = c.with_includes();
        }
        Self::parse_with(c, path)
    }

    fn parse_with(mut c: validate::Checker<'_>, path: &Path) -> Result<Config, ConfigError> {
        let result = c.document(path);
        if c.problems.is_empty()
            && let Some(mut config) = result
        {
            config.warnings = c.warnings.into_iter().map(|p| p.display(path)).collect();
            return Ok(config);
        }
        // Main file first, then each included file, each in line order.
        c.problems
            .sort_by(|a, b| (&a.file, a.line).cmp(&(&b.file, b.line)));
        Err(ConfigError::Invalid {
            path: path.to_path_buf(),
            problems: c.problems,
        })
    }
}
