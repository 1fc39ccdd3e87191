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
//! The room, file by file, bottom up (each file's own header says more):
//!
//! | file | what it does |
//! |---|---|
//! | `lead_deadline` | the lead's local deadline: the guard of the leader's Partner API requests |
//! | `coord` | etcd: connection, lease, fenced transactions, watches (`coord/changed_since`: the keys written since a revision) |
//! | `key`, `envelope` | the fleet key; every value sealed for its purpose, key, certificate and version |
//! | `schema` | what lives under the prefix (the protocol) |
//! | `versions` | the versions this host accepted (`state_dir/fleet-versions.json`) |
//! | `link` | [`FleetLink`]: connect, and the key and spec agreement every host checks |
//! | `manifest` | the fleet's manifest, and the floor of a host that has accepted nothing yet |
//! | `chains` | the issuer certificates of the fleet's chains, stored once per fleet by SHA-256 and read once per synchronisation |
//! | `open_shared` | the shared record and the current certificate opened and checked |
//! | `proof`, `drift` | what a host proves it serves after an install; proved again on a schedule |
//! | `rollout`, `rollback`, `decision` | canaries and waves; a host's install whose proof failed rolled back; a person's resume or abort |
//! | `follower` | every host: install what the fleet publishes (`follower/current`: the current certificates opened, `slices`: a slice at a time, `install_or_keep`, `validation_files`, `retired`), report under `hosts/HOST/` (`hosts`) |
//! | `leader` | the host that leads, a round in steps (`leader/rounds`): whether the fleet has work for a leader (`wanted`, `no_lead`: no lead taken when none), import (`import`, `imports`: written together, `records_now`), run the engine, share and publish (`export`, `outcomes`, `bookkeeping`: the lead announced and attempts recorded, `acme`, `repaired`; `held`: with a rollout, its own install proved before it is committed and rolled back when the proof fails) |
//! | `repair` | a value the leader refuses written back from its own accepted copy |
//! | `unplaced_intent` | an order intent never placed, noted and withdrawn |
//! | `lead_age`, `takeover`, `leaderless_gap` | how long the lead has been held; what a lead that ended with its lease left open; work open at the CA while no host leads |
//! | `leads` | this host's leads across runs: those lost, the last one, the CRL checks that fall to it |
//! | `host_behind` | this host's certificates older than the fleet's current ones |
//! | `audit_seen`, `audit_watch` | the hosts' audit logs seen from here; the daemon's look at them |
//! | `watch` | the daemon follows the fleet's changes between runs (`watch/waiting_run`: a run waiting for the CA that stalled) |
//! | `acme` | the fleet's ACME account, and the hosts' word that they serve an ACME validation file |
//! | `status`, `rotate`, `retire`, `forget` | `fleet status`; `fleet rotate-key`; `cert-agent retire` for the fleet (`follower/retired.rs` retires it on every other host); `fleet forget-host` |
//!
//! It calls the engine; the engine sees the leader only through [`crate::engine::Lead`].

mod acme;
mod audit_seen;
mod audit_watch;
mod chains;
mod compact;
pub(crate) mod coord;
mod decision;
mod drift;
mod envelope;
mod follower;
mod forget;
#[doc(hidden)]
pub mod fuzzing;
mod host_behind;
pub(crate) mod key;
mod lead_age;
mod lead_deadline;
mod leader;
mod leaderless_gap;
mod leads;
mod link;
mod manifest;
mod open_shared;
mod options;
mod proof;
mod repair;
mod retire;
mod rollback;
mod rollout;
mod rotate;
mod schema;
mod status;
mod takeover;
mod unplaced_intent;
mod versions;
mod watch;

pub(crate) use acme::fleet_account;
pub(crate) use audit_seen::witness as witness_audit;
pub(crate) use audit_watch::{audit_alerts, look_at_audits};
pub use chains::{open_value, seal_value};
pub use coord::{Expect, Fleet, FleetError, FleetWatch, LeadEvent, Leadership, Written};
pub(crate) use decision::{Verdict, decide};
pub(crate) use forget::{Part as ForgottenPart, forget_host};
pub(crate) use host_behind::behind;
pub(crate) use lead_age::{lead_alert, lead_stuck};
pub(crate) use leader::run;
pub(crate) use leaderless_gap::{leaderless_line, mark_unled};
pub(crate) use leads::lost as leads_lost;
pub use link::connect;
pub(crate) use link::previous_key_warning;
pub use options::FleetOptions;
pub(crate) use retire::{LeadElsewhere, Retiring};
pub(crate) use rotate::rotate_key;
pub(crate) use status::{CertStatus, FleetStatus, status};
pub(crate) use takeover::Takeover;
pub use takeover::open_work;
pub(crate) use watch::follow_changes;
