//! Bounds on the heap, measured by a counting allocator (`peak_alloc`: the system's
//! allocator and two counters). A test binary of its own with one test, so that nothing
//! else allocates beside what is measured.

use std::path::Path;

use cert_agent::testing::config::Config;
use peak_alloc::PeakAlloc;

#[global_allocator]
static HEAP: PeakAlloc = PeakAlloc;

/// The most bytes held at once while `f` ran, above what was held before, and what `f` gave.
fn peak_of<R>(f: impl FnOnce() -> R) -> (usize, R) {
    let before = HEAP.current_usage();
    HEAP.reset_peak_usage();
    let r = f();
    (HEAP.peak_usage().saturating_sub(before), r)
}

/// A configuration of `n` certificates as a large host writes it: thirteen keys each.
fn configuration(n: usize) -> String {
    let mut text = String::from(
        "[api]\nbase_url = \"https://partner.example.net\"\nlogin = \"ops@example.com\"\n\
         password_file = \"/etc/cert-agent/password\"\n\n[agent]\nstate_dir = \"/var/lib/cert-agent\"\n",
    );
    for i in 0..n {
        let dir = format!("/etc/ssl/cert-agent/site-{i:05}");
        text.push_str(&format!(
            "\n[[certificate]]\nname = \"site-{i:05}\"\ndomains = [\"site-{i:05}.example.com\", \
             \"www.site-{i:05}.example.com\"]\nproduct_id = 1101\ncountry = \"DE\"\n\
             region = \"Berlin\"\ncity = \"Berlin\"\nwebroot = \"/var/www/site-{i:05}\"\n\
             server = \"nginx\"\nfullchain_path = \"{dir}/fullchain.pem\"\n\
             key_path = \"{dir}/privkey.pem\"\ncert_path = \"{dir}/cert.pem\"\n\
             chain_path = \"{dir}/chain.pem\"\nreload_command = [\"/usr/sbin/nginx\", \"-s\", \"reload\"]\n"
        ));
    }
    text
}

#[test]
fn heap_bounds() {
    a_configuration_of_2000_certificates_is_never_held_whole();
}

/// A configuration of 2,000 certificates is read a part at a time: its spanned TOML document
/// (about 9 KiB per certificate) is never held whole. What the read holds at its peak beside
/// the configuration it gives is under 4 MiB (one part, the checks' own; 2.9 MiB measured),
/// against more than 12 MiB read whole (16.2 MiB measured).
fn a_configuration_of_2000_certificates_is_never_held_whole() {
    let text = configuration(2000);
    let path = Path::new("/etc/cert-agent/config.toml");
    let (whole, config) = peak_of(|| Config::parse_in_parts(&text, path, false));
    let config = config.expect("valid");
    let (kept, ()) = peak_of(|| drop(config.clone()));
    drop(config);
    let (parts, config) = peak_of(|| Config::parse_in_parts(&text, path, true));
    assert_eq!(config.expect("valid").certificates.len(), 2000);
    let mib = |b: usize| b as f64 / (1024.0 * 1024.0);
    eprintln!(
        "2,000 certificates ({:.2} MiB of text): the configuration holds {:.2} MiB; the read \
         peaks at {:.2} MiB in parts, {:.2} MiB whole",
        mib(text.len()),
        mib(kept),
        mib(parts),
        mib(whole)
    );
    let beside = parts.saturating_sub(kept);
    assert!(
        beside < 4 << 20,
        "read in parts, {:.2} MiB held beside the configuration",
        mib(beside)
    );
    assert!(
        whole.saturating_sub(kept) > 12 << 20,
        "read whole, only {:.2} MiB beside the configuration: does the test still measure?",
        mib(whole.saturating_sub(kept))
    );
}
