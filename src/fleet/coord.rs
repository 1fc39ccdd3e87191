//! The fleet's coordination through etcd v3: the connection (endpoints, TLS, authentication),
//! leadership, and fenced writes.
//!
//! Leadership is one key, `PREFIX leader`, created in a transaction only while it does not
//! exist (`create_revision == 0`) and attached to a lease of [`FleetOptions::lease_ttl`]: the
//! host that created it leads until its lease ends (it resigns, or stops renewing it — killed,
//! cut off). Every write of the leader is a transaction that also compares the leader key's
//! `create_revision` with the one it created: a leader whose lease ended cannot write anything
//! once another host leads. Locally, a leader counts its lease from the moment it *sent* the
//! last renewal, minus a margin, on the boot clock (which counts a suspend), and stops acting
//! at that deadline — before etcd lets another host take over.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use etcd_client::{
    Client, Compare, CompareOp, ConnectOptions, GetOptions, PutOptions, Txn, TxnOp, TxnOpResponse,
};

use super::lead_deadline::{self, BootInstant, Held, deadline_of, lock};
use super::options::{FleetOptions, tls};

mod batch;
mod changed_since;
mod events;
mod fenced;
mod hosts;
mod lease;
mod snapshot;

use lease::Renewer;

#[cfg(test)]
mod tests;

pub(crate) use events::Changes;
pub use events::{FleetWatch, LeadEvent};
pub(crate) use lease::take_lost as take_leads_lost;
pub(crate) use snapshot::{Listed, Snapshot};

/// What went wrong with the fleet's store.
#[derive(Debug, thiserror::Error)]
pub enum FleetError {
    #[error(
        "the fleet's etcd ({endpoints}) cannot be reached or has no quorum: {detail}; this \
         host keeps serving what it has and places no order and no reissue"
    )]
    Unavailable { endpoints: String, detail: String },
    #[error(
        "the fleet's etcd refused {what}: {detail}; {hint}; this host places no order and no \
         reissue"
    )]
    Refused {
        what: String,
        detail: String,
        /// What to check, by the kind of refusal.
        hint: &'static str,
    },
    #[error("{0}")]
    Setup(String),
    #[error(
        "this host ({host}) no longer leads the fleet (its lease ended{}); it stops acting",
        .now.as_ref().map(|l| format!("; {l} leads now")).unwrap_or_default()
    )]
    NotLeader { host: String, now: Option<String> },
    #[error("the fleet's record {key} is not what this version writes: {detail}")]
    Corrupt { key: String, detail: String },
}

/// A connection to the fleet's etcd.
#[derive(Clone)]
pub struct Fleet {
    client: Client,
    /// How to connect again: the leader renews its lease on a client of its own.
    reconnect: (Vec<String>, ConnectOptions),
    prefix: String,
    host: String,
    endpoints: String,
    members: usize,
    lease_ttl: Duration,
}

impl std::fmt::Debug for Fleet {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Fleet")
            .field("endpoints", &self.endpoints)
            .field("prefix", &self.prefix)
            .field("host", &self.host)
            .finish_non_exhaustive()
    }
}

impl Fleet {
    /// Connects to the members of `opts` (no request is made yet).
    pub async fn connect(opts: &FleetOptions) -> Result<Self, FleetError> {
        if opts.endpoints.is_empty() {
            return Err(FleetError::Setup("[fleet] endpoints is empty".into()));
        }
        let mut connect = ConnectOptions::new()
            .with_timeout(opts.request_timeout)
            .with_connect_timeout(opts.request_timeout)
            .with_require_leader(true)
            .with_keep_alive(Duration::from_secs(10), opts.request_timeout);
        if let (Some(user), Some(password)) = (&opts.user, &opts.password) {
            connect = connect.with_user(user.clone(), password.expose().to_owned());
        }
        if opts.endpoints.iter().any(|e| e.starts_with("https://")) || opts.ca_file.is_some() {
            connect = connect.with_tls(tls(opts).map_err(FleetError::Setup)?);
        }
        let endpoints = opts.endpoints.join(", ");
        let client = Client::connect(&opts.endpoints, Some(connect.clone()))
            .await
            .map_err(|e| unavailable(&endpoints, &e))?;
        Ok(Self {
            client,
            reconnect: (opts.endpoints.clone(), connect),
            prefix: opts.prefix.clone(),
            host: opts.host.clone(),
            endpoints,
            members: opts.endpoints.len(),
            lease_ttl: opts.lease_ttl,
        })
    }

    /// This host's name.
    pub fn host(&self) -> &str {
        &self.host
    }

    /// The fleet's prefix in etcd.
    pub fn prefix(&self) -> &str {
        &self.prefix
    }

    /// The full key of `rel` under the prefix.
    pub fn key(&self, rel: &str) -> String {
        format!("{}{rel}", self.prefix)
    }

    fn fail(&self, e: &etcd_client::Error) -> FleetError {
        unavailable(&self.endpoints, e)
    }

    /// Runs `op` with a client, again when etcd did not take the request — a member down
    /// (the client then turns to another), an election under way: up to two attempts per
    /// member, 100 ms apart and doubling to 1 s. Other errors end it at once.
    async fn call<T, F, Fut>(&self, op: F) -> Result<T, FleetError>
    where
        F: Fn(Client) -> Fut,
        Fut: Future<Output = Result<T, etcd_client::Error>>,
    {
        let attempts = 2 * self.members.max(1);
        let mut delay = Duration::from_millis(100);
        let mut attempt = 1;
        loop {
            match op(self.client.clone()).await {
                Ok(v) => return Ok(v),
                Err(e) if attempt < attempts && retriable(&e) => {
                    tracing::debug!("etcd: {e} (attempt {attempt}); trying again");
                    tokio::time::sleep(delay).await;
                    delay = (delay * 2).min(Duration::from_secs(1));
                    attempt += 1;
                }
                Err(e) => return Err(self.fail(&e)),
            }
        }
    }

    /// The value of `rel`, with its modification revision.
    pub async fn get(&self, rel: &str) -> Result<Option<(Vec<u8>, i64)>, FleetError> {
        let key = self.key(rel);
        let resp = self
            .call(|mut c| {
                let key = key.clone();
                async move { c.get(key, None).await }
            })
            .await?;
        Ok(resp
            .kvs()
            .first()
            .map(|kv| (kv.value().to_vec(), kv.mod_revision())))
    }

    /// Every key under `rel` (relative to the prefix) with its value, in key order: read in
    /// pages of [`LIST_PAGE`] keys, all at the revision of the first (one consistent view, as
    /// one read would give), so that no answer outgrows what the client accepts (4 MiB; the
    /// values of one certificate take about 17 KiB).
    pub async fn list(&self, rel: &str) -> Result<Vec<(String, Vec<u8>)>, FleetError> {
        let mut out = Vec::new();
        let end = range_end(self.key(rel).as_bytes());
        self.list_pages(self.key(rel).into_bytes(), &end, 0, &mut out)
            .await?;
        Ok(out)
    }

    /// The keys under `rel` (relative to the prefix), without their values, in key order and
    /// pages of [`LIST_PAGE`]: for values too large to be read a hundred at a time (each
    /// host's manifest entry grows with the number of certificates).
    pub async fn list_keys(&self, rel: &str) -> Result<Vec<String>, FleetError> {
        let end = range_end(self.key(rel).as_bytes());
        let mut from = self.key(rel).into_bytes();
        let mut out = Vec::new();
        loop {
            let opts = GetOptions::new()
                .with_range(end.clone())
                .with_limit(LIST_PAGE)
                .with_keys_only();
            let resp = self
                .call(|mut c| {
                    let (from, opts) = (from.clone(), opts.clone());
                    async move { c.get(from, Some(opts)).await }
                })
                .await?;
            let mut page = Vec::new();
            self.append_relative(resp.kvs(), &mut page);
            out.extend(page.into_iter().map(|(k, _)| k));
            match resp.kvs().last() {
                Some(last) if resp.more() => from = after(last.key()),
                _ => return Ok(out),
            }
        }
    }

    /// The keys from `from` (a full key, inclusive) up to `end` (exclusive) in pages of
    /// [`LIST_PAGE`], appended to `out` relative to the prefix; at `revision` (0: the revision
    /// of the first page's answer, returned).
    async fn list_pages(
        &self,
        mut from: Vec<u8>,
        end: &[u8],
        mut revision: i64,
        out: &mut Vec<(String, Vec<u8>)>,
    ) -> Result<i64, FleetError> {
        loop {
            let opts = GetOptions::new()
                .with_range(end.to_vec())
                .with_limit(LIST_PAGE);
            let resp = self.get_at(&from, opts, &mut revision).await?;
            self.append_relative(resp.kvs(), out);
            match resp.kvs().last() {
                Some(last) if resp.more() => from = after(last.key()),
                _ => return Ok(revision),
            }
        }
    }

    /// One read from `from` (a full key) with `opts`, at `*revision` (0: the current revision,
    /// which `*revision` then takes from the answer).
    async fn get_at(
        &self,
        from: &[u8],
        mut opts: GetOptions,
        revision: &mut i64,
    ) -> Result<etcd_client::GetResponse, FleetError> {
        if *revision > 0 {
            opts = opts.with_revision(*revision);
        }
        let resp = self
            .call(|mut c| {
                let (from, opts) = (from.to_vec(), opts.clone());
                async move { c.get(from, Some(opts)).await }
            })
            .await?;
        if *revision == 0 {
            *revision = resp.header().map_or(0, |h| h.revision());
        }
        Ok(resp)
    }

    /// `kvs` appended to `out` with their keys relative to the prefix.
    fn append_relative(&self, kvs: &[etcd_client::KeyValue], out: &mut Vec<(String, Vec<u8>)>) {
        for kv in kvs {
            let key = String::from_utf8_lossy(kv.key());
            let rel = key.strip_prefix(&self.prefix).unwrap_or(&key).to_owned();
            out.push((rel, kv.value().to_vec()));
        }
    }

    /// Writes `rel` without fencing: for what belongs to this host alone (its results under
    /// `hosts/<host>/` and its manifest entry `manifest/<host>`, which no other host writes);
    /// any other key is refused. A leader that lost its lead may still write here: what it
    /// reports is what it serves, and it can overwrite nothing another host wrote.
    pub async fn put_own(&self, rel: &str, value: Vec<u8>) -> Result<(), FleetError> {
        self.check_own(rel)?;
        let key = self.key(rel);
        self.call(|mut c| {
            let (key, value) = (key.clone(), value.clone());
            async move { c.put(key, value, None).await }
        })
        .await?;
        Ok(())
    }

    /// Writes `value` at `rel` only if nothing is there yet; otherwise returns what is.
    pub async fn create(&self, rel: &str, value: Vec<u8>) -> Result<Option<Vec<u8>>, FleetError> {
        Ok(self.create_or_get(rel, value).await?.map(|(v, _)| v))
    }

    /// [`create`](Self::create), with the modification revision of what is there.
    pub async fn create_or_get(
        &self,
        rel: &str,
        value: Vec<u8>,
    ) -> Result<Option<(Vec<u8>, i64)>, FleetError> {
        let key = self.key(rel);
        let txn = Txn::new()
            .when([Compare::create_revision(key.clone(), CompareOp::Equal, 0)])
            .and_then([TxnOp::put(key.clone(), value, None)])
            .or_else([TxnOp::get(key, None)]);
        let resp = self
            .call(|mut c| {
                let txn = txn.clone();
                async move { c.txn(txn).await }
            })
            .await?;
        if resp.succeeded() {
            return Ok(None);
        }
        Ok(first_value(&resp.op_responses()))
    }

    /// The host that leads now, if any.
    pub async fn leader(&self) -> Result<Option<String>, FleetError> {
        Ok(self
            .get(LEADER)
            .await?
            .map(|(v, _)| String::from_utf8_lossy(&v).into_owned()))
    }

    /// Whether the deletion of the leader key at `revision` was a leader giving the lead up
    /// ([`Leadership::resign`], which writes `resigned` in the same transaction) rather than
    /// its lease ending (the leader killed, cut off or stalled).
    pub async fn resigned_at(&self, revision: i64) -> Result<bool, FleetError> {
        Ok(self
            .get(RESIGNED)
            .await?
            .is_some_and(|(_, at)| at == revision))
    }

    /// Takes the lead if no host holds it; `None` when another host leads.
    pub async fn try_lead(&self) -> Result<Option<Leadership>, FleetError> {
        self.try_lead_once().await
    }

    /// [`try_lead`](Self::try_lead) for a caller that knows no other process of this host
    /// acts for the fleet (it holds the state directory's run lock): a lead held in this
    /// host's name is then a dead process's (killed, or cut off before it could resign), and
    /// is ended at once rather than after its lease. So is a leader key on no lease, which no
    /// host writes.
    pub async fn try_lead_exclusive(&self) -> Result<Option<Leadership>, FleetError> {
        if let Some(lead) = self.try_lead_once().await? {
            return Ok(Some(lead));
        }
        let key = self.key(LEADER);
        let resp = self
            .call(|mut c| {
                let key = key.clone();
                async move { c.get(key, None).await }
            })
            .await?;
        let Some(kv) = resp.kvs().first() else {
            return self.try_lead_once().await;
        };
        // A leader key on no lease was not written by a host (every lead is on a lease that
        // ends): it would stop the fleet for good, so it is ended like a dead lead.
        let leaseless = kv.lease() == 0;
        if kv.value() != self.host.as_bytes() && !leaseless {
            return Ok(None);
        }
        let stale = kv.create_revision();
        let txn = Txn::new()
            .when([Compare::create_revision(
                key.clone(),
                CompareOp::Equal,
                stale,
            )])
            // Marked as given up: this host takes the work on at once, the others need not.
            .and_then([
                TxnOp::put(self.key(RESIGNED), self.host.clone(), None),
                TxnOp::delete(key.clone(), None),
            ]);
        self.call(|mut c| {
            let txn = txn.clone();
            async move { c.txn(txn).await }
        })
        .await?;
        if leaseless {
            tracing::warn!(
                "fleet: {} held a value on no lease (not a host's lead: written by someone \
                 else); ended",
                key
            );
        } else {
            tracing::info!("fleet: ended a lead this host ({}) left behind", self.host);
        }
        self.try_lead_once().await
    }

    async fn try_lead_once(&self) -> Result<Option<Leadership>, FleetError> {
        let mut c = self.client.clone();
        let ttl = i64::try_from(self.lease_ttl.as_secs().max(2)).unwrap_or(15);
        let asked = BootInstant::now();
        let grant = self
            .call(|mut c| async move { c.lease_grant(ttl, None).await })
            .await?;
        let lease = grant.id();
        let key = self.key(LEADER);
        let txn = Txn::new()
            .when([Compare::create_revision(key.clone(), CompareOp::Equal, 0)])
            .and_then([TxnOp::put(
                key.clone(),
                self.host.clone(),
                Some(PutOptions::new().with_lease(lease)),
            )])
            .or_else([TxnOp::get(key.clone(), None)]);
        let resp = match self
            .call(|mut c| {
                let txn = txn.clone();
                async move { c.txn(txn).await }
            })
            .await
        {
            Ok(r) => r,
            Err(e) => {
                let _ = c.lease_revoke(lease).await;
                return Err(e);
            }
        };
        if !resp.succeeded() {
            let _ = c.lease_revoke(lease).await;
            return Ok(None);
        }
        // The revision at which the key was created is the transaction's own. Without it the
        // lead could not be fenced (0 compares equal to "no leader"): given up at once.
        let Some(revision) = resp.header().map(|h| h.revision()).filter(|r| *r > 0) else {
            let _ = c.lease_revoke(lease).await;
            return Err(FleetError::Corrupt {
                key,
                detail: "the answer that created the lead carries no revision".into(),
            });
        };
        let held = Arc::new(Mutex::new(Some(
            asked.saturating_add(deadline_of(grant.ttl())),
        )));
        let renewing = Renewer::start(&self.reconnect, lease, self.lease_ttl, held.clone());
        Ok(Some(Leadership {
            fleet: self.clone(),
            lease,
            revision,
            held,
            renewing,
        }))
    }
}

/// Keys read per request by [`Fleet::list`].
const LIST_PAGE: i64 = 100;

/// The smallest key after `key`.
fn after(key: &[u8]) -> Vec<u8> {
    let mut next = key.to_vec();
    next.push(0);
    next
}

/// The end of the range of every key that starts with `prefix` (etcd's prefix rule: the last
/// byte below 0xff incremented, what follows it dropped; none: every key from `prefix` on).
fn range_end(prefix: &[u8]) -> Vec<u8> {
    let mut end = prefix.to_vec();
    while let Some(last) = end.pop() {
        if last < 0xff {
            end.push(last + 1);
            return end;
        }
    }
    vec![0]
}

/// The leader key, relative to the prefix.
const LEADER: &str = "leader";

/// Where a leader that gives the lead up writes its name, in the same transaction that
/// deletes the leader key, relative to the prefix.
pub(super) const RESIGNED: &str = "resigned";

fn first_value(ops: &[TxnOpResponse]) -> Option<(Vec<u8>, i64)> {
    ops.iter().find_map(|op| match op {
        TxnOpResponse::Get(g) => g
            .kvs()
            .first()
            .map(|kv| (kv.value().to_vec(), kv.mod_revision())),
        _ => None,
    })
}

/// Errors worth another attempt.
fn retriable(e: &etcd_client::Error) -> bool {
    match e {
        etcd_client::Error::TransportError(_) | etcd_client::Error::IoError(_) => true,
        // Unavailable: not taken (no connection, no leader). Cancelled and DeadlineExceeded:
        // the client's own time limit, mostly spent waiting for a connection; every write of
        // the fleet is either idempotent or guarded by a comparison, so a repeat of one that
        // was applied after all is harmless (it reports a conflict).
        etcd_client::Error::GRpcStatus(s) => matches!(
            s.code(),
            tonic::Code::Unavailable | tonic::Code::Cancelled | tonic::Code::DeadlineExceeded
        ),
        _ => false,
    }
}

/// The error of a failed request: refused by etcd (authentication, permissions), or etcd out
/// of reach.
fn unavailable(endpoints: &str, e: &etcd_client::Error) -> FleetError {
    if let etcd_client::Error::GRpcStatus(s) = e {
        const ACCESS: &str =
            "check [fleet] user, password_file and the user's permissions on the prefix";
        // etcd answers a failed login with InvalidArgument: its message tells it apart.
        let message = s.message().to_ascii_lowercase();
        let about = |words: &[&str]| words.iter().any(|w| message.contains(w));
        let hint = match s.code() {
            tonic::Code::Unauthenticated | tonic::Code::PermissionDenied => ACCESS,
            tonic::Code::InvalidArgument | tonic::Code::FailedPrecondition
                if about(&["authenticat", "permission", "password", "user", "token"]) =>
            {
                ACCESS
            }
            tonic::Code::InvalidArgument | tonic::Code::FailedPrecondition
                if about(&["too many", "too large", "exceed"]) =>
            {
                "etcd's limits (--max-txn-ops, --max-request-bytes) do not take this request"
            }
            tonic::Code::InvalidArgument | tonic::Code::FailedPrecondition => {
                "check etcd's version and limits, and [fleet] user and password_file"
            }
            _ => "",
        };
        if !hint.is_empty() {
            return FleetError::Refused {
                what: format!("a request ({endpoints})"),
                detail: s.message().to_owned(),
                hint,
            };
        }
    }
    FleetError::Unavailable {
        endpoints: endpoints.to_owned(),
        detail: e.to_string(),
    }
}

/// What a fenced write expects to find at its key.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Expect {
    /// Whatever is there.
    Any,
    /// Nothing.
    Absent,
    /// The value last modified at this revision.
    Revision(i64),
}

/// The answer of a fenced write.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Written {
    /// Done, at this revision.
    Done(i64),
    /// The key did not hold what was expected: its value now (`None`: absent).
    Conflict(Option<Vec<u8>>),
}

/// This host's lead of the fleet, while its lease lasts. Dropping it stops renewing the lease
/// (it then ends within the TTL); [`resign`](Self::resign) ends it at once.
pub struct Leadership {
    fleet: Fleet,
    lease: i64,
    revision: i64,
    held: Held,
    renewing: Renewer,
}

impl std::fmt::Debug for Leadership {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Leadership")
            .field("host", &self.fleet.host)
            .field("revision", &self.revision)
            .finish_non_exhaustive()
    }
}

impl Drop for Leadership {
    fn drop(&mut self) {
        // A lead dropped after it ended, without being given up (an error on its way out), is
        // lost as well.
        self.renewing.end(!self.is_held());
    }
}

impl Leadership {
    /// The revision at which this host took the lead (its fencing token).
    pub fn revision(&self) -> i64 {
        self.revision
    }

    /// Whether this host may still act as the leader: its lease was renewed recently enough.
    pub fn is_held(&self) -> bool {
        lock(&self.held).is_some_and(|deadline| BootInstant::now() < deadline)
    }

    /// `Ok` while the lead is held (see [`is_held`](Self::is_held)).
    pub fn ensure_held(&self) -> Result<(), FleetError> {
        if self.is_held() {
            return Ok(());
        }
        *lock(&self.held) = None;
        Err(FleetError::NotLeader {
            host: self.fleet.host.clone(),
            now: None,
        })
    }

    /// The check a Partner API client of this leader makes before each request (see
    /// [`lead_deadline::send_guard`]): a leader paused, suspended or cut off past its lease sends
    /// nothing, and a request not sent within the time left before the deadline is abandoned.
    pub fn send_guard(&self) -> crate::api::SendGuard {
        lead_deadline::send_guard(self.held.clone(), self.fleet.lease_ttl)
    }

    /// The time left before this host must stop acting as the leader.
    pub fn time_left(&self) -> Duration {
        lock(&self.held)
            .map(|d| d.saturating_duration_since(BootInstant::now()))
            .unwrap_or_default()
    }

    /// Writes `value` at `rel` if the key holds what `expect` says, in a transaction that also
    /// requires the leader key to be the one this host created.
    pub async fn put(
        &self,
        rel: &str,
        value: Vec<u8>,
        expect: Expect,
    ) -> Result<Written, FleetError> {
        let key = self.fleet.key(rel);
        self.write(&key, expect, TxnOp::put(key.clone(), value, None))
            .await
    }

    /// Deletes `rel` (fenced like [`put`](Self::put)).
    pub async fn delete(&self, rel: &str, expect: Expect) -> Result<Written, FleetError> {
        let key = self.fleet.key(rel);
        self.write(&key, expect, TxnOp::delete(key.clone(), None))
            .await
    }

    async fn write(&self, key: &str, expect: Expect, op: TxnOp) -> Result<Written, FleetError> {
        self.ensure_held()?;
        let leader = self.fleet.key(LEADER);
        let mut when = vec![Compare::create_revision(
            leader.clone(),
            CompareOp::Equal,
            self.revision,
        )];
        match expect {
            Expect::Any => {}
            Expect::Absent => when.push(Compare::create_revision(key, CompareOp::Equal, 0)),
            Expect::Revision(r) => when.push(Compare::mod_revision(key, CompareOp::Equal, r)),
        }
        let txn = Txn::new()
            .when(when)
            .and_then([op])
            .or_else([TxnOp::get(leader, None), TxnOp::get(key, None)]);
        self.written(txn).await
    }

    /// Writes `puts` and deletes `deletes` (keys relative to the prefix) in one transaction,
    /// fenced like [`put`](Self::put): all of it or, when the lead is no longer this host's,
    /// none of it.
    pub async fn write_all(
        &self,
        puts: Vec<(String, Vec<u8>)>,
        deletes: &[String],
    ) -> Result<i64, FleetError> {
        self.ensure_held()?;
        let leader = self.fleet.key(LEADER);
        let mut ops: Vec<TxnOp> = puts
            .into_iter()
            .map(|(rel, value)| TxnOp::put(self.fleet.key(&rel), value, None))
            .collect();
        ops.extend(
            deletes
                .iter()
                .map(|rel| TxnOp::delete(self.fleet.key(rel), None)),
        );
        let txn = Txn::new()
            .when([Compare::create_revision(
                leader.clone(),
                CompareOp::Equal,
                self.revision,
            )])
            .and_then(ops)
            .or_else([TxnOp::get(leader, None)]);
        match self.written(txn).await? {
            Written::Done(revision) => Ok(revision),
            // Only the lead is compared: a transaction refused with the lead still this
            // host's is not expected; nothing was written either way.
            Written::Conflict(_) => {
                *lock(&self.held) = None;
                Err(FleetError::NotLeader {
                    host: self.fleet.host.clone(),
                    now: None,
                })
            }
        }
    }

    /// Gives the lead up now: the leader key is deleted in a transaction that writes this
    /// host's name at `resigned` (the other hosts tell a lead given up from one whose lease
    /// ended, [`Fleet::resigned_at`]), then the lease is revoked.
    pub async fn resign(mut self) {
        // A lead that ended before it was given up (its deadline passed while this process
        // was stopped, another host leads) is lost, whether or not the renewal saw it first.
        let ended = !self.is_held();
        *lock(&self.held) = None;
        self.renewing.end(ended);
        let leader = self.fleet.key(LEADER);
        let txn = Txn::new()
            .when([Compare::create_revision(
                leader.clone(),
                CompareOp::Equal,
                self.revision,
            )])
            .and_then([
                TxnOp::put(self.fleet.key(RESIGNED), self.fleet.host.clone(), None),
                TxnOp::delete(leader, None),
            ]);
        if let Err(e) = self
            .fleet
            .call(|mut c| {
                let txn = txn.clone();
                async move { c.txn(txn).await }
            })
            .await
        {
            tracing::debug!("fleet: the lead could not be given up in a transaction ({e})");
        }
        let lease = self.lease;
        if let Err(e) = self
            .fleet
            .call(|mut c| async move { c.lease_revoke(lease).await })
            .await
        {
            tracing::warn!("fleet: the lead could not be given up ({e}); it ends with its lease");
        }
    }
}
