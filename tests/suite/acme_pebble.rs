//! The ACME issuer against a real ACME server: Debian's Pebble (External Account Binding
//! required, `-strict`), its DNS pointing every name at 127.0.0.1, and its `http-01`
//! validations fetched over real HTTP from the agent's standalone DCV server.

use std::net::SocketAddr;

use cert_agent::testing::bundle::{Expected, ServerKind, validate_chain};
use cert_agent::testing::crypto::{Csr, KeyType, PrivateKey};
use cert_agent::testing::dcv::Challenge;
use cert_agent::testing::dcv::hook::{self, DnsHook, HookAction};
use cert_agent::testing::dcv::standalone::StandaloneServer;
use cert_agent::testing::issuer::acme::{self, AcmeError, Directory, Method};

use crate::support::pebble::{self, EAB_KID, Pebble};

fn domains() -> Vec<String> {
    vec![
        "www.example.test".to_owned(),
        "shop.example.test".to_owned(),
    ]
}

async fn server() -> StandaloneServer {
    StandaloneServer::start(SocketAddr::from(([127, 0, 0, 1], 0)))
        .await
        .expect("standalone server on 127.0.0.1:0")
}

fn directory(p: &Pebble, eab: bool) -> Directory {
    Directory {
        url: p.directory.clone(),
        contact: vec!["mailto:ops@example.test".to_owned()],
        eab: eab.then(|| (EAB_KID.to_owned(), p.eab_key.clone())),
        ca_file: Some(p.ca_file.clone()),
    }
}

/// Guards the ACME issuer's whole path against a real CA: the account registered once with
/// External Account Binding and kept 0600 (a second use reads it, no second registration),
/// an order for two names whose `http-01` files the standalone server serves as the CA
/// fetches them, the order finalized with a CSR of a key made here, and the chain the CA
/// returns accepted by the bundle checks for that key and those names.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_order_is_validated_over_http_and_finalized_with_our_csr() {
    if !pebble::require() {
        return;
    }
    let server = server().await;
    let pebble = Pebble::start(server.local_addr().port());
    let state = tempfile::tempdir().unwrap();
    let account_dir = state.path().join("acme").join("pebble");
    let account = acme::account(&directory(&pebble, true), &account_dir)
        .await
        .unwrap_or_else(|e| panic!("{e}\n{}", pebble.log()));
    let file = account_dir.join(acme::ACCOUNT_FILE);
    let mode = std::fs::metadata(&file).unwrap().permissions();
    assert_eq!(
        std::os::unix::fs::PermissionsExt::mode(&mode) & 0o777,
        0o600
    );
    let again = acme::account(&directory(&pebble, true), &account_dir)
        .await
        .unwrap();
    assert_eq!(again.id(), account.id(), "the kept account is reused");

    let names = domains();
    let key = PrivateKey::generate(KeyType::EcdsaP256).unwrap();
    let csr = Csr::new(&key, &names).unwrap();
    let first = acme::place(&account, &names, Method::Http)
        .await
        .unwrap_or_else(|e| panic!("{e}\n{}", pebble.log()));
    // A run stopped right after placing the order: the next one resumes it by its URL.
    let url = first.order.url().to_owned();
    let first_challenges = first.challenges.clone();
    drop(first);
    let mut placed = acme::resume(&account, &url, &names, Method::Http)
        .await
        .unwrap();
    assert_eq!(placed.order.url(), url);
    let by_text = |c: &Challenge| format!("{c:?}");
    let (mut before, mut after) = (first_challenges, placed.challenges.clone());
    before.sort_by_key(by_text);
    after.sort_by_key(by_text);
    assert_eq!(after, before, "the same order, the same files");
    assert_eq!(placed.challenges.len(), 2, "one file per name");
    let mut served = Vec::new();
    for challenge in &placed.challenges {
        let Challenge::Http(http) = challenge else {
            panic!("not an HTTP challenge: {challenge:?}");
        };
        assert_eq!(http.domains.len(), 1);
        assert!(
            http.file
                .url_path()
                .starts_with("/.well-known/acme-challenge/")
        );
        assert!(http.file.content().starts_with(http.file.name()));
        server.add_file(&http.file);
        served.push(http.domains[0].clone());
    }
    served.sort();
    let mut expected_names = names.clone();
    expected_names.sort();
    assert_eq!(served, expected_names);

    let chain = acme::finish(&mut placed.order, &csr.der, Method::Http)
        .await
        .unwrap_or_else(|e| panic!("{e}\n{}", pebble.log()));
    let spki = key.public_key_der();
    let bundle = validate_chain(
        chain.as_bytes(),
        ServerKind::Nginx,
        &Expected {
            public_key_der: &spki,
            domains: &names,
            now: time::OffsetDateTime::now_utc(),
            trust_anchors: &[],
        },
    )
    .unwrap_or_else(|e| panic!("the chain from Pebble: {e}"));
    let mut issued = bundle.dns_names.clone();
    issued.sort();
    assert_eq!(issued, expected_names);
    assert!(!bundle.chain_der.is_empty(), "the intermediate comes along");
    server.shutdown().await;
}

/// Guards the errors an operator sees: a directory that requires External Account Binding
/// asked without it names the problem; a validation the CA could not complete (nothing
/// served) names each identifier and the CA's reason; no account file is left by a failed
/// registration.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_refused_registration_and_a_failed_validation_say_what_and_which() {
    if !pebble::require() {
        return;
    }
    let server = server().await;
    let pebble = Pebble::start(server.local_addr().port());
    let state = tempfile::tempdir().unwrap();

    let no_eab = state.path().join("no-eab");
    let err = acme::account(&directory(&pebble, false), &no_eab)
        .await
        .err()
        .expect("registration without EAB is refused");
    let text = err.to_string();
    assert!(
        matches!(err, AcmeError::Directory { .. }) && text.contains("externalAccountRequired"),
        "{text}"
    );
    assert!(!no_eab.join(acme::ACCOUNT_FILE).exists());

    let account = acme::account(&directory(&pebble, true), &state.path().join("eab"))
        .await
        .unwrap();
    let names = domains();
    let key = PrivateKey::generate(KeyType::EcdsaP256).unwrap();
    let csr = Csr::new(&key, &names).unwrap();
    let mut placed = acme::place(&account, &names, Method::Http).await.unwrap();
    // Nothing is served: the CA's fetches find 404.
    let err = acme::finish(&mut placed.order, &csr.der, Method::Http)
        .await
        .expect_err("validation fails");
    let text = err.to_string();
    eprintln!("a failed validation: {text}");
    assert!(matches!(err, AcmeError::Order { .. }), "{text}");
    assert!(
        text.contains("www.example.test") || text.contains("shop.example.test"),
        "{text}"
    );
    assert!(
        text.contains("unauthorized") || text.contains("404"),
        "{text}"
    );
    assert!(!text.chars().any(char::is_control), "{text}");

    // A directory URL that is plain HTTP off loopback is refused before anything is sent.
    let mut plain = directory(&pebble, true);
    plain.url = "http://acme.example.test/dir".to_owned();
    let err = acme::account(&plain, &state.path().join("plain"))
        .await
        .err()
        .expect("plain http refused");
    assert!(matches!(err, AcmeError::Config(_)), "{err}");
    server.shutdown().await;
}

/// A directory answering `body` with `status` to every request, on plain HTTP on loopback
/// (allowed there only), until dropped.
async fn fake_directory(status: u16, body: Vec<u8>) -> (String, tokio::task::JoinHandle<()>) {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}/dir", listener.local_addr().unwrap());
    let task = tokio::spawn(async move {
        for _ in 0..20 {
            let Ok((mut s, _)) = listener.accept().await else {
                return;
            };
            let mut head = [0u8; 4096];
            let _ = s.read(&mut head).await;
            let answer = format!(
                "HTTP/1.1 {status} X\r\ncontent-type: application/json\r\ncontent-length: {}\r\nconnection: close\r\n\r\n",
                body.len()
            );
            let _ = s.write_all(answer.as_bytes()).await;
            let _ = s.write_all(&body).await;
        }
    });
    (url, task)
}

/// A directory that accepts the connection, reads the request and never answers: the account's
/// set-up ends with "no answer in time" after the exchange's time limit (30 s), naming the
/// directory, not a hang; no account file is left.
#[tokio::test]
async fn a_silent_directory_is_no_answer_in_time_not_a_hang() {
    use tokio::io::AsyncReadExt;
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}/dir", listener.local_addr().unwrap());
    let task = tokio::spawn(async move {
        let mut held = Vec::new();
        while let Ok((mut s, _)) = listener.accept().await {
            let mut head = [0u8; 4096];
            let _ = s.read(&mut head).await;
            held.push(s);
        }
    });
    let state = tempfile::tempdir().unwrap();
    let dir = Directory {
        url: url.clone(),
        contact: vec![],
        eab: None,
        ca_file: None,
    };
    let started = std::time::Instant::now();
    let err = acme::account(&dir, state.path())
        .await
        .err()
        .expect("a silent directory is an error");
    let took = started.elapsed();
    let text = err.to_string();
    assert!(
        text.contains(&url) && text.contains("no answer in time"),
        "{text}"
    );
    assert!(took < std::time::Duration::from_secs(45), "took {took:?}");
    assert!(!state.path().join(acme::ACCOUNT_FILE).exists());
    task.abort();
}

/// Guards the ACME client against a hostile directory: garbage, a problem document full of
/// terminal escapes, and an answer larger than the cap each end the account's set-up with an
/// error that names the directory, shows nothing raw, and leaves no account file.
#[tokio::test]
async fn a_garbage_huge_or_escaping_directory_is_a_clear_error() {
    let state = tempfile::tempdir().unwrap();
    let escapes = br#"{"type":"urn:ietf:params:acme:error:malformed","detail":"\u001b[2J\u001b]0;owned\u0007 bad"}"#;
    let cases: Vec<(&str, u16, Vec<u8>)> = vec![
        ("garbage", 200, b"<html>not a directory</html>".to_vec()),
        ("escapes", 400, escapes.to_vec()),
        ("huge", 200, vec![b' '; acme::http::MAX_ANSWER_BYTES + 1]),
    ];
    for (what, status, body) in cases {
        let (url, task) = fake_directory(status, body).await;
        let dir = Directory {
            url: url.clone(),
            contact: vec![],
            eab: None,
            ca_file: None,
        };
        let at = state.path().join(what);
        let err = acme::account(&dir, &at)
            .await
            .err()
            .unwrap_or_else(|| panic!("{what}: accepted"));
        let text = err.to_string();
        assert!(text.contains(&url), "{what}: {text}");
        assert!(!text.chars().any(char::is_control), "{what}: {text}");
        if what == "huge" {
            assert!(text.contains("larger than"), "{text}");
        }
        assert!(!at.join(acme::ACCOUNT_FILE).exists(), "{what}");
        task.abort();
    }

    // The kept account file: garbage, loose permissions, and one registered with another
    // directory (put there to make this host use someone else's account) are refused before
    // anything is sent, naming the file and never showing the key.
    let dir = Directory {
        url: "https://acme.example.test/dir".to_owned(),
        contact: vec![],
        eab: None,
        ca_file: None,
    };
    let foreign = serde_json::json!({
        "directory": "https://other-ca.example.test/dir",
        "credentials": {"id": "https://other-ca.example.test/acct/1",
                        "key_pkcs8": "c2VjcmV0LWtleS1tYXRlcmlhbA",
                        "directory": "https://other-ca.example.test/dir"}
    })
    .to_string();
    for (what, content, mode) in [
        ("garbage", "{not json".to_owned(), 0o600),
        ("loose", foreign.clone(), 0o644),
        ("another directory", foreign, 0o600),
    ] {
        let at = state
            .path()
            .join(format!("kept-{}", what.replace(' ', "-")));
        std::fs::create_dir_all(&at).unwrap();
        let file = at.join(acme::ACCOUNT_FILE);
        std::fs::write(&file, &content).unwrap();
        std::fs::set_permissions(&file, std::os::unix::fs::PermissionsExt::from_mode(mode))
            .unwrap();
        let err = acme::account(&dir, &at)
            .await
            .err()
            .unwrap_or_else(|| panic!("{what}: accepted"));
        let text = err.to_string();
        assert!(
            matches!(err, AcmeError::AccountFile { .. }),
            "{what}: {text}"
        );
        assert!(text.contains(&file.display().to_string()), "{what}: {text}");
        assert!(!text.contains("c2VjcmV0"), "{what}: {text}");
    }
}

/// Guards `dns-01` through the DNS hook runner, for a wildcard and its base name (two values
/// under one `_acme-challenge` name), and revocation: a real hook program puts the records
/// into Pebble's DNS, the chain covers both names, and the revoked certificate is reported
/// revoked by the CA.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_wildcard_is_validated_by_dns_through_the_hook_and_revoked() {
    if !pebble::require() {
        return;
    }
    let server = server().await;
    let pebble = Pebble::start(server.local_addr().port());
    let state = tempfile::tempdir().unwrap();
    let account = acme::account(&directory(&pebble, true), &state.path().join("acme"))
        .await
        .unwrap();
    let hook_path = state.path().join("dns-hook");
    std::fs::write(
        &hook_path,
        format!(
            "#!/bin/sh\nset -e\ncase \"$CERT_AGENT_DCV_ACTION\" in\n\
             add) body='{{\"host\":\"'\"$CERT_AGENT_DCV_RECORD_NAME\"'.\",\"value\":\"'\"$CERT_AGENT_DCV_RECORD_VALUE\"'\"}}'; path=set-txt;;\n\
             *) body='{{\"host\":\"'\"$CERT_AGENT_DCV_RECORD_NAME\"'.\"}}'; path=clear-txt;;\n\
             esac\n\
             exec curl -sSf -X POST -d \"$body\" {}/$path\n",
            pebble.dns_management
        ),
    )
    .unwrap();
    std::fs::set_permissions(
        &hook_path,
        std::os::unix::fs::PermissionsExt::from_mode(0o755),
    )
    .unwrap();
    let hook = DnsHook {
        argv: vec![hook_path.display().to_string()],
        timeout: std::time::Duration::from_secs(20),
    };

    let names = vec!["*.example.test".to_owned(), "example.test".to_owned()];
    let err = acme::place(&account, &names, Method::Http)
        .await
        .err()
        .expect("a wildcard over http-01 is refused before ordering");
    assert!(err.to_string().contains("dns-01"), "{err}");

    let key = PrivateKey::generate(KeyType::EcdsaP256).unwrap();
    let csr = Csr::new(&key, &names).unwrap();
    let mut placed = acme::place(&account, &names, Method::Dns)
        .await
        .unwrap_or_else(|e| panic!("{e}\n{}", pebble.log()));
    assert_eq!(placed.challenges.len(), 2);
    for challenge in &placed.challenges {
        let Challenge::Dns(record) = challenge else {
            panic!("not a DNS challenge: {challenge:?}");
        };
        assert_eq!(record.name, "_acme-challenge.example.test");
        assert_eq!(record.value.len(), 43, "base64url SHA-256");
        hook::run(&hook, HookAction::Add, record, "wild")
            .await
            .unwrap_or_else(|e| panic!("{e}"));
    }
    let chain = acme::finish(&mut placed.order, &csr.der, Method::Dns)
        .await
        .unwrap_or_else(|e| panic!("{e}\n{}", pebble.log()));
    for challenge in &placed.challenges {
        if let Challenge::Dns(record) = challenge {
            hook::run(&hook, HookAction::Remove, record, "wild")
                .await
                .unwrap();
        }
    }
    let spki = key.public_key_der();
    let bundle = validate_chain(
        chain.as_bytes(),
        ServerKind::Nginx,
        &Expected {
            public_key_der: &spki,
            domains: &names,
            now: time::OffsetDateTime::now_utc(),
            trust_anchors: &[],
        },
    )
    .unwrap();
    assert!(bundle.dns_names.contains(&"*.example.test".to_owned()));

    acme::revoke(
        &account,
        &bundle.leaf_der,
        Some(instant_acme::RevocationReason::Superseded),
    )
    .await
    .unwrap_or_else(|e| panic!("{e}\n{}", pebble.log()));
    let again = acme::revoke(&account, &bundle.leaf_der, None).await;
    let err = again.expect_err("a second revocation is refused");
    assert!(err.to_string().contains("alreadyRevoked"), "{err}");
    server.shutdown().await;
}

/// Issues one certificate for `names` over http-01 through `directory`; its leaf's DER.
async fn issue_one(
    server: &StandaloneServer,
    account: &instant_acme::Account,
    names: &[String],
    options: &acme::Options,
) -> Vec<u8> {
    let key = PrivateKey::generate(KeyType::EcdsaP256).unwrap();
    let csr = Csr::new(&key, names).unwrap();
    let mut placed = acme::place_with(account, names, Method::Http, options)
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    for challenge in &placed.challenges {
        if let Challenge::Http(http) = challenge {
            server.add_file(&http.file);
        }
    }
    let chain = acme::finish(&mut placed.order, &csr.der, Method::Http)
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    let spki = key.public_key_der();
    validate_chain(
        chain.as_bytes(),
        ServerKind::Nginx,
        &Expected {
            public_key_der: &spki,
            domains: names,
            now: time::OffsetDateTime::now_utc(),
            trust_anchors: &[],
        },
    )
    .unwrap()
    .leaf_der
}

/// Guards Renewal Information and profiles, with Pebble behind a proxy that adds both: the
/// window the directory suggests is read for an issued certificate (with `Retry-After`, kept
/// within bounds) and the renewal time falls inside it; the renewal order names the
/// certificate it replaces; a profile the directory advertises is asked for, one it does not
/// is an error naming the advertised ones; a window that ends before it starts, or garbage, is
/// an error; and straight against Pebble (no ARI, no profiles) the agent's own rule applies.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn renewal_information_and_profiles_are_used_where_offered() {
    use crate::support::pebble::{AriProxy, ProxyAnswers};
    if !pebble::require() {
        return;
    }
    let server = server().await;
    let pebble = Pebble::start(server.local_addr().port());
    let state = tempfile::tempdir().unwrap();
    let names = vec!["ari.example.test".to_owned()];
    let answers = ProxyAnswers {
        window: Ok((
            "2030-01-10T00:00:00Z".to_owned(),
            "2030-01-12T00:00:00Z".to_owned(),
        )),
        profiles: vec![
            ("classic".to_owned(), "the default".to_owned()),
            ("shortlived".to_owned(), "6 days".to_owned()),
        ],
    };
    let proxy = AriProxy::start(&pebble, answers.clone()).await;
    let mut via_proxy = directory(&pebble, true);
    via_proxy.url = proxy.directory.clone();
    let account = acme::account(&via_proxy, &state.path().join("proxy"))
        .await
        .unwrap_or_else(|e| panic!("{e}\n{}", pebble.log()));

    let err = acme::check_profile(&account, "tiny").expect_err("not advertised");
    let text = err.to_string();
    assert!(
        text.contains("\"classic\"") && text.contains("\"shortlived\""),
        "{text}"
    );
    acme::check_profile(&account, "shortlived").unwrap();

    let leaf = issue_one(
        &server,
        &account,
        &names,
        &acme::Options {
            profile: Some("shortlived".to_owned()),
            replaces: None,
        },
    )
    .await;
    let window = acme::renewal_window(&account, &leaf)
        .await
        .unwrap()
        .expect("the proxy offers Renewal Information");
    assert_eq!(window.start, time::macros::datetime!(2030-01-10 00:00 UTC));
    assert_eq!(window.end, time::macros::datetime!(2030-01-12 00:00 UTC));
    assert_eq!(window.retry_after, std::time::Duration::from_secs(21600));
    let now = time::OffsetDateTime::now_utc();
    let at = acme::renew_at(&window, now, 0.25);
    assert!(at >= window.start && at < window.end, "{at}");
    // The renewal says what it replaces (Pebble ignores the field; the order goes through).
    let renewed = issue_one(
        &server,
        &account,
        &names,
        &acme::Options {
            profile: None,
            replaces: Some(leaf.clone()),
        },
    )
    .await;
    assert_ne!(renewed, leaf);

    for (what, raw) in [
        (
            "backwards",
            r#"{"suggestedWindow":{"start":"2030-01-12T00:00:00Z","end":"2030-01-10T00:00:00Z"}}"#,
        ),
        ("garbage", "<html>no</html>"),
    ] {
        let broken = AriProxy::start(
            &pebble,
            ProxyAnswers {
                window: Err(raw.to_owned()),
                profiles: vec![],
            },
        )
        .await;
        let mut dir = directory(&pebble, true);
        dir.url = broken.directory.clone();
        let acct = acme::account(&dir, &state.path().join(what)).await.unwrap();
        let err = acme::renewal_window(&acct, &leaf).await.expect_err(what);
        assert!(matches!(err, AcmeError::Directory { .. }), "{what}: {err}");
    }

    // Pebble itself: no Renewal Information, no profiles.
    let plain = acme::account(&directory(&pebble, true), &state.path().join("plain"))
        .await
        .unwrap();
    assert_eq!(acme::renewal_window(&plain, &leaf).await.unwrap(), None);
    let err = acme::check_profile(&plain, "shortlived").expect_err("no profiles");
    assert!(err.to_string().contains("advertises no profiles"), "{err}");
    let again = issue_one(
        &server,
        &plain,
        &names,
        &acme::Options {
            profile: None,
            replaces: Some(leaf),
        },
    )
    .await;
    assert!(!again.is_empty());
    drop(proxy);
    server.shutdown().await;
}
