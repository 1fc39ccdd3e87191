//! A host's entry of the fleet's manifest (`manifest/HOST`): the sealed value at its key
//! (two keys held), the document inside, and the floor a host that has accepted nothing
//! takes from it. Must never panic; an entry that reads is sealed, opens back the same, never
//! opens as another host's, and the floor is the highest any entry vouches for.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    cert_agent::testing::fleet::fuzzing::manifest(data);
});
