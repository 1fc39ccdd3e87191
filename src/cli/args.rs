//! The command-line grammar of `cert-agent` (clap derive). Help texts here are the user's first
//! documentation: they say what a command does, what it costs and what it needs.

use std::path::PathBuf;

use clap::{Args, Parser, Subcommand, ValueEnum};

const AFTER_HELP: &str = "\
Configuration: --config PATH, or $CERT_AGENT_CONFIG, or /etc/cert-agent/config.toml.
Exit codes: 0 done, 1 error, 2 usage or configuration error, 3 some certificates failed,
75 work is pending at the CA (the next run continues).
Documentation: docs/commands.md and docs/configuration.md.";

/// Certificate agent for a reseller's Partner API: orders, validates, installs and renews
/// certificates for nginx and apache.
#[derive(Debug, Parser)]
#[command(name = "cert-agent", version, about, long_about = None, after_help = AFTER_HELP)]
pub struct Cli {
    /// Configuration file.
    #[arg(
        long,
        global = true,
        value_name = "PATH",
        env = "CERT_AGENT_CONFIG",
        default_value = "/etc/cert-agent/config.toml"
    )]
    pub config: PathBuf,

    /// More log output on stderr (-v: debug, -vv: trace). Secrets are never logged.
    #[arg(short, long, global = true, action = clap::ArgAction::Count)]
    pub verbose: u8,

    /// Only errors on stderr.
    #[arg(short, long, global = true, conflicts_with = "verbose")]
    pub quiet: bool,

    /// Machine-readable JSON on stdout instead of tables.
    #[arg(long, global = true)]
    pub json: bool,

    /// For the commands that run the renewal engine (renew, issue, reissue, install, adopt
    /// --reissue) and retire: while another cert-agent process holds the state directory's lock (the
    /// daemon synchronising with its fleet, or another run), wait up to SECS for it, saying on
    /// stderr which process holds it; 0 fails at once. When the wait ends the command exits
    /// 75 naming the holder.
    #[arg(long, global = true, value_name = "SECS", default_value_t = 30)]
    pub lock_wait: u64,

    #[command(subcommand)]
    pub command: Command,
}

#[derive(Debug, Subcommand)]
pub enum Command {
    /// Bring every configured certificate up to date: continue pending orders (validation,
    /// issuance, download, install) and place first orders where `allow_orders = true`.
    ///
    /// Safe to run often (systemd timer, cron): when nothing is due it makes no API call.
    /// Exits 75 when work is pending at the CA; the next run carries on where this one stopped.
    Renew(RenewArgs),

    /// Order a configured certificate that has no order yet (billed), then validate, install
    /// and reload as `renew` does.
    ///
    /// Needs --yes (or `allow_orders = true`) and respects `max_order_price`. The order is
    /// placed at most once: an order whose answer was lost is found again in the certificate
    /// list on the next run instead of being repeated.
    Issue(IssueArgs),

    /// List the products you can order, with your prices per period.
    ///
    /// The ID is what `product_id` in a [[certificate]] section refers to.
    Products {
        /// Show recommended end-user prices in EUR instead of your partner prices.
        #[arg(long)]
        eu_prices: bool,
    },

    /// Show the account balance (balance, reserved, common, prepayment, available).
    Balance,

    /// The renewals that fall due in the next days, what they cost and whether the balance
    /// covers them.
    ///
    /// Per configured certificate, from local state and the renewal rules: when it falls due,
    /// whether that is a free reissue (inside the paid subscription) or a billed order (the
    /// subscription ends, or no reissue can extend coverage, or there is no order yet), and
    /// the catalogue price of each billed order; then the total and the account's available
    /// balance. Asks the API for the balance, and for the products only when a billed order
    /// falls due. `check` warns when the balance does not cover the next 30 days.
    Forecast {
        /// How many days ahead.
        #[arg(long, value_name = "N", default_value_t = 30,
              value_parser = clap::value_parser!(u32).range(1..=1830))]
        days: u32,
    },

    /// The DNS checks made before a billed order, on demand: CAA and DNSSEC for every name.
    ///
    /// For each name the relevant CAA records (the closest found climbing the tree, CNAMEs
    /// followed) must let the product's CA issue, and the answers must validate (DNSSEC):
    /// a bogus zone or a CAA record that forbids the CA is FAILED (exit 3), an unsigned zone
    /// a WARNING. Asks the resolver of [preflight] (default: the system's) and the product
    /// list; nothing is ordered. See docs/preflight.md.
    Preflight {
        /// Certificates to check (default: all configured).
        names: Vec<String>,
    },

    /// List the certificates of the account, newest first.
    ///
    /// Without --page, --scope or --q the API returns every certificate in one answer.
    List(ListArgs),

    /// Show the details of one certificate: state, domains, validity, subscription, DCV.
    Show {
        /// Certificate ID (internal number).
        id: u64,
    },

    /// Without ID: every configured certificate — state, serial, expiry, subscription end,
    /// what its CRL said (CRL: good, REVOKED date reason, UNUSABLE, not checked), next action
    /// and when, last error, the next renewal needing a fresh validation — and the balance
    /// against the next 30 days' billed renewals as last read (money.json), from local state
    /// only (no API call). With ID: the
    /// state of that certificate as the status call reports it (the API asks for at most one
    /// status call every 5 minutes per certificate).
    Status {
        /// Certificate ID (internal number).
        id: Option<u64>,
        /// Without ID: also shake hands with each certificate's verify_address and show
        /// whether it serves the installed certificate (column SERVED).
        #[arg(long, conflicts_with = "id")]
        served: bool,
    },

    /// Monitoring check for Nagios, Icinga, Zabbix, Checkmk or Sensu: one status line with
    /// performance data, then a line per certificate that is not OK.
    ///
    /// Exits 0 OK, 1 WARNING, 2 CRITICAL, 3 UNKNOWN. Reads local state, the installed files and
    /// their CRLs (kept in the state directory until their nextUpdate); asks the API only when
    /// a billed order falls due within 30 days (the balance and the prices; not with
    /// --no-balance or --name). CRITICAL: not installed, fewer than --critical days left, the
    /// installed file missing or replaced, the certificate revoked, with --served a verify
    /// address serving another certificate than the one installed, the last 3 or more runs
    /// failed, the available balance short of the orders due within 7 days. WARNING: fewer than
    /// --warning days left, a failed last run, an order outcome unknown, validation pending for
    /// more than a day, the subscription ending without a prepared renewal order, a CRL that
    /// could not be used (revocation unknown), the balance short of the orders due within 30
    /// days (or not readable), a renewal within [validation] warning_days whose fresh domain
    /// validation needs a person (EMAIL, DNS without a hook). In fleet mode the fleet's failed
    /// attempts (the leader's) count on every host as a host's own.
    Check(CheckArgs),

    /// Reissue a configured certificate now (free): a new key and CSR, validation, install.
    ///
    /// Not possible in the last 30 days of the subscription; family C always gets a new key.
    Reissue {
        /// The [[certificate]] to reissue.
        name: String,
        /// Keep the current key (not for family C).
        #[arg(long)]
        reuse_key: bool,
        /// Seconds to wait for validation and issuance before leaving the rest to the next run.
        #[arg(long, value_name = "SECS", default_value_t = 600)]
        wait: u64,
    },

    /// Download the issued certificate of a configured certificate again and install it
    /// (config test, reload, verification, rollback as in `renew`).
    Install {
        /// The [[certificate]] to install.
        name: String,
    },

    /// Manage an order placed elsewhere (the web site, another tool) as a configured
    /// certificate: its key is not on this host, so it is reissued with a local key on its
    /// next due date, or at once with --reissue.
    Adopt {
        /// The [[certificate]] that will own the order.
        name: String,
        /// The order's certificate ID (internal number).
        #[arg(long, value_name = "ID")]
        certificate_id: u64,
        /// Reissue with a local key now instead of on the due date.
        #[arg(long)]
        reissue: bool,
    },

    /// Stop managing a certificate: its state record is archived under `state_dir/retired/`
    /// (later runs leave NAME alone), its validation files and placeholder are removed, and
    /// with --cancel its order is cancelled when the API still allows it.
    ///
    /// Cancellation: possible for an order not yet issued, and for an issued one within 28
    /// days of its issuance; outside that window no call is made. The API's answer is printed
    /// as it came. With --remove-files the installed certificate and key are deleted too —
    /// refused while the web server still names them (remove the site first), unless
    /// --force. The configuration is not edited: the entry to remove is named, except a file
    /// written by `discover --write`, which is removed. Asks before acting on a terminal
    /// (--yes to skip); without a terminal --yes is required.
    ///
    /// Fleet mode: retires NAME for every host. This host takes the fleet's lead first (exit
    /// 75, naming the leader, while another host leads: nothing is written; run it again),
    /// cancels once as above, writes NAME's sealed tombstone under the prefix and deletes its
    /// shared record, current certificate and validation file in one fenced transaction. Every
    /// other host archives NAME at its next synchronisation, deletes its installed files only
    /// with --remove-files and never one its web server still names. To bring NAME back:
    /// delete PREFIX/certs/NAME/retired (etcdctl del), then move each host's archive aside
    /// (docs/fleet.md).
    Retire(RetireArgs),

    /// Show the audit log (`state_dir/audit.log`): every action with effect, one line each,
    /// chained by hashes; --verify checks the chain.
    ///
    /// --verify exits 1 naming the first broken line (edited, removed, reordered or
    /// truncated). The chain shows edits by someone who did not rewrite every later line; it
    /// proves nothing against root, who can rewrite the whole file (docs/security.md).
    Audit(AuditArgs),

    /// List the server software entries for a product (the ssl_server_software_id values).
    Software {
        /// Product ID from `cert-agent products`.
        product_id: u64,
    },

    /// List the countries the API knows, with their numeric IDs and codes.
    Countries,

    /// Domain control validation: addresses, state, change of method, resend.
    #[command(subcommand)]
    Dcv(DcvCommand),

    /// Request the cancellation of a certificate (staff-processed, not instant).
    ///
    /// Allowed for any certificate not yet issued, and for an issued one within 28 days of
    /// its issuance. Needs --yes.
    Cancel {
        /// Certificate ID (internal number).
        id: u64,
        /// Confirm the cancellation request.
        #[arg(long)]
        yes: bool,
    },

    /// Prepare the renewal order of a certificate and store its token.
    ///
    /// Nothing is ordered or billed until the order is completed on the order site. The token
    /// is a credential (the link signs the visitor in as your account): it is stored with mode
    /// 0600 in the state directory and printed only with --show-token.
    Prolong {
        /// Certificate ID (internal number).
        id: u64,
        /// Print the token and the completion link.
        #[arg(long)]
        show_token: bool,
    },

    /// Download the CA archive (or, with --bundle, the per-server bundle) of an issued
    /// certificate as a ZIP file.
    Download {
        /// Certificate ID (internal number).
        id: u64,
        /// The per-server bundle (nginx/, apache/, iis/, pem/, exchange/) instead of the CA archive.
        #[arg(long)]
        bundle: bool,
        /// Where to write the ZIP (default: the name the API gives, in the current directory).
        /// `-` writes to stdout.
        #[arg(short, long, value_name = "FILE")]
        output: Option<PathBuf>,
    },

    /// Write a self-signed placeholder certificate and key at NAME's install paths, so that
    /// the web server can load the site before the first real certificate replaces it.
    ///
    /// Only where none of NAME's files exist: nothing real is ever replaced. `status` shows the
    /// placeholder; `issue` (and `renew` with allow_orders) writes one by itself for every
    /// configured certificate whose files are all missing. No API call, nothing billed.
    Placeholder {
        /// The [[certificate]].
        name: String,
    },

    /// Print the nginx or Apache lines NAME needs: the validation location on port 80 and the
    /// TLS server with its certificate and key paths.
    Snippet {
        /// The [[certificate]].
        name: String,
    },

    /// Find the sites the web server already serves and propose a [[certificate]] for each,
    /// keeping the site's existing certificate, key and document root paths.
    ///
    /// Reads what the server itself reports: `nginx -T`, or `apachectl -S` and the files it
    /// names (or a saved copy with --from). Virtual hosts sharing one certificate file become
    /// one certificate; names that cannot be managed (regular expressions, wildcards, `_`, IP
    /// addresses, variables) are listed with the reason; a site whose port 80 does not serve
    /// /.well-known/pki-validation/ from a document root is marked with what is in the way.
    /// Makes no API call without --account, and changes nothing without --write.
    Discover(DiscoverArgs),

    /// Configuration commands.
    #[command(subcommand)]
    Config(ConfigCommand),

    /// Fleet mode ([fleet]): the hosts sharing the certificates through etcd.
    #[command(subcommand)]
    Fleet(FleetCommand),

    /// ACME CAs ([acme.NAME]): the account each one knows this host by.
    #[command(subcommand)]
    Acme(AcmeCommand),

    /// Take over the certificates of another tool without a new order.
    #[command(subcommand)]
    Import(ImportCommand),

    /// Revoke the installed certificate of NAME at its ACME CA (revokeCert).
    ///
    /// For a certificate whose `issuer` is an [acme.NAME]; the Partner API's certificates are
    /// revoked through its order site. The revocation is recorded at once: the next run
    /// orders the replacement (with a new key). Needs --yes.
    Revoke {
        /// The configured certificate.
        name: String,
        /// Why (RFC 5280): unspecified, keyCompromise, affiliationChanged, superseded,
        /// cessationOfOperation.
        #[arg(long, default_value = "unspecified", value_parser = clap::builder::PossibleValuesParser::new(REVOKE_REASONS))]
        reason: String,
        /// Confirm the revocation.
        #[arg(long, short = 'y')]
        yes: bool,
    },

    /// Run as a daemon: `renew` on a schedule with jitter (sooner while work is pending at the
    /// CA, and after a run that failed as a whole: 2 minutes, doubling up to --interval),
    /// reloading the configuration when its file changes or on SIGHUP (an invalid new
    /// configuration is reported and the previous one kept), stopping cleanly on SIGTERM.
    /// In a fleet it also installs what the leader publishes as it is published, and starts a
    /// run within 5 s when the lead ends with its lease while work is open (a killed leader).
    ///
    /// An alternative to the systemd timer (`cert-agent.timer`), e.g. in containers; see
    /// `cert-agent-daemon.service`.
    Run {
        /// Seconds between runs when nothing is pending (each wait varies by a sixth of it, at
        /// most 10 minutes, so that many hosts do not call the API at the same minute).
        #[arg(long, value_name = "SECS", default_value_t = 3600)]
        interval: u64,
        /// Seconds each run waits for validation and issuance.
        #[arg(long, value_name = "SECS", default_value_t = 600)]
        wait: u64,
        /// The first run starts after a random delay of up to SECS (0: at once), so that hosts
        /// started together do not call the API at the same second. In a fleet the daemon
        /// follows the fleet from its start whatever this delay.
        #[arg(long, value_name = "SECS", default_value_t = 60)]
        first_run_delay: u64,
    },

    /// Run the standalone DCV server in the foreground: it listens on every `listen` address
    /// of the certificates with `standalone = true` and serves the validation files `renew`
    /// publishes, also between runs while the CA has not validated yet.
    ///
    /// Started as root, it switches to `[agent] serve_user` (default cert-agent-serve) once its
    /// ports are bound, with no capability left and no_new_privs set. Stops on SIGTERM or SIGINT. See `cert-agent-serve.service`.
    Serve,
}

#[derive(Debug, Args)]
pub struct RenewArgs {
    /// Only this certificate (repeatable).
    #[arg(long = "name", value_name = "NAME")]
    pub names: Vec<String>,
    /// Print what would be done; place no order, change no file.
    #[arg(long)]
    pub dry_run: bool,
    /// Work on the selected certificates even when nothing is due.
    #[arg(long)]
    pub force: bool,
    /// Seconds to wait for validation and issuance before leaving the rest to the next run.
    #[arg(long, value_name = "SECS", default_value_t = 600)]
    pub wait: u64,
    /// Before starting, sleep a random time up to SECS, so that many hosts run by cron do not
    /// call the API at the same minute. Only when not on a terminal and not started by systemd
    /// (whose timer spreads runs itself).
    #[arg(long, value_name = "SECS", default_value_t = 0)]
    pub random_delay: u64,
}

#[derive(Debug, Args)]
pub struct DiscoverArgs {
    /// The web server to ask (default: nginx when it is installed, else apache).
    #[arg(long, value_enum)]
    pub server: Option<DiscoverServer>,
    /// Read a saved `nginx -T` or `apachectl -S` output instead of running it (`-` reads
    /// stdin). Apache's virtual host files are still read from this host.
    #[arg(long, value_name = "FILE")]
    pub from: Option<PathBuf>,
    /// Write one configuration file per proposed certificate into DIR (for `[agent] include`),
    /// named NAME.toml; an existing file is kept unless --force.
    #[arg(long, value_name = "DIR")]
    pub write: Option<PathBuf>,
    /// With --write: replace existing files.
    #[arg(long, requires = "write")]
    pub force: bool,
    /// `product_id` written into each file (otherwise the product --account finds, or
    /// [defaults]).
    #[arg(long, value_name = "ID")]
    pub product_id: Option<u64>,
    /// Match every proposed certificate against the account's certificate list (needs [api]):
    /// a live order that covers the names is adopted (`certificate_id` in the written file,
    /// so `renew` places no new order); otherwise the product that fits and its price.
    #[arg(long)]
    pub account: bool,
    /// The plain-HTTP port the CA's validation reaches this web server on, when not 80 (a
    /// trial behind a port mapping, the sandbox's validation port): document roots are read
    /// from the servers listening there.
    #[arg(long, value_name = "PORT", default_value_t = 80, value_parser = clap::value_parser!(u16).range(1..))]
    pub http_port: u16,
}

/// The web servers `discover` reads.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum DiscoverServer {
    Nginx,
    Apache,
}

#[derive(Debug, Args)]
pub struct CheckArgs {
    /// Only this certificate (repeatable).
    #[arg(long = "name", value_name = "NAME")]
    pub names: Vec<String>,
    /// WARNING when fewer days than this are left [default: 14; for a certificate whose
    /// lifetime is shorter than four times that, its last quarter].
    #[arg(long, value_name = "DAYS")]
    pub warning: Option<i64>,
    /// CRITICAL when fewer days than this are left [default: 7; for a certificate whose
    /// lifetime is shorter than ten times that, its last tenth].
    #[arg(long, value_name = "DAYS")]
    pub critical: Option<i64>,
    /// Also shake hands with each certificate's verify_address (SNI: its common name) and
    /// compare the served certificate with the installed one.
    #[arg(long)]
    pub served: bool,
    /// Do not check the balance against the billed orders ahead (no API call at all).
    #[arg(long)]
    pub no_balance: bool,
    /// Download every certificate's CRL now instead of using the copy kept for up to
    /// [revocation] refresh_secs (to see a revocation at once); the copies are kept for the
    /// next run.
    #[arg(long)]
    pub refresh_crl: bool,
}

#[derive(Debug, Args)]
pub struct IssueArgs {
    /// The [[certificate]] to order.
    pub name: String,
    /// Confirm the billed order.
    #[arg(long)]
    pub yes: bool,
    /// Forget an order whose outcome is unknown and that reconciliation could not find. Use
    /// only when `cert-agent list` proves that nothing was ordered.
    #[arg(long)]
    pub clear_intent: bool,
    /// Seconds to wait for validation and issuance before leaving the rest to the next run.
    #[arg(long, value_name = "SECS", default_value_t = 600)]
    pub wait: u64,
}

#[derive(Debug, Args)]
pub struct ListArgs {
    /// Page number (50 certificates a page).
    #[arg(long, value_parser = clap::value_parser!(u32).range(1..))]
    pub page: Option<u32>,
    /// Only certificates in this state group.
    #[arg(long, value_enum)]
    pub scope: Option<Scope>,
    /// Text searched in domain names and organisation names.
    #[arg(long, value_name = "TEXT")]
    pub q: Option<String>,
    /// Fetch every page (with --scope/--q: all matches).
    #[arg(long, conflicts_with = "page")]
    pub all: bool,
}

/// The list call's `scope` values.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum Scope {
    /// Issued certificates.
    Issued,
    /// Certificates being issued.
    InProgress,
    /// Cancelled, rejected or revoked certificates.
    Annulled,
}

impl Scope {
    /// The value the API expects.
    pub fn api_value(self) -> &'static str {
        match self {
            Scope::Issued => "api_issued",
            Scope::InProgress => "api_in_progress",
            Scope::Annulled => "api_annulled",
        }
    }
}

#[derive(Debug, Subcommand)]
pub enum DcvCommand {
    /// List the email addresses the CA accepts for validating a domain.
    Emails {
        /// Domain name.
        domain: String,
        /// Ask for the addresses of another CA family (the API's legacy provider identifier).
        #[arg(long, value_name = "PROVIDER")]
        provider: Option<String>,
    },
    /// Show the validation state of each domain of a certificate in progress.
    Status {
        /// Certificate ID (internal number).
        id: u64,
    },
    /// Change the validation method of a certificate in progress.
    ///
    /// TARGET is an email address (from `dcv emails` or `dcv status`) or one of
    /// HTTP_CSR_HASH, HTTPS_CSR_HASH (family S only), CNAME_CSR_HASH.
    Change {
        /// Certificate ID (internal number).
        id: u64,
        /// New validation email address or method.
        #[arg(value_name = "EMAIL|METHOD")]
        target: String,
        /// The domain to change (required for multi-domain certificates).
        #[arg(long)]
        domain: Option<String>,
    },
    /// Move a certificate validated by email to HTTP or DNS validation (email validation
    /// ends on 2028-03-15): checks the new method with the pre-flight, switches the order in
    /// progress through the API, and prints the configuration lines to change.
    Migrate {
        /// Certificate name (from the configuration).
        name: String,
        /// The new method: `http` (HTTP_CSR_HASH) or `dns` (CNAME_CSR_HASH).
        #[arg(long, value_name = "http|dns", value_parser = ["http", "dns"])]
        to: String,
    },
    /// Ask the CA to resend the validation email or retry the current method.
    Resend {
        /// Certificate ID (internal number).
        id: u64,
    },
}

/// The reasons `revoke --reason` takes (RFC 5280 CRLReason names).
pub(crate) const REVOKE_REASONS: [&str; 5] = [
    "unspecified",
    "keyCompromise",
    "affiliationChanged",
    "superseded",
    "cessationOfOperation",
];

#[derive(Debug, Subcommand)]
pub enum ImportCommand {
    /// Take certbot's certificates over: reads its directory (renewal configurations,
    /// live/archive lineages, the account) and shows, per lineage, its names, expiry, CA and
    /// web root, and what becomes of the account. Writes nothing without --yes.
    ///
    /// With --yes: one configuration file per certificate into the --write directory (else
    /// printed), installing into the lineage's live/NAME/ files (made regular files holding
    /// the same bytes, so the web server's configuration stays as it is), and each
    /// certificate's record as installed, so that `renew` orders nothing until it is due.
    /// certbot's account is reused when its key is ECDSA P-256; otherwise a new account is
    /// registered on the first order. A lineage whose name is already configured, or that
    /// cannot be read safely, is left alone and named (exit 3).
    Certbot(ImportCertbotArgs),
}

#[derive(Debug, Args)]
pub struct ImportCertbotArgs {
    /// certbot's configuration directory.
    #[arg(long, value_name = "DIR", default_value = "/etc/letsencrypt")]
    pub from: PathBuf,
    /// With --yes: write one configuration file per certificate into DIR (NAME.toml, for
    /// `[agent] include`).
    #[arg(long, value_name = "DIR")]
    pub write: Option<PathBuf>,
    /// Take the certificates over (otherwise only show what would be done).
    #[arg(long, short = 'y')]
    pub yes: bool,
}

#[derive(Debug, Subcommand)]
pub enum AcmeCommand {
    /// Show the account of an ACME CA (registering it first when this host has none): its
    /// URL, contact, External Account Binding and file.
    ///
    /// NAME may be left out when one [acme.NAME] is configured. The account key is generated
    /// here (ECDSA P-256) and kept in state_dir/acme/NAME/account.json (0600); --deactivate
    /// ends the account at the CA (needs --yes) and keeps the file aside.
    Account {
        /// The [acme.NAME] table.
        name: Option<String>,
        /// Deactivate the account at the CA (cannot be undone).
        #[arg(long)]
        deactivate: bool,
        /// Confirm --deactivate.
        #[arg(long, short = 'y')]
        yes: bool,
    },
}

#[derive(Debug, Subcommand)]
pub enum FleetCommand {
    /// Show the fleet: the leading host, each certificate's current serial (version, when and
    /// by whom it was published), per host the serial it serves, since when, and its state
    /// (current, installing, LAGGING, never installed, skipped: why, error: its last error),
    /// and each certificate whose fleet's last attempt failed. Reads etcd only (no Partner
    /// API call).
    ///
    /// Exits 1 — for monitoring — when a host has not installed the current certificate
    /// `lag_alert_secs` (default 900) after it was published, when the fleet's last attempt
    /// at a certificate failed (the leader's, on every host), or when a certificate's shared
    /// record or current certificate in etcd does not open; 0 otherwise.
    Status,
    /// Seal every value under the fleet's prefix again under the new fleet key, while the
    /// fleet keeps serving. Run on one host that holds both keys.
    ///
    /// The procedure: 1. make a new key (`head -c 32 /dev/urandom > fleet.key.new`, mode
    /// 0600); 2. on every host, in any order, make the new key `secret_file` and the old one
    /// `previous_secret_file` in [fleet] (or the systemd credentials cert-agent-fleet-key and
    /// cert-agent-fleet-key-previous) — hosts keep serving, and the daemon picks the files up
    /// at its next run; 3. run `cert-agent fleet rotate-key` on one of them: it takes the lead
    /// (fenced like a leader run), seals every value again under the new key (the shared
    /// records and current certificates at a higher version, so no host takes them for
    /// replays and none reinstalls or reloads), the key check last, and lists what it sealed;
    /// then it checks that every host has moved (each host's sealed seen record names the new
    /// key and no previous key in use: the host ran since and saw the key check under the new
    /// key) and lists those that have not — run it again after their next run; 4. remove
    /// `previous_secret_file` (and the old key) on every host. A host stops opening values
    /// sealed under the old key once it saw the key check under the new key, or 24 h after it
    /// first ran holding both keys, whichever comes first, for good (recorded in its state
    /// directory): run step 3 within 24 h of step 2's first host.
    ///
    /// Makes no Partner API call. Exits 0 when everything is under the new key and every host
    /// has moved, 75 when every value is under it but hosts have not moved yet (listed), 3
    /// when some value opened under neither key and was left as it is (listed), 1 on error
    /// (another host leads: run it again after that host's run; nothing is half done — running
    /// it again re-seals only what is still under the old key, until the rotation has ended on
    /// this host).
    RotateKey,
    /// Take a host that left the fleet for good (decommissioned, renamed) out of etcd, so it
    /// stops counting: no rollout wave waits for its proofs, `fleet status` no longer lists
    /// it as lagging, `fleet rotate-key` no longer waits for it to move.
    ///
    /// Deletes, as the fleet's leader, in one transaction: what it installed
    /// (`hosts/HOST/certs/`), proved (`hosts/HOST/proof/`), its word on ACME validation files
    /// (`hosts/HOST/dcv/`), its `hosts/HOST/seen` record, and its manifest entry — unless
    /// that entry alone vouches for a version of some certificate (the floor that keeps an
    /// older value put back out: kept, and said). Its rollout decisions and its notes of
    /// order intents never placed stay (they bind the fleet). Refused while HOST is live (it
    /// synchronised less than 10 minutes ago), for this host itself, and while another host
    /// leads (run it again after that run).
    ///
    /// Makes no Partner API call. Exits 0 when the host was forgotten, 1 otherwise (nothing
    /// deleted). A host that runs again later announces itself and writes its values again.
    ///
    /// Example: `cert-agent fleet forget-host web07` after `systemctl disable --now
    /// cert-agent-daemon` on web07 and ten minutes.
    ForgetHost {
        /// The host's name, as its [fleet] host named it.
        host: String,
    },
    /// A person's decision on a rollout in waves ([fleet] rollout_canaries) that a host's
    /// failed proof halted: resume it, or abort it.
    #[command(subcommand)]
    Rollout(RolloutCommand),
}

/// `cert-agent fleet rollout`: each decision is written sealed under this host's key in etcd
/// (`hosts/HOST/rollout/NAME`), bound to the fleet's current serial of NAME, this host and
/// the time; every host applies the newest decision made on the serial it would install, at
/// its next synchronisation (a daemon at once). A decision on another serial applies to none.
#[derive(Debug, Subcommand)]
pub enum RolloutCommand {
    /// Let the halted waves go on for the fleet's current serial of NAME: the failed proofs
    /// made so far are set aside, the hosts of the next waves install it, and a host that
    /// rolled it back installs it again and proves again at its next synchronisation. Fix
    /// the cause first (`fleet status` names the host, the address and name, and both
    /// serials); a proof that fails after the resume halts the rollout again.
    ///
    /// Example: `cert-agent fleet rollout resume www` after fixing web02's vhost.
    Resume {
        /// The certificate whose rollout goes on (as configured).
        name: String,
    },
    /// Stop the rollout of the fleet's current serial of NAME for good: no host installs
    /// that serial (a host that rolled it back keeps the previous certificate, the hosts of
    /// the later waves keep theirs) and `check` is no longer CRITICAL for the halt. Hosts that
    /// installed and proved it keep it. The next certificate is the leader's to obtain when
    /// it is due, as always: an abort orders nothing and makes no Partner API call; the next
    /// certificate the fleet publishes starts a new rollout.
    ///
    /// Example: `cert-agent fleet rollout abort www` when the new chain breaks clients.
    Abort {
        /// The certificate whose rollout stops (as configured).
        name: String,
    },
}

#[derive(Debug, Subcommand)]
pub enum ConfigCommand {
    /// Validate the configuration file and print the effective configuration (defaults
    /// applied, secrets masked). Makes no API call.
    Check,
}

/// Options of `cert-agent retire`.
#[derive(Debug, Args)]
pub struct RetireArgs {
    /// The certificate to retire (configured, or only recorded in the state directory).
    pub name: String,
    /// Ask the API to cancel the order (refund): only for an order not yet issued, or issued
    /// within the last 28 days.
    #[arg(long)]
    pub cancel: bool,
    /// Also delete the installed certificate, chain and key files.
    #[arg(long)]
    pub remove_files: bool,
    /// Revoke the installed certificate at its ACME CA (revokeCert) before retiring it, so no
    /// client accepts it any more (a certificate of an ACME CA; on one host, not in fleet
    /// mode). A refused revocation retires nothing.
    #[arg(long)]
    pub revoke: bool,
    /// Why, with --revoke (RFC 5280): unspecified, keyCompromise, affiliationChanged,
    /// superseded, cessationOfOperation.
    #[arg(long, requires = "revoke", default_value = "cessationOfOperation", value_parser = clap::builder::PossibleValuesParser::new(REVOKE_REASONS))]
    pub reason: String,
    /// Delete files even when the web server still names them, and retire a certificate
    /// whose order outcome is unknown.
    #[arg(long)]
    pub force: bool,
    /// Do not ask (needed without a terminal).
    #[arg(long, short = 'y', alias = "non-interactive")]
    pub yes: bool,
    /// Read the web server's report (`nginx -T`, `apachectl -S`) from FILE instead of asking
    /// the server, to see which files it still uses.
    #[arg(long, value_name = "FILE")]
    pub from: Option<PathBuf>,
}

/// Options of `cert-agent audit`.
#[derive(Debug, Args)]
pub struct AuditArgs {
    /// Check the chain instead of showing lines: exit 1 naming every line changed, removed,
    /// inserted or moved, and a log cut short or missing (lines an interrupted write left
    /// incomplete are listed as gaps).
    #[arg(long)]
    pub verify: bool,
    /// With --verify: the log must still hold the line with this hash (its `hash`, as the
    /// journal shows it, or the `last_hash` an earlier --verify printed).
    #[arg(long, value_name = "HASH", requires = "verify")]
    pub expect_last_hash: Option<String>,
    /// With --verify: the log must reach at least this `seq`.
    #[arg(long, value_name = "SEQ", requires = "verify")]
    pub expect_min_seq: Option<u64>,
    /// Only lines from this date on (YYYY-MM-DD, UTC, or an RFC 3339 time).
    #[arg(long, value_name = "DATE")]
    pub since: Option<String>,
    /// Only lines about this certificate.
    #[arg(long, value_name = "NAME")]
    pub name: Option<String>,
}
