//! What the ACME issuer reads from a CA's answer to a certificate download beyond the chain
//! itself: the `Link` header naming alternate chains, and the chains offered (PEM). Must never
//! panic; every alternate followed is an allowed URL and there are at most `MAX_ALTERNATES`;
//! the chain chosen is one of those offered.
#![no_main]

use cert_agent::testing::issuer::acme::chain;
use cert_agent::testing::issuer::acme::http::allowed_url;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    if let Ok(value) = http::HeaderValue::from_bytes(data) {
        let mut headers = http::HeaderMap::new();
        headers.append(http::header::LINK, value);
        let links = chain::alternate_links("https://ca.example/cert/1", &headers);
        assert!(links.len() <= chain::MAX_ALTERNATES);
        assert!(links.iter().all(|l| allowed_url(l)));
    }
    let text = String::from_utf8_lossy(data);
    let _ = chain::top_issuer(&text);
    let mid = (0..=text.len() / 2)
        .rev()
        .find(|&i| text.is_char_boundary(i))
        .unwrap_or(0);
    let (default, alternate) = text.split_at(mid);
    let offered = [alternate.to_owned()];
    let chosen = chain::choose(default, &offered, "Root");
    assert!(chosen == default || chosen == alternate);
});
