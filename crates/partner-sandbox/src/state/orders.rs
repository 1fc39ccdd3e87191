//! Endpoint 5: placement of the billed order. The order's contact (`contact`) and every item
//! (`item`, `item_dcv`) are validated first, every problem reported at once; then each item
//! becomes a certificate with its bill. `csr` holds the CSR rules orders share with reissues,
//! `fields` the readers of JSON fields with their Rails-style messages.

use serde_json::{Value, json};

use super::State;
use super::accounts::{Caller, MSG_NO_PERMISSION, MSG_NOT_PARTNER, Role};
use super::answers::error;
use super::catalogue::{self, Family};
use super::model::{Base, Cert, Method};
use super::params::Fields;
use super::rng::SeededRng;
use crate::wire::{ApiRequest, ApiResponse};

mod contact;
mod csr;
mod fields;
mod item;
mod item_dcv;

pub(super) use csr::check_csr;
#[cfg(test)]
pub(super) use csr::key_problem;
pub(super) use item_dcv::email_field_choice;

use contact::validate_contact;
use item::{Planned, validate_item};

const MSG_ORDER_MISSING: &str = "Required parameter is missing";

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
        let params = match Fields::from_body(req) {
            Ok(f) => f,
            Err(resp) => return *resp,
        };
        let Some(order) = params.value("order").and_then(Value::as_object) else {
            return error(400, MSG_ORDER_MISSING);
        };
        // Query-string and form parameters are text: integers are read from their digits,
        // as Rails casts them; a JSON body's values keep their types.
        let cast;
        let order = if params.is_typed("order") {
            order
        } else {
            cast = fields::cast_text_integers(order);
            &cast
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
            self.wakes.touch(id);
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
