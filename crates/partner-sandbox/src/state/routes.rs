//! Routing of every partner-API path, the per-call authentication and role checks, and the
//! different 404 bodies.

use http::Method as HttpMethod;
use serde_json::json;

use super::State;
use super::accounts::{Caller, MSG_NO_PERMISSION};
use super::answers::{error, not_found_text};
use super::catalogue;
use super::model::Cert;
use super::params::Fields;
use crate::ca::Authority;
use crate::wire::{ApiRequest, ApiResponse};

/// The 404 of one certificate endpoint.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum NotFound {
    Text,
    Status,
    Details,
    Bundle,
}

impl NotFound {
    fn response(self) -> ApiResponse {
        match self {
            NotFound::Text => not_found_text(),
            NotFound::Status => ApiResponse::json(404, json!({ "error": "not found" })),
            NotFound::Details => ApiResponse::json(
                404,
                json!({ "id": null, "error": "Invalid certificate ID given for this account" }),
            ),
            NotFound::Bundle => {
                ApiResponse::json(404, json!({ "errors": "Certificate not found" }))
            }
        }
    }
}

/// The methods a known partner-API path answers (OPTIONS is the transport's).
fn allowed_methods(segs: &[&str]) -> Option<&'static str> {
    const GET: &str = "GET, OPTIONS";
    const POST: &str = "POST, OPTIONS";
    match segs {
        ["users", "signin"] | ["order"] | ["dcv_emails"] => Some(POST),
        ["countries"]
        | ["products"]
        | ["billing", "balance"]
        | ["ssl_certificates"]
        | ["ssl_certificates", _]
        | ["users", _, "our_ssl_certificates"]
        | ["users", _, "nomenclatures", _, "ssl_server_softwares"] => Some(GET),
        [
            "ssl_certificates",
            _,
            "status" | "dcv" | "download" | "download_bundle",
        ] => Some(GET),
        [
            "ssl_certificates",
            _,
            "change_dcv" | "resend_dcv" | "reissue" | "cancel" | "prolong",
        ] => Some(POST),
        _ => None,
    }
}

fn with_account(mut resp: ApiResponse, login: &str) -> ApiResponse {
    resp.account = Some(login.to_string());
    resp
}

impl State {
    pub(super) fn route(&mut self, req: &ApiRequest, now: i64, ca: &Authority) -> ApiResponse {
        let Some(rest) = req.path.strip_prefix("/api/v1/") else {
            return not_found_text();
        };
        let segs: Vec<&str> = rest.split('/').collect();
        if segs.iter().any(|s| s.is_empty()) {
            return not_found_text();
        }
        let get = req.method == HttpMethod::GET;
        let post = req.method == HttpMethod::POST;
        match segs.as_slice() {
            ["users", "signin"] if post => self.signin(req, now),
            ["countries"] if get => ApiResponse::json(200, catalogue::countries_value()),
            [
                "users",
                user_id,
                "nomenclatures",
                product_id,
                "ssl_server_softwares",
            ] if get => self.software(user_id, product_id),
            ["products"] if get => match self.authenticate_products(req) {
                Ok(caller) => with_account(self.products(req, &caller), &caller.login),
                Err(resp) => *resp,
            },
            ["billing", "balance"] if get => self.authed(req, false, |s, c| s.balance(c)),
            ["order"] if post => self.authed(req, false, |s, c| s.place_order(c, req, now)),
            ["dcv_emails"] if post => self.authed(req, false, |s, _| s.dcv_emails(req)),
            ["ssl_certificates"] if get => self.authed(req, false, |s, c| s.list(c, req)),
            ["users", user_id, "our_ssl_certificates"] if get => self.authed(req, false, |s, c| {
                let uid = s.accounts[c.index].id;
                if user_id.parse::<u64>().ok() == Some(uid) {
                    s.list(c, req)
                } else {
                    error(401, "Invalid user_id")
                }
            }),
            ["ssl_certificates", id] if get => {
                self.cert_call(req, id, false, NotFound::Details, |s, _, cert| {
                    s.details(cert)
                })
            }
            ["ssl_certificates", id, "status"] if get => {
                self.cert_call(req, id, false, NotFound::Status, |s, _, cert| {
                    s.status(cert)
                })
            }
            ["ssl_certificates", id, "dcv"] if get => {
                self.cert_call(req, id, false, NotFound::Text, |s, _, cert| {
                    s.dcv_status(cert, now)
                })
            }
            ["ssl_certificates", id, "download"] if get => {
                self.cert_call(req, id, false, NotFound::Text, |s, _, cert| {
                    s.download(cert, ca, false)
                })
            }
            ["ssl_certificates", id, "download_bundle"] if get => {
                self.cert_call(req, id, false, NotFound::Bundle, |s, _, cert| {
                    s.download(cert, ca, true)
                })
            }
            ["ssl_certificates", id, "change_dcv"] if post => {
                self.cert_call(req, id, true, NotFound::Text, |s, _, cert| {
                    s.change_dcv(cert, req, now)
                })
            }
            ["ssl_certificates", id, "resend_dcv"] if post => {
                self.cert_call(req, id, true, NotFound::Text, |s, _, cert| {
                    s.resend_dcv(cert, now)
                })
            }
            ["ssl_certificates", id, "reissue"] if post => {
                self.cert_call(req, id, true, NotFound::Text, |s, _, cert| {
                    s.reissue(cert, req, now)
                })
            }
            ["ssl_certificates", id, "cancel"] if post => {
                self.cert_call(req, id, true, NotFound::Text, |s, _, cert| {
                    s.cancel(cert, now)
                })
            }
            ["ssl_certificates", id, "prolong"] if post => {
                self.cert_call(req, id, true, NotFound::Text, |s, _, cert| {
                    s.prolong(cert, now)
                })
            }
            other => match allowed_methods(other) {
                // A known path with another method: 405 naming the allowed ones.
                Some(allow) => {
                    let mut resp = error(405, "Method not allowed");
                    resp.headers.push(("Allow".to_string(), allow.to_string()));
                    resp
                }
                None => not_found_text(),
            },
        }
    }

    /// Authenticates (401), checks the role for changing calls (403), runs `f`, and marks the
    /// response with the caller's login.
    fn authed(
        &mut self,
        req: &ApiRequest,
        changes: bool,
        f: impl FnOnce(&mut State, &Caller) -> ApiResponse,
    ) -> ApiResponse {
        let caller = match self.authenticate(req) {
            Ok(c) => c,
            Err(resp) => return *resp,
        };
        if changes && !caller.role.may_change() {
            return with_account(error(403, MSG_NO_PERMISSION), &caller.login);
        }
        let resp = f(self, &caller);
        with_account(resp, &caller.login)
    }

    /// [`State::authed`] plus the lookup of a certificate of the caller's account (404 with
    /// the endpoint's body otherwise).
    fn cert_call(
        &mut self,
        req: &ApiRequest,
        id: &str,
        changes: bool,
        not_found: NotFound,
        f: impl FnOnce(&mut State, &Caller, u64) -> ApiResponse,
    ) -> ApiResponse {
        self.authed(req, changes, |s, caller| {
            let cert = id
                .parse::<u64>()
                .ok()
                .filter(|_| id.bytes().all(|b| b.is_ascii_digit()))
                .filter(|cid| s.certs.get(cid).is_some_and(|c| c.account == caller.login));
            match cert {
                Some(cid) => f(s, caller, cid),
                None => not_found.response(),
            }
        })
    }

    pub(super) fn cert(&self, id: u64) -> &Cert {
        &self.certs[&id]
    }

    /// The certificate `id` if there is one, to change: the next advance looks at it. Every
    /// change of a certificate goes through this or [`cert_mut`](Self::cert_mut) (or touches
    /// it in [`wake`](super::wake)), so that its schedule is computed again.
    pub(super) fn find_mut(&mut self, id: u64) -> Option<&mut Cert> {
        self.wakes.touch(id);
        self.certs.get_mut(&id)
    }

    /// The certificate, to change: the next advance looks at it.
    pub(super) fn cert_mut(&mut self, id: u64) -> &mut Cert {
        self.wakes.touch(id);
        self.certs.get_mut(&id).expect("certificate exists")
    }

    /// Endpoint 2.
    fn products(&self, req: &ApiRequest, caller: &Caller) -> ApiResponse {
        if !caller.role.is_partner() {
            return error(403, super::accounts::MSG_NOT_PARTNER);
        }
        let params = match Fields::from_body(req) {
            Ok(f) => f,
            Err(resp) => return *resp,
        };
        let end_user = match params.scalar("recommended_prices").as_deref() {
            None => false,
            Some("EU") => true,
            Some(_) => return error(400, "recommended_prices does not have a valid value"),
        };
        let currency = if caller.role == super::accounts::Role::NoAgreement {
            "EUR"
        } else {
            self.accounts[caller.index].currency.as_str()
        };
        ApiResponse::json(200, catalogue::products_value(currency, end_user))
    }

    /// `GET /api/v1/users/{user_id}/nomenclatures/{nomenclature_id}/ssl_server_softwares`.
    fn software(&self, user_id: &str, product_id: &str) -> ApiResponse {
        let user_known = user_id
            .parse::<u64>()
            .is_ok_and(|uid| self.accounts.iter().any(|a| a.id == uid));
        let product = product_id.parse::<u64>().ok().and_then(catalogue::product);
        match (user_known, product) {
            (true, Some(def)) => ApiResponse::json(200, catalogue::software_value(def)),
            _ => not_found_text(),
        }
    }
}
