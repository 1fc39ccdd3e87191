//! The forecast's figures from its parts, and the check's levels for the balance.

use super::*;
use crate::monitor::check::{Level, money_check};
use serde_json::json;
use time::macros::datetime;

fn now() -> OffsetDateTime {
    datetime!(2027-01-01 00:00 UTC)
}

fn cert(name: &str, product_id: u64, days: u32) -> CertificateConfig {
    crate::config::testing::certificate(&format!(
        "name = \"{name}\"\ndomains = [\"{name}.example.com\"]\n\
         product_id = {product_id}\ndays = {days}"
    ))
}

fn product(id: u64, one_year: &str) -> Product {
    serde_json::from_value(json!({
        "id": id, "name": "DV", "brand": "b", "validation_type": "dv", "is_ev": false,
        "type": "standart", "issuer": "d-one", "prio": 1,
        "prices": [{"value": one_year, "period": 1, "rrp": "20.00"}],
        "options": [], "addons": []
    }))
    .unwrap()
}

fn due(days: i64, kind: DueKind) -> Due {
    Due {
        at: now() + Duration::days(days),
        kind,
        reason: "r".into(),
    }
}

fn amount(sum: &str) -> Amount {
    Amount {
        sum: Decimal::parse(sum).unwrap(),
        currency: "EUR".into(),
    }
}

fn dues() -> Vec<(CertificateConfig, CertRecord, Due)> {
    vec![
        (
            cert("www", 11, 365),
            CertRecord::default(),
            due(3, DueKind::Order),
        ),
        (
            cert("api", 12, 365),
            CertRecord::default(),
            due(5, DueKind::Reissue),
        ),
        (
            cert("shop", 12, 365),
            CertRecord::default(),
            due(20, DueKind::Order),
        ),
    ]
}

#[test]
fn billed_orders_are_priced_from_the_catalogue_and_reissues_are_free() {
    let products = [product(11, "8.80"), product(12, "27.50")];
    let f = priced(
        now(),
        30,
        now() + Duration::days(30),
        &dues(),
        &products,
        Some(amount("40")),
    );
    let prices: Vec<Option<&str>> = f
        .items
        .iter()
        .map(|i| i.price.as_ref().map(Decimal::as_str))
        .collect();
    assert_eq!(prices, [Some("8.80"), Some("0.00"), Some("27.50")]);
    assert_eq!(f.total.as_str(), "36.30");
    assert_eq!(f.covered, Some(true));
    assert_eq!(f.spend_until(now() + Duration::days(7)).0.as_str(), "8.80");
    assert!(f.unpriced.is_empty());
}

#[test]
fn the_balance_levels_of_check() {
    let products = [product(11, "8.80"), product(12, "27.50")];
    let level = |available: &str| {
        let f = priced(
            now(),
            30,
            now() + Duration::days(30),
            &dues(),
            &products,
            Some(amount(available)),
        );
        money_check(Ok(f), now())
    };
    assert_eq!(level("36.30").level, Level::Ok);
    let w = level("36.29");
    assert_eq!(w.level, Level::Warning);
    assert!(
        w.problems[0].contains("36.30 EUR of orders due within 30 days"),
        "{:?}",
        w.problems
    );
    assert_eq!(level("8.80").level, Level::Warning);
    let c = level("8.79");
    assert_eq!(c.level, Level::Critical);
    assert!(
        c.problems[0].contains("8.80 EUR of orders due within 7 days"),
        "{:?}",
        c.problems
    );
    // The balance not readable: a WARNING that says so.
    let e = money_check(Err(anyhow::anyhow!("connection refused")), now());
    assert_eq!(e.level, Level::Warning);
    assert!(e.problems[0].contains("could not be read: connection refused"));
}

#[test]
fn an_order_without_a_catalogue_price_is_not_covered_silently() {
    // Product 12 is gone from the catalogue.
    let products = [product(11, "8.80")];
    let f = priced(
        now(),
        30,
        now() + Duration::days(30),
        &dues(),
        &products,
        Some(amount("1000")),
    );
    assert_eq!(f.unpriced, ["shop"]);
    assert_eq!(f.covered, Some(false));
    assert_eq!(f.total.as_str(), "8.80");
    let m = money_check(Ok(f), now());
    assert_eq!(m.level, Level::Warning);
    assert!(
        m.problems
            .iter()
            .any(|p| p.contains("no price for the order of shop"))
    );
}

#[test]
fn the_kept_figures_survive_a_round_trip_and_garbage_counts_as_none() {
    let dir = tempfile::tempdir().unwrap();
    let store = Store::open(dir.path()).unwrap();
    assert!(last_snapshot(&store).is_none(), "no file yet");
    let products = [product(11, "8.80"), product(12, "27.50")];
    let f = priced(
        now(),
        30,
        now() + Duration::days(30),
        &dues(),
        &products,
        Some(amount("40")),
    );
    remember(&store, &f, now());
    let kept = last_snapshot(&store).unwrap();
    assert_eq!(kept.spend_30d.as_str(), "36.30");
    assert_eq!(kept.by_certificate["shop"].as_str(), "27.50");
    assert_eq!(kept.available.unwrap().sum.as_str(), "40");
    let path = dir.path().join(SNAPSHOT_FILE);
    use std::os::unix::fs::PermissionsExt;
    assert_eq!(
        std::fs::metadata(&path).unwrap().permissions().mode() & 0o777,
        0o600
    );
    for garbage in [
        &b"\xff\xfe not json"[..],
        b"{}",
        b"{\"at\": \"yesterday\", \"spend_30d\": \"1\"}",
        b"{\"at\": \"2027-01-01T00:00:00Z\", \"spend_30d\": \"1e9\"}",
        b"[1,2,3]",
    ] {
        std::fs::write(&path, garbage).unwrap();
        assert!(last_snapshot(&store).is_none(), "{garbage:?}");
    }
}
