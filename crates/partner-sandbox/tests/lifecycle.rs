//! Full life cycle per family (S, D, C) over HTTPS with real HTTP DCV: order with an rcgen CSR,
//! serve the file from a tiny web server, wait for issuance, download both archives and check
//! what is inside. Also: a wrong file never validates.

mod common;

use std::time::Duration;

use common::*;

async fn life_cycle(family: char) {
    let (env, files) = env_with_files();
    let token = env.signin(PARTNER).await;
    let product = env.product(&token, family).await;
    let domain = format!("www.life-cycle-{family}.com");
    let csr = Csr::new(&[&domain]);
    let id = env.order(&token, product, &csr, "HTTP_CSR_HASH").await;
    assert_eq!(env.sandbox.billed_orders(PARTNER), 1);

    let details = env.details(&token, id).await;
    let content = details["dcv_content"]
        .as_str()
        .expect("dcv_content is a string")
        .to_owned();
    assert!(
        content.contains(&csr.sha256_hex()),
        "dcv_content {content:?} holds the CSR's SHA-256"
    );

    // Nothing is served yet: several validator rounds pass without validation.
    tokio::time::sleep(Duration::from_millis(700)).await;
    assert_ne!(env.status(&token, id).await, "issued");

    files.serve(&csr.dcv_path(), content.clone());
    env.wait_status(&token, id, "issued", Duration::from_secs(30))
        .await;
    let fetches = files.fetches();
    assert!(
        fetches
            .iter()
            .any(|f| f.path == csr.dcv_path() && f.host.as_deref() == Some(domain.as_str())),
        "the validator fetched {} with Host: {domain}; saw {fetches:?}",
        csr.dcv_path()
    );

    // The per-server bundle: the leaf certifies the CSR's key for the domain.
    let bundle = env
        .get(
            &format!("/api/v1/ssl_certificates/{id}/download_bundle"),
            Some(&token),
        )
        .await;
    assert_eq!(bundle.status, 200, "{}", bundle.text());
    assert_eq!(bundle.header("content-type"), Some("application/zip"));
    assert_eq!(bundle.header("access-control-allow-origin"), Some("*"));
    let entries = unzip(&bundle.body);
    let leaf_pem = entries
        .get(&format!("pem/{domain}.pem"))
        .unwrap_or_else(|| panic!("pem/{domain}.pem in {:?}", entries.keys()));
    let leaf = &pem_certs(leaf_pem)[0];
    let (spki, names, not_after) = leaf_facts(leaf);
    assert_eq!(spki, csr.spki(), "leaf key = CSR key");
    assert!(names.contains(&domain), "{names:?}");
    assert!(not_after > env.sandbox.now());
    for (name, data) in &entries {
        assert!(
            !String::from_utf8_lossy(data).contains("PRIVATE KEY"),
            "{name} holds no private key"
        );
    }
    let fullchain = &entries["nginx/fullchain.crt"];
    assert_eq!(&pem_certs(fullchain)[0], leaf);

    // The CA archive, named after the CA order number.
    let archive = env
        .get(
            &format!("/api/v1/ssl_certificates/{id}/download"),
            Some(&token),
        )
        .await;
    assert_eq!(archive.status, 200, "{}", archive.text());
    let external = env.details(&token, id).await["external_number"].clone();
    let external = external
        .as_str()
        .map(str::to_owned)
        .or_else(|| external.as_u64().map(|n| n.to_string()))
        .expect("external_number once issued");
    let disposition = archive.header("content-disposition").unwrap_or_default();
    assert!(
        disposition.contains(&format!("{external}.zip")),
        "{disposition:?} names {external}.zip"
    );
    assert!(!unzip(&archive.body).is_empty());

    // The chain verifies against root.pem, as the README's walk-through does with openssl.
    if have_openssl() {
        let dir = TempDir::new("verify");
        let cert = dir.path().join("cert.pem");
        let chain = dir.path().join("chain.pem");
        std::fs::write(&cert, leaf_pem).expect("write");
        std::fs::write(&chain, &entries["pem/chain.pem"]).expect("write");
        let out = std::process::Command::new("openssl")
            .arg("verify")
            .arg("-CAfile")
            .arg(env.sandbox.root_path())
            .arg("-untrusted")
            .arg(&chain)
            .arg(&cert)
            .output()
            .expect("openssl runs");
        assert!(
            out.status.success(),
            "openssl verify: {}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
    }

    // Every call of the life cycle is in the log, none with a token in its URL.
    let calls = env.sandbox.calls();
    assert!(calls.iter().any(|c| c.path == "/api/v1/order" && c.billed));
    assert!(calls.iter().all(|c| !c.query.contains(&token)));
}

#[tokio::test]
async fn life_cycle_family_s_with_http_dcv() {
    life_cycle('s').await;
}

#[tokio::test]
async fn life_cycle_family_d_with_http_dcv() {
    life_cycle('d').await;
}

#[tokio::test]
async fn life_cycle_family_c_with_http_dcv() {
    life_cycle('c').await;
}

#[tokio::test]
async fn wrong_file_content_never_validates() {
    let (env, files) = env_with_files();
    let token = env.signin(PARTNER).await;
    let product = env.product(&token, 'd').await;
    let domain = "www.wrong-content.com";
    let csr = Csr::new(&[domain]);
    let id = env.order(&token, product, &csr, "HTTP_CSR_HASH").await;
    let content = env.details(&token, id).await["dcv_content"]
        .as_str()
        .expect("dcv_content")
        .to_owned();
    // Almost right: the SHA-256 of another CSR.
    let other = Csr::new(&[domain]);
    files.serve(
        &csr.dcv_path(),
        content.replace(&csr.sha256_hex(), &other.sha256_hex()),
    );

    let start = std::time::Instant::now();
    while !files.fetches().iter().any(|f| f.path == csr.dcv_path()) {
        assert!(
            start.elapsed() < Duration::from_secs(20),
            "the validator never fetched the file"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    // Let it retry a few more rounds (and a day pass) for good measure.
    tokio::time::sleep(Duration::from_millis(600)).await;
    env.sandbox.advance(Duration::from_secs(86_400));
    tokio::time::sleep(Duration::from_millis(600)).await;
    let status = env.status(&token, id).await;
    assert_ne!(status, "issued");
    let dcv = env
        .get(&format!("/api/v1/ssl_certificates/{id}/dcv"), Some(&token))
        .await;
    if dcv.status == 200 {
        assert_ne!(dcv.json()["dcv"][domain]["valid"], serde_json::json!(true));
    }
    let bundle = env
        .get(
            &format!("/api/v1/ssl_certificates/{id}/download_bundle"),
            Some(&token),
        )
        .await;
    assert_eq!(bundle.status, 422, "{}", bundle.text());
}

/// Orders with `dcv_type`, serves the file on `serving` only, waits for issuance; returns the
/// domain.
async fn issue_via(env: &Env, family: char, dcv_type: &str, serving: &FileServer) -> String {
    let token = env.signin(PARTNER).await;
    let product = env.product(&token, family).await;
    let domain = format!("secure-{family}.example.com");
    let csr = Csr::new(&[&domain]);
    let id = env.order(&token, product, &csr, dcv_type).await;
    let content = env.details(&token, id).await["dcv_content"]
        .as_str()
        .expect("dcv_content")
        .to_owned();
    serving.serve(&csr.dcv_path(), content);
    env.wait_status(&token, id, "issued", Duration::from_secs(30))
        .await;
    domain
}

#[tokio::test]
async fn family_s_https_dcv_is_fetched_over_tls_with_the_domain_as_sni() {
    let (plain, tls) = (FileServer::start(), FileServer::start_tls());
    let env = Env::start(partner_sandbox::SandboxConfig::default().instant(true));
    // The web servers start after the sandbox, as in most tests.
    env.sandbox.set_dcv_ports(plain.port(), tls.port());
    let domain = issue_via(&env, 's', "HTTPS_CSR_HASH", &tls).await;
    let fetches = tls.fetches();
    assert!(
        fetches
            .iter()
            .any(|f| f.host.as_deref() == Some(domain.as_str())
                && f.sni.as_deref() == Some(domain.as_str())),
        "{fetches:?}"
    );
    assert!(plain.fetches().is_empty());
}

#[tokio::test]
async fn family_d_fetches_https_csr_hash_files_over_plain_http() {
    let (plain, tls) = (FileServer::start(), FileServer::start_tls());
    let env = Env::start(partner_sandbox::SandboxConfig::default().instant(true));
    env.sandbox.set_dcv_ports(plain.port(), tls.port());
    let domain = issue_via(&env, 'd', "HTTPS_CSR_HASH", &plain).await;
    assert!(
        plain
            .fetches()
            .iter()
            .any(|f| f.host.as_deref() == Some(domain.as_str()) && f.sni.is_none())
    );
    assert!(tls.fetches().is_empty());
}

#[tokio::test]
async fn family_c_issues_on_its_pickup_cycle_under_a_scaled_clock() {
    // No instant mode: the state's real schedules (first check, retries, family C's ~5-minute
    // pickup cycle) run on the virtual clock, 600 times faster than real time.
    let files = FileServer::start();
    let env = Env::start(
        partner_sandbox::SandboxConfig::default()
            .time_scale(600.0)
            .dcv_http_port(files.port()),
    );
    let token = env.signin(PARTNER).await;
    let product = env.product(&token, 'c').await;
    let domain = "www.scaled-clock.com";
    let csr = Csr::new(&[domain]);
    let ordered_at = env.sandbox.now();
    let id = env.order(&token, product, &csr, "HTTP_CSR_HASH").await;
    let content = env.details(&token, id).await["dcv_content"]
        .as_str()
        .expect("dcv_content")
        .to_owned();
    files.serve(&csr.dcv_path(), content);
    env.wait_status(&token, id, "issued", Duration::from_secs(60))
        .await;
    assert!(
        env.sandbox.now() - ordered_at >= time::Duration::seconds(30),
        "issuance took virtual time"
    );
    assert!(files.fetches().iter().any(|f| f.path == csr.dcv_path()));
}
