//! Decoding of every Partner API answer model from arbitrary bytes (what a compromised or
//! broken API could send). Must never panic; a decoded value must re-serialize where the
//! model is serializable.
#![no_main]

use cert_agent::api::{
    ActionResult, Balance, Certificate, CertificateDetails, CertificateStatus, Country, DcvEmails,
    DcvStatus, OrderResponse, Product, Prolongation, ServerSoftware, SignInResponse,
};
use libfuzzer_sys::fuzz_target;

fn decode<T: serde::de::DeserializeOwned>(data: &[u8]) -> Option<T> {
    serde_json::from_slice::<T>(data).ok()
}

fuzz_target!(|data: &[u8]| {
    let _ = decode::<SignInResponse>(data);
    let _ = decode::<Vec<Product>>(data);
    let _ = decode::<OrderResponse>(data);
    let _ = decode::<CertificateStatus>(data);
    let _ = decode::<Vec<Certificate>>(data);
    let _ = cert_agent::api::ErrorBody::decode(data);
    let _ = decode::<CertificateDetails>(data);
    let _ = decode::<DcvEmails>(data);
    let _ = decode::<DcvStatus>(data);
    if let Some(a) = decode::<ActionResult>(data) {
        let _ = serde_json::to_vec(&a).expect("re-serializes");
    }
    let _ = decode::<Balance>(data);
    let _ = decode::<Prolongation>(data);
    let _ = decode::<Vec<Country>>(data);
    let _ = decode::<Vec<ServerSoftware>>(data);
});
