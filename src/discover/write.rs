//! `discover --write DIR`: one configuration file per proposed certificate (for
//! `[agent] include`), none for certificates the configuration already has.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use super::{Discovery, Match, Proposal};
use crate::config::Config;

/// A configuration file could not be written.
#[derive(Debug, thiserror::Error)]
pub(crate) enum WriteError {
    #[error("could not create {}", dir.display())]
    CreateDir {
        dir: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("could not write {}", file.display())]
    Write {
        file: PathBuf,
        #[source]
        source: std::io::Error,
    },
}

/// The certificate of `config` that `p` already is: one of the same name, or one naming one of
/// its domains.
pub(crate) fn configured_as(config: Option<&Config>, p: &Proposal) -> Option<String> {
    config.and_then(|c| {
        c.certificates
            .iter()
            .find(|k| k.name == p.name || p.domains.iter().any(|d| k.domains.contains(d)))
            .map(|k| k.name.clone())
    })
}

/// How the files are written.
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct WriteOptions {
    /// The product of every new order (else the account's match, else none).
    pub product_id: Option<u64>,
    /// Replace files that exist.
    pub force: bool,
}

/// Writes `DIR/NAME.toml` for each proposal of `found` that `configured` does not have yet,
/// with the account's answer (`matches`: the order to adopt, or the product to order); the
/// files written, in order. A file that exists is kept (unless [`WriteOptions::force`]) and
/// given to `kept`.
pub(crate) fn write_fragments(
    dir: &Path,
    found: &Discovery,
    configured: Option<&Config>,
    matches: &BTreeMap<String, Match>,
    options: WriteOptions,
    kept: &mut dyn FnMut(&Path),
) -> Result<Vec<PathBuf>, WriteError> {
    std::fs::create_dir_all(dir).map_err(|source| WriteError::CreateDir {
        dir: dir.to_path_buf(),
        source,
    })?;
    let mut written = Vec::new();
    for p in &found.proposals {
        if let Some(k) = configured_as(configured, p) {
            tracing::info!("'{}' is already configured as '{k}'", p.name);
            continue;
        }
        let file = dir.join(format!("{}.toml", p.name));
        if file.exists() && !options.force {
            kept(&file);
            continue;
        }
        let (product, adopt) = match matches.get(&p.name) {
            Some(Match::Adopt {
                certificate_id,
                product_id,
                ..
            }) => (options.product_id.or(*product_id), Some(*certificate_id)),
            Some(Match::Order { product_id, .. }) => (options.product_id.or(*product_id), None),
            None => (options.product_id, None),
        };
        let none = BTreeMap::new();
        let acme = configured.map_or(&none, |c| &c.acme);
        let text = super::fragment::sealed(&p.fragment_with(product, adopt, acme));
        crate::fsutil::write_atomic(&file, text.as_bytes(), 0o644).map_err(|source| {
            WriteError::Write {
                file: file.clone(),
                source,
            }
        })?;
        written.push(file);
    }
    Ok(written)
}
