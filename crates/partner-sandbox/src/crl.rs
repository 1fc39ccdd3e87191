//! The CA's certificate revocation lists: the serials revoked through the control API (with a
//! reason code and the time), one CRL per issuer value signed by that issuer's intermediate,
//! with `thisUpdate`/`nextUpdate` on the sandbox's clock, built on demand and kept in memory
//! until a revocation or the clock makes it old; and the faults a CRL can carry for tests. The
//! plain-HTTP listener serving them is `server/crl_listen.rs`.

use std::collections::BTreeMap;

use bytes::Bytes;
use rcgen::{
    CertificateRevocationListParams, Issuer, KeyIdMethod, KeyPair, RevocationReason,
    RevokedCertParams, SerialNumber,
};
use serde::{Deserialize, Serialize};
use time::{Duration, OffsetDateTime};

use crate::ca::{self, Authority};

/// How long a CRL is valid: `nextUpdate` is this long after `thisUpdate` (virtual time).
pub const CRL_VALIDITY: Duration = Duration::days(1);
/// A CRL older than this is replaced on the next fetch, as real CAs publish well before
/// `nextUpdate`.
pub const CRL_REFRESH: Duration = Duration::hours(12);
/// Size of the body the `oversized` fault serves unless told otherwise.
pub const OVERSIZED_DEFAULT_BYTES: usize = 11 * 1024 * 1024;
/// The largest body the `oversized` fault serves.
pub const OVERSIZED_MAX_BYTES: usize = 64 * 1024 * 1024;

/// What a CRL can be made to carry, for tests of the client's checks.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum CrlFault {
    /// Signed by a key that is not the issuer's (same issuer name).
    WrongKey,
    /// A body of `bytes` (default 11 MiB) instead of the CRL.
    Oversized,
    /// Correctly signed, but `nextUpdate` lies in the past.
    Stale,
    /// Bytes that are no CRL at all.
    Garbage,
    /// The first CRL built for the issuer, served again: an older CRL, correctly signed and
    /// still valid, replayed by a cache or a network path after the CA replaced it.
    Replay,
}

/// One revoked certificate.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Revocation {
    /// Upper-case hex.
    pub serial_hex: String,
    pub issuer: &'static str,
    pub certificate_id: u64,
    /// RFC 5280 reason name (`keyCompromise`, ...).
    pub reason: &'static str,
    #[serde(with = "crate::clock::serde_rfc3339")]
    pub revoked_at: OffsetDateTime,
}

/// RFC 5280 CRLReason names and codes (7 is unused).
const REASONS: [(&str, RevocationReason); 10] = [
    ("unspecified", RevocationReason::Unspecified),
    ("keyCompromise", RevocationReason::KeyCompromise),
    ("cACompromise", RevocationReason::CaCompromise),
    ("affiliationChanged", RevocationReason::AffiliationChanged),
    ("superseded", RevocationReason::Superseded),
    (
        "cessationOfOperation",
        RevocationReason::CessationOfOperation,
    ),
    ("certificateHold", RevocationReason::CertificateHold),
    ("removeFromCRL", RevocationReason::RemoveFromCrl),
    ("privilegeWithdrawn", RevocationReason::PrivilegeWithdrawn),
    ("aACompromise", RevocationReason::AaCompromise),
];

/// The reason for a name (case-insensitive) or a code; `None` when unknown.
pub fn parse_reason(text: &str) -> Option<&'static str> {
    let code = text.parse::<u8>().ok();
    REASONS
        .iter()
        .find(|(name, r)| name.eq_ignore_ascii_case(text) || code == Some(*r as u8))
        .map(|(name, _)| *name)
}

fn reason_value(name: &str) -> RevocationReason {
    REASONS
        .iter()
        .find(|(n, _)| *n == name)
        .map_or(RevocationReason::Unspecified, |(_, r)| *r)
}

/// The revocations, the CRLs built from them, the fault in force and the fetch counter.
#[derive(Default)]
pub(crate) struct Crls {
    revoked: Vec<Revocation>,
    fault: Option<(CrlFault, usize)>,
    /// Issuer value → (DER, thisUpdate, generation it was built at).
    built: BTreeMap<&'static str, (Bytes, OffsetDateTime, u64)>,
    /// Bumped by every change that must show in the CRLs.
    generation: u64,
    /// The last CRL number given.
    number: u64,
    /// Path → successful and failed fetches.
    fetches: BTreeMap<String, u64>,
    /// Issuer value → the first CRL built for it (what `Replay` serves).
    first: BTreeMap<&'static str, Bytes>,
    /// Where every CRL request is redirected (302), when set.
    redirect: Option<String>,
}

impl Crls {
    pub(crate) fn revoke(&mut self, r: Revocation) {
        if !self.revoked.iter().any(|x| x.serial_hex == r.serial_hex) {
            self.revoked.push(r);
            self.generation += 1;
        }
    }

    pub(crate) fn revoked(&self) -> &[Revocation] {
        &self.revoked
    }

    /// Sets (or with `None` clears) the fault every CRL carries; `bytes` sizes `oversized`.
    pub(crate) fn set_fault(&mut self, fault: Option<CrlFault>, bytes: Option<usize>) {
        let bytes = bytes
            .unwrap_or(OVERSIZED_DEFAULT_BYTES)
            .min(OVERSIZED_MAX_BYTES);
        self.fault = fault.map(|f| (f, bytes));
        self.generation += 1;
    }

    pub(crate) fn fault(&self) -> Option<CrlFault> {
        self.fault.map(|(f, _)| f)
    }

    pub(crate) fn fetches(&self) -> &BTreeMap<String, u64> {
        &self.fetches
    }

    /// Sets (or with `None` clears) the `Location` every CRL request is redirected to.
    pub(crate) fn set_redirect(&mut self, location: Option<String>) {
        self.redirect = location;
    }

    /// The redirect for a request of `path`, counting the fetch, when one is set.
    pub(crate) fn redirect(&mut self, path: &str) -> Option<String> {
        let location = self.redirect.clone()?;
        *self.fetches.entry(path.to_owned()).or_default() += 1;
        Some(location)
    }

    /// The body served for `path` (`/crl/{issuer}.crl`) at `now`, counting the fetch; `Err`
    /// is (status, message).
    pub(crate) fn serve(
        &mut self,
        path: &str,
        ca: &Authority,
        now: OffsetDateTime,
    ) -> Result<Bytes, (u16, String)> {
        *self.fetches.entry(path.to_owned()).or_default() += 1;
        let issuer = path
            .strip_prefix("/crl/")
            .and_then(|p| p.strip_suffix(".crl"))
            .and_then(|name| ca::ISSUERS.iter().find(|i| **i == name).copied())
            .ok_or_else(|| (404, format!("no CRL at {path}")))?;
        match self.fault {
            Some((CrlFault::Oversized, bytes)) => return Ok(Bytes::from(vec![0x30; bytes])),
            Some((CrlFault::Garbage, _)) => {
                return Ok(Bytes::from_static(
                    b"this is not a certificate revocation list\n",
                ));
            }
            Some((CrlFault::Replay, _)) => {
                if let Some(first) = self.first.get(issuer) {
                    return Ok(first.clone());
                }
            }
            _ => {}
        }
        if let Some((der, this_update, generation)) = self.built.get(issuer)
            && *generation == self.generation
            && now - *this_update < CRL_REFRESH
            && now >= *this_update
        {
            return Ok(der.clone());
        }
        let der = Bytes::from(self.build(issuer, ca, now).map_err(|e| (500, e))?);
        if self.fault.is_none() {
            self.first.entry(issuer).or_insert_with(|| der.clone());
        }
        self.built
            .insert(issuer, (der.clone(), now, self.generation));
        Ok(der)
    }

    fn build(
        &mut self,
        issuer: &'static str,
        ca: &Authority,
        now: OffsetDateTime,
    ) -> Result<Vec<u8>, String> {
        self.number += 1;
        let now = now.replace_nanosecond(0).map_err(|e| e.to_string())?;
        let (this_update, next_update) = match self.fault() {
            Some(CrlFault::Stale) => (now - CRL_VALIDITY * 2, now - CRL_VALIDITY),
            _ => (now, now + CRL_VALIDITY),
        };
        let revoked_certs = self
            .revoked
            .iter()
            .filter(|r| r.issuer == issuer)
            .map(|r| {
                Ok(RevokedCertParams {
                    serial_number: SerialNumber::from_slice(
                        &hex::decode(&r.serial_hex).map_err(|e| e.to_string())?,
                    ),
                    // Never after the list's own date (under a time scale the revocation is
                    // dated on the virtual clock, the list on the real one).
                    revocation_time: r
                        .revoked_at
                        .min(now)
                        .replace_nanosecond(0)
                        .map_err(|e| e.to_string())?,
                    reason_code: Some(reason_value(r.reason)),
                    invalidity_date: None,
                })
            })
            .collect::<Result<Vec<_>, String>>()?;
        let params = CertificateRevocationListParams {
            this_update,
            next_update,
            crl_number: SerialNumber::from(self.number),
            issuing_distribution_point: None,
            revoked_certs,
            key_identifier_method: KeyIdMethod::Sha256,
        };
        if self.fault() == Some(CrlFault::WrongKey) {
            return forged(ca, issuer, &params);
        }
        ca.sign_crl(issuer, &params).map_err(|e| e.to_string())
    }
}

/// The same CRL under the issuer's name (taken from its certificate), signed by a key of its
/// own.
fn forged(
    ca: &Authority,
    issuer: &str,
    params: &CertificateRevocationListParams,
) -> Result<Vec<u8>, String> {
    let key = KeyPair::generate_for(&rcgen::PKCS_ECDSA_P256_SHA256).map_err(|e| e.to_string())?;
    let der = ca.intermediate_der(issuer).map_err(|e| e.to_string())?;
    let issuer = Issuer::from_ca_cert_der(&der.into(), key).map_err(|e| e.to_string())?;
    Ok(params
        .signed_by(&issuer)
        .map_err(|e| e.to_string())?
        .der()
        .to_vec())
}

#[cfg(test)]
mod tests {
    use super::*;
    use x509_parser::prelude::FromDer;
    use x509_parser::revocation_list::CertificateRevocationList;

    fn at(unix: i64) -> OffsetDateTime {
        OffsetDateTime::from_unix_timestamp(unix).expect("time")
    }

    #[test]
    fn crl_lists_revoked_serials_and_is_signed_by_the_issuer() {
        let ca = Authority::generate().expect("ca");
        let mut crls = Crls::default();
        crls.revoke(Revocation {
            serial_hex: "0A1B".into(),
            issuer: "s-one",
            certificate_id: 7,
            reason: "keyCompromise",
            revoked_at: at(1_800_000_000),
        });
        let now = at(1_800_000_100);
        let der = crls.serve("/crl/s-one.crl", &ca, now).expect("crl");
        let (_, crl) = CertificateRevocationList::from_der(&der).expect("parse");
        let (_, issuer) =
            x509_parser::parse_x509_certificate(ca.intermediate_der("s-one").expect("int"))
                .expect("issuer");
        crl.verify_signature(issuer.public_key()).expect("signed");
        assert_eq!(crl.last_update().to_datetime(), now);
        assert_eq!(
            crl.next_update().map(|t| t.to_datetime()),
            Some(now + CRL_VALIDITY)
        );
        let serials: Vec<String> = crl
            .iter_revoked_certificates()
            .map(|r| hex::encode_upper(r.raw_serial()))
            .collect();
        assert_eq!(serials, ["0A1B"]);
        // Cached until a change; another issuer's CRL lists nothing.
        let again = crls.serve("/crl/s-one.crl", &ca, now).expect("crl");
        assert_eq!(again, der);
        let other = crls.serve("/crl/d-one.crl", &ca, now).expect("crl");
        let (_, other) = CertificateRevocationList::from_der(&other).expect("parse");
        assert_eq!(other.iter_revoked_certificates().count(), 0);
        assert_eq!(crls.fetches().get("/crl/s-one.crl"), Some(&2));
        assert!(crls.serve("/crl/nope.crl", &ca, now).is_err());
    }

    #[test]
    fn faults_break_the_crl_as_asked() {
        let ca = Authority::generate().expect("ca");
        let mut crls = Crls::default();
        let now = at(1_800_000_000);
        let (_, issuer) =
            x509_parser::parse_x509_certificate(ca.intermediate_der("c-one").expect("int"))
                .expect("issuer");
        crls.set_fault(Some(CrlFault::WrongKey), None);
        let der = crls.serve("/crl/c-one.crl", &ca, now).expect("crl");
        let (_, crl) = CertificateRevocationList::from_der(&der).expect("parse");
        assert_eq!(crl.issuer(), issuer.subject());
        assert!(crl.verify_signature(issuer.public_key()).is_err());
        crls.set_fault(Some(CrlFault::Stale), None);
        let der = crls.serve("/crl/c-one.crl", &ca, now).expect("crl");
        let (_, crl) = CertificateRevocationList::from_der(&der).expect("parse");
        assert!(crl.next_update().expect("next").to_datetime() < now);
        crls.set_fault(Some(CrlFault::Oversized), Some(1000));
        assert_eq!(
            crls.serve("/crl/c-one.crl", &ca, now).expect("big").len(),
            1000
        );
        crls.set_fault(Some(CrlFault::Garbage), None);
        let body = crls.serve("/crl/c-one.crl", &ca, now).expect("garbage");
        assert!(CertificateRevocationList::from_der(&body).is_err());
        crls.set_fault(None, None);
        let der = crls.serve("/crl/c-one.crl", &ca, now).expect("crl");
        let (_, crl) = CertificateRevocationList::from_der(&der).expect("parse");
        crl.verify_signature(issuer.public_key())
            .expect("signed again");
    }

    #[test]
    fn replay_serves_the_first_crl_and_a_redirect_counts_the_fetch() {
        let ca = Authority::generate().expect("ca");
        let mut crls = Crls::default();
        let now = at(1_800_000_000);
        let first = crls.serve("/crl/s-one.crl", &ca, now).expect("crl");
        crls.revoke(Revocation {
            serial_hex: "0A1B".into(),
            issuer: "s-one",
            certificate_id: 7,
            reason: "keyCompromise",
            revoked_at: now,
        });
        let second = crls.serve("/crl/s-one.crl", &ca, now).expect("crl");
        assert_ne!(first, second);
        crls.set_fault(Some(CrlFault::Replay), None);
        assert_eq!(crls.serve("/crl/s-one.crl", &ca, now).expect("crl"), first);
        crls.set_fault(None, None);
        let again = crls.serve("/crl/s-one.crl", &ca, now).expect("crl");
        assert_ne!(again, first, "built anew, listing the revocation");
        crls.set_redirect(Some("http://127.0.0.2:9/x.crl".into()));
        assert_eq!(
            crls.redirect("/crl/s-one.crl").as_deref(),
            Some("http://127.0.0.2:9/x.crl")
        );
        assert_eq!(crls.fetches().get("/crl/s-one.crl"), Some(&5));
        crls.set_redirect(None);
        assert_eq!(crls.redirect("/crl/s-one.crl"), None);
    }

    #[test]
    fn reasons_by_name_or_code() {
        assert_eq!(parse_reason("keycompromise"), Some("keyCompromise"));
        assert_eq!(parse_reason("1"), Some("keyCompromise"));
        assert_eq!(parse_reason("4"), Some("superseded"));
        assert_eq!(parse_reason("7"), None);
        assert_eq!(parse_reason("bogus"), None);
    }
}
