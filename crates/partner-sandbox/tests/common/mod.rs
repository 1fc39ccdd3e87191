//! Test harness for the sandbox's HTTPS integration tests: a started sandbox with a client that
//! trusts its `api-ca.pem`, partner-API helpers, CSRs made with rcgen, and a tiny HTTP file
//! server standing in for the customer's web server during DCV.
#![allow(dead_code)]

use std::collections::HashMap;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use bytes::Bytes;
use http_body_util::Full;
use hyper::body::Incoming;
use hyper::service::service_fn;
use hyper_util::rt::TokioIo;
use partner_sandbox::{Sandbox, SandboxConfig, SandboxHandle};
use rcgen::PublicKeyData;
use serde_json::{Value, json};

pub(crate) const PARTNER: &str = "partner@sandbox.test";
pub(crate) const OTHER: &str = "other@sandbox.test";
pub(crate) const PASSWORD: &str = "sandbox";

/// A sandbox and an HTTPS client that trusts it.
pub(crate) struct Env {
    pub sandbox: SandboxHandle,
    pub client: reqwest::Client,
}

/// An answer, read whole.
#[derive(Debug)]
pub(crate) struct Answer {
    pub status: u16,
    pub headers: reqwest::header::HeaderMap,
    pub body: Bytes,
}

impl Answer {
    pub(crate) fn json(&self) -> Value {
        serde_json::from_slice(&self.body).unwrap_or_else(|e| {
            panic!(
                "status {}: body is not JSON ({e}): {}",
                self.status,
                String::from_utf8_lossy(&self.body)
            )
        })
    }

    pub(crate) fn text(&self) -> String {
        String::from_utf8_lossy(&self.body).into_owned()
    }

    pub(crate) fn header(&self, name: &str) -> Option<&str> {
        self.headers.get(name).and_then(|v| v.to_str().ok())
    }
}

/// A client trusting only the sandbox's API CA.
pub(crate) fn client_for(sandbox: &SandboxHandle) -> reqwest::Client {
    let pem = std::fs::read(sandbox.api_ca_path()).expect("api-ca.pem exists");
    let ca = reqwest::Certificate::from_pem(&pem).expect("api-ca.pem parses");
    reqwest::Client::builder()
        .tls_certs_only([ca])
        .redirect(reqwest::redirect::Policy::none())
        .no_proxy()
        .timeout(Duration::from_secs(60))
        .build()
        .expect("client builds")
}

impl Env {
    pub(crate) fn start(config: SandboxConfig) -> Self {
        let sandbox = Sandbox::start(config).expect("sandbox starts");
        let client = client_for(&sandbox);
        Self { sandbox, client }
    }

    /// A sandbox with instant validation (the usual test setting).
    pub(crate) fn instant() -> Self {
        Self::start(SandboxConfig::default().instant(true))
    }

    pub(crate) fn url(&self, path: &str) -> String {
        format!("{}{path}", self.sandbox.base_url())
    }

    pub(crate) async fn send(&self, req: reqwest::RequestBuilder) -> Answer {
        let resp = req.send().await.expect("request completes");
        let status = resp.status().as_u16();
        let headers = resp.headers().clone();
        let body = resp.bytes().await.expect("body reads");
        Answer {
            status,
            headers,
            body,
        }
    }

    pub(crate) async fn get(&self, path: &str, token: Option<&str>) -> Answer {
        let mut req = self.client.get(self.url(path));
        if let Some(t) = token {
            req = req.header("X-AUTH-TOKEN", t);
        }
        self.send(req).await
    }

    pub(crate) async fn post_json(&self, path: &str, token: Option<&str>, body: &Value) -> Answer {
        let mut req = self
            .client
            .post(self.url(path))
            .header("Content-Type", "application/json")
            .body(body.to_string());
        if let Some(t) = token {
            req = req.header("X-AUTH-TOKEN", t);
        }
        self.send(req).await
    }

    pub(crate) async fn post_form(
        &self,
        path: &str,
        token: Option<&str>,
        form: &[(&str, &str)],
    ) -> Answer {
        let body = serde_urlencoded::to_string(form).expect("form encodes");
        let mut req = self
            .client
            .post(self.url(path))
            .header("Content-Type", "application/x-www-form-urlencoded")
            .body(body);
        if let Some(t) = token {
            req = req.header("X-AUTH-TOKEN", t);
        }
        self.send(req).await
    }

    /// Signs in and returns the token.
    pub(crate) async fn signin(&self, login: &str) -> String {
        let a = self
            .post_json(
                "/api/v1/users/signin",
                None,
                &json!({ "login": login, "password": PASSWORD }),
            )
            .await;
        assert_eq!(a.status, 200, "signin of {login}: {}", a.text());
        a.json()["auth_token"]
            .as_str()
            .expect("auth_token is a string")
            .to_owned()
    }

    /// The id of a DV single-name product of the family (`s`, `d` or `c`).
    pub(crate) async fn product(&self, token: &str, family: char) -> u64 {
        let a = self.get("/api/v1/products", Some(token)).await;
        assert_eq!(a.status, 200, "products: {}", a.text());
        let issuers: &[&str] = match family {
            's' => &["s-one", "s-two"],
            'd' => &["d-one"],
            'c' => &["c-one"],
            _ => panic!("family {family}"),
        };
        let products = a.json();
        products
            .as_array()
            .expect("products is an array")
            .iter()
            .find(|p| {
                issuers.contains(&p["issuer"].as_str().unwrap_or(""))
                    && p["type"] == "standart"
                    && p["validation_type"] == "dv"
            })
            .unwrap_or_else(|| panic!("no DV standart product of family {family}"))["id"]
            .as_u64()
            .expect("product id")
    }

    /// Places a one-year order with `dcv_type`; returns the certificate ID.
    pub(crate) async fn order(&self, token: &str, product: u64, csr: &Csr, dcv_type: &str) -> u64 {
        let a = self
            .post_json(
                "/api/v1/order",
                Some(token),
                &order_body(product, csr, dcv_type),
            )
            .await;
        assert_eq!(a.status, 200, "order: {}", a.text());
        a.json()["certificate"].as_u64().expect("certificate id")
    }

    /// The state code of `/status`.
    pub(crate) async fn status(&self, token: &str, id: u64) -> String {
        let a = self
            .get(
                &format!("/api/v1/ssl_certificates/{id}/status"),
                Some(token),
            )
            .await;
        assert_eq!(a.status, 200, "status of {id}: {}", a.text());
        a.json()["certificate"]
            .as_str()
            .unwrap_or_default()
            .to_owned()
    }

    /// Polls `/status` until it reads `want` (or panics after `timeout`).
    pub(crate) async fn wait_status(&self, token: &str, id: u64, want: &str, timeout: Duration) {
        let start = Instant::now();
        loop {
            let s = self.status(token, id).await;
            if s == want {
                return;
            }
            assert!(
                start.elapsed() < timeout,
                "certificate {id} still '{s}' after {timeout:?}, wanted '{want}'; record: {:#}",
                self.sandbox.inspect(id).unwrap_or(Value::Null)
            );
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }

    /// Details of a certificate.
    pub(crate) async fn details(&self, token: &str, id: u64) -> Value {
        let a = self
            .get(&format!("/api/v1/ssl_certificates/{id}"), Some(token))
            .await;
        assert_eq!(a.status, 200, "details of {id}: {}", a.text());
        a.json()
    }
}

pub(crate) fn order_body(product: u64, csr: &Csr, dcv_type: &str) -> Value {
    json!({
        "order": {
            "items": [{
                "nomenclature_id": product,
                "days": 365,
                "ssl_server_software_id": 0,
                "dcv_type": dcv_type,
                "domain_name": csr.names[0],
                "csr": csr.pem,
                "country_name": "DE",
                "region_name": "Berlin",
                "city_name": "Berlin",
            }]
        }
    })
}

/// A key pair and a CSR for it, made with rcgen.
pub(crate) struct Csr {
    pub key: rcgen::KeyPair,
    pub pem: String,
    pub der: Vec<u8>,
    pub names: Vec<String>,
}

impl Csr {
    /// CSR with CN = `names[0]` and every name in subjectAltName.
    pub(crate) fn new(names: &[&str]) -> Self {
        let key = rcgen::KeyPair::generate().expect("key generates");
        let names: Vec<String> = names.iter().map(|s| (*s).to_owned()).collect();
        let mut params = rcgen::CertificateParams::new(names.clone()).expect("params");
        params.distinguished_name = rcgen::DistinguishedName::new();
        params
            .distinguished_name
            .push(rcgen::DnType::CommonName, names[0].clone());
        let req = params.serialize_request(&key).expect("CSR serialises");
        Self {
            pem: req.pem().expect("CSR PEM"),
            der: req.der().to_vec(),
            key,
            names,
        }
    }

    /// DER of the SubjectPublicKeyInfo.
    pub(crate) fn spki(&self) -> Vec<u8> {
        self.key.subject_public_key_info()
    }

    /// Upper-case hex MD5 of the CSR's DER: the DCV file's name.
    pub(crate) fn md5_hex(&self) -> String {
        use md5::Digest;
        hex::encode_upper(md5::Md5::digest(&self.der))
    }

    /// Upper-case hex SHA-256 of the CSR's DER.
    pub(crate) fn sha256_hex(&self) -> String {
        use sha2::Digest;
        hex::encode_upper(sha2::Sha256::digest(&self.der))
    }

    /// `/.well-known/pki-validation/<MD5>.txt`
    pub(crate) fn dcv_path(&self) -> String {
        format!("/.well-known/pki-validation/{}.txt", self.md5_hex())
    }
}

/// A fetch seen by the [`FileServer`].
#[derive(Debug, Clone)]
pub(crate) struct Fetch {
    pub host: Option<String>,
    pub path: String,
    /// Server name the client sent in the TLS handshake (HTTPS only).
    pub sni: Option<String>,
}

type Files = Arc<Mutex<HashMap<String, Vec<u8>>>>;
type Fetches = Arc<Mutex<Vec<Fetch>>>;

/// A tiny HTTP(S) file server on 127.0.0.1:0 (own thread and runtime): the customer's web root.
pub(crate) struct FileServer {
    pub addr: SocketAddr,
    files: Files,
    fetches: Fetches,
    stop: Option<tokio::sync::oneshot::Sender<()>>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl FileServer {
    /// Plain HTTP.
    pub(crate) fn start() -> Self {
        Self::start_inner(None)
    }

    /// HTTPS with a self-signed certificate for `localhost` (the validator does not verify it).
    pub(crate) fn start_tls() -> Self {
        Self::start_inner(Some(self_signed_acceptor()))
    }

    fn start_inner(acceptor: Option<tokio_rustls::TlsAcceptor>) -> Self {
        let files: Files = Arc::default();
        let fetches: Fetches = Arc::default();
        let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("file server binds");
        listener.set_nonblocking(true).expect("nonblocking");
        let addr = listener.local_addr().expect("addr");
        let (stop, mut stopped) = tokio::sync::oneshot::channel::<()>();
        let (f, seen) = (files.clone(), fetches.clone());
        let thread = std::thread::spawn(move || {
            let rt = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .expect("runtime");
            rt.block_on(async move {
                let listener = tokio::net::TcpListener::from_std(listener).expect("listener");
                loop {
                    let (stream, _) = tokio::select! {
                        r = listener.accept() => r.expect("accept"),
                        _ = &mut stopped => return,
                    };
                    let (f, seen, acceptor) = (f.clone(), seen.clone(), acceptor.clone());
                    tokio::spawn(async move {
                        let http = hyper::server::conn::http1::Builder::new();
                        match acceptor {
                            None => {
                                let service = file_service(f, seen, None);
                                let _ = http.serve_connection(TokioIo::new(stream), service).await;
                            }
                            Some(acceptor) => {
                                let Ok(tls) = acceptor.accept(stream).await else {
                                    return;
                                };
                                let sni = tls.get_ref().1.server_name().map(str::to_owned);
                                let service = file_service(f, seen, sni);
                                let _ = http.serve_connection(TokioIo::new(tls), service).await;
                            }
                        }
                    });
                }
            });
        });
        Self {
            addr,
            files,
            fetches,
            stop: Some(stop),
            thread: Some(thread),
        }
    }

    pub(crate) fn port(&self) -> u16 {
        self.addr.port()
    }

    pub(crate) fn serve(&self, path: &str, content: impl Into<Vec<u8>>) {
        self.files
            .lock()
            .expect("lock")
            .insert(path.to_owned(), content.into());
    }

    pub(crate) fn fetches(&self) -> Vec<Fetch> {
        self.fetches.lock().expect("lock").clone()
    }
}

fn file_service(
    files: Files,
    seen: Fetches,
    sni: Option<String>,
) -> impl hyper::service::Service<
    hyper::Request<Incoming>,
    Response = hyper::Response<Full<Bytes>>,
    Error = std::convert::Infallible,
    Future = impl Send,
> + Clone {
    service_fn(move |req: hyper::Request<Incoming>| {
        let host = req
            .headers()
            .get("host")
            .and_then(|v| v.to_str().ok())
            .map(str::to_owned);
        let path = req.uri().path().to_owned();
        seen.lock().expect("lock").push(Fetch {
            host,
            path: path.clone(),
            sni: sni.clone(),
        });
        let body = files.lock().expect("lock").get(&path).cloned();
        async move {
            let resp = match body {
                Some(b) => hyper::Response::new(Full::new(Bytes::from(b))),
                None => {
                    let mut r = hyper::Response::new(Full::new(Bytes::from_static(b"not found")));
                    *r.status_mut() = hyper::StatusCode::NOT_FOUND;
                    r
                }
            };
            Ok::<_, std::convert::Infallible>(resp)
        }
    })
}

fn self_signed_acceptor() -> tokio_rustls::TlsAcceptor {
    let certified = rcgen::generate_simple_self_signed(vec!["localhost".to_owned()])
        .expect("self-signed certificate");
    let key = rustls_pki_types::PrivateKeyDer::Pkcs8(certified.signing_key.serialize_der().into());
    let provider = Arc::new(rustls::crypto::aws_lc_rs::default_provider());
    let config = rustls::ServerConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .expect("versions")
        .with_no_client_auth()
        .with_single_cert(vec![certified.cert.der().clone()], key)
        .expect("server config");
    tokio_rustls::TlsAcceptor::from(Arc::new(config))
}

impl Drop for FileServer {
    fn drop(&mut self) {
        if let Some(s) = self.stop.take() {
            let _ = s.send(());
        }
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

/// A directory under the system temp dir, removed on drop.
pub(crate) struct TempDir(pub PathBuf);

impl TempDir {
    pub(crate) fn new(tag: &str) -> Self {
        use std::sync::atomic::{AtomicU32, Ordering};
        static N: AtomicU32 = AtomicU32::new(0);
        let nanos = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.subsec_nanos());
        let p = std::env::temp_dir().join(format!(
            "sandbox-test-{tag}-{}-{}-{nanos}",
            std::process::id(),
            N.fetch_add(1, Ordering::Relaxed)
        ));
        std::fs::create_dir_all(&p).expect("temp dir");
        Self(p)
    }

    pub(crate) fn path(&self) -> &Path {
        &self.0
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// The entries of a ZIP archive by name.
pub(crate) fn unzip(bytes: &[u8]) -> HashMap<String, Vec<u8>> {
    use std::io::Read;
    let mut zip = zip::ZipArchive::new(std::io::Cursor::new(bytes)).expect("a ZIP archive");
    let mut out = HashMap::new();
    for i in 0..zip.len() {
        let mut f = zip.by_index(i).expect("entry");
        let mut data = Vec::new();
        f.read_to_end(&mut data).expect("entry reads");
        out.insert(f.name().to_owned(), data);
    }
    out
}

/// DER of each CERTIFICATE block of a PEM text.
pub(crate) fn pem_certs(pem: &[u8]) -> Vec<Vec<u8>> {
    x509_parser::pem::Pem::iter_from_buffer(pem)
        .map(|p| p.expect("PEM block").contents)
        .collect()
}

/// SubjectPublicKeyInfo DER and DNS names of a certificate.
pub(crate) fn leaf_facts(der: &[u8]) -> (Vec<u8>, Vec<String>, time::OffsetDateTime) {
    let (_, cert) = x509_parser::parse_x509_certificate(der).expect("certificate parses");
    let spki = cert.tbs_certificate.subject_pki.raw.to_vec();
    let mut names = Vec::new();
    if let Ok(Some(san)) = cert.subject_alternative_name() {
        for n in &san.value.general_names {
            if let x509_parser::extensions::GeneralName::DNSName(d) = n {
                names.push((*d).to_owned());
            }
        }
    }
    (spki, names, cert.validity().not_after.to_datetime())
}

/// True when `openssl` can be run.
pub(crate) fn have_openssl() -> bool {
    std::process::Command::new("openssl")
        .arg("version")
        .output()
        .is_ok_and(|o| o.status.success())
}

/// A sandbox with instant validation whose DCV fetches go to a [`FileServer`].
pub(crate) fn env_with_files() -> (Env, FileServer) {
    let files = FileServer::start();
    let env = Env::start(
        SandboxConfig::default()
            .instant(true)
            .dcv_http_port(files.port())
            .dcv_https_port(files.port()),
    );
    (env, files)
}

/// Orders a certificate for `domain` in `family` with HTTP_CSR_HASH, serves the DCV file and
/// waits until it is issued. Returns (token, certificate ID, CSR).
pub(crate) async fn issue(
    env: &Env,
    files: &FileServer,
    family: char,
    domain: &str,
) -> (String, u64, Csr) {
    let token = env.signin(PARTNER).await;
    let product = env.product(&token, family).await;
    let csr = Csr::new(&[domain]);
    let id = env.order(&token, product, &csr, "HTTP_CSR_HASH").await;
    let content = env.details(&token, id).await["dcv_content"]
        .as_str()
        .expect("dcv_content is a string")
        .to_owned();
    files.serve(&csr.dcv_path(), content);
    env.wait_status(&token, id, "issued", Duration::from_secs(30))
        .await;
    (token, id, csr)
}
