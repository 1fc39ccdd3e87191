//! Picking the files for a web server out of an unpacked bundle and validating them: the
//! leaf is for our key and names, valid now and not a CA; the chain links by names and
//! signatures; optionally it ends at a configured trust anchor.

use rustls_pki_types::CertificateDer;
use rustls_pki_types::pem::{PemObject, SectionKind};
use time::OffsetDateTime;
use x509_parser::oid_registry::{OID_PKCS1_SHA1WITHRSA, OID_SHA1_WITH_RSA};
use x509_parser::prelude::{FromDer, X509Certificate};

pub use crate::values::ServerKind;

use super::BundleError;
use super::archive::{Archive, NAME_CHARS};
use crate::clock::rfc3339;
use crate::crypto::{pem_encode, same_public_key, san_dns_names, serial_hex};
use crate::values::text::quote_max;

/// What the certificate in a bundle must match.
#[derive(Debug, Clone, Copy)]
pub struct Expected<'a> {
    /// DER of the SubjectPublicKeyInfo of our private key.
    pub public_key_der: &'a [u8],
    /// Every configured domain; each must be covered by a subjectAltName DNS name of the
    /// leaf. A configured wildcard (`*.example.com`) must appear as such in the certificate.
    pub domains: &'a [String],
    /// The time at which the certificate must be valid.
    pub now: OffsetDateTime,
    /// When not empty, the chain must end at one of these (e.g. `api.ca_file`).
    pub trust_anchors: &'a [CertificateDer<'a>],
}

/// A bundle that passed validation: what the installer writes. PEM is re-encoded from the
/// validated DER, so nothing but those certificates reaches the disk.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ValidatedBundle {
    /// The server the files were picked for.
    pub server: ServerKind,
    /// The server certificate.
    pub leaf_pem: String,
    /// Intermediates, nearest first, without the root (empty when there are none).
    pub chain_pem: String,
    /// `leaf_pem` followed by `chain_pem`.
    pub fullchain_pem: String,
    /// The self-signed root, when the bundle holds it.
    pub root_pem: Option<String>,
    pub leaf_der: Vec<u8>,
    /// Intermediates, nearest first.
    pub chain_der: Vec<Vec<u8>>,
    /// Serial number, upper-case hex without leading zero bytes.
    pub serial_hex: String,
    pub not_before: OffsetDateTime,
    pub not_after: OffsetDateTime,
    /// Subject and issuer of the leaf (RFC 4514).
    pub subject: String,
    pub issuer: String,
    pub common_name: Option<String>,
    /// subjectAltName DNS names of the leaf.
    pub dns_names: Vec<String>,
}

/// One certificate read from a bundle file.
struct Source {
    file: String,
    index: usize,
    der: Vec<u8>,
}

/// Picks the files for `server` from `archive` and validates them against `expected`.
pub fn validate(
    archive: &Archive,
    server: ServerKind,
    expected: &Expected<'_>,
) -> Result<ValidatedBundle, BundleError> {
    let file = |name: &str| {
        archive.get(name).ok_or_else(|| BundleError::MissingFile {
            file: quote_max(name, NAME_CHARS),
            server,
        })
    };
    let mut sources: Vec<Source> = Vec::new();
    match server {
        ServerKind::Nginx => {
            let name = "nginx/fullchain.crt";
            sources.extend(read_pem(name, file(name)?)?);
        }
        ServerKind::Apache => {
            let (leaf_name, chain_name) = ("apache/certificate.crt", "apache/ca_bundle.crt");
            let leaf = read_pem(leaf_name, file(leaf_name)?)?;
            if leaf.len() != 1 {
                return Err(BundleError::NotSingleCertificate {
                    file: quote_max(leaf_name, NAME_CHARS),
                    count: leaf.len(),
                });
            }
            sources.extend(leaf);
            sources.extend(read_pem(chain_name, file(chain_name)?)?);
        }
        ServerKind::None => {
            let name = "pem/fullchain.pem";
            sources.extend(read_pem(name, file(name)?)?);
        }
    }

    check_sources(&sources, server, expected, Some(archive))
}

/// Validates a certificate chain an issuer handed over as PEM (the leaf first, then its
/// issuers, as ACME's `application/pem-certificate-chain`), for `server`: the same checks as
/// a bundle's files, without an archive around them.
pub fn validate_chain(
    pem: &[u8],
    server: ServerKind,
    expected: &Expected<'_>,
) -> Result<ValidatedBundle, BundleError> {
    const MAX_CERTIFICATES: usize = 10;
    let sources = read_pem("certificate chain", pem)?;
    if sources.len() > MAX_CERTIFICATES {
        return Err(BundleError::BadPem {
            file: quote_max("certificate chain", NAME_CHARS),
            problem: format!(
                "{} certificates, more than the {MAX_CERTIFICATES} a chain may hold",
                sources.len()
            ),
        });
    }
    check_sources(&sources, server, expected, None)
}

/// The checks of every chain, whoever issued it: the leaf against `expected`, the chain
/// linked by names and signatures up to a trust anchor when some are given; for server
/// `none`, the other `pem/` files of `archive` agree with the chain.
fn check_sources(
    sources: &[Source],
    server: ServerKind,
    expected: &Expected<'_>,
    archive: Option<&Archive>,
) -> Result<ValidatedBundle, BundleError> {
    let mut certs = Vec::with_capacity(sources.len());
    for s in sources {
        certs.push(parse(s)?);
    }
    let leaf = &certs[0];
    check_leaf(leaf, &sources[0], expected)?;
    let links = link_chain(&certs, expected.now)?;

    let mut root = links.root;
    if let (ServerKind::None, Some(archive)) = (server, archive) {
        root = cross_check_pem_dir(archive, &certs, &links.chain, root)?;
    }
    for cert in std::iter::once(leaf).chain(links.chain.iter().map(|&i| &certs[i])) {
        check_signature_algorithm(cert)?;
    }
    let top = links.chain.last().map_or(leaf, |&i| &certs[i]);
    if links.chain.is_empty() && root.is_none() && expected.trust_anchors.is_empty() {
        return Err(BundleError::ChainBroken {
            subject: leaf.subject().to_string(),
            issuer: leaf.issuer().to_string(),
            unused: "the bundle holds no issuer certificate".to_owned(),
        });
    }
    if !expected.trust_anchors.is_empty() {
        check_anchor(
            top,
            root.as_ref().map(|r| r.cert(&certs)),
            expected.trust_anchors,
        )?;
    }

    let leaf_pem = pem_encode("CERTIFICATE", leaf.as_raw());
    let chain_der: Vec<Vec<u8>> = links
        .chain
        .iter()
        .map(|&i| certs[i].as_raw().to_vec())
        .collect();
    let chain_pem: String = chain_der
        .iter()
        .map(|d| pem_encode("CERTIFICATE", d))
        .collect();
    let root_pem = root
        .as_ref()
        .map(|r| pem_encode("CERTIFICATE", r.cert(&certs).der()));
    Ok(ValidatedBundle {
        server,
        fullchain_pem: format!("{leaf_pem}{chain_pem}"),
        leaf_pem,
        chain_pem,
        root_pem,
        leaf_der: leaf.as_raw().to_vec(),
        chain_der,
        serial_hex: serial_hex(leaf.raw_serial()),
        not_before: leaf.validity().not_before.to_datetime(),
        not_after: leaf.validity().not_after.to_datetime(),
        subject: leaf.subject().to_string(),
        issuer: leaf.issuer().to_string(),
        common_name: leaf
            .subject()
            .iter_common_name()
            .next()
            .and_then(|cn| cn.as_str().ok())
            .map(str::to_owned),
        dns_names: dns_names(leaf, &sources[0])?,
    })
}

/// Every certificate of a PEM file; anything but certificates, or no certificate, is an
/// error.
fn read_pem(file: &str, data: &[u8]) -> Result<Vec<Source>, BundleError> {
    let bad = |problem: String| BundleError::BadPem {
        file: quote_max(file, NAME_CHARS),
        problem,
    };
    let mut out = Vec::new();
    for section in <(SectionKind, Vec<u8>)>::pem_slice_iter(data) {
        let (kind, der) = section.map_err(|e| bad(format!("invalid PEM: {e}")))?;
        if kind != SectionKind::Certificate {
            return Err(bad(format!("unexpected {kind:?} section")));
        }
        out.push(Source {
            file: file.to_owned(),
            index: out.len() + 1,
            der,
        });
    }
    if out.is_empty() {
        return Err(bad("no PEM certificate in it (not PEM content)".to_owned()));
    }
    Ok(out)
}

fn parse(s: &Source) -> Result<X509Certificate<'_>, BundleError> {
    let bad = |message: String| BundleError::BadCertificate {
        file: quote_max(&s.file, NAME_CHARS),
        index: s.index,
        message,
    };
    let (rest, cert) = X509Certificate::from_der(&s.der).map_err(|e| bad(e.to_string()))?;
    if !rest.is_empty() {
        return Err(bad(format!("{} bytes after the certificate", rest.len())));
    }
    Ok(cert)
}

fn check_leaf(
    leaf: &X509Certificate<'_>,
    source: &Source,
    expected: &Expected<'_>,
) -> Result<(), BundleError> {
    let serial = serial_hex(leaf.raw_serial());
    let subject = leaf.subject().to_string();
    let bc = leaf
        .basic_constraints()
        .map_err(|e| BundleError::BadCertificate {
            file: quote_max(&source.file, NAME_CHARS),
            index: source.index,
            message: format!("basicConstraints: {e}"),
        })?;
    if bc.is_some_and(|bc| bc.value.ca) {
        return Err(BundleError::LeafIsCa { subject, serial });
    }
    if !same_public_key(leaf.public_key().raw, expected.public_key_der) {
        return Err(BundleError::WrongKey { subject, serial });
    }
    let names = dns_names(leaf, source)?;
    for domain in expected.domains {
        if !names.iter().any(|n| covers(n, domain)) {
            return Err(BundleError::DomainNotCovered {
                domain: domain.clone(),
                serial,
                names: if names.is_empty() {
                    "no DNS names".to_owned()
                } else {
                    names
                        .iter()
                        .map(|n| quote_max(n, NAME_CHARS))
                        .collect::<Vec<_>>()
                        .join(", ")
                },
            });
        }
    }
    let not_before = leaf.validity().not_before.to_datetime();
    let not_after = leaf.validity().not_after.to_datetime();
    if expected.now < not_before {
        return Err(BundleError::NotYetValid {
            serial,
            not_before: rfc3339(not_before),
            now: rfc3339(expected.now),
            starts: not_before,
        });
    }
    if expected.now > not_after {
        return Err(BundleError::Expired {
            serial,
            not_after: rfc3339(not_after),
            now: rfc3339(expected.now),
        });
    }
    Ok(())
}

fn dns_names(cert: &X509Certificate<'_>, source: &Source) -> Result<Vec<String>, BundleError> {
    san_dns_names(cert).map_err(|message| BundleError::BadCertificate {
        file: quote_max(&source.file, NAME_CHARS),
        index: source.index,
        message,
    })
}

/// True when the certificate name `san` covers the configured `domain`: equal (without case
/// or a trailing dot), or `san` is `*.<base>` with at least two labels in `base` and `domain`
/// is one non-empty label followed by `.<base>`. A configured wildcard is only covered by the
/// same wildcard.
fn covers(san: &str, domain: &str) -> bool {
    let norm = |s: &str| s.strip_suffix('.').unwrap_or(s).to_ascii_lowercase();
    let (san, domain) = (norm(san), norm(domain));
    if san == domain {
        return true;
    }
    let Some(base) = san.strip_prefix("*.") else {
        return false;
    };
    if base.contains('*') || base.split('.').count() < 2 || base.split('.').any(str::is_empty) {
        return false;
    }
    match domain.split_once('.') {
        Some((label, rest)) => !label.is_empty() && label != "*" && rest == base,
        None => false,
    }
}

/// Where the root of the chain was found.
enum Root {
    /// Index into the certificates of the selected files.
    InFiles(usize),
    /// From `pem/root.pem` (server `none`).
    Extra(Vec<u8>),
}

impl Root {
    fn cert<'c>(&'c self, certs: &'c [X509Certificate<'c>]) -> RootRef<'c> {
        match self {
            Root::InFiles(i) => RootRef::Parsed(&certs[*i]),
            Root::Extra(der) => RootRef::Der(der),
        }
    }
}

enum RootRef<'c> {
    Parsed(&'c X509Certificate<'c>),
    Der(&'c [u8]),
}

impl RootRef<'_> {
    fn der(&self) -> &[u8] {
        match self {
            RootRef::Parsed(c) => c.as_raw(),
            RootRef::Der(d) => d,
        }
    }
}

struct Links {
    /// Indices of intermediates, nearest first.
    chain: Vec<usize>,
    root: Option<Root>,
}

/// Links the leaf (`certs[0]`) to its issuers among the other certificates, in any order:
/// each issuer is found by name and must verify the signature. Every certificate must be
/// used; the walk stops at a self-issued certificate (the root).
fn link_chain(certs: &[X509Certificate<'_>], now: OffsetDateTime) -> Result<Links, BundleError> {
    let mut pool: Vec<usize> = (1..certs.len()).collect();
    let mut chain = Vec::new();
    let mut root = None;
    let mut current = 0usize;
    loop {
        let child = &certs[current];
        let candidates: Vec<usize> = pool
            .iter()
            .copied()
            .filter(|&i| certs[i].subject().as_raw() == child.issuer().as_raw())
            .collect();
        let Some(&first) = candidates.first() else {
            break;
        };
        let mut last_err = String::new();
        let issuer = candidates.iter().copied().find(|&i| {
            match child.verify_signature(Some(certs[i].public_key())) {
                Ok(()) => true,
                Err(e) => {
                    last_err = e.to_string();
                    false
                }
            }
        });
        let Some(issuer) = issuer else {
            return Err(BundleError::BadSignature {
                subject: child.subject().to_string(),
                issuer: certs[first].subject().to_string(),
                message: last_err,
            });
        };
        pool.retain(|&i| i != issuer);
        let cert = &certs[issuer];
        if !cert.is_ca() {
            return Err(BundleError::IssuerNotCa {
                subject: cert.subject().to_string(),
                child: child.subject().to_string(),
            });
        }
        let (nb, na) = (
            cert.validity().not_before.to_datetime(),
            cert.validity().not_after.to_datetime(),
        );
        if now < nb || now > na {
            return Err(BundleError::ChainCertificateNotValid {
                subject: cert.subject().to_string(),
                not_before: rfc3339(nb),
                not_after: rfc3339(na),
                now: rfc3339(now),
            });
        }
        if cert.subject().as_raw() == cert.issuer().as_raw() {
            root = Some(Root::InFiles(issuer));
            break;
        }
        chain.push(issuer);
        current = issuer;
    }
    if !pool.is_empty() {
        let unused = pool
            .iter()
            .map(|&i| certs[i].subject().to_string())
            .collect::<Vec<_>>()
            .join("; ");
        if root.is_some() {
            return Err(BundleError::UnusedCertificates { unused });
        }
        let top = &certs[chain.last().copied().unwrap_or(0)];
        return Err(BundleError::ChainBroken {
            subject: top.subject().to_string(),
            issuer: top.issuer().to_string(),
            unused,
        });
    }
    Ok(Links { chain, root })
}

/// Server `none`: the other `pem/` files must agree with `pem/fullchain.pem`. Returns the
/// root, completed from `pem/root.pem` when the fullchain does not hold it.
fn cross_check_pem_dir(
    archive: &Archive,
    certs: &[X509Certificate<'_>],
    chain: &[usize],
    root: Option<Root>,
) -> Result<Option<Root>, BundleError> {
    let inconsistent = |m: String| BundleError::Inconsistent(m);
    let mut known: Vec<Vec<u8>> = chain.iter().map(|&i| certs[i].as_raw().to_vec()).collect();
    let fullchain_root = match &root {
        Some(Root::InFiles(i)) => Some(certs[*i].as_raw()),
        _ => None,
    };
    known.extend(fullchain_root.map(<[u8]>::to_vec));

    let mut root = root;
    if let Some(data) = archive.get("pem/root.pem") {
        let roots = read_pem("pem/root.pem", data)?;
        let [r] = roots.as_slice() else {
            return Err(inconsistent(format!(
                "\"pem/root.pem\" holds {} certificates",
                roots.len()
            )));
        };
        match fullchain_root {
            Some(fr) if fr != r.der.as_slice() => {
                return Err(inconsistent(
                    "\"pem/root.pem\" is not the root of \"pem/fullchain.pem\"".to_owned(),
                ));
            }
            Some(_) => {}
            None => {
                let top = chain.last().map_or(&certs[0], |&i| &certs[i]);
                let rc = parse(r)?;
                let issues_top = rc.subject().as_raw() == top.issuer().as_raw()
                    && top.verify_signature(Some(rc.public_key())).is_ok();
                if !issues_top {
                    return Err(inconsistent(format!(
                        "\"pem/root.pem\" ({}) did not issue {}",
                        rc.subject(),
                        top.subject()
                    )));
                }
                known.push(r.der.clone());
                root = Some(Root::Extra(r.der.clone()));
            }
        }
    }
    check_subset(archive, &known)?;
    check_leaf_files(archive, certs[0].as_raw())?;
    Ok(root)
}

/// `pem/chain.pem` and `pem/ca-bundle.pem`, when present, hold only certificates of the
/// validated chain (or its root).
fn check_subset(archive: &Archive, known: &[Vec<u8>]) -> Result<(), BundleError> {
    for name in ["pem/chain.pem", "pem/ca-bundle.pem"] {
        if let Some(data) = archive.get(name) {
            for s in read_pem(name, data)? {
                if !known.contains(&s.der) {
                    let subject = parse(&s)?.subject().to_string();
                    return Err(BundleError::Inconsistent(format!(
                        "{} holds {subject}, which is not in the chain of \"pem/fullchain.pem\"",
                        quote_max(name, NAME_CHARS)
                    )));
                }
            }
        }
    }
    Ok(())
}

/// Every other `pem/*.pem` (the `{common_name}.pem`) holds exactly the leaf.
fn check_leaf_files(archive: &Archive, leaf_der: &[u8]) -> Result<(), BundleError> {
    const KNOWN: [&str; 4] = [
        "pem/fullchain.pem",
        "pem/chain.pem",
        "pem/root.pem",
        "pem/ca-bundle.pem",
    ];
    for name in archive.names() {
        let in_pem_dir = name
            .strip_prefix("pem/")
            .is_some_and(|rest| !rest.contains('/') && rest.ends_with(".pem"));
        if !in_pem_dir || KNOWN.contains(&name) {
            continue;
        }
        let data = archive.get(name).unwrap_or_default();
        let certs = read_pem(name, data)?;
        if certs.len() != 1 || certs[0].der != leaf_der {
            return Err(BundleError::Inconsistent(format!(
                "{} is not the server certificate of \"pem/fullchain.pem\"",
                quote_max(name, NAME_CHARS)
            )));
        }
    }
    Ok(())
}

fn check_anchor(
    top: &X509Certificate<'_>,
    root: Option<RootRef<'_>>,
    anchors: &[CertificateDer<'_>],
) -> Result<(), BundleError> {
    if let Some(root) = root {
        if anchors.iter().any(|a| a.as_ref() == root.der()) {
            return Ok(());
        }
        let subject = match root {
            RootRef::Parsed(c) => c.subject().to_string(),
            RootRef::Der(d) => X509Certificate::from_der(d)
                .map(|(_, c)| c.subject().to_string())
                .unwrap_or_default(),
        };
        return Err(BundleError::Untrusted {
            detail: format!("the bundle's root {subject} is not a configured trust anchor"),
        });
    }
    if anchors.iter().any(|a| a.as_ref() == top.as_raw()) {
        return Ok(());
    }
    // Only an anchor whose subject is the top certificate's issuer can have issued it: the
    // others are passed over by their subject's bytes, without parsing them (a system root
    // store holds about 150 roots, and every installed certificate is checked against it).
    let issuer = top.issuer().as_raw();
    for (i, a) in anchors.iter().enumerate() {
        if super::anchors::subject_der(a.as_ref()).is_some_and(|s| s != issuer) {
            continue;
        }
        let (_, anchor) =
            X509Certificate::from_der(a.as_ref()).map_err(|e| BundleError::Untrusted {
                detail: format!("trust anchor {} is unreadable: {e}", i + 1),
            })?;
        if anchor.subject().as_raw() == issuer && super::anchors::signed_by(top, &anchor) {
            return Ok(());
        }
    }
    Err(BundleError::Untrusted {
        detail: format!(
            "no configured trust anchor issued {} (issuer {})",
            top.subject(),
            top.issuer()
        ),
    })
}

/// SHA-1 signatures verify (x509-parser accepts them for legacy use) but are not accepted
/// on the leaf or an intermediate.
fn check_signature_algorithm(cert: &X509Certificate<'_>) -> Result<(), BundleError> {
    let alg = &cert.signature_algorithm.algorithm;
    if *alg == OID_PKCS1_SHA1WITHRSA || *alg == OID_SHA1_WITH_RSA {
        return Err(BundleError::WeakSignature {
            subject: cert.subject().to_string(),
            algorithm: "SHA-1 with RSA".to_owned(),
        });
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn wildcard_matching() {
        let yes = [
            ("www.example.com", "www.example.com"),
            ("WWW.Example.COM", "www.example.com"),
            ("www.example.com.", "www.example.com"),
            ("*.example.com", "www.example.com"),
            ("*.example.com", "*.example.com"),
            ("*.shop.example.com", "a.shop.example.com"),
        ];
        for (san, domain) in yes {
            assert!(covers(san, domain), "{san} should cover {domain}");
        }
        let no = [
            ("*.example.com", "example.com"),
            ("*.example.com", "a.b.example.com"),
            ("*.com", "example.com"),
            ("www.example.com", "*.example.com"),
            ("*.example.com", "*.a.example.com"),
            ("w*.example.com", "www.example.com"),
            ("*.*.com", "a.b.com"),
            ("example.com", "www.example.com"),
            ("*.example.com", ".example.com"),
        ];
        for (san, domain) in no {
            assert!(!covers(san, domain), "{san} should not cover {domain}");
        }
    }

    #[test]
    fn server_kind_strings() {
        for k in [ServerKind::Nginx, ServerKind::Apache, ServerKind::None] {
            assert_eq!(k.to_string().parse::<ServerKind>().unwrap(), k);
        }
        assert!("iis".parse::<ServerKind>().is_err());
    }
}
