//! Tests of the state machine: every call goes through `dispatch` with real CSRs (rcgen),
//! a real authority, and a virtual clock driven by the test.

mod auth;
mod cancel_prolong;
mod catalogue;
mod dcv;
mod lifecycle;
mod list;
mod orders;
mod reissue;

use std::sync::OnceLock;

use bytes::Bytes;
use http::{HeaderMap, HeaderName, HeaderValue, Method};
use rcgen::{CertificateParams, DnType, KeyPair};
use serde_json::{Value, json};
use time::{Duration, OffsetDateTime};

use md5::Md5;
use sha2::{Digest, Sha256};

use super::{State, StateConfig};
use crate::ca::Authority;
use crate::wire::{ApiRequest, ApiResponse, DcvCheck, ResponseBody};

pub(super) const PARTNER: &str = "partner@sandbox.test";
pub(super) const BILLING: &str = "billing@sandbox.test";
pub(super) const RETAIL: &str = "retail@sandbox.test";
pub(super) const OTHER: &str = "other@sandbox.test";
pub(super) const NEW: &str = "new@sandbox.test";

/// Product IDs of the catalogue used by the tests.
#[allow(dead_code)] // the full table, whether or not every test uses each entry
pub(super) mod p {
    pub(crate) const S_DV: u64 = 1101;
    pub(crate) const S_WILDCARD: u64 = 1102;
    pub(crate) const S_UCC: u64 = 1103;
    pub(crate) const S_OV: u64 = 1104;
    pub(crate) const S_EV: u64 = 1105;
    pub(crate) const S_OV_UCC: u64 = 1106;
    pub(crate) const S2_DV: u64 = 1201;
    pub(crate) const S2_UCC: u64 = 1202;
    pub(crate) const D_DV: u64 = 2101;
    pub(crate) const D_WILDCARD: u64 = 2102;
    pub(crate) const D_UCC: u64 = 2103;
    pub(crate) const C_DV: u64 = 3101;
    pub(crate) const C_WILDCARD: u64 = 3102;
    pub(crate) const C_UCC: u64 = 3103;
}

pub(super) fn ca() -> &'static Authority {
    static CA: OnceLock<Authority> = OnceLock::new();
    CA.get_or_init(|| Authority::generate().expect("authority"))
}

/// 2026-01-01T00:00:00Z.
pub(super) fn t0() -> OffsetDateTime {
    OffsetDateTime::from_unix_timestamp(1_767_225_600).expect("time")
}

/// A PEM CSR with `cn` as common name (if any) and `sans` as DNS/IP subjectAltNames.
pub(super) fn csr_with(key: &KeyPair, cn: Option<&str>, sans: &[&str]) -> String {
    let mut params =
        CertificateParams::new(sans.iter().map(|s| (*s).to_string()).collect::<Vec<_>>())
            .expect("params");
    params.distinguished_name = rcgen::DistinguishedName::new();
    if let Some(cn) = cn {
        params.distinguished_name.push(DnType::CommonName, cn);
    }
    params
        .serialize_request(key)
        .expect("csr")
        .pem()
        .expect("pem")
}

/// A fresh P-256 key and a CSR whose CN is `names[0]` and whose SANs are `names`.
pub(super) fn csr(names: &[&str]) -> (String, KeyPair) {
    let key = KeyPair::generate().expect("key");
    (csr_with(&key, Some(names[0]), names), key)
}

/// An order item that passes validation (HTTP_CSR_HASH, one year).
pub(super) fn item(product: u64, cn: &str, csr_pem: &str) -> Value {
    json!({
        "nomenclature_id": product,
        "days": 365,
        "ssl_server_software_id": 0,
        "dcv_type": "HTTP_CSR_HASH",
        "domain_name": cn,
        "csr": csr_pem,
        "country_name": "DE",
        "region_name": "Berlin",
        "city_name": "Berlin",
        "organization_name": "Example GmbH",
    })
}

pub(super) fn json_of(resp: &ApiResponse) -> Value {
    match &resp.body {
        ResponseBody::Json(v) => v.clone(),
        other => panic!("expected JSON, got {other:?} (status {})", resp.status),
    }
}

pub(super) fn errors_of(resp: &ApiResponse) -> Vec<String> {
    assert_eq!(resp.status, 422, "{:?}", resp.body);
    json_of(resp)["errors"]
        .as_array()
        .expect("errors array")
        .iter()
        .map(|e| e.as_str().expect("string").to_string())
        .collect()
}

/// True when some error contains `needle`.
pub(super) fn has_error(errs: &[String], needle: &str) -> bool {
    errs.iter().any(|e| e.contains(needle))
}

pub(super) fn request(
    method: Method,
    path: &str,
    query: &[(&str, &str)],
    headers: &[(&str, &str)],
    body: impl Into<Bytes>,
) -> ApiRequest {
    let mut map = HeaderMap::new();
    for (k, v) in headers {
        map.append(
            HeaderName::from_bytes(k.as_bytes()).expect("header name"),
            HeaderValue::from_str(v).expect("header value"),
        );
    }
    ApiRequest {
        method,
        path: path.to_string(),
        query: query
            .iter()
            .map(|(k, v)| ((*k).to_string(), (*v).to_string()))
            .collect(),
        headers: map,
        body: body.into(),
    }
}

/// A state, its clock, and the tokens of signed-in accounts.
pub(super) struct Env {
    pub state: State,
    pub now: OffsetDateTime,
    tokens: Vec<(String, String)>,
}

impl Env {
    pub(super) fn new() -> Self {
        Self::with_config(StateConfig::default())
    }

    pub(super) fn with_config(config: StateConfig) -> Self {
        Self {
            state: State::new(config, t0()),
            now: t0(),
            tokens: Vec::new(),
        }
    }

    /// Same as `new` with instant validation and issuance.
    pub(super) fn instant() -> Self {
        let mut env = Self::new();
        env.state.set_instant(true);
        env
    }

    /// Moves the clock and lets the state tick.
    pub(super) fn advance(&mut self, secs: i64) {
        self.now += Duration::seconds(secs);
        self.state.tick(self.now, ca());
    }

    pub(super) fn advance_days(&mut self, days: i64) {
        self.advance(days * 86_400);
    }

    pub(super) fn call(&mut self, req: &ApiRequest) -> ApiResponse {
        self.state.dispatch(req, self.now, ca())
    }

    pub(super) fn signin(&mut self, login: &str) -> String {
        let resp = self.call(&request(
            Method::POST,
            "/api/v1/users/signin",
            &[],
            &[("content-type", "application/json")],
            json!({ "login": login, "password": "sandbox" }).to_string(),
        ));
        assert_eq!(resp.status, 200, "{:?}", resp.body);
        let token = json_of(&resp)["auth_token"]
            .as_str()
            .expect("token")
            .to_string();
        self.tokens.retain(|(l, _)| l != login);
        self.tokens.push((login.to_string(), token.clone()));
        token
    }

    pub(super) fn token(&mut self, login: &str) -> String {
        match self.tokens.iter().find(|(l, _)| l == login) {
            Some((_, t)) => t.clone(),
            None => self.signin(login),
        }
    }

    pub(super) fn get_q(&mut self, login: &str, path: &str, query: &[(&str, &str)]) -> ApiResponse {
        let token = self.token(login);
        self.call(&request(
            Method::GET,
            path,
            query,
            &[("x-auth-token", &token)],
            Bytes::new(),
        ))
    }

    pub(super) fn get(&mut self, login: &str, path: &str) -> ApiResponse {
        self.get_q(login, path, &[])
    }

    pub(super) fn post_json(&mut self, login: &str, path: &str, body: &Value) -> ApiResponse {
        let token = self.token(login);
        self.call(&request(
            Method::POST,
            path,
            &[],
            &[
                ("x-auth-token", &token),
                ("content-type", "application/json"),
            ],
            body.to_string(),
        ))
    }

    pub(super) fn post_form(
        &mut self,
        login: &str,
        path: &str,
        pairs: &[(&str, &str)],
    ) -> ApiResponse {
        let token = self.token(login);
        let body = serde_urlencoded::to_string(pairs).expect("form");
        self.call(&request(
            Method::POST,
            path,
            &[],
            &[
                ("x-auth-token", &token),
                ("content-type", "application/x-www-form-urlencoded"),
            ],
            body,
        ))
    }

    pub(super) fn order(&mut self, login: &str, items: &[Value]) -> ApiResponse {
        self.post_json(
            login,
            "/api/v1/order",
            &json!({ "order": { "items": items } }),
        )
    }

    /// Places a one-item order that must succeed; returns the certificate ID.
    pub(super) fn place(&mut self, login: &str, item: Value) -> u64 {
        let resp = self.order(login, &[item]);
        assert_eq!(resp.status, 200, "{:?}", resp.body);
        json_of(&resp)["certificate"]
            .as_u64()
            .expect("certificate id")
    }

    pub(super) fn cert_path(id: u64, action: &str) -> String {
        if action.is_empty() {
            format!("/api/v1/ssl_certificates/{id}")
        } else {
            format!("/api/v1/ssl_certificates/{id}/{action}")
        }
    }

    pub(super) fn status(&mut self, login: &str, id: u64) -> String {
        let resp = self.get(login, &Self::cert_path(id, "status"));
        assert_eq!(resp.status, 200, "{:?}", resp.body);
        json_of(&resp)["certificate"]
            .as_str()
            .expect("state")
            .to_string()
    }

    pub(super) fn details(&mut self, login: &str, id: u64) -> Value {
        let resp = self.get(login, &Self::cert_path(id, ""));
        assert_eq!(resp.status, 200, "{:?}", resp.body);
        json_of(&resp)
    }

    pub(super) fn inspect(&self, id: u64) -> Value {
        self.state.inspect(id).expect("certificate")
    }
}

/// DER of a PEM CSR.
pub(super) fn csr_der(pem: &str) -> Vec<u8> {
    x509_parser::pem::Pem::iter_from_buffer(pem.as_bytes())
        .next()
        .expect("pem block")
        .expect("pem")
        .contents
}

/// The CA domain of a family, as the document's DCV content names it.
pub(super) fn ca_domain_of(product: u64) -> &'static str {
    match product / 1000 {
        1 => "ca-s.sandbox.test",
        2 => "ca-d.sandbox.test",
        _ => "ca-c.sandbox.test",
    }
}

/// What the validator should fetch for a certificate, computed independently of the state:
/// the path from the MD5 of the CSR DER, the content from its SHA-256, the family's CA domain
/// and the unique value.
pub(super) fn expected_file(csr_pem: &str, product: u64, unique_value: &str) -> (String, String) {
    let der = csr_der(csr_pem);
    let path = format!(
        "/.well-known/pki-validation/{}.txt",
        hex::encode_upper(Md5::digest(&der))
    );
    let content = format!(
        "{}\n{}\n{}",
        hex::encode_upper(Sha256::digest(&der)),
        ca_domain_of(product),
        unique_value
    );
    (path, content)
}

/// Upper-case hex MD5 and SHA-256 of a CSR's DER.
pub(super) fn csr_hashes(csr_pem: &str) -> (String, String) {
    let der = csr_der(csr_pem);
    (
        hex::encode_upper(Md5::digest(&der)),
        hex::encode_upper(Sha256::digest(&der)),
    )
}

/// A parsed leaf: serial (upper hex), SPKI DER, DNS names, validity (unix), issuer CN.
#[derive(Debug)]
pub(super) struct LeafFacts {
    pub serial: String,
    pub spki: Vec<u8>,
    pub names: Vec<String>,
    pub common_name: String,
    pub not_before: i64,
    pub not_after: i64,
    pub issuer_cn: String,
}

pub(super) fn leaf_facts(pem: &str) -> LeafFacts {
    use x509_parser::extensions::{GeneralName, ParsedExtension};
    let block = x509_parser::pem::Pem::iter_from_buffer(pem.as_bytes())
        .next()
        .expect("block")
        .expect("pem");
    let (_, cert) = x509_parser::parse_x509_certificate(&block.contents).expect("x509");
    let mut names = Vec::new();
    for ext in cert.extensions() {
        if let ParsedExtension::SubjectAlternativeName(san) = ext.parsed_extension() {
            for n in &san.general_names {
                if let GeneralName::DNSName(d) = n {
                    names.push((*d).to_string());
                }
            }
        }
    }
    let cn = |name: &x509_parser::x509::X509Name<'_>| {
        name.iter_common_name()
            .next()
            .and_then(|c| c.as_str().ok())
            .unwrap_or_default()
            .to_string()
    };
    LeafFacts {
        serial: hex::encode_upper(cert.raw_serial()),
        spki: cert.public_key().raw.to_vec(),
        names,
        common_name: cn(cert.subject()),
        not_before: cert.validity().not_before.timestamp(),
        not_after: cert.validity().not_after.timestamp(),
        issuer_cn: cn(cert.issuer()),
    }
}

impl Env {
    /// The unique value the state uses for a certificate.
    pub(super) fn unique_value(&self, id: u64) -> String {
        self.inspect(id)["unique_value"]
            .as_str()
            .expect("unique value")
            .to_string()
    }

    /// The checks due now for one certificate.
    pub(super) fn due_for(&mut self, id: u64) -> Vec<DcvCheck> {
        self.state
            .due_dcv_checks(self.now)
            .into_iter()
            .filter(|c| c.certificate_id == id)
            .collect()
    }

    pub(super) fn fetch(&mut self, check: &DcvCheck, body: Result<Vec<u8>, String>) {
        self.state.record_dcv_fetch(check, body, self.now, ca());
    }

    /// Serves the right file for every due check of `id` (the CSR given), advancing the clock
    /// minute by minute until the checks come, at most `limit` seconds.
    pub(super) fn pass_http(&mut self, id: u64, csr_pem: &str, product: u64, limit: i64) {
        let mut waited = 0;
        loop {
            let checks = self.due_for(id);
            if !checks.is_empty() {
                let (path, content) = expected_file(csr_pem, product, &self.unique_value(id));
                for check in checks {
                    assert_eq!(check.path, path);
                    self.fetch(&check, Ok(content.clone().into_bytes()));
                }
                return;
            }
            assert!(waited < limit, "no DCV check came within {limit} s");
            self.advance(10);
            waited += 10;
        }
    }

    /// Places an HTTP-validated order and drives it to issued; returns the certificate ID.
    pub(super) fn issued(&mut self, login: &str, item: Value, csr_pem: &str) -> u64 {
        let product = item["nomenclature_id"].as_u64().expect("product");
        let id = self.place(login, item);
        self.pass_http(id, csr_pem, product, 1200);
        for _ in 0..40 {
            if self.status(login, id) == "issued" {
                return id;
            }
            self.advance(30);
        }
        panic!("certificate {id} was not issued: {}", self.inspect(id));
    }

    /// The current leaf of a certificate (from the state's record).
    pub(super) fn leaf(&self, id: u64) -> LeafFacts {
        leaf_facts(self.inspect(id)["leaf"]["pem"].as_str().expect("leaf"))
    }
}

/// SubjectPublicKeyInfo DER of a key.
pub(super) fn spki(key: &KeyPair) -> Vec<u8> {
    use rcgen::PublicKeyData;
    key.subject_public_key_info()
}
