//! Claims on released calls (docs/design.md §15, "Claims" and "A lapsed claim"), each rule against real Postgres:
//! the claim's answer, its refusals, its renewal, results only under the live claim, and the lapse, written by the
//! next claim, the next results post or the sweeper, exactly once. A claim is made to lapse by moving its `until`
//! into the past in SQL ([`lapse_in_sql`]): the rules judge it on the database's clock, which this moves as surely as
//! waiting would, without a test that sleeps for the bound's minimum (5 s).

use axum::http::StatusCode;
use chrono::{DateTime, Utc};
use serde_json::{Value, json};
use sqlx::PgPool;
use uuid::Uuid;

use crate::database::TestDatabase;
use crate::support::{self, TestApp, assert_problem, call, transcript};
use crate::worker_calls::{claim, post_results};
use approval_resume::resume::lapses;

const INTERRUPTED_SAVE: &str =
    "Error: tool \"save_page\" was interrupted; whether it took effect is unknown.";
const INTERRUPTED_READ: &str =
    "Error: tool \"read_page\" was interrupted; whether it took effect is unknown.";

/// Moves the `until` of run `id`'s claim a second into the past, on the database's clock: the claim has lapsed,
/// and nobody has written the lapse yet.
pub async fn lapse_in_sql(pool: &PgPool, id: Uuid) {
    let moved = sqlx::query(
        "update worker_claims set until = clock_timestamp() - interval '1 second' where run_id = $1",
    )
    .bind(id)
    .execute(pool)
    .await
    .unwrap();
    assert_eq!(moved.rows_affected(), 1, "run {id} has one claim");
}

/// A run of owner 7 whose two calls (`save_page`, `read_page`) are the worker's, approved whole: released.
async fn released_run(app: &TestApp, privacy_level: &str) -> (Uuid, String) {
    app.user(7, false, false, false).await;
    let id = Uuid::new_v4();
    let body = json!({
        "id": id,
        "owner_uid": 7,
        "privacy_level": privacy_level,
        "messages": transcript(vec![
            call("call_1", "save_page", r#"{"page": 12}"#),
            call("call_2", "read_page", r#"{"page": 12}"#),
        ]),
        "tools": [
            {"name": "save_page", "effect": "write", "executor": "worker"},
            {"name": "read_page", "effect": "read", "executor": "worker"},
        ],
    });
    let digest = app.register(body).await["turn"]["digest"]
        .as_str()
        .unwrap()
        .to_owned();
    let answer = app.decide(id, true, Some(7), &digest).await;
    assert_eq!(answer.body["status"], "released", "{:?}", answer.body);
    (id, digest)
}

async fn post_claim(app: &TestApp, id: Uuid, body: Value) -> support::Answer {
    app.post(&format!("/v1/runs/{id}/claim"), body).await
}

fn result(call_id: &str, content: &str) -> Value {
    json!({"call_id": call_id, "content": content, "is_error": false})
}

fn instant(value: &Value) -> DateTime<Utc> {
    DateTime::parse_from_rfc3339(value.as_str().expect("an RFC 3339 text"))
        .expect("an RFC 3339 instant")
        .with_timezone(&Utc)
}

async fn db_now(pool: &PgPool) -> DateTime<Utc> {
    sqlx::query_scalar("select clock_timestamp()")
        .fetch_one(pool)
        .await
        .unwrap()
}

/// A run's records after a lapse or a close, counted in SQL.
#[derive(Debug, PartialEq, Eq)]
struct Closed {
    status: String,
    /// `(call_id, outcome, content)` of each call, in the turn's order.
    calls: Vec<(String, Option<String>, Option<String>)>,
    /// `(call_id, outcome, result)` of each tool event.
    tool_events: Vec<(String, String, Option<String>)>,
    resumed_events: i64,
    lapsed_claims: i64,
}

async fn closed(pool: &PgPool, id: Uuid) -> Closed {
    let status: String = sqlx::query_scalar("select status::text from runs where id = $1")
        .bind(id)
        .fetch_one(pool)
        .await
        .unwrap();
    let calls = sqlx::query_as(
        "select call_id, outcome::text, content from turn_calls where run_id = $1 order by position",
    )
    .bind(id)
    .fetch_all(pool)
    .await
    .unwrap();
    let tool_events = sqlx::query_as(
        "select call_id, outcome::text, result from tool_events where run_id = $1 order by position",
    )
    .bind(id)
    .fetch_all(pool)
    .await
    .unwrap();
    let (resumed_events, lapsed_claims) = sqlx::query_as(
        "select (select count(*) from events where run_id = $1 and type = 'run.resumed'),
                (select count(*) from worker_claims where run_id = $1 and lapsed_at is not null)",
    )
    .bind(id)
    .fetch_one(pool)
    .await
    .unwrap();
    Closed {
        status,
        calls,
        tool_events,
        resumed_events,
        lapsed_claims,
    }
}

/// What a lapse of run `id` leaves when `call_1` was posted `saved` before it (`call_2` interrupted), or nothing
/// was (both interrupted), at privacy level `full`.
fn lapsed(saved_first: bool) -> Closed {
    let call_1 = if saved_first {
        ("ok", "saved")
    } else {
        ("interrupted", INTERRUPTED_SAVE)
    };
    Closed {
        status: "resumed".into(),
        calls: vec![
            (
                "call_1".into(),
                Some(call_1.0.into()),
                Some(call_1.1.into()),
            ),
            (
                "call_2".into(),
                Some("interrupted".into()),
                Some(INTERRUPTED_READ.into()),
            ),
        ],
        tool_events: vec![
            ("call_1".into(), call_1.0.into(), Some(call_1.1.into())),
            (
                "call_2".into(),
                "interrupted".into(),
                Some(INTERRUPTED_READ.into()),
            ),
        ],
        resumed_events: 1,
        lapsed_claims: 1,
    }
}

#[tokio::test]
async fn a_claim_answers_its_id_its_until_on_the_database_clock_and_the_released_calls_as_the_run_shows_them()
 {
    let (_database, pool) = TestDatabase::create().await;
    let app = support::app(pool).await;
    let (id, _) = released_run(&app, "full").await;
    let before = db_now(&app.pool).await;
    let answer = post_claim(&app, id, json!({})).await;
    let after = db_now(&app.pool).await;
    assert_eq!(answer.status, StatusCode::OK, "{:?}", answer.body);
    let members: Vec<&String> = answer.body.as_object().unwrap().keys().collect();
    assert_eq!(members, ["claim_id", "released_calls", "until"]);
    Uuid::parse_str(answer.body["claim_id"].as_str().unwrap()).expect("a UUID");
    let until = instant(&answer.body["until"]);
    let ttl = chrono::Duration::seconds(300);
    assert!(
        before + ttl <= until && until <= after + ttl,
        "{until} within [{before}, {after}] + 300 s"
    );
    assert!(answer.body["until"].as_str().unwrap().ends_with('Z'));
    let run = app.get(&format!("/v1/runs/{id}")).await.body;
    assert_eq!(answer.body["released_calls"], run["released_calls"]);
    assert_eq!(
        answer.body["released_calls"][0]["arguments"],
        r#"{"page": 12}"#
    );
}

#[tokio::test]
async fn while_a_claim_lives_every_other_claim_is_refused_claimed_with_its_until() {
    let (_database, pool) = TestDatabase::create().await;
    let app = support::app(pool).await;
    let (id, _) = released_run(&app, "full").await;
    let first = post_claim(&app, id, json!({})).await;
    let second = post_claim(&app, id, json!({})).await;
    assert_problem(&second, StatusCode::CONFLICT, "claimed");
    assert_eq!(
        instant(&second.body["until"]),
        instant(&first.body["until"])
    );
    let stranger = post_claim(&app, id, json!({"claim_id": Uuid::new_v4()})).await;
    assert_problem(&stranger, StatusCode::CONFLICT, "claimed");
    let claims: i64 = sqlx::query_scalar("select count(*) from worker_claims where run_id = $1")
        .bind(id)
        .fetch_one(&app.pool)
        .await
        .unwrap();
    assert_eq!(claims, 1);
}

#[tokio::test]
async fn a_claim_on_a_run_with_nothing_released_is_refused_with_the_runs_status() {
    let (_database, pool) = TestDatabase::create().await;
    let app = support::app(pool).await;
    app.user(7, false, false, false).await;
    let id = Uuid::new_v4();
    let digest = app.register(support::run_body(id, 7)).await["turn"]["digest"]
        .as_str()
        .unwrap()
        .to_owned();
    let waiting = post_claim(&app, id, json!({})).await;
    assert_problem(&waiting, StatusCode::CONFLICT, "not_released");
    assert_eq!(waiting.body["run_status"], "waiting_for_approval");
    assert_eq!(
        waiting.body["status"], 409,
        "the problem's own status stays"
    );
    app.decide(id, false, Some(7), &digest).await;
    let resumed = post_claim(&app, id, json!({})).await;
    assert_problem(&resumed, StatusCode::CONFLICT, "not_released");
    assert_eq!(resumed.body["run_status"], "resumed");

    let (released, _) = released_run(&app, "full").await;
    let renewal_of_nothing = post_claim(&app, released, json!({"claim_id": Uuid::new_v4()})).await;
    assert_problem(&renewal_of_nothing, StatusCode::CONFLICT, "claim_required");
    let missing = post_claim(&app, Uuid::new_v4(), json!({})).await;
    assert_problem(&missing, StatusCode::NOT_FOUND, "not_found");
    let bad = post_claim(&app, released, json!({"claim_id": 7})).await;
    assert_problem(&bad, StatusCode::UNPROCESSABLE_ENTITY, "invalid_body");
}

#[tokio::test]
async fn the_claimant_renews_its_claim_for_another_lease_from_now() {
    let (_database, pool) = TestDatabase::create().await;
    let app = support::app(pool).await;
    let (id, _) = released_run(&app, "full").await;
    let first = post_claim(&app, id, json!({})).await;
    let claim_id = first.body["claim_id"].clone();
    // As if 200 s of the lease had gone by.
    sqlx::query(
        "update worker_claims set until = until - interval '200 seconds' where run_id = $1",
    )
    .bind(id)
    .execute(&app.pool)
    .await
    .unwrap();
    let before = db_now(&app.pool).await;
    let renewed = post_claim(&app, id, json!({"claim_id": claim_id})).await;
    assert_eq!(renewed.status, StatusCode::OK, "{:?}", renewed.body);
    assert_eq!(renewed.body["claim_id"], claim_id, "the same claim");
    assert!(instant(&renewed.body["until"]) >= before + chrono::Duration::seconds(300));
    assert_eq!(renewed.body["released_calls"], first.body["released_calls"]);
    let posted = post_results(
        &app,
        id,
        claim_id.as_str(),
        json!([result("call_1", "saved"), result("call_2", "read")]),
    )
    .await;
    assert_eq!(posted.body["status"], "resumed", "{:?}", posted.body);
    let ended: Option<DateTime<Utc>> =
        sqlx::query_scalar("select ended_at from worker_claims where run_id = $1")
            .bind(id)
            .fetch_one(&app.pool)
            .await
            .unwrap();
    assert!(ended.is_some(), "the turn's last result ends its claim");
    let after = post_claim(&app, id, json!({"claim_id": claim_id})).await;
    assert_problem(&after, StatusCode::CONFLICT, "not_released");
    assert_eq!(after.body["run_status"], "resumed");
}

#[tokio::test]
async fn results_are_taken_only_under_the_posters_live_claim_but_a_recorded_one_replays_without() {
    let (_database, pool) = TestDatabase::create().await;
    let app = support::app(pool).await;
    let (id, _) = released_run(&app, "full").await;
    let none = post_results(&app, id, None, json!([result("call_1", "saved")])).await;
    assert_problem(&none, StatusCode::CONFLICT, "claim_required");
    let unknown = Uuid::new_v4().to_string();
    let stranger = post_results(&app, id, Some(&unknown), json!([result("call_1", "x")])).await;
    assert_problem(&stranger, StatusCode::CONFLICT, "claim_required");

    let claim_id = claim(&app, id).await;
    let other = post_results(&app, id, Some(&unknown), json!([result("call_1", "x")])).await;
    assert_problem(&other, StatusCode::CONFLICT, "claimed");
    assert!(other.body["until"].is_string(), "{:?}", other.body);
    let none = post_results(&app, id, None, json!([result("call_1", "saved")])).await;
    assert_problem(&none, StatusCode::CONFLICT, "claim_required");
    let stored: i64 = sqlx::query_scalar(
        "select count(*) from turn_calls where run_id = $1 and outcome is not null",
    )
    .bind(id)
    .fetch_one(&app.pool)
    .await
    .unwrap();
    assert_eq!(stored, 0, "nothing of a refused post is recorded");

    let posted = post_results(
        &app,
        id,
        Some(&claim_id),
        json!([result("call_1", "saved")]),
    )
    .await;
    assert_eq!(posted.status, StatusCode::OK, "{:?}", posted.body);
    for poster in [None, Some(unknown.as_str())] {
        let replay = post_results(&app, id, poster, json!([result("call_1", "saved")])).await;
        assert_eq!(replay.status, StatusCode::OK, "{:?}", replay.body);
        assert_eq!(
            replay.bytes, posted.bytes,
            "the same bytes whatever the claim"
        );
    }
    let mixed = post_results(
        &app,
        id,
        None,
        json!([result("call_1", "saved"), result("call_2", "read")]),
    )
    .await;
    assert_problem(&mixed, StatusCode::CONFLICT, "claim_required");
}

#[tokio::test]
async fn the_next_claim_writes_a_lapse_it_finds_once_and_is_refused_by_the_resumed_run() {
    let (_database, pool) = TestDatabase::create().await;
    let app = support::app(pool).await;
    let (id, _) = released_run(&app, "full").await;
    let claim_id = claim(&app, id).await;
    lapse_in_sql(&app.pool, id).await;
    let next = post_claim(&app, id, json!({})).await;
    assert_problem(&next, StatusCode::CONFLICT, "not_released");
    assert_eq!(next.body["run_status"], "resumed");
    assert_eq!(closed(&app.pool, id).await, lapsed(false));
    let renewal = post_claim(&app, id, json!({"claim_id": claim_id})).await;
    assert_problem(&renewal, StatusCode::CONFLICT, "claim_lapsed");
    let late = post_results(
        &app,
        id,
        Some(&claim_id),
        json!([result("call_1", "saved")]),
    )
    .await;
    assert_problem(&late, StatusCode::CONFLICT, "claim_lapsed");
    assert_eq!(closed(&app.pool, id).await, lapsed(false), "written once");
}

#[tokio::test]
async fn the_next_results_post_writes_a_lapse_it_finds_and_is_refused_claim_lapsed() {
    let (_database, pool) = TestDatabase::create().await;
    let app = support::app(pool).await;
    let (id, _) = released_run(&app, "full").await;
    let claim_id = claim(&app, id).await;
    let first = post_results(
        &app,
        id,
        Some(&claim_id),
        json!([result("call_1", "saved")]),
    )
    .await;
    assert_eq!(first.body["status"], "released", "{:?}", first.body);
    lapse_in_sql(&app.pool, id).await;
    let late = post_results(&app, id, Some(&claim_id), json!([result("call_2", "read")])).await;
    assert_problem(&late, StatusCode::CONFLICT, "claim_lapsed");
    assert_eq!(closed(&app.pool, id).await, lapsed(true));
    // The result recorded before the lapse still replays.
    let replay = post_results(
        &app,
        id,
        Some(&claim_id),
        json!([result("call_1", "saved")]),
    )
    .await;
    assert_eq!(replay.status, StatusCode::OK, "{:?}", replay.body);
    assert_eq!(replay.body["status"], "resumed");
    assert_eq!(
        replay.body["released_calls"][1]["result"],
        json!({"content": INTERRUPTED_READ, "is_error": true})
    );
    assert_eq!(closed(&app.pool, id).await, lapsed(true), "written once");
}

#[tokio::test]
async fn the_sweeper_writes_a_lapse_once_and_the_model_reads_the_interrupted_text() {
    let (_database, pool) = TestDatabase::create().await;
    let app = support::app(pool).await;
    let (id, digest) = released_run(&app, "full").await;
    claim(&app, id).await;
    assert_eq!(
        lapses::sweep_once(&app.state.resumer).await.unwrap(),
        0,
        "a live claim is left"
    );
    lapse_in_sql(&app.pool, id).await;
    assert_eq!(lapses::sweep_once(&app.state.resumer).await.unwrap(), 1);
    assert_eq!(lapses::sweep_once(&app.state.resumer).await.unwrap(), 0);
    assert_eq!(closed(&app.pool, id).await, lapsed(false));
    let outboxed: Vec<Value> =
        sqlx::query_scalar("select data from events where run_id = $1 and type = 'run.resumed'")
            .bind(id)
            .fetch_all(&app.pool)
            .await
            .unwrap();
    assert_eq!(outboxed.len(), 1);
    assert!(
        !outboxed[0].to_string().contains("interrupted;"),
        "ids and outcomes only, never result texts: {}",
        outboxed[0]
    );

    let input = app.get(&format!("/v1/runs/{id}/model-input")).await;
    assert_eq!(input.status, StatusCode::OK, "{:?}", input.body);
    let tools: Vec<&Value> = input.body["messages"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|message| message["role"] == "tool")
        .collect();
    assert_eq!(tools[0]["content"], INTERRUPTED_SAVE);
    assert_eq!(tools[1]["content"], INTERRUPTED_READ);
    // The decision's replay answers the turn resumed with the interrupted results: a worker runs nothing.
    let replay = app.decide(id, true, Some(7), &digest).await;
    assert_eq!(replay.body["status"], "resumed", "{:?}", replay.body);
    assert_eq!(replay.body["results"][0]["outcome"], "interrupted");
    assert_eq!(replay.body["results"][0]["is_error"], true);
}

#[tokio::test]
async fn a_lapsed_call_is_never_released_again() {
    let (_database, pool) = TestDatabase::create().await;
    let app = support::app(pool).await;
    let (id, _) = released_run(&app, "full").await;
    let claim_id = claim(&app, id).await;
    lapse_in_sql(&app.pool, id).await;
    lapses::sweep_once(&app.state.resumer).await.unwrap();
    let run = app.get(&format!("/v1/runs/{id}")).await.body;
    assert_eq!(run["status"], "resumed");
    for call in run["released_calls"].as_array().unwrap() {
        assert_eq!(call["result"]["is_error"], true, "{call}");
    }
    for body in [json!({}), json!({"claim_id": claim_id})] {
        let again = post_claim(&app, id, body).await;
        assert_eq!(again.status, StatusCode::CONFLICT, "{:?}", again.body);
    }
    let posted = post_results(&app, id, Some(&claim_id), json!([result("call_2", "read")])).await;
    assert_problem(&posted, StatusCode::CONFLICT, "claim_lapsed");
    let released_at_all: i64 = sqlx::query_scalar(
        "select count(*) from turn_calls where run_id = $1 and released_at is not null and outcome is null",
    )
    .bind(id)
    .fetch_one(&app.pool)
    .await
    .unwrap();
    assert_eq!(released_at_all, 0, "no released call waits for a result");
}

#[tokio::test]
async fn an_edited_call_that_lapsed_reads_the_edit_note_before_the_interrupted_text() {
    let (_database, pool) = TestDatabase::create().await;
    let app = support::app(pool).await;
    app.user(7, false, false, false).await;
    let id = Uuid::new_v4();
    let digest = app
        .register(json!({
            "id": id,
            "owner_uid": 7,
            "messages": transcript(vec![call("call_1", "save_page", r#"{"page": 12}"#)]),
            "tools": [{"name": "save_page", "effect": "write", "executor": "worker"}],
        }))
        .await["turn"]["digest"]
        .as_str()
        .unwrap()
        .to_owned();
    let decided = app
        .post(
            &format!("/v1/runs/{id}/decision"),
            json!({"decider_uid": 7, "turn_digest": digest, "calls": [
                {"call_id": "call_1", "approved": true, "arguments": r#"{"page": 13}"#},
            ]}),
        )
        .await;
    assert_eq!(decided.body["status"], "released", "{:?}", decided.body);
    claim(&app, id).await;
    lapse_in_sql(&app.pool, id).await;
    lapses::sweep_once(&app.state.resumer).await.unwrap();
    let content: String = sqlx::query_scalar("select content from turn_calls where run_id = $1")
        .bind(id)
        .fetch_one(&app.pool)
        .await
        .unwrap();
    let note = r#"Note: approval_edited (decided_by: run_owner). The arguments of this call were changed before it was approved, by the user who started this run, the person you are talking to; it ran with these arguments instead of the ones you proposed: {"page": 13}"#;
    assert_eq!(content, format!("{note}\n\n{INTERRUPTED_SAVE}"));
}

#[tokio::test]
async fn a_lapse_records_the_tool_events_at_the_runs_privacy_level() {
    let (_database, pool) = TestDatabase::create().await;
    let app = support::app(pool).await;
    for (level, events, result) in [
        ("full", 2, Some(INTERRUPTED_SAVE)),
        ("metadata", 2, None),
        ("none", 0, None),
    ] {
        let (id, _) = released_run(&app, level).await;
        claim(&app, id).await;
        lapse_in_sql(&app.pool, id).await;
        lapses::sweep_once(&app.state.resumer).await.unwrap();
        let rows: Vec<(String, String, Option<String>, i32)> = sqlx::query_as(
            "select outcome::text, privacy_level::text, result, result_bytes from tool_events
             where run_id = $1 order by position",
        )
        .bind(id)
        .fetch_all(&app.pool)
        .await
        .unwrap();
        assert_eq!(rows.len(), events, "{level}: {rows:?}");
        if let Some(first) = rows.first() {
            assert_eq!(first.0, "interrupted", "{level}");
            assert_eq!(first.1, level);
            assert_eq!(first.2.as_deref(), result, "{level}");
            assert_eq!(first.3 as usize, INTERRUPTED_SAVE.len(), "{level}");
        }
        assert_eq!(closed(&app.pool, id).await.resumed_events, 1, "{level}");
    }
}

#[tokio::test]
async fn a_cancel_ends_the_live_claim_and_a_lapse_on_the_cancelled_run_writes_nothing() {
    let (_database, pool) = TestDatabase::create().await;
    let app = support::app(pool).await;
    let (id, _) = released_run(&app, "full").await;
    let claim_id = claim(&app, id).await;
    let cancelled = app.post(&format!("/v1/runs/{id}/cancel"), json!({})).await;
    assert_eq!(
        cancelled.body["status"], "cancelled",
        "{:?}",
        cancelled.body
    );
    let ended: Option<DateTime<Utc>> =
        sqlx::query_scalar("select ended_at from worker_claims where run_id = $1")
            .bind(id)
            .fetch_one(&app.pool)
            .await
            .unwrap();
    assert!(ended.is_some(), "the cancel ended the claim");
    let renewal = post_claim(&app, id, json!({"claim_id": claim_id})).await;
    assert_problem(&renewal, StatusCode::CONFLICT, "run_cancelled");
    let posted = post_results(
        &app,
        id,
        Some(&claim_id),
        json!([result("call_1", "saved")]),
    )
    .await;
    assert_problem(&posted, StatusCode::CONFLICT, "run_cancelled");

    lapse_in_sql(&app.pool, id).await;
    assert_eq!(lapses::sweep_once(&app.state.resumer).await.unwrap(), 0);
    let claim = post_claim(&app, id, json!({})).await;
    assert_problem(&claim, StatusCode::CONFLICT, "run_cancelled");
    let recorded = closed(&app.pool, id).await;
    assert_eq!(
        (
            recorded.status.as_str(),
            recorded.tool_events.len(),
            recorded.resumed_events,
            recorded.lapsed_claims
        ),
        ("cancelled", 0, 0, 0),
        "{recorded:?}"
    );
    assert!(
        recorded
            .calls
            .iter()
            .all(|(_, outcome, _)| outcome.is_none())
    );
}

#[tokio::test]
async fn a_decision_token_may_not_claim() {
    let (_database, pool) = TestDatabase::create().await;
    let app = support::app(pool).await;
    let (id, _) = released_run(&app, "full").await;
    let signer = support::Signer::register(&app.pool, "admin", "k1").await;
    let answer = app
        .call(
            axum::http::Method::POST,
            &format!("/v1/runs/{id}/claim"),
            Some(&signer.token(7)),
            Some(json!({})),
        )
        .await;
    assert_problem(&answer, StatusCode::FORBIDDEN, "token_not_allowed");
}

#[tokio::test]
async fn another_tenants_run_is_not_found_to_a_claim() {
    let (_database, pool) = TestDatabase::create().await;
    let app = support::app(pool).await;
    let (id, _) = released_run(&app, "full").await;
    let other = support::add_client(&app.pool, "elsewhere", "other", &["runs:write"]).await;
    let answer = app
        .call(
            axum::http::Method::POST,
            &format!("/v1/runs/{id}/claim"),
            Some(&other),
            Some(json!({})),
        )
        .await;
    assert_problem(&answer, StatusCode::NOT_FOUND, "not_found");
}
