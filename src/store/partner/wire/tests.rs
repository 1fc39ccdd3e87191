//! The stored form: records written before the stage existed read into their stage and write
//! the same bytes; every stage writes what the flat struct wrote; the combinations no run
//! writes are mapped or refused as the module's header says; garbage never panics.

use serde::{Deserialize, Serialize};
use time::OffsetDateTime;

use super::super::{OrderIntent, OrderRef, PartnerBook, PartnerStage, ReissueState, Subscription};
use super::{CONTRADICTION, fuzz_partner_book};
use crate::store::{CertRecord, Store, StoreError};

/// Records written by the build before the stage (a sandbox run: an order installed, a
/// reissue sent whose answer was lost, the order annulled at the CA, and `issue --yes`
/// stopped right after its intent was saved).
const WRITTEN_BEFORE: [(&str, &str); 4] = [
    ("ordered", include_str!("records/ordered.json")),
    (
        "reissue-unconfirmed",
        include_str!("records/reissue-unconfirmed.json"),
    ),
    ("ended", include_str!("records/ended.json")),
    ("intent", include_str!("records/intent.json")),
];

#[test]
fn records_written_before_read_into_their_stage_and_write_the_same_bytes() {
    for (what, text) in WRITTEN_BEFORE {
        let rec: CertRecord = serde_json::from_str(text).unwrap();
        let stage = &rec.partner.stage;
        let expected = match what {
            "ordered" => matches!(stage, PartnerStage::Ordered { reissue: None, .. }),
            "reissue-unconfirmed" => matches!(
                stage,
                PartnerStage::Ordered { reissue: Some(r), .. } if !r.confirmed
            ),
            "ended" => matches!(stage, PartnerStage::Ended { state, reissue: None, .. }
                if state == "annulled"),
            _ => matches!(stage, PartnerStage::Intended(_)) && rec.partner.renews.is_some(),
        };
        assert!(expected, "{what}: {stage:?}");
        let written = serde_json::to_string(&rec).unwrap();
        assert_eq!(written, text, "{what}: written back differently");
    }
}

/// The Partner part as every version before the stage stored it (verbatim).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
struct FlatBook {
    intent: Option<OrderIntent>,
    order: Option<OrderRef>,
    #[serde(default)]
    reissue: Option<ReissueState>,
    #[serde(default)]
    ended: Option<String>,
    #[serde(default)]
    subscription: Option<Subscription>,
    #[serde(default)]
    renews: Option<u64>,
    #[serde(default, with = "time::serde::rfc3339::option")]
    prolong_prepared_at: Option<OffsetDateTime>,
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    order_refused: bool,
}

/// Either part, flat between two fields (as in the record).
#[derive(Serialize)]
struct Flat<T> {
    before: u32,
    #[serde(flatten)]
    part: T,
    after: u32,
}

fn t(minutes: i64) -> OffsetDateTime {
    OffsetDateTime::from_unix_timestamp(1_800_000_000).unwrap() + time::Duration::minutes(minutes)
}

fn intent() -> OrderIntent {
    OrderIntent {
        csr_sha256: "AB".repeat(32),
        common_name: "www.example.com".into(),
        created_at: t(0),
        product_id: 101,
        price: Some("8.80".into()),
    }
}

fn order() -> OrderRef {
    OrderRef {
        certificate_id: 7,
        order_id: Some(8),
        placed_at: t(1),
        adopted: false,
    }
}

fn reissue(confirmed: bool) -> ReissueState {
    ReissueState {
        certificate_id: 7,
        csr_sha256: "CD".repeat(32),
        previous_serial: Some("0A".into()),
        requested_at: t(2),
        confirmed,
    }
}

/// Every stage, and the flat fields that stored it.
fn stages() -> Vec<(PartnerStage, FlatBook)> {
    let flat = |intent, order, reissue, ended| FlatBook {
        intent,
        order,
        reissue,
        ended,
        ..FlatBook::default()
    };
    vec![
        (PartnerStage::NoOrder, flat(None, None, None, None)),
        (
            PartnerStage::Intended(intent()),
            flat(Some(intent()), None, None, None),
        ),
        (
            PartnerStage::Ordered {
                order: order(),
                reissue: None,
            },
            flat(None, Some(order()), None, None),
        ),
        (
            PartnerStage::Ordered {
                order: order(),
                reissue: Some(reissue(false)),
            },
            flat(None, Some(order()), Some(reissue(false)), None),
        ),
        (
            PartnerStage::Ended {
                order: order(),
                state: "annulled".into(),
                reissue: None,
            },
            flat(None, Some(order()), None, Some("annulled".into())),
        ),
        (
            PartnerStage::Ended {
                order: order(),
                state: "expired".into(),
                reissue: Some(reissue(true)),
            },
            flat(
                None,
                Some(order()),
                Some(reissue(true)),
                Some("expired".into()),
            ),
        ),
    ]
}

#[test]
fn every_stage_writes_what_the_flat_struct_wrote() {
    for (stage, flat) in stages() {
        // The fields beside the stage: all empty, and all set.
        for full in [false, true] {
            let book = PartnerBook {
                stage: stage.clone(),
                subscription: full.then(|| Subscription {
                    ends: t(3),
                    multi_year: true,
                }),
                renews: full.then_some(5),
                prolong_prepared_at: full.then(|| t(4)),
                order_refused: full,
            };
            let old = FlatBook {
                subscription: book.subscription.clone(),
                renews: book.renews,
                prolong_prepared_at: book.prolong_prepared_at,
                order_refused: full,
                ..flat.clone()
            };
            let written = serde_json::to_vec(&Flat {
                before: 1,
                part: &book,
                after: 2,
            })
            .unwrap();
            let written_before = serde_json::to_vec(&Flat {
                before: 1,
                part: &old,
                after: 2,
            })
            .unwrap();
            assert_eq!(
                String::from_utf8_lossy(&written),
                String::from_utf8_lossy(&written_before),
                "{stage:?}"
            );
            let read: PartnerBook = serde_json::from_slice(&written).unwrap();
            assert_eq!(read, book);
        }
    }
}

/// What the stored fields (intent, order, reissue, ended) read as; `None`: refused.
fn read(i: bool, o: bool, r: bool, e: bool) -> Result<PartnerStage, String> {
    let flat = FlatBook {
        intent: i.then(intent),
        order: o.then(order),
        reissue: r.then(|| reissue(false)),
        ended: e.then(|| "annulled".to_owned()),
        ..FlatBook::default()
    };
    serde_json::from_value::<PartnerBook>(serde_json::to_value(flat).unwrap())
        .map(|b| b.stage)
        .map_err(|e| e.to_string())
}

#[test]
fn combinations_no_run_writes_are_mapped_or_refused() {
    let from_reissue = OrderRef {
        certificate_id: 7,
        order_id: None,
        placed_at: t(2),
        adopted: true,
    };
    for i in [false, true] {
        for o in [false, true] {
            for r in [false, true] {
                for e in [false, true] {
                    let got = read(i, o, r, e);
                    let what = format!("intent {i}, order {o}, reissue {r}, ended {e}: {got:?}");
                    match (i, o, r, e) {
                        (false, false, false, false) => {
                            assert_eq!(got, Ok(PartnerStage::NoOrder), "{what}");
                        }
                        (true, false, false, false) => {
                            assert_eq!(got, Ok(PartnerStage::Intended(intent())), "{what}");
                        }
                        // An intent beside anything of an order: refused, naming both.
                        (true, ..) => {
                            let err = got.expect_err(&what);
                            assert!(
                                err.starts_with(CONTRADICTION)
                                    && err.contains(&"AB".repeat(32))
                                    && (err.contains("certificate 7") || err.contains("ended")),
                                "{what}"
                            );
                        }
                        // An ended state without its order: refused.
                        (false, false, false, true) => {
                            let err = got.expect_err(&what);
                            assert!(
                                err.starts_with(CONTRADICTION) && err.contains("annulled"),
                                "{what}"
                            );
                        }
                        // A reissue without its order: the order of the certificate it was
                        // sent for, never "no order" (which would order again).
                        (false, false, true, ended) => {
                            let stage = got.expect(&what);
                            let expected = if ended {
                                PartnerStage::Ended {
                                    order: from_reissue.clone(),
                                    state: "annulled".into(),
                                    reissue: Some(reissue(false)),
                                }
                            } else {
                                PartnerStage::Ordered {
                                    order: from_reissue.clone(),
                                    reissue: Some(reissue(false)),
                                }
                            };
                            assert_eq!(stage, expected, "{what}");
                        }
                        (false, true, r, e) => {
                            let stage = got.expect(&what);
                            let reissue = r.then(|| reissue(false));
                            let expected = if e {
                                PartnerStage::Ended {
                                    order: order(),
                                    state: "annulled".into(),
                                    reissue,
                                }
                            } else {
                                PartnerStage::Ordered {
                                    order: order(),
                                    reissue,
                                }
                            };
                            assert_eq!(stage, expected, "{what}");
                        }
                    }
                }
            }
        }
    }
}

/// A state file edited to hold an intent beside its order is refused by name, and the error
/// does not say to move the file aside (that would drop the order it knows).
#[test]
fn a_contradictory_record_is_refused_naming_the_file() {
    let dir = tempfile::tempdir().unwrap();
    let store = Store::open(dir.path()).unwrap();
    let mut text: serde_json::Value = serde_json::from_str(WRITTEN_BEFORE[0].1).unwrap();
    text["intent"] = serde_json::to_value(intent()).unwrap();
    let name = text["name"].as_str().unwrap().to_owned();
    let path = dir.path().join(format!("certs/{name}.json"));
    std::fs::write(&path, serde_json::to_vec(&text).unwrap()).unwrap();
    let err = store.load(&name).unwrap_err();
    assert!(matches!(err, StoreError::Contradictory { .. }), "{err:?}");
    let msg = err.to_string();
    assert!(
        msg.contains(&path.display().to_string())
            && msg.contains("certificate 8514430")
            && msg.contains("`intent`")
            && !msg.contains("move it aside"),
        "{msg}"
    );
    // The same file with the intent's field cleared reads again.
    text["intent"] = serde_json::Value::Null;
    std::fs::write(&path, serde_json::to_vec(&text).unwrap()).unwrap();
    assert!(store.load(&name).unwrap().partner.order().is_some());
}

#[test]
fn garbage_and_edited_parts_never_panic() {
    let mut inputs: Vec<Vec<u8>> = vec![
        b"".to_vec(),
        b"{".to_vec(),
        b"null".to_vec(),
        b"[]".to_vec(),
        b"{}".to_vec(),
        br#"{"intent": 7}"#.to_vec(),
        br#"{"ended": "\u0000\u001b[31m"}"#.to_vec(),
        br#"{"ended": "annulled", "ended": "expired"}"#.to_vec(),
        br#"{"order": {"certificate_id": 18446744073709551615, "order_id": null,
              "placed_at": "9999-12-31T23:59:59Z"}, "prolong_prepared_at": "garbage"}"#
            .to_vec(),
    ];
    for (_, text) in WRITTEN_BEFORE {
        inputs.push(text.as_bytes().to_vec());
    }
    for i in [false, true] {
        for o in [false, true] {
            for r in [false, true] {
                for e in [false, true] {
                    let flat = FlatBook {
                        intent: i.then(intent),
                        order: o.then(order),
                        reissue: r.then(|| reissue(true)),
                        ended: e.then(|| "expired".to_owned()),
                        ..FlatBook::default()
                    };
                    inputs.push(serde_json::to_vec(&flat).unwrap());
                }
            }
        }
    }
    for input in &inputs {
        fuzz_partner_book(input);
    }
}
