//! Accounts: roles, signin and the 12-hour token rule, authentication of calls, balance.

use serde::{Deserialize, Serialize};
use serde_json::{Value, json};

use super::answers::error;
use super::params::Fields;
use super::{AccountInfo, AccountSpec, State};
use crate::wire::{ApiRequest, ApiResponse};

/// How long after a change of the account record a signin still returns the same token.
pub(super) const SAME_TOKEN_WINDOW: i64 = 12 * 3600;

pub(super) const MSG_UNDEFINED_TOKEN: &str = "Undefined X-AUTH-TOKEN or auth_token";
pub(super) const MSG_INVALID_TOKEN: &str = "Invalid X-AUTH-TOKEN or auth_token";
pub(super) const MSG_UNDEFINED_ANY_TOKEN: &str =
    "Undefined X-AUTH-TOKEN or auth_token, X-PUBLIC-TOKEN or public_token";
pub(super) const MSG_INVALID_PUBLIC_TOKEN: &str = "Invalid X-PUBLIC-TOKEN or public_token";
pub(super) const MSG_NO_PERMISSION: &str = "You do not have permission for this action";
pub(super) const MSG_NOT_PARTNER: &str = "Not authorized for partnership";

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub(super) enum Role {
    /// A partner account.
    Partner,
    /// Billing-only login: may read, may not order or change certificates.
    Restricted,
    /// Not a partner account.
    Retail,
    /// Partner without an agreement: zero balance in EUR.
    NoAgreement,
}

impl Role {
    pub(super) fn parse(s: &str) -> Option<Role> {
        match s {
            "partner" => Some(Role::Partner),
            "restricted" => Some(Role::Restricted),
            "retail" => Some(Role::Retail),
            "no_agreement" => Some(Role::NoAgreement),
            _ => None,
        }
    }

    fn as_str(self) -> &'static str {
        match self {
            Role::Partner => "partner",
            Role::Restricted => "restricted",
            Role::Retail => "retail",
            Role::NoAgreement => "no_agreement",
        }
    }

    fn currency(self) -> &'static str {
        match self {
            Role::Partner | Role::Restricted => "USD",
            Role::Retail | Role::NoAgreement => "EUR",
        }
    }

    /// Payments received at start, in cents of the account currency.
    fn opening_payments(self) -> i64 {
        match self {
            Role::Partner => 500_000,
            Role::Restricted => 100_000,
            Role::Retail => 10_000,
            Role::NoAgreement => 0,
        }
    }

    pub(super) fn is_partner(self) -> bool {
        matches!(self, Role::Partner | Role::Restricted | Role::NoAgreement)
    }

    /// May order, change DCV, resend, reissue, cancel and prolong.
    pub(super) fn may_change(self) -> bool {
        matches!(self, Role::Partner | Role::NoAgreement)
    }
}

/// A bill of a placed order.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub(super) struct Bill {
    pub certificate_id: u64,
    pub cents: i64,
    /// Voided by a cancellation.
    pub void: bool,
    /// The service was delivered (first issuance).
    pub delivered: bool,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub(super) struct Account {
    pub id: u64,
    pub login: String,
    pub password: String,
    pub role: Role,
    pub currency: String,
    pub token: Option<String>,
    /// Last change of the account record (a token issued counts as a change).
    pub record_changed_at: i64,
    pub public_token: String,
    pub payments_cents: i64,
    pub bills: Vec<Bill>,
    pub billed_orders: u64,
}

impl Account {
    pub(super) fn new(spec: &AccountSpec, id: u64, public_token: String, now: i64) -> Self {
        // An unknown role gets the least privilege (AccountSpec::validate reports it earlier).
        let role = Role::parse(&spec.role).unwrap_or(Role::Retail);
        Self {
            id,
            login: spec.login.clone(),
            password: spec.password.clone(),
            role,
            currency: role.currency().to_string(),
            token: None,
            record_changed_at: now,
            public_token,
            payments_cents: role.opening_payments(),
            bills: Vec::new(),
            billed_orders: 0,
        }
    }

    pub(super) fn info(&self) -> AccountInfo {
        AccountInfo {
            id: self.id,
            login: self.login.clone(),
            role: self.role.as_str().to_string(),
            currency: self.currency.clone(),
            public_token: self.public_token.clone(),
        }
    }

    fn balance_value(&self) -> Value {
        let member = |cents: i64, currency: &str| {
            // Cents / 100 is exact to two decimals for the sums the sandbox handles.
            #[allow(clippy::cast_precision_loss)]
            let sum = cents as f64 / 100.0;
            json!({ "sum": sum, "currency": currency })
        };
        if self.role == Role::NoAgreement {
            let zero = member(0, "EUR");
            return json!({
                "balance": zero, "reserved": zero, "common": zero,
                "prepayment": zero, "available": zero,
            });
        }
        let live = self.bills.iter().filter(|b| !b.void);
        let delivered: i64 = live.clone().filter(|b| b.delivered).map(|b| b.cents).sum();
        let reserved: i64 = live.map(|b| b.cents).sum();
        let balance = self.payments_cents - delivered;
        let c = self.currency.as_str();
        json!({
            "balance": member(balance, c),
            "reserved": member(reserved, c),
            "common": member(balance - reserved, c),
            "prepayment": member(0, c),
            "available": member(self.payments_cents, c),
        })
    }
}

/// The caller of an authenticated endpoint.
pub(super) struct Caller {
    pub index: usize,
    pub login: String,
    pub role: Role,
}

fn token_from(req: &ApiRequest, header: &str, param: &str) -> Option<String> {
    req.header(header)
        .filter(|v| !v.is_empty())
        .or_else(|| req.query_param(param).filter(|v| !v.is_empty()))
        .map(str::to_string)
}

impl State {
    pub(super) fn account_index(&self, login: &str) -> Option<usize> {
        self.accounts.iter().position(|a| a.login == login)
    }

    /// `X-AUTH-TOKEN` header, else the deprecated `auth_token` query parameter.
    pub(super) fn authenticate(&self, req: &ApiRequest) -> Result<Caller, Box<ApiResponse>> {
        let Some(token) = token_from(req, "x-auth-token", "auth_token") else {
            return Err(Box::new(error(401, MSG_UNDEFINED_TOKEN)));
        };
        self.caller_by(|a| a.token.as_deref() == Some(token.as_str()))
            .ok_or_else(|| Box::new(error(401, MSG_INVALID_TOKEN)))
    }

    /// Like [`State::authenticate`], but a public token is also accepted (products only).
    pub(super) fn authenticate_products(
        &self,
        req: &ApiRequest,
    ) -> Result<Caller, Box<ApiResponse>> {
        if token_from(req, "x-auth-token", "auth_token").is_some() {
            return self.authenticate(req);
        }
        let Some(token) = token_from(req, "x-public-token", "public_token") else {
            return Err(Box::new(error(401, MSG_UNDEFINED_ANY_TOKEN)));
        };
        self.caller_by(|a| a.public_token == token)
            .ok_or_else(|| Box::new(error(401, MSG_INVALID_PUBLIC_TOKEN)))
    }

    fn caller_by(&self, pred: impl Fn(&Account) -> bool) -> Option<Caller> {
        let index = self.accounts.iter().position(pred)?;
        let a = &self.accounts[index];
        Some(Caller {
            index,
            login: a.login.clone(),
            role: a.role,
        })
    }

    /// Endpoint 1. Form fields or JSON; 400 naming every missing parameter; 401 on a wrong
    /// pair; the same token within 12 hours of the last change of the account record.
    pub(super) fn signin(&mut self, req: &ApiRequest, now: i64) -> ApiResponse {
        let fields = match Fields::from_body(req) {
            Ok(f) => f,
            Err(resp) => return *resp,
        };
        let login = fields.text("login");
        let password = fields.text("password");
        let mut missing = Vec::new();
        if login.is_none_or(str::is_empty) {
            missing.push("login is missing");
        }
        if password.is_none_or(str::is_empty) {
            missing.push("password is missing");
        }
        if !missing.is_empty() {
            return error(400, &missing.join(", "));
        }
        let (login, password) = (login.unwrap_or_default(), password.unwrap_or_default());
        let Some(index) = self
            .accounts
            .iter()
            .position(|a| a.login == login && a.password == password)
        else {
            return error(401, "Invalid login or password");
        };
        let account = &mut self.accounts[index];
        let stale = now - account.record_changed_at >= SAME_TOKEN_WINDOW;
        if account.token.is_none() || stale {
            account.token = Some(self.rng.token(40));
            account.record_changed_at = now;
        }
        let roles = match account.role {
            Role::Retail => vec!["customer"],
            Role::Restricted => vec!["partner", "billing"],
            Role::Partner | Role::NoAgreement => vec!["partner"],
        };
        let mut resp = ApiResponse::json(
            200,
            json!({
                "id": account.id,
                "auth_token": account.token,
                "email": account.login,
                "language": "en",
                "name": account.login.split('@').next().unwrap_or_default(),
                "roles": roles,
                "public_token": account.public_token,
            }),
        );
        resp.account = Some(account.login.clone());
        resp
    }

    /// Endpoint 11.
    pub(super) fn balance(&self, caller: &Caller) -> ApiResponse {
        ApiResponse::json(200, self.accounts[caller.index].balance_value())
    }

    pub(super) fn rotate(&mut self, login: &str) -> Result<(), String> {
        let index = self
            .account_index(login)
            .ok_or_else(|| format!("no account '{login}'"))?;
        let fresh = self.rng.token(40);
        let now = self.last_now;
        let account = &mut self.accounts[index];
        account.token = Some(fresh);
        account.record_changed_at = now;
        Ok(())
    }

    /// Bill of a new order: reserved until paid (the sandbox never marks bills paid).
    pub(super) fn bill(&mut self, login: &str, certificate_id: u64, cents: i64) {
        if let Some(i) = self.account_index(login) {
            self.accounts[i].bills.push(Bill {
                certificate_id,
                cents,
                void: false,
                delivered: false,
            });
        }
    }

    fn bill_mut(&mut self, login: &str, certificate_id: u64) -> Option<&mut Bill> {
        let i = self.account_index(login)?;
        self.accounts[i]
            .bills
            .iter_mut()
            .find(|b| b.certificate_id == certificate_id)
    }

    pub(super) fn bill_delivered(&mut self, login: &str, certificate_id: u64) {
        if let Some(b) = self.bill_mut(login, certificate_id) {
            b.delivered = true;
        }
    }

    pub(super) fn bill_void(&mut self, login: &str, certificate_id: u64) {
        if let Some(b) = self.bill_mut(login, certificate_id) {
            b.void = true;
        }
    }

    /// `paid`, `unpaid` or `not_payable` for a certificate's bill.
    pub(super) fn payment_status(&self, login: &str, certificate_id: u64) -> &'static str {
        let bill = self.account_index(login).and_then(|i| {
            self.accounts[i]
                .bills
                .iter()
                .find(|b| b.certificate_id == certificate_id)
        });
        match bill {
            Some(b) if !b.void => "unpaid",
            _ => "not_payable",
        }
    }
}
