//! The approve path against real executor servers on loopback ports: results, failures, order, identity, recovery.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use approval_resume::executor::{Executors, ToolExecutor};
use approval_resume::resume;
use approval_resume::vocabulary::Effect;
use axum::Router;
use axum::body::Bytes;
use axum::extract::{Path, State};
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::post;
use serde_json::{Value, json};
use sqlx::PgPool;
use uuid::Uuid;

use crate::database::TestDatabase;
use crate::support::{self, Options, TestApp, call};

/// One request an executor received.
#[derive(Debug, Clone)]
pub struct Received {
    pub behaviour: String,
    pub idempotency_key: String,
    authorization: Option<String>,
    tenant: Option<String>,
    pub body: Value,
}

type Log = Arc<Mutex<Vec<Received>>>;

/// An executor server whose path says how it behaves: `/ok`, `/refuse`, `/slow`, `/status500`, `/redirect`,
/// `/malformed`, `/huge`, `/canary`.
pub struct FakeExecutor {
    base: String,
    log: Log,
}

impl FakeExecutor {
    pub async fn start() -> FakeExecutor {
        let log: Log = Arc::default();
        let app = Router::new()
            .route("/{behaviour}", post(answer))
            .with_state(Arc::clone(&log));
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let base = format!("http://{}", listener.local_addr().unwrap());
        tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
        FakeExecutor { base, log }
    }

    pub fn executor(&self, behaviour: &str) -> ToolExecutor {
        ToolExecutor {
            url: format!("{}/{behaviour}", self.base),
            timeout: Duration::from_millis(300),
            effect: Effect::Write,
            secret: None,
            enabled: true,
            max_content_chars: 64,
        }
    }

    pub fn received(&self) -> Vec<Received> {
        self.log.lock().unwrap().clone()
    }
}

async fn answer(
    State(log): State<Log>,
    Path(behaviour): Path<String>,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    let header = |name: &str| {
        headers
            .get(name)
            .and_then(|v| v.to_str().ok())
            .map(str::to_owned)
    };
    let body: Value = serde_json::from_slice(&body).unwrap_or(Value::Null);
    log.lock().unwrap().push(Received {
        behaviour: behaviour.clone(),
        idempotency_key: header("idempotency-key").unwrap_or_default(),
        authorization: header("authorization"),
        tenant: header("approval-resume-tenant"),
        body: body.clone(),
    });
    let tool = body["tool"].as_str().unwrap_or("").to_owned();
    match behaviour.as_str() {
        "ok" => axum::Json(json!({"content": format!("{tool} done"), "is_error": false}))
            .into_response(),
        "refuse" => {
            axum::Json(json!({"content": "no such page", "is_error": true})).into_response()
        }
        "slow" => {
            tokio::time::sleep(Duration::from_secs(2)).await;
            axum::Json(json!({"content": "late", "is_error": false})).into_response()
        }
        "status500" => (StatusCode::INTERNAL_SERVER_ERROR, "boom").into_response(),
        // Points the call somewhere else, as a compromised or misconfigured executor might.
        "redirect" => (
            StatusCode::TEMPORARY_REDIRECT,
            [(axum::http::header::LOCATION, "/ok")],
        )
            .into_response(),
        "malformed" => (StatusCode::OK, "{\"content\": 12").into_response(),
        // What a tool might well answer: a secret and an address (tests/api/token_privacy.rs).
        "canary" => axum::Json(
            json!({"content": "sk-abcdefghijklmnopqrstuvwxyz0123456789 ann@example.com", "is_error": false}),
        )
        .into_response(),
        "nul" => axum::Json(json!({"content": "before\0after", "is_error": false})).into_response(),
        "huge" => {
            axum::Json(json!({"content": "x".repeat(10_000), "is_error": false})).into_response()
        }
        _ => StatusCode::NOT_FOUND.into_response(),
    }
}

/// An app whose tools are wired to the fake executor as `tools` says: tool name → behaviour.
pub async fn app_with_tools(pool: PgPool, fake: &FakeExecutor, tools: &[(&str, &str)]) -> TestApp {
    let map: HashMap<String, ToolExecutor> = tools
        .iter()
        .map(|(tool, behaviour)| (tool.to_string(), fake.executor(behaviour)))
        .collect();
    support::app_with(
        pool,
        Options {
            executors: Executors::from_tools(map),
            ..Options::default()
        },
    )
    .await
}

/// Registers a run of owner 7 with one call per tool, in order; returns its id and digest.
pub async fn run_calling(app: &TestApp, tools: &[&str]) -> (Uuid, String) {
    app.user(7, false, false, false).await;
    let id = Uuid::new_v4();
    let calls: Vec<Value> = tools
        .iter()
        .enumerate()
        .map(|(i, tool)| call(&format!("call_{i}"), tool, &format!("{{\"n\": {i}}}")))
        .collect();
    let run = app
        .register(json!({"id": id, "owner_uid": 7, "messages": support::transcript(calls)}))
        .await;
    (id, run["turn"]["digest"].as_str().unwrap().to_owned())
}

fn results(answer: &support::Answer) -> Vec<(String, String, bool)> {
    answer.body["results"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| {
            (
                r["outcome"].as_str().unwrap().to_owned(),
                r["content"].as_str().unwrap().to_owned(),
                r["is_error"] == true,
            )
        })
        .collect()
}

#[tokio::test]
async fn an_approved_turn_runs_its_calls_in_order_and_returns_their_results() {
    let (_database, pool) = TestDatabase::create().await;
    let fake = FakeExecutor::start().await;
    let app = app_with_tools(
        pool,
        &fake,
        &[("first", "ok"), ("second", "refuse"), ("third", "ok")],
    )
    .await;
    let (run_id, digest) = run_calling(&app, &["first", "second", "third"]).await;

    let answer = app.decide(run_id, true, Some(7), &digest).await;
    assert_eq!(answer.status, StatusCode::OK, "{:?}", answer.body);
    assert_eq!(
        results(&answer),
        vec![
            ("ok".into(), "first done".into(), false),
            ("failed".into(), "no such page".into(), true),
            ("ok".into(), "third done".into(), false),
        ]
    );
    assert_eq!(answer.body["status"], "resumed");
    let tool_messages: Vec<&Value> = answer.body["model_input"]["messages"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|m| m["role"] == "tool")
        .collect();
    let ids: Vec<&str> = tool_messages
        .iter()
        .map(|m| m["tool_call_id"].as_str().unwrap())
        .collect();
    assert_eq!(ids, ["call_0", "call_1", "call_2"]);

    let received = fake.received();
    let order: Vec<&str> = received
        .iter()
        .map(|r| r.body["tool"].as_str().unwrap())
        .collect();
    assert_eq!(order, ["first", "second", "third"]);
    for (i, request) in received.iter().enumerate() {
        assert_eq!(request.idempotency_key, format!("{run_id}:call_{i}"));
        assert_eq!(
            request.body["owner_uid"], 7,
            "the call runs under the owner's identity"
        );
        assert_eq!(request.body["run_id"], run_id.to_string());
        assert_eq!(request.body["call_id"], format!("call_{i}"));
        assert_eq!(
            request.body["arguments"],
            json!({"n": i}),
            "arguments arrive parsed"
        );
    }
}

#[tokio::test]
async fn every_executor_failure_becomes_the_failed_result() {
    let (_database, pool) = TestDatabase::create().await;
    let fake = FakeExecutor::start().await;
    let mut tools: HashMap<String, ToolExecutor> = [
        ("slow_tool", "slow"),
        ("broken_tool", "status500"),
        ("garbled_tool", "malformed"),
    ]
    .iter()
    .map(|(tool, behaviour)| (tool.to_string(), fake.executor(behaviour)))
    .collect();
    // Nothing listens on a port that was just released: the connection is refused.
    let closed = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .unwrap()
        .local_addr()
        .unwrap();
    tools.insert(
        "offline_tool".into(),
        ToolExecutor {
            url: format!("http://{closed}/ok"),
            ..fake.executor("ok")
        },
    );
    let app = support::app_with(
        pool,
        Options {
            executors: Executors::from_tools(tools),
            ..Options::default()
        },
    )
    .await;
    let names = ["slow_tool", "broken_tool", "garbled_tool", "offline_tool"];
    let (run_id, digest) = run_calling(&app, &names).await;

    let answer = app.decide(run_id, true, Some(7), &digest).await;
    assert_eq!(answer.status, StatusCode::OK, "{:?}", answer.body);
    let expected: Vec<(String, String, bool)> = names
        .iter()
        .map(|tool| {
            (
                "failed".into(),
                format!("Error: tool \"{tool}\" failed."),
                true,
            )
        })
        .collect();
    assert_eq!(results(&answer), expected);
}

#[tokio::test]
async fn an_oversized_answer_is_cut_and_marked() {
    let (_database, pool) = TestDatabase::create().await;
    let fake = FakeExecutor::start().await;
    let app = app_with_tools(pool, &fake, &[("big_tool", "huge")]).await;
    let (run_id, digest) = run_calling(&app, &["big_tool"]).await;
    let answer = app.decide(run_id, true, Some(7), &digest).await;
    let content = answer.body["results"][0]["content"].as_str().unwrap();
    assert_eq!(content, format!("{}… [truncated]", "x".repeat(64)));
    assert_eq!(answer.body["results"][0]["outcome"], "ok");
}

#[tokio::test]
async fn a_tool_without_an_enabled_executor_is_not_permitted_and_never_called() {
    let (_database, pool) = TestDatabase::create().await;
    let fake = FakeExecutor::start().await;
    let mut tools = HashMap::new();
    tools.insert(
        "off_tool".to_owned(),
        ToolExecutor {
            enabled: false,
            ..fake.executor("ok")
        },
    );
    let app = support::app_with(
        pool,
        Options {
            executors: Executors::from_tools(tools),
            ..Options::default()
        },
    )
    .await;
    let (run_id, digest) = run_calling(&app, &["off_tool", "unknown_tool"]).await;
    let answer = app.decide(run_id, true, Some(7), &digest).await;
    assert_eq!(
        results(&answer),
        vec![
            (
                "not_permitted".into(),
                "Error: tool \"off_tool\" is no longer permitted and was not executed.".into(),
                true
            ),
            (
                "not_permitted".into(),
                "Error: tool \"unknown_tool\" is no longer permitted and was not executed.".into(),
                true
            ),
        ]
    );
    assert!(fake.received().is_empty());
}

#[tokio::test]
async fn the_executor_secret_is_sent_as_a_bearer_token() {
    let (_database, pool) = TestDatabase::create().await;
    let fake = FakeExecutor::start().await;
    let mut tools = HashMap::new();
    let secret = approval_resume::config::Secret::new("exec-secret-1".into());
    tools.insert(
        "guarded".to_owned(),
        ToolExecutor {
            secret: Some(secret),
            ..fake.executor("ok")
        },
    );
    let app = support::app_with(
        pool,
        Options {
            executors: Executors::from_tools(tools),
            ..Options::default()
        },
    )
    .await;
    let (run_id, digest) = run_calling(&app, &["guarded"]).await;
    app.decide(run_id, true, Some(7), &digest).await;
    assert_eq!(
        fake.received()[0].authorization.as_deref(),
        Some("Bearer exec-secret-1")
    );
}

/// Puts a turn in the state a service leaves when it dies mid-way: approved, `resuming` under a lease of a dead
/// instance that has run out, the first call done, the second sent without an answer, the third never started.
async fn abandoned_turn(app: &TestApp, run_id: Uuid, digest: &str) {
    let pool = &app.pool;
    sqlx::query(
        "insert into approval_events (run_id, turn_index, approved, decider_uid, decided_by, turn_digest, client_name,
                                      calls)
         select $1, 0, true, 7, 'run_owner', $2, 'admin',
                jsonb_agg(jsonb_build_object('call_id', call_id, 'approved', true, 'reason', null, 'edited', false,
                                             'arguments_sha256', null) order by position)
         from turn_calls where run_id = $1 and turn_index = 0",
    )
    .bind(run_id)
    .bind(digest)
    .execute(pool)
    .await
    .unwrap();
    sqlx::query(
        "update runs set status = 'resuming', lease_owner = $2, lease_until = now() - interval '1 second' where id = $1",
    )
    .bind(run_id)
    .bind(Uuid::new_v4())
    .execute(pool)
    .await
    .unwrap();
    sqlx::query(
        "update turn_calls set started_at = now(), outcome = 'ok', is_error = false, content = 'first done',
                finished_at = now() where run_id = $1 and position = 0",
    )
    .bind(run_id)
    .execute(pool)
    .await
    .unwrap();
    sqlx::query("update turn_calls set started_at = now() where run_id = $1 and position = 1")
        .bind(run_id)
        .execute(pool)
        .await
        .unwrap();
}

#[tokio::test]
async fn a_turn_abandoned_mid_way_is_finished_by_recovery_without_sending_any_call_twice() {
    let (_database, pool) = TestDatabase::create().await;
    let fake = FakeExecutor::start().await;
    let app = app_with_tools(
        pool.clone(),
        &fake,
        &[("first", "ok"), ("second", "ok"), ("third", "ok")],
    )
    .await;
    let (run_id, digest) = run_calling(&app, &["first", "second", "third"]).await;
    abandoned_turn(&app, run_id, &digest).await;

    let during = app.decide(run_id, true, Some(7), &digest).await;
    assert_eq!(
        (during.status, during.code()),
        (StatusCode::CONFLICT, "resume_in_progress")
    );

    resume::approve::recover_once(&app.state.resumer).await;

    let received = fake.received();
    assert_eq!(
        received.len(),
        1,
        "only the call never started is sent: {received:?}"
    );
    assert_eq!(received[0].body["tool"], "third");
    let after = app.decide(run_id, true, Some(7), &digest).await;
    assert_eq!(after.status, StatusCode::OK, "{:?}", after.body);
    assert_eq!(
        results(&after),
        vec![
            ("ok".into(), "first done".into(), false),
            (
                "interrupted".into(),
                "Error: tool \"second\" was interrupted; whether it took effect is unknown.".into(),
                true
            ),
            ("ok".into(), "third done".into(), false),
        ]
    );
    let tool_events: i64 = sqlx::query_scalar("select count(*) from tool_events where run_id = $1")
        .bind(run_id)
        .fetch_one(&pool)
        .await
        .unwrap();
    assert_eq!(tool_events, 3);
    // A second sweep finds nothing left to do.
    resume::approve::recover_once(&app.state.resumer).await;
    assert_eq!(fake.received().len(), 1);
}

#[tokio::test]
async fn a_turn_whose_lease_still_runs_is_left_to_its_instance() {
    let (_database, pool) = TestDatabase::create().await;
    let fake = FakeExecutor::start().await;
    let app = app_with_tools(
        pool.clone(),
        &fake,
        &[("first", "ok"), ("second", "ok"), ("third", "ok")],
    )
    .await;
    let (run_id, digest) = run_calling(&app, &["first", "second", "third"]).await;
    abandoned_turn(&app, run_id, &digest).await;
    sqlx::query("update runs set lease_until = now() + interval '1 minute' where id = $1")
        .bind(run_id)
        .execute(&pool)
        .await
        .unwrap();
    resume::approve::recover_once(&app.state.resumer).await;
    assert!(fake.received().is_empty());
    let status: String = sqlx::query_scalar("select status from runs where id = $1")
        .bind(run_id)
        .fetch_one(&pool)
        .await
        .unwrap();
    assert_eq!(status, "resuming");
}

/// An app whose one tool, `slow_tool`, goes to the fake executor's `slow` behaviour (it answers "late" after 2 s)
/// within a timeout of 5 s.
async fn slow_tool_app(pool: PgPool) -> (TestApp, FakeExecutor) {
    let fake = FakeExecutor::start().await;
    let mut tools = HashMap::new();
    tools.insert(
        "slow_tool".to_owned(),
        ToolExecutor {
            timeout: Duration::from_secs(5),
            ..fake.executor("slow")
        },
    );
    let app = support::app_with(
        pool,
        Options {
            executors: Executors::from_tools(tools),
            ..Options::default()
        },
    )
    .await;
    (app, fake)
}

#[tokio::test]
async fn a_slow_executor_within_its_timeout_is_waited_for() {
    let (_database, pool) = TestDatabase::create().await;
    let (app, fake) = slow_tool_app(pool).await;
    let (run_id, digest) = run_calling(&app, &["slow_tool"]).await;
    let answer = app.decide(run_id, true, Some(7), &digest).await;
    assert_eq!(results(&answer), vec![("ok".into(), "late".into(), false)]);
    assert_eq!(fake.received()[0].behaviour, "slow");
}

/// The approve path closes its turn in one statement without the run's lock, only while its lease holds: when
/// another instance took the turn over while the call ran, that statement writes nothing (no tool event, no
/// `run.resumed`), the call's result is kept for whoever finishes the turn, and the answer is a conflict.
#[tokio::test]
async fn an_approval_whose_turn_was_taken_over_while_its_call_ran_closes_nothing() {
    let (_database, pool) = TestDatabase::create().await;
    let (app, fake) = slow_tool_app(pool.clone()).await;
    let (run_id, digest) = run_calling(&app, &["slow_tool"]).await;
    let other_instance = Uuid::new_v4();
    // While the executor holds the call (it answers after 2 s), another instance takes the lease.
    let take_over = async {
        while fake.received().is_empty() {
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        sqlx::query("update runs set lease_owner = $2 where id = $1")
            .bind(run_id)
            .bind(other_instance)
            .execute(&pool)
            .await
            .unwrap();
    };
    let (answer, ()) = tokio::join!(app.decide(run_id, true, Some(7), &digest), take_over);
    assert_eq!(
        (answer.status, answer.code()),
        (StatusCode::CONFLICT, "resume_in_progress"),
        "{:?}",
        answer.body
    );
    let (status, owner): (String, Option<Uuid>) =
        sqlx::query_as("select status, lease_owner from runs where id = $1")
            .bind(run_id)
            .fetch_one(&pool)
            .await
            .unwrap();
    assert_eq!((status.as_str(), owner), ("resuming", Some(other_instance)));
    let stored: (Option<String>, Option<String>) =
        sqlx::query_as("select outcome, content from turn_calls where run_id = $1")
            .bind(run_id)
            .fetch_one(&pool)
            .await
            .unwrap();
    assert_eq!(stored, (Some("ok".into()), Some("late".into())));
    let written: (i64, i64) = sqlx::query_as(
        "select (select count(*) from tool_events where run_id = $1),
                (select count(*) from events where run_id = $1 and type = 'run.resumed')",
    )
    .bind(run_id)
    .fetch_one(&pool)
    .await
    .unwrap();
    assert_eq!(written, (0, 0));
}

#[tokio::test]
async fn an_answer_holding_a_nul_character_is_stored_with_a_replacement_character() {
    let (_database, pool) = TestDatabase::create().await;
    let fake = FakeExecutor::start().await;
    let app = app_with_tools(pool, &fake, &[("odd_tool", "nul")]).await;
    let (run_id, digest) = run_calling(&app, &["odd_tool"]).await;
    let answer = app.decide(run_id, true, Some(7), &digest).await;
    assert_eq!(answer.status, StatusCode::OK, "{:?}", answer.body);
    assert_eq!(answer.body["results"][0]["content"], "before\u{FFFD}after");
    assert_eq!(answer.body["results"][0]["outcome"], "ok");
}

#[tokio::test]
async fn the_executor_request_names_the_runs_tenant_in_its_body_and_a_header() {
    let (_database, pool) = TestDatabase::create().await;
    let fake = FakeExecutor::start().await;
    let app = app_with_tools(pool, &fake, &[("first", "ok")]).await;
    let (run_id, digest) = run_calling(&app, &["first"]).await;

    let answer = app.decide(run_id, true, Some(7), &digest).await;
    assert_eq!(answer.status, StatusCode::OK, "{:?}", answer.body);
    let received = fake.received();
    assert_eq!(received.len(), 1);
    assert_eq!(
        received[0].body["tenant"], "default",
        "owner_uid is a user of this tenant"
    );
    assert_eq!(received[0].tenant.as_deref(), Some("default"));
}

#[tokio::test]
async fn a_redirect_from_an_executor_is_failed_and_never_followed() {
    let (_database, pool) = TestDatabase::create().await;
    let fake = FakeExecutor::start().await;
    let app = app_with_tools(pool, &fake, &[("moved_tool", "redirect")]).await;
    let (run_id, digest) = run_calling(&app, &["moved_tool"]).await;

    let answer = app.decide(run_id, true, Some(7), &digest).await;
    assert_eq!(answer.status, StatusCode::OK, "{:?}", answer.body);
    assert_eq!(
        results(&answer),
        vec![(
            "failed".into(),
            "Error: tool \"moved_tool\" failed.".into(),
            true
        )]
    );
    let behaviours: Vec<String> = fake.received().into_iter().map(|r| r.behaviour).collect();
    assert_eq!(
        behaviours,
        ["redirect"],
        "the arguments were not sent on to where the redirect pointed"
    );
}

#[tokio::test]
async fn a_tool_configured_write_stays_write_when_the_run_declares_it_read() {
    let (_database, pool) = TestDatabase::create().await;
    let fake = FakeExecutor::start().await;
    // The fake's executors are configured `write`.
    let app = app_with_tools(pool, &fake, &[("update_page_metadata", "ok")]).await;
    app.user(7, false, false, false).await;
    let id = Uuid::new_v4();
    let run = app
        .register(json!({
            "id": id,
            "owner_uid": 7,
            "messages": support::transcript(vec![call("call_1", "update_page_metadata", "{}")]),
            "tools": [{"name": "update_page_metadata", "effect": "read"}],
        }))
        .await;
    assert_eq!(run["turn"]["pending_calls"][0]["effect"], "write", "{run}");
    let digest = run["turn"]["digest"].as_str().unwrap();

    let answer = app
        .post(
            &format!("/v1/runs/{id}/decision"),
            json!({"approved": false, "decider_uid": 7, "turn_digest": digest, "reason": "skip"}),
        )
        .await;
    assert_eq!(answer.status, StatusCode::OK, "{:?}", answer.body);
    let content = answer.body["results"][0]["content"].as_str().unwrap();
    assert!(
        content.starts_with("Error: approval_denied (decided_by: run_owner, reason: skip)."),
        "the reason is rendered on a configured write: {content}"
    );
}
