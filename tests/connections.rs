//! The bounds on connections, over a real port: half-open and idle connections are closed within the header read
//! timeout while other requests keep being answered, and the service serves at most `max_connections` at once,
//! answering any other 503 at once.
//!
//! `/healthz` answers without the database, so these tests need no Postgres.

use std::time::{Duration, Instant};

use approval_resume::application::{Application, Wiring};
use approval_resume::delivery::EventsHub;
use approval_resume::domain::limits::WorkLimits;
use approval_resume::executor::Executors;
use approval_resume::listen::ConnectionLimits;
use approval_resume::state::Limits;
use approval_resume::storage::Database;
use approval_resume::vocabulary::PrivacyLevel;
use sqlx::postgres::PgPoolOptions;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use uuid::Uuid;

/// Serves the app on a loopback port with these bounds; the database is never reached.
async fn serve(limits: ConnectionLimits) -> std::net::SocketAddr {
    let pool = Database::direct(
        PgPoolOptions::new()
            .connect_lazy("postgres://postgres@127.0.0.1:1/unreachable")
            .unwrap(),
    );
    let application = Application::build(Wiring {
        pool: pool.clone(),
        executors: Executors::none(),
        privacy_floor: PrivacyLevel::Metadata,
        instance_id: Uuid::new_v4(),
        lease_margin: Duration::from_secs(30),
        claim_ttl: Duration::from_secs(300),
        deny_batch_beyond: None,
        limits: Limits {
            max_body_bytes: 1024 * 1024,
            request_timeout: Duration::from_secs(30),
            body_read_timeout: Duration::from_secs(15),
            work: WorkLimits::default(),
            body_bytes_in_flight: None,
            large_bodies_at_once: None,
        },
        // No reader waits here, so the hub never polls the unreachable database.
        events: EventsHub::start(
            pool.clone(),
            Duration::from_millis(25),
            Duration::from_secs(1),
        ),
        webhooks: approval_resume::delivery::webhooks::subscription::Policy {
            max_per_tenant: 25,
            allow_private: false,
            secret_overlap: Duration::from_secs(86_400),
        },
        links: approval_resume::approval_links::LinkSettings::unset(),
    });
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let address = listener.local_addr().unwrap();
    tokio::spawn(application.serve(
        listener,
        limits,
        std::future::pending(),
        Duration::from_secs(1),
    ));
    address
}

/// Sends a whole `GET /healthz` on a new connection and returns the status line.
async fn health(address: std::net::SocketAddr) -> String {
    let mut stream = TcpStream::connect(address).await.unwrap();
    stream
        .write_all(b"GET /healthz HTTP/1.1\r\nhost: test\r\nconnection: close\r\n\r\n")
        .await
        .unwrap();
    let mut answer = Vec::new();
    stream.read_to_end(&mut answer).await.unwrap();
    String::from_utf8_lossy(&answer)
        .lines()
        .next()
        .unwrap_or_default()
        .to_owned()
}

/// Reads until the service closes the connection; `true` if it did within `within`.
async fn closed_within(mut stream: TcpStream, within: Duration) -> bool {
    let mut buffer = [0u8; 1024];
    tokio::time::timeout(within, async {
        loop {
            match stream.read(&mut buffer).await {
                Ok(0) | Err(_) => return,
                Ok(_) => continue,
            }
        }
    })
    .await
    .is_ok()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_thousand_half_open_connections_are_closed_within_the_header_timeout_while_others_are_answered()
 {
    let timeout = Duration::from_secs(2);
    let address = serve(ConnectionLimits {
        header_read_timeout: timeout,
        max_connections: 4_096,
    })
    .await;
    let opened = Instant::now();
    let mut half_open = Vec::new();
    for _ in 0..2_000 {
        let mut stream = TcpStream::connect(address).await.unwrap();
        stream
            .write_all(b"GET /healthz HTTP/1.1\r\nhost: te")
            .await
            .unwrap();
        half_open.push(stream);
    }
    let answered = Instant::now();
    assert_eq!(health(address).await, "HTTP/1.1 200 OK");
    let latency = answered.elapsed();
    assert!(
        latency < Duration::from_millis(500),
        "a whole request waited {latency:?} beside the half-open connections"
    );

    // Each was opened after `opened`, so each is due closed by `opened + timeout`; a second of slack for a busy
    // machine.
    let deadline = timeout + Duration::from_secs(1);
    let closes = half_open
        .into_iter()
        .map(|stream| tokio::spawn(closed_within(stream, deadline)));
    let mut still_open = 0;
    for close in closes {
        if !close.await.unwrap() {
            still_open += 1;
        }
    }
    let all_closed = opened.elapsed();
    assert_eq!(still_open, 0, "connections held past the header timeout");
    assert!(
        all_closed < timeout + Duration::from_secs(3),
        "closing took {all_closed:?}"
    );
    println!(
        "2000 half-open connections closed {all_closed:?} after the first opened; a whole request beside them took {latency:?}"
    );
    assert_eq!(health(address).await, "HTTP/1.1 200 OK");
}

/// Sends a whole `GET /healthz` on a new connection and returns the whole answer, head and body.
async fn health_answer(address: std::net::SocketAddr) -> String {
    let mut stream = TcpStream::connect(address).await.unwrap();
    stream
        .write_all(b"GET /healthz HTTP/1.1\r\nhost: test\r\nconnection: close\r\n\r\n")
        .await
        .unwrap();
    let mut answer = Vec::new();
    let _ = stream.read_to_end(&mut answer).await;
    String::from_utf8_lossy(&answer).into_owned()
}

#[tokio::test]
async fn over_the_connection_bound_a_new_connection_is_answered_503_at_once_and_idle_ones_are_dropped()
 {
    let header_timeout = Duration::from_secs(3);
    let address = serve(ConnectionLimits {
        header_read_timeout: header_timeout,
        max_connections: 2,
    })
    .await;
    // Two connections that never send a byte hold the bound of two.
    let opened = Instant::now();
    let idle: Vec<TcpStream> = vec![
        TcpStream::connect(address).await.unwrap(),
        TcpStream::connect(address).await.unwrap(),
    ];
    // Give the accept loop time to take both.
    tokio::time::sleep(Duration::from_millis(100)).await;
    let started = Instant::now();
    let answer = health_answer(address).await;
    let waited = started.elapsed();
    let (head, body) = answer.split_once("\r\n\r\n").expect("a whole answer");
    assert!(head.starts_with("HTTP/1.1 503 "), "{answer}");
    let head = head.to_ascii_lowercase();
    assert!(head.contains("retry-after: 2"), "{head}");
    assert!(
        head.contains("content-type: application/problem+json"),
        "{head}"
    );
    assert!(head.contains("connection: close"), "{head}");
    let problem: serde_json::Value = serde_json::from_str(body).unwrap();
    assert_eq!(problem["code"], "too_many_connections");
    assert_eq!(problem["status"], 503);
    // Not kept waiting until an idle connection is dropped (a generous bound, far below the header timeout).
    assert!(
        waited < Duration::from_secs(2),
        "answered after {waited:?}, while two idle connections held the bound of two"
    );

    // The idle connections are closed by the header timeout, counted from their accept, and their places serve again.
    let closes: Vec<_> = idle
        .into_iter()
        .map(|stream| {
            tokio::spawn(closed_within(
                stream,
                header_timeout + Duration::from_secs(2),
            ))
        })
        .collect();
    for close in closes {
        assert!(close.await.unwrap(), "an idle connection was kept");
    }
    assert!(opened.elapsed() < header_timeout + Duration::from_secs(2));
    assert_eq!(health(address).await, "HTTP/1.1 200 OK");
}
