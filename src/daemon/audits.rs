//! In a fleet, the daemon looks at the other hosts' audit logs on its schedule (when it starts,
//! then every `--interval`, the runs' schedule; never from the follow loop, which reads nothing
//! while the fleet is idle): a log that went back since this host saw a later line of it is
//! logged, notified once (`audit_rewound`) and shown by `check` here
//! ([`crate::fleet::look_at_audits`]).

use std::path::PathBuf;
use std::time::Duration;

use crate::clock::Clock;
use crate::config::Config;

/// Looks at once, then every `every` (in debug builds `CERT_AGENT_TEST_AUDIT_LOOK_SECS` for
/// the tests), until the daemon stops (the task is aborted).
pub(super) async fn watch_audits(config_path: PathBuf, clock: Clock, every: Duration) {
    let every = test_interval().unwrap_or(every).max(Duration::from_secs(1));
    loop {
        match Config::load(&config_path) {
            Ok(config) => match crate::fleet::look_at_audits(&config, clock).await {
                Ok(new) if !new.is_empty() => {
                    crate::monitor::after_audit_rewound(&config, &new, clock.now()).await;
                }
                Ok(_) => {}
                Err(e) => tracing::debug!("the hosts' audit logs were not looked at: {e:#}"),
            },
            Err(e) => tracing::debug!("{e:#}"),
        }
        tokio::time::sleep(every).await;
    }
}

fn test_interval() -> Option<Duration> {
    if !cfg!(debug_assertions) {
        return None;
    }
    let secs = std::env::var("CERT_AGENT_TEST_AUDIT_LOOK_SECS").ok()?;
    secs.trim().parse().ok().map(Duration::from_secs)
}
