//! Failpoints for crash-safety tests: with `CERT_AGENT_FAILPOINT=<name>` in the environment, a
//! debug build aborts the process (as a crash or `kill -9` would) when it reaches the step of
//! that name; with `<name>:stop` it stops itself there (SIGSTOP, as a paused process) and goes
//! on once it is sent SIGCONT; with `<name>:block=SECS` its thread stays busy there for SECS
//! seconds (as a long synchronous stretch would: a slow disk); `<name>@N` (with any of these)
//! triggers at the step's Nth pass only (e.g. `status-check@2:stop`: paused right before the
//! second status check). Release builds compile every failpoint out.
//!
//! Steps, in the order a first issuance meets them: `key-saved`, `intent-saved`,
//! `order-guarded` (a fleet leader's order, right after its lead's guard let it go and gave it
//! its time limit, before anything of it is sent), `order-sent`,
//! `response-saved`, `dcv-placed`, `status-check` (right before a status-type call of a
//! waiting certificate), `poll` (right after it), `download`, `files-staged`, `files-swapped`,
//! `config-tested`, `reloaded`, `committed`, `installs-journalled` (the `installed` lines of
//! the batch written, no record yet), then, as the records of the batch are written together
//! (and any other batch of records), `records-written` (their new versions written and
//! synced, none renamed yet) and `record-renamed` (the first of them renamed into place); a
//! reissue also meets `reissue-sent`, and a fleet leader's publication of a certificate
//! `fleet-publishing` (right before its write) and `fleet-published` (right after the write
//! reached etcd). A certificate of an ACME CA meets `key-saved`, `acme-order-placed` (the
//! order's URL journaled), `dcv-placed`, `acme-published` (every challenge published, none
//! answered), `acme-chain-received` (the chain downloaded, not yet checked), then the
//! install's steps.

/// The environment variable naming the failpoint to trigger.
pub const ENV: &str = "CERT_AGENT_FAILPOINT";

/// Aborts here when this is the configured failpoint (debug builds only).
#[inline]
pub(crate) fn hit(name: &str) {
    if !cfg!(debug_assertions) {
        return;
    }
    let Ok(mut point) = std::env::var(ENV) else {
        return;
    };
    // `<name>@N[:action]`: only the Nth pass through the step triggers.
    if let Some(rest) = point.strip_prefix(name).and_then(|r| r.strip_prefix('@')) {
        let (count, action) = rest.split_once(':').unwrap_or((rest, ""));
        let Ok(nth) = count.parse::<u32>() else {
            return;
        };
        static PASSES: std::sync::atomic::AtomicU32 = std::sync::atomic::AtomicU32::new(0);
        let pass = PASSES.fetch_add(1, std::sync::atomic::Ordering::SeqCst) + 1;
        if pass != nth {
            return;
        }
        point = if action.is_empty() {
            name.to_owned()
        } else {
            format!("{name}:{action}")
        };
    }
    if point == name {
        eprintln!("failpoint '{name}' reached: aborting");
        std::process::abort();
    }
    if let Some(secs) = point
        .strip_prefix(name)
        .and_then(|rest| rest.strip_prefix(":block="))
        .and_then(|secs| secs.parse::<u64>().ok())
    {
        eprintln!("failpoint '{name}' reached: busy for {secs} s");
        std::thread::sleep(std::time::Duration::from_secs(secs));
    }
    if point.strip_suffix(":stop") == Some(name) {
        eprintln!("failpoint '{name}' reached: stopping");
        let _ = nix::sys::signal::raise(nix::sys::signal::Signal::SIGSTOP);
    }
}
