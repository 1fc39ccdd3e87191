//! The products call: shape, families, prices, options, recommended prices.

use serde_json::Value;

use super::*;

fn is_decimal(v: &Value) -> bool {
    v.as_str().is_some_and(|s| {
        let mut parts = s.split('.');
        let (a, b) = (parts.next().unwrap_or(""), parts.next().unwrap_or(""));
        !a.is_empty()
            && a.bytes().all(|c| c.is_ascii_digit())
            && b.len() == 2
            && b.bytes().all(|c| c.is_ascii_digit())
            && parts.next().is_none()
    })
}

fn products(env: &mut Env, login: &str, query: &[(&str, &str)]) -> Vec<Value> {
    let resp = env.get_q(login, "/api/v1/products", query);
    assert_eq!(resp.status, 200, "{:?}", resp.body);
    json_of(&resp).as_array().unwrap().clone()
}

#[test]
fn products_have_every_documented_field() {
    let mut env = Env::new();
    let list = products(&mut env, PARTNER, &[]);
    assert!(list.len() >= 12);
    let mut prio = i64::MAX;
    for p in &list {
        assert!(p["id"].is_u64());
        assert!(p["name"].is_string());
        assert!(
            p["brand"]
                .as_str()
                .unwrap()
                .chars()
                .all(|c| c.is_ascii_lowercase())
        );
        let vt = p["validation_type"].as_str().unwrap();
        assert!(["dv", "ov", "ev"].contains(&vt));
        assert_eq!(p["is_ev"], vt == "ev");
        assert!(["standart", "wildcard", "ucc"].contains(&p["type"].as_str().unwrap()));
        assert!(crate::ca::ISSUERS.contains(&p["issuer"].as_str().unwrap()));
        let this = p["prio"].as_i64().unwrap();
        assert!(this <= prio, "higher prio first");
        prio = this;
        let prices = p["prices"].as_array().unwrap();
        assert_eq!(
            prices
                .iter()
                .map(|x| x["period"].as_u64().unwrap())
                .collect::<Vec<_>>(),
            [1, 2, 3, 4, 5]
        );
        for price in prices {
            assert!(
                is_decimal(&price["value"]) && is_decimal(&price["rrp"]),
                "{price}"
            );
        }
        assert!(p["addons"].as_array().unwrap().is_empty());
        let options = p["options"].as_array().unwrap();
        if p["type"] == "ucc" {
            let extra = options
                .iter()
                .find(|o| o["type"].is_null())
                .expect("additional domains option");
            assert!(extra["quantity_from"].is_u64());
            assert!(extra["quantity_to"].is_u64() || extra["quantity_to"].is_null());
            assert!(extra["description"].is_string());
            assert!(
                extra["prices"]
                    .as_array()
                    .unwrap()
                    .iter()
                    .all(|x| is_decimal(&x["value"]))
            );
        } else {
            assert!(options.is_empty());
        }
    }
    for issuer in crate::ca::ISSUERS {
        assert!(list.iter().any(|p| p["issuer"] == issuer));
    }
    assert!(list.iter().any(|p| {
        p["type"] == "ucc"
            && p["options"]
                .as_array()
                .unwrap()
                .iter()
                .any(|o| o["type"] == "wildcard")
    }));
    assert!(
        list.iter()
            .any(|p| p["type"] == "ucc" && p["options"][0]["quantity_to"].is_null())
    );
}

#[test]
fn recommended_prices_eu_gives_end_user_prices_in_eur() {
    let mut env = Env::new();
    let partner = products(&mut env, PARTNER, &[]);
    let eu = products(&mut env, PARTNER, &[("recommended_prices", "EU")]);
    let find = |list: &[Value], id: u64| list.iter().find(|p| p["id"] == id).unwrap().clone();
    let (a, b) = (find(&partner, p::S_DV), find(&eu, p::S_DV));
    // Partner price in USD: 8.00 EUR * 1.10.
    assert_eq!(a["prices"][0]["value"], "8.80");
    assert_eq!(a["prices"][0]["rrp"], "16.50");
    assert_eq!(b["prices"][0]["value"], "15.00");
    assert_eq!(b["prices"][0]["rrp"], "15.00");
    assert_eq!(
        a["prices"][1]["value"], "16.72",
        "two years: 2 x 8.80 less 5 %"
    );
    let resp = env.get_q(PARTNER, "/api/v1/products", &[("recommended_prices", "US")]);
    assert_eq!(resp.status, 400);
    // An account without agreement sees EUR partner prices.
    let new = products(&mut env, NEW, &[]);
    assert_eq!(find(&new, p::S_DV)["prices"][0]["value"], "8.00");
}
