//! Hostile input beyond what `e2e_hostile.rs` (every sandbox hostile bundle through the
//! binary) and `bundle_hostile.rs` (the bundle reader's named refusals) prove:
//! - archives the zip writer would not make: 100 000 entries, entries declaring 4 GiB, a ZIP
//!   nested as the certificate file — refused quickly with memory bounded;
//! - validation file names and contents, and DNS record values, from the API that are not
//!   plain hex / allowed characters (`../x`, `$(touch …)`, control bytes) — refused, nothing
//!   created, no shell involved;
//! - configurations with unknown keys, relative paths, cert path = key path, invalid domain
//!   names or a missing reload program — `config check` exits 2 and no API call is made, not
//!   even by `renew`.

use crate::support;

use std::fs;
use std::io::{Cursor, Write};
use std::path::PathBuf;
use std::time::{Duration, Instant};

use cert_agent::testing::bundle::Archive;
use cert_agent::testing::crypto::{Csr, KeyType, PrivateKey};
use cert_agent::testing::dcv::ValidationFile;
use cert_agent::testing::dcv::hook::txt_record;
use cert_agent::testing::dcv::webroot::publish_into;
use support::env::{Publish, TestEnv};
use support::faults::{changed, entries, tree};
use zip::write::SimpleFileOptions;

// ---- archives ----

fn peak_rss_kib() -> u64 {
    fs::read_to_string("/proc/self/status")
        .unwrap_or_default()
        .lines()
        .find_map(|l| l.strip_prefix("VmHWM:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        .unwrap_or(0)
}

/// Guards the entry count limit on an archive with 100 000 (empty) entries: refused before
/// they are all read, quickly.
#[test]
fn an_archive_of_100k_entries_is_refused_quickly() {
    let mut w = zip::ZipWriter::new(Cursor::new(Vec::new()));
    let opts = SimpleFileOptions::default().compression_method(zip::CompressionMethod::Stored);
    for i in 0..100_000u32 {
        w.start_file(format!("{i}"), opts).unwrap();
    }
    let zip = w.finish().unwrap().into_inner();
    let started = Instant::now();
    let err = Archive::unpack(&zip).map(|_| ()).unwrap_err().to_string();
    assert!(
        started.elapsed() < Duration::from_secs(5),
        "took {:?}",
        started.elapsed()
    );
    assert!(err.contains("entries") || err.contains("ZIP64"), "{err}");
}

/// The same below the ZIP64 threshold: 65 000 entries hit the entry limit.
#[test]
fn an_archive_of_65k_entries_is_refused_by_the_entry_limit() {
    let mut w = zip::ZipWriter::new(Cursor::new(Vec::new()));
    let opts = SimpleFileOptions::default().compression_method(zip::CompressionMethod::Stored);
    for i in 0..65_000u32 {
        w.start_file(format!("{i}"), opts).unwrap();
    }
    let zip = w.finish().unwrap().into_inner();
    let started = Instant::now();
    let err = Archive::unpack(&zip).map(|_| ()).unwrap_err().to_string();
    assert!(started.elapsed() < Duration::from_secs(5));
    assert!(err.contains("entries"), "{err}");
}

/// Patches the declared uncompressed size of every entry (local header offset 22, central
/// directory offset 24) to `size`.
fn declare_size(mut zip: Vec<u8>, size: u32) -> Vec<u8> {
    let size = size.to_le_bytes();
    let mut i = 0;
    while i + 46 <= zip.len() {
        if zip[i..i + 4] == [0x50, 0x4b, 0x03, 0x04] {
            zip[i + 22..i + 26].copy_from_slice(&size);
            i += 30;
        } else if zip[i..i + 4] == [0x50, 0x4b, 0x01, 0x02] {
            zip[i + 24..i + 28].copy_from_slice(&size);
            i += 46;
        } else {
            i += 1;
        }
    }
    zip
}

fn deflated(files: &[(&str, usize)]) -> Vec<u8> {
    let mut w = zip::ZipWriter::new(Cursor::new(Vec::new()));
    let opts = SimpleFileOptions::default().compression_method(zip::CompressionMethod::Deflated);
    for (name, len) in files {
        w.start_file(*name, opts).unwrap();
        w.write_all(&vec![b'A'; *len]).unwrap();
    }
    w.finish().unwrap().into_inner()
}

/// Guards the size limits against lying headers. Entries declaring ~4 GiB: nothing near that
/// is allocated; if accepted, only the true bytes are kept.
#[test]
fn entries_declaring_huge_sizes_keep_memory_bounded() {
    let zip = declare_size(
        deflated(&[
            ("nginx/fullchain.crt", 200_000),
            ("pem/fullchain.pem", 200_000),
        ]),
        0xFFFF_FFF0,
    );
    let before = peak_rss_kib();
    let result = Archive::unpack(&zip);
    let grown = peak_rss_kib().saturating_sub(before);
    assert!(grown < 64 * 1024, "peak memory grew by {grown} KiB");
    if let Ok(a) = result {
        for name in a.names() {
            assert!(a.get(name).unwrap().len() <= 200_000, "{name}");
        }
    }
}

/// Entries declaring 100 bytes that inflate to 48 MiB each: refused at the entry cap, not
/// trusted, memory bounded.
#[test]
fn entries_declaring_tiny_sizes_are_still_capped() {
    let zip = declare_size(deflated(&[("nginx/fullchain.crt", 48 << 20)]), 100);
    let before = peak_rss_kib();
    let result = Archive::unpack(&zip);
    let grown = peak_rss_kib().saturating_sub(before);
    assert!(result.is_err(), "refused");
    assert!(grown < 16 * 1024, "peak memory grew by {grown} KiB");
}

/// Guards against archives inside archives: a ZIP (itself holding a bomb) stored as the
/// certificate file is not unpacked recursively and is not a certificate.
#[test]
fn a_zip_nested_as_the_certificate_is_not_a_certificate() {
    let mut inner = zip::ZipWriter::new(Cursor::new(Vec::new()));
    let opts = SimpleFileOptions::default().compression_method(zip::CompressionMethod::Deflated);
    inner.start_file("bomb", opts).unwrap();
    for _ in 0..64 {
        inner.write_all(&vec![0u8; 1 << 20]).unwrap();
    }
    let inner = inner.finish().unwrap().into_inner();
    let mut outer = zip::ZipWriter::new(Cursor::new(Vec::new()));
    outer.start_file("nginx/fullchain.crt", opts).unwrap();
    outer.write_all(&inner).unwrap();
    let outer = outer.finish().unwrap().into_inner();
    let before = peak_rss_kib();
    let archive = Archive::unpack(&outer).expect("the outer archive is well-formed");
    assert_eq!(
        archive.get("nginx/fullchain.crt").map(<[u8]>::len),
        Some(inner.len()),
        "stored as opaque bytes, not expanded"
    );
    assert!(peak_rss_kib().saturating_sub(before) < 32 * 1024);
    assert!(cert_agent::testing::crypto::CertificateInfo::from_pem(&inner).is_err());
}

// ---- DCV values from the API ----

fn our_csr() -> Csr {
    let key = PrivateKey::generate(KeyType::default()).unwrap();
    Csr::new(&key, &["www.example.com".to_owned()]).unwrap()
}

/// Guards the validation file name and content checks: names that are not exactly 32
/// upper-case hex digits + `.txt`, and contents with shell syntax, control bytes or another
/// CSR's hash, are refused; nothing is created anywhere and no shell ever runs.
#[test]
fn hostile_validation_file_names_and_contents_are_refused() {
    let dir = tempfile::tempdir().unwrap();
    let marker = dir.path().join("pwned");
    let good_name = format!("{}.txt", "A".repeat(32));
    for name in [
        "../x",
        "../../etc/passwd",
        "/etc/passwd",
        "AAAA.txt",
        &format!("{}.txt/../../x", "A".repeat(32)),
        &format!("{}.php", "A".repeat(32)),
        &format!("{}.txt\0", "A".repeat(32)),
        &format!("$(touch {}).txt", marker.display()),
        &format!("{}.txt", "a".repeat(32)),
    ] {
        assert!(
            ValidationFile::from_parts(name, "content").is_err(),
            "name {name:?} is refused"
        );
    }
    for content in [
        format!("x\n$(touch {})", marker.display()).replace('x', "ok"),
        "line\u{0}nul".to_owned(),
        "bell\u{7}".to_owned(),
        "esc\u{1b}[2J".to_owned(),
        "ümlaut".to_owned(),
        "x".repeat(1 << 20),
    ] {
        let accepted = ValidationFile::from_parts(&good_name, &content);
        if content.contains("$(") {
            // Printable text is data: if it is accepted it is only ever written as bytes.
            continue;
        }
        assert!(accepted.is_err(), "content {content:?} is refused");
    }

    let csr = our_csr();
    for content in [
        format!("$(touch {})", marker.display()),
        format!("`touch {}`", marker.display()),
        format!("{}\ncomodoca.com", "B".repeat(64)),
        format!(
            "{}\ncomodoca.com\n$(touch {})",
            csr.hashes.sha256,
            marker.display()
        ),
        format!("{}\n;touch {}", csr.hashes.sha256, marker.display()),
    ] {
        assert!(
            ValidationFile::for_csr(&csr.hashes, &content).is_err(),
            "dcv_content {content:?} is refused"
        );
    }
    // The genuine content is accepted and published as exactly one file.
    let webroot = dir.path().join("www");
    fs::create_dir_all(&webroot).unwrap();
    let content = format!("{}\ncomodoca.com", csr.hashes.sha256);
    let file = ValidationFile::for_csr(&csr.hashes, &content).expect("genuine content");
    publish_into(std::slice::from_ref(&webroot), &file).unwrap();
    let published: Vec<PathBuf> = entries(&webroot)
        .into_iter()
        .filter(|p| fs::metadata(webroot.join(p)).is_ok_and(|m| m.is_file()))
        .collect();
    assert_eq!(
        published,
        vec![PathBuf::from(".well-known/pki-validation").join(file.name())]
    );
    assert!(!marker.exists(), "no shell ran");
    assert!(!std::path::Path::new("/tmp/pwned").exists());
}

/// Guards DNS hook input: record values from the API with shell syntax, spaces or control
/// bytes are refused before any hook runs.
#[test]
fn hostile_dns_record_values_are_refused() {
    for value in [
        "$(touch /tmp/pwned)",
        "`id`",
        "a;b",
        "a b",
        "a\nb",
        "a\u{0}b",
        "",
        &"a".repeat(256),
    ] {
        assert!(
            txt_record("www.example.com", value).is_err(),
            "TXT value {value:?} is refused"
        );
    }
    for domain in ["../x", "$(id).example.com", "a b.example.com", ""] {
        assert!(
            txt_record(domain, "token").is_err(),
            "domain {domain:?} is refused"
        );
    }
    assert!(txt_record("www.example.com", "s0me-Token_value.+/=:").is_ok());
}

// ---- configuration ----

/// `config check` must fail with exit 2 and a message containing `needle`, and neither it
/// nor `renew` may call the API.
#[track_caller]
fn config_refused(env: &TestEnv, needle: &str) {
    let before = tree(env.dir.path());
    let out = env.agent(["config", "check"]).run();
    out.expect_code(2);
    assert!(
        out.text().contains(needle),
        "the error names {needle:?}\n{}",
        out.describe()
    );
    let renew = env.agent(["--json", "renew", "--yes"]).run();
    renew.expect_code(2);
    assert!(
        env.calls().is_empty(),
        "no API call with a bad configuration: {:?}",
        env.calls()
    );
    let written: Vec<_> = changed(&before, &tree(env.dir.path()))
        .into_iter()
        .filter(|p| !p.starts_with("logs") && !p.starts_with("config.toml"))
        .collect();
    assert!(written.is_empty(), "nothing written: {written:?}");
}

fn base_env(domain: &str) -> TestEnv {
    let mut env = TestEnv::new();
    let webroot = env.path("www-root");
    fs::create_dir_all(&webroot).unwrap();
    let mut spec = env.cert_spec("www", &[domain], "none");
    spec.publish = Publish::Webroot(webroot);
    env.certs.push(spec);
    env
}

#[test]
fn the_base_configuration_is_accepted() {
    let env = base_env("ok.faults-config.test");
    env.agent(["config", "check"]).run().expect_code(0);
}

#[test]
fn config_unknown_keys_are_refused() {
    let mut env = base_env("unknown.faults-config.test");
    env.spec_mut("www").extra = "colour = \"blue\"\n".into();
    config_refused(&env, "colour");
    let mut env = base_env("unknown2.faults-config.test");
    env.agent_extra = "allow_order = true\n".into();
    config_refused(&env, "allow_order");
}

#[test]
fn config_relative_paths_are_refused() {
    let mut env = base_env("relative.faults-config.test");
    env.spec_mut("www").files.key = PathBuf::from("relative/privkey.pem");
    config_refused(&env, "relative");
    let mut env = base_env("relative2.faults-config.test");
    env.spec_mut("www").publish = Publish::Webroot(PathBuf::from("www"));
    config_refused(&env, "webroot");
}

#[test]
fn config_cert_path_equal_to_key_path_is_refused() {
    let mut env = base_env("same.faults-config.test");
    let key = env.spec("www").files.key.clone();
    env.spec_mut("www").files.fullchain = Some(key);
    config_refused(&env, "key_path");
}

#[test]
fn config_invalid_domain_names_are_refused() {
    for domain in [
        "exa mple.com",
        "-bad.example.com",
        "bad..example.com",
        "*.*.example.com",
        "www.example.com/../x",
        "$(touch).example.com",
        "xn--.example.com",
    ] {
        let env = base_env(domain);
        config_refused(&env, "domain");
    }
}

#[test]
fn config_missing_reload_program_is_refused() {
    let mut env = base_env("reload.faults-config.test");
    env.spec_mut("www").reload_command = Some(vec!["/nonexistent/bin/reload-web".into()]);
    config_refused(&env, "/nonexistent/bin/reload-web");
}
