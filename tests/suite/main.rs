//! The integration suite: one test binary (one link, one process) for every test that drives
//! the agent's library or binary against real parts — the sandbox over HTTPS, real nginx and
//! apache2, real processes and signals. Run one area with `cargo test --test suite <module>::`.
//!
//! Two binaries stay apart: `tests/api_logs.rs` (a scoped log subscriber must not share
//! tracing's per-call-site cache with other tests) and `tests/packaging.rs` (built packages,
//! run on its own by `scripts/test-all`).

/// Helpers shared by the modules below: sandbox setup, agent environments, web servers, faults.
mod support;

// --- Issuers and the bundle reader (library level) ---
/// The ACME issuer against Debian's Pebble: account with EAB, http-01, finalize, the chain.
mod acme_chain;
mod acme_pebble;
mod acme_retire;
/// The API client against the sandbox: error shapes, re-signin, retries, pagination, secrets.
mod api_client;
/// The API client with a guard that gives each request a time limit (a fleet leader's lease).
mod api_deadline;
/// The bundle reader against good and hostile `download_bundle` archives.
mod bundle_hostile;
/// Configuration files on disk: errors naming file and line, secret warnings, a live client.
mod config;

// --- Commands through the binary ---
/// `[agent] notify_url`: each change of state posted once.
mod announce;
/// `cert-agent check`: the monitoring check against a real nginx.
mod check;
/// Account and certificate commands: tables, `--json`, exit codes, refusals, no credentials.
mod cli_account;
/// `cert-agent run`: configuration reload, SIGTERM/SIGINT with a run in progress.
mod daemon;
/// The README's first command runs as printed.
mod demo;
/// Certificates of an ACME CA through the binary: Pebble, nginx and apache, crash resume.
mod e2e_acme;
/// `cert-agent forecast` and the balance in `check`: exact figures against sandbox accounts.
mod forecast;
/// docs/getting-started.md's walk with the sandbox runs as printed.
mod getting_started_docs;
/// `cert-agent import certbot`: certbot's own directory (made by certbot against Pebble) taken
/// over without an order and renewed through nginx; hostile certbot directories.
mod import_certbot;
/// `[agent] metrics_file` and `metrics_listen`, checked with promtool and a real Prometheus.
mod metrics;
/// Onboarding: adoption without a new order, `include` fragments, `discover`, placeholders.
mod onboarding;
/// `cert-agent retire` (the cancellation window, what is removed) and the audit log.
mod retire_audit;
mod retire_files;
/// Revocation: the sandbox's CRLs read, a revoked certificate replaced, bad CRLs refused.
mod revocation;
/// `cert-agent serve`: the standalone DCV server as a process of its own.
mod serve;
/// Validation foresight across the SC-081v3 dates (2027, 2029) with EMAIL and HTTP orders.
mod validation_reuse;

// --- Domain control validation ---
/// The standalone server, the self-check and DNS hook programs over the network.
mod dcv_standalone;

// --- Fleet mode (a real three-member etcd cluster) ---
/// Leadership, fenced writes, takeover after a leader stops, quorum loss and recovery.
mod fleet;
/// Three hosts with nginx and Pebble: one ACME account and order, every host serves the
/// challenge then the certificate; a takeover resumes the order; a forged account refused.
mod fleet_acme;
/// A host's audit log cut short or deleted shows in another host's `fleet status`.
mod fleet_audit;
/// The validator behind the strictest balancer: a fleet validates once every host has the file.
mod fleet_balancer;
/// A follower installs a catch-up and a leader's burst of certificates with one reload each.
mod fleet_batch;
mod fleet_catchup;
/// The current value as a leaf and intermediates stored once per fleet; the archive format
/// still read and rewritten in place; a missing, forged or older intermediate refused.
mod fleet_chain;
/// A fleet leader's quiet runs use the due summary; every change between two runs is seen.
mod fleet_crl;
/// A fleet host's daemon: its synchronisations are not runs; their notifications hold no lock.
mod fleet_daemon;
/// docs/fleet.md run as printed: etcd with TLS and auth, three hosts with nginx, the sandbox.
mod fleet_docs;
/// A file replaced by hand on a follower: drift on fleet status, the metric and check.
mod fleet_drift;
mod fleet_due;
/// Three hosts with nginx: one order, every host serves it, reissue, quorum loss.
mod fleet_e2e;
/// Failures in fleet mode: the fleet's and each host's, on every surface of every host.
mod fleet_failures;
/// A host that has accepted nothing yet takes its floor from the fleet's sealed manifest.
mod fleet_floor;
/// The daemon's follow loop: a failing synchronisation backs off.
mod fleet_follow;
mod fleet_forget;
/// An idle follower reads nothing per certificate until the fleet changes, then installs.
mod fleet_idle;
/// A run leads only when the fleet has work for a leader; a lead lost is counted.
mod fleet_join;
/// A lead held longer than `lead_alert_secs`: `LEAD STUCK` in `fleet status`, a `check` warning.
mod fleet_lead;
/// A leader paused past its lease: no API call and no write after it resumes.
mod fleet_pause;
/// Every host proves what it serves after a fleet install: a handshake per name, sealed under
/// its own key; a vhost left on the old certificate is named; forged proofs refused.
mod fleet_proof;
/// A leader publishes a mass reissue at once, each certificate fenced; a crash mid-way loses none.
mod fleet_publish;
/// A host reads again only the fleet's values that changed; forgeries and replays refused.
mod fleet_reads;
/// The leader writes back a value it refuses from the copy it accepted; nothing ordered.
mod fleet_repair;
/// `retire` in fleet mode: the tombstone, every host archives, forged tombstones refused.
mod fleet_retire;
/// Canary first, then waves, each after the proofs before it; a canary's failed proof halts
/// the rest.
mod fleet_rollout;
/// The fleet key rotated while both hosts serve: no run fails, no order, the old key refused.
mod fleet_rotate;
/// A waiting run holds the fleet's lead only for its rounds: another host's run leads meanwhile.
mod fleet_rounds;
/// The leader's daemon killed while validation is pending: another daemon takes over within
/// the lease time, no second order or reissue.
mod fleet_takeover;
/// The etcd writer without the fleet key: every forged, moved or replayed value refused.
mod fleet_trust;
/// A follower whose watch fell behind reads etcd's answer of over 4 MiB in parts and installs.
mod fleet_watch;
mod fleet_waves;

// --- End to end: order, validate, install, reload ---
/// Shared `combined_path` flow for the nginx and apache modules.
mod combined_flow;
/// With a real apache2.
mod e2e_apache;
/// Billing safety: lost answers, crashes, refusals, price limits, overlapping runs.
mod e2e_billing;
/// DNS validation with a `dns_hook` writing the sandbox's zone.
mod e2e_dns;
/// Every hostile bundle the sandbox can send: refused, nothing installed.
mod e2e_hostile;
/// With a real nginx, validation not finished within a run, runs killed.
mod e2e_nginx;
/// Rollback when the config test or the served serial check fails.
mod e2e_rollback;
/// Standalone mode: the agent's own DCV server, no web server.
mod e2e_standalone;
/// The install layer against real nginx and apache2.
mod install_e2e;
/// CAA and DNSSEC checked before a billed order, against nsd and a validating unbound.
mod preflight;

// --- Faults ---
/// API faults: 5xx bursts, stalls, malformed JSON, token rotation, TLS problems, redirects.
mod faults_api;
/// A crash at every named failpoint, then a clean recovery.
mod faults_crash;
/// DCV under attack or interruption.
mod faults_dcv;
/// Files and deployment: full disk, permissions, hooks.
mod faults_files;
/// Garbage under status 200: retried on reads, reconciled on the order.
mod faults_garbage;
/// Hostile input beyond hostile bundles.
mod faults_input;
/// Secret hygiene: canary credentials never appear anywhere.
mod faults_secrets;

// --- Renewal engine ---
/// `agent.concurrency`: certificates worked on at once.
mod renew_concurrency;
/// The due summary: a quiet run reads one file, and every change is acted on.
mod renew_due;
/// 47-day lifetimes over a simulated span of time.
mod renew_lifetimes;
/// Polling discipline with many pending certificates.
mod renew_polling;
/// Renewal scenarios through the binary: free reissues, replacements, renewals.
mod renew_scenarios;
/// Time between the CA and this host: held certificates, the sandbox's fast clock, backoff.
mod renew_time;
/// Certificates dated near the end of year 9999: no command panics.
mod renew_year_9999;

// --- The code's shape ---
/// src/lib.rs makes public only the binary's entry and `testing`, which only re-exports.
mod surface;
