//! The fixed catalogue: families, products and their prices, server software lists, countries.
//!
//! Prices are kept in euro cents per year and converted to the account currency at a fixed
//! rate; a period of N years costs N yearly prices less 5 % per extra year.

use serde::{Deserialize, Serialize};
use serde_json::{Value, json};

/// CA families of the document.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub(super) enum Family {
    S,
    D,
    C,
}

/// The CA domain that goes into the second line of the CSR-hash file, per family (S, D, C).
pub const CA_DOMAINS: [&str; 3] = [
    "ca-s.sandbox.test",
    "ca-d.sandbox.test",
    "ca-c.sandbox.test",
];

/// The value of `provider` in the DCV emails call that selects family D's addresses (the
/// document writes it as `<PROVIDER_D>`).
pub const PROVIDER_D: &str = "provider_d";

impl Family {
    pub(super) fn of_issuer(issuer: &str) -> Family {
        match issuer {
            "d-one" => Family::D,
            "c-one" => Family::C,
            _ => Family::S,
        }
    }

    pub(super) fn ca_domain(self) -> &'static str {
        match self {
            Family::S => CA_DOMAINS[0],
            Family::D => CA_DOMAINS[1],
            Family::C => CA_DOMAINS[2],
        }
    }

    /// `(id, code, name)` of the server software entries; the first is the default for id 0.
    pub(super) fn software(self) -> &'static [(u64, &'static str, &'static str)] {
        match self {
            Family::S => &[
                (3, "apache_mod_ssl", "Web server with SSL module"),
                (37, "iis7", "Windows web server 7.x and later"),
                (180, "linux", "Generic Linux"),
                (181, "windows", "Generic Windows"),
                (34, "other", "Other"),
            ],
            Family::D => &[
                (41, "apache", "Web server with SSL module"),
                (56, "apache2", "Web server 2"),
                (38, "iis", "Windows web server (all versions)"),
                (182, "linux", "Generic Linux"),
                (183, "windows", "Generic Windows"),
                (39, "other", "Other"),
            ],
            Family::C => &[
                (186, "apache", "Web server with SSL module"),
                (187, "iis7", "Windows web server 7.x and later"),
                (188, "other", "Other"),
            ],
        }
    }
}

/// Product type (`standart` is the contract's spelling).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Kind {
    Standart,
    Wildcard,
    Ucc,
}

impl Kind {
    fn as_str(self) -> &'static str {
        match self {
            Standart => "standart",
            Wildcard => "wildcard",
            Ucc => "ucc",
        }
    }
}

/// One product of the catalogue.
#[derive(Debug)]
pub(super) struct ProductDef {
    pub id: u64,
    pub name: &'static str,
    pub brand: &'static str,
    pub validation: &'static str,
    pub kind: Kind,
    pub issuer: &'static str,
    pub prio: i64,
    /// Partner price per year, euro cents.
    pub year_cents: i64,
    /// Recommended end-user price per year, euro cents.
    pub rrp_year_cents: i64,
    /// Wildcard products: the bare domain is in the certificate too.
    pub covers_bare: bool,
    /// ucc: non-wildcard names (common name included) in the base price.
    pub included: u32,
    /// ucc: most non-wildcard names; `None` = no limit in the catalogue (see `UCC_HARD_CAP`).
    pub max_domains: Option<u32>,
    /// ucc: most wildcard names (0 = none allowed).
    pub wildcard_max: u32,
    /// ucc: price per extra name per year, euro cents.
    pub extra_year_cents: i64,
    /// ucc: price per wildcard name per year, euro cents.
    pub wildcard_year_cents: i64,
    /// Family S multi-domain products whose reissue creates a new certificate ID.
    pub new_id_on_reissue: bool,
}

impl ProductDef {
    pub(super) fn family(&self) -> Family {
        Family::of_issuer(self.issuer)
    }

    pub(super) fn needs_organization(&self) -> bool {
        self.validation != "dv"
    }

    /// Most non-wildcard names an order may have.
    pub(super) fn max_names(&self) -> u32 {
        match self.kind {
            Ucc => self.max_domains.unwrap_or(UCC_HARD_CAP),
            _ => 1,
        }
    }
}

/// Limit applied to ucc products whose option has no upper bound.
pub(super) const UCC_HARD_CAP: u32 = 250;

#[allow(clippy::too_many_arguments)] // one row of the catalogue table
const fn p(
    id: u64,
    name: &'static str,
    brand: &'static str,
    validation: &'static str,
    kind: Kind,
    issuer: &'static str,
    prio: i64,
    year_cents: i64,
    rrp_year_cents: i64,
) -> ProductDef {
    ProductDef {
        id,
        name,
        brand,
        validation,
        kind,
        issuer,
        prio,
        year_cents,
        rrp_year_cents,
        covers_bare: false,
        included: 1,
        max_domains: Some(1),
        wildcard_max: 0,
        extra_year_cents: 0,
        wildcard_year_cents: 0,
        new_id_on_reissue: false,
    }
}

const fn wildcard(mut def: ProductDef, covers_bare: bool) -> ProductDef {
    def.covers_bare = covers_bare;
    def
}

const fn ucc(
    mut def: ProductDef,
    included: u32,
    max_domains: Option<u32>,
    extra_year_cents: i64,
    wildcard_max: u32,
    wildcard_year_cents: i64,
) -> ProductDef {
    def.included = included;
    def.max_domains = max_domains;
    def.extra_year_cents = extra_year_cents;
    def.wildcard_max = wildcard_max;
    def.wildcard_year_cents = wildcard_year_cents;
    def
}

const fn new_id(mut def: ProductDef) -> ProductDef {
    def.new_id_on_reissue = true;
    def
}

use Kind::{Standart, Ucc, Wildcard};

/// The catalogue. IDs are stable across restarts (they are what configurations name).
pub(super) static PRODUCTS: [ProductDef; 17] = [
    // Family S, issuer s-one.
    p(
        1101,
        "Aurora DV",
        "aurora",
        "dv",
        Standart,
        "s-one",
        90,
        800,
        1500,
    ),
    wildcard(
        p(
            1102,
            "Aurora DV Wildcard",
            "aurora",
            "dv",
            Wildcard,
            "s-one",
            80,
            6000,
            11000,
        ),
        true,
    ),
    ucc(
        p(
            1103,
            "Aurora DV UCC",
            "aurora",
            "dv",
            Ucc,
            "s-one",
            70,
            2500,
            4500,
        ),
        3,
        Some(100),
        600,
        0,
        0,
    ),
    p(
        1104,
        "Borealis OV",
        "borealis",
        "ov",
        Standart,
        "s-one",
        60,
        4000,
        7000,
    ),
    p(
        1105,
        "Borealis EV",
        "borealis",
        "ev",
        Standart,
        "s-one",
        50,
        9000,
        15000,
    ),
    ucc(
        p(
            1106,
            "Borealis OV UCC",
            "borealis",
            "ov",
            Ucc,
            "s-one",
            40,
            6000,
            9900,
        ),
        3,
        None,
        1200,
        10,
        9000,
    ),
    // Family S, issuer s-two (multi-domain reissues get a new ID).
    p(
        1201,
        "Cirrus DV",
        "cirrus",
        "dv",
        Standart,
        "s-two",
        85,
        700,
        1400,
    ),
    new_id(ucc(
        p(
            1202,
            "Cirrus DV UCC",
            "cirrus",
            "dv",
            Ucc,
            "s-two",
            65,
            2200,
            4000,
        ),
        3,
        Some(50),
        500,
        5,
        5000,
    )),
    new_id(ucc(
        p(
            1203,
            "Cirrus EV UCC",
            "cirrus",
            "ev",
            Ucc,
            "s-two",
            45,
            18000,
            26000,
        ),
        2,
        Some(25),
        4000,
        0,
        0,
    )),
    // Family D.
    p(
        2101, "Delta DV", "delta", "dv", Standart, "d-one", 88, 1000, 1900,
    ),
    wildcard(
        p(
            2102,
            "Delta DV Wildcard",
            "delta",
            "dv",
            Wildcard,
            "d-one",
            78,
            7000,
            12000,
        ),
        false,
    ),
    ucc(
        p(
            2103,
            "Delta OV UCC",
            "delta",
            "ov",
            Ucc,
            "d-one",
            68,
            9000,
            14000,
        ),
        4,
        Some(250),
        1500,
        0,
        0,
    ),
    p(
        2104, "Ember EV", "ember", "ev", Standart, "d-one", 48, 12000, 19000,
    ),
    // Family C.
    p(
        3101, "Fjord DV", "fjord", "dv", Standart, "c-one", 87, 600, 1200,
    ),
    wildcard(
        p(
            3102,
            "Fjord DV Wildcard",
            "fjord",
            "dv",
            Wildcard,
            "c-one",
            77,
            5000,
            9000,
        ),
        true,
    ),
    ucc(
        p(
            3103,
            "Fjord DV UCC",
            "fjord",
            "dv",
            Ucc,
            "c-one",
            67,
            2000,
            3600,
        ),
        3,
        Some(100),
        450,
        0,
        0,
    ),
    p(
        3104,
        "Granite OV",
        "granite",
        "ov",
        Standart,
        "c-one",
        57,
        3500,
        6000,
    ),
];

pub(super) fn product(id: u64) -> Option<&'static ProductDef> {
    PRODUCTS.iter().find(|p| p.id == id)
}

/// The price period (years) an order of `days` is billed for: whole years rounded up, at
/// most 5 (days beyond five years are the carried-over bonus of a renewal).
pub(super) fn period_of_days(days: i64) -> u32 {
    let years = (days.max(1) + 364) / 365;
    u32::try_from(years.clamp(1, 5)).unwrap_or(5)
}

fn period_cents(year_cents: i64, period: u32) -> i64 {
    let period = i64::from(period);
    year_cents * period * (100 - 5 * (period - 1)) / 100
}

/// Euro cents in `currency` (fixed rate: 1 EUR = 1.10 USD).
pub(super) fn convert(eur_cents: i64, currency: &str) -> i64 {
    match currency {
        "USD" => (eur_cents * 110 + 50) / 100,
        _ => eur_cents,
    }
}

/// `1234` → `"12.34"`.
pub(super) fn money(cents: i64) -> String {
    let sign = if cents < 0 { "-" } else { "" };
    format!("{sign}{}.{:02}", cents.abs() / 100, cents.abs() % 100)
}

/// Partner price of an order item in the account currency.
pub(super) fn item_price(
    product: &ProductDef,
    period: u32,
    non_wildcard_names: u32,
    wildcard_names: u32,
    currency: &str,
) -> i64 {
    let mut eur = period_cents(product.year_cents, period);
    if product.kind == Ucc {
        let extra = i64::from(non_wildcard_names.saturating_sub(product.included));
        eur += extra * period_cents(product.extra_year_cents, period);
        eur += i64::from(wildcard_names) * period_cents(product.wildcard_year_cents, period);
    }
    convert(eur, currency)
}

fn prices(year_cents: i64, rrp_year_cents: i64, currency: &str, end_user_eur: bool) -> Value {
    (1..=5u32)
        .map(|period| {
            let rrp = period_cents(rrp_year_cents, period);
            let (value, rrp) = if end_user_eur {
                (rrp, rrp)
            } else {
                (
                    convert(period_cents(year_cents, period), currency),
                    convert(rrp, currency),
                )
            };
            json!({ "value": money(value), "period": period, "rrp": money(rrp) })
        })
        .collect()
}

fn product_value(def: &ProductDef, currency: &str, end_user_eur: bool) -> Value {
    let mut options = Vec::new();
    if def.kind == Ucc {
        options.push(json!({
            "quantity_from": def.included + 1,
            "quantity_to": def.max_domains,
            "type": null,
            "description": format!("Additional domain (the first {} are included)", def.included),
            "prices": prices(def.extra_year_cents, def.extra_year_cents * 18 / 10, currency, end_user_eur),
        }));
        if def.wildcard_max > 0 {
            options.push(json!({
                "quantity_from": 1,
                "quantity_to": def.wildcard_max,
                "type": "wildcard",
                "description": "Wildcard domain",
                "prices": prices(def.wildcard_year_cents, def.wildcard_year_cents * 18 / 10, currency, end_user_eur),
            }));
        }
    }
    json!({
        "id": def.id,
        "name": def.name,
        "brand": def.brand,
        "validation_type": def.validation,
        "is_ev": def.validation == "ev",
        "type": def.kind.as_str(),
        "issuer": def.issuer,
        "prio": def.prio,
        "prices": prices(def.year_cents, def.rrp_year_cents, currency, end_user_eur),
        "options": options,
        "addons": [],
    })
}

/// The products array, highest `prio` first.
pub(super) fn products_value(currency: &str, end_user_eur: bool) -> Value {
    let mut defs: Vec<&ProductDef> = PRODUCTS.iter().collect();
    defs.sort_by_key(|d| std::cmp::Reverse(d.prio));
    Value::Array(
        defs.into_iter()
            .map(|d| product_value(d, currency, end_user_eur))
            .collect(),
    )
}

/// The ssl_server_softwares list of a product.
pub(super) fn software_value(def: &ProductDef) -> Value {
    def.family()
        .software()
        .iter()
        .map(|(id, code, name)| json!({ "id": id, "code": code, "name": name, "issuer": def.issuer }))
        .collect()
}

/// `(id, ISO 3166-1 alpha-2, name)`.
pub(super) static COUNTRIES: [(u64, &str, &str); 40] = [
    (14, "AT", "Austria"),
    (15, "AU", "Australia"),
    (22, "BE", "Belgium"),
    (32, "BR", "Brazil"),
    (39, "CA", "Canada"),
    (42, "CH", "Switzerland"),
    (47, "CN", "China"),
    (56, "CZ", "Czechia"),
    (57, "DE", "Germany"),
    (60, "DK", "Denmark"),
    (68, "EE", "Estonia"),
    (70, "ES", "Spain"),
    (75, "FI", "Finland"),
    (80, "FR", "France"),
    (82, "GB", "United Kingdom"),
    (96, "GR", "Greece"),
    (103, "HR", "Croatia"),
    (105, "HU", "Hungary"),
    (107, "IE", "Ireland"),
    (108, "IL", "Israel"),
    (110, "IN", "India"),
    (115, "IT", "Italy"),
    (119, "JP", "Japan"),
    (129, "KR", "Korea, Republic of"),
    (139, "LT", "Lithuania"),
    (140, "LU", "Luxembourg"),
    (141, "LV", "Latvia"),
    (160, "MX", "Mexico"),
    (166, "NL", "Netherlands"),
    (167, "NO", "Norway"),
    (171, "NZ", "New Zealand"),
    (181, "PL", "Poland"),
    (186, "PT", "Portugal"),
    (191, "RO", "Romania"),
    (197, "SE", "Sweden"),
    (200, "SI", "Slovenia"),
    (202, "SK", "Slovakia"),
    (228, "UA", "Ukraine"),
    (233, "US", "United States"),
    (250, "ZA", "South Africa"),
];

pub(super) fn country_by_code(code: &str) -> Option<u64> {
    COUNTRIES
        .iter()
        .find(|(_, c, _)| *c == code)
        .map(|(id, _, _)| *id)
}

pub(super) fn country_by_id(id: u64) -> Option<&'static str> {
    COUNTRIES
        .iter()
        .find(|(i, _, _)| *i == id)
        .map(|(_, c, _)| *c)
}

pub(super) fn countries_value() -> Value {
    COUNTRIES
        .iter()
        .map(|(id, code, name)| json!({ "id": id, "code": code, "name": name }))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn catalogue_covers_every_family_kind_and_validation_level() {
        for issuer in crate::ca::ISSUERS {
            assert!(PRODUCTS.iter().any(|p| p.issuer == issuer), "{issuer}");
        }
        for family in [Family::S, Family::D, Family::C] {
            for kind in [Standart, Wildcard, Ucc] {
                assert!(
                    PRODUCTS
                        .iter()
                        .any(|p| p.family() == family && p.kind == kind),
                    "{family:?} {kind:?}"
                );
            }
        }
        for v in ["dv", "ov", "ev"] {
            assert!(PRODUCTS.iter().any(|p| p.validation == v));
        }
        let mut ids: Vec<u64> = PRODUCTS.iter().map(|p| p.id).collect();
        ids.sort_unstable();
        ids.dedup();
        assert_eq!(ids.len(), PRODUCTS.len());
        let brands: std::collections::BTreeSet<&str> = PRODUCTS.iter().map(|p| p.brand).collect();
        assert_eq!(brands.len(), 7, "seven brand identifiers");
    }

    #[test]
    fn periods_and_prices() {
        assert_eq!(period_of_days(60), 1);
        assert_eq!(period_of_days(365), 1);
        assert_eq!(period_of_days(366), 2);
        assert_eq!(period_of_days(730), 2);
        assert_eq!(period_of_days(1825), 5);
        assert_eq!(period_of_days(2200), 5);
        assert_eq!(money(123_456), "1234.56");
        assert_eq!(money(5), "0.05");
        let dv = product(1101).unwrap();
        assert_eq!(item_price(dv, 1, 1, 0, "EUR"), 800);
        assert_eq!(item_price(dv, 2, 1, 0, "EUR"), 1520);
        assert_eq!(item_price(dv, 1, 1, 0, "USD"), 880);
        let ucc = product(1103).unwrap();
        assert_eq!(item_price(ucc, 1, 3, 0, "EUR"), 2500);
        assert_eq!(item_price(ucc, 1, 5, 0, "EUR"), 2500 + 2 * 600);
    }
}
