//! The round trips of an approval and of a deny: for an approval, one statement to read the run (the
//! key's lookup in it), one to take the turn, the executor call, one to close it, and nothing else on the way; for a
//! deny, the read and one write. Counted over what Postgres actually ran, as
//! tests/distribution.rs does: the real binary on a private cluster with `pg_stat_statements`, one approval of a
//! one-call turn through a loopback executor, and the executions recorded from just before it to just after it
//! (each execution is one round trip; `BEGIN` and `COMMIT` are counted too). A count, not a time.

mod support;
use support::observed;

use observed::Observed;

/// The issue's bound on the statements of a one-call approval, the API key's lookup included.
const MOST_STATEMENTS: i64 = 10;

/// A one-call approval's statements: the read (the key's lookup in it), the read of the deny rules that could refuse
/// it (docs/design.md §18: `denied_by_rule`; a deny has none), taking the turn, closing it.
const APPROVAL_STATEMENTS: i64 = 4;

/// A deny's statements: the run read without its lock, with the API key's lookup in it, and the one write that
/// records the decision only while the run still waits (src/storage/run_snapshot.rs); no `BEGIN` or `COMMIT`.
const DENY_STATEMENTS: i64 = 2;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_one_call_approval_makes_at_most_ten_statements_and_a_deny_two_outside_any_transaction() {
    // The periodic tasks that can be slowed are, so that none of their statements falls inside the count.
    let observed = Observed::start(
        "approval_resume_trips",
        &[
            ("RECOVERY_INTERVAL_SECS", "3600"),
            ("EXPIRY_SWEEP_INTERVAL_MS", "3600000"),
            ("EVENTS_POLL_INTERVAL_MS", "60000"),
        ],
    )
    .await;
    let runs = observed.waiting_runs(3).await;
    // One approval first, so that the pool's connections are open before the count starts.
    let (status, answer) = observed.decide(&runs[0], true).await;
    assert_eq!(status, 200, "{answer}");

    let admin = observed.start_recording().await;
    let (status, answer) = observed.decide(&runs[1], true).await;
    assert_eq!(status, 200, "{answer}");
    assert_eq!(answer["results"][0]["outcome"], "ok", "{answer}");
    assert_eq!(
        observed.sends_of(&runs[1]),
        1,
        "the approved call was sent once"
    );
    let (total, listing) = counted(admin).await;
    eprintln!("{total} statements in one one-call approval:\n{listing}");
    assert!(
        total <= MOST_STATEMENTS,
        "{total} statements, more than {MOST_STATEMENTS}:\n{listing}"
    );
    assert_eq!(total, APPROVAL_STATEMENTS, "{listing}");

    let admin = observed.start_recording().await;
    let (status, answer) = observed.decide(&runs[2], false).await;
    assert_eq!(status, 200, "{answer}");
    assert_eq!(answer["results"][0]["outcome"], "denied", "{answer}");
    let (total, listing) = counted(admin).await;
    eprintln!("{total} statements in one deny:\n{listing}");
    assert_eq!(total, DENY_STATEMENTS, "{listing}");
    let lowered = listing.to_lowercase();
    assert!(
        !lowered.contains("× begin") && !lowered.contains("× commit"),
        "a deny opened a transaction:\n{listing}"
    );
}

/// The statements recorded since `admin` started recording, in all and one line each.
async fn counted(admin: sqlx::PgConnection) -> (i64, String) {
    // The webhook dispatcher looks for subscriptions once a second whatever happens (not a setting); that look is
    // not the decision's.
    let executed = Observed::recorded(admin, &["webhook_subscriptions"]).await;
    let total: i64 = executed.iter().map(|(_, calls)| calls).sum();
    let listing: Vec<String> = executed
        .iter()
        .map(|(query, calls)| {
            let text = query.split_whitespace().collect::<Vec<_>>().join(" ");
            format!("{calls} × {}", text.chars().take(120).collect::<String>())
        })
        .collect();
    (total, listing.join("\n"))
}

/// A registration's statements before remembered decisions (docs/design.md §18): the API key's lookup, `BEGIN`, the
/// owner's row, the run's insert, its calls' insert, `run.waiting`, `COMMIT`, and the run view's two reads (calls,
/// decision).
const REGISTRATION_STATEMENTS_BEFORE_RULES: i64 = 9;

/// With no live rule for its tools, a registration costs the statements it did before rules existed: the owner's
/// read asks whether any live rule of theirs names a tool of the turn (`remembered_rules::owner_of_new_run`), and the
/// rules themselves are not read.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_registration_with_no_live_rule_makes_as_many_statements_as_before_rules_and_reads_no_rule()
 {
    let observed = Observed::start(
        "approval_resume_registration_trips",
        &[
            ("RECOVERY_INTERVAL_SECS", "3600"),
            ("EXPIRY_SWEEP_INTERVAL_MS", "3600000"),
            ("EVENTS_POLL_INTERVAL_MS", "60000"),
        ],
    )
    .await;
    // One registration first, so that the pool's connections are open before the count starts.
    observed.waiting_runs(1).await;
    let admin = observed.start_recording().await;
    let id = uuid::Uuid::new_v4();
    let body = serde_json::json!({
        "id": id, "owner_uid": 1,
        "messages": [
            {"role": "user", "content": "Shorten page 12."},
            {"role": "assistant", "content": null, "tool_calls": [{"id": "call_1", "type": "function",
                "function": {"name": "update_page", "arguments": "{\"page\": 12}"}}]},
        ],
        "tools": [{"name": "update_page", "effect": "write"}],
    });
    let (status, run) = observed.send(reqwest::Method::POST, "/v1/runs", body).await;
    assert_eq!(status, 201, "{run}");
    let (total, listing) = counted(admin).await;
    eprintln!("{total} statements in one registration:\n{listing}");
    let rules_reads = listing
        .lines()
        .filter(|line| {
            line.contains("select r.id, r.tool, r.arguments, r.arguments_sealed, r.verdict")
        })
        .count();
    assert_eq!(rules_reads, 0, "{listing}");
    assert!(
        listing.contains("from remembered_rules r") && listing.contains("from backend_users"),
        "the owner's read asks for their rules: {listing}"
    );
    assert_eq!(total, REGISTRATION_STATEMENTS_BEFORE_RULES, "{listing}");
}

/// A waiting run's view (`GET /v1/runs/{id}`): the key's lookup, the run's read, its calls with their rules, its
/// decision.
const VIEW_STATEMENTS: i64 = 4;

/// An inbox page: the key's lookup, the acting user, the waiting runs, their calls with their rules.
const INBOX_STATEMENTS: i64 = 4;

/// A waiting run's view and an inbox page read the rules that would decide each call in the statement that reads the
/// calls (docs/design.md §18): as many statements with rules as without.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_waiting_run_view_and_an_inbox_page_make_as_many_statements_with_rules_as_without() {
    let observed = Observed::start(
        "approval_resume_view_trips",
        &[
            ("RECOVERY_INTERVAL_SECS", "3600"),
            ("EXPIRY_SWEEP_INTERVAL_MS", "3600000"),
            ("EVENTS_POLL_INTERVAL_MS", "60000"),
        ],
    )
    .await;
    let runs = observed.waiting_runs(2).await;
    let view = format!("/v1/runs/{}", runs[0].0);
    let inbox = "/v1/approvals?acting_uid=1";
    // Once first, so that the pool's connections are open before the counts start.
    assert_eq!(observed.get(&view).await.0, 200);
    assert_eq!(observed.get(inbox).await.0, 200);

    let (view_without, listing, shown) = counted_rules(&observed, &view).await;
    eprintln!("{view_without} statements in a waiting run's view without rules:\n{listing}");
    assert_eq!(shown, [None]);
    let (inbox_without, listing, shown) = counted_rules(&observed, inbox).await;
    eprintln!("{inbox_without} statements in an inbox page without rules:\n{listing}");
    assert_eq!(shown, [None, None]);

    let body = serde_json::json!({"created_by": 1, "tool": "update_page", "verdict": "deny", "reason": "skip"});
    let (status, rule) = observed
        .send(reqwest::Method::POST, &format!("{view}/rules"), body)
        .await;
    assert_eq!(status, 201, "{rule}");
    let rule_id = rule["id"].as_str().map(str::to_owned);

    let (view_with, listing, shown) = counted_rules(&observed, &view).await;
    eprintln!("{view_with} statements in a waiting run's view with a rule:\n{listing}");
    assert_eq!(shown, std::slice::from_ref(&rule_id));
    assert_eq!(view_with, view_without, "{listing}");
    assert_eq!(view_with, VIEW_STATEMENTS, "{listing}");
    let (inbox_with, listing, shown) = counted_rules(&observed, inbox).await;
    eprintln!("{inbox_with} statements in an inbox page with a rule:\n{listing}");
    assert!(
        shown.contains(&rule_id) && shown.contains(&None),
        "{shown:?}"
    );
    assert_eq!(inbox_with, inbox_without, "{listing}");
    assert_eq!(inbox_with, INBOX_STATEMENTS, "{listing}");
}

/// The statements of one `GET` of `path` (a run or an inbox page), and the rule id each pending call shows.
async fn counted_rules(observed: &Observed, path: &str) -> (i64, String, Vec<Option<String>>) {
    let admin = observed.start_recording().await;
    let (status, answer) = observed.get(path).await;
    assert_eq!(status, 200, "{answer}");
    let (total, listing) = counted(admin).await;
    let turns: Vec<&serde_json::Value> = match answer.get("items") {
        Some(items) => items
            .as_array()
            .unwrap()
            .iter()
            .map(|item| &item["turn"])
            .collect(),
        None => vec![&answer["turn"]],
    };
    let shown = turns
        .iter()
        .flat_map(|turn| turn["pending_calls"].as_array().unwrap())
        .map(|call| {
            call.get("rule")
                .and_then(|rule| rule["id"].as_str())
                .map(str::to_owned)
        })
        .collect();
    (total, listing, shown)
}
