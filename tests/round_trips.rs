//! The round trips of an approval (issue 17): one statement or transaction to take the turn, the executor call, one
//! statement to close it, and nothing else on the way. Counted over what Postgres actually ran, as
//! tests/distribution.rs does: the real binary on a private cluster with `pg_stat_statements`, one approval of a
//! one-call turn through a loopback executor, and the executions recorded from just before it to just after it
//! (each execution is one round trip; `BEGIN` and `COMMIT` are counted too). A count, not a time.

#[allow(dead_code)] // The fault tests stop and restart their cluster; this one only starts it.
#[path = "faults/cluster.rs"]
mod cluster;
mod common;

use serde_json::{Value, json};
use sqlx::{Connection, PgConnection};
use uuid::Uuid;

use cluster::Cluster;
use common::executor::LoopbackExecutor;
use common::{Service, TestDatabase, add_client, call};

/// The bound on the statements of a one-call approval, the API key's lookup included.
const MOST_STATEMENTS: i64 = 10;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_one_call_approval_makes_at_most_ten_statements() {
    let cluster = tokio::task::block_in_place(|| {
        Cluster::start_new_with("shared_preload_libraries = 'pg_stat_statements'")
    });
    let name = format!("approval_resume_trips_{}", Uuid::new_v4().simple());
    let database = TestDatabase {
        url: cluster.url(&name),
        name,
    };
    let key = add_client(
        &database,
        &["users:write", "runs:write", "runs:read", "decisions:write"],
    )
    .await;
    let executor = LoopbackExecutor::start().await;
    let tools = executor.tools_config();
    // The periodic tasks that can be slowed are, so that none of their statements falls inside the count.
    let service = Service::start_with(
        &database,
        &[
            ("TOOLS_CONFIG", tools.as_str()),
            ("RECOVERY_INTERVAL_SECS", "3600"),
            ("EXPIRY_SWEEP_INTERVAL_MS", "3600000"),
            ("EVENTS_POLL_INTERVAL_MS", "60000"),
        ],
    )
    .await;
    let client = reqwest::Client::new();
    let send = |method: reqwest::Method, path: String, body: Value| {
        let (client, url, key) = (client.clone(), service.url(&path), key.clone());
        async move { call(&client, method, url, &key, Some(body)).await }
    };
    let user = json!({"username": "ada", "is_admin": false, "can_approve_others": false, "disabled": false});
    let (status, _) = send(reqwest::Method::PUT, "/v1/users/1".into(), user).await;
    assert_eq!(status, 200);
    let mut runs = Vec::new();
    for _ in 0..2 {
        let id = Uuid::new_v4();
        let body = json!({
            "id": id, "owner_uid": 1,
            "messages": [
                {"role": "user", "content": "Shorten page 12."},
                {"role": "assistant", "content": null, "tool_calls": [{"id": "call_1", "type": "function",
                    "function": {"name": "update_page", "arguments": "{\"page\": 12}"}}]},
            ],
            "tools": [{"name": "update_page", "effect": "write"}],
        });
        let (status, run) = send(reqwest::Method::POST, "/v1/runs".into(), body).await;
        assert_eq!(status, 201, "{run}");
        runs.push((id, run["turn"]["digest"].as_str().unwrap().to_owned()));
    }
    let approve = |(id, digest): &(Uuid, String)| {
        let body = json!({"approved": true, "decider_uid": 1, "turn_digest": digest});
        send(
            reqwest::Method::POST,
            format!("/v1/runs/{id}/decision"),
            body,
        )
    };
    // One approval first, so that the pool's connections are open before the count starts.
    let (status, answer) = approve(&runs[0]).await;
    assert_eq!(status, 200, "{answer}");

    let mut admin = PgConnection::connect(&database.url)
        .await
        .expect("a direct connection");
    sqlx::raw_sql(
        "create extension if not exists pg_stat_statements; select pg_stat_statements_reset()",
    )
    .execute(&mut admin)
    .await
    .expect("pg_stat_statements is loaded");
    let (status, answer) = approve(&runs[1]).await;
    assert_eq!(status, 200, "{answer}");
    assert_eq!(answer["results"][0]["outcome"], "ok", "{answer}");
    assert_eq!(
        executor.calls().get(&format!("{}:call_1", runs[1].0)),
        Some(&1),
        "the approved call was sent once"
    );

    // The webhook dispatcher looks for subscriptions once a second whatever happens (not a setting); that look is
    // not the approval's.
    let executed: Vec<(String, i64)> = sqlx::query_as(
        "select query, calls from pg_stat_statements
         where dbid = (select oid from pg_database where datname = current_database())
           and query not ilike '%pg_stat_statements%'
           and query not ilike '%webhook_subscriptions%'
         order by query",
    )
    .fetch_all(&mut admin)
    .await
    .expect("the statements can be read");
    admin.close().await.expect("the connection closes");
    let total: i64 = executed.iter().map(|(_, calls)| calls).sum();
    let listing: Vec<String> = executed
        .iter()
        .map(|(query, calls)| {
            let text = query.split_whitespace().collect::<Vec<_>>().join(" ");
            format!("{calls} × {}", text.chars().take(120).collect::<String>())
        })
        .collect();
    eprintln!(
        "{total} statements in one one-call approval:\n{}",
        listing.join("\n")
    );
    assert!(
        total <= MOST_STATEMENTS,
        "{total} statements, more than {MOST_STATEMENTS}:\n{}",
        listing.join("\n")
    );
}
