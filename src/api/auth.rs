//! Credentials: where the password comes from, and the auth-token cache in `state_dir`.
//!
//! The document's rule (section "Authentication"): "Clients store the token and sign in again
//! only when a call answers 401." The token is cached in `state_dir/token` (mode 0600 from
//! creation, written atomically) together with the base URL and login it belongs to, so a token
//! is never sent to another server or used for another login.

use std::fs;
use std::io::Read;
use std::os::unix::fs::{DirBuilderExt, MetadataExt};
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use super::{ApiError, Secret};
use crate::fsutil::io_text;

/// File name of the token cache inside `state_dir`.
pub const TOKEN_FILE: &str = "token";

/// Name of the systemd credential holding the password (`LoadCredential=cert-agent-password:…`),
/// read from `$CREDENTIALS_DIRECTORY`.
pub(crate) const PASSWORD_CREDENTIAL: &str = "cert-agent-password";

/// Largest password or token file read.
const MAX_SECRET_FILE: u64 = 64 * 1024;

/// Where the account password comes from. Read only when a sign-in is needed.
///
/// Precedence: the systemd credential (when `credentials_directory` holds
/// [`PASSWORD_CREDENTIAL`]), then `file` (`api.password_file`), then `inline` (`api.password`,
/// accepted with a warning).
#[derive(Debug, Clone, Default)]
pub struct PasswordSource {
    /// `api.password_file`: must not be readable by group or others.
    pub file: Option<PathBuf>,
    /// `api.password` from the configuration file.
    pub inline: Option<Secret>,
    /// `$CREDENTIALS_DIRECTORY` (systemd), if set.
    pub credentials_directory: Option<PathBuf>,
}

impl PasswordSource {
    /// A password file (`api.password_file`).
    pub fn file(path: impl Into<PathBuf>) -> Self {
        Self {
            file: Some(path.into()),
            ..Self::default()
        }
    }

    /// A password given inline (`api.password`).
    pub fn inline(password: Secret) -> Self {
        Self {
            inline: Some(password),
            ..Self::default()
        }
    }

    /// Adds `$CREDENTIALS_DIRECTORY` from the environment (systemd credentials), if set.
    pub fn with_systemd_credentials(mut self) -> Self {
        self.credentials_directory = std::env::var_os("CREDENTIALS_DIRECTORY")
            .filter(|v| !v.is_empty())
            .map(PathBuf::from);
        self
    }

    /// Reads the password.
    pub fn load(&self) -> Result<Secret, ApiError> {
        if let Some(dir) = &self.credentials_directory {
            let path = dir.join(PASSWORD_CREDENTIAL);
            if path.exists() {
                // systemd makes credentials readable by the service only.
                return read_secret_file(&path, "systemd credential", false);
            }
        }
        if let Some(path) = &self.file {
            return read_secret_file(path, "api.password_file", true);
        }
        if let Some(p) = &self.inline {
            tracing::warn!(
                "using api.password from the configuration file; \
                 prefer api.password_file (mode 0600)"
            );
            if p.is_empty() {
                return Err(ApiError::Credentials("api.password is empty".into()));
            }
            return Ok(p.clone());
        }
        Err(ApiError::Credentials(format!(
            "no password: set api.password_file (or api.password) in the configuration, \
             or provide the systemd credential {PASSWORD_CREDENTIAL}"
        )))
    }
}

/// Reads a one-line secret file; with `check_mode`, refuses one readable by group or others.
fn read_secret_file(path: &Path, what: &str, check_mode: bool) -> Result<Secret, ApiError> {
    let fail = |m: String| ApiError::Credentials(format!("{what} '{}': {m}", path.display()));
    let bytes = crate::fsutil::read_secret(path, MAX_SECRET_FILE, check_mode).map_err(fail)?;
    let text = String::from_utf8(bytes).map_err(|_| fail("is not UTF-8 text".into()))?;
    let password = text
        .strip_suffix('\n')
        .map(|t| t.strip_suffix('\r').unwrap_or(t))
        .unwrap_or(&text);
    if password.is_empty() {
        return Err(fail("is empty".into()));
    }
    Ok(Secret::new(password))
}

/// An authenticated session: the token and the user ID it belongs to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Session {
    pub token: Secret,
    pub user_id: u64,
}

/// On-disk form of the token cache.
#[derive(Serialize, Deserialize)]
struct CachedToken {
    base_url: String,
    login: String,
    user_id: u64,
    auth_token: String,
}

/// Reads the cached token for this server and login. Anything unusable (missing, other server
/// or login, readable by others, garbled) is `None`: the caller signs in and rewrites it.
pub(crate) fn read_token(state_dir: &Path, base_url: &str, login: &str) -> Option<Session> {
    let path = state_dir.join(TOKEN_FILE);
    let file = fs::File::open(&path).ok()?;
    let meta = file.metadata().ok()?;
    if !meta.is_file() {
        return None;
    }
    if meta.mode() & 0o077 != 0 {
        tracing::warn!(
            "ignoring token cache {} with mode {:04o} (must be 0600); signing in again",
            path.display(),
            meta.mode() & 0o7777
        );
        return None;
    }
    let mut text = String::new();
    file.take(MAX_SECRET_FILE).read_to_string(&mut text).ok()?;
    let cached: CachedToken = serde_json::from_str(&text).ok()?;
    (cached.base_url == base_url && cached.login == login && !cached.auth_token.is_empty()).then(
        || Session {
            token: Secret::new(cached.auth_token),
            user_id: cached.user_id,
        },
    )
}

/// Writes the token cache atomically: a 0600 temporary file in `state_dir`, fsync, rename,
/// fsync of the directory. Creates `state_dir` (0700) when missing.
pub(crate) fn write_token(
    state_dir: &Path,
    base_url: &str,
    login: &str,
    session: &Session,
) -> Result<(), ApiError> {
    let path = state_dir.join(TOKEN_FILE);
    let fail = |m: String| ApiError::TokenCache {
        path: path.clone(),
        message: m,
    };
    fs::DirBuilder::new()
        .recursive(true)
        .mode(0o700)
        .create(state_dir)
        .map_err(|e| fail(io_text(&e)))?;
    let body = serde_json::to_vec(&CachedToken {
        base_url: base_url.to_owned(),
        login: login.to_owned(),
        user_id: session.user_id,
        auth_token: session.token.expose().to_owned(),
    })
    .map_err(|e| fail(e.to_string()))?;
    crate::fsutil::write_atomic(&path, &body, 0o600).map_err(|e| fail(io_text(&e)))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::PermissionsExt;

    fn write_mode(path: &Path, text: &str, mode: u32) {
        fs::write(path, text).unwrap();
        fs::set_permissions(path, fs::Permissions::from_mode(mode)).unwrap();
    }

    #[test]
    fn password_file_must_be_private() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("password");
        write_mode(&p, "s3cret\n", 0o644);
        let err = PasswordSource::file(&p).load().unwrap_err().to_string();
        assert!(err.contains("mode 0644"), "{err}");
        assert!(err.contains(&p.display().to_string()), "{err}");
        assert!(!err.contains("s3cret"));
        write_mode(&p, "s3cret\r\n", 0o600);
        assert_eq!(PasswordSource::file(&p).load().unwrap().expose(), "s3cret");
        write_mode(&p, "\n", 0o600);
        assert!(
            PasswordSource::file(&p)
                .load()
                .unwrap_err()
                .to_string()
                .contains("empty")
        );
        let missing = PasswordSource::file(dir.path().join("nope"))
            .load()
            .unwrap_err();
        assert!(missing.to_string().contains("no such file"), "{missing}");
    }

    #[test]
    fn systemd_credential_comes_first_then_file_then_inline() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("password");
        write_mode(&file, "from-file", 0o600);
        let creds = dir.path().join("creds");
        fs::create_dir(&creds).unwrap();
        let src = PasswordSource {
            file: Some(file.clone()),
            inline: Some(Secret::new("inline")),
            credentials_directory: Some(creds.clone()),
        };
        assert_eq!(src.load().unwrap().expose(), "from-file");
        write_mode(&creds.join(PASSWORD_CREDENTIAL), "from-systemd\n", 0o400);
        assert_eq!(src.load().unwrap().expose(), "from-systemd");
        assert_eq!(
            PasswordSource::inline(Secret::new("inline"))
                .load()
                .unwrap()
                .expose(),
            "inline"
        );
        assert!(matches!(
            PasswordSource::default().load(),
            Err(ApiError::Credentials(_))
        ));
    }

    #[test]
    fn token_cache_is_private_atomic_and_bound_to_server_and_login() {
        let dir = tempfile::tempdir().unwrap();
        let state = dir.path().join("state");
        let s = Session {
            token: Secret::new("tok"),
            user_id: 9,
        };
        write_token(&state, "https://a", "me", &s).unwrap();
        let meta = fs::metadata(state.join(TOKEN_FILE)).unwrap();
        assert_eq!(meta.mode() & 0o777, 0o600);
        assert_eq!(fs::metadata(&state).unwrap().mode() & 0o777, 0o700);
        assert_eq!(read_token(&state, "https://a", "me"), Some(s.clone()));
        assert_eq!(read_token(&state, "https://b", "me"), None);
        assert_eq!(read_token(&state, "https://a", "other"), None);
        // No temporary files are left behind.
        assert_eq!(fs::read_dir(&state).unwrap().count(), 1);
        // A cache readable by others is not used.
        fs::set_permissions(state.join(TOKEN_FILE), fs::Permissions::from_mode(0o644)).unwrap();
        assert_eq!(read_token(&state, "https://a", "me"), None);
        // Rewriting replaces it with a private file again.
        write_token(&state, "https://a", "me", &s).unwrap();
        assert_eq!(
            fs::metadata(state.join(TOKEN_FILE)).unwrap().mode() & 0o777,
            0o600
        );
        fs::write(state.join(TOKEN_FILE), "garbage").unwrap();
        assert_eq!(read_token(&state, "https://a", "me"), None);
    }
}
