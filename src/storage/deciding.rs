//! The statements of one decision, merged so a decision costs few round trips: everything the rules need is read in
//! one statement (without the lock by `run_snapshot`, or under the run's row lock by [`lock_run`]), and a turn is
//! taken or closed (results, tool events, status, the `run.resumed` event) in one more, which writes only while the
//! run still waits on the turn that was read. A deny is the service's busiest path and its cost should be the commit (BENCHMARKS.md); each
//! statement saved here is a network round trip and a pass through the executor of Postgres saved per click.

use std::sync::LazyLock;
use std::time::Duration;

use sqlx::postgres::PgRow;
use sqlx::types::Json;
use sqlx::{FromRow, PgConnection, PgExecutor, Row};
use uuid::Uuid;

use super::decisions::{self, DECISION_COLUMNS, DecisionColumns, DecisionRow, NewDecision};
use super::runs::{self, CALL_COLUMNS, CallRow, RunRow, StoredCall};
use super::sealed::{self, Column, Row as SealedRow};
use super::{Query, StorageError, sql};
use crate::domain::authorize::DeciderFacts;
use crate::domain::events::EventData;
use crate::domain::privacy::ToolEvent;
use crate::domain::results::ToolResult;
use crate::domain::tokens::RunStatus;
use crate::domain::transcript_text::TranscriptText;
use crate::sealing::Sealer;

/// A run as a decision reads it, with what the decision rules need about it: under its lock ([`lock_run`]) or as
/// of one snapshot (`run_snapshot::read`).
#[derive(Debug)]
pub struct RunForDecision {
    pub run: RunRow,
    /// `None` when the decider uid names no backend user of the run's tenant (or none was given).
    pub decider: Option<DeciderFacts>,
    /// The decider's `approvable_tools` (DESIGN.md §4): `None` for no limit, or when there is no decider.
    pub approvable_tools: Option<Vec<String>>,
    /// The decision of the run's current turn, if it has one.
    pub decision: Option<DecisionRow>,
    /// The working transcript, which every decision answers with.
    pub transcript: TranscriptText,
    /// The current turn's `expires_at` has passed, by the database's clock when the row was read (once the lock was
    /// granted, for [`lock_run`]).
    pub past_expiry: bool,
    /// The current turn expired (its expiry is recorded).
    pub expired: bool,
}

/// Locks the run (the same row lock every writer takes first) and reads, in the same statement, the decider's
/// row, the current turn's decision and the transcript. `None`: no such run in the tenant.
/// The decider's row may be as old as the lock wait; users are not serialized with decisions in any case.
pub async fn lock_run(
    conn: &mut PgConnection,
    sealer: &Sealer,
    tenant: &str,
    run_id: Uuid,
    decider_uid: Option<i64>,
) -> Result<Option<RunForDecision>, StorageError> {
    let row = sql::query(
        "select r.*,
                u.uid is not null as decider_found, u.is_admin, u.can_approve_others, u.disabled,
                u.approvable_tools,
                e.turn_index as decision_turn_index, e.approved, e.decider_uid, e.decided_by, e.reason,
                e.turn_digest as decision_turn_digest, e.client_name, e.decided_at, e.token_kid, e.calls,
                coalesce(r.expires_at <= clock_timestamp(), false) as past_expiry,
                x.turn_index is not null as expired
         from (select id, tenant, owner_uid, status, privacy_level, format, require_second_approver,
                      registration_hash, tools, turn_index, turn_digest, turn_request_hash, lease_owner, lease_until,
                      expires_at, created_at, updated_at, messages, messages_from_jsonb, messages_sealed, system,
                      system_sealed
               from runs where id = $1 and tenant = $2 for update) r
         left join backend_users u on u.tenant = r.tenant and u.uid = $3
         left join approval_events e on e.run_id = r.id and e.turn_index = r.turn_index
         left join turn_expiries x on x.run_id = r.id and x.turn_index = r.turn_index",
    )
    .bind(run_id)
    .bind(tenant)
    .bind(decider_uid)
    .fetch_optional(&mut *conn)
    .await?;
    let Some(mut locked) = row.map(|row| run_for_decision(sealer, row)).transpose()? else {
        return Ok(None);
    };
    runs::release_buffers(&mut *conn, locked.transcript.text_len());
    // The joined rows are read with the statement's snapshot, taken before the lock was granted, while the run row
    // is its newest version. So when another transaction decided the turn while this one waited for the lock, the
    // run shows the status it set but the join misses its decision. Every decision changes the run's status in the
    // same transaction, so only a run that is no longer waiting can be missing one: read it again, now under the
    // lock, with a fresh snapshot.
    // An expiry is missed the same way, and re-read the same way.
    if locked.decision.is_none()
        && !locked.expired
        && locked.run.status() != RunStatus::WaitingForApproval
    {
        locked.decision = decisions::find(&mut *conn, run_id, locked.run.turn_index).await?;
        if locked.decision.is_none() {
            locked.expired = decisions::latest_expired_turn(&mut *conn, run_id).await?
                == Some(locked.run.turn_index);
        }
    }
    Ok(Some(locked))
}

/// The decision facts of a row of [`lock_run`]'s statement (or of the snapshot's, which has the same columns). The
/// row is consumed: its transcript is kept in the row's own buffer (`runs::open_transcript`).
pub(super) fn run_for_decision(
    sealer: &Sealer,
    row: PgRow,
) -> Result<RunForDecision, StorageError> {
    let decider = if row.try_get("decider_found")? {
        Some(DeciderFacts {
            is_admin: row.try_get("is_admin")?,
            can_approve_others: row.try_get("can_approve_others")?,
            disabled: row.try_get("disabled")?,
        })
    } else {
        None
    };
    let decision = match row.try_get::<Option<i32>, _>("decision_turn_index")? {
        Some(turn_index) => Some(DecisionRow {
            turn_index,
            approved: row.try_get("approved")?,
            decider_uid: row.try_get("decider_uid")?,
            decided_by: row.try_get("decided_by")?,
            reason: row.try_get("reason")?,
            turn_digest: row.try_get("decision_turn_digest")?,
            client_name: row.try_get("client_name")?,
            decided_at: row.try_get("decided_at")?,
            token_kid: row.try_get("token_kid")?,
            calls: row.try_get("calls")?,
        }),
        None => None,
    };
    let run = RunRow::from_row(&row)?;
    let approvable_tools = row.try_get("approvable_tools")?;
    let past_expiry = row.try_get("past_expiry")?;
    let expired = row.try_get("expired")?;
    // Last: the transcript keeps the row (its buffer) instead of copying the text out of it.
    let transcript = runs::open_transcript(sealer, run.id, row)?;
    Ok(RunForDecision {
        run,
        decider,
        approvable_tools,
        decision,
        transcript,
        past_expiry,
        expired,
    })
}

/// The calls of a run through `turn_index`, in one read: the current turn's calls, and the earlier turns' calls
/// that have a result (their results are part of the model input), each in turn and call order.
pub async fn calls_through(
    conn: &mut PgConnection,
    sealer: &Sealer,
    run_id: Uuid,
    turn_index: i32,
) -> Result<(Vec<CallRow>, Vec<CallRow>), StorageError> {
    let rows = sql::query_as::<StoredCall>(sqlx::AssertSqlSafe(format!(
        "select {CALL_COLUMNS}
         from turn_calls
         where run_id = $1 and turn_index <= $2 and (turn_index = $2 or outcome is not null)
         order by turn_index, position"
    )))
    .bind(run_id)
    .bind(turn_index)
    .fetch_all(conn)
    .await?;
    split_at_turn(sealer, run_id, turn_index, rows)
}

/// Calls in turn and call order, opened and split into `turn_index`'s own and the earlier turns'.
pub(super) fn split_at_turn(
    sealer: &Sealer,
    run_id: Uuid,
    turn_index: i32,
    calls: Vec<StoredCall>,
) -> Result<(Vec<CallRow>, Vec<CallRow>), StorageError> {
    let mut current = Vec::new();
    let mut earlier = Vec::new();
    for stored in calls {
        let call_turn = stored.turn_index;
        let call = stored.open(sealer, run_id)?;
        if call_turn == turn_index {
            current.push(call);
        } else {
            earlier.push(call);
        }
    }
    Ok((current, earlier))
}

/// How a decided turn ends: the results still to store, the tool events to write, and the event to record.
pub struct ClosingTurn<'a> {
    pub run: &'a RunRow,
    /// Seals result contents and tool-event payloads before they are stored.
    pub sealer: &'a Sealer,
    /// `(position, result)` of calls whose result is not stored yet; a call that has one keeps it.
    pub results: &'a [(i32, &'a ToolResult)],
    /// `(position, event)`, already filtered by the privacy level.
    pub events: &'a [(i32, ToolEvent)],
    /// The data of the `run.resumed` event (`domain::events::data`): ids and metadata only.
    pub resumed_event: &'a EventData,
}

/// The call times of each tool event in [`close_turn_ctes`] (`select`), and what they are read from (`join`).
/// `CALL_TIMES_STORED` reads them from the calls as stored (a call may have started before; its result may be stored
/// now, by `stored`, or earlier). `CALL_TIMES_NEVER_STARTED` is for a turn still waiting (a deny): none of its calls
/// was ever sent (a turn's calls are new rows, `runs::insert_calls`, written with the turn that starts waiting), and
/// `stored` gives each its result now, so the times are known without reading the calls again; that read cost
/// Postgres 8 % of the deny's write (`bench/postgres_instructions.sh deny`).
macro_rules! call_times {
    (CALL_TIMES_STORED, select) => {
        "c.started_at, coalesce(s.finished_at, c.finished_at)"
    };
    (CALL_TIMES_STORED, join) => {
        "
        join turn_calls c on c.run_id = $1 and c.turn_index = $2 and c.position = e.position
        left join stored s on s.position = e.position"
    };
    (CALL_TIMES_NEVER_STARTED, select) => {
        "null, now()"
    };
    (CALL_TIMES_NEVER_STARTED, join) => {
        ""
    };
}

/// The common-table expressions that close a turn, over the parameters `$1` to `$21` bound by [`bind_closing`]:
/// move the run to `resumed` ending any lease, store the results, write the tool events (with the times of the calls,
/// [`call_times`]), and write the `run.resumed` event (`run.expired` for [`CLOSE_EXPIRED_TURN`]) in the outbox.
/// `$moves` narrows which run moves on (see [`CLOSE_HELD_TURN`] and [`CLOSE_WAITING_TURN`]); the tool events and
/// the outbox row are written only for a run that did, and the results too unless `$stores` leaves them unbound to
/// it. Nothing here is sent anywhere before commit: a `pg_notify` would take a database-wide lock at every commit
/// (BENCHMARKS.md), so consumers read the outbox after it (src/storage/events.rs).
///
/// The run's row is updated first, so its lock is taken before any row of its calls, in the order every writer
/// takes them: the other expressions wait for `resumed`, but for [`CLOSE_HELD_TURN`]'s `stored`, which runs after it
/// because the statement's own select reads `resumed` first and Postgres runs unreferenced expressions last.
macro_rules! close_turn_ctes {
    ($event_type:literal, $moves:expr, $stores:literal) => {
        close_turn_ctes!($event_type, $moves, $stores, CALL_TIMES_STORED)
    };
    ($event_type:literal, $moves:expr, $stores:literal, $call_times:ident) => {
        concat!(
            "
    resumed as (
        update runs set status = 'resumed', lease_owner = null, lease_until = null, updated_at = now()
        where id = $1",
            $moves,
            "
        returning id, tenant
    ), stored as (
        update turn_calls c set outcome = r.outcome, is_error = r.is_error, content = r.content,
                                content_sealed = r.content_sealed, finished_at = now()
        from unnest($3::int[], $4::text[], $5::bool[], $6::text[], $19::bytea[])
             as r(position, outcome, is_error, content, content_sealed)
        where c.run_id = $1 and c.turn_index = $2 and c.position = r.position and c.outcome is null",
            $stores,
            "
        returning c.position, c.finished_at
    ), events as (
        insert into tool_events (run_id, turn_index, position, call_id, tool, outcome, is_error, decided_by,
                                 privacy_level, arguments_bytes, result_bytes, arguments, result,
                                 arguments_sealed, result_sealed, started_at, finished_at)
        select $1, $2, e.position, e.call_id, e.tool, e.outcome, e.is_error, e.decided_by, e.privacy_level,
               e.arguments_bytes, e.result_bytes, e.arguments, e.result, e.arguments_sealed, e.result_sealed,
               ",
            call_times!($call_times, select),
            "
        from unnest($7::int[], $8::text[], $9::text[], $10::text[], $11::bool[], $12::text[], $13::text[],
                    $14::int[], $15::int[], $16::text[], $17::text[], $20::bytea[], $21::bytea[])
             as e(position, call_id, tool, outcome, is_error, decided_by, privacy_level,
                  arguments_bytes, result_bytes, arguments, result, arguments_sealed, result_sealed)",
            call_times!($call_times, join),
            "
        cross join resumed
    ), outboxed as (
        insert into events (tenant, run_id, type, data)
        select tenant, id, '",
            $event_type,
            "', $18 from resumed
        returning id
    )"
        )
    };
}

const CLOSE_TURN: &str = close_turn_ctes!("run.resumed", "", " and exists (select from resumed)");
const CLOSE_EXPIRED_TURN: &str =
    close_turn_ctes!("run.expired", "", " and exists (select from resumed)");
/// [`CLOSE_TURN`] without the run's lock: the run moves on only while `$22` still holds its lease, and without
/// that nothing but the results is written (no tool event, no `run.resumed`), because the turn belongs to whoever
/// took it over, and a turn taken over must find the results stored like any other.
const CLOSE_HELD_TURN: &str = close_turn_ctes!(
    "run.resumed",
    concat!(
        " and ",
        sql::status_is!("resuming"),
        " and turn_index = $2 and lease_owner = $22"
    ),
    ""
);
/// The condition on the run's row under which a decision made from a read of turn `$2` may still be recorded: the
/// run waits on that turn, and the turn has not expired (judged when the row's lock is granted). The one
/// compare-and-set of [`record_denial`] and [`take_turn`].
macro_rules! still_waiting {
    () => {
        concat!(
            " and ",
            sql::status_is!("waiting_for_approval"),
            " and turn_index = $2
          and (expires_at is null or expires_at > clock_timestamp())"
        )
    };
}

/// [`CLOSE_TURN`] for a turn decided from a read without the lock (`run_snapshot`): the run moves on only while it
/// still waits on the turn that was read and that turn has not expired (judged when the row's lock is granted, as
/// under the lock), and otherwise nothing at all is written. Under the lock, with the run seen waiting, only the
/// turn's expiry can still stop it.
const CLOSE_WAITING_TURN: &str = close_turn_ctes!(
    "run.resumed",
    still_waiting!(),
    " and exists (select from resumed)",
    CALL_TIMES_NEVER_STARTED
);

/// Closes a turn whose results are all stored (the approve path, after its executors ran).
pub async fn close_turn(
    conn: &mut PgConnection,
    closing: &ClosingTurn<'_>,
) -> Result<(), StorageError> {
    static SQL: LazyLock<String> = LazyLock::new(|| {
        format!("with {CLOSE_TURN} select resumed.id from resumed cross join outboxed")
    });
    bind_closing(sql::query(sqlx::AssertSqlSafe(SQL.as_str())), closing)
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
        format!("with {CLOSE_HELD_TURN} select resumed.id from resumed cross join outboxed")
    });
    let closed = bind_closing(sql::query(sqlx::AssertSqlSafe(SQL.as_str())), closing)
        .bind(lease_owner)
        .fetch_optional(db)
        .await?;
    Ok(closed.is_some())
}

/// What an approval writes as it takes its turn (see [`take_turn`]).
pub struct TakingTurn<'a> {
    pub decision: &'a NewDecision<'a>,
    /// Seals denial contents and edited arguments before they are stored.
    pub sealer: &'a Sealer,
    /// `(position, result)` of the calls this decision denies.
    pub denied: &'a [(i32, &'a ToolResult)],
    /// `(position, arguments)` of the approved calls a decider edited.
    pub edits: &'a [(i32, &'a str)],
    /// The instance that runs the calls, and for how long its lease lasts from now.
    pub lease_owner: Uuid,
    pub lease: Duration,
    /// The position of the call this instance sends first, marked started here (the lease is fresh, so no
    /// renewal is needed before it is sent); `None` when no call is sent.
    pub first_sent: Option<i32>,
}

/// Records an approval and takes its turn, in one statement: the run to `resuming` under this instance's lease, the
/// approval event, the denied calls' results and the edited calls' arguments, and the first call to be sent marked
/// started. It writes only while the run still waits on `taking.decision`'s turn and that turn has not expired
/// (under the run's lock, once it was seen waiting, only the expiry can stop it; from a snapshot, also a concurrent
/// change that came first), and nothing otherwise: `None`.
/// Returns the decision and whether that call was marked.
///
/// An approval that denies and edits nothing (every whole-turn approval) takes a statement without the two updates
/// of denied and edited calls: each costs Postgres its setup even when it changes no row, a quarter of the take's
/// instructions (BENCHMARKS.md, "The take of a plain approval").
pub async fn take_turn(
    db: impl PgExecutor<'_>,
    taking: &TakingTurn<'_>,
) -> Result<Option<(DecisionRow, bool)>, StorageError> {
    static APPROVING: LazyLock<String> = LazyLock::new(|| taking_statement(false));
    static DENYING_OR_EDITING: LazyLock<String> = LazyLock::new(|| taking_statement(true));
    let decision = taking.decision;
    let plain = taking.denied.is_empty() && taking.edits.is_empty();
    let statement = if plain {
        &APPROVING
    } else {
        &DENYING_OR_EDITING
    };
    let mut query = decisions::bind_decision(
        sql::query(sqlx::AssertSqlSafe(statement.as_str()))
            .bind(decision.run_id)
            .bind(decision.turn_index),
        decision,
    );
    if !plain {
        query = bind_denied_and_edited(query, taking);
    }
    let row = query
        .bind(taking.lease_owner)
        .bind(taking.lease.as_secs_f64())
        .bind(taking.first_sent)
        .fetch_optional(db)
        .await?;
    let Some(row) = row else {
        return Ok(None);
    };
    let first_started: bool = row.try_get("first_started")?;
    Ok(Some((
        DecisionRow::from_row(&row)?,
        first_started && taking.first_sent.is_some(),
    )))
}

/// The updates of the calls a decision denies ($11–$15: positions and results) and of those it edits ($16–$18:
/// positions and arguments), bound by [`bind_denied_and_edited`]. An edited call that is the first to be sent is
/// marked started here (one update per row).
const DENIED_AND_EDITED: &str = "denied as (
                 update turn_calls c set outcome = r.outcome, is_error = r.is_error, content = r.content,
                                         content_sealed = r.content_sealed, finished_at = now()
                 from unnest($11::int[], $12::text[], $13::bool[], $14::text[], $15::bytea[])
                      as r(position, outcome, is_error, content, content_sealed)
                 where c.run_id = $1 and c.turn_index = $2 and c.position = r.position and c.outcome is null
                   and exists (select from resuming)
                 returning c.position
             ), edited as (
                 update turn_calls c set edited_arguments = e.arguments, edited_arguments_sealed = e.arguments_sealed,
                                         started_at = case when c.position = $21 and c.started_at is null
                                                               and c.outcome is null
                                                          then now() else c.started_at end
                 from unnest($16::int[], $17::text[], $18::bytea[]) as e(position, arguments, arguments_sealed)
                 where c.run_id = $1 and c.turn_index = $2 and c.position = e.position
                   and exists (select from resuming)
                 returning c.position
             ), ";

/// The taking statement, with [`DENIED_AND_EDITED`] or without it. Parameters: $1 run, $2 turn, $3–$10 the decision
/// ([`decisions::bind_decision`]), then `DENIED_AND_EDITED`'s eight if it is there, then the lease's owner, the
/// lease's seconds and the position of the first call sent (`$19`–`$21`, or `$11`–`$13`).
fn taking_statement(with_denied_and_edited: bool) -> String {
    let (denied_and_edited, owner, seconds, first, not_edited) = if with_denied_and_edited {
        (
            DENIED_AND_EDITED,
            "$19",
            "$20",
            "$21",
            " and c.position <> all($16::int[])",
        )
    } else {
        ("", "$11", "$12", "$13", "")
    };
    format!(
        "with resuming as (
             update runs set status = 'resuming', lease_owner = {owner},
                 lease_until = now() + make_interval(secs => {seconds}), updated_at = now()
             where id = $1{still_waiting}
             returning id
         ), decision as (
             insert into approval_events (run_id, turn_index, approved, decider_uid, decided_by, reason,
                                          turn_digest, client_name, token_kid, calls)
             select $1, $2, $3, $4, $5, $6, $7, $8, $9, $10 from resuming
             returning {DECISION_COLUMNS}
         ), {denied_and_edited}started as (
             update turn_calls c set started_at = now()
             where c.run_id = $1 and c.turn_index = $2 and c.position = {first}
               and c.started_at is null and c.outcome is null{not_edited}
               and exists (select from resuming)
             returning c.position
         )
         select decision.*,
                exists (select 1 from turn_calls c
                        where c.run_id = $1 and c.turn_index = $2 and c.position = {first}
                          and c.started_at is null and c.outcome is null) as first_started
         from decision",
        still_waiting = still_waiting!(),
    )
}

/// Binds [`DENIED_AND_EDITED`]'s parameters: the denied calls' positions, outcomes, errors and contents (clear or
/// sealed), then the edited calls' positions and arguments (clear or sealed).
fn bind_denied_and_edited<'q>(query: Query<'q>, taking: &TakingTurn<'q>) -> Query<'q> {
    let (run_id, turn_index) = (taking.decision.run_id, taking.decision.turn_index);
    let (contents, contents_sealed): (Vec<Option<String>>, Vec<Option<Vec<u8>>>) = taking
        .denied
        .iter()
        .map(|(position, result)| {
            let row = SealedRow::call(run_id, turn_index, *position);
            let stored = sealed::seal(taking.sealer, Column::CallContent, row, &result.content);
            (stored.clear, stored.sealed)
        })
        .unzip();
    let (edited, edited_sealed): (Vec<Option<String>>, Vec<Option<Vec<u8>>>) = taking
        .edits
        .iter()
        .map(|(position, arguments)| {
            let row = SealedRow::call(run_id, turn_index, *position);
            let stored = sealed::seal(taking.sealer, Column::CallEditedArguments, row, arguments);
            (stored.clear, stored.sealed)
        })
        .unzip();
    let denied = taking.denied;
    query
        .bind(denied.iter().map(|(p, _)| *p).collect::<Vec<i32>>())
        .bind(
            denied
                .iter()
                .map(|(_, r)| r.outcome.as_str())
                .collect::<Vec<&str>>(),
        )
        .bind(
            denied
                .iter()
                .map(|(_, r)| r.is_error)
                .collect::<Vec<bool>>(),
        )
        .bind(contents)
        .bind(contents_sealed)
        .bind(taking.edits.iter().map(|(p, _)| *p).collect::<Vec<i32>>())
        .bind(edited)
        .bind(edited_sealed)
}

/// A deny ready to be written: its decision and how it closes its turn, column by column as the statements bind them
/// (sealed), owned so that it can wait for the writer that batches denies (`resume::denial_writer`).
#[derive(Debug, Clone)]
pub struct DenialWrite {
    pub(super) decision: DecisionColumns,
    pub(super) closing: ClosingColumns,
}

impl DenialWrite {
    /// `closing.results` holds a result for every call that has a tool event: the events' times are those the
    /// statement gives the results (`CALL_TIMES_NEVER_STARTED`).
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
/// waits on the decision's turn (see [`take_turn`]); `None` when it no longer does, and then nothing is written.
/// Several denies at once are written by `storage::denials::record_many`.
pub async fn record_denial(
    db: impl PgExecutor<'_>,
    write: DenialWrite,
) -> Result<Option<DecisionRow>, StorageError> {
    static SQL: LazyLock<String> = LazyLock::new(|| {
        format!(
            "with {CLOSE_WAITING_TURN}, decision as (
                 insert into approval_events (run_id, turn_index, approved, decider_uid, decided_by, reason,
                                              turn_digest, client_name, token_kid, calls)
                 select $1, $2, $22, $23, $24, $25, $26, $27, $28, $29 from resumed
                 returning {DECISION_COLUMNS}
             )
             select decision.* from decision cross join outboxed"
        )
    });
    let query = write
        .closing
        .bind(sql::query(sqlx::AssertSqlSafe(SQL.as_str())));
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
                 select id, turn_index, expires_at from runs where id = $1 and turn_index = $2
                 returning run_id
             ), {CLOSE_EXPIRED_TURN}
             select expiry.run_id from expiry cross join resumed cross join outboxed"
        )
    });
    bind_closing(sql::query(sqlx::AssertSqlSafe(SQL.as_str())), closing)
        .fetch_one(conn)
        .await?;
    Ok(())
}

/// Binds `$1` to `$21` of [`CLOSE_TURN`], sealing what is stored encrypted.
fn bind_closing<'q>(query: Query<'q>, closing: &ClosingTurn<'q>) -> Query<'q> {
    ClosingColumns::of(closing).bind(query)
}

/// What a statement that closes a turn stores, column by column, sealed where it is stored encrypted: `$1` to `$21` of
/// [`CLOSE_TURN`]. Owned, so that a denial can wait for the writer that batches it (`resume::denial_writer`).
#[derive(Debug, Clone)]
pub struct ClosingColumns {
    pub(super) run_id: Uuid,
    pub(super) turn_index: i32,
    pub(super) result_positions: Vec<i32>,
    pub(super) result_outcomes: Vec<&'static str>,
    pub(super) result_errors: Vec<bool>,
    pub(super) result_contents: Vec<Option<String>>,
    pub(super) result_contents_sealed: Vec<Option<Vec<u8>>>,
    pub(super) event_positions: Vec<i32>,
    pub(super) event_call_ids: Vec<String>,
    pub(super) event_tools: Vec<String>,
    pub(super) event_outcomes: Vec<&'static str>,
    pub(super) event_errors: Vec<bool>,
    pub(super) event_decided_by: Vec<&'static str>,
    pub(super) event_privacy_levels: Vec<&'static str>,
    pub(super) event_arguments_bytes: Vec<i32>,
    pub(super) event_result_bytes: Vec<i32>,
    pub(super) event_arguments: Vec<Option<String>>,
    pub(super) event_results: Vec<Option<String>>,
    pub(super) event_arguments_sealed: Vec<Option<Vec<u8>>>,
    pub(super) event_results_sealed: Vec<Option<Vec<u8>>>,
    pub(super) resumed_event: Json<EventData>,
}

impl ClosingColumns {
    /// The columns of `closing`, sealed with its sealer.
    pub fn of(closing: &ClosingTurn<'_>) -> Self {
        let (run_id, turn_index) = (closing.run.id, closing.run.turn_index);
        let results = closing.results;
        let events = closing.events;
        let (result_contents, result_contents_sealed) = results
            .iter()
            .map(|(position, result)| {
                let row = SealedRow::call(run_id, turn_index, *position);
                let stored =
                    sealed::seal(closing.sealer, Column::CallContent, row, &result.content);
                (stored.clear, stored.sealed)
            })
            .unzip();
        let mut columns = ClosingColumns {
            run_id,
            turn_index,
            result_positions: results.iter().map(|(position, _)| *position).collect(),
            result_outcomes: results.iter().map(|(_, r)| r.outcome.as_str()).collect(),
            result_errors: results.iter().map(|(_, r)| r.is_error).collect(),
            result_contents,
            result_contents_sealed,
            event_positions: Vec::with_capacity(events.len()),
            event_call_ids: Vec::with_capacity(events.len()),
            event_tools: Vec::with_capacity(events.len()),
            event_outcomes: Vec::with_capacity(events.len()),
            event_errors: Vec::with_capacity(events.len()),
            event_decided_by: Vec::with_capacity(events.len()),
            event_privacy_levels: Vec::with_capacity(events.len()),
            event_arguments_bytes: Vec::with_capacity(events.len()),
            event_result_bytes: Vec::with_capacity(events.len()),
            event_arguments: Vec::with_capacity(events.len()),
            event_results: Vec::with_capacity(events.len()),
            event_arguments_sealed: Vec::with_capacity(events.len()),
            event_results_sealed: Vec::with_capacity(events.len()),
            resumed_event: Json(closing.resumed_event.clone()),
        };
        for (position, event) in events {
            let row = SealedRow::call(run_id, turn_index, *position);
            let arguments = sealed::seal_optional(
                closing.sealer,
                Column::EventArguments,
                row,
                event.arguments.as_deref(),
            );
            let result = sealed::seal_optional(
                closing.sealer,
                Column::EventResult,
                row,
                event.result.as_deref(),
            );
            columns.event_positions.push(*position);
            columns.event_call_ids.push(event.call_id.clone());
            columns.event_tools.push(event.tool.clone());
            columns.event_outcomes.push(event.outcome.as_str());
            columns.event_errors.push(event.is_error);
            columns.event_decided_by.push(event.decided_by.as_str());
            columns
                .event_privacy_levels
                .push(event.privacy_level.as_str());
            columns.event_arguments_bytes.push(event.arguments_bytes);
            columns.event_result_bytes.push(event.result_bytes);
            columns.event_arguments.push(arguments.clear);
            columns.event_arguments_sealed.push(arguments.sealed);
            columns.event_results.push(result.clear);
            columns.event_results_sealed.push(result.sealed);
        }
        columns
    }

    /// Binds them as `$1` to `$21` of [`CLOSE_TURN`].
    fn bind(self, query: Query<'_>) -> Query<'_> {
        query
            .bind(self.run_id)
            .bind(self.turn_index)
            .bind(self.result_positions)
            .bind(self.result_outcomes)
            .bind(self.result_errors)
            .bind(self.result_contents)
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
            .bind(self.resumed_event)
            .bind(self.result_contents_sealed)
            .bind(self.event_arguments_sealed)
            .bind(self.event_results_sealed)
    }
}
