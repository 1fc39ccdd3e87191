//! The fleet files a host keeps for its checks in its state directory: the lead it saw
//! (`fleet-lead.json`), the hosts whose audit log went back (`fleet-audit-rewound.json`),
//! this host's leads (`fleet-leads.json`) and the certificates whose last proof there failed
//! (`proofs-failed.json`); the first byte picks the file. Must never panic; what reads is written and read back the
//! same.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    cert_agent::testing::fleet::fuzzing::local(data);
});
