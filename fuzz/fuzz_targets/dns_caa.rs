//! The pre-flight's DNS answers and CAA records (what a resolver, or anyone who can answer
//! for it, sends): the message reader, the CAA record and `issue` value readers, and the CAA
//! decision over whatever records were read. Must never panic, loop or allocate without
//! bound; a CAA record that reads must read back from its wire form.
#![no_main]

use cert_agent::testing::preflight::caa::{self, Caa, Requester};
use cert_agent::testing::preflight::wire::{self, TYPE_CAA};
use libfuzzer_sys::fuzz_target;

fn wire_form(c: &Caa) -> Vec<u8> {
    let mut v = vec![c.flags, c.tag.len() as u8];
    v.extend_from_slice(c.tag.as_bytes());
    v.extend_from_slice(&c.value);
    v
}

fuzz_target!(|data: &[u8]| {
    let ids = vec!["ca.example".to_owned()];
    let who = Requester {
        identities: &ids,
        account_uri: Some("https://ca.example/acct/1"),
        method: Some("http-01"),
    };
    let mut set = Vec::new();
    if let Ok(answer) = wire::parse(data) {
        for r in answer.records.iter().filter(|r| r.rtype == TYPE_CAA) {
            if let Ok(c) = caa::parse(&r.data) {
                set.push(c);
            }
        }
    }
    if let Ok(c) = caa::parse(data) {
        assert_eq!(caa::parse(&wire_form(&c)), Ok(c.clone()));
        let _ = caa::issuer_value(&c.value);
        set.push(c);
    }
    let _ = caa::issuer_value(data);
    let _ = caa::decide(&set, false, &who);
    let _ = caa::decide(&set, true, &who);
});
