//! Child processes: finding a program the way the web servers' own tools are found (`PATH`,
//! then the sbin directories). The one place that locates programs for config checks, web
//! server commands and hooks.

use std::path::PathBuf;

/// Directories searched after `PATH` for a bare program name: cron and some service managers
/// run with a `PATH` that lacks the sbin directories where nginx and apachectl live.
const SBIN_DIRS: &[&str] = &["/usr/local/sbin", "/usr/sbin", "/sbin"];

/// Finds a bare program name in `PATH` and then in the sbin directories.
pub fn find_program(name: &str) -> Option<PathBuf> {
    use std::os::unix::fs::PermissionsExt;
    let path = std::env::var_os("PATH").unwrap_or_default();
    std::env::split_paths(&path)
        .chain(SBIN_DIRS.iter().map(PathBuf::from))
        .map(|dir| dir.join(name))
        .find(|p| {
            std::fs::metadata(p)
                .map(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
                .unwrap_or(false)
        })
}
