//! ZIP archives the sandbox serves: the CA archive (`download`), the per-server bundle
//! (`download_bundle`), and deliberately broken variants for clients' hostile-input tests.

use std::io::{Cursor, Write};
use std::sync::OnceLock;

use rcgen::PublicKeyData;
use time::{Duration, OffsetDateTime};
use zip::write::SimpleFileOptions;
use zip::{CompressionMethod, ZipArchive, ZipWriter};

use crate::ca::{Authority, IssueRequest, certs_from_pem, pem_encode};

#[derive(Debug, thiserror::Error)]
pub enum BundleError {
    #[error("could not build archive: {0}")]
    Build(String),
}

fn build_err(e: impl std::fmt::Display) -> BundleError {
    BundleError::Build(e.to_string())
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

/// One certificate of an archive.
struct Cert {
    der: Vec<u8>,
    pem: String,
    /// Subject common name, or `None` when the subject has none.
    common_name: Option<String>,
}

/// The parts decoded: leaf, intermediates (nearest first), root.
struct Decoded {
    leaf: Cert,
    chain: Vec<Cert>,
    root: Cert,
}

impl Decoded {
    fn new(parts: &BundleParts<'_>) -> Result<Self, BundleError> {
        let one = |what: &str, pem: &str| -> Result<Cert, BundleError> {
            let mut certs = decode(what, pem)?;
            if certs.len() != 1 {
                return Err(BundleError::Build(format!(
                    "{what}: expected one certificate, found {}",
                    certs.len()
                )));
            }
            Ok(certs.remove(0))
        };
        let mut chain = Vec::new();
        for (i, pem) in parts.chain_pem.iter().enumerate() {
            chain.extend(decode(&format!("intermediate {}", i + 1), pem)?);
        }
        Ok(Self {
            leaf: one("leaf certificate", parts.leaf_pem)?,
            chain,
            root: one("root certificate", parts.root_pem)?,
        })
    }

    fn chain_pem(&self) -> String {
        self.chain.iter().map(|c| c.pem.as_str()).collect()
    }

    /// Leaf, intermediates, root.
    fn all(&self) -> impl Iterator<Item = &Cert> {
        std::iter::once(&self.leaf)
            .chain(&self.chain)
            .chain(std::iter::once(&self.root))
    }
}

fn decode(what: &str, pem: &str) -> Result<Vec<Cert>, BundleError> {
    let ders = certs_from_pem(pem).map_err(|e| BundleError::Build(format!("{what}: {e}")))?;
    ders.into_iter()
        .map(|der| {
            let (_, x509) = x509_parser::parse_x509_certificate(&der)
                .map_err(|e| BundleError::Build(format!("{what}: not a certificate: {e}")))?;
            let common_name = x509
                .subject()
                .iter_common_name()
                .next()
                .and_then(|cn| cn.as_str().ok())
                .map(str::to_string);
            Ok(Cert {
                pem: pem_encode("CERTIFICATE", &der),
                der,
                common_name,
            })
        })
        .collect()
}

/// A file name made from a certificate name: `*` becomes `STAR` (so `*.example.com` gives
/// `STAR.example.com`), path separators, control characters and `:` become `_`, and a name
/// that would still be empty, `.` or `..` becomes `certificate`.
pub fn file_stem(name: &str) -> String {
    let mut stem = String::with_capacity(name.len() + 3);
    for c in name.chars() {
        match c {
            '*' => stem.push_str("STAR"),
            '/' | '\\' | ':' => stem.push('_'),
            c if c.is_control() => stem.push('_'),
            c => stem.push(c),
        }
    }
    if stem.is_empty() || stem == "." || stem == ".." {
        "certificate".to_string()
    } else {
        stem
    }
}

/// Names `{stem}{ext}` for each certificate, made unique with `-2`, `-3`… in order.
fn unique_names<'a>(stems: impl Iterator<Item = String> + 'a, ext: &'a str) -> Vec<String> {
    let mut names: Vec<String> = Vec::new();
    for stem in stems {
        let mut name = format!("{stem}{ext}");
        let mut n = 2;
        while names.contains(&name) {
            name = format!("{stem}-{n}{ext}");
            n += 1;
        }
        names.push(name);
    }
    names
}

const README: &str = "\
Certificate bundle for {CN}

The private key is not included: it never left the server that made the request.

nginx/     fullchain.crt - certificate followed by the intermediate certificates
apache/    certificate.crt - certificate; ca_bundle.crt - intermediates, nearest first
iis/       certificate.p7b - PKCS#7 with certificate, intermediates and root
pem/       the same certificates as separate PEM files
exchange/  one .crt file per certificate, named after its common name

A wildcard name such as *.example.com is written STAR.example.com in file names.
";

const README_NGINX: &str = "\
fullchain.crt: the certificate for {CN} followed by the intermediate certificates.

    ssl_certificate     /path/to/fullchain.crt;
    ssl_certificate_key /path/to/your/private.key;
";

const README_APACHE: &str = "\
certificate.crt: the certificate for {CN}.
ca_bundle.crt:   the intermediate certificates, nearest first.

    SSLCertificateFile      /path/to/certificate.crt
    SSLCertificateChainFile /path/to/ca_bundle.crt
    SSLCertificateKeyFile   /path/to/your/private.key

(Apache 2.4.8 and later also accept the certificate and the chain together in
SSLCertificateFile.)
";

const README_IIS: &str = "\
certificate.p7b: PKCS#7 (DER) with the certificate for {CN}, the intermediates and the root.
Import it with \"Complete Certificate Request\" on the server that made the request.
";

const README_PEM: &str = "\
{STEM}.pem     the certificate for {CN}
chain.pem      intermediate certificates, nearest first
root.pem       the root certificate
fullchain.pem  certificate followed by the intermediates
ca-bundle.pem  intermediates followed by the root
";

const README_EXCHANGE: &str = "\
One file per certificate, named after its common name: the certificate for {CN}, each
intermediate and the root.
";

fn fill(template: &str, parts: &BundleParts<'_>) -> Vec<u8> {
    template
        .replace("{CN}", parts.common_name)
        .replace("{STEM}", &file_stem(parts.common_name))
        .into_bytes()
}

/// The entries of the per-server bundle, in archive order.
fn server_entries(parts: &BundleParts<'_>) -> Result<Vec<(String, Vec<u8>)>, BundleError> {
    let d = Decoded::new(parts)?;
    let stem = file_stem(parts.common_name);
    let leaf = d.leaf.pem.clone();
    let chain = d.chain_pem();
    let root = d.root.pem.clone();
    let ders: Vec<Vec<u8>> = d.all().map(|c| c.der.clone()).collect();

    let mut entries = vec![
        ("README.txt".to_string(), fill(README, parts)),
        ("nginx/README.txt".to_string(), fill(README_NGINX, parts)),
        (
            "nginx/fullchain.crt".to_string(),
            format!("{leaf}{chain}").into_bytes(),
        ),
        ("apache/README.txt".to_string(), fill(README_APACHE, parts)),
        (
            "apache/certificate.crt".to_string(),
            leaf.clone().into_bytes(),
        ),
        (
            "apache/ca_bundle.crt".to_string(),
            chain.clone().into_bytes(),
        ),
        ("iis/README.txt".to_string(), fill(README_IIS, parts)),
        ("iis/certificate.p7b".to_string(), pkcs7_certs_only(&ders)),
        ("pem/README.txt".to_string(), fill(README_PEM, parts)),
        (format!("pem/{stem}.pem"), leaf.clone().into_bytes()),
        ("pem/chain.pem".to_string(), chain.clone().into_bytes()),
        ("pem/root.pem".to_string(), root.clone().into_bytes()),
        (
            "pem/fullchain.pem".to_string(),
            format!("{leaf}{chain}").into_bytes(),
        ),
        (
            "pem/ca-bundle.pem".to_string(),
            format!("{chain}{root}").into_bytes(),
        ),
        (
            "exchange/README.txt".to_string(),
            fill(README_EXCHANGE, parts),
        ),
    ];
    let stems = d.all().enumerate().map(|(i, c)| match (i, &c.common_name) {
        (0, _) => stem.clone(),
        (_, Some(cn)) => file_stem(cn),
        (_, None) => format!("certificate-{i}"),
    });
    for (name, cert) in unique_names(stems, ".crt").into_iter().zip(d.all()) {
        entries.push((format!("exchange/{name}"), cert.pem.clone().into_bytes()));
    }
    Ok(entries)
}

/// The per-server bundle of endpoint 15, in exactly the documented layout:
///
/// ```text
/// README.txt
/// nginx/README.txt       nginx/fullchain.crt        leaf + intermediates
/// apache/README.txt      apache/certificate.crt     leaf
///                        apache/ca_bundle.crt       intermediates, nearest first
/// iis/README.txt         iis/certificate.p7b        PKCS#7 DER: leaf, intermediates, root
/// pem/README.txt         pem/{common_name}.pem      leaf
///                        pem/chain.pem              intermediates
///                        pem/root.pem               root
///                        pem/fullchain.pem          leaf + intermediates
///                        pem/ca-bundle.pem          intermediates + root
/// exchange/README.txt    exchange/{name}.crt        one per certificate (leaf, each
///                                                   intermediate, root), named after its
///                                                   own common name
/// ```
///
/// File names go through [`file_stem`]: a wildcard common name `*.example.com` becomes
/// `STAR.example.com` (`pem/STAR.example.com.pem`, `exchange/STAR.example.com.crt`).
/// `{common_name}` is `parts.common_name`; exchange names come from each certificate's
/// subject, with `-2`… appended should two coincide. No directory entries, never a private key;
/// all PEM text is re-encoded (64 columns, LF).
pub fn server_bundle(parts: &BundleParts<'_>) -> Result<Vec<u8>, BundleError> {
    write_zip(&server_entries(parts)?)
}

/// The CA archive of endpoint 3, laid out the way CAs ship certificates by e-mail: one PEM
/// file per certificate, no folders, no README:
///
/// ```text
/// {common_name}.crt          the leaf (name through file_stem: *.example.com → STAR.example.com.crt)
/// {intermediate CN}.crt      each intermediate, nearest first, its common name without
///                            spaces (e.g. PartnerSandboxS-OneCA.crt)
/// {root CN}.crt              the root, likewise (PartnerSandboxRootCA.crt)
/// ```
pub fn ca_archive(parts: &BundleParts<'_>) -> Result<Vec<u8>, BundleError> {
    let d = Decoded::new(parts)?;
    let stems = d.all().enumerate().map(|(i, c)| match (i, &c.common_name) {
        (0, _) => file_stem(parts.common_name),
        (_, Some(cn)) => file_stem(&cn.replace(' ', "")),
        (_, None) => format!("certificate-{i}"),
    });
    let entries: Vec<(String, Vec<u8>)> = unique_names(stems, ".crt")
        .into_iter()
        .zip(d.all())
        .map(|(name, cert)| (name, cert.pem.clone().into_bytes()))
        .collect();
    write_zip(&entries)
}

fn file_options() -> SimpleFileOptions {
    SimpleFileOptions::default()
        .compression_method(CompressionMethod::Deflated)
        .unix_permissions(0o644)
}

fn write_zip(entries: &[(String, Vec<u8>)]) -> Result<Vec<u8>, BundleError> {
    let mut zip = ZipWriter::new(Cursor::new(Vec::new()));
    for (name, data) in entries {
        zip.start_file(name.as_str(), file_options())
            .map_err(build_err)?;
        zip.write_all(data).map_err(build_err)?;
    }
    Ok(zip.finish().map_err(build_err)?.into_inner())
}

/// DER tag-length-value.
fn tlv(tag: u8, content: &[u8]) -> Vec<u8> {
    let mut out = vec![tag];
    let len = content.len();
    if len < 0x80 {
        out.push(len as u8);
    } else {
        let bytes = len.to_be_bytes();
        let skip = bytes.iter().take_while(|&&b| b == 0).count();
        out.push(0x80 | (bytes.len() - skip) as u8);
        out.extend_from_slice(&bytes[skip..]);
    }
    out.extend_from_slice(content);
    out
}

/// OID 1.2.840.113549.1.7.2 (signedData), DER.
const OID_SIGNED_DATA: &[u8] = &[
    0x06, 0x09, 0x2A, 0x86, 0x48, 0x86, 0xF7, 0x0D, 0x01, 0x07, 0x02,
];
/// OID 1.2.840.113549.1.7.1 (data), DER.
const OID_DATA: &[u8] = &[
    0x06, 0x09, 0x2A, 0x86, 0x48, 0x86, 0xF7, 0x0D, 0x01, 0x07, 0x01,
];

/// A PKCS#7 SignedData "certs-only" structure (DER) holding `certs_der`.
///
/// RFC 2315 / RFC 5652: `ContentInfo { signedData, [0] SignedData { version 1,
/// digestAlgorithms {}, contentInfo { data }, certificates [0] IMPLICIT …, signerInfos {} } }`.
/// The certificates keep the given order (as `openssl crl2pkcs7` does) rather than DER's
/// sorted SET OF, because readers show them in encoded order.
pub fn pkcs7_certs_only(certs_der: &[Vec<u8>]) -> Vec<u8> {
    const SEQUENCE: u8 = 0x30;
    const SET: u8 = 0x31;
    const CONTEXT_0: u8 = 0xA0;
    let signed_data = [
        tlv(0x02, &[0x01]),                  // version
        tlv(SET, &[]),                       // digestAlgorithms
        tlv(SEQUENCE, OID_DATA),             // contentInfo, no content
        tlv(CONTEXT_0, &certs_der.concat()), // certificates
        tlv(SET, &[]),                       // signerInfos
    ]
    .concat();
    let content_info = [
        OID_SIGNED_DATA.to_vec(),
        tlv(CONTEXT_0, &tlv(SEQUENCE, &signed_data)),
    ]
    .concat();
    tlv(SEQUENCE, &content_info)
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
    /// A whole chain from another authority of the same names: the leaf for the CSR's key
    /// and names, its intermediate and root of other keys (a forged bundle that links).
    ForeignCa,
    /// The genuine bundle without its intermediate certificates: `nginx/fullchain.crt` holds
    /// the leaf alone and `apache/ca_bundle.crt` nothing (a chain that clients cannot build).
    NoIntermediate,
}

impl HostileKind {
    /// Every kind, for tests that go through them all.
    pub const ALL: [HostileKind; 10] = [
        HostileKind::DotDot,
        HostileKind::Absolute,
        HostileKind::Symlink,
        HostileKind::Oversized,
        HostileKind::Truncated,
        HostileKind::WrongKey,
        HostileKind::OtherDomain,
        HostileKind::Expired,
        HostileKind::ForeignCa,
        HostileKind::NoIntermediate,
    ];
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

/// The only name of the `OtherDomain` leaf.
pub const OTHER_DOMAIN: &str = "other-domain.invalid";
/// Uncompressed size of the oversized entry: 65 MiB, above a 64 MiB limit.
pub const OVERSIZED_LEN: u64 = 65 * 1024 * 1024;
const SYMLINK_TARGET: &str = "/etc/shadow";
const VICTIM: &str = "nginx/fullchain.crt";

/// A per-server bundle broken in the way `kind` says:
///
/// - `DotDot`, `Absolute`: the genuine bundle with the hostile entries (holding the leaf PEM)
///   added right after the top `README.txt`.
/// - `Symlink`: `nginx/fullchain.crt` is a symlink entry (unix mode `0o120777`) whose target
///   is `/etc/shadow`.
/// - `Oversized`: `nginx/fullchain.crt` inflates to [`OVERSIZED_LEN`] zero bytes from about
///   64 KiB compressed; its header declares the real size.
/// - `Truncated`: the first half of the genuine bundle's bytes.
/// - `WrongKey`, `OtherDomain`, `Expired`: a normal bundle around a leaf that `ca` really
///   issued: for a fresh P-256 key; for [`OTHER_DOMAIN`] only; valid from `now - 200 days` to
///   `now - 1 day`. The first two keep the genuine leaf's validity.
/// - `ForeignCa`: the genuine leaf's key, names and validity issued by a fresh authority of
///   the same names, with that authority's intermediate and root.
/// - `NoIntermediate`: the genuine bundle with no intermediate anywhere (the leaf alone in
///   `nginx/fullchain.crt`, `apache/ca_bundle.crt` empty).
pub fn hostile_bundle(
    kind: HostileKind,
    input: &HostileInput<'_>,
    ca: &Authority,
) -> Result<Vec<u8>, BundleError> {
    let parts = &input.parts;
    match kind {
        HostileKind::DotDot | HostileKind::Absolute => {
            let names: &[&str] = if kind == HostileKind::DotDot {
                &["../evil.crt", "nginx/../../evil"]
            } else {
                &["/etc/evil.crt"]
            };
            let mut entries = server_entries(parts)?;
            for (i, name) in names.iter().enumerate() {
                let leaf = parts.leaf_pem.as_bytes().to_vec();
                entries.insert(1 + i, ((*name).to_string(), leaf));
            }
            write_zip(&entries)
        }
        HostileKind::Symlink | HostileKind::Oversized => {
            let entries = server_entries(parts)?;
            let mut zip = ZipWriter::new(Cursor::new(Vec::new()));
            for (name, data) in &entries {
                if name != VICTIM {
                    zip.start_file(name.as_str(), file_options())
                        .map_err(build_err)?;
                    zip.write_all(data).map_err(build_err)?;
                } else if kind == HostileKind::Symlink {
                    zip.add_symlink(
                        name.as_str(),
                        SYMLINK_TARGET,
                        file_options().unix_permissions(0o777),
                    )
                    .map_err(build_err)?;
                } else {
                    let mut source =
                        ZipArchive::new(Cursor::new(oversized_archive()?)).map_err(build_err)?;
                    let file = source.by_index_raw(0).map_err(build_err)?;
                    zip.raw_copy_file_rename(file, name.as_str())
                        .map_err(build_err)?;
                }
            }
            Ok(zip.finish().map_err(build_err)?.into_inner())
        }
        HostileKind::Truncated => {
            let mut bytes = server_bundle(parts)?;
            bytes.truncate(bytes.len() / 2);
            Ok(bytes)
        }
        HostileKind::WrongKey | HostileKind::OtherDomain | HostileKind::Expired => {
            let leaf = hostile_leaf(kind, input, ca)?;
            server_bundle(&BundleParts {
                leaf_pem: &leaf,
                ..parts.clone()
            })
        }
        HostileKind::NoIntermediate => server_bundle(&BundleParts {
            chain_pem: &[],
            ..parts.clone()
        }),
        HostileKind::ForeignCa => {
            let other = Authority::generate().map_err(build_err)?;
            let leaf = hostile_leaf(kind, input, &other)?;
            let chain = other.chain_pem(input.issuer).map_err(build_err)?;
            server_bundle(&BundleParts {
                leaf_pem: &leaf,
                chain_pem: &chain,
                root_pem: other.root_pem(),
                ..parts.clone()
            })
        }
    }
}

/// A zip whose only entry is [`OVERSIZED_LEN`] deflated zero bytes; built once, since
/// compressing 65 MiB is the slow part.
fn oversized_archive() -> Result<&'static [u8], BundleError> {
    static ARCHIVE: OnceLock<Result<Vec<u8>, String>> = OnceLock::new();
    let built = ARCHIVE.get_or_init(|| {
        let mut zip = ZipWriter::new(Cursor::new(Vec::new()));
        zip.start_file(VICTIM, file_options().compression_level(Some(6)))
            .map_err(|e| e.to_string())?;
        let block = vec![0u8; 1024 * 1024];
        for _ in 0..OVERSIZED_LEN / block.len() as u64 {
            zip.write_all(&block).map_err(|e| e.to_string())?;
        }
        Ok(zip.finish().map_err(|e| e.to_string())?.into_inner())
    });
    built.as_deref().map_err(|e| BundleError::Build(e.clone()))
}

/// The genuine leaf's facts gone wrong in the way `kind` says, issued by `ca`.
fn hostile_leaf(
    kind: HostileKind,
    input: &HostileInput<'_>,
    ca: &Authority,
) -> Result<String, BundleError> {
    let genuine = certs_from_pem(input.parts.leaf_pem)
        .map_err(build_err)?
        .into_iter()
        .next()
        .ok_or_else(|| BundleError::Build("leaf certificate: no CERTIFICATE block".into()))?;
    let (_, genuine) = x509_parser::parse_x509_certificate(&genuine)
        .map_err(|e| BundleError::Build(format!("leaf certificate: {e}")))?;
    let validity = genuine.validity();

    let other_spki;
    let other_names = [OTHER_DOMAIN.to_string()];
    let mut req = IssueRequest {
        issuer: input.issuer,
        public_key_der: input.public_key_der,
        common_name: input.common_name,
        dns_names: input.dns_names,
        not_before: validity.not_before.to_datetime(),
        not_after: validity.not_after.to_datetime(),
    };
    match kind {
        HostileKind::WrongKey => {
            other_spki = rcgen::KeyPair::generate()
                .map_err(build_err)?
                .subject_public_key_info();
            req.public_key_der = &other_spki;
        }
        HostileKind::OtherDomain => {
            req.common_name = OTHER_DOMAIN;
            req.dns_names = &other_names;
        }
        HostileKind::Expired => {
            req.not_before = input.now - Duration::days(200);
            req.not_after = input.now - Duration::days(1);
        }
        // The genuine leaf's facts; only the authority is another.
        HostileKind::ForeignCa => {}
        other => {
            return Err(BundleError::Build(format!(
                "{other:?} is not a fault of the leaf certificate"
            )));
        }
    }
    Ok(ca.issue(&req).map_err(build_err)?.pem)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ca::tests::{TempDir, openssl};
    use std::io::Read;
    use x509_parser::certificate::X509Certificate;

    struct Fixture {
        ca: Authority,
        spki: Vec<u8>,
        leaf_pem: String,
        chain: Vec<String>,
        names: Vec<String>,
        now: OffsetDateTime,
    }

    const WILDCARD: &str = "*.example.com";

    impl Fixture {
        fn new() -> Self {
            let ca = Authority::generate().expect("authority");
            let spki = rcgen::KeyPair::generate()
                .expect("key")
                .subject_public_key_info();
            let names = vec![WILDCARD.to_string(), "example.com".to_string()];
            let now = OffsetDateTime::now_utc();
            let leaf_pem = ca
                .issue(&IssueRequest {
                    issuer: "s-one",
                    public_key_der: &spki,
                    common_name: WILDCARD,
                    dns_names: &names,
                    not_before: now - Duration::HOUR,
                    not_after: now + Duration::days(90),
                })
                .expect("issue")
                .pem;
            let chain = ca.chain_pem("s-one").expect("chain");
            Self {
                ca,
                spki,
                leaf_pem,
                chain,
                names,
                now,
            }
        }

        fn parts(&self) -> BundleParts<'_> {
            BundleParts {
                common_name: WILDCARD,
                leaf_pem: &self.leaf_pem,
                chain_pem: &self.chain,
                root_pem: self.ca.root_pem(),
            }
        }

        fn hostile_input(&self) -> HostileInput<'_> {
            HostileInput {
                issuer: "s-one",
                public_key_der: &self.spki,
                common_name: WILDCARD,
                dns_names: &self.names,
                parts: self.parts(),
                now: self.now,
            }
        }
    }

    fn read_zip(bytes: &[u8]) -> Vec<(String, Vec<u8>)> {
        let mut zip = ZipArchive::new(Cursor::new(bytes)).expect("open zip");
        (0..zip.len())
            .map(|i| {
                let mut file = zip.by_index(i).expect("entry");
                let mut data = Vec::new();
                file.read_to_end(&mut data).expect("read entry");
                (file.name().to_string(), data)
            })
            .collect()
    }

    fn names(entries: &[(String, Vec<u8>)]) -> Vec<&str> {
        entries.iter().map(|(n, _)| n.as_str()).collect()
    }

    fn entry<'a>(entries: &'a [(String, Vec<u8>)], name: &str) -> &'a str {
        let data = &entries
            .iter()
            .find(|(n, _)| n == name)
            .unwrap_or_else(|| panic!("no entry {name}"))
            .1;
        std::str::from_utf8(data).expect("utf-8")
    }

    fn subjects(pem: &str) -> Vec<String> {
        certs_from_pem(pem)
            .expect("pem")
            .iter()
            .map(|der| {
                let (_, cert): (_, X509Certificate<'_>) =
                    x509_parser::parse_x509_certificate(der).expect("certificate");
                cert.subject()
                    .iter_common_name()
                    .next()
                    .and_then(|cn| cn.as_str().ok())
                    .expect("cn")
                    .to_string()
            })
            .collect()
    }

    const LEAF: &str = WILDCARD;
    const INT: &str = "Partner Sandbox S-One CA";
    const ROOT: &str = "Partner Sandbox Root CA";

    #[test]
    fn file_stems() {
        assert_eq!(file_stem("*.example.com"), "STAR.example.com");
        assert_eq!(file_stem("www.example.com"), "www.example.com");
        assert_eq!(file_stem("a/b\\c:d"), "a_b_c_d");
        assert_eq!(file_stem(".."), "certificate");
        assert_eq!(file_stem(""), "certificate");
    }

    #[test]
    fn server_bundle_has_the_documented_layout() {
        let fx = Fixture::new();
        let entries = read_zip(&server_bundle(&fx.parts()).expect("bundle"));
        assert_eq!(
            names(&entries),
            [
                "README.txt",
                "nginx/README.txt",
                "nginx/fullchain.crt",
                "apache/README.txt",
                "apache/certificate.crt",
                "apache/ca_bundle.crt",
                "iis/README.txt",
                "iis/certificate.p7b",
                "pem/README.txt",
                "pem/STAR.example.com.pem",
                "pem/chain.pem",
                "pem/root.pem",
                "pem/fullchain.pem",
                "pem/ca-bundle.pem",
                "exchange/README.txt",
                "exchange/STAR.example.com.crt",
                "exchange/Partner Sandbox S-One CA.crt",
                "exchange/Partner Sandbox Root CA.crt",
            ]
        );
        let expect = [
            ("nginx/fullchain.crt", vec![LEAF, INT]),
            ("apache/certificate.crt", vec![LEAF]),
            ("apache/ca_bundle.crt", vec![INT]),
            ("pem/STAR.example.com.pem", vec![LEAF]),
            ("pem/chain.pem", vec![INT]),
            ("pem/root.pem", vec![ROOT]),
            ("pem/fullchain.pem", vec![LEAF, INT]),
            ("pem/ca-bundle.pem", vec![INT, ROOT]),
            ("exchange/STAR.example.com.crt", vec![LEAF]),
            ("exchange/Partner Sandbox S-One CA.crt", vec![INT]),
            ("exchange/Partner Sandbox Root CA.crt", vec![ROOT]),
        ];
        for (name, want) in expect {
            assert_eq!(subjects(entry(&entries, name)), want, "{name}");
        }
        assert_eq!(entry(&entries, "apache/certificate.crt"), fx.leaf_pem);
        assert_eq!(entry(&entries, "pem/root.pem"), fx.ca.root_pem());
        for (name, data) in &entries {
            let text = String::from_utf8_lossy(data);
            assert!(!text.contains("PRIVATE KEY"), "{name}");
        }
        assert!(entry(&entries, "README.txt").contains("*.example.com"));

        // The PKCS#7 holds leaf, intermediate, root, in that order, for openssl.
        let tmp = TempDir::new("p7b");
        let p7b = &entries
            .iter()
            .find(|(n, _)| n == "iis/certificate.p7b")
            .expect("p7b")
            .1;
        fs_write(tmp.path(), "certificate.p7b", p7b);
        let (ok, text) = openssl(
            &[
                "pkcs7",
                "-inform",
                "DER",
                "-in",
                "certificate.p7b",
                "-print_certs",
            ],
            tmp.path(),
        );
        assert!(ok, "{text}");
        assert_eq!(subjects(&text), [LEAF, INT, ROOT]);

        // Byte for byte what openssl itself writes for the same certificates.
        let all = [
            entry(&entries, "pem/fullchain.pem"),
            entry(&entries, "pem/root.pem"),
        ]
        .concat();
        fs_write(tmp.path(), "all.pem", all.as_bytes());
        let (ok, text) = openssl(
            &[
                "crl2pkcs7",
                "-nocrl",
                "-certfile",
                "all.pem",
                "-outform",
                "DER",
                "-out",
                "openssl.p7b",
            ],
            tmp.path(),
        );
        assert!(ok, "{text}");
        let theirs = std::fs::read(tmp.path().join("openssl.p7b")).expect("openssl.p7b");
        assert_eq!(&theirs, p7b);
    }

    fn fs_write(dir: &std::path::Path, name: &str, data: &[u8]) {
        std::fs::write(dir.join(name), data).expect("write");
    }

    #[test]
    fn pkcs7_handles_long_lengths() {
        // Lengths of 0, < 128, < 256 and >= 256 bytes take different DER length forms.
        for len in [0usize, 5, 200, 70_000] {
            let encoded = tlv(0x04, &vec![7u8; len]);
            let (rest, obj) = x509_parser::der_parser::parse_der(&encoded).expect("DER");
            assert!(rest.is_empty());
            assert_eq!(obj.as_slice().expect("octets").len(), len);
        }
        let empty = pkcs7_certs_only(&[]);
        assert!(x509_parser::der_parser::parse_der(&empty).is_ok());
    }

    #[test]
    fn ca_archive_layout() {
        let fx = Fixture::new();
        let entries = read_zip(&ca_archive(&fx.parts()).expect("archive"));
        assert_eq!(
            names(&entries),
            [
                "STAR.example.com.crt",
                "PartnerSandboxS-OneCA.crt",
                "PartnerSandboxRootCA.crt"
            ]
        );
        assert_eq!(subjects(entry(&entries, "STAR.example.com.crt")), [LEAF]);
        assert_eq!(
            subjects(entry(&entries, "PartnerSandboxS-OneCA.crt")),
            [INT]
        );
        assert_eq!(
            subjects(entry(&entries, "PartnerSandboxRootCA.crt")),
            [ROOT]
        );
    }

    #[test]
    fn bad_parts_are_errors() {
        let fx = Fixture::new();
        for leaf in ["", "garbage", fx.ca.root_pem()] {
            let two = format!("{}{}", fx.leaf_pem, fx.leaf_pem);
            let leaf = if leaf == fx.ca.root_pem() { &two } else { leaf };
            let parts = BundleParts {
                leaf_pem: leaf,
                ..fx.parts()
            };
            assert!(server_bundle(&parts).is_err(), "{leaf}");
            assert!(ca_archive(&parts).is_err(), "{leaf}");
        }
        let bad = BundleParts {
            root_pem: "-----BEGIN CERTIFICATE-----\nAAAA\n-----END CERTIFICATE-----\n",
            ..fx.parts()
        };
        assert!(matches!(server_bundle(&bad), Err(BundleError::Build(_))));
    }

    fn leaf_of(bundle: &[u8]) -> Vec<u8> {
        let entries = read_zip(bundle);
        certs_from_pem(entry(&entries, "apache/certificate.crt"))
            .expect("pem")
            .remove(0)
    }

    #[test]
    fn hostile_bundles_have_their_property() {
        let fx = Fixture::new();
        let input = fx.hostile_input();
        let genuine_entries = read_zip(&server_bundle(&fx.parts()).expect("bundle"));
        let genuine_names = names(&genuine_entries);
        for kind in HostileKind::ALL {
            let bytes = hostile_bundle(kind, &input, &fx.ca).expect("hostile bundle");
            match kind {
                HostileKind::DotDot | HostileKind::Absolute => {
                    let entries = read_zip(&bytes);
                    let evil: &[&str] = if kind == HostileKind::DotDot {
                        &["../evil.crt", "nginx/../../evil"]
                    } else {
                        &["/etc/evil.crt"]
                    };
                    let mut zip = ZipArchive::new(Cursor::new(&bytes)).expect("zip");
                    for name in evil {
                        assert!(names(&entries).contains(name), "{kind:?} {name}");
                        let file = zip.by_name(name).expect("entry");
                        assert_eq!(file.name(), *name);
                        if kind == HostileKind::DotDot {
                            assert!(file.enclosed_name().is_none(), "{name}");
                        } else {
                            assert!(file.name().starts_with('/'));
                        }
                    }
                    assert_eq!(entries.len(), genuine_names.len() + evil.len());
                }
                HostileKind::Symlink => {
                    let mut zip = ZipArchive::new(Cursor::new(&bytes)).expect("zip");
                    let mut file = zip.by_name("nginx/fullchain.crt").expect("entry");
                    assert!(file.is_symlink());
                    assert_eq!(file.unix_mode(), Some(0o120777));
                    let mut target = String::new();
                    file.read_to_string(&mut target).expect("target");
                    assert_eq!(target, "/etc/shadow");
                    drop(file);
                    assert_eq!(names(&read_zip(&bytes)), genuine_names);
                }
                HostileKind::Oversized => {
                    let mut zip = ZipArchive::new(Cursor::new(&bytes)).expect("zip");
                    let file = zip.by_name("nginx/fullchain.crt").expect("entry");
                    assert_eq!(file.size(), OVERSIZED_LEN);
                    assert!(
                        file.compressed_size() < 256 * 1024,
                        "{}",
                        file.compressed_size()
                    );
                    let inflated =
                        std::io::copy(&mut { file }, &mut std::io::sink()).expect("inflate");
                    assert!(inflated > 64 * 1024 * 1024);
                    assert!(bytes.len() < 1024 * 1024);
                    drop(zip);
                    let names_now: Vec<String> = ZipArchive::new(Cursor::new(&bytes))
                        .expect("zip")
                        .file_names()
                        .map(str::to_string)
                        .collect();
                    assert_eq!(names_now.len(), genuine_names.len());
                }
                HostileKind::Truncated => {
                    let genuine = server_bundle(&fx.parts()).expect("bundle");
                    assert!(bytes.len() < genuine.len());
                    assert!(genuine.starts_with(&bytes));
                    assert!(ZipArchive::new(Cursor::new(&bytes)).is_err());
                }
                HostileKind::WrongKey | HostileKind::OtherDomain | HostileKind::Expired => {
                    assert_eq!(names(&read_zip(&bytes)), genuine_names);
                    let der = leaf_of(&bytes);
                    let (_, leaf) = x509_parser::parse_x509_certificate(&der).expect("leaf");
                    let genuine_der = leaf_of(&server_bundle(&fx.parts()).expect("bundle"));
                    assert_ne!(der, genuine_der);
                    // Still a certificate of the authority, chaining to the intermediate.
                    let int_der = certs_from_pem(&fx.chain[0]).expect("chain").remove(0);
                    let (_, int) = x509_parser::parse_x509_certificate(&int_der).expect("int");
                    leaf.verify_signature(Some(int.public_key()))
                        .expect("signed");
                    let cn = leaf
                        .subject()
                        .iter_common_name()
                        .next()
                        .and_then(|c| c.as_str().ok())
                        .expect("cn");
                    let key_matches = leaf.public_key().raw == fx.spki.as_slice();
                    let expired = leaf.validity().not_after.to_datetime() < fx.now;
                    match kind {
                        HostileKind::WrongKey => {
                            assert!(!key_matches && cn == WILDCARD && !expired)
                        }
                        HostileKind::OtherDomain => {
                            assert!(key_matches && cn == OTHER_DOMAIN && !expired);
                            let san = leaf.subject_alternative_name().expect("san").expect("san");
                            assert_eq!(san.value.general_names.len(), 1);
                        }
                        _ => assert!(key_matches && cn == WILDCARD && expired),
                    }
                }
                HostileKind::ForeignCa => {
                    assert_eq!(names(&read_zip(&bytes)), genuine_names);
                    let der = leaf_of(&bytes);
                    let (_, leaf) = x509_parser::parse_x509_certificate(&der).expect("leaf");
                    let genuine_der = leaf_of(&server_bundle(&fx.parts()).expect("bundle"));
                    let (_, genuine) =
                        x509_parser::parse_x509_certificate(&genuine_der).expect("genuine");
                    // The genuine leaf's key, names and issuer name; not the authority's.
                    assert_eq!(leaf.public_key().raw, fx.spki.as_slice());
                    assert_eq!(leaf.subject(), genuine.subject());
                    assert_eq!(leaf.issuer(), genuine.issuer());
                    let int_der = certs_from_pem(&fx.chain[0]).expect("chain").remove(0);
                    let (_, int) = x509_parser::parse_x509_certificate(&int_der).expect("int");
                    assert!(leaf.verify_signature(Some(int.public_key())).is_err());
                }
                HostileKind::NoIntermediate => {
                    let entries = read_zip(&bytes);
                    // Only the intermediate's own file of `exchange/` is gone.
                    let missing: Vec<_> = genuine_names
                        .iter()
                        .filter(|n| !names(&entries).contains(n))
                        .map(|n| n.to_string())
                        .collect();
                    assert_eq!(missing, ["exchange/Partner Sandbox S-One CA.crt"]);
                    let fullchain =
                        certs_from_pem(entry(&entries, "nginx/fullchain.crt")).expect("fullchain");
                    assert_eq!(fullchain, vec![leaf_of(&bytes)], "the leaf alone");
                    assert_eq!(
                        leaf_of(&bytes),
                        leaf_of(&server_bundle(&fx.parts()).expect("bundle"))
                    );
                    assert!(entry(&entries, "apache/ca_bundle.crt").is_empty());
                    assert!(entry(&entries, "pem/chain.pem").is_empty());
                }
            }
        }
    }
}
