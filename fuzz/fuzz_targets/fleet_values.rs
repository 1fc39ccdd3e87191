//! What a fleet host reads from etcd and from its state directory: the sealed envelope of a
//! value (at every kind of key, with two keys held) and the documents inside one (a
//! tombstone, a host's proof and a rollout decision sealed and opened back too),
//! `fleet-versions.json`, `announced.json`, `metrics-last-run.json` (or
//! `metrics-last-sync.json`), `served.json` and `proved.json`. The first byte picks the parser,
//! the rest is its input. Must never panic; a value sealed opens back the same, and a file that reads is
//! written and read back the same.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Some((&which, rest)) = data.split_first() else {
        return;
    };
    // 7 (and 15, 23, …): what was seen served (a byte the other four never had in the corpus).
    if which % 8 == 7 {
        return cert_agent::testing::monitor::fuzz_served(rest);
    }
    match which % 4 {
        0 => cert_agent::testing::fleet::fuzzing::envelope(rest),
        1 => cert_agent::testing::fleet::fuzzing::versions(rest),
        2 => cert_agent::testing::monitor::fuzz_announced(rest),
        _ => cert_agent::testing::monitor::fuzz_kept_pass(rest),
    }
});
