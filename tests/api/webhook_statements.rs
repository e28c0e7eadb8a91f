//! How many statements the delivering side sends per webhook event of a steady stream: a figure, not a check
//! (BENCHMARKS.md, "Webhook delivery"). Postgres counts them itself: the delivering instance's connections log every
//! statement (`log_statement=all`, set for those sessions only), and the test reads its own database's lines back
//! from the server's log, so nothing of the service is instrumented and nothing is estimated.
//!
//! Ignored by default, since it needs the server's log file. Run it with
//! `WEBHOOK_STATEMENT_LOG=/var/log/postgresql/postgresql-15-main.log cargo nextest run --run-ignored only -E
//! 'test(statements_the_delivering_side_sends)'` (add `--no-capture` to see the figures).

use std::collections::{BTreeMap, HashMap};
use std::io::{Read, Seek, SeekFrom};
use std::time::{Duration, Instant};

use approval_resume::delivery::EventsHub;
use approval_resume::delivery::webhooks::{self, Settings};
use approval_resume::storage::Database;
use sqlx::postgres::{PgConnectOptions, PgPoolOptions};
use uuid::Uuid;

use crate::database::TestDatabase;
use crate::support;
use crate::webhooks::{Receiver, Reply, settings, subscribe};

/// Events of the stream, and the gap between two of them (a steady 250 events/s, about half the deny rate the
/// benchmarks saturate at).
const EVENTS: usize = 500;
const GAP: Duration = Duration::from_millis(4);

#[tokio::test]
#[ignore = "reads the Postgres server's log (WEBHOOK_STATEMENT_LOG); prints figures"]
async fn the_statements_the_delivering_side_sends_per_event_of_a_steady_stream_are_printed() {
    let Ok(log_path) = std::env::var("WEBHOOK_STATEMENT_LOG") else {
        eprintln!("WEBHOOK_STATEMENT_LOG is not set: nothing to count");
        return;
    };
    let (database, pool) = TestDatabase::create().await;
    let app = support::app(pool.clone()).await;
    let receiver = Receiver::start(|_| Reply::Status(204)).await;
    subscribe(&app, &receiver.url, None).await;
    let (run, _) = support::owned_run(&app).await;

    // The delivering instance: its hub and dispatcher on connections that log every statement.
    let options: PgConnectOptions = database.url.parse().unwrap();
    let logged = PgPoolOptions::new()
        .max_connections(4)
        .connect_with(options.options([("log_statement", "all")]))
        .await
        .unwrap();
    let hub = EventsHub::start(
        Database::direct(logged.clone()),
        Duration::from_millis(25),
        Duration::from_secs(20),
    );
    let (_stop, stopped) = tokio::sync::watch::channel(false);
    // The service's own lease (the request timeout and ten seconds) and sweep (a second), so that what is counted per
    // event is what a deployment sends, not the short test settings' extra sweeps.
    let deployed = Settings {
        lease: settings().limits.timeout + Duration::from_secs(10),
        sweep_interval: Duration::from_secs(1),
        ..settings()
    };
    webhooks::spawn(Database::direct(logged), hub.clone(), deployed, stopped).unwrap();
    // Warm up (the registration's event), then count from here.
    assert_eq!(receiver.wait_for(1, Duration::from_secs(20)).await.len(), 1);
    tokio::time::sleep(Duration::from_secs(2)).await;
    let from = std::fs::metadata(&log_path).unwrap().len();

    let started = std::time::Instant::now();
    let mut ticks = tokio::time::interval(GAP);
    let mut committed = HashMap::new();
    for _ in 0..EVENTS {
        ticks.tick().await;
        // A commit of this instance's, as a decision's would be, announced to the hub the same way.
        let id: Uuid = sqlx::query_scalar(
            "insert into events (tenant, run_id, type, data)
             values ('default', $1, 'run.resumed', '{}') returning public_id",
        )
        .bind(run)
        .fetch_one(&pool)
        .await
        .unwrap();
        committed.insert(format!("evt_{}", id.simple()), Instant::now());
        hub.committed();
    }
    let streamed = started.elapsed();
    let got = receiver.wait_for(1 + EVENTS, Duration::from_secs(60)).await;
    assert_eq!(got.len(), 1 + EVENTS, "every event arrived");
    let delivered = started.elapsed();
    // From the insert's answer (after its commit) to the receiver's arrival, on this process's one clock.
    let mut lags: Vec<Duration> = got
        .iter()
        .filter_map(|request| {
            let at = committed.get(request.header("webhook-id"))?;
            Some(request.at.saturating_duration_since(*at))
        })
        .collect();
    lags.sort();
    let quantile = |q: f64| lags[((lags.len() - 1) as f64 * q).round() as usize];
    // Let the subscription go idle and be given up, so the count includes the whole round.
    tokio::time::sleep(Duration::from_secs(3)).await;
    let counted = started.elapsed();

    let mut log = std::fs::File::open(&log_path).unwrap();
    log.seek(SeekFrom::Start(from)).unwrap();
    let mut text = String::new();
    log.read_to_string(&mut text).unwrap();
    let counts = count_statements(&text, &database.name);
    let total: usize = counts.values().sum();
    let without_hub = total - counts.get("hub poll").copied().unwrap_or(0);
    println!(
        "{EVENTS} events, one every {GAP:?}: streamed in {streamed:?}, all delivered after {delivered:?}, counted \
         over {counted:?}"
    );
    println!(
        "commit to receiver (from the insert's answer; a figure of this machine at this moment, not of the code \
         alone): p50 {:?}, p99 {:?}, max {:?}",
        quantile(0.5),
        quantile(0.99),
        quantile(1.0)
    );
    for (kind, count) in &counts {
        println!(
            "  {kind:<24} {count:>6}  {:.3} per event",
            *count as f64 / EVENTS as f64
        );
    }
    println!(
        "  all                      {total:>6}  {:.3} per event; without the hub's polls {:.3} per event",
        total as f64 / EVENTS as f64,
        without_hub as f64 / EVENTS as f64
    );
}

/// The statements the server logged for `database`, by kind (the text they begin with tells them apart).
fn count_statements(log: &str, database: &str) -> BTreeMap<&'static str, usize> {
    let marker = format!("@{database} LOG:  ");
    let mut counts = BTreeMap::new();
    let lines: Vec<&str> = log.lines().collect();
    for (n, line) in lines.iter().enumerate() {
        let Some((_, logged)) = line.split_once(&marker) else {
            continue;
        };
        if !(logged.starts_with("execute ") || logged.starts_with("statement: ")) {
            continue;
        }
        // A statement spans the lines up to the next one with the log's prefix (a timestamp).
        let mut statement = logged.to_owned();
        for next in &lines[n + 1..] {
            if next.starts_with("20") {
                break;
            }
            statement.push(' ');
            statement.push_str(next.trim());
        }
        *counts.entry(kind_of(&statement)).or_insert(0) += 1;
    }
    counts
}

fn kind_of(statement: &str) -> &'static str {
    let has = |text: &str| statement.contains(text);
    if has("as below") {
        "hub poll"
    } else if has("select exists (select 1 from webhook_subscriptions)")
        || has("select count(*) from webhook_subscriptions")
    {
        "subscriptions exist?"
    } else if has("set lease_owner = $1") {
        "claim"
    } else if has("from events") && !has("update") {
        "read pending events"
    } else if has("set cursor_xid") {
        "cursor write (+lease)"
    } else if has("set attempts = attempts + 1") {
        "failed"
    } else if has("set lease_owner = null") {
        "release"
    } else {
        "other"
    }
}
