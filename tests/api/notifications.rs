//! Resume notifications on the Postgres channel, and retention purges.

use std::time::Duration;

use approval_resume::storage::Database;
use approval_resume::storage::retention::{self, PurgeReport};
use approval_resume::storage::runs::RESUMED_CHANNEL;
use axum::http::StatusCode;
use serde_json::Value;
use sqlx::postgres::PgListener;

use crate::database::TestDatabase;
use crate::support;

#[tokio::test]
async fn a_resume_is_announced_on_the_channel_with_the_run_id() {
    let (_database, pool) = TestDatabase::create().await;
    let app = support::app(pool.clone()).await;
    let mut listener = PgListener::connect_with(&pool).await.unwrap();
    listener.listen(RESUMED_CHANNEL).await.unwrap();
    let (run_id, digest) = support::owned_run(&app).await;
    assert_eq!(
        app.decide(run_id, false, Some(7), &digest).await.status,
        StatusCode::OK
    );

    let notification = tokio::time::timeout(Duration::from_secs(5), listener.recv())
        .await
        .unwrap()
        .unwrap();
    let payload: Value = serde_json::from_str(notification.payload()).unwrap();
    assert_eq!(payload["run_id"], run_id.to_string());
    assert_eq!(payload["tenant"], "default");
    assert_eq!(payload["turn_index"], 0);
    assert_eq!(payload["approved"], false);
}

#[tokio::test]
async fn a_refused_decision_announces_nothing() {
    let (_database, pool) = TestDatabase::create().await;
    let app = support::app(pool.clone()).await;
    let mut listener = PgListener::connect_with(&pool).await.unwrap();
    listener.listen(RESUMED_CHANNEL).await.unwrap();
    let (run_id, _) = support::owned_run(&app).await;
    let stale = app.decide(run_id, false, Some(7), &"0".repeat(64)).await;
    assert_eq!(stale.status, StatusCode::CONFLICT);
    let heard = tokio::time::timeout(Duration::from_millis(300), listener.recv()).await;
    assert!(heard.is_err(), "something was announced: {heard:?}");
}

#[tokio::test]
async fn a_purge_clears_old_payloads_and_deletes_old_finished_runs_only() {
    let (_database, pool) = TestDatabase::create().await;
    let app = support::app(pool.clone()).await;
    let (old_finished, digest) = full_privacy_run(&app).await;
    app.decide(old_finished, false, Some(7), &digest).await;
    app.post(
        &format!("/v1/runs/{old_finished}/complete"),
        serde_json::json!({}),
    )
    .await;
    let (recent, recent_digest) = full_privacy_run(&app).await;
    app.decide(recent, false, Some(7), &recent_digest).await;
    let (old_waiting, _) = support::owned_run(&app).await;
    sqlx::query("update runs set updated_at = now() - interval '40 days' where id = any($1)")
        .bind(vec![old_finished, old_waiting])
        .execute(&pool)
        .await
        .unwrap();
    sqlx::query(
        "update tool_events set recorded_at = now() - interval '40 days' where run_id = $1",
    )
    .bind(old_finished)
    .execute(&pool)
    .await
    .unwrap();

    let report = retention::purge(&Database::direct(pool.clone()), 30)
        .await
        .unwrap();
    assert_eq!(
        report,
        PurgeReport {
            tool_event_payloads_cleared: 2,
            finished_runs_deleted: 1
        }
    );
    let remaining: Vec<uuid::Uuid> = sqlx::query_scalar("select id from runs order by created_at")
        .fetch_all(&pool)
        .await
        .unwrap();
    assert_eq!(
        remaining,
        vec![recent, old_waiting],
        "a waiting run is never purged, however old"
    );
    let kept_payloads: i64 = sqlx::query_scalar(
        "select count(*) from tool_events where run_id = $1 and arguments is not null",
    )
    .bind(recent)
    .fetch_one(&pool)
    .await
    .unwrap();
    assert_eq!(kept_payloads, 2, "recent payloads stay");
    assert_eq!(
        retention::purge(&Database::direct(pool.clone()), 30)
            .await
            .unwrap(),
        PurgeReport::default(),
        "a second purge finds nothing"
    );
}

/// A run of owner 7 whose tool events keep their payloads, so there is something to purge.
async fn full_privacy_run(app: &support::TestApp) -> (uuid::Uuid, String) {
    app.user(7, false, false, false).await;
    let id = uuid::Uuid::new_v4();
    let mut body = support::run_body(id, 7);
    body["privacy_level"] = "full".into();
    let run = app.register(body).await;
    (id, run["turn"]["digest"].as_str().unwrap().to_owned())
}
