//! Validation of one order item (OrderItem): one check per rule group, run in the order of the
//! item's fields (product, period, software, method, names, CSR, organisation, unique value,
//! additional domains and their count, then the validation methods), every problem reported.
//! A valid item becomes a [`Planned`] certificate.

use std::collections::{BTreeMap, BTreeSet};

use serde_json::{Map, Value};

use super::csr::check_csr;
use super::fields::{get_int, get_str, optional_str, required_str};
use super::item_dcv::{
    check_additional_validation_emails, check_dcv_email, check_dcv_type, domain_methods,
};
use crate::ca::CsrInfo;
use crate::state::catalogue::{self, Family, Kind, ProductDef};
use crate::state::model::{CsrFacts, DomainDcv, OrderInfo};
use crate::state::names;

const MIN_DAYS: i64 = 60;
const MAX_DAYS: i64 = 2200;

/// A validated order item, ready to be placed.
pub(super) struct Planned {
    pub(super) product: &'static ProductDef,
    pub(super) days: i64,
    pub(super) software_id: u64,
    pub(super) common_name: String,
    pub(super) additional: Vec<String>,
    pub(super) additional_input: String,
    pub(super) domains: Vec<DomainDcv>,
    pub(super) unique_value: Option<String>,
    pub(super) csr: CsrFacts,
    pub(super) info: OrderInfo,
    pub(super) non_wildcard: u32,
    pub(super) wildcards: u32,
}

/// Validates one item; every problem goes to `errs`. `None` when anything is wrong.
pub(super) fn validate_item(item: &Map<String, Value>, errs: &mut Vec<String>) -> Option<Planned> {
    let start = errs.len();

    let product = check_product(item, errs);
    let family = product.map(ProductDef::family);
    let days = check_days(item, errs);
    let software_id = check_software(item, family, errs);
    let method = check_dcv_type(item, errs);
    let main_method = method.zip(family).map(|(m, f)| m.for_family(f));
    let common_name = check_common_name(item, product, errs);
    let csr = check_item_csr(item, errs);
    let org = check_organisation(item, product, errs);
    let unique_value = check_unique_value(item, errs);
    let (additional, additional_input) =
        check_additional_domains(item, product, common_name.as_ref(), csr.as_ref(), errs);
    let (non_wildcard, wildcards) =
        check_domain_count(product, common_name.as_ref(), &additional, errs);

    let main_email = check_dcv_email(
        item,
        method,
        main_method,
        family,
        common_name.as_ref(),
        errs,
    );
    let per_domain =
        check_additional_validation_emails(item, product, family, main_method, &additional, errs);
    let domains = domain_methods(
        main_method,
        common_name.as_ref(),
        main_email,
        &additional,
        &per_domain,
        errs,
    );

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
            organization_name: org.organization_name,
            organizational_unit: org.organizational_unit,
            country_name: org.country_name?,
            region_name: org.region_name?,
            city_name: org.city_name?,
            zip_code: org.zip_code,
            address_1: org.address_1,
            address_2: org.address_2,
            contact: BTreeMap::new(),
        },
        non_wildcard,
        wildcards,
    })
}

/// `nomenclature_id`: a product of the catalogue.
fn check_product(item: &Map<String, Value>, errs: &mut Vec<String>) -> Option<&'static ProductDef> {
    match get_int(item, "nomenclature_id") {
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
    }
}

/// `days`: between [`MIN_DAYS`] and [`MAX_DAYS`].
fn check_days(item: &Map<String, Value>, errs: &mut Vec<String>) -> Option<i64> {
    match get_int(item, "days") {
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
    }
}

/// `ssl_server_software_id`: one of the family's list, or 0 for the CA's default.
fn check_software(
    item: &Map<String, Value>,
    family: Option<Family>,
    errs: &mut Vec<String>,
) -> Option<u64> {
    match get_int(item, "ssl_server_software_id") {
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
    }
}

/// `domain_name`: an orderable name whose kind (wildcard or not) suits the product.
fn check_common_name(
    item: &Map<String, Value>,
    product: Option<&ProductDef>,
    errs: &mut Vec<String>,
) -> Option<String> {
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
    common_name
}

/// `csr`: a PEM request passing [`check_csr`]; the PEM text and what it says.
fn check_item_csr(item: &Map<String, Value>, errs: &mut Vec<String>) -> Option<(String, CsrInfo)> {
    match get_str(item, "csr") {
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
    }
}

/// Organisation data of an item, each field as read (`None` when absent or wrong).
struct Organisation {
    country_name: Option<String>,
    region_name: Option<String>,
    city_name: Option<String>,
    organization_name: Option<String>,
    organizational_unit: Option<String>,
    zip_code: Option<String>,
    address_1: Option<String>,
    address_2: Option<String>,
}

/// Country, region and city required; the organisation name required for OV and EV products.
fn check_organisation(
    item: &Map<String, Value>,
    product: Option<&ProductDef>,
    errs: &mut Vec<String>,
) -> Organisation {
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
    Organisation {
        country_name,
        region_name,
        city_name,
        organization_name,
        organizational_unit,
        zip_code,
        address_1,
        address_2,
    }
}

/// `unique_value`: at most 20 letters and digits.
fn check_unique_value(item: &Map<String, Value>, errs: &mut Vec<String>) -> Option<String> {
    match item.get("unique_value") {
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
    }
}

/// Additional domains (rules 1, 2, 4, 6): the names and the list as given (or as taken from
/// the CSR).
fn check_additional_domains(
    item: &Map<String, Value>,
    product: Option<&ProductDef>,
    common_name: Option<&String>,
    csr: Option<&(String, CsrInfo)>,
    errs: &mut Vec<String>,
) -> (Vec<String>, String) {
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
                    if name.is_empty() || Some(&name) == common_name {
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
            if let (true, Some(cn), Some((_, info))) = (is_ucc, common_name, csr) {
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
    (additional, additional_input)
}

/// Domain count (wildcard names counted separately): `(non_wildcard, wildcards)`.
fn check_domain_count(
    product: Option<&ProductDef>,
    common_name: Option<&String>,
    additional: &[String],
    errs: &mut Vec<String>,
) -> (u32, u32) {
    let all_names: Vec<&String> = common_name.into_iter().chain(additional.iter()).collect();
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
    (non_wildcard, wildcards)
}
