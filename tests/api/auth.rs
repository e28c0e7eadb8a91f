//! Who may call what: bearer keys, scopes and tenants on every /v1 route, and the routes that need no key.

use std::collections::HashMap;

use approval_resume::storage::clients;
use axum::body::Body;
use axum::http::{Method, Request, StatusCode};
use serde_json::{Value, json};
use sqlx::PgPool;
use uuid::Uuid;

use crate::database::TestDatabase;
use crate::support::{
    self, ALL_SCOPES, Answer, RowCounts, TestApp, add_client, assert_problem, owned_run,
    row_counts, run_body,
};

/// One /v1 route with a body it accepts and the scope it requires.
struct Route {
    method: Method,
    path: String,
    body: Option<Value>,
    scope: &'static str,
    /// Whether the path names a run, so that another tenant's run must look missing.
    names_a_run: bool,
}

/// Every /v1 route, aimed at run `id` (whose current turn has `digest`), each with a body it would accept.
fn routes(id: &str, digest: &str) -> Vec<Route> {
    let run = |method: Method, suffix: &str, body: Option<Value>, scope: &'static str| Route {
        method,
        path: format!("/v1/runs/{id}{suffix}"),
        body,
        scope,
        names_a_run: true,
    };
    vec![
        Route {
            method: Method::PUT,
            path: "/v1/users/8".into(),
            body: Some(
                json!({"username": "bob", "is_admin": false, "can_approve_others": false, "disabled": false}),
            ),
            scope: "users:write",
            names_a_run: false,
        },
        Route {
            method: Method::POST,
            path: "/v1/runs".into(),
            body: Some(run_body(Uuid::new_v4(), 0)),
            scope: "runs:write",
            names_a_run: false,
        },
        run(Method::GET, "", None, "runs:read"),
        run(
            Method::POST,
            "/decision",
            Some(json!({"approved": false, "decider_uid": 7, "turn_digest": digest})),
            "decisions:write",
        ),
        run(Method::GET, "/model-input", None, "runs:read"),
        run(
            Method::POST,
            "/turns",
            Some(json!({"messages": [
                {"role": "assistant", "content": null, "tool_calls": [
                    support::call("call_9", "read_page", r#"{"page": 13}"#),
                ]},
            ]})),
            "runs:write",
        ),
        run(Method::GET, "/events", None, "runs:read"),
        run(Method::POST, "/cancel", None, "runs:write"),
        run(Method::POST, "/complete", None, "runs:write"),
        Route {
            method: Method::GET,
            path: "/v1/events".into(),
            body: None,
            scope: "events:read",
            names_a_run: false,
        },
        Route {
            method: Method::POST,
            path: "/v1/webhooks".into(),
            body: Some(json!({"url": "http://127.0.0.1:9/approval"})),
            scope: "webhooks:write",
            names_a_run: false,
        },
        Route {
            method: Method::GET,
            path: "/v1/webhooks".into(),
            body: None,
            scope: "webhooks:write",
            names_a_run: false,
        },
        Route {
            method: Method::DELETE,
            path: format!("/v1/webhooks/{}", Uuid::new_v4()),
            body: None,
            scope: "webhooks:write",
            names_a_run: false,
        },
        Route {
            method: Method::POST,
            path: format!("/v1/webhooks/{}/rotate-secret", Uuid::new_v4()),
            body: Some(json!({})),
            scope: "webhooks:write",
            names_a_run: false,
        },
    ]
}

/// Sends a route's request with the given Authorization header value (none when `None`).
async fn send(app: &TestApp, route: &Route, authorization: Option<&str>) -> Answer {
    let mut request = Request::builder()
        .method(route.method.clone())
        .uri(&route.path);
    if let Some(value) = authorization {
        request = request.header("authorization", value);
    }
    let body = match &route.body {
        Some(body) => {
            request = request.header("content-type", "application/json");
            Body::from(serde_json::to_vec(body).unwrap())
        }
        None => Body::empty(),
    };
    app.send(request.body(body).unwrap()).await
}

/// A problem body without the member that differs between any two requests.
fn without_request_id(answer: &Answer) -> Value {
    let mut body = answer.body.clone();
    body.as_object_mut()
        .expect("a problem is a JSON object")
        .remove("request_id");
    body
}

/// A run of uid 7 in tenant `default`, waiting for approval; its id and digest.
async fn waiting_run(app: &TestApp) -> (Uuid, String) {
    owned_run(app).await
}

/// Asserts that every route answers 401 with a Bearer challenge for this Authorization header, writing nothing.
async fn assert_every_route_unauthorized(app: &TestApp, authorization: Option<&str>) {
    let (id, digest) = waiting_run(app).await;
    let before = row_counts(&app.pool).await;
    for route in routes(&id.to_string(), &digest) {
        let answer = send(app, &route, authorization).await;
        assert_problem(&answer, StatusCode::UNAUTHORIZED, "unauthorized");
        assert_eq!(
            answer
                .headers
                .get("www-authenticate")
                .and_then(|value| value.to_str().ok()),
            Some("Bearer"),
            "{} {} with {authorization:?}",
            route.method,
            route.path
        );
    }
    assert_eq!(row_counts(&app.pool).await, before);
    assert_eq!(
        app.get(&format!("/v1/runs/{id}")).await.body["status"],
        "waiting_for_approval"
    );
}

#[tokio::test]
async fn every_route_without_an_authorization_header_is_answered_401_with_a_bearer_challenge() {
    let (_database, pool) = TestDatabase::create().await;
    let app = support::app(pool).await;

    assert_every_route_unauthorized(&app, None).await;
}

#[tokio::test]
async fn every_route_with_an_unknown_key_is_answered_401() {
    let (_database, pool) = TestDatabase::create().await;
    let app = support::app(pool).await;
    let (unknown, _) = approval_resume::keys::generate();

    assert_every_route_unauthorized(&app, Some(&format!("Bearer {unknown}"))).await;
}

#[tokio::test]
async fn every_route_with_a_malformed_authorization_header_is_answered_401() {
    let (_database, pool) = TestDatabase::create().await;
    let app = support::app(pool).await;
    let key = app.admin_key.clone();

    for authorization in [
        "Basic dXNlcjpwYXNzd29yZA==".to_owned(),
        format!("Basic {key}"),
        key.clone(),
        "Bearer".to_owned(),
        "Bearer ".to_owned(),
    ] {
        assert_every_route_unauthorized(&app, Some(&authorization)).await;
    }
}

#[tokio::test]
async fn every_route_with_a_revoked_key_is_answered_401() {
    let (_database, pool) = TestDatabase::create().await;
    let app = support::app(pool).await;
    let key = app.client("revoked", ALL_SCOPES).await;
    let (id, _) = waiting_run(&app).await;
    let before = app
        .call(Method::GET, &format!("/v1/runs/{id}"), Some(&key), None)
        .await;
    assert_eq!(before.status, StatusCode::OK, "{:?}", before.body);

    assert!(clients::revoke(&app.pool, "revoked").await.unwrap());

    assert_every_route_unauthorized(&app, Some(&format!("Bearer {key}"))).await;
}

/// A 403 `missing_scope` whose detail names the scope the route needs.
fn assert_missing_scope(answer: &Answer, route: &Route, path: &str) {
    assert_problem(answer, StatusCode::FORBIDDEN, "missing_scope");
    assert!(
        answer.body["detail"]
            .as_str()
            .is_some_and(|detail| detail.contains(route.scope)),
        "{} {path}: {:?}",
        route.method,
        answer.body
    );
}

/// Nothing was written since `before`, and the run still waits for approval.
async fn assert_nothing_changed(app: &TestApp, before: RowCounts, id: Uuid) {
    assert_eq!(row_counts(&app.pool).await, before);
    assert_eq!(
        app.get(&format!("/v1/runs/{id}")).await.body["status"],
        "waiting_for_approval"
    );
}

#[tokio::test]
async fn every_route_refuses_a_key_without_its_scope_with_403_missing_scope() {
    let (_database, pool) = TestDatabase::create().await;
    let app = support::app(pool).await;
    let (id, digest) = waiting_run(&app).await;
    let before = row_counts(&app.pool).await;

    // One client per scope, holding every scope but that one.
    let mut keys: HashMap<&str, String> = HashMap::new();
    for scope in ALL_SCOPES {
        let others: Vec<&str> = ALL_SCOPES.iter().copied().filter(|s| s != scope).collect();
        let name = format!("without-{}", scope.replace(':', "-"));
        keys.insert(scope, app.client(&name, &others).await);
    }

    for route in routes(&id.to_string(), &digest) {
        let key = &keys[route.scope];
        let answer = send(&app, &route, Some(&format!("Bearer {key}"))).await;
        assert_missing_scope(&answer, &route, &route.path);
    }

    assert_nothing_changed(&app, before, id).await;
}

#[tokio::test]
async fn a_run_of_another_tenant_is_answered_exactly_like_a_missing_run() {
    let (_database, pool) = TestDatabase::create().await;
    let app = support::app(pool).await;
    let (id, digest) = waiting_run(&app).await;
    let stranger = add_client(&app.pool, "stranger", "elsewhere", ALL_SCOPES).await;
    // The other tenant has a uid 7 too: the decider exists there, the run does not.
    let put = app
        .call(
            Method::PUT,
            "/v1/users/7",
            Some(&stranger),
            Some(json!({"username": "seven", "is_admin": true, "can_approve_others": true, "disabled": false})),
        )
        .await;
    assert_eq!(put.status, StatusCode::OK, "{:?}", put.body);
    let before = row_counts(&app.pool).await;
    let missing = Uuid::new_v4().to_string();
    let stranger_auth = format!("Bearer {stranger}");
    let admin_auth = format!("Bearer {}", app.admin_key);

    let foreign_routes = routes(&id.to_string(), &digest);
    let missing_routes = routes(&missing, &digest);
    for (foreign, missing) in foreign_routes.iter().zip(&missing_routes) {
        if !foreign.names_a_run {
            continue;
        }
        let seen_by_stranger = send(&app, foreign, Some(&stranger_auth)).await;
        let missing_for_stranger = send(&app, missing, Some(&stranger_auth)).await;
        let missing_for_owner = send(&app, missing, Some(&admin_auth)).await;

        for answer in [&seen_by_stranger, &missing_for_stranger, &missing_for_owner] {
            assert_problem(answer, StatusCode::NOT_FOUND, "not_found");
        }
        let label = format!("{} {}", foreign.method, foreign.path);
        assert_eq!(
            without_request_id(&seen_by_stranger),
            without_request_id(&missing_for_stranger),
            "{label}"
        );
        assert_eq!(
            without_request_id(&seen_by_stranger),
            without_request_id(&missing_for_owner),
            "{label}"
        );
        assert_eq!(
            seen_by_stranger.content_type(),
            missing_for_stranger.content_type()
        );
    }

    assert_eq!(row_counts(&app.pool).await, before);
    let run = app.get(&format!("/v1/runs/{id}")).await.body;
    assert_eq!(run["status"], "waiting_for_approval");
    assert_eq!(run["turn"]["digest"], digest);
}

#[tokio::test]
async fn a_run_id_that_is_not_a_uuid_is_answered_like_a_missing_run() {
    let (_database, pool) = TestDatabase::create().await;
    let app = support::app(pool).await;
    let (_, digest) = waiting_run(&app).await;
    let before = row_counts(&app.pool).await;
    let admin_auth = format!("Bearer {}", app.admin_key);
    let missing = Uuid::new_v4().to_string();

    for not_a_uuid in ["not-a-uuid", "12", "00000000-0000-0000-0000-00000000000g"] {
        for (route, like) in routes(not_a_uuid, &digest)
            .iter()
            .zip(&routes(&missing, &digest))
        {
            if !route.names_a_run {
                continue;
            }
            let answer = send(&app, route, Some(&admin_auth)).await;
            let missing_answer = send(&app, like, Some(&admin_auth)).await;
            assert_problem(&answer, StatusCode::NOT_FOUND, "not_found");
            assert_eq!(
                without_request_id(&answer),
                without_request_id(&missing_answer),
                "{} {}",
                route.method,
                route.path
            );
        }
    }

    assert_eq!(row_counts(&app.pool).await, before);
}

#[tokio::test]
async fn the_ops_endpoints_answer_without_a_key() {
    let (_database, pool) = TestDatabase::create().await;
    let app = support::app(pool).await;

    let health = app.call(Method::GET, "/healthz", None, None).await;
    assert_eq!(health.status, StatusCode::OK, "{:?}", health.body);
    let ready = app.call(Method::GET, "/readyz", None, None).await;
    assert_eq!(ready.status, StatusCode::OK, "{:?}", ready.body);
    let openapi = app.call(Method::GET, "/openapi.yaml", None, None).await;
    assert_eq!(openapi.status, StatusCode::OK);
    assert!(
        openapi.content_type().contains("yaml"),
        "{}",
        openapi.content_type()
    );
    assert!(String::from_utf8_lossy(&openapi.bytes).starts_with("openapi:"));
}

#[tokio::test]
async fn an_unknown_route_is_a_404_problem_and_a_wrong_method_a_405_problem() {
    let (_database, pool) = TestDatabase::create().await;
    let app = support::app(pool).await;
    let (id, _) = waiting_run(&app).await;
    let before = row_counts(&app.pool).await;

    for path in [
        "/v1/nothing".to_owned(),
        "/nothing".to_owned(),
        format!("/v1/runs/{id}/nothing"),
    ] {
        for key in [None, Some(app.admin_key.as_str())] {
            let answer = app.call(Method::GET, &path, key, None).await;
            assert_problem(&answer, StatusCode::NOT_FOUND, "not_found");
        }
    }
    for (method, path) in [
        (Method::DELETE, format!("/v1/runs/{id}")),
        (Method::GET, "/v1/runs".to_owned()),
        (Method::GET, format!("/v1/runs/{id}/decision")),
        (Method::POST, "/v1/users/7".to_owned()),
        (Method::POST, "/healthz".to_owned()),
    ] {
        let answer = app
            .call(method.clone(), &path, Some(&app.admin_key), None)
            .await;
        assert_problem(
            &answer,
            StatusCode::METHOD_NOT_ALLOWED,
            "method_not_allowed",
        );
    }

    assert_eq!(row_counts(&app.pool).await, before);
}

#[tokio::test]
async fn an_anonymous_decision_needs_the_anonymous_scope() {
    let (_database, pool) = TestDatabase::create().await;
    let app = support::app(pool).await;
    let (id, digest) = waiting_run(&app).await;
    let named_only = app
        .client(
            "named-only",
            &["runs:read", "runs:write", "decisions:write"],
        )
        .await;
    let anonymous = json!({"approved": false, "decider_uid": null, "turn_digest": digest});
    let before = row_counts(&app.pool).await;

    let refused = app
        .call(
            Method::POST,
            &format!("/v1/runs/{id}/decision"),
            Some(&named_only),
            Some(anonymous.clone()),
        )
        .await;

    assert_problem(&refused, StatusCode::FORBIDDEN, "missing_scope");
    assert!(
        refused.body["detail"]
            .as_str()
            .is_some_and(|detail| detail.contains("decisions:anonymous")),
        "{:?}",
        refused.body
    );
    assert_eq!(row_counts(&app.pool).await, before);

    // The same decision from a client that holds the scope goes through, by nobody.
    let decided = app
        .post(&format!("/v1/runs/{id}/decision"), anonymous)
        .await;
    assert_eq!(decided.status, StatusCode::OK, "{:?}", decided.body);
    assert_eq!(decided.body["decision"]["decided_by"], "unknown");
}

#[tokio::test]
async fn a_decision_with_an_api_key_that_omits_decider_uid_is_unprocessable() {
    let (_database, pool) = TestDatabase::create().await;
    let app = support::app(pool).await;
    let (id, digest) = waiting_run(&app).await;
    let before = row_counts(&app.pool).await;

    for approved in [false, true] {
        let answer = app
            .post(
                &format!("/v1/runs/{id}/decision"),
                json!({"approved": approved, "turn_digest": digest}),
            )
            .await;
        assert_problem(
            &answer,
            StatusCode::UNPROCESSABLE_ENTITY,
            "decider_uid_required",
        );
    }

    assert_eq!(row_counts(&app.pool).await, before);
    assert_eq!(
        app.get(&format!("/v1/runs/{id}")).await.body["status"],
        "waiting_for_approval"
    );
}

/// Columns of the api_clients row of `name` as one text (bytea as hex and base64).
async fn client_columns(pool: &PgPool, name: &str, columns: &str) -> String {
    sqlx::query_scalar::<_, String>(sqlx::AssertSqlSafe(format!(
        "select concat_ws('|', {columns}) from api_clients where name = $1"
    )))
    .bind(name)
    .fetch_one(pool)
    .await
    .unwrap()
}

/// Every column of the row, as text.
const EVERY_COLUMN: &str =
    "id::text, name, tenant, encode(key_hash, 'hex'), encode(key_hash, 'base64'), key_prefix,
                            array_to_string(scopes, ' '), created_at::text, revoked_at::text";

/// Every substring of `text` of `len` characters (ASCII text).
fn windows(text: &str, len: usize) -> impl Iterator<Item = &str> {
    (0..=text.len().saturating_sub(len)).map(move |start| &text[start..start + len])
}

#[tokio::test]
async fn a_key_is_stored_as_its_sha256_and_in_no_column_but_the_shown_prefix() {
    let (_database, pool) = TestDatabase::create().await;
    let app = support::app(pool).await;
    let key = app.client("hashed", &["runs:read"]).await;
    // The key works end to end.
    let (id, _) = waiting_run(&app).await;
    let read = app
        .call(Method::GET, &format!("/v1/runs/{id}"), Some(&key), None)
        .await;
    assert_eq!(read.status, StatusCode::OK, "{:?}", read.body);

    let (key_hash, key_prefix): (Vec<u8>, String) =
        sqlx::query_as("select key_hash, key_prefix from api_clients where name = 'hashed'")
            .fetch_one(&app.pool)
            .await
            .unwrap();
    assert_eq!(
        hex::encode(&key_hash),
        hex::encode(<sha2::Sha256 as sha2::Digest>::digest(key.as_bytes()))
    );
    // Besides key_prefix (see the next test), no column holds 8 consecutive characters of the key, in any
    // encoding; 8 hex characters make a chance match with the hash's encodings about one in a million.
    let row = client_columns(&app.pool, "hashed", EVERY_COLUMN)
        .await
        .replace(&key_prefix, "");
    for part in windows(&key, 8) {
        assert!(
            !row.contains(part),
            "the row holds {part:?} of the key: {row}"
        );
    }
}

#[tokio::test]
async fn the_api_clients_row_holds_no_substring_of_the_key() {
    let (_database, pool) = TestDatabase::create().await;
    let app = support::app(pool).await;
    let key = app.client("hashed", &["runs:read"]).await;

    // The text columns (the hash is examined above; timestamps and ids are not derived from the key).
    let row = client_columns(
        &app.pool,
        "hashed",
        "name, tenant, key_prefix, array_to_string(scopes, ' ')",
    )
    .await;

    // "ar_" is a public constant of every key, not key material; everything after it is secret.
    let secret = key.strip_prefix(approval_resume::keys::KEY_PREFIX).unwrap();
    for part in windows(secret, 6) {
        assert!(
            !row.contains(part),
            "the row holds {part:?} of the key: {row}"
        );
    }
}

#[tokio::test]
async fn a_key_id_stored_before_the_key_id_migration_is_rewritten_from_the_hash() {
    let (_database, pool) = TestDatabase::create().await;
    let (key, id) = approval_resume::keys::generate();
    let hash = approval_resume::keys::hash(&key);
    sqlx::query(
        "insert into api_clients (name, tenant, key_hash, key_prefix, scopes) values ('old', 'default', $1, $2, '{}')",
    )
    .bind(&hash[..])
    .bind(&key[..10])
    .execute(&pool)
    .await
    .unwrap();
    sqlx::raw_sql(include_str!("../../migrations/0002_key_id_from_hash.sql"))
        .execute(&pool)
        .await
        .unwrap();
    let stored: String =
        sqlx::query_scalar("select key_prefix from api_clients where name = 'old'")
            .fetch_one(&pool)
            .await
            .unwrap();
    assert_eq!(
        stored, id,
        "the migration computes the same key id as keys::key_id"
    );
}

#[tokio::test]
async fn a_key_without_the_scope_is_refused_403_before_the_path_query_or_body_is_read() {
    let (_database, pool) = TestDatabase::create().await;
    let app = support::app(pool).await;
    let (id, digest) = waiting_run(&app).await;
    let nothing = app.client("no-scopes", &[]).await;
    let before = row_counts(&app.pool).await;

    // A body that is no JSON, one of the wrong shape, one of the wrong type, and a run id that is no UUID: a key
    // without the route's scope is told only that, before any of them is looked at.
    let broken: [(&str, &[u8]); 3] = [
        ("application/json", b"{"),
        ("application/json", br#"{"unexpected": [1, 2, 3]}"#),
        ("text/plain", b"approve it"),
    ];
    for route in routes(&id.to_string(), &digest) {
        let paths = [
            route.path.clone(),
            route.path.replace(&id.to_string(), "not-a-uuid"),
            format!("{}?format=claude", route.path),
        ];
        for path in paths {
            for (content_type, bytes) in broken {
                // A route that takes no body refuses one before anything else, as it does a declared length over
                // its limit (docs/design.md §17): it is sent none.
                let body = if matches!(route.method, Method::GET | Method::DELETE) {
                    Body::empty()
                } else {
                    Body::from(bytes)
                };
                let request = Request::builder()
                    .method(route.method.clone())
                    .uri(&path)
                    .header("authorization", format!("Bearer {nothing}"))
                    .header("content-type", content_type)
                    .body(body)
                    .unwrap();
                let answer = app.send(request).await;
                assert_missing_scope(&answer, &route, &path);
            }
        }
    }

    assert_nothing_changed(&app, before, id).await;
}

#[tokio::test]
async fn a_decision_needs_either_decision_scope_before_its_body_is_read() {
    let (_database, pool) = TestDatabase::create().await;
    let app = support::app(pool).await;
    let (id, _) = waiting_run(&app).await;
    let reader = app.client("reader", &["runs:read", "runs:write"]).await;

    let answer = app
        .call(
            Method::POST,
            &format!("/v1/runs/{id}/decision"),
            Some(&reader),
            Some(json!({"approved": "maybe"})),
        )
        .await;

    assert_problem(&answer, StatusCode::FORBIDDEN, "missing_scope");
    assert_eq!(
        answer.body["detail"],
        "this client lacks the scope decisions:write or decisions:anonymous"
    );
    support::assert_nothing_recorded(&app.pool, id).await;
}

/// The decision route looks its key up in the statement that reads the run (src/http/decision_credential.rs); a
/// request refused for its path or body must still be answered as a key checked first would be.
#[tokio::test]
async fn a_decision_refused_for_its_body_is_told_of_a_bad_key_or_a_missing_scope_first() {
    let (_database, pool) = TestDatabase::create().await;
    let app = support::app(pool).await;
    let (id, digest) = waiting_run(&app).await;
    let decision = format!("/v1/runs/{id}/decision");
    let not_a_key = "ar_this-key-was-never-issued";
    let anonymous_only = app.client("anonymous-only", &["decisions:anonymous"]).await;

    let broken_form =
        json!({"approved": true, "reason": "skip", "decider_uid": 7, "turn_digest": digest});
    for body in [json!({"approved": "maybe"}), broken_form.clone()] {
        let answer = app
            .call(Method::POST, &decision, Some(not_a_key), Some(body))
            .await;
        assert_problem(&answer, StatusCode::UNAUTHORIZED, "unauthorized");
    }
    let answer = app
        .call(
            Method::POST,
            "/v1/runs/not-a-uuid/decision",
            Some(not_a_key),
            Some(broken_form.clone()),
        )
        .await;
    assert_problem(&answer, StatusCode::UNAUTHORIZED, "unauthorized");

    // Naming a uid takes decisions:write, which is checked before the form: the key's 403, not the form's 422.
    let answer = app
        .call(
            Method::POST,
            &decision,
            Some(&anonymous_only),
            Some(broken_form),
        )
        .await;
    assert_problem(&answer, StatusCode::FORBIDDEN, "missing_scope");
    assert_eq!(
        answer.body["detail"],
        "this client lacks the scope decisions:write"
    );
    // The same key with a form that passes is refused the same way by the read that checks the key.
    let answer = app
        .call(
            Method::POST,
            &decision,
            Some(&anonymous_only),
            Some(json!({"approved": false, "decider_uid": 7, "turn_digest": digest})),
        )
        .await;
    assert_problem(&answer, StatusCode::FORBIDDEN, "missing_scope");
    support::assert_nothing_recorded(&app.pool, id).await;
}

/// Only a body that says it is small waits with its key's lookup (src/http/decision_credential.rs): a caller without
/// a key cannot make the service read a large body, or one of no declared length. The body here never arrives, so
/// an answer at all says it was not waited for.
#[tokio::test]
async fn a_decision_with_a_large_or_unsized_body_has_its_key_refused_before_the_body_is_read() {
    use approval_resume::http::decision_credential::DEFERRED_KEY_MAX_BODY;

    let (_database, pool) = TestDatabase::create().await;
    let app = support::app(pool).await;
    let (id, _) = waiting_run(&app).await;
    for declared in [Some(DEFERRED_KEY_MAX_BODY + 1), None] {
        let never = futures::stream::pending::<Result<bytes::Bytes, std::io::Error>>();
        let mut request = Request::builder()
            .method(Method::POST)
            .uri(format!("/v1/runs/{id}/decision"))
            .header("authorization", "Bearer ar_this-key-was-never-issued")
            .header("content-type", "application/json");
        if let Some(length) = declared {
            request = request.header("content-length", length);
        }
        let answer = tokio::time::timeout(
            std::time::Duration::from_secs(5),
            app.send(request.body(Body::from_stream(never)).unwrap()),
        )
        .await
        .unwrap_or_else(|_| panic!("declared {declared:?}: the body was waited for"));
        assert_problem(&answer, StatusCode::UNAUTHORIZED, "unauthorized");
    }
}

/// A decision's body is read before its key is checked only for a key this instance found live lately
/// (src/admitted_keys.rs): a stranger's key, a malformed one, or one without a decision scope is refused before the
/// body, however small the body says it is. The body here never arrives, so an answer at all says it was not
/// waited for.
#[tokio::test]
async fn a_decision_s_key_is_refused_before_its_small_body_is_read() {
    let (_database, pool) = TestDatabase::create().await;
    let app = support::app(pool).await;
    let (id, _) = waiting_run(&app).await;
    let reader_only = app.client("reader-only", &["runs:read"]).await;
    let (never_issued, _) = approval_resume::keys::generate();
    let refusals = [
        (
            never_issued.as_str(),
            StatusCode::UNAUTHORIZED,
            "unauthorized",
        ),
        (
            "ar_this-key-was-never-issued",
            StatusCode::UNAUTHORIZED,
            "unauthorized",
        ),
        (reader_only.as_str(), StatusCode::FORBIDDEN, "missing_scope"),
    ];
    for (key, status, code) in refusals {
        let never = futures::stream::pending::<Result<bytes::Bytes, std::io::Error>>();
        let request = Request::builder()
            .method(Method::POST)
            .uri(format!("/v1/runs/{id}/decision"))
            .header("authorization", format!("Bearer {key}"))
            .header("content-type", "application/json")
            .header("content-length", 100)
            .body(Body::from_stream(never))
            .unwrap();
        let answer = tokio::time::timeout(std::time::Duration::from_secs(5), app.send(request))
            .await
            .unwrap_or_else(|_| panic!("{code}: the body was waited for"));
        assert_problem(&answer, status, code);
    }
}

/// The key found live by its own lookup is then checked by the run's read alone, and still decides.
#[tokio::test]
async fn a_key_looked_up_before_its_body_still_decides_and_so_does_its_next_decision() {
    let (_database, pool) = TestDatabase::create().await;
    let app = support::app(pool).await;
    let decider = app.client("decider", &["decisions:write"]).await;
    for _ in 0..2 {
        let (id, digest) = waiting_run(&app).await;
        let answer = app
            .call(
                Method::POST,
                &format!("/v1/runs/{id}/decision"),
                Some(&decider),
                Some(json!({"approved": false, "decider_uid": 7, "turn_digest": digest})),
            )
            .await;
        assert_eq!(answer.status, StatusCode::OK, "{:?}", answer.body);
    }
}
