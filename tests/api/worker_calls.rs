//! Calls the worker runs (docs/design.md §15): tools declared `executor: worker` and `editable: false`, the
//! `released` state a decision leaves them in, and `POST /v1/runs/{id}/results`, each rule against real Postgres.
//! Over 400 lines: a test per rule of §15, sharing one run fixture; the races are `worker_races`.

use axum::http::StatusCode;
use serde_json::{Value, json};
use sqlx::PgPool;
use uuid::Uuid;

use crate::database::TestDatabase;
use crate::support::{self, TestApp, assert_problem, call, transcript};

/// A run of owner 7 with a worker's write tool `save_page` (not editable) and a worker's read tool `read_page`.
fn worker_body(id: Uuid) -> Value {
    json!({
        "id": id,
        "owner_uid": 7,
        "messages": transcript(vec![
            call("call_1", "save_page", r#"{"page": 12}"#),
            call("call_2", "read_page", r#"{"page": 12}"#),
        ]),
        "tools": [
            {"name": "save_page", "effect": "write", "executor": "worker", "editable": false},
            {"name": "read_page", "effect": "read", "executor": "worker"},
        ],
    })
}

async fn worker_run(app: &TestApp) -> (Uuid, String) {
    app.user(7, false, false, false).await;
    let id = Uuid::new_v4();
    let run = app.register(worker_body(id)).await;
    (id, run["turn"]["digest"].as_str().unwrap().to_owned())
}

/// A run approved whole by its owner: both calls released.
async fn released_run(app: &TestApp) -> Uuid {
    let (id, digest) = worker_run(app).await;
    let answer = app.decide(id, true, Some(7), &digest).await;
    assert_eq!(answer.status, StatusCode::OK, "{:?}", answer.body);
    id
}

/// Claims the released calls of run `id` (docs/design.md §15); the claim's id.
pub async fn claim(app: &TestApp, id: Uuid) -> String {
    let answer = app.post(&format!("/v1/runs/{id}/claim"), json!({})).await;
    assert_eq!(answer.status, StatusCode::OK, "{:?}", answer.body);
    answer.body["claim_id"].as_str().unwrap().to_owned()
}

/// Posts `results` on run `id` under the claim `claim_id` (none: without one).
pub async fn post_results(
    app: &TestApp,
    id: Uuid,
    claim_id: Option<&str>,
    results: Value,
) -> support::Answer {
    let body = match claim_id {
        Some(claim_id) => json!({"claim_id": claim_id, "results": results}),
        None => json!({"results": results}),
    };
    app.post(&format!("/v1/runs/{id}/results"), body).await
}

fn result(call_id: &str, content: &str, is_error: bool) -> Value {
    json!({"call_id": call_id, "content": content, "is_error": is_error})
}

async fn count(pool: &PgPool, sql: &'static str, id: Uuid) -> i64 {
    sqlx::query_scalar(sql)
        .bind(id)
        .fetch_one(pool)
        .await
        .unwrap()
}

async fn tool_events(pool: &PgPool, id: Uuid) -> i64 {
    count(
        pool,
        "select count(*) from tool_events where run_id = $1",
        id,
    )
    .await
}

async fn outboxed(pool: &PgPool, id: Uuid, kind: &str) -> i64 {
    sqlx::query_scalar("select count(*) from events where run_id = $1 and type = $2")
        .bind(id)
        .bind(kind)
        .fetch_one(pool)
        .await
        .unwrap()
}

#[tokio::test]
async fn pending_calls_show_who_runs_them_and_whether_they_may_be_edited() {
    let (_database, pool) = TestDatabase::create().await;
    let app = support::app(pool).await;
    let (id, _) = worker_run(&app).await;
    let run = app.get(&format!("/v1/runs/{id}")).await.body;
    let calls = &run["turn"]["pending_calls"];
    assert_eq!(calls[0]["executor"], "worker");
    assert_eq!(calls[0]["editable"], false);
    assert_eq!(calls[1]["editable"], true);
    let inbox = app.get("/v1/approvals?acting_uid=7").await.body;
    assert_eq!(
        inbox["items"][0]["turn"]["pending_calls"][0]["executor"],
        "worker"
    );
    assert_eq!(
        inbox["items"][0]["turn"]["pending_calls"][0]["editable"],
        false
    );
    let (plain, _) = support::owned_run(&app).await;
    let plain = app.get(&format!("/v1/runs/{plain}")).await.body;
    assert_eq!(plain["turn"]["pending_calls"][0]["executor"], "service");
    assert_eq!(plain["turn"]["pending_calls"][0]["editable"], true);
}

#[tokio::test]
async fn an_edit_of_a_tool_that_may_not_be_edited_is_refused_and_records_nothing() {
    let (_database, pool) = TestDatabase::create().await;
    let app = support::app(pool).await;
    let (id, digest) = worker_run(&app).await;
    let answer = app
        .post(
            &format!("/v1/runs/{id}/decision"),
            json!({"decider_uid": 7, "turn_digest": digest, "calls": [
                {"call_id": "call_1", "approved": true, "arguments": r#"{"page": 13}"#},
                {"call_id": "call_2", "approved": true},
            ]}),
        )
        .await;
    assert_problem(&answer, StatusCode::UNPROCESSABLE_ENTITY, "not_editable");
    support::assert_nothing_recorded(&app.pool, id).await;
}

#[tokio::test]
async fn an_approval_releases_the_worker_calls_and_runs_nothing() {
    let (_database, pool) = TestDatabase::create().await;
    let app = support::app(pool).await;
    let (id, digest) = worker_run(&app).await;
    let answer = app.decide(id, true, Some(7), &digest).await;
    assert_eq!(answer.status, StatusCode::OK, "{:?}", answer.body);
    assert_eq!(answer.body["status"], "released");
    assert!(answer.body.get("model_input").is_none());
    assert_eq!(answer.body["results"], json!([]));
    let released = &answer.body["released_calls"];
    assert_eq!(released[0]["call_id"], "call_1");
    assert_eq!(released[0]["arguments"], r#"{"page": 12}"#);
    assert!(released[0].get("result").is_none());

    let run = app.get(&format!("/v1/runs/{id}")).await.body;
    assert_eq!(run["status"], "released");
    assert_eq!(run["released_calls"].as_array().unwrap().len(), 2);
    assert_eq!(tool_events(&app.pool, id).await, 0);
    assert_eq!(outboxed(&app.pool, id, "run.released").await, 1);
    let data: Value =
        sqlx::query_scalar("select data from events where run_id = $1 and type = 'run.released'")
            .bind(id)
            .fetch_one(&app.pool)
            .await
            .unwrap();
    assert_eq!(data["released_call_ids"], json!(["call_1", "call_2"]));
    assert!(
        !data.to_string().contains("page"),
        "ids only, never arguments: {data}"
    );

    let model_input = app.get(&format!("/v1/runs/{id}/model-input")).await;
    assert_problem(&model_input, StatusCode::CONFLICT, "results_pending");
    let replay = app.decide(id, true, Some(7), &digest).await;
    assert_eq!(
        replay.body, answer.body,
        "the same decision again answers the same way"
    );
}

#[tokio::test]
async fn the_last_result_resumes_the_run_with_tool_events_and_one_run_resumed() {
    let (_database, pool) = TestDatabase::create().await;
    let app = support::app(pool).await;
    let id = released_run(&app).await;
    let claimed = claim(&app, id).await;
    let mine = Some(claimed.as_str());
    let first = post_results(&app, id, mine, json!([result("call_1", "saved", false)])).await;
    assert_eq!(first.status, StatusCode::OK, "{:?}", first.body);
    assert_eq!(first.body["status"], "released");
    assert_eq!(
        first.body["released_calls"][0]["result"]["content"],
        "saved"
    );
    assert!(first.body["released_calls"][1].get("result").is_none());
    assert_eq!(tool_events(&app.pool, id).await, 0);

    let last = post_results(
        &app,
        id,
        mine,
        json!([result("call_2", "no such page", true)]),
    )
    .await;
    assert_eq!(last.body["status"], "resumed", "{:?}", last.body);
    assert_eq!(tool_events(&app.pool, id).await, 2);
    let outcomes: Vec<String> =
        sqlx::query_scalar("select outcome from tool_events where run_id = $1 order by position")
            .bind(id)
            .fetch_all(&app.pool)
            .await
            .unwrap();
    assert_eq!(outcomes, ["ok", "failed"]);
    assert_eq!(outboxed(&app.pool, id, "run.resumed").await, 1);

    let input = app.get(&format!("/v1/runs/{id}/model-input")).await;
    assert_eq!(input.status, StatusCode::OK, "{:?}", input.body);
    let text = input.body.to_string();
    assert!(
        text.contains("saved") && text.contains("no such page"),
        "{text}"
    );
    // The same result again is a replay: 200, nothing new, with or without the claim.
    let again = post_results(&app, id, mine, json!([result("call_1", "saved", false)])).await;
    assert_eq!(again.status, StatusCode::OK);
    let again = post_results(&app, id, None, json!([result("call_1", "saved", false)])).await;
    assert_eq!(again.status, StatusCode::OK);
    assert_eq!(tool_events(&app.pool, id).await, 2);
    assert_eq!(outboxed(&app.pool, id, "run.resumed").await, 1);
}

#[tokio::test]
async fn an_edited_worker_call_reads_the_edit_note_before_the_workers_content() {
    let (_database, pool) = TestDatabase::create().await;
    let app = support::app(pool).await;
    let (id, digest) = worker_run(&app).await;
    let answer = app
        .post(
            &format!("/v1/runs/{id}/decision"),
            json!({"decider_uid": 7, "turn_digest": digest, "calls": [
                {"call_id": "call_1", "approved": false},
                {"call_id": "call_2", "approved": true, "arguments": r#"{"page": 13}"#},
            ]}),
        )
        .await;
    assert_eq!(answer.body["status"], "released", "{:?}", answer.body);
    assert_eq!(answer.body["results"][0]["outcome"], "denied");
    assert_eq!(
        answer.body["released_calls"][0]["arguments"],
        r#"{"page": 13}"#
    );
    assert_eq!(answer.body["released_calls"][0]["edited"], true);
    assert_eq!(
        tool_events(&app.pool, id).await,
        1,
        "the denied call's, at release"
    );
    let claimed = claim(&app, id).await;
    let done = post_results(
        &app,
        id,
        Some(&claimed),
        json!([result("call_2", "page 13", false)]),
    )
    .await;
    assert_eq!(done.body["status"], "resumed", "{:?}", done.body);
    assert_eq!(
        done.body["released_calls"][0]["result"]["content"],
        "page 13"
    );
    let stored: String = sqlx::query_scalar(
        "select content from turn_calls where run_id = $1 and call_id = 'call_2'",
    )
    .bind(id)
    .fetch_one(&app.pool)
    .await
    .unwrap();
    assert!(
        stored.starts_with("Note: approval_edited (decided_by: run_owner)"),
        "{stored}"
    );
    assert!(stored.ends_with("\n\npage 13"), "{stored}");
    assert_eq!(tool_events(&app.pool, id).await, 2);
}

#[tokio::test]
async fn results_are_refused_by_the_rules_in_their_order_and_record_nothing() {
    let (_database, pool) = TestDatabase::create().await;
    let app = support::app(pool).await;
    let missing = post_results(
        &app,
        Uuid::new_v4(),
        None,
        json!([result("call_1", "x", false)]),
    )
    .await;
    assert_problem(&missing, StatusCode::NOT_FOUND, "not_found");

    let (waiting, digest) = worker_run(&app).await;
    let early = post_results(&app, waiting, None, json!([result("call_1", "x", false)])).await;
    assert_problem(&early, StatusCode::CONFLICT, "not_released");
    assert_eq!(
        early.body["run_status"], "waiting_for_approval",
        "ask again: {:?}",
        early.body
    );
    assert_eq!(
        early.body["status"], 409,
        "RFC 9457's status stays the HTTP status"
    );

    // Denied whole, the run resumed without releasing anything: never, which says so in its own code.
    assert_eq!(
        app.decide(waiting, false, Some(7), &digest).await.status,
        StatusCode::OK
    );
    let never = post_results(&app, waiting, None, json!([result("call_1", "x", false)])).await;
    assert_problem(&never, StatusCode::CONFLICT, "run_resumed");
    assert_eq!(never.body["run_status"], "resumed");
    let detail = never.body["detail"].as_str().unwrap();
    assert!(detail.contains("already resumed"), "{detail}");

    let id = released_run(&app).await;
    let claimed = claim(&app, id).await;
    let mine = Some(claimed.as_str());
    let twice = json!([result("call_1", "a", false), result("call_1", "a", false)]);
    assert_problem(
        &post_results(&app, id, mine, twice).await,
        StatusCode::UNPROCESSABLE_ENTITY,
        "repeated_call",
    );
    let unknown = json!([result("call_1", "a", false), result("call_9", "a", false)]);
    assert_problem(
        &post_results(&app, id, mine, unknown).await,
        StatusCode::UNPROCESSABLE_ENTITY,
        "call_not_released",
    );
    let stored: i64 = count(
        &app.pool,
        "select count(*) from turn_calls where run_id = $1 and outcome is not null",
        id,
    )
    .await;
    assert_eq!(stored, 0, "nothing of a refused body is recorded");

    assert_eq!(
        post_results(&app, id, mine, json!([result("call_1", "a", false)]))
            .await
            .status,
        StatusCode::OK
    );
    let conflicting = json!([
        result("call_2", "b", false),
        result("call_1", "other", false)
    ]);
    assert_problem(
        &post_results(&app, id, mine, conflicting).await,
        StatusCode::CONFLICT,
        "result_conflict",
    );
    let stored: i64 = count(
        &app.pool,
        "select count(*) from turn_calls where run_id = $1 and outcome is not null",
        id,
    )
    .await;
    assert_eq!(
        stored, 1,
        "call_2's result was not recorded with the conflicting one"
    );

    let cancelled = app.post(&format!("/v1/runs/{id}/cancel"), json!({})).await;
    assert_eq!(
        cancelled.body["status"], "cancelled",
        "a released run may be cancelled"
    );
    assert_problem(
        &post_results(&app, id, mine, json!([result("call_2", "b", false)])).await,
        StatusCode::CONFLICT,
        "run_cancelled",
    );
    assert_eq!(tool_events(&app.pool, id).await, 0);
}

#[tokio::test]
async fn a_decision_token_may_not_post_results() {
    let (_database, pool) = TestDatabase::create().await;
    let app = support::app(pool).await;
    let id = released_run(&app).await;
    let signer = support::Signer::register(&app.pool, "admin", "k1").await;
    let answer = app
        .call(
            axum::http::Method::POST,
            &format!("/v1/runs/{id}/results"),
            Some(&signer.token(7)),
            Some(json!({"results": [result("call_1", "x", false)]})),
        )
        .await;
    assert_problem(&answer, StatusCode::FORBIDDEN, "token_not_allowed");
}

#[tokio::test]
async fn the_sweeper_never_expires_a_released_run() {
    let (_database, pool) = TestDatabase::create().await;
    let app = support::app(pool).await;
    let id = released_run(&app).await;
    sqlx::query("update runs set expires_at = now() - interval '1 hour' where id = $1")
        .bind(id)
        .execute(&app.pool)
        .await
        .unwrap();
    approval_resume::resume::sweeper::sweep_once(&app.state.resumer)
        .await
        .unwrap();
    let run = app.get(&format!("/v1/runs/{id}")).await.body;
    assert_eq!(run["status"], "released");
    assert_eq!(outboxed(&app.pool, id, "run.expired").await, 0);
}

#[tokio::test]
async fn a_turn_of_service_and_worker_calls_runs_the_service_call_and_releases_the_other() {
    let (_database, pool) = TestDatabase::create().await;
    let executor = crate::executors::FakeExecutor::start().await;
    let tools = [("read_page".to_owned(), executor.executor("ok"))];
    let app = support::app_with(
        pool,
        support::Options {
            executors: approval_resume::executor::Executors::from_tools(tools.into()),
            ..Default::default()
        },
    )
    .await;
    app.user(7, false, false, false).await;
    let id = Uuid::new_v4();
    let mut body = worker_body(id);
    body["tools"][1] = json!({"name": "read_page", "effect": "read"});
    let digest = app.register(body).await["turn"]["digest"]
        .as_str()
        .unwrap()
        .to_owned();
    let answer = app.decide(id, true, Some(7), &digest).await;
    assert_eq!(answer.body["status"], "released", "{:?}", answer.body);
    assert_eq!(answer.body["results"][0]["call_id"], "call_2");
    assert_eq!(answer.body["results"][0]["outcome"], "ok");
    assert_eq!(answer.body["released_calls"].as_array().unwrap().len(), 1);
    assert_eq!(tool_events(&app.pool, id).await, 1);
    let claimed = claim(&app, id).await;
    let done = post_results(
        &app,
        id,
        Some(&claimed),
        json!([result("call_1", "saved", false)]),
    )
    .await;
    assert_eq!(done.body["status"], "resumed", "{:?}", done.body);
    assert_eq!(tool_events(&app.pool, id).await, 2);
    assert_eq!(outboxed(&app.pool, id, "run.released").await, 1);
    assert_eq!(outboxed(&app.pool, id, "run.resumed").await, 1);
}

#[tokio::test]
async fn a_turn_taken_over_after_its_instance_stopped_releases_the_worker_calls_and_sends_nothing()
{
    let (_database, pool) = TestDatabase::create().await;
    let app = support::app(pool).await;
    let (id, digest) = worker_run(&app).await;
    // As an approval leaves a turn whose instance died before it closed it: taken, its lease run out.
    sqlx::query(
        "with taken as (
             update runs set status = 'resuming', lease_owner = gen_random_uuid(),
                             lease_until = now() - interval '1 second'
             where id = $1 returning id
         )
         insert into approval_events (run_id, turn_index, approved, decider_uid, decided_by, turn_digest,
                                      client_name, calls)
         select id, 0, true, 7, 'run_owner', $2, 'admin', '[]'::jsonb from taken",
    )
    .bind(id)
    .bind(&digest)
    .execute(&app.pool)
    .await
    .unwrap();
    approval_resume::resume::approve::recover_once(&app.state.resumer).await;
    let run = app.get(&format!("/v1/runs/{id}")).await.body;
    assert_eq!(run["status"], "released", "{run}");
    assert_eq!(run["released_calls"].as_array().unwrap().len(), 2);
    assert_eq!(outboxed(&app.pool, id, "run.released").await, 1);
    let started = count(
        &app.pool,
        "select count(*) from turn_calls where run_id = $1 and started_at is not null",
        id,
    )
    .await;
    assert_eq!(started, 0, "a released call is never sent");
}

#[tokio::test]
async fn the_decision_replayed_on_a_run_cancelled_while_released_answers_the_run_cancelled() {
    let (_database, pool) = TestDatabase::create().await;
    let app = support::app(pool).await;
    let (id, digest) = worker_run(&app).await;
    let first = app.decide(id, true, Some(7), &digest).await;
    assert_eq!(first.body["status"], "released", "{:?}", first.body);
    let cancelled = app.post(&format!("/v1/runs/{id}/cancel"), json!({})).await;
    assert_eq!(cancelled.body["status"], "cancelled");
    let replay = app.decide(id, true, Some(7), &digest).await;
    assert_eq!(replay.status, StatusCode::OK, "{:?}", replay.body);
    assert_eq!(
        replay.body["status"], "cancelled",
        "a worker driven by the answer must see that there is nothing to run: {:?}",
        replay.body
    );
    assert!(replay.body.get("model_input").is_none());
    assert_eq!(replay.body["results"], json!([]));
    assert_eq!(replay.body["decision"], first.body["decision"]);
    let again = app.decide(id, true, Some(7), &digest).await;
    assert_eq!(again.bytes, replay.bytes, "the same bytes each time");
}
