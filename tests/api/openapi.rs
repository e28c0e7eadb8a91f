//! The contract and the code kept together: `openapi.yaml` (as compiled into the binary) documents exactly the
//! routes the router serves, and every answer these tests provoke has a documented status, content type, headers
//! and body shape. Each operation's test provokes every documented status and problem code, so a status or code
//! the code no longer answers fails as surely as an undocumented one.

use std::collections::BTreeSet;
use std::sync::{LazyLock, Mutex};
use std::time::Duration;

use approval_resume::http::ops::OPENAPI_YAML;
use approval_resume::http::ui;
use approval_resume::state::{AppState, Limits};
use axum::body::{Body, Bytes};
use axum::http::{Method, Request};
use http_body_util::{BodyExt, Full, Limited};
use regex::Regex;
use serde_json::{Value, json};
use sqlx::PgPool;
use sqlx::postgres::PgPoolOptions;
use uuid::Uuid;

use crate::database::TestDatabase;
use crate::support::{
    Answer, Signer, TestApp, add_client, app, call, owned_run, run_body, transcript,
};
use approval_resume::storage::clients;
use futures::StreamExt;

// The spec.

pub(crate) fn spec() -> &'static Value {
    static SPEC: LazyLock<Value> = LazyLock::new(|| {
        serde_yaml::from_str(OPENAPI_YAML).expect("openapi.yaml is YAML that maps onto JSON")
    });
    &SPEC
}

/// Follows `$ref`s within the spec until the value is not a reference.
pub(crate) fn resolve(value: &Value) -> &Value {
    let mut value = value;
    while let Some(reference) = value.get("$ref").and_then(Value::as_str) {
        let pointer = reference
            .strip_prefix('#')
            .expect("references stay within the spec");
        value = spec()
            .pointer(pointer)
            .unwrap_or_else(|| panic!("{reference} points at nothing"));
    }
    value
}

/// Validates `instance` against a schema of the spec. The schema becomes the root of a document that also holds
/// the spec's `components`, so its `#/components/...` references resolve as they do in the spec.
pub(crate) fn schema_errors(schema: &Value, instance: &Value) -> Vec<String> {
    let mut root = schema.as_object().expect("schemas are objects").clone();
    root.insert("components".into(), spec()["components"].clone());
    let validator = jsonschema::options()
        .should_validate_formats(true)
        .build(&Value::Object(root))
        .unwrap_or_else(|error| panic!("a schema of the spec does not compile: {error}"));
    let errors = validator.iter_errors(instance);
    errors
        .map(|error| format!("{error} (at {:?})", error.instance_path().as_str()))
        .collect()
}

/// The problem codes a schema allows: the intersection of every `code` enum along its `allOf`.
fn documented_codes(schema: &Value) -> BTreeSet<String> {
    let schema = resolve(schema);
    let own = schema.pointer("/properties/code/enum").map(strings);
    let parts = schema
        .get("allOf")
        .and_then(Value::as_array)
        .into_iter()
        .flatten();
    let parts = parts
        .map(documented_codes)
        .filter(|codes| !codes.is_empty());
    let mut sets = own.into_iter().chain(parts);
    let first = sets.next().unwrap_or_default();
    sets.fold(first, |a, b| a.intersection(&b).cloned().collect())
}

pub(crate) fn strings(list: &Value) -> BTreeSet<String> {
    let list = list.as_array().expect("a list");
    list.iter()
        .map(|s| s.as_str().expect("a string").to_owned())
        .collect()
}

const METHODS: [&str; 8] = [
    "get", "put", "post", "delete", "options", "head", "patch", "trace",
];

/// Every operation of the spec, as (METHOD, path template).
pub(crate) fn spec_operations() -> BTreeSet<(String, String)> {
    let paths = spec()["paths"].as_object().expect("the spec has paths");
    let mut operations = BTreeSet::new();
    for (path, item) in paths {
        for method in item.as_object().unwrap().keys() {
            if METHODS.contains(&method.as_str()) {
                operations.insert((method.to_uppercase(), path.clone()));
            }
        }
    }
    operations
}

pub(crate) fn operation(method: &Method, template: &str) -> &'static Value {
    let operation = &spec()["paths"][template][method.as_str().to_lowercase()];
    assert!(
        operation.is_object(),
        "the spec documents no {method} {template}"
    );
    operation
}

/// Every (status, code) an operation documents; a success has the empty code.
pub(crate) fn documented_answers(operation: &Value) -> BTreeSet<(u16, String)> {
    let responses = operation["responses"].as_object().expect("responses");
    let mut answers = BTreeSet::new();
    for (status, response) in responses {
        let status: u16 = status.parse().expect("statuses are numbers");
        match resolve(response)["content"].get("application/problem+json") {
            Some(media) => {
                let codes = documented_codes(&media["schema"]);
                assert!(!codes.is_empty(), "{status} documents no code");
                answers.extend(codes.into_iter().map(|code| (status, code)));
            }
            None => {
                answers.insert((status, String::new()));
            }
        }
    }
    answers
}

// The router.

/// Every `.route("…", method(…).method(…))` of src/app.rs, read as text.
fn router_routes() -> BTreeSet<(String, String)> {
    let source = include_str!("../../src/app.rs");
    let path = Regex::new(r#"^\s*"([^"]+)""#).unwrap();
    let method =
        Regex::new(r"(?:^|[^:\w])(get|put|post|delete|options|head|patch|trace)\(").unwrap();
    let mut routes = BTreeSet::new();
    for (start, _) in source.match_indices(".route(") {
        let args = up_to_closing_parenthesis(&source[start + ".route(".len()..]);
        let path = &path.captures(args).expect("routes have literal paths")[1];
        let methods: Vec<_> = method
            .captures_iter(args)
            .map(|c| c[1].to_uppercase())
            .collect();
        assert!(
            !methods.is_empty(),
            "the route {path} of src/app.rs has no method"
        );
        routes.extend(methods.into_iter().map(|m| (m, path.to_owned())));
    }
    assert!(!routes.is_empty(), "no route found in src/app.rs");
    routes
}

fn up_to_closing_parenthesis(text: &str) -> &str {
    let mut depth = 1;
    for (i, c) in text.char_indices() {
        depth += match c {
            '(' => 1,
            ')' => -1,
            _ => 0,
        };
        if depth == 0 {
            return &text[..i];
        }
    }
    panic!("unbalanced parentheses in src/app.rs")
}

/// A path for a template: uid 1, a fresh run id.
fn concrete(template: &str) -> String {
    let id = Uuid::new_v4().to_string();
    template.replace("{uid}", "1").replace("{id}", &id)
}

fn matches_template(template: &str, path: &str) -> bool {
    let path: Vec<_> = path
        .split('?')
        .next()
        .unwrap_or_default()
        .split('/')
        .collect();
    let template: Vec<_> = template.split('/').collect();
    let same = |(t, p): (&&str, &&str)| t == p || (t.starts_with('{') && !p.is_empty());
    template.len() == path.len() && template.iter().zip(&path).all(same)
}

// Driving one operation.

/// One documented operation of one app: every answer is checked against the spec and remembered.
struct Op<'a> {
    app: &'a TestApp,
    method: Method,
    template: &'static str,
    operation: &'static Value,
    seen: Mutex<BTreeSet<(u16, String)>>,
}

impl<'a> Op<'a> {
    fn new(app: &'a TestApp, method: Method, template: &'static str) -> Self {
        let operation = operation(&method, template);
        let seen = Mutex::new(BTreeSet::new());
        Op {
            app,
            method,
            template,
            operation,
            seen,
        }
    }

    fn name(&self) -> String {
        format!("{} {}", self.method, self.template)
    }

    /// Sends with the admin key and asserts the status and problem code (empty for a success).
    async fn expect(&self, path: &str, body: impl Into<Option<Value>>, expected: &str) -> Answer {
        let key = self.app.admin_key.clone();
        self.expect_on(self.app, Some(&key), path, body.into(), expected)
            .await
    }

    /// Sends to `app` (this app or a variant of it) with `key`, and asserts as `expect` does.
    async fn expect_on(
        &self,
        app: &TestApp,
        key: Option<&str>,
        path: &str,
        body: Option<Value>,
        expected: &str,
    ) -> Answer {
        let answer = app.call(self.method.clone(), path, key, body.clone()).await;
        self.check(path, body.as_ref(), &answer);
        let sent = body.map(|body| body.to_string()).unwrap_or_default();
        let context = format!("{} {path} {sent}", self.method);
        assert_answer(&answer, expected, &context);
        answer
    }

    /// Sends a request with the admin key, a content type and a raw body, and asserts as `expect` does.
    async fn expect_raw(
        &self,
        app: &TestApp,
        path: &str,
        content_type: &str,
        body: Body,
        expected: &str,
    ) {
        let request = Request::builder()
            .method(self.method.clone())
            .uri(path)
            .header("authorization", format!("Bearer {}", app.admin_key))
            .header("content-type", content_type)
            .body(body)
            .unwrap();
        let answer = app.send(request).await;
        self.check(path, None, &answer);
        assert_answer(
            &answer,
            expected,
            &format!("{} {path} ({content_type})", self.method),
        );
    }

    fn check(&self, path: &str, request_body: Option<&Value>, answer: &Answer) {
        let name = self.name();
        assert!(
            matches_template(self.template, path),
            "{path} is not a path of {name}"
        );
        let status = answer.status.as_u16();
        let Some(response) = self.operation["responses"].get(status.to_string()) else {
            panic!(
                "{name} answered {status}, which the spec does not document: {:?}",
                answer.body
            );
        };
        let response = resolve(response);

        // A response without content (304 Not Modified): no body, and nothing more to check of it.
        let Some(content) = response["content"].as_object() else {
            assert!(
                answer.bytes.is_empty(),
                "{name} {status}: a body where the spec documents none"
            );
            self.seen.lock().unwrap().insert((status, String::new()));
            return;
        };
        assert_eq!(
            content.len(),
            1,
            "{name} {status}: one media type per response"
        );
        let (media_type, media) = content.iter().next().unwrap();
        let body = &answer.body;
        assert_eq!(
            answer.content_type(),
            media_type,
            "{name} {status}: content type of {body}"
        );
        let instance = if media_type.ends_with("json") {
            serde_json::from_slice(&answer.bytes).expect("a JSON body is JSON")
        } else if media_type.ends_with("yaml") {
            // As a client (Schemathesis among them) reads it: the schema describes the parsed document.
            serde_yaml::from_slice(&answer.bytes).expect("a YAML body is YAML that maps onto JSON")
        } else {
            Value::String(String::from_utf8(answer.bytes.clone()).expect("a text body is UTF-8"))
        };
        let errors = schema_errors(&media["schema"], &instance);
        assert!(
            errors.is_empty(),
            "{name} {status}: the body breaks the spec: {errors:#?}\n{instance:#}"
        );

        for (header, documented) in response["headers"].as_object().into_iter().flatten() {
            let documented = resolve(documented);
            let value = answer
                .headers
                .get(header.as_str())
                .and_then(|v| v.to_str().ok());
            let Some(value) = value else {
                assert!(
                    documented["required"] != true,
                    "{name} {status}: no {header} header"
                );
                continue;
            };
            let schema = &documented["schema"];
            let value = match resolve(schema)["type"].as_str() {
                Some("integer") => json!(value.parse::<i64>().expect("an integer header")),
                _ => json!(value),
            };
            let errors = schema_errors(schema, &value);
            assert!(
                errors.is_empty(),
                "{name} {status}: header {header}: {errors:?}"
            );
        }

        if let Some(body) = request_body {
            let schema = &self.operation["requestBody"]["content"]["application/json"]["schema"];
            assert!(schema.is_object(), "{name} documents no JSON request body");
            let errors = schema_errors(schema, body);
            if answer.status.is_success() {
                assert!(
                    errors.is_empty(),
                    "{name}: the code took a body the spec refuses: {errors:?}"
                );
            } else if answer.code() == "invalid_body" {
                assert!(
                    !errors.is_empty(),
                    "{name}: the code refused a body the spec takes: {body}"
                );
            }
        }

        let code = if media_type == "application/problem+json" {
            answer.code()
        } else {
            ""
        };
        self.seen.lock().unwrap().insert((status, code.to_owned()));
    }

    /// Fails unless every documented answer was provoked.
    fn assert_every_documented_answer_was_seen(&self) {
        let seen = self.seen.lock().unwrap();
        let documented = documented_answers(self.operation);
        let missing: Vec<_> = documented.difference(&seen).collect();
        assert!(
            missing.is_empty(),
            "{}: documented, never provoked: {missing:?}",
            self.name()
        );
    }

    /// 401 without a key and with an unknown key, 403 with a key that holds no scope.
    async fn provoke_auth_errors(&self, path: &str, body: Option<Value>) {
        let (app, body) = (self.app, || body.clone());
        self.expect_on(app, None, path, body(), "401 unauthorized")
            .await;
        self.expect_on(app, Some("not-a-key"), path, body(), "401 unauthorized")
            .await;
        let nothing = app.client("no-scopes", &[]).await;
        self.expect_on(app, Some(&nothing), path, body(), "403 missing_scope")
            .await;
        // Only a client that may decide may have token keys (docs/design.md §13).
        app.client("signer", &["decisions:write"]).await;
        let signer = Signer::register(&app.pool, "signer", "k1").await;
        let takes_tokens = self.operation["security"]
            .as_array()
            .is_some_and(|schemes| schemes.iter().any(|s| s.get("decisionToken").is_some()));
        if !takes_tokens {
            self.expect_on(
                app,
                Some(&signer.token(7)),
                path,
                body(),
                "403 token_not_allowed",
            )
            .await;
            return;
        }
        for (token, code) in signer.refused_tokens() {
            self.expect_on(app, Some(&token), path, body(), &format!("401 {code}"))
                .await;
        }
        app.client("revoked", &["decisions:write"]).await;
        let revoked = Signer::register(&app.pool, "revoked", "k1").await;
        assert!(clients::revoke(&app.pool, "revoked").await.unwrap());
        self.expect_on(
            app,
            Some(&revoked.token(7)),
            path,
            body(),
            "401 token_client_revoked",
        )
        .await;
        // A client whose scopes changed after its key was added.
        app.client("lost-scope", &["decisions:write"]).await;
        let lost = Signer::register(&app.pool, "lost-scope", "k1").await;
        sqlx::query("update api_clients set scopes = '{}' where name = 'lost-scope'")
            .execute(&app.pool)
            .await
            .unwrap();
        self.expect_on(
            app,
            Some(&lost.token(7)),
            path,
            body(),
            "401 token_client_lacks_scope",
        )
        .await;
    }

    /// 500 `internal`, 503 `database_unavailable` and 503 `timeout`, as the database can fail any keyed request;
    /// and 503 `too_many_body_bytes`, as any operation that reads a body may find MAX_BODY_BYTES_IN_FLIGHT taken (an
    /// operation that reads none charges nothing for one, and on a `GET` or `DELETE` one is refused 413).
    async fn provoke_server_errors(&self, path: &str, body: Option<Value>) {
        let (app, body) = (self.app, || body.clone());
        let key = Some(app.admin_key.as_str());
        if body().is_none() {
            self.provoke_bodiless_errors(path).await;
        } else {
            self.provoke_too_many_body_bytes(path).await;
        }
        let broken = app.with_pool(pool_without_tables(&app.pool));
        self.expect_on(&broken, key, path, body(), "500 internal")
            .await;
        let unavailable = app.with_pool(closed_pool(&app.pool).await);
        self.expect_on(&unavailable, key, path, body(), "503 database_unavailable")
            .await;
        let holder = lock(&app.pool, "lock table api_clients in access exclusive mode").await;
        self.expect_on(&impatient(app), key, path, body(), "503 timeout")
            .await;
        holder.rollback().await.unwrap();
    }

    /// A body sent to an operation that reads none: on a `GET` or `DELETE`, 413 `payload_too_large` at once, answered
    /// by the router for every such operation (the spec's description says so, as for 404 and 405), so not checked
    /// against the operation's own answers; on a `POST`, never read, so never charged to the budget.
    async fn provoke_bodiless_errors(&self, path: &str) {
        if !matches!(self.method, Method::GET | Method::DELETE) {
            return;
        }
        let request = Request::builder()
            .method(self.method.clone())
            .uri(path)
            .header("authorization", format!("Bearer {}", self.app.admin_key))
            .body(Body::from("{}"))
            .unwrap();
        let answer = self.app.send(request).await;
        let context = format!("{} {path} with a body", self.method);
        assert_answer(&answer, "413 payload_too_large", &context);
    }

    /// 503 `too_many_body_bytes`: a body whose bytes find no room in MAX_BODY_BYTES_IN_FLIGHT.
    async fn provoke_too_many_body_bytes(&self, path: &str) {
        let app = self.app;
        // A budget whose shares hold 1 KiB at most: a body of 2 KiB waits for what it can never get.
        let starved = with_limits(
            app,
            Limits {
                body_bytes_in_flight: Some(1024),
                large_bodies_at_once: None,
                ..app.state.limits
            },
        );
        let padded = Body::from(json!({"padding": "x".repeat(2048)}).to_string());
        self.expect_raw(
            &starved,
            path,
            "application/json",
            padded,
            "503 too_many_body_bytes",
        )
        .await;
    }

    /// 400 `malformed_json` and `bad_request`, 413 and 415, as any operation that reads a JSON body answers.
    async fn provoke_body_errors(&self, path: &str) {
        let (app, json) = (self.app, "application/json");
        self.expect_raw(app, path, json, Body::from("{"), "400 malformed_json")
            .await;
        // A body whose stream breaks off, as when the connection fails while the body is read.
        let broken = Limited::new(Full::new(Bytes::from_static(b"{}")), 0)
            .map_err(|_| std::io::Error::other("the connection broke"));
        self.expect_raw(app, path, json, Body::new(broken), "400 bad_request")
            .await;
        self.expect_raw(
            app,
            path,
            "text/plain",
            Body::from("{}"),
            "415 unsupported_media_type",
        )
        .await;
        let small = with_limits(
            app,
            Limits {
                max_body_bytes: 16,
                ..app.state.limits
            },
        );
        let large = Body::from(json!({"padding": "x".repeat(64)}).to_string());
        self.expect_raw(&small, path, json, large, "413 payload_too_large")
            .await;
        let hasty = with_limits(
            app,
            Limits {
                body_read_timeout: Duration::from_millis(100),
                ..app.state.limits
            },
        );
        // A body that never finishes arriving.
        let stalled = futures::stream::once(async { Ok::<_, std::io::Error>(b"{".to_vec()) })
            .chain(futures::stream::pending());
        self.expect_raw(
            &hasty,
            path,
            json,
            Body::from_stream(stalled),
            "408 body_timeout",
        )
        .await;
    }
}

/// Asserts an answer's status and problem code, written `"409 stale_turn"`, or `"200"` for a success.
#[track_caller]
fn assert_answer(answer: &Answer, expected: &str, context: &str) {
    let actual = match answer.code() {
        "" => answer.status.as_u16().to_string(),
        code => format!("{} {code}", answer.status.as_u16()),
    };
    assert_eq!(actual, expected, "{context}\n{:#}", answer.body);
}

#[track_caller]
fn assert_ok(answer: &Answer) {
    assert_answer(answer, "200", "a step of the test");
}

// Ways to make the database fail a request.

/// A pool that never gives a connection: every query fails with `PoolClosed`.
async fn closed_pool(pool: &PgPool) -> PgPool {
    let closed = PgPoolOptions::new().connect_lazy_with((*pool.connect_options()).clone());
    closed.close().await;
    closed
}

/// A pool on the same database whose queries find no table: every query fails with a database error.
fn pool_without_tables(pool: &PgPool) -> PgPool {
    let options = (*pool.connect_options()).clone();
    let options = options.options([("search_path", "no_such_schema")]);
    PgPoolOptions::new()
        .max_connections(1)
        .connect_lazy_with(options)
}

/// Holds a table lock until the returned transaction ends: requests that need the table wait.
async fn lock(
    pool: &PgPool,
    statement: &'static str,
) -> sqlx::Transaction<'static, sqlx::Postgres> {
    let mut holder = pool.begin().await.unwrap();
    sqlx::query(statement).execute(&mut *holder).await.unwrap();
    holder
}

fn with_limits(app: &TestApp, limits: Limits) -> TestApp {
    app.with_state(AppState {
        limits,
        ..app.state.clone()
    })
}

/// The app with a MAX_WORKER_STATE_BYTES smaller than any state the tests send.
fn small_worker_state(app: &TestApp) -> TestApp {
    let mut limits = app.state.limits;
    limits.work.max_worker_state_bytes = 4;
    with_limits(app, limits)
}

/// The app with a request timeout short enough to pass while a test holds a lock the request waits for.
fn impatient(app: &TestApp) -> TestApp {
    let request_timeout = Duration::from_millis(200);
    with_limits(
        app,
        Limits {
            request_timeout,
            ..app.state.limits
        },
    )
}

// Fixtures.

/// An assistant turn of `count` calls of `read_page` with these arguments, under ids no other test turn uses.
fn turn_of(count: usize, arguments: &str) -> Value {
    let calls: Vec<Value> = (0..count)
        .map(|i| call(&format!("limit_{i}"), "read_page", arguments))
        .collect();
    json!([{"role": "assistant", "content": null, "tool_calls": calls}])
}

/// Arguments one byte over the app's MAX_ARGUMENTS_BYTES.
fn large_arguments(app: &TestApp) -> String {
    let max = app.state.limits.work.max_arguments_bytes;
    format!("{{\"t\":\"{}\"}}", "x".repeat(max - 7))
}

async fn set_status(pool: &PgPool, run_id: Uuid, status: &str) {
    let statement = "update runs set status = $2 where id = $1";
    sqlx::query(statement)
        .bind(run_id)
        .bind(status)
        .execute(pool)
        .await
        .unwrap();
}

fn decision(approved: bool, decider_uid: Option<i64>, digest: &str) -> Value {
    json!({"approved": approved, "decider_uid": decider_uid, "turn_digest": digest})
}

/// A run of owner 7, denied by them: resumed.
async fn resumed_run(app: &TestApp) -> Uuid {
    let (id, digest) = owned_run(app).await;
    assert_ok(&app.decide(id, false, Some(7), &digest).await);
    id
}

/// A run of owner 7 whose tools are the worker's, approved by them: released (docs/design.md §15).
async fn released_run(app: &TestApp) -> Uuid {
    let tools = json!([
        {"name": "update_page_metadata", "effect": "write", "executor": "worker"},
        {"name": "read_page", "effect": "read", "executor": "worker"},
    ]);
    app.user(7, false, false, false).await;
    let (id, digest) = run_with(app, json!({"tools": tools})).await;
    let answer = app.decide(id, true, Some(7), &digest).await;
    assert_eq!(answer.body["status"], "released", "{:?}", answer.body);
    id
}

/// A run of owner 7 registered from the native fixture of `format` (tests/fixtures/native); its id and digest.
async fn native_run(app: &TestApp, format: &str) -> (Uuid, String) {
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures/native")
        .join(format!("{format}.json"));
    let mut body: Value = serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap();
    let id = Uuid::new_v4();
    body["id"] = json!(id);
    body["owner_uid"] = json!(7);
    app.user(7, false, false, false).await;
    let run = app.register(body).await;
    (id, run["turn"]["digest"].as_str().unwrap().to_owned())
}

/// A run of owner 7 registered with changes to `run_body`; returns its id and digest.
async fn run_with(app: &TestApp, changes: Value) -> (Uuid, String) {
    let id = Uuid::new_v4();
    let mut body = run_body(id, 7);
    for (key, value) in changes.as_object().unwrap() {
        body[key] = value.clone();
    }
    let run = app.register(body).await;
    (id, run["turn"]["digest"].as_str().unwrap().to_owned())
}

fn with(mut body: Value, key: &str, value: Value) -> Value {
    body[key] = value;
    body
}

fn without(mut body: Value, key: &str) -> Value {
    body.as_object_mut().unwrap().remove(key);
    body
}

// The spec and the router.

#[test]
fn the_spec_is_openapi_3_1_and_names_the_crate_version() {
    assert_eq!(spec()["openapi"], "3.1.0");
    assert_eq!(spec()["info"]["title"], "approval-resume");
    assert_eq!(spec()["info"]["version"], env!("CARGO_PKG_VERSION"));
    assert!(
        spec()["info"]["description"]
            .as_str()
            .is_some_and(|d| !d.is_empty())
    );
}

#[test]
fn every_reference_in_the_spec_resolves_and_every_schema_compiles() {
    fn walk(value: &Value, count: &mut usize) {
        if value.get("$ref").is_some() {
            resolve(value);
            *count += 1;
        }
        match value {
            Value::Object(map) => map.values().for_each(|v| walk(v, count)),
            Value::Array(items) => items.iter().for_each(|v| walk(v, count)),
            _ => {}
        }
    }
    let mut count = 0;
    walk(spec(), &mut count);
    assert!(count > 0);
    for name in spec()["components"]["schemas"].as_object().unwrap().keys() {
        schema_errors(
            &json!({"$ref": format!("#/components/schemas/{name}")}),
            &Value::Null,
        );
    }
}

#[test]
fn every_route_of_the_router_is_in_the_spec_and_back() {
    let (router, spec) = (router_routes(), spec_operations());
    let undocumented: Vec<_> = router.difference(&spec).collect();
    assert!(
        undocumented.is_empty(),
        "routes of src/app.rs not in openapi.yaml: {undocumented:?}"
    );
    let unrouted: Vec<_> = spec.difference(&router).collect();
    assert!(
        unrouted.is_empty(),
        "operations of openapi.yaml not in src/app.rs: {unrouted:?}"
    );
}

#[tokio::test]
async fn every_operation_in_the_spec_is_served_by_the_router() {
    let (_database, pool) = TestDatabase::create().await;
    let app = app(pool).await;
    let is_fallback = |answer: &Answer| {
        let detail = &answer.body["detail"];
        answer.status == 404 && answer.code() == "not_found" && detail == "no such route"
    };
    let answer = app.call(Method::GET, "/v1/no-such-route", None, None).await;
    assert!(
        is_fallback(&answer),
        "the probe tells the fallback apart: {:?}",
        answer.body
    );

    let operations = spec_operations();
    for (method, template) in &operations {
        let method: Method = method.parse().unwrap();
        let body = (method != Method::GET).then(|| json!({}));
        let answer = app
            .call(method.clone(), &concrete(template), None, body)
            .await;
        assert!(!is_fallback(&answer), "{method} {template} is not routed");
        assert!(
            answer.status != 405,
            "{method} {template} is routed for other methods only"
        );
    }
    // A documented path serves no method that the spec does not document.
    let paths: BTreeSet<&String> = operations.iter().map(|(_, path)| path).collect();
    for template in paths {
        for method in [
            Method::GET,
            Method::PUT,
            Method::POST,
            Method::DELETE,
            Method::PATCH,
        ] {
            if !operations.contains(&(method.to_string(), template.clone())) {
                let answer = app
                    .call(method.clone(), &concrete(template), None, None)
                    .await;
                let (status, code) = (answer.status.as_u16(), answer.code());
                let message = format!("{method} {template} is served but not documented");
                assert_eq!((status, code), (405, "method_not_allowed"), "{message}");
            }
        }
    }
}

#[test]
fn every_problem_code_in_the_source_is_listed_in_the_spec_and_back() {
    let patterns = [
        r#"new\(\s*StatusCode::[A-Z_]+\s*,\s*"([a-z_]+)""#,
        r#"unprocessable\(\s*"([a-z_]+)""#,
        r#"conflict\(\s*"([a-z_]+)""#,
        // The refusals of a decision token (src/http/decision_tokens.rs).
        r#"refused\(\s*"([a-z_]+)""#,
        r#"Refusal::[A-Za-z]+\s*=>\s*"([a-z_]+)""#,
        // The verdicts a decision's `calls` may not give (src/domain/verdicts.rs).
        r#"VerdictError::[A-Za-z]+(?:\([^)]*\)|\s*\{[^}]*\})?\s*=>\s*"([a-z_]+)""#,
    ]
    .map(|pattern| Regex::new(pattern).unwrap());
    let mut in_source = BTreeSet::new();
    let mut directories = vec![std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("src")];
    while let Some(directory) = directories.pop() {
        for entry in std::fs::read_dir(&directory).unwrap() {
            let path = entry.unwrap().path();
            if path.is_dir() {
                directories.push(path);
            } else if path.extension().is_some_and(|ext| ext == "rs") {
                let text = std::fs::read_to_string(&path).unwrap();
                for pattern in &patterns {
                    in_source.extend(pattern.captures_iter(&text).map(|c| c[1].to_owned()));
                }
            }
        }
    }
    let listed = strings(&spec()["components"]["schemas"]["Problem"]["properties"]["code"]["enum"]);
    let unlisted: Vec<_> = in_source.difference(&listed).collect();
    assert!(
        unlisted.is_empty(),
        "answered by src/, not in Problem.code: {unlisted:?}"
    );
    let unknown: Vec<_> = listed.difference(&in_source).collect();
    assert!(
        unknown.is_empty(),
        "in Problem.code, never answered by src/: {unknown:?}"
    );
}

#[test]
fn every_problem_an_operation_documents_fits_the_problem_schema() {
    let listed = documented_codes(&json!({"$ref": "#/components/schemas/Problem"}));
    for (method, template) in spec_operations() {
        let operation = operation(&method.parse().unwrap(), &template);
        for (status, code) in documented_answers(operation) {
            if code.is_empty() {
                continue;
            }
            assert!(
                listed.contains(&code),
                "{method} {template} {status}: {code} is no Problem.code"
            );
            let content = &resolve(&operation["responses"][status.to_string()])["content"];
            let problem = json!({
                "type": format!("urn:approval-resume:problem:{code}"), "title": "Title",
                "status": status, "detail": "detail", "code": code, "request_id": "id",
            });
            let errors = schema_errors(&content["application/problem+json"]["schema"], &problem);
            assert!(
                errors.is_empty(),
                "{method} {template} {status} {code}: {errors:?}"
            );
        }
    }
}

// Each operation: every documented answer, provoked and checked.

#[tokio::test]
async fn putting_a_user_answers_as_documented() {
    let (_database, pool) = TestDatabase::create().await;
    let app = app(pool).await;
    let op = Op::new(&app, Method::PUT, "/v1/users/{uid}");
    let user = json!({"username": "ann", "is_admin": false, "can_approve_others": true, "disabled": false});
    let path = "/v1/users/7";

    op.expect(path, user.clone(), "200").await;
    op.expect(path, user.clone(), "200").await;
    op.expect(
        path,
        with(
            user.clone(),
            "approvable_tools",
            json!(["read_page", "not a tool"]),
        ),
        "422 invalid_approvable_tools",
    )
    .await;
    op.expect(
        path,
        with(user.clone(), "approvable_tools", json!(["read_page"])),
        "200",
    )
    .await;
    op.expect(
        path,
        with(user.clone(), "role", json!("admin")),
        "422 invalid_body",
    )
    .await;
    op.expect(
        path,
        without(user.clone(), "can_approve_others"),
        "422 invalid_body",
    )
    .await;
    op.expect(
        path,
        with(user.clone(), "disabled", json!(null)),
        "422 invalid_body",
    )
    .await;
    op.expect("/v1/users/0", user.clone(), "422 invalid_uid")
        .await;
    op.expect("/v1/users/ann", user.clone(), "422 invalid_uid")
        .await;
    op.expect(
        path,
        with(user.clone(), "username", json!("")),
        "422 invalid_username",
    )
    .await;
    let long = json!("x".repeat(257));
    op.expect(
        path,
        with(user.clone(), "username", long),
        "422 invalid_username",
    )
    .await;

    op.expect(
        path,
        with(user.clone(), "email", json!("Ann <ann@example.com>")),
        "422 invalid_email",
    )
    .await;
    let answer = op
        .expect(
            path,
            with(user.clone(), "email", json!("ann@example.com")),
            "200",
        )
        .await;
    assert_eq!(answer.body["email"], "ann@example.com");

    op.provoke_body_errors(path).await;
    op.provoke_auth_errors(path, Some(user.clone())).await;
    op.provoke_server_errors(path, Some(user)).await;
    op.assert_every_documented_answer_was_seen();
}

#[tokio::test]
async fn registering_a_run_answers_as_documented() {
    let (_database, pool) = TestDatabase::create().await;
    let app = app(pool).await;
    app.user(7, false, false, false).await;
    let op = Op::new(&app, Method::POST, "/v1/runs");
    let path = "/v1/runs";
    let taken = run_body(Uuid::new_v4(), 7);
    let fresh = || run_body(Uuid::new_v4(), 7);

    op.expect(path, taken.clone(), "201").await;
    op.expect(path, taken.clone(), "200").await;
    let other = with(taken, "require_second_approver", json!(true));
    op.expect(path, other, "409 run_exists").await;
    let service_run = json!({
        "id": Uuid::new_v4(), "owner_uid": 0, "messages": transcript(vec![call("c1", "read", "{}")]),
        "tools": [], "privacy_level": "none", "require_second_approver": true,
    });
    op.expect(path, service_run, "201").await;
    for format in ["anthropic", "openai-responses", "gemini"] {
        let fixture = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
            .join(format!("tests/fixtures/native/{format}.json"));
        let mut native: Value =
            serde_json::from_str(&std::fs::read_to_string(fixture).unwrap()).unwrap();
        native["id"] = json!(Uuid::new_v4());
        native["owner_uid"] = json!(7);
        let answer = op.expect(path, native, "201").await;
        assert_eq!(answer.body["format"], format);
    }

    op.expect(
        path,
        with(fresh(), "priority", json!(1)),
        "422 invalid_body",
    )
    .await;
    op.expect(
        path,
        with(fresh(), "id", json!("run-1")),
        "422 invalid_body",
    )
    .await;
    op.expect(path, without(fresh(), "messages"), "422 invalid_body")
        .await;
    op.expect(
        path,
        with(fresh(), "privacy_level", json!("secret")),
        "422 invalid_body",
    )
    .await;
    let bad_effect = json!([{"name": "read_page", "effect": "delete"}]);
    op.expect(path, with(fresh(), "tools", bad_effect), "422 invalid_body")
        .await;
    let extra_in_tool = json!([{"name": "read_page", "effect": "read", "timeout": 5}]);
    op.expect(
        path,
        with(fresh(), "tools", extra_in_tool),
        "422 invalid_body",
    )
    .await;
    op.expect(
        path,
        with(fresh(), "owner_uid", json!(-1)),
        "422 invalid_owner",
    )
    .await;
    let labelled = op
        .expect(path, with(fresh(), "source", json!("mcp:github")), "201")
        .await;
    assert_eq!(labelled.body["source"], "mcp:github");
    op.expect(
        path,
        with(fresh(), "source", json!("mcp github")),
        "422 invalid_source",
    )
    .await;
    let bad_name = json!([{"name": "read page", "effect": "read"}]);
    op.expect(path, with(fresh(), "tools", bad_name), "422 invalid_tool")
        .await;
    let twice = json!([{"name": "x", "effect": "read"}, {"name": "x", "effect": "write"}]);
    op.expect(path, with(fresh(), "tools", twice), "422 invalid_tool")
        .await;
    op.expect(
        path,
        with(fresh(), "messages", json!([])),
        "422 invalid_transcript",
    )
    .await;
    let no_turn = json!([{"role": "user", "content": "hi"}]);
    op.expect(
        path,
        with(fresh(), "messages", no_turn),
        "422 invalid_transcript",
    )
    .await;
    op.expect(path, run_body(Uuid::new_v4(), 99), "422 unknown_owner")
        .await;
    let limits = app.state.limits.work;
    op.expect(
        path,
        with(
            fresh(),
            "messages",
            turn_of(limits.max_calls_per_turn + 1, "{}"),
        ),
        "422 too_many_calls",
    )
    .await;
    op.expect(
        path,
        with(fresh(), "messages", turn_of(1, &large_arguments(&app))),
        "422 arguments_too_large",
    )
    .await;
    let both = with(
        with(fresh(), "expires_at", json!("2999-01-01T00:00:00Z")),
        "approval_ttl_secs",
        json!(60),
    );
    op.expect(path, both, "422 expiry_ambiguous").await;
    let garbled = with(fresh(), "expires_at", json!("tomorrow"));
    op.expect(path, garbled, "422 invalid_expires_at").await;
    let past = with(fresh(), "expires_at", json!("2000-01-01T00:00:00Z"));
    op.expect(path, past, "422 expires_at_in_past").await;
    let negative = with(fresh(), "approval_ttl_secs", json!(-1));
    op.expect(path, negative, "422 invalid_ttl").await;
    let crowd: Vec<i64> = (1..=11).collect();
    op.expect(
        path,
        with(fresh(), "notify", json!(crowd)),
        "422 too_many_notified",
    )
    .await;
    op.expect(path, with(fresh(), "notify", json!([0])), "422 invalid_uid")
        .await;
    let answer = op
        .expect(path, with(fresh(), "notify", json!([7, 99])), "201")
        .await;
    assert_eq!(
        answer.body["notify"]["skipped"][1]["reason"],
        "unknown_user"
    );
    let later = with(fresh(), "expires_at", json!("2999-01-01T00:00:00+02:00"));
    let answer = op.expect(path, later, "201").await;
    assert_eq!(answer.body["expires_at"], "2998-12-31T22:00:00Z");
    let state = json!({"step": 3, "items": [1.5, null]});
    op.expect(path, with(fresh(), "worker_state", state.clone()), "201")
        .await;
    let key = Some(app.admin_key.as_str());
    op.expect_on(
        &small_worker_state(&app),
        key,
        path,
        Some(with(fresh(), "worker_state", state)),
        "413 worker_state_too_large",
    )
    .await;

    op.provoke_body_errors(path).await;
    op.provoke_auth_errors(path, Some(fresh())).await;
    op.provoke_server_errors(path, Some(fresh())).await;
    provoke_undecryptable(&op, &app).await;
    op.assert_every_documented_answer_was_seen();
}

#[tokio::test]
async fn reading_a_run_answers_as_documented() {
    let (_database, pool) = TestDatabase::create().await;
    let app = app(pool).await;
    let op = Op::new(&app, Method::GET, "/v1/runs/{id}");
    let (waiting, _) = owned_run(&app).await;
    let path = format!("/v1/runs/{waiting}");

    let answer = op.expect(&path, None, "200").await;
    assert!(
        answer.body.get("decision").is_none(),
        "no decision yet: {:#}",
        answer.body
    );
    // The rule that would decide a waiting call is shown on it (docs/design.md §18), in its documented shape.
    let rule = app
        .post(
            &format!("/v1/runs/{waiting}/rules"),
            json!({"created_by": 7, "tool": "read_page", "verdict": "deny", "reason": "skip"}),
        )
        .await;
    assert_eq!(rule.status, 201, "{:?}", rule.body);
    let answer = op.expect(&path, None, "200").await;
    assert_eq!(
        answer.body["turn"]["pending_calls"][1]["rule"]["id"],
        rule.body["id"]
    );
    let answer = op
        .expect(&format!("{path}?include=worker_state"), None, "200")
        .await;
    assert_eq!(answer.body["worker_state"], Value::Null);
    let (stateful, _) = run_with(&app, json!({"worker_state": {"step": 3}})).await;
    let answer = op
        .expect(
            &format!("/v1/runs/{stateful}?include=worker_state"),
            None,
            "200",
        )
        .await;
    assert_eq!(answer.body["worker_state"], json!({"step": 3}));
    op.expect(
        &format!("{path}?include=transcript"),
        None,
        "422 invalid_query",
    )
    .await;
    op.expect(&format!("{path}?page=2"), None, "422 invalid_query")
        .await;
    let resumed = resumed_run(&app).await;
    let answer = op.expect(&format!("/v1/runs/{resumed}"), None, "200").await;
    assert_eq!(answer.body["decision"]["decided_by"], "run_owner");

    op.expect(&concrete("/v1/runs/{id}"), None, "404 not_found")
        .await;
    op.expect("/v1/runs/not-a-uuid", None, "404 not_found")
        .await;
    let elsewhere = add_client(&app.pool, "elsewhere", "other", &["runs:read"]).await;
    op.expect_on(&app, Some(&elsewhere), &path, None, "404 not_found")
        .await;

    op.provoke_auth_errors(&path, None).await;
    op.provoke_server_errors(&path, None).await;
    provoke_undecryptable(&op, &app).await;
    op.assert_every_documented_answer_was_seen();
}

#[tokio::test]
async fn deciding_a_turn_answers_as_documented() {
    let (_database, pool) = TestDatabase::create().await;
    let app = app(pool).await;
    let op = Op::new(&app, Method::POST, "/v1/runs/{id}/decision");

    // A denial with a reason, its replay, and the decisions that conflict with it.
    let (denied, digest) = owned_run(&app).await;
    let path = format!("/v1/runs/{denied}/decision");
    let deny = with(
        decision(false, Some(7), &digest),
        "reason",
        json!("variant"),
    );
    let first = op.expect(&path, deny.clone(), "200").await;
    assert_eq!(first.body["model_input"]["format"], "openai-chat");
    let again = op.expect(&path, deny, "200").await;
    assert_eq!(again.bytes, first.bytes, "a replay is byte-identical");
    let no_reason = with(decision(false, Some(7), &digest), "reason", json!(null));
    op.expect(&path, no_reason, "409 already_decided").await;
    op.expect(
        &path,
        decision(true, Some(7), &digest),
        "409 already_decided",
    )
    .await;
    let stale = op
        .expect(
            &path,
            decision(false, Some(7), &"0".repeat(64)),
            "409 stale_turn",
        )
        .await;
    assert_eq!(stale.body["run_status"], "resumed", "{:?}", stale.body);
    // What `jq -r .turn.digest` prints after a failed registration, and other texts that are no digest.
    for not_a_digest in ["null", "", "abc"] {
        op.expect(
            &path,
            decision(false, Some(7), not_a_digest),
            "422 invalid_turn_digest",
        )
        .await;
    }

    // An approval (no executor: not permitted), and the same while its tools run.
    let (approved, digest) = owned_run(&app).await;
    let path = format!("/v1/runs/{approved}/decision?format=anthropic");
    let answer = op
        .expect(&path, decision(true, Some(7), &digest), "200")
        .await;
    assert_eq!(answer.body["results"][0]["outcome"], "not_permitted");
    set_status(&app.pool, approved, "resuming").await;
    op.expect(
        &path,
        decision(true, Some(7), &digest),
        "409 resume_in_progress",
    )
    .await;

    // A denial by nobody.
    let (anonymous, digest) = owned_run(&app).await;
    let path = format!("/v1/runs/{anonymous}/decision?format=openai-responses");
    let answer = op
        .expect(&path, decision(false, None, &digest), "200")
        .await;
    assert_eq!(answer.body["decision"]["decided_by"], "unknown");

    // Who may decide.
    let (id, digest) = owned_run(&app).await;
    let path = format!("/v1/runs/{id}/decision");
    app.user(8, false, false, false).await;
    app.user(9, true, false, true).await;
    op.expect(
        &path,
        decision(false, Some(99), &digest),
        "403 unknown_decider",
    )
    .await;
    op.expect(
        &path,
        decision(false, Some(9), &digest),
        "403 decider_disabled",
    )
    .await;
    op.expect(
        &path,
        decision(false, Some(8), &digest),
        "403 decider_not_permitted",
    )
    .await;
    let named_only = app.client("named-only", &["decisions:write"]).await;
    let nobody = Some(decision(false, None, &digest));
    op.expect_on(&app, Some(&named_only), &path, nobody, "403 missing_scope")
        .await;
    let (four_eyes, four_eyes_digest) =
        run_with(&app, json!({"require_second_approver": true})).await;
    let four_eyes = format!("/v1/runs/{four_eyes}/decision");
    let by_owner = decision(true, Some(7), &four_eyes_digest);
    op.expect(&four_eyes, by_owner, "403 second_approver_required")
        .await;
    // The approver tool gate: run_body's first call is a write.
    let (gated, gated_digest) = owned_run(&app).await;
    let gated = format!("/v1/runs/{gated}/decision");
    op.expect(
        &gated,
        decision(true, None, &gated_digest),
        "403 anonymous_write_approval",
    )
    .await;
    let limited = json!({"username": "ann", "is_admin": false, "can_approve_others": false,
                         "disabled": false, "approvable_tools": ["read_page"]});
    assert_ok(
        &app.call(
            Method::PUT,
            "/v1/users/7",
            Some(&app.admin_key),
            Some(limited),
        )
        .await,
    );
    op.expect(
        &gated,
        decision(true, Some(7), &gated_digest),
        "403 tool_not_approvable",
    )
    .await;
    // Nobody may edit, even a read (docs/design.md §17).
    let (edited, edited_digest) = owned_run(&app).await;
    let edit_by_nobody = json!({"decider_uid": null, "turn_digest": edited_digest, "calls": [
        {"call_id": "call_1", "approved": false},
        {"call_id": "call_2", "approved": true, "arguments": r#"{"page": 13}"#},
    ]});
    op.expect(
        &format!("/v1/runs/{edited}/decision"),
        edit_by_nobody,
        "403 anonymous_edit",
    )
    .await;
    let signer = Signer::register(&app.pool, "admin", "k-admin").await;
    let someone_else = Some(decision(false, Some(8), &digest));
    op.expect_on(
        &app,
        Some(&signer.token(7)),
        &path,
        someone_else,
        "403 decider_mismatch",
    )
    .await;

    // Bodies and queries that do not fit.
    let deny = decision(false, Some(7), &digest);
    op.expect(
        &path,
        without(deny.clone(), "decider_uid"),
        "422 decider_uid_required",
    )
    .await;
    op.expect(
        &path,
        with(deny.clone(), "comment", json!("no")),
        "422 invalid_body",
    )
    .await;
    op.expect(
        &path,
        with(deny.clone(), "reason", json!("later")),
        "422 invalid_body",
    )
    .await;
    op.expect(&path, decision(false, Some(0), &digest), "422 invalid_uid")
        .await;
    let approve = with(decision(true, Some(7), &digest), "reason", json!("skip"));
    op.expect(&path, approve, "422 reason_requires_denial")
        .await;
    op.expect(
        &format!("{path}?format=claude"),
        deny.clone(),
        "422 invalid_query",
    )
    .await;
    // A run in a provider's own format: asked for in one that would drop its thinking blocks, refused and not
    // decided; in its own, decided.
    let (native, native_digest) = native_run(&app, "anthropic").await;
    let native_path = format!("/v1/runs/{native}/decision");
    op.expect(
        &format!("{native_path}?format=openai-chat"),
        decision(false, Some(7), &native_digest),
        "422 format_not_representable",
    )
    .await;
    let answer = op
        .expect(
            &native_path,
            decision(false, Some(7), &native_digest),
            "200",
        )
        .await;
    assert_eq!(answer.body["format"], "anthropic");
    let per_call = |calls: Value| json!({"decider_uid": 7, "turn_digest": digest, "calls": calls});
    let both = with(decision(false, Some(7), &digest), "calls", json!([]));
    op.expect(&path, both, "422 approved_and_calls").await;
    op.expect(
        &path,
        without(decision(false, Some(7), &digest), "approved"),
        "422 verdict_required",
    )
    .await;
    let reason_beside = with(
        per_call(json!([{"call_id": "call_1", "approved": false}])),
        "reason",
        json!("skip"),
    );
    op.expect(&path, reason_beside, "422 reason_with_calls")
        .await;
    let twice =
        json!([{"call_id": "call_1", "approved": false}, {"call_id": "call_1", "approved": true}]);
    op.expect(&path, per_call(twice), "422 repeated_call").await;
    let invented = json!([
        {"call_id": "call_1", "approved": false},
        {"call_id": "call_2", "approved": false},
        {"call_id": "call_9", "approved": false},
    ]);
    op.expect(&path, per_call(invented), "422 unknown_call")
        .await;
    let short = json!([{"call_id": "call_1", "approved": false}]);
    op.expect(&path, per_call(short), "422 missing_call").await;
    let edited_denial = json!([{"call_id": "call_1", "approved": false, "arguments": "{}"}]);
    op.expect(
        &path,
        per_call(edited_denial),
        "422 arguments_require_approval",
    )
    .await;
    let not_object = json!([{"call_id": "call_1", "approved": true, "arguments": "[1]"}]);
    op.expect(&path, per_call(not_object), "422 arguments_not_object")
        .await;
    let too_large =
        json!([{"call_id": "call_1", "approved": true, "arguments": large_arguments(&app)}]);
    op.expect(&path, per_call(too_large), "422 arguments_too_large")
        .await;
    // A tool declared `editable: false` (docs/design.md §15).
    let fixed_tools = json!([
        {"name": "update_page_metadata", "effect": "write", "editable": false},
        {"name": "read_page", "effect": "read"},
    ]);
    let (fixed, fixed_digest) = run_with(&app, json!({"tools": fixed_tools})).await;
    let edit = json!({"decider_uid": 7, "turn_digest": fixed_digest, "calls": [
        {"call_id": "call_1", "approved": true, "arguments": "{\"page\": 13}"},
        {"call_id": "call_2", "approved": true},
    ]});
    op.expect(
        &format!("/v1/runs/{fixed}/decision"),
        edit,
        "422 not_editable",
    )
    .await;
    let (late, late_digest) = owned_run(&app).await;
    sqlx::query("update runs set expires_at = now() - interval '1 second' where id = $1")
        .bind(late)
        .execute(&app.pool)
        .await
        .unwrap();
    op.expect(
        &format!("/v1/runs/{late}/decision"),
        decision(false, Some(7), &late_digest),
        "409 expired",
    )
    .await;
    op.expect(&format!("{path}?page=2"), deny.clone(), "422 invalid_query")
        .await;

    op.expect(
        &concrete("/v1/runs/{id}/decision"),
        deny.clone(),
        "404 not_found",
    )
    .await;
    // A run cancelled before any decision waits for none.
    assert_ok(&app.post(&format!("/v1/runs/{id}/cancel"), json!({})).await);
    op.expect(&path, deny.clone(), "409 not_awaiting_approval")
        .await;

    provoke_remember_errors(&op, &app, &signer).await;

    op.provoke_body_errors(&path).await;
    op.provoke_auth_errors(&path, Some(deny.clone())).await;
    op.provoke_server_errors(&path, Some(deny)).await;
    provoke_undecryptable(&op, &app).await;
    op.assert_every_documented_answer_was_seen();
}

/// The refusals of a decision's `remember` (docs/design.md §18), and an approval a live deny rule refuses.
async fn provoke_remember_errors(op: &Op<'_>, app: &TestApp, signer: &Signer) {
    app.user(11, false, true, false).await;
    let (id, digest) = owned_run(app).await;
    let path = format!("/v1/runs/{id}/decision");
    let until = |days: i64| json!((chrono::Utc::now() + chrono::Duration::days(days)).to_rfc3339());
    let remember = |decider: Option<i64>, scope: &str| {
        with(decision(false, decider, &digest), "remember", json!(scope))
    };
    op.expect(&path, remember(None, "run"), "403 anonymous_rule")
        .await;
    let by_approver = with(remember(Some(11), "owner"), "remember_until", until(1));
    op.expect(&path, by_approver, "403 rule_not_permitted")
        .await;
    let by_token = with(remember(None, "owner"), "remember_until", until(1));
    let by_token = without(by_token, "decider_uid");
    op.expect_on(
        app,
        Some(&signer.token(7)),
        &path,
        Some(by_token),
        "403 token_not_allowed",
    )
    .await;
    op.expect(
        &path,
        remember(Some(7), "owner"),
        "422 remember_until_required",
    )
    .await;
    op.expect(
        &path,
        with(remember(Some(7), "run"), "remember_until", until(1)),
        "422 remember_until_without_owner",
    )
    .await;
    for (end, code) in [
        (json!("nope"), "422 invalid_expires_at"),
        (until(-1), "422 expires_at_in_past"),
        (until(400), "422 rule_ttl_too_long"),
    ] {
        let body = with(remember(Some(7), "owner"), "remember_until", end);
        op.expect(&path, body, code).await;
    }
    let per_call = |remember_edit: bool| {
        let mut edited =
            json!({"call_id": "call_2", "approved": true, "arguments": r#"{"page": 13}"#});
        if remember_edit {
            edited["remember"] = json!("run");
        }
        json!({"decider_uid": 11, "turn_digest": digest, "calls": [
            {"call_id": "call_1", "approved": false}, edited,
        ]})
    };
    op.expect(&path, per_call(true), "422 remember_edited")
        .await;
    let both = with(per_call(false), "remember", json!("run"));
    op.expect(&path, both, "422 remember_with_calls").await;
    let service_run = Uuid::new_v4();
    let registered = app.register(run_body(service_run, 0)).await;
    let service_digest = registered["turn"]["digest"].as_str().unwrap();
    let owner_scope = json!({"approved": false, "decider_uid": 11, "turn_digest": service_digest,
                             "remember": "owner", "remember_until": until(1)});
    op.expect(
        &format!("/v1/runs/{service_run}/decision"),
        owner_scope,
        "422 unknown_owner",
    )
    .await;
    // The owner's "never" for the read call: approving it is refused until the rule is revoked.
    let rule = json!({"created_by": 7, "tool": "read_page", "verdict": "deny"});
    let made = app.post(&format!("/v1/runs/{id}/rules"), rule).await;
    assert_eq!(
        made.status,
        axum::http::StatusCode::CREATED,
        "{:?}",
        made.body
    );
    op.expect(
        &path,
        decision(true, Some(11), &digest),
        "409 denied_by_rule",
    )
    .await;
}

#[tokio::test]
async fn reading_the_model_input_answers_as_documented() {
    let (_database, pool) = TestDatabase::create().await;
    let app = app(pool).await;
    let op = Op::new(&app, Method::GET, "/v1/runs/{id}/model-input");
    let (waiting, _) = owned_run(&app).await;
    op.expect(
        &format!("/v1/runs/{waiting}/model-input"),
        None,
        "409 not_resumed",
    )
    .await;

    let id = resumed_run(&app).await;
    let path = format!("/v1/runs/{id}/model-input");
    let formats = [
        ("", "openai-chat"),
        ("?format=openai-chat", "openai-chat"),
        ("?format=anthropic", "anthropic"),
        ("?format=openai-responses", "openai-responses"),
        ("?format=gemini", "gemini"),
    ];
    for (query, format) in formats {
        let answer = op.expect(&format!("{path}{query}"), None, "200").await;
        assert_eq!(answer.body["format"], format);
    }
    op.expect(&format!("{path}?format=claude"), None, "422 invalid_query")
        .await;
    // Runs in a provider's own format (docs/design.md §14): each answers in it; the Anthropic run's thinking blocks
    // have no counterpart in OpenAI chat.
    for format in ["anthropic", "openai-responses", "gemini"] {
        let (native, digest) = native_run(&app, format).await;
        assert_ok(&app.decide(native, false, Some(7), &digest).await);
        let native_path = format!("/v1/runs/{native}/model-input");
        let answer = op.expect(&native_path, None, "200").await;
        assert_eq!(answer.body["format"], format);
        if format == "anthropic" {
            op.expect(
                &format!("{native_path}?format=openai-chat"),
                None,
                "422 format_not_representable",
            )
            .await;
        }
    }
    op.expect(&format!("{path}?turn=0"), None, "422 invalid_query")
        .await;
    op.expect(
        &concrete("/v1/runs/{id}/model-input"),
        None,
        "404 not_found",
    )
    .await;
    op.provoke_auth_errors(&path, None).await;
    op.provoke_server_errors(&path, None).await;
    // A decision token reads no transcript of a run whose privacy level shows no payload (docs/design.md §13).
    let hidden = Uuid::new_v4();
    let mut body = run_body(hidden, 7);
    body["privacy_level"] = json!("metadata");
    let digest = app.register(body).await["turn"]["digest"]
        .as_str()
        .unwrap()
        .to_owned();
    assert_ok(&app.decide(hidden, false, Some(7), &digest).await);
    let signer = Signer::register(&app.pool, "admin", "k-admin").await;
    op.expect_on(
        &app,
        Some(&signer.token(7)),
        &format!("/v1/runs/{hidden}/model-input"),
        None,
        "403 transcript_not_shown",
    )
    .await;
    set_status(&app.pool, id, "resuming").await;
    op.expect(&path, None, "409 resume_in_progress").await;
    let released = released_run(&app).await;
    op.expect(
        &format!("/v1/runs/{released}/model-input"),
        None,
        "409 results_pending",
    )
    .await;
    provoke_undecryptable(&op, &app).await;
    op.assert_every_documented_answer_was_seen();
}

#[tokio::test]
async fn appending_a_turn_answers_as_documented() {
    let (_database, pool) = TestDatabase::create().await;
    let app = app(pool).await;
    let op = Op::new(&app, Method::POST, "/v1/runs/{id}/turns");
    let next = json!({"messages": [
        {"role": "user", "content": "Try a shorter one."},
        {"role": "assistant", "content": null, "tool_calls": [call("call_3", "update_page_metadata", "{}")]},
    ]});
    let (waiting, _) = owned_run(&app).await;
    op.expect(
        &format!("/v1/runs/{waiting}/turns"),
        next.clone(),
        "409 not_resumed",
    )
    .await;

    let id = resumed_run(&app).await;
    let path = format!("/v1/runs/{id}/turns");
    let reused =
        json!({"messages": [{"role": "assistant", "tool_calls": [call("call_1", "read", "{}")]}]});
    op.expect(&path, reused, "422 invalid_transcript").await;
    op.expect(&path, json!({"messages": []}), "422 invalid_transcript")
        .await;
    op.expect(
        &path,
        with(next.clone(), "turn_index", json!(1)),
        "422 invalid_body",
    )
    .await;
    op.expect(&path, json!({}), "422 invalid_body").await;
    let limits = app.state.limits.work;
    let crowded = turn_of(limits.max_calls_per_turn + 1, "{}");
    op.expect(&path, json!({"messages": crowded}), "422 too_many_calls")
        .await;
    let large = turn_of(1, &large_arguments(&app));
    op.expect(&path, json!({"messages": large}), "422 arguments_too_large")
        .await;
    let both = with(
        with(next.clone(), "expires_at", json!("2999-01-01T00:00:00Z")),
        "approval_ttl_secs",
        json!(60),
    );
    op.expect(&path, both, "422 expiry_ambiguous").await;
    let garbled = with(next.clone(), "expires_at", json!("soon"));
    op.expect(&path, garbled, "422 invalid_expires_at").await;
    let past = with(next.clone(), "expires_at", json!("2000-01-01T00:00:00Z"));
    op.expect(&path, past, "422 expires_at_in_past").await;
    let negative = with(next.clone(), "approval_ttl_secs", json!(-1));
    op.expect(&path, negative, "422 invalid_ttl").await;
    let crowd: Vec<i64> = (1..=11).collect();
    let too_many = with(next.clone(), "notify", json!(crowd));
    op.expect(&path, too_many, "422 too_many_notified").await;
    let zero = with(next.clone(), "notify", json!([0]));
    op.expect(&path, zero, "422 invalid_uid").await;
    let key = Some(app.admin_key.as_str());
    let stateful = with(next.clone(), "worker_state", json!({"step": 4}));
    op.expect_on(
        &small_worker_state(&app),
        key,
        &path,
        Some(stateful.clone()),
        "413 worker_state_too_large",
    )
    .await;
    let other = resumed_run(&app).await;
    op.expect(&format!("/v1/runs/{other}/turns"), stateful, "200")
        .await;
    let answer = op.expect(&path, next.clone(), "200").await;
    assert_eq!(
        (&answer.body["status"], &answer.body["turn"]["index"]),
        (&json!("waiting_for_approval"), &json!(1))
    );
    op.expect(&path, next.clone(), "200").await;
    op.expect(
        &concrete("/v1/runs/{id}/turns"),
        next.clone(),
        "404 not_found",
    )
    .await;

    // A resumed run without a decision on its turn is a defect of the stored data: 500, saying nothing of it.
    let (broken, _) = owned_run(&app).await;
    set_status(&app.pool, broken, "resumed").await;
    let answer = op
        .expect(
            &format!("/v1/runs/{broken}/turns"),
            next.clone(),
            "500 internal",
        )
        .await;
    assert_eq!(
        answer.body["detail"],
        "an internal error occurred; it was logged"
    );

    op.provoke_body_errors(&path).await;
    op.provoke_auth_errors(&path, Some(next.clone())).await;
    op.provoke_server_errors(&path, Some(next)).await;
    provoke_undecryptable(&op, &app).await;
    op.assert_every_documented_answer_was_seen();
}

#[tokio::test]
async fn listing_events_answers_as_documented() {
    let (_database, pool) = TestDatabase::create().await;
    let app = app(pool).await;
    let op = Op::new(&app, Method::GET, "/v1/runs/{id}/events");
    let (waiting, _) = owned_run(&app).await;
    let answer = op
        .expect(&format!("/v1/runs/{waiting}/events"), None, "200")
        .await;
    assert_eq!(answer.body["approval_events"], json!([]));

    // A denial by the owner at every level, an approval by nobody at the service's level (the test service's is
    // `full`, which a run registered without a level of its own gets).
    let id = resumed_run(&app).await;
    let path = format!("/v1/runs/{id}/events");
    let answer = op.expect(&path, None, "200").await;
    assert_eq!(answer.body["tool_events"][0]["privacy_level"], "full");
    for (level, tool_events) in [("none", 0), ("metadata", 2), ("redacted", 2), ("full", 2)] {
        let (id, digest) = run_with(&app, json!({"privacy_level": level})).await;
        assert_ok(&app.decide(id, false, Some(7), &digest).await);
        let answer = op
            .expect(&format!("/v1/runs/{id}/events"), None, "200")
            .await;
        let events = answer.body["tool_events"].as_array().unwrap();
        assert_eq!(events.len(), tool_events, "{level}");
        assert!(events.iter().all(|event| event["privacy_level"] == level));
    }
    let (approved, digest) = owned_run(&app).await;
    assert_ok(&app.decide(approved, true, Some(7), &digest).await);
    op.expect(&format!("/v1/runs/{approved}/events"), None, "200")
        .await;
    op.expect(&concrete("/v1/runs/{id}/events"), None, "404 not_found")
        .await;

    op.provoke_auth_errors(&path, None).await;
    op.provoke_server_errors(&path, None).await;
    provoke_undecryptable(&op, &app).await;
    op.assert_every_documented_answer_was_seen();
}

#[tokio::test]
async fn cancelling_a_run_answers_as_documented() {
    let (_database, pool) = TestDatabase::create().await;
    let app = app(pool).await;
    let op = Op::new(&app, Method::POST, "/v1/runs/{id}/cancel");
    let (waiting, _) = owned_run(&app).await;
    let path = format!("/v1/runs/{waiting}/cancel");

    let answer = op.expect(&path, None, "200").await;
    assert_eq!(answer.body["status"], "cancelled");
    op.expect(&path, None, "200").await;
    let resumed = resumed_run(&app).await;
    op.expect(&format!("/v1/runs/{resumed}/cancel"), None, "200")
        .await;
    let completed = resumed_run(&app).await;
    assert_ok(
        &app.post(&format!("/v1/runs/{completed}/complete"), json!({}))
            .await,
    );
    op.expect(
        &format!("/v1/runs/{completed}/cancel"),
        None,
        "409 run_finished",
    )
    .await;
    let (resuming, _) = owned_run(&app).await;
    set_status(&app.pool, resuming, "resuming").await;
    op.expect(
        &format!("/v1/runs/{resuming}/cancel"),
        None,
        "409 resume_in_progress",
    )
    .await;
    op.expect(&concrete("/v1/runs/{id}/cancel"), None, "404 not_found")
        .await;

    op.provoke_auth_errors(&path, None).await;
    op.provoke_server_errors(&path, None).await;
    provoke_undecryptable(&op, &app).await;
    op.assert_every_documented_answer_was_seen();
}

#[tokio::test]
async fn posting_results_answers_as_documented() {
    let (_database, pool) = TestDatabase::create().await;
    let app = app(pool).await;
    let op = Op::new(&app, Method::POST, "/v1/runs/{id}/results");
    let unclaimed = |call_id: &str, content: &str| json!({"results": [{"call_id": call_id, "content": content, "is_error": false}]});
    let (waiting, _) = owned_run(&app).await;
    op.expect(
        &format!("/v1/runs/{waiting}/results"),
        unclaimed("call_1", "x"),
        "409 not_released",
    )
    .await;
    let id = released_run(&app).await;
    let path = format!("/v1/runs/{id}/results");
    op.expect(&path, unclaimed("call_1", "saved"), "409 claim_required")
        .await;
    let claim_id = crate::worker_calls::claim(&app, id).await;
    let result = |call_id: &str, content: &str| json!({"claim_id": claim_id, "results": [{"call_id": call_id, "content": content, "is_error": false}]});
    let stranger = json!({"claim_id": Uuid::new_v4(), "results": [{"call_id": "call_1", "content": "x", "is_error": false}]});
    op.expect(&path, stranger, "409 claimed").await;
    let answer = op.expect(&path, result("call_1", "saved"), "200").await;
    assert_eq!(answer.body["status"], "released");
    op.expect(&path, result("call_1", "other"), "409 result_conflict")
        .await;
    let twice = json!({"claim_id": claim_id, "results": [
        {"call_id": "call_2", "content": "a", "is_error": false},
        {"call_id": "call_2", "content": "a", "is_error": false},
    ]});
    op.expect(&path, twice, "422 repeated_call").await;
    op.expect(&path, result("call_9", "x"), "422 call_not_released")
        .await;
    let resumed = resumed_run(&app).await;
    op.expect(
        &format!("/v1/runs/{resumed}/results"),
        result("call_1", "x"),
        "409 run_resumed",
    )
    .await;
    op.expect(&path, json!({"results": []}), "422 invalid_body")
        .await;
    op.expect(
        &path,
        json!({"results": [{"call_id": "call_2"}]}),
        "422 invalid_body",
    )
    .await;
    let answer = op.expect(&path, result("call_2", "page"), "200").await;
    assert_eq!(answer.body["status"], "resumed");
    let lapsing = released_run(&app).await;
    let lapsing_claim = crate::worker_calls::claim(&app, lapsing).await;
    crate::claims::lapse_in_sql(&app.pool, lapsing).await;
    op.expect(
        &format!("/v1/runs/{lapsing}/results"),
        json!({"claim_id": lapsing_claim, "results": [{"call_id": "call_1", "content": "x", "is_error": false}]}),
        "409 claim_lapsed",
    )
    .await;
    let cancelled = released_run(&app).await;
    assert_ok(
        &app.post(&format!("/v1/runs/{cancelled}/cancel"), json!({}))
            .await,
    );
    op.expect(
        &format!("/v1/runs/{cancelled}/results"),
        unclaimed("call_1", "x"),
        "409 run_cancelled",
    )
    .await;
    op.expect(
        &concrete("/v1/runs/{id}/results"),
        unclaimed("call_1", "x"),
        "404 not_found",
    )
    .await;
    op.provoke_auth_errors(&path, Some(unclaimed("call_1", "x")))
        .await;
    op.provoke_server_errors(&path, Some(unclaimed("call_1", "x")))
        .await;
    op.provoke_body_errors(&path).await;
    provoke_undecryptable(&op, &app).await;
    op.assert_every_documented_answer_was_seen();
}

#[tokio::test]
async fn claiming_released_calls_answers_as_documented() {
    let (_database, pool) = TestDatabase::create().await;
    let app = app(pool).await;
    let op = Op::new(&app, Method::POST, "/v1/runs/{id}/claim");
    let (waiting, _) = owned_run(&app).await;
    let refused = op
        .expect(
            &format!("/v1/runs/{waiting}/claim"),
            json!({}),
            "409 not_released",
        )
        .await;
    assert_eq!(refused.body["run_status"], "waiting_for_approval");
    let id = released_run(&app).await;
    let path = format!("/v1/runs/{id}/claim");
    let claimed = op.expect(&path, json!({}), "200").await;
    let claim_id = claimed.body["claim_id"].as_str().unwrap().to_owned();
    op.expect(&path, json!({}), "409 claimed").await;
    op.expect(&path, json!({"claim_id": claim_id}), "200").await;
    op.expect(&path, json!({"claim_id": "not-a-uuid"}), "422 invalid_body")
        .await;
    op.expect(&path, json!({"claim": true}), "422 invalid_body")
        .await;
    let unclaimed = released_run(&app).await;
    op.expect(
        &format!("/v1/runs/{unclaimed}/claim"),
        json!({"claim_id": Uuid::new_v4()}),
        "409 claim_required",
    )
    .await;
    crate::claims::lapse_in_sql(&app.pool, id).await;
    op.expect(&path, json!({"claim_id": claim_id}), "409 claim_lapsed")
        .await;
    let cancelled = released_run(&app).await;
    assert_ok(
        &app.post(&format!("/v1/runs/{cancelled}/cancel"), json!({}))
            .await,
    );
    op.expect(
        &format!("/v1/runs/{cancelled}/claim"),
        json!({}),
        "409 run_cancelled",
    )
    .await;
    op.expect(&concrete("/v1/runs/{id}/claim"), json!({}), "404 not_found")
        .await;
    op.provoke_auth_errors(&path, Some(json!({}))).await;
    op.provoke_server_errors(&path, Some(json!({}))).await;
    op.provoke_body_errors(&path).await;
    provoke_undecryptable(&op, &app).await;
    op.assert_every_documented_answer_was_seen();
}

#[tokio::test]
async fn completing_a_run_answers_as_documented() {
    let (_database, pool) = TestDatabase::create().await;
    let app = app(pool).await;
    let op = Op::new(&app, Method::POST, "/v1/runs/{id}/complete");
    let (waiting, _) = owned_run(&app).await;
    op.expect(
        &format!("/v1/runs/{waiting}/complete"),
        None,
        "409 not_resumed",
    )
    .await;
    let id = resumed_run(&app).await;
    let path = format!("/v1/runs/{id}/complete");

    let answer = op.expect(&path, None, "200").await;
    assert_eq!(answer.body["status"], "completed");
    op.expect(&path, None, "200").await;
    let (cancelled, _) = owned_run(&app).await;
    assert_ok(
        &app.post(&format!("/v1/runs/{cancelled}/cancel"), json!({}))
            .await,
    );
    op.expect(
        &format!("/v1/runs/{cancelled}/complete"),
        None,
        "409 run_finished",
    )
    .await;
    let (resuming, _) = owned_run(&app).await;
    set_status(&app.pool, resuming, "resuming").await;
    op.expect(
        &format!("/v1/runs/{resuming}/complete"),
        None,
        "409 resume_in_progress",
    )
    .await;
    op.expect(&concrete("/v1/runs/{id}/complete"), None, "404 not_found")
        .await;

    op.provoke_auth_errors(&path, None).await;
    op.provoke_server_errors(&path, None).await;
    provoke_undecryptable(&op, &app).await;
    op.assert_every_documented_answer_was_seen();
}

#[tokio::test]
async fn the_ops_endpoints_answer_as_documented() {
    let (_database, pool) = TestDatabase::create().await;
    let app = app(pool).await;
    let healthz = Op::new(&app, Method::GET, "/healthz");
    healthz.expect_on(&app, None, "/healthz", None, "200").await;
    healthz.assert_every_documented_answer_was_seen();

    let openapi = Op::new(&app, Method::GET, "/openapi.yaml");
    let served = openapi
        .expect_on(&app, None, "/openapi.yaml", None, "200")
        .await;
    assert_eq!(
        served.bytes,
        OPENAPI_YAML.as_bytes(),
        "the served document is the compiled-in spec"
    );
    openapi.assert_every_documented_answer_was_seen();

    let card = Op::new(&app, Method::GET, "/ui/approval-card.js");
    let served = card
        .expect_on(&app, None, "/ui/approval-card.js", None, "200")
        .await;
    assert_eq!(served.bytes, ui::APPROVAL_CARD_JS.as_bytes());
    let etag = served.headers["etag"].clone();
    let request = Request::builder()
        .uri("/ui/approval-card.js")
        .header("if-none-match", etag)
        .body(Body::empty())
        .unwrap();
    let revalidated = app.send(request).await;
    card.check("/ui/approval-card.js", None, &revalidated);
    assert_eq!(revalidated.status.as_u16(), 304);
    card.assert_every_documented_answer_was_seen();

    let metrics = Op::new(&app, Method::GET, "/metrics");
    let scraper = app.client("scraper", &["metrics:read"]).await;
    metrics
        .expect_on(&app, Some(&scraper), "/metrics", None, "200")
        .await;
    metrics.provoke_auth_errors("/metrics", None).await;
    metrics.provoke_server_errors("/metrics", None).await;
    metrics.assert_every_documented_answer_was_seen();

    let readyz = Op::new(&app, Method::GET, "/readyz");
    readyz.expect_on(&app, None, "/readyz", None, "200").await;
    // A database that was never migrated has no migrations table: it is not migrated either.
    let never_migrated = app.with_pool(pool_without_tables(&app.pool));
    readyz
        .expect_on(&never_migrated, None, "/readyz", None, "503 not_migrated")
        .await;
    let unavailable = app.with_pool(closed_pool(&app.pool).await);
    readyz
        .expect_on(
            &unavailable,
            None,
            "/readyz",
            None,
            "503 database_unavailable",
        )
        .await;
    let holder = lock(
        &app.pool,
        "lock table _sqlx_migrations in access exclusive mode",
    )
    .await;
    readyz
        .expect_on(&impatient(&app), None, "/readyz", None, "503 timeout")
        .await;
    holder.rollback().await.unwrap();
    let statement = "update _sqlx_migrations set success = false
                     where version = (select max(version) from _sqlx_migrations)";
    sqlx::query(statement).execute(&app.pool).await.unwrap();
    readyz
        .expect_on(&app, None, "/readyz", None, "503 not_migrated")
        .await;
    // A migrations table of another shape than this version knows is a defect of the stored data: 500.
    let statement = "alter table _sqlx_migrations rename column success to succeeded";
    sqlx::query(statement).execute(&app.pool).await.unwrap();
    readyz
        .expect_on(&app, None, "/readyz", None, "500 internal")
        .await;
    readyz.assert_every_documented_answer_was_seen();
}

#[tokio::test]
async fn listing_approvals_answers_as_documented() {
    let (_database, pool) = TestDatabase::create().await;
    let app = app(pool).await;
    let op = Op::new(&app, Method::GET, "/v1/approvals");
    app.user(7, false, false, false).await;
    let (first, _) = run_with(&app, json!({"privacy_level": "metadata"})).await;
    let (second, _) = run_with(&app, json!({"privacy_level": "full"})).await;
    app.user(8, false, true, false).await;
    app.user(9, false, false, true).await;

    let path = "/v1/approvals?acting_uid=7&limit=1";
    let page = op.expect(path, None, "200").await;
    assert_eq!(
        page.body["items"][0]["run_id"],
        second.to_string(),
        "newest first"
    );
    assert!(page.body["items"][0]["turn"]["pending_calls"][0]["arguments"].is_string());
    let cursor = page.body["next_cursor"]
        .as_str()
        .expect("another page follows");
    let next = op
        .expect(&format!("{path}&cursor={cursor}"), None, "200")
        .await;
    assert_eq!(next.body["items"][0]["run_id"], first.to_string());
    assert!(
        next.body["items"][0]["turn"]["pending_calls"][0]
            .get("arguments")
            .is_none()
    );
    let filtered = "/v1/approvals?acting_uid=8&owner_uid=7&tool=read_page&limit=200";
    op.expect(filtered, None, "200").await;
    // The rule that would decide a waiting call is shown on it (docs/design.md §18), in its documented shape.
    let rule = app
        .post(
            &format!("/v1/runs/{first}/rules"),
            json!({"created_by": 7, "tool": "read_page", "verdict": "approve"}),
        )
        .await;
    assert_eq!(rule.status, 201, "{:?}", rule.body);
    let page = op.expect(filtered, None, "200").await;
    let item = page.body["items"]
        .as_array()
        .unwrap()
        .iter()
        .find(|item| item["run_id"] == first.to_string())
        .expect("the run is listed");
    assert_eq!(
        item["turn"]["pending_calls"][1]["rule"]["id"],
        rule.body["id"]
    );

    op.expect("/v1/approvals", None, "422 invalid_query").await;
    op.expect("/v1/approvals?acting_uid=ann", None, "422 invalid_query")
        .await;
    op.expect(
        "/v1/approvals?acting_uid=7&page=2",
        None,
        "422 invalid_query",
    )
    .await;
    op.expect(
        "/v1/approvals?acting_uid=7&limit=0",
        None,
        "422 invalid_query",
    )
    .await;
    op.expect(
        "/v1/approvals?acting_uid=7&limit=201",
        None,
        "422 invalid_query",
    )
    .await;
    op.expect(
        "/v1/approvals?acting_uid=7&cursor=nope",
        None,
        "422 invalid_cursor",
    )
    .await;
    op.expect("/v1/approvals?acting_uid=99", None, "403 unknown_decider")
        .await;
    op.expect("/v1/approvals?acting_uid=9", None, "403 decider_disabled")
        .await;

    op.provoke_auth_errors("/v1/approvals?acting_uid=7", None)
        .await;
    op.provoke_server_errors("/v1/approvals?acting_uid=7", None)
        .await;
    provoke_undecryptable(&op, &app).await;
    op.assert_every_documented_answer_was_seen();
}

#[tokio::test]
async fn following_events_answers_as_documented() {
    let (_database, pool) = TestDatabase::create().await;
    let app = app(pool).await;
    let op = Op::new(&app, Method::GET, "/v1/events");
    let empty = op.expect("/v1/events", None, "200").await;
    assert_eq!(empty.body["events"], json!([]));
    let (id, digest) = owned_run(&app).await;
    assert_ok(&app.decide(id, false, Some(7), &digest).await);
    let (approved, digest) = owned_run(&app).await;
    assert_ok(&app.decide(approved, true, Some(7), &digest).await);
    let cancelled = resumed_run(&app).await;
    assert_ok(
        &app.post(&format!("/v1/runs/{cancelled}/cancel"), json!({}))
            .await,
    );
    let page = op.expect("/v1/events?limit=3", None, "200").await;
    let next = page.body["next_cursor"].as_str().unwrap();
    let rest = op
        .expect(
            &format!("/v1/events?after={next}&limit=1000&wait=1"),
            None,
            "200",
        )
        .await;
    assert!(!rest.body["events"].as_array().unwrap().is_empty());

    op.expect("/v1/events?after=nope", None, "422 invalid_cursor")
        .await;
    op.expect("/v1/events?wait=soon", None, "422 invalid_query")
        .await;
    op.expect("/v1/events?limit=0", None, "422 invalid_query")
        .await;
    op.expect("/v1/events?page=2", None, "422 invalid_query")
        .await;
    // A client at its cap of waiting readers (one here, held by the test) is refused a second.
    let hub = approval_resume::delivery::EventsHub::start_with_caps(
        approval_resume::storage::Database::direct(app.pool.clone()),
        Duration::from_millis(25),
        Duration::from_secs(5),
        approval_resume::delivery::FeedCaps {
            per_client: 1,
            per_instance: 1,
        },
    );
    let capped = app.with_state(AppState {
        events: hub.clone(),
        ..app.state.clone()
    });
    let held = hub.feed_waiter("default", "admin").unwrap();
    let key = Some(app.admin_key.as_str());
    op.expect_on(
        &capped,
        key,
        "/v1/events?wait=1",
        None,
        "429 too_many_waiting_readers",
    )
    .await;
    drop(held);
    op.provoke_auth_errors("/v1/events", None).await;
    op.provoke_server_errors("/v1/events", None).await;
    op.assert_every_documented_answer_was_seen();
}

#[tokio::test]
async fn creating_a_webhook_answers_as_documented() {
    let (_database, pool) = TestDatabase::create().await;
    let app = app(pool).await;
    let op = Op::new(&app, Method::POST, "/v1/webhooks");
    let body = json!({"url": "http://127.0.0.1:9/hook", "event_types": ["run.resumed"]});
    op.expect("/v1/webhooks", body.clone(), "201").await;
    op.expect(
        "/v1/webhooks",
        json!({"url": "http://10.0.0.1/hook"}),
        "201",
    )
    .await;
    op.expect(
        "/v1/webhooks",
        json!({"url": "ftp://example.com/"}),
        "422 invalid_subscription",
    )
    .await;
    op.expect(
        "/v1/webhooks",
        json!({"url": "https://example.com/", "colour": "red"}),
        "422 invalid_body",
    )
    .await;
    op.expect(
        "/v1/webhooks",
        json!({"url": "http://no-such-host.invalid/hook"}),
        "422 webhook_url_refused",
    )
    .await;
    op.provoke_auth_errors("/v1/webhooks", Some(body.clone()))
        .await;
    op.provoke_server_errors("/v1/webhooks", Some(body.clone()))
        .await;
    op.provoke_body_errors("/v1/webhooks").await;
    // Up to the tenant's cap, then no more.
    let most = crate::support::webhook_policy().max_per_tenant;
    let existing = app.get("/v1/webhooks").await.body["subscriptions"]
        .as_array()
        .unwrap()
        .len() as i64;
    for _ in existing..most {
        op.expect("/v1/webhooks", body.clone(), "201").await;
    }
    op.expect("/v1/webhooks", body, "409 too_many_subscriptions")
        .await;
    op.assert_every_documented_answer_was_seen();
}

#[tokio::test]
async fn rotating_a_webhook_secret_answers_as_documented() {
    let (_database, pool) = TestDatabase::create().await;
    let app = app(pool).await;
    let op = Op::new(&app, Method::POST, "/v1/webhooks/{id}/rotate-secret");
    let created = app
        .post("/v1/webhooks", json!({"url": "http://127.0.0.1:9/hook"}))
        .await;
    let path = format!(
        "/v1/webhooks/{}/rotate-secret",
        created.body["id"].as_str().unwrap()
    );
    let rotated = op.expect(&path, json!({"overlap_secs": 60}), "200").await;
    assert_ne!(rotated.body["secret"], created.body["secret"]);
    op.expect(&path, json!({}), "200").await;
    op.expect(
        &path,
        json!({"overlap_secs": 10_000_000}),
        "422 invalid_overlap",
    )
    .await;
    op.expect(&path, json!({"overlap": 1}), "422 invalid_body")
        .await;
    op.expect(
        &format!("/v1/webhooks/{}/rotate-secret", Uuid::new_v4()),
        json!({}),
        "404 not_found",
    )
    .await;
    op.expect(
        "/v1/webhooks/nope/rotate-secret",
        json!({}),
        "404 not_found",
    )
    .await;
    op.provoke_auth_errors(&path, Some(json!({}))).await;
    op.provoke_server_errors(&path, Some(json!({}))).await;
    op.provoke_body_errors(&path).await;
    op.assert_every_documented_answer_was_seen();
}

#[tokio::test]
async fn listing_webhooks_answers_as_documented() {
    let (_database, pool) = TestDatabase::create().await;
    let app = app(pool).await;
    let op = Op::new(&app, Method::GET, "/v1/webhooks");
    let empty = op.expect("/v1/webhooks", None, "200").await;
    assert_eq!(empty.body["subscriptions"], json!([]));
    let created = app
        .post("/v1/webhooks", json!({"url": "http://127.0.0.1:9/hook"}))
        .await;
    assert_eq!(created.status, 201);
    let listed = op.expect("/v1/webhooks", None, "200").await;
    assert_eq!(listed.body["subscriptions"].as_array().unwrap().len(), 1);
    op.provoke_auth_errors("/v1/webhooks", None).await;
    op.provoke_server_errors("/v1/webhooks", None).await;
    op.assert_every_documented_answer_was_seen();
}

#[tokio::test]
async fn removing_a_webhook_answers_as_documented() {
    let (_database, pool) = TestDatabase::create().await;
    let app = app(pool).await;
    let op = Op::new(&app, Method::DELETE, "/v1/webhooks/{id}");
    let created = app
        .post("/v1/webhooks", json!({"url": "http://127.0.0.1:9/hook"}))
        .await;
    let path = format!("/v1/webhooks/{}", created.body["id"].as_str().unwrap());
    op.provoke_auth_errors(&path, None).await;
    op.provoke_server_errors(&path, None).await;
    // The removal whose request timed out still completed: remove another one.
    let created = app
        .post("/v1/webhooks", json!({"url": "http://127.0.0.1:9/other"}))
        .await;
    let path = format!("/v1/webhooks/{}", created.body["id"].as_str().unwrap());
    op.expect(&path, None, "204").await;
    op.expect(&path, None, "404 not_found").await;
    op.expect("/v1/webhooks/nope", None, "404 not_found").await;
    op.assert_every_documented_answer_was_seen();
}

#[test]
fn the_webhook_payload_is_documented_as_the_event_schema() {
    let operation = &spec()["webhooks"]["runEvent"]["post"];
    let schema = &operation["requestBody"]["content"]["application/json"]["schema"];
    assert_eq!(schema["$ref"], "#/components/schemas/Event");
    let headers: BTreeSet<&str> = operation["parameters"]
        .as_array()
        .unwrap()
        .iter()
        .map(|parameter| parameter["name"].as_str().unwrap())
        .collect();
    assert_eq!(
        headers,
        BTreeSet::from(["webhook-id", "webhook-timestamp", "webhook-signature"])
    );
    // A real event of the feed fits the schema a receiver is told to expect.
    let event = json!({
        "id": "evt_0123456789abcdef0123456789abcdef", "type": "run.resumed",
        "timestamp": "2026-12-03T12:00:00Z",
        "data": {"run_id": "6c0f1d2e-0000-4000-8000-000000000000", "tenant": "default", "status": "resumed",
                 "format": "openai-chat",
                 "turn": {"index": 0, "digest": "f3e51cfe10310ecf575b434e7e3f57607a4d5486849fcac084e7c86b27f8527b"},
                 "decision": {"approved": false, "decided_by": "run_owner", "decider_uid": 7},
                 "outcomes": {"denied": 2}},
    });
    assert!(schema_errors(schema, &event).is_empty());
    let mut leaky = event.clone();
    leaky["data"]["arguments"] = json!("{}");
    assert!(
        !schema_errors(schema, &leaky).is_empty(),
        "the schema admits no other member"
    );
}

// Encryption at rest.

/// 500 `undecryptable` (docs/design.md §11): a run whose values were sealed under a key that this instance holds under
/// the same id with other bytes (a key replaced without `keys rotate`). Provoked last in each test, since the run
/// stays in the tenant (the inbox would answer 500 for it from then on).
async fn provoke_undecryptable(op: &Op<'_>, app: &TestApp) {
    let sealing = crate::encryption::with_keys(app, crate::encryption::OLD_KEYS);
    let other = crate::encryption::with_keys(app, crate::encryption::OTHER_KEY);
    let id = Uuid::new_v4();
    let mut registration = with(run_body(id, 7), "privacy_level", json!("full"));
    if op.template == "/v1/runs/{id}/claim" {
        // Only a released turn is claimed, and its claim answers the released calls' sealed arguments.
        registration["tools"] = json!([
            {"name": "update_page_metadata", "effect": "write", "executor": "worker"},
            {"name": "read_page", "effect": "read", "executor": "worker"},
        ]);
    }
    let registered = sealing.register(registration.clone()).await;
    let digest = registered["turn"]["digest"].as_str().unwrap().to_owned();
    let run = format!("/v1/runs/{id}");
    let (path, body) = match op.template {
        "/v1/runs" => ("/v1/runs".to_owned(), Some(registration)),
        "/v1/runs/{id}" => (run, None),
        "/v1/runs/{id}/decision" => (
            format!("{run}/decision"),
            Some(decision(false, Some(7), &digest)),
        ),
        "/v1/runs/{id}/cancel" => (format!("{run}/cancel"), None),
        "/v1/runs/{id}/claim" => {
            assert_ok(&sealing.decide(id, true, Some(7), &digest).await);
            (format!("{run}/claim"), Some(json!({})))
        }
        "/v1/approvals" => ("/v1/approvals?acting_uid=7".to_owned(), None),
        // The rest need the turn decided.
        template => {
            assert_ok(&sealing.decide(id, false, Some(7), &digest).await);
            let path = template.replace("{id}", &id.to_string());
            let body = (template == "/v1/runs/{id}/turns").then(|| {
                json!({"messages": [
                    {"role": "user", "content": "Again."},
                    {"role": "assistant", "content": null,
                     "tool_calls": [call("call_9", "update_page_metadata", "{}")]},
                ]})
            });
            let body = body.or_else(|| {
                (template == "/v1/runs/{id}/results").then(|| {
                    json!({"results": [{"call_id": "call_1", "content": "x", "is_error": false}]})
                })
            });
            (path, body)
        }
    };
    op.expect_on(
        &other,
        Some(&app.admin_key),
        &path,
        body,
        "500 undecryptable",
    )
    .await;
}

/// The page's path of a link's URL, below the test instance's PUBLIC_URL.
fn page_path(url: &Value) -> String {
    let url = url.as_str().expect("a link's url");
    url.strip_prefix(crate::shared::app::PUBLIC_URL)
        .expect("a link starts with PUBLIC_URL")
        .to_owned()
}

#[tokio::test]
async fn making_and_revoking_a_link_answers_as_documented() {
    let (_database, pool) = TestDatabase::create().await;
    let app = app(pool).await;
    let (run_id, digest) = owned_run(&app).await;
    app.user(8, false, false, false).await;
    app.user(9, false, false, true).await;
    let op = Op::new(&app, Method::POST, "/v1/runs/{id}/links");
    let path = format!("/v1/runs/{run_id}/links");
    let answer = op.expect(&path, json!({"uid": 7}), "201").await;
    assert!(answer.body["url"].as_str().unwrap().contains("/approve/"));
    op.expect(&path, json!({"uid": 8}), "403 decider_not_permitted")
        .await;
    op.expect(&path, json!({"uid": 9}), "403 decider_disabled")
        .await;
    op.expect(&path, json!({"uid": 99}), "403 unknown_decider")
        .await;
    op.expect(&path, json!({"uid": 0}), "422 invalid_uid").await;
    op.expect(&path, json!({"uid": "7"}), "422 invalid_body")
        .await;
    let elsewhere = format!("/v1/runs/{}/links", Uuid::new_v4());
    op.expect(&elsewhere, json!({"uid": 7}), "404 not_found")
        .await;
    let unset = app.built(app.pool.clone(), {
        let mut wiring = app.wiring();
        wiring.links = approval_resume::approval_links::LinkSettings::unset();
        wiring
    });
    let key = Some(app.admin_key.as_str());
    op.expect_on(
        &unset,
        key,
        &path,
        Some(json!({"uid": 7})),
        "409 public_url_unset",
    )
    .await;
    op.provoke_body_errors(&path).await;
    op.provoke_auth_errors(&path, Some(json!({"uid": 7}))).await;
    op.provoke_server_errors(&path, Some(json!({"uid": 7})))
        .await;
    let deny = json!({"decider_uid": 7, "approved": false, "turn_digest": digest});
    let decided = app
        .call(
            Method::POST,
            &format!("/v1/runs/{run_id}/decision"),
            key,
            Some(deny),
        )
        .await;
    assert_eq!(decided.status, 200);
    op.expect(&path, json!({"uid": 7}), "409 not_awaiting_approval")
        .await;
    op.assert_every_documented_answer_was_seen();
}

#[tokio::test]
async fn revoking_a_link_answers_as_documented() {
    let (_database, pool) = TestDatabase::create().await;
    let app = app(pool).await;
    let (run_id, _) = owned_run(&app).await;
    let key = Some(app.admin_key.as_str());
    let made = app
        .call(
            Method::POST,
            &format!("/v1/runs/{run_id}/links"),
            key,
            Some(json!({"uid": 7})),
        )
        .await;
    let link_id = made.body["id"].as_str().unwrap().to_owned();
    let op = Op::new(&app, Method::DELETE, "/v1/runs/{id}/links/{link_id}");
    let path = format!("/v1/runs/{run_id}/links/{link_id}");
    op.expect(&path, None, "204").await;
    op.expect(&path, None, "204").await;
    let unknown = format!("/v1/runs/{run_id}/links/{}", Uuid::new_v4());
    op.expect(&unknown, None, "404 not_found").await;
    op.provoke_auth_errors(&path, None).await;
    op.provoke_server_errors(&path, None).await;
    op.assert_every_documented_answer_was_seen();
}

#[tokio::test]
async fn the_approval_page_answers_as_documented() {
    let (_database, pool) = TestDatabase::create().await;
    let app = app(pool).await;
    let (run_id, _) = owned_run(&app).await;
    let key = Some(app.admin_key.as_str());
    let make = |uid: i64| {
        let path = format!("/v1/runs/{run_id}/links");
        let app = &app;
        async move {
            let answer = app
                .call(Method::POST, &path, key, Some(json!({"uid": uid})))
                .await;
            assert_eq!(answer.status, 201, "{:?}", answer.body);
            page_path(&answer.body["url"])
        }
    };
    let page = make(7).await;
    let shown = Op::new(&app, Method::GET, "/approve/{run_id}/{secret}");
    let form = shown.expect(&page, None, "200").await;
    let html = String::from_utf8(form.bytes.clone()).unwrap();
    let nonce = Regex::new(r#"name="nonce" value="([0-9a-f]{32})""#)
        .unwrap()
        .captures(&html)
        .expect("the form carries its nonce")[1]
        .to_owned();
    let unknown = format!("/approve/{run_id}/{}", "A".repeat(43));
    shown.expect(&unknown, None, "410").await;
    shown
        .expect(
            &format!("/approve/not-a-run/{}", "A".repeat(43)),
            None,
            "410",
        )
        .await;
    let broken = app.with_pool(pool_without_tables(&app.pool));
    shown
        .expect_on(&broken, None, &page, None, "500 internal")
        .await;
    let unavailable = app.with_pool(closed_pool(&app.pool).await);
    shown
        .expect_on(&unavailable, None, &page, None, "503 database_unavailable")
        .await;

    let submitted = Op::new(&app, Method::POST, "/approve/{run_id}/{secret}");
    let post = |path: String, origin: Option<&'static str>, body: String| {
        let app = &app;
        let submitted = &submitted;
        async move {
            let mut request = Request::builder()
                .method(Method::POST)
                .uri(&path)
                .header("content-type", "application/x-www-form-urlencoded");
            if let Some(origin) = origin {
                request = request.header("origin", origin);
            }
            let answer = app.send(request.body(Body::from(body)).unwrap()).await;
            submitted.check(&path, None, &answer);
            answer
        }
    };
    let origin = Some(crate::shared::app::PUBLIC_URL);
    let deny = format!("nonce={nonce}&action=deny");
    let status = |answer: &Answer| answer.status.as_u16();
    assert_eq!(status(&post(page.clone(), None, deny.clone()).await), 403);
    let elsewhere = Some("http://evil.test");
    assert_eq!(
        status(&post(page.clone(), elsewhere, deny.clone()).await),
        403
    );
    let wrong_nonce = format!("nonce={}&action=deny", "0".repeat(32));
    assert_eq!(status(&post(page.clone(), origin, wrong_nonce).await), 403);
    let nothing = format!("nonce={nonce}&action=shrug");
    assert_eq!(status(&post(page.clone(), origin, nothing).await), 422);
    assert_eq!(
        status(&post(unknown.clone(), origin, deny.clone()).await),
        410
    );
    let answer = post(page.clone(), origin, deny.clone()).await;
    assert_eq!(status(&answer), 303);
    assert_eq!(answer.headers["location"], "?decided");
    assert_eq!(status(&post(page.clone(), origin, deny.clone()).await), 410);
    let after = shown.expect(&page, None, "200").await;
    assert!(String::from_utf8_lossy(&after.bytes).contains("Denied by you."));

    // A second run: the owner of a four-eyes run is refused an approval; a person who lost the right is refused.
    let four_eyes = Uuid::new_v4();
    let body = with(
        run_body(four_eyes, 7),
        "require_second_approver",
        json!(true),
    );
    app.register(body).await;
    let answer = app
        .call(
            Method::POST,
            &format!("/v1/runs/{four_eyes}/links"),
            key,
            Some(json!({"uid": 7})),
        )
        .await;
    let page = page_path(&answer.body["url"]);
    let html = String::from_utf8(shown.expect(&page, None, "200").await.bytes).unwrap();
    assert!(
        !html.contains(r#"value="approve""#),
        "no Approve on a four-eyes run for its owner"
    );
    let nonce = Regex::new(r#"name="nonce" value="([0-9a-f]{32})""#)
        .unwrap()
        .captures(&html)
        .unwrap()[1]
        .to_owned();
    let approve = format!("nonce={nonce}&action=approve");
    assert_eq!(status(&post(page.clone(), origin, approve).await), 403);
    app.user(7, false, false, true).await;
    shown.expect(&page, None, "403").await;
    app.user(7, false, false, false).await;
    // The layers around every route answer a page's timeout and a full body budget as on any route.
    let holder = lock(
        &app.pool,
        "lock table approval_links in access exclusive mode",
    )
    .await;
    let slow = impatient(&app);
    shown
        .expect_on(&slow, None, &page, None, "503 timeout")
        .await;
    let request = Request::builder()
        .method(Method::POST)
        .uri(&page)
        .header("content-type", "application/x-www-form-urlencoded")
        .header("origin", crate::shared::app::PUBLIC_URL)
        .body(Body::from(format!("nonce={nonce}&action=deny")))
        .unwrap();
    let answer = slow.send(request).await;
    submitted.check(&page, None, &answer);
    assert_answer(&answer, "503 timeout", "a page's post that waits too long");
    holder.rollback().await.unwrap();
    let starved = with_limits(
        &app,
        Limits {
            body_bytes_in_flight: Some(1024),
            large_bodies_at_once: None,
            ..app.state.limits
        },
    );
    let padded = Body::from(format!(
        "nonce={nonce}&action=deny&padding={}",
        "x".repeat(2048)
    ));
    let request = Request::builder()
        .method(Method::POST)
        .uri(&page)
        .header("content-type", "application/x-www-form-urlencoded")
        .header("origin", crate::shared::app::PUBLIC_URL)
        .body(padded)
        .unwrap();
    let answer = starved.send(request).await;
    submitted.check(&page, None, &answer);
    assert_answer(
        &answer,
        "503 too_many_body_bytes",
        "a page's post beyond the budget",
    );
    let unavailable = app.with_pool(closed_pool(&app.pool).await);
    let request = Request::builder()
        .method(Method::POST)
        .uri(&page)
        .header("content-type", "application/x-www-form-urlencoded")
        .header("origin", crate::shared::app::PUBLIC_URL)
        .body(Body::from(format!("nonce={nonce}&action=deny")))
        .unwrap();
    let answer = unavailable.send(request).await;
    submitted.check(&page, None, &answer);
    assert_eq!(answer.status, 503);
    let broken = app.with_pool(pool_without_tables(&app.pool));
    let request = Request::builder()
        .method(Method::POST)
        .uri(&page)
        .header("content-type", "application/x-www-form-urlencoded")
        .header("origin", crate::shared::app::PUBLIC_URL)
        .body(Body::from(format!("nonce={nonce}&action=deny")))
        .unwrap();
    let answer = broken.send(request).await;
    submitted.check(&page, None, &answer);
    assert_eq!(answer.status, 500);
    shown.assert_every_documented_answer_was_seen();
}
