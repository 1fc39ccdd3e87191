//! Secret hygiene through the binary: a canary password (a sandbox account created for the
//! test), the auth token the sandbox issued, the prolongation token and the private key must be
//! absent from stdout/stderr at `-vv` with `RUST_LOG=trace`, from the environment and argv of
//! every child process (DNS hook, config test, reload, deploy hook, notify command: each writes
//! its environment and argv to a file), from every URL the API received (raw query strings of
//! the sandbox call log), from the state files other than the token cache, and from panic
//! messages.

use crate::support;

use std::fs;
use std::path::Path;

use partner_sandbox::bundle::HostileKind;
use partner_sandbox::state::{AccountSpec, StateConfig};
use partner_sandbox::{Fault, FaultKind, SandboxConfig};
use support::env::{LOGIN, Publish, TestEnv, write_script};
use support::faults::run_env;
use support::scenario::certificate_id;

const CANARY_PASSWORD: &str = "Canary-Pw-7d1e94b2c6";

/// A world whose account's password is the canary.
fn canary_env() -> TestEnv {
    let state = StateConfig {
        accounts: Some(vec![AccountSpec {
            login: LOGIN.into(),
            password: CANARY_PASSWORD.into(),
            role: "partner".into(),
        }]),
        ..StateConfig::default()
    };
    let env = TestEnv::with_sandbox(SandboxConfig::default().instant(true).state(state));
    fs::write(env.path("password"), CANARY_PASSWORD).unwrap();
    env
}

/// A hook that appends its argv and environment to `DIR/hooks/NAME.log` and, for the DNS
/// hook, publishes the record at the sandbox.
fn dumping_hook(env: &TestEnv, name: &str, extra: &str) -> Vec<String> {
    let dir = env.path("hooks");
    fs::create_dir_all(&dir).unwrap();
    let script = dir.join(format!("{name}.sh"));
    let log = dir.join(format!("{name}.log"));
    write_script(
        &script,
        &format!(
            "{{ echo \"argv: $0 $*\"; env; cat 2>/dev/null || true; echo ---; }} >> '{}'\n{extra}",
            log.display()
        ),
    );
    vec![script.to_string_lossy().into_owned()]
}

fn dns_publish(env: &TestEnv) -> String {
    format!(
        r#"CA='{ca}'
BASE='{base}'
case "$CERT_AGENT_DCV_ACTION" in
  add) curl -sS --fail --cacert "$CA" -H 'Content-Type: application/json' -X POST \
      --data "{{\"name\":\"$CERT_AGENT_DCV_RECORD_NAME\",\"rtype\":\"$CERT_AGENT_DCV_RECORD_TYPE\",\"value\":\"$CERT_AGENT_DCV_RECORD_VALUE\"}}" \
      "$BASE/_sandbox/dns" >/dev/null ;;
  remove) curl -sS --fail --cacert "$CA" -H 'Content-Type: application/json' -X POST \
      --data "{{\"name\":\"$CERT_AGENT_DCV_RECORD_NAME\",\"rtype\":\"$CERT_AGENT_DCV_RECORD_TYPE\"}}" \
      "$BASE/_sandbox/dns/remove" >/dev/null ;;
esac
"#,
        ca = env.sandbox.api_ca_path().display(),
        base = env.sandbox.base_url(),
    )
}

/// The base64 body lines of a PEM private key (each long enough to be distinctive).
fn key_fragments(path: &Path) -> Vec<String> {
    fs::read_to_string(path)
        .unwrap()
        .lines()
        .filter(|l| !l.starts_with("-----") && l.len() >= 16)
        .map(str::to_owned)
        .collect()
}

/// Asserts no secret in `text` (named `what` in the message).
#[track_caller]
fn assert_clean(what: &str, text: &str, secrets: &[(&str, String)]) {
    for (name, secret) in secrets {
        assert!(
            !secret.is_empty() && !text.contains(secret.as_str()),
            "the {name} appears in {what}"
        );
    }
}

/// Guards every output channel at the most verbose level during a DNS-validated issuance, an
/// install with config test, reload and deploy hook, and a failed reissue that notifies.
#[test]
fn secrets_stay_out_of_logs_hooks_urls_and_state() {
    let mut env = canary_env();
    env.agent_extra = format!("notify_command = {:?}\n", dumping_hook(&env, "notify", ""));
    let mut spec = env.cert_spec("www", &["www.faults-secrets.test"], "none");
    spec.dcv = Some("dns-txt".into());
    spec.publish = Publish::Nothing;
    spec.dns_hook = Some(dumping_hook(&env, "dns", &dns_publish(&env)));
    spec.configtest_command = Some(dumping_hook(&env, "configtest", ""));
    spec.reload_command = Some(dumping_hook(&env, "reload", ""));
    spec.extra = format!(
        "days = 730\nfamily = \"S\"\ndeploy_hook = {:?}\n",
        dumping_hook(&env, "deploy", "")
    );
    let key_path = spec.files.key.clone();
    env.certs.push(spec);

    let trace = [("RUST_LOG", "trace")];
    let first = run_env(&env, &["-vv", "--json", "renew", "--wait", "30"], &trace);
    first.expect_code(0);
    let key1 = key_fragments(&key_path);

    // A due reissue whose bundle is refused: fails and notifies.
    let id = certificate_id(&env, "www");
    env.sandbox.age_certificate(id, 20).unwrap();
    run_env(&env, &["--json", "install", "www"], &[]).expect_code(0);
    env.sandbox.inject(Fault::new(FaultKind::HostileBundle {
        hostile: HostileKind::WrongKey,
    }));
    let second = run_env(&env, &["-vv", "--json", "renew", "--wait", "30"], &trace);
    second.expect_failure();
    // Status and balance at -vv too.
    let third = run_env(&env, &["-vv", "status"], &trace);
    let fourth = run_env(&env, &["-vv", "balance"], &trace);

    let token = fs::read_to_string(env.state_dir().join(cert_agent::testing::api::TOKEN_FILE))
        .expect("the token cache");
    let token: String = serde_json::from_str::<serde_json::Value>(&token)
        .ok()
        .and_then(|v| v["auth_token"].as_str().map(str::to_owned))
        .unwrap_or(token);
    assert!(token.len() >= 16, "a token was cached");

    let mut secrets: Vec<(&str, String)> = vec![
        ("password", CANARY_PASSWORD.to_owned()),
        ("auth token", token.clone()),
    ];
    for frag in key1.iter().chain(key_fragments(&key_path).iter()) {
        secrets.push(("private key", frag.clone()));
    }

    for (i, out) in [&first, &second, &third, &fourth].iter().enumerate() {
        assert_clean(&format!("the output of run {i}"), &out.text(), &secrets);
    }
    assert!(
        first.stderr.lines().count() > 5,
        "-vv with RUST_LOG=trace logs something:\n{}",
        first.stderr
    );
    for hook in ["dns", "configtest", "reload", "deploy", "notify"] {
        let log = env.path(&format!("hooks/{hook}.log"));
        let text = fs::read_to_string(&log).unwrap_or_else(|_| panic!("the {hook} hook ran"));
        assert_clean(
            &format!("the {hook} hook's environment or argv"),
            &text,
            &secrets,
        );
    }
    for call in env.calls() {
        let url = format!("{}?{}", call.path, call.query);
        assert_clean(&format!("the URL {url}"), &url, &secrets);
    }
    for rel in support::faults::entries(&env.state_dir()) {
        let p = env.state_dir().join(&rel);
        if rel == Path::new(cert_agent::testing::api::TOKEN_FILE) || !p.is_file() {
            continue;
        }
        let text = String::from_utf8_lossy(&fs::read(&p).unwrap()).into_owned();
        assert_clean(
            &format!("state file {}", rel.display()),
            &text,
            &secrets[..2],
        );
    }
    // Files next to the configuration: nothing but the key file itself holds the key.
    for (p, bytes) in env.tree() {
        if p == key_path || p.starts_with(env.path("hooks")) {
            continue;
        }
        if p.to_string_lossy().contains("privkey") || p.to_string_lossy().contains(".key") {
            continue;
        }
        let text = String::from_utf8_lossy(&bytes).into_owned();
        assert_clean(&format!("{}", p.display()), &text, &secrets[1..]);
    }
}

/// Guards the prolongation token: `prolong ID` does not print it; only `--show-token` does;
/// never in a URL or the logs at `-vv`.
#[test]
fn the_prolongation_token_is_printed_only_on_request() {
    let mut env = canary_env();
    let mut spec = env.standalone_spec("www", &["prolong.faults-secrets.test"]);
    spec.extra = "days = 365\n".into();
    env.certs.push(spec);
    run_env(&env, &["--json", "renew", "--wait", "30"], &[]).expect_code(0);
    let id = certificate_id(&env, "www");
    env.sandbox.shorten_subscription(id, 20).unwrap();
    let trace = [("RUST_LOG", "trace")];
    let id_s = id.to_string();
    let hidden = run_env(&env, &["-vv", "prolong", &id_s], &trace);
    hidden.expect_code(0);
    let shown = run_env(&env, &["--json", "prolong", &id_s, "--show-token"], &[]);
    shown.expect_code(0);
    let token = find_token(&shown.json()).unwrap_or_else(|| panic!("{}", shown.describe()));
    assert!(token.len() >= 8);
    assert!(
        !hidden.text().contains(&token),
        "printed without --show-token\n{}",
        hidden.describe()
    );
    for call in env.calls() {
        assert!(!call.query.contains(&token) && !call.path.contains(&token));
    }
}

fn find_token(v: &serde_json::Value) -> Option<String> {
    match v {
        serde_json::Value::Object(o) => o.iter().find_map(|(k, v)| {
            if k.contains("token") {
                v.as_str().map(str::to_owned)
            } else {
                find_token(v)
            }
        }),
        serde_json::Value::Array(a) => a.iter().find_map(find_token),
        _ => None,
    }
}

/// Guards panic messages: the secret types print masked in `Debug` and `Display`, so a panic
/// that formats a value holding one cannot reveal it.
#[test]
fn secrets_are_masked_when_formatted() {
    let s = cert_agent::testing::api::Secret::new(CANARY_PASSWORD.to_owned());
    let shown = format!("{s:?} {s:#?}");
    assert!(!shown.contains(CANARY_PASSWORD), "{shown}");
    let key = cert_agent::testing::crypto::PrivateKey::generate(
        cert_agent::testing::crypto::KeyType::default(),
    )
    .unwrap();
    let pem = key.secret_pem().to_owned();
    let shown = format!("{key:?} {key:#?}");
    for line in pem.lines().filter(|l| !l.starts_with("-----")) {
        assert!(!shown.contains(line), "the key's Debug shows its PEM");
    }
    let result = std::panic::catch_unwind(|| {
        panic!(
            "failed with {:?}",
            cert_agent::testing::api::Secret::new(CANARY_PASSWORD.to_owned())
        )
    });
    let msg = result
        .unwrap_err()
        .downcast_ref::<String>()
        .cloned()
        .unwrap_or_default();
    assert!(!msg.contains(CANARY_PASSWORD), "{msg}");
}
