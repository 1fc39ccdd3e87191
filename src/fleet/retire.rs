//! `cert-agent retire NAME` in fleet mode: the host takes the fleet's lead as a run does (none
//! while another host leads: [`LeadElsewhere`]), reads the fleet's record of NAME (its
//! order), asks the API for the cancellation once (as a single host does), then in one
//! fenced transaction writes NAME's sealed tombstone `certs/NAME/retired` and deletes the
//! certificate's other shared values (its record, current certificate, validation file, the
//! hosts' results and unplaced notes), and retires NAME here as a single host does. The
//! other hosts retire it on their next synchronisation ([`super::follower`]).

use anyhow::{Context, Result, anyhow};

use crate::api::Client;
use crate::clock::Clock;
use crate::config::Config;
use crate::engine::retire::{self, CancelReport, Plan, RetireOptions, RetireReport};
use crate::store::Store;

use super::coord::Leadership;
use super::envelope::{self, Place, Purpose};
use super::link::{FleetLink, check_specs, connect};
use super::schema::{
    KEY_CHECK, Tombstone, current_key, dcv_key, printable, retired_key, state_key,
};
use super::versions::Versions;

/// Deletions per transaction of a retirement: with the tombstone, under etcd's default
/// `--max-txn-ops` (128).
const TOMBSTONE_DELETES: usize = 120;

/// Another host leads the fleet: nothing was done (exit code 75: try again).
#[derive(Debug, thiserror::Error)]
#[error(
    "{leader} leads the fleet now and only the leader retires a certificate for the fleet: \
     '{name}' was not retired and nothing was written; run `cert-agent retire {name}` again \
     once its run is over (`cert-agent fleet status` shows the leader)"
)]
pub(crate) struct LeadElsewhere {
    pub leader: String,
    pub name: String,
}

/// The fleet's lead, taken to retire a certificate.
pub(crate) struct Retiring {
    link: FleetLink,
    lead: Leadership,
}

impl Retiring {
    /// Takes the lead (the caller holds the state directory's lock), then brings the fleet's
    /// record of `name` into this host's state directory, as a run's lead does, so that the
    /// order cancelled is the fleet's. A record that does not open is left aside (warned):
    /// this host's own record is retired.
    pub(crate) async fn begin(
        config: &Config,
        store: &Store,
        name: &str,
        clock: Clock,
    ) -> Result<Self> {
        let link = connect(config, clock)
            .await?
            .ok_or_else(|| anyhow!("no [fleet] in {}", config.path.display()))?;
        // The fleet key agreed on first: nothing is sealed under a key the fleet does not use.
        let snap = link
            .fleet
            .snapshot(KEY_CHECK, &std::collections::BTreeMap::new())
            .await?;
        check_specs(&link, config, &snap, &mut Versions::load(store.dir())?).await?;
        let Some(lead) = link.fleet.try_lead_exclusive().await? else {
            let leader = link
                .fleet
                .leader()
                .await?
                .map_or_else(|| "another host".to_owned(), |l| printable(&l));
            return Err(LeadElsewhere {
                leader,
                name: name.to_owned(),
            }
            .into());
        };
        tracing::info!(host = %link.fleet.host(), "leading the fleet to retire '{name}'");
        let this = Self { link, lead };
        if let Some(cert) = config.certificate(name) {
            let mut versions = Versions::load(store.dir())?;
            // Read once this host leads: another leader may have written since.
            let docs = super::leader::Now::read(
                this.link
                    .fleet
                    .list(&format!("certs/{name}/"))
                    .await?
                    .into_iter()
                    .collect(),
            );
            let mut imports = super::leader::Imports::default();
            if let Err(e) = super::leader::import(
                &this.link,
                store,
                &mut versions,
                cert,
                &docs,
                None,
                &mut imports,
            )
            .await
            {
                tracing::warn!(certificate = %name, "{e:#}; this host's own record is retired");
            }
            for (_, e) in imports.write(store) {
                tracing::warn!(certificate = %name, "{e:#}; this host's own record is retired");
            }
            versions.save()?;
        }
        Ok(this)
    }

    /// Gives the lead up without retiring anything.
    pub(crate) async fn give_up(self) {
        self.lead.resign().await;
    }

    /// A Partner API client whose every request first checks the lead.
    pub(crate) fn client(&self, config: &Config) -> Result<Client> {
        crate::engine::client_guarded(config, Some(self.lead.send_guard()))
    }

    /// Retires `plan` for the fleet, then gives the lead up: the cancellation (with
    /// `client`), the tombstone and the deletions in one fenced transaction, this host's
    /// side. When the transaction fails nothing changed here (the cancellation's answer is
    /// in the error and the journal).
    pub(crate) async fn carry_out(
        self,
        plan: Plan<'_>,
        store: &Store,
        client: Option<&Client>,
        opts: RetireOptions,
    ) -> Result<RetireReport> {
        let done = self.act(plan, store, client, opts).await;
        self.lead.resign().await;
        done
    }

    async fn act(
        &self,
        plan: Plan<'_>,
        store: &Store,
        client: Option<&Client>,
        opts: RetireOptions,
    ) -> Result<RetireReport> {
        let now = self.link.clock.now();
        let cancel = retire::ask_cancel(&plan, store, client, opts, now).await?;
        let doc = Tombstone {
            retired_at: now,
            by: self.link.fleet.host().to_owned(),
            remove_files: opts.remove_files,
            cancel: cancel.as_ref().map(CancelReport::describe),
        };
        self.write_tombstone(store, &plan.name, &doc)
            .await
            .with_context(|| {
                let asked = doc
                    .cancel
                    .as_deref()
                    .map(|c| format!(" ({c})"))
                    .unwrap_or_default();
                format!(
                    "'{}' was not retired for the fleet{asked}; nothing else was changed",
                    plan.name
                )
            })?;
        let name = plan.name.clone();
        let report = retire::finish(plan, store, cancel, now).await?;
        store.journal(
            &name,
            "fleet-retired",
            serde_json::json!({
                "by": doc.by,
                "retired_at": crate::clock::rfc3339(now),
                "remove_files": doc.remove_files,
                "cancel": doc.cancel,
                "archive": report.archive,
            }),
        )?;
        Ok(report)
    }

    /// Writes the tombstone of `name` (sealed at a version above the shared record's) and
    /// deletes the certificate's other shared values, in one transaction fenced by the lead.
    async fn write_tombstone(&self, store: &Store, name: &str, doc: &Tombstone) -> Result<()> {
        let fleet = &self.link.fleet;
        let mut versions = Versions::load(store.dir())?;
        let rel = retired_key(name);
        let version = versions.next_state(name, 0)?;
        let place = Place::new(Purpose::Retired, &rel, name);
        let sealed = envelope::seal_json(&self.link.key, &place, version, doc)?;
        let mut deletes = vec![state_key(name), current_key(name), dcv_key(name)];
        // Each host's values of this name only (not its values of every other certificate).
        let kinds = ["certs", "unplaced", "dcv", "proof", "rollout"].map(|k| format!("{k}/{name}"));
        let ranges: Vec<(&str, &str)> = kinds.iter().map(|k| (k.as_str(), k.as_str())).collect();
        for (key, _) in fleet.hosts_ranges(&ranges).await? {
            let parts: Vec<&str> = key.split('/').collect();
            if let ["hosts", _, _, n] = parts.as_slice()
                && *n == name
            {
                deletes.push(key);
            }
        }
        // The tombstone, the shared values and as many hosts' values as etcd takes in one
        // transaction (`--max-txn-ops`, 128 by default) together; a fleet of more hosts has the
        // rest deleted after, fenced the same way.
        let (first, rest) = deletes.split_at(deletes.len().min(TOMBSTONE_DELETES));
        self.lead
            .write_all(vec![(rel.clone(), sealed.clone())], first)
            .await?;
        tracing::info!(certificate = %name, key = %fleet.key(&rel), "retired for the fleet");
        versions.accept_tombstone(name, &fleet.key(&rel), version, &sealed)?;
        versions.save()?;
        for (i, chunk) in rest.chunks(TOMBSTONE_DELETES).enumerate() {
            if let Err(e) = self.lead.write_all(Vec::new(), chunk).await {
                tracing::warn!(
                    certificate = %name,
                    "retired, but {} values the hosts wrote of it were not deleted: {e:#}",
                    rest.len() - i * TOMBSTONE_DELETES
                );
                break;
            }
        }
        Ok(())
    }
}
