//! Media types, precedence of body over query string, and the text/typed distinction of
//! [`Fields::from_body`].

use bytes::Bytes;
use http::{HeaderMap, HeaderValue, Method};
use serde_json::json;

use super::*;
use crate::wire::ResponseBody;

fn req(query: &[(&str, &str)], content_type: Option<&str>, body: &str) -> ApiRequest {
    let mut headers = HeaderMap::new();
    if let Some(ct) = content_type
        && let Ok(v) = HeaderValue::from_str(ct)
    {
        headers.insert("content-type", v);
    }
    ApiRequest {
        method: Method::POST,
        path: "/api/v1/order".to_string(),
        query: query
            .iter()
            .map(|(k, v)| ((*k).to_string(), (*v).to_string()))
            .collect(),
        headers,
        body: Bytes::from(body.to_string()),
    }
}

fn message(resp: &ApiResponse) -> String {
    match &resp.body {
        ResponseBody::Json(v) => v["error"].as_str().unwrap_or_default().to_string(),
        other => format!("{other:?}"),
    }
}

fn fields(r: &ApiRequest) -> Fields {
    match Fields::from_body(r) {
        Ok(f) => f,
        Err(resp) => panic!("refused: {}", message(&resp)),
    }
}

#[test]
fn json_media_types() {
    for ct in [
        "application/json",
        "application/json; charset=utf-8",
        "Application/JSON",
        "application/vnd.api+json",
    ] {
        let f = fields(&req(&[], Some(ct), r#"{"login":"a","n":2}"#));
        assert_eq!(f.text("login"), Some("a"), "{ct}");
        assert_eq!(f.scalar("n").as_deref(), Some("2"), "{ct}");
        assert!(f.is_typed("login"));
    }
}

#[test]
fn empty_bodies_and_a_bare_json_type_do_not_fail() {
    let q = [("order[items][0][csr]", "C"), ("login", "a")];
    for (ct, body) in [
        (Some("json"), ""),
        (Some("json"), "{not json"),
        (Some("application/json"), ""),
        (Some("application/json"), " \n"),
        (None, ""),
        (Some("text/plain"), "{\"login\":\"b\"}"),
        (Some("multipart/form-data; boundary=x"), ""),
    ] {
        let f = fields(&req(&q, ct, body));
        assert_eq!(f.text("login"), Some("a"), "{ct:?} {body:?}");
        assert_eq!(
            f.value("order"),
            Some(&json!({"items": [{"csr": "C"}]})),
            "{ct:?}"
        );
        assert!(!f.is_typed("order"));
    }
}

#[test]
fn form_bodies_nest_like_the_query_string() {
    let f = fields(&req(
        &[],
        Some("application/x-www-form-urlencoded"),
        "validation_emails%5Ba.example%5D=admin%40a.example&order[items][][days]=365",
    ));
    assert_eq!(
        f.map("validation_emails"),
        Ok(vec![(
            "a.example".to_string(),
            "admin@a.example".to_string()
        )])
    );
    assert_eq!(f.value("order"), Some(&json!({"items": [{"days": "365"}]})));
}

#[test]
fn the_body_wins_for_a_top_level_name() {
    let q = [
        ("login", "query"),
        ("order[items][0][days]", "365"),
        ("page", "3"),
    ];
    let f = fields(&req(
        &q,
        Some("application/json"),
        r#"{"login":"body","order":{"items":[]}}"#,
    ));
    assert_eq!(f.text("login"), Some("body"));
    assert_eq!(f.value("order"), Some(&json!({"items": []})));
    assert!(f.is_typed("order"));
    assert_eq!(f.scalar("page").as_deref(), Some("3"));
    assert!(!f.is_typed("page"));
    let f = fields(&req(&q, None, "login=form"));
    assert_eq!(f.text("login"), Some("form"));
}

/// Query pairs, content type, body, and a part of the message.
type Case<'a> = (&'a [(&'a str, &'a str)], Option<&'a str>, &'a str, &'a str);

#[test]
fn bad_input_is_a_400_with_a_clear_message() {
    let cases: [Case; 5] = [
        (
            &[("a[99999999]", "x")],
            None,
            "",
            "Invalid query parameters: index 99999999",
        ),
        (
            &[("a", "1"), ("a[b]", "2")],
            None,
            "",
            "expected Hash (got String)",
        ),
        (
            &[],
            None,
            "a=1&a[b]=2",
            "Invalid request parameters: expected Hash",
        ),
        (&[], Some("application/json"), "{not json", "not valid JSON"),
        (
            &[],
            Some("multipart/form-data; boundary=x"),
            "--x--",
            "multipart/form-data",
        ),
    ];
    for (q, ct, body, wanted) in cases {
        match Fields::from_body(&req(q, ct, body)) {
            Ok(_) => panic!("accepted {q:?} {body:?}"),
            Err(resp) => {
                assert_eq!(resp.status, 400);
                assert!(message(&resp).contains(wanted), "{}", message(&resp));
            }
        }
    }
}

#[test]
fn maps_say_how_to_send_them() {
    let f = fields(&req(&[("validation_emails", "x")], None, ""));
    assert_eq!(
        f.map("validation_emails"),
        Err("validation_emails must be an object (send validation_emails[domain]=value)".into())
    );
    let f = fields(&req(
        &[],
        Some("application/json"),
        r#"{"validation_emails":"x"}"#,
    ));
    assert_eq!(
        f.map("validation_emails"),
        Err("validation_emails must be an object".into())
    );
    let f = fields(&req(&[("validation_emails[a][b]", "x")], None, ""));
    assert_eq!(
        f.map("validation_emails"),
        Err("validation_emails[a] must be a string".into())
    );
}
