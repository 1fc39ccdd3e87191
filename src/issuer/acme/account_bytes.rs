//! The account file's bytes as a fleet shares them: read from this host's file, checked when
//! they come from elsewhere, and written back.

use std::path::Path;

use super::{ACCOUNT_FILE, AcmeError, http, parse_account_file, quote_max};

/// The bytes of the account file kept in `dir` (what a fleet shares sealed).
pub(crate) fn read_account_bytes(dir: &Path) -> Result<Vec<u8>, AcmeError> {
    let path = dir.join(ACCOUNT_FILE);
    crate::fsutil::read_private(&path, 64 * 1024)
        .map_err(|message| AcmeError::AccountFile { path, message })
}

/// Checks account file bytes from elsewhere (a fleet's shared account) for the directory
/// `directory_url`: the account's URL when they are an account file registered with it.
pub(crate) fn check_account_bytes(bytes: &[u8], directory_url: &str) -> Result<String, String> {
    let kept = parse_account_file(bytes)?;
    if kept.directory != directory_url {
        return Err(format!(
            "registered with {}, not with the configured {}",
            quote_max(&kept.directory, 200),
            quote_max(directory_url, 200)
        ));
    }
    let id = serde_json::to_value(&kept.credentials)
        .ok()
        .and_then(|v| v.get("id").and_then(|i| i.as_str()).map(str::to_owned))
        .ok_or_else(|| "names no account URL".to_owned())?;
    if !http::allowed_url(&id) {
        return Err(format!(
            "names the account {}, not an https:// URL",
            quote_max(&id, 200)
        ));
    }
    Ok(id)
}

/// Writes checked account file bytes ([`check_account_bytes`]) to `dir/account.json`
/// (`0600`, the directory `0700`) unless it holds them already.
pub(crate) fn write_account_bytes(dir: &Path, bytes: &[u8]) -> Result<(), AcmeError> {
    let path = dir.join(ACCOUNT_FILE);
    if crate::fsutil::read_private(&path, 64 * 1024).is_ok_and(|b| b == bytes) {
        return Ok(());
    }
    let file_error = |message: String| AcmeError::AccountFile {
        path: path.clone(),
        message,
    };
    crate::fsutil::ensure_private_dir(dir, 0o700)
        .map_err(|e| file_error(format!("could not create its directory: {e}")))?;
    crate::fsutil::write_atomic(&path, bytes, 0o600).map_err(|e| file_error(e.to_string()))
}
