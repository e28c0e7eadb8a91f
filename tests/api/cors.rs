//! CORS (docs/design.md §13): the token routes answer preflights for the origins a live client allows, with
//! `Authorization` and `Content-Type` and without credentials; other origins and other routes get no CORS headers.

use approval_resume::storage::clients;
use axum::body::Body;
use axum::http::{Method, Request, StatusCode};
use uuid::Uuid;

use crate::database::TestDatabase;
use crate::support::{self, Answer, TestApp};

const CHAT: &str = "https://chat.example.com";

async fn preflight(app: &TestApp, path: &str, origin: &str) -> Answer {
    let request = Request::builder()
        .method(Method::OPTIONS)
        .uri(path)
        .header("origin", origin)
        .header("access-control-request-method", "POST")
        .header(
            "access-control-request-headers",
            "authorization,content-type",
        )
        .body(Body::empty())
        .unwrap();
    app.send(request).await
}

async fn app_allowing_chat(pool: sqlx::PgPool) -> TestApp {
    let app = support::app(pool).await;
    app.client("chat", &["runs:read"]).await;
    assert!(
        clients::set_origins(&app.pool, "chat", &[CHAT.to_owned()])
            .await
            .unwrap()
    );
    app
}

#[tokio::test]
async fn a_token_route_answers_the_preflight_of_an_allowed_origin_without_credentials() {
    let (_database, pool) = TestDatabase::create().await;
    let app = app_allowing_chat(pool).await;
    let path = format!("/v1/runs/{}/decision", Uuid::new_v4());
    let answer = preflight(&app, &path, CHAT).await;
    assert_eq!(answer.status, StatusCode::OK);
    assert_eq!(answer.headers["access-control-allow-origin"], CHAT);
    let allowed = answer.headers["access-control-allow-headers"]
        .to_str()
        .unwrap()
        .to_ascii_lowercase();
    assert!(
        allowed.contains("authorization") && allowed.contains("content-type"),
        "{allowed}"
    );
    assert!(
        answer
            .headers
            .get("access-control-allow-credentials")
            .is_none()
    );
}

#[tokio::test]
async fn an_origin_no_live_client_allows_gets_no_cors_headers() {
    let (_database, pool) = TestDatabase::create().await;
    let app = app_allowing_chat(pool).await;
    let path = format!("/v1/runs/{}/decision", Uuid::new_v4());
    let stranger = preflight(&app, &path, "https://evil.example.net").await;
    assert!(
        stranger
            .headers
            .get("access-control-allow-origin")
            .is_none()
    );
    assert!(clients::revoke(&app.pool, "chat").await.unwrap());
    let revoked = preflight(&app, &path, CHAT).await;
    assert!(revoked.headers.get("access-control-allow-origin").is_none());
}

#[tokio::test]
async fn a_route_a_token_may_not_use_answers_no_preflight_even_for_an_allowed_origin() {
    let (_database, pool) = TestDatabase::create().await;
    let app = app_allowing_chat(pool).await;
    for path in ["/v1/approvals", "/v1/runs", "/v1/users/7"] {
        let answer = preflight(&app, path, CHAT).await;
        assert!(
            answer.headers.get("access-control-allow-origin").is_none(),
            "{path}: {:?}",
            answer.headers
        );
    }
}

#[tokio::test]
async fn an_answer_to_an_allowed_origin_names_it_and_exposes_the_request_id() {
    let (_database, pool) = TestDatabase::create().await;
    let app = app_allowing_chat(pool).await;
    let request = Request::builder()
        .uri(format!("/v1/runs/{}", Uuid::new_v4()))
        .header("origin", CHAT)
        .header("authorization", format!("Bearer {}", app.admin_key))
        .body(Body::empty())
        .unwrap();
    let answer = app.send(request).await;
    assert_eq!(answer.status, StatusCode::NOT_FOUND);
    assert_eq!(answer.headers["access-control-allow-origin"], CHAT);
    let exposed = answer.headers["access-control-expose-headers"]
        .to_str()
        .unwrap();
    assert!(exposed.contains("x-request-id"), "{exposed}");
}
