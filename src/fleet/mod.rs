//! Fleet mode: the hosts of a web farm act as one agent, coordinated through etcd v3. One
//! host leads (an etcd lease) and alone talks to the Partner API; its writes are fenced by the
//! revision of its lead; private keys travel sealed with the fleet key.
//!
//! A run on a fleet host first installs what the fleet has ([`follower`]), then tries to take
//! the lead ([`leader`]). Only the leader imports the shared records into its state
//! directory, runs the engine (the only host that talks to the Partner API), shares every
//! record change that precedes a billed call before making it (fenced), publishes the
//! validation files and, after installing, the new certificate. The others install it, each
//! through its own web server's config test, reload, verification and rollback. The daemon
//! follows the fleet's changes between runs ([`watch`]).
//!
//! The room, bottom up: `deadline` (the lead's local deadline, the guard of the leader's
//! Partner API requests), `coord` (etcd: connection, lease, fenced transactions, watches),
//! `key` (the fleet key), `envelope` (every value sealed for its purpose, key, certificate
//! and version), `schema` (what lives under the prefix), `versions` (the versions this host
//! accepted), `link` (connect, key and spec agreement), `floor` (the fleet's manifest, and
//! the floor of a host that has accepted nothing yet), `shared` (the shared record and the
//! current certificate opened and checked), `proof` (what a host proves it serves after an
//! install), `drift` (proved again on a schedule: another serial served later), `rollout`
//! (canaries and waves: whether a host installs a new certificate yet),
//! `rollback` (a host's install whose proof failed, rolled back before it is committed),
//! `decision` (a person's resume or abort of a rollout),
//! `follower`, `lead_age` (how long the lead has been held, as this host saw it), `leader`
//! (`repair`: a value the leader refuses written back from its own accepted copy), `status`,
//! `takeover` (what a lead that ended with its lease left open), `gap` (work left open at the
//! CA while no host leads), `behind` (this host's certificates older than the fleet's current
//! ones), `audit_seen` (the hosts' audit logs seen from here; `audit_watch`: the daemon's look
//! at them), `watch`,
//! `acme` (the fleet's ACME account, and the hosts' word that they serve an ACME validation
//! file), `rotate` (every value sealed again under a new fleet key), `unplaced` (an order intent
//! never placed, withdrawn), `retire` (`cert-agent retire` for the fleet: its tombstone;
//! `follower/retired.rs` retires it on every other host). It calls the engine; the engine
//! sees the leader only through [`crate::engine::Lead`].

mod acme;
mod audit_seen;
mod audit_watch;
mod behind;
pub(crate) mod coord;
mod deadline;
mod decision;
mod drift;
mod envelope;
mod floor;
mod follower;
#[doc(hidden)]
pub mod fuzzing;
mod gap;
pub(crate) mod key;
mod lead_age;
mod leader;
mod link;
mod options;
mod proof;
mod repair;
mod retire;
mod rollback;
mod rollout;
mod rotate;
mod schema;
mod shared;
mod status;
mod takeover;
mod unplaced;
mod versions;
mod watch;

pub(crate) use acme::fleet_account;
pub(crate) use audit_seen::witness as witness_audit;
pub(crate) use audit_watch::{audit_alerts, look_at_audits};
pub(crate) use behind::behind;
pub use coord::{Expect, Fleet, FleetError, FleetWatch, LeadEvent, Leadership, Written};
pub(crate) use decision::{Verdict, decide};
pub(crate) use gap::{leaderless_line, mark_unled};
pub(crate) use lead_age::{lead_alert, lead_stuck};
pub(crate) use leader::run;
pub use link::connect;
pub(crate) use link::previous_key_warning;
pub use options::FleetOptions;
pub(crate) use retire::{LeadElsewhere, Retiring};
pub(crate) use rotate::rotate_key;
pub(crate) use status::{CertStatus, FleetStatus, status};
pub(crate) use takeover::Takeover;
pub use takeover::open_work;
pub(crate) use watch::follow_changes;
