//! Everything the API tests share: an app over a test database, clients with keys, requests, and fixtures.

use std::time::Duration;

use approval_resume::app::router;
use approval_resume::application::{Application, Wiring};
use approval_resume::approval_links::LinkSettings;
use approval_resume::delivery::EventsHub;
use approval_resume::delivery::webhooks::subscription::Policy as WebhookPolicy;
use approval_resume::domain::limits::WorkLimits;
use approval_resume::executor::Executors;
use approval_resume::keys;
use approval_resume::state::{AppState, Limits};
use approval_resume::storage::{Database, clients};
use approval_resume::vocabulary::PrivacyLevel;
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
    "events:read",
    "webhooks:write",
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
    pub body_read_timeout: Duration,
    /// `DENY_BATCHES`: `Some(n)` writes denies together beyond `n` in flight (`Some(0)`: every deny queues), `None`
    /// (the service's default) each on its own.
    pub deny_batch_beyond: Option<usize>,
    /// `WORKER_CLAIM_TTL_SECS`: the service's default, 300 s; tests that see a claim lapse move its `until` in SQL.
    pub claim_ttl: Duration,
    /// `MAX_BODY_BYTES_IN_FLIGHT`; `None`: its default for the body limits.
    pub body_bytes_in_flight: Option<usize>,
    pub large_bodies_at_once: Option<usize>,
    /// PUBLIC_URL and LINK_TTL_SECS: by default [`PUBLIC_URL`], so that links can be made.
    pub links: LinkSettings,
}

/// The PUBLIC_URL of test instances: the origin a page's form must come from.
pub const PUBLIC_URL: &str = "http://approvals.test";

impl Default for Options {
    fn default() -> Self {
        Options {
            privacy_floor: PrivacyLevel::Full,
            executors: Executors::none(),
            max_body_bytes: 1024 * 1024,
            request_timeout: Duration::from_secs(30),
            body_read_timeout: Duration::from_secs(15),
            deny_batch_beyond: None,
            claim_ttl: Duration::from_secs(300),
            body_bytes_in_flight: None,
            large_bodies_at_once: None,
            links: LinkSettings {
                public_url: Some(PUBLIC_URL.parse().expect("a URL")),
                ttl: Duration::from_secs(86_400),
            },
        }
    }
}

/// The events hub of a test instance: polls every 25 ms while a reader waits; readers may wait up to 20 s.
pub fn events_hub(pool: &PgPool) -> EventsHub {
    EventsHub::start(
        Database::direct(pool.clone()),
        Duration::from_millis(25),
        Duration::from_secs(20),
    )
}

/// What tests let tenants subscribe: loopback receivers allowed (as `WEBHOOK_ALLOW_PRIVATE_ADDRESSES=true` does),
/// otherwise the service's defaults.
pub fn webhook_policy() -> WebhookPolicy {
    WebhookPolicy {
        max_per_tenant: 25,
        allow_private: true,
        secret_overlap: Duration::from_secs(86_400),
    }
}

pub async fn app(pool: PgPool) -> TestApp {
    app_with(pool, Options::default()).await
}

pub async fn app_with(pool: PgPool, options: Options) -> TestApp {
    let application = Application::build(Wiring {
        pool: Database::direct(pool.clone()),
        executors: options.executors,
        privacy_floor: options.privacy_floor,
        instance_id: Uuid::new_v4(),
        lease_margin: Duration::from_secs(30),
        claim_ttl: options.claim_ttl,
        deny_batch_beyond: options.deny_batch_beyond,
        limits: Limits {
            max_body_bytes: options.max_body_bytes,
            request_timeout: options.request_timeout,
            body_read_timeout: options.body_read_timeout,
            work: WorkLimits::default(),
            body_bytes_in_flight: options.body_bytes_in_flight,
            large_bodies_at_once: options.large_bodies_at_once,
        },
        events: events_hub(&pool),
        webhooks: webhook_policy(),
        links: options.links,
    });
    let admin_key = add_client(&pool, "admin", "default", ALL_SCOPES).await;
    TestApp {
        router: application.router(),
        pool,
        state: application.state,
        admin_key,
    }
}

impl TestApp {
    /// This app's wiring, for a variant of it: the same database, events hub, limits and policy.
    pub fn wiring(&self) -> Wiring {
        let resumer = &self.state.resumer;
        Wiring {
            pool: self.state.pool.clone(),
            executors: resumer.executors.clone(),
            privacy_floor: resumer.privacy_floor,
            instance_id: resumer.instance_id,
            lease_margin: resumer.lease_margin,
            claim_ttl: resumer.claim_ttl,
            deny_batch_beyond: None,
            limits: self.state.limits,
            events: self.state.events.clone(),
            webhooks: self.state.webhooks,
            links: self.state.links.clone(),
        }
    }

    /// The same admin key and pool over another instance built from `wiring`.
    pub fn built(&self, pool: PgPool, wiring: Wiring) -> TestApp {
        let application = Application::build(wiring);
        TestApp {
            router: application.router(),
            pool,
            state: application.state,
            admin_key: self.admin_key.clone(),
        }
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

// Helpers of the decision and turn tests.

impl TestApp {
    /// The same database, router layers and admin key, served with another privacy floor. A pool holds the `admin`
    /// client once, so a second `app_with` on it is not possible.
    pub fn with_privacy_floor(&self, privacy_floor: PrivacyLevel) -> TestApp {
        let wiring = Wiring {
            executors: Executors::none(),
            privacy_floor,
            instance_id: Uuid::new_v4(),
            lease_margin: Duration::from_secs(30),
            ..self.wiring()
        };
        self.built(self.pool.clone(), wiring)
    }
}

/// What a run has recorded, read straight from the tables.
#[derive(Debug, PartialEq, Eq)]
pub struct Recorded {
    pub status: String,
    pub approval_events: i64,
    pub tool_events: i64,
    pub calls_with_outcome: i64,
}

pub async fn recorded(pool: &PgPool, run_id: Uuid) -> Recorded {
    let (status, approval_events, tool_events, calls_with_outcome) =
        sqlx::query_as::<_, (String, i64, i64, i64)>(
            "select r.status,
                    (select count(*) from approval_events where run_id = r.id),
                    (select count(*) from tool_events where run_id = r.id),
                    (select count(*) from turn_calls where run_id = r.id and outcome is not null)
             from runs r where r.id = $1",
        )
        .bind(run_id)
        .fetch_one(pool)
        .await
        .unwrap();
    Recorded {
        status,
        approval_events,
        tool_events,
        calls_with_outcome,
    }
}

/// Asserts that a refused decision left no trace: no event of any kind, no result, the run still waiting.
pub async fn assert_nothing_recorded(pool: &PgPool, run_id: Uuid) {
    assert_eq!(
        recorded(pool, run_id).await,
        Recorded {
            status: "waiting_for_approval".into(),
            approval_events: 0,
            tool_events: 0,
            calls_with_outcome: 0,
        }
    );
}

impl TestApp {
    /// Another service instance over the same database: its own resumer and instance id, the same admin key.
    pub fn second_instance(&self) -> TestApp {
        let wiring = Wiring {
            instance_id: Uuid::new_v4(),
            ..self.wiring()
        };
        self.built(self.pool.clone(), wiring)
    }
}

// Helpers of the registration and auth tests.

/// Asserts an RFC 9457 problem answer: status, `code`, content type, and a `request_id` equal to `x-request-id`.
pub fn assert_problem(answer: &Answer, status: StatusCode, code: &str) {
    assert_eq!(answer.status, status, "{:?}", answer.body);
    assert_eq!(answer.code(), code, "{:?}", answer.body);
    assert_eq!(
        answer.content_type(),
        "application/problem+json",
        "{:?}",
        answer.body
    );
    let request_id = answer
        .headers
        .get("x-request-id")
        .and_then(|value| value.to_str().ok())
        .expect("every answer carries an x-request-id header");
    assert!(!request_id.is_empty());
    assert_eq!(answer.body["request_id"], request_id, "{:?}", answer.body);
}

/// How many rows each table the API writes holds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RowCounts {
    pub runs: i64,
    pub turn_calls: i64,
    pub approval_events: i64,
    pub tool_events: i64,
    pub backend_users: i64,
}

pub async fn row_counts(pool: &PgPool) -> RowCounts {
    let (runs, turn_calls, approval_events, tool_events, backend_users) =
        sqlx::query_as::<_, (i64, i64, i64, i64, i64)>(
            "select (select count(*) from runs), (select count(*) from turn_calls),
                    (select count(*) from approval_events), (select count(*) from tool_events),
                    (select count(*) from backend_users)",
        )
        .fetch_one(pool)
        .await
        .unwrap();
    RowCounts {
        runs,
        turn_calls,
        approval_events,
        tool_events,
        backend_users,
    }
}

impl TestApp {
    /// Sends a body of raw bytes with the admin key, and the content type when one is given.
    pub async fn send_bytes(
        &self,
        method: Method,
        path: &str,
        content_type: Option<&str>,
        bytes: impl Into<Vec<u8>>,
    ) -> Answer {
        let mut request = Request::builder()
            .method(method)
            .uri(path)
            .header("authorization", format!("Bearer {}", self.admin_key));
        if let Some(content_type) = content_type {
            request = request.header("content-type", content_type);
        }
        self.send(request.body(Body::from(bytes.into())).unwrap())
            .await
    }
}

// Helpers of the OpenAPI tests.

impl TestApp {
    /// The same database and admin key, served over another state (another pool, other limits).
    pub fn with_state(&self, state: AppState) -> TestApp {
        TestApp {
            router: router(state.clone()),
            pool: self.pool.clone(),
            state,
            admin_key: self.admin_key.clone(),
        }
    }
}

impl TestApp {
    /// The same app over another pool (a smaller or a broken one), with the same admin key.
    pub fn with_pool(&self, pool: PgPool) -> TestApp {
        let wiring = Wiring {
            pool: Database::direct(pool.clone()),
            events: events_hub(&pool),
            ..self.wiring()
        };
        self.built(pool, wiring)
    }
}

// Helpers of the event and webhook tests.

/// A free port on loopback: bound to port 0, then released for a test to take.
pub fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|listener| listener.local_addr())
        .expect("a free port")
        .port()
}

/// The `/metrics` text, read with a key of its own.
pub async fn metrics(app: &TestApp) -> String {
    let key = app
        .client(
            &format!("scraper-{}", Uuid::new_v4().simple()),
            &["metrics:read"],
        )
        .await;
    let answer = app.call(Method::GET, "/metrics", Some(&key), None).await;
    assert_eq!(answer.status, StatusCode::OK);
    String::from_utf8(answer.bytes).unwrap()
}

// Decision tokens.

/// A host backend's signer of decision tokens: an Ed25519 key of client `client` under `kid`.
pub struct Signer {
    pub key: ed25519_dalek::SigningKey,
    pub kid: String,
    pub client: String,
}

impl Signer {
    /// A fresh key, registered on the client as `clients token-key add` does.
    pub async fn register(pool: &PgPool, client: &str, kid: &str) -> Signer {
        let signer = Signer::unregistered(client, kid);
        let public_key = signer.key.verifying_key().to_bytes();
        let added = approval_resume::storage::token_keys::add(pool, client, kid, &public_key)
            .await
            .unwrap();
        assert_eq!(added, approval_resume::storage::token_keys::Added::Added);
        signer
    }

    /// A fresh key that nobody registered.
    pub fn unregistered(client: &str, kid: &str) -> Signer {
        Signer {
            key: ed25519_dalek::SigningKey::from_bytes(&rand::random::<[u8; 32]>()),
            kid: kid.to_owned(),
            client: client.to_owned(),
        }
    }

    /// The same key, naming another kid in its tokens.
    pub fn with_kid(&self, kid: &str) -> Signer {
        Signer {
            key: self.key.clone(),
            kid: kid.to_owned(),
            client: self.client.clone(),
        }
    }

    pub fn sign(&self, claims: Value) -> String {
        use ed25519_dalek::pkcs8::EncodePrivateKey;
        let mut header = jsonwebtoken::Header::new(jsonwebtoken::Algorithm::EdDSA);
        header.kid = Some(self.kid.clone());
        let pem = self.key.to_pkcs8_pem(Default::default()).unwrap();
        let key = jsonwebtoken::EncodingKey::from_ed_pem(pem.as_bytes()).unwrap();
        jsonwebtoken::encode(&header, &claims, &key).unwrap()
    }

    /// A token of this client for `uid`, valid for five minutes from now.
    pub fn token(&self, uid: i64) -> String {
        self.sign(with(claims(uid), json!({"iss": self.client})))
    }

    /// One token for each way a token is refused with 401 (but a revoked client), with the code it gets.
    pub fn refused_tokens(&self) -> Vec<(String, &'static str)> {
        let claims = || with(claims(7), json!({"iss": self.client}));
        vec![
            (
                self.sign(with(
                    claims(),
                    json!({"iat": now() - 1000, "exp": now() - 100}),
                )),
                "token_expired",
            ),
            (
                self.sign(with(claims(), json!({"nbf": now() + 600}))),
                "token_not_yet_valid",
            ),
            (
                self.sign(with(
                    claims(),
                    json!({"iat": now() + 600, "exp": now() + 700}),
                )),
                "token_not_yet_valid",
            ),
            (
                Signer::unregistered(&self.client, &self.kid).sign(claims()),
                "token_bad_signature",
            ),
            (
                self.with_kid("k-unknown").sign(claims()),
                "token_unknown_kid",
            ),
            (
                self.sign(with(claims(), json!({"aud": "another-service"}))),
                "token_wrong_audience",
            ),
            (
                self.sign(with(claims(), json!({"exp": now() + 16 * 60}))),
                "token_lifetime_too_long",
            ),
            (
                self.sign(with(claims(), json!({"sub": "seven"}))),
                "token_invalid",
            ),
        ]
    }
}

pub fn now() -> i64 {
    chrono::Utc::now().timestamp()
}

/// The claims of a token of client `chat` for `uid`, valid for five minutes.
pub fn claims(uid: i64) -> Value {
    json!({"iss": "chat", "aud": "approval-resume", "sub": uid.to_string(), "iat": now(), "exp": now() + 300})
}

/// `claims` with some members replaced or added.
pub fn with(mut claims: Value, changes: Value) -> Value {
    for (name, value) in changes.as_object().unwrap() {
        claims[name] = value.clone();
    }
    claims
}
