//! Routing of every partner-API path, the per-call authentication and role checks, the
//! different 404 bodies, and helpers for request bodies and responses.

use http::Method as HttpMethod;
use serde_json::{Map, Value, json};

use super::State;
use super::accounts::{Caller, MSG_NO_PERMISSION};
use super::catalogue;
use super::model::Cert;
use crate::ca::Authority;
use crate::wire::{ApiRequest, ApiResponse, ResponseBody};

/// `{error: message}` with `status`.
pub(super) fn error(status: u16, message: &str) -> ApiResponse {
    ApiResponse::json(status, json!({ "error": message }))
}

/// The 404 whose body is "not meant to be parsed".
pub(super) fn not_found_text() -> ApiResponse {
    ApiResponse {
        status: 404,
        headers: Vec::new(),
        body: ResponseBody::Text("404 Not Found".to_string()),
        account: None,
        billed: false,
    }
}

/// `{success, result}` with status 200 (change DCV, resend, cancel).
pub(super) fn action(success: bool, result: &str) -> ApiResponse {
    ApiResponse::json(200, json!({ "success": success, "result": result }))
}

/// `{success:false, error}` with status 422 (reissue, DCV status).
pub(super) fn refused(message: &str) -> ApiResponse {
    ApiResponse::json(422, json!({ "success": false, "error": message }))
}

/// Fields of a form-encoded or JSON body.
pub(super) struct Fields {
    json: Map<String, Value>,
    form: Vec<(String, String)>,
}

fn is_json(req: &ApiRequest) -> bool {
    req.header("content-type").is_some_and(|ct| {
        let ct = ct.to_ascii_lowercase();
        ct.starts_with("application/json") || ct.contains("+json")
    })
}

impl Fields {
    /// The request's parameters: the body (JSON when the content type says so, else
    /// `application/x-www-form-urlencoded`) merged with the query string, as the real service
    /// reads them (clients such as the PHP client send every parameter in the query string,
    /// also on POST). The body wins when both carry a parameter.
    pub(super) fn from_body(req: &ApiRequest) -> Result<Fields, Box<ApiResponse>> {
        let mut fields = Self::body_only(req)?;
        // Looked up after the body's own fields: the body wins.
        fields.form.extend(req.query.iter().cloned());
        Ok(fields)
    }

    fn body_only(req: &ApiRequest) -> Result<Fields, Box<ApiResponse>> {
        if is_json(req) {
            if req.body.iter().all(u8::is_ascii_whitespace) {
                return Ok(Fields {
                    json: Map::new(),
                    form: Vec::new(),
                });
            }
            return match serde_json::from_slice::<Value>(&req.body) {
                Ok(Value::Object(map)) => Ok(Fields {
                    json: map,
                    form: Vec::new(),
                }),
                Ok(_) => Err(Box::new(error(
                    400,
                    "The request body must be a JSON object",
                ))),
                Err(e) => Err(Box::new(error(
                    400,
                    &format!("The request body is not valid JSON: {e}"),
                ))),
            };
        }
        let form =
            serde_urlencoded::from_bytes::<Vec<(String, String)>>(&req.body).map_err(|e| {
                Box::new(error(
                    400,
                    &format!("The request body is not valid form data: {e}"),
                ))
            })?;
        Ok(Fields {
            json: Map::new(),
            form,
        })
    }

    /// A string field (JSON strings only; numbers and others count as absent).
    pub(super) fn text(&self, key: &str) -> Option<&str> {
        if let Some(v) = self.json.get(key) {
            return v.as_str();
        }
        self.form
            .iter()
            .find(|(k, _)| k == key)
            .map(|(_, v)| v.as_str())
    }

    /// A string field, trimmed, `None` when absent or blank.
    pub(super) fn non_blank(&self, key: &str) -> Option<&str> {
        self.text(key).map(str::trim).filter(|s| !s.is_empty())
    }

    /// A map field: a JSON object of strings, or form keys `key[sub]=value` (deepObject).
    /// `Err` names what is wrong.
    pub(super) fn map(&self, key: &str) -> Result<Vec<(String, String)>, String> {
        if let Some(v) = self.json.get(key) {
            return match v {
                Value::Null => Ok(Vec::new()),
                Value::Object(m) => m
                    .iter()
                    .map(|(k, v)| match v.as_str() {
                        Some(s) => Ok((k.clone(), s.to_string())),
                        None => Err(format!("{key}[{k}] must be a string")),
                    })
                    .collect(),
                _ => Err(format!("{key} must be an object")),
            };
        }
        let prefix = format!("{key}[");
        let mut out = Vec::new();
        for (k, v) in &self.form {
            if k == key {
                return Err(format!(
                    "{key} must be an object (send {key}[domain]=value)"
                ));
            }
            if let Some(rest) = k.strip_prefix(&prefix) {
                match rest.strip_suffix(']') {
                    Some(sub) if !sub.is_empty() && !sub.contains(['[', ']']) => {
                        out.push((sub.to_string(), v.clone()));
                    }
                    _ => return Err(format!("{k} is not a valid {key} key")),
                }
            }
        }
        Ok(out)
    }
}

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

    pub(super) fn cert_mut(&mut self, id: u64) -> &mut Cert {
        self.certs.get_mut(&id).expect("certificate exists")
    }

    /// Endpoint 2.
    fn products(&self, req: &ApiRequest, caller: &Caller) -> ApiResponse {
        if !caller.role.is_partner() {
            return error(403, super::accounts::MSG_NOT_PARTNER);
        }
        let end_user = match req.query_param("recommended_prices") {
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
