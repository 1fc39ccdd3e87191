//! What the integration tests (`tests/`), the fuzz targets (`fuzz/`) and the examples reach
//! of the library: each submodule mirrors the room it names and re-exports exactly the items
//! used from outside the crate. Not a stable interface: the rooms themselves are private, so
//! anything not listed here that nothing inside the crate uses is reported dead by rustc
//! (docs/architecture.md, "The surface").

/// The Partner API client and its wire types.
pub mod api {
    pub use crate::api::{
        ActionResult, ApiError, Balance, Certificate, CertificateDetails, CertificateStatus,
        Client, ClientOptions, Country, DcvEmails, DcvStatus, DcvType, ErrorBody, ListScope, Order,
        OrderItem, OrderRequest, OrderResponse, Pagination, PasswordSource, Product, ProductType,
        Prolongation, ReissueRequest, RetryPolicy, Secret, SendGuard, ServerSoftware,
        SignInResponse, TOKEN_FILE, TransportKind, parse_api_date,
    };
}

/// A downloaded bundle read and its chain validated.
pub mod bundle {
    pub use crate::bundle::{
        Archive, BundleError, EntryProblem, Expected, Limits, ServerKind, ValidatedBundle,
        read_bundle, subject_both_ways, validate, validate_chain,
    };
}

/// certbot's directory read as hostile input.
pub mod certbot {
    /// certbot's ACME account files.
    pub mod account {
        pub use crate::certbot::account::ec_p256_pkcs8;
    }

    /// What the certbot import proposes.
    pub mod propose {
        pub use crate::certbot::propose::{ca_name, ca_table};
    }

    /// A certbot renewal configuration.
    pub mod conf {
        pub use crate::certbot::conf::RenewalConf;
    }
}

/// The command line, parsed and run in-process.
pub mod cli {
    pub use crate::cli::{Cli, run};
}

/// Time as the agent reads it.
pub mod clock {
    pub use crate::clock::Clock;
}

/// The configuration file.
pub mod config {
    pub use crate::config::{CertificateConfig, Config, ConfigError};
}

/// Keys, CSRs and certificates.
pub mod crypto {
    pub use crate::crypto::{
        CertificateInfo, Csr, CsrHashes, CsrInfo, KeyType, PrivateKey, Serial,
    };
}

/// The daemon's loop.
pub mod daemon {
    pub use crate::daemon::{DaemonEvent, DaemonOptions, run_daemon};
}

/// Domain control validation.
pub mod dcv {
    pub use crate::dcv::{Challenge, DcvError, MAX_CONTENT_BYTES, ValidationFile, WellKnown};

    /// DNS validation through the configured hook.
    pub mod hook {
        pub use crate::dcv::hook::{DnsHook, DnsRecord, HookAction, HookOutput, run, txt_record};
    }

    /// The self-check of a published validation file.
    pub mod selfcheck {
        pub use crate::dcv::selfcheck::{SelfCheck, SelfCheckOutcome};
    }

    /// The standalone validation server.
    pub mod standalone {
        pub use crate::dcv::standalone::{ServerOptions, StandaloneServer};
    }

    /// The validation content checked against the API's hashes.
    pub mod content {
        pub use crate::dcv::content::check_api_hashes;
    }

    /// Validation files written under a web root.
    pub mod webroot {
        pub use crate::dcv::webroot::publish_into;
    }
}

/// A web server's own dump read.
pub mod discover {
    pub use crate::discover::{
        Server, apache_from, apache_vhost, fragment_unchanged, loaded_files, nginx,
    };
}

/// The convergence of one run.
pub mod engine {
    pub use crate::engine::{Lead, Outcome, RunOptions, RunStatus, client_options, run};

    /// What a retired certificate keeps.
    pub mod retire {
        pub use crate::engine::retire::Own;
    }
}

/// Faults injected by the tests.
pub mod failpoint {
    pub use crate::failpoint::ENV;
}

/// The fleet over etcd.
pub mod fleet {
    pub use crate::fleet::{
        Expect, Fleet, FleetError, FleetOptions, FleetWatch, LeadEvent, Leadership, Written,
        connect, fuzzing, open_value, open_work, seal_value,
    };
}

/// Files written atomically.
pub mod fsutil {
    pub use crate::fsutil::write_atomic;
}

/// The install transaction.
pub mod install {
    pub use crate::install::{
        CertInstall, CertMaterial, InstallError, InstallPaths, InstallTx, Ownership, PathOverrides,
        ServerCommands, ServerKind, VerifyTarget, install_all,
    };

    /// The served certificate checked.
    pub mod verify {
        pub use crate::install::verify::{serial_of_pem, served_serial, verify_served};
    }
}

/// What only one kind of CA knows.
pub mod issuer {
    /// An ACME CA.
    pub mod acme {
        pub use crate::issuer::acme::{
            ACCOUNT_FILE, AcmeError, Directory, Method, Options, account, account_file_directory,
            chain, check_profile, finish, place, place_with, renew_at, renewal_window, resume,
            revoke,
        };

        /// The ACME client's HTTP rules.
        pub mod http {
            pub use crate::issuer::acme::http::{MAX_ANSWER_BYTES, allowed_url};
        }
    }
}

/// Monitoring's readers of hostile input.
pub mod monitor {
    pub use crate::monitor::{fuzz_announced, fuzz_kept_pass, fuzz_served};

    /// The balance and spend.
    pub mod money {
        pub use crate::monitor::money::Snapshot;
    }
}

/// Checks before an order.
pub mod preflight {
    /// CAA records read and judged.
    pub mod caa {
        pub use crate::preflight::caa::{Caa, Requester, decide, issuer_value, parse};
    }

    /// DNS messages on the wire.
    pub mod wire {
        pub use crate::preflight::wire::{TYPE_CAA, parse};
    }
}

/// Programs looked up on the `PATH`.
pub mod process {
    pub use crate::process::find_program;
}

/// Revocation lists.
pub mod revocation {
    pub use crate::revocation::{check_crl, of_chain};

    /// The retry book of CRL fetches.
    pub mod retry {
        pub use crate::revocation::retry::Book;
    }
}

/// The state directory.
pub mod store {
    pub use crate::store::{
        AcmeBook, CertRecord, FileStamp, Installed, OrderRef, PartnerBook, PartnerStage,
        RECORD_VERSION, Store, Subscription, check_name, fuzz_partner_book, mode_of,
    };

    /// The audit log.
    pub mod audit {
        pub use crate::store::audit::{Anchor, parse_line, verify, verify_against};
    }

    /// The due summary.
    pub mod due {
        pub use crate::store::due::{Basis, DueSummary, ExpressSummary, issuer_key};
    }
}

/// Values that never reach a log.
pub mod values {
    pub use crate::values::Secret;
}
