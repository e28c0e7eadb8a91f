//! The closing statements: how a decided (or expired) turn ends, in one statement each: the run moved to `resumed`,
//! the results stored, the tool events written and the `run.resumed` (or `run.expired`) event put in the outbox;
//! for a deny, its decision recorded in the same statement. Their parameters are named in `closing_params`.

use std::sync::LazyLock;

use sqlx::{FromRow, PgConnection, PgExecutor};
use uuid::Uuid;

use super::super::decision_record::{DECISION_COLUMNS, DecisionColumns, DecisionRow, NewDecision};
use super::super::{Query, StorageError, sql};
use super::closing_params::{
    AFTER_COLUMNS, ClosingColumns, ClosingTurn, EVENT_ARGUMENTS, EVENT_ARGUMENTS_BYTES,
    EVENT_ARGUMENTS_SEALED, EVENT_CALL_IDS, EVENT_DECIDED_BY, EVENT_ERRORS, EVENT_OUTCOMES,
    EVENT_POSITIONS, EVENT_PRIVACY_LEVELS, EVENT_RESULT_BYTES, EVENT_RESULTS, EVENT_RESULTS_SEALED,
    EVENT_TOOLS, Param, Positional, RESULT_CONTENTS, RESULT_CONTENTS_SEALED, RESULT_ERRORS,
    RESULT_OUTCOMES, RESULT_POSITIONS, RESUMED_EVENT, RUN_ID, TURN_INDEX,
};
use super::still_waiting;

/// The call times of each tool event in [`close_turn_ctes`] (`select`), and what they are read from (`join`).
/// `Stored` reads them from the calls as stored (a call may have started before; its result may be stored now, by
/// `stored`, or earlier). `NeverStarted` is for a turn still waiting (a deny): none of its calls was ever sent (a
/// turn's calls are new rows, `runs::insert_calls`, written with the turn that starts waiting), and `stored` gives
/// each its result now, so the times are known without reading the calls again; that read cost Postgres 8 % of the
/// deny's write (`bench/postgres_instructions.sh deny`).
#[derive(Debug, Clone, Copy)]
pub(super) enum CallTimes {
    Stored,
    NeverStarted,
}

impl CallTimes {
    fn select(self) -> &'static str {
        match self {
            CallTimes::Stored => "c.started_at, coalesce(s.finished_at, c.finished_at)",
            CallTimes::NeverStarted => "null, now()",
        }
    }

    fn join(self) -> String {
        match self {
            CallTimes::Stored => format!(
                "
        join turn_calls c on c.run_id = {RUN_ID} and c.turn_index = {TURN_INDEX} and c.position = e.position
        left join stored s on s.position = e.position"
            ),
            CallTimes::NeverStarted => String::new(),
        }
    }
}

/// The common-table expressions that close a turn, over the closing columns (`$1` to `$21`, `closing_params`): move
/// the run to `resumed` ending any lease, store the results, write the tool events (with the times of the calls,
/// [`CallTimes`]), and write the `run.resumed` event (`run.expired` for [`CLOSE_EXPIRED_TURN`]) in the outbox.
/// `moves` narrows which run moves on (see [`CLOSE_HELD_TURN`] and [`CLOSE_WAITING_TURN`]); the tool events and
/// the outbox row are written only for a run that did, and the results too unless `stores` leaves them unbound to
/// it. Nothing here is sent anywhere before commit: a `pg_notify` would take a database-wide lock at every commit
/// (BENCHMARKS.md), so consumers read the outbox after it (src/storage/outbox.rs).
///
/// The run's row is updated first, so its lock is taken before any row of its calls, in the order every writer
/// takes them: the other expressions wait for `resumed`, but for [`CLOSE_HELD_TURN`]'s `stored`, which runs after it
/// because the statement's own select reads `resumed` first and Postgres runs unreferenced expressions last.
/// Built once per process (each statement is a `LazyLock`), so composing it costs a click nothing.
///
/// `status` is the run's new status: `resumed`, or `released` for a turn that released calls to the worker
/// (`release`), whose statement reuses these expressions (`resumed` then names the run moved to `released`).
pub(super) fn close_turn_ctes(
    status: &str,
    event_type: &str,
    moves: &str,
    stores: &str,
    call_times: CallTimes,
) -> String {
    let (select, join) = (call_times.select(), call_times.join());
    format!(
        "
    resumed as (
        update runs set status = '{status}', lease_owner = null, lease_until = null, updated_at = now()
        where id = {RUN_ID}{moves}
        returning id, tenant
    ), stored as (
        update turn_calls c set outcome = r.outcome, is_error = r.is_error, content = r.content,
                                content_sealed = r.content_sealed, finished_at = now()
        from unnest({RESULT_POSITIONS}::int[], {RESULT_OUTCOMES}::text[], {RESULT_ERRORS}::bool[], {RESULT_CONTENTS}::text[], {RESULT_CONTENTS_SEALED}::bytea[])
             as r(position, outcome, is_error, content, content_sealed)
        where c.run_id = {RUN_ID} and c.turn_index = {TURN_INDEX} and c.position = r.position and c.outcome is null{stores}
        returning c.position, c.finished_at
    ), events as (
        insert into tool_events (run_id, turn_index, position, call_id, tool, outcome, is_error, decided_by,
                                 privacy_level, arguments_bytes, result_bytes, arguments, result,
                                 arguments_sealed, result_sealed, started_at, finished_at)
        select {RUN_ID}, {TURN_INDEX}, e.position, e.call_id, e.tool, e.outcome, e.is_error, e.decided_by, e.privacy_level,
               e.arguments_bytes, e.result_bytes, e.arguments, e.result, e.arguments_sealed, e.result_sealed,
               {select}
        from unnest({EVENT_POSITIONS}::int[], {EVENT_CALL_IDS}::text[], {EVENT_TOOLS}::text[], {EVENT_OUTCOMES}::text[], {EVENT_ERRORS}::bool[], {EVENT_DECIDED_BY}::text[], {EVENT_PRIVACY_LEVELS}::text[],
                    {EVENT_ARGUMENTS_BYTES}::int[], {EVENT_RESULT_BYTES}::int[], {EVENT_ARGUMENTS}::text[], {EVENT_RESULTS}::text[], {EVENT_ARGUMENTS_SEALED}::bytea[], {EVENT_RESULTS_SEALED}::bytea[])
             as e(position, call_id, tool, outcome, is_error, decided_by, privacy_level,
                  arguments_bytes, result_bytes, arguments, result, arguments_sealed, result_sealed){join}
        cross join resumed
    ), outboxed as (
        insert into events (tenant, run_id, type, data)
        select tenant, id, '{event_type}', {RESUMED_EVENT} from resumed
        returning id
    )"
    )
}

/// Binds the results and tool events to the expressions only once the run moved on.
pub(super) const STORES_IF_RESUMED: &str = " and exists (select from resumed)";

static CLOSE_TURN: LazyLock<String> = LazyLock::new(|| {
    close_turn_ctes(
        "resumed",
        "run.resumed",
        "",
        STORES_IF_RESUMED,
        CallTimes::Stored,
    )
});
static CLOSE_EXPIRED_TURN: LazyLock<String> = LazyLock::new(|| {
    close_turn_ctes(
        "resumed",
        "run.expired",
        "",
        STORES_IF_RESUMED,
        CallTimes::Stored,
    )
});

/// The lease's owner [`CLOSE_HELD_TURN`] requires, its one parameter after the closing columns.
pub(super) const LEASE_OWNER: Param = AFTER_COLUMNS;

/// The condition under which a held turn moves on: it is `resuming` under [`LEASE_OWNER`]'s lease.
pub(super) fn still_held() -> String {
    format!(
        " and {} and turn_index = {TURN_INDEX} and lease_owner = {LEASE_OWNER}",
        sql::status_is!("resuming")
    )
}

/// [`CLOSE_TURN`] without the run's lock: the run moves on only while [`LEASE_OWNER`] still holds its lease, and
/// without that nothing but the results is written (no tool event, no `run.resumed`), because the turn belongs to
/// whoever took it over, and a turn taken over must find the results stored like any other.
static CLOSE_HELD_TURN: LazyLock<String> = LazyLock::new(|| {
    let moves = still_held();
    close_turn_ctes("resumed", "run.resumed", &moves, "", CallTimes::Stored)
});

/// [`CLOSE_TURN`] for a turn decided from a read without the lock (`run_snapshot`): the run moves on only while it
/// still waits on the turn that was read and that turn has not expired (judged when the row's lock is granted, as
/// under the lock), and otherwise nothing at all is written. Under the lock, with the run seen waiting, only the
/// turn's expiry can still stop it.
static CLOSE_WAITING_TURN: LazyLock<String> = LazyLock::new(|| {
    close_turn_ctes(
        "resumed",
        "run.resumed",
        &still_waiting(TURN_INDEX),
        STORES_IF_RESUMED,
        CallTimes::NeverStarted,
    )
});

/// The decision [`record_denial`] records, its parameters after the closing columns.
const DECISION: Param = AFTER_COLUMNS;

/// Closes a turn whose results are all stored (the approve path, after its executors ran).
pub async fn close_turn(
    conn: &mut PgConnection,
    closing: &ClosingTurn<'_>,
) -> Result<(), StorageError> {
    static SQL: LazyLock<String> = LazyLock::new(|| {
        format!(
            "with {close} select resumed.id from resumed cross join outboxed",
            close = CLOSE_TURN.as_str()
        )
    });
    bind_closing(sql::query(sqlx::AssertSqlSafe(SQL.as_str())), closing)
        .into_query()
        .fetch_one(conn)
        .await?;
    Ok(())
}

/// Closes a turn (the approve path, after its executors ran) in one statement and without the run's lock, only while
/// `lease_owner` still holds the turn's lease; `false` when it no longer does (the lease ran out and another instance
/// took the turn over, or finished it), and then only `closing.results` were written: the results not stored yet
/// (the last call's), which a turn taken over must find like any other stored result.
pub async fn close_held_turn(
    db: impl PgExecutor<'_>,
    closing: &ClosingTurn<'_>,
    lease_owner: Uuid,
) -> Result<bool, StorageError> {
    static SQL: LazyLock<String> = LazyLock::new(|| {
        format!(
            "with {close} select resumed.id from resumed cross join outboxed",
            close = CLOSE_HELD_TURN.as_str()
        )
    });
    let closed = bind_closing(sql::query(sqlx::AssertSqlSafe(SQL.as_str())), closing)
        .bind(LEASE_OWNER, lease_owner)
        .into_query()
        .fetch_optional(db)
        .await?;
    Ok(closed.is_some())
}

/// A deny ready to be written: its decision and how it closes its turn, column by column as the statements bind them
/// (sealed), owned so that it can wait for the writer that batches denies (`resume::denial_writer`).
#[derive(Debug, Clone)]
pub struct DenialWrite {
    pub(in crate::storage) decision: DecisionColumns,
    pub(in crate::storage) closing: ClosingColumns,
}

impl DenialWrite {
    /// `closing.results` holds a result for every call that has a tool event: the events' times are those the
    /// statement gives the results (`CallTimes::NeverStarted`).
    pub fn new(decision: &NewDecision<'_>, closing: &ClosingTurn<'_>) -> Self {
        debug_assert_eq!(
            (decision.run_id, decision.turn_index),
            (closing.run.id, closing.run.turn_index),
            "a deny closes the turn it decides"
        );
        debug_assert!(
            closing
                .events
                .iter()
                .all(|(position, _)| closing.results.iter().any(|(stored, _)| stored == position)),
            "a deny stores a result for every call it writes a tool event of"
        );
        DenialWrite {
            decision: DecisionColumns::of(decision),
            closing: ClosingColumns::of(closing),
        }
    }

    pub fn run_id(&self) -> Uuid {
        self.closing.run_id
    }
}

/// Records a deny decision and closes its turn with the denial results, in one statement, only while the run still
/// waits on the decision's turn (see [`take_turn`](super::take_turn)); `None` when it no longer does, and then nothing is written.
/// Several denies at once are written by `storage::denials::record_many`.
pub async fn record_denial(
    db: impl PgExecutor<'_>,
    write: DenialWrite,
) -> Result<Option<DecisionRow>, StorageError> {
    static SQL: LazyLock<String> = LazyLock::new(|| {
        format!(
            "with {close}, decision as (
                 insert into approval_events (run_id, turn_index, approved, decider_uid, decided_by, reason,
                                              turn_digest, client_name, token_kid, calls)
                 select {RUN_ID}, {TURN_INDEX}, {decision} from resumed
                 returning {DECISION_COLUMNS}
             )
             select decision.* from decision cross join outboxed",
            close = CLOSE_WAITING_TURN.as_str(),
            decision = DECISION.list(DecisionColumns::COUNT),
        )
    });
    let query = write
        .closing
        .bind(sql::query(sqlx::AssertSqlSafe(SQL.as_str())))
        .into_query();
    let row = write.decision.bind(query).fetch_optional(db).await?;
    row.map(|row| DecisionRow::from_row(&row))
        .transpose()
        .map_err(StorageError::from)
}

/// Expires a turn nobody decided: stores the expired results, writes the tool events, records the expiry (never
/// an approval event), resumes the run and writes `run.expired`, in one statement.
pub async fn record_expiry(
    conn: &mut PgConnection,
    closing: &ClosingTurn<'_>,
) -> Result<(), StorageError> {
    static SQL: LazyLock<String> = LazyLock::new(|| {
        format!(
            "with expiry as (
                 insert into turn_expiries (run_id, turn_index, expires_at)
                 select id, turn_index, expires_at from runs where id = {RUN_ID} and turn_index = {TURN_INDEX}
                 returning run_id
             ), {close}
             select expiry.run_id from expiry cross join resumed cross join outboxed",
            close = CLOSE_EXPIRED_TURN.as_str()
        )
    });
    bind_closing(sql::query(sqlx::AssertSqlSafe(SQL.as_str())), closing)
        .into_query()
        .fetch_one(conn)
        .await?;
    Ok(())
}

/// Binds the closing columns (`$1` to `$21`) of a closing statement, sealing what is stored encrypted.
pub(super) fn bind_closing<'q>(query: Query<'q>, closing: &ClosingTurn<'q>) -> Positional<'q> {
    ClosingColumns::of(closing).bind(query)
}

#[cfg(test)]
mod tests {
    use super::super::closing_params::placeholders;
    use super::*;

    #[test]
    fn every_closing_statement_reads_each_closing_column_and_nothing_beyond() {
        let columns: Vec<u8> = (1..=21).collect();
        for statement in [&CLOSE_TURN, &CLOSE_EXPIRED_TURN, &CLOSE_WAITING_TURN] {
            let read: Vec<u8> = placeholders(statement).into_iter().collect();
            assert_eq!(read, columns);
        }
    }

    #[test]
    fn a_held_turn_closes_only_under_the_lease_bound_after_the_closing_columns() {
        let read: Vec<u8> = placeholders(&CLOSE_HELD_TURN).into_iter().collect();
        assert_eq!(read, (1..=22).collect::<Vec<u8>>());
        assert!(CLOSE_HELD_TURN.contains("lease_owner = $22"));
    }

    #[test]
    fn a_deny_reads_its_decision_right_after_the_closing_columns() {
        assert_eq!(
            DECISION.list(DecisionColumns::COUNT),
            "$22, $23, $24, $25, $26, $27, $28, $29"
        );
    }

    #[test]
    fn only_a_deny_takes_its_call_times_without_reading_the_calls() {
        assert!(!CLOSE_WAITING_TURN.contains("join turn_calls"));
        assert!(CLOSE_TURN.contains("join turn_calls c on c.run_id = $1 and c.turn_index = $2"));
    }
}
