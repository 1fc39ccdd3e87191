//! The leader's current certificate written over a value it refuses: reported as a repair
//! when what it writes is the copy it accepted itself (see [`crate::fleet::repair`]).

use anyhow::anyhow;

use crate::config::CertificateConfig;
use crate::fleet::repair;
use crate::fleet::schema::current_key;
use crate::store::Store;

use super::FleetRun;

impl FleetRun<'_> {
    /// The fleet's current value of `cert` does not open (`error`) and this host publishes
    /// the certificate of `serial` in its place: a repair when that is the one it accepted
    /// last and no host vouches for a newer one, otherwise a replacement as before.
    pub(super) async fn refused_current(
        &self,
        cert: &CertificateConfig,
        serial: &str,
        error: &anyhow::Error,
    ) {
        match repair::current(self.link, self.accepted_current(cert), &cert.name, serial).await {
            Ok(version) => self.report_current(cert, version, error),
            Err(_) => tracing::warn!(certificate = %cert.name, "{error:#}; replaced"),
        }
    }

    /// The fleet's current value of `cert` opens at `version`, older than what this host
    /// accepted (a replay), and this host publishes the certificate of `serial` above it.
    pub(super) async fn replayed_current(
        &self,
        cert: &CertificateConfig,
        serial: &str,
        version: u64,
    ) {
        let accepted = self.accepted_current(cert);
        let Some(mine) = accepted.as_ref().map(|(v, _)| *v) else {
            return;
        };
        if version >= mine {
            return;
        }
        let key = self.link.fleet.key(&current_key(&cert.name));
        let error = anyhow!(
            "{key} holds version {version}, but this host accepted version {mine} already: an \
             older value put back (a replay)"
        );
        if let Ok(held) = repair::current(self.link, accepted, &cert.name, serial).await {
            self.report_current(cert, held, &error);
        }
    }

    /// The version and serial of the current certificate of `cert` this host accepted last.
    fn accepted_current(&self, cert: &CertificateConfig) -> Option<(u64, String)> {
        self.versions
            .borrow()
            .accepted_current(&cert.name)
            .map(|c| (c.value.version, c.serial.clone()))
    }

    /// Says the current certificate of `cert` was written back from this host's copy of
    /// `version`.
    fn report_current(&self, cert: &CertificateConfig, version: u64, error: &anyhow::Error) {
        let key = self.link.fleet.key(&current_key(&cert.name));
        let next = self
            .versions
            .borrow()
            .next_current(&cert.name, 0)
            .unwrap_or(version);
        self.repaired_current.borrow_mut().insert(cert.name.clone());
        match Store::open(&self.config.agent.state_dir) {
            Ok(store) => repair::repaired(
                &store,
                &cert.name,
                &key,
                "current certificate",
                version,
                next,
                error,
            ),
            Err(e) => tracing::warn!(certificate = %cert.name, "{error:#}; {key} repaired ({e})"),
        }
    }
}
