//! Reading the per-server bundle: safe in-memory ZIP unpacking and validation of what the CA sent;
//! a chain an issuer hands over as PEM ([`validate_chain`]) gets the same checks.
//!
//! The bundle of `download_bundle` (Partner API v1, endpoint 15) is untrusted input. It is
//! unpacked in memory only — nothing is ever extracted by entry name — with bounds on the
//! number of entries and on inflated sizes ([`Archive::unpack`]). The files for the configured
//! server are picked ([`ServerKind`]) and their certificates validated against what the agent
//! expects ([`Expected`]): our key, our names, valid now, not a CA, a chain linked by
//! signatures. Only a [`ValidatedBundle`] reaches the installer.
//!
//! Depends only on the foundation (`crypto`, `values`).

mod anchors;
mod archive;
mod validate;

pub use anchors::subject_both_ways;
pub(crate) use anchors::trust_anchors;
pub use archive::{Archive, EntryProblem, Limits};
pub use validate::{Expected, ServerKind, ValidatedBundle, validate, validate_chain};

/// Unpacks `zip` with the default [`Limits`] and validates the files for `server`.
pub fn read_bundle(
    zip: &[u8],
    server: ServerKind,
    expected: &Expected<'_>,
) -> Result<ValidatedBundle, BundleError> {
    let archive = Archive::unpack(zip)?;
    validate(&archive, server, expected)
}

/// Why a bundle was refused. Entry and file names from the archive are quoted escaped.
#[derive(Debug, thiserror::Error)]
pub enum BundleError {
    #[error("bundle archive is {size} bytes, more than the limit of {limit}")]
    ArchiveTooLarge { size: usize, limit: usize },

    #[error("bundle is not a readable ZIP archive: {0}")]
    NotZip(String),

    #[error("bundle archive has {count} entries, more than the limit of {limit}")]
    TooManyEntries { count: usize, limit: usize },

    #[error("bundle entry {name}: {problem}")]
    Entry { name: String, problem: EntryProblem },

    #[error("bundle lacks {file} (needed for {server})")]
    MissingFile { file: String, server: ServerKind },

    #[error("bundle file {file}: {problem}")]
    BadPem { file: String, problem: String },

    #[error("bundle file {file}, certificate {index}: {message}")]
    BadCertificate {
        file: String,
        index: usize,
        message: String,
    },

    #[error(
        "bundle file {file} holds {count} certificates; exactly one (the server certificate) is expected"
    )]
    NotSingleCertificate { file: String, count: usize },

    #[error(
        "the certificate in the bundle ({subject}, serial {serial}) is a CA certificate (basicConstraints CA:TRUE), not a server certificate"
    )]
    LeafIsCa { subject: String, serial: String },

    #[error(
        "the certificate in the bundle ({subject}, serial {serial}) is not for our private key"
    )]
    WrongKey { subject: String, serial: String },

    #[error(
        "the certificate in the bundle (serial {serial}) does not cover {domain} (it names: {names})"
    )]
    DomainNotCovered {
        domain: String,
        serial: String,
        names: String,
    },

    #[error(
        "the certificate in the bundle (serial {serial}) is not valid before {not_before} (now {now})"
    )]
    NotYetValid {
        serial: String,
        not_before: String,
        now: String,
        /// `not_before` as a time (for the caller's decision to hold the bundle).
        starts: time::OffsetDateTime,
    },

    #[error("the certificate in the bundle (serial {serial}) expired at {not_after} (now {now})")]
    Expired {
        serial: String,
        not_after: String,
        now: String,
    },

    #[error(
        "chain certificate {subject} is not valid at {now} (valid {not_before} to {not_after})"
    )]
    ChainCertificateNotValid {
        subject: String,
        not_before: String,
        not_after: String,
        now: String,
    },

    #[error(
        "chain certificate {subject} issues {child} but is not a CA (no basicConstraints CA:TRUE)"
    )]
    IssuerNotCa { subject: String, child: String },

    #[error(
        "the signature of {subject} does not verify with the key of {issuer}, its issuer by name: {message}"
    )]
    BadSignature {
        subject: String,
        issuer: String,
        message: String,
    },

    #[error("{subject} is signed with {algorithm}, which is not accepted")]
    WeakSignature { subject: String, algorithm: String },

    #[error(
        "the bundle's chain is broken: nothing in it issued {subject} (issuer {issuer}); not part of the chain: {unused}"
    )]
    ChainBroken {
        subject: String,
        issuer: String,
        unused: String,
    },

    #[error(
        "the bundle holds certificates that are not part of the chain from the server certificate to its root: {unused}"
    )]
    UnusedCertificates { unused: String },

    #[error("the chain does not end at a configured trust anchor: {detail}")]
    Untrusted { detail: String },

    #[error("bundle files disagree: {0}")]
    Inconsistent(String),
}
