//! Hostile and broken input: bodies nested without end, bytes that are not UTF-8, characters Postgres cannot store,
//! bodies declared as anything but JSON, and a transcript far longer than any chat. Each is answered with the
//! documented problem, never a 5xx, and writes nothing; the long transcript is registered and decided as usual.

use axum::body::Body;
use axum::http::{HeaderValue, Method, Request, StatusCode};
use futures::StreamExt;
use serde_json::{Value, json};
use uuid::Uuid;

use crate::database::TestDatabase;
use crate::support::{
    self, Answer, Options, TestApp, assert_nothing_recorded, assert_problem, call, owned_run,
    row_counts, run_body,
};

/// Every route that reads a JSON body, aimed at run `id` (waiting, turn `digest`), each with a body it accepts.
fn body_routes(id: Uuid, digest: &str) -> Vec<(Method, String, Value)> {
    vec![
        (
            Method::PUT,
            "/v1/users/8".into(),
            json!({"username": "bob", "is_admin": false, "can_approve_others": false, "disabled": false}),
        ),
        (Method::POST, "/v1/runs".into(), run_body(Uuid::new_v4(), 7)),
        (
            Method::POST,
            format!("/v1/runs/{id}/decision"),
            json!({"approved": false, "decider_uid": 7, "turn_digest": digest}),
        ),
        (
            Method::POST,
            format!("/v1/runs/{id}/turns"),
            json!({"messages": [
                {"role": "assistant", "content": null, "tool_calls": [call("call_9", "read_page", "{}")]},
            ]}),
        ),
    ]
}

/// Sends `bytes` to every body route with this content type and asserts the problem each answers, and that
/// nothing was written: no row anywhere, the run still waiting with nothing recorded.
async fn assert_every_body_route_refuses(
    app: &TestApp,
    content_type: Option<&HeaderValue>,
    bytes: &[u8],
    status: StatusCode,
    code: &str,
) {
    let (id, digest) = waiting_run(app).await;
    let before = row_counts(&app.pool).await;
    for (method, path, _) in body_routes(id, &digest) {
        let mut request = Request::builder()
            .method(method.clone())
            .uri(&path)
            .header("authorization", format!("Bearer {}", app.admin_key));
        if let Some(content_type) = content_type {
            request = request.header("content-type", content_type);
        }
        let answer = app
            .send(request.body(Body::from(bytes.to_vec())).unwrap())
            .await;
        assert_refused_as(&answer, status, code, &format!("{method} {path}"));
    }
    assert_eq!(row_counts(&app.pool).await, before);
    assert_nothing_recorded(&app.pool, id).await;
}

#[track_caller]
fn assert_refused_as(answer: &Answer, status: StatusCode, code: &str, context: &str) {
    assert!(
        !answer.status.is_server_error(),
        "{context}: hostile input got a server error: {:?}",
        answer.body
    );
    assert_problem(answer, status, code);
    assert!(
        answer.body["detail"]
            .as_str()
            .is_some_and(|d| !d.is_empty()),
        "{context}: {:?}",
        answer.body
    );
}

/// Registers a run whose one user message has `content`, JSON text that is not JSON the service reads: answered
/// 400 `malformed_json`, and nothing written.
async fn assert_registration_is_malformed(app: &TestApp, content: &str) {
    let body = format!(
        r#"{{"id": "{}", "owner_uid": 0, "messages": [{{"role": "user", "content": {content}}}]}}"#,
        Uuid::new_v4()
    );
    let before = row_counts(&app.pool).await;
    let answer = app
        .send_bytes(Method::POST, "/v1/runs", Some("application/json"), body)
        .await;
    assert_refused_as(
        &answer,
        StatusCode::BAD_REQUEST,
        "malformed_json",
        "POST /v1/runs",
    );
    assert_eq!(row_counts(&app.pool).await, before);
}

/// The owner (uid 7) and a run of theirs waiting for approval, once per app.
async fn waiting_run(app: &TestApp) -> (Uuid, String) {
    let owner_exists: bool =
        sqlx::query_scalar("select exists (select 1 from backend_users where uid = 7)")
            .fetch_one(&app.pool)
            .await
            .unwrap();
    if owner_exists {
        let id = Uuid::new_v4();
        let run = app.register(run_body(id, 7)).await;
        (id, run["turn"]["digest"].as_str().unwrap().to_owned())
    } else {
        owned_run(app).await
    }
}

/// `depth` arrays, one inside the other, around `inner`.
fn nested_arrays(depth: usize, inner: &str) -> String {
    format!("{}{inner}{}", "[".repeat(depth), "]".repeat(depth))
}

/// `depth` objects, one inside the other, around `inner`.
fn nested_objects(depth: usize, inner: &str) -> String {
    format!("{}{inner}{}", r#"{"a":"#.repeat(depth), "}".repeat(depth))
}

// Nesting.

#[tokio::test]
async fn a_body_of_ten_thousand_nested_arrays_is_refused_400_without_overflowing_the_stack() {
    let (_database, pool) = TestDatabase::create().await;
    let app = support::app(pool).await;
    let json = HeaderValue::from_static("application/json");
    let body = nested_arrays(10_000, "");
    assert_every_body_route_refuses(
        &app,
        Some(&json),
        body.as_bytes(),
        StatusCode::BAD_REQUEST,
        "malformed_json",
    )
    .await;
    let body = nested_objects(10_000, "1");
    assert_every_body_route_refuses(
        &app,
        Some(&json),
        body.as_bytes(),
        StatusCode::BAD_REQUEST,
        "malformed_json",
    )
    .await;
}

#[tokio::test]
async fn a_message_nested_ten_thousand_levels_deep_is_refused_400_and_registers_nothing() {
    let (_database, pool) = TestDatabase::create().await;
    let app = support::app(pool).await;
    let deep_content = nested_arrays(10_000, r#""x""#);

    assert_registration_is_malformed(&app, &deep_content).await;
}

#[tokio::test]
async fn a_message_nested_as_deep_as_the_parser_allows_is_registered_and_decided() {
    let (_database, pool) = TestDatabase::create().await;
    let app = support::app(pool).await;
    let id = Uuid::new_v4();
    let mut body = run_body(id, 0);
    // The body object, `messages` and the message take three of the parser's 128 levels.
    let deep: Value = serde_json::from_str(&nested_arrays(124, r#""x""#)).unwrap();
    body["messages"][1]["content"] = deep.clone();

    let run = app.register(body).await;
    let digest = run["turn"]["digest"].as_str().unwrap();
    let decided = app.decide(id, false, None, digest).await;

    assert_eq!(decided.status, StatusCode::OK, "{:?}", decided.body);
    // The answer nests the message one level deeper than the test's own parser reads; the model input alone fits.
    let model_input = app.get(&format!("/v1/runs/{id}/model-input")).await;
    assert_eq!(model_input.status, StatusCode::OK, "{:?}", model_input.body);
    assert_eq!(model_input.body["messages"][1]["content"], deep);
}

#[tokio::test]
async fn a_message_nested_one_level_deeper_than_the_parser_allows_is_refused_400() {
    let (_database, pool) = TestDatabase::create().await;
    let app = support::app(pool).await;
    // Three levels above the content, as in the test before: 128 in all.
    let deep_content = nested_arrays(125, r#""x""#);

    assert_registration_is_malformed(&app, &deep_content).await;
}

// Bytes and characters.

#[tokio::test]
async fn a_body_that_is_not_utf8_is_refused_400_and_writes_nothing() {
    let (_database, pool) = TestDatabase::create().await;
    let app = support::app(pool).await;
    let json = HeaderValue::from_static("application/json");
    // Latin-1 inside a string, a lone continuation byte, an overlong encoding, and bytes no UTF-8 text holds.
    for bytes in [
        &b"{\"username\": \"Ren\xe9\"}"[..],
        b"{\"a\": \"\x80\"}",
        b"{\"a\": \"\xc0\xaf\"}",
        b"\xff\xfe{}",
    ] {
        assert_every_body_route_refuses(
            &app,
            Some(&json),
            bytes,
            StatusCode::BAD_REQUEST,
            "malformed_json",
        )
        .await;
    }
}

#[tokio::test]
async fn an_escaped_lone_surrogate_is_refused_400() {
    let (_database, pool) = TestDatabase::create().await;
    let app = support::app(pool).await;
    assert_registration_is_malformed(&app, r#""\ud800""#).await;
}

// Content types.

#[tokio::test]
async fn a_body_sent_as_anything_but_json_is_refused_415_on_every_route_and_writes_nothing() {
    let (_database, pool) = TestDatabase::create().await;
    let app = support::app(pool).await;
    let json_body = br#"{"username": "bob", "is_admin": false, "can_approve_others": false, "disabled": false}"#;
    let content_types = [
        HeaderValue::from_static("text/plain"),
        HeaderValue::from_static("text/json"),
        HeaderValue::from_static("application/x-www-form-urlencoded"),
        HeaderValue::from_static("multipart/form-data; boundary=x"),
        HeaderValue::from_static("application/xml"),
        HeaderValue::from_static("application/octet-stream"),
        HeaderValue::from_static("application/jsonl"),
        HeaderValue::from_static("json"),
        HeaderValue::from_static(""),
        // Not even text: a header value of bytes outside ASCII.
        HeaderValue::from_bytes(b"application/\xffjson").unwrap(),
    ];
    for content_type in &content_types {
        assert_every_body_route_refuses(
            &app,
            Some(content_type),
            json_body,
            StatusCode::UNSUPPORTED_MEDIA_TYPE,
            "unsupported_media_type",
        )
        .await;
    }
    assert_every_body_route_refuses(
        &app,
        None,
        json_body,
        StatusCode::UNSUPPORTED_MEDIA_TYPE,
        "unsupported_media_type",
    )
    .await;
}

#[tokio::test]
async fn json_with_parameters_or_a_json_suffix_is_taken_as_json() {
    let (_database, pool) = TestDatabase::create().await;
    let app = support::app(pool).await;
    for content_type in [
        "application/json; charset=utf-8",
        "application/problem+json",
        "Application/JSON",
    ] {
        let (id, digest) = owned_run(&app).await;
        for (method, path, body) in body_routes(id, &digest) {
            let answer = app
                .send_bytes(
                    method.clone(),
                    &path,
                    Some(content_type),
                    serde_json::to_vec(&body).unwrap(),
                )
                .await;
            assert!(
                answer.status.is_success(),
                "{method} {path} as {content_type}: {:?}",
                answer.body
            );
        }
    }
}

// Size.

#[tokio::test]
async fn a_transcript_of_ten_thousand_messages_is_registered_and_decided() {
    let (_database, pool) = TestDatabase::create().await;
    let app = support::app_with(
        pool,
        Options {
            max_body_bytes: 8 * 1024 * 1024,
            ..Default::default()
        },
    )
    .await;
    app.user(7, false, false, false).await;
    // 4 999 earlier turns, each a call and its result, then the user's request and the turn that waits.
    let mut messages = Vec::with_capacity(10_000);
    for i in 0..4_999 {
        let call_id = format!("call_{i}");
        messages.push(json!({"role": "assistant", "content": null, "tool_calls": [
            call(&call_id, "read_page", &format!(r#"{{"page": {i}}}"#)),
        ]}));
        messages
            .push(json!({"role": "tool", "tool_call_id": call_id, "content": format!("page {i}")}));
    }
    messages.push(json!({"role": "user", "content": "Now set the meta description."}));
    messages.push(json!({"role": "assistant", "content": null, "tool_calls": [
        call("call_last", "update_page_metadata", r#"{"page": 12}"#),
    ]}));
    assert_eq!(messages.len(), 10_000);
    let id = Uuid::new_v4();
    let mut body = run_body(id, 7);
    body["messages"] = Value::Array(messages);

    let run = app.register(body.clone()).await;
    assert_eq!(run["turn"]["pending_calls"][0]["id"], "call_last");
    let again = app.post("/v1/runs", body).await;
    assert_eq!(again.status, StatusCode::OK, "{:?}", again.body);
    let digest = run["turn"]["digest"].as_str().unwrap();
    let decided = app.decide(id, false, Some(7), digest).await;

    assert_eq!(decided.status, StatusCode::OK, "{:?}", decided.body);
    let model_input = decided.body["model_input"]["messages"].as_array().unwrap();
    assert_eq!(model_input.len(), 10_001);
    assert_eq!(model_input[10_000]["tool_call_id"], "call_last");
    for format in ["anthropic", "openai-responses"] {
        let answer = app
            .get(&format!("/v1/runs/{id}/model-input?format={format}"))
            .await;
        assert_eq!(answer.status, StatusCode::OK, "{format}: {:?}", answer.body);
    }
}

// Characters Postgres cannot store.

#[tokio::test]
async fn a_nul_character_in_a_username_or_a_transcript_is_refused_422_not_500() {
    let (_database, pool) = TestDatabase::create().await;
    let app = support::app(pool).await;
    let (id, digest) = owned_run(&app).await;
    let before = row_counts(&app.pool).await;

    let user = json!({"username": "a\u{0}b", "is_admin": false, "can_approve_others": false, "disabled": false});
    let answer = app
        .call(Method::PUT, "/v1/users/8", Some(&app.admin_key), Some(user))
        .await;
    assert_refused_as(
        &answer,
        StatusCode::UNPROCESSABLE_ENTITY,
        "invalid_username",
        "PUT user",
    );

    let nul_messages = [
        json!({"role": "user", "content": "a\u{0}b"}),
        json!({"role": "user", "content": [{"type": "text", "text": "\u{0}"}]}),
        json!({"role": "user", "content": "x", "n\u{0}": 1}),
        json!({"role": "assistant", "content": null, "tool_calls": [call("call_\u{0}", "read_page", "{}")]}),
    ];
    for message in nul_messages {
        let mut body = run_body(Uuid::new_v4(), 7);
        body["messages"]
            .as_array_mut()
            .unwrap()
            .insert(0, message.clone());
        let answer = app.post("/v1/runs", body).await;
        assert_refused_as(
            &answer,
            StatusCode::UNPROCESSABLE_ENTITY,
            "invalid_transcript",
            &message.to_string(),
        );
    }

    assert_eq!(
        app.decide(id, false, Some(7), &digest).await.status,
        StatusCode::OK
    );
    let resumed = row_counts(&app.pool).await;
    let next = json!({"messages": [
        {"role": "user", "content": "\u{0}"},
        {"role": "assistant", "content": null, "tool_calls": [call("call_9", "read_page", "{}")]},
    ]});
    let answer = app.post(&format!("/v1/runs/{id}/turns"), next).await;
    assert_refused_as(
        &answer,
        StatusCode::UNPROCESSABLE_ENTITY,
        "invalid_transcript",
        "POST turns",
    );
    assert_eq!(row_counts(&app.pool).await, resumed);
    assert_eq!(
        (before.runs, before.backend_users),
        (resumed.runs, resumed.backend_users)
    );
}

#[tokio::test]
async fn an_inbox_filter_that_is_no_tool_name_matches_nothing_and_is_no_error() {
    let (_database, pool) = TestDatabase::create().await;
    let app = support::app(pool).await;
    owned_run(&app).await;
    for tool in ["a%00b", "%00", "read%20page", "%C3%A9"] {
        let answer = app
            .get(&format!("/v1/approvals?acting_uid=7&tool={tool}"))
            .await;
        assert_eq!(answer.status, StatusCode::OK, "{tool}: {:?}", answer.body);
        assert_eq!(
            answer.body,
            json!({"items": [], "next_cursor": null}),
            "{tool}"
        );
    }
    let answer = app.get("/v1/approvals?acting_uid=7&tool=read_page").await;
    assert_eq!(answer.body["items"].as_array().map(Vec::len), Some(1));
}

// Numbers.

#[tokio::test]
async fn an_integer_written_with_a_fraction_or_an_exponent_is_read_exactly() {
    let (_database, pool) = TestDatabase::create().await;
    let app = support::app(pool).await;
    let user = json!({"username": "ada", "is_admin": false, "can_approve_others": false, "disabled": false});
    let answer = app
        .call(
            Method::PUT,
            "/v1/users/7.0",
            Some(&app.admin_key),
            Some(user),
        )
        .await;
    assert_eq!(
        (answer.status, &answer.body["uid"]),
        (StatusCode::OK, &json!(7))
    );

    let id = Uuid::new_v4();
    let body = run_body(id, 7);
    let text = serde_json::to_string(&body)
        .unwrap()
        .replace(r#""owner_uid":7"#, r#""owner_uid":7e0"#);
    let answer = app
        .send_bytes(Method::POST, "/v1/runs", Some("application/json"), text)
        .await;
    assert_eq!(answer.status, StatusCode::CREATED, "{:?}", answer.body);
    assert_eq!(answer.body["owner_uid"], 7);
    // The same registration, written with another number text, is the same run.
    assert_eq!(app.post("/v1/runs", body).await.status, StatusCode::OK);

    let digest = answer.body["turn"]["digest"].as_str().unwrap();
    let decision = |uid: &str| {
        format!(r#"{{"approved": false, "decider_uid": {uid}, "turn_digest": "{digest}"}}"#)
    };
    let path = format!("/v1/runs/{id}/decision");
    for refused in [
        "7.5",
        "9223372036854775808",
        "2.3459000653036252e+27",
        "-1e400",
        "\"7\"",
    ] {
        let answer = app
            .send_bytes(
                Method::POST,
                &path,
                Some("application/json"),
                decision(refused),
            )
            .await;
        assert_refused_as(
            &answer,
            StatusCode::UNPROCESSABLE_ENTITY,
            "invalid_body",
            refused,
        );
        assert_nothing_recorded(&app.pool, id).await;
    }
    let answer = app
        .send_bytes(
            Method::POST,
            &path,
            Some("application/json"),
            decision("700e-2"),
        )
        .await;
    assert_eq!(answer.status, StatusCode::OK, "{:?}", answer.body);
    assert_eq!(answer.body["decision"]["decider_uid"], 7);
    assert_eq!(answer.body["decision"]["decided_by"], "run_owner");

    let answer = app
        .get("/v1/approvals?acting_uid=7.0&owner_uid=7e0&limit=2.0e1")
        .await;
    assert_eq!(answer.status, StatusCode::OK, "{:?}", answer.body);
    for query in [
        "acting_uid=7.5",
        "acting_uid=7&limit=1.5",
        "acting_uid=99999999999999999999",
    ] {
        let answer = app.get(&format!("/v1/approvals?{query}")).await;
        assert_refused_as(
            &answer,
            StatusCode::UNPROCESSABLE_ENTITY,
            "invalid_query",
            query,
        );
    }
}

#[tokio::test]
async fn a_number_beyond_a_float_in_a_message_is_refused_400_not_500() {
    let (_database, pool) = TestDatabase::create().await;
    let app = support::app(pool).await;
    let before = row_counts(&app.pool).await;
    for number in ["1e400", "-1e400"] {
        let body = format!(
            r#"{{"id": "{}", "owner_uid": 0, "messages": [{{"role": "user", "content": {number}}}]}}"#,
            Uuid::new_v4()
        );
        let answer = app
            .send_bytes(Method::POST, "/v1/runs", Some("application/json"), body)
            .await;
        assert_refused_as(&answer, StatusCode::BAD_REQUEST, "malformed_json", number);
    }
    assert_eq!(row_counts(&app.pool).await, before);
}

// Cursors and ids.

#[tokio::test]
async fn a_cursor_of_any_form_but_the_one_given_out_is_refused() {
    let (_database, pool) = TestDatabase::create().await;
    let app = support::app(pool).await;
    owned_run(&app).await;
    owned_run(&app).await;
    let page = app.get("/v1/approvals?acting_uid=7&limit=1").await;
    let cursor = page.body["next_cursor"].as_str().unwrap().to_owned();
    let (micros, id) = cursor.split_once('_').unwrap();
    let hyphenated = Uuid::parse_str(id).unwrap().hyphenated().to_string();

    let answer = app
        .get(&format!(
            "/v1/approvals?acting_uid=7&limit=1&cursor={cursor}"
        ))
        .await;
    assert_eq!(answer.body["items"].as_array().map(Vec::len), Some(1));
    for other in [
        format!("%2B{micros}_{id}"),
        format!("0{micros}_{id}"),
        format!("{micros}_{hyphenated}"),
        format!("{micros}_{}", id.to_uppercase()),
        format!("{micros}_{id}_"),
        String::new(),
    ] {
        let answer = app
            .get(&format!(
                "/v1/approvals?acting_uid=7&limit=1&cursor={other}"
            ))
            .await;
        assert_refused_as(
            &answer,
            StatusCode::UNPROCESSABLE_ENTITY,
            "invalid_cursor",
            &other,
        );
    }
}

#[tokio::test]
async fn a_tool_call_id_is_measured_in_characters_not_bytes() {
    let (_database, pool) = TestDatabase::create().await;
    let app = support::app(pool).await;
    let longest = "é".repeat(256);
    let mut body = run_body(Uuid::new_v4(), 0);
    body["messages"][2]["tool_calls"] = json!([call(&longest, "read_page", "{}")]);
    let run = app.register(body).await;
    assert_eq!(run["turn"]["pending_calls"][0]["id"], longest.as_str());

    let mut body = run_body(Uuid::new_v4(), 0);
    body["messages"][2]["tool_calls"] = json!([call(&format!("{longest}é"), "read_page", "{}")]);
    let answer = app.post("/v1/runs", body).await;
    assert_refused_as(
        &answer,
        StatusCode::UNPROCESSABLE_ENTITY,
        "invalid_transcript",
        "257 characters",
    );
}

#[tokio::test]
async fn a_body_sent_a_byte_at_a_time_is_answered_408_within_the_body_timeout_and_writes_nothing() {
    let (_database, pool) = TestDatabase::create().await;
    let options = Options {
        body_read_timeout: std::time::Duration::from_millis(400),
        ..Options::default()
    };
    let app = support::app_with(pool, options).await;
    let body = run_body(Uuid::new_v4(), 7).to_string().into_bytes();
    // One byte every 100 ms: the whole body would take minutes.
    let drip = futures::stream::iter(body).then(|byte| async move {
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
        Ok::<_, std::io::Error>(vec![byte])
    });
    let request = Request::builder()
        .method(Method::POST)
        .uri("/v1/runs")
        .header("authorization", format!("Bearer {}", app.admin_key))
        .header("content-type", "application/json")
        .body(Body::from_stream(drip))
        .unwrap();
    let started = std::time::Instant::now();
    let answer = app.send(request).await;
    let waited = started.elapsed();
    assert_problem(&answer, StatusCode::REQUEST_TIMEOUT, "body_timeout");
    assert_eq!(answer.headers["connection"], "close");
    assert!(
        waited < std::time::Duration::from_secs(2),
        "answered after {waited:?}"
    );
    assert_eq!(row_counts(&app.pool).await.runs, 0);
}

#[tokio::test]
async fn a_tool_call_id_with_a_control_character_is_refused_at_registration_and_with_a_new_turn() {
    let (_database, pool) = TestDatabase::create().await;
    let app = support::app(pool).await;
    let before = row_counts(&app.pool).await;
    for id in [
        "call\n1",
        "call\r\nX-Evil: 1",
        "call\u{7f}",
        "call\u{85}",
        "call 1",
    ] {
        let mut body = run_body(Uuid::new_v4(), 0);
        body["messages"][2]["tool_calls"] = json!([call(id, "read_page", "{}")]);
        let answer = app.post("/v1/runs", body).await;
        assert_refused_as(
            &answer,
            StatusCode::UNPROCESSABLE_ENTITY,
            "invalid_transcript",
            &format!("{id:?}"),
        );
    }
    assert_eq!(row_counts(&app.pool).await, before);

    let (run_id, digest) = owned_run(&app).await;
    let denied = app.decide(run_id, false, Some(7), &digest).await;
    assert_eq!(denied.status, StatusCode::OK, "{:?}", denied.body);
    let answer = app
        .post(
            &format!("/v1/runs/{run_id}/turns"),
            json!({"messages": [
                {"role": "assistant", "content": null, "tool_calls": [call("next\u{1}", "read_page", "{}")]},
            ]}),
        )
        .await;
    assert_refused_as(
        &answer,
        StatusCode::UNPROCESSABLE_ENTITY,
        "invalid_transcript",
        "a new turn",
    );
}

#[tokio::test]
async fn a_turn_over_the_work_limits_is_refused_with_the_limits_code() {
    let (_database, pool) = TestDatabase::create().await;
    let app = support::app(pool).await;
    let limits = app.state.limits.work;

    let mut body = run_body(Uuid::new_v4(), 0);
    let calls: Vec<Value> = (0..=limits.max_calls_per_turn)
        .map(|i| call(&format!("call_{i}"), "read_page", "{}"))
        .collect();
    body["messages"][2]["tool_calls"] = json!(calls);
    let answer = app.post("/v1/runs", body).await;
    assert_refused_as(
        &answer,
        StatusCode::UNPROCESSABLE_ENTITY,
        "too_many_calls",
        "calls",
    );

    let (run_id, digest) = owned_run(&app).await;
    let denied = app.decide(run_id, false, Some(7), &digest).await;
    assert_eq!(denied.status, StatusCode::OK, "{:?}", denied.body);
    let large = json!({"text": "x".repeat(limits.max_arguments_bytes)}).to_string();
    let answer = app
        .post(
            &format!("/v1/runs/{run_id}/turns"),
            json!({"messages": [
                {"role": "assistant", "content": null, "tool_calls": [call("next", "read_page", &large)]},
            ]}),
        )
        .await;
    assert_refused_as(
        &answer,
        StatusCode::UNPROCESSABLE_ENTITY,
        "arguments_too_large",
        "arguments",
    );
}
