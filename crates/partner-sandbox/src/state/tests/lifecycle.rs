//! Full life cycle per family driven by the validator's seam (`due_dcv_checks` /
//! `record_dcv_fetch`), issuance, validity, expiry, instant mode, downloads.

use std::io::Read;

use serde_json::{Value, json};

use super::*;
use crate::state::StateConfig;

fn zip_names(data: &[u8]) -> Vec<String> {
    let mut zip = zip::ZipArchive::new(std::io::Cursor::new(data)).expect("zip");
    (0..zip.len())
        .map(|i| zip.by_index(i).expect("entry").name().to_string())
        .collect()
}

fn zip_entry(data: &[u8], name: &str) -> String {
    let mut zip = zip::ZipArchive::new(std::io::Cursor::new(data)).expect("zip");
    let mut out = String::new();
    zip.by_name(name)
        .expect(name)
        .read_to_string(&mut out)
        .expect("read");
    out
}

fn bytes_of(resp: &ApiResponse) -> (String, Option<String>, Vec<u8>) {
    match &resp.body {
        ResponseBody::Bytes {
            content_type,
            filename,
            data,
        } => (content_type.clone(), filename.clone(), data.to_vec()),
        other => panic!("expected bytes, got {other:?} ({})", resp.status),
    }
}

#[test]
fn family_s_life_cycle_with_http_file_check() {
    let mut env = Env::new();
    let names = ["www.example.com", "shop.example.com"];
    let (pem, key) = csr(&names);
    let id = env.place(PARTNER, item(p::S_UCC, "www.example.com", &pem));
    assert_eq!(env.status(PARTNER, id), "new");
    assert_eq!(env.details(PARTNER, id)["external_number"], Value::Null);
    assert!(
        env.due_for(id).is_empty(),
        "no check before the CA has the order"
    );
    let dcv = env.get(PARTNER, &Env::cert_path(id, "dcv"));
    assert_eq!(dcv.status, 422);
    assert_eq!(json_of(&dcv)["certificate_status"], "new");

    env.advance(20);
    assert_eq!(env.status(PARTNER, id), "in_progress");
    let ext = env.details(PARTNER, id)["external_number"]
        .as_str()
        .unwrap()
        .to_string();
    let list = json_of(&env.get(PARTNER, "/api/v1/ssl_certificates"));
    assert_eq!(
        list[0]["external_number"].as_u64().unwrap().to_string(),
        ext,
        "integer in the list, string in details"
    );
    // First minute: family S does not report the method yet.
    let status = json_of(&env.get(PARTNER, &Env::cert_path(id, "dcv")));
    assert_eq!(status["dcv"]["www.example.com"]["dcv_method"], Value::Null);
    assert_eq!(status["dcv"]["www.example.com"]["api"], false);

    // The first check comes 30 s after the order reached the CA.
    env.advance(29);
    assert!(env.due_for(id).is_empty());
    env.advance(1);
    let checks = env.due_for(id);
    assert_eq!(checks.len(), 2, "one check per domain");
    let uv = env.unique_value(id);
    let (path, content) = expected_file(&pem, p::S_UCC, &uv);
    for c in &checks {
        assert_eq!(c.path, path);
        assert!(!c.https);
        assert!(names.contains(&c.domain.as_str()));
    }
    // A handed-out check is not handed out again while in flight.
    assert!(env.due_for(id).is_empty());
    // Wrong body for one domain, right one (CRLF, trailing newline) for the other.
    env.fetch(&checks[0], Ok(b"wrong".to_vec()));
    let crlf = format!("{}\r\n", content.replace('\n', "\r\n"));
    env.fetch(&checks[1], Ok(crlf.into_bytes()));
    assert_eq!(env.status(PARTNER, id), "in_progress");
    let rec = env.inspect(id);
    assert!(
        rec["domains"][0]["last_result"]
            .as_str()
            .unwrap()
            .contains("unexpected file content")
    );
    assert_eq!(rec["domains"][1]["valid"], true);
    // Retry 60 s later.
    env.advance(59);
    assert!(env.due_for(id).is_empty());
    env.advance(1);
    let checks = env.due_for(id);
    assert_eq!(checks.len(), 1);
    assert_eq!(
        checks[0].domain,
        env.inspect(id)["domains"][0]["domain"].as_str().unwrap()
    );
    let status = json_of(&env.get(PARTNER, &Env::cert_path(id, "dcv")));
    assert_eq!(
        status["dcv"]["www.example.com"]["dcv_method"],
        "HTTP_CSR_HASH"
    );
    assert_eq!(status["dcv"]["www.example.com"]["api"], true);
    env.fetch(&checks[0], Ok(content.clone().into_bytes()));

    // Family S issues as soon as the last domain passes.
    assert_eq!(env.status(PARTNER, id), "issued");
    let leaf = env.leaf(id);
    assert_eq!(leaf.spki, spki(&key));
    assert_eq!(leaf.names, names);
    assert_eq!(leaf.common_name, "www.example.com");
    assert_eq!(leaf.issuer_cn, crate::ca::intermediate_common_name("s-one"));
    let issued_at = env.now.unix_timestamp();
    assert_eq!(leaf.not_before, issued_at);
    assert_eq!(
        leaf.not_after,
        issued_at + 199 * 86_400,
        "at most max_cert_days"
    );
    let d = env.details(PARTNER, id);
    assert_eq!(d["status"]["certificate"], "issued");
    assert_eq!(
        d["status"]["client"],
        json!({ "status": "new", "description": "" })
    );
    assert!(d["valid_from"].is_string() && d["valid_to"].is_string());
    assert_eq!(d["subscription_duration"], Value::Null, "one-year order");
    assert!(d["subscription_valid_to"].is_string());
    assert_eq!(d["serial_number"], leaf.serial.as_str());
    // DCV status is for certificates in progress only.
    let resp = env.get(PARTNER, &Env::cert_path(id, "dcv"));
    assert_eq!(resp.status, 422);
    let body = json_of(&resp);
    assert_eq!(body["success"], false);
    assert_eq!(body["certificate_status"], "issued");
    assert_eq!(body["dcv_available"], false);
    assert!(body["error"].as_str().unwrap().contains("issued"));
    assert!(env.due_for(id).is_empty());
}

#[test]
fn family_d_life_cycle_treats_https_as_http() {
    let mut env = Env::new();
    let (pem, key) = csr(&["www.example.com"]);
    let id = env.place(
        PARTNER,
        json!({
            "nomenclature_id": p::D_DV, "days": 365, "ssl_server_software_id": 41,
            "dcv_type": "HTTPS_CSR_HASH", "domain_name": "www.example.com", "csr": pem,
            "country_name": "DE", "region_name": "Berlin", "city_name": "Berlin",
        }),
    );
    env.advance(50);
    let checks = env.due_for(id);
    assert_eq!(checks.len(), 1);
    assert!(!checks[0].https, "family D fetches over plain HTTP");
    let (_, content) = expected_file(&pem, p::D_DV, &env.unique_value(id));
    assert!(content.contains("\nca-d.sandbox.test\n"));
    env.fetch(&checks[0], Ok(content.into_bytes()));
    assert_eq!(env.status(PARTNER, id), "issued");
    let leaf = env.leaf(id);
    assert_eq!(leaf.spki, spki(&key));
    assert_eq!(leaf.issuer_cn, crate::ca::intermediate_common_name("d-one"));
}

#[test]
fn family_s_https_method_is_fetched_over_tls() {
    let mut env = Env::new();
    let (pem, _) = csr(&["www.example.com"]);
    let mut it = item(p::S2_DV, "www.example.com", &pem);
    it["dcv_type"] = json!("HTTPS_CSR_HASH");
    let id = env.place(PARTNER, it);
    env.advance(50);
    let checks = env.due_for(id);
    assert!(checks[0].https);
    let (_, content) = expected_file(&pem, p::S2_DV, &env.unique_value(id));
    env.fetch(&checks[0], Ok(content.into_bytes()));
    assert_eq!(env.status(PARTNER, id), "issued");
    assert_eq!(
        env.leaf(id).issuer_cn,
        crate::ca::intermediate_common_name("s-two")
    );
}

#[test]
fn family_c_changes_state_only_on_the_pickup_cycle() {
    let mut env = Env::new();
    env.advance(10);
    let (pem, _) = csr(&["www.example.com"]);
    let id = env.place(PARTNER, item(p::C_DV, "www.example.com", &pem));
    // Pickups every 300 s from the state's start: the next one is at t0 + 300.
    env.advance(279);
    assert_eq!(env.status(PARTNER, id), "new");
    env.advance(11);
    assert_eq!(env.status(PARTNER, id), "in_progress");
    let status = json_of(&env.get(PARTNER, &Env::cert_path(id, "dcv")));
    let entry = &status["dcv"]["www.example.com"];
    assert_eq!(
        entry["method"],
        Value::Null,
        "family C does not report the method"
    );
    assert!(entry.get("hashes").is_none() && entry.get("dcv_method").is_none());
    assert!(status.get("unique_value").is_none());
    env.advance(30);
    let checks = env.due_for(id);
    assert_eq!(checks.len(), 1);
    let (_, content) = expected_file(&pem, p::C_DV, &env.unique_value(id));
    assert!(content.contains("\nca-c.sandbox.test\n"));
    env.fetch(&checks[0], Ok(content.into_bytes()));
    // Validated at t0+330; issued at the pickup at t0+600.
    assert_eq!(env.status(PARTNER, id), "in_progress");
    env.advance(269);
    assert_eq!(env.status(PARTNER, id), "in_progress");
    env.advance(1);
    assert_eq!(env.status(PARTNER, id), "issued");
    assert_eq!(
        env.leaf(id).not_before,
        (t0() + Duration::seconds(600)).unix_timestamp()
    );
}

#[test]
fn fetch_failures_retry_then_slow_down_and_lost_checks_come_back() {
    let mut env = Env::new();
    let (pem, _) = csr(&["www.example.com"]);
    let id = env.place(PARTNER, item(p::S_DV, "www.example.com", &pem));
    env.advance(50);
    for attempt in 1..=10 {
        let checks = env.due_for(id);
        assert_eq!(checks.len(), 1, "attempt {attempt}");
        env.fetch(&checks[0], Err("connection refused".to_string()));
        if attempt < 10 {
            env.advance(59);
            assert!(env.due_for(id).is_empty());
            env.advance(1);
        }
    }
    assert!(
        env.inspect(id)["domains"][0]["last_result"]
            .as_str()
            .unwrap()
            .contains("connection refused")
    );
    // After ten failures: every 300 s.
    env.advance(299);
    assert!(env.due_for(id).is_empty());
    env.advance(1);
    let checks = env.due_for(id);
    assert_eq!(checks.len(), 1);
    // A check that is never reported comes again at the next scheduled time.
    env.advance(299);
    assert!(env.due_for(id).is_empty());
    env.advance(1);
    let checks = env.due_for(id);
    assert_eq!(checks.len(), 1);
    // Resend makes the check due at once.
    env.fetch(&checks[0], Err("timeout".to_string()));
    let resp = env.post_form(PARTNER, &Env::cert_path(id, "resend_dcv"), &[]);
    assert_eq!(
        json_of(&resp),
        json!({ "success": true, "result": "DCV email has been re-sent/ Alt DCV retried" })
    );
    assert_eq!(env.due_for(id).len(), 1);
}

#[test]
fn stale_or_foreign_check_results_are_ignored() {
    let mut env = Env::new();
    let (pem, _) = csr(&["www.example.com"]);
    let id = env.place(PARTNER, item(p::S_DV, "www.example.com", &pem));
    env.advance(50);
    let check = env.due_for(id).remove(0);
    let (_, content) = expected_file(&pem, p::S_DV, &env.unique_value(id));
    let mut stale = check.clone();
    stale.path = "/.well-known/pki-validation/00000000000000000000000000000000.txt".to_string();
    env.fetch(&stale, Ok(content.clone().into_bytes()));
    let mut other = check.clone();
    other.domain = "evil.example.com".to_string();
    env.fetch(&other, Ok(content.clone().into_bytes()));
    let mut tls = check.clone();
    tls.https = true;
    env.fetch(&tls, Ok(content.clone().into_bytes()));
    let mut missing = check.clone();
    missing.certificate_id = 1;
    env.fetch(&missing, Ok(content.clone().into_bytes()));
    assert_eq!(env.status(PARTNER, id), "in_progress");
    env.fetch(&check, Ok(content.into_bytes()));
    assert_eq!(env.status(PARTNER, id), "issued");
}

#[test]
fn instant_mode_skips_every_wait() {
    let mut env = Env::instant();
    for product in [p::S_DV, p::D_DV, p::C_DV] {
        let (pem, _) = csr(&["www.example.com"]);
        let id = env.place(PARTNER, item(product, "www.example.com", &pem));
        assert_eq!(
            env.status(PARTNER, id),
            "in_progress",
            "reaches the CA at once"
        );
        let checks = env.due_for(id);
        assert_eq!(checks.len(), 1);
        env.fetch(&checks[0], Ok(b"nope".to_vec()));
        let checks = env.due_for(id);
        assert_eq!(checks.len(), 1, "retried without waiting");
        let (_, content) = expected_file(&pem, product, &env.unique_value(id));
        env.fetch(&checks[0], Ok(content.into_bytes()));
        assert_eq!(
            env.status(PARTNER, id),
            "issued",
            "{product}: no pickup wait"
        );
    }
    // Staff are people: a cancellation still takes its hour.
    let (pem, _) = csr(&["www.example.com"]);
    let id = env.place(PARTNER, item(p::C_DV, "www.example.com", &pem));
    let resp = env.post_form(PARTNER, &Env::cert_path(id, "cancel"), &[]);
    assert_eq!(json_of(&resp)["success"], true);
    assert_eq!(
        env.details(PARTNER, id)["status"]["certificate"],
        "in_progress_pending_cancel"
    );
    env.advance(3600);
    assert_eq!(env.status(PARTNER, id), "annulled");
}

#[test]
fn validity_is_capped_by_the_subscription_and_max_cert_days() {
    let mut env = Env::with_config(StateConfig {
        max_cert_days: 30,
        ..Default::default()
    });
    let (pem, _) = csr(&["www.example.com"]);
    let id = env.issued(PARTNER, item(p::D_DV, "www.example.com", &pem), &pem);
    let leaf = env.leaf(id);
    assert_eq!(leaf.not_after - leaf.not_before, 30 * 86_400);

    let mut env = Env::new();
    let mut it = item(p::D_DV, "www.example.com", &pem);
    it["days"] = json!(60);
    let id = env.issued(PARTNER, it, &pem);
    let leaf = env.leaf(id);
    assert_eq!(
        leaf.not_after - leaf.not_before,
        60 * 86_400,
        "subscription of 60 days"
    );
    let d = env.details(PARTNER, id);
    assert_eq!(d["valid_to"], d["subscription_valid_to"]);
}

#[test]
fn multi_year_subscription_fields() {
    let mut env = Env::new();
    let (pem, _) = csr(&["www.example.com"]);
    let mut s = item(p::S_DV, "www.example.com", &pem);
    s["days"] = json!(730);
    let id = env.issued(PARTNER, s, &pem);
    let d = env.details(PARTNER, id);
    assert_eq!(d["subscription_duration"], 730);
    let list = json_of(&env.get(PARTNER, "/api/v1/ssl_certificates"));
    assert_eq!(list[0]["subscription_duration"], 730);
    assert_eq!(list[0]["duration_in_years"], 2);
    let leaf = env.leaf(id);
    let start = env.inspect(id)["first_issued_at"].as_i64().unwrap();
    assert_eq!(
        env.inspect(id)["subscription_end"].as_i64().unwrap(),
        start + 730 * 86_400
    );
    assert_eq!(leaf.not_after - leaf.not_before, 199 * 86_400);
    // Family D: multi-year, but no subscription_duration.
    let mut dd = item(p::D_DV, "www.example.com", &pem);
    dd["days"] = json!(1095);
    let id = env.issued(PARTNER, dd, &pem);
    let d = env.details(PARTNER, id);
    assert_eq!(d["subscription_duration"], Value::Null);
    assert!(d["subscription_valid_to"].is_string());
}

#[test]
fn certificate_expires_when_its_validity_ends() {
    let mut env = Env::new();
    let (pem, _) = csr(&["www.example.com"]);
    let id = env.issued(PARTNER, item(p::S_DV, "www.example.com", &pem), &pem);
    let leaf = env.leaf(id);
    let left = leaf.not_after - env.now.unix_timestamp();
    env.advance(left - 1);
    assert_eq!(env.status(PARTNER, id), "issued");
    env.advance(1);
    assert_eq!(env.status(PARTNER, id), "expired");
    let resp = env.get(PARTNER, &Env::cert_path(id, "download"));
    assert_eq!(resp.status, 422);
    assert!(json_of(&resp)["errors"].is_string());
}

#[test]
fn downloads_serve_zips_once_issued() {
    let mut env = Env::new();
    let (pem, _) = csr(&["www.example.com"]);
    let id = env.place(PARTNER, item(p::S_DV, "www.example.com", &pem));
    let resp = env.get(PARTNER, &Env::cert_path(id, "download"));
    assert_eq!(resp.status, 422);
    assert!(
        json_of(&resp)["errors"]
            .as_str()
            .unwrap()
            .contains("not issued")
    );
    let resp = env.get(PARTNER, &Env::cert_path(id, "download_bundle"));
    assert_eq!(
        (resp.status, json_of(&resp)),
        (
            422,
            json!({ "errors": "Certificate PEM data is not available" })
        )
    );
    env.pass_http(id, &pem, p::S_DV, 600);
    assert_eq!(env.status(PARTNER, id), "issued");
    let ext = env.details(PARTNER, id)["external_number"]
        .as_str()
        .unwrap()
        .to_string();
    let serial = env.leaf(id).serial;

    let resp = env.get(PARTNER, &Env::cert_path(id, "download"));
    assert_eq!(resp.status, 200);
    let (ct, name, data) = bytes_of(&resp);
    assert_eq!(ct, "application/zip");
    assert_eq!(name, Some(format!("{ext}.zip")));
    let entries = zip_names(&data);
    let leaf_entry = entries
        .iter()
        .find(|n| n.starts_with("www.example.com"))
        .expect("leaf file");
    assert_eq!(leaf_facts(&zip_entry(&data, leaf_entry)).serial, serial);

    let resp = env.get(PARTNER, &Env::cert_path(id, "download_bundle"));
    let (ct, name, data) = bytes_of(&resp);
    assert_eq!(ct, "application/zip");
    assert_eq!(name, Some(format!("partner_OSC-{id}.zip")));
    let entries = zip_names(&data);
    for needed in [
        "README.txt",
        "nginx/fullchain.crt",
        "apache/certificate.crt",
        "apache/ca_bundle.crt",
        "iis/certificate.p7b",
        "pem/www.example.com.pem",
        "pem/root.pem",
    ] {
        assert!(
            entries.iter().any(|e| e == needed),
            "{needed} in {entries:?}"
        );
    }
    assert_eq!(
        leaf_facts(&zip_entry(&data, "nginx/fullchain.crt")).serial,
        serial
    );
    // A restricted login of the same account could read; another account cannot.
    assert_eq!(env.get(OTHER, &Env::cert_path(id, "download")).status, 404);
}

#[test]
fn hostile_input_describes_the_current_certificate() {
    let mut env = Env::new();
    let (pem, key) = csr(&["www.example.com"]);
    let id = env.place(PARTNER, item(p::S_DV, "www.example.com", &pem));
    assert!(env.state.hostile_input(id, env.now, ca()).is_none());
    env.pass_http(id, &pem, p::S_DV, 600);
    let input = env.state.hostile_input(id, env.now, ca()).unwrap();
    assert_eq!(input.public_key_der, spki(&key));
    assert_eq!(input.common_name, "www.example.com");
    assert_eq!(input.dns_names, ["www.example.com"]);
    assert_eq!(input.issuer, "s-one");
    assert_eq!(input.chain_pem.len(), 1);
    assert_eq!(input.root_pem, ca().root_pem());
    let _ = input.borrow();
    assert!(env.state.hostile_input(1, env.now, ca()).is_none());
}

#[test]
fn age_certificate_resigns_the_leaf_with_the_same_key_and_names() {
    let mut env = Env::new();
    let (pem, key) = csr(&["www.example.com", "shop.example.com"]);
    let id = env.issued(PARTNER, item(p::S_UCC, "www.example.com", &pem), &pem);
    let before = env.leaf(id);
    env.state.age_certificate(id, 10, env.now, ca()).unwrap();
    let after = env.leaf(id);
    assert_ne!(after.serial, before.serial);
    assert_eq!(after.spki, spki(&key));
    assert_eq!(after.names, before.names);
    assert_eq!(after.not_after, env.now.unix_timestamp() + 10 * 86_400);
    assert!(after.not_before < env.now.unix_timestamp());
    assert_eq!(env.inspect(id)["serials"].as_array().unwrap().len(), 2);
    let d = env.details(PARTNER, id);
    assert_eq!(d["serial_number"], after.serial.as_str());
    env.state.age_certificate(id, -1, env.now, ca()).unwrap();
    env.advance(1);
    assert_eq!(env.status(PARTNER, id), "expired");
    assert!(env.state.age_certificate(1, 5, env.now, ca()).is_err());
    let (pem2, _) = csr(&["www.example.com"]);
    let pending = env.place(PARTNER, item(p::S_DV, "www.example.com", &pem2));
    assert!(
        env.state
            .age_certificate(pending, 5, env.now, ca())
            .is_err()
    );
}

#[test]
fn force_status_sets_the_rare_states() {
    let mut env = Env::new();
    let (pem, _) = csr(&["www.example.com"]);
    let id = env.place(PARTNER, item(p::S_DV, "www.example.com", &pem));
    env.advance(20);
    for state in ["waiting_for_approval", "other"] {
        env.state.force_status(id, state).unwrap();
        assert_eq!(env.status(PARTNER, id), state);
        let resp = env.get(PARTNER, &Env::cert_path(id, "dcv"));
        assert_eq!(json_of(&resp)["certificate_status"], state);
        env.advance(3600);
        assert_eq!(env.status(PARTNER, id), state, "stays");
    }
    env.state.force_status(id, "new").unwrap();
    env.advance(3600);
    assert_eq!(env.status(PARTNER, id), "new", "held");
    env.state.force_status(id, "in_progress").unwrap();
    assert_eq!(env.status(PARTNER, id), "in_progress");
    assert!(
        env.state.force_status(id, "issued").is_err(),
        "nothing issued yet"
    );
    assert!(env.state.force_status(id, "bogus").is_err());
    assert!(env.state.force_status(1, "other").is_err());
    env.state.force_status(id, "annulled").unwrap();
    assert_eq!(env.status(PARTNER, id), "annulled");
    assert_eq!(env.details(PARTNER, id)["payment_status"], "not_payable");
    let id2 = env.issued(PARTNER, item(p::S_DV, "www.example.com", &pem), &pem);
    env.state.force_status(id2, "expired").unwrap();
    assert_eq!(env.status(PARTNER, id2), "expired");
    env.state.force_status(id2, "issued").unwrap();
    assert_eq!(env.status(PARTNER, id2), "issued");
}

#[test]
fn a_request_looks_only_at_certificates_with_something_due() {
    let mut env = Env::instant();
    let mut issued = Vec::new();
    for n in 0..20 {
        let name = format!("site{n}.example.com");
        let (pem, _) = csr(&[name.as_str()]);
        let id = env.place(PARTNER, item(p::S_DV, &name, &pem));
        let now = env.now.unix_timestamp();
        assert!(
            env.state.take_due(now).is_empty(),
            "waiting for its file check, even in instant mode, it has nothing due"
        );
        let checks = env.due_for(id);
        let (_, content) = expected_file(&pem, p::S_DV, &env.unique_value(id));
        env.fetch(&checks[0], Ok(content.into_bytes()));
        assert_eq!(env.status(PARTNER, id), "issued");
        issued.push(id);
    }
    // Twenty issued certificates: a status call, then a tick, look at none of them.
    env.status(PARTNER, issued[0]);
    let now = env.now.unix_timestamp();
    assert!(env.state.take_due(now).is_empty(), "nothing is due");

    // One more order: only it is looked at until it is issued.
    let (pem, _) = csr(&["late.example.com"]);
    env.state.set_instant(false);
    env.advance(1);
    let late = env.place(PARTNER, item(p::S_DV, "late.example.com", &pem));
    let now = env.now.unix_timestamp();
    assert_eq!(
        env.state.take_due(now + 19),
        Vec::<u64>::new(),
        "not before the CA has it"
    );
    assert_eq!(
        env.state.take_due(now + 20),
        vec![late],
        "the CA has it after 20 s"
    );
    env.state.reschedule(&[late]);

    // Expiry: each issued certificate is looked at again when its validity ends.
    let not_after = env.inspect(issued[3])["leaf"]["not_after"]
        .as_i64()
        .expect("not_after");
    assert!(
        env.state.take_due(not_after).contains(&issued[3]),
        "looked at when it expires"
    );
}
