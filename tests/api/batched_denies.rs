//! Denies written together (`resume::denial_writer`): each recorded exactly once with all it writes, a second deny
//! of the same run answered from the first, a deny whose batch fails costing the others nothing, a batch never
//! waiting for a run another transaction holds, and denies queued only while the threshold's count is in flight.

use std::time::{Duration, Instant};

use axum::http::StatusCode;
use futures::future::join_all;
use serde_json::json;
use sqlx::PgPool;
use uuid::Uuid;

use crate::database::{TestDatabase, wait_until_waiting_for_locks};
use crate::support::{self, Options, TestApp};

/// An instance with `DENY_BATCHES` on, every deny queued for the writers (none written at once on its own), so that
/// what these tests hold back decides which denies meet in a batch.
async fn batching_app(pool: PgPool) -> TestApp {
    support::app_with(
        pool,
        Options {
            deny_batch_beyond: Some(0),
            ..Options::default()
        },
    )
    .await
}

/// `count` waiting runs of user 7, with their turn digests.
async fn waiting_runs(app: &TestApp, count: usize) -> Vec<(Uuid, String)> {
    let mut runs = Vec::with_capacity(count);
    for _ in 0..count {
        runs.push(support::owned_run(app).await);
    }
    runs
}

async fn deny(app: &TestApp, run_id: Uuid, digest: &str) -> support::Answer {
    app.post(
        &format!("/v1/runs/{run_id}/decision"),
        json!({"approved": false, "decider_uid": 7, "turn_digest": digest}),
    )
    .await
}

/// Denies every run of `runs` at once; their answers in order.
async fn deny_all(app: &TestApp, runs: &[(Uuid, String)]) -> Vec<support::Answer> {
    join_all(
        runs.iter()
            .map(|(run_id, digest)| deny(app, *run_id, digest)),
    )
    .await
}

/// A transaction holding the rows of `run_ids` locked until it commits.
async fn hold_runs(pool: &PgPool, run_ids: &[Uuid]) -> sqlx::Transaction<'static, sqlx::Postgres> {
    let mut lock = pool.begin().await.unwrap();
    sqlx::query("select 1 from runs where id = any($1) for update")
        .bind(run_ids)
        .execute(&mut *lock)
        .await
        .unwrap();
    lock
}

/// What a deny of `run_id` wrote: approval events, tool events, `run.resumed` events, calls with a result, and
/// whether the run moved on.
async fn written(pool: &PgPool, run_id: Uuid) -> (i64, i64, i64, i64, String) {
    sqlx::query_as(
        "select (select count(*) from approval_events where run_id = $1),
                (select count(*) from tool_events where run_id = $1),
                (select count(*) from events where run_id = $1 and type = 'run.resumed'),
                (select count(*) from turn_calls where run_id = $1 and outcome is not null),
                (select status::text from runs where id = $1)",
    )
    .bind(run_id)
    .fetch_one(pool)
    .await
    .unwrap()
}

#[tokio::test]
async fn denies_of_many_runs_posted_at_once_are_each_recorded_exactly_once_with_everything_they_write()
 {
    let (_database, pool) = TestDatabase::create().await;
    let app = batching_app(pool.clone()).await;
    let runs = waiting_runs(&app, 16).await;

    let answers = join_all(
        runs.iter()
            .map(|(run_id, digest)| deny(&app, *run_id, digest)),
    )
    .await;

    for ((run_id, _), answer) in runs.iter().zip(&answers) {
        assert_eq!(answer.status, StatusCode::OK, "{run_id}: {:?}", answer.body);
        assert_eq!(answer.body["run_id"], json!(run_id.to_string()));
        assert_eq!(answer.body["decision"]["decided_by"], json!("run_owner"));
        let calls = answer.body["results"].as_array().unwrap().len() as i64;
        assert!(calls > 0, "{:?}", answer.body);
        assert_eq!(
            written(&pool, *run_id).await,
            (1, calls, 1, calls, "resumed".to_owned()),
            "run {run_id}"
        );
    }
}

#[tokio::test]
async fn two_denies_of_each_run_posted_at_once_record_one_decision_per_run_and_answer_both_alike() {
    let (_database, pool) = TestDatabase::create().await;
    let app = batching_app(pool.clone()).await;
    let runs = waiting_runs(&app, 8).await;

    let twice = runs.iter().chain(runs.iter());
    let answers = join_all(twice.map(|(run_id, digest)| deny(&app, *run_id, digest))).await;

    let (first, second) = answers.split_at(runs.len());
    for (((run_id, _), one), other) in runs.iter().zip(first).zip(second) {
        assert_eq!(one.status, StatusCode::OK, "{run_id}: {:?}", one.body);
        assert_eq!(other.status, StatusCode::OK, "{run_id}: {:?}", other.body);
        assert_eq!(one.bytes, other.bytes, "run {run_id}: the replay differs");
        assert_denied_once(&pool, *run_id).await;
    }
}

#[tokio::test]
async fn a_deny_that_fails_in_a_batch_costs_the_other_denies_of_the_batch_nothing() {
    let (_database, pool) = TestDatabase::create().await;
    let app = batching_app(pool.clone()).await;
    let runs = waiting_runs(&app, 6).await;
    let (failing, _) = runs[3];
    // A stand-in for a deny the database refuses: its approval event raises, so any statement holding it fails.
    sqlx::raw_sql(sqlx::AssertSqlSafe(format!(
        "create function refuse_one() returns trigger language plpgsql as $$
         begin
             if new.run_id = '{failing}' then raise exception 'refused for the test'; end if;
             return new;
         end $$;
         create trigger refuse_one before insert on approval_events for each row execute function refuse_one();"
    )))
    .execute(&pool)
    .await
    .unwrap();

    let (held, answers) = deny_behind_two_held_runs(&app, &pool, &runs).await;

    for answer in &held {
        assert_eq!(answer.status, StatusCode::OK, "{:?}", answer.body);
    }
    for ((run_id, _), answer) in runs[2..].iter().zip(&answers) {
        if *run_id == failing {
            assert!(answer.status.is_server_error(), "{:?}", answer.body);
            assert_eq!(
                written(&pool, *run_id).await,
                (0, 0, 0, 0, "waiting_for_approval".to_owned())
            );
        } else {
            assert_eq!(answer.status, StatusCode::OK, "{run_id}: {:?}", answer.body);
            assert_denied_once(&pool, *run_id).await;
        }
    }
    let metrics = support::metrics(&app).await;
    assert!(
        metrics.contains("deny_statements_total{kind=\"retried\"} 4\n"),
        "{metrics}"
    );
}

#[tokio::test]
async fn denies_that_queue_while_the_writers_are_busy_are_written_by_one_statement() {
    let (_database, pool) = TestDatabase::create().await;
    let app = batching_app(pool.clone()).await;
    let runs = waiting_runs(&app, 6).await;

    let (held, queued) = deny_behind_two_held_runs(&app, &pool, &runs).await;

    for answer in held.iter().chain(&queued) {
        assert_eq!(answer.status, StatusCode::OK, "{:?}", answer.body);
    }
    let metrics = support::metrics(&app).await;
    assert!(
        metrics.contains("deny_statements_total{kind=\"batch\"} 1\n"),
        "{metrics}"
    );
    assert!(metrics.contains("batched_denies_total 4\n"), "{metrics}");
    assert!(
        metrics.contains("deny_statements_total{kind=\"single\"} 2\n"),
        "{metrics}"
    );
}

/// One approval event and one `run.resumed` event for the run, which moved on.
async fn assert_denied_once(pool: &PgPool, run_id: Uuid) {
    let (decisions, _, resumed, _, status) = written(pool, run_id).await;
    assert_eq!(
        (decisions, resumed, status.as_str()),
        (1, 1, "resumed"),
        "run {run_id}"
    );
}

/// Denies every run of `runs` so that the last ones are written together: the first two runs are locked, their denies
/// sent one after the other so that each writer waits for a lock with one deny, the others sent then, and the locks
/// released once they all queue. Answers the first two denies' answers and the others'.
async fn deny_behind_two_held_runs(
    app: &TestApp,
    pool: &PgPool,
    runs: &[(Uuid, String)],
) -> (Vec<support::Answer>, Vec<support::Answer>) {
    let lock = hold_runs(pool, &[runs[0].0, runs[1].0]).await;
    let first = deny(app, runs[0].0, &runs[0].1);
    let second = async {
        wait_until_waiting_for_locks(pool, 1).await;
        deny(app, runs[1].0, &runs[1].1).await
    };
    let queued = async {
        wait_until_waiting_for_locks(pool, 2).await;
        deny_all(app, &runs[2..]).await
    };
    let release = async {
        wait_until_waiting_for_locks(pool, 2).await;
        wait_until_queued(app, runs.len() - 2).await;
        lock.commit().await.unwrap();
    };
    let (first, second, queued, ()) = tokio::join!(first, second, queued, release);
    (vec![first, second], queued)
}

/// Waits (at most ten seconds) until `denies` denies wait in the writer's queue.
async fn wait_until_queued(app: &TestApp, denies: usize) {
    let deadline = Instant::now() + Duration::from_secs(10);
    while app.state.resumer.denials.queued() < denies {
        assert!(Instant::now() < deadline, "the denies never queued");
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
}

#[tokio::test]
async fn a_run_another_transaction_holds_is_skipped_by_its_batch_which_writes_the_others_without_waiting()
 {
    let (_database, pool) = TestDatabase::create().await;
    let app = batching_app(pool.clone()).await;
    let runs = waiting_runs(&app, 6).await;
    let held_elsewhere = runs[3].0;
    let other_transaction = hold_runs(&pool, &[held_elsewhere]).await;
    // As in `deny_behind_two_held_runs`: each writer waits for a lock with one deny while runs 2 to 5 queue.
    let lock = hold_runs(&pool, &[runs[0].0, runs[1].0]).await;
    let first = deny(&app, runs[0].0, &runs[0].1);
    let second = async {
        wait_until_waiting_for_locks(&pool, 1).await;
        deny(&app, runs[1].0, &runs[1].1).await
    };
    let queued = async {
        wait_until_waiting_for_locks(&pool, 2).await;
        deny_all(&app, &runs[2..]).await
    };
    let release = async {
        wait_until_waiting_for_locks(&pool, 2).await;
        wait_until_queued(&app, 4).await;
        lock.commit().await.unwrap();
        // The batch writes runs 2, 4 and 5 while run 3's deny, sent on its own, still waits for its lock.
        let deadline = Instant::now() + Duration::from_secs(10);
        for run_id in [runs[2].0, runs[4].0, runs[5].0] {
            while written(&pool, run_id).await.0 == 0 {
                assert!(
                    Instant::now() < deadline,
                    "the batch waited for the locked run"
                );
                tokio::time::sleep(Duration::from_millis(5)).await;
            }
        }
        assert_eq!(written(&pool, held_elsewhere).await.0, 0);
        other_transaction.commit().await.unwrap();
    };
    let (first, second, queued, ()) = tokio::join!(first, second, queued, release);

    for answer in [&first, &second].into_iter().chain(&queued) {
        assert_eq!(answer.status, StatusCode::OK, "{:?}", answer.body);
    }
    for (run_id, _) in &runs {
        assert_denied_once(&pool, *run_id).await;
    }
    let metrics = support::metrics(&app).await;
    assert!(
        metrics.contains("deny_statements_total{kind=\"batch\"} 1\n"),
        "{metrics}"
    );
    assert!(metrics.contains("batched_denies_total 3\n"), "{metrics}");
    assert!(
        metrics.contains("deny_statements_total{kind=\"single\"} 3\n"),
        "{metrics}"
    );
}

#[tokio::test]
async fn denies_are_written_at_once_below_the_threshold_and_queued_only_while_that_many_are_in_flight()
 {
    let (_database, pool) = TestDatabase::create().await;
    // Two denies in flight on their own before the next ones queue.
    let app = support::app_with(
        pool.clone(),
        Options {
            deny_batch_beyond: Some(2),
            ..Options::default()
        },
    )
    .await;
    let runs = waiting_runs(&app, 9).await;
    let held: Vec<Uuid> = runs[..4].iter().map(|(run_id, _)| *run_id).collect();
    let lock = hold_runs(&pool, &held).await;
    // Runs 0 and 1: written at once, each waiting for its lock. Runs 2 and 3, sent with two in flight: queued, and
    // taken by one writer each, which then waits for its lock. Runs 4 to 7: queued while both writers are busy.
    let at_once = deny_all(&app, &runs[..2]);
    let to_the_writers = async {
        wait_until_waiting_for_locks(&pool, 2).await;
        let third = deny(&app, runs[2].0, &runs[2].1);
        let fourth = async {
            wait_until_waiting_for_locks(&pool, 3).await;
            deny(&app, runs[3].0, &runs[3].1).await
        };
        tokio::join!(third, fourth)
    };
    let queued = async {
        wait_until_waiting_for_locks(&pool, 4).await;
        deny_all(&app, &runs[4..8]).await
    };
    let release = async {
        wait_until_waiting_for_locks(&pool, 4).await;
        wait_until_queued(&app, 4).await;
        assert_eq!(app.state.resumer.denials.written_on_their_own(), 2);
        lock.commit().await.unwrap();
    };
    let (at_once, (third, fourth), queued, ()) =
        tokio::join!(at_once, to_the_writers, queued, release);
    for answer in at_once.iter().chain([&third, &fourth]).chain(&queued) {
        assert_eq!(answer.status, StatusCode::OK, "{:?}", answer.body);
    }
    // With nothing in flight any more, the next deny is written at once again: it waits for its run's lock on its own.
    let lock = hold_runs(&pool, &[runs[8].0]).await;
    let last = deny(&app, runs[8].0, &runs[8].1);
    let release = async {
        wait_until_waiting_for_locks(&pool, 1).await;
        assert_eq!(app.state.resumer.denials.written_on_their_own(), 1);
        assert_eq!(app.state.resumer.denials.queued(), 0);
        lock.commit().await.unwrap();
    };
    let (last, ()) = tokio::join!(last, release);
    assert_eq!(last.status, StatusCode::OK, "{:?}", last.body);
    assert_eq!(app.state.resumer.denials.written_on_their_own(), 0);

    for (run_id, _) in &runs {
        assert_denied_once(&pool, *run_id).await;
    }
    let metrics = support::metrics(&app).await;
    // Single statements: runs 0 and 1 at once, 2 and 3 by their writers (too few for a batch), 8 at once.
    assert!(
        metrics.contains("deny_statements_total{kind=\"single\"} 5\n"),
        "{metrics}"
    );
    assert!(
        metrics.contains("deny_statements_total{kind=\"batch\"} 1\n"),
        "{metrics}"
    );
    assert!(metrics.contains("batched_denies_total 4\n"), "{metrics}");
}
