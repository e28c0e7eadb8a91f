//! The README's compose topology without containers (docs/design.md §12): two service processes sharing one Postgres
//! through one PgBouncer in transaction pooling mode, requests spread over both. Each waiting run gets two
//! conflicting decisions at once, a denial through one instance and an approval through the other: exactly one wins
//! per turn, the other is told 409 (`already_decided`, or `resume_in_progress` while a winning approval's tools still
//! run), and the stored decision is the winner's; each approved call reaches its executor once.

mod support;
use support::load;

use std::time::Duration;

use futures::future::join_all;
use serde_json::json;
use sqlx::{Connection, PgConnection};

use load::{Api, Kind, OWNERS};
use support::executor::LoopbackExecutor;
use support::pgbouncer::PgBouncer;
use support::{Service, TestDatabase, add_client, call};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_instances_behind_one_pgbouncer_let_exactly_one_of_two_conflicting_decisions_win_each_turn()
 {
    let Some(bouncer) = PgBouncer::start_if_installed("127.0.0.1", 5432) else {
        return;
    };
    let database = TestDatabase::new();
    let key = add_client(
        &database,
        &["users:write", "runs:write", "runs:read", "decisions:write"],
    )
    .await;
    let executor = LoopbackExecutor::start().await;
    let through = bouncer.url(&database.name);
    let tools = executor.tools_config();
    let settings = [
        ("DATABASE_URL", through.as_str()),
        ("DATABASE_MIGRATION_URL", database.url.as_str()),
        ("DATABASE_PGBOUNCER", "true"),
        ("DATABASE_POOL_SIZE", "8"),
        ("TOOLS_CONFIG", tools.as_str()),
    ];
    let first = Service::start_with(&database, &settings).await;
    let second = Service::start_with(&database, &settings).await;
    let apis = [&first, &second]
        .map(|service| Api::new(service.url(""), key.clone(), Duration::from_secs(30)));

    let client = reqwest::Client::new();
    for uid in 1..=OWNERS {
        let body = json!({"username": format!("u{uid}"), "is_admin": false, "can_approve_others": false, "disabled": false});
        let service = if uid % 2 == 0 { &first } else { &second };
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
    // Registrations spread over both instances.
    let mut runs = apis[0].seed(30, 8).await;
    runs.extend(apis[1].seed(30, 8).await);

    // Two conflicting decisions per run at once: a denial through one instance, an approval through the other,
    // which instance gets which alternating from run to run.
    let rounds = join_all(runs.iter().enumerate().map(|(i, run)| {
        let (deny_via, approve_via) = (apis[i % 2].clone(), apis[(i + 1) % 2].clone());
        async move {
            let (denied, approved) =
                tokio::join!(deny_via.decide(run, false), approve_via.decide(run, true));
            (i, run.id, denied, approved)
        }
    }))
    .await;

    let mut connection = PgConnection::connect(&database.url)
        .await
        .expect("the database accepts a direct connection");
    let mut problems = Vec::new();
    let mut approvals = 0;
    let mut wins_per_instance = [0; 2];
    for (i, run, denied, approved) in &rounds {
        let winners: Vec<_> = [denied, approved]
            .into_iter()
            .filter(|answer| answer.status == Some(200))
            .collect();
        let losers_told = [denied, approved]
            .into_iter()
            .filter(|answer| answer.status != Some(200))
            .all(|answer| {
                answer.status == Some(409)
                    && matches!(
                        answer.code.as_deref(),
                        Some("already_decided" | "resume_in_progress")
                    )
            });
        if winners.len() != 1 || !losers_told {
            problems.push(format!("run {run}: {denied:?} / {approved:?}"));
            continue;
        }
        let stored: Vec<bool> =
            sqlx::query_scalar("select approved from approval_events where run_id = $1")
                .bind(run)
                .fetch_all(&mut connection)
                .await
                .expect("the decisions can be read");
        let won_approval = winners[0].kind == Kind::Approve;
        if stored != [won_approval] {
            problems.push(format!(
                "run {run}: the winner approved={won_approval}, stored {stored:?}"
            ));
        }
        let instance = if won_approval { (i + 1) % 2 } else { i % 2 };
        wins_per_instance[instance] += 1;
        approvals += usize::from(won_approval);
    }
    connection.close().await.expect("the connection closes");
    assert!(
        problems.is_empty(),
        "{}\n--- first ---\n{}\n--- second ---\n{}",
        problems.join("\n"),
        first.log(),
        second.log()
    );
    assert!(
        wins_per_instance.iter().all(|&wins| wins > 0),
        "turns won per instance: {wins_per_instance:?}"
    );
    let repeated: Vec<_> = executor
        .calls()
        .into_iter()
        .filter(|(_, n)| *n > 1)
        .collect();
    assert!(repeated.is_empty(), "calls sent twice: {repeated:?}");
    assert_eq!(executor.calls().len(), 2 * approvals);
}
