//! Endpoint 5: validation of OrderRequest / OrderItem (every rule of the document, every
//! problem reported at once) and placement of the billed order.

use std::collections::{BTreeMap, BTreeSet};

use serde_json::{Map, Value, json};
use x509_parser::oid_registry::{
    OID_EC_P256, OID_KEY_TYPE_EC_PUBLIC_KEY, OID_NIST_EC_P384, OID_PKCS1_RSAENCRYPTION,
};
use x509_parser::prelude::FromDer;
use x509_parser::public_key::PublicKey;
use x509_parser::x509::SubjectPublicKeyInfo;

use super::State;
use super::accounts::{Caller, MSG_NO_PERMISSION, MSG_NOT_PARTNER, Role};
use super::catalogue::{self, Family, Kind, ProductDef};
use super::model::{Base, Cert, CsrFacts, DNS_TXT_ALIASES, DomainDcv, Method, OrderInfo};
use super::names;
use super::rng::SeededRng;
use super::routes::error;
use crate::ca::{self, CaError, CsrInfo};
use crate::wire::{ApiRequest, ApiResponse};

pub(super) const MIN_DAYS: i64 = 60;
pub(super) const MAX_DAYS: i64 = 2200;
const MSG_ORDER_MISSING: &str = "Required parameter is missing";
const CSR_MARKERS: [&str; 2] = [
    "-----BEGIN CERTIFICATE REQUEST-----",
    "-----BEGIN NEW CERTIFICATE REQUEST-----",
];

/// Administrative contact fields of `order` (all optional strings).
const CONTACT_FIELDS: [&str; 10] = [
    "first_name",
    "last_name",
    "phone",
    "email",
    "title",
    "company",
    "address_1",
    "city_name",
    "region_name",
    "zip_code",
];

/// `first_name` → `First name` (Rails' humanize, as in its error messages).
fn humanize(field: &str) -> String {
    let text = field.replace('_', " ");
    let mut chars = text.chars();
    chars.next().map_or_else(String::new, |c| {
        c.to_uppercase().chain(chars).collect::<String>()
    })
}

/// A string field: `Ok(None)` when absent or null, `Err` when of another type.
fn get_str<'a>(obj: &'a Map<String, Value>, key: &str) -> Result<Option<&'a str>, ()> {
    match obj.get(key) {
        None | Some(Value::Null) => Ok(None),
        Some(Value::String(s)) => Ok(Some(s)),
        Some(_) => Err(()),
    }
}

/// An integer field (JSON integer only): `Ok(None)` when absent or null.
fn get_int(obj: &Map<String, Value>, key: &str) -> Result<Option<i64>, ()> {
    match obj.get(key) {
        None | Some(Value::Null) => Ok(None),
        Some(v) => v.as_i64().map(Some).ok_or(()),
    }
}

/// A required non-blank string; pushes the Rails-style message otherwise.
fn required_str(obj: &Map<String, Value>, key: &str, errs: &mut Vec<String>) -> Option<String> {
    match get_str(obj, key) {
        Ok(Some(s)) if !s.trim().is_empty() => Some(s.trim().to_string()),
        Ok(_) => {
            errs.push(format!("{} can't be blank", humanize(key)));
            None
        }
        Err(()) => {
            errs.push(format!("{} must be a string", humanize(key)));
            None
        }
    }
}

/// An optional string; pushes a type error for other JSON types.
fn optional_str(obj: &Map<String, Value>, key: &str, errs: &mut Vec<String>) -> Option<String> {
    match get_str(obj, key) {
        Ok(s) => s.map(str::to_string).filter(|s| !s.trim().is_empty()),
        Err(()) => {
            errs.push(format!("{} must be a string", humanize(key)));
            None
        }
    }
}

/// Why a CSR's key is refused: RSA 2048–4096 bits and ECDSA P-256 / P-384 are accepted.
pub(super) fn key_problem(spki_der: &[u8]) -> Option<String> {
    let Ok((_, spki)) = SubjectPublicKeyInfo::from_der(spki_der) else {
        return Some("the public key cannot be read".to_string());
    };
    let alg = &spki.algorithm.algorithm;
    if *alg == OID_PKCS1_RSAENCRYPTION {
        return match spki.parsed() {
            Ok(PublicKey::RSA(rsa)) => {
                let bits = rsa.key_size();
                if bits < 2048 {
                    Some(format!(
                        "an RSA key of {bits} bits is too short (at least 2048)"
                    ))
                } else if bits > 4096 {
                    Some(format!(
                        "an RSA key of {bits} bits is too long (at most 4096)"
                    ))
                } else {
                    None
                }
            }
            _ => Some("the RSA key is malformed".to_string()),
        };
    }
    if *alg == OID_KEY_TYPE_EC_PUBLIC_KEY {
        let curve = spki
            .algorithm
            .parameters
            .as_ref()
            .and_then(|p| p.as_oid().ok());
        return match curve {
            Some(c) if c == OID_EC_P256 || c == OID_NIST_EC_P384 => None,
            Some(c) => Some(format!(
                "the elliptic curve {c} is not accepted (P-256 or P-384)"
            )),
            None => Some("the elliptic curve is not named".to_string()),
        };
    }
    Some(format!(
        "the key algorithm {alg} is not accepted (RSA 2048-4096 bits, ECDSA P-256 or P-384)"
    ))
}

/// Parses a PEM CSR for an order or reissue: it must begin with a certificate-request
/// marker, parse, verify, carry an acceptable key, and contain no internal name or private
/// address. Every problem is returned.
pub(super) fn check_csr(pem: &str, label: &str) -> Result<CsrInfo, Vec<String>> {
    let trimmed = pem.trim_start();
    if !CSR_MARKERS.iter().any(|m| trimmed.starts_with(m)) {
        return Err(vec![format!(
            "{label} must begin with -----BEGIN CERTIFICATE REQUEST----- (or the NEW variant)"
        )]);
    }
    let info = ca::parse_csr(pem).map_err(|e| match e {
        CaError::InvalidCsr(why) => vec![format!("{label} is invalid: {why}")],
        other => vec![format!("{label} is invalid: {other}")],
    })?;
    let mut errs = Vec::new();
    if let Some(why) = key_problem(&info.public_key_der) {
        errs.push(format!("{label} key is not acceptable: {why}"));
    }
    let mut seen = Vec::new();
    for name in info.common_name.iter().chain(info.dns_names.iter()) {
        let lower = name.trim().to_ascii_lowercase();
        if names::is_internal(&lower) && !seen.contains(&lower) {
            errs.push(format!("{label} contains the internal name {lower}"));
            seen.push(lower);
        }
    }
    for ip in &info.ip_addresses {
        if names::is_private_ip(ip) {
            errs.push(format!(
                "{label} contains the private IP address {ip} (internal)"
            ));
        }
    }
    if errs.is_empty() { Ok(info) } else { Err(errs) }
}

/// A validation value of an email field: an accepted address for `domain`, or (family S
/// only) an alternative method name. DNS TXT values are handled by the caller.
pub(super) fn email_field_choice(
    value: &str,
    domain: &str,
    family: Family,
) -> Result<(Method, Option<String>), String> {
    if family == Family::S
        && let Some(m @ (Method::Http | Method::Https | Method::Cname)) = Method::parse(value)
    {
        return Ok((m, None));
    }
    if names::email_accepted_for(value, domain) {
        return Ok((Method::Email, Some(value.to_ascii_lowercase())));
    }
    Err(format!(
        "{value} is not an accepted validation address for {domain} (see the DCV emails call)"
    ))
}

/// Fresh random DNS TXT values: one for the whole order (family S), one per domain
/// (families D and C).
pub(super) fn assign_txt_values(rng: &mut SeededRng, cert: &mut Cert) {
    let uses_txt = cert.domains.iter().any(|d| d.method == Method::DnsTxt);
    if cert.family() == Family::S {
        cert.order_txt_value = uses_txt.then(|| rng.lower_token(32));
    } else {
        for d in &mut cert.domains {
            d.random_value = (d.method == Method::DnsTxt).then(|| rng.lower_token(32));
        }
    }
}

/// A validated order item, ready to be placed.
struct Planned {
    product: &'static ProductDef,
    days: i64,
    software_id: u64,
    common_name: String,
    additional: Vec<String>,
    additional_input: String,
    domains: Vec<DomainDcv>,
    unique_value: Option<String>,
    csr: CsrFacts,
    info: OrderInfo,
    non_wildcard: u32,
    wildcards: u32,
}

/// Validates one item; every problem goes to `errs`. `None` when anything is wrong.
#[allow(clippy::too_many_lines)]
fn validate_item(item: &Map<String, Value>, errs: &mut Vec<String>) -> Option<Planned> {
    let start = errs.len();

    let product = match get_int(item, "nomenclature_id") {
        Ok(None) => {
            errs.push("Nomenclature can't be blank".to_string());
            None
        }
        Err(()) => {
            errs.push("Nomenclature is not a number".to_string());
            None
        }
        Ok(Some(id)) => {
            let found = u64::try_from(id).ok().and_then(catalogue::product);
            if found.is_none() {
                errs.push(format!(
                    "Nomenclature {id} is not a product of the catalogue"
                ));
            }
            found
        }
    };
    let family = product.map(ProductDef::family);

    let days = match get_int(item, "days") {
        Ok(None) => {
            errs.push("Days can't be blank".to_string());
            None
        }
        Err(()) => {
            errs.push("Days is not a number".to_string());
            None
        }
        Ok(Some(d)) if d < MIN_DAYS => {
            errs.push(format!("Days must be greater than or equal to {MIN_DAYS}"));
            None
        }
        Ok(Some(d)) if d > MAX_DAYS => {
            errs.push(format!("Days must be less than or equal to {MAX_DAYS}"));
            None
        }
        Ok(Some(d)) => Some(d),
    };

    let software_id = match get_int(item, "ssl_server_software_id") {
        Ok(None) => {
            errs.push("Ssl server software can't be blank".to_string());
            None
        }
        Err(()) => {
            errs.push("Ssl server software is not a number".to_string());
            None
        }
        Ok(Some(id)) => {
            let listed = |f: Family| {
                f.software()
                    .iter()
                    .any(|(sid, _, _)| i64::try_from(*sid) == Ok(id))
            };
            match family {
                Some(f) if id != 0 && !listed(f) => {
                    errs.push("Ssl server software is not included in the list".to_string());
                    None
                }
                // 0 lets the service choose the CA's default (an open-source web server).
                Some(f) if id == 0 => Some(f.software()[0].0),
                _ => u64::try_from(id).ok(),
            }
        }
    };

    let method = match item.get("dcv_type") {
        None | Some(Value::Null) => Some(Method::Email),
        Some(Value::String(s)) => Method::parse(s),
        Some(_) => None,
    };
    if method.is_none() {
        errs.push("Dcv type is not included in the list".to_string());
    }
    let main_method = method.zip(family).map(|(m, f)| m.for_family(f));

    let common_name = match get_str(item, "domain_name") {
        Ok(Some(s)) if !s.trim().is_empty() => Some(s.trim().to_ascii_lowercase()),
        Ok(_) => {
            errs.push("Domain name can't be blank".to_string());
            None
        }
        Err(()) => {
            errs.push("Domain name must be a string".to_string());
            None
        }
    };
    if let Some(cn) = &common_name {
        if let Some(problem) = names::order_name_problem(cn) {
            errs.push(format!("Domain name {cn} {problem}"));
        }
        if let Some(p) = product {
            let wildcard = names::is_wildcard(cn);
            match p.kind {
                Kind::Wildcard if !wildcard => errs.push(format!(
                    "Domain name {cn} must be a wildcard name (*.example.com) for the wildcard product {}",
                    p.name
                )),
                Kind::Standart if wildcard => errs.push(format!(
                    "Domain name {cn}: wildcard names need a wildcard product ({} is single-name)",
                    p.name
                )),
                Kind::Ucc if wildcard && p.wildcard_max == 0 => errs.push(format!(
                    "Domain name {cn}: product {} accepts no wildcard names",
                    p.name
                )),
                _ => {}
            }
        }
    }

    let csr = match get_str(item, "csr") {
        Ok(Some(pem)) if !pem.trim().is_empty() => match check_csr(pem, "Csr") {
            Ok(info) => Some((pem.to_string(), info)),
            Err(mut problems) => {
                errs.append(&mut problems);
                None
            }
        },
        Ok(_) => {
            errs.push("Csr can't be blank".to_string());
            None
        }
        Err(()) => {
            errs.push("Csr must be a string".to_string());
            None
        }
    };

    // Organisation data of the item.
    let country_name = required_str(item, "country_name", errs);
    if let Some(code) = &country_name
        && catalogue::country_by_code(code).is_none()
    {
        errs.push(format!(
            "Country name {code} is not the ISO 3166-1 alpha-2 code of a known country"
        ));
    }
    let region_name = required_str(item, "region_name", errs);
    let city_name = required_str(item, "city_name", errs);
    let organization_name = optional_str(item, "organization_name", errs);
    if organization_name.is_none() && product.is_some_and(ProductDef::needs_organization) {
        errs.push("Organization name can't be blank (required for OV and EV products)".to_string());
    }
    let organizational_unit = optional_str(item, "organizational_unit", errs);
    let zip_code = optional_str(item, "zip_code", errs);
    let address_1 = optional_str(item, "address_1", errs);
    let address_2 = optional_str(item, "address_2", errs);

    let unique_value = match item.get("unique_value") {
        None | Some(Value::Null) => None,
        Some(Value::String(s)) if s.chars().count() > 20 => {
            errs.push("Unique value is too long (maximum is 20 characters)".to_string());
            None
        }
        Some(Value::String(s)) if s.is_empty() || !s.bytes().all(|b| b.is_ascii_alphanumeric()) => {
            errs.push(
                "Unique value is invalid (only letters and digits, ^[A-Za-z0-9]+$)".to_string(),
            );
            None
        }
        Some(Value::String(s)) => Some(s.clone()),
        Some(_) => {
            errs.push("Unique value must be a string".to_string());
            None
        }
    };

    // Additional domains (rules 1, 2, 4, 6).
    let is_ucc = product.is_some_and(|p| p.kind == Kind::Ucc);
    let mut additional: Vec<String> = Vec::new();
    let mut additional_input = String::new();
    let mut from_csr = false;
    match get_str(item, "additional_domains") {
        Err(()) => {
            errs.push("Additional domains must be a string (comma-separated names)".to_string())
        }
        Ok(Some(list)) if !list.trim().is_empty() => {
            if product.is_some() && !is_ucc {
                errs.push(
                    "Additional domains are only accepted for multi-domain (ucc) products"
                        .to_string(),
                );
            } else {
                additional_input = list.to_string();
                let mut seen = BTreeSet::new();
                let mut duplicates = BTreeSet::new();
                for raw in list.split([',', '\n']) {
                    let name = raw.trim().to_ascii_lowercase();
                    if name.is_empty() || Some(&name) == common_name.as_ref() {
                        continue; // rule 4: the common name itself adds nothing
                    }
                    if !seen.insert(name.clone()) {
                        if duplicates.insert(name.clone()) {
                            errs.push(format!("Additional domains list {name} more than once"));
                        }
                    } else {
                        additional.push(name);
                    }
                }
            }
        }
        Ok(_) => {
            // Rule 2: the CSR's other names, when the CSR is for the common name (ucc only;
            // rule 6: single-name and wildcard products never take names from the CSR).
            if let (true, Some(cn), Some((_, info))) = (is_ucc, &common_name, &csr) {
                let lower: Vec<String> = info
                    .dns_names
                    .iter()
                    .map(|n| n.trim().to_ascii_lowercase())
                    .collect();
                let csr_cn = info
                    .common_name
                    .as_deref()
                    .map(|c| c.trim().to_ascii_lowercase());
                if csr_cn.as_ref() == Some(cn) || lower.contains(cn) {
                    let mut seen = BTreeSet::from([cn.clone()]);
                    for name in lower {
                        if seen.insert(name.clone()) {
                            additional.push(name);
                        }
                    }
                    from_csr = !additional.is_empty();
                    additional_input = additional.join(",");
                }
            }
        }
    }
    let origin = if from_csr {
        " (from the CSR subjectAltName)"
    } else {
        ""
    };
    for name in &additional {
        if let Some(problem) = names::order_name_problem(name) {
            errs.push(format!("Additional domain {name}{origin} {problem}"));
        } else if names::is_wildcard(name) && product.is_some_and(|p| p.wildcard_max == 0) {
            errs.push(format!(
                "Additional domain {name}{origin}: this product accepts no wildcard names"
            ));
        }
    }

    // Domain count (wildcard names counted separately).
    let all_names: Vec<&String> = common_name.iter().chain(additional.iter()).collect();
    let wildcards = u32::try_from(all_names.iter().filter(|n| names::is_wildcard(n)).count())
        .unwrap_or(u32::MAX);
    let non_wildcard = u32::try_from(all_names.len()).unwrap_or(u32::MAX) - wildcards;
    if let Some(p) = product.filter(|p| p.kind == Kind::Ucc) {
        if non_wildcard > p.max_names() {
            errs.push(format!(
                "Too many domains: {non_wildcard} (product {} allows at most {})",
                p.name,
                p.max_names()
            ));
        }
        if p.wildcard_max > 0 && wildcards > p.wildcard_max {
            errs.push(format!(
                "Too many wildcard domains: {wildcards} (product {} allows at most {})",
                p.name, p.wildcard_max
            ));
        }
    }

    // Validation methods and addresses.
    let dcv_email = match get_str(item, "dcv_email") {
        Ok(v) => v.map(str::trim).filter(|v| !v.is_empty()),
        Err(()) => {
            errs.push("Dcv email must be a string".to_string());
            None
        }
    };
    let dns_alias = |v: &str| DNS_TXT_ALIASES.contains(&v);
    let mut main_email = None;
    if let (Some(m), Some(f)) = (main_method, family) {
        if f == Family::S && m != Method::DnsTxt && dcv_email.is_some_and(dns_alias) {
            errs.push(format!(
                "Dcv email {} is a DNS TXT value, accepted only with dcv_type DNS_TXT_TOKEN",
                dcv_email.unwrap_or_default()
            ));
        } else if m == Method::Email {
            match (dcv_email, &common_name) {
                (None, _) => errs.push(
                    "Dcv email can't be blank (dcv_type EMAIL needs an address from the DCV emails call)".to_string(),
                ),
                (Some(e), Some(cn)) => {
                    if names::email_accepted_for(e, cn) {
                        main_email = Some(e.to_ascii_lowercase());
                    } else {
                        errs.push(format!(
                            "Dcv email {e} is not an accepted validation address for {cn} (see the DCV emails call)"
                        ));
                    }
                }
                (Some(_), None) => {}
            }
        }
        if let Some(cn) = &common_name
            && names::is_wildcard(cn)
            && m.is_file()
        {
            errs.push(format!(
                "Dcv type {} cannot be used for the wildcard name {cn}",
                method.map_or("", Method::code)
            ));
        }
    }

    let mut per_domain: BTreeMap<String, (Method, Option<String>)> = BTreeMap::new();
    match item.get("additional_validation_emails") {
        None | Some(Value::Null) => {}
        Some(Value::Object(map)) if map.is_empty() => {}
        Some(Value::Object(map)) => {
            if product.is_some() && !is_ucc {
                errs.push("Additional validation emails are only accepted for multi-domain (ucc) products".to_string());
            } else if family == Some(Family::S) && main_method == Some(Method::DnsTxt) {
                errs.push(
                    "Additional validation emails cannot be combined with dcv_type DNS_TXT_TOKEN: for this CA DNS_TXT_TOKEN covers the whole order".to_string(),
                );
            } else if family.is_some_and(|f| f != Family::S)
                && main_method.is_some_and(|m| m != Method::Email)
            {
                errs.push(
                    "Additional validation emails are only accepted with dcv_type EMAIL"
                        .to_string(),
                );
            } else if let Some(f) = family {
                for (key, value) in map {
                    let domain = key.trim().to_ascii_lowercase();
                    let Some(value) = value.as_str().map(str::trim) else {
                        errs.push(format!(
                            "Additional validation emails: the value for {key} must be a string"
                        ));
                        continue;
                    };
                    if !additional.contains(&domain) {
                        errs.push(format!(
                            "Additional validation emails: {key} is not an additional domain of this item"
                        ));
                        continue;
                    }
                    if f == Family::S && dns_alias(value) {
                        errs.push(format!(
                            "Additional validation emails: {value} for {domain} is a DNS TXT value, accepted only with dcv_type DNS_TXT_TOKEN"
                        ));
                        continue;
                    }
                    match email_field_choice(value, &domain, f) {
                        Ok(choice) => {
                            per_domain.insert(domain, choice);
                        }
                        Err(why) => errs.push(format!("Additional validation emails: {why}")),
                    }
                }
            }
        }
        Some(_) => errs.push(
            "Additional validation emails must be an object (domain to validation email)"
                .to_string(),
        ),
    }

    let mut domains = Vec::new();
    if let (Some(m), Some(cn)) = (main_method, &common_name) {
        domains.push(DomainDcv::new(cn.clone(), m, main_email));
        for name in &additional {
            let (dm, email) = match per_domain.get(name) {
                Some(choice) => choice.clone(),
                None => {
                    if m == Method::Email {
                        errs.push(format!(
                            "Additional validation emails: an address is required for {name} (dcv_type EMAIL)"
                        ));
                    }
                    (m, None)
                }
            };
            if names::is_wildcard(name) && dm.is_file() {
                errs.push(format!(
                    "Dcv type {} cannot be used for the wildcard name {name}",
                    dm.code()
                ));
            }
            domains.push(DomainDcv::new(name.clone(), dm, email));
        }
    }

    if errs.len() > start {
        return None;
    }
    let (pem, info) = csr?;
    Some(Planned {
        product: product?,
        days: days?,
        software_id: software_id?,
        common_name: common_name?,
        additional,
        additional_input,
        domains,
        unique_value,
        csr: CsrFacts::from_info(&pem, &info),
        info: OrderInfo {
            organization_name,
            organizational_unit,
            country_name: country_name?,
            region_name: region_name?,
            city_name: city_name?,
            zip_code,
            address_1,
            address_2,
            contact: BTreeMap::new(),
        },
        non_wildcard,
        wildcards,
    })
}

/// Validates the administrative contact of `order`; returns it with omitted fields taken
/// from the account.
fn validate_contact(
    order: &Map<String, Value>,
    login: &str,
    errs: &mut Vec<String>,
) -> BTreeMap<String, Value> {
    let mut contact = BTreeMap::new();
    let defaults = [
        ("first_name", "Sandbox"),
        ("last_name", "Partner"),
        ("phone", "+10000000000"),
        ("email", login),
        ("title", "Administrator"),
        ("company", "Sandbox Partner Ltd"),
        ("address_1", "1 Sandbox Street"),
        ("city_name", "Berlin"),
        ("region_name", "Berlin"),
        ("zip_code", "10115"),
    ];
    for field in CONTACT_FIELDS {
        let value = match get_str(order, field) {
            Ok(Some(v)) => v.to_string(),
            Ok(None) => defaults
                .iter()
                .find(|(k, _)| *k == field)
                .map(|(_, v)| (*v).to_string())
                .unwrap_or_default(),
            Err(()) => {
                errs.push(format!("{} must be a string", humanize(field)));
                continue;
            }
        };
        if field == "email" && !names::looks_like_email(&value) {
            errs.push(format!("Email {value} is not a valid e-mail address"));
        }
        contact.insert(field.to_string(), Value::String(value));
    }
    match order.get("fax") {
        None | Some(Value::Null) => {
            contact.insert("fax".to_string(), Value::Null);
        }
        Some(Value::String(s)) => {
            contact.insert("fax".to_string(), Value::String(s.clone()));
        }
        Some(_) => errs.push("Fax must be a string or null".to_string()),
    }
    let country = match order.get("country_id") {
        None | Some(Value::Null) => Some("DE"),
        Some(Value::Number(n)) => n.as_u64().and_then(catalogue::country_by_id),
        Some(Value::String(s)) => match s.parse::<u64>() {
            Ok(id) => catalogue::country_by_id(id),
            Err(_) => catalogue::country_by_code(s).and_then(catalogue::country_by_id),
        },
        Some(_) => None,
    };
    match country {
        Some(code) => {
            contact.insert("country".to_string(), Value::String(code.to_string()));
        }
        None => errs.push(
            "Country is invalid (country_id must be a numeric country ID or an ISO 3166-1 alpha-2 code from the countries call)".to_string(),
        ),
    }
    contact
}

impl State {
    /// Endpoint 5.
    pub(super) fn place_order(
        &mut self,
        caller: &Caller,
        req: &ApiRequest,
        now: i64,
    ) -> ApiResponse {
        if !caller.role.is_partner() {
            return error(403, MSG_NOT_PARTNER);
        }
        if !caller.role.may_change() {
            return error(403, MSG_NO_PERMISSION);
        }
        let json_body = req
            .header("content-type")
            .is_some_and(|ct| ct.to_ascii_lowercase().contains("json"));
        let body: Value = if json_body {
            match serde_json::from_slice(&req.body) {
                Ok(v) => v,
                Err(e) => return error(400, &format!("The request body is not valid JSON: {e}")),
            }
        } else {
            // Not JSON: the parameters carry no `order` object.
            Value::Null
        };
        let Some(order) = body.get("order").and_then(Value::as_object) else {
            return error(400, MSG_ORDER_MISSING);
        };

        let mut errs = Vec::new();
        let contact = validate_contact(order, &caller.login, &mut errs);
        let items: &[Value] = match order.get("items") {
            None | Some(Value::Null) => &[],
            Some(Value::Array(items)) => items,
            Some(_) => {
                errs.push("Items is invalid (an array of order items)".to_string());
                &[]
            }
        };
        if items.is_empty() && !errs.iter().any(|e| e.starts_with("Items")) {
            errs.push("Items can't be blank".to_string());
        }
        let mut planned = Vec::new();
        for (i, item) in items.iter().enumerate() {
            let mut item_errs = Vec::new();
            match item.as_object() {
                Some(obj) => {
                    if let Some(p) = validate_item(obj, &mut item_errs) {
                        planned.push(p);
                    }
                }
                None => item_errs.push("Item is invalid (an object)".to_string()),
            }
            if items.len() > 1 {
                errs.extend(
                    item_errs
                        .into_iter()
                        .map(|e| format!("Item {}: {e}", i + 1)),
                );
            } else {
                errs.extend(item_errs);
            }
        }
        if !errs.is_empty() {
            return ApiResponse::json(422, json!({ "errors": errs }));
        }

        let order_id = self.fresh_order_id();
        let order_token = self.rng.token(24);
        let currency = match caller.role {
            Role::NoAgreement => "EUR".to_string(),
            _ => self.accounts[caller.index].currency.clone(),
        };
        let mut first = None;
        for mut p in planned {
            p.info.contact = contact.clone();
            let id = self.fresh_cert_id();
            first.get_or_insert(id);
            let price = catalogue::item_price(
                p.product,
                catalogue::period_of_days(p.days),
                p.non_wildcard,
                p.wildcards,
                &currency,
            );
            let cert = self.new_cert(
                id,
                order_id,
                &order_token,
                &caller.login,
                &currency,
                p,
                price,
                now,
            );
            self.certs.insert(id, cert);
            self.bill(&caller.login, id, price);
        }
        self.accounts[caller.index].billed_orders += 1;
        let mut resp = ApiResponse::json(
            200,
            json!({ "order": order_id, "certificate": first, "token": order_token }),
        );
        resp.billed = true;
        resp
    }

    #[allow(clippy::too_many_arguments)]
    fn new_cert(
        &mut self,
        id: u64,
        order_id: u64,
        order_token: &str,
        login: &str,
        currency: &str,
        p: Planned,
        price_cents: i64,
        now: i64,
    ) -> Cert {
        self.seq += 1;
        let family = p.product.family();
        let unique_value = p.unique_value.unwrap_or_else(|| self.rng.token(16));
        let mut cert = Cert {
            id,
            order_id,
            account: login.to_string(),
            seq: self.seq,
            created_at: now,
            updated_at: now,
            product_id: p.product.id,
            days: p.days,
            period: catalogue::period_of_days(p.days),
            price_cents,
            currency: currency.to_string(),
            bill_of: id,
            order_token: order_token.to_string(),
            software_id: p.software_id,
            info: p.info,
            common_name: p.common_name,
            additional_input: p.additional_input,
            additional: p.additional,
            unique_value,
            csr: p.csr,
            domains: p.domains,
            order_txt_value: None,
            base: Base::New,
            at_ca: false,
            at_ca_since: None,
            ca_due_at: self.reach_time(family, now),
            external_number: None,
            pending_cancel_at: None,
            reissue_requested_at: None,
            leaf: None,
            serials: Vec::new(),
            first_issued_at: None,
            subscription_end: None,
            replacement_id: None,
            replaces: None,
            prolonged_id: None,
            prolongation_token: None,
            renewed_by: None,
            annulled_at: None,
            last_error: None,
            forced_hold: false,
        };
        assign_txt_values(&mut self.rng, &mut cert);
        cert
    }

    pub(super) fn fresh_cert_id(&mut self) -> u64 {
        loop {
            let id = self.rng.range(100_000, 9_999_999);
            if !self.certs.contains_key(&id) {
                return id;
            }
        }
    }

    fn fresh_order_id(&mut self) -> u64 {
        loop {
            let id = self.rng.range(10_000_000, 99_999_999);
            if self.certs.values().all(|c| c.order_id != id) {
                return id;
            }
        }
    }
}
