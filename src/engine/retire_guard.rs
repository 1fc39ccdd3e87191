//! What `retire` may delete, checked before the confirmation and again right after it: only
//! a file that still holds this certificate's own serial, its key or its chain (read from the
//! file, not judged by its path: [`super::retire_own`]), never a path another configured certificate or another
//! record names, never a file a web server of this host still loads. The servers asked are
//! those the configuration names (each through its own `configtest_command`: a private nginx
//! with `-c` is asked with the same options), the system's when none is configured; a
//! certificate no longer configured gets the same check.

use std::path::{Path, PathBuf};

use anyhow::{Result, bail};

use super::retire::{Plan, RetireOptions};
use crate::config::{CommandLine, Config};
use crate::discover::{NamedFile, Server};
use crate::install::ServerCommands;
use crate::store::Store;
use crate::values::ServerKind;

/// The paths other configured certificates and other records name, with whose.
fn named_elsewhere(config: &Config, store: &Store, name: &str) -> Vec<(PathBuf, String)> {
    let mut out = Vec::new();
    for c in config.certificates.iter().filter(|c| c.name != name) {
        for p in super::deploy::install_paths(c).all() {
            out.push((
                p.to_path_buf(),
                format!("certificate '{}' installs there", c.name),
            ));
        }
    }
    for other in store.names().unwrap_or_default() {
        if other == name {
            continue;
        }
        let Some(i) = store.load(&other).ok().and_then(|r| r.installed) else {
            continue;
        };
        for p in i.files.iter().chain(&i.leaf_file) {
            out.push((p.clone(), format!("the record of '{other}' names it")));
        }
    }
    out
}

/// The argv of a configured command; a shell line only when it is plain words.
fn words(c: &CommandLine) -> Option<Vec<String>> {
    match c {
        CommandLine::Argv(v) => Some(v.clone()),
        CommandLine::Shell(s) => s
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || " /._-=+:,@".contains(c))
            .then(|| s.split_whitespace().map(str::to_owned).collect()),
    }
}

/// The web servers to ask, each with its configuration test: those of the configured
/// certificates (`name`'s first), or none configured, the system's.
fn servers(config: &Config, name: &str) -> Vec<(Server, Option<Vec<String>>)> {
    let mut certs: Vec<_> = config.certificates.iter().collect();
    certs.sort_by_key(|c| c.name != name);
    let mut out: Vec<(Server, Option<Vec<String>>)> = Vec::new();
    for c in certs {
        let server = match c.install.server {
            ServerKind::Nginx => Server::Nginx,
            ServerKind::Apache => Server::Apache,
            ServerKind::None => continue,
        };
        let test = match &c.install.configtest_command {
            Some(cmd) => words(cmd),
            None => ServerCommands::defaults(c.install.server).configtest,
        };
        let entry = (server, test);
        if !out.contains(&entry) {
            out.push(entry);
        }
    }
    out
}

/// Every file the web servers of this host load for TLS (`from`: one saved report instead).
/// `Ok(None)`: no web server to ask.
async fn loaded(
    config: &Config,
    name: &str,
    from: Option<&Path>,
) -> Result<Option<Vec<NamedFile>>> {
    let kind_of = |n: &str| {
        config
            .certificates
            .iter()
            .find(|c| c.name == n)
            .and_then(|c| match c.install.server {
                ServerKind::Nginx => Some(Server::Nginx),
                ServerKind::Apache => Some(Server::Apache),
                ServerKind::None => None,
            })
    };
    if from.is_some() {
        let (server, text) = crate::discover::read_dump(from, kind_of(name)).await?;
        return Ok(Some(crate::discover::loaded_files(server, &text)?));
    }
    let servers = servers(config, name);
    if servers.is_empty() {
        if kind_of(name).is_none() && config.certificates.iter().any(|c| c.name == name) {
            return Ok(None);
        }
        return match crate::discover::read_dump(None, None).await {
            Ok((server, text)) => Ok(Some(crate::discover::loaded_files(server, &text)?)),
            Err(crate::discover::DumpError::NoProgram { .. }) => Ok(None),
            Err(e) => Err(e.into()),
        };
    }
    let mut all = Vec::new();
    for (server, test) in servers {
        let shown = test.as_deref().map(|t| t.join(" ")).unwrap_or_default();
        let Some(argv) = test
            .as_deref()
            .and_then(|t| crate::discover::report_argv(server, t))
        else {
            bail!(
                "cannot tell which files the web server tested by `{shown}` loads: that \
                 configtest_command is not `nginx -t` or `apachectl -t` with its options, so \
                 its `-T`/`-S` report cannot be asked for"
            );
        };
        let text = crate::discover::ask_with(server, &argv).await?;
        // Apache's main file as its `-f` names it (nginx's report starts with its own).
        let main = argv
            .iter()
            .position(|a| a == "-f")
            .and_then(|i| argv.get(i + 1))
            .filter(|_| server == Server::Apache);
        all.extend(crate::discover::loaded_files_with(
            server,
            &text,
            main.map(String::as_str),
        )?);
    }
    Ok(Some(all))
}

impl Plan<'_> {
    /// Everything checked before a file is deleted: files no longer this certificate's and
    /// paths another certificate or record names are kept (whatever `--force` says), then
    /// the web servers are asked ([`Self::in_use`]). Run before the confirmation and
    /// again right after it.
    pub(crate) async fn guard(
        &mut self,
        config: &Config,
        store: &Store,
        from: Option<&Path>,
        opts: RetireOptions,
        refuse: bool,
    ) -> Result<()> {
        self.keep_foreign();
        self.keep_named_elsewhere(&named_elsewhere(config, store, &self.name));
        if self.files.is_empty() && self.placeholder_files.is_empty() {
            return Ok(());
        }
        match loaded(config, &self.name, from).await {
            Ok(None) => Ok(()),
            Ok(Some(named)) => self.in_use(&named, opts.force, !refuse),
            Err(e) if opts.force => {
                tracing::warn!("{e:#}; deleting anyway (--force)");
                Ok(())
            }
            Err(e) if !opts.remove_files || !refuse => {
                let why = format!("could not see whether the web server still uses it ({e:#})");
                for f in std::mem::take(&mut self.files) {
                    self.kept.push((f, why.clone()));
                }
                self.keep_placeholders(&why);
                Ok(())
            }
            Err(e) => Err(e.context(
                "could not see which files the web server still uses; nothing was changed \
                 (--from FILE reads its report from a file, --force deletes without looking)",
            )),
        }
    }

    /// Keeps the files that no longer hold this certificate's serial, key or chain.
    pub(crate) fn keep_foreign(&mut self) {
        let mut kept = Vec::new();
        let own = &self.own;
        self.files.retain(|f| match own.foreign(f) {
            Some(why) => {
                kept.push((f.clone(), why));
                false
            }
            None => true,
        });
        let own = &self.placeholder_own;
        self.placeholder_files.retain(|f| match own.foreign(f) {
            Some(why) => {
                kept.push((f.clone(), format!("not the recorded placeholder: {why}")));
                false
            }
            None => true,
        });
        self.kept.extend(kept);
    }

    /// Keeps the paths that `others` (path, whose) name.
    pub(crate) fn keep_named_elsewhere(&mut self, others: &[(PathBuf, String)]) {
        let mut kept = Vec::new();
        let mut keep =
            |f: &PathBuf| match others.iter().find(|(p, _)| crate::fsutil::same_file(p, f)) {
                Some((_, whose)) => {
                    kept.push((f.clone(), whose.clone()));
                    false
                }
                None => true,
            };
        self.files.retain(&mut keep);
        self.placeholder_files.retain(&mut keep);
        self.kept.extend(kept);
    }

    /// Leaves alone the files a web server still loads (`named`): an installed file is
    /// refused (unless `force`) or, with `keep` (a host retiring what the fleet retired),
    /// kept; a placeholder is kept with the reason.
    pub(crate) fn in_use(&mut self, named: &[NamedFile], force: bool, keep: bool) -> Result<()> {
        let users = |f: &Path| -> Vec<String> {
            let mut at: Vec<String> = named
                .iter()
                .filter(|n| n.names(f))
                .map(|n| n.at.to_string())
                .collect();
            at.dedup();
            at
        };
        let mut refused = Vec::new();
        let mut kept_files = Vec::new();
        self.files.retain(|f| {
            let by = users(f);
            if by.is_empty() {
                return true;
            }
            refused.push(format!("{} (named at {})", f.display(), by.join(", ")));
            if keep {
                kept_files.push((f.clone(), format!("still named at {}", by.join(", "))));
            }
            !keep
        });
        self.kept.extend(kept_files);
        if !refused.is_empty() && !force && !keep {
            bail!(
                "the web server still uses {}: remove or change those sites first (then reload \
                 it), or retire with --force to delete the files anyway; nothing was changed",
                refused.join("; ")
            );
        }
        let mut kept = Vec::new();
        self.placeholder_files.retain(|f| {
            let by = users(f);
            if by.is_empty() || force {
                return true;
            }
            kept.push((
                f.clone(),
                format!("placeholder still named at {}", by.join(", ")),
            ));
            false
        });
        self.kept.extend(kept);
        Ok(())
    }

    /// Keeps the placeholder files (whether the web server still names them is not known).
    pub(crate) fn keep_placeholders(&mut self, reason: &str) {
        for f in std::mem::take(&mut self.placeholder_files) {
            self.kept.push((f, format!("placeholder kept: {reason}")));
        }
    }
}
