//! The one lock: everything the transport shares between connections, the validator and the
//! control surface (state, authority, clock, faults, call log, DCV ports), plus persistence of
//! `state.json`.

use std::panic::{AssertUnwindSafe, catch_unwind};
use std::path::{Path, PathBuf};
use std::sync::{Mutex, MutexGuard};

use serde::{Deserialize, Serialize};
use time::OffsetDateTime;

use crate::ca::Authority;
use crate::clock::Clock;
use crate::faults::Faults;
use crate::state::State;

/// One partner-API call as the transport saw it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CallRecord {
    /// Virtual time the call was answered.
    #[serde(with = "crate::clock::serde_rfc3339")]
    pub time: OffsetDateTime,
    pub method: String,
    /// Path without the query string.
    pub path: String,
    /// The raw query string exactly as received (without `?`), empty when there was none.
    pub query: String,
    /// Status answered (for a dropped connection: the status the request would have had).
    pub status: u16,
    /// Login of the authenticated account, when there was one.
    pub account: Option<String>,
    /// True when the call placed a billed order.
    pub billed: bool,
    /// Name of the injected fault that applied, if any.
    pub fault: Option<String>,
    /// False when no answer reached the client (connection dropped).
    pub delivered: bool,
}

/// Everything behind the lock.
pub(crate) struct World {
    pub state: State,
    pub ca: Authority,
    pub clock: Clock,
    pub faults: Faults,
    pub calls: Vec<CallRecord>,
    /// Where (and how) the validator fetches DCV files.
    pub dcv: crate::balancer::DcvPorts,
    /// Revocations and the CRLs built from them (in memory only).
    pub crls: crate::crl::Crls,
}

/// Most call records kept; beyond it the oldest half is dropped (long benchmarks).
pub(crate) const MAX_CALLS: usize = 200_000;

impl World {
    /// Appends to the call log, keeping it bounded by [`MAX_CALLS`].
    pub(crate) fn log_call(&mut self, record: CallRecord) {
        if self.calls.len() >= MAX_CALLS {
            self.calls.drain(..MAX_CALLS / 2);
        }
        self.calls.push(record);
    }

    /// The virtual time now. Also tells the state how far the time scale has run ahead of
    /// real time: certificates it issues begin that much earlier, so that a client on the real
    /// clock can use them at once.
    pub(crate) fn now(&mut self) -> OffsetDateTime {
        let now = self.clock.now();
        self.state
            .set_scale_drift(self.clock.scale_drift().whole_seconds());
        now
    }

    /// `state.tick(now)`, shielding the caller from a panic in the state.
    pub(crate) fn tick(&mut self, now: OffsetDateTime) {
        let (state, ca) = (&mut self.state, &self.ca);
        if let Err(e) = guarded(|| state.tick(now, ca)) {
            tracing::error!("state tick failed: {e}");
        }
    }
}

/// The shared part of a running sandbox.
pub(crate) struct Shared {
    world: Mutex<World>,
    /// `DIR/state.json` when persistence is on; the mutex orders writers.
    persist: Option<Mutex<PersistFile>>,
    /// Partner-API requests being answered now, and the most at once since the last reset.
    in_flight: std::sync::atomic::AtomicUsize,
    peak_in_flight: std::sync::atomic::AtomicUsize,
}

/// One partner-API request being answered; counted in [`Shared`] until dropped.
pub(crate) struct InFlight<'a>(&'a Shared);

impl Drop for InFlight<'_> {
    fn drop(&mut self) {
        self.0
            .in_flight
            .fetch_sub(1, std::sync::atomic::Ordering::SeqCst);
    }
}

struct PersistFile {
    path: PathBuf,
    /// Serialised state last written, to skip writes that change nothing.
    last: Vec<u8>,
}

impl Shared {
    pub(crate) fn new(world: World, persist: Option<PathBuf>) -> Self {
        Self {
            in_flight: std::sync::atomic::AtomicUsize::new(0),
            peak_in_flight: std::sync::atomic::AtomicUsize::new(0),
            world: Mutex::new(world),
            persist: persist.map(|path| {
                Mutex::new(PersistFile {
                    path,
                    last: Vec::new(),
                })
            }),
        }
    }

    /// Counts a partner-API request as being answered until the guard is dropped.
    pub(crate) fn begin_call(&self) -> InFlight<'_> {
        use std::sync::atomic::Ordering;
        let now = self.in_flight.fetch_add(1, Ordering::SeqCst) + 1;
        self.peak_in_flight.fetch_max(now, Ordering::SeqCst);
        InFlight(self)
    }

    /// The most partner-API requests answered at once since the last call (which resets it).
    pub(crate) fn take_peak_in_flight(&self) -> usize {
        use std::sync::atomic::Ordering;
        self.peak_in_flight
            .swap(self.in_flight.load(Ordering::SeqCst), Ordering::SeqCst)
    }

    /// The one lock. A panic while it was held (a bug in the state) does not make the sandbox
    /// unusable: the lock is taken anyway.
    pub(crate) fn lock(&self) -> MutexGuard<'_, World> {
        self.world.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Writes `state.json` atomically when persistence is on and the state changed since the
    /// last write (or always with `force`, e.g. after the clock moved). Called after mutating
    /// calls and periodically; never while holding the world lock.
    pub(crate) fn persist(&self, force: bool) {
        let Some(file) = &self.persist else { return };
        let mut file = file.lock().unwrap_or_else(|e| e.into_inner());
        let (state, now) = {
            let world = self.lock();
            let now = world.clock.now();
            match guarded(|| serde_json::to_vec(&world.state)) {
                Ok(Ok(b)) => (b, now),
                Ok(Err(e)) => {
                    tracing::error!("could not serialise the state: {e}");
                    return;
                }
                Err(e) => {
                    tracing::error!("could not serialise the state: {e}");
                    return;
                }
            }
        };
        if !force && state == file.last {
            return;
        }
        let mut out = format!(
            "{{\"format\":{SAVED_FORMAT},\"now\":\"{}\",\"state\":",
            crate::clock::rfc3339(now)
        )
        .into_bytes();
        out.extend_from_slice(&state);
        out.extend_from_slice(b"}\n");
        match write_atomic(&file.path, &out) {
            Ok(()) => file.last = state,
            Err(e) => tracing::error!("could not write '{}': {e}", file.path.display()),
        }
    }
}

const SAVED_FORMAT: u32 = 1;

#[derive(Deserialize)]
struct Saved {
    format: u32,
    #[serde(with = "crate::clock::serde_rfc3339")]
    now: OffsetDateTime,
    state: State,
}

/// Reads a `state.json` written by [`Shared::persist`]: the state and the virtual time it was
/// saved at.
pub(crate) fn load_saved(path: &Path) -> Result<(State, OffsetDateTime), String> {
    let bytes = std::fs::read(path).map_err(|e| format!("could not read: {e}"))?;
    let saved: Saved =
        serde_json::from_slice(&bytes).map_err(|e| format!("not a saved state: {e}"))?;
    if saved.format != SAVED_FORMAT {
        return Err(format!(
            "format {} is not the supported {SAVED_FORMAT}",
            saved.format
        ));
    }
    Ok((saved.state, saved.now))
}

/// Temporary file beside the target, fsync, rename.
pub(crate) fn write_atomic(path: &Path, bytes: &[u8]) -> std::io::Result<()> {
    use std::io::Write;
    let tmp = path.with_extension("json.tmp");
    {
        let mut f = std::fs::File::create(&tmp)?;
        f.write_all(bytes)?;
        f.sync_all()?;
    }
    std::fs::rename(&tmp, path)
}

/// Runs `f`, turning a panic into an error message (the state is another team's code; a bug
/// there must answer 500, not kill a connection task or the validator).
pub(crate) fn guarded<T>(f: impl FnOnce() -> T) -> Result<T, String> {
    catch_unwind(AssertUnwindSafe(f)).map_err(|p| {
        p.downcast_ref::<&str>()
            .map(|s| (*s).to_owned())
            .or_else(|| p.downcast_ref::<String>().cloned())
            .unwrap_or_else(|| "panic".to_owned())
    })
}
