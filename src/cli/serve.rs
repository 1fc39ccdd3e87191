//! `cert-agent serve`: the standalone DCV server as a foreground process of its own.
//!
//! Order of start-up, each step before the privileges go:
//! 1. the addresses: every distinct `listen` of the certificates with `standalone = true`;
//! 2. the serve user (`[agent] serve_user`) is looked up;
//! 3. the lock `<state_dir>/serve.lock` is taken (one serve process per state directory);
//! 4. the publish directory `<state_dir>/standalone/` is created if needed and opened;
//! 5. every address is bound, and the PID and addresses are written into the lock file.
//!
//! Then, when running as root, the process switches to the serve user (supplementary groups,
//! group, user — real, effective and saved IDs) and checks that root cannot be regained. Only
//! after that does it answer requests; it reads the files through the directory descriptor
//! (see [`crate::dcv::standalone`]), so the serve user needs no access to the state directory.
//! `renew` finds the lock and writes the validation files into the directory instead of
//! binding the ports itself ([`crate::dcv::serve_dir`]).

use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;

use anyhow::{Context, Result, bail};
use nix::unistd::{Gid, Uid, User};

use super::{UsageError, exit};
use crate::config::Config;
use crate::dcv::serve_dir::{self, ServeLock};
use crate::dcv::standalone::{ServerOptions, StandaloneServer};
use crate::store::Store;

/// What `serve` keeps of the configuration: the rest (API settings, an inline password) is
/// dropped before the server starts.
pub(super) struct Plan {
    listen: Vec<SocketAddr>,
    user: User,
    state_dir: PathBuf,
}

impl Plan {
    /// The addresses, the looked-up serve user and the state directory of `config`.
    pub(super) fn of(config: &Config) -> Result<Self> {
        Ok(Self {
            listen: listen_addresses(config)?,
            user: serve_user(&config.agent.serve_user)?,
            state_dir: config.agent.state_dir.clone(),
        })
    }
}

/// Runs the server until SIGTERM or SIGINT; exit code 0 then.
pub(super) async fn serve(plan: Plan) -> Result<u8> {
    let Plan {
        listen,
        user,
        state_dir,
    } = plan;
    // Signal handlers first: a stop request during start-up is not lost.
    let mut stop = crate::signal::StopSignals::install()?;

    let store = Store::open(&state_dir)?;
    let lock = ServeLock::take(store.dir())?;
    let dir = serve_dir::open_dir(store.dir())?;
    let mut listeners = Vec::new();
    for addr in &listen {
        let listener = std::net::TcpListener::bind(addr)
            .with_context(|| format!("could not listen on {addr} for DCV"))?;
        listeners.push((*addr, listener));
    }
    lock.announce(&listen)?;

    if nix::unistd::geteuid().is_root() {
        drop_privileges(&user)?;
        tracing::info!(
            "listening; now running as user '{}' (uid {}, gid {})",
            user.name,
            user.uid,
            user.gid
        );
    } else {
        tracing::info!(
            "not started as root: running as uid {} (`serve_user` applies to root only)",
            nix::unistd::geteuid()
        );
    }

    let dir = Arc::new(dir);
    let mut servers = Vec::new();
    for (addr, listener) in listeners {
        let server =
            StandaloneServer::from_listener_dir(listener, ServerOptions::default(), dir.clone())
                .with_context(|| format!("could not serve on {addr}"))?;
        tracing::info!(
            "serving the validation files of '{}' on {}",
            serve_dir::dir_path(store.dir()).display(),
            server.local_addr()
        );
        servers.push(server);
    }

    stop.recv().await;
    tracing::info!("stopping");
    for server in servers {
        server.shutdown().await;
    }
    drop(lock);
    Ok(exit::OK)
}

/// The distinct `listen` addresses of the standalone certificates, in configuration order.
fn listen_addresses(config: &Config) -> Result<Vec<SocketAddr>> {
    let mut listen: Vec<SocketAddr> = Vec::new();
    for cert in config.certificates.iter().filter(|c| c.dcv.standalone) {
        if !listen.contains(&cert.dcv.listen) {
            listen.push(cert.dcv.listen);
        }
    }
    if listen.is_empty() {
        return Err(UsageError(
            "nothing to serve: no [[certificate]] has `standalone = true`".into(),
        )
        .into());
    }
    Ok(listen)
}

/// The configured serve user; it must exist and be neither root nor in group root.
fn serve_user(name: &str) -> Result<User> {
    let user = User::from_name(name)
        .with_context(|| format!("could not look up `[agent] serve_user` = {name:?}"))?;
    let Some(user) = user else {
        return Err(UsageError(format!(
            "`[agent] serve_user` = {name:?}: no such user on this host"
        ))
        .into());
    };
    if user.uid.is_root() || user.gid == Gid::from_raw(0) {
        return Err(UsageError(format!(
            "`[agent] serve_user` = {name:?}: must not be root or have group root (uid {}, gid \
             {})",
            user.uid, user.gid
        ))
        .into());
    }
    Ok(user)
}

/// Switches every user and group ID of the process to `user` and its group, with no
/// supplementary groups, then checks that it took and cannot be undone.
fn drop_privileges(user: &User) -> Result<()> {
    let name = &user.name;
    nix::unistd::setgroups(&[user.gid])
        .with_context(|| format!("could not set the groups of user '{name}'"))?;
    nix::unistd::setgid(user.gid)
        .with_context(|| format!("could not switch to group {} of '{name}'", user.gid))?;
    nix::unistd::setuid(user.uid)
        .with_context(|| format!("could not switch to user '{name}' (uid {})", user.uid))?;

    let uids = nix::unistd::getresuid().context("could not read the user IDs")?;
    let gids = nix::unistd::getresgid().context("could not read the group IDs")?;
    let groups = nix::unistd::getgroups().context("could not read the groups")?;
    if [uids.real, uids.effective, uids.saved]
        .iter()
        .any(|u| *u != user.uid)
        || [gids.real, gids.effective, gids.saved]
            .iter()
            .any(|g| *g != user.gid)
        || groups.iter().any(|g| *g != user.gid)
    {
        bail!(
            "switching to user '{name}' did not take: uids {}/{}/{}, gids {}/{}/{}",
            uids.real,
            uids.effective,
            uids.saved,
            gids.real,
            gids.effective,
            gids.saved
        );
    }
    if nix::unistd::setuid(Uid::from_raw(0)).is_ok()
        || nix::unistd::seteuid(Uid::from_raw(0)).is_ok()
    {
        bail!("after switching to user '{name}' the process could become root again");
    }
    // Nothing it runs can gain a privilege (it runs nothing; this makes sure).
    nix::sys::prctl::set_no_new_privs().context("could not set no_new_privs")?;
    let status = std::fs::read_to_string("/proc/self/status")
        .context("could not read /proc/self/status to check the capabilities left")?;
    no_privilege_left(&status)
        .map_err(|e| anyhow::anyhow!("after switching to user '{name}': {e} (/proc/self/status)"))
}

/// The capability sets that give a privilege (the effective, permitted and ambient sets) must
/// be empty and `NoNewPrivs` set, as `/proc/self/status` shows them; an error names each one
/// that is not, or a line that is missing or unreadable.
fn no_privilege_left(status: &str) -> Result<(), String> {
    let field = |key: &str| {
        status
            .lines()
            .find_map(|l| l.strip_prefix(key)?.strip_prefix(':'))
            .map(str::trim)
            .ok_or_else(|| format!("no {key} line"))
    };
    let mut held = Vec::new();
    for key in ["CapEff", "CapPrm", "CapAmb"] {
        let text = field(key)?;
        let bits = u64::from_str_radix(text, 16)
            .ok()
            .filter(|_| !text.is_empty() && text.len() <= 16)
            .ok_or_else(|| {
                format!(
                    "{key} is not a capability set: {:?}",
                    crate::values::text::printable_capped(text, 40)
                )
            })?;
        if bits != 0 {
            held.push(format!("{key} {bits:016x}"));
        }
    }
    match field("NoNewPrivs")? {
        "1" => {}
        other => held.push(format!(
            "NoNewPrivs {}",
            crate::values::text::printable_capped(other, 8)
        )),
    }
    if held.is_empty() {
        Ok(())
    } else {
        Err(format!("privileges left: {}", held.join(", ")))
    }
}

#[cfg(test)]
mod tests {
    use super::no_privilege_left;

    const DROPPED: &str = "Name:\tcert-agent\nUid:\t65534\t65534\t65534\t65534\n\
        CapInh:\t0000000000000000\nCapPrm:\t0000000000000000\nCapEff:\t0000000000000000\n\
        CapBnd:\t00000000000000c0\nCapAmb:\t0000000000000000\nNoNewPrivs:\t1\n";

    #[test]
    fn only_empty_capability_sets_and_no_new_privs_pass() {
        assert_eq!(no_privilege_left(DROPPED), Ok(()));
        // A capability kept through the switch (keepcaps, an ambient set), or no NoNewPrivs.
        let kept = DROPPED.replace("CapEff:\t0000000000000000", "CapEff:\t0000000000000400");
        let e = no_privilege_left(&kept).unwrap_err();
        assert!(e.contains("CapEff 0000000000000400"), "{e}");
        let ambient = DROPPED.replace("CapAmb:\t0000000000000000", "CapAmb:\t0000000000000400");
        assert!(no_privilege_left(&ambient).unwrap_err().contains("CapAmb"));
        let nnp = DROPPED.replace("NoNewPrivs:\t1", "NoNewPrivs:\t0");
        assert!(
            no_privilege_left(&nnp)
                .unwrap_err()
                .contains("NoNewPrivs 0")
        );
    }

    #[test]
    fn a_garbage_or_missing_line_is_an_error_not_a_pass() {
        for (from, to) in [
            ("CapPrm:\t0000000000000000", "CapPrm:\tzz\x1b[2J"),
            ("CapPrm:\t0000000000000000", "CapPrm:\t"),
            ("CapPrm:\t0000000000000000", "CapPrm:\t00000000000000000000"),
            ("CapAmb:\t0000000000000000\n", ""),
            ("NoNewPrivs:\t1\n", ""),
        ] {
            let e = no_privilege_left(&DROPPED.replace(from, to)).unwrap_err();
            assert!(!e.contains('\x1b'), "{e}");
        }
        assert!(no_privilege_left("").is_err());
        assert!(no_privilege_left("\u{0}\u{ff}garbage").is_err());
    }
}
