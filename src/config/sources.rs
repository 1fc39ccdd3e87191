//! The configuration's sources without parsing them: what a `renew` with nothing due reads to
//! tell that the configuration is the one the due summary was made from
//! ([`crate::store::due::Express`]). The digest is [`super::Config::source_digest`]'s, computed
//! from the main file's text and the files the `include` patterns match now (the patterns are
//! the summary's; the text they came from is part of the digest).

use std::collections::HashSet;
use std::path::{Path, PathBuf};

use super::include::{self, Dir, Expanded};
use super::types::{CommandLine, Config};

/// [`Config::source_digest`] of the configuration read from `path` with `text`, its
/// `[agent] include` being `patterns`; `None` when a pattern cannot be expanded, names a
/// directory that does not exist, or a file changed within the last second.
pub(crate) fn source_digest(path: &Path, text: &str, patterns: &[String]) -> Option<String> {
    let base = path.parent().unwrap_or(Path::new("/"));
    let mut fragments: Vec<PathBuf> = Vec::new();
    for pattern in patterns {
        match include::expand(pattern, base).ok()? {
            Expanded::Files(files) => fragments.extend(files),
            Expanded::NoDirectory(_) => return None,
        }
    }
    fragments.dedup();
    let mut dir = Dir::default();
    let mut stamps = Vec::with_capacity(fragments.len());
    for file in &fragments {
        stamps.push(dir.stamp(file).ok()?);
    }
    super::cache::source_digest(
        path,
        text,
        fragments.iter().map(PathBuf::as_path).zip(stamps.iter()),
    )
}

/// Where `text` puts `agent.state_dir`, read without parsing it: the `state_dir = "…"` line
/// of the `[agent]` table, or the default when that table sets none; `None` when the text
/// does not say it in that plain form. Only a guess, confirmed by the summary found there
/// (it names the state directory its configuration, with this text, has).
pub(crate) fn guess_state_dir(text: &str) -> Option<PathBuf> {
    let mut in_agent = false;
    let mut found: Option<&str> = None;
    for line in text.lines() {
        let line = line.trim();
        if line.starts_with('[') {
            in_agent = line == "[agent]";
            continue;
        }
        if !in_agent {
            continue;
        }
        let Some(rest) = line.strip_prefix("state_dir") else {
            continue;
        };
        let Some(value) = rest.trim_start().strip_prefix('=') else {
            continue;
        };
        let value = value.trim();
        let quoted = value
            .strip_prefix('"')
            .and_then(|v| v.strip_suffix('"'))
            .filter(|v| !v.contains(['"', '\\']))
            .or_else(|| {
                value
                    .strip_prefix('\'')
                    .and_then(|v| v.strip_suffix('\''))
                    .filter(|v| !v.contains('\''))
            })?;
        if found.replace(quoted).is_some() {
            return None;
        }
    }
    Some(PathBuf::from(found.unwrap_or(super::DEFAULT_STATE_DIR)))
}

/// The programs the certificates' commands name (each once), as the checks on reading find
/// them.
pub(crate) fn command_programs(config: &Config) -> Vec<String> {
    let mut seen: HashSet<&str> = HashSet::new();
    let mut out = Vec::new();
    for c in &config.certificates {
        let commands: [&Option<CommandLine>; 4] = [
            &c.install.reload_command,
            &c.install.configtest_command,
            &c.install.deploy_hook,
            &c.dcv.dns_hook,
        ];
        for cmd in commands.into_iter().flatten() {
            if let Some(p) = super::rules::program_to_check(cmd)
                && seen.insert(p)
            {
                out.push(p.to_owned());
            }
        }
    }
    out
}

/// Whether every one of `programs` can still be run.
pub(crate) fn programs_exist(programs: &[String]) -> bool {
    programs
        .iter()
        .all(|p| super::rules::check_program(p).is_ok())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_state_dir_is_guessed_from_the_agent_table_only() {
        let g = |t: &str| guess_state_dir(t);
        assert_eq!(
            g("[agent]\nstate_dir = \"/srv/s\"\n"),
            Some(PathBuf::from("/srv/s"))
        );
        assert_eq!(
            g("[agent]\nstate_dir='/srv/s'\n[api]\nstate_dir = \"/x\"\n"),
            Some(PathBuf::from("/srv/s"))
        );
        assert_eq!(
            g("[api]\nurl = \"x\"\n"),
            Some(PathBuf::from(super::super::DEFAULT_STATE_DIR))
        );
        assert_eq!(g("[agent]\nstate_dir = \"/a\"\nstate_dir = \"/b\"\n"), None);
        assert_eq!(g("[agent]\nstate_dir = \"/a\\\\b\"\n"), None);
        assert_eq!(g("[agent]\nstate_dir = [1]\n"), None);
    }
}
