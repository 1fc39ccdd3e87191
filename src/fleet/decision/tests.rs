//! A decision's sealing: garbage, a value sealed without the fleet key, one moved to another
//! host's key or certificate, one whose host or time does not match its place, and one for
//! another serial are refused or not applied; the newest made on the serial applies.

use super::*;
use crate::fleet::key::{FleetKey, KEY_LEN};

fn keys(byte: u8) -> FleetKeys {
    FleetKeys::new(FleetKey::from_bytes(&[byte; KEY_LEN]).unwrap(), None)
}

fn decision(verdict: Verdict, serial: &str, host: &str, secs: i64) -> Decision {
    Decision {
        verdict,
        serial: serial.to_owned(),
        host: host.to_owned(),
        at: OffsetDateTime::UNIX_EPOCH
            + time::Duration::days(20_000)
            + time::Duration::seconds(secs),
    }
}

fn full(rel: &str) -> String {
    format!("/ca/{rel}")
}

#[test]
fn a_decision_opens_only_where_and_as_it_was_sealed() {
    let k = keys(7);
    let d = decision(Verdict::Abort, "5C01", "web2", 10);
    let (rel, sealed) = seal(&k, "www", &d).unwrap();
    assert_eq!(rel, "hosts/web2/rollout/www");
    assert_eq!(open_at(&k, &full(&rel), &rel, &sealed).unwrap(), d);
    let refused =
        |rel: &str, value: &[u8]| format!("{:#}", open_at(&k, &full(rel), rel, value).unwrap_err());
    // Garbage, and a value sealed without the fleet key.
    for value in [
        &b"garbage"[..],
        &[][..],
        &seal(&keys(8), "www", &d).unwrap().1,
    ] {
        let e = refused(&rel, value);
        assert!(
            e.starts_with("the fleet's rollout decision /ca/hosts/web2/rollout/www "),
            "{e}"
        );
        assert!(e.contains("refused"), "{e}");
    }
    // Replayed under another host's key, or for another certificate.
    for other in ["hosts/web3/rollout/www", "hosts/web2/rollout/shop"] {
        let e = refused(other, &sealed);
        assert!(e.contains(&full(other)) && e.contains("refused"), "{e}");
    }
    // Sealed for web3's key by a fleet member, but saying web2 made it.
    let lying = Decision {
        host: "web2".into(),
        ..d.clone()
    };
    let place = Place::new(Purpose::RolloutDecision, "hosts/web3/rollout/www", "www");
    let version = u64::try_from(lying.at.unix_timestamp()).unwrap();
    let v = envelope::seal_json(&k, &place, version, &lying).unwrap();
    let e = refused("hosts/web3/rollout/www", &v);
    assert!(e.contains("was made on host \"web2\", not \"web3\""), "{e}");
    // A decision whose time is not its version (an old decision given a new date).
    let v = envelope::seal_json(
        &k,
        &Place::new(Purpose::RolloutDecision, &rel, "www"),
        1,
        &d,
    )
    .unwrap();
    let e = refused(&rel, &v);
    assert!(e.contains("sealed as version 1"), "{e}");
    // Another purpose's value at the decision's key does not open as a decision.
    let proof_place = Place::new(Purpose::Proof, &rel, "www");
    let v = envelope::seal_json(&k, &proof_place, version, &d).unwrap();
    assert!(refused(&rel, &v).contains("refused"));
}

#[test]
fn the_newest_decision_made_on_the_serial_applies() {
    let by_host: BTreeMap<String, Decision> = [
        ("web1", decision(Verdict::Abort, "5C01", "web1", 10)),
        ("web2", decision(Verdict::Resume, "5c01", "web2", 20)),
        ("web3", decision(Verdict::Abort, "4A17", "web3", 30)),
    ]
    .into_iter()
    .map(|(h, d)| (h.to_owned(), d))
    .collect();
    let d = newest(Some(&by_host), "5C01").unwrap();
    assert_eq!((d.verdict, d.host.as_str()), (Verdict::Resume, "web2"));
    // A decision for another serial never applies.
    assert_eq!(newest(Some(&by_host), "6D02"), None);
    assert_eq!(newest(None, "5C01"), None);
    assert!(
        d.describe()
            .starts_with("rollout of serial 5c01 resumed by web2 at "),
        "{}",
        d.describe()
    );
}
