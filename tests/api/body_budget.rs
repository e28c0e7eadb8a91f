//! The bytes of bodies in flight, bounded by MAX_BODY_BYTES_IN_FLIGHT (docs/design.md §17): a body is weighed before
//! any of it is read, by its declared length or, sent in chunks, by its route's limit; over the budget a request is
//! answered 503 with `Retry-After` unread, a declared length over the route's limit 413 unread, and small bodies
//! keep a share of their own.
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

/// Starts serving a request whose body the test holds open, and waits until the service reads it: its weight is
/// then taken. Returns the body's feeder (drop it to end the body) and the status to come.
async fn holding(
    app: &TestApp,
    path: &str,
    size: Option<usize>,
) -> (Feeder, tokio::task::JoinHandle<StatusCode>) {
    let (body, feeder) = fed(size, b"{\"id\": ");
    let request = post(app, path, body);
    let router = app.router.clone();
    let status = tokio::spawn(async move { router.oneshot(request).await.unwrap().status() });
    feeder.until_read().await;
    (feeder, status)
}

/// Sends a registration declaring `size` bytes and checks that it is answered 503 `too_many_body_bytes` with
/// `Retry-After` and `Connection: close`, without a byte of its body read.
async fn refused_unread(app: &TestApp, size: usize) {
    let (body, feeder) = fed(Some(size), b"{}");
    let refused = app.send(post(app, "/v1/runs", body)).await;
    assert_problem(
        &refused,
        StatusCode::SERVICE_UNAVAILABLE,
        "too_many_body_bytes",
    );
    assert!(refused.headers.contains_key("retry-after"), "{refused:?}");
    assert_eq!(refused.headers["connection"], "close");
    assert_eq!(feeder.read(), 0, "the refused body was read");
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
async fn a_body_over_the_budget_is_answered_503_with_retry_after_and_left_unread() {
    let (_database, app) = app_with_budget(4 * MIB).await;
    app.user(7, false, false, false).await;
    // 2 MiB of the large share's 3 taken by a body still arriving.
    let (first, first_answer) = holding(&app, "/v1/runs", Some(2 * MIB)).await;

    refused_unread(&app, 2 * MIB).await;

    // The first body ends short (not JSON); its weight is given back, and the same size is let in.
    drop(first);
    assert_eq!(first_answer.await.unwrap(), StatusCode::BAD_REQUEST);
    let largest = largest_registration();
    assert!(largest.len() > 2 * MIB - 16 * 1024);
    registers(&app, largest).await;
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
async fn a_body_sent_in_chunks_weighs_its_route_s_limit() {
    // 3 MiB: a large share of 2.25 MiB, of which a chunked registration takes 2 MiB, all it may grow to.
    let (_database, app) = app_with_budget(3 * MIB).await;
    app.user(7, false, false, false).await;
    let (chunked, _answer) = holding(&app, "/v1/runs", None).await;
    assert!(chunked.read() < 1024);

    let half = registration_of(MIB / 2);
    let refused = send_registration(&app, half.clone()).await;
    assert_problem(
        &refused,
        StatusCode::SERVICE_UNAVAILABLE,
        "too_many_body_bytes",
    );
    drop(chunked);
    registers(&app, half).await;
}

#[tokio::test]
async fn small_requests_are_answered_while_large_bodies_hold_their_whole_share() {
    // The smallest budget whose large share holds a registration of the largest size (2 MiB): one chunked
    // registration takes that share whole.
    let (_database, app) = app_with_budget((8 * MIB).div_ceil(3)).await;
    app.user(7, false, false, false).await;
    let (id, digest) = support::owned_run(&app).await;
    let (_held, _answer) = holding(&app, "/v1/runs", None).await;

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

    // A small body sent in chunks was weighed as large; arrived small, it has no parsing worth a place.
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
