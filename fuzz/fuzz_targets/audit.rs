//! The audit log's reader (`cert-agent audit`, `audit --verify`) and its anchor file: any
//! bytes as one line, as a whole log and as an anchor. Must never panic. A line that parses
//! must be a sound line (its hash matches its content); a log that verifies with no break has
//! every line parse, numbered in order; breaks are reported in the order of the file, each on
//! a line the log has.
#![no_main]

use cert_agent::testing::store::audit::{Anchor, parse_line, verify, verify_against};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    if let Ok(entry) = parse_line(data) {
        assert_eq!(entry.hash.len(), 64);
        assert_eq!(entry.prev.len(), 64);
    }
    if let Ok(anchor) = Anchor::parse(data) {
        assert_eq!(anchor.hash.len(), 64);
    }
    let v = verify(data);
    let lines: Vec<&[u8]> = data.split(|&b| b == b'\n').collect();
    // The last piece is empty when the data ends with a line break.
    let all = if data.ends_with(b"\n") || data.is_empty() {
        lines.len() - 1
    } else {
        lines.len()
    };
    assert!(v.lines as usize <= all);
    if v.breaks.is_empty() {
        for (i, line) in lines[..all].iter().enumerate() {
            let e = parse_line(line).expect("a verified line parses");
            assert_eq!(e.seq, i as u64 + 1);
        }
        assert_eq!(v.last_seq as usize, all);
    }
    let mut at = 0;
    for b in &v.breaks {
        assert!(b.line >= 1 && b.line as usize <= all && b.line >= at);
        at = b.line;
    }
    let found = verify_against(data, &[v.last_hash.as_str()]);
    assert_eq!(found.breaks, v.breaks);
    if v.last_seq > 0 {
        assert!(found.found[0].is_some());
    }
});
