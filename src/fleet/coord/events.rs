//! A watch of the fleet's keys: each answer of etcd read as the keys that changed and what
//! happened to the lead.

use super::{Fleet, FleetError, LEADER, RESIGNED, unavailable};

/// The largest watch answer read: etcd sends the events of up to 1,000 revisions in one
/// answer (a leader's mass reissue writes a certificate of about 17 KiB sealed per revision,
/// a catching-up host 100 results per revision), over the client's default of 4 MiB; the
/// watch asks for answers in parts (`fragment`), and this bounds what a part may hold.
const WATCH_MESSAGE_MAX: usize = 64 << 20;

impl Fleet {
    /// Watches every key under the prefix: [`FleetWatch::changed`] names the keys (relative to
    /// the prefix) that changed.
    pub async fn watch(&self) -> Result<FleetWatch, FleetError> {
        self.watch_from(None).await
    }

    /// [`watch`](Self::watch) from revision `start` (`None`: from now): the changes made since
    /// are delivered first. A revision etcd compacted away ends the watch at once (an error of
    /// [`FleetWatch::changed`]).
    pub async fn watch_from(&self, start: Option<i64>) -> Result<FleetWatch, FleetError> {
        let prefix = self.prefix.clone();
        // Large answers come in parts of at most etcd's request size (a catch-up of many
        // revisions, or one transaction of many results, would exceed what a client reads).
        let mut options = etcd_client::WatchOptions::new()
            .with_prefix()
            .with_fragment();
        if let Some(start) = start.filter(|r| *r > 0) {
            options = options.with_start_revision(start);
        }
        let stream = self
            .call(|c| {
                let (prefix, options) = (prefix.clone(), options.clone());
                async move {
                    c.watch_client()
                        .max_decoding_message_size(WATCH_MESSAGE_MAX)
                        .watch(prefix, Some(options))
                        .await
                }
            })
            .await?;
        Ok(FleetWatch {
            stream,
            prefix: self.prefix.clone(),
            endpoints: self.endpoints.clone(),
        })
    }
}

/// A watch of the fleet's keys.
pub struct FleetWatch {
    pub(super) stream: etcd_client::WatchStream,
    pub(super) prefix: String,
    pub(super) endpoints: String,
}

impl FleetWatch {
    /// Waits for the next changes: the keys (relative to the prefix) that were written or
    /// deleted, and what happened to the lead. An error means the watch ended (etcd
    /// unreachable); watch again.
    ///
    /// The answer to a [`progress`](Self::progress) request comes as changes without keys,
    /// with the revision up to which every change was delivered.
    pub async fn changed(&mut self) -> Result<Changes, FleetError> {
        loop {
            match self.stream.message().await {
                Ok(Some(resp)) => {
                    if resp.canceled() {
                        let detail = match resp.compact_revision() {
                            0 => format!("the watch was cancelled: {}", resp.cancel_reason()),
                            r => format!(
                                "the watch was cancelled: the revision it started from was \
                                 compacted away (etcd keeps revisions from {r} on)"
                            ),
                        };
                        return Err(FleetError::Unavailable {
                            endpoints: self.endpoints.clone(),
                            detail,
                        });
                    }
                    let mut changes = Changes::default();
                    if resp.events().is_empty() && !resp.created() {
                        changes.revision = resp.header().map_or(0, |h| h.revision());
                        changes.progress = true;
                        return Ok(changes);
                    }
                    for event in resp.events() {
                        let Some(kv) = event.kv() else { continue };
                        changes.revision = changes.revision.max(kv.mod_revision());
                        let k = String::from_utf8_lossy(kv.key());
                        let rel = k.strip_prefix(&self.prefix).unwrap_or(&k).to_owned();
                        if rel == RESIGNED && event.event_type() == etcd_client::EventType::Put {
                            changes.resigned = Some(kv.mod_revision());
                        }
                        if rel == LEADER {
                            changes.lead.push(match event.event_type() {
                                etcd_client::EventType::Delete => LeadEvent::Ended {
                                    revision: kv.mod_revision(),
                                },
                                etcd_client::EventType::Put => LeadEvent::Taken {
                                    host: String::from_utf8_lossy(kv.value()).into_owned(),
                                },
                            });
                        }
                        changes.keys.push(rel);
                    }
                    if !changes.keys.is_empty() {
                        return Ok(changes);
                    }
                }
                Ok(None) => {
                    return Err(FleetError::Unavailable {
                        endpoints: self.endpoints.clone(),
                        detail: "the watch ended".into(),
                    });
                }
                Err(e) => return Err(unavailable(&self.endpoints, &e)),
            }
        }
    }
}

impl FleetWatch {
    /// Asks etcd to confirm that this watch is alive and caught up: answered through
    /// [`changed`](Self::changed) (one message on the watch's stream, no read of the store).
    pub async fn progress(&mut self) -> Result<(), FleetError> {
        self.stream
            .request_progress()
            .await
            .map_err(|e| unavailable(&self.endpoints, &e))
    }
}

/// What one answer of a [`FleetWatch`] reports.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Changes {
    /// The keys (relative to the prefix) written or deleted.
    pub keys: Vec<String>,
    /// What happened to the lead, in order.
    pub lead: Vec<LeadEvent>,
    /// The revision up to which changes were delivered (the highest of these changes, or the
    /// store's revision of a progress answer).
    pub revision: i64,
    /// An answer to [`FleetWatch::progress`]: no keys changed.
    pub progress: bool,
    /// The revision at which a leader that gave the lead up wrote `resigned`, when these
    /// changes hold it: the lead that ended at that revision was given up (see
    /// [`Fleet::resigned_at`](super::Fleet::resigned_at)), without reading it again.
    pub resigned: Option<i64>,
}

/// A change of the leader key.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum LeadEvent {
    /// `host` took the lead.
    Taken { host: String },
    /// The leader key was deleted at `revision`: the lead was given up (see
    /// [`Fleet::resigned_at`]) or its lease ended.
    Ended { revision: i64 },
}
