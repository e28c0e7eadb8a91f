//! Expiry (docs/design.md §5): a turn nobody decided before its `expires_at` ends with the expired text on every call,
//! by the sweeper or by the decision that came too late, exactly once, and never as a decision or a denial.
//!
//! Turns are made due by moving their `expires_at` into the past in the database, so nothing here waits on a clock.

use approval_resume::domain::results;
use approval_resume::resume::sweeper;
use axum::http::StatusCode;
use serde_json::{Value, json};
use sqlx::PgPool;
use uuid::Uuid;

use crate::database::TestDatabase;
use crate::support::{self, TestApp, assert_problem, owned_run, run_body};

const OWNER: i64 = 7;

async fn make_due(pool: &PgPool, run_id: Uuid) {
    sqlx::query("update runs set expires_at = now() - interval '1 second' where id = $1")
        .bind(run_id)
        .execute(pool)
        .await
        .unwrap();
}

/// A run of owner 7 with an expiry an hour away; returns its id and digest.
async fn expiring_run(app: &TestApp) -> (Uuid, String) {
    app.user(OWNER, false, false, false).await;
    let id = Uuid::new_v4();
    let mut body = run_body(id, OWNER);
    body["approval_ttl_secs"] = json!(3600);
    let run = app.register(body).await;
    assert!(run["expires_at"].is_string(), "{run}");
    (id, run["turn"]["digest"].as_str().unwrap().to_owned())
}

/// What an expiry leaves: `(status, approval events, expiries, outcomes, event types)`.
async fn trace(pool: &PgPool, run_id: Uuid) -> (String, i64, i64, Vec<String>, Vec<String>) {
    let (status, approvals, expiries): (String, i64, i64) = sqlx::query_as(
        "select status, (select count(*) from approval_events where run_id = r.id),
                (select count(*) from turn_expiries where run_id = r.id)
         from runs r where id = $1",
    )
    .bind(run_id)
    .fetch_one(pool)
    .await
    .unwrap();
    let outcomes: Vec<String> = sqlx::query_scalar(
        "select coalesce(outcome, '-') from turn_calls where run_id = $1 order by turn_index, position",
    )
    .bind(run_id)
    .fetch_all(pool)
    .await
    .unwrap();
    let events: Vec<String> =
        sqlx::query_scalar("select type from events where run_id = $1 order by id")
            .bind(run_id)
            .fetch_all(pool)
            .await
            .unwrap();
    (status, approvals, expiries, outcomes, events)
}

fn expired_trace() -> (String, i64, i64, Vec<String>, Vec<String>) {
    (
        "resumed".into(),
        0,
        1,
        vec!["expired".into(), "expired".into()],
        vec!["run.waiting".into(), "run.expired".into()],
    )
}

#[tokio::test]
async fn the_sweeper_expires_a_due_turn_with_the_expired_text_and_no_decision() {
    let (_database, pool) = TestDatabase::create().await;
    let app = support::app(pool).await;
    let (id, _) = expiring_run(&app).await;
    let (not_due, _) = expiring_run(&app).await;
    let inbox = app.get("/v1/approvals?acting_uid=7").await;
    assert_eq!(inbox.status, StatusCode::OK, "{}", inbox.body);
    assert_eq!(
        inbox.body["items"].as_array().unwrap().len(),
        2,
        "{}",
        inbox.body
    );
    assert!(inbox.body["items"][0]["expires_at"].is_string());

    make_due(&app.pool, id).await;
    // Due but not swept yet: the inbox no longer offers it.
    let inbox = app.get("/v1/approvals?acting_uid=7").await;
    let listed: Vec<&Value> = inbox.body["items"]
        .as_array()
        .unwrap()
        .iter()
        .map(|i| &i["run_id"])
        .collect();
    assert_eq!(listed, [&json!(not_due)]);

    assert_eq!(sweeper::sweep_once(&app.state.resumer).await.unwrap(), 1);
    assert_eq!(
        sweeper::sweep_once(&app.state.resumer).await.unwrap(),
        0,
        "once only"
    );
    assert_eq!(trace(&app.pool, id).await, expired_trace());
    assert_eq!(trace(&app.pool, not_due).await.0, "waiting_for_approval");

    let run = app.get(&format!("/v1/runs/{id}")).await.body;
    assert_eq!(run["status"], "resumed");
    assert!(
        run.get("decision").is_none(),
        "an expiry is not a decision: {run}"
    );
    let events = app.get(&format!("/v1/runs/{id}/events")).await.body;
    assert_eq!(events["approval_events"], json!([]));
    assert_eq!(events["expiries"].as_array().unwrap().len(), 1);
    assert_eq!(
        events["tool_events"],
        json!([]),
        "no tool event claims a decider"
    );

    // The model input carries the expired results, in every format.
    let chat = app.get(&format!("/v1/runs/{id}/model-input")).await;
    assert_eq!(chat.status, StatusCode::OK, "{}", chat.body);
    let tools: Vec<&str> = chat.body["messages"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|m| m["role"] == "tool")
        .map(|m| m["content"].as_str().unwrap())
        .collect();
    assert_eq!(
        tools,
        [
            results::expired_text("update_page_metadata"),
            results::expired_text("read_page")
        ]
    );
    let anthropic = app
        .get(&format!("/v1/runs/{id}/model-input?format=anthropic"))
        .await
        .body;
    let last = anthropic["messages"]
        .as_array()
        .unwrap()
        .last()
        .unwrap()
        .clone();
    assert_eq!(last["content"][0]["is_error"], true);
    assert!(!anthropic.to_string().contains("approval_denied"));

    let metrics = support::metrics(&app).await;
    assert!(metrics.contains("approval_expiries_total "), "{metrics}");
}

#[tokio::test]
async fn a_decision_after_expires_at_writes_the_expiry_and_is_answered_409() {
    let (_database, pool) = TestDatabase::create().await;
    let app = support::app(pool).await;
    let (id, digest) = expiring_run(&app).await;
    make_due(&app.pool, id).await;
    let answer = app.decide(id, false, Some(OWNER), &digest).await;
    assert_problem(&answer, StatusCode::CONFLICT, "expired");
    // Committed before the answer, exactly as the sweeper would have written it.
    assert_eq!(trace(&app.pool, id).await, expired_trace());
    assert_eq!(sweeper::sweep_once(&app.state.resumer).await.unwrap(), 0);
    // Any decision after it, per call too, is told the same.
    let per_call = json!({"decider_uid": OWNER, "turn_digest": digest, "calls": [
        {"call_id": "call_1", "approved": true}, {"call_id": "call_2", "approved": false},
    ]});
    let answer = app.post(&format!("/v1/runs/{id}/decision"), per_call).await;
    assert_problem(&answer, StatusCode::CONFLICT, "expired");
    assert_eq!(trace(&app.pool, id).await, expired_trace());
}

#[tokio::test]
async fn a_decision_that_won_in_time_is_replayed_after_expires_at_and_not_expired() {
    let (_database, pool) = TestDatabase::create().await;
    let app = support::app(pool).await;
    let (id, digest) = expiring_run(&app).await;
    let first = app.decide(id, false, Some(OWNER), &digest).await;
    assert_eq!(first.status, StatusCode::OK, "{}", first.body);
    make_due(&app.pool, id).await;
    assert_eq!(sweeper::sweep_once(&app.state.resumer).await.unwrap(), 0);
    let again = app.decide(id, false, Some(OWNER), &digest).await;
    assert_eq!(again.status, StatusCode::OK, "{}", again.body);
    assert_eq!(again.bytes, first.bytes);
    let other = app.decide(id, true, Some(OWNER), &digest).await;
    assert_problem(&other, StatusCode::CONFLICT, "already_decided");
    let (_, approvals, expiries, outcomes, _) = trace(&app.pool, id).await;
    assert_eq!((approvals, expiries), (1, 0));
    assert_eq!(outcomes, ["denied", "denied"]);
}

#[tokio::test]
async fn an_expired_turn_is_followed_by_a_new_turn_with_its_own_expiry() {
    let (_database, pool) = TestDatabase::create().await;
    let app = support::app(pool).await;
    let (id, _) = expiring_run(&app).await;
    make_due(&app.pool, id).await;
    sweeper::sweep_once(&app.state.resumer).await.unwrap();
    let next = json!({
        "messages": [{"role": "assistant", "content": null, "tool_calls": [
            support::call("call_3", "read_page", r#"{"page": 1}"#),
        ]}],
        "expires_at": "2999-01-01T00:00:00Z",
    });
    let answer = app.post(&format!("/v1/runs/{id}/turns"), next).await;
    assert_eq!(answer.status, StatusCode::OK, "{}", answer.body);
    assert_eq!(answer.body["expires_at"], "2999-01-01T00:00:00Z");
    assert_eq!(answer.body["turn"]["index"], 1);
    // The new turn's transcript carries the expired turn's results as tool messages.
    let messages: Vec<Value> = sqlx::query_scalar::<_, sqlx::types::Json<Vec<Value>>>(
        "select messages::jsonb from runs where id = $1",
    )
    .bind(id)
    .fetch_one(&app.pool)
    .await
    .unwrap()
    .0;
    let expired_tool = messages.iter().find(|m| m["role"] == "tool").unwrap();
    assert!(
        expired_tool["content"]
            .as_str()
            .unwrap()
            .starts_with("Error: approval_expired.")
    );
}

#[tokio::test]
async fn a_run_without_an_expiry_never_expires() {
    let (_database, pool) = TestDatabase::create().await;
    let app = support::app(pool).await;
    let (id, _) = owned_run(&app).await;
    let run = app.get(&format!("/v1/runs/{id}")).await.body;
    assert_eq!(run["expires_at"], Value::Null);
    assert_eq!(sweeper::sweep_once(&app.state.resumer).await.unwrap(), 0);
    assert_eq!(trace(&app.pool, id).await.0, "waiting_for_approval");
}

#[tokio::test]
async fn expiry_settings_that_do_not_fit_are_refused_and_nothing_is_recorded() {
    let (_database, pool) = TestDatabase::create().await;
    let app = support::app(pool).await;
    app.user(OWNER, false, false, false).await;
    let cases = [
        (
            json!({"expires_at": "2000-01-01T00:00:00Z"}),
            "expires_at_in_past",
        ),
        (json!({"expires_at": "next week"}), "invalid_expires_at"),
        (json!({"approval_ttl_secs": -5}), "invalid_ttl"),
        (
            json!({"approval_ttl_secs": 5, "expires_at": "2999-01-01T00:00:00Z"}),
            "expiry_ambiguous",
        ),
    ];
    for (changes, code) in cases {
        let id = Uuid::new_v4();
        let mut body = run_body(id, OWNER);
        for (key, value) in changes.as_object().unwrap() {
            body[key] = value.clone();
        }
        let answer = app.post("/v1/runs", body).await;
        assert_problem(&answer, StatusCode::UNPROCESSABLE_ENTITY, code);
        let exists: bool = sqlx::query_scalar("select exists (select 1 from runs where id = $1)")
            .bind(id)
            .fetch_one(&app.pool)
            .await
            .unwrap();
        assert!(!exists, "{code}: the run was recorded");
    }
}

#[tokio::test]
async fn a_ttl_written_as_a_whole_float_is_the_integer_json_schema_says_it_is() {
    let (_database, pool) = TestDatabase::create().await;
    let app = support::app(pool).await;
    app.user(OWNER, false, false, false).await;
    let (whole, fractional) = (Uuid::new_v4(), Uuid::new_v4());
    let mut body = run_body(whole, OWNER);
    body["approval_ttl_secs"] = json!(3600.0);
    let run = app.register(body).await;
    assert!(run["expires_at"].is_string(), "{run}");
    let mut body = run_body(fractional, OWNER);
    body["approval_ttl_secs"] = json!(3600.5);
    let answer = app.post("/v1/runs", body).await;
    assert_problem(&answer, StatusCode::UNPROCESSABLE_ENTITY, "invalid_body");
}
