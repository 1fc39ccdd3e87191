//! The validation methods and addresses of an order item: `dcv_type`, `dcv_email`,
//! `additional_validation_emails`, and the method of every domain that follows from them.

use std::collections::BTreeMap;

use serde_json::{Map, Value};

use super::fields::get_str;
use crate::state::catalogue::{Family, Kind, ProductDef};
use crate::state::model::{DNS_TXT_ALIASES, DomainDcv, Method};
use crate::state::names;

/// The method chosen per additional domain: the method and, for EMAIL, the address.
pub(super) type PerDomain = BTreeMap<String, (Method, Option<String>)>;

fn is_dns_alias(v: &str) -> bool {
    DNS_TXT_ALIASES.contains(&v)
}

/// A validation value of an email field: an accepted address for `domain`, or (family S
/// only) an alternative method name. DNS TXT values are handled by the caller.
pub(in crate::state) fn email_field_choice(
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

/// `dcv_type`: a known method name (EMAIL when absent).
pub(super) fn check_dcv_type(item: &Map<String, Value>, errs: &mut Vec<String>) -> Option<Method> {
    let method = match item.get("dcv_type") {
        None | Some(Value::Null) => Some(Method::Email),
        Some(Value::String(s)) => Method::parse(s),
        Some(_) => None,
    };
    if method.is_none() {
        errs.push("Dcv type is not included in the list".to_string());
    }
    method
}

/// `dcv_email`: the address of the common name under EMAIL (family S: a DNS TXT value only
/// with DNS_TXT_TOKEN), and no file method for a wildcard name. Returns the accepted address.
pub(super) fn check_dcv_email(
    item: &Map<String, Value>,
    method: Option<Method>,
    main_method: Option<Method>,
    family: Option<Family>,
    common_name: Option<&String>,
    errs: &mut Vec<String>,
) -> Option<String> {
    let dcv_email = match get_str(item, "dcv_email") {
        Ok(v) => v.map(str::trim).filter(|v| !v.is_empty()),
        Err(()) => {
            errs.push("Dcv email must be a string".to_string());
            None
        }
    };
    let mut main_email = None;
    if let (Some(m), Some(f)) = (main_method, family) {
        if f == Family::S && m != Method::DnsTxt && dcv_email.is_some_and(is_dns_alias) {
            errs.push(format!(
                "Dcv email {} is a DNS TXT value, accepted only with dcv_type DNS_TXT_TOKEN",
                dcv_email.unwrap_or_default()
            ));
        } else if m == Method::Email {
            match (dcv_email, common_name) {
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
        if let Some(cn) = common_name
            && names::is_wildcard(cn)
            && m.is_file()
        {
            errs.push(format!(
                "Dcv type {} cannot be used for the wildcard name {cn}",
                method.map_or("", Method::code)
            ));
        }
    }

    main_email
}

/// `additional_validation_emails`: ucc products only, a method or address per additional
/// domain, under the family's rules.
pub(super) fn check_additional_validation_emails(
    item: &Map<String, Value>,
    product: Option<&ProductDef>,
    family: Option<Family>,
    main_method: Option<Method>,
    additional: &[String],
    errs: &mut Vec<String>,
) -> PerDomain {
    let is_ucc = product.is_some_and(|p| p.kind == Kind::Ucc);
    let mut per_domain = PerDomain::new();
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
                    if f == Family::S && is_dns_alias(value) {
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

    per_domain
}

/// The validation of every name: the common name by the main method, each additional domain
/// by its own choice or the main method (an address is required under EMAIL).
pub(super) fn domain_methods(
    main_method: Option<Method>,
    common_name: Option<&String>,
    main_email: Option<String>,
    additional: &[String],
    per_domain: &PerDomain,
    errs: &mut Vec<String>,
) -> Vec<DomainDcv> {
    let mut domains = Vec::new();
    if let (Some(m), Some(cn)) = (main_method, common_name) {
        domains.push(DomainDcv::new(cn.clone(), m, main_email));
        for name in additional {
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

    domains
}
