//! The transcript kept as the service's own JSON text and spliced into answers (migration 0008): the
//! answers are whole, say their length, and stay byte for byte the same for transcripts stored before the upgrade,
//! which Postgres's `jsonb` had re-formatted.

use axum::http::{StatusCode, header};
use serde_json::{Value, json};
use uuid::Uuid;

use crate::database::TestDatabase;
use crate::support::{self, TestApp, owned_run};

const OWNER: i64 = 7;

/// Makes the run's stored transcript what a row written before migration 0008 holds: `jsonb`'s text of it (a space
/// after every comma and colon, keys in `jsonb`'s order), marked as such by the migration.
async fn store_as_before_the_upgrade(app: &TestApp, run_id: Uuid) {
    let spaced: String = sqlx::query_scalar(
        "update runs set messages = messages::jsonb::text, messages_from_jsonb = true where id = $1
         returning messages",
    )
    .bind(run_id)
    .fetch_one(&app.pool)
    .await
    .unwrap();
    assert!(
        spaced.contains("\": "),
        "jsonb's text has its own spacing: {spaced}"
    );
}

async fn deny(app: &TestApp, run_id: Uuid, digest: &str) -> support::Answer {
    let answer = app.decide(run_id, false, Some(OWNER), digest).await;
    assert_eq!(answer.status, StatusCode::OK, "{}", answer.body);
    answer
}

#[tokio::test]
async fn a_transcript_stored_before_the_upgrade_is_answered_with_the_same_bytes_as_before() {
    let (_database, pool) = TestDatabase::create().await;
    let app = support::app(pool).await;
    let (id, digest) = owned_run(&app).await;
    let first = deny(&app, id, &digest).await;
    let model_input = app.get(&format!("/v1/runs/{id}/model-input")).await;
    assert_eq!(model_input.status, StatusCode::OK, "{}", model_input.body);

    store_as_before_the_upgrade(&app, id).await;
    let again = deny(&app, id, &digest).await;
    assert_eq!(
        String::from_utf8_lossy(&again.bytes),
        String::from_utf8_lossy(&first.bytes)
    );
    let read_again = app.get(&format!("/v1/runs/{id}/model-input")).await;
    assert_eq!(read_again.bytes, model_input.bytes);
    assert_eq!(first.body["model_input"], model_input.body);
}

#[tokio::test]
async fn a_new_turn_after_a_transcript_stored_before_the_upgrade_appends_to_it() {
    let (_database, pool) = TestDatabase::create().await;
    let app = support::app(pool).await;
    let (id, digest) = owned_run(&app).await;
    deny(&app, id, &digest).await;
    store_as_before_the_upgrade(&app, id).await;

    let next = json!({"messages": [{"role": "assistant", "content": null, "tool_calls": [
        support::call("call_3", "read_page", r#"{"page": 1}"#),
    ]}]});
    let opened = app.post(&format!("/v1/runs/{id}/turns"), next).await;
    assert_eq!(opened.status, StatusCode::OK, "{}", opened.body);
    let digest = opened.body["turn"]["digest"].as_str().unwrap().to_owned();
    let answer = deny(&app, id, &digest).await;
    let messages = answer.body["model_input"]["messages"].as_array().unwrap();
    let roles: Vec<&str> = messages
        .iter()
        .map(|message| message["role"].as_str().unwrap())
        .collect();
    assert_eq!(
        roles,
        [
            "system",
            "user",
            "assistant",
            "tool",
            "tool",
            "assistant",
            "tool"
        ]
    );
    assert_eq!(messages[6]["tool_call_id"], "call_3");
}

#[tokio::test]
async fn an_answer_says_its_length_and_is_one_json_document_in_every_format() {
    let (_database, pool) = TestDatabase::create().await;
    let app = support::app(pool).await;
    let (id, digest) = owned_run(&app).await;
    let answer = deny(&app, id, &digest).await;
    let answers = [
        answer,
        app.get(&format!("/v1/runs/{id}/model-input")).await,
        app.get(&format!("/v1/runs/{id}/model-input?format=anthropic"))
            .await,
        app.get(&format!(
            "/v1/runs/{id}/model-input?format=openai-responses"
        ))
        .await,
    ];
    for answer in answers {
        assert_eq!(answer.status, StatusCode::OK, "{}", answer.body);
        assert_eq!(answer.content_type(), "application/json");
        let length: usize = answer.headers[header::CONTENT_LENGTH]
            .to_str()
            .unwrap()
            .parse()
            .unwrap();
        assert_eq!(length, answer.bytes.len());
        let parsed: Value = serde_json::from_slice(&answer.bytes).unwrap();
        assert_eq!(parsed, answer.body);
    }
}

#[tokio::test]
async fn the_stored_transcript_is_the_registered_messages_as_compact_json_text() {
    let (_database, pool) = TestDatabase::create().await;
    let app = support::app(pool).await;
    let (id, _) = owned_run(&app).await;
    let (text, from_jsonb): (String, bool) =
        sqlx::query_as("select messages, messages_from_jsonb from runs where id = $1")
            .bind(id)
            .fetch_one(&app.pool)
            .await
            .unwrap();
    let registered = support::run_body(id, OWNER)["messages"].clone();
    assert_eq!(text, serde_json::to_string(&registered).unwrap());
    assert!(!from_jsonb);
}
