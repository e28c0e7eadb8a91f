//! Retention: purges of payloads, finished runs and old events.

use std::time::Duration;

use approval_resume::storage::Database;
use approval_resume::storage::outbox;
use approval_resume::storage::retention::{self, PurgeReport};

use crate::database::TestDatabase;
use crate::support;

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

#[tokio::test]
async fn old_events_are_purged_and_a_run_takes_its_events_with_it() {
    let (_database, pool) = TestDatabase::create().await;
    let app = support::app(pool.clone()).await;
    let (old, digest) = support::owned_run(&app).await;
    app.decide(old, false, Some(7), &digest).await;
    let (recent, _) = support::owned_run(&app).await;
    sqlx::query("update events set created_at = now() - interval '8 days' where run_id = $1")
        .bind(old)
        .execute(&pool)
        .await
        .unwrap();

    let deleted = outbox::purge_older_than(
        &Database::direct(pool.clone()),
        Duration::from_secs(7 * 24 * 3600),
    )
    .await
    .unwrap();
    assert_eq!(deleted, 2, "the old run's run.waiting and run.resumed");
    let left: Vec<uuid::Uuid> = sqlx::query_scalar("select run_id from events")
        .fetch_all(&pool)
        .await
        .unwrap();
    assert_eq!(left, vec![recent]);

    // The recent run finishes, and the purge of finished runs deletes it long after: its events go with it,
    // however young they are.
    app.post(&format!("/v1/runs/{recent}/cancel"), serde_json::json!({}))
        .await;
    sqlx::query("update runs set updated_at = now() - interval '40 days' where id = $1")
        .bind(recent)
        .execute(&pool)
        .await
        .unwrap();
    let report = retention::purge(&Database::direct(pool.clone()), 30)
        .await
        .unwrap();
    assert_eq!(report.finished_runs_deleted, 1);
    let count: i64 = sqlx::query_scalar("select count(*) from events")
        .fetch_one(&pool)
        .await
        .unwrap();
    assert_eq!(count, 0, "events are deleted with their run");
}
