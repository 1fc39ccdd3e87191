//! The install layer's error type: every variant names the operation and the path or command
//! it concerns, and none carries key material.

use std::io;
use std::path::PathBuf;
use std::sync::Arc;

/// What went wrong while installing, testing, reloading or verifying.
///
/// Errors are `Clone` (I/O errors are shared behind an `Arc`) because one web-server failure is
/// reported against every certificate served by that server.
#[derive(Debug, Clone, thiserror::Error)]
pub enum InstallError {
    /// The target path is a symbolic link; installs never write through links.
    #[error("refusing to install to '{path}': it is a symbolic link")]
    SymlinkTarget {
        /// The install path.
        path: PathBuf,
    },
    /// The target path exists and is not a regular file.
    #[error("refusing to install to '{path}': it exists and is not a regular file")]
    NotAFile {
        /// The install path.
        path: PathBuf,
    },
    /// A directory on the way to an install path can be written by other users.
    #[error(
        "refusing to install into '{path}': the directory is writable by group or others \
         (mode {mode:04o}); restrict it with chmod go-w"
    )]
    InsecureDirectory {
        /// The directory.
        path: PathBuf,
        /// Its permission bits.
        mode: u32,
    },
    /// Neither a key file nor a combined file is set: the private key would go nowhere.
    #[error("no file for the private key is set: set a key path or a combined path")]
    NoKeyFile,
    /// Two files of this run would be written to the same path.
    #[error("install path '{path}' is used twice in this run")]
    DuplicatePath {
        /// The path used twice.
        path: PathBuf,
    },
    /// Inspecting an existing file or directory failed.
    #[error("could not inspect '{path}': {cause}")]
    Inspect {
        /// The path inspected.
        path: PathBuf,
        /// The underlying error.
        cause: Arc<io::Error>,
    },
    /// A missing parent directory could not be created.
    #[error("could not create directory '{path}': {cause}")]
    CreateDir {
        /// The directory.
        path: PathBuf,
        /// The underlying error.
        cause: Arc<io::Error>,
    },
    /// Writing the new content beside the target failed; the live file is untouched.
    #[error("could not write the new version of '{path}': {cause}")]
    Write {
        /// The install path whose new version could not be written.
        path: PathBuf,
        /// The underlying error.
        cause: Arc<io::Error>,
    },
    /// Setting the owner or group of a new file failed.
    #[error("could not set owner/group of '{path}': {cause}")]
    Chown {
        /// The install path.
        path: PathBuf,
        /// The underlying error.
        cause: Arc<io::Error>,
    },
    /// Keeping the previous version of a file failed; the live file is untouched.
    #[error("could not keep the previous version of '{path}': {cause}")]
    Backup {
        /// The install path.
        path: PathBuf,
        /// The underlying error.
        cause: Arc<io::Error>,
    },
    /// Renaming the new version over the live file failed.
    #[error("could not replace '{path}': {cause}")]
    Replace {
        /// The install path.
        path: PathBuf,
        /// The underlying error.
        cause: Arc<io::Error>,
    },
    /// Putting the previous version back failed.
    #[error("could not restore the previous version of '{path}': {cause}")]
    Restore {
        /// The install path.
        path: PathBuf,
        /// The underlying error.
        cause: Arc<io::Error>,
    },
    /// Removing the kept previous version after a successful install failed.
    #[error("could not remove the previous version kept at '{path}': {cause}")]
    Cleanup {
        /// The backup path.
        path: PathBuf,
        /// The underlying error.
        cause: Arc<io::Error>,
    },
    /// A configured owner name is not a known user.
    #[error("unknown user '{name}'")]
    UnknownUser {
        /// The user name.
        name: String,
    },
    /// A configured group name is not a known group.
    #[error("unknown group '{name}'")]
    UnknownGroup {
        /// The group name.
        name: String,
    },
    /// Looking up a user or group failed.
    #[error("could not look up user or group '{name}': {cause}")]
    Lookup {
        /// The name looked up.
        name: String,
        /// The underlying error.
        cause: nix::Error,
    },
    /// A command (config test, reload, deploy hook) is an empty argument vector.
    #[error("the {what} command is empty")]
    EmptyCommand {
        /// Which command ("config test", "reload", "deploy hook").
        what: &'static str,
    },
    /// The program of a command does not exist.
    #[error("{what} command `{command}`: program '{program}' not found")]
    ProgramNotFound {
        /// Which command.
        what: &'static str,
        /// The whole command line, for the message.
        command: String,
        /// The program that was not found.
        program: String,
    },
    /// A command could not be started.
    #[error("could not run the {what} command `{command}`: {cause}")]
    Spawn {
        /// Which command.
        what: &'static str,
        /// The whole command line.
        command: String,
        /// The underlying error.
        cause: Arc<io::Error>,
    },
    /// A command did not finish in time and was killed.
    #[error("the {what} command `{command}` did not finish within {seconds} s{output}")]
    CommandTimeout {
        /// Which command.
        what: &'static str,
        /// The whole command line.
        command: String,
        /// The limit.
        seconds: u64,
        /// What it printed, formatted for the message (may be empty).
        output: String,
    },
    /// A command exited unsuccessfully.
    #[error("the {what} command `{command}` failed ({status}){output}")]
    CommandFailed {
        /// Which command.
        what: &'static str,
        /// The whole command line.
        command: String,
        /// The exit status, e.g. "exit code 1".
        status: String,
        /// What it printed, formatted for the message (may be empty).
        output: String,
    },
    /// The new certificate's PEM could not be read (to learn its serial).
    #[error("certificate '{name}': could not read the new certificate: {reason}")]
    BadCertificate {
        /// The certificate's configured name.
        name: String,
        /// Why.
        reason: String,
    },
    /// The TLS handshake used to verify the served certificate failed.
    #[error("TLS handshake with {address} (SNI {server_name}) failed: {reason}")]
    Handshake {
        /// The address connected to.
        address: String,
        /// The SNI sent.
        server_name: String,
        /// Why.
        reason: String,
    },
    /// The server presented a certificate other than the one installed.
    #[error(
        "{address} (SNI {server_name}) serves the certificate with serial {served}, \
         expected the new serial {expected}"
    )]
    SerialMismatch {
        /// The address connected to.
        address: String,
        /// The SNI sent.
        server_name: String,
        /// The served serial, hex.
        served: String,
        /// The expected serial, hex.
        expected: String,
    },
    /// The web server's config test failed; the previous files were restored.
    #[error("config test failed, previous files restored: {cause}")]
    ConfigTest {
        /// The config test failure.
        cause: Box<InstallError>,
    },
    /// Reloading the web server failed; the previous files were restored.
    #[error("reload failed, previous files restored: {cause}")]
    Reload {
        /// The reload failure.
        cause: Box<InstallError>,
    },
    /// The served certificate is not the new one; the previous files were restored and the
    /// server reloaded.
    #[error("verification failed, previous files restored: {cause}")]
    Verify {
        /// The verification failure.
        cause: Box<InstallError>,
    },
    /// A check after the verification (a fleet host's proof of what it serves) refused the
    /// installed certificate; the previous files were restored and the server reloaded.
    #[error("rolled back, previous files restored: {reason}")]
    Refused {
        /// Why, in the check's words.
        reason: String,
    },
    /// Restoring after a failure went wrong too: both errors are reported.
    #[error("{first}; restoring the previous state also failed: {restore}")]
    RestoreFailed {
        /// The failure that triggered the restore.
        first: Box<InstallError>,
        /// The failure while restoring.
        restore: Box<InstallError>,
    },
    /// The certificate is installed, but its deploy hook failed.
    #[error("certificate installed, but the deploy hook failed: {cause}")]
    DeployHook {
        /// The hook failure.
        cause: Box<InstallError>,
    },
}
