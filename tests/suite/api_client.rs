//! The Partner API client against the real sandbox over HTTPS: every documented error shape,
//! re-signin on 401, retries of reads only, lost answers to billed orders, pagination, and the
//! token kept out of every URL and log line.

use std::os::unix::fs::PermissionsExt;
use std::time::Duration;

use cert_agent::testing::api::{
    ApiError, Client, ClientOptions, ErrorBody, ListScope, Order, OrderRequest, PasswordSource,
    ReissueRequest, RetryPolicy, TOKEN_FILE, TransportKind,
};
use partner_sandbox::{Fault, FaultKind};

use crate::support;
use support::api::*;

#[tokio::test]
async fn read_calls_decode_and_the_token_is_cached_private() {
    let env = Env::start();
    let client = env.client(PARTNER);

    let products = client.products(false).await.expect("products");
    assert!(!products.is_empty());
    let priced = products
        .iter()
        .flat_map(|p| &p.prices)
        .find_map(|p| p.value.clone())
        .expect("a price");
    assert!(priced.as_str().contains('.') || priced.as_str().parse::<u64>().is_ok());
    assert!(!client.products(true).await.expect("EU prices").is_empty());

    let balance = client.balance().await.expect("balance");
    assert!(!balance.available.currency.is_empty());
    let countries = client.countries().await.expect("countries");
    assert!(!countries.is_empty());
    let software = client
        .ssl_server_softwares(products[0].id)
        .await
        .expect("software list");
    assert!(!software.is_empty());
    let emails = client
        .dcv_emails("www.example.com", None)
        .await
        .expect("dcv emails");
    assert!(!emails.all().is_empty());
    assert!(client.list_unpaged().await.expect("list").is_empty());

    // One sign-in, cached 0600; a second client with the same state does not sign in again.
    let token_file = env.state_dir(PARTNER).join(TOKEN_FILE);
    let mode = std::fs::metadata(&token_file)
        .expect("token file")
        .permissions()
        .mode();
    assert_eq!(mode & 0o777, 0o600);
    let again = env.client(PARTNER);
    again.balance().await.expect("balance with cached token");
    assert_eq!(env.calls_to("/api/v1/users/signin").len(), 1);
}

#[tokio::test]
async fn certificate_life_cycle_calls() {
    let env = Env::start();
    let client = env.client(PARTNER);
    let id = place_order(&client, "life.example.com").await;

    let status = client.status(id).await.expect("status");
    assert!(status.certificate.is_some());
    let details = client.details(id).await.expect("details");
    assert_eq!(details.id, id);
    assert_eq!(details.common_name, "life.example.com");
    let dcv = client.dcv_status(id).await.expect("dcv status");
    assert!(dcv.domains.contains_key("life.example.com"), "{dcv:?}");
    let emails = client
        .dcv_emails("life.example.com", None)
        .await
        .expect("emails");
    let other = emails.all().last().expect("an address").to_string();
    client
        .change_dcv(id, &other, None)
        .await
        .expect("change dcv");
    client.resend_dcv(id).await.expect("resend dcv");

    // 422 {errors: string} while not issued.
    let e = client
        .download_bundle(id)
        .await
        .expect_err("not issued yet");
    assert_eq!(e.status(), Some(422), "{e}");
    assert!(
        matches!(e, ApiError::Http { ref body, .. } if matches!(**body, ErrorBody::ErrorsText(_))),
        "{e:?}"
    );
    assert!(
        e.to_string().starts_with(&format!(
            "GET /api/v1/ssl_certificates/{id}/download_bundle: HTTP 422: "
        )),
        "{e}"
    );

    env.sandbox.approve_email(id, None).expect("approve");
    env.sandbox.validate_now();
    let mut issued = false;
    for _ in 0..100 {
        if client
            .status(id)
            .await
            .expect("status")
            .certificate
            .is_some_and(|c| c.as_str() == "issued")
        {
            issued = true;
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert!(issued);
    let bundle = client.download_bundle(id).await.expect("bundle");
    assert!(bundle.bytes.starts_with(b"PK"), "a ZIP");
    assert!(
        bundle
            .filename
            .as_deref()
            .is_some_and(|f| f.ends_with(".zip")),
        "{bundle:?}"
    );
    let archive = client.download(id).await.expect("CA archive");
    assert!(archive.bytes.starts_with(b"PK"));

    let listed = client
        .list(1, Some(ListScope::ApiIssued), None)
        .await
        .expect("list");
    assert!(listed.certificates.iter().any(|c| c.internal_number == id));
    assert!(listed.pagination.is_some(), "X-Pagination with page");
    let via_user = client
        .list_via_user_path(1, None, Some("life"))
        .await
        .expect("alternate path");
    assert!(
        via_user
            .certificates
            .iter()
            .any(|c| c.internal_number == id)
    );

    let p = client.prolong(id).await.expect("prolong");
    assert!(
        !format!("{p:?}").contains(
            p.prolongation_token
                .as_ref()
                .map(|t| t.expose())
                .unwrap_or("\u{0}")
        )
    );

    // A free reissue with a new CSR answers success.
    let r = client
        .reissue(
            id,
            &ReissueRequest {
                csr: Some(csr("life.example.com")),
                ..ReissueRequest::default()
            },
        )
        .await
        .expect("reissue");
    assert!(r.success);
}

#[tokio::test]
async fn bad_request_400_carries_the_api_text() {
    let env = Env::start();
    let client = env.client(PARTNER);
    let e = client.dcv_emails(" ", None).await.expect_err("400");
    assert_eq!(e.status(), Some(400));
    assert_eq!(
        e.to_string(),
        "POST /api/v1/dcv_emails: HTTP 400: domain_name is missing"
    );
    assert!(!e.is_retryable());
    let id = place_order(&client, "bad.example.com").await;
    let e = client.change_dcv(id, "", None).await.expect_err("400");
    assert_eq!(e.status(), Some(400), "{e}");
    assert!(e.to_string().contains("email is missing"), "{e}");
}

#[tokio::test]
async fn a_401_signs_in_again_once_and_repeats_the_call() {
    let env = Env::start();
    let client = env.client(PARTNER);
    client.balance().await.expect("balance");
    let first = env.cached_token(PARTNER);
    env.sandbox.rotate_token(PARTNER).expect("rotate");
    env.sandbox.clear_calls();

    client.balance().await.expect("balance after re-signin");
    let seq: Vec<(String, String, u16)> = env
        .sandbox
        .calls()
        .into_iter()
        .map(|c| (c.method, c.path, c.status))
        .collect();
    assert_eq!(
        seq,
        [
            ("GET".into(), "/api/v1/billing/balance".into(), 401),
            ("POST".into(), "/api/v1/users/signin".into(), 200),
            ("GET".into(), "/api/v1/billing/balance".into(), 200),
        ]
    );
    assert_ne!(env.cached_token(PARTNER), first, "the new token is cached");
}

#[tokio::test]
async fn a_second_401_is_an_error() {
    let env = Env::start();
    let client = env.client(PARTNER);
    client.balance().await.expect("balance");
    env.sandbox.inject(
        Fault::new(FaultKind::RotateToken {
            login: PARTNER.into(),
        })
        .method("GET")
        .path("/api/v1/billing/balance")
        .times(2),
    );
    let e = client.balance().await.expect_err("401 twice");
    assert_eq!(e.status(), Some(401), "{e}");
    assert!(e.is_auth());
    assert!(
        e.to_string()
            .starts_with("GET /api/v1/billing/balance: HTTP 401: "),
        "{e}"
    );
    assert_eq!(
        env.calls_to("/api/v1/users/signin").len(),
        2,
        "one re-signin only"
    );
}

#[tokio::test]
async fn wrong_password_is_a_signin_error_without_the_password() {
    let env = Env::start();
    let client = Client::new(env.options(PARTNER, "not-the-password-xyz")).expect("client");
    let e = client.balance().await.expect_err("401");
    assert_eq!(e.status(), Some(401));
    let text = format!("{e} {e:?}");
    assert!(text.contains("POST /api/v1/users/signin"), "{text}");
    assert!(!text.contains("not-the-password-xyz"), "{text}");
}

#[tokio::test]
async fn forbidden_403_for_a_restricted_role_and_a_non_partner() {
    let env = Env::start();
    let partner = env.client(PARTNER);
    let product = dv_product(&partner).await;

    let billing = env.client(BILLING);
    let e = billing
        .order(&order_request(product, "r.example.com", None))
        .await
        .expect_err("restricted role cannot order");
    assert_eq!(e.status(), Some(403), "{e}");
    assert_eq!(
        e.to_string(),
        "POST /api/v1/order: HTTP 403: You do not have permission for this action"
    );
    assert_eq!(env.sandbox.billed_orders(BILLING), 0);

    let retail = env.client(RETAIL);
    let e = retail.products(false).await.expect_err("non-partner");
    assert_eq!(e.status(), Some(403));
    assert_eq!(
        e.to_string(),
        "GET /api/v1/products: HTTP 403: Not authorized for partnership"
    );
}

#[tokio::test]
async fn not_found_404_for_another_accounts_certificate() {
    let env = Env::start();
    let partner = env.client(PARTNER);
    let id = place_order(&partner, "mine.example.com").await;
    let other = env.client(OTHER);

    let e = other.details(id).await.expect_err("404");
    assert!(e.is_not_found(), "{e}");
    assert!(
        matches!(&e, ApiError::Http { body, .. } if matches!(**body, ErrorBody::Error(_))),
        "{e:?}"
    );
    let e = other.status(id).await.expect_err("404");
    assert!(e.is_not_found(), "{e}");
    let e = other.download_bundle(id).await.expect_err("404");
    assert!(e.is_not_found(), "{e}");
    assert!(e.to_string().contains("Certificate not found"), "{e}");
    let e = other.cancel(id).await.expect_err("404");
    assert!(e.is_not_found(), "{e}");
    assert!(!e.is_retryable());
}

#[tokio::test]
async fn unprocessable_422_shapes() {
    let env = Env::start();
    let client = env.client(PARTNER);

    // {errors: [string]}: an order without items.
    let e = client
        .order(&OrderRequest {
            order: Order::default(),
        })
        .await
        .expect_err("422");
    assert_eq!(e.status(), Some(422));
    assert!(
        matches!(&e, ApiError::Http { body, .. } if matches!(**body, ErrorBody::Errors(_))),
        "{e:?}"
    );
    assert!(
        e.to_string()
            .starts_with("POST /api/v1/order: HTTP 422: Items can't be blank"),
        "{e}"
    );

    // {success:false, error, certificate_status, dcv_available}: DCV status when not in progress.
    let id = issued_certificate(&env, &client, "done.example.com").await;
    let e = client.dcv_status(id).await.expect_err("422");
    match &e {
        ApiError::Http {
            status: 422, body, ..
        } => match &**body {
            ErrorBody::Failure {
                certificate_status,
                dcv_available,
                ..
            } => {
                assert_eq!(certificate_status.as_deref(), Some("issued"));
                assert_eq!(*dcv_available, Some(false));
            }
            other => panic!("{other:?}"),
        },
        other => panic!("{other:?}"),
    }

    // {success:false, error}: the CA cannot be reached.
    let pending = place_order(&client, "pending.example.com").await;
    env.sandbox.inject(Fault::new(FaultKind::CaUnreachable));
    let e = client.dcv_status(pending).await.expect_err("422");
    assert!(
        matches!(&e, ApiError::Http { status: 422, body, .. } if matches!(**body, ErrorBody::Failure { .. })),
        "{e:?}"
    );
}

#[tokio::test]
async fn refusals_with_http_200_are_errors() {
    let env = Env::start();
    let client = env.client(PARTNER);
    let id = issued_certificate(&env, &client, "refuse.example.com").await;

    // Resend is only possible while in progress.
    let e = client.resend_dcv(id).await.expect_err("refused");
    assert!(matches!(e, ApiError::Refused { .. }), "{e:?}");
    assert!(
        e.to_string().starts_with(&format!(
            "POST /api/v1/ssl_certificates/{id}/resend_dcv: refused: "
        )),
        "{e}"
    );
    assert!(!e.is_retryable());

    client.cancel(id).await.expect("first cancel is sent");
    let e = client.cancel(id).await.expect_err("already cancelled");
    assert!(matches!(e, ApiError::Refused { .. }), "{e:?}");
    assert!(
        e.api_message()
            .is_some_and(|m| m.contains("already cancelled")),
        "{e}"
    );
}

#[tokio::test]
async fn a_5xx_burst_on_a_get_is_retried() {
    let env = Env::start();
    let client = env.client(PARTNER);
    client.balance().await.expect("signed in");
    env.sandbox.inject(
        Fault::new(FaultKind::Status { status: 503 })
            .method("GET")
            .path("/api/v1/billing/balance")
            .times(2),
    );
    client.balance().await.expect("recovered");
    let statuses: Vec<u16> = env
        .calls_to("/api/v1/billing/balance")
        .into_iter()
        .map(|c| c.1)
        .collect();
    assert_eq!(statuses, [200, 503, 503, 200]);

    // More failures than attempts: the error says so and may be retried later.
    env.sandbox.inject(
        Fault::new(FaultKind::Status { status: 502 })
            .method("GET")
            .path("/api/v1/billing/balance")
            .times(10),
    );
    let e = client.balance().await.expect_err("gives up");
    assert_eq!(e.status(), Some(502));
    assert!(e.is_retryable());
    assert_eq!(env.calls_to("/api/v1/billing/balance").len(), 4 + 4);
}

#[tokio::test]
async fn a_5xx_to_a_post_with_side_effects_is_not_repeated() {
    let env = Env::start();
    let client = env.client(PARTNER);
    let id = place_order(&client, "side.example.com").await;
    let path = format!("/api/v1/ssl_certificates/{id}/cancel");
    env.sandbox.inject(
        Fault::new(FaultKind::Status { status: 503 })
            .method("POST")
            .path(&path),
    );
    let e = client.cancel(id).await.expect_err("503");
    assert!(e.is_outcome_unknown(), "{e:?}");
    assert_eq!(env.calls_to(&path).len(), 1);
}

#[tokio::test]
async fn malformed_json_is_a_decode_error() {
    let env = Env::start();
    let client = env.client(PARTNER);
    client.balance().await.expect("signed in");
    // Retried like a 5xx (4 attempts): garbage every time ends as a decode error.
    env.sandbox.inject(
        Fault::new(FaultKind::MalformedJson)
            .method("GET")
            .path("/api/v1/billing/balance")
            .times(10),
    );
    let e = client.balance().await.expect_err("decode error");
    assert!(matches!(e, ApiError::Decode { .. }), "{e:?}");
    assert!(
        e.to_string()
            .starts_with("GET /api/v1/billing/balance: could not decode the answer (HTTP 200): "),
        "{e}"
    );
}

#[tokio::test]
async fn a_dropped_answer_to_an_order_is_outcome_unknown_and_never_repeated() {
    let env = Env::start();
    let client = env.client(PARTNER);
    let product = dv_product(&client).await;
    env.sandbox.inject(
        Fault::new(FaultKind::DropAfterApply)
            .method("POST")
            .path("/api/v1/order"),
    );
    let e = client
        .order(&order_request(product, "lost.example.com", None))
        .await
        .expect_err("answer lost");
    assert!(e.is_outcome_unknown(), "{e:?}");
    assert!(!e.is_retryable());
    assert!(
        e.to_string()
            .starts_with("POST /api/v1/order: outcome unknown"),
        "{e}"
    );
    assert_eq!(env.calls_to("/api/v1/order").len(), 1, "sent once");
    assert_eq!(env.sandbox.billed_orders(PARTNER), 1, "and it was placed");
    // Reconciliation finds it in the list.
    let all = client.list_all(None, None).await.expect("list");
    assert!(
        all.iter()
            .any(|c| c.domain_name.as_deref() == Some("lost.example.com"))
    );
}

#[tokio::test]
async fn a_malformed_answer_to_an_order_is_outcome_unknown() {
    let env = Env::start();
    let client = env.client(PARTNER);
    let product = dv_product(&client).await;
    env.sandbox.inject(
        Fault::new(FaultKind::MalformedJson)
            .method("POST")
            .path("/api/v1/order"),
    );
    let e = client
        .order(&order_request(product, "garbled.example.com", None))
        .await
        .expect_err("undecodable");
    assert!(e.is_outcome_unknown(), "{e:?}");
    assert_eq!(env.calls_to("/api/v1/order").len(), 1);
}

#[tokio::test]
async fn timeouts_retry_reads_but_not_orders() {
    let env = Env::start();
    let mut o = env.options(PARTNER, PASSWORD);
    o.timeout = Duration::from_millis(700);
    let client = Client::new(o).expect("client");
    let product = dv_product(&client).await;

    env.sandbox.inject(
        Fault::new(FaultKind::Delay { ms: 3000 })
            .method("GET")
            .path("/api/v1/billing/balance"),
    );
    client.balance().await.expect("second attempt in time");
    assert_eq!(env.calls_to("/api/v1/billing/balance").len(), 2);

    env.sandbox.inject(
        Fault::new(FaultKind::Delay { ms: 3000 })
            .method("POST")
            .path("/api/v1/order"),
    );
    let e = client
        .order(&order_request(product, "slow.example.com", None))
        .await
        .expect_err("timed out");
    assert!(e.is_outcome_unknown(), "{e:?}");
    assert!(e.to_string().contains("timed out"), "{e}");
    assert_eq!(env.calls_to("/api/v1/order").len(), 1);
}

#[tokio::test]
async fn pages_and_the_all_pages_helper() {
    let env = Env::start();
    let client = env.client(PARTNER);
    let product = dv_product(&client).await;
    let n = 53;
    for i in 0..n {
        client
            .order(&order_request(product, &format!("p{i}.example.com"), None))
            .await
            .expect("order");
    }
    let first = client.list(1, None, None).await.expect("page 1");
    assert_eq!(first.certificates.len(), 50);
    let pg = first.pagination.expect("X-Pagination");
    assert_eq!(pg.total, Some(n));
    assert_eq!(pg.total_pages, Some(2));
    assert_eq!(pg.next_page, Some(2));
    let second = client.list(2, None, None).await.expect("page 2");
    assert_eq!(second.certificates.len(), 3);
    assert_eq!(second.pagination.expect("X-Pagination").next_page, None);
    assert_eq!(
        client.list_all(None, None).await.expect("all").len(),
        n as usize
    );
    let found = client
        .list(1, None, Some("p7.example"))
        .await
        .expect("search");
    assert!(
        found
            .certificates
            .iter()
            .all(|c| c.domain_name.as_deref().is_some_and(|d| d.contains("p7")))
    );
    assert_eq!(
        client.list_unpaged().await.expect("unpaged").len(),
        n as usize
    );
}

#[tokio::test]
async fn answers_past_the_size_limit_are_refused() {
    let env = Env::start();
    let mut o = env.options(PARTNER, PASSWORD);
    o.max_json_bytes = 256;
    let client = Client::new(o).expect("client");
    let e = client.products(false).await.expect_err("too large");
    assert!(matches!(e, ApiError::TooLarge { limit: 256, .. }), "{e:?}");
    assert_eq!(
        e.to_string(),
        "GET /api/v1/products: the answer is larger than 256 bytes"
    );
    assert_eq!(env.calls_to("/api/v1/products").len(), 1, "not retried");
}

#[tokio::test]
async fn the_token_is_never_in_a_url() {
    let env = Env::start();
    let client = env.client(PARTNER);
    let id = place_order(&client, "url.example.com").await;
    client.status(id).await.expect("status");
    client.list(1, None, Some("url")).await.expect("list");
    env.sandbox.rotate_token(PARTNER).expect("rotate");
    client.details(id).await.expect("details after re-signin");
    let token = env.cached_token(PARTNER);
    let calls = env.sandbox.calls();
    assert!(calls.len() >= 6);
    for c in &calls {
        assert!(!c.query.contains("auth_token"), "{c:?}");
        assert!(
            !c.query.contains(&token) && !c.path.contains(&token),
            "{c:?}"
        );
    }
}

#[tokio::test]
async fn transport_errors_name_the_call() {
    // Nothing listens here: a connection error, not sent, retried for reads.
    let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
    let addr = listener.local_addr().expect("addr");
    drop(listener);
    let mut o = ClientOptions::new(
        format!("https://{addr}"),
        PARTNER,
        PasswordSource::default(),
    );
    o.retry = RetryPolicy::fast(2);
    let client = Client::new(o).expect("client");
    let e = client.countries().await.expect_err("refused");
    assert!(
        matches!(
            e,
            ApiError::Transport {
                kind: TransportKind::Connect,
                ..
            }
        ),
        "{e:?}"
    );
    assert!(
        e.to_string()
            .starts_with("GET /api/v1/countries: could not connect: "),
        "{e}"
    );
    assert!(e.is_retryable());
}

/// Guards garbage under status 200 on the list call (the agent's bulk poll): an HTML page, a
/// truncated body or wrong types, twice, then the real answer — the call is retried and
/// succeeds; the list is read three times each.
#[tokio::test]
async fn garbage_on_the_list_is_retried() {
    let env = Env::start();
    let client = env.client(PARTNER);
    client.balance().await.expect("signed in");
    for kind in [
        FaultKind::HtmlPage,
        FaultKind::MalformedJson,
        FaultKind::WrongTypes,
    ] {
        let before = env.calls_to("/api/v1/ssl_certificates").len();
        env.sandbox.inject(
            Fault::new(kind.clone())
                .method("GET")
                .path("/api/v1/ssl_certificates")
                .times(2),
        );
        client
            .list_all(None, None)
            .await
            .unwrap_or_else(|e| panic!("{kind:?}: {e}"));
        assert_eq!(
            env.calls_to("/api/v1/ssl_certificates").len() - before,
            3,
            "{kind:?}"
        );
    }
}

/// A TCP relay in front of the sandbox that behaves like a server (or a load balancer) whose
/// idle timer has run out while the client still holds the connection: bytes a client sends
/// after `drop_after` without traffic are never delivered, and the connection is cut. Counts
/// the requests so lost (not a client's own goodbye on a connection it closes).
struct IdleDropper {
    addr: std::net::SocketAddr,
    lost: std::sync::Arc<std::sync::atomic::AtomicUsize>,
}

impl IdleDropper {
    async fn start(upstream: std::net::SocketAddr, drop_after: Duration) -> Self {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
            .await
            .expect("bind");
        let addr = listener.local_addr().expect("addr");
        let lost = std::sync::Arc::new(std::sync::atomic::AtomicUsize::new(0));
        let count = lost.clone();
        tokio::spawn(async move {
            while let Ok((client, _)) = listener.accept().await {
                tokio::spawn(Self::relay(client, upstream, drop_after, count.clone()));
            }
        });
        Self { addr, lost }
    }

    async fn relay(
        client: tokio::net::TcpStream,
        upstream: std::net::SocketAddr,
        drop_after: Duration,
        lost: std::sync::Arc<std::sync::atomic::AtomicUsize>,
    ) {
        use tokio::io::{AsyncReadExt, AsyncWriteExt};
        let Ok(server) = tokio::net::TcpStream::connect(upstream).await else {
            return;
        };
        let (mut cr, mut cw) = client.into_split();
        let (mut sr, mut sw) = server.into_split();
        let (mut from_client, mut from_server) = ([0u8; 16384], [0u8; 16384]);
        let mut last = tokio::time::Instant::now();
        loop {
            tokio::select! {
                n = cr.read(&mut from_client) => match n {
                    Ok(n) if n > 0 => {
                        if last.elapsed() >= drop_after {
                            // A client closing its idle connection says goodbye (TLS
                            // close_notify) and hangs up; one that sent a request waits for
                            // an answer that never comes.
                            let next = tokio::time::timeout(
                                Duration::from_millis(500),
                                cr.read(&mut from_client),
                            );
                            if !matches!(next.await, Ok(Ok(0))) {
                                lost.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
                            }
                            return;
                        }
                        if sw.write_all(&from_client[..n]).await.is_err() {
                            return;
                        }
                        last = tokio::time::Instant::now();
                    }
                    _ => return,
                },
                n = sr.read(&mut from_server) => match n {
                    Ok(n) if n > 0 => {
                        if cw.write_all(&from_server[..n]).await.is_err() {
                            return;
                        }
                        last = tokio::time::Instant::now();
                    }
                    _ => return,
                },
            }
        }
    }

    fn lost(&self) -> usize {
        self.lost.load(std::sync::atomic::Ordering::SeqCst)
    }
}

/// A connection idle past the server's keep-alive time is never used again: an order placed
/// after a pause goes out on a new connection and is answered, where a request on the old one
/// would be lost in flight (its outcome unknown). The relay in front of the sandbox shows it
/// loses such requests: a client that keeps idle connections for a minute loses one. The
/// relay's bound (2 s) is well above the client's (1 s): a loaded machine's delay between an
/// answer and its connection's return to the pool stays inside the margin.
#[tokio::test]
async fn a_call_after_a_pause_takes_a_new_connection_so_no_order_is_lost_in_flight() {
    let env = Env::start();
    let relay = IdleDropper::start(env.sandbox.addr(), Duration::from_secs(2)).await;
    let through_relay = |idle_reuse: Duration| {
        let mut o = env.options(PARTNER, PASSWORD);
        o.base_url = format!("https://localhost:{}", relay.addr.port());
        o.idle_reuse = idle_reuse;
        Client::new(o).expect("client builds")
    };
    let pause = Duration::from_secs(3);

    let client = through_relay(Duration::from_secs(1));
    let domain = "after-a-pause.example.com";
    let product = dv_product(&client).await;
    let emails = client.dcv_emails(domain, None).await.expect("dcv emails");
    let email = emails.all().first().expect("an address").to_string();
    tokio::time::sleep(pause).await;
    let placed = client
        .order(&order_request(product, domain, Some(email)))
        .await
        .expect("the order is answered");
    assert!(placed.order > 0);
    assert_eq!(
        relay.lost(),
        0,
        "no request sent on a connection idle too long"
    );
    assert_eq!(env.calls_to("/api/v1/order").len(), 1);

    // The same pause with idle connections kept for a minute: the next request goes out on
    // the stale connection and the relay loses it (a read, so it is tried again).
    let keeping = through_relay(Duration::from_secs(60));
    keeping.balance().await.expect("balance");
    tokio::time::sleep(pause).await;
    keeping.balance().await.expect("balance, tried again");
    assert!(
        relay.lost() >= 1,
        "the relay loses a request on a stale connection"
    );
}
