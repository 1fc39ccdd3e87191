//! The pure part: a CRL's bytes checked against the certificate that should have issued it
//! and the time now — DER, one CRL and nothing after it, the issuer's name, its signature
//! with the issuer's key (which must be allowed to sign CRLs), `thisUpdate` not in the future,
//! a `nextUpdate` not passed, no delta CRL, no critical extension it does not understand — and
//! then whether a serial is on it. No I/O, no clock.

use std::collections::HashMap;

use time::OffsetDateTime;
use x509_parser::certificate::X509Certificate;
use x509_parser::extensions::ParsedExtension;
use x509_parser::oid_registry::{
    OID_X509_EXT_CRL_NUMBER, OID_X509_EXT_DELTA_CRL_INDICATOR,
    OID_X509_EXT_ISSUER_DISTRIBUTION_POINT,
};
use x509_parser::prelude::FromDer;
use x509_parser::revocation_list::CertificateRevocationList;

use crate::clock::rfc3339;

/// How far a CRL's `thisUpdate` may lie ahead of the local clock (clock skew).
pub(super) const FUTURE_SKEW: time::Duration = time::Duration::hours(1);

/// Why a CRL is not used.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum CrlError {
    #[error("not a DER certificate revocation list: {0}")]
    Parse(String),
    #[error("{0} bytes after the end of the CRL")]
    Trailing(usize),
    #[error("the CRL is issued by '{crl}', not by the certificate's issuer '{issuer}'")]
    IssuerName { crl: String, issuer: String },
    #[error("the issuer certificate may not sign CRLs (its key usage lacks cRLSign)")]
    NotCrlSigner,
    #[error("the CRL's signature does not verify with the issuer's key: {0}")]
    Signature(String),
    #[error("the CRL is stale: its nextUpdate {0} has passed")]
    Stale(String),
    #[error("the CRL has no nextUpdate: its freshness cannot be judged")]
    NoNextUpdate,
    #[error("the CRL's thisUpdate {0} lies in the future")]
    Future(String),
    #[error("a delta CRL cannot stand alone")]
    Delta,
    #[error("the CRL's issuing distribution point excludes end-entity certificates")]
    Scope,
    #[error("the CRL has an unknown critical extension {0}")]
    CriticalExtension(String),
    #[error("the issuer certificate cannot be read: {0}")]
    Issuer(String),
}

/// One entry of a CRL.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Entry {
    pub revoked_at: OffsetDateTime,
    /// RFC 5280 reason name, when the entry carries one.
    pub reason: Option<String>,
}

/// A CRL that passed every check.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Crl {
    pub this_update: OffsetDateTime,
    pub next_update: OffsetDateTime,
    /// The `cRLNumber` (big-endian, leading zeros removed), when the CRL carries one.
    pub number: Option<Vec<u8>>,
    /// Serial (big-endian, leading zeros removed) → entry.
    entries: HashMap<Vec<u8>, Entry>,
}

impl Crl {
    /// The entry of a serial (raw bytes as in the certificate), if the CRL lists it.
    pub fn entry(&self, raw_serial: &[u8]) -> Option<&Entry> {
        self.entries.get(trim(raw_serial))
    }

    /// How many serials it lists.
    pub fn len(&self) -> usize {
        self.entries.len()
    }

    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    /// Whether this CRL is older than `kept` (the same issuer's): an earlier `thisUpdate`, or
    /// a smaller `cRLNumber` when both carry one. A CRL's sequence never goes back, so an
    /// older one that is still valid is a replay (a cache or a network path serving what the
    /// CA has since replaced), never a reason to forget a newer one.
    pub fn is_older_than(&self, kept: &Crl) -> bool {
        let smaller = match (&self.number, &kept.number) {
            (Some(a), Some(b)) => (a.len(), a.as_slice()) < (b.len(), b.as_slice()),
            _ => false,
        };
        self.this_update < kept.this_update || smaller
    }

    /// `cRLNumber N, thisUpdate T`, for messages.
    pub fn describe(&self) -> String {
        let number = self
            .number
            .as_deref()
            .map_or_else(|| "none".to_owned(), hex::encode_upper);
        format!(
            "cRLNumber {number}, thisUpdate {}",
            rfc3339(self.this_update)
        )
    }
}

/// RFC 5280 CRLReason name of a code.
pub(crate) fn reason_name(code: u8) -> String {
    const NAMES: [&str; 11] = [
        "unspecified",
        "keyCompromise",
        "cACompromise",
        "affiliationChanged",
        "superseded",
        "cessationOfOperation",
        "certificateHold",
        "",
        "removeFromCRL",
        "privilegeWithdrawn",
        "aACompromise",
    ];
    match NAMES.get(usize::from(code)) {
        Some(name) if !name.is_empty() => (*name).to_owned(),
        _ => format!("reason code {code}"),
    }
}

fn trim(serial: &[u8]) -> &[u8] {
    let start = serial.iter().position(|b| *b != 0).unwrap_or(serial.len());
    &serial[start..]
}

/// Checks `der` as the CRL of `issuer_der`'s certificate at `now`.
pub fn check(der: &[u8], issuer_der: &[u8], now: OffsetDateTime) -> Result<Crl, CrlError> {
    let (rest, issuer) =
        X509Certificate::from_der(issuer_der).map_err(|e| CrlError::Issuer(e.to_string()))?;
    if !rest.is_empty() {
        return Err(CrlError::Issuer(format!("{} bytes after it", rest.len())));
    }
    let (rest, crl) =
        CertificateRevocationList::from_der(der).map_err(|e| CrlError::Parse(e.to_string()))?;
    if !rest.is_empty() {
        return Err(CrlError::Trailing(rest.len()));
    }
    if crl.issuer().as_raw() != issuer.subject().as_raw() {
        return Err(CrlError::IssuerName {
            crl: crl.issuer().to_string(),
            issuer: issuer.subject().to_string(),
        });
    }
    if let Ok(Some(ku)) = issuer.key_usage()
        && !ku.value.crl_sign()
    {
        return Err(CrlError::NotCrlSigner);
    }
    crl.verify_signature(issuer.public_key())
        .map_err(|e| CrlError::Signature(e.to_string()))?;
    let this_update = crl.last_update().to_datetime();
    let next_update = crl
        .next_update()
        .map(|t| t.to_datetime())
        .ok_or(CrlError::NoNextUpdate)?;
    if this_update > now + FUTURE_SKEW {
        return Err(CrlError::Future(rfc3339(this_update)));
    }
    if next_update <= now {
        return Err(CrlError::Stale(rfc3339(next_update)));
    }
    extensions(&crl)?;
    let mut entries = HashMap::new();
    for revoked in crl.iter_revoked_certificates() {
        let code = revoked.reason_code().map(|(_, code)| code.0);
        // removeFromCRL belongs to delta CRLs only: such an entry revokes nothing.
        if code == Some(8) {
            continue;
        }
        let reason = code.map(reason_name);
        for ext in revoked.extensions() {
            if ext.critical
                && matches!(
                    ext.parsed_extension(),
                    ParsedExtension::UnsupportedExtension { .. }
                )
            {
                return Err(CrlError::CriticalExtension(ext.oid.to_id_string()));
            }
        }
        entries.insert(
            trim(revoked.raw_serial()).to_vec(),
            Entry {
                revoked_at: revoked.revocation_date.to_datetime(),
                reason,
            },
        );
    }
    let number = crl.crl_number().map(|n| trim(&n.to_bytes_be()).to_vec());
    Ok(Crl {
        this_update,
        next_update,
        number,
        entries,
    })
}

/// The CRL's own extensions: no delta CRL, a scope that covers end-entity certificates, no
/// other critical extension.
fn extensions(crl: &CertificateRevocationList<'_>) -> Result<(), CrlError> {
    for ext in crl.extensions() {
        if ext.oid == OID_X509_EXT_DELTA_CRL_INDICATOR {
            return Err(CrlError::Delta);
        }
        if ext.oid == OID_X509_EXT_ISSUER_DISTRIBUTION_POINT {
            if let ParsedExtension::IssuingDistributionPoint(idp) = ext.parsed_extension()
                && (idp.only_contains_ca_certs
                    || idp.only_contains_attribute_certs
                    || idp.only_some_reasons.is_some())
            {
                return Err(CrlError::Scope);
            }
            continue;
        }
        if ext.critical && ext.oid != OID_X509_EXT_CRL_NUMBER {
            return Err(CrlError::CriticalExtension(ext.oid.to_id_string()));
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests;
