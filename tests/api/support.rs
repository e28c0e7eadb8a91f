//! Everything the API tests share: an app over a test database, clients with keys, requests, and fixtures.

use std::sync::Arc;
use std::time::Duration;

use approval_resume::app::{AppState, Limits, router};
use approval_resume::executor::Executors;
use approval_resume::keys;
use approval_resume::resume::Resumer;
use approval_resume::storage::clients;
use approval_resume::tokens::PrivacyLevel;
use axum::Router;
use axum::body::Body;
use axum::http::{HeaderMap, Method, Request, StatusCode};
use http_body_util::BodyExt;
use serde_json::{Value, json};
use sqlx::PgPool;
use tower::ServiceExt;
use uuid::Uuid;

/// Every scope, for a client that may do anything in its tenant.
pub const ALL_SCOPES: &[&str] = &[
    "runs:write",
    "runs:read",
    "users:write",
    "decisions:write",
    "decisions:anonymous",
    "approvals:read",
];

pub struct TestApp {
    pub router: Router,
    pub pool: PgPool,
    pub state: AppState,
    /// A key with every scope in tenant `default`.
    pub admin_key: String,
}

pub struct Options {
    pub privacy_floor: PrivacyLevel,
    pub executors: Executors,
    pub max_body_bytes: usize,
    pub request_timeout: Duration,
}

impl Default for Options {
    fn default() -> Self {
        Options {
            privacy_floor: PrivacyLevel::Full,
            executors: Executors::none(),
            max_body_bytes: 1024 * 1024,
            request_timeout: Duration::from_secs(30),
        }
    }
}

pub async fn app(pool: PgPool) -> TestApp {
    app_with(pool, Options::default()).await
}

pub async fn app_with(pool: PgPool, options: Options) -> TestApp {
    let resumer = Arc::new(Resumer {
        pool: pool.clone(),
        executors: options.executors,
        privacy_floor: options.privacy_floor,
        instance_id: Uuid::new_v4(),
    });
    let state = AppState {
        pool: pool.clone(),
        resumer,
        limits: Limits {
            max_body_bytes: options.max_body_bytes,
            request_timeout: options.request_timeout,
        },
    };
    let admin_key = add_client(&pool, "admin", "default", ALL_SCOPES).await;
    TestApp {
        router: router(state.clone()),
        pool,
        state,
        admin_key,
    }
}

/// Creates a client as `approval-resume clients add` does and returns its key.
pub async fn add_client(pool: &PgPool, name: &str, tenant: &str, scopes: &[&str]) -> String {
    let (key, shown) = keys::generate();
    let scopes: Vec<String> = scopes.iter().map(|scope| scope.to_string()).collect();
    assert!(
        clients::insert(pool, name, tenant, &keys::hash(&key), &shown, &scopes)
            .await
            .unwrap()
    );
    key
}

/// An answer, with its body both as bytes and, when it is JSON, parsed.
#[derive(Debug)]
pub struct Answer {
    pub status: StatusCode,
    pub headers: HeaderMap,
    pub bytes: Vec<u8>,
    pub body: Value,
}

impl Answer {
    /// The problem `code` of an error answer.
    pub fn code(&self) -> &str {
        self.body["code"].as_str().unwrap_or("")
    }

    pub fn content_type(&self) -> &str {
        self.headers
            .get("content-type")
            .and_then(|v| v.to_str().ok())
            .unwrap_or("")
    }
}

impl TestApp {
    pub async fn client(&self, name: &str, scopes: &[&str]) -> String {
        add_client(&self.pool, name, "default", scopes).await
    }

    /// Sends a request with an optional bearer key and JSON body.
    pub async fn call(
        &self,
        method: Method,
        path: &str,
        key: Option<&str>,
        body: Option<Value>,
    ) -> Answer {
        let mut request = Request::builder().method(method).uri(path);
        if let Some(key) = key {
            request = request.header("authorization", format!("Bearer {key}"));
        }
        let body = match body {
            Some(body) => {
                request = request.header("content-type", "application/json");
                Body::from(serde_json::to_vec(&body).unwrap())
            }
            None => Body::empty(),
        };
        self.send(request.body(body).unwrap()).await
    }

    /// Sends a request as built by the test.
    pub async fn send(&self, request: Request<Body>) -> Answer {
        let response = self.router.clone().oneshot(request).await.unwrap();
        let status = response.status();
        let headers = response.headers().clone();
        let bytes = response
            .into_body()
            .collect()
            .await
            .unwrap()
            .to_bytes()
            .to_vec();
        let body = serde_json::from_slice(&bytes).unwrap_or(Value::Null);
        Answer {
            status,
            headers,
            bytes,
            body,
        }
    }

    pub async fn get(&self, path: &str) -> Answer {
        self.call(Method::GET, path, Some(&self.admin_key), None)
            .await
    }

    pub async fn post(&self, path: &str, body: Value) -> Answer {
        self.call(Method::POST, path, Some(&self.admin_key), Some(body))
            .await
    }

    /// Creates or replaces a backend user in tenant `default`.
    pub async fn user(&self, uid: i64, is_admin: bool, can_approve_others: bool, disabled: bool) {
        let body = json!({
            "username": format!("user{uid}"),
            "is_admin": is_admin,
            "can_approve_others": can_approve_others,
            "disabled": disabled,
        });
        let answer = self
            .call(
                Method::PUT,
                &format!("/v1/users/{uid}"),
                Some(&self.admin_key),
                Some(body),
            )
            .await;
        assert_eq!(answer.status, StatusCode::OK, "{:?}", answer.body);
    }

    /// Registers a run and returns its answer, asserting it was created.
    pub async fn register(&self, body: Value) -> Value {
        let answer = self.post("/v1/runs", body).await;
        assert_eq!(answer.status, StatusCode::CREATED, "{:?}", answer.body);
        answer.body
    }

    /// Posts a decision for the run's current turn.
    pub async fn decide(
        &self,
        run_id: Uuid,
        approved: bool,
        decider_uid: Option<i64>,
        digest: &str,
    ) -> Answer {
        self.post(
            &format!("/v1/runs/{run_id}/decision"),
            json!({"approved": approved, "decider_uid": decider_uid, "turn_digest": digest}),
        )
        .await
    }
}

/// A tool call as the model writes it.
pub fn call(id: &str, name: &str, arguments: &str) -> Value {
    json!({"id": id, "type": "function", "function": {"name": name, "arguments": arguments}})
}

/// A transcript: a system prompt, a user message, and an assistant turn with these calls.
pub fn transcript(calls: Vec<Value>) -> Vec<Value> {
    vec![
        json!({"role": "system", "content": "You edit pages."}),
        json!({"role": "user", "content": "Set the meta description."}),
        json!({"role": "assistant", "content": null, "tool_calls": calls}),
    ]
}

/// A registration body for `owner_uid` with one write call `update_page_metadata` and one read call `read_page`.
pub fn run_body(id: Uuid, owner_uid: i64) -> Value {
    json!({
        "id": id,
        "owner_uid": owner_uid,
        "messages": transcript(vec![
            call("call_1", "update_page_metadata", r#"{"page": 12, "description": "A page"}"#),
            call("call_2", "read_page", r#"{"page": 12}"#),
        ]),
        "tools": [
            {"name": "update_page_metadata", "effect": "write"},
            {"name": "read_page", "effect": "read"},
        ],
    })
}

/// Registers the owner (uid 7) and a run of theirs; returns the run id and its turn digest.
pub async fn owned_run(app: &TestApp) -> (Uuid, String) {
    app.user(7, false, false, false).await;
    let id = Uuid::new_v4();
    let run = app.register(run_body(id, 7)).await;
    (id, run["turn"]["digest"].as_str().unwrap().to_owned())
}
