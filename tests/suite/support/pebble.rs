//! Pebble, the RFC 8555 test server (Debian's `pebble`), with `pebble-challtestsrv` as its DNS
//! (every name resolves to 127.0.0.1), started for one test on free loopback ports with a TLS
//! certificate made for the run and External Account Binding required. Its `http-01`
//! validations go to the port the test names (where the test serves the files). Without the
//! package the tests skip, and fail when `CI` is set. Both processes are killed on drop.

#![allow(dead_code)]

use std::net::TcpStream;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use base64::Engine;
use rcgen::{
    BasicConstraints, CertificateParams, DnType, ExtendedKeyUsagePurpose, IsCa, Issuer, KeyPair,
    SanType,
};
use rustls_pki_types::pem::PemObject;

use super::webserver::free_port;

/// The key id of the External Account Binding the server knows.
pub(crate) const EAB_KID: &str = "kid-cert-agent";

/// Whether pebble is installed; panics when it is not and `CI` is set.
pub(crate) fn require() -> bool {
    if Path::new("/usr/bin/pebble").is_file() && Path::new("/usr/bin/pebble-challtestsrv").is_file()
    {
        return true;
    }
    let msg = "pebble is not installed (apt-get install pebble)";
    if std::env::var_os("CI").is_some() {
        panic!("{msg}; CI is set, so this test must not be skipped");
    }
    eprintln!("skipping: {msg}");
    false
}

/// A running Pebble and its DNS.
pub(crate) struct Pebble {
    dir: tempfile::TempDir,
    pebble: Child,
    dns: Child,
    /// `https://127.0.0.1:PORT/dir`.
    pub(crate) directory: String,
    /// The root of the TLS certificate Pebble listens with.
    pub(crate) ca_file: PathBuf,
    /// The HMAC key of [`EAB_KID`] (raw bytes).
    pub(crate) eab_key: Vec<u8>,
    /// Pebble's management interface (`https://127.0.0.1:PORT`): its roots and intermediates.
    pub(crate) management: String,
    /// The DNS server's management interface (`http://127.0.0.1:PORT`): `/set-txt`,
    /// `/clear-txt`.
    pub(crate) dns_management: String,
}

impl Pebble {
    /// Starts Pebble validating `http-01` on `http_port` of 127.0.0.1.
    pub(crate) fn start(http_port: u16) -> Self {
        Self::start_with_validity(http_port, None)
    }

    /// [`Pebble::start`], issuing certificates valid for `validity_secs` (Pebble's default:
    /// five years).
    pub(crate) fn start_with_validity(http_port: u16, validity_secs: Option<u64>) -> Self {
        let dir = tempfile::tempdir().expect("temporary directory");
        let (ca_file, cert, key) = tls_files(dir.path());
        let (listen, management, tls, dns) = (free_port(), free_port(), free_port(), free_port());
        let dns_management = free_port();
        let eab_key: Vec<u8> = (0..48).map(|i| (i * 37 + 11) as u8).collect();
        let mut config = serde_json::json!({
            "pebble": {
                "listenAddress": format!("127.0.0.1:{listen}"),
                "managementListenAddress": format!("127.0.0.1:{management}"),
                "certificate": cert,
                "privateKey": key,
                "httpPort": http_port,
                "tlsPort": tls,
                "ocspResponderURL": "",
                "externalAccountBindingRequired": true,
                "externalAccountMACKeys": {
                    EAB_KID: base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(&eab_key),
                },
            }
        });
        if let Some(secs) = validity_secs {
            config["pebble"]["certificateValidityPeriod"] = serde_json::json!(secs);
        }
        let config_path = dir.path().join("pebble.json");
        std::fs::write(&config_path, config.to_string()).expect("write pebble.json");
        let log =
            |name: &str| std::fs::File::create(dir.path().join(name)).expect("create a log file");
        let dns_child = Command::new("/usr/bin/pebble-challtestsrv")
            .args(["-dns01", &format!("127.0.0.1:{dns}")])
            .args(["-http01", "", "-https01", "", "-tlsalpn01", ""])
            .args(["-management", &format!("127.0.0.1:{dns_management}")])
            .args(["-defaultIPv4", "127.0.0.1", "-defaultIPv6", ""])
            .stdin(Stdio::null())
            .stdout(log("challtestsrv.log"))
            .stderr(log("challtestsrv.err"))
            .spawn()
            .expect("start pebble-challtestsrv");
        let pebble = Command::new("/usr/bin/pebble")
            .arg("-config")
            .arg(&config_path)
            .args(["-dnsserver", &format!("127.0.0.1:{dns}"), "-strict"])
            .env("PEBBLE_VA_NOSLEEP", "1")
            .env("PEBBLE_WFE_NONCEREJECT", "0")
            .env("PEBBLE_AUTHZREUSE", "0")
            // One alternate chain (to a second root) beside the default one, offered with
            // every certificate as RFC 8555 §7.4.2 describes.
            .env("PEBBLE_ALTERNATE_ROOTS", "1")
            .stdin(Stdio::null())
            .stdout(log("pebble.log"))
            .stderr(log("pebble.err"))
            .spawn()
            .expect("start pebble");
        let started = Self {
            dir,
            pebble,
            dns: dns_child,
            directory: format!("https://127.0.0.1:{listen}/dir"),
            ca_file,
            eab_key,
            management: format!("https://127.0.0.1:{management}"),
            dns_management: format!("http://127.0.0.1:{dns_management}"),
        };
        started.wait_listening(listen);
        started
    }

    fn wait_listening(&self, port: u16) {
        let deadline = Instant::now() + Duration::from_secs(30);
        while TcpStream::connect(("127.0.0.1", port)).is_err() {
            assert!(
                Instant::now() < deadline,
                "pebble did not listen on {port} within 30 s: {}",
                self.log()
            );
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    /// Writes Pebble's issuing root (from its management interface) to `path`, for a TLS
    /// client checking what a web server serves.
    pub(crate) fn write_root(&self, path: &Path) {
        self.write_root_n(0, path);
    }

    /// The Common Name of Pebble's root `n` (0: the default chain's, 1: the alternate's).
    pub(crate) fn root_name(&self, n: usize) -> String {
        let dir = tempfile::tempdir().expect("temporary directory");
        let path = dir.path().join("root.pem");
        self.write_root_n(n, &path);
        let pem = std::fs::read(&path).expect("read the root");
        let der = rustls_pki_types::CertificateDer::from_pem_slice(&pem).expect("a PEM root");
        let (_, cert) = x509_parser::parse_x509_certificate(der.as_ref()).expect("a root");
        cert.subject()
            .iter_common_name()
            .next()
            .and_then(|cn| cn.as_str().ok())
            .expect("the root's Common Name")
            .to_owned()
    }

    /// [`Pebble::write_root`] for root `n` (0: the default chain's, 1: the alternate's).
    pub(crate) fn write_root_n(&self, n: usize, path: &Path) {
        let port = self
            .management
            .rsplit(':')
            .next()
            .and_then(|p| p.parse::<u16>().ok())
            .expect("the management port");
        self.wait_listening(port);
        let out = Command::new("curl")
            .args(["-sSf", "--max-time", "10", "--cacert"])
            .arg(&self.ca_file)
            .arg(format!("{}/roots/{n}", self.management))
            .output()
            .expect("run curl");
        assert!(
            out.status.success(),
            "Pebble's root: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        std::fs::write(path, &out.stdout).expect("write Pebble's root");
    }

    /// Writes the External Account Binding's HMAC key as a CA hands it out (base64url) to
    /// `path`, mode 0600.
    pub(crate) fn write_eab_key(&self, path: &Path) {
        use std::os::unix::fs::PermissionsExt;
        let text = base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(&self.eab_key);
        std::fs::write(path, format!("{text}\n")).expect("write the HMAC key");
        std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o600)).expect("chmod");
    }

    /// The `[acme.NAME]` table for this Pebble, its HMAC key written to `eab_file`.
    pub(crate) fn config_table(&self, name: &str, eab_file: &Path) -> String {
        self.config_table_at(name, eab_file, &self.directory)
    }

    /// [`Pebble::config_table`] with another directory URL (a proxy in front of Pebble).
    pub(crate) fn config_table_at(&self, name: &str, eab_file: &Path, directory: &str) -> String {
        self.write_eab_key(eab_file);
        format!(
            "\n[acme.{name}]\ndirectory = \"{}\"\ncontact = \"ops@example.test\"\n\
             eab_kid = \"{EAB_KID}\"\neab_hmac_file = \"{}\"\nca_file = \"{}\"\n",
            directory,
            eab_file.display(),
            self.ca_file.display()
        )
    }

    /// How many requests of `path` (e.g. `/order-plz`) Pebble logged.
    pub(crate) fn requests(&self, path: &str) -> usize {
        self.log().lines().filter(|l| l.contains(path)).count()
    }

    /// What Pebble logged so far (for assertion messages).
    pub(crate) fn log(&self) -> String {
        ["pebble.log", "pebble.err"]
            .iter()
            .map(|n| std::fs::read_to_string(self.dir.path().join(n)).unwrap_or_default())
            .collect::<Vec<_>>()
            .join("\n")
    }
}

impl Drop for Pebble {
    fn drop(&mut self) {
        for child in [&mut self.pebble, &mut self.dns] {
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}

/// A CA and a certificate for 127.0.0.1/localhost signed by it: (CA file, cert, key).
fn tls_files(dir: &Path) -> (PathBuf, PathBuf, PathBuf) {
    let ca_key = KeyPair::generate().expect("CA key");
    let mut ca = CertificateParams::new(Vec::<String>::new()).expect("CA params");
    ca.distinguished_name
        .push(DnType::CommonName, "pebble test TLS CA");
    ca.is_ca = IsCa::Ca(BasicConstraints::Constrained(0));
    let ca_cert = ca.self_signed(&ca_key).expect("CA certificate");
    let issuer = Issuer::new(ca, ca_key);
    let key = KeyPair::generate().expect("server key");
    let mut params = CertificateParams::new(Vec::<String>::new()).expect("server params");
    params
        .distinguished_name
        .push(DnType::CommonName, "127.0.0.1");
    params.subject_alt_names = vec![
        SanType::IpAddress(std::net::IpAddr::from([127, 0, 0, 1])),
        SanType::DnsName("localhost".try_into().expect("a DNS name")),
    ];
    params.extended_key_usages = vec![ExtendedKeyUsagePurpose::ServerAuth];
    let cert = params.signed_by(&key, &issuer).expect("server certificate");
    let write = |name: &str, text: String| {
        let p = dir.join(name);
        std::fs::write(&p, text).expect("write a TLS file");
        p
    };
    (
        write("ca.pem", ca_cert.pem()),
        write("cert.pem", cert.pem()),
        write("key.pem", key.serialize_pem()),
    )
}

/// A reverse proxy in front of Pebble that adds what Pebble lacks: Renewal Information (RFC
/// 9773: `renewalInfo` in the directory, each certificate's window answered by the proxy) and
/// profiles (`meta.profiles`). Everything else goes to Pebble unchanged, with the proxy's
/// `Host`, so the URLs Pebble builds and the ones the client signs name the proxy.
pub(crate) struct AriProxy {
    /// `https://127.0.0.1:PORT/dir`.
    pub(crate) directory: String,
    task: tokio::task::JoinHandle<()>,
}

/// What the proxy answers for every renewal window.
#[derive(Clone)]
pub(crate) struct ProxyAnswers {
    /// `suggestedWindow` (RFC 3339 start and end), or a raw body to answer instead.
    pub(crate) window: Result<(String, String), String>,
    /// `meta.profiles`: name → description.
    pub(crate) profiles: Vec<(String, String)>,
}

impl AriProxy {
    pub(crate) async fn start(pebble: &Pebble, answers: ProxyAnswers) -> Self {
        use std::sync::Arc;

        let dir = pebble.dir.path();
        let certs = rustls_pki_types::CertificateDer::pem_file_iter(dir.join("cert.pem"))
            .expect("cert.pem")
            .collect::<Result<Vec<_>, _>>()
            .expect("certificates");
        let key =
            rustls_pki_types::PrivateKeyDer::from_pem_file(dir.join("key.pem")).expect("key.pem");
        let tls = rustls::ServerConfig::builder()
            .with_no_client_auth()
            .with_single_cert(certs, key)
            .expect("TLS configuration");
        let acceptor = tokio_rustls::TlsAcceptor::from(Arc::new(tls));
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
            .await
            .expect("bind");
        let addr = listener.local_addr().expect("address");
        let mut roots = rustls::RootCertStore::empty();
        for cert in rustls_pki_types::CertificateDer::pem_file_iter(&pebble.ca_file).expect("CA") {
            roots.add(cert.expect("CA certificate")).expect("a root");
        }
        let upstream = tokio_rustls::TlsConnector::from(Arc::new(
            rustls::ClientConfig::builder()
                .with_root_certificates(roots)
                .with_no_client_auth(),
        ));
        let pebble_base = pebble
            .directory
            .trim_start_matches("https://")
            .trim_end_matches("/dir")
            .to_owned();
        let state = Arc::new((upstream, pebble_base, addr, answers));
        let task = tokio::spawn(async move {
            loop {
                let Ok((tcp, _)) = listener.accept().await else {
                    return;
                };
                let acceptor = acceptor.clone();
                let state = state.clone();
                tokio::spawn(async move {
                    let Ok(tls) = acceptor.accept(tcp).await else {
                        return;
                    };
                    let service = hyper::service::service_fn(move |req| {
                        let state = state.clone();
                        async move { Ok::<_, std::convert::Infallible>(forward(&state, req).await) }
                    });
                    let _ = hyper::server::conn::http1::Builder::new()
                        .serve_connection(hyper_util::rt::TokioIo::new(tls), service)
                        .await;
                });
            }
        });
        Self {
            directory: format!("https://{addr}/dir"),
            task,
        }
    }
}

impl Drop for AriProxy {
    fn drop(&mut self) {
        self.task.abort();
    }
}

type ProxyState = (
    tokio_rustls::TlsConnector,
    String,
    std::net::SocketAddr,
    ProxyAnswers,
);

async fn forward(
    state: &ProxyState,
    req: hyper::Request<hyper::body::Incoming>,
) -> hyper::Response<http_body_util::Full<bytes::Bytes>> {
    use http_body_util::BodyExt;
    let (client, base, addr, answers) = state;
    let respond = |status: u16, headers: Vec<(String, String)>, body: Vec<u8>| {
        let mut r = hyper::Response::new(http_body_util::Full::new(bytes::Bytes::from(body)));
        *r.status_mut() = hyper::StatusCode::from_u16(status).unwrap_or(hyper::StatusCode::OK);
        for (k, v) in headers {
            if let (Ok(k), Ok(v)) = (
                hyper::header::HeaderName::from_bytes(k.as_bytes()),
                hyper::header::HeaderValue::from_str(&v),
            ) {
                r.headers_mut().append(k, v);
            }
        }
        r
    };
    let path = req
        .uri()
        .path_and_query()
        .map(|p| p.as_str().to_owned())
        .unwrap_or_default();
    if path.starts_with("/renewal-info/") {
        let body = match &answers.window {
            Ok((start, end)) => serde_json::json!({
                "suggestedWindow": {"start": start, "end": end},
                "explanationURL": "https://ca.example.test/why"
            })
            .to_string(),
            Err(raw) => raw.clone(),
        };
        return respond(
            200,
            vec![
                ("content-type".into(), "application/json".into()),
                ("retry-after".into(), "21600".into()),
            ],
            body.into_bytes(),
        );
    }
    let method = req.method().clone();
    let headers = req.headers().clone();
    let body = req
        .into_body()
        .collect()
        .await
        .map(|b| b.to_bytes())
        .unwrap_or_default();
    // What the client's JWS asks to replace (ARI): echoed in the new order, as a CA with
    // Renewal Information does.
    let replaces = serde_json::from_slice::<serde_json::Value>(&body)
        .ok()
        .and_then(|jws| jws["payload"].as_str().map(str::to_owned))
        .and_then(|p| {
            base64::engine::general_purpose::URL_SAFE_NO_PAD
                .decode(p)
                .ok()
        })
        .and_then(|p| serde_json::from_slice::<serde_json::Value>(&p).ok())
        .and_then(|p| p.get("replaces").cloned());
    let Some((status, headers, answer)) =
        exchange(client, base, &method, &path, &headers, addr, &body).await
    else {
        return respond(502, vec![], b"upstream".to_vec());
    };
    let mut body = answer;
    if path == "/dir"
        && let Ok(mut dir) = serde_json::from_slice::<serde_json::Value>(&body)
    {
        dir["renewalInfo"] = format!("https://{addr}/renewal-info").into();
        let profiles: serde_json::Map<String, serde_json::Value> = answers
            .profiles
            .iter()
            .map(|(k, v)| (k.clone(), v.clone().into()))
            .collect();
        if !profiles.is_empty() {
            dir["meta"]["profiles"] = profiles.into();
        }
        body = dir.to_string().into_bytes();
    }
    if let Some(replaces) = replaces
        && let Ok(mut order) = serde_json::from_slice::<serde_json::Value>(&body)
        && order.get("identifiers").is_some()
    {
        order["replaces"] = replaces;
        body = order.to_string().into_bytes();
    }
    respond(status, headers, body)
}

/// One request to Pebble at `base` (`127.0.0.1:PORT`) as HTTP/1.0 with the proxy's `Host`
/// (Pebble then answers without chunks and closes): status, headers, body.
async fn exchange(
    tls: &tokio_rustls::TlsConnector,
    base: &str,
    method: &hyper::Method,
    path: &str,
    headers: &hyper::HeaderMap,
    proxy: &std::net::SocketAddr,
    body: &[u8],
) -> Option<(u16, Vec<(String, String)>, Vec<u8>)> {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let tcp = tokio::net::TcpStream::connect(base).await.ok()?;
    let name = rustls_pki_types::ServerName::try_from("127.0.0.1").ok()?;
    let mut stream = tls.connect(name, tcp).await.ok()?;
    let mut head = format!("{method} {path} HTTP/1.0\r\nHost: {proxy}\r\n");
    for (k, v) in headers {
        if matches!(
            k.as_str(),
            "host" | "connection" | "content-length" | "transfer-encoding"
        ) {
            continue;
        }
        head.push_str(&format!("{k}: {}\r\n", v.to_str().ok()?));
    }
    head.push_str(&format!(
        "Content-Length: {}\r\nConnection: close\r\n\r\n",
        body.len()
    ));
    stream.write_all(head.as_bytes()).await.ok()?;
    stream.write_all(body).await.ok()?;
    let mut raw = Vec::new();
    let _ = stream.read_to_end(&mut raw).await;
    let split = raw.windows(4).position(|w| w == b"\r\n\r\n")?;
    let text = String::from_utf8_lossy(&raw[..split]).into_owned();
    let mut lines = text.split("\r\n");
    let status = lines.next()?.split(' ').nth(1)?.parse().ok()?;
    let headers = lines
        .filter_map(|l| l.split_once(':'))
        .map(|(k, v)| (k.trim().to_ascii_lowercase(), v.trim().to_owned()))
        .filter(|(k, _)| {
            !matches!(
                k.as_str(),
                "content-length" | "transfer-encoding" | "connection"
            )
        })
        .collect();
    Some((status, headers, raw[split + 4..].to_vec()))
}
