//! What one run shares across its certificates: the caller's options, the configuration,
//! the state directory, the API client (built on first use), standalone DCV servers, the
//! product list and self-checks running beside the run; and the run's clock.

use std::collections::HashMap;
use std::net::SocketAddr;
use std::time::Duration;

use anyhow::{Context, Result};

use crate::api::{Client, ClientOptions, PasswordSource, SendGuard};
use crate::clock::Clock;
use crate::config::Config;
use crate::dcv::standalone::StandaloneServer;
use crate::store::Store;

use super::lead::Lead;
use super::order;

/// What the caller asked for.
#[derive(Debug, Clone)]
pub struct RunOptions {
    /// Certificates to work on; empty: every configured one.
    pub names: Vec<String>,
    /// Print what would be done; change nothing, call nothing.
    pub dry_run: bool,
    /// Reissue the selected certificates now (within what the rules allow).
    pub force: bool,
    /// How long this run waits for validation and issuance before leaving the rest to the
    /// next run (exit 75).
    pub wait: Duration,
    /// Billed orders allowed (`agent.allow_orders` or `--yes`).
    pub allow_orders: bool,
    /// Clear an unreconciled order intent on the operator's word.
    pub clear_intent: bool,
    /// Keep the current key on a reissue (`reissue --reuse-key`).
    pub reuse_key: bool,
    /// Download and install the issued certificate again (`install NAME`).
    pub reinstall: bool,
    /// Try now even after recent failures (explicit commands; the timer's `renew` waits).
    pub ignore_backoff: bool,
    /// `issue --yes`: replace an ended (annulled, expired) order by a new one.
    pub replace_ended: bool,
    /// Turns `true` when the run must stop (SIGTERM, SIGINT, the daemon stopping): no new
    /// certificate is started, waiting ends, what was published for validation is removed
    /// (the next run publishes again), and the rest is reported as pending.
    pub stop: Option<tokio::sync::watch::Receiver<bool>>,
    /// Where the run's time comes from.
    pub clock: Clock,
    /// Why a daemon started this run before its schedule: the fleet's lead ended with its
    /// lease while work was open. A fleet run that takes the lead reports and journals it
    /// (the engine itself does not use it).
    pub takeover: Option<String>,
    /// Progress lines (what the run waits for and until when) go to standard error, terminal
    /// or not: a command a person runs without `--json` or `--quiet`. Otherwise they go to
    /// the log only.
    pub progress: bool,
}

impl RunOptions {
    /// An unattended run over every certificate (the timer's `renew`, the daemon): billed
    /// orders as the configuration allows, the backoff after failures respected.
    pub fn unattended(config: &Config) -> Self {
        Self {
            allow_orders: config.agent.allow_orders,
            ..Self::default()
        }
    }

    /// An operator's command on named certificates: tried now despite a backoff, no billed
    /// order unless the command says so.
    pub fn explicit(names: Vec<String>) -> Self {
        Self {
            names,
            ignore_backoff: true,
            ..Self::default()
        }
    }
}

impl Default for RunOptions {
    fn default() -> Self {
        Self {
            names: Vec::new(),
            dry_run: false,
            force: false,
            wait: Duration::from_secs(600),
            allow_orders: false,
            clear_intent: false,
            reuse_key: false,
            reinstall: false,
            ignore_backoff: false,
            replace_ended: false,
            stop: None,
            clock: Clock::from_env(),
            takeover: None,
            progress: false,
        }
    }
}

/// Shared state of one run.
pub(super) struct Ctx<'a> {
    pub config: &'a Config,
    /// Built on first use: a run with nothing to do sets up no HTTPS client at all.
    client: std::cell::OnceCell<Client>,
    pub store: &'a Store,
    pub opts: &'a RunOptions,
    pub started: tokio::time::Instant,
    /// Standalone DCV servers of this run, by listen address.
    pub standalone: tokio::sync::Mutex<HashMap<SocketAddr, StandaloneServer>>,
    /// The product list, read once per run when orders are placed.
    pub products: order::ProductCache,
    /// Self-checks of published validation files, running beside the run.
    self_checks: std::cell::RefCell<tokio::task::JoinSet<()>>,
    /// In a fleet, the leader's lead: shared state and validation files go through it.
    pub lead: Option<&'a dyn Lead>,
    /// The CRL checks of the run (`[revocation] check`): each CRL read once.
    pub revocation: Option<crate::revocation::Checker>,
    /// What the CRL said of an installed certificate, where it changed and is not a
    /// revocation: written to the records together once every certificate has started
    /// ([`Ctx::record_crl_seen`]), not one record write each.
    pub crl_seen: std::cell::RefCell<Vec<(String, crate::store::RevocationSeen)>>,
    /// The accounts of the ACME CAs used in this run, by `[acme.NAME]`.
    pub acme_accounts: tokio::sync::Mutex<HashMap<String, instant_acme::Account>>,
}

impl<'a> Ctx<'a> {
    /// The context of a run over `config` with the state in `store`.
    pub(super) fn new(config: &'a Config, store: &'a Store, opts: &'a RunOptions) -> Self {
        Self {
            config,
            client: std::cell::OnceCell::new(),
            store,
            opts,
            started: tokio::time::Instant::now(),
            standalone: tokio::sync::Mutex::new(HashMap::new()),
            products: order::ProductCache::default(),
            self_checks: std::cell::RefCell::new(tokio::task::JoinSet::new()),
            lead: None,
            crl_seen: std::cell::RefCell::default(),
            acme_accounts: tokio::sync::Mutex::new(HashMap::new()),
            revocation: config
                .revocation
                .check
                .then(|| crate::revocation::Checker::new(store.dir(), &config.revocation)),
        }
    }

    /// Writes what the CRL said of each certificate whose record it changed
    /// ([`Ctx::crl_seen`]) into its record as saved, all records together
    /// ([`Store::save_all`]); a record that cannot be read or written keeps what it said
    /// before (the next run checks again).
    pub(super) fn record_crl_seen(&self) {
        let seen = std::mem::take(&mut *self.crl_seen.borrow_mut());
        let mut changed = Vec::with_capacity(seen.len());
        for (name, s) in seen {
            match self.store.load(&name) {
                Ok(rec) if rec.revocation.as_ref() == Some(&s) => {}
                Ok(mut rec) => {
                    rec.revocation = Some(s);
                    changed.push(rec);
                }
                Err(e) => {
                    tracing::warn!(certificate = %name, "could not record the CRL's answer: {e}")
                }
            }
        }
        let refs: Vec<&crate::store::CertRecord> = changed.iter().collect();
        for (rec, saved) in changed.iter().zip(self.store.save_all(&refs)) {
            if let Err(e) = saved {
                tracing::warn!(certificate = %rec.name, "could not record the CRL's answer: {e}");
            }
        }
    }

    /// Ends what the run started beside the certificates: self-checks and standalone
    /// servers.
    pub(super) async fn finish(&self) {
        self.finish_self_checks().await;
        let servers = std::mem::take(&mut *self.standalone.lock().await);
        for (_, server) in servers {
            server.shutdown().await;
        }
    }
}

impl Ctx<'_> {
    /// Runs a self-check beside the run.
    pub(super) fn spawn_self_check(&self, check: impl Future<Output = ()> + Send + 'static) {
        self.self_checks.borrow_mut().spawn(check);
    }

    /// Lets self-checks that are still running finish for a moment, then drops them: by the
    /// end of a run the CA has either validated (the check is moot) or the run has waited
    /// long enough for the checks to have reported.
    pub(super) async fn finish_self_checks(&self) {
        let mut checks = std::mem::take(&mut *self.self_checks.borrow_mut());
        let grace = tokio::time::sleep(Duration::from_millis(500));
        tokio::pin!(grace);
        loop {
            tokio::select! {
                next = checks.join_next() => if next.is_none() { break },
                () = &mut grace => {
                    if !checks.is_empty() {
                        tracing::debug!("{} self-check(s) still running at the end of the run were dropped", checks.len());
                    }
                    checks.abort_all();
                    break;
                }
            }
        }
    }

    /// The time now, by the run's clock.
    pub(super) fn now(&self) -> time::OffsetDateTime {
        self.opts.clock.now()
    }

    /// Certificates worked on at once (`agent.concurrency`, at least one).
    pub(super) fn concurrency(&self) -> usize {
        usize::try_from(self.config.agent.concurrency)
            .unwrap_or(1)
            .max(1)
    }

    /// The API client if the run needed one.
    pub(super) fn client_if_built(&self) -> Option<&Client> {
        self.client.get()
    }

    /// The API client, built on first use; in a fleet, with the lead's check before every
    /// request.
    pub(super) fn client(&self) -> Result<&Client> {
        if let Some(c) = self.client.get() {
            return Ok(c);
        }
        partner_configured(self.config)?;
        let c = client_guarded(self.config, self.lead.and_then(Lead::send_guard))?;
        Ok(self.client.get_or_init(|| c))
    }
}

/// Options for [`Client::new`] as the configuration describes them: base URL, login, password
/// source (with the systemd credential when `$CREDENTIALS_DIRECTORY` is set), CA file, token
/// cache in `state_dir`, timeouts and retries.
pub fn client_options(config: &Config) -> ClientOptions {
    let api = &config.api;
    let password = PasswordSource {
        file: api.password_file.clone(),
        inline: api.password.clone(),
        credentials_directory: None,
    }
    .with_systemd_credentials();
    let mut o = ClientOptions::new(&api.base_url, &api.login, password);
    o.ca_file = api.ca_file.clone();
    o.state_dir = Some(config.agent.state_dir.clone());
    o.connect_timeout = Duration::from_secs(api.connect_timeout_secs);
    o.timeout = Duration::from_secs(api.timeout_secs);
    o.retry.max_attempts = api.retries + 1;
    o
}

/// The API client as the configuration describes it.
pub(crate) fn client(config: &Config) -> Result<Client> {
    partner_configured(config)?;
    client_guarded(config, None)
}

/// The one set-up of a Partner API client: [`client_options`], with `guard` asked before
/// every request (a fleet's lead: the engine's client as its leader, the leader's own calls,
/// `retire` in a fleet). Every client of the agent is made here.
pub(crate) fn client_guarded(config: &Config, guard: Option<SendGuard>) -> Result<Client> {
    let mut options = client_options(config);
    options.guard = guard;
    Client::new(options).context("could not set up the Partner API client")
}

/// Refuses a configuration without `[api]` (every certificate from an ACME CA).
fn partner_configured(config: &Config) -> Result<()> {
    if config.api.is_unused() {
        anyhow::bail!(
            "the Partner API is not configured: this configuration has no [api] section (its \
             certificates come from ACME CAs)"
        );
    }
    Ok(())
}

/// Progress for the person who runs the command (`opts.progress`), and the log.
pub(crate) fn progress(opts: &RunOptions, message: &str) {
    if opts.progress {
        eprintln!("{message}");
    }
    tracing::info!("{message}");
}

/// Whether the run was asked to stop.
pub(super) fn stop_requested(opts: &RunOptions) -> bool {
    opts.stop.as_ref().is_some_and(|s| *s.borrow())
}

/// Resolves when the run is asked to stop (never without a stop channel).
pub(super) async fn stopped(opts: &RunOptions) {
    match opts.stop.clone() {
        Some(mut rx) => {
            if rx.wait_for(|v| *v).await.is_err() {
                // The sender is gone: nobody can ask for a stop any more.
                std::future::pending::<()>().await;
            }
        }
        None => std::future::pending::<()>().await,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn client_options_follow_the_config() {
        let c = Config::parse(
            crate::config::tests::FULL,
            std::path::Path::new("/etc/cert-agent/config.toml"),
        )
        .unwrap();
        let o = client_options(&c);
        assert_eq!(o.base_url, "https://partner.example.net");
        assert_eq!(
            o.state_dir.as_deref(),
            Some(std::path::Path::new("/var/lib/cert-agent"))
        );
        assert_eq!(o.timeout, Duration::from_secs(30));
        assert_eq!(o.connect_timeout, Duration::from_secs(5));
        assert_eq!(o.retry.max_attempts, 3);
        assert_eq!(
            o.password.file.as_deref(),
            Some(std::path::Path::new("/etc/cert-agent/password"))
        );
    }
}
