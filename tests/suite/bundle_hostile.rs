//! The bundle reader against good and hostile `download_bundle` archives (Partner API v1,
//! endpoint 15): ZIPs built here with the zip crate, certificates with rcgen (a root, an
//! intermediate, a leaf for our key). Every hostile variant must be refused with the error
//! that names its problem.

// Helpers outside #[test] functions panic on purpose when a fixture cannot be built.
#![allow(clippy::unwrap_used)]

use std::io::{Cursor, Write};

use cert_agent::testing::bundle::{
    Archive, BundleError, EntryProblem, Expected, Limits, ServerKind, read_bundle, validate,
    validate_chain,
};
use cert_agent::testing::crypto::{KeyType, PrivateKey};
use rcgen::{
    BasicConstraints, Certificate, CertificateParams, DistinguishedName, DnType, IsCa, Issuer,
    KeyPair, KeyUsagePurpose, SerialNumber,
};
use rustls_pki_types::CertificateDer;
use time::macros::datetime;
use time::{Duration, OffsetDateTime};
use zip::write::SimpleFileOptions;

const NOW: OffsetDateTime = datetime!(2026-06-01 12:00 UTC);

fn domains() -> Vec<String> {
    vec!["www.example.com".to_owned(), "example.com".to_owned()]
}

fn ca_params(cn: &str) -> CertificateParams {
    let mut p = CertificateParams::default();
    p.distinguished_name = DistinguishedName::new();
    p.distinguished_name.push(DnType::CommonName, cn);
    p.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    p.key_usages = vec![KeyUsagePurpose::KeyCertSign, KeyUsagePurpose::CrlSign];
    p.not_before = datetime!(2020-01-01 0:00 UTC);
    p.not_after = datetime!(2040-01-01 0:00 UTC);
    p
}

struct Ca {
    params: CertificateParams,
    key: KeyPair,
    cert: Certificate,
}

impl Ca {
    fn root(cn: &str) -> Self {
        let params = ca_params(cn);
        let key = KeyPair::generate().unwrap();
        let cert = params.self_signed(&key).unwrap();
        Self { params, key, cert }
    }

    fn intermediate(cn: &str, parent: &Ca) -> Self {
        let params = ca_params(cn);
        let key = KeyPair::generate().unwrap();
        let cert = params.signed_by(&key, &parent.issuer()).unwrap();
        Self { params, key, cert }
    }

    fn issuer(&self) -> Issuer<'_, &KeyPair> {
        Issuer::from_params(&self.params, &self.key)
    }

    fn pem(&self) -> String {
        self.cert.pem()
    }
}

/// What a leaf differs in from the good one.
#[derive(Default)]
struct LeafSpec {
    names: Option<Vec<String>>,
    not_before: Option<OffsetDateTime>,
    not_after: Option<OffsetDateTime>,
    ca: bool,
}

fn leaf_for(public_key_der: &[u8], issuer: &Ca, spec: LeafSpec) -> Certificate {
    let names = spec.names.unwrap_or_else(domains);
    let mut p = CertificateParams::new(names.clone()).unwrap();
    p.distinguished_name = DistinguishedName::new();
    p.distinguished_name
        .push(DnType::CommonName, names[0].as_str());
    p.serial_number = Some(SerialNumber::from_slice(&[0x0a, 0xbc, 0xde]));
    p.not_before = spec.not_before.unwrap_or(NOW - Duration::days(1));
    p.not_after = spec.not_after.unwrap_or(NOW + Duration::days(90));
    if spec.ca {
        p.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    }
    let spki = rcgen::SubjectPublicKeyInfo::from_der(public_key_der).unwrap();
    p.signed_by(&spki, &issuer.issuer()).unwrap()
}

/// A root, an intermediate and our key; the certificate files of a bundle.
struct Pki {
    root: Ca,
    int: Ca,
    key: PrivateKey,
    /// SubjectPublicKeyInfo DER of `key`.
    spki: Vec<u8>,
}

impl Pki {
    fn new() -> Self {
        let root = Ca::root("Sandbox Root");
        let int = Ca::intermediate("Sandbox Intermediate", &root);
        let key = PrivateKey::generate(KeyType::EcdsaP256).unwrap();
        let spki = key.public_key_der();
        Self {
            root,
            int,
            key,
            spki,
        }
    }

    fn leaf(&self, spec: LeafSpec) -> String {
        leaf_for(&self.key.public_key_der(), &self.int, spec).pem()
    }

    fn expected<'a>(&'a self, names: &'a [String]) -> Expected<'a> {
        Expected {
            public_key_der: &self.spki,
            domains: names,
            now: NOW,
            trust_anchors: &[],
        }
    }

    /// The documented layout with `leaf` (PEM) as the server certificate and the chain
    /// intermediate → root.
    fn bundle_files(&self, leaf: &str) -> Vec<(String, Vec<u8>)> {
        let (int, root) = (self.int.pem(), self.root.pem());
        let files: Vec<(&str, String)> = vec![
            ("README.txt", "Certificate bundle\n".to_owned()),
            ("nginx/README.txt", "nginx\n".to_owned()),
            ("nginx/fullchain.crt", format!("{leaf}{int}")),
            ("apache/README.txt", "apache\n".to_owned()),
            ("apache/certificate.crt", leaf.to_owned()),
            ("apache/ca_bundle.crt", format!("{int}{root}")),
            ("iis/README.txt", "iis\n".to_owned()),
            ("pem/README.txt", "pem\n".to_owned()),
            ("pem/www.example.com.pem", leaf.to_owned()),
            ("pem/chain.pem", int.clone()),
            ("pem/root.pem", root.clone()),
            ("pem/fullchain.pem", format!("{leaf}{int}")),
            ("pem/ca-bundle.pem", format!("{int}{root}")),
            ("exchange/README.txt", "exchange\n".to_owned()),
            ("exchange/www.example.com.crt", leaf.to_owned()),
        ];
        let mut out: Vec<(String, Vec<u8>)> = files
            .into_iter()
            .map(|(n, c)| (n.to_owned(), c.into_bytes()))
            .collect();
        // PKCS#7 is opaque binary to the reader.
        out.push((
            "iis/certificate.p7b".to_owned(),
            vec![0x30, 0x82, 0x00, 0x01, 0xff],
        ));
        out
    }

    fn good_zip(&self) -> Vec<u8> {
        zip_of(&self.bundle_files(&self.leaf(LeafSpec::default())))
    }

    /// The good bundle with one file's content replaced.
    fn zip_with(&self, name: &str, content: &[u8]) -> Vec<u8> {
        let mut files = self.bundle_files(&self.leaf(LeafSpec::default()));
        let slot = files.iter_mut().find(|(n, _)| n == name).unwrap();
        slot.1 = content.to_vec();
        zip_of(&files)
    }

    /// A bundle whose every server certificate is `leaf`.
    fn zip_with_leaf(&self, leaf: &str) -> Vec<u8> {
        zip_of(&self.bundle_files(leaf))
    }
}

fn zip_of(files: &[(String, Vec<u8>)]) -> Vec<u8> {
    let mut w = zip::ZipWriter::new(Cursor::new(Vec::new()));
    let opts = SimpleFileOptions::default().unix_permissions(0o644);
    for (name, data) in files {
        w.start_file(name.as_str(), opts).unwrap();
        w.write_all(data).unwrap();
    }
    w.finish().unwrap().into_inner()
}

/// Replaces every occurrence of `from` with `to` (same length) in the archive bytes: names
/// the zip writer refuses (duplicates, NUL) are made by renaming in both the local header and
/// the central directory.
fn patch(mut zip: Vec<u8>, from: &[u8], to: &[u8]) -> Vec<u8> {
    assert_eq!(from.len(), to.len());
    let mut hits = 0;
    let mut i = 0;
    while i + from.len() <= zip.len() {
        if &zip[i..i + from.len()] == from {
            zip[i..i + from.len()].copy_from_slice(to);
            hits += 1;
            i += from.len();
        } else {
            i += 1;
        }
    }
    assert!(hits >= 2, "patched {hits} occurrences of {from:?}");
    zip
}

/// The good bundle plus one extra entry named `name` (made with `placeholder`, same length,
/// then patched), to test names the writer would not write itself.
fn good_plus_entry(pki: &Pki, placeholder: &str, name: &[u8]) -> Vec<u8> {
    let mut files = pki.bundle_files(&pki.leaf(LeafSpec::default()));
    files.push((placeholder.to_owned(), b"evil".to_vec()));
    patch(zip_of(&files), placeholder.as_bytes(), name)
}

fn entry_problem(result: Result<impl std::fmt::Debug, BundleError>) -> (String, EntryProblem) {
    match result {
        Err(BundleError::Entry { name, problem }) => (name, problem),
        other => panic!("expected an entry error, got {other:?}"),
    }
}

fn read(
    zip: &[u8],
    server: ServerKind,
    pki: &Pki,
) -> Result<cert_agent::testing::bundle::ValidatedBundle, BundleError> {
    let names = domains();
    read_bundle(zip, server, &pki.expected(&names))
}

// ---- the good bundle ----

#[test]
fn good_bundle_passes_for_each_server_kind() {
    let pki = Pki::new();
    let leaf = pki.leaf(LeafSpec::default());
    let zip = pki.zip_with_leaf(&leaf);
    for server in [ServerKind::Nginx, ServerKind::Apache, ServerKind::None] {
        let v = read(&zip, server, &pki).unwrap_or_else(|e| panic!("{server}: {e}"));
        assert_eq!(v.server, server);
        assert_eq!(v.serial_hex, "0ABCDE");
        assert_eq!(v.common_name.as_deref(), Some("www.example.com"));
        assert_eq!(v.dns_names, domains());
        assert_eq!(v.not_after, NOW + Duration::days(90));
        assert_eq!(v.subject, "CN=www.example.com");
        assert_eq!(v.issuer, "CN=Sandbox Intermediate");
        // Re-encoded PEM equals rcgen's for the same DER.
        assert_eq!(v.leaf_pem.replace("\r\n", "\n"), leaf.replace("\r\n", "\n"));
        assert_eq!(
            v.chain_pem.replace("\r\n", "\n"),
            pki.int.pem().replace("\r\n", "\n")
        );
        assert_eq!(v.fullchain_pem, format!("{}{}", v.leaf_pem, v.chain_pem));
        assert_eq!(v.chain_der.len(), 1);
        let expect_root = server != ServerKind::Nginx;
        assert_eq!(v.root_pem.is_some(), expect_root, "{server}");
    }
}

#[test]
fn good_bundle_passes_with_the_trust_anchor() {
    let pki = Pki::new();
    let zip = pki.good_zip();
    let names = domains();
    let anchors = [CertificateDer::from(pki.root.cert.der().to_vec())];
    let expected = Expected {
        trust_anchors: &anchors,
        ..pki.expected(&names)
    };
    for server in [ServerKind::Nginx, ServerKind::Apache, ServerKind::None] {
        read_bundle(&zip, server, &expected).unwrap_or_else(|e| panic!("{server}: {e}"));
    }
    // Another root as anchor: refused, whether or not the bundle holds its root.
    let other = Ca::root("Other Root");
    let anchors = [CertificateDer::from(other.cert.der().to_vec())];
    let expected = Expected {
        trust_anchors: &anchors,
        ..pki.expected(&names)
    };
    for server in [ServerKind::Nginx, ServerKind::Apache, ServerKind::None] {
        let err = read_bundle(&zip, server, &expected).unwrap_err();
        assert!(
            matches!(err, BundleError::Untrusted { .. }),
            "{server}: {err}"
        );
    }
}

/// A store of many roots, as a system's is: the chain's root among them vouches for it
/// wherever it stands; a root that only carries its name (another key) vouches for nothing.
#[test]
fn among_many_anchors_only_the_roots_key_vouches_for_the_chain() {
    let pki = Pki::new();
    let zip = pki.good_zip();
    let names = domains();
    let der = |ca: &Ca| CertificateDer::from(ca.cert.der().to_vec());
    let mut store: Vec<CertificateDer<'static>> = (0..30)
        .map(|i| der(&Ca::root(&format!("Other Root {i}"))))
        .collect();
    store.insert(10, der(&Ca::root("Sandbox Root")));
    let refused = Expected {
        trust_anchors: &store,
        ..pki.expected(&names)
    };
    for server in [ServerKind::Nginx, ServerKind::Apache, ServerKind::None] {
        let err = read_bundle(&zip, server, &refused).unwrap_err();
        assert!(
            matches!(err, BundleError::Untrusted { .. }),
            "{server}: {err}"
        );
    }
    store.insert(20, der(&pki.root));
    let trusted = Expected {
        trust_anchors: &store,
        ..pki.expected(&names)
    };
    for server in [ServerKind::Nginx, ServerKind::Apache, ServerKind::None] {
        read_bundle(&zip, server, &trusted).unwrap_or_else(|e| panic!("{server}: {e}"));
    }
}

#[test]
fn wildcard_and_subset_of_names() {
    let pki = Pki::new();
    let leaf = pki.leaf(LeafSpec {
        names: Some(vec!["*.example.com".to_owned(), "example.com".to_owned()]),
        ..LeafSpec::default()
    });
    let zip = pki.zip_with_leaf(&leaf);
    for wanted in [
        vec!["www.example.com".to_owned()],
        vec!["example.com".to_owned(), "api.example.com".to_owned()],
        vec!["*.example.com".to_owned()],
    ] {
        read_bundle(&zip, ServerKind::Nginx, &pki.expected(&wanted))
            .unwrap_or_else(|e| panic!("{wanted:?}: {e}"));
    }
    for wanted in [
        vec!["a.b.example.com".to_owned()],
        vec!["example.org".to_owned()],
    ] {
        let err = read_bundle(&zip, ServerKind::Nginx, &pki.expected(&wanted)).unwrap_err();
        assert!(matches!(err, BundleError::DomainNotCovered { .. }), "{err}");
    }
}

#[test]
fn chain_in_any_order_is_linked() {
    let pki = Pki::new();
    // Root first, then the intermediate.
    let zip = pki.zip_with(
        "apache/ca_bundle.crt",
        format!("{}{}", pki.root.pem(), pki.int.pem()).as_bytes(),
    );
    let v = read(&zip, ServerKind::Apache, &pki).unwrap();
    assert_eq!(v.chain_der, vec![pki.int.cert.der().to_vec()]);
    assert_eq!(
        v.root_pem.unwrap().replace("\r\n", "\n"),
        pki.root.pem().replace("\r\n", "\n")
    );
}

#[test]
fn directory_entries_and_nested_archives_are_fine() {
    let pki = Pki::new();
    let mut w = zip::ZipWriter::new(Cursor::new(Vec::new()));
    let opts = SimpleFileOptions::default();
    w.add_directory("nginx/", opts).unwrap();
    for (name, data) in pki.bundle_files(&pki.leaf(LeafSpec::default())) {
        w.start_file(name.as_str(), opts).unwrap();
        w.write_all(&data).unwrap();
    }
    w.start_file("extra/nested.zip", opts).unwrap();
    w.write_all(&pki.good_zip()).unwrap();
    let zip = w.finish().unwrap().into_inner();
    let archive = Archive::unpack(&zip).unwrap();
    assert!(archive.names().all(|n| !n.ends_with('/')));
    assert!(archive.get("extra/nested.zip").unwrap().starts_with(b"PK"));
    let names = domains();
    validate(&archive, ServerKind::Nginx, &pki.expected(&names)).unwrap();
}

// ---- hostile archives ----

#[test]
fn rejects_parent_dir_entries() {
    let pki = Pki::new();
    for name in ["../evil.crt", "nginx/../../evil"] {
        let zip = good_plus_entry(&pki, &"x".repeat(name.len()), name.as_bytes());
        let (n, p) = entry_problem(read(&zip, ServerKind::Nginx, &pki));
        assert_eq!(p, EntryProblem::ParentDir);
        assert_eq!(n, format!("{name:?}"));
    }
    let zip = good_plus_entry(&pki, "xxxxxxxxxxxx", b"../evil.crt\0");
    let err = read(&zip, ServerKind::Nginx, &pki).unwrap_err();
    assert!(
        err.to_string().starts_with("bundle entry \"../evil.crt"),
        "{err}"
    );
}

#[test]
fn rejects_absolute_entries() {
    let pki = Pki::new();
    for name in ["/etc/evil.crt", "C:/evil.crt"] {
        let zip = good_plus_entry(&pki, &"x".repeat(name.len()), name.as_bytes());
        let (_, p) = entry_problem(read(&zip, ServerKind::Nginx, &pki));
        assert_eq!(p, EntryProblem::Absolute, "{name}");
    }
    let err = read(
        &good_plus_entry(&pki, "xxxxxxxxxxxxx", b"/etc/evil.crt"),
        ServerKind::Nginx,
        &pki,
    )
    .unwrap_err();
    assert_eq!(
        err.to_string(),
        "bundle entry \"/etc/evil.crt\": absolute path"
    );
}

#[test]
fn rejects_backslash_entries() {
    let pki = Pki::new();
    let name = b"..\\..\\evil.crt";
    let zip = good_plus_entry(&pki, "xxxxxxxxxxxxxx", name);
    let (_, p) = entry_problem(read(&zip, ServerKind::Nginx, &pki));
    assert_eq!(p, EntryProblem::Backslash);
}

#[test]
fn rejects_nul_in_names() {
    let pki = Pki::new();
    let zip = good_plus_entry(
        &pki,
        "nginx/fullchain.crtXevil",
        b"nginx/fullchain.crt\0evil",
    );
    let (name, p) = entry_problem(read(&zip, ServerKind::Nginx, &pki));
    assert_eq!(p, EntryProblem::Nul);
    assert!(name.contains("\\x00"), "{name}");
}

#[test]
fn rejects_symlink_entries() {
    let pki = Pki::new();
    let mut w = zip::ZipWriter::new(Cursor::new(Vec::new()));
    let opts = SimpleFileOptions::default();
    for (name, data) in pki.bundle_files(&pki.leaf(LeafSpec::default())) {
        if name == "nginx/fullchain.crt" {
            w.add_symlink(name.as_str(), "/etc/shadow", opts).unwrap();
        } else {
            w.start_file(name.as_str(), opts).unwrap();
            w.write_all(&data).unwrap();
        }
    }
    let zip = w.finish().unwrap().into_inner();
    let (name, p) = entry_problem(read(&zip, ServerKind::Apache, &pki));
    assert_eq!(p, EntryProblem::Symlink);
    assert_eq!(name, "\"nginx/fullchain.crt\"");
}

/// Sets the Unix mode (external attributes, host system Unix) of the central directory
/// record named `name`: the zip writer only writes regular files, directories and symlinks.
/// Where `zip`'s central directory begins, as its end record says (the last `PK\x05\x06`, no
/// comment: the files' data, random keys and certificates, may hold `PK\x01\x02` by chance).
fn central_directory(zip: &[u8]) -> usize {
    let end = zip
        .windows(4)
        .rposition(|w| w == [0x50, 0x4b, 0x05, 0x06])
        .expect("an end of central directory record");
    let offset = u32::from_le_bytes([zip[end + 16], zip[end + 17], zip[end + 18], zip[end + 19]]);
    usize::try_from(offset).unwrap()
}

fn set_unix_mode(mut zip: Vec<u8>, name: &[u8], mode: u32) -> Vec<u8> {
    let mut at = central_directory(&zip);
    loop {
        assert_eq!(
            &zip[at..at + 4],
            [0x50, 0x4b, 0x01, 0x02],
            "record {name:?} not found"
        );
        let len = |o: usize| usize::from(u16::from_le_bytes([zip[at + o], zip[at + o + 1]]));
        let (n, e, c) = (len(28), len(30), len(32));
        if &zip[at + 46..at + 46 + n] == name {
            zip[at + 5] = 3;
            zip[at + 38..at + 42].copy_from_slice(&(mode << 16).to_le_bytes());
            return zip;
        }
        at += 46 + n + e + c;
    }
}

#[test]
fn rejects_special_file_entries() {
    let pki = Pki::new();
    for (mode, what) in [
        (0o010_644, "FIFO"),
        (0o060_644, "block device"),
        (0o020_644, "char device"),
    ] {
        let zip = set_unix_mode(pki.good_zip(), b"pem/chain.pem", mode);
        let (name, p) = entry_problem(read(&zip, ServerKind::Nginx, &pki));
        assert_eq!(p, EntryProblem::SpecialFile { mode }, "{what}");
        assert_eq!(name, "\"pem/chain.pem\"");
    }
    // A symlink made by patching the mode (not by the writer's add_symlink).
    let zip = set_unix_mode(pki.good_zip(), b"pem/chain.pem", 0o120_777);
    let (_, p) = entry_problem(read(&zip, ServerKind::Nginx, &pki));
    assert_eq!(p, EntryProblem::Symlink);
    // A directory mode on a file name is refused too.
    let zip = set_unix_mode(pki.good_zip(), b"pem/chain.pem", 0o040_755);
    let (_, p) = entry_problem(read(&zip, ServerKind::Nginx, &pki));
    assert!(matches!(p, EntryProblem::SpecialFile { .. }), "{p:?}");
}

#[test]
fn rejects_duplicate_names() {
    let pki = Pki::new();
    let mut files = pki.bundle_files(&pki.leaf(LeafSpec::default()));
    // A second, evil nginx/fullchain.crt after the good one.
    files.push(("nginx/fullchain.crX".to_owned(), b"evil".to_vec()));
    let zip = patch(
        zip_of(&files),
        b"nginx/fullchain.crX",
        b"nginx/fullchain.crt",
    );
    let (name, p) = entry_problem(read(&zip, ServerKind::Nginx, &pki));
    assert_eq!(p, EntryProblem::Duplicate);
    assert_eq!(name, "\"nginx/fullchain.crt\"");
    // Case-insensitive duplicates too.
    let mut files = pki.bundle_files(&pki.leaf(LeafSpec::default()));
    files.push(("NGINX/fullchain.crt".to_owned(), b"evil".to_vec()));
    let (_, p) = entry_problem(read(&zip_of(&files), ServerKind::Nginx, &pki));
    assert_eq!(p, EntryProblem::Duplicate);
}

#[test]
fn rejects_encrypted_entries() {
    let pki = Pki::new();
    let zip = pki.good_zip();
    // Set the "encrypted" flag of the first central directory record.
    let mut zip = zip;
    let cd = central_directory(&zip);
    zip[cd + 8] |= 1;
    let (name, p) = entry_problem(read(&zip, ServerKind::Nginx, &pki));
    assert_eq!(p, EntryProblem::Encrypted);
    assert_eq!(name, "\"README.txt\"");
}

#[test]
fn rejects_ten_thousand_entries() {
    let pki = Pki::new();
    let mut w = zip::ZipWriter::new(Cursor::new(Vec::new()));
    let opts = SimpleFileOptions::default().compression_method(zip::CompressionMethod::Stored);
    for i in 0..10_000 {
        w.start_file(format!("f/{i}"), opts).unwrap();
    }
    let zip = w.finish().unwrap().into_inner();
    let err = read(&zip, ServerKind::Nginx, &pki).unwrap_err();
    assert!(
        matches!(
            err,
            BundleError::TooManyEntries {
                count: 10_000,
                limit: 256
            }
        ),
        "{err}"
    );
}

fn peak_rss_kib() -> u64 {
    let status = std::fs::read_to_string("/proc/self/status").unwrap();
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmHWM:"))
        .and_then(|v| v.split_whitespace().next())
        .and_then(|v| v.parse().ok())
        .unwrap()
}

#[test]
fn rejects_a_100_mb_entry_reading_at_most_the_cap() {
    let pki = Pki::new();
    let mut w = zip::ZipWriter::new(Cursor::new(Vec::new()));
    let opts = SimpleFileOptions::default().compression_level(Some(1));
    for (name, data) in pki.bundle_files(&pki.leaf(LeafSpec::default())) {
        w.start_file(name.as_str(), opts).unwrap();
        w.write_all(&data).unwrap();
    }
    w.start_file("nginx/zeros.crt", opts).unwrap();
    let chunk = vec![0u8; 1 << 20];
    for _ in 0..100 {
        w.write_all(&chunk).unwrap();
    }
    drop(chunk);
    let zip = w.finish().unwrap().into_inner();
    assert!(zip.len() < 2 << 20, "compressed to {} bytes", zip.len());

    let before = peak_rss_kib();
    let (name, p) = entry_problem(read(&zip, ServerKind::Nginx, &pki));
    let after = peak_rss_kib();
    assert_eq!(name, "\"nginx/zeros.crt\"");
    assert_eq!(p, EntryProblem::TooLarge { limit: 1 << 20 });
    // Reading 100 MB would raise the peak by 100 MB; the cap keeps it to about 1 MB.
    assert!(
        after - before < 48 * 1024,
        "peak RSS grew by {} KiB",
        after - before
    );

    // The total bound: many entries each under the entry cap.
    let limits = Limits {
        max_entry_bytes: 1 << 20,
        max_total_bytes: 3 << 20,
        ..Limits::default()
    };
    let mut w = zip::ZipWriter::new(Cursor::new(Vec::new()));
    let chunk = vec![0u8; 900 << 10];
    for i in 0..5 {
        w.start_file(format!("part{i}"), opts).unwrap();
        w.write_all(&chunk).unwrap();
    }
    let zip = w.finish().unwrap().into_inner();
    let (name, p) = entry_problem(Archive::unpack_with_limits(&zip, &limits));
    assert_eq!(p, EntryProblem::TotalTooLarge { limit: 3 << 20 });
    assert_eq!(name, "\"part3\"");
}

#[test]
fn rejects_an_oversized_archive_before_reading() {
    let limits = Limits {
        max_archive_bytes: 1000,
        ..Limits::default()
    };
    let err = Archive::unpack_with_limits(&[0u8; 1001], &limits).unwrap_err();
    assert!(matches!(err, BundleError::ArchiveTooLarge { .. }), "{err}");
}

#[test]
fn rejects_truncated_zips() {
    let pki = Pki::new();
    let zip = pki.good_zip();
    for cut in [zip.len() / 2, zip.len() - 1, zip.len() - 30, 10] {
        let err = read(&zip[..cut], ServerKind::Nginx, &pki).unwrap_err();
        assert!(
            matches!(err, BundleError::NotZip(_) | BundleError::Entry { .. }),
            "cut at {cut}: {err}"
        );
    }
    // Central directory intact but a file's data cut short: the read fails on that entry.
    let cd = central_directory(&zip);
    let mut damaged = zip.clone();
    for b in &mut damaged[40..cd] {
        *b = 0;
    }
    let err = read(&damaged, ServerKind::Nginx, &pki).unwrap_err();
    assert!(matches!(err, BundleError::Entry { .. }), "{err}");
}

// ---- hostile certificates ----

#[test]
fn rejects_a_leaf_for_another_key() {
    let pki = Pki::new();
    let other = PrivateKey::generate(KeyType::EcdsaP256).unwrap();
    let leaf = leaf_for(&other.public_key_der(), &pki.int, LeafSpec::default()).pem();
    let zip = pki.zip_with_leaf(&leaf);
    for server in [ServerKind::Nginx, ServerKind::Apache, ServerKind::None] {
        let err = read(&zip, server, &pki).unwrap_err();
        assert!(
            matches!(err, BundleError::WrongKey { .. }),
            "{server}: {err}"
        );
        assert!(err.to_string().contains("not for our private key"), "{err}");
    }
}

#[test]
fn rejects_a_leaf_for_another_domain() {
    let pki = Pki::new();
    let leaf = pki.leaf(LeafSpec {
        names: Some(vec!["www.example.org".to_owned()]),
        ..LeafSpec::default()
    });
    let err = read(&pki.zip_with_leaf(&leaf), ServerKind::Nginx, &pki).unwrap_err();
    match &err {
        BundleError::DomainNotCovered { domain, names, .. } => {
            assert_eq!(domain, "www.example.com");
            assert_eq!(names, "\"www.example.org\"");
        }
        other => panic!("{other}"),
    }
    // Covering only some of the configured names is not enough.
    let leaf = pki.leaf(LeafSpec {
        names: Some(vec!["www.example.com".to_owned()]),
        ..LeafSpec::default()
    });
    let err = read(&pki.zip_with_leaf(&leaf), ServerKind::Apache, &pki).unwrap_err();
    assert!(
        matches!(&err, BundleError::DomainNotCovered { domain, .. } if domain == "example.com"),
        "{err}"
    );
}

#[test]
fn rejects_an_expired_leaf() {
    let pki = Pki::new();
    let leaf = pki.leaf(LeafSpec {
        not_before: Some(NOW - Duration::days(200)),
        not_after: Some(NOW - Duration::days(1)),
        ..LeafSpec::default()
    });
    let err = read(&pki.zip_with_leaf(&leaf), ServerKind::Nginx, &pki).unwrap_err();
    assert!(matches!(err, BundleError::Expired { .. }), "{err}");
    assert!(
        err.to_string().contains("expired at 2026-05-31T12:00:00Z"),
        "{err}"
    );
}

#[test]
fn rejects_a_leaf_not_yet_valid() {
    let pki = Pki::new();
    let leaf = pki.leaf(LeafSpec {
        not_before: Some(NOW + Duration::hours(1)),
        ..LeafSpec::default()
    });
    let err = read(&pki.zip_with_leaf(&leaf), ServerKind::Apache, &pki).unwrap_err();
    assert!(matches!(err, BundleError::NotYetValid { .. }), "{err}");
}

#[test]
fn rejects_a_ca_leaf() {
    let pki = Pki::new();
    let leaf = pki.leaf(LeafSpec {
        ca: true,
        ..LeafSpec::default()
    });
    let err = read(&pki.zip_with_leaf(&leaf), ServerKind::Nginx, &pki).unwrap_err();
    assert!(matches!(err, BundleError::LeafIsCa { .. }), "{err}");
}

#[test]
fn rejects_a_leaf_the_intermediate_did_not_sign() {
    let pki = Pki::new();
    // Same issuer name, another key: the signature does not verify.
    let impostor = Ca::intermediate("Sandbox Intermediate", &pki.root);
    let leaf = leaf_for(&pki.key.public_key_der(), &impostor, LeafSpec::default()).pem();
    let zip = pki.zip_with_leaf(&leaf);
    for server in [ServerKind::Nginx, ServerKind::Apache, ServerKind::None] {
        let err = read(&zip, server, &pki).unwrap_err();
        assert!(
            matches!(err, BundleError::BadSignature { .. }),
            "{server}: {err}"
        );
    }
    // Another issuer name: nothing in the bundle issued the leaf.
    let elsewhere = Ca::intermediate("Elsewhere CA", &pki.root);
    let leaf = leaf_for(&pki.key.public_key_der(), &elsewhere, LeafSpec::default()).pem();
    let err = read(&pki.zip_with_leaf(&leaf), ServerKind::Nginx, &pki).unwrap_err();
    assert!(matches!(err, BundleError::ChainBroken { .. }), "{err}");
    assert!(err.to_string().contains("Elsewhere CA"), "{err}");
}

#[test]
fn rejects_an_intermediate_the_root_did_not_sign() {
    let pki = Pki::new();
    let fake_root = Ca::root("Sandbox Root");
    let zip = pki.zip_with(
        "apache/ca_bundle.crt",
        format!("{}{}", pki.int.pem(), fake_root.pem()).as_bytes(),
    );
    let err = read(&zip, ServerKind::Apache, &pki).unwrap_err();
    assert!(matches!(err, BundleError::BadSignature { .. }), "{err}");
}

#[test]
fn rejects_a_leaf_without_any_issuer() {
    let pki = Pki::new();
    let zip = pki.zip_with(
        "nginx/fullchain.crt",
        pki.leaf(LeafSpec::default()).as_bytes(),
    );
    let err = read(&zip, ServerKind::Nginx, &pki).unwrap_err();
    assert!(matches!(err, BundleError::ChainBroken { .. }), "{err}");
}

#[test]
fn rejects_unrelated_certificates_in_the_chain() {
    let pki = Pki::new();
    let stranger = Ca::root("Stranger");
    let zip = pki.zip_with(
        "apache/ca_bundle.crt",
        format!("{}{}{}", pki.int.pem(), pki.root.pem(), stranger.pem()).as_bytes(),
    );
    let err = read(&zip, ServerKind::Apache, &pki).unwrap_err();
    assert!(
        matches!(err, BundleError::UnusedCertificates { .. }),
        "{err}"
    );
}

#[test]
fn rejects_non_pem_content() {
    let pki = Pki::new();
    let leaf_der = CertificateDer::from_pem_slice_der(&pki.leaf(LeafSpec::default()));
    for (content, what) in [
        (b"this is not a certificate\n".to_vec(), "not PEM content"),
        (leaf_der, "not PEM content"),
        (Vec::new(), "not PEM content"),
        (
            b"-----BEGIN CERTIFICATE-----\n!!!!\n-----END CERTIFICATE-----\n".to_vec(),
            "invalid PEM",
        ),
        (
            b"-----BEGIN CERTIFICATE-----\nMIIB\n".to_vec(),
            "invalid PEM",
        ),
        (
            format!("{}{}", pki.leaf(LeafSpec::default()), pki.key.secret_pem()).into_bytes(),
            "unexpected PrivateKey section",
        ),
    ] {
        let zip = pki.zip_with("nginx/fullchain.crt", &content);
        let err = read(&zip, ServerKind::Nginx, &pki).unwrap_err();
        assert!(matches!(err, BundleError::BadPem { .. }), "{err}");
        let msg = err.to_string();
        assert!(
            msg.starts_with("bundle file \"nginx/fullchain.crt\": "),
            "{msg}"
        );
        assert!(msg.contains(what), "{msg}");
    }
    // A PEM block that is not a certificate.
    let zip = pki.zip_with(
        "apache/certificate.crt",
        b"-----BEGIN CERTIFICATE-----\nMAMCAQE=\n-----END CERTIFICATE-----\n",
    );
    let err = read(&zip, ServerKind::Apache, &pki).unwrap_err();
    assert!(
        matches!(err, BundleError::BadCertificate { index: 1, .. }),
        "{err}"
    );
}

#[test]
fn apache_certificate_file_holds_only_the_leaf() {
    let pki = Pki::new();
    let zip = pki.zip_with(
        "apache/certificate.crt",
        format!("{}{}", pki.leaf(LeafSpec::default()), pki.int.pem()).as_bytes(),
    );
    let err = read(&zip, ServerKind::Apache, &pki).unwrap_err();
    assert!(
        matches!(err, BundleError::NotSingleCertificate { count: 2, .. }),
        "{err}"
    );
}

#[test]
fn missing_files_are_named() {
    let pki = Pki::new();
    let files: Vec<_> = pki
        .bundle_files(&pki.leaf(LeafSpec::default()))
        .into_iter()
        .filter(|(n, _)| !n.starts_with("apache/ca_bundle"))
        .collect();
    let zip = zip_of(&files);
    let err = read(&zip, ServerKind::Apache, &pki).unwrap_err();
    assert_eq!(
        err.to_string(),
        "bundle lacks \"apache/ca_bundle.crt\" (needed for apache)"
    );
    read(&zip, ServerKind::Nginx, &pki).unwrap();
}

#[test]
fn pem_files_must_agree_for_server_none() {
    let pki = Pki::new();
    let other = PrivateKey::generate(KeyType::EcdsaP256).unwrap();
    let other_leaf = leaf_for(&other.public_key_der(), &pki.int, LeafSpec::default()).pem();
    let stranger = Ca::root("Stranger");
    for (file, content) in [
        ("pem/www.example.com.pem", other_leaf.clone()),
        ("pem/chain.pem", stranger.pem()),
        (
            "pem/ca-bundle.pem",
            format!("{}{}", pki.int.pem(), stranger.pem()),
        ),
        ("pem/root.pem", stranger.pem()),
    ] {
        let zip = pki.zip_with(file, content.as_bytes());
        let err = read(&zip, ServerKind::None, &pki).unwrap_err();
        assert!(matches!(err, BundleError::Inconsistent(_)), "{file}: {err}");
        // The other servers do not read pem/.
        read(&zip, ServerKind::Nginx, &pki).unwrap();
    }
}

trait FromPemSliceDer {
    fn from_pem_slice_der(pem: &str) -> Vec<u8>;
}

impl FromPemSliceDer for CertificateDer<'_> {
    fn from_pem_slice_der(pem: &str) -> Vec<u8> {
        use rustls_pki_types::pem::PemObject;
        CertificateDer::from_pem_slice(pem.as_bytes())
            .unwrap()
            .to_vec()
    }
}

// ---- a chain handed over as PEM (ACME's certificate chain) ----

/// Guards the chain an issuer hands over without an archive: the same leaf, names, dates and
/// linking checks as a bundle's files, a chain the bundle would refuse refused too, and a
/// chain of more certificates than any CA sends refused before it is linked.
#[test]
fn a_pem_chain_gets_the_checks_of_a_bundle() {
    let pki = Pki::new();
    let names = domains();
    let leaf = pki.leaf(LeafSpec::default());
    let chain = format!("{leaf}{}", pki.int.pem());
    for server in [ServerKind::Nginx, ServerKind::Apache, ServerKind::None] {
        let v = validate_chain(chain.as_bytes(), server, &pki.expected(&names))
            .unwrap_or_else(|e| panic!("{server}: {e}"));
        assert_eq!(v.serial_hex, "0ABCDE");
        assert_eq!(v.chain_der.len(), 1);
        assert!(v.root_pem.is_none());
        assert_eq!(v.fullchain_pem, format!("{}{}", v.leaf_pem, v.chain_pem));
    }
    // With the root at the end, it is kept apart from the chain.
    let with_root = format!("{chain}{}", pki.root.pem());
    let v = validate_chain(
        with_root.as_bytes(),
        ServerKind::Nginx,
        &pki.expected(&names),
    )
    .unwrap();
    assert!(v.root_pem.is_some());

    let other = PrivateKey::generate(KeyType::EcdsaP256).unwrap();
    let foreign = leaf_for(&other.public_key_der(), &pki.int, LeafSpec::default()).pem();
    let expired = pki.leaf(LeafSpec {
        not_before: Some(NOW - Duration::days(100)),
        not_after: Some(NOW - Duration::days(1)),
        ..LeafSpec::default()
    });
    let elsewhere = pki.leaf(LeafSpec {
        names: Some(vec!["www.example.org".to_owned()]),
        ..LeafSpec::default()
    });
    let stranger = Ca::root("Someone Else");
    let int = pki.int.pem();
    let too_long = format!("{leaf}{}", int.repeat(12));
    let cases: Vec<(&str, String)> = vec![
        ("another key", format!("{foreign}{int}")),
        ("expired", format!("{expired}{int}")),
        ("other names", format!("{elsewhere}{int}")),
        ("no issuer", leaf.clone()),
        ("unrelated issuer", format!("{leaf}{}", stranger.pem())),
        ("garbage", "not a certificate".to_owned()),
        ("a key inside", format!("{leaf}{}", pki.key.secret_pem())),
        ("too long", too_long),
        ("empty", String::new()),
    ];
    for (what, pem) in cases {
        let err = validate_chain(pem.as_bytes(), ServerKind::Nginx, &pki.expected(&names))
            .expect_err(what);
        let text = err.to_string();
        assert!(!text.contains("PRIVATE KEY"), "{what}: {text}");
        assert!(!text.chars().any(char::is_control), "{what}: {text}");
    }
}
