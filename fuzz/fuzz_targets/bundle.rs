//! The bundle reader: any bytes as a `download_bundle` ZIP, unpacked with the default limits
//! and validated for each server layout. Must never panic, and never allocate past the limits.
//!
//! Two passes per input: one with fixed expectations (a key no bundle can match, so every
//! input ends at a refusal), and one per layout with the expectations taken from the bundle's
//! own leaf (its key, its names, valid at its `notBefore`), once without and once with a trust
//! anchor, so that the chain linking, the `pem/` cross-checks, the signature-algorithm check
//! and the anchor check are reached too. A bundle that passes must hold a leaf that the rest
//! of the agent can read back (`CertificateInfo`, as the renewal check does).
#![no_main]

use cert_agent::testing::bundle::{Archive, Expected, ServerKind, validate};
use cert_agent::testing::crypto::CertificateInfo;
use libfuzzer_sys::fuzz_target;
use rustls_pki_types::CertificateDer;
use rustls_pki_types::pem::PemObject;

const LAYOUTS: [(ServerKind, &str, Option<&str>); 3] = [
    (ServerKind::Nginx, "nginx/fullchain.crt", None),
    (
        ServerKind::Apache,
        "apache/certificate.crt",
        Some("apache/ca_bundle.crt"),
    ),
    (ServerKind::None, "pem/fullchain.pem", Some("pem/root.pem")),
];

fn check(archive: &Archive, server: ServerKind, expected: &Expected<'_>) {
    if let Ok(v) = validate(archive, server, expected) {
        assert_eq!(v.server, server);
        assert_eq!(v.fullchain_pem, format!("{}{}", v.leaf_pem, v.chain_pem));
        let leaf = CertificateInfo::from_pem(v.leaf_pem.as_bytes())
            .expect("a validated leaf reads back as a certificate");
        assert_eq!(leaf.der, v.leaf_der);
        assert_eq!(leaf.serial_hex, v.serial_hex);
        for der in &v.chain_der {
            CertificateInfo::from_der(der).expect("a validated intermediate reads back");
        }
    }
}

fuzz_target!(|data: &[u8]| {
    let Ok(archive) = Archive::unpack(data) else {
        return;
    };

    let domains = vec!["www.example.com".to_owned()];
    let fixed = Expected {
        public_key_der: &[],
        domains: &domains,
        now: time::OffsetDateTime::UNIX_EPOCH + time::Duration::days(20_000),
        trust_anchors: &[],
    };
    for (server, _, _) in LAYOUTS {
        check(&archive, server, &fixed);
    }

    for (server, leaf_file, chain_file) in LAYOUTS {
        let Some(leaf_pem) = archive.get(leaf_file) else {
            continue;
        };
        let Ok(leaf) = CertificateInfo::from_pem(leaf_pem) else {
            continue;
        };
        let mut expected = Expected {
            public_key_der: &leaf.spki_der,
            domains: &leaf.dns_names,
            now: leaf.not_before,
            trust_anchors: &[],
        };
        check(&archive, server, &expected);

        // The last certificate of the chain file (or of the leaf file) as the trust anchor.
        let anchor_pem = chain_file.and_then(|f| archive.get(f)).unwrap_or(leaf_pem);
        let anchor = CertificateDer::pem_slice_iter(anchor_pem)
            .filter_map(Result::ok)
            .last();
        if let Some(anchor) = anchor {
            let anchors = [anchor];
            expected.trust_anchors = &anchors;
            check(&archive, server, &expected);
        }
    }
});
