use serde::{Deserialize, Serialize};
use time::OffsetDateTime;

use super::to_vec;
use crate::fleet::schema::{HostResult, SharedState};
use crate::store::{CertRecord, OrderRef, PartnerStage, Subscription, ValidationMark};

fn at(unix: i64) -> OffsetDateTime {
    OffsetDateTime::from_unix_timestamp(unix).unwrap()
}

/// A shared record as a leader writes it once its certificate is issued and installed.
fn issued() -> SharedState {
    let mut record = CertRecord {
        version: 1,
        name: "www".into(),
        last_poll: Some(at(1_790_000_000)),
        last_state: Some("issued".into()),
        ..CertRecord::default()
    };
    record.partner.stage = PartnerStage::Ordered {
        order: OrderRef {
            certificate_id: 8_514_430,
            order_id: Some(69_685_777),
            placed_at: at(1_790_000_000),
            adopted: false,
        },
        reissue: None,
    };
    record.partner.subscription = Some(Subscription {
        ends: at(1_821_536_000),
        multi_year: false,
    });
    record.validations.insert(
        "www.example.test".into(),
        ValidationMark {
            method: "HTTP".into(),
            at: at(1_790_000_001),
        },
    );
    SharedState {
        record,
        pending_key: None,
        written_by: "web1".into(),
        written_at: at(1_790_000_002),
    }
}

fn value<T: Serialize>(doc: &T) -> serde_json::Value {
    serde_json::to_value(doc).unwrap()
}

#[test]
fn a_shared_record_leaves_its_defaults_out_and_reads_back_the_same() {
    let doc = issued();
    let whole = serde_json::to_vec(&doc).unwrap();
    let compact = to_vec(&doc).unwrap();
    let text = String::from_utf8(compact.clone()).unwrap();
    assert!(
        whole.len() - compact.len() >= 250,
        "{} bytes whole, {} compact: {text}",
        whole.len(),
        compact.len()
    );
    for gone in [
        "null",
        "\"dcv\"",
        "\"failures\"",
        "\"adopted\"",
        "\"reissue\"",
    ] {
        assert!(!text.contains(gone), "{gone} in {text}");
    }
    // A field its reader needs stays, `false` as it is.
    assert!(text.contains("\"multi_year\":false"), "{text}");
    let back: SharedState = serde_json::from_slice(&compact).unwrap();
    assert_eq!(value(&back), value(&doc));
}

#[test]
fn a_host_result_reads_back_the_same() {
    let doc = HostResult {
        serial: None,
        version: 0,
        at: at(1_790_000_000),
        since: None,
        error: Some(String::new()),
        skipped: None,
    };
    let compact = to_vec(&doc).unwrap();
    let back: HostResult = serde_json::from_slice(&compact).unwrap();
    assert_eq!(value(&back), value(&doc));
}

/// A field whose reader needs it (no default) stays wherever it occurs, `null` included.
#[test]
fn what_the_reader_needs_stays() {
    #[derive(Serialize, Deserialize)]
    struct Inner {
        needed: bool,
        #[serde(with = "time::serde::rfc3339::option")]
        when: Option<OffsetDateTime>,
        #[serde(default)]
        count: u32,
    }
    #[derive(Serialize, Deserialize)]
    struct Doc {
        a: Inner,
        b: Vec<Inner>,
        #[serde(default)]
        note: String,
    }
    let inner = || Inner {
        needed: false,
        when: None,
        count: 0,
    };
    let doc = Doc {
        a: inner(),
        b: vec![inner(), inner()],
        note: String::new(),
    };
    let text = String::from_utf8(to_vec(&doc).unwrap()).unwrap();
    assert_eq!(
        text,
        r#"{"a":{"needed":false,"when":null},"b":[{"needed":false,"when":null},{"needed":false,"when":null}]}"#
    );
}

/// A reader whose default is not the zero value: only the `null`s go.
#[test]
fn a_default_other_than_zero_keeps_its_value() {
    fn yes() -> bool {
        true
    }
    #[derive(Serialize, Deserialize)]
    struct Doc {
        #[serde(default = "yes")]
        check: bool,
        label: Option<String>,
        #[serde(default)]
        count: u32,
    }
    let doc = Doc {
        check: false,
        label: None,
        count: 0,
    };
    let text = String::from_utf8(to_vec(&doc).unwrap()).unwrap();
    assert_eq!(text, r#"{"check":false,"count":0}"#);
}

/// A document that does not come back the same from its own JSON is written whole.
#[test]
fn a_document_that_does_not_read_back_the_same_is_written_whole() {
    #[derive(Serialize, Deserialize)]
    struct Doc {
        #[serde(default)]
        tags: std::collections::BTreeMap<String, u32>,
        name: Option<String>,
    }
    let doc = Doc {
        tags: [("zero".to_owned(), 0)].into(),
        name: None,
    };
    // `{"zero":0}` would lose its entry with `Defaults`; `Nulls` keeps it.
    let text = String::from_utf8(to_vec(&doc).unwrap()).unwrap();
    assert_eq!(text, r#"{"tags":{"zero":0}}"#);

    #[derive(Serialize, Deserialize)]
    struct Lossy {
        #[serde(skip_deserializing)]
        seen: Option<u32>,
    }
    let text = String::from_utf8(to_vec(&Lossy { seen: Some(3) }).unwrap()).unwrap();
    assert_eq!(text, r#"{"seen":3}"#);
}

#[test]
fn the_missing_field_is_read_from_the_error() {
    assert_eq!(
        super::missing_field("missing field `multi_year`").as_deref(),
        Some("multi_year")
    );
    assert_eq!(
        super::missing_field("invalid type: null, expected u64"),
        None
    );
}
