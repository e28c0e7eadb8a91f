//! The claim behind the README's "Past one primary" (docs/design.md §12): every statement on the decision path
//! addresses one run, so the run-scoped tables can be distributed by run id (Citus) and each decision stays on one
//! node.
//!
//! Checked over what Postgres actually ran: the real binary, on a private cluster with `pg_stat_statements`, makes
//! denials, approvals (through a loopback executor), replays, a stale and a conflicting decision; then every
//! statement recorded since just before the first decision is read back. Each that touches a run-scoped table must
//! pin the run id: an equality on `run_id` or on the run's `id` to a parameter, or an insert that names the
//! `run_id` (the `id` for `runs`) among its columns. Statements on reference tables (`api_clients`,
//! `backend_users`, replicated to every node) and statements on no table need not.

mod support;
use support::observed;

use regex::Regex;

use observed::Observed;

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
    // No recovery sweep or purge during the decisions: those are periodic scans, not the decision path.
    let observed = Observed::start(
        "approval_resume_dist",
        &[("RECOVERY_INTERVAL_SECS", "3600")],
    )
    .await;
    let runs = observed.waiting_runs(4).await;
    let admin = observed.start_recording().await;
    assert_eq!(observed.decide(&runs[0], false).await.0, 200);
    assert_eq!(observed.decide(&runs[1], true).await.0, 200);
    assert_eq!(observed.decide(&runs[0], false).await.0, 200, "a replay");
    assert_eq!(
        observed.decide(&runs[1], false).await.0,
        409,
        "a conflicting decision"
    );
    let stale = (runs[2].0, "0".repeat(64));
    assert_eq!(
        observed.decide(&stale, false).await.0,
        409,
        "a stale digest"
    );
    assert_eq!(observed.decide(&runs[3], false).await.0, 200);
    assert_eq!(
        observed.sends_of(&runs[1]),
        1,
        "the approved call was sent once, replays and conflicts sent nothing"
    );

    let statements: Vec<String> = Observed::recorded(admin, &[])
        .await
        .into_iter()
        .map(|(query, _)| query)
        .collect();

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
