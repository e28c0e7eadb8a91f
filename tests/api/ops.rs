//! Ops endpoints: metrics need their scope and count what happened; probes answer without a key.

use axum::http::{Method, StatusCode};

use crate::database::TestDatabase;
use crate::support;

#[tokio::test]
async fn metrics_count_requests_by_route_and_decisions_by_decided_by() {
    let (_database, pool) = TestDatabase::create().await;
    let app = support::app(pool).await;
    let (run_id, digest) = support::owned_run(&app).await;
    let answer = app.decide(run_id, false, Some(7), &digest).await;
    assert_eq!(answer.status, StatusCode::OK);

    let scraper = app.client("prometheus", &["metrics:read"]).await;
    let metrics = app
        .call(Method::GET, "/metrics", Some(&scraper), None)
        .await;
    assert_eq!(metrics.status, StatusCode::OK);
    assert!(
        metrics
            .content_type()
            .starts_with("text/plain; version=0.0.4")
    );
    let text = String::from_utf8(metrics.bytes).unwrap();
    assert!(
        text.contains(
            "http_requests_total{route=\"/v1/runs/{id}/decision\",method=\"POST\",status=\"200\"}"
        ),
        "{text}"
    );
    assert!(
        text.contains("decisions_total{approved=\"false\",decided_by=\"run_owner\"}"),
        "{text}"
    );
    assert!(
        text.contains("db_pool_connections{state=\"idle\"}"),
        "{text}"
    );
    assert!(
        !text.contains(&run_id.to_string()),
        "a run id is no label: raw paths must not leak into metrics"
    );
}

#[tokio::test]
async fn metrics_need_a_key_with_the_metrics_scope() {
    let (_database, pool) = TestDatabase::create().await;
    let app = support::app(pool).await;
    let no_key = app.call(Method::GET, "/metrics", None, None).await;
    assert_eq!(no_key.status, StatusCode::UNAUTHORIZED);
    let reader = app.client("reader", &["runs:read"]).await;
    let wrong_scope = app.call(Method::GET, "/metrics", Some(&reader), None).await;
    assert_eq!(
        (wrong_scope.status, wrong_scope.code()),
        (StatusCode::FORBIDDEN, "missing_scope")
    );
}

#[tokio::test]
async fn readiness_says_ready_once_the_database_is_migrated() {
    let (_database, pool) = TestDatabase::create().await;
    let app = support::app(pool).await;
    let ready = app.call(Method::GET, "/readyz", None, None).await;
    assert_eq!(
        (ready.status, ready.body["status"].as_str()),
        (StatusCode::OK, Some("ready"))
    );
    let live = app.call(Method::GET, "/healthz", None, None).await;
    assert_eq!(live.status, StatusCode::OK);
}
