//! Reading and acting on certificates: status, details, the list with pagination, both
//! downloads, cancel, prolong (renewal tokens), and the facts behind hostile bundles.

use serde_json::{Map, Value, json};
use time::OffsetDateTime;

use super::accounts::Caller;
use super::answers::{action, error};
use super::catalogue::{self, Family};
use super::dcv::dcv_content;
use super::lifecycle::{DAY, date, datetime};
use super::model::{Base, Cert, Method};
use super::params::Fields;
use super::{OwnedHostileInput, State};
use crate::bundle::{self, BundleParts};
use crate::ca::Authority;
use crate::wire::{ApiRequest, ApiResponse, ResponseBody};

pub(super) const PAGE_SIZE: usize = 50;
/// Cancellation is possible this long after the (first) issuance.
pub(super) const CANCEL_WINDOW: i64 = 28 * DAY;
/// A family S multi-year subscription ending further away than this gets no renewal token.
pub(super) const S_RENEWAL_HORIZON: i64 = 90 * DAY;

pub(super) const MSG_ALREADY_CANCELLED: &str = "The certificate is already cancelled";
pub(super) const MSG_CANCEL_TOO_LATE: &str =
    "Cannot cancel a certificate that was issued more than 28 days ago";
pub(super) const MSG_CANCEL_SENT: &str = "The cancellation order has been sent";

fn client_status() -> Value {
    json!({ "status": "new", "description": "" })
}

/// Validation addresses of EMAIL domains; null when there are none.
fn all_validation_emails(cert: &Cert) -> Value {
    let emails: Vec<&str> = cert
        .domains
        .iter()
        .filter_map(|d| d.email.as_deref())
        .collect();
    if emails.is_empty() {
        Value::Null
    } else {
        json!(emails)
    }
}

/// What an email field shows for a domain: its address, the method name for family S on an
/// alternative method, an empty string otherwise.
fn validation_value(cert: &Cert, method: Method, email: Option<&str>) -> String {
    match (method, email) {
        (Method::Email, Some(e)) => e.to_string(),
        (m, _) if cert.family() == Family::S && m != Method::Email => m.code().to_string(),
        _ => String::new(),
    }
}

fn opt_date(t: Option<i64>) -> Value {
    t.map_or(Value::Null, |t| json!(date(t)))
}

fn subscription_duration(cert: &Cert) -> Value {
    if cert.family() == Family::S && cert.multi_year() {
        json!(cert.days)
    } else {
        Value::Null
    }
}

impl State {
    /// Endpoint 4.
    pub(super) fn status(&self, id: u64) -> ApiResponse {
        let cert = self.cert(id);
        ApiResponse::json(
            200,
            json!({ "certificate": cert.status_state().as_str(), "client": client_status() }),
        )
    }

    /// A Certificate object of the list.
    fn list_item(&self, cert: &Cert) -> Value {
        let state = cert.display_state();
        let leaf = cert.leaf.as_ref();
        json!({
            "internal_number": cert.id,
            "external_number": cert.external_number,
            "status": { "code": state, "description": state },
            "name": cert.product().name,
            "domain_name": cert.common_name,
            "domain_names": if cert.additional.is_empty() { Value::Null } else { json!(cert.additional) },
            "duration_in_years": cert.period,
            "public_comment": null,
            "valid_from": opt_date(leaf.map(|l| l.not_before)),
            "valid_to": opt_date(leaf.map(|l| l.not_after)),
            "subscription_duration": subscription_duration(cert),
            "subscription_valid_from": opt_date(cert.first_issued_at),
            "subscription_valid_to": opt_date(cert.subscription_end),
            "paid": self.payment_status(&cert.account, cert.bill_of) == "paid",
            "price": catalogue::money(cert.price_cents),
            "currency": cert.currency,
            "token": cert.order_token,
            "prolongation_token": cert.prolongation_token,
            "prolonged_id": cert.prolonged_id,
            "prolonged": cert.prolonged_id.is_some(),
            "legacy_reissue": false,
            "dcv_method": cert.main_method().code(),
            "dcv_content": dcv_content(cert),
            "all_validation_emails": all_validation_emails(cert),
            "all_domains": cert.all_domains(),
        })
    }

    /// Endpoint 14.
    pub(super) fn details(&self, id: u64) -> ApiResponse {
        let cert = self.cert(id);
        let leaf = cert.leaf.as_ref();
        let payment_status = self.payment_status(&cert.account, cert.bill_of);
        let mut additional_emails = Map::new();
        for d in cert.domains.iter().skip(1) {
            let v = validation_value(cert, d.method, d.email.as_deref());
            if !v.is_empty() {
                additional_emails.insert(d.domain.clone(), json!(v));
            }
        }
        let main = cert.domains.first();
        #[allow(clippy::cast_precision_loss)]
        let price = cert.price_cents as f64 / 100.0;
        let info = &cert.info;
        let mut body = json!({
            "id": cert.id,
            "status": { "certificate": cert.display_state(), "client": client_status() },
            "external_number": cert.external_number.map(|n| n.to_string()),
            "common_name": cert.common_name,
            "additional_domains": cert.additional_input,
            "all_domains": cert.all_domains(),
            "valid_from": opt_date(leaf.map(|l| l.not_before)),
            "valid_to": opt_date(leaf.map(|l| l.not_after)),
            "subscription_duration": subscription_duration(cert),
            "subscription_valid_from": opt_date(cert.first_issued_at),
            "subscription_valid_to": opt_date(cert.subscription_end),
            "replacement_id": cert.replacement_id,
            "prolonged_id": cert.prolonged_id,
            "dcv_method": cert.main_method().code(),
            "dcv_content": dcv_content(cert),
            "validation_email": main.map_or_else(String::new, |d| validation_value(cert, d.method, d.email.as_deref())),
            "additional_validation_emails": additional_emails,
            "csr": cert.csr.pem,
            "nomenclature_id": cert.product_id,
            "name": cert.product().name,
            "price": price,
            "price_includes_vat": false,
            "currency": cert.currency,
            "payment_status": payment_status,
            "unpaid": payment_status == "unpaid",
            // Non-contract fields (may change without notice).
            "order_id": cert.order_id,
            "created_at": datetime(cert.created_at),
            "updated_at": datetime(cert.updated_at),
            "days": cert.days,
            "ssl_server_software_id": cert.software_id,
            "organization_name": info.organization_name,
            "organizational_unit": info.organizational_unit,
            "country_name": info.country_name,
            "region_name": info.region_name,
            "city_name": info.city_name,
            "zip_code": info.zip_code,
            "address_1": info.address_1,
            "address_2": info.address_2,
            "serial_number": leaf.map(|l| l.serial_hex.clone()),
        });
        for (k, v) in &info.contact {
            body[format!("admin_{k}")] = v.clone();
        }
        ApiResponse::json(200, body)
    }

    /// Endpoint 7 and its alternate path.
    pub(super) fn list(&self, caller: &Caller, req: &ApiRequest) -> ApiResponse {
        let mut certs: Vec<&Cert> = self
            .certs
            .values()
            .filter(|c| c.account == caller.login)
            .collect();
        certs.sort_by_key(|c| std::cmp::Reverse(c.seq));
        let params = match Fields::from_body(req) {
            Ok(f) => f,
            Err(resp) => return *resp,
        };
        // The scope is only used with a page, but an unknown value is refused either way.
        let scope = params.scalar("scope");
        if let Some(s) = scope.as_deref()
            && !matches!(s, "" | "api_issued" | "api_in_progress" | "api_annulled")
        {
            return error(400, "scope does not have a valid value");
        }
        let Some(page) = params.scalar("page") else {
            let all: Vec<Value> = certs.iter().map(|c| self.list_item(c)).collect();
            return ApiResponse::json(200, Value::Array(all));
        };
        let page = match page.parse::<usize>() {
            Ok(p) if p >= 1 => p,
            _ => return error(400, "page is invalid (an integer >= 1)"),
        };
        let wanted: Option<&[Base]> = match scope.as_deref() {
            None | Some("") => None,
            Some("api_issued") => Some(&[Base::Issued]),
            Some("api_in_progress") => Some(&[Base::InProgress]),
            Some("api_annulled") => Some(&[Base::Annulled]),
            Some(_) => return error(400, "scope does not have a valid value"),
        };
        let q = params
            .scalar("q")
            .map(|q| q.trim().to_lowercase())
            .filter(|q| !q.is_empty());
        let filtered: Vec<&Cert> = certs
            .into_iter()
            .filter(|c| wanted.is_none_or(|w| w.contains(&c.base)))
            .filter(|c| {
                q.as_ref().is_none_or(|q| {
                    c.all_domains().iter().any(|d| d.contains(q.as_str()))
                        || c.info
                            .organization_name
                            .as_ref()
                            .is_some_and(|o| o.to_lowercase().contains(q.as_str()))
                })
            })
            .collect();
        let total = filtered.len();
        let total_pages = total.div_ceil(PAGE_SIZE);
        let offset = (page - 1).saturating_mul(PAGE_SIZE);
        let items: Vec<Value> = filtered
            .iter()
            .skip(offset)
            .take(PAGE_SIZE)
            .map(|c| self.list_item(c))
            .collect();
        let pagination = json!({
            "total": total,
            "total_pages": total_pages,
            "first_page": page == 1,
            "last_page": page == total_pages,
            "previous_page": if page > 1 { json!(page - 1) } else { Value::Null },
            "next_page": if page < total_pages { json!(page + 1) } else { Value::Null },
            "out_of_bounds": page > total_pages,
            "offset": offset,
        });
        let mut resp = ApiResponse::json(200, Value::Array(items));
        resp.headers
            .push(("X-Pagination".to_string(), pagination.to_string()));
        resp
    }

    /// The certificate a download of `id` serves: the latest replacement when there is one.
    pub(super) fn download_target(&self, id: u64) -> u64 {
        self.cert(id).replacement_id.unwrap_or(id)
    }

    /// Endpoints 3 (`bundle == false`) and 15.
    pub(super) fn download(&self, id: u64, ca: &Authority, bundle: bool) -> ApiResponse {
        let target = self.cert(self.download_target(id));
        let fail = |msg: &str| ApiResponse::json(422, json!({ "errors": msg }));
        let Some(leaf) = target.leaf.as_ref().filter(|_| target.downloadable()) else {
            if bundle {
                return fail("Certificate PEM data is not available");
            }
            return fail(
                &if target.reissue_requested_at.is_some() || target.id != id {
                    "The certificate is not issued yet: a reissue is still being processed"
                        .to_string()
                } else {
                    format!(
                        "The certificate is not issued yet (status {})",
                        target.display_state()
                    )
                },
            );
        };
        let Ok(chain) = ca.chain_pem(target.product().issuer) else {
            return fail("Failed to retrieve certificate PEM data");
        };
        let parts = BundleParts {
            common_name: &leaf.common_name,
            leaf_pem: &leaf.pem,
            chain_pem: &chain,
            root_pem: ca.root_pem(),
        };
        let (data, filename) = if bundle {
            match bundle::server_bundle(&parts) {
                Ok(d) => (d, format!("partner_OSC-{}.zip", target.id)),
                Err(_) => return fail("Failed to build certificate bundle"),
            }
        } else {
            match bundle::ca_archive(&parts) {
                Ok(d) => (
                    d,
                    format!("{}.zip", target.external_number.unwrap_or(target.id)),
                ),
                Err(_) => return fail("Failed to build certificate bundle"),
            }
        };
        ApiResponse {
            status: 200,
            headers: Vec::new(),
            body: ResponseBody::Bytes {
                content_type: "application/zip".to_string(),
                filename: Some(filename),
                data: data.into(),
            },
            account: None,
            billed: false,
        }
    }

    /// Endpoint 13: always 200; staff annul the order later.
    pub(super) fn cancel(&mut self, id: u64, now: i64) -> ApiResponse {
        let cert = self.cert(id);
        if let Some(r) = cert.replacement_id {
            return action(
                false,
                &format!("The certificate was replaced by certificate {r}; cancel that one"),
            );
        }
        if cert.base == Base::Annulled || cert.pending_cancel_at.is_some() {
            return action(false, MSG_ALREADY_CANCELLED);
        }
        let too_late = match cert.base {
            Base::Expired => true,
            Base::Issued => cert
                .first_issued_at
                .is_some_and(|t| now - t > CANCEL_WINDOW),
            _ => false,
        };
        if too_late {
            return action(false, MSG_CANCEL_TOO_LATE);
        }
        let cert = self.cert_mut(id);
        cert.pending_cancel_at = Some(now);
        cert.updated_at = now;
        action(true, MSG_CANCEL_SENT)
    }

    /// True when a renewal token may be prepared for `cert` at `now`.
    pub(super) fn renewal_possible(&self, cert: &Cert, now: i64) -> bool {
        self.renewal_possible_from(cert)
            .is_some_and(|from| now >= from)
    }

    /// From when a renewal token may be prepared for `cert` as it is now (`None`: not until
    /// the order changes): a multi-year family S order only in its last 90 days.
    pub(super) fn renewal_possible_from(&self, cert: &Cert) -> Option<i64> {
        let renewable = matches!(cert.base, Base::Issued | Base::Expired)
            && cert.first_issued_at.is_some()
            && cert.renewed_by.is_none()
            && cert.replacement_id.is_none()
            && cert.pending_cancel_at.is_none();
        if !renewable {
            return None;
        }
        match cert.subscription_end {
            Some(end) if cert.family() == Family::S && cert.multi_year() => {
                Some(end.saturating_sub(S_RENEWAL_HORIZON))
            }
            _ => Some(i64::MIN),
        }
    }

    /// Endpoint 16.
    pub(super) fn prolong(&mut self, id: u64, now: i64) -> ApiResponse {
        let cert = self.cert(id);
        if let Some(token) = &cert.prolongation_token {
            return ApiResponse::json(200, json!({ "prolongation_token": token }));
        }
        if !self.renewal_possible(cert, now) {
            return ApiResponse::json(200, json!({ "prolongation_token": null }));
        }
        let token = self.rng.token(32);
        let cert = self.cert_mut(id);
        cert.prolongation_token = Some(token.clone());
        cert.updated_at = now;
        ApiResponse::json(200, json!({ "prolongation_token": token }))
    }

    /// The order site completes a renewal order: a new billed order for the same product,
    /// days and domains with the same CSR, whose `prolonged_id` is the renewed certificate.
    pub(super) fn renew_by_token(&mut self, token: &str, now: i64) -> Result<u64, String> {
        let original = self
            .certs
            .values()
            .find(|c| c.prolongation_token.as_deref() == Some(token))
            .ok_or_else(|| "no prepared renewal order has this token".to_string())?;
        if let Some(done) = original.renewed_by {
            return Err(format!(
                "the renewal order was already completed as certificate {done}"
            ));
        }
        let mut cert = original.clone();
        let original_id = original.id;
        let id = self.fresh_cert_id();
        let order_id = self.rng.range(10_000_000, 99_999_999);
        self.seq += 1;
        let currency = cert.currency.clone();
        let names = cert.all_domains();
        let wildcards =
            u32::try_from(names.iter().filter(|n| n.starts_with("*.")).count()).unwrap_or(0);
        let non_wildcard = u32::try_from(cert.additional.len() + 1)
            .unwrap_or(1)
            .saturating_sub(wildcards);
        cert.price_cents = catalogue::item_price(
            cert.product(),
            cert.period,
            non_wildcard,
            wildcards,
            &currency,
        );
        cert.id = id;
        cert.order_id = order_id;
        cert.order_token = self.rng.token(24);
        cert.seq = self.seq;
        cert.created_at = now;
        cert.updated_at = now;
        cert.bill_of = id;
        cert.unique_value = self.rng.token(16);
        cert.base = Base::New;
        cert.at_ca = false;
        cert.at_ca_since = None;
        cert.ca_due_at = self.reach_time(cert.family(), now);
        cert.external_number = None;
        cert.pending_cancel_at = None;
        cert.reissue_requested_at = None;
        cert.leaf = None;
        cert.serials.clear();
        cert.first_issued_at = None;
        cert.subscription_end = None;
        cert.replacement_id = None;
        cert.replaces = None;
        cert.prolonged_id = Some(original_id);
        cert.prolongation_token = None;
        cert.renewed_by = None;
        cert.annulled_at = None;
        cert.last_error = None;
        cert.forced_hold = false;
        for d in &mut cert.domains {
            *d = super::model::DomainDcv::new(d.domain.clone(), d.method, d.email.clone());
        }
        super::orders::assign_txt_values(&mut self.rng, &mut cert);
        let (login, price) = (cert.account.clone(), cert.price_cents);
        self.certs.insert(id, cert);
        self.wakes.touch(id);
        self.cert_mut(original_id).renewed_by = Some(id);
        self.bill(&login, id, price);
        if let Some(i) = self.account_index(&login) {
            self.accounts[i].billed_orders += 1;
        }
        Ok(id)
    }

    pub(super) fn hostile(
        &self,
        id: u64,
        now: OffsetDateTime,
        ca: &Authority,
    ) -> Option<OwnedHostileInput> {
        self.certs.get(&id)?;
        let target = self.cert(self.download_target(id));
        let leaf = target.leaf.as_ref()?;
        let issuer = target.product().issuer;
        Some(OwnedHostileInput {
            issuer: issuer.to_string(),
            public_key_der: hex::decode(&leaf.spki_hex).ok()?,
            common_name: leaf.common_name.clone(),
            dns_names: leaf.names.clone(),
            leaf_pem: leaf.pem.clone(),
            chain_pem: ca.chain_pem(issuer).ok()?,
            root_pem: ca.root_pem().to_string(),
            now,
        })
    }
}
