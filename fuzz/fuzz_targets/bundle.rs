//! The bundle reader: any bytes as a `download_bundle` ZIP, unpacked with the default limits
//! and validated for each server layout. Must never panic, and never allocate past the limits.
#![no_main]

use cert_agent::bundle::{Archive, Expected, ServerKind, validate};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Ok(archive) = Archive::unpack(data) else {
        return;
    };
    let domains = vec!["www.example.com".to_owned()];
    let expected = Expected {
        public_key_der: &[],
        domains: &domains,
        now: time::OffsetDateTime::UNIX_EPOCH + time::Duration::days(20_000),
        trust_anchors: &[],
    };
    for server in [ServerKind::Nginx, ServerKind::Apache, ServerKind::None] {
        let _ = validate(&archive, server, &expected);
    }
});
