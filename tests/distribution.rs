//! The claim behind the README's "Past one primary" (DESIGN.md §12): every statement on the decision path addresses
//! one run, so the run-scoped tables can be distributed by run id (Citus) and each decision stays on one node.
//!
//! Checked over what Postgres actually ran: the real binary, on a private cluster with `pg_stat_statements`, makes
//! denials, approvals (through a loopback executor), replays, a stale and a conflicting decision; then every
//! statement recorded since just before the first decision is read back. Each that touches a run-scoped table must
//! pin the run id: an equality on `run_id` or on the run's `id` to a parameter, or an insert that names the
//! `run_id` (the `id` for `runs`) among its columns. Statements on reference tables (`api_clients`,
//! `backend_users`, replicated to every node) and statements on no table need not.

#[allow(dead_code)] // The fault tests stop and restart their cluster; this one only starts it.
#[path = "faults/cluster.rs"]
mod cluster;
mod common;

use regex::Regex;
use serde_json::json;
use sqlx::{Connection, PgConnection};
use uuid::Uuid;

use cluster::Cluster;
use common::executor::LoopbackExecutor;
use common::{Service, TestDatabase, add_client, call};

/// Tables whose rows belong to one run: distributed by run id.
const RUN_SCOPED: [&str; 4] = ["runs", "turn_calls", "approval_events", "tool_events"];

/// Why a statement on a run-scoped table does not pin one run, or `None` when it does.
fn not_addressed_to_one_run(statement: &str) -> Option<String> {
    let text = statement.to_lowercase();
    let table = Regex::new(r"\b(from|join|into|update)\s+([a-z_]+)").unwrap();
    let touched: Vec<String> = table
        .captures_iter(&text)
        .map(|found| found[2].to_owned())
        .filter(|name| RUN_SCOPED.contains(&name.as_str()))
        .collect();
    if touched.is_empty() {
        return None;
    }
    let pinned = Regex::new(r"\b(run_id|id)\s*=\s*\$\d+").unwrap();
    let inserted = Regex::new(r"insert\s+into\s+([a-z_]+)\s*\(([^)]*)\)").unwrap();
    let insert_names_run = inserted.captures(&text).is_some_and(|insert| {
        let key = if &insert[1] == "runs" { "id" } else { "run_id" };
        insert[2].split(',').any(|column| column.trim() == key)
    });
    if pinned.is_match(&text) || insert_names_run {
        None
    } else {
        Some(format!("touches {touched:?} without pinning the run id"))
    }
}

#[test]
fn the_check_tells_a_statement_pinned_to_one_run_from_one_that_is_not() {
    assert_eq!(
        not_addressed_to_one_run("select * from turn_calls where run_id = $1 and turn_index = $2"),
        None
    );
    assert_eq!(
        not_addressed_to_one_run("update runs set status = $2 where id = $1"),
        None
    );
    assert_eq!(
        not_addressed_to_one_run(
            "insert into approval_events (run_id, turn_index) values ($1, $2)"
        ),
        None
    );
    assert_eq!(
        not_addressed_to_one_run("select uid from backend_users where tenant = $1"),
        None
    );
    assert!(not_addressed_to_one_run("select * from runs where status = $1").is_some());
    assert!(not_addressed_to_one_run("select * from tool_events where call_id = $1").is_some());
    assert!(not_addressed_to_one_run("insert into tool_events (turn_index) values ($1)").is_some());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_statement_on_the_decision_path_addresses_one_run() {
    let cluster = tokio::task::block_in_place(|| {
        Cluster::start_new_with("shared_preload_libraries = 'pg_stat_statements'")
    });
    let name = format!("approval_resume_dist_{}", Uuid::new_v4().simple());
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
    // No recovery sweep or purge during the decisions: those are periodic scans, not the decision path.
    let service = Service::start_with(
        &database,
        &[
            ("TOOLS_CONFIG", tools.as_str()),
            ("RECOVERY_INTERVAL_SECS", "3600"),
        ],
    )
    .await;
    let client = reqwest::Client::new();
    let send = |method: reqwest::Method, path: String, body: serde_json::Value| {
        let (client, url, key) = (client.clone(), service.url(&path), key.clone());
        async move { call(&client, method, url, &key, Some(body)).await }
    };
    let user = json!({"username": "ada", "is_admin": false, "can_approve_others": false, "disabled": false});
    let (status, _) = send(reqwest::Method::PUT, "/v1/users/1".into(), user).await;
    assert_eq!(status, 200);
    let mut runs = Vec::new();
    for _ in 0..4 {
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

    let mut admin = PgConnection::connect(&database.url)
        .await
        .expect("a direct connection");
    sqlx::raw_sql(
        "create extension if not exists pg_stat_statements; select pg_stat_statements_reset()",
    )
    .execute(&mut admin)
    .await
    .expect("pg_stat_statements is loaded");
    let decide = |(id, digest): &(Uuid, String), approved: bool| {
        let body = json!({"approved": approved, "decider_uid": 1, "turn_digest": digest});
        send(
            reqwest::Method::POST,
            format!("/v1/runs/{id}/decision"),
            body,
        )
    };
    assert_eq!(decide(&runs[0], false).await.0, 200);
    assert_eq!(decide(&runs[1], true).await.0, 200);
    assert_eq!(decide(&runs[0], false).await.0, 200, "a replay");
    assert_eq!(
        decide(&runs[1], false).await.0,
        409,
        "a conflicting decision"
    );
    let stale = (runs[2].0, "0".repeat(64));
    assert_eq!(decide(&stale, false).await.0, 409, "a stale digest");
    assert_eq!(decide(&runs[3], false).await.0, 200);

    let statements: Vec<String> = sqlx::query_scalar(
        "select query from pg_stat_statements
         where dbid = (select oid from pg_database where datname = current_database())
           and query not ilike '%pg_stat_statements%'",
    )
    .fetch_all(&mut admin)
    .await
    .expect("the statements can be read");
    admin.close().await.expect("the connection closes");

    let on_tables: Vec<&String> = statements
        .iter()
        .filter(|statement| {
            let text = statement.to_lowercase();
            RUN_SCOPED.iter().any(|table| text.contains(table))
        })
        .collect();
    assert!(
        on_tables.len() >= 5,
        "too few statements on run-scoped tables were recorded: {statements:#?}"
    );
    let problems: Vec<String> = statements
        .iter()
        .filter_map(|statement| {
            not_addressed_to_one_run(statement).map(|why| format!("{why}:\n{statement}"))
        })
        .collect();
    assert!(problems.is_empty(), "{}", problems.join("\n\n"));
    eprintln!(
        "{} statements on the decision path, {} of them on run-scoped tables, each pinned to one run",
        statements.len(),
        on_tables.len()
    );
}
