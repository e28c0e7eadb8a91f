//! `POST /v1/runs/{id}/turns`: a resumed run suspended again on its next assistant turn, and the second decision.

use axum::http::StatusCode;
use serde_json::{Value, json};
use sha2::{Digest, Sha256};
use sqlx::PgPool;
use uuid::Uuid;

use crate::database::TestDatabase;
use crate::support::{self, Answer, Recorded, TestApp, call, owned_run, recorded, run_body};

const OWNER: i64 = 7;

/// The denial text of docs/design.md §3 for the write call of a turn, denied by the owner with no reason.
const OWNER_WRITE: &str = "Error: approval_denied (decided_by: run_owner). The approval for tool \"update_page_metadata\" was declined by the user who started this run, the person you are talking to. Nothing was executed. Tell them that they declined the approval themselves, not the system or an operator, and ask whether the change should be proposed again.";
const OWNER_READ: &str = "Error: approval_denied (decided_by: run_owner). The approval for tool \"read_page\" was declined by the user who started this run, the person you are talking to. Nothing was executed. Tell them that they declined the approval themselves, not the system or an operator, and ask whether the change should be proposed again.";

const NEW_ARGUMENTS: &str = r#"{"page": 12, "description": "Another page"}"#;

/// The turn digest of docs/design.md §2, computed here by hand: SHA-256 of the canonical JSON of the calls.
fn digest_of(calls: &[(&str, &str, &str)]) -> String {
    let quoted = |text: &str| serde_json::to_string(text).unwrap();
    let items: Vec<String> = calls
        .iter()
        .map(|(id, name, arguments)| {
            format!(
                r#"{{"arguments":{},"id":{},"name":{}}}"#,
                quoted(arguments),
                quoted(id),
                quoted(name)
            )
        })
        .collect();
    hex::encode(Sha256::digest(format!("[{}]", items.join(",")).as_bytes()))
}

/// What followed the resumed model input: the model asks, the user says yes, the model proposes a new call.
fn next_turn(call_id: &str) -> Vec<Value> {
    vec![
        json!({"role": "assistant", "content": "Should I propose another description?"}),
        json!({"role": "user", "content": "yes"}),
        json!({"role": "assistant", "content": null, "tool_calls": [
            call(call_id, "update_page_metadata", NEW_ARGUMENTS),
        ]}),
    ]
}

async fn append(app: &TestApp, run_id: Uuid, messages: Vec<Value>) -> Answer {
    app.post(
        &format!("/v1/runs/{run_id}/turns"),
        json!({"messages": messages}),
    )
    .await
}

fn registered_messages(run_id: Uuid) -> Vec<Value> {
    run_body(run_id, OWNER)["messages"]
        .as_array()
        .unwrap()
        .clone()
}

fn turn_zero_tool_messages() -> Vec<Value> {
    vec![
        json!({"role": "tool", "tool_call_id": "call_1", "content": OWNER_WRITE}),
        json!({"role": "tool", "tool_call_id": "call_2", "content": OWNER_READ}),
    ]
}

/// A run of the owner whose turn 0 the owner denied; returns its id and turn 0's digest.
async fn denied_run(app: &TestApp) -> (Uuid, String) {
    let (id, digest) = owned_run(app).await;
    let answer = app.decide(id, false, Some(OWNER), &digest).await;
    assert_eq!(answer.status, StatusCode::OK, "{}", answer.body);
    (id, digest)
}

async fn working_transcript(pool: &PgPool, run_id: Uuid) -> Value {
    sqlx::query_scalar("select messages::jsonb from runs where id = $1")
        .bind(run_id)
        .fetch_one(pool)
        .await
        .unwrap()
}

#[test]
fn the_digest_helper_gives_the_design_example() {
    assert_eq!(
        digest_of(&[("call_1", "x", "{\"a\": 1}")]),
        "f3e51cfe10310ecf575b434e7e3f57607a4d5486849fcac084e7c86b27f8527b"
    );
}

#[tokio::test]
async fn after_a_denial_a_new_turn_suspends_the_run_again() {
    let (_database, pool) = TestDatabase::create().await;
    let app = support::app(pool).await;
    let (id, digest0) = denied_run(&app).await;
    let resumed_input = app.get(&format!("/v1/runs/{id}/model-input")).await.body;

    let answer = append(&app, id, next_turn("call_3")).await;
    assert_eq!(answer.status, StatusCode::OK, "{}", answer.body);
    let run = &answer.body;
    assert_eq!(run["id"], json!(id));
    assert_eq!(run["status"], "waiting_for_approval");
    assert_eq!(run["turn"]["index"], 1);
    let digest1 = digest_of(&[("call_3", "update_page_metadata", NEW_ARGUMENTS)]);
    assert_eq!(run["turn"]["digest"], digest1);
    assert_ne!(digest1, digest0);
    assert_eq!(
        run["turn"]["pending_calls"],
        json!([{"id": "call_3", "name": "update_page_metadata", "arguments": NEW_ARGUMENTS, "effect": "write",
                "executor": "service", "editable": true}])
    );
    assert!(run.get("decision").is_none(), "{run}");
    assert_eq!(app.get(&format!("/v1/runs/{id}")).await.body, *run);

    // The working transcript now holds turn 0's tool results, then what the loop appended.
    let mut expected = registered_messages(id);
    expected.extend(turn_zero_tool_messages());
    expected.extend(next_turn("call_3"));
    assert_eq!(working_transcript(&app.pool, id).await, json!(expected));

    // Until turn 1 is decided, the last resumed model input is still turn 0's.
    let still = app.get(&format!("/v1/runs/{id}/model-input")).await;
    assert_eq!(still.status, StatusCode::OK, "{}", still.body);
    assert_eq!(still.body, resumed_input);
}

#[tokio::test]
async fn the_same_append_again_answers_the_same_run() {
    let (_database, pool) = TestDatabase::create().await;
    let app = support::app(pool).await;
    let (id, _) = denied_run(&app).await;
    let first = append(&app, id, next_turn("call_3")).await;
    assert_eq!(first.status, StatusCode::OK, "{}", first.body);
    let transcript = working_transcript(&app.pool, id).await;
    for _ in 0..2 {
        let again = append(&app, id, next_turn("call_3")).await;
        assert_eq!(again.status, StatusCode::OK, "{}", again.body);
        assert_eq!(again.body, first.body);
    }
    assert_eq!(working_transcript(&app.pool, id).await, transcript);
    let calls: i64 = sqlx::query_scalar("select count(*) from turn_calls where run_id = $1")
        .bind(id)
        .fetch_one(&app.pool)
        .await
        .unwrap();
    assert_eq!(calls, 3);
}

#[tokio::test]
async fn a_decision_on_the_new_turn_with_the_old_digest_is_stale() {
    let (_database, pool) = TestDatabase::create().await;
    let app = support::app(pool).await;
    let (id, digest0) = denied_run(&app).await;
    let appended = append(&app, id, next_turn("call_3")).await;
    assert_eq!(appended.status, StatusCode::OK, "{}", appended.body);
    for approved in [false, true] {
        let answer = app.decide(id, approved, Some(OWNER), &digest0).await;
        assert_eq!(answer.status, StatusCode::CONFLICT, "{}", answer.body);
        assert_eq!(answer.code(), "stale_turn");
    }
    assert_eq!(
        recorded(&app.pool, id).await,
        Recorded {
            status: "waiting_for_approval".into(),
            approval_events: 1,
            tool_events: 2,
            calls_with_outcome: 2,
        }
    );
}

#[tokio::test]
async fn denying_the_new_turn_resumes_with_both_turns_tool_messages_in_order() {
    let (_database, pool) = TestDatabase::create().await;
    let app = support::app(pool).await;
    let (id, _) = denied_run(&app).await;
    let appended = append(&app, id, next_turn("call_3")).await;
    let digest1 = appended.body["turn"]["digest"].as_str().unwrap().to_owned();

    let answer = app.decide(id, false, Some(OWNER), &digest1).await;
    assert_eq!(answer.status, StatusCode::OK, "{}", answer.body);
    assert_eq!(answer.body["status"], "resumed");
    assert_eq!(answer.body["decision"]["turn_digest"], digest1);
    assert_eq!(
        answer.body["results"],
        json!([{"call_id": "call_3", "tool": "update_page_metadata", "outcome": "denied", "is_error": true, "content": OWNER_WRITE, "edited": false}])
    );
    let mut messages = registered_messages(id);
    messages.extend(turn_zero_tool_messages());
    messages.extend(next_turn("call_3"));
    messages.push(json!({"role": "tool", "tool_call_id": "call_3", "content": OWNER_WRITE}));
    let expected = json!({"format": "openai-chat", "messages": messages});
    assert_eq!(answer.body["model_input"], expected);
    assert_eq!(
        app.get(&format!("/v1/runs/{id}/model-input")).await.body,
        expected
    );

    // The same decision again is answered byte for byte.
    let again = app.decide(id, false, Some(OWNER), &digest1).await;
    assert_eq!(again.status, StatusCode::OK, "{}", again.body);
    assert_eq!(
        String::from_utf8_lossy(&again.bytes),
        String::from_utf8_lossy(&answer.bytes)
    );

    // Both turns are in the audit record.
    let events = app.get(&format!("/v1/runs/{id}/events")).await.body;
    let turns: Vec<&Value> = events["approval_events"]
        .as_array()
        .unwrap()
        .iter()
        .map(|event| &event["turn_index"])
        .collect();
    assert_eq!(turns, [&json!(0), &json!(1)]);
    let calls: Vec<(&Value, &Value)> = events["tool_events"]
        .as_array()
        .unwrap()
        .iter()
        .map(|event| (&event["turn_index"], &event["call_id"]))
        .collect();
    assert_eq!(
        calls,
        [
            (&json!(0), &json!("call_1")),
            (&json!(0), &json!("call_2")),
            (&json!(1), &json!("call_3")),
        ]
    );

    // Anthropic: each turn's results in one user message, in order.
    let anthropic = app
        .get(&format!("/v1/runs/{id}/model-input?format=anthropic"))
        .await
        .body;
    let result_ids: Vec<Vec<&str>> = anthropic["messages"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|message| {
            let ids: Vec<&str> = message["content"]
                .as_array()?
                .iter()
                .filter(|block| block["type"] == "tool_result")
                .map(|block| block["tool_use_id"].as_str().unwrap())
                .collect();
            (!ids.is_empty()).then_some(ids)
        })
        .collect();
    assert_eq!(result_ids, [vec!["call_1", "call_2"], vec!["call_3"]]);
}

#[tokio::test]
async fn a_new_turn_may_not_reuse_a_call_id_of_an_earlier_turn() {
    let (_database, pool) = TestDatabase::create().await;
    let app = support::app(pool).await;
    let (id, digest0) = denied_run(&app).await;
    let transcript = working_transcript(&app.pool, id).await;
    for reused in ["call_1", "call_2"] {
        let answer = append(&app, id, next_turn(reused)).await;
        assert_eq!(
            answer.status,
            StatusCode::UNPROCESSABLE_ENTITY,
            "{}",
            answer.body
        );
        assert_eq!(answer.content_type(), "application/problem+json");
    }
    let run = app.get(&format!("/v1/runs/{id}")).await.body;
    assert_eq!(run["status"], "resumed");
    assert_eq!(run["turn"]["index"], 0);
    assert_eq!(run["turn"]["digest"], digest0);
    assert_eq!(working_transcript(&app.pool, id).await, transcript);
}

#[tokio::test]
async fn a_new_turn_must_end_in_an_assistant_turn_with_tool_calls() {
    let (_database, pool) = TestDatabase::create().await;
    let app = support::app(pool).await;
    let (id, _) = denied_run(&app).await;
    let answer = append(
        &app,
        id,
        vec![json!({"role": "assistant", "content": "Done."})],
    )
    .await;
    assert_eq!(
        answer.status,
        StatusCode::UNPROCESSABLE_ENTITY,
        "{}",
        answer.body
    );
    assert_eq!(
        app.get(&format!("/v1/runs/{id}")).await.body["status"],
        "resumed"
    );
}

#[tokio::test]
async fn another_append_while_waiting_is_a_conflict() {
    let (_database, pool) = TestDatabase::create().await;
    let app = support::app(pool).await;
    let (id, _) = denied_run(&app).await;
    let first = append(&app, id, next_turn("call_3")).await;
    assert_eq!(first.status, StatusCode::OK, "{}", first.body);
    let transcript = working_transcript(&app.pool, id).await;
    let answer = append(&app, id, next_turn("call_4")).await;
    assert_eq!(answer.status, StatusCode::CONFLICT, "{}", answer.body);
    assert_eq!(answer.code(), "not_resumed");
    assert_eq!(app.get(&format!("/v1/runs/{id}")).await.body, first.body);
    assert_eq!(working_transcript(&app.pool, id).await, transcript);
}

#[tokio::test]
async fn an_append_on_a_run_never_decided_is_a_conflict() {
    let (_database, pool) = TestDatabase::create().await;
    let app = support::app(pool).await;
    let (id, digest0) = owned_run(&app).await;
    let answer = append(&app, id, next_turn("call_3")).await;
    assert_eq!(answer.status, StatusCode::CONFLICT, "{}", answer.body);
    assert_eq!(answer.code(), "not_resumed");
    let run = app.get(&format!("/v1/runs/{id}")).await.body;
    assert_eq!(run["status"], "waiting_for_approval");
    assert_eq!(run["turn"]["index"], 0);
    assert_eq!(run["turn"]["digest"], digest0);
}

#[tokio::test]
async fn a_run_of_another_tenant_takes_no_turn() {
    let (_database, pool) = TestDatabase::create().await;
    let app = support::app(pool).await;
    let (id, digest0) = denied_run(&app).await;
    let stranger = support::add_client(&app.pool, "stranger", "other", support::ALL_SCOPES).await;
    let answer = app
        .call(
            axum::http::Method::POST,
            &format!("/v1/runs/{id}/turns"),
            Some(&stranger),
            Some(json!({"messages": next_turn("call_3")})),
        )
        .await;
    assert_eq!(answer.status, StatusCode::NOT_FOUND, "{}", answer.body);
    let run = app.get(&format!("/v1/runs/{id}")).await.body;
    assert_eq!(run["status"], "resumed");
    assert_eq!(run["turn"]["digest"], digest0);
}

#[tokio::test]
async fn in_anthropic_form_every_resumed_turns_results_keep_their_error_flag() {
    let (_database, pool) = TestDatabase::create().await;
    let app = support::app(pool).await;
    let (id, _) = denied_run(&app).await;
    let appended = append(&app, id, next_turn("call_3")).await;
    let digest1 = appended.body["turn"]["digest"].as_str().unwrap().to_owned();
    let answer = app.decide(id, false, Some(OWNER), &digest1).await;
    assert_eq!(answer.status, StatusCode::OK, "{}", answer.body);
    let anthropic = app
        .get(&format!("/v1/runs/{id}/model-input?format=anthropic"))
        .await
        .body;
    let results: Vec<(&str, &Value)> = anthropic["messages"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|message| message["content"].as_array())
        .flatten()
        .filter(|block| block["type"] == "tool_result")
        .map(|block| (block["tool_use_id"].as_str().unwrap(), &block["is_error"]))
        .collect();
    // Turn 0's results were written by this service (denials, is_error = true): docs/design.md §7 gives every turn's
    // tool_result blocks their is_error, and ADR-200 keeps is_error = true on a refusal for every consumer.
    assert_eq!(
        results,
        [
            ("call_1", &json!(true)),
            ("call_2", &json!(true)),
            ("call_3", &json!(true)),
        ]
    );
}

#[tokio::test]
async fn appends_at_twice_the_pool_size_at_once_all_succeed() {
    const POOL_SIZE: u32 = 3;
    let (_database, pool) = TestDatabase::create().await;
    let app = support::app(pool.clone()).await;
    let mut ids = Vec::new();
    for _ in 0..2 * POOL_SIZE {
        ids.push(denied_run(&app).await.0);
    }
    // An append holds its transaction's connection throughout; one that needed a second connection would wait for
    // the others, which wait for it, until the acquire timeout.
    let small_pool = sqlx::postgres::PgPoolOptions::new()
        .max_connections(POOL_SIZE)
        .acquire_timeout(std::time::Duration::from_secs(3))
        .connect_with((*pool.connect_options()).clone())
        .await
        .unwrap();
    let small = app.with_pool(small_pool);

    let answers = futures::future::join_all(
        ids.iter()
            .map(|id| append(&small, *id, next_turn("call_3"))),
    )
    .await;
    for answer in &answers {
        assert_eq!(answer.status, StatusCode::OK, "{}", answer.body);
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_large_turn_reads_and_parses_its_run_s_transcript_before_it_waits_for_the_run_s_lock() {
    let (database, pool) = TestDatabase::create().await;
    let app = support::app(pool.clone()).await;
    let (run_id, _) = denied_run(&app).await;
    // The test holds the run's row lock; the turn, of about 300 KiB, is handled on its low-priority thread.
    let mut lock = pool.begin().await.unwrap();
    sqlx::query("select 1 from runs where id = $1 for update")
        .bind(run_id)
        .execute(&mut *lock)
        .await
        .unwrap();
    let mut messages = next_turn("call_3");
    messages[0]["content"] = json!("p".repeat(300 * 1024));
    let request = axum::http::Request::post(format!("/v1/runs/{run_id}/turns"))
        .header("authorization", format!("Bearer {}", app.admin_key))
        .header("content-type", "application/json")
        .body(axum::body::Body::from(
            json!({"messages": messages}).to_string(),
        ))
        .unwrap();
    let router = app.router.clone();
    let appended = tokio::spawn(async move {
        use tower::ServiceExt;
        router.oneshot(request).await.unwrap().status()
    });
    let watching = PgPool::connect(&database.url).await.unwrap();
    crate::database::wait_until_waiting_for_locks(&watching, 1).await;

    // Written while the turn waits for the lock, a transcript that is no JSON is not what it parses: it read and
    // parsed the run's transcript before it waited (under the lock, the turn is the same, so what it read holds).
    sqlx::query("update runs set messages = '[' where id = $1")
        .bind(run_id)
        .execute(&mut *lock)
        .await
        .unwrap();
    lock.commit().await.unwrap();
    assert_eq!(appended.await.unwrap(), StatusCode::OK);
}
