//! Build script: generates the manual pages (`cert-agent.1` and one page per subcommand, with
//! clap_mangen) and the bash, zsh and fish completions (clap_complete) from the command-line
//! definitions in `src/cli/args.rs`, into `$OUT_DIR/man` and `$OUT_DIR/completions`.
//! `packaging/build.sh` copies them into the packages.

use std::fs;
use std::io::Write;
use std::path::{Path, PathBuf};

use clap::CommandFactory;
use clap_complete::Shell;

// The grammar is the library's public API; here only its clap description is used.
#[allow(dead_code, unreachable_pub)]
#[path = "src/cli/args.rs"]
mod args;

fn main() -> std::io::Result<()> {
    println!("cargo:rerun-if-changed=src/cli/args.rs");
    println!("cargo:rerun-if-changed=build.rs");
    let out = PathBuf::from(std::env::var_os("OUT_DIR").ok_or_else(|| {
        std::io::Error::other("OUT_DIR is not set (build scripts run under cargo)")
    })?);

    let man_dir = out.join("man");
    let completions_dir = out.join("completions");
    for dir in [&man_dir, &completions_dir] {
        if dir.exists() {
            fs::remove_dir_all(dir)?;
        }
        fs::create_dir_all(dir)?;
    }

    let mut cmd = args::Cli::command().disable_help_subcommand(true);
    cmd.build();
    man_pages(&cmd, &man_dir)?;

    for shell in [Shell::Bash, Shell::Zsh, Shell::Fish] {
        clap_complete::generate_to(shell, &mut cmd, "cert-agent", &completions_dir)?;
    }
    Ok(())
}

/// One page per command and subcommand; the main page gets the sections that concern every
/// command (exit status, files, environment, see also).
fn man_pages(cmd: &clap::Command, dir: &Path) -> std::io::Result<()> {
    let man = clap_mangen::Man::new(cmd.clone()).manual("cert-agent manual");
    let mut page = Vec::new();
    man.render_title(&mut page)?;
    man.render_name_section(&mut page)?;
    man.render_synopsis_section(&mut page)?;
    man.render_description_section(&mut page)?;
    man.render_options_section(&mut page)?;
    man.render_subcommands_section(&mut page)?;
    page.write_all(MAIN_PAGE_EXTRA.as_bytes())?;
    man.render_version_section(&mut page)?;
    fs::write(dir.join(man.get_filename()), page)?;

    for sub in cmd.get_subcommands().filter(|s| !s.is_hide_set()) {
        sub_pages(sub, dir)?;
    }
    Ok(())
}

fn sub_pages(cmd: &clap::Command, dir: &Path) -> std::io::Result<()> {
    let man = clap_mangen::Man::new(cmd.clone()).manual("cert-agent manual");
    let mut page = Vec::new();
    man.render(&mut page)?;
    page.write_all(SUB_PAGE_SEE_ALSO.as_bytes())?;
    fs::write(dir.join(man.get_filename()), page)?;
    for sub in cmd.get_subcommands().filter(|s| !s.is_hide_set()) {
        sub_pages(sub, dir)?;
    }
    Ok(())
}

const MAIN_PAGE_EXTRA: &str = r#".SH "EXIT STATUS"
.TP
\fB0\fR
Done: nothing is left to do.
.TP
\fB1\fR
An error.
.TP
\fB2\fR
A usage or configuration error.
.TP
\fB3\fR
Some certificates failed, others succeeded.
.TP
\fB75\fR
Work is pending at the CA (validation or issuance not finished); the next run continues.
.SH FILES
.TP
\fI/etc/cert-agent/config.toml\fR
The configuration (mode 0600).
.TP
\fI/etc/cert-agent/password\fR
The Partner API password, when \fBapi.password_file\fR names it (mode 0600).
.TP
\fI/var/lib/cert-agent/\fR
State: orders, keys waiting for issuance, the billing journal, the cached API token.
.TP
\fI/etc/ssl/cert-agent/\fR
Installed certificates and keys (default install paths).
.TP
\fI/usr/lib/systemd/system/cert-agent.timer\fR, \fIcert-agent.service\fR
The hourly renewal run; \fIcert-agent-daemon.service\fR is the long-running alternative.
.TP
\fI/etc/cron.d/cert-agent\fR
The same run from cron on systems without systemd.
.SH ENVIRONMENT
.TP
\fBCERT_AGENT_CONFIG\fR
The configuration file, when \fB\-\-config\fR is not given.
.TP
\fBCREDENTIALS_DIRECTORY\fR
Set by systemd; the credential \fBcert\-agent\-password\fR in it is used before
\fBapi.password_file\fR.
.SH "SEE ALSO"
\fBsystemd.timer\fR(5), \fBsystemd.exec\fR(5), and the documentation in
\fI/usr/share/doc/cert-agent/\fR.
"#;

const SUB_PAGE_SEE_ALSO: &str = r#".SH "SEE ALSO"
\fBcert-agent\fR(1)
"#;
