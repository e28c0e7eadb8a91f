//! A Postgres failover under a load of decisions (docs/design.md §12), with pg_auto_failover on loopback: the service's
//! `DATABASE_URL` names both nodes with `target_session_attrs=read-write`; the primary (keeper and Postgres) is
//! killed while workers decide and register runs.
//!
//! What it proves: while no node accepts writes every request is answered 503 with Retry-After (never a 500) within
//! `REQUEST_TIMEOUT_MS`; once the secondary is promoted the same process serves again, without a restart; every
//! decision answered 200 is stored whole on the new primary; a client that retries a decision answered 503 gets 200,
//! and nothing is applied twice (one decision per run, each approved call sent to its executor at most once).
//!
//! It takes minutes (the formation's base backup and the monitor's health checks), so it is not in the default
//! run: `cargo nextest run --test failover --run-ignored ignored-only` (TESTING.md has its last figures).

#[path = "failover/autofailover.rs"]
mod autofailover;
mod support;
use support::{consistency, load};

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use serde_json::json;
use sqlx::{Connection, PgConnection};

use autofailover::Formation;
use load::{Answer, Api, Kind, OWNERS};
use support::executor::LoopbackExecutor;
use support::{Service, TestDatabase, add_client, call};

const REQUEST_TIMEOUT_MS: u64 = 3000;
const SLACK: Duration = Duration::from_secs(2);
const WORKERS: usize = 8;

const SETTINGS: [(&str, &str); 7] = [
    ("DATABASE_ACQUIRE_TIMEOUT_MS", "1000"),
    ("DATABASE_STATEMENT_TIMEOUT_MS", "2000"),
    ("REQUEST_TIMEOUT_MS", "3000"),
    // Below REQUEST_TIMEOUT_MS, as the configuration requires.
    ("BODY_READ_TIMEOUT_MS", "2000"),
    ("DATABASE_PRIMARY_CHECK_MS", "250"),
    ("RESUME_LEASE_MARGIN_MS", "500"),
    ("RECOVERY_INTERVAL_SECS", "1"),
];

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "minutes long: cargo nextest run --test failover --run-ignored ignored-only"]
async fn when_the_primary_dies_under_load_requests_get_503_until_the_standby_is_promoted_and_no_decision_is_lost_or_applied_twice()
 {
    let setup = Instant::now();
    let mut formation = tokio::task::block_in_place(Formation::start);
    let setup = setup.elapsed();
    // The binary's subcommands reach node 1 directly; the service gets both nodes. (Dropping this tries to drop the
    // database on node 1, long dead by then, and says so; the formation's directory goes with the formation.)
    let database = TestDatabase {
        name: autofailover::DATABASE.to_owned(),
        url: formation.node_url(0),
    };
    let both_nodes = formation.url();
    let key = add_client(
        &database,
        &["users:write", "runs:write", "runs:read", "decisions:write"],
    )
    .await;
    let executor = LoopbackExecutor::start().await;
    let tools = executor.tools_config();
    let mut settings: Vec<(&str, &str)> = SETTINGS.to_vec();
    settings.push(("TOOLS_CONFIG", &tools));
    settings.push(("DATABASE_URL", &both_nodes));
    let service = Service::start_with(&database, &settings).await;
    let api = Api::new(
        service.url(""),
        key.clone(),
        Duration::from_millis(REQUEST_TIMEOUT_MS) + 3 * SLACK,
    );
    let client = reqwest::Client::new();
    for uid in 1..=OWNERS {
        let body = json!({"username": format!("u{uid}"), "is_admin": false, "can_approve_others": false, "disabled": false});
        let (status, body) = call(
            &client,
            reqwest::Method::PUT,
            service.url(&format!("/v1/users/{uid}")),
            &key,
            Some(body),
        )
        .await;
        assert_eq!(status, 200, "{body}");
    }
    let seeded = api.seed(300, WORKERS).await;

    // Node 2 polled from outside: when it starts accepting writes, the formation has a primary again.
    let promoted: Arc<std::sync::Mutex<Option<Instant>>> = Arc::default();
    let watching = Arc::new(AtomicBool::new(true));
    let formation_ports = formation.node_url(1);
    let poller = {
        let (promoted, watching) = (Arc::clone(&promoted), Arc::clone(&watching));
        tokio::spawn(async move {
            while watching.load(Ordering::Relaxed) {
                let writable = async {
                    let mut connection = PgConnection::connect(&formation_ports).await.ok()?;
                    let row: (String,) = sqlx::query_as("show transaction_read_only")
                        .fetch_one(&mut connection)
                        .await
                        .ok()?;
                    let _ = connection.close().await;
                    Some(row.0 == "off")
                };
                if tokio::time::timeout(Duration::from_secs(1), writable).await == Ok(Some(true)) {
                    *promoted.lock().unwrap() = Some(Instant::now());
                    return;
                }
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
        })
    };

    let running = load::start(&api, seeded.clone(), WORKERS);
    tokio::time::sleep(Duration::from_secs(3)).await;
    let killed = Instant::now();
    tokio::task::block_in_place(|| formation.kill_node(0));
    // Load until a request sent after the promotion succeeded, and a few seconds more.
    let deadline = Instant::now() + Duration::from_secs(120);
    let promoted_at = loop {
        if let Some(at) = *promoted.lock().unwrap() {
            break at;
        }
        assert!(
            Instant::now() < deadline,
            "node 2 was not promoted within 120 s; states {}\n{}",
            formation.states(),
            formation.logs()
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    };
    watching.store(false, Ordering::Relaxed);
    let _ = poller.await;
    tokio::time::sleep(Duration::from_secs(6)).await;
    let answers = running.finish().await;

    // Every answer normal or a 503 problem with Retry-After, within the bound.
    let bound = Duration::from_millis(REQUEST_TIMEOUT_MS) + SLACK;
    let mut problems = Vec::new();
    for answer in &answers {
        let expected = if answer.kind == Kind::Register {
            201
        } else {
            200
        };
        match answer.status {
            Some(status) if status == expected => {}
            Some(503) if answer.problem_json && answer.retry_after => {}
            _ => problems.push(format!("unexpected answer: {answer:?}")),
        }
        if answer.took() > bound {
            problems.push(format!("answered after {:?}: {answer:?}", answer.took()));
        }
    }
    assert!(
        problems.is_empty(),
        "{}\n{}",
        problems.join("\n"),
        tail(&service.log())
    );
    let recovered = answers
        .iter()
        .filter(|answer| answer.sent >= promoted_at && answer.succeeded())
        .map(|answer| answer.answered)
        .min()
        .unwrap_or_else(|| {
            panic!(
                "no request succeeded after the promotion\n{}",
                tail(&service.log())
            )
        });
    let settled = recovered + Duration::from_secs(1);
    let failed_after: Vec<&Answer> = answers
        .iter()
        .filter(|answer| answer.sent >= settled && !answer.succeeded())
        .collect();
    assert!(failed_after.is_empty(), "{failed_after:?}");
    assert!(answers.iter().any(|answer| answer.sent >= settled));

    // The clients retry every decision that was not answered 200, reading the run again for its digest as a client
    // that lost its answer would: each now gets 200, from the new primary. The load sends one decision per run, so
    // the retry's answer stands for it in the check below.
    let mut final_answers = Vec::with_capacity(answers.len());
    let mut retried = 0;
    for answer in &answers {
        if answer.kind == Kind::Register || answer.succeeded() {
            final_answers.push(answer.clone());
            continue;
        }
        let (status, run) = call(
            &client,
            reqwest::Method::GET,
            service.url(&format!("/v1/runs/{}", answer.run)),
            &key,
            None,
        )
        .await;
        assert_eq!(status, 200, "{run}");
        let target = load::Target {
            id: answer.run,
            owner: run["owner_uid"].as_i64().expect("the run's owner"),
            digest: run["turn"]["digest"]
                .as_str()
                .expect("the run's digest")
                .to_owned(),
        };
        let again = api.decide(&target, answer.kind == Kind::Approve).await;
        assert_eq!(again.status, Some(200), "a retried decision: {again:?}");
        retried += 1;
        final_answers.push(again);
    }
    let new_primary = formation.node_url(1);
    consistency::wait_until_no_turn_is_resuming(&new_primary, Duration::from_secs(20)).await;
    let stored = consistency::check(
        &new_primary,
        &seeded.iter().map(|t| t.id).collect::<Vec<_>>(),
        &final_answers,
    )
    .await;
    let calls = executor.calls();
    let repeated: Vec<_> = calls.iter().filter(|(_, n)| **n > 1).collect();
    assert!(repeated.is_empty(), "calls sent twice: {repeated:?}");
    let ready = reqwest::get(service.url("/readyz"))
        .await
        .expect("the same process answers");
    assert_eq!(ready.status(), 200);

    let count = |f: &dyn Fn(&Answer) -> bool| answers.iter().filter(|answer| f(answer)).count();
    eprintln!(
        "FIGURES setup {:.0?}; {} requests ({} answered 503, {} decisions answered 200); no primary for {:.1?} \
         (kill to promotion); first success {:.1?} after the promotion; {retried} decisions retried, all 200; \
         {} executor calls, none twice; {stored}",
        setup,
        answers.len(),
        count(&|answer| answer.status == Some(503)),
        count(&|answer| answer.kind != Kind::Register && answer.succeeded()),
        promoted_at - killed,
        recovered.saturating_duration_since(promoted_at),
        calls.len(),
    );
}

fn tail(text: &str) -> &str {
    let mut start = text.len().saturating_sub(8192);
    while !text.is_char_boundary(start) {
        start += 1;
    }
    &text[start..]
}
