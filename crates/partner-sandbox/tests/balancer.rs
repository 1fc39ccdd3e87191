//! The validator behind a load balancer: several DCV ports (one per host of a fleet), picked
//! round robin, at random (seeded), or all at once (every host must serve the file).

mod common;

use std::time::Duration;

use common::*;
use partner_sandbox::{DcvBalance, SandboxConfig};
use serde_json::json;

/// A sandbox whose HTTP DCV fetches go to `ports` with `balance`; orders a family D
/// certificate with HTTP_CSR_HASH. Returns (env, token, id, csr, file content).
async fn ordered(
    ports: &[u16],
    balance: DcvBalance,
    domain: &str,
) -> (Env, String, u64, Csr, String) {
    let env = Env::start(
        SandboxConfig::default()
            .instant(true)
            .seed(7)
            .dcv_http_ports(ports.to_vec())
            .dcv_balance(balance),
    );
    let token = env.signin(PARTNER).await;
    let product = env.product(&token, 'd').await;
    let csr = Csr::new(&[domain]);
    let id = env.order(&token, product, &csr, "HTTP_CSR_HASH").await;
    let content = env.details(&token, id).await["dcv_content"]
        .as_str()
        .expect("dcv_content")
        .to_owned();
    (env, token, id, csr, content)
}

fn asked(files: &FileServer, csr: &Csr) -> usize {
    files
        .fetches()
        .iter()
        .filter(|f| f.path == csr.dcv_path())
        .count()
}

#[tokio::test]
async fn strict_mode_passes_only_when_every_host_serves_the_file() {
    let hosts = [
        FileServer::start(),
        FileServer::start(),
        FileServer::start(),
    ];
    let ports: Vec<u16> = hosts.iter().map(FileServer::port).collect();
    let (env, token, id, csr, content) = ordered(&ports, DcvBalance::All, "www.strict.com").await;

    // On two hosts of three: every check asks all three, and fails.
    hosts[0].serve(&csr.dcv_path(), content.clone());
    hosts[1].serve(&csr.dcv_path(), content.clone());
    tokio::time::sleep(Duration::from_millis(1500)).await;
    assert_ne!(env.status(&token, id).await, "issued");
    for host in &hosts {
        assert!(asked(host, &csr) >= 2, "every host is asked on every check");
    }
    let record = env.sandbox.inspect(id).unwrap_or_default().to_string();
    assert!(
        record.contains(&format!("port {}", ports[2])),
        "the failure names the host without the file: {record}"
    );

    // A different file on the third host still fails: the hosts disagree.
    hosts[2].serve(&csr.dcv_path(), "stale");
    tokio::time::sleep(Duration::from_millis(1000)).await;
    assert_ne!(env.status(&token, id).await, "issued");

    hosts[2].serve(&csr.dcv_path(), content);
    env.wait_status(&token, id, "issued", Duration::from_secs(30))
        .await;
}

#[tokio::test]
async fn round_robin_passes_when_the_host_with_the_file_is_picked() {
    let hosts = [FileServer::start(), FileServer::start()];
    // The host without the file comes first: the first fetch fails, the next one passes.
    let ports = [hosts[1].port(), hosts[0].port()];
    let (env, token, id, csr, content) =
        ordered(&ports, DcvBalance::RoundRobin, "www.round-robin.com").await;
    hosts[0].serve(&csr.dcv_path(), content);
    env.wait_status(&token, id, "issued", Duration::from_secs(30))
        .await;
    assert!(
        asked(&hosts[1], &csr) >= 1,
        "the host without the file was asked"
    );
    assert!(
        asked(&hosts[0], &csr) >= 1,
        "the host with the file was asked"
    );
    let (a, b) = (asked(&hosts[0], &csr), asked(&hosts[1], &csr));
    assert!(a.abs_diff(b) <= 1, "turns alternate: {a} and {b}");
}

#[tokio::test]
async fn random_mode_passes_once_the_host_with_the_file_is_drawn() {
    let hosts = [
        FileServer::start(),
        FileServer::start(),
        FileServer::start(),
    ];
    let ports: Vec<u16> = hosts.iter().map(FileServer::port).collect();
    let (env, token, id, csr, content) =
        ordered(&ports, DcvBalance::Random, "www.random.com").await;
    hosts[2].serve(&csr.dcv_path(), content);
    env.wait_status(&token, id, "issued", Duration::from_secs(30))
        .await;
    assert!(asked(&hosts[2], &csr) >= 1);
    let total: usize = hosts.iter().map(|h| asked(h, &csr)).sum();
    assert_eq!(
        total,
        asked(&hosts[2], &csr) + asked(&hosts[0], &csr) + asked(&hosts[1], &csr)
    );
}

#[tokio::test]
async fn the_control_api_takes_lists_and_a_balance() {
    let env = Env::instant();
    let c = |path: &str| env.url(&format!("/_sandbox{path}"));
    let post = |body: &'static str| env.client.post(c("/dcv_ports")).body(body);
    let a = env
        .send(post(r#"{"http":[8081,8082],"balance":"all"}"#))
        .await;
    assert_eq!(a.status, 200, "{}", a.text());
    assert_eq!(
        a.json(),
        json!({ "http": [8081, 8082], "https": 443, "balance": "all" })
    );
    let a = env.send(post(r#"{"balance":"random","seed":9}"#)).await;
    assert_eq!(
        a.json(),
        json!({ "http": [8081, 8082], "https": 443, "balance": "random", "seed": 9 })
    );
    assert_eq!(env.get("/_sandbox/dcv_ports", None).await.json(), a.json());
    assert_eq!(env.sandbox.dcv_ports().http(), [8081, 8082]);
    for bad in [
        r#"{"http":[]}"#,
        r#"{"balance":"sticky"}"#,
        r#"{"http":[70000]}"#,
    ] {
        let a = env.send(post(bad)).await;
        assert_eq!(a.status, 400, "{bad}: {}", a.text());
    }
    // One port each: the answer has the single-port shape.
    let a = env.send(post(r#"{"http":8081}"#)).await;
    assert_eq!(a.json(), json!({ "http": 8081, "https": 443 }));
    env.sandbox
        .set_dcv_http_ports(&[1, 2, 3], DcvBalance::RoundRobin);
    assert_eq!(
        env.get("/_sandbox/dcv_ports", None).await.json(),
        json!({ "http": [1, 2, 3], "https": 443, "balance": "round_robin" })
    );
}
