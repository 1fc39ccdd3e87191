//! A host's link to its fleet: the etcd connection with the fleet key, and the agreement
//! every host checks before it acts — the fleet key check and each certificate's spec (names,
//! product, key type).

use std::collections::BTreeMap;
use std::path::PathBuf;

use anyhow::{Result, anyhow, bail};

use crate::clock::Clock;
use crate::config::{CertificateConfig, Config, FleetConfig};
use crate::values::Secret;

use super::coord::{Expect, Fleet, Leadership, Snapshot, Written};
use super::envelope::{self, Place, Purpose};
use super::key::{FleetKey, FleetKeys, Which};
use super::options::FleetOptions;
use super::schema::{KEY_CHECK, Kind, Spec, spec_key};
use super::versions::Versions;

/// The systemd credential holding the fleet key when `secret_file` is not set.
pub(crate) const FLEET_KEY_CREDENTIAL: &str = "cert-agent-fleet-key";

/// The systemd credential holding the previous fleet key (while the fleet rotates its key)
/// when `previous_secret_file` is not set; read only when passed.
pub(crate) const FLEET_PREVIOUS_KEY_CREDENTIAL: &str = "cert-agent-fleet-key-previous";

/// A host's connection to its fleet: etcd and the fleet key.
pub struct FleetLink {
    pub fleet: Fleet,
    /// The current key (seals and opens) and the previous one (opens) while rotating.
    pub(super) key: FleetKeys,
    pub config: FleetConfig,
    /// Where the host's time comes from (record times, the bundle's validity).
    pub clock: Clock,
    /// The modification revision of a key check refused as not the fleet's (0: none): the
    /// next leader seals it again.
    pub(super) forged_key_check: std::sync::atomic::AtomicI64,
    /// This host's instance id, once its state directory was read ([`check_instance`]).
    pub(super) instance: std::sync::OnceLock<String>,
    /// Whether etcd held no `seen` record of this host when [`check_instance`] last looked (a
    /// host new to the fleet, or one `fleet forget-host` forgot): the synchronisation then
    /// reports every certificate it serves and its manifest entry again.
    pub(super) unannounced: std::sync::atomic::AtomicBool,
}

impl std::fmt::Debug for FleetLink {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("FleetLink")
            .field("fleet", &self.fleet)
            .finish_non_exhaustive()
    }
}

/// Connects to the fleet of `config`; `None` without `[fleet]`.
pub async fn connect(config: &Config, clock: Clock) -> Result<Option<FleetLink>> {
    let Some(fc) = &config.fleet else {
        return Ok(None);
    };
    let key_path = match &fc.secret_file {
        Some(p) => p.clone(),
        None => match std::env::var_os("CREDENTIALS_DIRECTORY") {
            Some(dir) => PathBuf::from(dir).join(FLEET_KEY_CREDENTIAL),
            None => bail!(
                "[fleet] has no `secret_file`, and no systemd credential {FLEET_KEY_CREDENTIAL} \
                 is passed (LoadCredential=); the fleet key is needed to share private keys"
            ),
        },
    };
    let previous = match previous_key_path(fc) {
        Some(p) => Some(FleetKey::read(&p).map_err(|e| anyhow!("previous_secret_file: {e}"))?),
        None => None,
    };
    let key = FleetKeys::new(FleetKey::read(&key_path)?, previous);
    let password = match &fc.password_file {
        // Refused by the configuration's validation too: a password never travels in clear.
        Some(_) if fc.endpoints.iter().any(|e| e.starts_with("http://")) => {
            bail!(
                "[fleet] password_file needs https:// endpoints: the password would travel in clear"
            )
        }
        Some(p) => Some(read_password(p)?),
        None => None,
    };
    let mut opts = FleetOptions::new(fc.endpoints.clone(), fc.host.clone());
    opts.ca_file.clone_from(&fc.ca_file);
    opts.cert_file.clone_from(&fc.cert_file);
    opts.key_file.clone_from(&fc.key_file);
    opts.user.clone_from(&fc.user);
    opts.password = password;
    opts.prefix.clone_from(&fc.prefix);
    opts.lease_ttl = std::time::Duration::from_secs(fc.lease_ttl_secs);
    let fleet = Fleet::connect(&opts).await?;
    Ok(Some(FleetLink {
        fleet,
        key,
        config: fc.clone(),
        clock,
        forged_key_check: std::sync::atomic::AtomicI64::new(0),
        unannounced: std::sync::atomic::AtomicBool::new(false),
        instance: std::sync::OnceLock::new(),
    }))
}

/// Where the previous fleet key is read from: `previous_secret_file`, or the systemd
/// credential when it is passed.
fn previous_key_path(fc: &FleetConfig) -> Option<PathBuf> {
    match &fc.previous_secret_file {
        Some(p) => Some(p.clone()),
        None => std::env::var_os("CREDENTIALS_DIRECTORY")
            .map(|dir| PathBuf::from(dir).join(FLEET_PREVIOUS_KEY_CREDENTIAL))
            .filter(|p| p.exists()),
    }
}

/// What `check` and `status` warn of while a previous fleet key is configured after the
/// rotation ended on this host (as `fleet-versions.json` records it, at `now`): the file is
/// to go. Reads only; `None` without a previous key, or while the rotation goes on.
pub(crate) fn previous_key_warning(config: &Config, now: time::OffsetDateTime) -> Option<String> {
    let fc = config.fleet.as_ref()?;
    let path = previous_key_path(fc)?;
    let key = FleetKey::read(&path).ok()?;
    let versions = Versions::load(&config.agent.state_dir).ok()?;
    versions.rotation_ended(key.fingerprint(), now).then(|| {
        format!(
            "the fleet key rotation has ended on this host: the previous fleet key ({}) \
                 opens nothing any more; remove previous_secret_file from [fleet] (or the \
                 credential {FLEET_PREVIOUS_KEY_CREDENTIAL}) and delete the old key",
            path.display()
        )
    })
}

/// Reads `[fleet] password_file`: private to its owner (as the API's password file), one line.
fn read_password(path: &std::path::Path) -> Result<Secret> {
    let fail = |m: String| anyhow!("[fleet] password_file '{}': {m}", path.display());
    let data = crate::fsutil::read_private(path, MAX_PASSWORD_FILE).map_err(fail)?;
    let text = String::from_utf8(data).map_err(|_| fail("is not UTF-8 text".into()))?;
    let password = text.trim_end_matches(['\n', '\r']);
    if password.is_empty() {
        return Err(fail("is empty".into()));
    }
    Ok(Secret::new(password))
}

/// The largest `[fleet] password_file` read.
const MAX_PASSWORD_FILE: u64 = 4096;

/// Registers the certificates of this host with the fleet, or compares them with what the
/// fleet has: a certificate whose names, product or key type differ is refused (the error
/// names the difference), and so is one whose spec does not open (the error names the key).
/// The key check and the specs are taken from `snap` (the synchronisation's one read); only
/// what it lacks is written (a certificate new to the fleet, a fleet's first host). What it
/// learns goes into `versions` (this host's, as the run read them), written.
pub(super) async fn check_specs(
    link: &FleetLink,
    config: &Config,
    snap: &Snapshot,
    versions: &mut Versions,
) -> Result<BTreeMap<String, String>> {
    check_instance(link, versions).await?;
    // A key retired before stays retired: a key check sealed again under it is refused too.
    retire_previous_key(link, versions, None)?;
    let seen = check_key(link, snap.key_check.clone()).await?;
    retire_previous_key(link, versions, seen)?;
    let mut refused = BTreeMap::new();
    for cert in &config.certificates {
        let mine = Spec::of(cert, link.fleet.host());
        let key = spec_key(&cert.name);
        let place = Place::new(Purpose::Spec, &key, &cert.name);
        if snap.unread.contains_key(&key) {
            // At the revision this host found it to agree with this very configuration.
            continue;
        }
        let existing = match snap.certs.get(&key) {
            Some(existing) => existing.clone(),
            None => {
                let sealed = envelope::seal_json(&link.key, &place, 1, &mine)?;
                let Some(existing) = link.fleet.create(&key, sealed).await? else {
                    continue;
                };
                existing
            }
        };
        let theirs: Spec = match envelope::open_json(&link.key, &link.fleet, &place, &existing) {
            Ok((_, spec)) => spec,
            Err(e) => {
                refused.insert(
                    cert.name.clone(),
                    format!(
                        "{e:#}; this host does nothing for certificate '{}' until the spec \
                         is one the fleet wrote (delete the key to let a host write it again)",
                        cert.name
                    ),
                );
                continue;
            }
        };
        let diff = mine.differences(&theirs);
        if diff.is_empty()
            && let Some(rev) = snap.revisions.get(&key)
        {
            versions.agreed_spec(&cert.name, *rev, &spec_digest(link, cert));
        }
        if !diff.is_empty() {
            refused.insert(
                cert.name.clone(),
                format!(
                    "certificate '{}' differs from the fleet's record (first written by {}): \
                     {}; this host does nothing for it until its [[certificate]] matches \
                     (to change it for the whole fleet, see docs/fleet.md)",
                    cert.name,
                    theirs.host,
                    diff.join("; ")
                ),
            );
        }
    }
    versions.save()?;
    Ok(refused)
}

/// How long after its last synchronisation a host's `seen` record counts as a live process's
/// announcement: twice the daemon's five-minute resynchronisation.
pub(super) const LIVE_FOR: time::Duration = time::Duration::minutes(10);

/// Refuses this host's fleet work while another live process announces the same host name:
/// `hosts/HOST/seen` opens, names another instance id than this state directory's, and was
/// written less than [`LIVE_FOR`] ago. Two hosts configured with the same `[fleet] host` end
/// each other's leads; the second to start stops here, naming the name. A `seen` record that
/// does not open, or of an older version without an instance id, announces nothing.
pub(super) async fn check_instance(link: &FleetLink, versions: &Versions) -> Result<()> {
    let mine = versions.instance()?;
    let host = link.fleet.host();
    let rel = super::schema::seen_key(host);
    let seen = link.fleet.get(&rel).await?;
    link.unannounced
        .store(seen.is_none(), std::sync::atomic::Ordering::Relaxed);
    if let Some((value, _)) = seen {
        let place = Place::new(Purpose::HostSeen, &rel, "");
        if let Ok((_, seen)) =
            envelope::open_json::<super::schema::HostSeen>(&link.key, &link.fleet, &place, &value)
            && let Some(theirs) = seen.instance.filter(|t| *t != mine)
            && link.clock.now() - seen.at < LIVE_FOR
        {
            bail!(
                "another host announces this host's name '{host}' ([fleet] host) in {}: \
                 instance {theirs}, last synchronised {} (this host is instance {mine}); two \
                 hosts configured with the same name end each other's leads, so this host does \
                 no fleet work: give each host its own [fleet] host (the other stops counting \
                 as live {} minutes after its last synchronisation)",
                link.fleet.key(&rel),
                crate::clock::rfc3339(seen.at),
                LIVE_FOR.whole_minutes()
            );
        }
    }
    let _ = link.instance.set(mine);
    Ok(())
}

/// The digest of what this host's configuration says of `cert` that the fleet's spec must
/// agree with (names, product, key type).
pub(super) fn spec_digest(link: &FleetLink, cert: &CertificateConfig) -> String {
    let mine = Spec::of(cert, link.fleet.host());
    let text = serde_json::json!([mine.domains, mine.product_id, mine.key_type]).to_string();
    super::versions::digest(text.as_bytes())
}

/// The previous key is retired — it opens nothing any more — once the rotation ended on this
/// host: when the key check is seen under the current key (`seen`), or once
/// [`ROTATION_GRACE`](super::versions::ROTATION_GRACE) passed since this host first ran
/// holding the previous key; and from then on (both kept in `fleet-versions.json`), so that a
/// key check sealed again under the previous key (by whoever still holds it) does not bring
/// it back: it is refused like any key check that is not the fleet's.
pub(super) fn retire_previous_key(
    link: &FleetLink,
    versions: &mut Versions,
    seen: Option<Which>,
) -> Result<()> {
    let Some(previous) = link.key.previous() else {
        return Ok(());
    };
    let now = link.clock.now();
    let since = versions.rotating_since(previous.fingerprint(), now);
    let before = versions.is_retired(previous.fingerprint());
    let ended = versions.rotation_ended(previous.fingerprint(), now);
    if seen == Some(Which::Current) || ended {
        versions.retire(previous.fingerprint());
    }
    versions.save()?;
    if !versions.is_retired(previous.fingerprint()) {
        return Ok(());
    }
    if link.key.retire_previous() {
        let why = if before {
            "as recorded in fleet-versions.json".to_owned()
        } else if seen != Some(Which::Current) {
            format!(
                "{} h passed since this host first ran with it ({})",
                super::versions::ROTATION_GRACE.whole_hours(),
                crate::clock::rfc3339(since)
            )
        } else {
            format!(
                "the fleet's key check {} was seen under this host's current key",
                link.fleet.key(KEY_CHECK)
            )
        };
        tracing::info!(
            "the fleet key rotation has ended on this host ({why}): values still sealed \
             under the previous key are refused; remove previous_secret_file"
        );
    }
    Ok(())
}

/// The fleet key check: a known text sealed by the first host, and sealed again under the
/// new key by `fleet rotate-key`. A host whose current key opens it is part of the fleet; so
/// is, while the fleet rotates, a host whose previous key opens it (it holds the new key as
/// `secret_file` before the fleet was re-sealed under it). Returns which key opened it.
///
/// A key check that opens with neither key is one of two things, told apart by the fleet's
/// other values (`certs/`): when one of them opens, this host's key is the fleet's and the key
/// check is not (garbage, or a value put there by someone without the fleet key) — it is
/// refused (`None`), logged, and the next leader seals it again; when none does, this host's
/// key is not the fleet's — it installs nothing, leads nothing and seals nothing.
///
/// `known`: the key check and its modification revision as just read, if it was; otherwise
/// (or when there is none) it is written if absent, or read.
pub(super) async fn check_key(
    link: &FleetLink,
    known: Option<(Vec<u8>, i64)>,
) -> Result<Option<Which>> {
    let place = Place::new(Purpose::KeyCheck, KEY_CHECK, "");
    let (existing, revision) = match known {
        Some(known) => known,
        None => {
            let sealed = envelope::seal(&link.key, &place, 1, KEY_CHECK_TEXT)?;
            let Some(existing) = link.fleet.create_or_get(KEY_CHECK, sealed).await? else {
                return Ok(Some(Which::Current));
            };
            existing
        }
    };
    let why = match envelope::open_which(&link.key, &link.fleet, &place, &existing) {
        Ok((_, text, which)) if text == KEY_CHECK_TEXT => {
            if which == Which::Previous {
                tracing::info!(
                    "the fleet's key check {} is still sealed under this host's previous key: \
                     the fleet is rotating its key (run `cert-agent fleet rotate-key` on one \
                     host once every host holds the new key)",
                    link.fleet.key(KEY_CHECK)
                );
            }
            return Ok(Some(which));
        }
        Ok(_) => format!(
            "the fleet's key check {} opens but does not hold the key check's text",
            link.fleet.key(KEY_CHECK)
        ),
        Err(e) => format!("{e:#}"),
    };
    if let Some(opened) = another_value_opens(link).await? {
        tracing::warn!(
            "{why}; but this host's fleet key opens the fleet's other values ({opened}), so the \
             key check is not the fleet's (garbage, or written by someone without the fleet \
             key): refused, and sealed again by the next leader"
        );
        link.forged_key_check
            .store(revision, std::sync::atomic::Ordering::SeqCst);
        return Ok(None);
    }
    bail!(
        "this host's fleet key ({}) is not the fleet's: it does not open the fleet's key check \
         ({}){}, nor any other value the fleet wrote under {}; this host installs nothing and \
         does not lead until its secret_file holds the fleet's key (if every other host says \
         the same, the fleet's values were replaced: compare the key files, then delete {} to \
         let a host write it again)",
        link.config.secret_file.as_ref().map_or_else(
            || FLEET_KEY_CREDENTIAL.to_owned(),
            |p| p.display().to_string()
        ),
        link.fleet.key(KEY_CHECK),
        if link.key.previous().is_some() {
            ", nor does its previous key"
        } else {
            ""
        },
        link.fleet.key("certs/"),
        link.fleet.key(KEY_CHECK)
    )
}

/// The etcd key of a value under `certs/` that opens with this host's keys, if one does.
async fn another_value_opens(link: &FleetLink) -> Result<Option<String>> {
    for (rel, value) in link.fleet.list("certs/").await? {
        let Some(kind) = Kind::of(&rel) else {
            continue;
        };
        if envelope::open(&link.key, &link.fleet, &kind.place(&rel), &value).is_ok() {
            return Ok(Some(link.fleet.key(&rel)));
        }
    }
    Ok(None)
}

/// As the leader: a key check refused as not the fleet's (by [`check_key`], in this run) is
/// sealed again, unless it changed since.
pub(super) async fn reseal_forged_key_check(link: &FleetLink, lead: &Leadership) {
    let revision = link
        .forged_key_check
        .swap(0, std::sync::atomic::Ordering::SeqCst);
    if revision == 0 {
        return;
    }
    let place = Place::new(Purpose::KeyCheck, KEY_CHECK, "");
    let sealed = match envelope::seal(&link.key, &place, 1, KEY_CHECK_TEXT) {
        Ok(s) => s,
        Err(e) => {
            tracing::warn!("{e:#}");
            return;
        }
    };
    let key = link.fleet.key(KEY_CHECK);
    match lead
        .put(KEY_CHECK, sealed, Expect::Revision(revision))
        .await
    {
        Ok(Written::Done(_)) => {
            tracing::warn!("the fleet's key check {key} was not the fleet's: sealed again");
        }
        Ok(Written::Conflict(_)) => {
            tracing::info!("the fleet's key check {key} changed meanwhile: left as it is");
        }
        Err(e) => tracing::warn!("the fleet's key check {key} could not be sealed again: {e}"),
    }
}

/// The text of the key check.
pub(super) const KEY_CHECK_TEXT: &[u8] = b"cert-agent fleet key";

/// The fleet's lead for a command that acts as the leader (`what` it did not do, and the
/// `command` to run again, are named when another host leads).
pub(super) async fn lead_for(link: &FleetLink, what: &str, command: &str) -> Result<Leadership> {
    if let Some(lead) = link.fleet.try_lead_exclusive().await? {
        return Ok(lead);
    }
    let leader = link
        .fleet
        .leader()
        .await?
        .unwrap_or_else(|| "another host".into());
    bail!("{leader} leads the fleet now; nothing was {what}: run `{command}` again after its run")
}

/// This host's state directory held for a fleet command (`command`, named when a run of this
/// host holds it: run the command again once it has ended).
pub(super) fn hold_state(
    store: &crate::store::Store,
    config: &Config,
    command: &str,
) -> Result<crate::store::RunLock> {
    match store.lock() {
        Ok(l) => Ok(l),
        Err(crate::store::StoreError::Locked { .. }) => bail!(
            "a run of this host holds its state directory ({}); run `{command}` again once it \
             has ended",
            config.agent.state_dir.display()
        ),
        Err(e) => Err(e.into()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::PermissionsExt;

    #[test]
    fn the_etcd_password_file_must_be_private_to_its_owner() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("etcd.password");
        std::fs::write(&file, "agent-secret\n").unwrap();
        std::fs::set_permissions(&file, std::fs::Permissions::from_mode(0o644)).unwrap();
        let err = format!("{:#}", read_password(&file).unwrap_err());
        assert!(err.contains("[fleet] password_file"), "{err}");
        assert!(err.contains(&file.display().to_string()), "{err}");
        assert!(
            err.contains("mode 0644: it must not be readable by group or others (chmod 600 it)"),
            "{err}"
        );
        assert!(!err.contains("agent-secret"), "{err}");
        std::fs::set_permissions(&file, std::fs::Permissions::from_mode(0o600)).unwrap();
        assert_eq!(read_password(&file).unwrap().expose(), "agent-secret");
        std::fs::write(&file, "\n").unwrap();
        let err = format!("{:#}", read_password(&file).unwrap_err());
        assert!(err.contains("is empty"), "{err}");
    }
}
