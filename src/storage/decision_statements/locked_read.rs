//! The locked read of a decision: the run under its row lock with everything the decision rules need about it (the
//! decider, the turn's decision, the transcript, the expiry) in one statement, and the calls a decision answers with
//! in one more. `run_snapshot` reads the same facts without the lock and opens them with the helpers here.

use sqlx::postgres::PgRow;
use sqlx::{FromRow, PgConnection, Row};
use uuid::Uuid;

use super::super::decision_record::{self, DecisionRow};
use super::super::runs::{self, CALL_COLUMNS, CallRow, RunRow, StoredCall};
use super::super::{StorageError, sql};
use crate::domain::authorize::DeciderFacts;
use crate::domain::transcript_text::TranscriptText;
use crate::domain::vocabulary::RunStatus;
use crate::sealing::Sealer;

/// A run as a decision reads it, with what the decision rules need about it: under its lock ([`lock_run`]) or as
/// of one snapshot (`run_snapshot::read`).
#[derive(Debug)]
pub struct RunForDecision {
    pub run: RunRow,
    /// `None` when the decider uid names no backend user of the run's tenant (or none was given).
    pub decider: Option<DeciderFacts>,
    /// The decider's `approvable_tools` (docs/design.md §4): `None` for no limit, or when there is no decider.
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
                      system_sealed, source
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
        locked.decision = decision_record::find(&mut *conn, run_id, locked.run.turn_index).await?;
        if locked.decision.is_none() {
            locked.expired = decision_record::latest_expired_turn(&mut *conn, run_id).await?
                == Some(locked.run.turn_index);
        }
    }
    Ok(Some(locked))
}

/// The decision facts of a row of [`lock_run`]'s statement (or of the snapshot's, which has the same columns). The
/// row is consumed: its transcript is kept in the row's own buffer (`runs::open_transcript`).
pub(in crate::storage) fn run_for_decision(
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
pub(in crate::storage) fn split_at_turn(
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
