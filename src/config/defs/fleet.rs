//! The keys of `[fleet]` and of each `[acme.NAME]`.

use super::{Key, Kind, Section};

keys! { Section::Fleet => FLEET {
    FLEET_ENDPOINTS {
        name: "endpoints",
        kind: Kind::Other("array of URLs"),
        default: "required",
        doc: "the etcd members' client URLs, `https://` (`https://10.0.0.11:2379`); \
            `http://` is refused unless `insecure_plaintext = true`",
    }
    FLEET_INSECURE_PLAINTEXT {
        name: "insecure_plaintext",
        kind: Kind::Bool { default: false },
        doc: "allow `http://` endpoints (etcd traffic in clear: a test cluster, a network \
            you trust). Refused together with `user`/`password_file`: the password never \
            travels in clear",
    }
    FLEET_CA_FILE {
        name: "ca_file",
        kind: Kind::Path,
        default: "none",
        doc: "CA of the members' server certificates",
    }
    FLEET_CERT_FILE {
        name: "cert_file",
        kind: Kind::Path,
        default: "none",
        doc: "client certificate for etcd's `--client-cert-auth`, with `key_file`",
    }
    FLEET_KEY_FILE {
        name: "key_file",
        kind: Kind::Path,
        default: "none",
        doc: "the key of `cert_file` (both or neither); must not be readable by group or \
            others (mode 0600)",
    }
    FLEET_USER {
        name: "user",
        kind: Kind::String,
        default: "none",
        doc: "etcd user, with `password_file` (both or neither)",
    }
    FLEET_PASSWORD_FILE {
        name: "password_file",
        kind: Kind::Path,
        default: "none",
        doc: "the file holding the etcd password of `user` (both or neither); must not be \
            readable by group or others (mode 0600), as `[api] password_file`",
    }
    FLEET_PREFIX {
        name: "prefix",
        kind: Kind::String,
        default: "`\"/cert-agent/\"`",
        doc: "the fleet's keys in etcd; starts and ends with `/`; one prefix per fleet",
    }
    FLEET_HOST {
        name: "host",
        kind: Kind::String,
        default: "the host name",
        doc: "this host's name in the fleet (letters, digits, `.`, `-`, `_`); unique per \
            host: a host refuses its fleet work while another live host announces the \
            same name ([fleet.md](fleet.md#failures))",
    }
    FLEET_SECRET_FILE {
        name: "secret_file",
        kind: Kind::Path,
        default: "the systemd credential `cert-agent-fleet-key`",
        doc: "the fleet key: exactly 32 random bytes, mode 0600, the same on every host \
            (`head -c 32 /dev/urandom > FILE`)",
    }
    FLEET_PREVIOUS_SECRET_FILE {
        name: "previous_secret_file",
        kind: Kind::Path,
        default: "the systemd credential `cert-agent-fleet-key-previous` when passed; none \
            otherwise",
        doc: "the previous fleet key, while the fleet rotates its key: it opens what was \
            sealed under it, nothing is sealed under it (mode 0600); once the fleet's \
            key check is under the current key the host records this key as retired \
            (`state_dir/fleet-versions.json`) and it opens nothing more: remove it then; \
            see [fleet](fleet.md#rotating-the-fleet-key)",
    }
    FLEET_LEASE_TTL_SECS {
        name: "lease_ttl_secs",
        kind: Kind::Seconds { min: 5, max: 120, default: Some(15) },
        doc: "The leader's lease: a dead leader is replaced within this time",
    }
    FLEET_LAG_ALERT_SECS {
        name: "lag_alert_secs",
        kind: Kind::Seconds { min: 60, max: 604800, default: Some(900) },
        doc: "`cert-agent fleet status` exits 1 when a host has not installed the current \
            certificate this long after it was published, and when no host leads while a \
            shared record's open order or reissue has had no run working on it this long \
            (at least `poll_interval_secs` plus `lease_ttl_secs`)",
    }
    FLEET_PROOF_INTERVAL_SECS {
        name: "proof_interval_secs",
        kind: Kind::Seconds { min: 0, max: 604800, default: Some(1800) },
        doc: "Each synchronisation with the fleet (each run, and the daemon's follow loop) \
            proves again what this host serves of each certificate whose current it \
            installed and whose last [proof](fleet.md#drift-what-a-host-serves-later) is \
            older than this (0: at every synchronisation); a proof that meets another \
            serial is **drift**, shown by `fleet status`, `check` and the metrics",
    }
    FLEET_LEAD_ALERT_SECS {
        name: "lead_alert_secs",
        kind: Kind::Seconds { min: 10, max: 604800, default: Some(3600) },
        doc: "Twice the longest run: a lead this host's synchronisations saw held (the \
            same leader key) longer than this is `LEAD STUCK` in `cert-agent fleet \
            status` (exit 1) and a WARNING of `cert-agent check` (CRITICAL past twice \
            it); see [fleet](fleet.md#the-trust-model)",
    }
    FLEET_ROLLOUT_CANARIES {
        name: "rollout_canaries",
        kind: Kind::Other("array of host names, or integer"),
        default: "none",
        doc: "turns on the [rollout in waves](fleet.md#rollout-in-waves): the hosts (as \
            their `[fleet] host` names them) that install a new certificate first, or a \
            count (1 to 100000) — the first that many of the hosts' names, sorted. None: \
            every host installs a new certificate as soon as it is published",
    }
    FLEET_ROLLOUT_WAVE {
        name: "rollout_wave",
        kind: Kind::Other("integer, or float"),
        default: "`1.0`",
        doc: "with `rollout_canaries`: the hosts per wave after the canaries, a count (1 \
            to 100000) or a fraction of the hosts after the canaries (above 0, at most \
            1, rounded up: `0.25` is four waves)",
    }
    FLEET_ROLLOUT_PAUSE_SECS {
        name: "rollout_pause_secs",
        kind: Kind::Seconds { min: 0, max: 604800, default: Some(0) },
        doc: "With `rollout_canaries`: between the last proof of a wave and the next \
            wave's installs",
    }
    FLEET_ROLLOUT_DEADLINE_FRACTION {
        name: "rollout_deadline_fraction",
        kind: Kind::Fraction {
            default: 0.1,
            what: "of a certificate's lifetime",
            example: "0.1: the last tenth",
        },
        doc: "With `rollout_canaries`: a host whose installed certificate has less than \
            this fraction of its lifetime left installs the fleet's new one at once, \
            whatever its wave, a halt, or its own rollback of that serial (not an \
            aborted one), and sends `rollout_overridden` ([the time \
            rule](fleet.md#the-time-rule)). The default is the last tenth, where `check` \
            turns CRITICAL; keep it below the share of the lifetime that \
            `renew_before_days` leaves (30 of 200 days: 0.15), or every renewal installs \
            at once",
    }
    FLEET_HEALTH_COMMAND {
        name: "health_command",
        kind: Kind::Command,
        default: "none",
        doc: "run after each install of a fleet certificate, after the handshakes of the \
            host's [proof](fleet.md#proof-of-what-each-host-serves) (a string through \
            `/bin/sh -c`, an array as argv), with `CERT_AGENT_CERTIFICATE` and \
            `CERT_AGENT_SERIAL` set, 60 s at most; exit 0 is healthy, anything else \
            fails the proof (`fleet status` exits 1 and names the host)",
    }
}}

keys! { Section::Acme => ACME {
    ACME_DIRECTORY {
        name: "directory",
        kind: Kind::Other("URL"),
        default: "required",
        doc: "the directory URL, `https://` \
            (`https://acme-v02.api.letsencrypt.org/directory`); `http://` only to a \
            loopback address",
    }
    ACME_CONTACT {
        name: "contact",
        kind: Kind::Other("string or array of strings"),
        default: "none",
        doc: "e-mail addresses for the account (`ops@example.com` or \
            `mailto:ops@example.com`)",
    }
    ACME_EAB_KID {
        name: "eab_kid",
        kind: Kind::String,
        default: "none",
        doc: "External Account Binding, with `eab_hmac_file` (both or neither): the key id \
            the CA hands out",
    }
    ACME_EAB_HMAC_FILE {
        name: "eab_hmac_file",
        kind: Kind::Path,
        default: "none",
        doc: "External Account Binding, with `eab_kid` (both or neither): the file holding \
            the HMAC key as the CA hands it out (base64url); it must not be readable by \
            group or others (mode 0600), or be a systemd credential",
    }
    ACME_PROFILE {
        name: "profile",
        kind: Kind::String,
        default: "none",
        doc: "the profile every certificate of this CA asks for (`classic`, `shortlived`, \
            …), unless the certificate names its own; a profile the directory does not \
            advertise fails the order with the list of those it does",
    }
    ACME_PREFERRED_CHAIN {
        name: "preferred_chain",
        kind: Kind::String,
        default: "none",
        doc: "when the CA offers the certificate under several chains, the Common Name of \
            the CA that issued the topmost certificate of the chain to install (`\"ISRG \
            Root X1\"`), as certbot's and lego's `--preferred-chain`; no offered chain \
            matching keeps the CA's default chain",
    }
    ACME_CA_FILE {
        name: "ca_file",
        kind: Kind::Path,
        default: "none",
        doc: "an extra trust anchor for the directory's TLS (a private CA's directory)",
    }
}}
