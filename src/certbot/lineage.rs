//! One certbot lineage read from its renewal configuration and its `live/NAME/` files: every
//! path the configuration names must lie inside the certbot directory, every link must
//! resolve inside it, every file is read up to a limit, and the certificate must match its
//! key. A lineage that breaks any of these is reported with the file (and line) at fault and
//! left alone.

use std::fs;
use std::io::Read;
use std::path::{Component, Path, PathBuf};

use crate::crypto::{CertificateInfo, KeyType, PrivateKey};
use crate::values::text::quote_max;

use super::conf::{At, RenewalConf};

/// The largest certificate, chain or key file read.
const MAX_PEM_BYTES: u64 = 256 * 1024;

/// A lineage that cannot be taken over: the file, the line when the fault is in the renewal
/// configuration, and why.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{}{}: {message}", file.display(), line.map(|l| format!(" line {l}")).unwrap_or_default())]
pub(crate) struct LineageError {
    pub file: PathBuf,
    pub line: Option<usize>,
    pub message: String,
}

/// How certbot proved control of the names.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Authenticator {
    /// `--webroot`: a default web root (the first `-w`) and one per name.
    Webroot {
        default: Option<PathBuf>,
        map: Vec<(String, PathBuf)>,
    },
    /// `--standalone`: certbot's own server on port 80.
    Standalone,
    /// certbot's `nginx` or `apache` plugin (named), which answered through a temporary
    /// change of the server's configuration: cert-agent needs a web root there instead.
    ServerPlugin(String),
    /// A DNS plugin or `--manual` (named): validated by a DNS record.
    Dns(String),
}

/// The four files of a lineage.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Files {
    pub cert: PathBuf,
    pub chain: PathBuf,
    pub fullchain: PathBuf,
    pub privkey: PathBuf,
}

impl Files {
    /// `(path, what)` of each file.
    pub(crate) fn each(&self) -> [(&Path, &'static str); 4] {
        [
            (&self.cert, "cert"),
            (&self.chain, "chain"),
            (&self.fullchain, "fullchain"),
            (&self.privkey, "privkey"),
        ]
    }
}

/// A lineage that can be taken over.
#[derive(Debug, Clone)]
pub(crate) struct Lineage {
    /// The lineage's name (`renewal/NAME.conf`).
    pub name: String,
    pub conf_file: PathBuf,
    /// The ACME directory URL.
    pub server: String,
    /// The account id under `accounts/`.
    pub account: Option<String>,
    pub authenticator: Authenticator,
    /// `nginx`, `apache` or `none` (certbot's installer).
    pub installer: &'static str,
    pub preferred_chain: Option<String>,
    /// The `live/NAME/` paths the web server names.
    pub live: Files,
    /// Where they point in `archive/NAME/`.
    pub targets: Files,
    /// The certificate in use.
    pub leaf: CertificateInfo,
    pub key_type: KeyType,
    /// The certificate's names, its common name first.
    pub domains: Vec<String>,
}

/// Reads the lineage of the renewal configuration `conf_file` inside the certbot directory
/// `root` (canonical).
pub(crate) fn read(root: &Path, conf_file: &Path) -> Result<Lineage, LineageError> {
    let fail = |line: Option<usize>, message: String| LineageError {
        file: conf_file.to_path_buf(),
        line,
        message,
    };
    let name = conf_file
        .file_stem()
        .and_then(|s| s.to_str())
        .filter(|n| crate::store::check_name(n).is_ok())
        .ok_or_else(|| {
            fail(
                None,
                "the lineage's name cannot be a certificate name (letters, digits, '.', '_', '-')"
                    .into(),
            )
        })?
        .to_owned();
    let text =
        read_file(conf_file, super::conf::MAX_CONF_BYTES as u64).map_err(|m| fail(None, m))?;
    let text = String::from_utf8(text).map_err(|_| fail(None, "not UTF-8 text".into()))?;
    let conf = RenewalConf::parse(&text).map_err(|e| fail(Some(e.line), e.message))?;
    let required = |v: &Option<At<String>>, key: &str| {
        v.clone()
            .ok_or_else(|| fail(None, format!("`{key}` is missing")))
    };
    let inside = |at: &At<String>, key: &str| -> Result<PathBuf, LineageError> {
        let path = PathBuf::from(&at.value);
        let plain = path.is_absolute()
            && path
                .components()
                .all(|c| matches!(c, Component::RootDir | Component::Normal(_)));
        if !plain || !path.starts_with(root) {
            return Err(fail(
                Some(at.line),
                format!(
                    "`{key}` {} is not inside {}",
                    quote_max(&at.value, 200),
                    root.display()
                ),
            ));
        }
        Ok(path)
    };
    let archive = match &conf.archive_dir {
        Some(at) => inside(at, "archive_dir")?,
        None => root.join("archive").join(&name),
    };
    let mut live = Vec::new();
    let mut targets = Vec::new();
    for (key, value) in [
        ("cert", &conf.cert),
        ("chain", &conf.chain),
        ("fullchain", &conf.fullchain),
        ("privkey", &conf.privkey),
    ] {
        let at = required(value, key)?;
        let path = inside(&at, key)?;
        let target = resolve(&path, &archive).map_err(|m| fail(Some(at.line), m))?;
        live.push(path);
        targets.push(target);
    }
    let files = |v: Vec<PathBuf>| {
        let mut it = v.into_iter();
        let mut next = || it.next().unwrap_or_default();
        Files {
            cert: next(),
            chain: next(),
            fullchain: next(),
            privkey: next(),
        }
    };
    let (live, targets) = (files(live), files(targets));
    let server = required(&conf.server, "server")?;
    if !server.value.starts_with("https://") && !server.value.starts_with("http://") {
        return Err(fail(
            Some(server.line),
            format!("`server` {} is not a URL", quote_max(&server.value, 200)),
        ));
    }
    let (leaf, key_type) = check_pair(&targets).map_err(|(file, message)| LineageError {
        file,
        line: None,
        message,
    })?;
    let domains = names_of(&leaf);
    if domains.is_empty() {
        return Err(LineageError {
            file: targets.cert.clone(),
            line: None,
            message: "the certificate names no domain".into(),
        });
    }
    let authenticator = authenticator(&conf).map_err(|(line, m)| fail(line, m))?;
    let installer = match conf.installer.as_ref().map(|i| i.value.as_str()) {
        Some("nginx") => "nginx",
        Some("apache") => "apache",
        _ => "none",
    };
    Ok(Lineage {
        name,
        conf_file: conf_file.to_path_buf(),
        server: server.value,
        account: conf.account.map(|a| a.value),
        authenticator,
        installer,
        preferred_chain: conf.preferred_chain.map(|p| p.value),
        live,
        targets,
        leaf,
        key_type,
        domains,
    })
}

/// The certificate's names, lower case, its common name first, each once.
fn names_of(leaf: &CertificateInfo) -> Vec<String> {
    let mut domains: Vec<String> = leaf
        .subject_cn
        .iter()
        .chain(leaf.dns_names.iter())
        .map(|d| d.to_ascii_lowercase())
        .collect();
    let mut seen = std::collections::BTreeSet::new();
    domains.retain(|d| seen.insert(d.clone()));
    domains
}

/// Where the live file `path` leads: a link resolved (every step) inside `archive`, or the
/// file itself when it is a regular file inside the lineage's directory.
fn resolve(path: &Path, archive: &Path) -> Result<PathBuf, String> {
    let meta = fs::symlink_metadata(path)
        .map_err(|e| format!("{}: {}", path.display(), crate::fsutil::io_text(&e)))?;
    if !meta.file_type().is_symlink() && !meta.is_file() {
        return Err(format!("{} is not a file", path.display()));
    }
    // The live directory itself must not be reached through a link: the files replaced there
    // with `--yes` stay inside certbot's directory.
    let parent = path.parent().unwrap_or(path);
    let real_parent = fs::canonicalize(parent)
        .map_err(|e| format!("{}: {}", parent.display(), crate::fsutil::io_text(&e)))?;
    if real_parent != parent {
        return Err(format!(
            "{} is reached through a link (it is {})",
            parent.display(),
            real_parent.display()
        ));
    }
    let target = fs::canonicalize(path)
        .map_err(|e| format!("{}: {}", path.display(), crate::fsutil::io_text(&e)))?;
    let archive = fs::canonicalize(archive)
        .map_err(|e| format!("{}: {}", archive.display(), crate::fsutil::io_text(&e)))?;
    let home = if meta.file_type().is_symlink() {
        archive.as_path()
    } else {
        path.parent().unwrap_or(path)
    };
    if !target.starts_with(home) {
        return Err(format!(
            "{} leads to {}, outside {}",
            path.display(),
            target.display(),
            home.display()
        ));
    }
    Ok(target)
}

/// The certificate of `cert` (the first of `fullchain` too) and the type of `privkey`, which
/// must be the certificate's key.
fn check_pair(t: &Files) -> Result<(CertificateInfo, KeyType), (PathBuf, String)> {
    let read_pem = |path: &Path| -> Result<Vec<u8>, (PathBuf, String)> {
        read_file(path, MAX_PEM_BYTES).map_err(|m| (path.to_path_buf(), m))
    };
    let cert_pem = read_pem(&t.cert)?;
    let leaf = CertificateInfo::from_pem(&cert_pem)
        .map_err(|e| (t.cert.clone(), format!("not a certificate: {e}")))?;
    let full = CertificateInfo::from_pem(&read_pem(&t.fullchain)?)
        .map_err(|e| (t.fullchain.clone(), format!("not a certificate chain: {e}")))?;
    if full.der != leaf.der {
        return Err((
            t.fullchain.clone(),
            format!(
                "does not begin with the certificate of {}",
                t.cert.display()
            ),
        ));
    }
    read_pem(&t.chain)?;
    let key_pem = read_pem(&t.privkey)?;
    let key = PrivateKey::from_pem(&key_pem, &t.privkey.display().to_string())
        .map_err(|e| (t.privkey.clone(), e.to_string()))?;
    if !leaf.matches_key(&key) {
        return Err((
            t.privkey.clone(),
            format!(
                "is not the key of the certificate {} (serial {})",
                t.cert.display(),
                leaf.serial_hex
            ),
        ));
    }
    Ok((leaf, key.key_type()))
}

fn authenticator(conf: &RenewalConf) -> Result<Authenticator, (Option<usize>, String)> {
    let Some(auth) = &conf.authenticator else {
        return Err((None, "`authenticator` is missing".into()));
    };
    let absolute = |at: &At<String>| -> Result<PathBuf, (Option<usize>, String)> {
        let p = PathBuf::from(&at.value);
        if p.is_absolute() && !p.components().any(|c| c == Component::ParentDir) {
            Ok(p)
        } else {
            Err((
                Some(at.line),
                format!(
                    "web root {} is not an absolute path",
                    quote_max(&at.value, 200)
                ),
            ))
        }
    };
    Ok(match auth.value.as_str() {
        "webroot" => {
            let default = conf.webroot_path.first().map(absolute).transpose()?;
            let map = conf
                .webroot_map
                .iter()
                .map(|(name, root)| Ok((name.value.to_ascii_lowercase(), absolute(root)?)))
                .collect::<Result<Vec<_>, _>>()?;
            if default.is_none() && map.is_empty() {
                return Err((Some(auth.line), "webroot without any web root".into()));
            }
            Authenticator::Webroot { default, map }
        }
        "standalone" => Authenticator::Standalone,
        "nginx" | "apache" => Authenticator::ServerPlugin(auth.value.clone()),
        "manual" => Authenticator::Dns("manual".into()),
        other if other.starts_with("dns") => Authenticator::Dns(other.to_owned()),
        other => {
            return Err((
                Some(auth.line),
                format!(
                    "authenticator {} cannot be taken over (webroot, standalone, nginx, apache, \
                     manual and DNS plugins can)",
                    quote_max(other, 60)
                ),
            ));
        }
    })
}

/// The content of the regular file `path`, at most `max` bytes (after links).
pub(crate) fn read_file(path: &Path, max: u64) -> Result<Vec<u8>, String> {
    let file = fs::File::open(path).map_err(|e| crate::fsutil::io_text(&e))?;
    let meta = file.metadata().map_err(|e| crate::fsutil::io_text(&e))?;
    if !meta.is_file() {
        return Err("not a regular file".into());
    }
    if meta.len() > max {
        return Err(format!("{} bytes, more than the {max} read", meta.len()));
    }
    let mut data = Vec::new();
    file.take(max + 1)
        .read_to_end(&mut data)
        .map_err(|e| crate::fsutil::io_text(&e))?;
    if data.len() as u64 > max {
        return Err(format!("more than the {max} bytes read"));
    }
    Ok(data)
}
