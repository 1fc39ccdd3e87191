//! The sandbox's validator behind a load balancer in front of a fleet: one DCV port per host.
//! In the strict mode every check asks every host, so a validation passes only when the file
//! is on every host (the CA's request may land on any of them).

// Test binaries that include `support` without fleets do not use it.
#![allow(dead_code)]

use partner_sandbox::{DcvBalance, DcvPorts, SandboxHandle};

/// Every HTTP_CSR_HASH check fetches from every port of `http_ports` and passes only when all
/// of them serve the file; HTTPS checks go nowhere (port 0).
pub(crate) fn validate_on_every_host(sandbox: &SandboxHandle, http_ports: &[u16]) {
    sandbox.set_dcv_pool(DcvPorts::new(
        http_ports.to_vec(),
        vec![0],
        DcvBalance::All,
        1,
    ));
}
