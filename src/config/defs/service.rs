//! The keys of `[api]`, `[agent]`, `[validation]`, `[revocation]` and `[preflight]`.

use super::{Key, Kind, Section};
use crate::values::endpoint::{DEFAULT_CONNECT_TIMEOUT, DEFAULT_TIMEOUT};

keys! { Section::Api => API {
    API_BASE_URL {
        name: "base_url",
        kind: Kind::String,
        default: "— (required)",
        doc: "`https://` only; no user name, password, query or fragment; a path prefix is \
            allowed; a trailing `/` is removed",
    }
    API_LOGIN {
        name: "login",
        kind: Kind::String,
        default: "— (required)",
        doc: "not empty; the account's login (an email address)",
    }
    API_PASSWORD_FILE {
        name: "password_file",
        kind: Kind::Path,
        default: "none",
        doc: "the file holding the password (see below)",
    }
    API_PASSWORD {
        name: "password",
        kind: Kind::String,
        default: "none",
        doc: "the password inline: accepted, but warned about; not together with \
            `password_file`; not empty",
    }
    API_CA_FILE {
        name: "ca_file",
        kind: Kind::Path,
        default: "none",
        doc: "PEM file with extra trust anchors, added to the system roots (a private CA, \
            the sandbox)",
    }
    API_ORDER_SITE_URL {
        name: "order_site_url",
        kind: Kind::String,
        default: "none",
        doc: "`https://` URL of the partner order site; used to print the link of a \
            prepared renewal order (`{order_site_url}/lead/continue_order/{token}`)",
    }
    API_CONNECT_TIMEOUT_SECS {
        name: "connect_timeout_secs",
        kind: Kind::Seconds { min: 1, max: 600, default: Some(DEFAULT_CONNECT_TIMEOUT.as_secs()) },
        doc: "",
    }
    API_TIMEOUT_SECS {
        name: "timeout_secs",
        kind: Kind::Seconds { min: 1, max: 3600, default: Some(DEFAULT_TIMEOUT.as_secs()) },
        doc: "Total time of one request, body included",
    }
    API_RETRIES {
        name: "retries",
        kind: Kind::Int { min: 0, max: 10, default: Some(3) },
        doc: "Repeats of *idempotent* calls after a 5xx, 408, 429, timeout or connection \
            error. `POST /order` is never repeated",
    }
}}

keys! { Section::Agent => AGENT {
    AGENT_STATE_DIR {
        name: "state_dir",
        kind: Kind::Path,
        default: "`/var/lib/cert-agent`",
        doc: "created `0700` when missing; see \
            [architecture](architecture.md#state-directory)",
    }
    AGENT_RENEW_BEFORE_DAYS {
        name: "renew_before_days",
        kind: Kind::Int { min: 1, max: 180, default: Some(30) },
        doc: "See [renewal](renewal.md#when-a-certificate-is-due)",
    }
    AGENT_POLL_INTERVAL_SECS {
        name: "poll_interval_secs",
        kind: Kind::Seconds { min: 1, max: 86400, default: Some(300) },
        doc: "Least time between two status checks of one certificate. Below 300 is \
            accepted with a warning: the API asks for at most one status call per \
            certificate every 5 minutes",
    }
    AGENT_ALLOW_ORDERS {
        name: "allow_orders",
        kind: Kind::Bool { default: false },
        doc: "`true` lets `renew` place billed orders on its own (first orders, and new \
            orders when a subscription ends); otherwise only `cert-agent issue NAME \
            --yes` orders. See [billing safety](billing-safety.md)",
    }
    AGENT_MAX_ORDER_PRICE {
        name: "max_order_price",
        kind: Kind::Other("string (decimal)"),
        default: "none (no limit)",
        doc: "e.g. `\"100.00\"`; an integer or float is accepted too; not negative. An \
            order whose price for the period (including a multi-domain order's extra \
            names) is higher, or which has no price for the period, is refused",
    }
    AGENT_CONCURRENCY {
        name: "concurrency",
        kind: Kind::Int { min: 1, max: 64, default: Some(4) },
        doc: "Certificates a run works on at once: their API calls, validation publishing \
            and downloads overlap (one process, one thread; the run lock and one state \
            record per certificate stay as they are). Web servers are still reloaded \
            once per run, after every install. `1` works on one certificate after \
            another",
    }
    AGENT_NOTIFY_COMMAND {
        name: "notify_command",
        kind: Kind::Command,
        default: "none",
        doc: "run after a `renew`/`issue`/`reissue`/`install` run (and each daemon run) \
            with new events: a certificate installed, failing, recovered, its \
            subscription ending, a renewal order prepared — each once per change of \
            state, the rule `notify_url` follows too ([Alerts](monitoring.md#alerts)); \
            gets the run's JSON report with the events (`{\"certificates\": [...], \
            \"events\": [...]}`) on stdin; stopped after 60 s; its output is discarded",
    }
    AGENT_NOTIFY_URL {
        name: "notify_url",
        kind: Kind::Other("URL"),
        default: "none",
        doc: "where the run's events are posted as JSON (`http://` or `https://`): a \
            certificate installed, failing, recovered, its subscription ending, a \
            renewal order prepared — each once per change of state, tried 3 times; \
            events not delivered are posted again by the next run; see \
            [Monitoring](monitoring.md#alerts)",
    }
    AGENT_NOTIFY_TIMEOUT_SECS {
        name: "notify_timeout_secs",
        kind: Kind::Seconds { min: 1, max: 300, default: Some(10) },
        doc: "Time limit of one `notify_url` attempt (connecting, sending, the answer)",
    }
    AGENT_METRICS_FILE {
        name: "metrics_file",
        kind: Kind::Path,
        default: "none",
        doc: "Prometheus text file written (atomically, 0644) at the end of every run, for \
            node_exporter's textfile collector: see \
            [Monitoring](monitoring.md#prometheus)",
    }
    AGENT_METRICS_LISTEN {
        name: "metrics_listen",
        kind: Kind::Other("address:port"),
        default: "none",
        doc: "where `cert-agent run` serves `/metrics` for Prometheus to scrape (plain \
            HTTP; keep it on loopback or a management network, e.g. `127.0.0.1:9793`); \
            read when the daemon starts",
    }
    AGENT_SERVE_USER {
        name: "serve_user",
        kind: Kind::String,
        default: "`\"cert-agent-serve\"` (a system user the packages create)",
        doc: "the user [`cert-agent serve`](commands.md#cert-agent-serve) switches to \
            after binding its ports when started as root (its primary group, no other \
            groups). A user name (printable, no spaces or `:`); checked when `serve` \
            starts: it must exist and be neither root nor in group root (exit 2 \
            otherwise). Give it no access to anything: it needs none",
    }
    AGENT_INCLUDE {
        name: "include",
        kind: Kind::Other("array of file patterns"),
        default: "none",
        doc: "files holding further `[[certificate]]` tables, one file per site (see \
            [Included files](#included-files)), e.g. \
            `[\"/etc/cert-agent/conf.d/*.toml\"]`",
    }
}}

keys! { Section::Validation => VALIDATION {
    VALIDATION_REUSE_DAYS {
        name: "reuse_days",
        kind: Kind::Int { min: 1, max: 398, default: None },
        default: "none: the ballot's period on each date",
        doc: "A CA stricter than the ballot: a validation counts this many days (the \
            shorter of this and the ballot's period applies)",
    }
    VALIDATION_WARNING_DAYS {
        name: "warning_days",
        kind: Kind::Int { min: 1, max: 365, default: Some(21) },
        doc: "`check` is WARNING this many days before a renewal whose fresh validation \
            needs a person (`dcv = \"email\"`, or DNS without a `dns_hook`)",
    }
}}

keys! { Section::Revocation => REVOCATION {
    REVOCATION_CHECK {
        name: "check",
        kind: Kind::Bool { default: true },
        doc: "`false` reads no CRL: a revocation is then noticed only when the order is \
            read",
    }
    REVOCATION_MAX_CRL_BYTES {
        name: "max_crl_bytes",
        kind: Kind::Int { min: 1024, max: 1 << 30, default: Some(10 * 1024 * 1024) },
        default: "(10 MiB)",
        doc: "A larger CRL is refused unread beyond this size (the answer's \
            `Content-Length`, or counted while reading): revocation unknown",
    }
    REVOCATION_TIMEOUT_SECS {
        name: "timeout_secs",
        kind: Kind::Seconds { min: 1, max: 600, default: Some(30) },
        doc: "Time limit of one CRL download (connecting, the answer, the body)",
    }
    REVOCATION_REFRESH_SECS {
        name: "refresh_secs",
        kind: Kind::Seconds { min: 60, max: 604800, default: Some(6 * 3600) },
        default: "(6 hours)",
        doc: "A kept CRL older than this (since this host stored it) is fetched again even \
            before its `nextUpdate`: CAs publish a new CRL soon after revoking, days \
            before the old one's `nextUpdate`",
    }
}}

keys! { Section::Preflight => PREFLIGHT {
    PREFLIGHT_CAA {
        name: "caa",
        kind: Kind::Bool { default: true },
        doc: "`false` skips the CAA check",
    }
    PREFLIGHT_DNSSEC {
        name: "dnssec",
        kind: Kind::Bool { default: true },
        doc: "`false` asks without DNSSEC (no DO bit): a bogus zone is then not told apart \
            from a broken server, and no warning is given for an unsigned zone",
    }
    PREFLIGHT_HTTP {
        name: "http",
        kind: Kind::Bool { default: true },
        doc: "`false` skips the address check of names validated over HTTP (`dcv = \
            \"http\"`/`\"https\"`), and the self-check after the file is placed resolves \
            the name through the system instead of `resolver`",
    }
    PREFLIGHT_EMAIL {
        name: "email",
        kind: Kind::Bool { default: true },
        doc: "from 2028-03-15 (the end of email validation, CA/Browser Forum ballot \
            SC-090) an order or reissue of a certificate with `dcv = \"email\"` is \
            stopped before it is sent, as no publicly trusted CA may validate by email \
            any more; `false` places it all the same (a CA outside the Forum's rules)",
    }
    PREFLIGHT_RESOLVER {
        name: "resolver",
        kind: Kind::String,
        default: "the first `nameserver` of `/etc/resolv.conf` (port 53)",
        doc: "`\"IP:PORT\"` (`\"[::1]:53\"` for IPv6). Should be a validating resolver: \
            without the AD bit every answer counts as unsigned (a warning)",
    }
    PREFLIGHT_TIMEOUT_SECS {
        name: "timeout_secs",
        kind: Kind::Seconds { min: 1, max: 60, default: Some(3) },
        doc: "Time limit of one DNS question; each is tried twice, then the check is a \
            warning (the order goes on unchecked)",
    }
    PREFLIGHT_CAA_IDENTITIES {
        name: "caa_identities",
        kind: Kind::Other("table"),
        default: "built in (the sandbox's issuers, Sectigo, DigiCert and its brands, \
            GlobalSign, Certum, Let's Encrypt)",
        doc: "issuer value (a product's `issuer` or `brand` as `cert-agent products` shows \
            it, or an ACME CA's NAME) = array of CAA issuer domain names, e.g. `{ \
            \"s-one\" = [\"sectigo.com\"] }`; replaces the built-in identities of that \
            issuer",
    }
}}
