//! Where certificate files go: the default layout per web-server kind and certificate name,
//! with every path overridable to match an existing vhost.

use std::path::{Path, PathBuf};

/// The directory under which default install paths live: `DEFAULT_BASE_DIR/NAME/...`.
pub(crate) const DEFAULT_BASE_DIR: &str = "/etc/ssl/cert-agent";

/// The kind of web server a certificate is installed for (one type with the bundle reader
/// and the configuration's `server`).
pub use crate::values::ServerKind;

/// Paths configured for one certificate (`cert_path`, `chain_path`, `fullchain_path`,
/// `key_path`, `combined_path`); `None` means "use the default for the server kind" — except
/// that with `combined` set, no default file is written, only the configured ones.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct PathOverrides {
    /// `cert_path`: the leaf certificate alone.
    pub cert: Option<PathBuf>,
    /// `chain_path`: the intermediates alone.
    pub chain: Option<PathBuf>,
    /// `fullchain_path`: leaf followed by the intermediates.
    pub fullchain: Option<PathBuf>,
    /// `key_path`: the private key.
    pub key: Option<PathBuf>,
    /// `combined_path`: the private key followed by the leaf and the intermediates, in one
    /// file (switched with a single rename, so key and certificate always match).
    pub combined: Option<PathBuf>,
}

/// The files written for one certificate: each file whose path is set. At least one of `key`
/// and `combined` is set ([`resolve`](Self::resolve) guarantees it; the install refuses paths
/// without either).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct InstallPaths {
    /// The leaf certificate alone.
    pub cert: Option<PathBuf>,
    /// The intermediates alone.
    pub chain: Option<PathBuf>,
    /// Leaf followed by the intermediates.
    pub fullchain: Option<PathBuf>,
    /// The private key alone.
    pub key: Option<PathBuf>,
    /// The private key followed by the leaf and the intermediates.
    pub combined: Option<PathBuf>,
}

impl InstallPaths {
    /// The paths for certificate `name` on a server of `kind` under `base` (normally
    /// [`DEFAULT_BASE_DIR`]): the server's default files, each replaced by its override, plus
    /// any file the server does not use by default but that has a configured path. With a
    /// combined file configured, the server's default files are not written: only the
    /// combined file and the other configured paths.
    pub fn resolve(kind: ServerKind, base: &Path, name: &str, overrides: &PathOverrides) -> Self {
        if overrides.combined.is_some() {
            return InstallPaths {
                cert: overrides.cert.clone(),
                chain: overrides.chain.clone(),
                fullchain: overrides.fullchain.clone(),
                key: overrides.key.clone(),
                combined: overrides.combined.clone(),
            };
        }
        let dir = base.join(name);
        let (cert, chain, fullchain, key) = match kind {
            ServerKind::Nginx => (None, None, Some("fullchain.pem"), "privkey.pem"),
            ServerKind::Apache => (
                Some("certificate.crt"),
                Some("ca_bundle.crt"),
                None,
                "private.key",
            ),
            ServerKind::None => (
                Some("cert.pem"),
                Some("chain.pem"),
                Some("fullchain.pem"),
                "privkey.pem",
            ),
        };
        let pick = |over: &Option<PathBuf>, default: Option<&str>| {
            over.clone().or_else(|| default.map(|f| dir.join(f)))
        };
        InstallPaths {
            cert: pick(&overrides.cert, cert),
            chain: pick(&overrides.chain, chain),
            fullchain: pick(&overrides.fullchain, fullchain),
            key: Some(overrides.key.clone().unwrap_or_else(|| dir.join(key))),
            combined: None,
        }
    }

    /// The default paths for `name` on a server of `kind` under [`DEFAULT_BASE_DIR`].
    pub fn defaults(kind: ServerKind, name: &str) -> Self {
        Self::resolve(
            kind,
            Path::new(DEFAULT_BASE_DIR),
            name,
            &PathOverrides::default(),
        )
    }

    /// Every certificate path that is set (leaf, chain, fullchain order), without the key
    /// and the combined file.
    pub fn certificate_paths(&self) -> impl Iterator<Item = &Path> {
        [&self.cert, &self.chain, &self.fullchain]
            .into_iter()
            .filter_map(|p| p.as_deref())
    }

    /// Every path that is set: key, combined file, then the certificate files in the order
    /// they are switched (chain, leaf, fullchain).
    pub fn all(&self) -> impl Iterator<Item = &Path> {
        [
            &self.key,
            &self.combined,
            &self.chain,
            &self.cert,
            &self.fullchain,
        ]
        .into_iter()
        .filter_map(|p| p.as_deref())
    }

    /// The file the installed private key is read from: the key file, else the combined file.
    pub fn key_file(&self) -> Option<&Path> {
        self.key.as_deref().or(self.combined.as_deref())
    }

    /// The file whose first certificate is the installed leaf: the fullchain, else the leaf
    /// file, else the combined file. It is the last file switched by an install, so a crash
    /// between the renames leaves it showing the previous certificate.
    pub fn leaf_file(&self) -> Option<&Path> {
        self.fullchain
            .as_deref()
            .or(self.cert.as_deref())
            .or(self.combined.as_deref())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn defaults_per_server_kind() {
        let n = InstallPaths::defaults(ServerKind::Nginx, "www");
        assert_eq!(n.cert, None);
        assert_eq!(n.chain, None);
        assert_eq!(
            n.fullchain.as_deref(),
            Some(Path::new("/etc/ssl/cert-agent/www/fullchain.pem"))
        );
        assert_eq!(
            n.key.as_deref(),
            Some(Path::new("/etc/ssl/cert-agent/www/privkey.pem"))
        );
        assert_eq!(n.combined, None);

        let a = InstallPaths::defaults(ServerKind::Apache, "www");
        assert_eq!(
            a.cert.as_deref(),
            Some(Path::new("/etc/ssl/cert-agent/www/certificate.crt"))
        );
        assert_eq!(
            a.chain.as_deref(),
            Some(Path::new("/etc/ssl/cert-agent/www/ca_bundle.crt"))
        );
        assert_eq!(a.fullchain, None);
        assert_eq!(
            a.key.as_deref(),
            Some(Path::new("/etc/ssl/cert-agent/www/private.key"))
        );

        let none = InstallPaths::defaults(ServerKind::None, "x");
        assert_eq!(none.certificate_paths().count(), 3);
        assert_eq!(
            none.key.as_deref(),
            Some(Path::new("/etc/ssl/cert-agent/x/privkey.pem"))
        );
    }

    #[test]
    fn server_kind_spelling() {
        for k in [ServerKind::Nginx, ServerKind::Apache, ServerKind::None] {
            assert_eq!(k.as_str().parse::<ServerKind>(), Ok(k));
        }
        assert!("httpd".parse::<ServerKind>().is_err());
    }

    #[test]
    fn overrides_replace_and_add_files() {
        let over = PathOverrides {
            cert: Some("/srv/tls/leaf.pem".into()),
            key: Some("/srv/keys/site.key".into()),
            ..Default::default()
        };
        let n = InstallPaths::resolve(ServerKind::Nginx, Path::new("/b"), "www", &over);
        assert_eq!(n.cert.as_deref(), Some(Path::new("/srv/tls/leaf.pem")));
        assert_eq!(
            n.fullchain.as_deref(),
            Some(Path::new("/b/www/fullchain.pem"))
        );
        assert_eq!(n.key.as_deref(), Some(Path::new("/srv/keys/site.key")));
    }

    #[test]
    fn a_combined_file_replaces_the_default_layout() {
        for kind in [ServerKind::Nginx, ServerKind::Apache, ServerKind::None] {
            let only = PathOverrides {
                combined: Some("/srv/tls/www.pem".into()),
                ..Default::default()
            };
            let p = InstallPaths::resolve(kind, Path::new("/b"), "www", &only);
            assert_eq!(
                p.all().collect::<Vec<_>>(),
                vec![Path::new("/srv/tls/www.pem")],
                "{kind:?}"
            );
            assert_eq!(p.key_file(), Some(Path::new("/srv/tls/www.pem")));
            assert_eq!(p.leaf_file(), Some(Path::new("/srv/tls/www.pem")));
        }
        let both = PathOverrides {
            combined: Some("/srv/tls/www.pem".into()),
            fullchain: Some("/srv/tls/full.pem".into()),
            key: Some("/srv/tls/www.key".into()),
            ..Default::default()
        };
        let p = InstallPaths::resolve(ServerKind::Nginx, Path::new("/b"), "www", &both);
        assert_eq!(
            p.all().collect::<Vec<_>>(),
            vec![
                Path::new("/srv/tls/www.key"),
                Path::new("/srv/tls/www.pem"),
                Path::new("/srv/tls/full.pem")
            ]
        );
        assert_eq!(p.key_file(), Some(Path::new("/srv/tls/www.key")));
        assert_eq!(p.leaf_file(), Some(Path::new("/srv/tls/full.pem")));
    }
}
