//! Exactly once under contention, and no connection left inside a transaction when a client gives up.

use std::time::Duration;

use axum::http::StatusCode;
use futures::future::join_all;
use serde_json::json;
use sqlx::PgPool;
use uuid::Uuid;

use crate::database::TestDatabase;
use crate::support::{self, Options, TestApp};

async fn count(pool: &PgPool, sql: &str, run_id: Uuid) -> i64 {
    sqlx::query_scalar(sqlx::AssertSqlSafe(sql.to_owned()))
        .bind(run_id)
        .fetch_one(pool)
        .await
        .unwrap()
}

/// Connections of this test's database that sit inside a transaction without running anything.
async fn idle_in_transaction(pool: &PgPool) -> i64 {
    sqlx::query_scalar(
        "select count(*) from pg_stat_activity
         where datname = current_database() and state like 'idle in transaction%' and pid <> pg_backend_pid()",
    )
    .fetch_one(pool)
    .await
    .unwrap()
}

#[tokio::test]
async fn many_concurrent_decisions_on_one_turn_record_exactly_one() {
    let (_database, pool) = TestDatabase::create().await;
    let app = support::app(pool.clone()).await;
    // A second instance over the same database: correctness may not rest on one process's memory.
    let other_instance = app.second_instance();
    app.user(8, false, true, false).await;
    app.user(9, true, false, false).await;
    let (run_id, digest) = support::owned_run(&app).await;

    let decisions = (0..24).map(|i| {
        let target: &TestApp = if i % 2 == 0 { &app } else { &other_instance };
        let (approved, decider) = match i % 3 {
            0 => (false, Some(7)),
            1 => (false, Some(8)),
            _ => (true, Some(9)),
        };
        let digest = digest.clone();
        async move {
            let body = json!({"approved": approved, "decider_uid": decider, "turn_digest": digest});
            (
                i,
                target
                    .post(&format!("/v1/runs/{run_id}/decision"), body)
                    .await,
            )
        }
    });
    let answers = join_all(decisions).await;

    let winners: Vec<_> = answers
        .iter()
        .filter(|(_, answer)| answer.status == StatusCode::OK)
        .collect();
    assert!(!winners.is_empty(), "no decision won");
    let first = &winners[0].1;
    for (i, answer) in &answers {
        match answer.status {
            StatusCode::OK => assert_eq!(
                answer.bytes, first.bytes,
                "decision {i} got another winner's answer"
            ),
            // While a winning approval runs its tools, every other ask is told so.
            StatusCode::CONFLICT => assert!(
                ["already_decided", "resume_in_progress"].contains(&answer.code()),
                "decision {i}: {:?}",
                answer.body
            ),
            other => panic!("decision {i} answered {other}: {:?}", answer.body),
        }
    }
    // Every 200 is the winner itself or a replay of exactly its decision.
    let winning_decider = first.body["decision"]["decider_uid"].as_i64();
    for (i, answer) in &winners {
        assert_eq!(
            answer.body["decision"]["decider_uid"].as_i64(),
            winning_decider,
            "decision {i}"
        );
    }
    assert_eq!(
        count(
            &pool,
            "select count(*) from approval_events where run_id = $1",
            run_id
        )
        .await,
        1
    );
    assert_eq!(
        count(
            &pool,
            "select count(*) from tool_events where run_id = $1",
            run_id
        )
        .await,
        2
    );
    assert_eq!(
        count(
            &pool,
            "select count(*) from turn_calls where run_id = $1 and outcome is not null",
            run_id
        )
        .await,
        2
    );
}

#[tokio::test]
async fn a_client_that_gives_up_mid_decision_leaves_no_connection_in_a_transaction() {
    let (_database, pool) = TestDatabase::create().await;
    let app = support::app(pool.clone()).await;
    let (run_id, digest) = support::owned_run(&app).await;

    // Hold the run's row lock so the decision is stuck inside its transaction when the client goes away.
    let mut blocker = pool.begin().await.unwrap();
    sqlx::query("select 1 from runs where id = $1 for update")
        .bind(run_id)
        .execute(&mut *blocker)
        .await
        .unwrap();
    let request = app.decide(run_id, false, Some(7), &digest);
    assert!(
        tokio::time::timeout(Duration::from_millis(200), request)
            .await
            .is_err(),
        "the decision should still be waiting for the lock"
    );
    blocker.rollback().await.unwrap();

    // The decision finishes on its own even though nobody waits for it any more.
    let mut recorded = 0;
    for _ in 0..50 {
        recorded = count(
            &pool,
            "select count(*) from approval_events where run_id = $1",
            run_id,
        )
        .await;
        if recorded == 1 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert_eq!(recorded, 1, "the abandoned decision did not complete");
    assert_eq!(
        count(
            &pool,
            "select count(*) from tool_events where run_id = $1",
            run_id
        )
        .await,
        2
    );
    tokio::time::sleep(Duration::from_millis(100)).await;
    assert_eq!(idle_in_transaction(&pool).await, 0);

    // Asking again gets the stored outcome.
    let again = app.decide(run_id, false, Some(7), &digest).await;
    assert_eq!(again.status, StatusCode::OK, "{:?}", again.body);
}

#[tokio::test]
async fn requests_cancelled_at_random_points_leave_every_run_whole_and_no_transaction_open() {
    let (_database, pool) = TestDatabase::create().await;
    let app = support::app(pool.clone()).await;
    app.user(7, false, false, false).await;
    let mut runs = Vec::new();
    for _ in 0..30 {
        let id = Uuid::new_v4();
        let run = app.register(support::run_body(id, 7)).await;
        runs.push((id, run["turn"]["digest"].as_str().unwrap().to_owned()));
    }
    // Give up on each decision after a different short time, from before BEGIN to after COMMIT.
    let attempts = runs.iter().enumerate().map(|(i, (id, digest))| {
        let app = &app;
        async move {
            let patience = Duration::from_micros(200 * i as u64);
            let _ = tokio::time::timeout(patience, app.decide(*id, false, Some(7), digest)).await;
        }
    });
    join_all(attempts).await;
    tokio::time::sleep(Duration::from_millis(500)).await;

    assert_eq!(idle_in_transaction(&pool).await, 0);
    for (id, _) in &runs {
        let events = count(
            &pool,
            "select count(*) from approval_events where run_id = $1",
            *id,
        )
        .await;
        let tool_events = count(
            &pool,
            "select count(*) from tool_events where run_id = $1",
            *id,
        )
        .await;
        let status: String = sqlx::query_scalar("select status from runs where id = $1")
            .bind(id)
            .fetch_one(&pool)
            .await
            .unwrap();
        let whole = (events, tool_events, status.as_str());
        assert!(
            whole == (1, 2, "resumed") || whole == (0, 0, "waiting_for_approval"),
            "run {id} is half-written: {whole:?}"
        );
    }
    // The pool still works for everyone after all that.
    let (run_id, digest) = (runs[0].0, runs[0].1.clone());
    let answer = app.decide(run_id, false, Some(7), &digest).await;
    assert_eq!(answer.status, StatusCode::OK, "{:?}", answer.body);
}

#[tokio::test]
async fn registrations_cancelled_at_random_points_leave_every_run_whole_and_no_transaction_open() {
    let (_database, pool) = TestDatabase::create().await;
    let app = support::app(pool.clone()).await;
    app.user(7, false, false, false).await;
    let ids: Vec<Uuid> = (0..40).map(|_| Uuid::new_v4()).collect();
    // Give up on each registration after a different short time, from before BEGIN to after COMMIT.
    let attempts = ids.iter().enumerate().map(|(i, id)| {
        let app = &app;
        async move {
            let patience = Duration::from_micros(150 * i as u64);
            let body = support::run_body(*id, 7);
            let _ = tokio::time::timeout(patience, app.post("/v1/runs", body)).await;
        }
    });
    join_all(attempts).await;
    tokio::time::sleep(Duration::from_millis(500)).await;

    assert_eq!(idle_in_transaction(&pool).await, 0);
    for id in &ids {
        let runs = count(&pool, "select count(*) from runs where id = $1", *id).await;
        let calls = count(
            &pool,
            "select count(*) from turn_calls where run_id = $1",
            *id,
        )
        .await;
        assert!(
            (runs, calls) == (1, 2) || (runs, calls) == (0, 0),
            "run {id} is half-written: {runs} run rows, {calls} calls"
        );
    }
    // And the pool still serves everyone.
    let id = Uuid::new_v4();
    let again = app.post("/v1/runs", support::run_body(id, 7)).await;
    assert_eq!(again.status, StatusCode::CREATED, "{:?}", again.body);
}

#[tokio::test]
async fn a_request_over_the_timeout_is_answered_503_and_its_decision_still_completes() {
    let (_database, pool) = TestDatabase::create().await;
    let options = Options {
        request_timeout: Duration::from_millis(150),
        ..Options::default()
    };
    let app = support::app_with(pool.clone(), options).await;
    let (run_id, digest) = support::owned_run(&app).await;

    let mut blocker = pool.begin().await.unwrap();
    sqlx::query("select 1 from runs where id = $1 for update")
        .bind(run_id)
        .execute(&mut *blocker)
        .await
        .unwrap();
    let answer = app.decide(run_id, false, Some(7), &digest).await;
    assert_eq!(answer.status, StatusCode::SERVICE_UNAVAILABLE);
    assert_eq!(answer.code(), "timeout");
    assert_eq!(answer.content_type(), "application/problem+json");
    blocker.rollback().await.unwrap();

    let mut replay = app.decide(run_id, false, Some(7), &digest).await;
    for _ in 0..20 {
        if replay.status == StatusCode::OK {
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
        replay = app.decide(run_id, false, Some(7), &digest).await;
    }
    assert_eq!(replay.status, StatusCode::OK, "{:?}", replay.body);
    assert_eq!(
        count(
            &pool,
            "select count(*) from approval_events where run_id = $1",
            run_id
        )
        .await,
        1
    );
    assert_eq!(idle_in_transaction(&pool).await, 0);
}

#[tokio::test]
async fn backends_terminated_under_load_give_503s_never_500s_and_no_half_written_run() {
    let (_database, pool) = TestDatabase::create().await;
    let app = support::app(pool.clone()).await;
    app.user(7, false, false, false).await;
    let mut runs = Vec::new();
    for _ in 0..40 {
        let id = Uuid::new_v4();
        let run = app.register(support::run_body(id, 7)).await;
        runs.push((id, run["turn"]["digest"].as_str().unwrap().to_owned()));
    }
    let killer_pool = sqlx::postgres::PgPoolOptions::new()
        .max_connections(1)
        .connect_with((*pool.connect_options()).clone())
        .await
        .unwrap();
    let killer_pid: i32 = sqlx::query_scalar("select pg_backend_pid()")
        .fetch_one(&killer_pool)
        .await
        .unwrap();
    let killing = tokio::spawn(async move {
        for _ in 0..20 {
            let _ = sqlx::query(
                "select pg_terminate_backend(pid) from pg_stat_activity
                 where datname = current_database() and pid <> $1 and backend_type = 'client backend'",
            )
            .bind(killer_pid)
            .execute(&killer_pool)
            .await;
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
    });
    let answers = join_all(
        runs.iter()
            .map(|(id, digest)| app.decide(*id, false, Some(7), digest)),
    )
    .await;
    killing.await.unwrap();

    for ((id, _), answer) in runs.iter().zip(&answers) {
        assert!(
            answer.status == StatusCode::OK || answer.status == StatusCode::SERVICE_UNAVAILABLE,
            "run {id}: {} {:?}",
            answer.status,
            answer.body
        );
        if answer.status == StatusCode::SERVICE_UNAVAILABLE {
            assert_eq!(answer.code(), "database_unavailable");
            assert!(answer.headers.contains_key("retry-after"));
        }
    }
    let unavailable = answers
        .iter()
        .filter(|a| a.status == StatusCode::SERVICE_UNAVAILABLE)
        .count();
    eprintln!(
        "{unavailable} of {} decisions met a terminated backend",
        runs.len()
    );
    // Whatever the database went through, every run is whole, and every 200 is in the database.
    let mut recovered = 0;
    for ((id, digest), answer) in runs.iter().zip(&answers) {
        let events = count(
            &pool,
            "select count(*) from approval_events where run_id = $1",
            *id,
        )
        .await;
        let tool_events = count(
            &pool,
            "select count(*) from tool_events where run_id = $1",
            *id,
        )
        .await;
        assert!(
            matches!((events, tool_events), (1, 2) | (0, 0)),
            "run {id} is half-written"
        );
        if answer.status == StatusCode::OK {
            assert_eq!(events, 1, "run {id} was answered 200 but is not decided");
        }
        // Once the database is back, the pool recovers without a restart.
        let retry = app.decide(*id, false, Some(7), digest).await;
        assert_eq!(
            retry.status,
            StatusCode::OK,
            "run {id} after recovery: {:?}",
            retry.body
        );
        recovered += 1;
    }
    assert_eq!(recovered, runs.len());
}

#[tokio::test]
async fn with_every_connection_taken_a_request_waits_the_acquire_timeout_then_gets_503() {
    let (_database, pool) = TestDatabase::create().await;
    let app = support::app(pool.clone()).await;
    let (run_id, digest) = support::owned_run(&app).await;
    let small_pool = sqlx::postgres::PgPoolOptions::new()
        .max_connections(2)
        .acquire_timeout(Duration::from_millis(300))
        .connect_with((*pool.connect_options()).clone())
        .await
        .unwrap();
    let starved = app.with_pool(small_pool.clone());
    let held = (
        small_pool.acquire().await.unwrap(),
        small_pool.acquire().await.unwrap(),
    );

    let started = std::time::Instant::now();
    let answer = starved.decide(run_id, false, Some(7), &digest).await;
    let waited = started.elapsed();
    assert_eq!(
        answer.status,
        StatusCode::SERVICE_UNAVAILABLE,
        "{:?}",
        answer.body
    );
    assert_eq!(answer.code(), "database_unavailable");
    assert!(answer.headers.contains_key("retry-after"));
    assert!(
        waited >= Duration::from_millis(300),
        "answered before the acquire timeout: {waited:?}"
    );
    assert!(
        waited < Duration::from_secs(5),
        "the wait is bounded: {waited:?}"
    );

    drop(held);
    let answer = starved.decide(run_id, false, Some(7), &digest).await;
    assert_eq!(answer.status, StatusCode::OK, "{:?}", answer.body);
    assert_eq!(idle_in_transaction(&pool).await, 0);
}

/// A decision made from a read that another decision's commit overtook (src/storage/run_snapshot.rs): its write
/// records nothing, and it is answered under the run's lock from what the winner stored, a conflict for another
/// decision and the winner's outcome for the same one, while the winner's rows stay the only ones.
#[tokio::test]
async fn a_decision_whose_read_another_commit_overtook_records_nothing_and_is_answered_from_the_winner()
 {
    use approval_resume::domain::verdicts::DecisionForm;
    use approval_resume::resume::{self, Actor, DecisionRequest, ResumeError};
    use approval_resume::storage::run_snapshot::Reader;

    let (_database, pool) = TestDatabase::create().await;
    let app = support::app(pool.clone()).await;
    app.user(8, false, true, false).await;
    let (run_id, digest) = support::owned_run(&app).await;
    let resumer = &app.state.resumer;
    let deny_by = |uid: i64| DecisionRequest {
        run_id,
        decider_uid: Some(uid),
        turn_digest: digest.clone(),
        form: DecisionForm::WholeTurn {
            approved: false,
            reason: None,
        },
        remember: None,
    };
    let actor = Actor {
        tenant: "default".to_owned(),
        client_name: "admin".to_owned(),
        may_decide_anonymously: false,
        token_kid: None,
    };
    // Both read while the turn still waits.
    let read = || resume::read(resumer, Reader::Tenant("default"), run_id, Some(7));
    let stale_same = read().await.unwrap();
    let stale_other = resume::read(resumer, Reader::Tenant("default"), run_id, Some(8))
        .await
        .unwrap();

    let winner = app.decide(run_id, false, Some(7), &digest).await;
    assert_eq!(winner.status, StatusCode::OK, "{:?}", winner.body);

    let refused = resume::decide(resumer, &actor, &deny_by(8), stale_other)
        .await
        .expect_err("another decision on a decided turn is a conflict");
    assert!(
        matches!(refused, ResumeError::AlreadyDecided),
        "{refused:?}"
    );
    let replayed = resume::decide(resumer, &actor, &deny_by(7), stale_same)
        .await
        .expect("the same decision again gets the winner's outcome");
    let stored: chrono::DateTime<chrono::Utc> =
        sqlx::query_scalar("select decided_at from approval_events where run_id = $1")
            .bind(run_id)
            .fetch_one(&pool)
            .await
            .unwrap();
    assert_eq!(
        replayed.decision.decided_at, stored,
        "the winner's decision, not a new one"
    );
    assert_rows_of_run(
        &pool,
        run_id,
        &[("approval_events", 1), ("tool_events", 2), ("events", 2)],
    )
    .await;
}

/// Each table holds the given number of rows of the run.
async fn assert_rows_of_run(pool: &PgPool, run_id: Uuid, expected: &[(&str, i64)]) {
    for (table, rows) in expected {
        let sql = format!("select count(*) from {table} where run_id = $1");
        assert_eq!(count(pool, &sql, run_id).await, *rows, "{table}");
    }
}

/// The same, when the change that overtakes the read commits while the decision's write waits for the run's row
/// lock: the write re-checks the run as that commit left it (Postgres's re-check of an `update` after a lock wait),
/// records nothing, and the decision is answered under the lock. The read takes no lock, so a decision still
/// pending while another transaction holds the row has reached its write.
#[tokio::test]
async fn a_decision_whose_write_waited_for_a_change_that_then_committed_records_nothing() {
    use approval_resume::domain::verdicts::DecisionForm;
    use approval_resume::resume::{self, Actor, DecisionRequest, ResumeError};
    use approval_resume::storage::run_snapshot::Reader;

    let (_database, pool) = TestDatabase::create().await;
    let app = support::app(pool.clone()).await;
    let (run_id, digest) = support::owned_run(&app).await;
    let resumer = app.state.resumer.clone();
    let snapshot = resume::read(&resumer, Reader::Tenant("default"), run_id, Some(7))
        .await
        .unwrap();

    let mut holder = pool.begin().await.unwrap();
    sqlx::query("select 1 from runs where id = $1 for update")
        .bind(run_id)
        .execute(&mut *holder)
        .await
        .unwrap();
    let deciding = tokio::spawn(async move {
        let actor = Actor {
            tenant: "default".to_owned(),
            client_name: "admin".to_owned(),
            may_decide_anonymously: false,
            token_kid: None,
        };
        let request = DecisionRequest {
            run_id,
            decider_uid: Some(7),
            turn_digest: digest,
            form: DecisionForm::WholeTurn {
                approved: false,
                reason: None,
            },
            remember: None,
        };
        resume::decide(&resumer, &actor, &request, snapshot).await
    });
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert!(
        !deciding.is_finished(),
        "the decision's write did not wait for the run's row lock"
    );
    // The run is cancelled meanwhile, as POST /cancel does.
    sqlx::query("update runs set status = 'cancelled', updated_at = now() where id = $1")
        .bind(run_id)
        .execute(&mut *holder)
        .await
        .unwrap();
    holder.commit().await.unwrap();

    let answer = deciding.await.unwrap();
    assert!(
        matches!(answer, Err(ResumeError::NotAwaitingApproval)),
        "{answer:?}"
    );
    assert_rows_of_run(&pool, run_id, &[("approval_events", 0), ("tool_events", 0)]).await;
    assert_eq!(
        count(
            &pool,
            "select count(*) from turn_calls where run_id = $1 and outcome is not null",
            run_id
        )
        .await,
        0
    );
}
