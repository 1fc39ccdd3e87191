//! Queries as sent and hostile answers read without panicking.

use super::*;

/// An answer to `query` with the given answer records (owner as a pointer to the question).
fn answer_to(query: &[u8], flags: u16, records: &[(u16, Vec<u8>)]) -> Vec<u8> {
    let qend = query.len() - 11; // the OPT record is 11 bytes
    let mut m = query[..qend].to_vec();
    m[2..4].copy_from_slice(&flags.to_be_bytes());
    m[6..8].copy_from_slice(&(records.len() as u16).to_be_bytes());
    m[10..12].copy_from_slice(&0u16.to_be_bytes());
    for (t, data) in records {
        m.extend_from_slice(&[0xc0, 12]);
        m.extend_from_slice(&t.to_be_bytes());
        m.extend_from_slice(&[0, 1, 0, 0, 0, 60]);
        m.extend_from_slice(&(data.len() as u16).to_be_bytes());
        m.extend_from_slice(data);
    }
    m
}

#[test]
fn query_sets_do_and_cd_and_answers_read_back() {
    let q = query(7, "Www.Example.ORG.", TYPE_CAA, true, true).unwrap();
    assert_eq!(&q[2..4], &[0x01, 0x10], "RD and CD");
    assert_eq!(&q[q.len() - 4..q.len() - 2], &[0x80, 0], "DO");
    let plain = query(7, "www.example.org", TYPE_CAA, false, false).unwrap();
    assert_eq!(&plain[2..4], &[0x01, 0x00]);
    assert_eq!(&plain[plain.len() - 4..plain.len() - 2], &[0, 0]);

    let mut caa = vec![0, 5];
    caa.extend_from_slice(b"issueca.example");
    let a = parse(&answer_to(&q, 0x81a0, &[(TYPE_CAA, caa.clone())])).unwrap();
    assert_eq!(a.id, 7);
    assert!(a.authenticated && !a.truncated);
    assert_eq!(a.rcode, 0);
    assert_eq!(a.question, Some(("www.example.org".into(), TYPE_CAA)));
    assert_eq!(a.records[0].name, "www.example.org");
    assert_eq!(a.records[0].data, caa);

    let cname = parse(&answer_to(&q, 0x8180, &[(TYPE_CNAME, vec![0xc0, 16])])).unwrap();
    assert_eq!(cname.records[0].target.as_deref(), Some("example.org"));
}

#[test]
fn hostile_answers_are_errors() {
    let q = query(1, "a.example", TYPE_CAA, true, false).unwrap();
    // A CNAME pointing at itself: a compression loop.
    let looped = answer_to(&q, 0x8180, &[(TYPE_CNAME, vec![0xc0, 0xff])]);
    let at = looped.len() - 2;
    let mut looped = looped;
    looped[at..].copy_from_slice(&[0xc0 | (at >> 8) as u8, at as u8]);
    assert!(matches!(parse(&looped), Err(WireError::BadPointer(_))));
    // Lengths past the end.
    let mut short = answer_to(&q, 0x8180, &[(TYPE_CAA, vec![0, 5, b'i'])]);
    short.truncate(short.len() - 1);
    assert!(matches!(parse(&short), Err(WireError::Short(_))));
    assert!(parse(&[0; 5]).is_err());
    let mut many = answer_to(&q, 0x8180, &[]);
    many[6..8].copy_from_slice(&u16::MAX.to_be_bytes());
    assert_eq!(parse(&many), Err(WireError::TooMany));
    assert!(matches!(
        query(1, "a..example", TYPE_CAA, false, false),
        Err(WireError::BadQueryName(_))
    ));
    assert!(query(1, &"a".repeat(64), TYPE_CAA, false, false).is_err());
    for n in 0..q.len() {
        let _ = parse(&q[..n]);
    }
}
