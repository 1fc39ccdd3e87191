//! The CAA decision of RFC 8659 and RFC 8657, one row per branch.

use super::*;

fn rec(flags: u8, tag: &str, value: &str) -> Caa {
    Caa {
        flags,
        tag: tag.into(),
        value: value.as_bytes().to_vec(),
    }
}

fn ids() -> Vec<String> {
    vec!["s-one.partner-sandbox.test".into()]
}

#[test]
fn decisions() {
    let ours = "s-one.partner-sandbox.test";
    let ids = ids();
    let plain = Requester {
        identities: &ids,
        account_uri: None,
        method: Some("http-01"),
    };
    let account = Requester {
        account_uri: Some("https://ca.example/acct/1"),
        ..plain.clone()
    };
    let unknown_ca = Requester {
        identities: &[],
        ..plain.clone()
    };
    let allowed = |d: &Decision| matches!(d, Decision::Allowed(_) | Decision::Unrestricted);
    let cases: Vec<(&str, Vec<Caa>, bool, &Requester<'_>, bool)> = vec![
        ("no records", vec![], false, &plain, true),
        ("ours", vec![rec(0, "issue", ours)], false, &plain, true),
        (
            "ours, upper case",
            vec![rec(0, "issue", "S-ONE.Partner-Sandbox.test")],
            false,
            &plain,
            true,
        ),
        (
            "another CA",
            vec![rec(0, "issue", "letsencrypt.org")],
            false,
            &plain,
            false,
        ),
        (
            "one of two",
            vec![rec(0, "issue", "letsencrypt.org"), rec(0, "issue", ours)],
            false,
            &plain,
            true,
        ),
        (
            "none at all",
            vec![rec(0, "issue", ";")],
            false,
            &plain,
            false,
        ),
        (
            "iodef only",
            vec![rec(0, "iodef", "mailto:x@example.org")],
            false,
            &plain,
            true,
        ),
        (
            "issuewild ; for a plain name",
            vec![rec(0, "issue", ours), rec(0, "issuewild", ";")],
            false,
            &plain,
            true,
        ),
        (
            "issuewild ; for a wildcard",
            vec![rec(0, "issue", ours), rec(0, "issuewild", ";")],
            true,
            &plain,
            false,
        ),
        (
            "issue for a wildcard",
            vec![rec(0, "issue", ours)],
            true,
            &plain,
            true,
        ),
        (
            "issuewild ours, issue another",
            vec![rec(0, "issue", "x.example"), rec(0, "issuewild", ours)],
            true,
            &plain,
            true,
        ),
        (
            "critical unknown",
            vec![rec(128, "tbs", "x"), rec(0, "issue", ours)],
            false,
            &plain,
            false,
        ),
        (
            "non-critical unknown",
            vec![rec(0, "tbs", "x"), rec(0, "issue", ours)],
            false,
            &plain,
            true,
        ),
        (
            "critical known",
            vec![rec(128, "issue", ours)],
            false,
            &plain,
            true,
        ),
        (
            "malformed value",
            vec![rec(0, "issue", "bad domain!")],
            false,
            &plain,
            false,
        ),
        (
            "method listed",
            vec![rec(
                0,
                "issue",
                &format!("{ours}; validationmethods=dns-01,http-01"),
            )],
            false,
            &plain,
            true,
        ),
        (
            "method not listed",
            vec![rec(
                0,
                "issue",
                &format!("{ours}; validationmethods=dns-01"),
            )],
            false,
            &plain,
            false,
        ),
        (
            "account unknown",
            vec![rec(
                0,
                "issue",
                &format!("{ours}; accounturi=https://ca.example/acct/1"),
            )],
            false,
            &plain,
            false,
        ),
        (
            "account ours",
            vec![rec(
                0,
                "issue",
                &format!("{ours}; accounturi=https://ca.example/acct/1"),
            )],
            false,
            &account,
            true,
        ),
        (
            "account other",
            vec![rec(
                0,
                "issue",
                &format!("{ours}; accounturi=https://ca.example/acct/2"),
            )],
            false,
            &account,
            false,
        ),
        (
            "unknown parameter",
            vec![rec(0, "issue", &format!("{ours}; foo=bar"))],
            false,
            &plain,
            true,
        ),
    ];
    for (what, set, wildcard, who, expect) in cases {
        let d = decide(&set, wildcard, who);
        assert_eq!(allowed(&d), expect, "{what}: {d:?}");
    }
    assert!(matches!(
        decide(&[rec(0, "issue", "x.example")], false, &unknown_ca),
        Decision::Unknown(_)
    ));
    match decide(&[rec(0, "issue", "letsencrypt.org")], false, &plain) {
        Decision::Forbidden(why) => {
            assert!(
                why.contains("letsencrypt.org") && why.contains(ours),
                "{why}"
            );
        }
        other => panic!("{other:?}"),
    }
}

#[test]
fn parse_reads_the_wire_form_and_refuses_garbage() {
    let mut rdata = vec![128, 5];
    rdata.extend_from_slice(b"ISSUEca.example");
    assert_eq!(parse(&rdata), Ok(rec(128, "issue", "ca.example")));
    assert_eq!(parse(&[]), Err(CaaError::Short));
    assert_eq!(parse(&[0, 0]), Err(CaaError::BadTag));
    assert_eq!(parse(&[0, 9, b'a']), Err(CaaError::BadTag));
    assert_eq!(parse(&[0, 1, b'-']), Err(CaaError::BadTag));
    assert_eq!(issuer_value(b";"), Some((None, vec![])));
    assert_eq!(issuer_value(b"ca.example; a b=c"), None);
    assert_eq!(issuer_value(b"\xff"), None);
}
