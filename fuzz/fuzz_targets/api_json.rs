//! Decoding of every Partner API answer model of `src/api/types/` from arbitrary bytes (what
//! a compromised or broken API could send), including the `X-Pagination` header and the error
//! body, followed by the checks the agent applies to the decoded fields (CSR of the details
//! call, `dcv_content` for the validation file, CSR hashes of the DCV status, API dates).
//! Must never panic; a decoded value must re-serialize where the model is serializable (the
//! `--json` outputs print them). Also the balance figures the agent keeps in
//! `state_dir/money.json`, read back for the metrics.
#![no_main]

use cert_agent::testing::api::{
    ActionResult, Balance, Certificate, CertificateDetails, CertificateStatus, Country, DcvEmails,
    DcvStatus, ErrorBody, OrderResponse, Pagination, Product, Prolongation, ServerSoftware,
    SignInResponse, parse_api_date,
};
use cert_agent::testing::dcv::content::check_api_hashes;
use cert_agent::testing::crypto::{CsrHashes, CsrInfo};
use cert_agent::testing::dcv::ValidationFile;
use libfuzzer_sys::fuzz_target;

fn decode<T: serde::de::DeserializeOwned>(data: &[u8]) -> Option<T> {
    serde_json::from_slice::<T>(data).ok()
}

/// Decodes and, when that works, re-serializes.
fn round<T: serde::de::DeserializeOwned + serde::Serialize>(data: &[u8]) -> Option<T> {
    let v = decode::<T>(data)?;
    serde_json::to_vec(&v).expect("a decoded answer re-serializes");
    Some(v)
}

fn dates(texts: &[&Option<String>]) {
    for t in texts.iter().copied().flatten() {
        let _ = parse_api_date(t);
    }
}

fuzz_target!(|data: &[u8]| {
    // The hashes of "our" CSR: any fixed value works, the API's fields are checked against it.
    let ours = CsrHashes::of_der(b"cert-agent fuzz");

    let _ = decode::<SignInResponse>(data);
    let _ = round::<cert_agent::testing::monitor::money::Snapshot>(data);
    let _ = round::<Vec<Product>>(data);
    let _ = round::<OrderResponse>(data);
    let _ = round::<CertificateStatus>(data);
    if let Some(list) = round::<Vec<Certificate>>(data) {
        for c in &list {
            if let Some(content) = &c.dcv_content {
                let _ = ValidationFile::for_csr(&ours, content);
            }
        }
    }
    if let Ok(text) = std::str::from_utf8(data) {
        // The list call's `X-Pagination` header.
        let _ = serde_json::from_str::<Pagination>(text).map(|p| serde_json::to_vec(&p));
        let _ = parse_api_date(text);
    }
    let _ = ErrorBody::decode(data);
    if let Some(d) = round::<CertificateDetails>(data) {
        let _ = CsrInfo::from_pem(d.csr.as_bytes());
        if let Some(content) = &d.dcv_content {
            let _ = ValidationFile::for_csr(&ours, content);
        }
        let _ = d.additional_domain_list();
        dates(&[
            &d.valid_from,
            &d.valid_to,
            &d.subscription_valid_from,
            &d.subscription_valid_to,
        ]);
    }
    let _ = round::<DcvEmails>(data);
    if let Some(s) = round::<DcvStatus>(data) {
        let _ = s.all_valid();
        for d in s.domains.values() {
            if let Some(h) = &d.hashes {
                let _ = check_api_hashes(&ours, h.md5.as_deref(), h.sha1.as_deref());
            }
        }
    }
    let _ = round::<ActionResult>(data);
    let _ = round::<Balance>(data);
    let _ = round::<Prolongation>(data);
    let _ = round::<Vec<Country>>(data);
    let _ = round::<Vec<ServerSoftware>>(data);
});
