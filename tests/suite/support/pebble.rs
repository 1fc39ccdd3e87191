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
        let dir = tempfile::tempdir().expect("temporary directory");
        let (ca_file, cert, key) = tls_files(dir.path());
        let (listen, management, tls, dns) = (free_port(), free_port(), free_port(), free_port());
        let dns_management = free_port();
        let eab_key: Vec<u8> = (0..48).map(|i| (i * 37 + 11) as u8).collect();
        let config = serde_json::json!({
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
