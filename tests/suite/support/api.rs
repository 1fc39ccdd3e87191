//! Helpers of the Partner API client tests: a sandbox with a directory for password files
//! and state, CSRs, and orders placed through the client.
#![allow(dead_code)]

use std::os::unix::fs::PermissionsExt;
use std::path::PathBuf;
use std::time::Duration;

use cert_agent::testing::api::{
    Client, ClientOptions, DcvType, Order, OrderItem, OrderRequest, PasswordSource, ProductType,
    RetryPolicy, TOKEN_FILE,
};
use partner_sandbox::{Sandbox, SandboxConfig, SandboxHandle};

pub(crate) const PARTNER: &str = "partner@sandbox.test";
pub(crate) const BILLING: &str = "billing@sandbox.test";
pub(crate) const RETAIL: &str = "retail@sandbox.test";
pub(crate) const OTHER: &str = "other@sandbox.test";
pub(crate) const PASSWORD: &str = "sandbox";

/// A sandbox with instant validation, and a directory for password files and state.
pub(crate) struct Env {
    pub sandbox: SandboxHandle,
    pub dir: tempfile::TempDir,
}

impl Env {
    pub(crate) fn start() -> Self {
        Self::with(SandboxConfig::default().instant(true))
    }

    pub(crate) fn with(config: SandboxConfig) -> Self {
        Self {
            sandbox: Sandbox::start(config).expect("sandbox starts"),
            dir: tempfile::tempdir().expect("temp dir"),
        }
    }

    pub(crate) fn state_dir(&self, login: &str) -> PathBuf {
        self.dir.path().join(format!("state-{login}"))
    }

    /// Options for `login` (password file 0600, token cache, sandbox CA, fast retries).
    pub(crate) fn options(&self, login: &str, password: &str) -> ClientOptions {
        let file = self.dir.path().join(format!("password-{login}"));
        std::fs::write(&file, format!("{password}\n")).expect("password written");
        std::fs::set_permissions(&file, std::fs::Permissions::from_mode(0o600)).expect("chmod");
        let mut o = ClientOptions::new(self.sandbox.base_url(), login, PasswordSource::file(file));
        o.ca_file = Some(self.sandbox.api_ca_path());
        o.state_dir = Some(self.state_dir(login));
        o.retry = RetryPolicy::fast(4);
        o.timeout = Duration::from_secs(20);
        o
    }

    pub(crate) fn client(&self, login: &str) -> Client {
        Client::new(self.options(login, PASSWORD)).expect("client builds")
    }

    /// The token cached for `login`.
    pub(crate) fn cached_token(&self, login: &str) -> String {
        let text = std::fs::read_to_string(self.state_dir(login).join(TOKEN_FILE)).expect("token");
        let v: serde_json::Value = serde_json::from_str(&text).expect("token cache is JSON");
        v["auth_token"].as_str().expect("auth_token").to_owned()
    }

    /// Calls whose path is `path`, as `(method, status)`.
    pub(crate) fn calls_to(&self, path: &str) -> Vec<(String, u16)> {
        self.sandbox
            .calls()
            .into_iter()
            .filter(|c| c.path == path)
            .map(|c| (c.method, c.status))
            .collect()
    }
}

/// A PEM CSR for `name`.
pub(crate) fn csr(name: &str) -> String {
    let key = rcgen::KeyPair::generate().expect("key");
    let mut params = rcgen::CertificateParams::new(vec![name.to_owned()]).expect("params");
    params.distinguished_name = rcgen::DistinguishedName::new();
    params
        .distinguished_name
        .push(rcgen::DnType::CommonName, name.to_owned());
    params
        .serialize_request(&key)
        .expect("CSR")
        .pem()
        .expect("PEM")
}

/// A DV single-name product.
pub(crate) async fn dv_product(client: &Client) -> u64 {
    client
        .products(false)
        .await
        .expect("products")
        .into_iter()
        .find(|p| {
            p.product_type == Some(ProductType::Standart)
                && p.validation_type.as_deref() == Some("dv")
        })
        .expect("a DV standart product")
        .id
}

pub(crate) fn order_request(product: u64, domain: &str, dcv_email: Option<String>) -> OrderRequest {
    OrderRequest {
        order: Order {
            items: vec![OrderItem {
                nomenclature_id: product,
                days: 365,
                ssl_server_software_id: 0,
                dcv_type: Some(if dcv_email.is_some() {
                    DcvType::Email
                } else {
                    DcvType::HttpCsrHash
                }),
                dcv_email,
                domain_name: domain.to_owned(),
                csr: csr(domain),
                country_name: "DE".into(),
                region_name: "Berlin".into(),
                city_name: "Berlin".into(),
                ..OrderItem::default()
            }],
            ..Order::default()
        },
    }
}

/// Places an EMAIL-validated order for `domain`; returns the certificate ID.
pub(crate) async fn place_order(client: &Client, domain: &str) -> u64 {
    let product = dv_product(client).await;
    let emails = client.dcv_emails(domain, None).await.expect("dcv emails");
    let email = emails.all().first().expect("an address").to_string();
    let r = client
        .order(&order_request(product, domain, Some(email)))
        .await
        .expect("order placed");
    assert!(r.order > 0);
    r.certificate
}

/// Places an order and approves its email: an issued certificate.
pub(crate) async fn issued_certificate(env: &Env, client: &Client, domain: &str) -> u64 {
    let id = place_order(client, domain).await;
    env.sandbox.approve_email(id, None).expect("approve");
    env.sandbox.validate_now();
    for _ in 0..100 {
        let s = client.status(id).await.expect("status");
        if s.certificate.as_ref().map(|c| c.as_str()) == Some("issued") {
            return id;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    panic!("certificate {id} not issued");
}
