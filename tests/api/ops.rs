//! Ops endpoints: metrics need their scope and count what happened; probes answer without a key; a panic is a
//! problem like any other.

use approval_resume::app::layered;
use axum::Router;
use axum::body::Body;
use axum::http::{Method, Request, StatusCode};
use axum::routing::get;
use sqlx::Connection;
use sqlx::postgres::PgPoolOptions;

use crate::database::{TestDatabase, with_database};
use crate::support::{self, TestApp, assert_problem};

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

#[tokio::test]
async fn readiness_of_a_database_that_was_never_migrated_is_503_not_migrated_not_500() {
    let (_database, pool) = TestDatabase::create().await;
    let app = support::app(pool).await;
    // A database of its own, created and never migrated: no `_sqlx_migrations` table at all.
    let empty = TestDatabase::new();
    let mut admin = sqlx::PgConnection::connect(&with_database(&empty.url, "postgres"))
        .await
        .unwrap();
    let create = format!("create database \"{}\"", empty.name);
    sqlx::raw_sql(sqlx::AssertSqlSafe(create))
        .execute(&mut admin)
        .await
        .unwrap();
    admin.close().await.unwrap();
    let empty_pool = PgPoolOptions::new()
        .max_connections(1)
        .connect_lazy(&empty.url)
        .unwrap();

    let answer = app
        .with_pool(empty_pool.clone())
        .call(Method::GET, "/readyz", None, None)
        .await;

    assert_problem(&answer, StatusCode::SERVICE_UNAVAILABLE, "not_migrated");
    assert!(
        answer.headers.contains_key("retry-after"),
        "{:?}",
        answer.headers
    );
    empty_pool.close().await;
}

#[tokio::test]
async fn a_handler_that_panics_is_answered_500_with_the_request_id_like_every_other_problem() {
    let (_database, pool) = TestDatabase::create().await;
    let app = support::app(pool).await;
    async fn panics() -> &'static str {
        panic!("a test handler panics on purpose")
    }
    let panicking = Router::new().route("/panics", get(panics));
    let app = TestApp {
        router: layered(panicking, app.state.clone()),
        ..app
    };

    let generated = app.call(Method::GET, "/panics", None, None).await;
    let request = Request::builder()
        .uri("/panics")
        .header("x-request-id", "the-client-s-own-id")
        .body(Body::empty())
        .unwrap();
    let own = app.send(request).await;

    for answer in [&generated, &own] {
        assert_problem(answer, StatusCode::INTERNAL_SERVER_ERROR, "internal");
        assert_eq!(
            answer.body["detail"], "an internal error occurred; it was logged",
            "a 500 says nothing of its cause"
        );
    }
    assert_eq!(own.body["request_id"], "the-client-s-own-id");
}

/// A request with a made-up method, no key, to a route anyone may call.
async fn made_up_method(app: &TestApp, method: &str) {
    let request = Request::builder()
        .method(Method::from_bytes(method.as_bytes()).unwrap())
        .uri("/healthz")
        .body(Body::empty())
        .unwrap();
    app.send(request).await;
}

#[tokio::test]
async fn requests_with_long_made_up_methods_do_not_grow_the_metrics() {
    let (_database, pool) = TestDatabase::create().await;
    let app = support::app(pool).await;
    let scraper = app.client("prometheus", &["metrics:read"]).await;
    let scrape = || async {
        let answer = app
            .call(Method::GET, "/metrics", Some(&scraper), None)
            .await;
        String::from_utf8(answer.bytes).unwrap()
    };
    made_up_method(&app, &format!("M0{}", "X".repeat(20_000))).await;
    scrape().await;
    let before = scrape().await;
    for n in 1..=30 {
        made_up_method(&app, &format!("M{n}{}", "X".repeat(20_000))).await;
    }
    let after = scrape().await;

    assert!(
        !after.contains("XXXXXXXX"),
        "a made-up method is no label value"
    );
    assert!(
        after
            .lines()
            .any(|line| line.starts_with("http_requests_total{")
                && line.contains("method=\"other\"")
                && line.ends_with(" 31")),
        "the 31 requests are counted under method=\"other\": {after}"
    );
    // The same series, only their counts and sums changed: a few bytes, not 30 new series of 20 KB each.
    assert!(
        after.len().abs_diff(before.len()) < 200,
        "/metrics went from {} to {} bytes",
        before.len(),
        after.len()
    );
}
