//! The CRL checks against CRLs made with rcgen: a good one, a forged one, stale, from the
//! future, issued by another name, garbage and trailing bytes.

use rcgen::{
    BasicConstraints, CertificateParams, CertificateRevocationListParams, DistinguishedName,
    DnType, IsCa, Issuer, KeyIdMethod, KeyPair, KeyUsagePurpose, RevocationReason,
    RevokedCertParams, SerialNumber,
};
use time::{Duration, OffsetDateTime};

use super::*;

fn now() -> OffsetDateTime {
    OffsetDateTime::from_unix_timestamp(1_800_000_000).unwrap()
}

fn ca(name: &str, usages: Vec<KeyUsagePurpose>) -> (Vec<u8>, Issuer<'static, KeyPair>) {
    let key = KeyPair::generate().unwrap();
    let mut params = CertificateParams::default();
    let mut dn = DistinguishedName::new();
    dn.push(DnType::CommonName, name);
    params.distinguished_name = dn;
    params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    params.key_usages = usages;
    let cert = params.self_signed(&key).unwrap();
    (cert.der().to_vec(), Issuer::new(params, key))
}

fn crl_params(this: OffsetDateTime, next: OffsetDateTime) -> CertificateRevocationListParams {
    CertificateRevocationListParams {
        this_update: this,
        next_update: next,
        crl_number: SerialNumber::from(1u64),
        issuing_distribution_point: None,
        revoked_certs: vec![RevokedCertParams {
            serial_number: SerialNumber::from_slice(&[0x00, 0x0A, 0x1B]),
            revocation_time: now() - Duration::hours(2),
            reason_code: Some(RevocationReason::KeyCompromise),
            invalidity_date: None,
        }],
        key_identifier_method: KeyIdMethod::Sha256,
    }
}

fn signing() -> Vec<KeyUsagePurpose> {
    vec![KeyUsagePurpose::KeyCertSign, KeyUsagePurpose::CrlSign]
}

#[test]
fn a_good_crl_lists_its_serials() {
    let (der, issuer) = ca("CA", signing());
    let crl = crl_params(now() - Duration::hours(1), now() + Duration::days(1))
        .signed_by(&issuer)
        .unwrap();
    let checked = check(crl.der(), &der, now()).unwrap();
    assert_eq!(checked.len(), 1);
    let entry = checked.entry(&[0x0A, 0x1B]).expect("listed");
    assert_eq!(entry.reason.as_deref(), Some("keyCompromise"));
    assert_eq!(entry.revoked_at, now() - Duration::hours(2));
    assert!(
        checked.entry(&[0x00, 0x0A, 0x1B]).is_some(),
        "leading zeros"
    );
    assert!(checked.entry(&[0x0A, 0x1C]).is_none());
    assert_eq!(checked.next_update, now() + Duration::days(1));
}

#[test]
fn refused_crls_say_why() {
    let (der, issuer) = ca("CA", signing());
    let good = crl_params(now() - Duration::hours(1), now() + Duration::days(1));

    // Same name, another key: a forgery.
    let (_, forger) = ca("CA", signing());
    let forged = good.signed_by(&forger).unwrap();
    assert!(matches!(
        check(forged.der(), &der, now()),
        Err(CrlError::Signature(_))
    ));

    // Another issuer's name.
    let (_, other) = ca("Other CA", signing());
    let other = good.signed_by(&other).unwrap();
    assert!(matches!(
        check(other.der(), &der, now()),
        Err(CrlError::IssuerName { .. })
    ));

    let stale = crl_params(now() - Duration::days(2), now() - Duration::days(1))
        .signed_by(&issuer)
        .unwrap();
    assert!(matches!(
        check(stale.der(), &der, now()),
        Err(CrlError::Stale(_))
    ));

    let future = crl_params(now() + Duration::days(1), now() + Duration::days(2))
        .signed_by(&issuer)
        .unwrap();
    assert!(matches!(
        check(future.der(), &der, now()),
        Err(CrlError::Future(_))
    ));

    let signed = good.signed_by(&issuer).unwrap();
    let mut trailing = signed.der().to_vec();
    trailing.push(0);
    assert!(matches!(
        check(&trailing, &der, now()),
        Err(CrlError::Trailing(1))
    ));
    for garbage in [&b""[..], b"this is not a CRL", &[0x30, 0x82, 0xff, 0xff]] {
        assert!(matches!(
            check(garbage, &der, now()),
            Err(CrlError::Parse(_))
        ));
    }
    // A flipped bit inside the signed part.
    let mut flipped = signed.der().to_vec();
    let at = flipped.len() / 2;
    flipped[at] ^= 0x01;
    assert!(check(&flipped, &der, now()).is_err());
    assert!(matches!(
        check(signed.der(), b"garbage", now()),
        Err(CrlError::Issuer(_))
    ));
}

#[test]
fn an_issuer_that_may_not_sign_crls_is_refused() {
    let (der, issuer) = ca(
        "CA",
        vec![
            KeyUsagePurpose::KeyCertSign,
            KeyUsagePurpose::DigitalSignature,
        ],
    );
    // rcgen refuses to sign for such an issuer; sign under another issuer value of the same
    // name and key but no key usages.
    let params = crl_params(now() - Duration::hours(1), now() + Duration::days(1));
    assert!(params.signed_by(&issuer).is_err());
    let mut open = CertificateParams::default();
    let mut dn = DistinguishedName::new();
    dn.push(DnType::CommonName, "CA");
    open.distinguished_name = dn;
    let key = KeyPair::from_pem(&issuer.key().serialize_pem()).unwrap();
    let crl = params.signed_by(&Issuer::new(open, key)).unwrap();
    assert!(matches!(
        check(crl.der(), &der, now()),
        Err(CrlError::NotCrlSigner)
    ));
}

#[test]
fn reason_names_follow_rfc_5280() {
    assert_eq!(reason_name(1), "keyCompromise");
    assert_eq!(reason_name(6), "certificateHold");
    assert_eq!(reason_name(7), "reason code 7");
    assert_eq!(reason_name(200), "reason code 200");
}

#[test]
fn a_crl_is_older_by_its_this_update_or_its_number() {
    let (der, issuer) = ca("CA", signing());
    let signed = |this: OffsetDateTime, number: u64| {
        let mut p = crl_params(this, now() + Duration::days(1));
        p.crl_number = SerialNumber::from(number);
        check(p.signed_by(&issuer).unwrap().der(), &der, now()).unwrap()
    };
    let kept = signed(now() - Duration::hours(1), 0x0100);
    assert_eq!(kept.number.as_deref(), Some(&[0x01, 0x00][..]));
    assert!(signed(now() - Duration::hours(2), 0x0200).is_older_than(&kept));
    assert!(signed(now() - Duration::hours(1), 0xFF).is_older_than(&kept));
    assert!(!signed(now() - Duration::hours(1), 0x0100).is_older_than(&kept));
    assert!(!signed(now(), 0x0101).is_older_than(&kept));
    assert!(
        kept.describe().contains("cRLNumber 0100"),
        "{}",
        kept.describe()
    );
}
