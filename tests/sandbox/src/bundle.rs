//! ZIP archives the sandbox serves: the CA archive (`download`), the per-server bundle
//! (`download_bundle`), and deliberately broken variants for clients' hostile-input tests.

use time::OffsetDateTime;

use crate::ca::Authority;

#[derive(Debug, thiserror::Error)]
pub enum BundleError {
    #[error("could not build archive: {0}")]
    Build(String),
}

/// The certificates that go into an archive.
#[derive(Debug, Clone)]
pub struct BundleParts<'a> {
    pub common_name: &'a str,
    pub leaf_pem: &'a str,
    /// Intermediates, nearest first.
    pub chain_pem: &'a [String],
    pub root_pem: &'a str,
}

/// The per-server bundle of endpoint 15, in exactly the documented layout.
pub fn server_bundle(parts: &BundleParts<'_>) -> Result<Vec<u8>, BundleError> {
    let _ = parts;
    todo!("bundle helper")
}

/// The CA archive of endpoint 3.
pub fn ca_archive(parts: &BundleParts<'_>) -> Result<Vec<u8>, BundleError> {
    let _ = parts;
    todo!("bundle helper")
}

/// A PKCS#7 SignedData "certs-only" structure (DER) holding `certs_der`.
pub fn pkcs7_certs_only(certs_der: &[Vec<u8>]) -> Vec<u8> {
    let _ = certs_der;
    todo!("bundle helper")
}

/// Broken bundles for hostile-input tests of clients.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum HostileKind {
    /// An entry named `../evil.crt` (and `nginx/../../evil`).
    DotDot,
    /// An entry with an absolute name, `/etc/evil.crt`.
    Absolute,
    /// `nginx/fullchain.crt` stored as a symlink entry pointing to `/etc/shadow`.
    Symlink,
    /// An entry that inflates far beyond any certificate size (highly compressible).
    Oversized,
    /// A valid bundle cut in the middle.
    Truncated,
    /// Leaf certificate for a different key than the CSR's.
    WrongKey,
    /// Leaf certificate for another domain.
    OtherDomain,
    /// Leaf certificate that expired.
    Expired,
}

/// What a hostile variant is built from: the genuine certificate's facts.
#[derive(Debug, Clone)]
pub struct HostileInput<'a> {
    pub issuer: &'a str,
    pub public_key_der: &'a [u8],
    pub common_name: &'a str,
    pub dns_names: &'a [String],
    pub parts: BundleParts<'a>,
    pub now: OffsetDateTime,
}

/// A per-server bundle broken in the way `kind` says.
pub fn hostile_bundle(
    kind: HostileKind,
    input: &HostileInput<'_>,
    ca: &Authority,
) -> Result<Vec<u8>, BundleError> {
    let _ = (kind, input, ca);
    todo!("bundle helper")
}
