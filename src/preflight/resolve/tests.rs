//! The CAA set read from an answer: CNAME chains followed, loops and malformed records refused
//! with the name; the system resolver read from resolv.conf.

use super::*;
use crate::preflight::wire::Record;

fn answer(rcode: u8, records: Vec<Record>) -> Answer {
    Answer {
        id: 1,
        rcode,
        authenticated: false,
        truncated: false,
        question: None,
        records,
        authority: Vec::new(),
    }
}

fn cname(from: &str, to: &str) -> Record {
    Record {
        name: from.into(),
        rtype: TYPE_CNAME,
        data: Vec::new(),
        target: Some(to.into()),
    }
}

fn caa_rec(owner: &str, data: &[u8]) -> Record {
    Record {
        name: owner.into(),
        rtype: TYPE_CAA,
        data: data.to_vec(),
        target: None,
    }
}

#[test]
fn caa_of_follows_cnames_and_refuses_loops_and_garbage() {
    let good = [&[0u8, 5][..], b"issueca.example"].concat();
    let a = answer(
        0,
        vec![
            cname("www.example.org", "cdn.example.net"),
            caa_rec("other.example", &good),
            caa_rec("cdn.example.net", &good),
        ],
    );
    let set = caa_of(&a, "www.example.org").unwrap();
    assert_eq!(set.len(), 1, "only the CAA at the end of the chain");
    assert_eq!(set[0].tag, "issue");

    assert_eq!(
        caa_of(&answer(RCODE_NXDOMAIN, vec![]), "x.example").unwrap(),
        vec![]
    );
    let refused = caa_of(&answer(5, vec![]), "x.example").unwrap_err();
    assert!(refused.to_string().contains("RCODE 5"), "{refused}");

    let looped = answer(
        0,
        vec![
            cname("a.example", "b.example"),
            cname("b.example", "a.example"),
        ],
    );
    let e = caa_of(&looped, "a.example").unwrap_err();
    assert!(e.to_string().contains("CNAME loop"), "{e}");

    let bad = answer(0, vec![caa_rec("x.example", &[0, 9, b'i'])]);
    let e = caa_of(&bad, "x.example").unwrap_err();
    assert!(
        e.to_string().contains("CAA x.example") && e.to_string().contains("tag"),
        "{e}"
    );
}

#[test]
fn the_system_resolver_is_the_first_nameserver() {
    let conf = "# comment\nsearch example.org\nnameserver fe80::1%eth0\nnameserver 10.0.0.1\n";
    assert_eq!(system_resolver(conf), Some("[fe80::1]:53".parse().unwrap()));
    assert_eq!(
        system_resolver("nameserver 10.0.0.1\n"),
        Some("10.0.0.1:53".parse().unwrap())
    );
    assert_eq!(system_resolver("nameserver localhost\n"), None);
    assert_eq!(system_resolver(""), None);
}

fn rec(owner: &str, rtype: u16, data: &[u8], target: Option<&str>) -> Record {
    Record {
        name: owner.into(),
        rtype,
        data: data.to_vec(),
        target: target.map(Into::into),
    }
}

#[test]
fn addresses_of_takes_the_chains_end_and_skips_forged_and_malformed_records() {
    let a = answer(
        0,
        vec![
            cname("www.example.org", "cdn.example.net"),
            // Another owner's address (forged or stray) is not the name's.
            rec("evil.example", TYPE_A, &[6, 6, 6, 6], None),
            rec("cdn.example.net", TYPE_A, &[192, 0, 2, 7], None),
            // Wrong lengths for the type: not an address.
            rec("cdn.example.net", TYPE_A, &[1, 2, 3], None),
            rec("cdn.example.net", TYPE_A, &[0; 16], None),
        ],
    );
    let got = addresses_of(&a, "www.example.org", TYPE_A).unwrap();
    assert_eq!(got, vec![IpAddr::from([192, 0, 2, 7])]);
    let six = answer(0, vec![rec("x.example", TYPE_AAAA, &[0; 16], None)]);
    assert_eq!(
        addresses_of(&six, "x.example", TYPE_AAAA).unwrap(),
        vec![IpAddr::from([0u8; 16])]
    );
    assert!(
        addresses_of(&answer(RCODE_NXDOMAIN, vec![]), "x.example", TYPE_A)
            .unwrap()
            .is_empty()
    );
    let e = addresses_of(&answer(5, vec![]), "x.example", TYPE_A).unwrap_err();
    assert!(
        e.to_string().contains("A x.example") && e.to_string().contains("RCODE 5"),
        "{e}"
    );
    let looped = answer(
        0,
        vec![
            cname("a.example", "b.example"),
            cname("b.example", "a.example"),
        ],
    );
    let e = addresses_of(&looped, "a.example", TYPE_A).unwrap_err();
    assert!(e.to_string().contains("CNAME loop"), "{e}");
}

#[test]
fn the_signer_named_is_the_one_over_the_chains_end() {
    let mut a = answer(
        0,
        vec![
            cname("_pki-validation.www.ok.test", "t.bad.test"),
            rec(
                "_pki-validation.www.ok.test",
                TYPE_RRSIG,
                &[],
                Some("ok.test"),
            ),
            rec("t.bad.test", TYPE_RRSIG, &[], Some("bad.test")),
        ],
    );
    assert_eq!(
        signer(&a, "_pki-validation.www.ok.test").as_deref(),
        Some("bad.test")
    );
    // A negative answer: the authority section's signature.
    a.records.clear();
    a.authority
        .push(rec("ok.test", TYPE_RRSIG, &[], Some("ok.test")));
    assert_eq!(signer(&a, "x.ok.test").as_deref(), Some("ok.test"));
    a.authority.clear();
    assert_eq!(signer(&a, "x.ok.test"), None);
}
