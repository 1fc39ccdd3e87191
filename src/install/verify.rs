//! Verification of the served certificate: a TLS handshake to the configured address with SNI
//! set to the common name, accepting whatever chain is presented (the handshake signature is
//! still checked against the presented leaf), and a comparison of the served leaf's serial with
//! the one just installed.

use std::sync::Arc;
use std::time::{Duration, Instant};

use rustls::DigitallySignedStruct;
use rustls::client::danger::{HandshakeSignatureValid, ServerCertVerified, ServerCertVerifier};
use rustls::crypto::{CryptoProvider, WebPkiSupportedAlgorithms};
use rustls::pki_types::{CertificateDer, ServerName, UnixTime};

use super::error::InstallError;
use crate::crypto::Serial;

/// Default address for the post-reload handshake.
pub(crate) const DEFAULT_VERIFY_ADDRESS: &str = "127.0.0.1:443";
/// Default time a reloaded server gets to present the new certificate.
pub(crate) const DEFAULT_VERIFY_TIMEOUT: Duration = Duration::from_secs(10);
/// Limit for one connection attempt and handshake.
const ATTEMPT_TIMEOUT: Duration = Duration::from_secs(5);
/// Pause between attempts while a reload settles: the first after `FIRST_PAUSE`, doubling up
/// to `RETRY_PAUSE`. A reloaded nginx or Apache serves from new workers within tens of
/// milliseconds; a fixed 200 ms pause after a first handshake that met the old workers made
/// most installs wait 200 ms for nothing. The check passes on the first handshake with the
/// new certificate: nginx's old worker may still take some connections for about 0.1 s
/// after that (measured on loopback, longer on a loaded host), with the old certificate,
/// still valid.
const RETRY_PAUSE: Duration = Duration::from_millis(200);
const FIRST_PAUSE: Duration = Duration::from_millis(10);

/// Where and how to check the served certificate after a reload.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct VerifyTarget {
    /// `host:port` to connect to (`verify_address`).
    pub address: String,
    /// SNI sent: the certificate's common name.
    pub server_name: String,
    /// How long a reloaded server may keep serving the old certificate (reloads are
    /// asynchronous: old workers finish while new ones start).
    pub timeout: Duration,
}

impl VerifyTarget {
    /// A target at `address` for `server_name` with [`DEFAULT_VERIFY_TIMEOUT`].
    pub fn new(address: impl Into<String>, server_name: impl Into<String>) -> Self {
        VerifyTarget {
            address: address.into(),
            server_name: server_name.into(),
            timeout: DEFAULT_VERIFY_TIMEOUT,
        }
    }
}

/// Accepts any certificate chain: we only want to know which leaf is served. The handshake
/// signature is still verified with the presented leaf's key.
#[derive(Debug)]
struct AcceptAnyChain {
    algorithms: WebPkiSupportedAlgorithms,
}

impl ServerCertVerifier for AcceptAnyChain {
    fn verify_server_cert(
        &self,
        _end_entity: &CertificateDer<'_>,
        _intermediates: &[CertificateDer<'_>],
        _server_name: &ServerName<'_>,
        _ocsp_response: &[u8],
        _now: UnixTime,
    ) -> Result<ServerCertVerified, rustls::Error> {
        Ok(ServerCertVerified::assertion())
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls12_signature(message, cert, dss, &self.algorithms)
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls13_signature(message, cert, dss, &self.algorithms)
    }

    fn supported_verify_schemes(&self) -> Vec<rustls::SignatureScheme> {
        self.algorithms.supported_schemes()
    }
}

fn client_config() -> Result<rustls::ClientConfig, rustls::Error> {
    let provider: CryptoProvider = rustls::crypto::aws_lc_rs::default_provider();
    let verifier = Arc::new(AcceptAnyChain {
        algorithms: provider.signature_verification_algorithms,
    });
    Ok(
        rustls::ClientConfig::builder_with_provider(Arc::new(provider))
            .with_safe_default_protocol_versions()?
            .dangerous()
            .with_custom_certificate_verifier(verifier)
            .with_no_client_auth(),
    )
}

/// Connects to `address`, handshakes with SNI `server_name`, and returns the DER of the leaf
/// the server presents.
pub(crate) async fn served_leaf(
    address: &str,
    server_name: &str,
    timeout: Duration,
) -> Result<Vec<u8>, InstallError> {
    let mut chain = served_chain(address, server_name, timeout).await?;
    Ok(chain.swap_remove(0))
}

/// Connects to `address`, handshakes with SNI `server_name`, and returns the DER of every
/// certificate the server presents, the leaf first (never empty).
pub(crate) async fn served_chain(
    address: &str,
    server_name: &str,
    timeout: Duration,
) -> Result<Vec<Vec<u8>>, InstallError> {
    let fail = |reason: String| InstallError::Handshake {
        address: address.to_string(),
        server_name: server_name.to_string(),
        reason,
    };
    let config = client_config().map_err(|e| fail(e.to_string()))?;
    let name = ServerName::try_from(server_name.to_string())
        .map_err(|e| fail(format!("invalid server name: {e}")))?;
    let connector = tokio_rustls::TlsConnector::from(Arc::new(config));
    let handshake = async {
        let tcp = tokio::net::TcpStream::connect(address)
            .await
            .map_err(|e| fail(format!("connect: {e}")))?;
        let tls = connector
            .connect(name, tcp)
            .await
            .map_err(|e| fail(e.to_string()))?;
        let (_, conn) = tls.get_ref();
        conn.peer_certificates()
            .filter(|c| !c.is_empty())
            .map(|c| c.iter().map(|d| d.as_ref().to_vec()).collect())
            .ok_or_else(|| fail("the server presented no certificate".into()))
    };
    tokio::time::timeout(timeout, handshake)
        .await
        .map_err(|_| fail(format!("no answer within {} s", timeout.as_secs_f32())))?
}

/// The serial of the leaf served at `address` for `server_name`.
pub async fn served_serial(
    address: &str,
    server_name: &str,
    timeout: Duration,
) -> Result<Serial, InstallError> {
    let der = served_leaf(address, server_name, timeout).await?;
    serial_of_der(&der).map_err(|reason| InstallError::Handshake {
        address: address.to_string(),
        server_name: server_name.to_string(),
        reason: format!("unreadable certificate: {reason}"),
    })
}

/// Waits until `target` serves the certificate with serial `expected` (reloads settle
/// asynchronously) and fails with the last observation when `target.timeout` runs out.
pub async fn verify_served(target: &VerifyTarget, expected: &Serial) -> Result<(), InstallError> {
    let deadline = Instant::now() + target.timeout;
    // A serial seen is worth more than a later handshake that timed out on a busy host: the
    // error names the certificate that was served, when one was.
    let mut mismatch = None;
    let mut pause = FIRST_PAUSE;
    loop {
        let remaining = deadline.saturating_duration_since(Instant::now());
        let attempt = served_serial(
            &target.address,
            &target.server_name,
            remaining.clamp(Duration::from_millis(500), ATTEMPT_TIMEOUT),
        )
        .await;
        let err = match attempt {
            Ok(served) if served == *expected => return Ok(()),
            Ok(served) => {
                let e = InstallError::SerialMismatch {
                    address: target.address.clone(),
                    server_name: target.server_name.clone(),
                    served: served.to_string(),
                    expected: expected.to_string(),
                };
                mismatch = Some(e.clone());
                e
            }
            Err(e) => e,
        };
        if Instant::now() + pause >= deadline {
            return Err(mismatch.unwrap_or(err));
        }
        tracing::debug!("waiting for the new certificate to be served: {err}");
        tokio::time::sleep(pause).await;
        pause = (pause * 2).min(RETRY_PAUSE);
    }
}

/// The serial of the first certificate in `pem`.
pub fn serial_of_pem(pem: &[u8]) -> Result<Serial, String> {
    let (_, pem) = x509_parser::pem::parse_x509_pem(pem).map_err(|e| e.to_string())?;
    if pem.label != "CERTIFICATE" {
        return Err(format!("expected a CERTIFICATE, found {}", pem.label));
    }
    serial_of_der(&pem.contents)
}

/// The serial of a DER certificate.
pub(crate) fn serial_of_der(der: &[u8]) -> Result<Serial, String> {
    let (_, cert) = x509_parser::parse_x509_certificate(der).map_err(|e| e.to_string())?;
    Ok(Serial::from_bytes(cert.raw_serial()))
}

#[cfg(test)]
mod tests {
    use super::*;
    use rustls::pki_types::PrivateKeyDer;
    use rustls::pki_types::pem::PemObject;

    /// A TLS server on 127.0.0.1:0 presenting a fresh self-signed certificate; returns its
    /// address and the certificate's serial.
    async fn tls_server() -> (String, Serial) {
        let ck = rcgen::generate_simple_self_signed(vec!["a.test".to_string()]).unwrap();
        let serial = serial_of_pem(ck.cert.pem().as_bytes()).unwrap();
        let key = PrivateKeyDer::from_pem_slice(ck.signing_key.serialize_pem().as_bytes()).unwrap();
        let config = rustls::ServerConfig::builder_with_provider(Arc::new(
            rustls::crypto::aws_lc_rs::default_provider(),
        ))
        .with_safe_default_protocol_versions()
        .unwrap()
        .with_no_client_auth()
        .with_single_cert(vec![ck.cert.der().clone()], key)
        .unwrap();
        let acceptor = tokio_rustls::TlsAcceptor::from(Arc::new(config));
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap().to_string();
        tokio::spawn(async move {
            while let Ok((tcp, _)) = listener.accept().await {
                let acceptor = acceptor.clone();
                tokio::spawn(async move {
                    let _ = acceptor.accept(tcp).await;
                });
            }
        });
        (addr, serial)
    }

    #[tokio::test]
    async fn reads_the_served_serial_and_detects_a_mismatch() {
        let (addr, serial) = tls_server().await;
        assert_eq!(
            served_serial(&addr, "a.test", Duration::from_secs(5))
                .await
                .unwrap(),
            serial
        );
        let target = VerifyTarget {
            address: addr.clone(),
            server_name: "a.test".into(),
            timeout: Duration::from_millis(300),
        };
        verify_served(&target, &serial).await.unwrap();
        let mut leading_zero = vec![0u8];
        leading_zero.extend_from_slice(serial.as_bytes());
        verify_served(&target, &Serial::from_bytes(&leading_zero))
            .await
            .unwrap();

        let err = verify_served(&target, &Serial::from_bytes(&[1, 2, 3]))
            .await
            .unwrap_err();
        assert!(matches!(err, InstallError::SerialMismatch { .. }), "{err}");
        assert!(err.to_string().contains(&serial.to_string()), "{err}");
    }

    #[tokio::test]
    async fn nothing_listening_is_a_handshake_error_naming_the_address() {
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port();
        let target = VerifyTarget {
            address: format!("127.0.0.1:{port}"),
            server_name: "a.test".into(),
            timeout: Duration::from_millis(300),
        };
        let err = verify_served(&target, &Serial::from_bytes(&[1]))
            .await
            .unwrap_err();
        assert!(matches!(err, InstallError::Handshake { .. }), "{err}");
        assert!(err.to_string().contains(&target.address), "{err}");
    }
}
