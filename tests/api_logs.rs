//! The Partner API client logs every call at the most verbose level without any secret: no
//! password, no auth token, no renewal token. (A test binary of its own: a scoped log
//! subscriber must not race with other tests over tracing's per-call-site cache.)

use std::sync::{Arc, Mutex};

use cert_agent::testing::api::Client;
use partner_sandbox::SandboxConfig;
use partner_sandbox::state::{AccountSpec, StateConfig};

#[path = "suite/support/mod.rs"]
mod support;
use support::api::*;

/// A `MakeWriter` collecting everything logged.
#[derive(Clone, Default)]
struct Captured(Arc<Mutex<Vec<u8>>>);

impl std::io::Write for Captured {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.0.lock().expect("lock").extend_from_slice(buf);
        Ok(buf.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

impl<'a> tracing_subscriber::fmt::MakeWriter<'a> for Captured {
    type Writer = Captured;
    fn make_writer(&'a self) -> Self::Writer {
        self.clone()
    }
}

#[tokio::test]
async fn no_secret_in_logs_at_the_most_verbose_level() {
    const SECRET_PASSWORD: &str = "Pw-7f3kq9-never-logged";
    let accounts = vec![AccountSpec {
        login: PARTNER.into(),
        password: SECRET_PASSWORD.into(),
        role: "partner".into(),
    }];
    let env = Env::with(SandboxConfig::default().instant(true).state(StateConfig {
        accounts: Some(accounts),
        ..StateConfig::default()
    }));
    let captured = Captured::default();
    let subscriber = tracing_subscriber::fmt()
        .with_max_level(tracing::Level::TRACE)
        .with_writer(captured.clone())
        .finish();
    let _guard = tracing::subscriber::set_default(subscriber);

    let client = Client::new(env.options(PARTNER, SECRET_PASSWORD)).expect("client");
    let id = place_order(&client, "logs.example.com").await;
    let prolong = client.prolong(id).await.expect("prolong");
    env.sandbox.rotate_token(PARTNER).expect("rotate");
    client.balance().await.expect("re-signin");
    let token = env.cached_token(PARTNER);

    let logs = String::from_utf8(captured.0.lock().expect("lock").clone()).expect("utf-8");
    assert!(
        logs.contains("partner API call"),
        "calls are logged: {logs}"
    );
    assert!(!logs.contains(SECRET_PASSWORD));
    assert!(!logs.contains(&token));
    if let Some(t) = prolong.prolongation_token {
        assert!(!logs.contains(t.expose()));
    }
}
