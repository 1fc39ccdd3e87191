//! Endpoint 12: reissue rules 1–7. A reissue needs DCV again (new unique value, and new
//! hashes with a new CSR) and then issues a new serial; for family S multi-domain products of
//! issuer `s-two` the reissue of an issued certificate creates a new certificate ID.

use std::collections::BTreeMap;

use serde_json::json;

use super::State;
use super::answers::refused;
use super::catalogue::{Family, Kind, ProductDef};
use super::dcv::schedule_checks;
use super::lifecycle::{DAY, date};
use super::model::{Base, Cert, CsrFacts, DNS_TXT_ALIASES, DomainDcv, Method};
use super::names;
use super::orders::{assign_txt_values, check_csr};
use super::params::Fields;
use crate::ca::CsrInfo;
use crate::wire::{ApiRequest, ApiResponse};

/// No reissue during the last days of the subscription.
pub(super) const REISSUE_BLACKOUT: i64 = 30 * DAY;
pub(super) const MSG_REISSUED: &str = "The certificate has been reissued";

/// The names of a reissued certificate and their validation, computed before any change.
struct Plan {
    csr: Option<CsrFacts>,
    common_name: String,
    additional: Vec<String>,
    domains: Vec<DomainDcv>,
}

/// A value of `validation_email` / `validation_emails[...]` for `domain`.
fn reissue_choice(
    value: &str,
    domain: &str,
    family: Family,
) -> Result<(Method, Option<String>), String> {
    if DNS_TXT_ALIASES.contains(&value) {
        return Err(format!(
            "{value} cannot be chosen on reissue: name HTTP_CSR_HASH, HTTPS_CSR_HASH, CNAME_CSR_HASH or a validation email"
        ));
    }
    let choice = match Method::parse(value) {
        Some(m @ (Method::Http | Method::Https | Method::Cname)) => (m.for_family(family), None),
        Some(_) => return Err(format!("{value} is not a validation email or method")),
        None => {
            if !names::email_accepted_for(value, domain) {
                return Err(format!(
                    "{value} is not an accepted validation address for {domain}"
                ));
            }
            (Method::Email, Some(value.to_ascii_lowercase()))
        }
    };
    if names::is_wildcard(domain) && choice.0.is_file() {
        return Err(format!(
            "{value} cannot be used for the wildcard name {domain}"
        ));
    }
    Ok(choice)
}

/// Rules 2, 4 and 6 and the new validation methods. `Err` is the 422 message.
fn plan(cert: &Cert, fields: &Fields) -> Result<Plan, String> {
    let family = cert.product().family();
    let new_csr = new_csr(cert, fields, family)?;
    let (common_name, additional) = match &new_csr {
        None => (cert.common_name.clone(), cert.additional.clone()),
        Some((_, info)) => names_from_csr(cert, info)?,
    };

    let new_domains: Vec<String> = std::iter::once(common_name.clone())
        .chain(additional.iter().cloned())
        .collect();
    let explicit = explicit_choices(fields, &common_name, &new_domains, family)?;
    check_dns_txt_replaced(cert, family, &new_domains, &explicit)?;
    let domains = domain_methods(cert, &new_domains, &explicit)?;

    Ok(Plan {
        csr: new_csr.map(|(pem, info)| CsrFacts::from_info(pem, &info)),
        common_name,
        additional,
        domains,
    })
}

/// The `csr` parameter, when given: a CSR passing the order rules, and for family C one with
/// a new private key (required on every reissue).
fn new_csr<'a>(
    cert: &Cert,
    fields: &'a Fields,
    family: Family,
) -> Result<Option<(&'a str, CsrInfo)>, String> {
    let new_csr = match fields.text("csr").filter(|s| !s.trim().is_empty()) {
        Some(pem) => Some((pem, check_csr(pem, "csr").map_err(|errs| errs.join("; "))?)),
        None => None,
    };
    if family == Family::C {
        match &new_csr {
            None => {
                return Err(
                    "A new CSR with a new private key is required for every reissue of this certificate (family C)".to_string(),
                );
            }
            Some((_, info))
                if hex::encode(&info.public_key_der) == cert.csr.spki_hex
                    || cert
                        .leaf
                        .as_ref()
                        .is_some_and(|l| l.spki_hex == hex::encode(&info.public_key_der)) =>
            {
                return Err(
                    "The CSR uses the current private key; every reissue of this certificate needs a new private key (family C)".to_string(),
                );
            }
            Some(_) => {}
        }
    }
    Ok(new_csr)
}

/// Rule 2: the names of the reissued certificate under a new CSR. Its common name must be a
/// domain of the certificate (or the bare domain of one of its wildcards); the names of a
/// multi-domain product follow the CSR, the others keep theirs.
fn names_from_csr(cert: &Cert, info: &CsrInfo) -> Result<(String, Vec<String>), String> {
    let current: Vec<String> = std::iter::once(cert.common_name.clone())
        .chain(cert.additional.iter().cloned())
        .collect();
    let bare_of_wildcards: Vec<String> = current
        .iter()
        .filter(|n| names::is_wildcard(n))
        .map(|n| names::base_domain(n).to_string())
        .collect();
    let Some(csr_cn) = info
        .common_name
        .as_deref()
        .map(|c| c.trim().to_ascii_lowercase())
        .filter(|c| !c.is_empty())
    else {
        return Err(
            "The CSR has no common name; it must be one of the certificate's domains".to_string(),
        );
    };
    if !current.contains(&csr_cn) && !bare_of_wildcards.contains(&csr_cn) {
        return Err(format!(
            "The common name {csr_cn} of the CSR is not one of the certificate's domains ({})",
            current.join(", ")
        ));
    }
    if cert.product().kind != Kind::Ucc {
        return Ok((cert.common_name.clone(), cert.additional.clone()));
    }
    // The CSR's names make the new set; a bare domain of a wildcard is accepted and not
    // counted (nor ordered) unless it is a domain already.
    let wildcard_of = |bare: &str| {
        current
            .iter()
            .find(|n| names::is_wildcard(n) && names::base_domain(n) == bare)
            .cloned()
    };
    let mut set: Vec<String> = Vec::new();
    let cn = if current.contains(&csr_cn) {
        csr_cn.clone()
    } else {
        wildcard_of(&csr_cn).unwrap_or(csr_cn.clone())
    };
    set.push(cn);
    for n in info.dns_names.iter().map(|n| n.trim().to_ascii_lowercase()) {
        let covered_bare = !current.contains(&n) && bare_of_wildcards.contains(&n);
        if !set.contains(&n) && !covered_bare {
            set.push(n);
        }
    }
    if cert.family() == Family::S {
        check_grown_names(cert.product(), &current, &set)?;
    } else {
        check_same_names(&current, &set)?;
    }
    let cn = set.remove(0);
    Ok((cn, set))
}

/// Rule 4, family S: the set may grow up to the larger of its size and 3, within the
/// product's limits, every name orderable.
fn check_grown_names(
    product: &ProductDef,
    current: &[String],
    set: &[String],
) -> Result<(), String> {
    let limit = current.len().max(3);
    if set.len() > limit {
        return Err(format!(
            "The number of domains cannot grow beyond {limit} ({} requested)",
            set.len()
        ));
    }
    for n in set {
        if let Some(problem) = names::order_name_problem(n) {
            return Err(format!("The domain {n} {problem}"));
        }
        if names::is_wildcard(n) && product.wildcard_max == 0 {
            return Err(format!(
                "The domain {n}: this product accepts no wildcard names"
            ));
        }
    }
    let wildcards = set.iter().filter(|n| names::is_wildcard(n)).count();
    if set.len() - wildcards > product.max_names() as usize
        || wildcards > product.wildcard_max as usize
    {
        return Err(format!(
            "The product {} does not allow {} domains",
            product.name,
            set.len()
        ));
    }
    Ok(())
}

/// Rule 4, families D and C: no new name, and no more names than now.
fn check_same_names(current: &[String], set: &[String]) -> Result<(), String> {
    if let Some(n) = set.iter().find(|n| !current.contains(n)) {
        return Err(format!(
            "{n} is not one of the certificate's domains; the domains of this certificate cannot change on reissue"
        ));
    }
    if set.len() > current.len() {
        return Err(format!(
            "The number of domains cannot grow ({} now, {} requested)",
            current.len(),
            set.len()
        ));
    }
    Ok(())
}

/// The methods named by `validation_email` (common name) and `validation_emails[domain]`.
fn explicit_choices(
    fields: &Fields,
    common_name: &str,
    new_domains: &[String],
    family: Family,
) -> Result<BTreeMap<String, (Method, Option<String>)>, String> {
    let mut explicit: BTreeMap<String, (Method, Option<String>)> = BTreeMap::new();
    if let Some(value) = fields.non_blank("validation_email") {
        explicit.insert(
            common_name.to_string(),
            reissue_choice(value, common_name, family)
                .map_err(|e| format!("validation_email: {e}"))?,
        );
    }
    for (domain, value) in fields.map("validation_emails")? {
        let domain = domain.trim().to_ascii_lowercase();
        if !new_domains.contains(&domain) {
            return Err(format!(
                "validation_emails: {domain} is not a domain of the reissued certificate"
            ));
        }
        let choice = reissue_choice(value.trim(), &domain, family)
            .map_err(|e| format!("validation_emails[{domain}]: {e}"))?;
        explicit.insert(domain, choice);
    }
    Ok(explicit)
}

/// Rule 6: a family S certificate validated by DNS_TXT_TOKEN names another method for every
/// domain.
fn check_dns_txt_replaced(
    cert: &Cert,
    family: Family,
    new_domains: &[String],
    explicit: &BTreeMap<String, (Method, Option<String>)>,
) -> Result<(), String> {
    if family == Family::S && cert.domains.iter().any(|d| d.method == Method::DnsTxt) {
        let missing: Vec<&str> = new_domains
            .iter()
            .filter(|d| !explicit.contains_key(*d))
            .map(String::as_str)
            .collect();
        if !missing.is_empty() {
            return Err(format!(
                "The certificate is validated by DNS_TXT_TOKEN: a reissue must name another validation method for every domain (validation_email, validation_emails); missing for {}",
                missing.join(", ")
            ));
        }
    }
    Ok(())
}

/// The validation of every name: the explicit choice, else the domain's current method, else
/// (a new domain) the common name's method, which must not be EMAIL.
fn domain_methods(
    cert: &Cert,
    new_domains: &[String],
    explicit: &BTreeMap<String, (Method, Option<String>)>,
) -> Result<Vec<DomainDcv>, String> {
    let mut domains = Vec::new();
    for name in new_domains {
        let (method, email) = if let Some(choice) = explicit.get(name) {
            choice.clone()
        } else if let Some(existing) = cert.domains.iter().find(|d| &d.domain == name) {
            (existing.method, existing.email.clone())
        } else {
            let main = domains
                .first()
                .map_or(Method::Email, |d: &DomainDcv| d.method);
            if main == Method::Email {
                return Err(format!(
                    "validation_emails: a validation email or method is required for the new domain {name}"
                ));
            }
            (main, None)
        };
        if names::is_wildcard(name) && method.is_file() {
            return Err(format!(
                "{} cannot be used for the wildcard name {name}; name another method",
                method.code()
            ));
        }
        domains.push(DomainDcv::new(name.clone(), method, email));
    }
    Ok(domains)
}

impl State {
    pub(super) fn reissue(&mut self, id: u64, req: &ApiRequest, now: i64) -> ApiResponse {
        let fields = match Fields::from_body(req) {
            Ok(f) => f,
            Err(resp) => return *resp,
        };
        let cert = self.cert(id);
        if let Some(r) = cert.replacement_id {
            return refused(&format!(
                "This certificate was replaced by certificate {r} after a reissue; use that ID"
            ));
        }
        // Rule 1.
        if !matches!(
            cert.base,
            Base::New | Base::InProgress | Base::WaitingForApproval | Base::Issued
        ) {
            return refused(&format!(
                "A certificate in state {} cannot be reissued",
                cert.base.as_str()
            ));
        }
        if cert.pending_cancel_at.is_some() {
            return refused("The certificate cannot be reissued while its cancellation is pending");
        }
        // Rule 5.
        if cert.reissue_requested_at.is_some() {
            return refused("A reissue of this certificate is already in progress (one at a time)");
        }
        // Rule 3.
        if let Some(end) = cert.subscription_end
            && now > end - REISSUE_BLACKOUT
        {
            return refused(&format!(
                "Reissue is not available during the last 30 days of the subscription (it ends {}); order a new certificate instead",
                date(end)
            ));
        }
        let plan = match plan(cert, &fields) {
            Ok(p) => p,
            Err(why) => return refused(&why),
        };

        let new_id = cert.base == Base::Issued && cert.product().new_id_on_reissue;
        let target = if new_id {
            self.create_replacement(id, now)
        } else {
            id
        };
        let unique_value = self.rng.token(16);
        let instant = self.instant;
        let family = self.cert(target).family();
        let reach = self.reach_time(family, now);
        let cert = self.cert_mut(target);
        let names_changed =
            cert.common_name != plan.common_name || cert.additional != plan.additional;
        if let Some(csr) = plan.csr {
            cert.csr = csr;
        }
        if names_changed {
            cert.additional_input = plan.additional.join(",");
        }
        cert.common_name = plan.common_name;
        cert.additional = plan.additional;
        cert.domains = plan.domains;
        cert.unique_value = unique_value;
        cert.updated_at = now;
        if !new_id {
            cert.reissue_requested_at = Some(now);
            if cert.base == Base::Issued {
                cert.at_ca = false;
                cert.at_ca_since = None;
                cert.ca_due_at = reach;
            } else if cert.at_ca {
                schedule_checks(cert, now, instant);
            }
        }
        self.wakes.touch(target);
        let cert = self.certs.get_mut(&target).expect("certificate exists");
        assign_txt_values(&mut self.rng, cert);
        ApiResponse::json(200, json!({ "success": true, "result": MSG_REISSUED }))
    }

    /// Rule 7: a new certificate ID for the reissue; every earlier ID points to it as its
    /// latest replacement. The replacement inherits the subscription and the bill.
    fn create_replacement(&mut self, id: u64, now: i64) -> u64 {
        let new = self.fresh_cert_id();
        self.seq += 1;
        let seq = self.seq;
        let family = self.cert(id).family();
        let reach = self.reach_time(family, now);
        let mut r = self.cert(id).clone();
        r.id = new;
        r.seq = seq;
        r.created_at = now;
        r.updated_at = now;
        r.base = Base::New;
        r.at_ca = false;
        r.at_ca_since = None;
        r.ca_due_at = reach;
        r.external_number = None;
        r.pending_cancel_at = None;
        r.reissue_requested_at = None;
        r.leaf = None;
        r.serials.clear();
        r.replacement_id = None;
        r.replaces = Some(id);
        r.prolonged_id = None;
        r.prolongation_token = None;
        r.renewed_by = None;
        r.annulled_at = None;
        r.last_error = None;
        r.forced_hold = false;
        self.certs.insert(new, r);
        self.wakes.touch(new);
        let mut cur = Some(id);
        while let Some(c) = cur {
            let cert = self.cert_mut(c);
            cert.replacement_id = Some(new);
            cert.updated_at = now;
            cur = cert.replaces;
        }
        new
    }
}
