//! Wire models of the session and the account: the sign-in answer, the answer of actions
//! (change DCV, resend DCV, reissue, cancel) and the balance.

use serde::{Deserialize, Serialize};

use crate::values::{Decimal, Secret};

/// SignInResponse (section "SignInResponse"). Account details are ignored.
#[derive(Debug, Clone, Deserialize)]
pub struct SignInResponse {
    /// User ID (used by the alternate list path and the software list).
    pub id: u64,
    /// Value for the `X-AUTH-TOKEN` header.
    pub auth_token: Secret,
}

/// ActionResult (section "ActionResult") of change DCV, resend DCV, reissue and cancel.
///
/// A call returns it only when `success` is true; `success: false` becomes
/// [`ApiError::Refused`](super::ApiError::Refused), and a missing or non-boolean `success` is a
/// decode error.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ActionResult {
    pub success: bool,
    /// E.g. `DCV email has been changed and resent`.
    pub result: Option<String>,
}

/// One member of the balance (`sum` rounded to 2 decimals, `currency` ISO 4217).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Amount {
    pub sum: Decimal,
    pub currency: String,
}

/// Balance (section "Balance"). All amounts include VAT where it applies.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Balance {
    /// Payments received minus delivered services.
    pub balance: Amount,
    /// Unpaid bills of certificates being issued or issued.
    pub reserved: Amount,
    /// Balance minus reserved (shown in the customer portal).
    pub common: Amount,
    /// Paid prepayment bills not yet assigned to a service.
    pub prepayment: Amount,
    /// Payments not assigned to any bill; usable for new bills.
    pub available: Amount,
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use std::cmp::Ordering;

    use super::*;
    use crate::api::types::tests::de;

    // Section "SignInResponse": id, auth_token, plus account details that are ignored.
    #[test]
    fn sign_in_response() {
        let r: SignInResponse = de(json!({
            "id": 7, "auth_token": "tok-123", "language": "en", "email": "a@b.c",
            "roles": ["partner"]
        }));
        assert_eq!(r.id, 7);
        assert_eq!(r.auth_token.expose(), "tok-123");
        assert!(!format!("{r:?}").contains("tok-123"));
    }

    // Section "ActionResult".
    #[test]
    fn action_result() {
        let a: ActionResult =
            de(json!({"success": true, "result": "The cancellation order has been sent"}));
        assert!(a.success);
        assert!(serde_json::from_value::<ActionResult>(json!({"result": "x"})).is_err());
        assert!(serde_json::from_value::<ActionResult>(json!({"success": "true"})).is_err());
    }

    // Section "Balance": five members with sum (number) and currency.
    #[test]
    fn balance() {
        let b: Balance = de(json!({
            "balance": {"sum": 120.5, "currency": "EUR"},
            "reserved": {"sum": 20.0, "currency": "EUR"},
            "common": {"sum": 100.5, "currency": "EUR"},
            "prepayment": {"sum": 0.0, "currency": "EUR"},
            "available": {"sum": 99.99, "currency": "EUR"}
        }));
        assert_eq!(b.balance.sum.as_str(), "120.5");
        assert_eq!(b.available.sum.as_str(), "99.99");
        assert_eq!(
            b.prepayment.sum.cmp_value(&Decimal::parse("0").unwrap()),
            Ordering::Equal
        );
    }
}
