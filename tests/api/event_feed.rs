//! Events (docs/design.md §10): one per change, written only if the change commits, holding no payload, and read
//! through the feed `GET /v1/events` without a miss or a repeat, however commits interleave.

use std::collections::{HashMap, HashSet};
use std::time::{Duration, Instant};

use approval_resume::domain::event_payloads::{self as event_data, EventType, RunFacts};
use approval_resume::domain::vocabulary::RunStatus;
use approval_resume::storage::{outbox, runs};
use axum::http::{Method, StatusCode};
use serde_json::{Value, json};
use sqlx::{Connection, PgPool};
use uuid::Uuid;

use crate::database::TestDatabase;
use crate::support::{self, TestApp};

/// One answer of the feed: its events and the cursor to pass next.
struct Page {
    events: Vec<Value>,
    next: String,
}

async fn read_feed(app: &TestApp, key: &str, after: Option<&str>, wait: u64) -> Page {
    let mut path = format!("/v1/events?wait={wait}");
    if let Some(after) = after {
        path.push_str(&format!("&after={after}"));
    }
    let answer = app.call(Method::GET, &path, Some(key), None).await;
    assert_eq!(answer.status, StatusCode::OK, "{:?}", answer.body);
    Page {
        events: answer.body["events"].as_array().unwrap().clone(),
        next: answer.body["next_cursor"].as_str().unwrap().to_owned(),
    }
}

/// Every event of the tenant, read page by page from the start.
async fn all_events(app: &TestApp) -> Vec<Value> {
    let mut events = Vec::new();
    let mut after: Option<String> = None;
    loop {
        let page = read_feed(app, &app.admin_key, after.as_deref(), 0).await;
        if page.events.is_empty() {
            return events;
        }
        events.extend(page.events);
        after = Some(page.next);
    }
}

fn kinds_of(events: &[Value], run_id: Uuid) -> Vec<String> {
    events
        .iter()
        .filter(|event| event["data"]["run_id"] == run_id.to_string())
        .map(|event| event["type"].as_str().unwrap().to_owned())
        .collect()
}

async fn event_count(pool: &PgPool) -> i64 {
    sqlx::query_scalar("select count(*) from events")
        .fetch_one(pool)
        .await
        .unwrap()
}

#[tokio::test]
async fn every_change_writes_its_event_once_and_the_feed_tells_them_in_order() {
    let (_database, pool) = TestDatabase::create().await;
    let app = support::app(pool.clone()).await;
    let (run_id, digest) = support::owned_run(&app).await;
    assert_eq!(
        app.decide(run_id, false, Some(7), &digest).await.status,
        StatusCode::OK
    );
    // A replay of the same decision changes nothing, so it writes nothing.
    assert_eq!(
        app.decide(run_id, false, Some(7), &digest).await.status,
        StatusCode::OK
    );
    let turn = app
        .post(
            &format!("/v1/runs/{run_id}/turns"),
            json!({"messages": [{"role": "assistant", "content": null,
                                 "tool_calls": [support::call("call_9", "read_page", "{}")]}]}),
        )
        .await;
    assert_eq!(turn.status, StatusCode::OK, "{:?}", turn.body);
    let next_digest = turn.body["turn"]["digest"].as_str().unwrap().to_owned();
    assert_eq!(
        app.decide(run_id, true, Some(7), &next_digest).await.status,
        StatusCode::OK
    );
    let complete = app
        .post(&format!("/v1/runs/{run_id}/complete"), json!({}))
        .await;
    assert_eq!(complete.status, StatusCode::OK);
    // Completing it again is no change.
    app.post(&format!("/v1/runs/{run_id}/complete"), json!({}))
        .await;
    let (cancelled, _) = support::owned_run(&app).await;
    assert_eq!(
        app.post(&format!("/v1/runs/{cancelled}/cancel"), json!({}))
            .await
            .status,
        StatusCode::OK
    );

    let events = all_events(&app).await;
    assert_eq!(
        kinds_of(&events, run_id),
        [
            "run.waiting",
            "run.resumed",
            "run.waiting",
            "run.resumed",
            "run.completed"
        ]
    );
    assert_eq!(
        kinds_of(&events, cancelled),
        ["run.waiting", "run.cancelled"]
    );
    assert_eq!(events.len() as i64, event_count(&pool).await);

    let run_events: Vec<&Value> = events
        .iter()
        .filter(|event| event["data"]["run_id"] == run_id.to_string())
        .collect();
    let denied = &run_events[1]["data"];
    assert_eq!(denied["turn"], json!({"index": 0, "digest": digest}));
    assert_eq!(
        denied["decision"],
        json!({"approved": false, "decided_by": "run_owner", "decider_uid": 7})
    );
    assert_eq!(denied["outcomes"], json!({"denied": 2}));
    assert_eq!(denied["tenant"], "default");
    assert_eq!(denied["status"], "resumed");
    let approved = &run_events[3]["data"];
    assert_eq!(approved["turn"]["index"], 1);
    assert_eq!(approved["decision"]["approved"], true);
    // No executor is configured in this app, so the approved call is not permitted.
    assert_eq!(approved["outcomes"], json!({"not_permitted": 1}));
    for event in &events {
        let id = event["id"].as_str().unwrap();
        assert!(id.starts_with("evt_") && id.len() == 36, "{id}");
        assert!(event["timestamp"].is_string());
    }
    let ids: HashSet<&str> = events
        .iter()
        .map(|event| event["id"].as_str().unwrap())
        .collect();
    assert_eq!(ids.len(), events.len(), "every event has its own id");
}

#[tokio::test]
async fn a_change_that_does_not_commit_leaves_no_event() {
    let (_database, pool) = TestDatabase::create().await;
    let app = support::app(pool.clone()).await;
    let (run_id, digest) = support::owned_run(&app).await;
    let before = event_count(&pool).await;

    // Refused changes roll back.
    assert_eq!(
        app.decide(run_id, false, Some(7), &"0".repeat(64))
            .await
            .status,
        StatusCode::CONFLICT
    );
    assert_eq!(
        app.post(&format!("/v1/runs/{run_id}/complete"), json!({}))
            .await
            .status,
        StatusCode::CONFLICT
    );
    assert_eq!(event_count(&pool).await, before);

    // A change whose transaction is rolled back after writing its event: the event goes with it.
    let mut tx = pool.begin().await.unwrap();
    runs::lock(&mut tx, "default", run_id)
        .await
        .unwrap()
        .unwrap();
    let run = runs::set_status(
        &mut tx,
        run_id,
        approval_resume::vocabulary::RunStatus::Cancelled,
    )
    .await
    .unwrap();
    outbox::record_status(&mut tx, &run).await.unwrap();
    tx.rollback().await.unwrap();
    assert_eq!(event_count(&pool).await, before);

    assert_eq!(
        app.decide(run_id, false, Some(7), &digest).await.status,
        StatusCode::OK
    );
    assert_eq!(event_count(&pool).await, before + 1);
}

#[tokio::test]
async fn events_hold_no_transcript_arguments_or_results_even_at_privacy_full() {
    let (_database, pool) = TestDatabase::create().await;
    let app = support::app(pool.clone()).await;
    app.user(7, false, false, false).await;
    let canary = "CANARY-7f3a9";
    let id = Uuid::new_v4();
    let body = json!({
        "id": id,
        "owner_uid": 7,
        "privacy_level": "full",
        "messages": [
            {"role": "system", "content": format!("system {canary}")},
            {"role": "user", "content": format!("user {canary}")},
            {"role": "assistant", "content": format!("thinking {canary}"), "tool_calls": [
                support::call("call_1", "update_page_metadata", &format!(r#"{{"description": "{canary}"}}"#)),
            ]},
        ],
        "tools": [{"name": "update_page_metadata", "effect": "write"}],
    });
    let run = app.register(body).await;
    let digest = run["turn"]["digest"].as_str().unwrap();
    let decided = app
        .post(
            &format!("/v1/runs/{id}/decision"),
            json!({"approved": false, "decider_uid": 7, "turn_digest": digest, "reason": "variant"}),
        )
        .await;
    assert_eq!(decided.status, StatusCode::OK);
    let turn = app
        .post(
            &format!("/v1/runs/{id}/turns"),
            json!({"messages": [
                {"role": "user", "content": format!("again {canary}")},
                {"role": "assistant", "content": null, "tool_calls": [
                    support::call("call_2", "update_page_metadata", &format!(r#"{{"d": "{canary}"}}"#))]},
            ]}),
        )
        .await;
    assert_eq!(turn.status, StatusCode::OK, "{:?}", turn.body);
    app.post(&format!("/v1/runs/{id}/cancel"), json!({})).await;

    let stored: Vec<String> = sqlx::query_scalar("select data::text from events")
        .fetch_all(&pool)
        .await
        .unwrap();
    assert_eq!(stored.len(), 4);
    let answer = app.get("/v1/events").await;
    let text = String::from_utf8(answer.bytes).unwrap();
    for text in stored.iter().chain([&text]) {
        assert!(!text.contains(canary), "a payload reached an event: {text}");
        assert!(
            !text.contains("variant"),
            "a reason reached an event: {text}"
        );
        assert!(
            !text.contains("declined"),
            "a result text reached an event: {text}"
        );
    }
}

#[tokio::test]
async fn the_feed_shows_a_tenant_only_its_own_events_and_refuses_a_bad_cursor() {
    let (_database, pool) = TestDatabase::create().await;
    let app = support::app(pool.clone()).await;
    support::owned_run(&app).await;
    let stranger = support::add_client(&pool, "stranger", "elsewhere", &["events:read"]).await;
    let page = read_feed(&app, &stranger, None, 0).await;
    assert!(page.events.is_empty(), "{:?}", page.events);
    assert_eq!(all_events(&app).await.len(), 1);

    for query in [
        "after=djEuMS4y!",
        "after=abc",
        "wait=-1",
        "after=1_-2",
        "limit=0",
        "limit=1001",
        "colour=red",
    ] {
        let answer = app.get(&format!("/v1/events?{query}")).await;
        support::assert_problem(
            &answer,
            StatusCode::UNPROCESSABLE_ENTITY,
            if query.starts_with("after") {
                "invalid_cursor"
            } else {
                "invalid_query"
            },
        );
    }
}

#[tokio::test]
async fn the_feed_pages_with_limit_and_an_empty_page_keeps_the_cursor() {
    let (_database, pool) = TestDatabase::create().await;
    let app = support::app(pool).await;
    for _ in 0..3 {
        support::owned_run(&app).await;
    }
    let first = app.get("/v1/events?limit=2").await;
    assert_eq!(first.body["events"].as_array().unwrap().len(), 2);
    let next = first.body["next_cursor"].as_str().unwrap();
    let second = app.get(&format!("/v1/events?limit=2&after={next}")).await;
    assert_eq!(second.body["events"].as_array().unwrap().len(), 1);
    let last = second.body["next_cursor"].as_str().unwrap();
    let empty = app.get(&format!("/v1/events?after={last}")).await;
    assert_eq!(empty.body["events"], json!([]));
    assert_eq!(empty.body["next_cursor"], last);
}

/// A transaction that writes an event (taking its id), and commits only when told to.
async fn late_commit(pool: PgPool, run_id: Uuid, hold: Duration) {
    let mut tx = pool.begin().await.unwrap();
    runs::lock(&mut tx, "default", run_id)
        .await
        .unwrap()
        .unwrap();
    outbox::insert(
        &mut tx,
        "default",
        run_id,
        EventType::Cancelled,
        &event_data::data(
            &RunFacts {
                run_id,
                tenant: "default",
                status: RunStatus::Cancelled,
                format: approval_resume::domain::model_input::ModelInputFormat::OpenAiChat,
                turn_index: 0,
                turn_digest: "late",
                source: None,
            },
            None,
        ),
    )
    .await
    .unwrap();
    tokio::time::sleep(hold).await;
    tx.commit().await.unwrap();
}

#[tokio::test]
async fn a_reader_following_the_cursor_gets_an_event_that_took_its_id_early_and_committed_late() {
    let (_database, pool) = TestDatabase::create().await;
    let app = support::app(pool.clone()).await;
    let (late_run, _) = support::owned_run(&app).await;
    let start = read_feed(&app, &app.admin_key, None, 0).await;
    assert_eq!(start.events.len(), 1);

    // The late transaction takes its event id first, then sleeps.
    let late = tokio::spawn(late_commit(
        pool.clone(),
        late_run,
        Duration::from_millis(800),
    ));
    tokio::time::sleep(Duration::from_millis(200)).await;
    // Meanwhile another change commits, with a higher event id.
    let (early_run, _) = support::owned_run(&app).await;
    let id_order: Vec<Uuid> = sqlx::query_scalar("select run_id from events order by id")
        .fetch_all(&pool)
        .await
        .unwrap();
    assert_eq!(id_order.len(), 2, "the late event is not committed yet");
    // A reader now must not be handed the later event alone (its cursor would pass the late one).
    let during = read_feed(&app, &app.admin_key, Some(&start.next), 0).await;
    assert!(during.events.is_empty(), "{:?}", during.events);

    // A long poll answers once the late transaction commits, with both events, the late one first.
    let page = read_feed(&app, &app.admin_key, Some(&start.next), 5).await;
    late.await.unwrap();
    let mut got = page.events;
    let mut next = page.next;
    while got.len() < 2 {
        let more = read_feed(&app, &app.admin_key, Some(&next), 5).await;
        got.extend(more.events);
        next = more.next;
    }
    let runs_in_order: Vec<String> = got
        .iter()
        .map(|event| event["data"]["run_id"].as_str().unwrap().to_owned())
        .collect();
    assert_eq!(runs_in_order, [late_run.to_string(), early_run.to_string()]);
    assert!(
        read_feed(&app, &app.admin_key, Some(&next), 0)
            .await
            .events
            .is_empty()
    );
}

#[tokio::test]
async fn three_instances_deciding_at_once_with_late_commits_lose_and_repeat_no_event() {
    let (database, pool) = TestDatabase::create().await;
    let app = support::app(pool.clone()).await;
    app.user(7, false, false, false).await;
    // Three instances: each its own pool and its own events hub.
    let mut instances = Vec::new();
    for _ in 0..3 {
        instances.push(app.with_pool(database.pool(8).await));
    }
    const RUNS: usize = 45;
    let mut runs = Vec::new();
    for _ in 0..RUNS {
        let id = Uuid::new_v4();
        let run = app.register(support::run_body(id, 7)).await;
        runs.push((id, run["turn"]["digest"].as_str().unwrap().to_owned()));
    }
    let late_runs: Vec<Uuid> = runs.iter().take(9).map(|(id, _)| *id).collect();

    // The reader starts before the writers and follows the cursor with long polls until it has everything.
    let expected = RUNS * 2 + late_runs.len();
    let reader_app = instances[0].second_instance();
    let reader = tokio::spawn(async move {
        let mut seen: Vec<Value> = Vec::new();
        let mut after: Option<String> = None;
        let deadline = Instant::now() + Duration::from_secs(60);
        while seen.len() < expected && Instant::now() < deadline {
            let page = read_feed(&reader_app, &reader_app.admin_key, after.as_deref(), 2).await;
            seen.extend(page.events);
            after = Some(page.next);
        }
        // One more read: nothing may come after the last expected event.
        let tail = read_feed(&reader_app, &reader_app.admin_key, after.as_deref(), 1).await;
        seen.extend(tail.events);
        seen
    });

    let mut writers = Vec::new();
    for (n, chunk) in runs.chunks(RUNS / 3).enumerate() {
        let instance = instances[n % 3].second_instance();
        let chunk = chunk.to_vec();
        writers.push(tokio::spawn(async move {
            for (id, digest) in chunk {
                let answer = instance.decide(id, false, Some(7), &digest).await;
                assert_eq!(answer.status, StatusCode::OK, "{:?}", answer.body);
            }
        }));
    }
    for (n, run_id) in late_runs.iter().enumerate() {
        let pool = pool.clone();
        let run_id = *run_id;
        writers.push(tokio::spawn(async move {
            tokio::time::sleep(Duration::from_millis(20 * n as u64)).await;
            late_commit(pool, run_id, Duration::from_millis(150 + 40 * n as u64)).await;
        }));
    }
    for writer in writers {
        writer.await.unwrap();
    }
    let seen = reader.await.unwrap();

    let ids: Vec<&str> = seen
        .iter()
        .map(|event| event["id"].as_str().unwrap())
        .collect();
    let unique: HashSet<&str> = ids.iter().copied().collect();
    assert_eq!(unique.len(), ids.len(), "an event was read twice");
    let stored: HashSet<String> = sqlx::query_scalar::<_, Uuid>("select public_id from events")
        .fetch_all(&pool)
        .await
        .unwrap()
        .into_iter()
        .map(|id| format!("evt_{}", id.simple()))
        .collect();
    assert_eq!(stored.len(), expected);
    let read: HashSet<String> = unique.iter().map(|id| id.to_string()).collect();
    assert_eq!(read, stored, "the reader missed an event");

    // Each run's events in the order they happened: registered, then decided (then the late one, which waited
    // for the run's lock behind the decision or went before it; either way after the registration).
    let mut by_run: HashMap<String, Vec<String>> = HashMap::new();
    for event in &seen {
        by_run
            .entry(event["data"]["run_id"].as_str().unwrap().to_owned())
            .or_default()
            .push(event["type"].as_str().unwrap().to_owned());
    }
    for (run_id, kinds) in &by_run {
        assert_eq!(kinds[0], "run.waiting", "{run_id}: {kinds:?}");
        assert!(
            kinds.contains(&"run.resumed".to_owned()),
            "{run_id}: {kinds:?}"
        );
    }
}

/// A long poll waiting on one instance is answered with an event committed on another, exactly once, by a reader
/// that follows the cursor. The latency from commit to answer is printed, not asserted: speed is measured by the
/// benchmark's events phase (BENCHMARKS.md), never by a timed test on a shared machine. A poll that ends empty
/// (its wait ran out) is followed again, as any reader would.
#[tokio::test]
async fn a_long_poll_is_answered_with_an_event_committed_on_another_instance() {
    let (database, pool) = TestDatabase::create().await;
    let app = support::app(pool.clone()).await;
    let reader = app.with_pool(database.pool(4).await);
    let writer = app.with_pool(database.pool(4).await);
    app.user(7, false, false, false).await;
    let mut after = read_feed(&reader, &reader.admin_key, None, 0).await.next;
    let mut latencies = Vec::new();
    let mut empty_polls = 0;
    for _ in 0..40 {
        let id = Uuid::new_v4();
        let poll = {
            let reader = reader.second_instance();
            let after = after.clone();
            tokio::spawn(async move {
                let page = read_feed(&reader, &reader.admin_key, Some(&after), 5).await;
                (page, Instant::now())
            })
        };
        // Let the poll settle into its wait, then commit on the other instance.
        tokio::time::sleep(Duration::from_millis(30)).await;
        writer.register(support::run_body(id, 7)).await;
        let committed = Instant::now();
        let (mut page, mut answered) = poll.await.unwrap();
        while page.events.is_empty() {
            empty_polls += 1;
            assert!(empty_polls <= 5, "the event never reached the feed");
            page = read_feed(&reader, &reader.admin_key, Some(&page.next), 5).await;
            answered = Instant::now();
        }
        assert_eq!(page.events.len(), 1, "exactly the one event committed");
        assert_eq!(page.events[0]["data"]["run_id"], id.to_string());
        latencies.push(answered.saturating_duration_since(committed));
        after = page.next;
    }
    latencies.sort();
    let p50 = latencies[latencies.len() / 2];
    let p99 = latencies[(latencies.len() * 99).div_ceil(100) - 1];
    println!(
        "long-poll latency after a commit on another instance: p50 {p50:?}, p99 {p99:?} (n = 40, {empty_polls} polls ended empty)"
    );
}

/// The stall seen once in CI: a long poll that ended empty although the event had committed. The hub found the
/// event readable and woke the reader; the reader's own read, a moment later on another connection, found a lower
/// readable bound (`events_readable_below()` reads `pg_stat_activity` apart from its snapshot, so a transaction of
/// another database that it cannot place counts as running), read nothing, and waited for the next change of the
/// newest event, which never came. Under load the window is that of a transaction elsewhere on the cluster ending
/// between a read's snapshot and its look at `pg_stat_activity`; here it is made to last: the reader's
/// connection looks at `pg_stat_activity` in a transaction (which keeps what it saw until the transaction ends)
/// before a transaction of another database takes its id. The waits are bounded; nothing is timed.
#[tokio::test]
async fn a_reader_woken_by_the_hub_reads_the_event_even_when_its_own_read_places_less() {
    let (database, pool) = TestDatabase::create().await;
    let app = support::app(pool.clone()).await;
    app.user(7, false, false, false).await;

    // The reader's connection sees `pg_stat_activity` as it is now, until its transaction ends.
    let reader = std::sync::Arc::new(tokio::sync::Mutex::new(pool.begin().await.unwrap()));
    sqlx::query("select count(*) from pg_stat_activity")
        .execute(&mut **reader.lock().await)
        .await
        .unwrap();
    // Then a transaction of another database takes its id and stays open.
    let mut elsewhere =
        sqlx::PgConnection::connect(&crate::database::with_database(&database.url, "postgres"))
            .await
            .unwrap();
    sqlx::query("begin").execute(&mut elsewhere).await.unwrap();
    sqlx::query("select pg_current_xact_id()")
        .execute(&mut elsewhere)
        .await
        .unwrap();
    // And an event commits here, with a later transaction id.
    let run_id = Uuid::new_v4();
    app.register(support::run_body(run_id, 7)).await;

    // The reader's own bound is below the event (the setup makes the divergence; without it this test proves
    // nothing), while a fresh read, like the hub's, places the other database's transaction and finds the event.
    let own = outbox::page(
        &mut **reader.lock().await,
        "default",
        outbox::Position::START,
        0,
        10,
    )
    .await
    .unwrap();
    assert!(
        own.is_empty(),
        "the reader's own read must place less: {own:?}"
    );
    let fresh = outbox::readable(&pool, 0).await.unwrap();
    assert_ne!(
        fresh.newest,
        outbox::Position::START,
        "the hub's read finds the event"
    );

    // A long poll through the hub, reading on the reader's connection: answered with the event, not the
    // emptiness of the whole wait.
    let hub = support::events_hub(&pool);
    let waiter = hub.feed_waiter("default", "admin").unwrap();
    let page = hub
        .read_or_wait(waiter, Duration::from_secs(10), |floor| {
            let reader = std::sync::Arc::clone(&reader);
            async move {
                let mut reader = reader.lock().await;
                outbox::page(&mut **reader, "default", outbox::Position::START, floor, 10).await
            }
        })
        .await
        .unwrap();
    assert_eq!(page.len(), 1, "the long poll ended empty");
    assert_eq!(page[0].run_id, Some(run_id));

    sqlx::query("rollback")
        .execute(&mut elsewhere)
        .await
        .unwrap();
}

#[tokio::test]
async fn a_wait_longer_than_the_service_allows_is_cut_to_its_maximum() {
    let (_database, pool) = TestDatabase::create().await;
    let app = support::app(pool.clone()).await;
    let hub = approval_resume::delivery::EventsHub::start(
        approval_resume::storage::Database::direct(pool),
        Duration::from_millis(25),
        Duration::from_secs(1),
    );
    let short = app.with_state(approval_resume::state::AppState {
        events: hub,
        ..app.state.clone()
    });
    let started = Instant::now();
    let page = read_feed(&short, &short.admin_key, None, 3600).await;
    let waited = started.elapsed();
    assert!(page.events.is_empty());
    assert!(
        waited >= Duration::from_millis(900) && waited < Duration::from_secs(10),
        "{waited:?}"
    );
}
