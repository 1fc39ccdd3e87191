//! `cert-agent` binary: parse the command line, run the command, map the outcome to the
//! documented exit codes.

#![cfg_attr(not(test), warn(clippy::unwrap_used))]

use std::process::ExitCode;

/// Debug builds count the heap: the tests' bounds on what one run holds at once
/// (`CERT_AGENT_TEST_HEAP_PEAK`). Release builds use the system's allocator as it is.
#[cfg(debug_assertions)]
#[global_allocator]
static HEAP: peak_alloc::PeakAlloc = peak_alloc::PeakAlloc;

fn main() -> ExitCode {
    let code = cert_agent::main();
    #[cfg(debug_assertions)]
    report_heap_peak();
    code
}

/// Debug builds only: the most bytes of heap the run held at once, written (in decimal) to
/// the file `CERT_AGENT_TEST_HEAP_PEAK` names, when it is set.
#[cfg(debug_assertions)]
fn report_heap_peak() {
    if let Some(path) = std::env::var_os("CERT_AGENT_TEST_HEAP_PEAK")
        && let Err(e) = std::fs::write(&path, HEAP.peak_usage().to_string())
    {
        eprintln!(
            "cert-agent: could not write the heap's peak to {}: {e}",
            std::path::Path::new(&path).display()
        );
    }
}
