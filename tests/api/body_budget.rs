//! The bytes of bodies in flight, bounded by MAX_BODY_BYTES_IN_FLIGHT (docs/design.md §17): a body is charged as its
//! bytes arrive, to the client whose key was checked, within its cap of half a share; a declared length holds
//! nothing; bytes that find no room within a second are answered 503 with `Retry-After`; a declared length over the
//! route's limit, or any body on a route that takes none, is 413 unread; and small bodies keep a share of their own.
//!
//! The bodies here are the test's own, so that it sees whether, and how much of, each was read. With the test's
//! default limits a registration reads up to 2 MiB (MAX_BODY_BYTES of 1 MiB and a worker state of 1 MiB).

use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::task::{Context, Poll};
use std::time::Duration;

use axum::body::{Body, Bytes};
use axum::http::{Method, Request, StatusCode};
use http_body::{Frame, SizeHint};
use serde_json::json;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::mpsc;
use tower::ServiceExt;
use uuid::Uuid;

use approval_resume::app;
use approval_resume::listen::ConnectionLimits;

use crate::database::{TestDatabase, wait_until_waiting_for_locks};
use crate::support::{self, Options, TestApp, assert_problem};

const MIB: usize = 1024 * 1024;

/// A body the test feeds: it declares `size` (exact, or unknown as a chunked body's is), yields what the test sends,
/// and counts the bytes read from it.
struct Fed {
    size: Option<u64>,
    chunks: mpsc::UnboundedReceiver<Bytes>,
    read: Arc<AtomicUsize>,
}

impl http_body::Body for Fed {
    type Data = Bytes;
    type Error = std::io::Error;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, std::io::Error>>> {
        self.chunks.poll_recv(cx).map(|chunk| {
            chunk.map(|chunk| {
                self.read.fetch_add(chunk.len(), Ordering::SeqCst);
                Ok(Frame::data(chunk))
            })
        })
    }

    fn size_hint(&self) -> SizeHint {
        self.size.map_or_else(SizeHint::new, SizeHint::with_exact)
    }
}

/// The sending end of a [`Fed`] body, and the count of its bytes read.
struct Feeder {
    /// Held, never sent on again: while it lives the body stays open (a dropped sender would end it).
    _open: mpsc::UnboundedSender<Bytes>,
    read: Arc<AtomicUsize>,
}

impl Feeder {
    fn read(&self) -> usize {
        self.read.load(Ordering::SeqCst)
    }

    /// Waits until the service has read something of the body.
    async fn until_read(&self) {
        tokio::time::timeout(Duration::from_secs(10), async {
            while self.read() == 0 {
                tokio::time::sleep(Duration::from_millis(10)).await;
            }
        })
        .await
        .expect("the body was read");
    }
}

/// A body of `size` (`None`: chunked), holding `first` ready to be read.
fn fed(size: Option<usize>, first: &[u8]) -> (Body, Feeder) {
    let (sender, chunks) = mpsc::unbounded_channel();
    sender.send(Bytes::copy_from_slice(first)).unwrap();
    let read = Arc::new(AtomicUsize::new(0));
    let body = Fed {
        size: size.map(|size| size as u64),
        chunks,
        read: Arc::clone(&read),
    };
    (
        Body::new(body),
        Feeder {
            _open: sender,
            read,
        },
    )
}

/// A JSON POST of `body` to `path` with the admin key.
fn post(app: &TestApp, path: &str, body: Body) -> Request<Body> {
    Request::builder()
        .method(Method::POST)
        .uri(path)
        .header("authorization", format!("Bearer {}", app.admin_key))
        .header("content-type", "application/json")
        .body(body)
        .unwrap()
}

/// The app with the test's limits and a budget of `in_flight` bytes (its large share is three quarters of it), with
/// places for eight large bodies at once, so that the bytes are what binds.
async fn app_with_budget(in_flight: usize) -> (TestDatabase, TestApp) {
    app_with_budget_and_places(in_flight, 8).await
}

/// The app with a budget of `in_flight` bytes and `places` large bodies handled at once (LARGE_BODIES_AT_ONCE).
async fn app_with_budget_and_places(in_flight: usize, places: usize) -> (TestDatabase, TestApp) {
    let (database, pool) = TestDatabase::create().await;
    let app = support::app_with(
        pool,
        Options {
            body_bytes_in_flight: Some(in_flight),
            large_bodies_at_once: Some(places),
            ..Default::default()
        },
    )
    .await;
    (database, app)
}

/// Starts serving a request whose body the test holds open, and waits until the service reads it: its first bytes
/// are then charged. Returns the body's feeder (drop it to end the body) and the status to come.
async fn holding(
    app: &TestApp,
    path: &str,
    size: Option<usize>,
) -> (Feeder, tokio::task::JoinHandle<StatusCode>) {
    holding_sent(app, path, size, b"{\"id\": ").await
}

/// [`holding`], with `sent` the bytes sent of the body.
async fn holding_sent(
    app: &TestApp,
    path: &str,
    size: Option<usize>,
    sent: &[u8],
) -> (Feeder, tokio::task::JoinHandle<StatusCode>) {
    let (body, feeder) = fed(size, sent);
    let request = post(app, path, body);
    let router = app.router.clone();
    let status = tokio::spawn(async move { router.oneshot(request).await.unwrap().status() });
    feeder.until_read().await;
    (feeder, status)
}

/// A registration body of about `bytes` bytes (within MAX_BODY_BYTES): a run whose user message is padded.
fn registration_of(bytes: usize) -> String {
    let mut body = support::run_body(Uuid::new_v4(), 7);
    body["messages"][1]["content"] = json!("p".repeat(bytes));
    body.to_string()
}

/// Registers `body` as JSON, whole, and returns the answer.
async fn send_registration(app: &TestApp, body: String) -> support::Answer {
    app.send_bytes(Method::POST, "/v1/runs", Some("application/json"), body)
        .await
}

/// Registers `body` and checks that it was created.
async fn registers(app: &TestApp, body: String) {
    let registered = send_registration(app, body).await;
    assert_eq!(
        registered.status,
        StatusCode::CREATED,
        "{:?}",
        registered.body
    );
}

/// A registration of nearly the largest size a route reads: a transcript and a worker state of nearly 1 MiB each.
fn largest_registration() -> String {
    let mut body: serde_json::Value = serde_json::from_str(&registration_of(MIB - 4096)).unwrap();
    body["worker_state"] = json!("s".repeat(MIB - 4096));
    body.to_string()
}

#[tokio::test]
async fn bytes_that_find_no_room_within_a_second_are_answered_503_with_retry_after_and_the_connection_closed()
 {
    // 4 MiB: a large share of 3 MiB, of which one client may hold 2 MiB (a body of the largest size).
    let (_database, app) = app_with_budget(4 * MIB).await;
    app.user(7, false, false, false).await;
    // 2 MiB of the large share's 3 taken by a body that has nearly all arrived.
    let (first, first_answer) =
        holding_sent(&app, "/v1/runs", Some(2 * MIB), &vec![b' '; 2 * MIB - 16]).await;

    let writer = app.client("writer", &["runs:write"]).await;
    // Over the first client's cap, and over what is left of the share for another.
    let by_first = send_registration(&app, largest_registration()).await;
    let by_writer = {
        let mut request = post(&app, "/v1/runs", Body::from(largest_registration()));
        request
            .headers_mut()
            .insert("authorization", format!("Bearer {writer}").parse().unwrap());
        app.send(request).await
    };
    for answer in [&by_first, &by_writer] {
        assert_problem(
            answer,
            StatusCode::SERVICE_UNAVAILABLE,
            "too_many_body_bytes",
        );
        assert!(answer.headers.contains_key("retry-after"), "{answer:?}");
        assert_eq!(answer.headers["connection"], "close");
    }

    // The first body ends short (not JSON); its bytes are given back, and the same size is let in.
    drop(first);
    assert_eq!(first_answer.await.unwrap(), StatusCode::BAD_REQUEST);
    registers(&app, largest_registration()).await;
}

#[tokio::test]
async fn a_declared_length_over_the_route_s_limit_is_refused_413_before_a_byte_is_read() {
    let (_database, app) = app_with_budget(64 * MIB).await;
    for (path, limit) in [
        ("/v1/runs", 2 * MIB),
        (&*format!("/v1/runs/{}/turns", Uuid::new_v4()), 2 * MIB),
        ("/v1/webhooks", MIB),
    ] {
        let (body, feeder) = fed(Some(limit + 1), &vec![b' '; 64 * 1024]);
        let refused = app.send(post(&app, path, body)).await;
        assert_problem(&refused, StatusCode::PAYLOAD_TOO_LARGE, "payload_too_large");
        assert_eq!(refused.headers["connection"], "close");
        assert_eq!(feeder.read(), 0, "{path}: bytes were read before the 413");
    }
}

#[tokio::test]
async fn small_requests_are_answered_while_large_bodies_hold_their_whole_share() {
    // The smallest budget whose large share holds a registration of the largest size (2 MiB): one chunked
    // registration that has sent 2 MiB takes that share whole.
    let (_database, app) = app_with_budget((8 * MIB).div_ceil(3)).await;
    app.user(7, false, false, false).await;
    let (id, digest) = support::owned_run(&app).await;
    // Sent in chunks, nearly 2 MiB of it arrived.
    let (_held, _answer) = holding_sent(&app, "/v1/runs", None, &vec![b' '; 2 * MIB - 16]).await;

    let started = std::time::Instant::now();
    let user = app
        .call(
            Method::PUT,
            "/v1/users/8",
            Some(&app.admin_key),
            Some(json!({"username": "eight", "is_admin": false, "can_approve_others": false, "disabled": false})),
        )
        .await;
    assert!(user.status.is_success(), "{:?}", user.body);
    let decided = app.decide(id, false, Some(7), &digest).await;
    assert_eq!(decided.status, StatusCode::OK, "{:?}", decided.body);
    assert!(
        started.elapsed() < body_budget_wait(),
        "the small requests waited for the budget"
    );
}

fn body_budget_wait() -> Duration {
    approval_resume::http::body_budget::WAIT
}

#[tokio::test]
async fn over_a_real_connection_a_declared_length_over_the_limit_is_answered_without_sending_the_body()
 {
    let (_database, app) = app_with_budget(64 * MIB).await;
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let address = listener.local_addr().unwrap();
    tokio::spawn(app::serve(
        listener,
        app.state.clone(),
        ConnectionLimits {
            header_read_timeout: Duration::from_secs(10),
            max_connections: 64,
        },
        std::future::pending(),
        Duration::from_secs(1),
    ));
    let mut stream = TcpStream::connect(address).await.unwrap();
    let head = format!(
        "POST /v1/runs HTTP/1.1\r\nhost: test\r\nauthorization: Bearer {}\r\ncontent-type: application/json\r\n\
         content-length: {}\r\n\r\n",
        app.admin_key,
        2 * MIB + 1
    );
    stream.write_all(head.as_bytes()).await.unwrap();
    // Not a byte of the body is sent: the answer must not wait for it.
    let mut answer = Vec::new();
    tokio::time::timeout(Duration::from_secs(5), stream.read_to_end(&mut answer))
        .await
        .expect("answered before the body was sent")
        .unwrap();
    let answer = String::from_utf8_lossy(&answer);
    assert!(answer.starts_with("HTTP/1.1 413"), "{answer}");
    assert!(answer.contains("payload_too_large"), "{answer}");
}

#[tokio::test]
async fn a_large_body_still_arriving_holds_no_place_so_other_large_bodies_and_decisions_are_served_meanwhile()
 {
    // Bytes for many large bodies, a place for one: the place is taken once a body has arrived, so the slow one
    // below, still arriving, keeps nobody out (with the place taken before the body, it kept every other out).
    let (_database, app) = app_with_budget_and_places(64 * MIB, 1).await;
    app.user(7, false, false, false).await;
    let (id, digest) = support::owned_run(&app).await;
    let (first, first_answer) = holding(&app, "/v1/runs", Some(MIB)).await;

    for _ in 0..2 {
        registers(&app, registration_of(MIB / 2)).await;
    }
    let decided = app.decide(id, false, Some(7), &digest).await;
    assert_eq!(decided.status, StatusCode::OK, "{:?}", decided.body);

    // The first body ends short, and is answered as any broken body is.
    drop(first);
    assert_eq!(first_answer.await.unwrap(), StatusCode::BAD_REQUEST);
}

#[tokio::test]
async fn an_arrived_large_body_finding_every_place_taken_waits_a_second_then_is_answered_503_on_a_connection_kept_open()
 {
    let (database, app) = app_with_budget_and_places(64 * MIB, 1).await;
    app.user(7, false, false, false).await;
    // The runs table locked here holds the first registration inside its handler, after its body arrived and took the
    // one place.
    let mut lock = app.pool.begin().await.unwrap();
    sqlx::query("lock table runs in access exclusive mode")
        .execute(&mut *lock)
        .await
        .unwrap();
    let first = {
        let router = app.router.clone();
        let request = post(&app, "/v1/runs", Body::from(registration_of(MIB / 2)));
        tokio::spawn(async move { router.oneshot(request).await.unwrap().status() })
    };
    // Asked on a pool of its own: the app's may be all taken by then.
    let watching = sqlx::PgPool::connect(&database.url).await.unwrap();
    wait_until_waiting_for_locks(&watching, 1).await;

    let started = std::time::Instant::now();
    let refused = send_registration(&app, registration_of(MIB / 2)).await;
    assert_problem(
        &refused,
        StatusCode::SERVICE_UNAVAILABLE,
        "too_many_body_bytes",
    );
    assert!(
        started.elapsed() >= body_budget_wait(),
        "it waited for the place first"
    );
    assert!(refused.headers.contains_key("retry-after"), "{refused:?}");
    assert!(
        !refused.headers.contains_key("connection"),
        "its body was read whole, so the connection can carry the next request: {refused:?}"
    );

    // A small body sent in chunks was counted as large; arrived small, it has no parsing worth a place.
    let (body, feeder) = fed(
        None,
        br#"{"username": "user8", "is_admin": false, "can_approve_others": false, "disabled": false}"#,
    );
    drop(feeder);
    let chunked = Request::builder()
        .method(Method::PUT)
        .uri("/v1/users/8")
        .header("authorization", format!("Bearer {}", app.admin_key))
        .header("content-type", "application/json")
        .body(body)
        .unwrap();
    let put = app.send(chunked).await;
    assert_eq!(put.status, StatusCode::OK, "{:?}", put.body);

    lock.rollback().await.unwrap();
    assert_eq!(first.await.unwrap(), StatusCode::CREATED);
    // The first handler's end gave its place back.
    registers(&app, registration_of(MIB / 2)).await;
}

/// Opens a request whose head declares a body of `declared` bytes and sends none of it, on a connection the
/// returned stream keeps open.
async fn unsent_body(
    address: std::net::SocketAddr,
    head: &str,
    key: &str,
    declared: usize,
) -> TcpStream {
    let mut stream = TcpStream::connect(address).await.unwrap();
    let head = format!(
        "{head} HTTP/1.1\r\nhost: test\r\nauthorization: Bearer {key}\r\ncontent-type: application/json\r\n\
         content-length: {declared}\r\n\r\n"
    );
    stream.write_all(head.as_bytes()).await.unwrap();
    stream
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn another_tenant_s_unsent_bodies_on_long_polls_hold_neither_the_budget_nor_its_feed_slots() {
    // The default budget of 36 MiB: a small share of 9 MiB, which 36 declared bodies of 256 KiB took whole when
    // a declared length was charged. The other tenant's client may wait with 36 readers.
    let (_database, app) = app_with_budget(36 * MIB).await;
    let caps = approval_resume::delivery::FeedCaps {
        per_client: 36,
        per_instance: 1024,
    };
    let (address, hub) = crate::feed_fairness::served(&app, caps).await;
    let reader = support::add_client(&app.pool, "reader", "other", &["events:read"]).await;
    app.user(7, false, false, false).await;
    let mut runs = Vec::new();
    for _ in 0..3 {
        runs.push(support::owned_run(&app).await);
    }

    let poll = format!(
        "GET /v1/events?after={}&wait=25",
        crate::feed_fairness::FAR_AHEAD
    );
    let mut polls = Vec::new();
    for _ in 0..36 {
        polls.push(unsent_body(address, &poll, &reader, 256 * 1024).await);
    }
    tokio::time::sleep(Duration::from_millis(200)).await;

    // The first tenant's decisions and small registrations are answered as ever.
    let client = reqwest::Client::new();
    for (id, digest) in &runs {
        let decided = client
            .post(format!("http://{address}/v1/runs/{id}/decision"))
            .bearer_auth(&app.admin_key)
            .json(&json!({"approved": false, "decider_uid": 7, "turn_digest": digest}))
            .send()
            .await
            .unwrap();
        assert_eq!(decided.status(), StatusCode::OK);
        let registered = client
            .post(format!("http://{address}/v1/runs"))
            .bearer_auth(&app.admin_key)
            .json(&support::run_body(Uuid::new_v4(), 7))
            .send()
            .await
            .unwrap();
        assert_eq!(registered.status(), StatusCode::CREATED);
    }

    // Hung up, the polls hold nothing within a second: no reader waits, and the reader's client may wait again.
    drop(polls);
    let counts = crate::feed_fairness::counts_until(&hub, Duration::from_secs(1), |counts| {
        counts.waiting == 0
    })
    .await;
    assert_eq!(counts.waiting, 0, "the hung-up polls still hold feed slots");
    let mut again = unsent_body(address, &poll, &reader, 0).await;
    let waited = tokio::time::timeout(Duration::from_millis(500), again.read(&mut [0u8; 64])).await;
    assert!(
        waited.is_err(),
        "the reader's next poll was answered at once, not left to wait"
    );
}

#[tokio::test]
async fn a_route_that_takes_no_body_refuses_one_at_once_unread() {
    let (_database, app) = app_with_budget(64 * MIB).await;
    let webhook = format!("/v1/webhooks/{}", uuid::Uuid::new_v4());
    for (method, uri) in [
        (Method::GET, "/v1/events?wait=5"),
        (Method::DELETE, webhook.as_str()),
    ] {
        let (body, feeder) = fed(Some(256 * 1024), b"");
        let request = Request::builder()
            .method(method.clone())
            .uri(uri)
            .header("authorization", format!("Bearer {}", app.admin_key))
            .body(body)
            .unwrap();
        let refused = app.send(request).await;
        assert_problem(&refused, StatusCode::PAYLOAD_TOO_LARGE, "payload_too_large");
        assert_eq!(refused.headers["connection"], "close", "{method}");
        assert_eq!(feeder.read(), 0, "{method}: the body was read");
    }
    // A method the route does not serve is answered 405 as any request of it, its body unread.
    let (body, feeder) = fed(Some(256 * 1024), b"");
    let request = Request::builder()
        .method(Method::DELETE)
        .uri("/v1/events")
        .header("authorization", format!("Bearer {}", app.admin_key))
        .body(body)
        .unwrap();
    let refused = app.send(request).await;
    assert_problem(
        &refused,
        StatusCode::METHOD_NOT_ALLOWED,
        "method_not_allowed",
    );
    assert_eq!(feeder.read(), 0, "the body was read");
}

#[tokio::test]
async fn declared_lengths_whose_bytes_never_come_hold_no_part_of_the_budget() {
    // A small share of 2 MiB: eight declared bodies of 256 KiB took it whole when a declared length was charged.
    let (_database, app) = app_with_budget(8 * MIB).await;
    app.user(7, false, false, false).await;
    let (id, digest) = support::owned_run(&app).await;
    let writer = app.client("writer", &["runs:write"]).await;
    let mut unsent = Vec::new();
    for _ in 0..16 {
        let (body, feeder) = fed(Some(256 * 1024), b"");
        let mut request = post(&app, "/v1/runs", body);
        request
            .headers_mut()
            .insert("authorization", format!("Bearer {writer}").parse().unwrap());
        let router = app.router.clone();
        unsent.push((feeder, tokio::spawn(router.oneshot(request))));
    }
    tokio::time::sleep(Duration::from_millis(100)).await;

    let started = std::time::Instant::now();
    let decided = app.decide(id, false, Some(7), &digest).await;
    assert_eq!(decided.status, StatusCode::OK, "{:?}", decided.body);
    registers(&app, registration_of(1024)).await;
    assert!(
        started.elapsed() < body_budget_wait(),
        "they waited for the budget"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_client_sending_many_small_bodies_takes_at_most_half_of_their_share() {
    // A small share of 2 MiB, of which one client may hold 1 MiB: four bodies of 256 KiB, each charged whole at
    // its first byte. The client sends the first byte of eight and holds them open.
    let (_database, app) = app_with_budget(8 * MIB).await;
    app.user(7, false, false, false).await;
    let (id, digest) = support::owned_run(&app).await;
    let writer = app.client("writer", &["runs:write"]).await;
    let mut started_bodies = Vec::new();
    for _ in 0..8 {
        let (body, feeder) = fed(Some(256 * 1024), b"{");
        let mut request = post(&app, "/v1/runs", body);
        request
            .headers_mut()
            .insert("authorization", format!("Bearer {writer}").parse().unwrap());
        let router = app.router.clone();
        let status = tokio::spawn(async move { router.oneshot(request).await.unwrap().status() });
        started_bodies.push((feeder, status));
    }
    for (feeder, _) in &started_bodies {
        feeder.until_read().await;
    }

    // Another client's decision finds the other half.
    let started = std::time::Instant::now();
    let decided = app.decide(id, false, Some(7), &digest).await;
    assert_eq!(decided.status, StatusCode::OK, "{:?}", decided.body);
    assert!(
        started.elapsed() < body_budget_wait(),
        "it waited for the budget"
    );
    // Four of the writer's bodies found no room in its half within the wait, and were answered while the other four,
    // charged, still wait for the rest of their bytes.
    tokio::time::sleep(body_budget_wait() + Duration::from_millis(500)).await;
    let mut refused = 0;
    let mut waiting = Vec::new();
    for (feeder, status) in started_bodies {
        if status.is_finished() {
            assert_eq!(status.await.unwrap(), StatusCode::SERVICE_UNAVAILABLE);
            refused += 1;
        } else {
            waiting.push(feeder);
        }
    }
    assert_eq!((refused, waiting.len()), (4, 4));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_large_registration_gives_its_place_back_once_committed_while_the_calls_its_rules_approved_run()
 {
    // One place for large bodies; the rule's tool runs on an executor that takes 2 s.
    let (database, pool) = TestDatabase::create().await;
    let executor = crate::executors::FakeExecutor::start().await;
    let slow = approval_resume::executor::ToolExecutor {
        timeout: Duration::from_secs(10),
        ..executor.executor("slow")
    };
    let app = support::app_with(
        pool,
        Options {
            executors: approval_resume::executor::Executors::from_tools(
                [("update_page_metadata".to_owned(), slow)].into(),
            ),
            body_bytes_in_flight: Some(64 * MIB),
            large_bodies_at_once: Some(1),
            ..Default::default()
        },
    )
    .await;
    app.user(7, false, false, false).await;
    let expires_at = (chrono::Utc::now() + chrono::Duration::days(1)).to_rfc3339();
    let rule = app
        .post(
            "/v1/rules",
            json!({"owner_uid": 7, "created_by": 7, "tool": "update_page_metadata", "verdict": "approve",
                   "expires_at": expires_at}),
        )
        .await;
    assert_eq!(rule.status, StatusCode::CREATED, "{:?}", rule.body);
    let _database = database;

    // A run of about 300 KiB whose one write call the rule approves; its executor then runs for 2 s.
    let mut approved: serde_json::Value =
        serde_json::from_str(&registration_of(300 * 1024)).unwrap();
    let messages = approved["messages"].as_array_mut().unwrap();
    let calls = &mut messages.last_mut().unwrap()["tool_calls"];
    calls.as_array_mut().unwrap().truncate(1);
    let first = {
        let request = post(&app, "/v1/runs", Body::from(approved.to_string()));
        let router = app.router.clone();
        tokio::spawn(async move {
            let answer = router.oneshot(request).await.unwrap();
            let status = answer.status();
            let bytes = axum::body::to_bytes(answer.into_body(), usize::MAX)
                .await
                .unwrap();
            (
                status,
                serde_json::from_slice::<serde_json::Value>(&bytes).unwrap(),
            )
        })
    };
    tokio::time::sleep(Duration::from_millis(800)).await;

    // Another tenant's run of about 300 KiB, whose owner has no rule, is let in meanwhile.
    let other =
        support::add_client(&app.pool, "other", "other", &["runs:write", "users:write"]).await;
    let mut request = post(&app, "/v1/runs", Body::from(registration_of(300 * 1024)));
    request
        .headers_mut()
        .insert("authorization", format!("Bearer {other}").parse().unwrap());
    let mut owner = post(
        &app,
        "/v1/users/7",
        Body::from(
            r#"{"username": "seven", "is_admin": false, "can_approve_others": false, "disabled": false}"#,
        ),
    );
    *owner.method_mut() = Method::PUT;
    owner
        .headers_mut()
        .insert("authorization", format!("Bearer {other}").parse().unwrap());
    assert!(app.send(owner).await.status.is_success());
    let second = app.send(request).await;
    assert_eq!(second.status, StatusCode::CREATED, "{:?}", second.body);

    let (status, first) = first.await.unwrap();
    assert_eq!(status, StatusCode::CREATED, "{first:?}");
    assert_eq!(first["status"], "resumed", "{first:?}");
}
