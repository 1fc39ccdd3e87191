//! The leader's part of ACME in a fleet: the fleet's account made this host's before it is
//! used (registered and shared by the first leader that needs it), the validation files
//! published for every host, and the wait until every live host says it serves them.

use std::time::Duration;

use anyhow::{Context, Result, anyhow, bail};

use crate::config::{AcmeCa, CertificateConfig};
use crate::dcv::ValidationFile;
use crate::issuer::acme as issuer;

use super::FleetRun;
use crate::fleet::acme::{ACCOUNT_VERSION, confirm_served, content_sha256, is_acme, open_account};
use crate::fleet::coord::{Expect, Written};
use crate::fleet::envelope::{self, Place, Purpose};
use crate::fleet::link::LIVE_FOR;
use crate::fleet::schema::{
    AcmeAccountDoc, DcvEntry, DcvFile, DcvServed, HostSeen, acme_account_key, b64, dcv_key,
    dcv_served_key,
};

/// How long a leader waits, within a run, for every live host to serve an ACME validation
/// file before it leaves the order for the next run.
const SERVE_WAIT: Duration = Duration::from_secs(30);

/// How often the hosts' word is read again while waiting.
const SERVE_POLL: Duration = Duration::from_millis(250);

impl FleetRun<'_> {
    /// Publishes the validation file for every host, sealed at the shared record's version.
    pub(super) async fn publish_dcv(
        &self,
        cert: &CertificateConfig,
        file: &ValidationFile,
    ) -> Result<()> {
        let mut entry = DcvEntry {
            file_name: file.name().to_owned(),
            content: file.content().to_owned(),
            more: Vec::new(),
        };
        if is_acme(&entry) {
            // The files of one order (one per name) are published together.
            let mut published = self.acme_published.borrow_mut();
            if let Some(before) = published.get(&cert.name) {
                let mut all = before.clone();
                if !all.files().any(|(n, _)| n == entry.file_name) {
                    all.more.push(DcvFile {
                        file_name: entry.file_name,
                        content: entry.content,
                    });
                }
                entry = all;
            }
            published.insert(cert.name.clone(), entry.clone());
        }
        let rel = dcv_key(&cert.name);
        let version = self
            .versions
            .borrow()
            .of(&cert.name)
            .state
            .map_or(0, |s| s.version);
        let place = Place::new(Purpose::Dcv, &rel, &cert.name);
        let sealed = envelope::seal_json(&self.link.key, &place, version, &entry)?;
        self.lead.put(&rel, sealed, Expect::Any).await?;
        if is_acme(&entry) {
            // This host serves it too: said for a leader that takes the order over.
            confirm_served(self.link, &cert.name, &entry).await;
        }
        Ok(())
    }

    /// Makes this host's account file of `ca` the fleet's account: the fleet's, when it has
    /// one (a value that does not open or check stops the certificates of that CA, naming
    /// the key); else this host's own (registered now when it has none), shared for every
    /// later leader.
    pub(super) async fn acme_account(&self, ca: &AcmeCa) -> Result<()> {
        let link = self.link;
        let rel = acme_account_key(&ca.name);
        let dir = issuer::account_dir(&self.config.agent.state_dir, &ca.name);
        if let Some((value, _)) = link.fleet.get(&rel).await? {
            let bytes = open_account(link, ca, &value)?;
            return issuer::write_account_bytes(&dir, &bytes).map_err(anyhow::Error::from);
        }
        // None yet: this host's account (registered when it has none) becomes the fleet's.
        crate::engine::acme::account_of(&self.config.agent.state_dir, ca).await?;
        let bytes = issuer::read_account_bytes(&dir)?;
        let account_url = issuer::check_account_bytes(&bytes, &ca.directory)
            .map_err(|why| anyhow!("the ACME account of '{}' on this host: {why}", ca.name))?;
        let key_place = Place::new(Purpose::AcmeAccountKey, &rel, &ca.name);
        let credentials = b64(&envelope::seal(
            &link.key,
            &key_place,
            ACCOUNT_VERSION,
            &bytes,
        )?);
        let doc = AcmeAccountDoc {
            directory: ca.directory.clone(),
            account_url: account_url.clone(),
            credentials,
            registered_by: link.fleet.host().to_owned(),
            registered_at: link.clock.now(),
        };
        let place = Place::new(Purpose::AcmeAccount, &rel, &ca.name);
        let sealed = envelope::seal_json(&link.key, &place, ACCOUNT_VERSION, &doc)?;
        match self
            .lead
            .put(&rel, sealed, Expect::Absent)
            .await
            .with_context(|| {
                format!(
                    "could not share the ACME account of '{}' with the fleet",
                    ca.name
                )
            })? {
            Written::Done(_) => {
                tracing::info!(ca = %ca.name, account = %account_url, "the ACME account is the fleet's");
                Ok(())
            }
            Written::Conflict(Some(value)) => {
                let bytes = open_account(link, ca, &value)?;
                issuer::write_account_bytes(&dir, &bytes).map_err(anyhow::Error::from)
            }
            Written::Conflict(None) => bail!(
                "the fleet's ACME account {} changed while it was written; run again",
                link.fleet.key(&rel)
            ),
        }
    }

    /// The live hosts (synchronised within [`LIVE_FOR`]) other than this one that do not
    /// serve every file of `files` for `cert` yet, after waiting for them up to
    /// [`SERVE_WAIT`].
    pub(super) async fn hosts_not_serving(
        &self,
        cert: &CertificateConfig,
        files: &[ValidationFile],
    ) -> Result<Vec<String>> {
        let live = self.live_hosts().await?;
        let deadline = tokio::time::Instant::now() + SERVE_WAIT;
        loop {
            let mut missing = Vec::new();
            for host in &live {
                if !self.serves(host, cert, files).await? {
                    missing.push(host.clone());
                }
            }
            if missing.is_empty() || tokio::time::Instant::now() >= deadline {
                return Ok(missing);
            }
            self.lead.ensure_held()?;
            tokio::time::sleep(SERVE_POLL).await;
        }
    }

    /// The other hosts whose `seen` opens and is younger than [`LIVE_FOR`].
    async fn live_hosts(&self) -> Result<Vec<String>> {
        let link = self.link;
        let me = link.fleet.host();
        let mut out = Vec::new();
        for (rel, value) in link.fleet.hosts_under("seen").await? {
            let Some(host) = rel
                .strip_prefix("hosts/")
                .and_then(|k| k.strip_suffix("/seen"))
                .filter(|h| !h.contains('/') && *h != me)
            else {
                continue;
            };
            let place = Place::new(Purpose::HostSeen, &rel, "");
            match envelope::open_json::<HostSeen>(&link.key, &link.fleet, &place, &value) {
                Ok((_, seen)) if link.clock.now() - seen.at < LIVE_FOR => {
                    out.push(host.to_owned());
                }
                Ok(_) => {}
                Err(e) => tracing::warn!("{e:#}"),
            }
        }
        Ok(out)
    }

    /// Whether `host` says it serves every file of `files` for `cert`.
    async fn serves(
        &self,
        host: &str,
        cert: &CertificateConfig,
        files: &[ValidationFile],
    ) -> Result<bool> {
        let link = self.link;
        let rel = dcv_served_key(host, &cert.name);
        let Some((value, _)) = link.fleet.get(&rel).await? else {
            return Ok(false);
        };
        let place = Place::new(Purpose::DcvServed, &rel, &cert.name);
        let served =
            match envelope::open_json::<Vec<DcvServed>>(&link.key, &link.fleet, &place, &value) {
                Ok((_, s)) => s,
                Err(e) => {
                    tracing::warn!(certificate = %cert.name, "{e:#}");
                    return Ok(false);
                }
            };
        Ok(files.iter().all(|f| {
            let sha = content_sha256(f.content());
            served
                .iter()
                .any(|s| s.file_name == f.name() && s.content_sha256 == sha)
        }))
    }
}
