//! Fair use of the feed's long polls (docs/design.md §17), over a real port: waiting readers are capped per client and
//! per instance (429 with `Retry-After`), a reader that hangs up gives its slot back at once, and a waiter wakes
//! only for its own tenant's events, so a flood of long polls from one key starves no other tenant.

use std::net::SocketAddr;
use std::time::{Duration, Instant};

use approval_resume::app;
use approval_resume::delivery::{EventsHub, FeedCaps};
use approval_resume::listen::ConnectionLimits;
use approval_resume::metrics::FeedCounts;
use approval_resume::state::AppState;
use approval_resume::storage::Database;
use axum::http::StatusCode;
use serde_json::json;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use uuid::Uuid;

use crate::database::TestDatabase;
use crate::support::{self, TestApp};

/// A cursor far past every event: a reader that passes it waits the whole long poll.
pub(crate) const FAR_AHEAD: &str = "9000000000000000000_1";

/// The app of `app`'s database served on a loopback port, with a hub of these caps.
pub(crate) async fn served(app: &TestApp, caps: FeedCaps) -> (SocketAddr, EventsHub) {
    let hub = EventsHub::start_with_caps(
        Database::direct(app.pool.clone()),
        Duration::from_millis(25),
        Duration::from_secs(20),
        caps,
    );
    let state = AppState {
        events: hub.clone(),
        ..app.state.clone()
    };
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let address = listener.local_addr().unwrap();
    tokio::spawn(app::serve(
        listener,
        state,
        ConnectionLimits {
            header_read_timeout: Duration::from_secs(10),
            max_connections: 4_096,
        },
        std::future::pending(),
        Duration::from_secs(1),
    ));
    (address, hub)
}

/// What a long poll from `after` (`None`: the start) that was given `within` got: its status line and head, or
/// `None` when it was cut unanswered.
async fn long_poll(
    address: SocketAddr,
    key: &str,
    after: Option<&str>,
    within: Duration,
) -> Option<String> {
    let mut stream = TcpStream::connect(address).await.unwrap();
    let after = after
        .map(|cursor| format!("&after={cursor}"))
        .unwrap_or_default();
    let request = format!(
        "GET /v1/events?wait=20{after} HTTP/1.1\r\nhost: test\r\nauthorization: Bearer {key}\r\n\r\n"
    );
    stream.write_all(request.as_bytes()).await.unwrap();
    let mut head = Vec::new();
    let read = tokio::time::timeout(within, async {
        let mut buffer = [0u8; 2048];
        while !head.windows(4).any(|w| w == b"\r\n\r\n") {
            match stream.read(&mut buffer).await {
                Ok(0) | Err(_) => break,
                Ok(n) => head.extend_from_slice(&buffer[..n]),
            }
        }
    })
    .await;
    // Cut or answered, the connection is dropped here: a hang-up.
    read.ok()
        .map(|()| String::from_utf8_lossy(&head).into_owned())
}

/// Polls `counts` until `done` holds, for at most `within`; the last counts either way.
pub(crate) async fn counts_until(
    hub: &EventsHub,
    within: Duration,
    done: impl Fn(&FeedCounts) -> bool,
) -> FeedCounts {
    let deadline = Instant::now() + within;
    loop {
        let counts = hub.feed_counts();
        if done(&counts) || Instant::now() >= deadline {
            return counts;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

#[tokio::test]
async fn a_reader_that_hangs_up_stops_waiting() {
    let (_database, pool) = TestDatabase::create().await;
    let app = support::app(pool).await;
    let (address, hub) = served(&app, FeedCaps::default()).await;
    let key = app.admin_key.clone();
    let reader = tokio::spawn(async move {
        long_poll(address, &key, Some(FAR_AHEAD), Duration::from_secs(30)).await
    });
    let waiting = counts_until(&hub, Duration::from_secs(5), |c| c.waiting == 1).await;
    assert_eq!(waiting.waiting, 1, "the long poll never waited");
    reader.abort();
    let _ = reader.await;
    // The wait is 20 s; a slot given back within 2 s was given back by the hang-up.
    let after = counts_until(&hub, Duration::from_secs(2), |c| c.waiting == 0).await;
    assert_eq!(after.waiting, 0, "a reader that hung up still waits");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_flood_of_long_polls_from_one_key_is_capped_and_starves_no_other_tenant() {
    let (_database, pool) = TestDatabase::create().await;
    let app = support::app(pool.clone()).await;
    let caps = FeedCaps {
        per_client: 8,
        per_instance: 10,
    };
    let (address, hub) = served(&app, caps).await;
    // The flooding tenant: one key that floods, and a steady reader of its own that waits throughout (so the hub
    // always has a waiter, and never needs to wake everyone at once).
    let flooder = support::add_client(&pool, "flooder", "flooding", &["events:read"]).await;
    let steady = support::add_client(&pool, "steady", "flooding", &["events:read"]).await;
    let steady_reader = tokio::spawn({
        let steady = steady.clone();
        // From the start: the flooding tenant has no events yet, so it waits, and reads the first one there is.
        async move { long_poll(address, &steady, None, Duration::from_secs(25)).await }
    });
    counts_until(&hub, Duration::from_secs(5), |c| c.waiting == 1).await;
    // The hub's first poll wakes every waiter once; after it, wake-ups are by tenant.
    tokio::time::sleep(Duration::from_millis(300)).await;
    let before = hub.feed_counts();

    // The other tenant's runs, registered before the flood; decided during it through the same port.
    app.user(7, false, false, false).await;
    let mut runs = Vec::new();
    for _ in 0..20 {
        let id = Uuid::new_v4();
        let run = app.register(support::run_body(id, 7)).await;
        runs.push((id, run["turn"]["digest"].as_str().unwrap().to_owned()));
    }

    let flooding = tokio::spawn({
        let flooder = flooder.clone();
        async move {
            let mut answers = Vec::new();
            for _ in 0..15 {
                let round: Vec<_> = (0..40)
                    .map(|_| {
                        let flooder = flooder.clone();
                        tokio::spawn(async move {
                            let cut_after = Duration::from_millis(100);
                            long_poll(address, &flooder, Some(FAR_AHEAD), cut_after).await
                        })
                    })
                    .collect();
                for request in round {
                    answers.push(request.await.unwrap());
                }
            }
            answers
        }
    });
    let flood_over = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let sampling = tokio::spawn({
        let (hub, flood_over) = (hub.clone(), flood_over.clone());
        async move {
            let mut most = 0;
            while !flood_over.load(std::sync::atomic::Ordering::SeqCst) {
                most = most.max(hub.feed_counts().waiting);
                tokio::time::sleep(Duration::from_millis(5)).await;
            }
            most
        }
    });
    // The other tenant decides during the flood; a decision counts when answered 200 within a generous 5 s.
    let client = reqwest::Client::new();
    let mut answered_in_time = 0;
    for (id, digest) in &runs {
        // Spread over the flood's rounds.
        tokio::time::sleep(Duration::from_millis(50)).await;
        let decided = tokio::time::timeout(
            Duration::from_secs(5),
            client
                .post(format!("http://{address}/v1/runs/{id}/decision"))
                .bearer_auth(&app.admin_key)
                .json(&json!({"approved": false, "decider_uid": 7, "turn_digest": digest}))
                .send(),
        )
        .await;
        if let Ok(Ok(answer)) = decided
            && answer.status() == StatusCode::OK
        {
            answered_in_time += 1;
        }
    }
    let answers = flooding.await.unwrap();
    flood_over.store(true, std::sync::atomic::Ordering::SeqCst);
    let most_waiting = sampling.await.unwrap();
    let during = hub.feed_counts();

    println!(
        "flood: {} refused 429, {cut_so_far} cut waiting, at most {most_waiting} waiting at once; \
         {answered_in_time} of {} decisions answered 200 in time; wake-ups {} -> {}",
        answers.iter().flatten().count(),
        runs.len(),
        before.woken,
        during.woken,
        cut_so_far = answers.iter().filter(|answer| answer.is_none()).count(),
    );
    // (a) The instance's waiters stayed within its cap, the flooder's within its own.
    assert!(
        most_waiting <= caps.per_instance,
        "{most_waiting} readers waited at once"
    );
    assert!(during.refused_client > 0, "{during:?}");
    // (b) Every answer the flood got was a 429 with Retry-After and its own code; the rest were cut waiting.
    let refused: Vec<&String> = answers.iter().flatten().collect();
    assert!(
        refused.len() > 400,
        "only {} of 600 requests were refused",
        refused.len()
    );
    for head in &refused {
        assert!(head.starts_with("HTTP/1.1 429 "), "{head}");
        assert!(
            head.to_ascii_lowercase().contains("retry-after: "),
            "{head}"
        );
    }
    let cut = answers.iter().filter(|answer| answer.is_none()).count();
    assert!(cut >= 15, "the flood never held a slot: {cut} cut");
    // (c) The other tenant's decisions were all answered, in time.
    assert_eq!(answered_in_time, runs.len(), "decisions answered in time");
    // (d) Its 20 events woke none of the flooding tenant's waiters, so none of them read again.
    assert_eq!(
        during.woken, before.woken,
        "another tenant's events woke this tenant's readers"
    );
    // Every flooder that hung up gave its slot back: only the steady reader still waits.
    let settled = counts_until(&hub, Duration::from_secs(2), |c| c.waiting == 1).await;
    assert_eq!(settled.waiting, 1, "hung-up readers still hold slots");

    // The counter does count: an event of the flooding tenant wakes the steady reader, which answers 200.
    let flooding_app = app.with_state(AppState {
        events: hub.clone(),
        ..app.state.clone()
    });
    let runs_key = support::add_client(
        &pool,
        "flooding-runs",
        "flooding",
        &["runs:write", "users:write"],
    )
    .await;
    let user = flooding_app
        .call(
            axum::http::Method::PUT,
            "/v1/users/7",
            Some(&runs_key),
            Some(json!({"username": "u7", "is_admin": false, "can_approve_others": false, "disabled": false})),
        )
        .await;
    assert_eq!(user.status, StatusCode::OK, "{:?}", user.body);
    let registered = flooding_app
        .call(
            axum::http::Method::POST,
            "/v1/runs",
            Some(&runs_key),
            Some(support::run_body(Uuid::new_v4(), 7)),
        )
        .await;
    assert_eq!(
        registered.status,
        StatusCode::CREATED,
        "{:?}",
        registered.body
    );
    let steady_answer = steady_reader
        .await
        .unwrap()
        .expect("the steady reader was answered");
    assert!(
        steady_answer.starts_with("HTTP/1.1 200 "),
        "{steady_answer}"
    );
    assert!(hub.feed_counts().woken > before.woken);

    // The counts are on /metrics too.
    let metrics = support::metrics(&flooding_app).await;
    assert!(metrics.contains("# TYPE feed_waiters gauge"), "{metrics}");
    assert!(metrics.contains("feed_waiters_refused_total{cap=\"client\"} "));
}
