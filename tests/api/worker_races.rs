//! Worker results racing (docs/design.md §15): three instances over one database posting the same call's result,
//! a cancel against the last result, and a decision's replay against the results. Every post takes the run's row
//! lock, so whatever the interleaving, each call's result, tool event and `run.resumed` is recorded exactly once,
//! counted in SQL.

use axum::http::StatusCode;
use futures::future::join_all;
use serde_json::{Value, json};
use sqlx::PgPool;
use uuid::Uuid;

use crate::database::TestDatabase;
use crate::support::{self, TestApp, call, transcript};

/// A run of owner 7 whose one call (`save_page`) is the worker's, approved: released. Its id and digest.
async fn released_run(app: &TestApp) -> (Uuid, String) {
    let id = Uuid::new_v4();
    let body = json!({
        "id": id,
        "owner_uid": 7,
        "messages": transcript(vec![call("call_1", "save_page", r#"{"page": 12}"#)]),
        "tools": [{"name": "save_page", "effect": "write", "executor": "worker"}],
    });
    let digest = app.register(body).await["turn"]["digest"]
        .as_str()
        .unwrap()
        .to_owned();
    let answer = app.decide(id, true, Some(7), &digest).await;
    assert_eq!(answer.body["status"], "released", "{:?}", answer.body);
    (id, digest)
}

/// The result of `call_1` under the claim `claim_id`.
fn results(claim_id: &str, content: &str) -> Value {
    json!({"claim_id": claim_id, "results": [{"call_id": "call_1", "content": content, "is_error": false}]})
}

/// (tool events, `run.resumed` events, calls with a result) of a run.
async fn counts(pool: &PgPool, id: Uuid) -> (i64, i64, i64) {
    sqlx::query_as(
        "select (select count(*) from tool_events where run_id = $1),
                (select count(*) from events where run_id = $1 and type = 'run.resumed'),
                (select count(*) from turn_calls where run_id = $1 and outcome is not null)",
    )
    .bind(id)
    .fetch_one(pool)
    .await
    .unwrap()
}

async fn three_instances(pool: PgPool) -> Vec<TestApp> {
    let first = support::app(pool).await;
    first.user(7, false, false, false).await;
    let (second, third) = (first.second_instance(), first.second_instance());
    vec![first, second, third]
}

#[tokio::test]
async fn three_instances_posting_the_same_call_record_it_once_and_conflict_or_replay_the_rest() {
    let (_database, pool) = TestDatabase::create().await;
    let apps = three_instances(pool).await;
    for _ in 0..10 {
        let (id, _) = released_run(&apps[0]).await;
        let claimed = crate::worker_calls::claim(&apps[0], id).await;
        let path = format!("/v1/runs/{id}/results");
        // Two post the same content, one another: one content wins, the same one replays, the other conflicts.
        let posts = apps.iter().enumerate().map(|(i, app)| {
            let body = results(&claimed, if i == 2 { "other" } else { "saved" });
            let path = path.clone();
            async move { app.post(&path, body).await }
        });
        let answers = join_all(posts).await;
        let ok = answers
            .iter()
            .filter(|a| a.status == StatusCode::OK)
            .count();
        let conflicts = answers
            .iter()
            .filter(|a| a.status == StatusCode::CONFLICT && a.code() == "result_conflict")
            .count();
        assert_eq!(ok + conflicts, 3, "{answers:?}");
        assert!(ok >= 1, "one post records the result: {answers:?}");
        assert_eq!(counts(&apps[0].pool, id).await, (1, 1, 1));
    }
}

#[tokio::test]
async fn a_cancel_racing_the_last_result_lets_exactly_one_win() {
    let (_database, pool) = TestDatabase::create().await;
    let apps = three_instances(pool).await;
    for _ in 0..10 {
        let (id, _) = released_run(&apps[0]).await;
        let claimed = crate::worker_calls::claim(&apps[0], id).await;
        let (results_path, cancel_path) = (
            format!("/v1/runs/{id}/results"),
            format!("/v1/runs/{id}/cancel"),
        );
        let post = apps[1].post(&results_path, results(&claimed, "saved"));
        let cancel = apps[2].post(&cancel_path, json!({}));
        let (posted, cancelled) = tokio::join!(post, cancel);
        assert_eq!(
            cancelled.status,
            StatusCode::OK,
            "a released or resumed run may be cancelled"
        );
        let recorded = counts(&apps[0].pool, id).await;
        if posted.status == StatusCode::OK {
            // The result came first: recorded whole, and the run cancelled after it resumed.
            assert_eq!(recorded, (1, 1, 1));
        } else {
            assert_eq!(posted.code(), "run_cancelled", "{:?}", posted.body);
            assert_eq!(
                recorded,
                (0, 0, 0),
                "nothing of a result refused after the cancel"
            );
        }
    }
}

#[tokio::test]
async fn a_decisions_replay_racing_the_results_records_nothing_twice() {
    let (_database, pool) = TestDatabase::create().await;
    let apps = three_instances(pool).await;
    for _ in 0..10 {
        let (id, digest) = released_run(&apps[0]).await;
        let claimed = crate::worker_calls::claim(&apps[0], id).await;
        let results_path = format!("/v1/runs/{id}/results");
        let post = apps[1].post(&results_path, results(&claimed, "saved"));
        let replay = apps[2].decide(id, true, Some(7), &digest);
        let (posted, replayed) = tokio::join!(post, replay);
        assert_eq!(posted.status, StatusCode::OK, "{:?}", posted.body);
        assert_eq!(replayed.status, StatusCode::OK, "{:?}", replayed.body);
        let status = replayed.body["status"].as_str().unwrap();
        assert!(status == "released" || status == "resumed", "{status}");
        assert_eq!(counts(&apps[0].pool, id).await, (1, 1, 1));
        let approvals: i64 =
            sqlx::query_scalar("select count(*) from approval_events where run_id = $1")
                .bind(id)
                .fetch_one(&apps[0].pool)
                .await
                .unwrap();
        assert_eq!(approvals, 1);
    }
}
