//! What `status` adds to a certificate's row and under its table from local state: what the
//! CRL last said of the installed certificate, and the balance against the billed renewals of
//! the next 30 days as `state_dir/money.json` last kept them.

use std::cmp::Ordering;

use serde::Serialize;
use time::OffsetDateTime;

use crate::clock::short_time;
use crate::store::{CertRecord, RevocationSeen};
use crate::values::Decimal;

use super::super::money::{Snapshot, WARNING_DAYS};

/// What the CRL last said of the installed certificate.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub(crate) struct RevocationView {
    /// `good`, `revoked`, `unknown` (the CRL was refused: revocation unknown), `no_crl` (the
    /// certificate names no CRL) or `not_checked` (no run read its CRL yet, or `[revocation]
    /// check = false`).
    pub state: String,
    /// When the CRL says it was revoked.
    #[serde(
        skip_serializing_if = "Option::is_none",
        with = "time::serde::rfc3339::option"
    )]
    pub revoked_at: Option<OffsetDateTime>,
    /// The CRL's reason code, when it gives one.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
    /// The CRL read or tried.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub url: Option<String>,
    /// In words: what was found, why the CRL was refused, or why nothing was read.
    pub detail: String,
}

impl RevocationView {
    /// The view of `rec`'s installed certificate (`None`: nothing installed); `checking`:
    /// `[revocation] check`.
    pub(crate) fn of(rec: &CertRecord, checking: bool) -> Option<Self> {
        let installed = rec.installed.as_ref()?;
        let seen = rec
            .revocation
            .as_ref()
            .filter(|s| crate::crypto::same_serial_hex(&s.serial, &installed.serial));
        Some(match seen {
            Some(s) => Self::seen(s),
            None => Self {
                state: "not_checked".into(),
                revoked_at: None,
                reason: None,
                url: None,
                detail: if checking {
                    "revocation not checked yet: the next run reads the certificate's CRL".into()
                } else {
                    "revocation not checked: [revocation] check = false".into()
                },
            },
        })
    }

    fn seen(s: &RevocationSeen) -> Self {
        Self {
            state: s.state.clone(),
            revoked_at: s.revoked_at.filter(|_| s.state == "revoked"),
            reason: s.reason.clone().filter(|_| s.state == "revoked"),
            url: s.url.clone(),
            detail: s.detail.clone(),
        }
    }

    /// The table's `CRL` column: `good`, `REVOKED 2027-03-02 keyCompromise`, `UNUSABLE`,
    /// `no CRL` or `not checked`.
    pub(crate) fn column(&self) -> String {
        match self.state.as_str() {
            "good" => "good".into(),
            "revoked" => {
                let mut text = "REVOKED".to_owned();
                if let Some(t) = self.revoked_at {
                    text.push_str(&format!(" {}", t.date()));
                }
                if let Some(r) = &self.reason {
                    text.push_str(&format!(" {r}"));
                }
                text
            }
            "unknown" => "UNUSABLE".into(),
            "no_crl" => "no CRL".into(),
            _ => "not checked".into(),
        }
    }

    /// Whether the operator needs the line under the table (revoked, or the CRL refused).
    pub(crate) fn needs_attention(&self) -> bool {
        matches!(self.state.as_str(), "revoked" | "unknown")
    }
}

/// The balance against the billed renewals of the 30 days after it was read, as
/// `state_dir/money.json` keeps them (`cert-agent forecast`, `check`, a run that talked to the
/// API write it).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub(crate) struct MoneyView {
    /// When the balance was read (the 30 days count from then).
    #[serde(with = "time::serde::rfc3339")]
    pub read_at: OffsetDateTime,
    /// The account currency, when the balance was read.
    pub currency: Option<String>,
    /// The available balance (usable for new bills).
    pub available: Option<Decimal>,
    /// Catalogue price of the billed orders and renewals due in the 30 days.
    pub spend_30d: Decimal,
    /// The available balance covers `spend_30d` (`null` when the balance is unknown).
    pub covered: Option<bool>,
}

impl MoneyView {
    pub(crate) fn of(s: &Snapshot) -> Self {
        let available = s.available.as_ref().map(|a| a.sum.clone());
        let covered = available
            .as_ref()
            .map(|a| a.cmp_value(&s.spend_30d) != Ordering::Less);
        Self {
            read_at: s.at,
            currency: s.available.as_ref().map(|a| a.currency.clone()),
            available,
            spend_30d: s.spend_30d.clone(),
            covered,
        }
    }

    /// The line under the table.
    pub(crate) fn describe(&self) -> String {
        let currency = self
            .currency
            .as_deref()
            .map_or(String::new(), |c| format!(" {c}"));
        let balance = match &self.available {
            Some(a) => format!("{a}{currency} available"),
            None => "unknown".to_owned(),
        };
        let verdict = match self.covered {
            Some(true) => "covered",
            Some(false) => "NOT covered: add funds before they fall due (cert-agent forecast)",
            None => "coverage unknown",
        };
        format!(
            "balance: {balance} (read {}); billed renewals of the next {WARNING_DAYS} days: {}{currency}, {verdict}",
            short_time(self.read_at),
            self.spend_30d
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::api::Amount;
    use time::macros::datetime;

    fn dec(s: &str) -> Decimal {
        s.parse().unwrap()
    }

    #[test]
    fn the_money_line_says_whether_the_balance_covers_the_next_30_days() {
        let snap = |available: Option<&str>, spend: &str| Snapshot {
            at: datetime!(2027-03-02 04:05 UTC),
            available: available.map(|a| Amount {
                sum: dec(a),
                currency: "USD".into(),
            }),
            spend_30d: dec(spend),
            by_certificate: Default::default(),
        };
        // rows: (available, spend, covered, the line's end)
        let rows = [
            (Some("8.80"), "8.80", Some(true), "8.80 USD, covered"),
            (Some("8.79"), "8.80", Some(false), "8.80 USD, NOT covered"),
            (Some("100"), "0.00", Some(true), "0.00 USD, covered"),
            (None, "8.80", None, "8.80, coverage unknown"),
        ];
        for (available, spend, covered, end) in rows {
            let v = MoneyView::of(&snap(available, spend));
            assert_eq!(v.covered, covered, "{available:?} {spend}");
            let line = v.describe();
            assert!(line.starts_with("balance: "), "{line}");
            assert!(line.contains("(read 2027-03-02 04:05 UTC)"), "{line}");
            assert!(line.contains(end), "{line}");
        }
    }

    #[test]
    fn the_crl_column_names_each_state() {
        let mut rec = CertRecord {
            name: "www".into(),
            ..CertRecord::default()
        };
        assert_eq!(RevocationView::of(&rec, true), None, "nothing installed");
        let t = datetime!(2027-01-01 00:00 UTC);
        rec.installed = Some(crate::store::Installed {
            serial: "0A".into(),
            not_before: t,
            not_after: t,
            certificate_id: 7,
            files: vec![],
            installed_at: t,
            leaf_file: None,
            leaf_stamp: None,
        });
        let seen = |serial: &str, state: &str| RevocationSeen {
            serial: serial.into(),
            state: state.into(),
            url: Some("http://crl.test/ca.crl".into()),
            detail: format!("{state} in words"),
            revoked_at: Some(datetime!(2027-03-02 04:05 UTC)),
            reason: Some("keyCompromise".into()),
        };
        // rows: (what the CRL said, checking, column, a line under the table)
        let rows = [
            (None, true, "not checked", false),
            (None, false, "not checked", false),
            (Some(seen("0a", "good")), true, "good", false),
            (
                Some(seen("0A", "revoked")),
                true,
                "REVOKED 2027-03-02 keyCompromise",
                true,
            ),
            (Some(seen("0A", "unknown")), true, "UNUSABLE", true),
            (Some(seen("0A", "no_crl")), true, "no CRL", false),
            // Said of the certificate installed before: not this one's.
            (Some(seen("0B", "revoked")), true, "not checked", false),
        ];
        for (i, (said, checking, column, attention)) in rows.into_iter().enumerate() {
            rec.revocation = said;
            let v = RevocationView::of(&rec, checking).unwrap();
            assert_eq!(v.column(), column, "row {i}");
            assert_eq!(v.needs_attention(), attention, "row {i}");
        }
        rec.revocation = Some(seen("0A", "good"));
        let good = RevocationView::of(&rec, true).unwrap();
        assert_eq!((good.revoked_at, good.reason), (None, None));
    }
}
