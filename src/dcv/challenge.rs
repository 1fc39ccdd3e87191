//! The neutral challenge: what an issuer asks to be published so that a CA can validate a
//! certificate's names, whatever the issuer. The Partner API's CSR-hash file and ACME's
//! `http-01` file are both an [`HttpChallenge`]; its DNS TXT/CNAME records and ACME's `dns-01`
//! are a [`DnsRecord`]; email approval is a step for a person. The writers of this module
//! (webroot, standalone server, DNS hook) and the fleet's validation values serve any of them.

use super::ValidationFile;
use super::hook::DnsRecord;

/// One thing to publish for validation.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Challenge {
    /// A file the CA fetches over HTTP from the names in `domains`.
    Http(HttpChallenge),
    /// A DNS record the CA looks up.
    Dns(DnsRecord),
    /// A step only a person can take (approve an email, create a record by hand); the text
    /// says what to do.
    Person(String),
}

/// An HTTP validation file and the names it is fetched through: each of them gets it in its
/// webroot (or from the standalone server).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HttpChallenge {
    /// The file: directory, name and content.
    pub file: ValidationFile,
    /// The names the CA fetches it through.
    pub domains: Vec<String>,
}
