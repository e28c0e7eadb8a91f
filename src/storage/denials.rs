//! Several denies recorded by one statement, each exactly as `decision_statements::record_denial` records one: its run
//! moved on only while it still waits on the turn that was read, and then its results, tool events, approval event and
//! `run.resumed` event written; a run that no longer waits gets nothing. The denies share the statement's start-up
//! and one commit, which is most of what Postgres spends on a deny (BENCHMARKS.md, "Denies written together"); they
//! are gathered by `resume::denial_writer`.
//!
//! One statement is one transaction: if it fails, none of its denies is recorded, and the writer records each on its
//! own. For one deny the single statement is cheaper than this one (its unnests join on a single run), so this one is
//! only used for two or more.

use std::collections::{HashMap, HashSet};
use std::sync::LazyLock;

use sqlx::types::Json;
use sqlx::{FromRow, PgExecutor, Row};
use uuid::Uuid;

use super::decision_record::{DECISION_COLUMNS, DecisionRow};
use super::decision_statements::DenialWrite;
use super::{StorageError, sql};
use crate::domain::event_payloads::EventData;
use crate::domain::verdicts::RecordedVerdict;

/// The statement over the columns of every deny, one array element per run (`$1` to `$11`), per stored result
/// (`$12` to `$17`) or per tool event (`$18` to `$31`). The runs are locked first (`locked`), in id order and
/// skipping any another transaction holds, so each run's lock is taken before any row of its calls, as every writer
/// takes them; the compare-and-set reads the locked row versions. Each other expression joins `resumed`, so only the
/// runs that moved on get anything. The tables are searched by `= any` of the ids, and the runs without a condition
/// on their status: given `status = 'waiting_for_approval'`, the planner combined the primary key with the partial
/// index of waiting runs and read all of them, a few milliseconds per statement once a burst of new runs had outrun
/// the statistics (BENCHMARKS.md). The tool events' times are `CallTimes::NeverStarted`'s
/// (`decision_statements::closing`): a waiting turn's calls were never sent, and their results are stored now.
static SQL: LazyLock<String> = LazyLock::new(|| {
    format!(
        "with locked as (
             select id, status, turn_index, expires_at from runs where id = any($1) order by id
             for update skip locked
         ), resumed as (
             update runs r set status = 'resumed', lease_owner = null, lease_until = null, updated_at = now()
             from locked l join unnest($1::uuid[], $2::int[]) as d(run_id, turn_index) on d.run_id = l.id
             where r.id = l.id and l.status = 'waiting_for_approval' and l.turn_index = d.turn_index
               and (l.expires_at is null or l.expires_at > clock_timestamp())
             returning r.id, r.tenant, r.turn_index
         ), stored as (
             update turn_calls c set outcome = s.outcome, is_error = s.is_error, content = s.content,
                                     content_sealed = s.content_sealed, finished_at = now()
             from unnest($12::uuid[], $13::int[], $14::text[], $15::bool[], $16::text[], $17::bytea[])
                  as s(run_id, position, outcome, is_error, content, content_sealed)
             join resumed on resumed.id = s.run_id
             where c.run_id = any($12) and c.run_id = s.run_id and c.turn_index = resumed.turn_index
               and c.position = s.position and c.outcome is null
             returning c.run_id
         ), events as (
             insert into tool_events (run_id, turn_index, position, call_id, tool, outcome, is_error, decided_by,
                                      privacy_level, arguments_bytes, result_bytes, arguments, result,
                                      arguments_sealed, result_sealed, started_at, finished_at)
             select e.run_id, resumed.turn_index, e.position, e.call_id, e.tool, e.outcome, e.is_error,
                    e.decided_by, e.privacy_level, e.arguments_bytes, e.result_bytes, e.arguments, e.result,
                    e.arguments_sealed, e.result_sealed, null, now()
             from unnest($18::uuid[], $19::int[], $20::text[], $21::text[], $22::text[], $23::bool[], $24::text[],
                         $25::text[], $26::int[], $27::int[], $28::text[], $29::text[], $30::bytea[], $31::bytea[])
                  as e(run_id, position, call_id, tool, outcome, is_error, decided_by, privacy_level,
                       arguments_bytes, result_bytes, arguments, result, arguments_sealed, result_sealed)
             join resumed on resumed.id = e.run_id
         ), outboxed as (
             insert into events (tenant, run_id, type, data)
             select resumed.tenant, resumed.id, 'run.resumed', d.data
             from unnest($1::uuid[], $11::jsonb[]) as d(run_id, data)
             join resumed on resumed.id = d.run_id
             returning run_id
         ), decision as (
             insert into approval_events (run_id, turn_index, approved, decider_uid, decided_by, reason,
                                          turn_digest, client_name, token_kid, calls)
             select d.run_id, d.turn_index, d.approved, d.decider_uid, d.decided_by, d.reason, d.turn_digest,
                    d.client_name, d.token_kid, d.calls
             from unnest($1::uuid[], $2::int[], $3::bool[], $4::bigint[], $5::text[], $6::text[], $7::text[],
                         $8::text[], $9::text[], $10::jsonb[])
                  as d(run_id, turn_index, approved, decider_uid, decided_by, reason, turn_digest, client_name,
                       token_kid, calls)
             join resumed on resumed.id = d.run_id
             returning run_id, {DECISION_COLUMNS}
         )
         select l.id as locked_run_id, recorded.*
         from locked l
         left join (select decision.* from decision join outboxed using (run_id)) recorded on recorded.run_id = l.id"
    )
});

/// What one batch statement did.
#[derive(Debug, Default)]
pub struct BatchOutcome {
    /// The runs whose lock the statement took; the others were locked by another transaction (or are gone), and
    /// nothing was written for them.
    pub locked: HashSet<Uuid>,
    /// The decision recorded for each locked run that still waited on the turn its deny read.
    pub recorded: HashMap<Uuid, DecisionRow>,
}

/// Records every deny of `writes` whose run it can lock without waiting and that still waits on the turn read, in
/// one statement. A run another transaction holds is skipped, not waited for: a batch never waits for a lock, so it
/// neither holds its other denies back nor deadlocks with another batch, and the skipped deny is written again on its
/// own, where only it waits. The runs must differ: two denies of one run in one statement would both pass its
/// compare-and-set, which only one write at a time may.
pub async fn record_many(
    db: impl PgExecutor<'_>,
    writes: &[&DenialWrite],
) -> Result<BatchOutcome, StorageError> {
    debug_assert!(
        {
            let mut runs: Vec<Uuid> = writes.iter().map(|write| write.run_id()).collect();
            runs.sort_unstable();
            runs.windows(2).all(|pair| pair[0] != pair[1])
        },
        "one deny per run in a statement"
    );
    let columns = Columns::of(writes);
    let rows = columns
        .bind(sql::query(sqlx::AssertSqlSafe(SQL.as_str())))
        .fetch_all(db)
        .await?;
    let mut outcome = BatchOutcome::default();
    for row in &rows {
        let run_id: Uuid = row.try_get("locked_run_id")?;
        outcome.locked.insert(run_id);
        if row.try_get::<Option<Uuid>, _>("run_id")?.is_some() {
            outcome.recorded.insert(run_id, DecisionRow::from_row(row)?);
        }
    }
    Ok(outcome)
}

/// The statement's arrays: the columns of every deny, one after the other.
#[derive(Default)]
struct Columns {
    run_ids: Vec<Uuid>,
    turn_indexes: Vec<i32>,
    approved: Vec<Option<bool>>,
    decider_uids: Vec<Option<i64>>,
    decided_by: Vec<&'static str>,
    reasons: Vec<Option<&'static str>>,
    turn_digests: Vec<String>,
    client_names: Vec<String>,
    token_kids: Vec<Option<String>>,
    calls: Vec<Json<Vec<RecordedVerdict>>>,
    resumed_events: Vec<Json<EventData>>,
    result_run_ids: Vec<Uuid>,
    result_positions: Vec<i32>,
    result_outcomes: Vec<&'static str>,
    result_errors: Vec<bool>,
    result_contents: Vec<Option<String>>,
    result_contents_sealed: Vec<Option<Vec<u8>>>,
    event_run_ids: Vec<Uuid>,
    event_positions: Vec<i32>,
    event_call_ids: Vec<String>,
    event_tools: Vec<String>,
    event_outcomes: Vec<&'static str>,
    event_errors: Vec<bool>,
    event_decided_by: Vec<&'static str>,
    event_privacy_levels: Vec<&'static str>,
    event_arguments_bytes: Vec<i32>,
    event_result_bytes: Vec<i32>,
    event_arguments: Vec<Option<String>>,
    event_results: Vec<Option<String>>,
    event_arguments_sealed: Vec<Option<Vec<u8>>>,
    event_results_sealed: Vec<Option<Vec<u8>>>,
}

impl Columns {
    fn of(writes: &[&DenialWrite]) -> Self {
        let mut columns = Columns::default();
        for write in writes {
            let (decision, closing) = (&write.decision, &write.closing);
            columns.run_ids.push(closing.run_id);
            columns.turn_indexes.push(closing.turn_index);
            columns.approved.push(decision.approved);
            columns.decider_uids.push(decision.decider_uid);
            columns.decided_by.push(decision.decided_by);
            columns.reasons.push(decision.reason);
            columns.turn_digests.push(decision.turn_digest.clone());
            columns.client_names.push(decision.client_name.clone());
            columns.token_kids.push(decision.token_kid.clone());
            columns.calls.push(decision.calls.clone());
            columns.resumed_events.push(closing.resumed_event.clone());

            let results = closing.result_positions.len();
            columns
                .result_run_ids
                .extend(std::iter::repeat_n(closing.run_id, results));
            columns.result_positions.extend(&closing.result_positions);
            columns.result_outcomes.extend(&closing.result_outcomes);
            columns.result_errors.extend(&closing.result_errors);
            columns
                .result_contents
                .extend(closing.result_contents.iter().cloned());
            columns
                .result_contents_sealed
                .extend(closing.result_contents_sealed.iter().cloned());

            let events = closing.event_positions.len();
            columns
                .event_run_ids
                .extend(std::iter::repeat_n(closing.run_id, events));
            columns.event_positions.extend(&closing.event_positions);
            columns
                .event_call_ids
                .extend(closing.event_call_ids.iter().cloned());
            columns
                .event_tools
                .extend(closing.event_tools.iter().cloned());
            columns.event_outcomes.extend(&closing.event_outcomes);
            columns.event_errors.extend(&closing.event_errors);
            columns.event_decided_by.extend(&closing.event_decided_by);
            columns
                .event_privacy_levels
                .extend(&closing.event_privacy_levels);
            columns
                .event_arguments_bytes
                .extend(&closing.event_arguments_bytes);
            columns
                .event_result_bytes
                .extend(&closing.event_result_bytes);
            columns
                .event_arguments
                .extend(closing.event_arguments.iter().cloned());
            columns
                .event_results
                .extend(closing.event_results.iter().cloned());
            columns
                .event_arguments_sealed
                .extend(closing.event_arguments_sealed.iter().cloned());
            columns
                .event_results_sealed
                .extend(closing.event_results_sealed.iter().cloned());
        }
        columns
    }

    fn bind(self, query: super::Query<'_>) -> super::Query<'_> {
        query
            .bind(self.run_ids)
            .bind(self.turn_indexes)
            .bind(self.approved)
            .bind(self.decider_uids)
            .bind(self.decided_by)
            .bind(self.reasons)
            .bind(self.turn_digests)
            .bind(self.client_names)
            .bind(self.token_kids)
            .bind(self.calls)
            .bind(self.resumed_events)
            .bind(self.result_run_ids)
            .bind(self.result_positions)
            .bind(self.result_outcomes)
            .bind(self.result_errors)
            .bind(self.result_contents)
            .bind(self.result_contents_sealed)
            .bind(self.event_run_ids)
            .bind(self.event_positions)
            .bind(self.event_call_ids)
            .bind(self.event_tools)
            .bind(self.event_outcomes)
            .bind(self.event_errors)
            .bind(self.event_decided_by)
            .bind(self.event_privacy_levels)
            .bind(self.event_arguments_bytes)
            .bind(self.event_result_bytes)
            .bind(self.event_arguments)
            .bind(self.event_results)
            .bind(self.event_arguments_sealed)
            .bind(self.event_results_sealed)
    }
}
