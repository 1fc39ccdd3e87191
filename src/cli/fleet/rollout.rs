//! `cert-agent fleet rollout resume|abort NAME`: a person's decision on a rollout in waves,
//! written sealed to the fleet ([`crate::fleet::decide`]).

use anyhow::{Result, anyhow};

use crate::cli::exit;
use crate::cli::output::Output;
use crate::config::Config;
use crate::fleet::{Verdict, decide};

/// Writes `verdict` on the rollout of the fleet's current serial of certificate `name` and
/// says what the hosts will do with it.
pub(in crate::cli) async fn decide_on(
    config: &Config,
    (name, verdict): (&str, Verdict),
    out: &Output,
    clock: crate::clock::Clock,
) -> Result<u8> {
    config.certificate_named(name)?;
    if config.fleet.as_ref().is_some_and(|f| f.rollout.is_none()) {
        tracing::warn!(
            "no rollout in waves is configured on this host ([fleet] rollout_canaries): the \
             decision is written, and applies on the hosts that roll out in waves"
        );
    }
    let link = crate::fleet::connect(config, clock)
        .await?
        .ok_or_else(|| anyhow!("no [fleet] in {}", config.path.display()))?;
    let decision = decide(&link, name, verdict).await?;
    if out.json {
        out.print_json(&decision)?;
        return Ok(exit::OK);
    }
    outln!("{name}: {}", decision.describe());
    match verdict {
        Verdict::Resume => outln!(
            "{name}: the halted waves go on at the hosts' next synchronisation (a daemon's at \
             once); a host that rolled serial {} back installs it and proves it again; a proof \
             that fails from now on halts the rollout again",
            decision.serial
        ),
        Verdict::Abort => outln!(
            "{name}: no host installs serial {} any more; the hosts that serve it keep it; \
             the next certificate is the leader's to obtain when it is due (nothing is \
             ordered now)",
            decision.serial
        ),
    }
    Ok(exit::OK)
}
