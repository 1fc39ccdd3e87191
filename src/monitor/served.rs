//! What the web server was last seen serving: `check --served` and `status --served` shake
//! hands with each certificate's verify address and keep what they saw in
//! `state_dir/served.json`, so that the metrics can report whether the served certificate
//! matches the installed one (`cert_agent_certificate_served_matches_installed`) between
//! those checks (the observations are kept by [`crate::store::served`], beside those of an
//! install's own verification and of a fleet proof).

use std::time::Duration;

use crate::config::CertificateConfig;
pub(super) use crate::store::served::{
    Observation, Served, latest_for, load, load_proved, remember,
};

/// How long `--served` waits for one handshake.
const HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(10);

/// What the certificate's verify address serves for its common name.
pub(super) async fn served(cert: &CertificateConfig) -> Served {
    let Some(address) = cert
        .install
        .verify_address
        .as_deref()
        .filter(|a| !a.is_empty())
    else {
        return Served::NotChecked;
    };
    match crate::install::verify::served_serial(address, cert.common_name(), HANDSHAKE_TIMEOUT)
        .await
    {
        Ok(serial) => Served::Serial(serial.to_string()),
        Err(e) => Served::Failed(e.to_string()),
    }
}
