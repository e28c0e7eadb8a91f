//! A decision finds its run by the primary key whatever the planner's statistics say. The statements that move a run
//! on (a deny's write, an approval's taking and closing writes) check its status: given `status = 'resuming'` or
//! `status = 'waiting_for_approval'` as such, the planner may read the run through the partial index of all runs in
//! that status (`runs_resuming_lease`, `runs_tenant_waiting`), filtering every one of them by id, whenever the
//! statistics were taken while none was: then every decision reads every waiting or resuming run, and a backlog of
//! slow approvals makes each close slower than the last.
//!
//! Shown on the real binary over a private cluster with `pg_stat_statements` (tests/support/observed.rs): the
//! statistics are taken while no run waits or resumes, then thousands of runs start waiting and resuming at once
//! (autovacuum off for `runs`, so that nothing refreshes them meanwhile), and a deny, an approval of one call and an
//! approval of two (whose second call is started by a statement of its own) are decided.
//! Each statement they run may read a few dozen buffers (index pages, the run, its calls, the rows it writes), never
//! one per waiting or resuming run.

mod support;
use support::observed;

use observed::Observed;
use serde_json::json;
use sqlx::{Connection, PgConnection};
use uuid::Uuid;

/// Runs that wait, and as many that resume, beyond what the statistics saw: each a row of about 0.5 KiB, so each
/// status's rows span some 300 heap pages, all of which a scan of its partial index reads (about 560 buffers per call).
const BACKLOG: i32 = 4_000;

/// The buffers one execution of a decision's statement may read: its runs' and calls' index and heap pages and the
/// pages of the rows it writes, where finding room for a new row version visits a few more (30 to 85 per call in
/// these runs), far below one per run of the backlog.
const MOST_BUFFERS_PER_STATEMENT: i64 = 150;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn decisions_read_a_bounded_number_of_buffers_however_many_runs_wait_or_resume_unseen_by_the_statistics()
 {
    let observed = Observed::start(
        "approval_resume_plans",
        &[
            ("RECOVERY_INTERVAL_SECS", "3600"),
            ("EXPIRY_SWEEP_INTERVAL_MS", "3600000"),
            ("EVENTS_POLL_INTERVAL_MS", "60000"),
        ],
    )
    .await;
    let decided = observed.waiting_runs(2).await;
    // Decided before the statistics are taken, so that the service's statements are prepared, and then planned anew
    // from statistics in which no run waits or resumes.
    for (run, approved) in [(&decided[0], false), (&decided[1], true)] {
        let (status, answer) = observed.decide(run, approved).await;
        assert_eq!(status, 200, "{answer}");
    }
    // A direct connection of the test's own (what it records before the decisions below is forgotten then).
    let mut admin = observed.start_recording().await;
    sqlx::raw_sql("alter table runs set (autovacuum_enabled = false); analyze runs")
        .execute(&mut admin)
        .await
        .unwrap();
    // The backlog: copies of a decided run, waiting, and resuming under a lease of an instance that is not running.
    sqlx::query(
        "insert into runs
         select (jsonb_populate_record(null::runs, to_jsonb(r) || jsonb_build_object(
                     'id', gen_random_uuid(), 'status', s.status,
                     'lease_owner', case when s.status = 'resuming' then gen_random_uuid() end,
                     'lease_until', case when s.status = 'resuming' then now() + interval '1 hour' end))).*
         from runs r, generate_series(1, $2),
              (values ('waiting_for_approval'), ('resuming')) as s(status)
         where r.id = $1",
    )
    .bind(decided[0].0)
    .bind(BACKLOG)
    .execute(&mut admin)
    .await
    .unwrap();
    admin.close().await.unwrap();
    // The runs decided now, also unseen by the statistics: one denied, one approved, one of two calls approved (its
    // second call is marked started on its own, by `decisions::start_call`), and one of two calls decided per call,
    // the first approved with edited arguments and the second denied (the taking statement that also writes denied
    // and edited calls).
    let runs = observed.waiting_runs(2).await;
    let two_calls = two_call_run(&observed).await;
    let (per_call_id, per_call_digest) = two_call_run(&observed).await;

    let admin = observed.start_recording().await;
    for (run, approved) in [(&runs[0], false), (&runs[1], true), (&two_calls, true)] {
        let (status, answer) = observed.decide(run, approved).await;
        assert_eq!(status, 200, "{answer}");
    }
    let (status, answer) = observed
        .send(
            reqwest::Method::POST,
            &format!("/v1/runs/{per_call_id}/decision"),
            json!({"decider_uid": 1, "turn_digest": per_call_digest,
                   "calls": [{"call_id": "call_1", "approved": true, "arguments": "{\"page\": 14}"},
                             {"call_id": "call_2", "approved": false, "reason": "variant"}]}),
        )
        .await;
    assert_eq!(status, 200, "{answer}");
    assert_eq!(
        observed.sends_of(&runs[1]),
        1,
        "the approved call was sent once"
    );
    let read = buffers_per_statement(admin).await;
    let listing: Vec<String> = read
        .iter()
        .map(|(query, buffers)| format!("{buffers:>6} buffers per call: {}", one_line(query)))
        .collect();
    let listing = listing.join("\n");
    eprintln!("{listing}");
    // Each statement that moves a run on, recorded: the read, the take (of a plain approval, and of one that denies
    // a call), the deny's write and the close (both begin `with resumed as`), and the start of a later call.
    for (beginning, statements) in [
        ("with reader as", 1),
        ("with resuming as", 2),
        ("with resumed as", 2),
        ("with lease as", 1),
    ] {
        assert_eq!(
            read.iter()
                .filter(|(query, _)| one_line(query).starts_with(beginning))
                .count(),
            statements,
            "statements beginning `{beginning}`:\n{listing}"
        );
    }
    for (query, buffers) in &read {
        assert!(
            *buffers <= MOST_BUFFERS_PER_STATEMENT,
            "{buffers} buffers per call, more than {MOST_BUFFERS_PER_STATEMENT}: {}\n{listing}",
            one_line(query)
        );
    }
}

/// A run of user 1 waiting on two calls of `update_page`, `call_1` and `call_2`.
async fn two_call_run(observed: &Observed) -> observed::WaitingRun {
    let id = Uuid::new_v4();
    let call = |call_id: &str| {
        json!({"id": call_id, "type": "function",
               "function": {"name": "update_page", "arguments": "{\"page\": 12}"}})
    };
    let body = json!({
        "id": id, "owner_uid": 1,
        "messages": [
            {"role": "user", "content": "Shorten pages 12 and 13."},
            {"role": "assistant", "content": null, "tool_calls": [call("call_1"), call("call_2")]},
        ],
        "tools": [{"name": "update_page", "effect": "write"}],
    });
    let (status, run) = observed.send(reqwest::Method::POST, "/v1/runs", body).await;
    assert_eq!(status, 201, "{run}");
    (id, run["turn"]["digest"].as_str().unwrap().to_owned())
}

/// Buffers read (from the cache or not) per call of each statement that touches `runs`, recorded since `admin`
/// started recording.
async fn buffers_per_statement(mut admin: PgConnection) -> Vec<(String, i64)> {
    let read: Vec<(String, i64)> = sqlx::query_as(
        "select query, ((shared_blks_hit + shared_blks_read) / calls)::bigint from pg_stat_statements
         where dbid = (select oid from pg_database where datname = current_database())
           and query ilike '%runs%' and query not ilike '%pg_stat_statements%'
         order by query",
    )
    .fetch_all(&mut admin)
    .await
    .expect("the statements can be read");
    admin.close().await.expect("the connection closes");
    read
}

fn one_line(query: &str) -> String {
    let text = query.split_whitespace().collect::<Vec<_>>().join(" ");
    text.chars().take(140).collect()
}
