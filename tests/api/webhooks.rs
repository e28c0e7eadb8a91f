//! Webhooks (docs/design.md §10): subscriptions through the API, and deliveries to real HTTP receivers on loopback:
//! signed per Standard Webhooks, in order, retried with backoff, taken over when an instance dies, and refused
//! where a URL must not reach.

use std::collections::{HashMap, HashSet};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use approval_resume::delivery::EventsHub;
use approval_resume::delivery::webhooks::{self, Settings, deliver};
use approval_resume::storage::Database;
use axum::body::Bytes;
use axum::extract::State;
use axum::http::{HeaderMap, Method, StatusCode};
use axum::response::{IntoResponse, Response};
use serde_json::{Value, json};
use sqlx::PgPool;
use uuid::Uuid;

use crate::database::TestDatabase;
use crate::support::{self, TestApp};

/// What a receiver does with its n-th request (from 0).
#[derive(Clone, Copy, Debug)]
pub enum Reply {
    Status(u16),
    /// Answers after this long (past the delivery timeout: the attempt times out).
    After(Duration, u16),
    /// Never answers.
    Hang,
    /// A redirect to this path of the same receiver.
    Redirect(&'static str),
}

/// One request a receiver got.
#[derive(Debug, Clone)]
pub struct Received {
    pub headers: HeaderMap,
    pub body: Vec<u8>,
    pub at: Instant,
    pub path: String,
}

impl Received {
    pub fn json(&self) -> Value {
        serde_json::from_slice(&self.body).unwrap()
    }

    pub fn header(&self, name: &str) -> &str {
        self.headers.get(name).unwrap().to_str().unwrap()
    }
}

type Script = Arc<dyn Fn(usize) -> Reply + Send + Sync>;

#[derive(Clone)]
struct ReceiverState {
    received: Arc<Mutex<Vec<Received>>>,
    script: Script,
    in_flight: Arc<AtomicUsize>,
    most_in_flight: Arc<AtomicUsize>,
    /// Requests in flight per run (the event's `data.run_id`), and whether one run ever had two at once.
    runs_in_flight: Arc<Mutex<HashMap<String, usize>>>,
    run_overlapped: Arc<std::sync::atomic::AtomicBool>,
}

/// An HTTP receiver on loopback that records every request and answers by its script.
pub struct Receiver {
    pub url: String,
    state: ReceiverState,
    server: tokio::task::JoinHandle<()>,
}

impl Receiver {
    pub async fn start(script: impl Fn(usize) -> Reply + Send + Sync + 'static) -> Receiver {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        Self::serve(listener, script)
    }

    /// A receiver on a port chosen beforehand (a subscription may point there before anything listens).
    pub async fn start_on(
        port: u16,
        script: impl Fn(usize) -> Reply + Send + Sync + 'static,
    ) -> Receiver {
        let listener = tokio::net::TcpListener::bind(("127.0.0.1", port))
            .await
            .unwrap();
        Self::serve(listener, script)
    }

    fn serve(
        listener: tokio::net::TcpListener,
        script: impl Fn(usize) -> Reply + Send + Sync + 'static,
    ) -> Receiver {
        let url = format!("http://{}/hook", listener.local_addr().unwrap());
        let state = ReceiverState {
            received: Arc::default(),
            script: Arc::new(script),
            in_flight: Arc::default(),
            most_in_flight: Arc::default(),
            runs_in_flight: Arc::default(),
            run_overlapped: Arc::default(),
        };
        let router = axum::Router::new()
            .fallback(receive)
            .with_state(state.clone());
        let server = tokio::spawn(async move {
            axum::serve(listener, router).await.unwrap();
        });
        Receiver { url, state, server }
    }

    pub fn received(&self) -> Vec<Received> {
        self.state.received.lock().unwrap().clone()
    }

    /// Waits until the receiver has accepted (answered 2xx in time) `accepted` requests; returns those it has.
    pub async fn wait_for(&self, accepted: usize, within: Duration) -> Vec<Received> {
        let deadline = Instant::now() + within;
        loop {
            let got: Vec<Received> = self.accepted();
            if got.len() >= accepted || Instant::now() > deadline {
                return got;
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }

    /// Waits until `requests` requests arrived, answered or not (a hanging receiver's too), or `within` passed.
    pub async fn wait_for_requests(&self, requests: usize, within: Duration) -> Vec<Received> {
        let deadline = Instant::now() + within;
        loop {
            let got = self.received();
            if got.len() >= requests || Instant::now() > deadline {
                return got;
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }

    fn accepted(&self) -> Vec<Received> {
        let received = self.received();
        received
            .iter()
            .enumerate()
            .filter(|(n, _)| match (self.state.script)(*n) {
                Reply::Status(status) => (200..300).contains(&status),
                // Answered within the tests' delivery timeout (`settings`).
                Reply::After(delay, status) => {
                    delay < settings().limits.timeout && (200..300).contains(&status)
                }
                Reply::Hang | Reply::Redirect(_) => false,
            })
            .map(|(_, request)| request.clone())
            .collect()
    }

    pub fn most_in_flight(&self) -> usize {
        self.state.most_in_flight.load(Ordering::SeqCst)
    }

    /// Whether two requests of one run were ever in flight at once.
    pub fn run_overlapped(&self) -> bool {
        self.state.run_overlapped.load(Ordering::SeqCst)
    }
}

impl Drop for Receiver {
    fn drop(&mut self) {
        self.server.abort();
    }
}

async fn receive(State(state): State<ReceiverState>, request: axum::extract::Request) -> Response {
    let path = request.uri().path().to_owned();
    let headers = request.headers().clone();
    let body: Bytes = axum::body::to_bytes(request.into_body(), usize::MAX)
        .await
        .unwrap();
    let n = {
        let mut received = state.received.lock().unwrap();
        received.push(Received {
            headers,
            body: body.to_vec(),
            at: Instant::now(),
            path,
        });
        received.len() - 1
    };
    let now = state.in_flight.fetch_add(1, Ordering::SeqCst) + 1;
    state.most_in_flight.fetch_max(now, Ordering::SeqCst);
    let run = serde_json::from_slice::<Value>(&body)
        .ok()
        .and_then(|event| event["data"]["run_id"].as_str().map(str::to_owned))
        .unwrap_or_default();
    {
        let mut runs = state.runs_in_flight.lock().unwrap();
        let count = runs.entry(run.clone()).or_default();
        *count += 1;
        if *count > 1 {
            state.run_overlapped.store(true, Ordering::SeqCst);
        }
    }
    let _run_done = RunDone {
        runs: Arc::clone(&state.runs_in_flight),
        run,
    };
    let reply = (state.script)(n);
    let status = match reply {
        Reply::Status(status) => status,
        Reply::After(delay, status) => {
            tokio::time::sleep(delay).await;
            status
        }
        Reply::Hang => {
            tokio::time::sleep(Duration::from_secs(3600)).await;
            200
        }
        Reply::Redirect(to) => {
            state.in_flight.fetch_sub(1, Ordering::SeqCst);
            return (StatusCode::FOUND, [("location", to)]).into_response();
        }
    };
    state.in_flight.fetch_sub(1, Ordering::SeqCst);
    StatusCode::from_u16(status).unwrap().into_response()
}

/// Delivery settings for tests: loopback allowed, a short timeout, lease and backoff.
pub fn settings() -> Settings {
    Settings {
        concurrency: 4,
        requests_per_subscription: 4,
        lease: Duration::from_secs(2),
        limits: deliver::Limits {
            timeout: Duration::from_millis(500),
            max_response_bytes: 4096,
            allow_private: true,
        },
        backoff_base: Duration::from_millis(100),
        backoff_max: Duration::from_millis(800),
        retry_window: Duration::from_secs(3600),
        sweep_interval: Duration::from_millis(50),
        max_hold: Duration::from_millis(500),
    }
}

/// Counts a request of its run out of flight when its answer is sent (or its handler dropped).
struct RunDone {
    runs: Arc<Mutex<HashMap<String, usize>>>,
    run: String,
}

impl Drop for RunDone {
    fn drop(&mut self) {
        if let Some(count) = self.runs.lock().unwrap().get_mut(&self.run) {
            *count -= 1;
        }
    }
}

/// A running dispatcher; dropping it stops claiming.
pub struct Dispatcher {
    _stop: tokio::sync::watch::Sender<bool>,
}

pub fn dispatch(pool: &PgPool, settings: Settings) -> Dispatcher {
    dispatch_on(Database::direct(pool.clone()), settings)
}

/// A dispatcher on this database handle (with its keys, if any).
pub fn dispatch_on(database: Database, settings: Settings) -> Dispatcher {
    let (stop, stopped) = tokio::sync::watch::channel(false);
    let hub = support::events_hub(database.pool());
    webhooks::spawn(database, hub, settings, stopped).unwrap();
    Dispatcher { _stop: stop }
}

/// Subscribes through the API; returns the subscription's id and its secret.
pub async fn subscribe(app: &TestApp, url: &str, event_types: Option<&[&str]>) -> (String, String) {
    let mut body = json!({"url": url});
    if let Some(types) = event_types {
        body["event_types"] = json!(types);
    }
    let answer = app.post("/v1/webhooks", body).await;
    assert_eq!(answer.status, StatusCode::CREATED, "{:?}", answer.body);
    (
        answer.body["id"].as_str().unwrap().to_owned(),
        answer.body["secret"].as_str().unwrap().to_owned(),
    )
}

/// Registers `count` runs of owner 7 and denies each; returns their ids in order.
pub async fn deny_runs(app: &TestApp, count: usize) -> Vec<Uuid> {
    app.user(7, false, false, false).await;
    let mut ids = Vec::new();
    for _ in 0..count {
        let (id, digest) = support::owned_run(app).await;
        assert_eq!(
            app.decide(id, false, Some(7), &digest).await.status,
            StatusCode::OK
        );
        ids.push(id);
    }
    ids
}

pub fn verify(secret: &str, request: &Received) {
    standardwebhooks::Webhook::new(secret)
        .unwrap()
        .verify(&request.body, &request.headers)
        .expect("the signature verifies with the Standard Webhooks library");
    assert_eq!(request.header("webhook-id"), request.json()["id"]);
    assert_eq!(request.header("content-type"), "application/json");
}

/// Each run's event types in the order received.
fn kinds_by_run(requests: &[Received]) -> HashMap<String, Vec<String>> {
    let mut by_run: HashMap<String, Vec<String>> = HashMap::new();
    for request in requests {
        let event = request.json();
        by_run
            .entry(event["data"]["run_id"].as_str().unwrap().to_owned())
            .or_default()
            .push(event["type"].as_str().unwrap().to_owned());
    }
    by_run
}

pub async fn listed(app: &TestApp) -> Vec<Value> {
    let answer = app.get("/v1/webhooks").await;
    assert_eq!(answer.status, StatusCode::OK);
    answer.body["subscriptions"].as_array().unwrap().clone()
}

#[tokio::test]
async fn a_subscription_s_secret_is_shown_at_creation_only_and_only_its_tenant_sees_it() {
    let (_database, pool) = TestDatabase::create().await;
    let app = support::app(pool.clone()).await;
    let (id, secret) = subscribe(&app, "http://127.0.0.1:9/approval", Some(&["run.resumed"])).await;
    assert!(secret.starts_with("whsec_"), "{secret}");

    let list = listed(&app).await;
    assert_eq!(list.len(), 1);
    assert_eq!(list[0]["id"], id);
    assert_eq!(list[0]["event_types"], json!(["run.resumed"]));
    assert_eq!(list[0]["state"], "active");
    assert_eq!(list[0]["backlog"], 0);
    let text = serde_json::to_string(&list).unwrap();
    assert!(
        !text.contains(&secret) && !text.contains("whsec_") && list[0].get("secret").is_none(),
        "{text}"
    );

    let stranger = support::add_client(&pool, "stranger", "elsewhere", &["webhooks:write"]).await;
    let theirs = app
        .call(Method::GET, "/v1/webhooks", Some(&stranger), None)
        .await;
    assert_eq!(theirs.body["subscriptions"], json!([]));
    let removed = app
        .call(
            Method::DELETE,
            &format!("/v1/webhooks/{id}"),
            Some(&stranger),
            None,
        )
        .await;
    support::assert_problem(&removed, StatusCode::NOT_FOUND, "not_found");

    let removed = app
        .call(
            Method::DELETE,
            &format!("/v1/webhooks/{id}"),
            Some(&app.admin_key),
            None,
        )
        .await;
    assert_eq!(removed.status, StatusCode::NO_CONTENT);
    assert!(listed(&app).await.is_empty());
    let again = app
        .call(
            Method::DELETE,
            &format!("/v1/webhooks/{id}"),
            Some(&app.admin_key),
            None,
        )
        .await;
    support::assert_problem(&again, StatusCode::NOT_FOUND, "not_found");
}

#[tokio::test]
async fn a_subscription_is_refused_for_a_url_that_is_not_http_or_an_unknown_event_type() {
    let (_database, pool) = TestDatabase::create().await;
    let app = support::app(pool).await;
    for body in [
        json!({"url": "file:///etc/passwd"}),
        json!({"url": "gopher://example.com/"}),
        json!({"url": "not a url"}),
        json!({"url": "https://user:pw@example.com/"}),
        json!({"url": "https://example.com/", "event_types": ["run.deleted"]}),
        json!({"url": "https://example.com/", "event_types": []}),
    ] {
        let answer = app.post("/v1/webhooks", body.clone()).await;
        support::assert_problem(
            &answer,
            StatusCode::UNPROCESSABLE_ENTITY,
            "invalid_subscription",
        );
    }
    assert!(listed(&app).await.is_empty());
}

#[tokio::test]
async fn a_url_that_is_or_resolves_to_an_internal_address_is_refused_at_creation_without_saying_which()
 {
    let (_database, pool) = TestDatabase::create().await;
    let app = support::app(pool).await;
    let refusing = app.with_state(approval_resume::state::AppState {
        webhooks: webhooks::subscription::Policy {
            allow_private: false,
            ..support::webhook_policy()
        },
        ..app.state.clone()
    });
    for url in [
        "http://127.0.0.1:9000/hook",
        "http://localhost:9000/hook",
        "http://192.0.0.170/hook",
        "http://[::127.0.0.1]/hook",
        "http://[::ffff:10.0.0.1]/hook",
        "http://[2002:a9fe:a9fe::1]/hook",
        "http://[64:ff9b:1::a9fe:a9fe]/hook",
        "http://[2001:0:4136:e378:8000:63bf:3fff:fdd2]/hook",
        "http://no-such-host.invalid/hook",
    ] {
        let answer = refusing.post("/v1/webhooks", json!({"url": url})).await;
        support::assert_problem(
            &answer,
            StatusCode::UNPROCESSABLE_ENTITY,
            "webhook_url_refused",
        );
        let detail = answer.body["detail"].as_str().unwrap();
        assert_eq!(detail, webhooks::ssrf::REFUSED, "{url}");
        // What an operator may change, named; never the address.
        assert!(
            detail.contains("WEBHOOK_ALLOW_PRIVATE_ADDRESSES=true"),
            "{detail}"
        );
    }
    assert!(listed(&refusing).await.is_empty());
    // The test setting that lets receivers live on loopback lets them be created there too.
    subscribe(&app, "http://localhost:9000/hook", None).await;
    subscribe(&app, "http://127.0.0.1:9000/hook", None).await;
}

#[tokio::test]
async fn events_reach_each_subscription_signed_once_each_in_order_one_attempt_at_a_time() {
    let (database, pool) = TestDatabase::create().await;
    let app = support::app(pool.clone()).await;
    // Slow enough answers that two instances would overlap if both delivered one subscription.
    let all = Receiver::start(|_| Reply::After(Duration::from_millis(5), 204)).await;
    let resumed_only = Receiver::start(|_| Reply::Status(200)).await;
    let (_, all_secret) = subscribe(&app, &all.url, None).await;
    let (_, resumed_secret) = subscribe(&app, &resumed_only.url, Some(&["run.resumed"])).await;
    // Two instances deliver together, each sending one request of a subscription at a time: two in flight at once
    // would be both instances holding it.
    let one_by_one = Settings {
        requests_per_subscription: 1,
        ..settings()
    };
    let _first = dispatch(&pool, one_by_one.clone());
    let _second = dispatch(&database.pool(4).await, one_by_one);

    let runs = deny_runs(&app, 6).await;
    let got = all.wait_for(12, Duration::from_secs(20)).await;
    let resumed = resumed_only.wait_for(6, Duration::from_secs(20)).await;
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert_eq!(all.received().len(), 12, "each event once");
    assert_eq!(resumed_only.received().len(), 6);
    for request in &got {
        verify(&all_secret, request);
    }
    for request in &resumed {
        verify(&resumed_secret, request);
        assert_eq!(request.json()["type"], "run.resumed");
    }
    let by_run = kinds_by_run(&got);
    for run in &runs {
        assert_eq!(by_run[&run.to_string()], ["run.waiting", "run.resumed"]);
    }
    let ids: HashSet<String> = got
        .iter()
        .map(|r| r.header("webhook-id").to_owned())
        .collect();
    assert_eq!(ids.len(), 12);
    assert_eq!(
        all.most_in_flight(),
        1,
        "one attempt at a time per subscription"
    );
    assert_eq!(
        listed(&app)
            .await
            .iter()
            .map(|s| s["backlog"].as_i64().unwrap())
            .sum::<i64>(),
        0
    );
}

#[tokio::test]
async fn a_subscription_s_requests_overlap_up_to_its_limit_but_each_run_s_events_go_one_at_a_time_in_order()
 {
    let (_database, pool) = TestDatabase::create().await;
    let app = support::app(pool.clone()).await;
    let receiver = Receiver::start(|_| Reply::After(Duration::from_millis(100), 204)).await;
    let (_, secret) = subscribe(&app, &receiver.url, None).await;
    // A backlog first, in the feed's order run by run: waiting and resumed of the first run, then of the second...
    let runs = deny_runs(&app, 8).await;
    let _dispatcher = dispatch(&pool, settings());

    let got = receiver.wait_for(16, Duration::from_secs(20)).await;
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert_eq!(receiver.received().len(), 16, "each event once");
    assert_eq!(
        receiver.most_in_flight(),
        settings().requests_per_subscription,
        "the first event of each of four runs goes ahead of the second event of the first run"
    );
    assert!(
        !receiver.run_overlapped(),
        "never two requests of one run at once"
    );
    for request in &got {
        verify(&secret, request);
    }
    let by_run = kinds_by_run(&got);
    for run in &runs {
        assert_eq!(by_run[&run.to_string()], ["run.waiting", "run.resumed"]);
    }
    assert_eq!(listed(&app).await[0]["backlog"], 0);
}

#[tokio::test]
async fn a_failure_among_requests_in_flight_sends_the_events_from_it_again_and_loses_none() {
    let (_database, pool) = TestDatabase::create().await;
    let app = support::app(pool.clone()).await;
    // The second request fails; the others in flight with it succeed, but the cursor stays before the failed one.
    let receiver = Receiver::start(|n| match n {
        1 => Reply::After(Duration::from_millis(50), 500),
        _ => Reply::After(Duration::from_millis(50), 204),
    })
    .await;
    subscribe(&app, &receiver.url, None).await;
    let runs = deny_runs(&app, 4).await;
    let _dispatcher = dispatch(&pool, settings());

    let deadline = Instant::now() + Duration::from_secs(20);
    let first_arrivals = loop {
        // Each event's first accepted arrival, in the order they came.
        let mut seen = HashSet::new();
        let accepted: Vec<Received> = receiver
            .accepted()
            .into_iter()
            .filter(|r| seen.insert(r.header("webhook-id").to_owned()))
            .collect();
        if accepted.len() == 8 || Instant::now() > deadline {
            break accepted;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    };
    assert_eq!(first_arrivals.len(), 8, "every event is delivered");
    assert!(
        receiver.received().len() > 8,
        "events sent alongside the failed one are sent again"
    );
    let by_run = kinds_by_run(&first_arrivals);
    for run in &runs {
        assert_eq!(by_run[&run.to_string()], ["run.waiting", "run.resumed"]);
    }
    assert!(!receiver.run_overlapped());
}

#[tokio::test]
async fn an_instance_stopping_while_a_request_fails_records_the_failure_so_the_retry_keeps_its_backoff()
 {
    let (_database, pool) = TestDatabase::create().await;
    let app = support::app(pool.clone()).await;
    let receiver = Receiver::start(|_| Reply::After(Duration::from_millis(300), 500)).await;
    subscribe(&app, &receiver.url, None).await;
    deny_runs(&app, 1).await;
    let dispatcher = dispatch(&pool, settings());
    let deadline = Instant::now() + Duration::from_secs(10);
    while receiver.received().is_empty() && Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    // Stopped while the request is in flight: the instance waits for its answer, a failure, and records it.
    drop(dispatcher);
    let deadline = Instant::now() + Duration::from_secs(5);
    let listed = loop {
        let list = listed(&app).await;
        if list[0]["attempts"] != 0 || Instant::now() > deadline {
            break list;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    };
    assert_eq!(listed[0]["attempts"], 1, "{listed:?}");
    assert_eq!(listed[0]["last_error"], "the receiver answered 500");
    assert_eq!(listed[0]["backlog"], 2);
}

#[tokio::test]
async fn a_subscription_kept_through_a_stream_has_its_cursor_written_and_is_given_up_once_quiet() {
    let (_database, pool) = TestDatabase::create().await;
    let app = support::app(pool.clone()).await;
    let receiver = Receiver::start(|_| Reply::Status(204)).await;
    subscribe(&app, &receiver.url, None).await;
    let _dispatcher = dispatch(&pool, settings());

    let runs = deny_runs(&app, 10).await;
    let got = receiver.wait_for(20, Duration::from_secs(20)).await;
    assert_eq!(got.len(), 20);
    let by_run = kinds_by_run(&got);
    for run in &runs {
        assert_eq!(by_run[&run.to_string()], ["run.waiting", "run.resumed"]);
    }
    // Once the stream stops, the holder writes what it delivered and lets the subscription go.
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let (delivered, held): (i64, bool) = sqlx::query_as(
            "select delivered_total, lease_owner is not null from webhook_subscriptions",
        )
        .fetch_one(&pool)
        .await
        .unwrap();
        if delivered == 20 && !held {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "delivered_total {delivered}, still held: {held}"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert_eq!(receiver.received().len(), 20, "each event once");
    assert_eq!(listed(&app).await[0]["backlog"], 0);
}

#[tokio::test]
async fn a_stopping_instance_gives_its_subscriptions_up_at_once_and_another_goes_on_from_its_cursor()
 {
    let (database, pool) = TestDatabase::create().await;
    let app = support::app(pool.clone()).await;
    let receiver = Receiver::start(|_| Reply::Status(200)).await;
    let (_, secret) = subscribe(&app, &receiver.url, None).await;
    // A lease far longer than the test: only a release lets the second instance in.
    let long_lease = Settings {
        lease: Duration::from_secs(600),
        ..settings()
    };
    let first = dispatch(&pool, long_lease.clone());
    let mut runs = deny_runs(&app, 2).await;
    assert_eq!(receiver.wait_for(4, Duration::from_secs(20)).await.len(), 4);
    let owner = || async {
        sqlx::query_scalar::<_, Option<Uuid>>("select lease_owner from webhook_subscriptions")
            .fetch_one(&pool)
            .await
            .unwrap()
    };
    // Normally still held by the first instance, waiting for more (unless it was quiet long enough to let go).
    let first_owner = owner().await;

    drop(first);
    let _second = dispatch(&database.pool(4).await, long_lease);
    runs.extend(deny_runs(&app, 2).await);
    let got = receiver.wait_for(8, Duration::from_secs(20)).await;
    assert_eq!(got.len(), 8, "the second instance delivered the new events");
    if first_owner.is_some() {
        assert_ne!(
            owner().await,
            first_owner,
            "the stopped instance kept nothing"
        );
    }
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert_eq!(receiver.received().len(), 8, "each event once");
    for request in &got {
        verify(&secret, request);
    }
    let by_run = kinds_by_run(&got);
    for run in &runs {
        assert_eq!(by_run[&run.to_string()], ["run.waiting", "run.resumed"]);
    }
}

#[tokio::test]
async fn failed_deliveries_are_retried_with_growing_waits_and_a_receiver_that_comes_back_gets_everything()
 {
    let (_database, pool) = TestDatabase::create().await;
    let app = support::app(pool.clone()).await;
    // Nothing listens on the port at first: connections are refused.
    let port = support::free_port();
    let (_, secret) = subscribe(&app, &format!("http://127.0.0.1:{port}/hook"), None).await;
    // One request at a time, so that each attempt is of the first event (with several in flight, the first events
    // of the other runs would be tried alongside it).
    let _dispatcher = dispatch(
        &pool,
        Settings {
            requests_per_subscription: 1,
            ..settings()
        },
    );
    let runs = deny_runs(&app, 3).await;
    tokio::time::sleep(Duration::from_millis(700)).await;
    let refused = listed(&app).await;
    assert!(refused[0]["attempts"].as_i64().unwrap() >= 2, "{refused:?}");
    assert!(
        refused[0]["last_error"]
            .as_str()
            .unwrap()
            .starts_with("could not connect"),
        "{refused:?}"
    );
    assert_eq!(refused[0]["backlog"], 6);

    // Back, but answering 500 twice, then too slowly once, then well.
    let receiver = Receiver::start_on(port, |n| match n {
        0 | 1 => Reply::Status(500),
        2 => Reply::After(Duration::from_secs(2), 200),
        _ => Reply::Status(200),
    })
    .await;
    let got = receiver.wait_for(6, Duration::from_secs(30)).await;
    assert_eq!(
        got.len(),
        6,
        "every event arrives once the receiver is back"
    );
    let all = receiver.received();
    // The failed attempts were of the first event, sent again with the same id.
    let first_id = all[0].header("webhook-id").to_owned();
    for attempt in &all[..4] {
        assert_eq!(attempt.header("webhook-id"), first_id);
    }
    for request in &got {
        verify(&secret, request);
    }
    // Each wait is at least half of twice the previous one (exponential, with jitter of at most a half), unless the
    // waits have reached the cap, where each is at least half of it (the refused connections before may have
    // taken the waits there already).
    let gaps: Vec<Duration> = all[..4]
        .windows(2)
        .map(|pair| pair[1].at - pair[0].at)
        .collect();
    assert!(
        gaps[1] >= (gaps[0] / 2 + Duration::from_millis(50)).min(settings().backoff_max / 2),
        "{gaps:?}"
    );
    let by_run = kinds_by_run(&got);
    for run in &runs {
        assert_eq!(by_run[&run.to_string()], ["run.waiting", "run.resumed"]);
    }
    // The receiver has the sixth request before the deliverer records it (its cursor is written at most every
    // 100 ms), so wait for the record, boundedly.
    let deadline = Instant::now() + Duration::from_secs(10);
    let list = loop {
        let list = listed(&app).await;
        if list[0]["delivered_total"] == 6 || Instant::now() > deadline {
            break list;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    };
    assert_eq!(list[0]["state"], "active");
    assert_eq!(list[0]["attempts"], 0);
    assert_eq!(list[0]["last_error"], Value::Null);
    assert_eq!(list[0]["delivered_total"], 6);
}

#[tokio::test]
async fn a_subscription_that_keeps_failing_past_its_window_is_marked_failing_until_a_delivery_succeeds()
 {
    let (_database, pool) = TestDatabase::create().await;
    let app = support::app(pool.clone()).await;
    let healthy = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let flag = Arc::clone(&healthy);
    let receiver = Receiver::start(move |_| {
        if flag.load(Ordering::SeqCst) {
            Reply::Status(200)
        } else {
            Reply::Status(503)
        }
    })
    .await;
    subscribe(&app, &receiver.url, None).await;
    let _dispatcher = dispatch(
        &pool,
        Settings {
            retry_window: Duration::from_millis(300),
            ..settings()
        },
    );
    deny_runs(&app, 1).await;
    let deadline = Instant::now() + Duration::from_secs(10);
    let failing = loop {
        let list = listed(&app).await;
        if list[0]["state"] == "failing" || Instant::now() > deadline {
            break list;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    };
    assert_eq!(failing[0]["state"], "failing", "{failing:?}");
    assert_eq!(failing[0]["last_error"], "the receiver answered 503");
    assert_eq!(failing[0]["backlog"], 2);
    let metrics = support::metrics(&app).await;
    assert!(
        metrics.contains("webhook_subscriptions{state=\"failing\"} 1"),
        "{metrics}"
    );
    assert!(
        metrics.contains("webhook_backlog_events{state=\"failing\"} 2"),
        "{metrics}"
    );
    assert!(
        metrics.contains("webhook_attempts_total{result=\"failed\"}"),
        "{metrics}"
    );

    healthy.store(true, Ordering::SeqCst);
    receiver.wait_for(2, Duration::from_secs(10)).await;
    let deadline = Instant::now() + Duration::from_secs(5);
    loop {
        let list = listed(&app).await;
        if list[0]["state"] == "active" && list[0]["backlog"] == 0 {
            break;
        }
        assert!(Instant::now() < deadline, "{list:?}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let metrics = support::metrics(&app).await;
    assert!(
        metrics.contains("webhook_delivery_lag_seconds_count"),
        "{metrics}"
    );
}

#[tokio::test]
async fn an_instance_that_dies_mid_delivery_leaves_the_event_to_another_with_the_same_webhook_id() {
    let (database, pool) = TestDatabase::create().await;
    let app = support::app(pool.clone()).await;
    // The first request hangs, as if the instance sending it died mid-way; later ones succeed.
    let receiver = Receiver::start(|n| {
        if n == 0 {
            Reply::Hang
        } else {
            Reply::Status(200)
        }
    })
    .await;
    subscribe(&app, &receiver.url, Some(&["run.waiting"])).await;
    support::owned_run(&app).await;

    // The doomed instance runs in a runtime of its own, shut down without any cleanup (kill -9 of its tasks).
    let url = database.url.clone();
    // On a blocking thread, so this test's runtime keeps serving the receiver meanwhile.
    let doomed = tokio::task::spawn_blocking(move || {
        let runtime = tokio::runtime::Runtime::new().unwrap();
        runtime.block_on(async {
            let pool = sqlx::postgres::PgPoolOptions::new()
                .max_connections(2)
                .connect(&url)
                .await
                .unwrap();
            let (stop, stopped) = tokio::sync::watch::channel(false);
            let pool = Database::direct(pool);
            let hub = EventsHub::start(
                pool.clone(),
                Duration::from_millis(25),
                Duration::from_secs(1),
            );
            let long_timeout = Settings {
                limits: deliver::Limits {
                    timeout: Duration::from_secs(60),
                    ..settings().limits
                },
                ..settings()
            };
            webhooks::spawn(pool, hub, long_timeout, stopped).unwrap();
            tokio::time::sleep(Duration::from_millis(1500)).await;
            std::mem::forget(stop);
        });
        runtime.shutdown_background();
    });
    doomed.await.unwrap();
    let first = receiver.received();
    assert_eq!(first.len(), 1, "the doomed instance started the delivery");

    let _survivor = dispatch(&pool, settings());
    let got = receiver.wait_for(1, Duration::from_secs(15)).await;
    assert_eq!(
        got.len(),
        1,
        "another instance delivered it once the lease ran out"
    );
    assert_eq!(got[0].header("webhook-id"), first[0].header("webhook-id"));
    assert_eq!(got[0].body, first[0].body);
}

#[tokio::test]
async fn a_url_reaching_loopback_is_refused_at_delivery_unless_allowed_and_redirects_are_not_followed()
 {
    let (_database, pool) = TestDatabase::create().await;
    let app = support::app(pool.clone()).await;
    let receiver = Receiver::start(|_| Reply::Status(200)).await;
    let port = receiver
        .url
        .split(':')
        .nth(2)
        .unwrap()
        .split('/')
        .next()
        .unwrap()
        .to_owned();
    subscribe(&app, &receiver.url, None).await;
    subscribe(&app, &format!("http://localhost:{port}/by-name"), None).await;
    subscribe(
        &app,
        &format!("http://[::ffff:127.0.0.1]:{port}/mapped"),
        None,
    )
    .await;
    let refusing = dispatch(
        &pool,
        Settings {
            limits: deliver::Limits {
                allow_private: false,
                ..settings().limits
            },
            ..settings()
        },
    );
    deny_runs(&app, 1).await;
    tokio::time::sleep(Duration::from_millis(800)).await;
    assert!(receiver.received().is_empty(), "{:?}", receiver.received());
    // The tenant is told that it was refused, never the address or what the name resolved to.
    for subscription in listed(&app).await {
        let error = subscription["last_error"].as_str().unwrap_or_default();
        assert_eq!(
            error,
            format!("refused: {}", webhooks::ssrf::REFUSED),
            "{subscription:?}"
        );
        for leak in ["127.0.0.1", "localhost", "::ffff", "::1", "internal"] {
            assert!(!error.contains(leak), "{leak} in {error}");
        }
    }

    let redirecting = Receiver::start(|n| {
        if n == 0 {
            Reply::Redirect("/elsewhere")
        } else {
            Reply::Status(200)
        }
    })
    .await;
    let (id, _) = subscribe(&app, &redirecting.url, Some(&["run.waiting"])).await;
    drop(refusing);
    let _allowing = dispatch(&pool, settings());
    support::owned_run(&app).await;
    let deadline = Instant::now() + Duration::from_secs(10);
    while redirecting.received().is_empty() && Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    tokio::time::sleep(Duration::from_millis(300)).await;
    let requests = redirecting.received();
    assert!(!requests.is_empty());
    assert!(
        requests.iter().all(|request| request.path == "/hook"),
        "the redirect was followed"
    );
    let ours = listed(&app)
        .await
        .into_iter()
        .find(|s| s["id"] == id)
        .unwrap();
    assert!(ours["delivered_total"].as_i64().unwrap() <= 1);
}

#[tokio::test]
async fn a_receiver_that_never_answers_delays_neither_decisions_nor_other_subscriptions() {
    let (_database, pool) = TestDatabase::create().await;
    let app = support::app(pool.clone()).await;
    let stuck = Receiver::start(|_| Reply::Hang).await;
    let fast = Receiver::start(|_| Reply::Status(200)).await;
    subscribe(&app, &stuck.url, None).await;
    subscribe(&app, &fast.url, None).await;
    let _dispatcher = dispatch(
        &pool,
        Settings {
            limits: deliver::Limits {
                timeout: Duration::from_secs(30),
                ..settings().limits
            },
            lease: Duration::from_secs(40),
            ..settings()
        },
    );
    app.user(7, false, false, false).await;
    let mut slowest = Duration::ZERO;
    for _ in 0..5 {
        let (id, digest) = support::owned_run(&app).await;
        let started = Instant::now();
        assert_eq!(
            app.decide(id, false, Some(7), &digest).await.status,
            StatusCode::OK
        );
        slowest = slowest.max(started.elapsed());
    }
    let got = fast.wait_for(10, Duration::from_secs(10)).await;
    assert_eq!(got.len(), 10);
    // Its first event of each of four runs hangs; the next events of those runs wait behind them, and so does the
    // fifth run's, since every request it may have in flight is taken. The fast receiver's tenth event may come
    // before the stuck one's last request arrives, so wait for that; then a moment more, in which a request beyond
    // the cap would arrive if one were sent.
    let cap = settings().requests_per_subscription;
    stuck.wait_for_requests(cap, Duration::from_secs(10)).await;
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert_eq!(
        stuck.received().len(),
        cap,
        "the stuck subscription holds as many events as it may send at once"
    );
    assert!(!stuck.run_overlapped());
    assert!(
        slowest < Duration::from_secs(2),
        "a decision took {slowest:?}"
    );
}

#[tokio::test]
#[ignore = "needs Python with standardwebhooks: bash tests/webhooks/run.sh (CI runs it)"]
async fn real_deliveries_verify_with_the_standardwebhooks_python_library() {
    use tokio::io::{AsyncBufReadExt, BufReader};

    let python =
        std::env::var("WEBHOOKS_PYTHON").expect("WEBHOOKS_PYTHON: a Python with standardwebhooks");
    let (_database, pool) = TestDatabase::create().await;
    let app = support::app(pool.clone()).await;
    let port = support::free_port();
    let url = format!("http://127.0.0.1:{port}/hook");
    let (id, old) = subscribe(&app, &url, None).await;
    // Rotated: until the overlap ends, each request must verify with the new secret and with the old one alone.
    let rotated = app
        .post(
            &format!("/v1/webhooks/{id}/rotate-secret"),
            json!({"overlap_secs": 3600}),
        )
        .await;
    assert_eq!(rotated.status, StatusCode::OK, "{:?}", rotated.body);
    let new = rotated.body["secret"].as_str().unwrap();
    let mut receiver = tokio::process::Command::new(python)
        .arg(concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/tests/webhooks/receiver.py"
        ))
        .arg(port.to_string())
        .env("WEBHOOK_SECRETS", format!("{new} {old}"))
        .stdout(std::process::Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .expect("the Python receiver starts");
    let mut lines = BufReader::new(receiver.stdout.take().unwrap()).lines();
    let mut next_line = async || {
        tokio::time::timeout(Duration::from_secs(20), lines.next_line())
            .await
            .expect("the receiver reports in time")
            .unwrap()
            .expect("the receiver is still running")
    };
    assert_eq!(next_line().await, "listening");

    // A forged request first: the receiver must refuse it, or its "verified" would prove nothing.
    let forged = reqwest::Client::new()
        .post(&url)
        .header("webhook-id", "evt_forged")
        .header(
            "webhook-timestamp",
            chrono::Utc::now().timestamp().to_string(),
        )
        .header(
            "webhook-signature",
            "v1,AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA=",
        )
        .body(r#"{"type":"run.resumed"}"#)
        .send()
        .await
        .unwrap();
    assert_eq!(forged.status(), 400);
    let report: Value = serde_json::from_str(&next_line().await).unwrap();
    assert_eq!(report["verified_with"], json!([false, false]), "{report}");

    let _dispatcher = dispatch(&pool, settings());
    deny_runs(&app, 2).await;
    let mut kinds = Vec::new();
    for _ in 0..4 {
        let report: Value = serde_json::from_str(&next_line().await).unwrap();
        assert_eq!(report["verified_with"], json!([true, true]), "{report}");
        assert_eq!(report["webhook_id"], report["event_id"]);
        kinds.push(report["type"].as_str().unwrap().to_owned());
    }
    kinds.sort();
    assert_eq!(
        kinds,
        ["run.resumed", "run.resumed", "run.waiting", "run.waiting"]
    );
    // The receiver reports before its answer reaches the service, so give the cursor a moment to move.
    let deadline = Instant::now() + Duration::from_secs(5);
    while listed(&app).await[0]["delivered_total"] != 4 {
        assert!(Instant::now() < deadline, "{:?}", listed(&app).await);
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}
