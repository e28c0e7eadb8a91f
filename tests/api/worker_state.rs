//! The worker's state (docs/design.md §15): taken by a registration and by `POST /turns`, kept byte for byte
//! (sealed with keys), bounded by MAX_WORKER_STATE_BYTES, given back only by `GET /v1/runs/{id}?include=worker_state` to an API
//! key, never to a decision token, the inbox, events, the feed or the logs, purged with its run and rotated with
//! its keys.

use approval_resume::domain::limits::WorkLimits;
use approval_resume::state::{AppState, Limits};
use approval_resume::storage::Database;
use approval_resume::storage::retention;
use axum::http::{Method, StatusCode};
use serde_json::{Value, json};
use sqlx::PgPool;
use uuid::Uuid;

use crate::database::TestDatabase;
use crate::encryption::{OLD_KEYS, command, pg_dump, with_keys};
use crate::support::{
    self, Answer, Signer, TestApp, assert_problem, call, row_counts, run_body, transcript,
};

/// A state as an SDK might write it: member order, spacing, number forms and escapes a parse and re-serialization
/// would each change.
const STATE: &str = "{\"z\": 1.50,  \"a\": [true, null, 1e2, -0], \"text\": \"caf\\u00e9 \\/ \u{e9}\",\n \"n\": {\"b\":2,\"a\":1}}";
const NEW_KEY: &str = "new:HxweHRwbGhkYFxYVFBMSERAPDg0MCwoJCAcGBQQDAgE=";

/// A state whose text holds `marker`, so that any copy of it anywhere can be looked for.
fn marked(marker: &str) -> String {
    format!("{{\"secret\": \"{marker}\",  \"step\": 3}}")
}

fn marker() -> String {
    format!("worker-state-canary-{}", Uuid::new_v4().simple())
}

/// The text of a registration body for owner 7 with `state` spliced in as it is (`json!` would re-serialize it).
fn body_with_state(id: Uuid, state: &str) -> String {
    let body = run_body(id, 7).to_string();
    format!("{},\"worker_state\":{state}}}", &body[..body.len() - 1])
}

async fn register_with_state(app: &TestApp, id: Uuid, state: &str) -> Answer {
    app.send_bytes(
        Method::POST,
        "/v1/runs",
        Some("application/json"),
        body_with_state(id, state),
    )
    .await
}

/// Registers a run of owner 7 with `state`; its turn digest.
async fn run_with_state(app: &TestApp, id: Uuid, state: &str) -> String {
    app.user(7, false, false, false).await;
    let answer = register_with_state(app, id, state).await;
    assert_eq!(answer.status, StatusCode::CREATED, "{:?}", answer.body);
    answer.body["turn"]["digest"].as_str().unwrap().to_owned()
}

async fn with_state_included(app: &TestApp, id: Uuid) -> Answer {
    let answer = app
        .get(&format!("/v1/runs/{id}?include=worker_state"))
        .await;
    assert_eq!(answer.status, StatusCode::OK, "{:?}", answer.body);
    answer
}

/// The answer's bytes hold the member exactly as `state` was sent.
fn assert_given_back_as_sent(answer: &Answer, state: &str) {
    let text = String::from_utf8(answer.bytes.clone()).unwrap();
    assert!(
        text.contains(&format!("\"worker_state\":{state}")),
        "the state is not given back byte for byte: {text}"
    );
    let sent: Value = serde_json::from_str(state).unwrap();
    assert_eq!(answer.body["worker_state"], sent);
}

/// The next turn of a resumed run, with `state` (a JSON text) or none.
fn next_turn(call_id: &str, state: Option<&str>) -> String {
    let turn = json!({"messages": [
        {"role": "user", "content": "And the other page?"},
        {"role": "assistant", "content": null, "tool_calls": [call(call_id, "read_page", "{\"page\": 13}")]},
    ]})
    .to_string();
    match state {
        Some(state) => format!("{},\"worker_state\":{state}}}", &turn[..turn.len() - 1]),
        None => turn,
    }
}

async fn append(app: &TestApp, id: Uuid, body: String) -> Answer {
    app.send_bytes(
        Method::POST,
        &format!("/v1/runs/{id}/turns"),
        Some("application/json"),
        body,
    )
    .await
}

async fn deny(app: &TestApp, id: Uuid, digest: &str) {
    let answer = app.decide(id, false, Some(7), digest).await;
    assert_eq!(answer.status, StatusCode::OK, "{:?}", answer.body);
}

/// The same app with other work limits (MAX_WORKER_STATE_BYTES among them) and body limit.
fn with_limits(app: &TestApp, max_body_bytes: usize, max_worker_state_bytes: usize) -> TestApp {
    app.with_state(AppState {
        limits: Limits {
            max_body_bytes,
            work: WorkLimits {
                max_worker_state_bytes,
                ..WorkLimits::default()
            },
            ..app.state.limits
        },
        ..app.state.clone()
    })
}

async fn stored_columns(pool: &PgPool, id: Uuid) -> (Option<String>, Option<Vec<u8>>) {
    sqlx::query_as("select worker_state, worker_state_sealed from runs where id = $1")
        .bind(id)
        .fetch_one(pool)
        .await
        .unwrap()
}

#[tokio::test]
async fn a_registered_state_is_given_back_byte_for_byte_only_when_asked_for() {
    let (_database, pool) = TestDatabase::create().await;
    let app = support::app(pool.clone()).await;
    let id = Uuid::new_v4();
    app.user(7, false, false, false).await;

    let registered = register_with_state(&app, id, STATE).await;
    assert_eq!(
        registered.status,
        StatusCode::CREATED,
        "{:?}",
        registered.body
    );
    assert!(registered.body.get("worker_state").is_none());
    let plain = app.get(&format!("/v1/runs/{id}")).await;
    assert_eq!(plain.status, StatusCode::OK);
    assert!(plain.body.get("worker_state").is_none(), "{:#}", plain.body);

    let included = with_state_included(&app, id).await;
    assert_given_back_as_sent(&included, STATE);
    assert_eq!(
        stored_columns(&pool, id).await,
        (Some(STATE.to_owned()), None),
        "without keys the text is stored in clear, as sent"
    );
    // The rest of the answer is the run as it is answered without the state.
    let mut rest = included.body.clone();
    rest.as_object_mut().unwrap().remove("worker_state");
    assert_eq!(rest, plain.body);
}

#[tokio::test]
async fn a_run_without_a_state_answers_null_when_it_is_asked_for() {
    let (_database, pool) = TestDatabase::create().await;
    let app = support::app(pool).await;
    let (id, _) = support::owned_run(&app).await;
    let answer = with_state_included(&app, id).await;
    assert_eq!(answer.body["worker_state"], Value::Null);
    assert!(
        answer
            .body
            .as_object()
            .unwrap()
            .contains_key("worker_state")
    );

    // `null` sent is no state either.
    let other = Uuid::new_v4();
    run_with_state(&app, other, "null").await;
    assert_eq!(
        with_state_included(&app, other).await.body["worker_state"],
        Value::Null
    );
    assert_eq!(stored_columns(&app.pool, other).await, (None, None));
}

#[tokio::test]
async fn with_keys_the_state_is_sealed_at_rest_and_given_back_byte_for_byte() {
    let (_database, pool) = TestDatabase::create().await;
    let base = support::app(pool.clone()).await;
    let app = with_keys(&base, OLD_KEYS);
    let marker = marker();
    let state = marked(&marker);
    let id = Uuid::new_v4();
    run_with_state(&app, id, &state).await;

    assert_given_back_as_sent(&with_state_included(&app, id).await, &state);
    let (clear, sealed) = stored_columns(&pool, id).await;
    assert_eq!(clear, None, "nothing of the state in clear");
    let sealed = sealed.expect("the state is sealed");
    assert!(
        !String::from_utf8_lossy(&sealed).contains(&marker),
        "the sealed bytes are not the text"
    );
    // Without the key, the sealed state is refused, never given out as ciphertext.
    let keyless = base
        .get(&format!("/v1/runs/{id}?include=worker_state"))
        .await;
    assert_problem(&keyless, StatusCode::INTERNAL_SERVER_ERROR, "undecryptable");
    // A sealed state moved to another run does not open there.
    let other = Uuid::new_v4();
    run_with_state(&app, other, "{}").await;
    sqlx::query(
        "update runs set worker_state_sealed = (select worker_state_sealed from runs where id = $1) where id = $2",
    )
    .bind(id)
    .bind(other)
    .execute(&pool)
    .await
    .unwrap();
    let moved = app
        .get(&format!("/v1/runs/{other}?include=worker_state"))
        .await;
    assert_problem(&moved, StatusCode::INTERNAL_SERVER_ERROR, "undecryptable");
}

#[tokio::test]
async fn a_new_turn_replaces_the_state_and_a_turn_without_one_leaves_none() {
    let (_database, pool) = TestDatabase::create().await;
    let app = with_keys(&support::app(pool).await, OLD_KEYS);
    let id = Uuid::new_v4();
    let digest = run_with_state(&app, id, "{\"turn\": 0}").await;
    deny(&app, id, &digest).await;

    let second = "[\"turn\",  1 ]";
    let answer = append(&app, id, next_turn("call_3", Some(second))).await;
    assert_eq!(answer.status, StatusCode::OK, "{:?}", answer.body);
    assert!(answer.body.get("worker_state").is_none());
    assert_given_back_as_sent(&with_state_included(&app, id).await, second);
    // The same append again is the same request: the state stays.
    let again = append(&app, id, next_turn("call_3", Some(second))).await;
    assert_eq!(again.status, StatusCode::OK, "{:?}", again.body);
    assert_given_back_as_sent(&with_state_included(&app, id).await, second);

    let digest = answer.body["turn"]["digest"].as_str().unwrap().to_owned();
    deny(&app, id, &digest).await;
    let answer = append(&app, id, next_turn("call_4", None)).await;
    assert_eq!(answer.status, StatusCode::OK, "{:?}", answer.body);
    assert_eq!(
        with_state_included(&app, id).await.body["worker_state"],
        Value::Null,
        "a state belongs to the turn it was suspended on"
    );
    assert_eq!(stored_columns(&app.pool, id).await, (None, None));
}

/// Texts serde_json reads as JSON but not into a value: a number beyond a double, an escaped lone surrogate.
const UNREADABLE_STATES: [&str; 3] = ["1e400", "{\"n\": [1e400]}", "\"\\ud800\""];

#[tokio::test]
async fn a_state_no_json_reader_can_hold_is_refused_400_malformed_json_by_registration_and_new_turns()
 {
    let (_database, pool) = TestDatabase::create().await;
    let app = support::app(pool).await;
    app.user(7, false, false, false).await;
    for state in UNREADABLE_STATES {
        let id = Uuid::new_v4();
        let answer = register_with_state(&app, id, state).await;
        assert_problem(&answer, StatusCode::BAD_REQUEST, "malformed_json");
        let run = app.get(&format!("/v1/runs/{id}")).await;
        assert_eq!(
            run.status,
            StatusCode::NOT_FOUND,
            "{state}: nothing registered"
        );
    }
    let id = Uuid::new_v4();
    let digest = run_with_state(&app, id, "{\"turn\": 0}").await;
    deny(&app, id, &digest).await;
    for state in UNREADABLE_STATES {
        let answer = append(&app, id, next_turn("call_3", Some(state))).await;
        assert_problem(&answer, StatusCode::BAD_REQUEST, "malformed_json");
        assert_given_back_as_sent(&with_state_included(&app, id).await, "{\"turn\": 0}");
    }
}

#[tokio::test]
async fn a_state_over_the_limit_is_refused_413_and_nothing_is_stored() {
    let (_database, pool) = TestDatabase::create().await;
    let app = with_limits(&support::app(pool.clone()).await, 1024 * 1024, 64);
    app.user(7, false, false, false).await;
    let at_limit = format!("\"{}\"", "x".repeat(62));
    let over = format!("\"{}\"", "x".repeat(63));
    let before = row_counts(&pool).await;

    let refused = register_with_state(&app, Uuid::new_v4(), &over).await;
    assert_problem(
        &refused,
        StatusCode::PAYLOAD_TOO_LARGE,
        "worker_state_too_large",
    );
    assert!(
        refused.body["detail"]
            .as_str()
            .unwrap()
            .contains("MAX_WORKER_STATE_BYTES")
    );
    assert_eq!(row_counts(&pool).await, before, "nothing stored");

    let id = Uuid::new_v4();
    let digest = run_with_state(&app, id, &at_limit).await;
    deny(&app, id, &digest).await;
    let refused = append(&app, id, next_turn("call_3", Some(&over))).await;
    assert_problem(
        &refused,
        StatusCode::PAYLOAD_TOO_LARGE,
        "worker_state_too_large",
    );
    let run = app
        .get(&format!("/v1/runs/{id}?include=worker_state"))
        .await;
    assert_eq!(run.body["status"], "resumed", "no turn was appended");
    assert_given_back_as_sent(&run, &at_limit);
}

#[tokio::test]
async fn a_transcript_of_max_body_bytes_still_fits_beside_a_state() {
    let (_database, pool) = TestDatabase::create().await;
    let app = with_limits(&support::app(pool).await, 4096, 4096);
    app.user(7, false, false, false).await;
    let state = format!("{{\"history\": \"{}\"}}", "s".repeat(3000));
    let mut body = run_body(Uuid::new_v4(), 7);
    body["messages"][1]["content"] = json!("m".repeat(3000));
    let text = body.to_string();
    let with_state = format!("{},\"worker_state\":{state}}}", &text[..text.len() - 1]);
    assert!(with_state.len() > 4096 && text.len() <= 4096);

    let answer = app
        .send_bytes(
            Method::POST,
            "/v1/runs",
            Some("application/json"),
            with_state,
        )
        .await;
    assert_eq!(answer.status, StatusCode::CREATED, "{:?}", answer.body);

    // What is not the state is still held to MAX_BODY_BYTES.
    let mut large = run_body(Uuid::new_v4(), 7);
    large["messages"][1]["content"] = json!("m".repeat(5000));
    let text = large.to_string();
    let large = format!("{},\"worker_state\":{{}}}}", &text[..text.len() - 1]);
    let refused = app
        .send_bytes(Method::POST, "/v1/runs", Some("application/json"), large)
        .await;
    assert_problem(&refused, StatusCode::PAYLOAD_TOO_LARGE, "payload_too_large");
}

#[tokio::test]
async fn an_include_other_than_worker_state_is_refused_422() {
    let (_database, pool) = TestDatabase::create().await;
    let app = support::app(pool).await;
    let id = Uuid::new_v4();
    run_with_state(&app, id, STATE).await;
    for query in [
        "include=transcript",
        "include=",
        "include=worker_state&include=worker_state",
        "include=worker_state&extra=1",
    ] {
        let answer = app.get(&format!("/v1/runs/{id}?{query}")).await;
        assert_problem(&answer, StatusCode::UNPROCESSABLE_ENTITY, "invalid_query");
        assert!(
            !String::from_utf8_lossy(&answer.bytes).contains("1.50"),
            "{query}"
        );
    }
}

#[tokio::test]
async fn a_decision_token_never_sees_the_state_even_when_it_asks() {
    let (_database, pool) = TestDatabase::create().await;
    let app = support::app(pool).await;
    app.client("chat", &["runs:read", "decisions:write"]).await;
    let signer = Signer::register(&app.pool, "chat", "k1").await;
    let marker = marker();
    let id = Uuid::new_v4();
    let digest = run_with_state(&app, id, &marked(&marker)).await;
    let token = signer.token(7);

    for path in [
        format!("/v1/runs/{id}?include=worker_state"),
        format!("/v1/runs/{id}"),
    ] {
        let answer = app.call(Method::GET, &path, Some(&token), None).await;
        assert_eq!(answer.status, StatusCode::OK, "{:?}", answer.body);
        assert!(answer.body.get("worker_state").is_none(), "{path}");
        assert!(!String::from_utf8_lossy(&answer.bytes).contains(&marker));
    }
    let decided = app
        .call(
            Method::POST,
            &format!("/v1/runs/{id}/decision"),
            Some(&token),
            Some(json!({"approved": false, "turn_digest": digest})),
        )
        .await;
    assert_eq!(decided.status, StatusCode::OK, "{:?}", decided.body);
    assert!(!String::from_utf8_lossy(&decided.bytes).contains(&marker));
    let input = app
        .call(
            Method::GET,
            &format!("/v1/runs/{id}/model-input"),
            Some(&token),
            None,
        )
        .await;
    assert_eq!(input.status, StatusCode::OK, "{:?}", input.body);
    assert!(!String::from_utf8_lossy(&input.bytes).contains(&marker));
}

#[tokio::test]
async fn a_key_without_runs_read_is_refused_the_run_and_its_state() {
    let (_database, pool) = TestDatabase::create().await;
    let app = support::app(pool).await;
    let marker = marker();
    let id = Uuid::new_v4();
    run_with_state(&app, id, &marked(&marker)).await;
    let writer = app
        .client("writer", &["runs:write", "approvals:read"])
        .await;

    let answer = app
        .call(
            Method::GET,
            &format!("/v1/runs/{id}?include=worker_state"),
            Some(&writer),
            None,
        )
        .await;
    assert_problem(&answer, StatusCode::FORBIDDEN, "missing_scope");
    assert!(!String::from_utf8_lossy(&answer.bytes).contains(&marker));
}

#[tokio::test]
async fn the_state_is_in_no_inbox_event_feed_decision_or_model_input() {
    let (_database, pool) = TestDatabase::create().await;
    let app = support::app(pool).await;
    let marker = marker();
    let id = Uuid::new_v4();
    let digest = run_with_state(&app, id, &marked(&marker)).await;

    let mut answers = vec![app.get("/v1/approvals?acting_uid=7").await];
    let decided = app.decide(id, false, Some(7), &digest).await;
    assert_eq!(decided.status, StatusCode::OK, "{:?}", decided.body);
    answers.push(decided);
    let turn = append(&app, id, next_turn("call_3", Some(&marked(&marker)))).await;
    assert_eq!(turn.status, StatusCode::OK, "{:?}", turn.body);
    answers.push(turn);
    answers.push(app.get("/v1/approvals?acting_uid=7").await);
    answers.push(app.get(&format!("/v1/runs/{id}/events")).await);
    answers.push(app.get("/v1/events").await);
    answers.push(app.get(&format!("/v1/runs/{id}")).await);
    answers.push(app.get(&format!("/v1/runs/{id}/model-input")).await);
    assert!(
        answers[5].body["events"].as_array().unwrap().len() >= 3,
        "the feed holds the run's events: {:#}",
        answers[5].body
    );
    for answer in &answers {
        assert!(answer.status.is_success(), "{:?}", answer.body);
        assert!(
            !String::from_utf8_lossy(&answer.bytes).contains(&marker),
            "{:#}",
            answer.body
        );
    }
    // It is stored all the same.
    let included = with_state_included(&app, id).await;
    assert!(String::from_utf8_lossy(&included.bytes).contains(&marker));
}

#[tokio::test]
async fn a_purge_of_the_finished_run_takes_its_state_with_it() {
    let (database, pool) = TestDatabase::create().await;
    let app = support::app(pool.clone()).await;
    let (finished, waiting) = (marker(), marker());
    let finished_id = Uuid::new_v4();
    let digest = run_with_state(&app, finished_id, &marked(&finished)).await;
    deny(&app, finished_id, &digest).await;
    let completed = app
        .post(&format!("/v1/runs/{finished_id}/complete"), json!({}))
        .await;
    assert_eq!(completed.status, StatusCode::OK, "{:?}", completed.body);
    let waiting_id = Uuid::new_v4();
    run_with_state(&app, waiting_id, &marked(&waiting)).await;
    sqlx::query("update runs set updated_at = now() - interval '40 days'")
        .execute(&pool)
        .await
        .unwrap();
    let dump = pg_dump(&database).await;
    assert!(dump.contains(&finished) && dump.contains(&waiting));

    let report = retention::purge(&Database::direct(pool.clone()), 30)
        .await
        .unwrap();
    assert_eq!(report.finished_runs_deleted, 1);
    let dump = pg_dump(&database).await;
    assert!(
        !dump.contains(&finished),
        "the purged run's state is gone from the database"
    );
    assert!(dump.contains(&waiting), "a waiting run keeps its state");
}

#[tokio::test]
async fn keys_rotate_moves_every_state_under_the_new_key_and_it_still_comes_back_as_sent() {
    let (database, pool) = TestDatabase::create().await;
    let plain = support::app(pool).await;
    plain.user(7, false, false, false).await;
    let clear_id = Uuid::new_v4();
    let clear_state = "{\"in\":  \"clear\"}";
    run_with_state(&plain, clear_id, clear_state).await;
    let sealed_id = Uuid::new_v4();
    run_with_state(&with_keys(&plain, OLD_KEYS), sealed_id, STATE).await;
    let before = command(&database, OLD_KEYS, &["keys", "status"]).await;
    let lines = |status: &str| -> Vec<String> {
        status
            .lines()
            .filter(|line| line.starts_with("runs.worker_state "))
            .map(str::to_owned)
            .collect()
    };
    let counted = lines(&before);
    assert_eq!(counted.len(), 2, "one in clear, one under old: {before}");

    let both = format!("{NEW_KEY},{OLD_KEYS}");
    let rotated = command(&database, &both, &["keys", "rotate", "--batch-size", "1"]).await;
    assert!(rotated.contains("re-encrypted"), "{rotated}");
    let after = command(&database, &both, &["keys", "status"]).await;
    let counted = lines(&after);
    assert_eq!(counted.len(), 1, "{after}");
    assert!(
        counted[0].contains(" new ") && counted[0].ends_with(" 2"),
        "{after}"
    );

    let new_only = with_keys(&plain, NEW_KEY);
    assert_given_back_as_sent(&with_state_included(&new_only, clear_id).await, clear_state);
    assert_given_back_as_sent(&with_state_included(&new_only, sealed_id).await, STATE);
}

#[tokio::test]
async fn a_registration_with_another_state_under_the_same_id_is_another_registration() {
    let (_database, pool) = TestDatabase::create().await;
    let app = support::app(pool).await;
    let id = Uuid::new_v4();
    run_with_state(&app, id, "{\"a\": 1, \"b\": 2}").await;
    // The same state in other spacing and member order is the same registration, and the first text is kept.
    let again = register_with_state(&app, id, "{\"b\":2,\"a\":1}").await;
    assert_eq!(again.status, StatusCode::OK, "{:?}", again.body);
    assert_given_back_as_sent(&with_state_included(&app, id).await, "{\"a\": 1, \"b\": 2}");
    let other = register_with_state(&app, id, "{\"a\": 2}").await;
    assert_problem(&other, StatusCode::CONFLICT, "run_exists");
    let without = app.post("/v1/runs", run_body(id, 7)).await;
    assert_problem(&without, StatusCode::CONFLICT, "run_exists");
}

// Logs: in its own process under nextest, as tests/api/logs.rs is, since it sets the global subscriber.

#[tokio::test]
async fn no_state_reaches_the_logs_even_at_debug() {
    let (_database, pool) = TestDatabase::create().await;
    let captured = crate::logs::Captured::default();
    let subscriber = approval_resume::telemetry::json_subscriber(
        tracing_subscriber::EnvFilter::new("debug"),
        captured.clone(),
    );
    tracing::subscriber::set_global_default(subscriber)
        .expect("no other subscriber in this test process");
    let app = with_limits(&support::app(pool).await, 1024 * 1024, 128);
    let marker = marker();
    let id = Uuid::new_v4();
    let digest = run_with_state(&app, id, &marked(&marker)).await;
    with_state_included(&app, id).await;
    deny(&app, id, &digest).await;
    let turn = append(&app, id, next_turn("call_3", Some(&marked(&marker)))).await;
    assert_eq!(turn.status, StatusCode::OK, "{:?}", turn.body);
    with_state_included(&app, id).await;
    // Refused ones too: over the limit, and a body the shape refuses.
    let long = format!("{{\"secret\": \"{marker}{}\"}}", "x".repeat(128));
    let refused = register_with_state(&app, Uuid::new_v4(), &long).await;
    assert_eq!(refused.status, StatusCode::PAYLOAD_TOO_LARGE);
    let mut body = json!({"id": Uuid::new_v4(), "owner_uid": 7, "messages": transcript(vec![])});
    body["worker_state"] = json!({"secret": marker});
    body["unknown"] = json!(1);
    let refused = app.post("/v1/runs", body).await;
    assert_eq!(refused.status, StatusCode::UNPROCESSABLE_ENTITY);

    let logged = String::from_utf8(captured.0.lock().unwrap().clone()).unwrap();
    assert!(
        logged.contains(&id.to_string()),
        "the requests were logged: {logged}"
    );
    assert!(!logged.contains(&marker), "the state was logged: {logged}");
}
