//! The audit log's reader (`cert-agent audit`, `audit --verify`): any bytes as one line and as
//! a whole log. Must never panic. A line that parses must be a sound line (its hash matches
//! its content), and a log whose chain verifies must have every line parse.
#![no_main]

use cert_agent::store::audit::{parse_line, verify};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    if let Ok(entry) = parse_line(data) {
        assert_eq!(entry.hash.len(), 64);
        assert_eq!(entry.prev.len(), 64);
    }
    let v = verify(data);
    match &v.broken {
        None => {
            let lines: Vec<&[u8]> = data.split(|&b| b == b'\n').collect();
            // Every line before the final line break parses, in order.
            for (i, line) in lines[..lines.len().saturating_sub(1)].iter().enumerate() {
                let e = parse_line(line).expect("a verified line parses");
                assert_eq!(e.seq, i as u64 + 1);
            }
            assert_eq!(v.lines as usize, lines.len().saturating_sub(1));
        }
        Some(b) => assert!(b.line >= 1 && b.line == v.lines + 1),
    }
});
