//! Registering runs (`POST /v1/runs`), reading them, keeping users in step, and cancelling and completing runs.

use axum::http::{Method, StatusCode};
use serde_json::{Value, json};
use sha2::{Digest, Sha256};
use uuid::Uuid;

use crate::database::TestDatabase;
use crate::support::{
    self, Options, RowCounts, TestApp, assert_problem, call, owned_run, row_counts, run_body,
    transcript,
};

/// The published example of docs/design.md §2.
const DESIGN_EXAMPLE_DIGEST: &str =
    "f3e51cfe10310ecf575b434e7e3f57607a4d5486849fcac084e7c86b27f8527b";

fn sha256_hex(text: &str) -> String {
    hex::encode(Sha256::digest(text.as_bytes()))
}

/// Posts a registration that must be refused, and asserts the problem and that no run was written.
async fn assert_refused(app: &TestApp, body: Value, status: StatusCode, code: &str) {
    let before = row_counts(&app.pool).await;
    let answer = app.post("/v1/runs", body.clone()).await;
    assert_problem(&answer, status, code);
    let after = row_counts(&app.pool).await;
    assert_eq!(after, before, "a refused registration wrote rows: {body}");
    assert_eq!(after.runs, 0);
    assert_eq!(after.turn_calls, 0);
}

/// `run_body` for owner 0 (a service run, so no user is needed), with these messages instead.
fn body_with_messages(messages: Vec<Value>) -> Value {
    let mut body = run_body(Uuid::new_v4(), 0);
    body["messages"] = Value::Array(messages);
    body
}

/// `run_body` for owner 0 whose last turn holds this one call instead.
fn body_with_call(call: Value) -> Value {
    body_with_messages(transcript(vec![call]))
}

/// Posts `cancel` or `complete` to a run, with no body, as a client would.
async fn act(app: &TestApp, id: Uuid, action: &str) -> support::Answer {
    app.call(
        Method::POST,
        &format!("/v1/runs/{id}/{action}"),
        Some(&app.admin_key),
        None,
    )
    .await
}

fn assert_no_runs(counts: RowCounts) {
    assert_eq!((counts.runs, counts.turn_calls), (0, 0));
}

#[tokio::test]
async fn a_registered_run_is_answered_with_its_pending_calls_in_order_and_its_turn_digest() {
    let (_database, pool) = TestDatabase::create().await;
    let app = support::app(pool).await;
    app.user(7, false, false, false).await;
    let id = Uuid::new_v4();

    let answer = app.post("/v1/runs", run_body(id, 7)).await;

    assert_eq!(answer.status, StatusCode::CREATED, "{:?}", answer.body);
    assert_eq!(answer.content_type(), "application/json");
    let run = &answer.body;
    assert_eq!(run["id"], id.to_string());
    assert_eq!(run["owner_uid"], 7);
    assert_eq!(run["status"], "waiting_for_approval");
    // No level of its own: the service's level applies (`full` in the test service), not `metadata`.
    assert_eq!(run["privacy_level"], "full");
    assert_eq!(run["require_second_approver"], false);
    assert!(run.get("decision").is_none(), "{run}");
    assert!(run["created_at"].is_string() && run["updated_at"].is_string());
    assert_eq!(run["turn"]["index"], 0);
    assert_eq!(
        run["turn"]["pending_calls"],
        json!([
            {
                "id": "call_1",
                "name": "update_page_metadata",
                "arguments": r#"{"page": 12, "description": "A page"}"#,
                "effect": "write",
                "executor": "service",
                "editable": true,
            },
            {
                "id": "call_2",
                "name": "read_page",
                "arguments": r#"{"page": 12}"#,
                "effect": "read",
                "executor": "service",
                "editable": true,
            },
        ])
    );
    // docs/design.md §2: sorted keys, no spaces, over the arguments strings as the model produced them.
    let canonical = r#"[{"arguments":"{\"page\": 12, \"description\": \"A page\"}","id":"call_1","name":"update_page_metadata"},{"arguments":"{\"page\": 12}","id":"call_2","name":"read_page"}]"#;
    assert_eq!(run["turn"]["digest"], sha256_hex(canonical));

    let read = app.get(&format!("/v1/runs/{id}")).await;
    assert_eq!(read.status, StatusCode::OK, "{:?}", read.body);
    assert_eq!(&read.body, run);
}

#[tokio::test]
async fn the_published_digest_example_is_what_the_api_computes() {
    let (_database, pool) = TestDatabase::create().await;
    let app = support::app(pool).await;
    // The example's canonical text, as docs/design.md §2 prints it, hashes to the published value.
    assert_eq!(
        sha256_hex(r#"[{"arguments":"{\"a\": 1}","id":"call_1","name":"x"}]"#),
        DESIGN_EXAMPLE_DIGEST
    );
    let body = json!({
        "id": Uuid::new_v4(),
        "owner_uid": 0,
        "messages": [
            {"role": "user", "content": "go"},
            {"role": "assistant", "content": null, "tool_calls": [
                {"id": "call_1", "function": {"name": "x", "arguments": "{\"a\": 1}"}},
            ]},
        ],
    });

    let run = app.register(body).await;

    assert_eq!(run["turn"]["digest"], DESIGN_EXAMPLE_DIGEST);
    // An undeclared tool with no executor is a read.
    assert_eq!(run["turn"]["pending_calls"][0]["effect"], "read");
}

#[tokio::test]
async fn the_same_registration_again_is_answered_200_with_the_same_run() {
    let (_database, pool) = TestDatabase::create().await;
    let app = support::app(pool).await;
    app.user(7, false, false, false).await;
    let id = Uuid::new_v4();
    let first = app.register(run_body(id, 7)).await;

    let again = app.post("/v1/runs", run_body(id, 7)).await;

    assert_eq!(again.status, StatusCode::OK, "{:?}", again.body);
    assert_eq!(again.body, first);
    let counts = row_counts(&app.pool).await;
    assert_eq!((counts.runs, counts.turn_calls), (1, 2));
}

#[tokio::test]
async fn the_same_registration_with_its_keys_in_another_order_is_the_same_run() {
    let (_database, pool) = TestDatabase::create().await;
    let app = support::app(pool).await;
    app.user(7, false, false, false).await;
    let id = Uuid::new_v4();
    let first = app.register(run_body(id, 7)).await;
    // `run_body` as text, every object's keys reordered (top level, messages, calls, functions, tools), spaced.
    let reordered = r#"{
        "tools": [{"effect": "write", "name": "update_page_metadata"}, {"effect": "read", "name": "read_page"}],
        "messages": [
            {"content": "You edit pages.", "role": "system"},
            {"content": "Set the meta description.", "role": "user"},
            {"tool_calls": [
                {"function": {"arguments": "{\"page\": 12, \"description\": \"A page\"}", "name": "update_page_metadata"},
                 "type": "function", "id": "call_1"},
                {"type": "function", "function": {"name": "read_page", "arguments": "{\"page\": 12}"}, "id": "call_2"}
             ], "content": null, "role": "assistant"}
        ],
        "owner_uid": 7,
        "id": "RUN_ID"
    }"#
    .replace("RUN_ID", &id.to_string());

    let again = app
        .send_bytes(
            Method::POST,
            "/v1/runs",
            Some("application/json"),
            reordered,
        )
        .await;

    assert_eq!(again.status, StatusCode::OK, "{:?}", again.body);
    assert_eq!(again.body, first);
    assert_eq!(row_counts(&app.pool).await.runs, 1);
}

#[tokio::test]
async fn a_registration_that_spells_out_the_defaults_is_the_same_run() {
    let (_database, pool) = TestDatabase::create().await;
    let app = support::app(pool).await;
    app.user(7, false, false, false).await;
    let id = Uuid::new_v4();
    let first = app.register(run_body(id, 7)).await;
    let mut explicit = run_body(id, 7);
    // The level a run without one gets is the service's (`full` in the test service).
    explicit["privacy_level"] = json!("full");
    explicit["require_second_approver"] = json!(false);

    let again = app.post("/v1/runs", explicit).await;

    assert_eq!(again.status, StatusCode::OK, "{:?}", again.body);
    assert_eq!(again.body, first);
}

#[tokio::test]
async fn another_body_under_a_taken_id_is_a_conflict_and_changes_nothing() {
    let (_database, pool) = TestDatabase::create().await;
    let app = support::app(pool).await;
    app.user(7, false, false, false).await;
    let id = Uuid::new_v4();
    let first = app.register(run_body(id, 7)).await;
    let mut other_arguments = run_body(id, 7);
    other_arguments["messages"][2]["tool_calls"][0]["function"]["arguments"] =
        json!(r#"{"page": 12, "description": "Another page"}"#);
    let mut other_owner = run_body(id, 0);
    other_owner["owner_uid"] = json!(0);
    let mut other_level = run_body(id, 7);
    other_level["privacy_level"] = json!("redacted");

    for body in [other_arguments, other_owner, other_level] {
        let answer = app.post("/v1/runs", body.clone()).await;
        assert_problem(&answer, StatusCode::CONFLICT, "run_exists");
    }

    let read = app.get(&format!("/v1/runs/{id}")).await;
    assert_eq!(read.body, first);
    let counts = row_counts(&app.pool).await;
    assert_eq!((counts.runs, counts.turn_calls), (1, 2));
}

#[tokio::test]
async fn an_id_taken_in_another_tenant_is_a_conflict_that_reveals_nothing_of_that_run() {
    let (_database, pool) = TestDatabase::create().await;
    let app = support::app(pool).await;
    let id = Uuid::new_v4();
    let first = app.register(run_body(id, 0)).await;
    let other_tenant = support::add_client(&app.pool, "other", "other", support::ALL_SCOPES).await;

    let answer = app
        .call(
            Method::POST,
            "/v1/runs",
            Some(&other_tenant),
            Some(run_body(id, 0)),
        )
        .await;

    assert_problem(&answer, StatusCode::CONFLICT, "run_exists");
    assert!(!String::from_utf8_lossy(&answer.bytes).contains("call_1"));
    assert_eq!(app.get(&format!("/v1/runs/{id}")).await.body, first);
    assert_eq!(row_counts(&app.pool).await.runs, 1);
}

#[tokio::test]
async fn an_id_taken_in_another_tenant_is_answered_exactly_as_a_conflict_in_ones_own_tenant() {
    let (_database, pool) = TestDatabase::create().await;
    let app = support::app(pool).await;
    let foreign = Uuid::new_v4();
    app.register(run_body(foreign, 0)).await;
    let other_tenant = support::add_client(&app.pool, "other", "other", support::ALL_SCOPES).await;
    let register =
        |body: Value| app.call(Method::POST, "/v1/runs", Some(&other_tenant), Some(body));
    let own = Uuid::new_v4();
    assert_eq!(register(run_body(own, 0)).await.status, StatusCode::CREATED);
    let mut other_body = run_body(own, 0);
    other_body["messages"][2]["tool_calls"][0]["function"]["arguments"] =
        json!(r#"{"page": 12, "description": "Another page"}"#);

    let in_own_tenant = register(other_body).await;
    let in_another_tenant = register(run_body(foreign, 0)).await;

    let comparable = |answer: &support::Answer| {
        let mut body = answer.body.clone();
        body["request_id"] = Value::Null;
        let mut headers: Vec<(String, String)> = answer
            .headers
            .iter()
            .filter(|(name, _)| *name != "x-request-id")
            .map(|(name, value)| (name.to_string(), value.to_str().unwrap().to_owned()))
            .collect();
        headers.sort();
        (answer.status, headers, body)
    };
    assert_problem(&in_another_tenant, StatusCode::CONFLICT, "run_exists");
    assert_eq!(comparable(&in_another_tenant), comparable(&in_own_tenant));
}

// Refusals of the transcript: 422 invalid_transcript, nothing written.

#[tokio::test]
async fn a_transcript_whose_last_message_is_not_an_assistant_turn_is_refused() {
    let (_database, pool) = TestDatabase::create().await;
    let app = support::app(pool).await;
    let mut messages = transcript(vec![call("call_1", "read_page", "{}")]);
    messages.push(json!({"role": "user", "content": "and then?"}));

    assert_refused(
        &app,
        body_with_messages(messages),
        StatusCode::UNPROCESSABLE_ENTITY,
        "invalid_transcript",
    )
    .await;
}

#[tokio::test]
async fn an_assistant_turn_without_tool_calls_is_refused() {
    let (_database, pool) = TestDatabase::create().await;
    let app = support::app(pool).await;
    let no_calls = vec![
        json!({"role": "user", "content": "hi"}),
        json!({"role": "assistant", "content": "Hello."}),
    ];
    let null_calls = vec![
        json!({"role": "user", "content": "hi"}),
        json!({"role": "assistant", "content": "Hello.", "tool_calls": null}),
    ];
    let empty_calls = transcript(vec![]);

    for messages in [no_calls, null_calls, empty_calls] {
        assert_refused(
            &app,
            body_with_messages(messages),
            StatusCode::UNPROCESSABLE_ENTITY,
            "invalid_transcript",
        )
        .await;
    }
}

#[tokio::test]
async fn an_empty_transcript_is_refused() {
    let (_database, pool) = TestDatabase::create().await;
    let app = support::app(pool).await;

    assert_refused(
        &app,
        body_with_messages(vec![]),
        StatusCode::UNPROCESSABLE_ENTITY,
        "invalid_transcript",
    )
    .await;
}

#[tokio::test]
async fn a_call_id_used_twice_is_refused() {
    let (_database, pool) = TestDatabase::create().await;
    let app = support::app(pool).await;
    let in_one_turn = transcript(vec![
        call("call_1", "read_page", "{}"),
        call("call_1", "read_page", r#"{"page": 2}"#),
    ]);
    let across_turns = vec![
        json!({"role": "user", "content": "Read page 1."}),
        json!({"role": "assistant", "content": null, "tool_calls": [call("call_1", "read_page", "{}")]}),
        json!({"role": "tool", "tool_call_id": "call_1", "content": "page 1"}),
        json!({"role": "assistant", "content": null, "tool_calls": [call("call_1", "read_page", "{}")]}),
    ];

    for messages in [in_one_turn, across_turns] {
        assert_refused(
            &app,
            body_with_messages(messages),
            StatusCode::UNPROCESSABLE_ENTITY,
            "invalid_transcript",
        )
        .await;
    }
}

#[tokio::test]
async fn a_tool_name_outside_the_rule_is_refused() {
    let (_database, pool) = TestDatabase::create().await;
    let app = support::app(pool).await;
    let too_long = "x".repeat(129);

    for name in ["read page", too_long.as_str(), "read\"page", "read/page"] {
        assert_refused(
            &app,
            body_with_call(call("call_1", name, "{}")),
            StatusCode::UNPROCESSABLE_ENTITY,
            "invalid_transcript",
        )
        .await;
    }
}

#[tokio::test]
async fn a_tool_name_of_128_allowed_characters_is_accepted() {
    let (_database, pool) = TestDatabase::create().await;
    let app = support::app(pool).await;
    let name = format!("{}-_.9", "A".repeat(124));
    assert_eq!(name.len(), 128);

    let run = app
        .register(body_with_call(call("call_1", &name, "{}")))
        .await;

    assert_eq!(run["turn"]["pending_calls"][0]["name"], name);
}

#[tokio::test]
async fn arguments_that_are_not_a_string_holding_a_json_object_are_refused() {
    let (_database, pool) = TestDatabase::create().await;
    let app = support::app(pool).await;
    let not_a_string = json!({"id": "call_1", "type": "function",
        "function": {"name": "read_page", "arguments": {"page": 12}}});
    let not_json = call("call_1", "read_page", "{page: 12");
    let an_array = call("call_1", "read_page", "[12]");

    for call in [not_a_string, not_json, an_array] {
        assert_refused(
            &app,
            body_with_call(call),
            StatusCode::UNPROCESSABLE_ENTITY,
            "invalid_transcript",
        )
        .await;
    }
}

#[tokio::test]
async fn a_message_with_an_unknown_role_is_refused() {
    let (_database, pool) = TestDatabase::create().await;
    let app = support::app(pool).await;
    let mut messages = transcript(vec![call("call_1", "read_page", "{}")]);
    messages.insert(1, json!({"role": "robot", "content": "beep"}));

    assert_refused(
        &app,
        body_with_messages(messages),
        StatusCode::UNPROCESSABLE_ENTITY,
        "invalid_transcript",
    )
    .await;
}

#[tokio::test]
async fn a_tool_message_without_its_tool_call_id_is_refused() {
    let (_database, pool) = TestDatabase::create().await;
    let app = support::app(pool).await;
    let messages = vec![
        json!({"role": "user", "content": "Read page 1."}),
        json!({"role": "assistant", "content": null, "tool_calls": [call("call_0", "read_page", "{}")]}),
        json!({"role": "tool", "content": "page 1"}),
        json!({"role": "assistant", "content": null, "tool_calls": [call("call_1", "read_page", "{}")]}),
    ];

    assert_refused(
        &app,
        body_with_messages(messages),
        StatusCode::UNPROCESSABLE_ENTITY,
        "invalid_transcript",
    )
    .await;
}

// Refusals of the body's other fields.

#[tokio::test]
async fn an_unknown_top_level_field_is_refused_as_an_invalid_body() {
    let (_database, pool) = TestDatabase::create().await;
    let app = support::app(pool).await;
    let mut body = run_body(Uuid::new_v4(), 0);
    body["priority"] = json!(1);

    assert_refused(&app, body, StatusCode::UNPROCESSABLE_ENTITY, "invalid_body").await;
}

#[tokio::test]
async fn a_negative_owner_uid_is_refused() {
    let (_database, pool) = TestDatabase::create().await;
    let app = support::app(pool).await;

    assert_refused(
        &app,
        run_body(Uuid::new_v4(), -1),
        StatusCode::UNPROCESSABLE_ENTITY,
        "invalid_owner",
    )
    .await;
}

#[tokio::test]
async fn an_owner_uid_that_names_no_user_of_the_tenant_is_refused() {
    let (_database, pool) = TestDatabase::create().await;
    let app = support::app(pool).await;
    // uid 9 exists, but in another tenant: it is no user of this client's tenant.
    let other_tenant = support::add_client(&app.pool, "other", "other", support::ALL_SCOPES).await;
    let put = app
        .call(
            Method::PUT,
            "/v1/users/9",
            Some(&other_tenant),
            Some(json!({"username": "nine", "is_admin": false, "can_approve_others": false, "disabled": false})),
        )
        .await;
    assert_eq!(put.status, StatusCode::OK, "{:?}", put.body);

    for uid in [8, 9] {
        assert_refused(
            &app,
            run_body(Uuid::new_v4(), uid),
            StatusCode::UNPROCESSABLE_ENTITY,
            "unknown_owner",
        )
        .await;
    }
}

#[tokio::test]
async fn owner_uid_0_registers_a_service_run_without_any_user() {
    let (_database, pool) = TestDatabase::create().await;
    let app = support::app(pool).await;

    let run = app.register(run_body(Uuid::new_v4(), 0)).await;

    assert_eq!(run["owner_uid"], 0);
    assert_eq!(run["status"], "waiting_for_approval");
    assert_eq!(row_counts(&app.pool).await.backend_users, 0);
}

#[tokio::test]
async fn a_tool_declared_twice_or_with_an_invalid_name_is_refused() {
    let (_database, pool) = TestDatabase::create().await;
    let app = support::app(pool).await;
    let mut twice = run_body(Uuid::new_v4(), 0);
    twice["tools"] = json!([
        {"name": "read_page", "effect": "read"},
        {"name": "read_page", "effect": "write"},
    ]);
    let mut invalid_name = run_body(Uuid::new_v4(), 0);
    invalid_name["tools"] = json!([{"name": "read page", "effect": "read"}]);

    for body in [twice, invalid_name] {
        assert_refused(&app, body, StatusCode::UNPROCESSABLE_ENTITY, "invalid_tool").await;
    }
}

#[tokio::test]
async fn an_effect_outside_read_and_write_is_refused() {
    let (_database, pool) = TestDatabase::create().await;
    let app = support::app(pool).await;
    let mut body = run_body(Uuid::new_v4(), 0);
    body["tools"] = json!([{"name": "read_page", "effect": "delete"}]);

    assert_refused(&app, body, StatusCode::UNPROCESSABLE_ENTITY, "invalid_body").await;
}

#[tokio::test]
async fn a_privacy_level_outside_the_enum_is_refused() {
    let (_database, pool) = TestDatabase::create().await;
    let app = support::app(pool).await;
    let mut body = run_body(Uuid::new_v4(), 0);
    body["privacy_level"] = json!("secret");

    assert_refused(&app, body, StatusCode::UNPROCESSABLE_ENTITY, "invalid_body").await;
}

#[tokio::test]
async fn a_privacy_level_of_the_enum_is_registered() {
    let (_database, pool) = TestDatabase::create().await;
    let app = support::app(pool).await;
    let mut body = run_body(Uuid::new_v4(), 0);
    body["privacy_level"] = json!("none");

    let run = app.register(body).await;

    assert_eq!(run["privacy_level"], "none");
}

// Refusals of the request's form.

#[tokio::test]
async fn a_body_that_is_not_declared_json_is_refused_415() {
    let (_database, pool) = TestDatabase::create().await;
    let app = support::app(pool).await;
    let text = serde_json::to_vec(&run_body(Uuid::new_v4(), 0)).unwrap();

    for content_type in [Some("text/plain"), None] {
        let answer = app
            .send_bytes(Method::POST, "/v1/runs", content_type, text.clone())
            .await;
        assert_problem(
            &answer,
            StatusCode::UNSUPPORTED_MEDIA_TYPE,
            "unsupported_media_type",
        );
    }
    assert_no_runs(row_counts(&app.pool).await);
}

#[tokio::test]
async fn malformed_json_is_refused_400() {
    let (_database, pool) = TestDatabase::create().await;
    let app = support::app(pool).await;

    let answer = app
        .send_bytes(
            Method::POST,
            "/v1/runs",
            Some("application/json"),
            r#"{"id": "#,
        )
        .await;

    assert_problem(&answer, StatusCode::BAD_REQUEST, "malformed_json");
    assert_no_runs(row_counts(&app.pool).await);
}

#[tokio::test]
async fn a_body_over_the_limit_is_refused_413() {
    let (_database, pool) = TestDatabase::create().await;
    let app = support::app_with(
        pool,
        Options {
            max_body_bytes: 4096,
            ..Default::default()
        },
    )
    .await;
    let mut messages = transcript(vec![call("call_1", "read_page", "{}")]);
    messages[1]["content"] = json!("x".repeat(5000));

    assert_refused(
        &app,
        body_with_messages(messages),
        StatusCode::PAYLOAD_TOO_LARGE,
        "payload_too_large",
    )
    .await;
    // The limit, not the body, is what refused it: a small body goes through the same app.
    app.register(run_body(Uuid::new_v4(), 0)).await;
}

// Backend users.

#[tokio::test]
async fn putting_a_user_creates_it_and_putting_it_again_replaces_it() {
    let (_database, pool) = TestDatabase::create().await;
    let app = support::app(pool).await;
    let put = |body: Value| app.call(Method::PUT, "/v1/users/7", Some(&app.admin_key), Some(body));

    let created = put(json!({"username": "alice", "is_admin": false, "can_approve_others": true, "disabled": false})).await;

    assert_eq!(created.status, StatusCode::OK, "{:?}", created.body);
    assert_eq!(created.body["uid"], 7);
    assert_eq!(created.body["username"], "alice");
    assert_eq!(created.body["is_admin"], false);
    assert_eq!(created.body["can_approve_others"], true);
    assert_eq!(created.body["disabled"], false);
    assert!(created.body["created_at"].is_string() && created.body["updated_at"].is_string());

    let replaced = put(json!({"username": "alice2", "is_admin": true, "can_approve_others": false, "disabled": true})).await;

    assert_eq!(replaced.status, StatusCode::OK, "{:?}", replaced.body);
    assert_eq!(replaced.body["uid"], 7);
    assert_eq!(replaced.body["username"], "alice2");
    assert_eq!(replaced.body["is_admin"], true);
    assert_eq!(replaced.body["can_approve_others"], false);
    assert_eq!(replaced.body["disabled"], true);
    assert_eq!(replaced.body["created_at"], created.body["created_at"]);
    assert_eq!(row_counts(&app.pool).await.backend_users, 1);
}

#[tokio::test]
async fn a_uid_that_is_not_an_integer_of_at_least_1_is_refused() {
    let (_database, pool) = TestDatabase::create().await;
    let app = support::app(pool).await;
    let body = json!({"username": "alice", "is_admin": false, "can_approve_others": false, "disabled": false});

    for uid in ["0", "abc", "-3", "99999999999999999999"] {
        let answer = app
            .call(
                Method::PUT,
                &format!("/v1/users/{uid}"),
                Some(&app.admin_key),
                Some(body.clone()),
            )
            .await;
        assert_problem(&answer, StatusCode::UNPROCESSABLE_ENTITY, "invalid_uid");
    }
    assert_eq!(row_counts(&app.pool).await.backend_users, 0);
}

#[tokio::test]
async fn an_empty_username_is_refused() {
    let (_database, pool) = TestDatabase::create().await;
    let app = support::app(pool).await;

    let answer = app
        .call(
            Method::PUT,
            "/v1/users/7",
            Some(&app.admin_key),
            Some(json!({"username": "", "is_admin": false, "can_approve_others": false, "disabled": false})),
        )
        .await;

    assert_problem(
        &answer,
        StatusCode::UNPROCESSABLE_ENTITY,
        "invalid_username",
    );
    assert_eq!(row_counts(&app.pool).await.backend_users, 0);
}

#[tokio::test]
async fn a_user_body_with_an_unknown_or_a_missing_field_is_refused() {
    let (_database, pool) = TestDatabase::create().await;
    let app = support::app(pool).await;
    let unknown = json!({"username": "alice", "is_admin": false, "can_approve_others": false, "disabled": false, "phone": "555-0100"});
    let missing = json!({"username": "alice", "is_admin": false, "can_approve_others": false});

    for body in [unknown, missing] {
        let answer = app
            .call(Method::PUT, "/v1/users/7", Some(&app.admin_key), Some(body))
            .await;
        assert_problem(&answer, StatusCode::UNPROCESSABLE_ENTITY, "invalid_body");
    }
    assert_eq!(row_counts(&app.pool).await.backend_users, 0);
}

// Cancelling and completing.

#[tokio::test]
async fn cancelling_a_waiting_run_cancels_it_and_cancelling_again_answers_the_run() {
    let (_database, pool) = TestDatabase::create().await;
    let app = support::app(pool).await;
    let (id, _) = owned_run(&app).await;

    let cancelled = act(&app, id, "cancel").await;

    assert_eq!(cancelled.status, StatusCode::OK, "{:?}", cancelled.body);
    assert_eq!(cancelled.body["id"], id.to_string());
    assert_eq!(cancelled.body["status"], "cancelled");
    assert_eq!(
        app.get(&format!("/v1/runs/{id}")).await.body["status"],
        "cancelled"
    );

    let again = act(&app, id, "cancel").await;

    assert_eq!(again.status, StatusCode::OK, "{:?}", again.body);
    assert_eq!(again.body["status"], "cancelled");
}

#[tokio::test]
async fn a_run_waiting_for_approval_cannot_be_completed() {
    let (_database, pool) = TestDatabase::create().await;
    let app = support::app(pool).await;
    let (id, _) = owned_run(&app).await;

    let answer = act(&app, id, "complete").await;

    assert_problem(&answer, StatusCode::CONFLICT, "not_resumed");
    assert_eq!(
        app.get(&format!("/v1/runs/{id}")).await.body["status"],
        "waiting_for_approval"
    );
}

#[tokio::test]
async fn a_denied_run_completes_and_a_completed_run_cannot_be_cancelled() {
    let (_database, pool) = TestDatabase::create().await;
    let app = support::app(pool).await;
    let (id, digest) = owned_run(&app).await;
    let denied = app.decide(id, false, Some(7), &digest).await;
    assert_eq!(denied.status, StatusCode::OK, "{:?}", denied.body);

    let completed = act(&app, id, "complete").await;

    assert_eq!(completed.status, StatusCode::OK, "{:?}", completed.body);
    assert_eq!(completed.body["status"], "completed");
    let again = act(&app, id, "complete").await;
    assert_eq!(again.status, StatusCode::OK, "{:?}", again.body);
    assert_eq!(again.body["status"], "completed");

    let cancel = act(&app, id, "cancel").await;

    assert_problem(&cancel, StatusCode::CONFLICT, "run_finished");
    assert_eq!(
        app.get(&format!("/v1/runs/{id}")).await.body["status"],
        "completed"
    );
}

#[tokio::test]
async fn a_resumed_run_may_be_cancelled_and_then_not_completed() {
    let (_database, pool) = TestDatabase::create().await;
    let app = support::app(pool).await;
    let (id, digest) = owned_run(&app).await;
    let denied = app.decide(id, false, Some(7), &digest).await;
    assert_eq!(denied.status, StatusCode::OK, "{:?}", denied.body);

    let cancelled = act(&app, id, "cancel").await;

    assert_eq!(cancelled.status, StatusCode::OK, "{:?}", cancelled.body);
    assert_eq!(cancelled.body["status"], "cancelled");
    let complete = act(&app, id, "complete").await;
    assert_problem(&complete, StatusCode::CONFLICT, "run_finished");
}

#[tokio::test]
async fn a_decision_on_a_cancelled_run_is_refused_and_records_nothing() {
    let (_database, pool) = TestDatabase::create().await;
    let app = support::app(pool).await;
    let (id, digest) = owned_run(&app).await;
    let cancelled = act(&app, id, "cancel").await;
    assert_eq!(cancelled.status, StatusCode::OK, "{:?}", cancelled.body);
    let before = row_counts(&app.pool).await;

    for approved in [false, true] {
        let answer = app.decide(id, approved, Some(7), &digest).await;
        assert_problem(&answer, StatusCode::CONFLICT, "not_awaiting_approval");
    }

    assert_eq!(row_counts(&app.pool).await, before);
    assert_eq!(before.approval_events, 0);
    assert_eq!(
        app.get(&format!("/v1/runs/{id}")).await.body["status"],
        "cancelled"
    );
}

#[tokio::test]
async fn a_runs_source_is_shown_in_its_view_the_inbox_and_its_waiting_event() {
    let (_database, pool) = TestDatabase::create().await;
    let app = support::app(pool).await;
    app.user(7, false, false, false).await;
    let id = Uuid::new_v4();
    let mut body = run_body(id, 7);
    body["source"] = json!("mcp:github");

    let registered = app.register(body.clone()).await;
    assert_eq!(registered["source"], "mcp:github");
    // The same body again is the same registration; without the source it is another.
    assert_eq!(
        app.post("/v1/runs", body.clone()).await.status,
        StatusCode::OK
    );
    let mut unlabelled = body.clone();
    unlabelled.as_object_mut().unwrap().remove("source");
    assert_problem(
        &app.post("/v1/runs", unlabelled).await,
        StatusCode::CONFLICT,
        "run_exists",
    );

    let view = app.get(&format!("/v1/runs/{id}")).await;
    assert_eq!(view.body["source"], "mcp:github", "{:?}", view.body);
    let inbox = app.get("/v1/approvals?acting_uid=7").await;
    assert_eq!(inbox.status, StatusCode::OK, "{:?}", inbox.body);
    assert_eq!(inbox.body["items"][0]["run_id"], id.to_string());
    assert_eq!(inbox.body["items"][0]["source"], "mcp:github");
    let feed = app.get("/v1/events?wait=0").await;
    let waiting = feed.body["events"]
        .as_array()
        .unwrap()
        .iter()
        .find(|event| event["type"] == "run.waiting" && event["data"]["run_id"] == id.to_string())
        .expect("a run.waiting event");
    assert_eq!(waiting["data"]["source"], "mcp:github");

    // The decision path reads the run by its own statement: the event that closes the turn names the source too.
    let digest = registered["turn"]["digest"].clone();
    let denied = app
        .post(
            &format!("/v1/runs/{id}/decision"),
            json!({"approved": false, "decider_uid": 7, "turn_digest": digest}),
        )
        .await;
    assert_eq!(denied.status, StatusCode::OK, "{:?}", denied.body);
    let feed = app.get("/v1/events?wait=0").await;
    let resumed = feed.body["events"]
        .as_array()
        .unwrap()
        .iter()
        .find(|event| event["type"] == "run.resumed")
        .expect("a run.resumed event");
    assert_eq!(resumed["data"]["source"], "mcp:github");
}

#[tokio::test]
async fn a_run_without_a_source_shows_none() {
    let (_database, pool) = TestDatabase::create().await;
    let app = support::app(pool).await;
    let (id, _) = owned_run(&app).await;

    let view = app.get(&format!("/v1/runs/{id}")).await;
    assert!(view.body.get("source").is_none(), "{:?}", view.body);
    let inbox = app.get("/v1/approvals?acting_uid=7").await;
    assert!(inbox.body["items"][0].get("source").is_none());
    let feed = app.get("/v1/events?wait=0").await;
    assert!(feed.body["events"][0]["data"].get("source").is_none());
}

#[tokio::test]
async fn a_source_outside_its_rule_is_refused() {
    let (_database, pool) = TestDatabase::create().await;
    let app = support::app(pool).await;
    let too_long = "x".repeat(65);
    for source in ["", "mcp github", "chat\nBcc: x", "<b>", too_long.as_str()] {
        let mut body = run_body(Uuid::new_v4(), 0);
        body["source"] = json!(source);
        assert_refused(
            &app,
            body,
            StatusCode::UNPROCESSABLE_ENTITY,
            "invalid_source",
        )
        .await;
    }
    let mut body = run_body(Uuid::new_v4(), 0);
    body["source"] = json!(7);
    assert_refused(&app, body, StatusCode::UNPROCESSABLE_ENTITY, "invalid_body").await;
}
